"""Viterbi (the MAX-semiring forward, four rows per sweep, path by re-maximising one
column per position) and list-Viterbi k-best of dense chains (Seshadri & Sundberg 1994).
See :mod:`varorder.engine.chain`. ``_viterbi_small`` is the small-input path: checks and decodes a
batch of a few equal-length sequences in one compiled call, on the serial twin of ``_viterbi_kernel``."""

from __future__ import annotations

import numba as nb
import numpy as np

from varorder.engine.chain_generic import NEG_INF
from varorder.engine.chain_scaled import _FAST, _chunk
from varorder.engine.potential_scan import within
from varorder.engine.validate import _MAX_PATH_MAGNITUDE
from varorder.engine.threads import serial_twin

__all__ = []  # kernels for engine.chain only


# ---------------------------------------------------------------------------
# Viterbi, k-best, sampling
# ---------------------------------------------------------------------------


@nb.njit(cache=True, fastmath=_FAST)
def _max_vec_mat(d, M, out):
    """out[j] = maxᵢ d[i] + M[i, j] (−inf included: max is exact, so no special case).

    Four rows of M per sweep: a quarter of the loads and stores of ``out``, and the
    select-based max vectorises."""
    K = M.shape[1]
    n = M.shape[0]
    for j in range(K):
        out[j] = NEG_INF
    i = 0
    while i + 4 <= n:
        d0, d1, d2, d3 = d[i], d[i + 1], d[i + 2], d[i + 3]
        M0, M1, M2, M3 = M[i], M[i + 1], M[i + 2], M[i + 3]
        for j in range(K):
            v0 = d0 + M0[j]
            v1 = d1 + M1[j]
            v2 = d2 + M2[j]
            v3 = d3 + M3[j]
            v0 = v0 if v0 > v1 else v1
            v2 = v2 if v2 > v3 else v3
            v0 = v0 if v0 > v2 else v2
            o = out[j]
            out[j] = v0 if v0 > o else o
        i += 4
    while i < n:
        di = d[i]
        for j in range(K):
            v = di + M[i, j]
            out[j] = v if v > out[j] else out[j]
        i += 1


@nb.njit(cache=True, parallel=True)
def _viterbi_kernel(E, T, start, end, lengths, num_chunks, paths, scores):
    """Fills paths (B, L) (−1 past each length, and throughout a sequence with no path) and scores (B,)."""
    B, L, K = E.shape
    for c in nb.prange(num_chunks):
        lo, hi = _chunk(c, num_chunks, B)
        delta = np.empty((L, K))
        acc = np.empty(K)
        for b in range(lo, hi):
            n = lengths[b]
            for t in range(L):
                paths[b, t] = -1
            Tb = T[b % T.shape[0]]
            for j in range(K):
                delta[0, j] = start[j] + E[b, 0, j]
            for t in range(1, n):
                _max_vec_mat(delta[t - 1], Tb, acc)
                for j in range(K):
                    delta[t, j] = acc[j] + E[b, t, j]
            y = 0
            best = NEG_INF
            for j in range(K):
                v = delta[n - 1, j] + end[j]
                if v > best:
                    best = v
                    y = j
            scores[b] = best
            if best == NEG_INF:
                continue
            paths[b, n - 1] = y
            for t in range(n - 1, 0, -1):
                top = NEG_INF
                arg = 0
                for i in range(K):
                    v = delta[t - 1, i] + Tb[i, y]
                    if v > top:
                        top = v
                        arg = i
                y = arg
                paths[b, t - 1] = y


# the same loops without a parallel region (engine.chain decides with threads.runs_serial)
_viterbi_serial = serial_twin(_viterbi_kernel, cache=True)


@nb.njit(cache=True)
def _viterbi_small(E, T, start, end, paths, scores):
    """Viterbi of B sequences of the full length L under one shared (K, K) matrix into paths (B, L) and
    scores (B,), the checks of ``engine.chain.prepare`` included (NaN, +inf, a finite magnitude a path of
    2L + 1 potentials could overflow with): one compiled call where the checked path makes a dozen.
    Returns the number of sequences with no path, or −1 when the checks refuse the input (nothing
    written): the caller then takes the checked path, which names the entry."""
    B, L, K = E.shape
    limit = _MAX_PATH_MAGNITUDE / (2 * L + 1)
    if not (within(E, limit) and within(T, limit) and within(start, limit) and within(end, limit)):
        return -1
    _viterbi_serial(E, T.reshape((1, K, K)), start, end, np.full(B, L, dtype=np.int64), 1, paths, scores)
    impossible = 0
    for b in range(B):
        impossible += scores[b] == NEG_INF
    return impossible


@nb.njit(cache=True)
def _top_k(cand, k):
    """Indices of the k largest finite entries of cand, best first (stable); −1 pads."""
    order = np.argsort(-cand, kind="mergesort")
    out = np.full(k, -1, dtype=np.int64)
    for r in range(min(k, cand.shape[0])):
        idx = order[r]
        if cand[idx] == NEG_INF:
            break
        out[r] = idx
    return out


@nb.njit(cache=True, parallel=True)
def _kbest_kernel(E, T, start, end, lengths, k):
    B, L, K = E.shape
    paths = np.full((B, k, L), -1, dtype=np.int64)
    scores = np.full((B, k), NEG_INF)
    for b in nb.prange(B):
        n = lengths[b]
        Tb = T[b % T.shape[0]]
        sc = np.full((n, K, k), NEG_INF)
        bp = np.full((n, K, k), -1, dtype=np.int64)  # encodes prev_label * k + prev_rank
        for j in range(K):
            sc[0, j, 0] = start[j] + E[b, 0, j]
        cand = np.empty(K * k)
        for t in range(1, n):
            for j in range(K):
                if E[b, t, j] == NEG_INF:
                    continue
                for i in range(K):
                    for r in range(k):
                        cand[i * k + r] = sc[t - 1, i, r] + Tb[i, j]
                top = _top_k(cand, k)
                for r in range(k):
                    idx = top[r]
                    if idx < 0:
                        break
                    sc[t, j, r] = cand[idx] + E[b, t, j]
                    bp[t, j, r] = idx
        for j in range(K):
            for r in range(k):
                cand[j * k + r] = sc[n - 1, j, r] + end[j]
        top = _top_k(cand, k)
        for r in range(k):
            idx = top[r]
            if idx < 0:
                break
            scores[b, r] = cand[idx]
            j = idx // k
            rank = idx % k
            for t in range(n - 1, -1, -1):
                paths[b, r, t] = j
                if t > 0:
                    prev = bp[t, j, rank]
                    j = prev // k
                    rank = prev % k
    return paths, scores


