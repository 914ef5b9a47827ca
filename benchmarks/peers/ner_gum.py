"""NER on GUM: varorder's CRFs vs CRFsuite (python-crfsuite) on the same feature dicts (issue #42).

Data: GUM train → dev (the test split is held back), flat named entities from the CorefUD annotation
(:func:`varorder.io.coref.read_ner`: mentions with a PROPN head, GUM's entity types, outermost spans) in
BIO. Features: sklearn-crfsuite's tutorial word features (:func:`varorder.models.features.ner_features`:
bias, lower-cased word, 2/3-letter suffixes, is-upper/-title/-digit, the same of the previous and next
word, BOS/EOS) — one list of dicts handed to both systems. Settings: the tutorial's (L-BFGS/OWL-QN,
c1 = c2 = 0.1, 100 iterations, ``all_possible_transitions=True``, CRFsuite's sparse state features, which
varorder reproduces with ``all_possible_states=False``).

Measured: entity P/R/F1 micro in seqeval's default (conlleval) mode and strict BIO mode, per-type F1,
training CPU seconds (process CPU time around fit/train, one Numba thread, feature dicts → model),
tagging tokens/s (feature dicts → tags, wall). Rounds interleave the two first-order systems; the CPU
ratio is the median over rounds. Second order: :class:`varorder.models.crf2.SecondOrderCRF` with BIO
pair states; its F1 gain over the first-order CRF gets a paired bootstrap 95 % interval over dev
sentences (L-BFGS from θ = 0 is deterministic, so there is no seed spread to report). The online
trainers (ap, pa, arow) run against CRFsuite's with the same epochs.

    NUMBA_NUM_THREADS=1 python benchmarks/peers/ner_gum.py --rounds 2 --json benchmarks/results/tagging-ner-gum.json

One model against varorder's first-order CRF (``--model``; the first-order run is cached, being deterministic):

    NUMBA_NUM_THREADS=1 python benchmarks/peers/ner_gum.py --model semi --segment-length 8 \
        --first-order-cache first.json --json benchmarks/results/tagging-ner-gum-semi-markov.json
    NUMBA_NUM_THREADS=1 python benchmarks/peers/ner_gum.py --model crf2-seen \
        --json benchmarks/results/tagging-ner-gum-second-order-seen.json
    NUMBA_NUM_THREADS=1 python benchmarks/peers/ner_gum.py --model crf2-l2 --c2-second-order 1.0 \
        --json benchmarks/results/tagging-ner-gum-second-order-l2.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
GUM = ROOT.parent / "shared" / "data" / "gum"
if not GUM.exists():
    GUM = Path("/work/shared/data/gum")


WORDS: dict = {}  # the words of each split (the semi-Markov CRF extracts its own features)


def load(split):
    from varorder.io.coref import read_ner
    from varorder.models.features import ner_features

    sentences, tags = read_ner(GUM / f"en_gum-ud-{split}.conllu.gz", "BIO")
    WORDS[split] = [s.words for s in sentences]
    return [ner_features(s.words) for s in sentences], tags


def cpu() -> float:
    return time.process_time()


def scores(gold, predicted):
    from varorder.eval.ner import entity_report

    default = entity_report(gold, predicted)
    strict = entity_report(gold, predicted, mode="strict", scheme="BIO")
    return {"f1": default.micro.f1, "precision": default.micro.precision, "recall": default.micro.recall,
            "strict_f1": strict.micro.f1, "macro_f1": default.macro.f1,
            "per_type": {k: round(v.f1, 4) for k, v in default.per_type.items()}}


def run_crfsuite(X, y, X_dev, y_dev, algorithm="lbfgs", iterations=100):
    import pycrfsuite

    began = cpu()
    trainer = pycrfsuite.Trainer(verbose=False)
    for xs, ys in zip(X, y):
        trainer.append(xs, ys)
    params = {"max_iterations": iterations, "feature.possible_transitions": True}
    if algorithm == "lbfgs":
        params.update({"c1": 0.1, "c2": 0.1})
    trainer.select(algorithm)
    trainer.set_params(params)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "m.crfsuite")
        trainer.train(path)
        train_cpu = cpu() - began
        tagger = pycrfsuite.Tagger()
        tagger.open(path)
        wall = time.perf_counter()
        predicted = [tagger.tag(xs) for xs in X_dev]
        wall = time.perf_counter() - wall
    return {"train_cpu_s": train_cpu, "tokens_per_s": sum(map(len, y_dev)) / wall, **scores(y_dev, predicted)}, \
        predicted


def run_varorder(X, y, X_dev, y_dev, algorithm="lbfgs", iterations=100, constraints=None, model=None, options=None):
    from varorder.models.crf import CRF
    from varorder.models.crf2 import SecondOrderCRF

    began = cpu()
    options = options or {}
    if model == "semi":
        from varorder.models.semicrf import SemiMarkovCRF

        crf = SemiMarkovCRF(c1=0.1, c2=options.get("c2", 0.1), max_iterations=iterations,
                            max_segment_length=options.get("segment_length", 8),
                            token_positions=options.get("positions", "BILOU"),
                            segment_features=options.get("segment_features", "length,shape,case,frame,text,edges,"
                                                                                 "context,dictionary"),
                            all_possible_states=options.get("all_possible_states", False))
        X, X_dev = WORDS["train"], WORDS["dev"]
    elif model in ("crf2", "crf2-seen", "crf2-l2"):
        crf = SecondOrderCRF(constraints="BIO", c1=0.1, c2=0.1, max_iterations=iterations, all_possible_states=False,
                             n_threads=1, all_possible_transitions=model != "crf2-seen",
                             c2_second_order=options.get("c2_second_order") if model == "crf2-l2" else None)
    elif algorithm == "lbfgs":
        crf = CRF(c1=0.1, c2=0.1, max_iterations=iterations, all_possible_states=False, n_threads=1,
                  boundary_weights=model == "boundary")
    else:
        crf = CRF(algorithm=algorithm, c2=0.1, max_iterations=iterations, all_possible_states=False, n_threads=1,
                  random_state=0)
    crf.fit(X, y)
    train_cpu = cpu() - began
    crf.predict(X_dev[:5])  # the decoding kernels' first call compiled or loaded, as CRFsuite's are built
    wall = time.perf_counter()
    predicted = crf.predict(X_dev) if constraints is None else crf.predict(X_dev, constraints=constraints)
    wall = time.perf_counter() - wall
    out = {"train_cpu_s": train_cpu, "tokens_per_s": sum(map(len, y_dev)) / wall, "iterations": crf.n_iter_,
           "stop_reason": getattr(crf, "stop_reason_", None), "evaluations": getattr(crf, "n_evaluations_", None),
           "objective": crf.history_[-1]["objective"] if getattr(crf, "history_", None) else None,
           **({"sentences_left_out": crf.n_sentences_left_out_} if model == "semi" else {}),
           **scores(y_dev, predicted)}
    if constraints is None and model is None:
        wall = time.perf_counter()
        constrained = crf.predict(X_dev, constraints="BIO")
        wall = time.perf_counter() - wall
        out["bio_constrained"] = {"tokens_per_s": sum(map(len, y_dev)) / wall, **scores(y_dev, constrained)}
    return out, predicted


def paired_bootstrap(gold, a, b, n=1000, seed=0):
    """95 % interval of F1(b) − F1(a) over resampled dev sentences (entity counts per sentence)."""
    from varorder.io.schemes import spans

    def counts(predicted):
        rows = []
        for g, p in zip(gold, predicted):
            gs, ps = set(spans(g)), set(spans(p))
            rows.append((len(gs & ps), len(ps), len(gs)))
        return np.array(rows, dtype=np.float64)

    ca, cb = counts(a), counts(b)
    rng = np.random.default_rng(seed)
    diffs = []
    for _ in range(n):
        idx = rng.integers(0, len(gold), len(gold))
        fa = 2 * ca[idx, 0].sum() / (ca[idx, 1].sum() + ca[idx, 2].sum())
        fb = 2 * cb[idx, 0].sum() / (cb[idx, 1].sum() + cb[idx, 2].sum())
        diffs.append(fb - fa)
    return float(np.percentile(diffs, 2.5)), float(np.percentile(diffs, 97.5))


def row(system, metric, ours, reference, reference_name, better, task, note=None):
    r = {"system": system, "task": task, "metric": metric, "varorder": round(ours, 4),
         "reference": None if reference is None else round(reference, 4), "reference_name": reference_name,
         "ratio": None if reference in (None, 0) else round(ours / reference, 4), "better": better}
    if note:
        r["note"] = note
    return r


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--iterations", type=int, default=100)
    parser.add_argument("--second-order-iterations", type=int, default=100)
    parser.add_argument("--online-epochs", type=int, default=10)
    parser.add_argument("--skip", default="", help="comma-separated parts to skip: second,online,boundary")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--model", choices=["semi", "crf2", "crf2-seen", "crf2-l2"],
                        help="one model against varorder's first-order CRF (no CRFsuite run)")
    parser.add_argument("--first-order-cache", type=Path,
                        help="JSON of the first-order run (metrics and dev predictions): read if it exists, else "
                             "written; L-BFGS from 0 is deterministic, so a cached run is the run")
    parser.add_argument("--segment-length", type=int, default=None,
                        help="semi: max_segment_length (default: the smallest covering >= 99%% of train entities)")
    parser.add_argument("--positions", default="BILOU", help="semi: token_positions")
    parser.add_argument("--segment-features", default="length,shape,case,frame,text,edges,context,dictionary")
    parser.add_argument("--all-possible-states", action="store_true", help="semi: dense token/segment weights")
    parser.add_argument("--c2", type=float, default=0.1, help="semi: c2")
    parser.add_argument("--c2-second-order", type=float, default=1.0, help="crf2-l2: the l2 coefficient on U")
    parser.add_argument("--combine", type=Path, nargs="+",
                        help="results files of --model semi runs (first the reference configuration): one document "
                             "of their F1 and CPU rows, each run's command and load kept (no training)")
    args = parser.parse_args(argv)
    if args.combine:
        return combine(args)
    skip = set(filter(None, args.skip.split(",")))
    loads = [os.getloadavg()[0]]
    X, y = load("train")
    X_dev, y_dev = load("dev")
    task = (f"GUM train -> dev, flat named entities (PROPN-head mentions, BIO, {len(y)} / {len(y_dev)} sentences), "
            f"tutorial word features, c1 = c2 = 0.1, {args.iterations} iterations at most (delta 1e-5, period 10)")
    if args.model:
        return versus_first_order(args, argv, X, y, X_dev, y_dev, task, loads)
    if "first" in skip:  # the online trainers alone (the first-order rows live in their own file)
        rows, details = [], {}
        online_rows(args, X, y, X_dev, y_dev, task, rows, details, loads)
        return write(args, argv, loads, rows, details)
    rounds = []
    for r in range(args.rounds):
        order = ["crfsuite", "varorder"] if r % 2 == 0 else ["varorder", "crfsuite"]
        if "peer" in skip:  # the second-order run: its reference is varorder's first-order CRF
            order = ["varorder"]
        result = {}
        for system in order:
            loads.append(os.getloadavg()[0])
            if system == "crfsuite":
                result[system], predicted_ref = run_crfsuite(X, y, X_dev, y_dev, iterations=args.iterations)
            else:
                result[system], predicted_first = run_varorder(X, y, X_dev, y_dev, iterations=args.iterations)
            print(system, json.dumps(result[system]), file=sys.stderr, flush=True)
        rounds.append(result)
    details = {"rounds": rounds}
    last = rounds[-1]
    if "peer" in skip:
        return second_order_only(args, X, y, X_dev, y_dev, task, last["varorder"], predicted_first, loads, details,
                                 argv)
    ratio = statistics.median(r["varorder"]["train_cpu_s"] / r["crfsuite"]["train_cpu_s"] for r in rounds)
    v, c = last["varorder"], last["crfsuite"]
    rows = [
        row("CRF (first order)", "entity F1, conlleval / seqeval default", v["f1"], c["f1"], "CRFsuite", "higher", task),
        row("CRF (first order)", "entity F1, seqeval strict BIO", v["strict_f1"], c["strict_f1"], "CRFsuite", "higher",
            task),
        row("CRF (first order)", "train CPU s (1 thread)", statistics.median(r["varorder"]["train_cpu_s"] for r in rounds),
            statistics.median(r["crfsuite"]["train_cpu_s"] for r in rounds), "CRFsuite", "lower", task,
            f"median over {len(rounds)} interleaved rounds; median per-round ratio {ratio:.3f}"),
        row("CRF (first order)", "tagging tokens/s", v["tokens_per_s"], c["tokens_per_s"], "CRFsuite", "higher", task),
        row("CRF + constraints='BIO' at predict", "entity F1, conlleval / seqeval default", v["bio_constrained"]["f1"],
            c["f1"], "CRFsuite", "higher", task),
        row("CRF + constraints='BIO' at predict", "entity F1, seqeval strict BIO", v["bio_constrained"]["strict_f1"],
            c["strict_f1"], "CRFsuite", "higher", task),
    ]
    for name in sorted(v["per_type"]):
        rows.append(row("CRF (first order)", f"entity F1 {name}", v["per_type"][name], c["per_type"].get(name, 0.0),
                        "CRFsuite", "higher", task))
    if "boundary" not in skip:
        loads.append(os.getloadavg()[0])
        extra, _ = run_varorder(X, y, X_dev, y_dev, iterations=args.iterations, model="boundary")
        print("boundary", json.dumps(extra), file=sys.stderr, flush=True)
        details["boundary_weights"] = extra
        label = "CRF + start/end label weights (boundary_weights=True; not CRFsuite's model)"
        rows += [row(label, "entity F1, conlleval / seqeval default", extra["f1"], c["f1"], "CRFsuite", "higher", task),
                 row(label, "entity F1, seqeval strict BIO", extra["strict_f1"], c["strict_f1"], "CRFsuite", "higher",
                     task),
                 row(label, "train CPU s (1 thread)", extra["train_cpu_s"], c["train_cpu_s"], "CRFsuite", "lower",
                     task, "one run, after the interleaved rounds")]
    if "second" not in skip:
        loads.append(os.getloadavg()[0])
        second, predicted_second = run_varorder(X, y, X_dev, y_dev, model="crf2",
                                                iterations=args.second_order_iterations)
        print("crf2", json.dumps(second), file=sys.stderr, flush=True)
        low, high = paired_bootstrap(y_dev, predicted_first, predicted_second)
        details["second_order"] = dict(second, bootstrap_f1_gain_95=[low, high])
        note = f"F1 gain over first order {second['f1'] - v['f1']:+.4f}, paired bootstrap 95 % [{low:+.4f}, {high:+.4f}]"
        rows += [row("second-order CRF (BIO pair states)", "entity F1, conlleval / seqeval default", second["f1"],
                     c["f1"], "CRFsuite (first order)", "higher", task, note),
                 row("second-order CRF (BIO pair states)", "entity F1, seqeval strict BIO", second["strict_f1"],
                     c["strict_f1"], "CRFsuite (first order)", "higher", task),
                 row("second-order CRF (BIO pair states)", "train CPU s (1 thread)", second["train_cpu_s"],
                     c["train_cpu_s"], "CRFsuite (first order)", "lower", task,
                     f"{second['iterations']} L-BFGS iterations"),
                 row("second-order CRF (BIO pair states)", "tagging tokens/s", second["tokens_per_s"],
                     c["tokens_per_s"], "CRFsuite (first order)", "higher", task)]
    if "online" not in skip:
        online_rows(args, X, y, X_dev, y_dev, task, rows, details, loads)
    write(args, argv, loads, rows, details)


def online_rows(args, X, y, X_dev, y_dev, task, rows, details, loads):
    """ap, pa and arow against CRFsuite's, the same epochs."""
    details["online"] = {}
    for algorithm in ("ap", "pa", "arow"):
        loads.append(os.getloadavg()[0])
        ours, _ = run_varorder(X, y, X_dev, y_dev, algorithm=algorithm, iterations=args.online_epochs)
        theirs, _ = run_crfsuite(X, y, X_dev, y_dev, algorithm=algorithm, iterations=args.online_epochs)
        print(algorithm, json.dumps(ours), json.dumps(theirs), file=sys.stderr, flush=True)
        details["online"][algorithm] = {"varorder": ours, "crfsuite": theirs}
        online_task = task.split(", c1 = c2")[0] + f", {args.online_epochs} epochs, CRFsuite's defaults"
        rows += [row(f"CRF, algorithm='{algorithm}'", "entity F1, conlleval / seqeval default", ours["f1"],
                     theirs["f1"], f"CRFsuite {algorithm}", "higher", online_task),
                 row(f"CRF, algorithm='{algorithm}'", "train CPU s (1 thread)", ours["train_cpu_s"],
                     theirs["train_cpu_s"], f"CRFsuite {algorithm}", "lower", online_task)]


