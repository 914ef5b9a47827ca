"""Exact sampling from dense chains: forward filtering (generic LOG forward), backward
sampling with uniforms drawn outside the kernel from a seeded generator.
See :mod:`varorder.engine.chain`."""

from __future__ import annotations

import numba as nb
import numpy as np

from varorder.engine.chain_generic import NEG_INF, _log_forward
import varorder._numba_start  # noqa: E402,F401,I001  (Numba's cache saves locked across processes)

__all__ = ["sample_from_alphas"]  # kernels for engine.chain


@nb.njit(cache=True)
def _draw(weights, u):
    """Index i with probability weights[i] / Σ weights, by inverse CDF at u ∈ [0, 1)."""
    total = 0.0
    for i in range(weights.shape[0]):
        total += weights[i]
    target = u * total
    c = 0.0
    last = -1
    for i in range(weights.shape[0]):
        if weights[i] > 0.0:
            last = i
            c += weights[i]
            if target < c:
                return i
    return last


@nb.njit(cache=True)
def _sample_back(alpha, z, Tb, end, n, uniforms, paths):
    """Backward sampling of one sequence from its LOG forward values ``alpha`` (n, K) and
    log Z ``z``: paths (n_samples, L) receives the labels, uniforms (n_samples, L) the draws."""
    K = alpha.shape[1]
    w = np.empty(K)
    for s in range(uniforms.shape[0]):
        for j in range(K):
            w[j] = np.exp(alpha[n - 1, j] + end[j] - z)
        y = _draw(w, uniforms[s, n - 1])
        paths[s, n - 1] = y
        for t in range(n - 1, 0, -1):
            m = NEG_INF
            for i in range(K):
                v = alpha[t - 1, i] + Tb[i, y]
                w[i] = v
                if v > m:
                    m = v
            for i in range(K):
                w[i] = np.exp(w[i] - m)
            y = _draw(w, uniforms[s, t - 1])
            paths[s, t - 1] = y


@nb.njit(cache=True, parallel=True)
def _sample_kernel(E, T, start, end, lengths, uniforms):
    """Forward filtering (the generic LOG recursion) and backward sampling, fused per
    sequence (no (B, L, K) table of forward values): the registered specialisation of
    :func:`sample_from_alphas` on the generic forward's values."""
    B, L, K = E.shape
    n_samples = uniforms.shape[1]
    paths = np.full((B, n_samples, L), -1, dtype=np.int64)
    for b in nb.prange(B):
        n = lengths[b]
        alpha = np.empty((n, K))
        Tb = T[b % T.shape[0]]
        z = _log_forward(E[b], Tb, start, end, n, alpha)
        if z != NEG_INF:
            _sample_back(alpha, z, Tb, end, n, uniforms[b], paths[b])
    return paths


@nb.njit(cache=True, parallel=True)
def sample_from_alphas(T, end, lengths, alphas, logz, uniforms):
    """Backward sampling of every sequence from LOG forward values ``alphas`` (B, L, K) and
    log Z (B,): paths (B, n_samples, L), −1 past each length and where log Z = −inf."""
    B, L, K = alphas.shape
    paths = np.full((B, uniforms.shape[1], L), -1, dtype=np.int64)
    for b in nb.prange(B):
        if logz[b] != NEG_INF:
            _sample_back(alphas[b], logz[b], T[b % T.shape[0]], end, lengths[b], uniforms[b], paths[b])
    return paths
