"""CRF POS-tagging benchmark: varorder's CRF vs CRFsuite (python-crfsuite) on UD English EWT.

Both systems get the *same* feature dicts (varorder.models.features.pos_features: bias,
lower-cased word, suffixes 1–3, 2-letter prefix, is-upper/-title/-digit, previous/next word's
lower-cased form, is-title and 3-letter suffix, BOS/EOS) and the same objective:

    J = Σ_sentences −log p(y | x) + c1‖w‖₁ + c2‖w‖²

which is exactly CRFsuite's L-BFGS/OWL-QN objective (crfsuite train_lbfgs.c adds c2·‖w‖²
to the summed NLL and passes c1 to OWL-QN), so equal c1/c2 values mean equal strengths.
Both run max_iterations L-BFGS iterations (stopping early only on CRFsuite's default
delta = 1e-5 over 10 iterations). Each system runs in its own subprocess so that peak
memory (ru_maxrss) is its own; train time counts everything from feature dicts to a
fitted model (CRFsuite: append + train; varorder: fit, including feature indexing);
tagging throughput is tokens/s from feature dicts to tag sequences on dev.

    .venv/bin/python benchmarks/peers/crf_pos.py [--c1 0.1 --c2 0.1 --max-iterations 100] [--ocr] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the shared harness
import harness  # noqa: E402

ROOT = harness.ROOT
DATA = harness.DATA
EWT = DATA / "ud-english-ewt"
OCR = DATA / "ocr-letters" / "letter.data.gz"


def _load(split):
    from varorder.io.conllu import read_conllu
    from varorder.models.features import pos_features

    sentences = read_conllu(EWT / f"en_ewt-ud-{split}.conllu.gz")
    return [pos_features(s.words) for s in sentences], [s.tags("upos") for s in sentences]


def _accuracy(pred, gold):
    from varorder.models.sequences import token_accuracy

    return token_accuracy(pred, gold)


def run_varorder(c1, c2, iterations, threads=None):
    from varorder.models.crf import CRF

    X, y = _load("train")
    X_dev, y_dev = _load("dev")
    began = time.perf_counter()
    model = CRF(c1=c1, c2=c2, max_iterations=iterations, n_threads=threads).fit(X, y)
    train_seconds = time.perf_counter() - began
    model.predict(X_dev[:10])  # JIT warm-up of the decoding path, as CRFsuite's is precompiled
    began = time.perf_counter()
    predicted = model.predict(X_dev)
    tag_seconds = time.perf_counter() - began
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "model.npz")
        model.save(path)
        size = os.path.getsize(path)
    nonzero = int(sum((a != 0).sum() for a in (model.emission_weights_, model.transition_weights_,
                                                model.start_weights_, model.end_weights_)))
    name = "varorder CRF" + ("" if threads is None else f" ({threads} thread{'s' * (threads > 1)})")
    return {"system": name, "train_seconds": train_seconds, "iterations": model.n_iter_,
            "dev_accuracy": _accuracy(predicted, y_dev), "tokens_per_second": sum(map(len, y_dev)) / tag_seconds,
            "model_bytes": size, "nonzero_weights": nonzero, "stop": model.stop_reason_,
            "evaluations": model.n_evaluations_}


def run_crfsuite(c1, c2, iterations):
    import pycrfsuite

    X, y = _load("train")
    X_dev, y_dev = _load("dev")
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "model.crfsuite")
        began = time.perf_counter()
        trainer = pycrfsuite.Trainer(verbose=False)
        for xseq, yseq in zip(X, y):
            trainer.append(xseq, yseq)
        trainer.set_params({"c1": c1, "c2": c2, "max_iterations": iterations})
        trainer.train(path)
        train_seconds = time.perf_counter() - began
        iters = len(trainer.logparser.iterations)
        tagger = pycrfsuite.Tagger()
        tagger.open(path)
        began = time.perf_counter()
        predicted = [tagger.tag(xseq) for xseq in X_dev]
        tag_seconds = time.perf_counter() - began
        size = os.path.getsize(path)
        info = tagger.info()
        nonzero = len(info.state_features) + len(info.transitions)
    return {"system": "CRFsuite", "train_seconds": train_seconds, "iterations": iters,
            "dev_accuracy": _accuracy(predicted, y_dev), "tokens_per_second": sum(map(len, y_dev)) / tag_seconds,
            "model_bytes": size, "nonzero_weights": nonzero, "stop": ""}


def run_ocr(c2, iterations):
    from varorder.cli.ocr import run_ocr as ocr

    result = ocr(OCR, test_fold=1, downsample=True, c2=c2, max_iterations=iterations)
    result["system"] = "varorder CRF (OCR, 8x4 pixels)"
    return result


def _child(args):
    if args.system.startswith("varorder"):
        threads = int(args.system.split(":")[1]) if ":" in args.system else None
        result = run_varorder(args.c1, args.c2, args.max_iterations, threads)
    elif args.system == "crfsuite":
        result = run_crfsuite(args.c1, args.c2, args.max_iterations)
    else:
        result = run_ocr(args.ocr_c2, args.max_iterations)
    result["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps(result))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--c1", type=float, default=0.1)
    parser.add_argument("--c2", type=float, default=0.1)
    parser.add_argument("--max-iterations", type=int, default=100)
    parser.add_argument("--ocr", action="store_true", help="also run the OCR word-recognition CRF")
    parser.add_argument("--ocr-c2", type=float, default=1.0)
    parser.add_argument("--systems", default="crfsuite,varorder",
                        help="comma list of crfsuite, varorder (Numba default threads), varorder:N (N threads)")
    parser.add_argument("--json", help="write the results to this file")
    parser.add_argument("--system", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.system:
        return _child(args)
    if not EWT.exists():
        print(f"skipping: {EWT} not present")
        return
    systems = args.systems.split(",")
    try:
        import pycrfsuite  # noqa: F401
    except ImportError:
        print("note: python-crfsuite is not installed (pip install python-crfsuite); CRFsuite skipped")
        systems = [s for s in systems if s != "crfsuite"]
    if args.ocr:
        systems.append("ocr")
    results = []
    for system in systems:
        cmd = [sys.executable, __file__, "--system", system, "--c1", str(args.c1), "--c2", str(args.c2),
               "--max-iterations", str(args.max_iterations), "--ocr-c2", str(args.ocr_c2)]
        out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
        results.append(json.loads(out.strip().splitlines()[-1]))
        print(f"done: {system}", file=sys.stderr)
    print(f"UD English EWT UPOS, train -> dev; c1={args.c1} c2={args.c2} max_iterations={args.max_iterations}; "
          f"load average before: {os.getloadavg()[0]:.1f}")
    header = f"{'system':32s} {'train s':>8s} {'iters':>6s} {'dev acc':>8s} {'tok/s':>10s} {'model MB':>9s} {'nonzero':>9s} {'peak MB':>8s}"
    print(header)
    for r in results:
        if r["system"].startswith("varorder CRF (OCR"):
            continue
        print(f"{r['system']:32s} {r['train_seconds']:8.1f} {r['iterations']:6d} {r['dev_accuracy']:8.4f} "
              f"{r['tokens_per_second']:10,.0f} {r['model_bytes'] / 1e6:9.2f} {r['nonzero_weights']:9d} "
              f"{r['peak_rss_mb']:8.0f}")
    by = {r["system"]: r for r in results}
    for name in [n for n in by if n.startswith("varorder CRF") and "OCR" not in n]:
        if "CRFsuite" not in by:
            break
        a, b = by[name], by["CRFsuite"]
        print(f"ratios {name} / CRFsuite: train time {a['train_seconds'] / b['train_seconds']:.2f}, "
              f"dev accuracy {a['dev_accuracy'] - b['dev_accuracy']:+.4f} (abs), "
              f"throughput {a['tokens_per_second'] / b['tokens_per_second']:.2f}")
    for r in results:
        if r["system"].startswith("varorder CRF (OCR"):
            print(f"OCR fold 1 test (8x4 pixels + bias, first-order CRF, c2={r['c2']}): letter accuracy "
                  f"{r['letter_accuracy']:.4f}, word accuracy {r['word_accuracy']:.4f}, train {r['train_seconds']:.1f} s "
                  f"({r['iterations']} iterations), {r['letters_per_second']:,.0f} letters/s, peak {r['peak_rss_mb']:.0f} MB")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
