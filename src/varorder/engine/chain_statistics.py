"""Expected sufficient statistics of dense chains over flat, ragged sequences: the scaled
forward–backward of each sequence with the statistics summed in its backward pass — the LOG
specialisation of :func:`varorder.engine.chain.statistics` (factorization:
:mod:`varorder.engine.chain`).

Baum–Welch's E-step (Baum et al. 1970; Rabiner 1989, §III.C and the scaling of §V.A, which
is hmmlearn's ``"scaling"``): for sequence s (weight wₛ) with forward values α and backward
values β in exp space,

    γₜ = αₜ ⊙ βₜ / (αₜ · βₜ),    ξₜ(i, j) = αₜ(i) A(i, j) bₜ₊₁(j) βₜ₊₁(j) / (αₜ · βₜ),

and the statistics Σₛ wₛ γₛ,₀ (start), Σₛ wₛ Σₜ ξₜ (transitions), Σₛ wₛ Σₜ γₜ (occupancy)
and Σₛ wₛ Σₜ γₜ ⊗ Fₜ for caller-given per-position features F (N, P): the moments of an
exponential-family emission, e.g. [x, x²] for diagonal Gaussians. Node posteriors are
written out only on request (else into the sequence's scratch); ξ is never stored: Σₜ ξₜ =
A ⊙ Σₜ Uₜᵀ Vₜ₊₁ with U and V overwriting the forward values and exp-emissions as the backward
passes them, one GEMM per sequence (and one for the features).

Scaling: A is exponentiated once, shifted by its largest entry; each position's emissions
are shifted by their largest entry (one Cody–Waite exp per entry, chunks of 32 positions);
α and β rows are rescaled by exact powers of two; log Z = Σ shifts (compensated sum) +
ln 2 · Σ exponents + log(α_last · exp end). For a matrix without zeros every forward entry
is at least ½ · min A · exp(row's smallest − largest emission) and every backward entry at
least (min A)² / 2K of its row's sum, so a sequence is handed back (``ok`` False: the caller
runs the generic recursion, with its log-space fallback) only when a row's emission range
could take a product under 1e-280 — the same guard as the blocked kernels'. Matrices with
zeros never come here. Sequences are split into at most 64 chunks, a function of their
number only, each summed on its own and the chunks in order: the same numbers on any
thread count.
"""

from __future__ import annotations

import math

import numba as nb
import numpy as np

from varorder.engine.chain_generic import NEG_INF, _TINY
from varorder.engine.chain_scaled import _CHUNK, _FAST_REDUCE, _exp_into, _pow2_scale
from varorder.engine.threads import parallel_kernel
import varorder._numba_start  # noqa: E402,F401,I001  (Numba's cache saves locked across processes)

__all__ = []  # kernels for engine.chain only

# the most chunks of sequences a call is split into (a function of the number of sequences only)
_MAX_CHUNKS = 64
_LN2 = 0.6931471805599453
_LOG_TINY = math.log(_TINY)


def num_chunks(num_sequences: int) -> int:
    return max(1, min(num_sequences, _MAX_CHUNKS))


def emission_guard(min_expT: float, K: int) -> float:
    """The smallest (row's smallest finite log-emission − its largest) the scaled pass accepts: every product it
    forms then stays above 1e-280 (module docstring)."""
    return _LOG_TINY - 2.0 * math.log(min_expT) + math.log(4.0 * K)


@nb.njit(cache=True, fastmath=_FAST_REDUCE)
def _sum(x):
    """Σ x (a loop that stores nothing: reassociated, the same bits wherever x lies)."""
    s = 0.0
    for j in range(x.shape[0]):
        s += x[j]
    return s


@nb.njit(cache=True, fastmath=_FAST_REDUCE)
def _dot(x, y):
    s = 0.0
    for j in range(x.shape[0]):
        s += x[j] * y[j]
    return s


@nb.njit(cache=True)
def _row_times_matrix(x, M, out):
    """out = x @ M (M (K, K) C-contiguous): rows of M scaled and added four at a time (plain arithmetic,
    the same bits in vector and scalar code)."""
    K = M.shape[1]
    n = M.shape[0]
    for j in range(K):
        out[j] = 0.0
    i = 0
    while i + 4 <= n:
        x0, x1, x2, x3 = x[i], x[i + 1], x[i + 2], x[i + 3]
        for j in range(K):
            out[j] += (x0 * M[i, j] + x1 * M[i + 1, j]) + (x2 * M[i + 2, j] + x3 * M[i + 3, j])
        i += 4
    while i < n:
        xi = x[i]
        for j in range(K):
            out[j] += xi * M[i, j]
        i += 1


