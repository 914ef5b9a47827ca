"""Extended-precision references for dense chains: what the LOG paths of
``varorder.engine.chain`` are measured against on long chains, shared by the precision test
and ``benchmarks/guards/chain_precision.py``.

Factorization as the oracle's: s(y) = start[y₁] + Σₜ E[t, yₜ] + Σₜ T[yₜ₋₁, yₜ] (no end
potentials here). Everything runs in x87 long double (``numpy.longdouble``, 64-bit mantissa
where the platform has it): log Z by a log-space forward with one max shift per step; node
and edge marginals by a scaled forward–backward that normalises every row and every position,
node[t] ∝ α̂[t]·β̂[t], edge[t] ∝ α̂[t]ᵢ·exp(T)ᵢⱼ·exp(E[t+1])ⱼ·β̂[t+1]ⱼ, so no large number
appears anywhere."""

from __future__ import annotations

import numpy as np

__all__ = ["LD", "log_z_reference", "marginals_reference", "relative_error", "absolute_error"]

LD = np.longdouble


def log_z_reference(E, T, S):
    """log Z of one chain (E (L, K), T (K, K), start S (K,)) in long double."""
    E = E.astype(LD)
    W = np.exp(T.astype(LD))
    a = S.astype(LD) + E[0]
    for t in range(1, E.shape[0]):
        m = a.max()
        a = np.log(np.exp(a - m) @ W) + m + E[t]
    m = a.max()
    return np.log(np.exp(a - m).sum()) + m


def marginals_reference(E, T, S):
    """(node (L, K), edge (L − 1, K, K)) marginals of one chain in long double."""
    L, K = E.shape
    W = np.exp(T.astype(LD))
    x = E.astype(LD)
    x[0] += S.astype(LD)
    ev = np.exp(x - x.max(axis=1, keepdims=True))
    a = np.empty((L, K), LD)
    b = np.empty((L, K), LD)
    a[0] = ev[0] / ev[0].sum()
    for t in range(1, L):
        v = (a[t - 1] @ W) * ev[t]
        a[t] = v / v.sum()
    b[L - 1] = 1.0
    for t in range(L - 1, 0, -1):
        v = W @ (ev[t] * b[t])
        b[t - 1] = v / v.sum()
    node = a * b
    edge = a[:-1, :, None] * W[None] * (ev[1:] * b[1:])[:, None, :]
    return node / node.sum(axis=1, keepdims=True), edge / edge.sum(axis=(1, 2), keepdims=True)


def relative_error(got, want):
    """max |p − p_ref| / p_ref over the entries with p_ref > 1e-250 (the rest are below what
    float64 marginals resolve)."""
    want = np.asarray(want).astype(LD)
    keep = want > 1e-250
    return float((np.abs(np.asarray(got).astype(LD)[keep] - want[keep]) / want[keep]).max())


def absolute_error(got, want):
    """max |p − p_ref| over all entries."""
    return float(np.abs(np.asarray(got).astype(LD) - np.asarray(want).astype(LD)).max())
