"""SampleRank factor graphs vs the exact CRF (varorder, CRFsuite) on UD English EWT UPOS, train -> dev.

(a) A linear-chain factor graph on the CRF's own features (varorder.models.features.pos_features),
    trained by SampleRank (varorder.factorgraph.SampleRankTagger), against the exact CRF
    (varorder.models.CRF, L-BFGS on the summed NLL) and CRFsuite (python-crfsuite) with the same
    features and c1/c2.
(b) The same plus skip factors between repeated lower-cased words of a document (``# newdoc``)
    and second-order factors over three consecutive tags — loopy, so no exact training — decoded
    by simulated annealing from the chain part's Viterbi path.

SampleRank rows come in two ranked-pair rules: "proposal" (Wick et al. 2009: the current and
the proposed configuration; the paper's definition) and "neighbourhood" (an extension, as in
FACTORIE's trainer: the model's best against the objective's best value of the proposed
variable). Each system runs in its own subprocess; systems are interleaved over --rounds rounds
and the median round is reported. Training time counts feature dicts -> fitted model
(indexing included; Numba kernels loaded from the on-disk cache as in any second run); CPU
seconds are the process's user + system time over the same span, so on a loaded machine the
CPU-time ratio is the fairer one. varorder's CRF runs on one Numba thread here (SampleRank is
single-threaded), unless --crf-threads says otherwise. Tagging throughput is tokens/s on dev
from feature dicts to tags.

    .venv/bin/python benchmarks/papers/samplerank_pos.py [--rounds 2] [--epochs 10] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the shared harness
import harness  # noqa: E402

ROOT = harness.ROOT
EWT = harness.DATA / "ud-english-ewt"

# name -> (label, SampleRankTagger keyword arguments); "crf" and "crfsuite" are the exact peers
SAMPLERANK = {
    "sr-chain": ("(a) SampleRank chain, proposal pairs", {"pairs": "proposal"}),
    "sr-chain-nb": ("(a) SampleRank chain, neighbourhood pairs [ext]", {"pairs": "neighbourhood"}),
    "sr-full": ("(b) + skip + 2nd order, proposal pairs", {"pairs": "proposal", "skip_factors": True,
                                                           "second_order": True}),
    "sr-full-nb": ("(b) + skip + 2nd order, neighbourhood [ext]", {"pairs": "neighbourhood", "skip_factors": True,
                                                                   "second_order": True}),
    "sr-skip-nb": ("    + skip only, neighbourhood [ext]", {"pairs": "neighbourhood", "skip_factors": True}),
    "sr-second-nb": ("    + 2nd order only, neighbourhood [ext]", {"pairs": "neighbourhood", "second_order": True}),
}
LABELS = {"crf": "varorder CRF (exact, L-BFGS)", "crfsuite": "CRFsuite (exact, L-BFGS)"}
LABELS.update({name: label for name, (label, _) in SAMPLERANK.items()})


def _load(split):
    from varorder.factorgraph.samplerank import conllu_inputs
    from varorder.io.conllu import read_conllu

    sentences = read_conllu(EWT / f"en_ewt-ud-{split}.conllu.gz")
    X, keys, documents = conllu_inputs(sentences)
    return X, [s.tags("upos") for s in sentences], keys, documents


def _cpu():
    times = os.times()
    return times.user + times.system


def _run(system, args):
    from varorder.models.sequences import token_accuracy

    X, y, keys, documents = _load("train")
    X_dev, y_dev, keys_dev, documents_dev = _load("dev")
    n_dev = sum(map(len, y_dev))
    if system == "crfsuite":
        import tempfile

        import pycrfsuite

        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "model.crfsuite")
            began, cpu = time.perf_counter(), _cpu()
            trainer = pycrfsuite.Trainer(verbose=False)
            for xseq, yseq in zip(X, y):
                trainer.append(xseq, yseq)
            trainer.set_params({"c1": args.c1, "c2": args.c2, "max_iterations": args.max_iterations})
            trainer.train(path)
            wall, cpu = time.perf_counter() - began, _cpu() - cpu
            tagger = pycrfsuite.Tagger()
            tagger.open(path)
            began = time.perf_counter()
            predicted = [tagger.tag(xseq) for xseq in X_dev]
            tag_seconds = time.perf_counter() - began
        extra = {"iterations": len(trainer.logparser.iterations)}
    elif system == "crf":
        from varorder.models.crf import CRF

        began, cpu = time.perf_counter(), _cpu()
        model = CRF(c1=args.c1, c2=args.c2, max_iterations=args.max_iterations, n_threads=args.crf_threads).fit(X, y)
        wall, cpu = time.perf_counter() - began, _cpu() - cpu
        began = time.perf_counter()
        predicted = model.predict(X_dev)
        tag_seconds = time.perf_counter() - began
        extra = {"iterations": model.n_iter_}
    else:
        from varorder.factorgraph import SampleRankTagger

        options = dict(SAMPLERANK[system][1], n_epochs=args.epochs, random_state=args.seed)
        began, cpu = time.perf_counter(), _cpu()
        model = SampleRankTagger(**options).fit(X, y, keys, documents)
        wall, cpu = time.perf_counter() - began, _cpu() - cpu
        began = time.perf_counter()
        predicted = model.predict(X_dev, keys_dev, documents_dev)
        tag_seconds = time.perf_counter() - began
        extra = {"iterations": args.epochs, "updates": int(sum(h["updates"] for h in model.history_)),
                 "n_skip_pairs": int(len(model._graph(X, keys, documents, "X").skip_pairs))
                 if options.get("skip_factors") else 0}
    return {"system": system, "train_seconds": wall, "train_cpu_seconds": cpu,
            "dev_accuracy": token_accuracy(predicted, y_dev), "tokens_per_second": n_dev / tag_seconds, **extra}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--systems", default="crf,crfsuite," + ",".join(SAMPLERANK),
                        help="comma list of crf, crfsuite and " + ", ".join(SAMPLERANK))
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--epochs", type=int, default=10, help="SampleRank passes over the training tokens")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--c1", type=float, default=0.1)
    parser.add_argument("--c2", type=float, default=0.1)
    parser.add_argument("--max-iterations", type=int, default=100)
    parser.add_argument("--crf-threads", type=int, default=1)
    parser.add_argument("--json", help="write every round's results to this file")
    parser.add_argument("--system", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.system:
        print(json.dumps(_run(args.system, args)))
        return
    if not EWT.exists():
        print(f"skipping: {EWT} not present")
        return
    systems = args.systems.split(",")
    unknown = [s for s in systems if s not in LABELS]
    if unknown:
        parser.error(f"unknown systems {unknown}")
    try:
        import pycrfsuite  # noqa: F401
    except ImportError:
        print("note: python-crfsuite is not installed (pip install python-crfsuite); CRFsuite skipped")
        systems = [s for s in systems if s != "crfsuite"]
    loads = [os.getloadavg()[0]]
    runs = {s: [] for s in systems}
    for round_ in range(args.rounds):
        for system in systems:
            cmd = [sys.executable, __file__, "--system", system, "--epochs", str(args.epochs), "--seed", str(args.seed),
                   "--c1", str(args.c1), "--c2", str(args.c2), "--max-iterations", str(args.max_iterations),
                   "--crf-threads", str(args.crf_threads)]
            env = dict(os.environ, NUMBA_NUM_THREADS=str(max(args.crf_threads, 1)))
            out = subprocess.run(cmd, capture_output=True, text=True, check=True, env=env).stdout
            runs[system].append(json.loads(out.strip().splitlines()[-1]))
            print(f"round {round_ + 1}: {system} done", file=sys.stderr)
        loads.append(os.getloadavg()[0])
    median = {s: sorted(r, key=lambda x: x["train_cpu_seconds"])[len(r) // 2] for s, r in runs.items()}
    print(f"UD English EWT UPOS, train -> dev; SampleRank {args.epochs} epochs, seed {args.seed}; exact CRFs "
          f"c1={args.c1} c2={args.c2} max_iterations={args.max_iterations}; varorder CRF on {args.crf_threads} "
          f"thread(s); median of {args.rounds} interleaved round(s); load average over the rounds "
          f"{', '.join(f'{x:.1f}' for x in loads)}")
    print(f"{'system':48s} {'train s':>8s} {'CPU s':>7s} {'dev acc':>8s} {'tok/s':>9s} {'updates':>9s}")
    for s in systems:
        r = median[s]
        print(f"{LABELS[s]:48s} {r['train_seconds']:8.1f} {r['train_cpu_seconds']:7.1f} {r['dev_accuracy']:8.4f} "
              f"{r['tokens_per_second']:9,.0f} {r.get('updates', 0):9d}")
    if "crf" in median:
        base = median["crf"]
        for s in systems:
            if s == "crf":
                continue
            r = median[s]
            print(f"{LABELS[s].strip():48s} vs varorder CRF: dev {100 * (r['dev_accuracy'] - base['dev_accuracy']):+.2f} "
                  f"points, train wall x{r['train_seconds'] / base['train_seconds']:.2f}, "
                  f"CPU x{r['train_cpu_seconds'] / base['train_cpu_seconds']:.2f}")
    spread = {s: [round(x["dev_accuracy"], 4) for x in r] for s, r in runs.items()}
    print("dev accuracy per round:", json.dumps(spread))
    if args.json:
        Path(args.json).write_text(json.dumps({"args": vars(args), "loads": loads, "runs": runs}, indent=2))


if __name__ == "__main__":
    main()
