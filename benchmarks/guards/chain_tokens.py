"""Dense-chain CPU time per call at equal tokens: shared vs per-sequence transitions, short vs long sequences.

K = 45, tokens B·L = 50,000 at L = 25 (B = 2000) and L = 2500 (B = 20); one engine thread,
public API (validation included), median CPU time of 5 interleaved rounds after a warm-up. Run it against
another tree to compare versions, e.g. the tree before issue #19's kernels:

    git archive bde73c7 src | tar -x -C /tmp/old
    PYTHONPATH=/tmp/old/src NUMBA_CACHE_DIR=/tmp/old-cache python benchmarks/guards/chain_tokens.py
    PYTHONPATH=src python benchmarks/guards/chain_tokens.py
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from varorder import chain
from varorder.engine import threads

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the shared harness
import harness  # noqa: E402


def main():
    threads.set_threads(1)
    K = 45
    rng = np.random.default_rng(0)
    T = rng.normal(size=(K, K))
    S = rng.normal(size=K)
    for L, B in ((25, 2000), (2500, 20)):
        E = rng.normal(size=(B, L, K))
        Tb = rng.normal(size=(B, K, K))
        runs = {
            "log_z": lambda: chain.log_partition(E, T, S),
            "marginals": lambda: chain.marginals(E, T, S, edges=False),
            "viterbi": lambda: chain.viterbi(E, T, S),
            "log_z per-seq": lambda: chain.log_partition(E, Tb, S),
            "marginals per-seq": lambda: chain.marginals(E, Tb, S, edges=False),
        }
        tokens = B * L / 1e6
        cells = []
        timing = harness.interleaved(runs, 5)
        for name in runs:
            ms = 1e3 * timing.median(name)
            cells.append(f"{name}={ms:.1f}ms ({tokens / ms * 1e3:.2f} Mtok/CPU-s)")
        print(f"L={L} B={B}: " + "  ".join(cells) + f"  (load {timing.load()})", flush=True)


if __name__ == "__main__":
    main()