def second_order_only(args, X, y, X_dev, y_dev, task, v, predicted_first, loads, details, argv):
    """Rows of the second-order CRF against varorder's first-order CRF (same data, features, c1, c2)."""
    loads.append(os.getloadavg()[0])
    model = "semi" if "second" in args.skip else "crf2"
    second, predicted_second = run_varorder(X, y, X_dev, y_dev, model=model, iterations=args.second_order_iterations)
    print(model, json.dumps(second), file=sys.stderr, flush=True)
    low, high = paired_bootstrap(y_dev, predicted_first, predicted_second)
    details["semi_markov" if model == "semi" else "second_order"] = dict(second, bootstrap_f1_gain_95=[low, high])
    note = (f"F1 gain {second['f1'] - v['f1']:+.4f}, paired bootstrap 95 % [{low:+.4f}, {high:+.4f}]; {model} "
            f"{second['iterations']} L-BFGS iterations (stop: {second['stop_reason']}), first order "
            f"{v['iterations']} (stop: {v['stop_reason']})")
    name = "varorder first-order CRF"
    system = "semi-Markov CRF (segments <= 8 words)" if model == "semi" else "second-order CRF (BIO pair states)"
    rows = [row(system, "entity F1, conlleval / seqeval default", second["f1"], v["f1"],
                name, "higher", task, note),
            row(system, "entity F1, seqeval strict BIO", second["strict_f1"], v["strict_f1"], name, "higher", task),
            row(system, "train CPU s (1 thread)", second["train_cpu_s"], v["train_cpu_s"], name, "lower", task),
            row(system, "tagging tokens/s", second["tokens_per_s"], v["tokens_per_s"], name, "higher", task)]
    write(args, argv, loads, rows, details)


