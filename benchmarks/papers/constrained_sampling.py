"""Exact constrained sampling (varorder.constrain.ConstrainedLM: the n-gram LM's automaton
× a DFA, backward values over the implicit product, then the engine's forward sampler)
against naive rejection from the same LM (target ≥ 100× the accepted-sample rate of
rejection when the constraint has probability ≤ 1 %), on PTB-LM n-gram models over a
reduced vocabulary (words rarer than ``--min-count`` → <unk>).

Rejection (the denominator, made as fast as it honestly goes): compiled ancestral sampling
from the LM's own automaton (FullWFSA tables), one kernel call for a batch of sentences,
each next word drawn from its state's running sums through a guide table (O(1) expected per
word, the same draw routine and counter-based uniforms as the exact sampler), the DFA
stepped along; a sentence is dropped as soon as it passes the length bound or its DFA
state can no longer accept (neither changes which sentences are accepted), the accepted
ones are kept. Its tables are built once per LM (not counted). Constrained: the product's
backward tables built per constraint (counted), then ``sample_array`` draws N samples in
one kernel call; its rate is N / (build + draws). Both in CPU seconds of this process, in
interleaved rounds (``harness.interleaved``); the ratio is that of the median rates (the
median of the per-round ratios goes beside it). p(C) is the product's exact log Z, checked
against rejection's acceptance rate (binomial standard error). Exactness is the test suite's (tests/test_constrain.py,
tests/test_lattice_product_sample.py).

    python benchmarks/papers/constrained_sampling.py --json benchmarks/results/lm-constrained-sampling.json
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from pathlib import Path

import numba as nb
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/
import harness  # noqa: E402
from infinigram_index import DATA  # noqa: E402

from varorder.engine.lattice import guide_draw, guide_fill, stream_base, stream_uniform  # noqa: E402

# name, kind, value, ordered, min length, max length
CONSTRAINTS = [
    ("contains 'stock' then 'market'", "contains", [["stock"], ["market"]], True, 4, 12),
    ("contains 'president' and 'said', any order", "contains", [["president"], ["said"]], False, 4, 12),
    ("regex: the .* of the .* (<unk> | N) .*", "regex", "the .* of the .* ( <unk> | N ) .*", None, 6, 14),
    ("contains 'new york' and 'million'", "contains", [["new", "york"], ["million"]], False, 5, 15),
    ("contains 'market'", "contains", [["market"]], False, 4, 12),
    ("contains 'company'", "contains", [["company"]], False, 5, 14),
    ("contains 'says'", "contains", [["says"]], False, 4, 12),
]


@nb.njit(cache=True)
def rejection_kernel(cum, guide, nxt, dq, accepting, live, symbol, start_s, start_q, min_len, max_len, draws,
                     seed, first):
    """Draw ``draws`` sentences (stream indices first ..) from the LM automaton whose state s
    has running sums cum[s] over (word columns, end); keep those the DFA accepts within the
    length range: (accepted word ids (A, max_len) −1 padded, A)."""
    K = nxt.shape[1] + 1
    X = K - 1
    cap = 1024
    out = np.full((cap, max_len), -1, dtype=np.int32)
    row = np.empty(max_len + 1, dtype=np.int32)
    accepted = 0
    base = stream_base(seed)
    for i in range(draws):
        s = start_s
        q = start_q
        t = 0
        while True:
            y = guide_draw(cum, s * K, K, guide, s * K, stream_uniform(base, first + i, t))
            if y == X:
                if t >= min_len and accepting[q]:
                    if accepted == cap:
                        cap *= 2
                        grown = np.full((cap, max_len), -1, dtype=np.int32)
                        grown[:accepted] = out[:accepted]
                        out = grown
                    for j in range(t):
                        out[accepted, j] = row[j]
                    accepted += 1
                break
            if t == max_len:  # a word past the length bound
                break
            q = dq[q, y]
            if not live[q]:
                break
            row[t] = symbol[y]
            s = nxt[s, y]
            t += 1
    return out[:accepted], accepted


@nb.njit(cache=True)
def rejection_tables(prob, end):
    """Per LM state: running sums over (word columns, end) and their guide table."""
    S, X = prob.shape
    cum = np.empty((S, X + 1))
    guide = np.empty((S, X + 1), dtype=np.int32)
    for s in range(S):
        c = 0.0
        for x in range(X):
            c += prob[s, x]
            cum[s, x] = c
        cum[s, X] = c + end[s]
        guide_fill(cum[s], 0, X + 1, guide[s], 0)
    return cum, guide


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--orders", default="2:340", help="order:min-count pairs")
    parser.add_argument("--samples", default="10000,100000", help="exact samples per build")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--min-accepted", type=int, default=1000,
                        help="rejection draws per round: enough to accept about this many")
    parser.add_argument("--only", default=None, help="comma-separated constraint numbers (1-based)")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    from varorder.constrain import ConstrainedLM, contains_dfa, regex_dfa
    from varorder.exact.full import FullWFSA
    from varorder.lm import ModifiedKneserNey

    sizes = [int(float(x)) for x in args.samples.split(",")]
    chosen = CONSTRAINTS if args.only is None else [CONSTRAINTS[int(i) - 1] for i in args.only.split(",")]
    rows, loads = [], [harness.load_average()]
    for pair in args.orders.split(","):
        order, min_count = (int(x) for x in pair.split(":"))
        lm = ModifiedKneserNey(order=order, min_count=min_count).fit(DATA / "ptb-lm" / "ptb.train.txt.gz").model_
        start = time.process_time()
        wfsa = FullWFSA(lm)
        wfsa_s = time.process_time() - start
        eos = lm.vocabulary.eos_id
        word_columns = np.flatnonzero(wfsa.symbols != eos)
        eos_column = int(np.flatnonzero(wfsa.symbols == eos)[0])
        symbol = np.ascontiguousarray(wfsa.symbols[word_columns], dtype=np.int64)
        prob = np.ascontiguousarray(np.exp(wfsa.weight[:, word_columns]))
        nxt = np.ascontiguousarray(wfsa.next_state[:, word_columns])
        start = time.process_time()
        cum, guide = rejection_tables(prob, np.ascontiguousarray(np.exp(wfsa.weight[:, eos_column])))
        tables_s = time.process_time() - start
        model_name = f"PTB-LM MKN {order}-gram, {lm.vocab_size} words"
        print(model_name, f"automaton: {wfsa.num_states} states, {wfsa_s:.2f} CPU s; rejection tables "
              f"{tables_s:.3f} s", file=sys.stderr)
        for name, kind, value, ordered, lo, hi in chosen:
            dfa = (contains_dfa(value, lm.vocabulary, ordered=ordered) if kind == "contains"
                   else regex_dfa(value, lm.vocabulary))
            dq = np.ascontiguousarray(dfa.delta[:, symbol])
            live = dfa.live()
            probe = ConstrainedLM(lm, dfa, min_length=lo, max_length=hi, wfsa=wfsa)
            p_c = math.exp(probe.log_probability)
            draws = int(min(max(2_000_000, args.min_accepted / p_c), 50_000_000))
            state = {"round": 0, "accepted": 0, "drawn": 0, "builds": [], "draw_s": {}}

            def exact(n):
                def run():
                    t0 = time.process_time()
                    model = ConstrainedLM(lm, dfa, min_length=lo, max_length=hi, wfsa=wfsa)
                    t1 = time.process_time()
                    model.sample_array(n, seed=state["round"])
                    state["builds"].append(t1 - t0)
                    state["draw_s"].setdefault(n, []).append(time.process_time() - t1)
                return run

            def rejection():
                r = state["round"]
                _, accepted = rejection_kernel(cum.reshape(-1), guide.reshape(-1), nxt, dq, dfa.accepting, live, symbol, wfsa.start,
                                               dfa.start, lo, hi, draws, np.uint64(r), 0)
                state["round"] = r + 1
                state["accepted"] += accepted
                state["drawn"] += draws
                state.setdefault("per_round", []).append(accepted)

            systems = {f"exact {n}": exact(n) for n in sizes}
            systems["rejection"] = rejection
            rounds = harness.interleaved(systems, args.rounds)
            loads += rounds.loads
            per_round = state["per_round"][1:]  # the warm-up call first
            rej_cpu = rounds.cpu("rejection")
            rej_rates = [a / c for a, c in zip(per_round, rej_cpu)]
            accepted = sum(per_round)
            drawn = draws * len(per_round)
            rate_hat = accepted / drawn
            se = math.sqrt(p_c * (1 - p_c) / drawn)
            raw_rate = draws / float(np.median(rej_cpu))
            builds = sorted(state["builds"])
            build_med = builds[len(builds) // 2]
            print(f"{name}, length {lo}-{hi}: p(C) = {p_c:.4e} (rejection {accepted}/{drawn} = {rate_hat:.4e}, "
                  f"z = {(rate_hat - p_c) / se:+.2f}); rejection {raw_rate:,.0f} sentences / CPU s, "
                  f"{np.median(rej_rates):,.1f} accepted / CPU s; exact build {build_med:.4f} s; load "
                  f"{rounds.load()}", file=sys.stderr)
            for n in sizes:
                key = f"exact {n}"
                exact_rates = [n / c for c in rounds.cpu(key)]
                ratio = float(np.median([e / r for e, r in zip(exact_rates, rej_rates)]))
                draw_med = float(np.median(state["draw_s"][n][1:]))
                print(f"  {n} samples per build: {np.median(exact_rates):,.0f} samples / CPU s (build "
                      f"{build_med:.4f} s + draws {draw_med:.4f} s), ratio {ratio:,.1f}", file=sys.stderr)
                rows.append({
                    "system": "ConstrainedLM (LM automaton x DFA: backward tables, forward sampler)",
                    "task": f"{model_name}: {name}, length {lo}-{hi}, {n} samples per build",
                    "metric": "accepted samples per CPU s", "varorder": round(float(np.median(exact_rates)), 1),
                    "reference": round(float(np.median(rej_rates)), 2),
                    "reference_name": "naive rejection from the same LM (compiled ancestral sampling, guide tables)",
                    "ratio": round(round(float(np.median(exact_rates)), 1) / round(float(np.median(rej_rates)), 2), 1),
                    "better": "higher",
                    "note": (f"p(C) = {p_c:.3e} (exact log Z; rejection accepted {accepted} of {drawn:,}, "
                             f"{rate_hat:.3e}, z = {(rate_hat - p_c) / se:+.2f}); rejection draws "
                             f"{raw_rate:,.0f} sentences a CPU s; exact: build {build_med:.4f} CPU s + "
                             f"{n} samples {draw_med:.4f} s (LM automaton {wfsa_s:.2f} s and rejection tables "
                             f"{tables_s:.3f} s once per LM, not counted); ratio of the medians over "
                             f"{args.rounds} interleaved rounds (median of the per-round ratios {ratio:.1f}); "
                             f"load {rounds.load()}")})
        del lm, wfsa
    if args.json:
        harness.write_results(args.json, harness.results_document(
            "n-gram LMs", "exact constrained sampling (n-gram LM x DFA) against compiled naive rejection", rows,
            issue=44, loads=loads))


if __name__ == "__main__":
    main()
