"""Precision of the dense-chain LOG paths on long chains (#33 item 6): log Z, node and edge
marginals of ``varorder.chain`` against an extended-precision reference.

The reference runs in x87 long double (``numpy.longdouble``, 64-bit mantissa): a scaled
forward–backward that normalises every row and every position (no large number anywhere),
node[t] ∝ α̂[t]·β̂[t], edge[t] ∝ α̂[t]ᵢ·exp(T)ᵢⱼ·exp(E[t+1])ⱼ·β̂[t+1]ⱼ; log Z from a log-space
forward with one max shift per step. Errors are max |p − p_ref| / p_ref over the entries
with p_ref > 1e-250 ("rel") and max |p − p_ref| over all ("abs"). Cases: random normal
potentials with shared or per-sequence transitions (the scaled path), and the same with
one emission 1000 nats below its row at mid-chain (the scaled products could underflow:
the sequence goes to the log-space path).

    python benchmarks/guards/chain_precision.py                  # K = 8, L = 10⁴, B = 2
    python benchmarks/guards/chain_precision.py --K 100 --B 1    # a few minutes (long-double GEMVs)
"""

from __future__ import annotations

import argparse

import numpy as np

from varorder import chain

from varorder.testing.precision import LD, absolute_error, log_z_reference, marginals_reference, relative_error


def errors(got, want):
    return relative_error(got, want), absolute_error(got, want)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--K", type=int, default=8)
    ap.add_argument("--L", type=int, default=10_000)
    ap.add_argument("--B", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    K, L, B = args.K, args.L, args.B
    print(f"K={K} L={L} B={B} seed={args.seed}; long double eps {float(np.finfo(LD).eps):.1e}")
    print("| case | log Z rel | node rel | node abs | node rel (edges=False) | edge rel | edge abs | edge-sum rel |")
    print("|---|---|---|---|---|---|---|---|")
    for case in ("scaled, shared T", "scaled, per-sequence T", "log-space (one emission −1000)"):
        rng = np.random.default_rng(args.seed)
        per_sequence = "per-sequence" in case
        E = rng.normal(size=(B, L, K))
        T = rng.normal(size=(B, K, K) if per_sequence else (K, K))
        S = rng.normal(size=K)
        if "log-space" in case:
            E[:, L // 2, 0] = -1000.0
        node, edge, logz = chain.marginals(E, T, start=S, edges=True, return_log_z=True)
        node_only, _ = chain.marginals(E, T, start=S)
        _, edge_sum = chain.marginals(E, T, start=S, edges="sum")
        worst = np.zeros(7)
        for b in range(B):
            Tb = T[b] if per_sequence else T
            want_node, want_edge = marginals_reference(E[b], Tb, S)
            want_z = log_z_reference(E[b], Tb, S)
            worst = np.maximum(worst, [float(abs((LD(logz[b]) - want_z) / want_z)), *errors(node[b], want_node),
                                       errors(node_only[b], want_node)[0], *errors(edge[b], want_edge),
                                       errors(edge_sum[b], want_edge.sum(axis=0))[0]])
        print(f"| {case} | " + " | ".join(f"{v:.1e}" for v in worst) + " |", flush=True)


if __name__ == "__main__":
    main()