def entity_lengths(tags):
    from varorder.io.schemes import spans

    return np.array([e - s for t in tags for _, s, e in spans(t)], dtype=np.int64)


def versus_first_order(args, argv, X, y, X_dev, y_dev, task, loads):
    """One model (semi-Markov or a second-order variant) against varorder's first-order CRF on the same token
    features: F1 (both modes, per type), training CPU, tagging tokens/s, paired bootstrap of the F1 gain."""
    cache = args.first_order_cache
    if cache is not None and cache.exists():
        saved = json.loads(cache.read_text())
        first, predicted_first = saved["result"], saved["predicted"]
        first["cached_from"] = str(cache)
    else:
        loads.append(os.getloadavg()[0])
        first, predicted_first = run_varorder(X, y, X_dev, y_dev, iterations=args.iterations)
        if cache is not None:
            cache.write_text(json.dumps({"result": first, "predicted": predicted_first}))
    print("first", json.dumps(first), file=sys.stderr, flush=True)
    options = {"c2_second_order": args.c2_second_order}
    details = {"first_order": first}
    if args.model == "semi":
        train_lengths, dev_lengths = entity_lengths(y), entity_lengths(y_dev)
        D = args.segment_length
        if D is None:  # the smallest length covering 99 % of the training entities
            D = int(np.quantile(train_lengths, 0.99, method="higher"))
        options.update(segment_length=D, positions=args.positions, segment_features=args.segment_features,
                       all_possible_states=args.all_possible_states, c2=args.c2)
        details["segments"] = {
            "max_segment_length": D, "train_entities": int(train_lengths.size),
            "train_share_representable": float((train_lengths <= D).mean()),
            "dev_entities": int(dev_lengths.size), "dev_share_representable": float((dev_lengths <= D).mean()),
            "train_length_quantiles": {q: int(np.quantile(train_lengths, q / 100, method="higher"))
                                       for q in (50, 90, 95, 99, 100)}}
    loads.append(os.getloadavg()[0])
    ours, predicted = run_varorder(X, y, X_dev, y_dev, model=args.model, iterations=args.second_order_iterations,
                                   options=options)
    print(args.model, json.dumps(ours), file=sys.stderr, flush=True)
    low, high = paired_bootstrap(y_dev, predicted_first, predicted)
    key = "semi_markov" if args.model == "semi" else "second_order"
    details[key] = dict(ours, options=options, bootstrap_f1_gain_95=[low, high])
    if args.model == "semi":
        seg = details["segments"]
        system = (f"semi-Markov CRF (segments <= {seg['max_segment_length']} words, token positions "
                  f"{args.positions}, segment features {', '.join(args.segment_features.split(','))}"
                  f"{', all possible states' if args.all_possible_states else ''}, c2 = {args.c2})")
        extra = f"; {100 * seg['dev_share_representable']:.1f} % of dev entities representable"
    else:
        system = {"crf2": "second-order CRF (BIO pair states)",
                  "crf2-seen": "second-order CRF (BIO pair states, trigrams seen in train only)",
                  "crf2-l2": f"second-order CRF (BIO pair states, c2 on U = {args.c2_second_order})"}[args.model]
        extra = ""
    note = (f"F1 gain {ours['f1'] - first['f1']:+.4f}, paired bootstrap 95 % [{low:+.4f}, {high:+.4f}] (1000 "
            f"resamples of dev sentences, seed 0); {ours['iterations']} L-BFGS iterations (stop: "
            f"{ours['stop_reason']}), first order {first['iterations']} (stop: {first['stop_reason']}){extra}")
    name = "varorder first-order CRF"
    rows = [row(system, "entity F1, conlleval / seqeval default", ours["f1"], first["f1"], name, "higher", task, note),
            row(system, "entity F1, seqeval strict BIO", ours["strict_f1"], first["strict_f1"], name, "higher", task),
            row(system, "train CPU s (1 thread)", ours["train_cpu_s"], first["train_cpu_s"], name, "lower", task),
            row(system, "tagging tokens/s", ours["tokens_per_s"], first["tokens_per_s"], name, "higher", task)]
    for t in sorted(first["per_type"]):
        rows.append(row(system, f"entity F1 {t}", ours["per_type"].get(t, 0.0), first["per_type"][t], name, "higher",
                        task))
    write(args, argv, loads, rows, details)


