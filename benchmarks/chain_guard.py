"""Performance guard of #34: the dense-chain operations of this tree against a baseline copy
of varorder (renamed ``varorder_base`` so both load in one process), interleaved in rounds
on the same data (random normal log-potentials, shared transitions, start potentials; as
``benchmarks/chain.py``). CPU seconds (``time.process_time``) per call, median over
rounds; the ratio is this tree / baseline.

    cp -r <baseline>/src/varorder /tmp/basepkg/varorder_base   # then rename the imports:
    sed -i -E 's/\\bvarorder\\./varorder_base./g; s/from varorder import/from varorder_base import/g' ...
    PYTHONPATH=src:/tmp/basepkg flock /tmp/varorder-bench.lock nice -n 5 python benchmarks/chain_guard.py --json out.json
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import statistics
import time
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_limits

from varorder import chain


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
    args = ap.parse_args()
    base = importlib.import_module("varorder_base.chain")
    systems = {"new": ops(chain), "base": ops(base)}
    rng = np.random.default_rng(0)
    rows = []
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
                    times = {"new": [], "base": []}
                    for r in range(args.rounds):
                        for name in (("new", "base") if r % 2 == 0 else ("base", "new")):
                            start = time.process_time()
                            systems[name][op](E, T, S)
                            times[name].append(time.process_time() - start)
                    new, old = statistics.median(times["new"]), statistics.median(times["base"])
                    print(f"K={K:4d} L={L:5d} B={B:5d} {op:10s} new {new:.4f} s base {old:.4f} s ratio {new / old:.3f} "
                          f"(load {os.getloadavg()[0]:.1f})", flush=True)
                    rows.append({"system": f"varorder {op}", "task": f"K={K}, L={L}, B={B}, shared transitions",
                                 "metric": "CPU s per call (median)", "varorder": new, "reference": old,
                                 "reference_name": "varorder before #34 (same process, interleaved)",
                                 "ratio": new / old, "better": "lower", "note": "one thread"})
    if args.json:
        cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")), "")
        Path(args.json).write_text(json.dumps({
            "schema": 1, "area": "engine", "title": "dense-chain operations after the #34 split vs before",
            "issue": 34, "command": "benchmarks/chain_guard.py " + " ".join(f"--{k} {v}" for k, v in vars(args).items()
                                                                            if k != "json"),
            "date": time.strftime("%Y-%m-%d"),
            "machine": {"cpu": cpu, "cores": os.cpu_count(), "load": f"{os.getloadavg()[0]:.2f}"},
            "rows": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
