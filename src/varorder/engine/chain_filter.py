"""Filtered (causal) posteriors of dense chains over flat, ragged sequences — the LOG
specialisation of :func:`varorder.engine.chain.filtered` (factorization:
:mod:`varorder.engine.chain`).

For sequence s with start π, transitions A and emissions bₜ (all in exp space), the forward
values normalised per position,

    fₜ = αₜ / Σₖ αₜ(k),    α₁ = π ⊙ b₁,    αₜ = (αₜ₋₁ A) ⊙ bₜ,

are the filtered posteriors p(yₜ = k | x₁..ₜ) of an HMM (Rabiner 1989, §V.A: the scaled
forward variables α̂ₜ; the end potentials play no part). The definition is the generic LOG
forward of :mod:`varorder.engine.chain_generic` with its values normalised per position
(:func:`varorder.engine.chain_generic_ops.generic_filtered`); this kernel is tested equal to it.

Scaled pass: the forward of :mod:`varorder.engine.chain_statistics` (A exponentiated once,
shifted by its largest entry; each position's emissions shifted by their largest entry,
Cody–Waite exp of 32-position chunks; rows rescaled by exact powers of two) writes its rows
into the output, and each row is then divided by its sum, which makes it fₜ (the powers of
two are exact, so they change no bit of the result). For a matrix without zeros its guard
keeps every product above 1e-280, so no probability loses relative accuracy; a sequence
it refuses, and every sequence under a matrix with zeros, runs the log-space forward
instead (rows shifted to a largest entry of 0 every step). A prefix
without a path of nonzero weight gives NaN rows from its first such position on. Sequences
are split into chunks, a function of their number only (each row depends on its own
sequence alone, so the numbers are the same on any thread count). Every kernel is cached on
disk: a process's first call compiles nothing.
"""

from __future__ import annotations

import math

import numba as nb
import numpy as np

from varorder.engine.chain_generic import NEG_INF
from varorder.engine.chain_scaled import _CHUNK, _shifted_logsumexp_row
from varorder.engine.chain_statistics import _forward_pass, _sum
from varorder.engine.threads import parallel_kernel
import varorder._numba_start  # noqa: E402,F401,I001  (Numba's cache saves locked across processes)

__all__ = []  # kernels for engine.chain only


@nb.njit(cache=True)
def _log_filter(E, off, n, start, T, out, prev, cur, row):
    """fₜ of one sequence by the log-space forward, each row shifted to a largest entry of 0 (``prev``, ``cur``,
    ``row``: K scratch); NaN rows from the first position whose prefix has no path. Returns whether it has one."""
    K = E.shape[1]
    for t in range(n):
        if t == 0:
            for j in range(K):
                cur[j] = start[j] + E[off, j]
        else:
            for j in range(K):
                for i in range(K):
                    row[i] = prev[i] + T[i, j]
                m, ls = _shifted_logsumexp_row(row)
                cur[j] = m + ls + E[off + t, j] if m != NEG_INF else NEG_INF
        top = NEG_INF
        for j in range(K):
            top = max(top, cur[j])
        if top == NEG_INF:
            for u in range(t, n):
                for j in range(K):
                    out[off + u, j] = np.nan
            return False
        total = 0.0
        for j in range(K):
            prev[j] = cur[j] - top
            v = math.exp(prev[j])
            out[off + t, j] = v
            total += v
        inv = 1.0 / total
        for j in range(K):
            out[off + t, j] *= inv
    return True


@parallel_kernel(lambda E, offsets, *_: offsets.size - 1, cache=True)
def filter_kernel(E, offsets, start, expT, T, guard, scaled, chunks, out, ok):
    """fₜ of every sequence (flat rows: sequence s is E[offsets[s]:offsets[s + 1]]) into out (N, K); ok[s]:
    whether the sequence has a path. ``scaled``: try the exp-space pass first (a matrix without zeros)."""
    S = offsets.size - 1
    K = E.shape[1]
    for c in nb.prange(chunks):
        s0 = c * S // chunks
        s1 = (c + 1) * S // chunks
        longest = 0
        for s in range(s0, s1):
            longest = max(longest, offsets[s + 1] - offsets[s])
        wbuf = np.empty(_CHUNK * K)
        ev = np.empty(longest * K if scaled else 0)
        bits = np.empty(_CHUNK * K, dtype=np.int64)
        prev = np.empty(K)
        cur = np.empty(K)
        row = np.empty(K)
        for s in range(s0, s1):
            off = offsets[s]
            n = offsets[s + 1] - off
            rows = out[off:off + n]
            if scaled and _forward_pass(E, off, n, start, expT, guard, True, ev, rows.reshape(-1), wbuf, bits)[3]:
                for t in range(n):  # the rows, scaled by powers of two, normalised
                    inv = 1.0 / _sum(rows[t])
                    for j in range(K):
                        rows[t, j] *= inv
                ok[s] = True
            else:
                ok[s] = _log_filter(E, off, n, start, T, out, prev, cur, row)
    return out