def combine(args):
    """One document of several ``--model semi`` runs (ablations): per run its F1 row (the note holds the gain over
    the first order and its bootstrap interval) and its training CPU row, in the order given."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import harness

    rows, runs, loads = [], [], []
    for path in args.combine:
        doc = json.loads(path.read_text())
        semi = doc["details"]["semi_markov"]
        first = doc["details"]["first_order"]
        task = doc["rows"][0]["task"].split(", c1 = c2")[0] + (
            f", semi-Markov CRF {semi['iterations']} L-BFGS iterations against the first-order CRF's "
            f"{first['iterations']}")
        for r in doc["rows"]:
            if r["metric"] in ("entity F1, conlleval / seqeval default", "train CPU s (1 thread)"):
                rows.append(dict(r, task=task))
        runs.append({"file": path.name, "command": doc["command"], "machine": doc["machine"],
                     "options": semi["options"], "f1": semi["f1"], "iterations": semi["iterations"],
                     "train_cpu_s": semi["train_cpu_s"], "bootstrap_f1_gain_95": semi["bootstrap_f1_gain_95"]})
        loads += [float(x) for x in doc["machine"]["load"].split("-")]
    document = harness.results_document("Sequence tagging", "NER on GUM: semi-Markov CRF dev ablations", rows,
                                        issue=42, command="NUMBA_NUM_THREADS=1 " + harness.command_line(),
                                        loads=loads, details={"runs": runs})
    if args.json:
        harness.write_results(args.json, document)
    print(json.dumps(document, indent=1))


def write(args, argv, loads, rows, details):
    """The results document through the harness (schema 1 validated, written atomically)."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import harness

    loads.append(os.getloadavg()[0])
    semi = "semi_markov" in details
    second = "second_order" in details
    title = ("NER on GUM: semi-Markov vs first-order CRF" if semi else
             "NER on GUM: second-order vs first-order CRF" if second else
             "NER on GUM: first-order CRF vs CRFsuite (python-crfsuite)" if "rounds" in details else
             "NER on GUM: the online trainers (ap, pa, arow) vs CRFsuite's")
    document = harness.results_document("Sequence tagging", title, rows, issue=42,
                                        command="NUMBA_NUM_THREADS=1 " + harness.command_line(), loads=loads,
                                        details=details)
    if args.json:
        harness.write_results(args.json, document)
    print(json.dumps(document, indent=1))


if __name__ == "__main__":
    main()