@nb.njit(cache=True)
def _forward_pass(E, off, n, start, expT, guard, keep, ev, alpha, wbuf, bits):
    """The scaled forward of one sequence, emissions exponentiated chunk by chunk: evₜ = exp(E[off + t] (+ start
    at t = 0) − mₜ), mₜ the row's largest entry; αₜ = (αₜ₋₁ expT) ⊙ evₜ rescaled by a power of two. With
    ``keep`` ev and alpha (flat) receive every row (t·K); without, ev holds one chunk and alpha two rows.
    Returns (Σ mₜ with Kahan's compensation, Σ exponents taken out, offset of the last α row, whether every row
    has a finite entry and a range above ``guard``: False hands the sequence back)."""
    K = E.shape[1]
    total = 0.0
    comp = 0.0
    exponents = 0
    prev = 0
    for t0 in range(0, n, _CHUNK):
        t1 = min(n, t0 + _CHUNK)
        for t in range(t0, t1):
            base = (t - t0) * K
            hi = NEG_INF
            lo = np.inf
            for j in range(K):
                x = E[off + t, j] + start[j] if t == 0 else E[off + t, j]
                wbuf[base + j] = x
                hi = max(hi, x)
                lo = min(lo, x if x != NEG_INF else np.inf)
            if hi == NEG_INF or lo - hi < guard:
                return 0.0, 0, 0, False
            for j in range(K):
                wbuf[base + j] -= hi
            y = hi - comp
            summed = total + y
            comp = (summed - total) - y
            total = summed
        e0 = t0 * K if keep else 0
        _exp_into(wbuf[:(t1 - t0) * K], ev[e0:e0 + (t1 - t0) * K], bits)
        for t in range(t0, t1):
            e = e0 + (t - t0) * K
            a = t * K if keep else (t & 1) * K
            cur = alpha[a:a + K]
            if t == 0:
                for j in range(K):
                    cur[j] = ev[e + j]
            else:
                _row_times_matrix(alpha[prev:prev + K], expT, cur)
                for j in range(K):
                    cur[j] *= ev[e + j]
            f, x = _pow2_scale(_sum(cur))
            for j in range(K):
                cur[j] *= f
            exponents += x
            prev = a
    return total - comp, exponents, prev, True


@nb.njit(cache=True)
def _backward_statistics(E, off, n, weight, ev, alpha, gamma, expT_t, exp_end, F, occupancy, start_acc, xi_acc,
                         feat_acc, beta, beta_new, outer, outer_f):
    """The scaled backward of one sequence and its statistics, weighted by ``weight`` (module docstring): γ rows
    into ``gamma`` (flat, n·K: the caller's node rows or scratch), occupancy, start_acc; then Σₜ Uₜᵀ Vₜ₊₁ (ξ
    before ⊙ expT, which the caller applies) into xi_acc and Σₜ γₜ ⊗ Fₜ into feat_acc, one GEMM each. Uₜ =
    αₜ · fₜ₊₁ / (αₜ · βₜ) overwrites αₜ and Vₜ = evₜ ⊙ βₜ overwrites evₜ once the step has read them."""
    K = expT_t.shape[0]
    P = F.shape[1]
    for j in range(K):
        beta[j] = exp_end[j]
    f_next = 1.0
    for t in range(n - 1, -1, -1):
        a = alpha[t * K:(t + 1) * K]
        g = gamma[t * K:(t + 1) * K]
        inv = 1.0 / _dot(a, beta)
        for j in range(K):
            g[j] = (a[j] * beta[j]) * inv
        for j in range(K):
            occupancy[j] += g[j] * weight
        if t == 0:
            for j in range(K):
                start_acc[j] += g[j] * weight
        scale = f_next * inv
        for i in range(K):
            a[i] *= scale
        if t > 0:
            v = ev[t * K:(t + 1) * K]
            for j in range(K):
                v[j] *= beta[j]
            _row_times_matrix(v, expT_t, beta_new)
            f, _ = _pow2_scale(_sum(beta_new))
            for j in range(K):
                beta[j] = beta_new[j] * f
            f_next = f
    if n > 1:
        np.dot(alpha[:(n - 1) * K].reshape((n - 1, K)).T, ev[K:n * K].reshape((n - 1, K)), outer)
        for i in range(K):
            for j in range(K):
                xi_acc[i, j] += outer[i, j] * weight
    if P > 0:
        np.dot(gamma[:n * K].reshape((n, K)).T, F[off:off + n], outer_f)
        for i in range(K):
            for p in range(P):
                feat_acc[i, p] += outer_f[i, p] * weight


