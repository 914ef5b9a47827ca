"""Grammar induction benchmark: DMV, CCM and their product (exact product EM) per EM iteration.

Klein & Manning (2004) on WSJ10; Liang, Klein & Jordan (2008, §5.1). Data sets:

* ``wsj`` — WSJ10 of the NLTK 10% WSJ sample (``../shared/data/ptb-wsj-sample``): trained
  and scored on the same sentences (the unsupervised-parsing convention of K&M);
  gold brackets from the trees, gold heads from Collins' head rules;
* ``ud`` — UD English EWT UPOS (``../shared/data/ud-english-ewt``): trained on UD10 train,
  scored on UD10 dev (the test split is held back); gold heads from the treebank,
  gold brackets = contiguous subtree yields. Every UD model is also scored against the same
  dev trees with UD's function-word relations re-headed the PTB way (``fn_*`` fields;
  :func:`varorder.grammar.treebank.function_heads`), to see what UD's content heads cost;
  ``--ud-tags xpos`` trains and scores on EWT's PTB tags instead of UPOS (a diagnostic).

Per iteration (0 = the initializers: harmonic DMV, uniform-split CCM) it records
directed / undirected attachment accuracy, unlabeled bracket F1, the EM objective and
the time of the EM iteration (E-step + M-step, parsing for the scores excluded). It then
times one inside–outside pass over the training sentences on the lexicalized chart (DMV /
product, O(n⁵)) and on the bracket chart (CCM, O(n³)) in interleaved rounds: sentences/s,
wall and CPU.

    PYTHONPATH=src NUMBA_NUM_THREADS=1 python benchmarks/papers/grammar_induction.py --iterations 40 \
        --json docs/figures/grammar_induction.json --plot docs/figures/grammar_induction.png
    flock /tmp/varorder-bench.lock env PYTHONPATH=src NUMBA_NUM_THREADS=1 \
        python benchmarks/papers/grammar_induction.py --timing-only --rounds 5 --json timing.json
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import numpy as np

from varorder.grammar.induce import GrammarInducer
from varorder.grammar.shard import bracket_estep, lexicalized_estep
from varorder.tasks.grammar_induction import evaluate, load_sentences

import sys

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the shared harness
import harness  # noqa: E402

DATA = harness.DATA
ANCHORS = {"dmv": {"directed": 43.2}, "product": {"directed": 47.5, "f1": 77.6}, "ccm": {"f1": 71.9}}
MODELS = ("dmv", "ccm", "product")


def datasets(names, ud_tags="upos", ud_subsample=None, subsample_seed=0):
    """name → (train, test, test re-headed the PTB way or None); ``ud_subsample`` keeps that many
    UD10 training sentences drawn at random (``subsample_seed``)."""
    out = {}
    if "wsj" in names:
        wsj = load_sentences(DATA / "ptb-wsj-sample" / "wsj_sample.mrg.tar.gz")
        out["wsj"] = (wsj, wsj, None)
    if "ud" in names:
        ud = DATA / "ud-english-ewt"
        dev = ud / "en_ewt-ud-dev.conllu.gz"
        train = load_sentences(ud / "en_ewt-ud-train.conllu.gz", tag_column=ud_tags)
        if ud_subsample is not None:
            rng = np.random.default_rng(subsample_seed)
            keep = rng.choice(len(train), min(ud_subsample, len(train)), replace=False)
            train = [train[i] for i in sorted(keep)]
        out["ud"] = (train, load_sentences(dev, tag_column=ud_tags),
                     load_sentences(dev, tag_column=ud_tags, head_style="function"))
    return out


def run_model(model, train, test, iterations, ccm_smoothing, test_function=None, ccm_empty_spans=False):
    rows = []
    train_tags = [s.tags for s in train]
    test_tags = [s.tags for s in test]

    def score(est, it, seconds):
        heads, spans = est.parse(test_tags)
        s = evaluate(heads, spans, test)
        row = {"iteration": it, "seconds": seconds, "directed": s.get("directed"),
               "undirected": s.get("undirected"), "f1": s["f1"], "precision": s["precision"], "recall": s["recall"]}
        if test_function is not None:
            f = evaluate(heads, spans, test_function)
            row.update({f"fn_{k}": f.get(k) for k in ("directed", "undirected", "precision", "recall", "f1")})
        rows.append(row)

    settings = dict(model=model, ccm_smoothing=ccm_smoothing, ccm_empty_spans=ccm_empty_spans)
    score(GrammarInducer(n_iter=0, **settings).fit(train_tags), 0, None)
    clock = {"last": time.perf_counter()}

    def callback(it, est):
        elapsed = time.perf_counter() - clock["last"]
        score(est, it + 1, elapsed)
        clock["last"] = time.perf_counter()

    clock["last"] = time.perf_counter()
    est = GrammarInducer(n_iter=iterations, callback=callback, **settings).fit(train_tags)
    for row, obj in zip(rows[1:], est.objectives_):
        row["objective_entering"] = obj
    return rows, est


def per_tag_directed(est, test, test_function=None):
    """Directed accuracy of the final model per gold dependent tag (and against PTB-style heads)."""
    heads, _ = est.parse([s.tags for s in test])
    if heads[0] is None:
        return None
    out = {}
    for style, gold in (("content", test), ("function", test_function)):
        if gold is None:
            continue
        total, right = {}, {}
        for g, h in zip(gold, heads):
            for a, tag in enumerate(g.tags):
                total[tag] = total.get(tag, 0) + 1
                right[tag] = right.get(tag, 0) + int(h[a] == g.heads[a])
        out[style] = {tag: {"words": n, "directed": right[tag] / n} for tag, n in sorted(total.items())}
    return out


def inside_outside_rates(est_dmv, est_ccm, train, rounds):
    """Sentences/s of one inside–outside pass per chart, interleaved rounds (wall and CPU seconds)."""
    shards_d = est_dmv.shards([s.tags for s in train])
    shards_c = est_ccm.shards([s.tags for s in train])
    pots_d = [est_dmv.potentials(s) for s in shards_d]
    pots_c = [est_ccm.potentials(s) for s in shards_c]
    n = len(train)
    def passes(fn, shards, pots):
        return lambda: [fn(s, b) for s, b in zip(shards, pots)]
    timing = harness.interleaved({"lexicalized (DMV / product)": passes(lexicalized_estep, shards_d, pots_d),
                                  "bracket (CCM)": passes(bracket_estep, shards_c, pots_c)},
                                 rounds, warmup=False, alternate=False)
    edges = {"lexicalized (DMV / product)": sum(s.num_lex_edges for s in shards_d),
             "bracket (CCM)": sum(s.brackets.num_edges for s in shards_c)}
    return {name: {"sentences": n, "edges": edges[name], "wall_s": timing.median(name, "wall"),
                   "cpu_s": timing.median(name, "cpu"), "sentences_per_s": n / timing.median(name, "wall")}
            for name in timing.samples}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--datasets", default="wsj,ud")
    ap.add_argument("--iterations", type=int, default=40)
    ap.add_argument("--rounds", type=int, default=3, help="interleaved timing rounds of inside–outside")
    ap.add_argument("--ccm-smoothing", type=float, nargs=2, default=(2.0, 8.0))
    ap.add_argument("--ccm-empty-spans", action="store_true", help="CCM with K&M 2002's empty spans (a variant)")
    ap.add_argument("--ud-tags", choices=("upos", "xpos"), default="upos", help="UD tag column (xpos: a diagnostic)")
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--ud-subsample", type=int, help="train on this many random UD10 sentences (a diagnostic)")
    ap.add_argument("--subsample-seed", type=int, default=0)
    ap.add_argument("--timing-only", action="store_true",
                    help="only the inside–outside throughput (models at their initializers; no EM curves)")
    ap.add_argument("--json")
    ap.add_argument("--plot")
    args = ap.parse_args()
    result = {"load_average": os.getloadavg(), "iterations": args.iterations,
              "ccm_smoothing": list(args.ccm_smoothing), "ccm_empty_spans": args.ccm_empty_spans,
              "ud_tags": args.ud_tags, "ud_subsample": args.ud_subsample,
              "subsample_seed": args.subsample_seed, "datasets": {}}
    for name, (train, test, test_function) in datasets(args.datasets.split(","), args.ud_tags, args.ud_subsample,
                                                       args.subsample_seed).items():
        entry = {"train_sentences": len(train), "test_sentences": len(test), "models": {}}
        fitted = {}
        for model in () if args.timing_only else args.models.split(","):
            rows, est = run_model(model, train, test, args.iterations, tuple(args.ccm_smoothing), test_function,
                                  args.ccm_empty_spans)
            fitted[model] = est
            times = [r["seconds"] for r in rows[1:]]
            entry["models"][model] = {"curve": rows,
                                      "seconds_per_iteration": float(np.median(times)) if times else None,
                                      "per_tag": per_tag_directed(est, test, test_function)}
            last = rows[-1]
            fmt = lambda v: "  —  " if v is None else f"{100 * v:5.1f}"  # noqa: E731
            print(f"{name:4s} {model:8s} it {last['iteration']:3d}  dir {fmt(last['directed'])}  "
                  f"undir {fmt(last['undirected'])}  F1 {fmt(last['f1'])}  "
                  f"s/it {entry['models'][model]['seconds_per_iteration'] or 0:.3f}"
                  + (f"  | PTB-style heads: dir {fmt(last['fn_directed'])}  undir {fmt(last['fn_undirected'])}  "
                     f"F1 {fmt(last['fn_f1'])}" if test_function is not None else ""), flush=True)
        if args.timing_only:
            fitted = {m: GrammarInducer(model=m, n_iter=0).fit([s.tags for s in train]) for m in ("dmv", "ccm")}
        if "dmv" not in fitted or "ccm" not in fitted:
            result["datasets"][name] = entry
            continue
        entry["inside_outside"] = inside_outside_rates(fitted["dmv"], fitted["ccm"], train, args.rounds)
        for chart, r in entry["inside_outside"].items():
            print(f"{name:4s} inside-outside {chart:28s} {r['sentences_per_s']:9.0f} sent/s "
                  f"(wall {r['wall_s']:.3f} s, cpu {r['cpu_s']:.3f} s, {r['edges']} edges)", flush=True)
        result["datasets"][name] = entry
    result["load_average_end"] = os.getloadavg()
    print("load average", result["load_average"], "→", result["load_average_end"])
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1))
    if args.plot and not args.timing_only:
        from varorder.eval.plots import plot_curve_panels

        panels = {}
        for name, entry in result["datasets"].items():
            for metric, label in (("directed", "directed attachment %"), ("undirected", "undirected attachment %"),
                                  ("f1", "bracket F1 %"), ("fn_directed", "directed %, PTB-style heads"),
                                  ("fn_undirected", "undirected %, PTB-style heads")):
                curves = {}
                for model, m in entry["models"].items():
                    pts = [(r["iteration"], 100 * r[metric]) for r in m["curve"] if r.get(metric) is not None]
                    if pts:
                        curves[model] = tuple(zip(*pts))
                refs = {f"K&M 2004 {m} (WSJ10)": a[metric] for m, a in ANCHORS.items()
                        if metric in a} if name == "wsj" else {}
                if curves:
                    panels[f"{name}: {label}"] = (curves, label, refs)
        plot_curve_panels(panels, args.plot, xlabel="EM iteration")


if __name__ == "__main__":
    main()
