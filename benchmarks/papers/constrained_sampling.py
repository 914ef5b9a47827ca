"""Exact constrained sampling (varorder.constrain.ConstrainedLM: the n-gram LM's automaton
× a DFA on the lattice engine) against naive rejection from the same LM (
target ≥ 100× the accepted-sample rate of rejection when the constraint has probability
≤ 1 %), on PTB-LM n-gram models over a reduced vocabulary (words rarer than
``--min-count`` → <unk>, so that the product stays small).

Rejection: ancestral sampling from the LM's own automaton (FullWFSA tables, one NumPy step
for a batch of sentences at a time, a sentence dropped as soon as it passes the length bound),
accepting the sentences the DFA accepts within the length range. Constrained: the product
lattice built once, then the engine's sampler; its rate includes the build. Both in CPU
seconds of this process; exactness is the test suite's (tests/test_constrain.py).

    python benchmarks/papers/constrained_sampling.py --json benchmarks/results/lm-constrained-sampling.json
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/
import harness  # noqa: E402
from infinigram_index import DATA, _cpu  # noqa: E402

CONSTRAINTS = [
    ("contains 'stock' then 'market'", "contains", [["stock"], ["market"]], True, 4, 12),
    ("contains 'president' and 'said', any order", "contains", [["president"], ["said"]], False, 4, 12),
    ("regex: the .* of the .* (<unk> | N) .*", "regex", "the .* of the .* ( <unk> | N ) .*", None, 6, 14),
    ("contains 'new york' and 'million'", "contains", [["new", "york"], ["million"]], False, 5, 15),
]


def rejection(wfsa, dfa, lm, min_length, max_length, budget_s, batch, rng):
    """(accepted, drawn, CPU s): ancestral samples from the LM automaton until budget_s."""
    eos_column = int(np.flatnonzero(wfsa.symbols == lm.vocabulary.eos_id)[0])
    cdf = np.cumsum(np.exp(wfsa.weight), axis=1)
    cdf /= cdf[:, -1:]
    accepted = drawn = 0
    start = time.process_time()
    while time.process_time() - start < budget_s:
        state = np.full(batch, wfsa.start, np.int64)
        q = np.full(batch, dfa.start, np.int64)
        alive = np.ones(batch, bool)
        for t in range(max_length + 1):
            idx = np.flatnonzero(alive)
            if idx.size == 0:
                break
            u = rng.random(idx.size)
            column = (cdf[state[idx]] < u[:, None]).sum(axis=1)
            column = np.minimum(column, cdf.shape[1] - 1)
            ends = column == eos_column
            done = idx[ends]
            ok = (t >= min_length) & dfa.accepting[q[done]]
            accepted += int(ok.sum())
            alive[done] = False
            go = idx[~ends]
            words = wfsa.symbols[column[~ends]]
            q[go] = dfa.delta[q[go], words]
            state[go] = wfsa.next_state[state[go], column[~ends]]
        drawn += batch
    return accepted, drawn, time.process_time() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--orders", default="2:340,3:870", help="order:min-count pairs")
    parser.add_argument("--samples", type=int, default=10000)
    parser.add_argument("--budget", type=float, default=20.0, help="CPU s of rejection per constraint")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    from varorder.constrain import ConstrainedLM, contains_dfa, regex_dfa
    from varorder.exact.full import FullWFSA
    from varorder.lm import ModifiedKneserNey

    rows = []
    for pair in args.orders.split(","):
        order, min_count = (int(x) for x in pair.split(":"))
        lm = ModifiedKneserNey(order=order, min_count=min_count).fit(DATA / "ptb-lm" / "ptb.train.txt.gz").model_
        start = time.process_time()
        wfsa = FullWFSA(lm)
        wfsa_s = time.process_time() - start
        model_name = f"PTB-LM MKN {order}-gram, {lm.vocab_size} words"
        print(model_name, f"automaton: {wfsa.num_states} states, {wfsa_s:.2f} CPU s", file=sys.stderr)
        for name, kind, value, ordered, lo, hi in CONSTRAINTS:
            load = os.getloadavg()[0]
            dfa = (contains_dfa(value, lm.vocabulary, ordered=ordered) if kind == "contains"
                   else regex_dfa(value, lm.vocabulary))
            start = time.process_time()
            model = ConstrainedLM(lm, dfa, min_length=lo, max_length=hi, wfsa=wfsa)
            build = time.process_time() - start
            start = time.process_time()
            samples = model.sample(args.samples, seed=0)
            draw = time.process_time() - start
            start = time.process_time()
            best, best_logp = model.decode()
            decode_s = time.process_time() - start
            p_c = math.exp(model.log_probability)
            exact_rate = args.samples / (build + draw)
            accepted, drawn, rej_s = rejection(wfsa, dfa, lm, lo, hi, args.budget, 20000, np.random.default_rng(0))
            rej_rate = accepted / rej_s
            print(f"{name}: p(C) = {p_c:.3e}, lattice {model.num_nodes} nodes {model.num_arcs} arcs, build {build:.2f} s, "
                  f"{args.samples} samples {draw:.2f} s; rejection {accepted}/{drawn} accepted in {rej_s:.1f} s; "
                  f"best: {' '.join(best)} ({best_logp:.2f}); e.g. {' '.join(samples[0])} | {' '.join(samples[1])}",
                  file=sys.stderr)
            ratio = exact_rate / rej_rate if accepted else None
            rows.append({
                "system": "ConstrainedLM (LM automaton x DFA, engine sampler)", "task": f"{model_name}: {name}, length {lo}-{hi}",
                "metric": "accepted samples per CPU s", "varorder": round(exact_rate, 1),
                "reference": round(rej_rate, 3) if accepted else None,
                "reference_name": "naive rejection from the same LM (vectorised NumPy ancestral sampling)",
                "ratio": round(round(exact_rate, 1) / round(rej_rate, 3), 1) if accepted else None, "better": "higher",
                "note": (f"p(C) = {p_c:.2e} (rejection accepted {accepted} of {drawn} in {rej_s:.1f} CPU s"
                         f"{'' if accepted else ': none, ratio undefined'}); lattice {model.num_nodes} nodes, "
                         f"{model.num_arcs} arcs, built in {build:.2f} CPU s (LM automaton {wfsa_s:.2f} s more), "
                         f"{args.samples} samples in {draw:.2f} s; exact decode {decode_s:.3f} s: "
                         f"'{' '.join(best)}'; load {load:.1f}")})
        del lm, wfsa
    if args.json:
        harness.write_results(args.json, harness.results_document("n-gram LMs", "exact constrained sampling (n-gram LM x DFA on the lattice engine) against naive rejection", rows, issue=44))


if __name__ == "__main__":
    main()
