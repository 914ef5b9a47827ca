"""Held-out surface forms on the Hopkins phonology-framework sets (issue #14, the real-data
half of Cotterell & Eisner 2015, Fig. 3): hide a seeded share of the surface forms, infer
the morphemes' beliefs from the rest, and score each hidden form by −log p(s) =
−log Σ_x T(s | x₁⋯x_k) Π_j b̂_j(x_j) (capped at 50 nats) and 1-best accuracy
(:func:`varorder.strings.em.heldout_surface_scores`), for pruned BP, EP-1/2/3gram and PEP.
``--em-iterations`` (an extension: the paper keeps the parameters fixed) first trains the
edit transducer by EM with the same method.

    PYTHONPATH=src python benchmarks/papers/strings_heldout.py \\
        --files phonological_datasets/english_plurals other/catalan phonological_datasets/hebrew_paal_verbs \\
        --methods pep-prox pep bp ep3 ep2 ep1 -o docs/figures/strings/heldout.json
    PYTHONPATH=src python benchmarks/papers/strings_heldout.py --report docs/figures/strings/heldout.json
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from varorder.strings.em import EditEM, heldout_surface_scores
from varorder.strings.inference import PROX_PENALTIES, make_method
from varorder.strings.model import read_hopkins

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the shared harness
import harness  # noqa: E402

ROOT = harness.DATA / "morphophonology" / "hopkins-phonology-framework"


def run(name, method, args, em_iterations=0):
    graph = read_hopkins(ROOT / name, holdout_share=args.share, seed=args.seed)
    lam = args.prox_lam if method == "pep-prox" else args.lam
    params = {"k": args.k, "lam": lam, "eta": args.eta, "iterations": args.iterations,
              "inner_passes": args.inner_passes, "prox_penalty": args.prox_penalty}
    started, cpu = time.perf_counter(), time.process_time()
    if em_iterations:
        em = EditEM(method=method, iterations=em_iterations, smoothing=args.em_smoothing, method_params=params).fit(graph)
        graph, estimator = em.graph_, em.estimator_
    else:
        estimator = make_method(method, **params).fit(graph)
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
    scores = heldout_surface_scores(estimator, graph)
    row = {"file": name, "method": method, "label": estimator.beliefs_.method + (f"+EM×{em_iterations}" if em_iterations
                                                                                   else ""),
           "seconds": round(seconds, 2), "cpu_seconds": round(cpu, 2), "alphabet": len(graph.alphabet),
           "variables": len(graph.morphemes), "observed": len(graph.observed), "load": round(os.getloadavg()[0], 2),
           **scores}
    if em_iterations:
        row["em"] = em.history_
    row.update({k: (round(v, 2) if isinstance(v, float) else v) for k, v in estimator.beliefs_.stats.items()})
    return row


def report(paths):
    rows = {}
    for path in paths:
        with open(path, encoding="utf-8") as handle:
            for row in json.load(handle)["rows"]:
                rows[(row["file"], row["label"])] = row
    rank = ("PEP-prox", "PEP-greedy", "BP-prune", "EP-3gram", "EP-2gram", "EP-1gram")

    def order(item):
        (name, label), _ = item
        return name, "+EM" in label, next((i for i, p in enumerate(rank) if label.startswith(p)), len(rank)), label

    print("| data set (held out / observed) | method | wall s | CPU s | held-out NLL (nats) | 1-best acc. | capped "
          "| load |")
    print("|---|---|---|---|---|---|---|---|")
    for (name, label), row in sorted(rows.items(), key=order):
        print(f"| {name.split('/')[-1]} ({row['words']}/{row['observed']}) | {label} | {row['seconds']:.1f} | "
              f"{row['cpu_seconds']:.1f} | {row['nll']:.3f} | {row['accuracy']:.3f} | {row['capped']} | "
              f"{row['load']:.1f} |")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--files", nargs="+", default=["phonological_datasets/english_plurals"])
    parser.add_argument("--methods", nargs="*", default=["bp", "ep1", "ep2", "ep3", "pep"])
    parser.add_argument("--share", type=float, default=0.2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--lam", type=float, default=0.001, help="λ of pep (greedy growing)")
    parser.add_argument("--prox-lam", type=float, default=0.01, help="λ of pep-prox (the paper's 0.01)")
    parser.add_argument("--prox-penalty", choices=PROX_PENALTIES, default="message",
                        help="pep-prox: penalise the message θ_{F→V} (the paper's eq. 7 + λΩ) or the belief θ_V "
                             "(an option)")
    parser.add_argument("--eta", type=float, default=0.05)
    parser.add_argument("--k", type=int, default=20)
    parser.add_argument("--iterations", type=int, default=3)
    parser.add_argument("--inner-passes", type=int, default=2)
    parser.add_argument("--em-iterations", type=int, default=0, help="extension: EM rounds before inference")
    parser.add_argument("--em-smoothing", type=float, default=0.1)
    parser.add_argument("-o", "--output", default=None)
    parser.add_argument("--report", nargs="+", default=None, help="print a table from result JSONs instead")
    args = parser.parse_args(argv)
    if args.report:
        report(args.report)
        return 0
    if not ROOT.exists():
        parser.error(f"{ROOT} is absent (../shared/data/morphophonology)")
    rows = []
    for name in args.files:
        for method in args.methods:
            rows.append(run(name, method, args, args.em_iterations))
            print(json.dumps({k: v for k, v in rows[-1].items() if k != "predictions"}, ensure_ascii=False), flush=True)
            if args.output:
                with open(args.output, "w", encoding="utf-8") as handle:
                    json.dump({"args": vars(args), "rows": rows}, handle, indent=1, ensure_ascii=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
