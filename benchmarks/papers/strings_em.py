"""EM on the edit transducer's parameters from inferred beliefs (issue #14, "What to build" 2;
Cotterell, Peng & Eisner 2015, §5), on a seeded synthetic lexicon whose generating
transducer and underlying forms are known: start from the untrained uniform transducer
(copy 0.9), run ``--rounds`` EM rounds with one inference method, and record after each
round the proxy Σ_F log p(s_F | beliefs), the gold underlying forms' NLL and 1-best
accuracy under the beliefs, and the distance of the learned substitution/insertion
probabilities from the generating ones (mean absolute difference).

    PYTHONPATH=src python benchmarks/papers/strings_em.py --size 100 --method pep --rounds 4 -o docs/figures/strings/em_pep.json
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import time

import numpy as np

from varorder.strings.em import expected_edit_counts
from varorder.strings.inference import belief_nll, make_method
from varorder.strings.model import EditTransducer, synthetic_lexicon


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--alphabet-size", type=int, default=16)
    parser.add_argument("--method", default="pep")
    parser.add_argument("--lam", type=float, default=0.001)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--smoothing", type=float, default=0.1)
    parser.add_argument("--iterations", type=int, default=3)
    parser.add_argument("--inner-passes", type=int, default=2)
    parser.add_argument("-o", "--output", default=None)
    args = parser.parse_args(argv)
    truth = synthetic_lexicon(args.size, seed=args.seed, alphabet_size=args.alphabet_size)
    graph = dataclasses.replace(truth, edit=EditTransducer.uniform(truth.alphabet, 0.9, 0.02, 0.02))
    params = {"lam": args.lam, "iterations": args.iterations, "inner_passes": args.inner_passes}
    rows = []
    for round_ in range(args.rounds + 1):
        started, cpu = time.perf_counter(), time.process_time()
        estimator = make_method(args.method, **params).fit(graph)
        step = expected_edit_counts(estimator, graph)
        gold = belief_nll(estimator.beliefs_, graph.gold)
        row = {"round": round_, "method": estimator.beliefs_.method, "size": args.size,
               "proxy_log_likelihood": step["log_likelihood"], "words_counted": step["words"],
               "skipped": step["skipped"], "gold_nll": gold["nll"], "gold_accuracy": gold["accuracy"],
               "substitute_mad": float(np.abs(graph.edit.substitute - truth.edit.substitute).mean()),
               "insert_mad": float(np.abs(graph.edit.insert - truth.edit.insert).mean()),
               "seconds": round(time.perf_counter() - started, 2), "cpu_seconds": round(time.process_time() - cpu, 2),
               "load": round(os.getloadavg()[0], 2)}
        rows.append(row)
        print(json.dumps(row), flush=True)
        if args.output:
            with open(args.output, "w", encoding="utf-8") as handle:
                json.dump({"args": vars(args), "rows": rows}, handle, indent=1)
        graph = dataclasses.replace(graph, edit=graph.edit.m_step(step["counts"], step["words"], args.smoothing))
    return 0


if __name__ == "__main__":
    sys.exit(main())