@parallel_kernel(lambda E, offsets, *_: offsets.size - 1, cache=True)
def statistics_kernel(E, offsets, start, expT, expT_t, tshift, guard, exp_end, end_shift, weights, F, want_backward,
                      want_node, node, chunks, scratch, scratch_at, parts, logz, ok, occupancy, start_acc, xi_acc,
                      feat_acc):
    """log Z and ok per sequence; with ``want_backward`` the chunks' statistics (occupancy (chunks, K),
    start_acc (chunks, K), xi_acc (chunks, K, K) — Σ Uᵀ V, before ⊙ expT — and feat_acc (chunks, K, P)) and,
    with ``want_node``, the posteriors into node (N, K). Sequences with ok False contribute nothing. Chunk c
    keeps its forward values, exp-emissions and (``parts`` = 3) posteriors in scratch[scratch_at[c]:scratch_at[c +
    1]] (``parts`` · its longest sequence · K; :func:`scratch_layout`); the forward alone needs no scratch."""
    S = offsets.size - 1
    K = E.shape[1]
    P = F.shape[1]
    for c in nb.prange(chunks):
        s0 = c * S // chunks
        s1 = (c + 1) * S // chunks
        if want_backward:
            lo = scratch_at[c]
            part = (scratch_at[c + 1] - lo) // parts
            alpha = scratch[lo:lo + part]
            ev = scratch[lo + part:lo + 2 * part]
            gamma_scratch = scratch[lo + 2 * part:lo + 3 * part] if parts == 3 else scratch[lo:lo]
        else:
            alpha = np.empty(2 * K)
            ev = np.empty(_CHUNK * K)
            gamma_scratch = alpha[:0]
        wbuf = np.empty(_CHUNK * K)
        bits = np.empty(_CHUNK * K, dtype=np.int64)
        beta = np.empty(K)
        beta_new = np.empty(K)
        outer = np.empty((K, K))
        outer_f = np.empty((K, P))
        for s in range(s0, s1):
            off = offsets[s]
            n = offsets[s + 1] - off
            shift, exponents, last, fine = _forward_pass(E, off, n, start, expT, guard, want_backward, ev, alpha,
                                                         wbuf, bits)
            ok[s] = fine
            if not fine:
                logz[s] = NEG_INF
                continue
            z = _dot(alpha[last:last + K], exp_end)
            logz[s] = shift + (n - 1) * tshift + _LN2 * exponents + (math.log(z) + end_shift)
            if want_backward:
                gamma = node[off:off + n].reshape(-1) if want_node else gamma_scratch
                _backward_statistics(E, off, n, weights[s], ev, alpha, gamma, expT_t, exp_end, F, occupancy[c],
                                     start_acc[c], xi_acc[c], feat_acc[c], beta, beta_new, outer, outer_f)
    return logz


def scratch_layout(lengths: np.ndarray, K: int, chunks: int, parts: int) -> np.ndarray:
    """Offsets (chunks + 1,) of each chunk's part of the kernel's scratch: ``parts`` · its longest sequence · K."""
    S = lengths.size
    starts = np.arange(chunks) * S // chunks
    longest = np.maximum.reduceat(lengths, starts)
    return np.concatenate([[0], np.cumsum(parts * longest * K)]).astype(np.int64)


class Workspace:
    """Scratch the statistics kernel reuses across calls (an EM loop's iterations): its forward values and
    exp-emissions, 2 · N · K doubles for one sequence of N positions. Fresh memory of that size costs page
    faults on every call (a third of the kernel's time at N = 10⁵, K = 45); a workspace pays them once.
    Dropped with its owner; one per thread (calls sharing one must not overlap)."""

    def __init__(self):
        self.buffer = np.empty(0)

    def take(self, size: int) -> np.ndarray:
        if self.buffer.size < size:
            self.buffer = np.empty(size)
        return self.buffer
