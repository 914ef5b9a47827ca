"""Performance guard of #34: the dense-chain operations of this tree against a baseline tree
(its ``varorder`` copied as ``varorder_base`` by :func:`harness.baseline_package`, so both load
in one process), interleaved in rounds on the same data (random normal log-potentials, shared
transitions, start potentials; as ``benchmarks/peers/chain.py``). CPU seconds per call, median
over rounds; the ratio is this tree / baseline.

    git worktree add /tmp/base <commit>      # or any checkout
    PYTHONPATH=src flock /tmp/varorder-bench.lock nice -n 5 python benchmarks/guards/chain_guard.py \
        --baseline /tmp/base --json out.json
"""

from __future__ import annotations

import argparse
import importlib
import sys
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_limits

from varorder import chain

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the shared harness
import harness  # noqa: E402


def ops(module):
    return {"log_z": lambda E, T, S: module.log_partition(E, T, start=S),
            "viterbi": lambda E, T, S: module.viterbi(E, T, start=S),
            "marginals": lambda E, T, S: module.marginals(E, T, start=S, edges="sum")}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--K", type=int, nargs="+", default=[10, 45, 100, 300])
    ap.add_argument("--L", type=int, nargs="+", default=[25, 250, 2500])
    ap.add_argument("--tokens", type=int, default=20_000, help="positions per configuration (K <= 45; a quarter above)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--json")
    ap.add_argument("--baseline", required=True, help="the baseline checkout (or its src folder)")
    args = ap.parse_args()
    harness.baseline_package(args.baseline)
    base = importlib.import_module("varorder_base.chain")
    systems = {"new": ops(chain), "base": ops(base)}
    rng = np.random.default_rng(0)
    rows, loads = [], []
    with threadpool_limits(1):
        for K in args.K:
            for L in args.L:
                tokens = args.tokens if K <= 45 else args.tokens // 4
                B = max(1, tokens // L)
                E = rng.normal(size=(B, L, K))
                T = rng.normal(size=(K, K))
                S = rng.normal(size=K)
                for op in ("log_z", "viterbi", "marginals"):
                    a = systems["new"][op](E, T, S)
                    b = systems["base"][op](E, T, S)  # compile both, check agreement
                    first_a, first_b = (a[0], b[0]) if isinstance(a, tuple) else (a, b)
                    assert np.allclose(first_a, first_b, rtol=1e-10), (K, L, op)
                    timing = harness.interleaved({name: (lambda f=systems[name][op]: f(E, T, S)) for name in systems},
                                                 args.rounds, warmup=False)
                    loads += timing.loads
                    new, old = timing.median("new"), timing.median("base")
                    print(f"K={K:4d} L={L:5d} B={B:5d} {op:10s} new {new:.4f} s base {old:.4f} s ratio {new / old:.3f} "
                          f"(load {timing.load()})", flush=True)
                    rows.append(harness.row(f"varorder {op}", f"K={K}, L={L}, B={B}, shared transitions",
                                            "CPU s per call (median)", new, old,
                                            "varorder at the baseline tree (same process, interleaved)", note="one thread"))
    if args.json:
        harness.write_results(args.json, harness.results_document(
            "engine", "dense-chain operations of this tree vs a baseline tree", rows, issue=34, loads=loads))


if __name__ == "__main__":
    main()
