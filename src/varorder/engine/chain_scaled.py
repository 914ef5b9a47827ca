"""The scaled exp-space LOG recursion's primitives (Cody–Waite exp, integer-key maxima,
row products rescaled by exact powers of two, blocks of sequences): the fast path of
:func:`varorder.engine.chain.log_partition` and ``marginals``, a registered
specialisation of the generic LOG recursion (:mod:`varorder.engine.chain_generic`);
and the row-shifted log-space forward that both hand a sequence to when its scaled
products could underflow. Factorization and the scaling scheme: :mod:`varorder.engine.chain`."""

from __future__ import annotations

import math

import numba as nb
import numpy as np

from varorder.engine.chain_generic import NEG_INF
import varorder._numba_start  # noqa: E402,F401,I001  (Numba's cache saves locked across processes)

__all__ = []  # kernels for engine.chain only


# ---------------------------------------------------------------------------
# scaled exp-space kernels (LOG semiring fast path), blocked over sequences
# ---------------------------------------------------------------------------
#
# Sequences are ordered by decreasing length (stably) and cut into blocks of at
# most _block_size(K) consecutive ones; a block advances position by position, so
# with a shared transition matrix each step is one (rows, K)·(K, K) BLAS product
# over the rows still running (a prefix, thanks to the order). The blocks depend
# only on the lengths, never on the thread count, so every BLAS call — and hence
# every bit of the result — is the same on any number of threads. Rows are scaled
# by exact powers of two (no rounding, no log per step); per-element work runs in
# fused, branch-free loops that LLVM vectorises.


# Cody–Waite constants for exp(x) = 2**k · exp(r), |r| ≤ ln2 / 2.
_LN2_HI = 6.93147180369123816490e-01
_LN2_LO = 1.90821492927058770002e-10
_INV_LN2 = 1.44269504088896338700e00
_LN2 = 0.6931471805599453
# Shifted log-weights below this are treated as a possible underflow (fallback).
_MIN_SHIFTED = -600.0
_MIN_EXP = float(np.exp(_MIN_SHIFTED))
# Arithmetic-only flags: no 'nnan'/'ninf', so −inf keeps its meaning.
_FAST = {"nsz", "arcp", "contract"}
_FAST_REDUCE = {"nsz", "arcp", "contract", "reassoc"}


@nb.njit(cache=True, fastmath=_FAST)
def _exp_into(w, out, bits):
    """out[j] = exp(w[j]), exactly 0 where w[j] = −inf.

    Valid for w in [−700, 700]; callers keep w ≤ 0 or |w| ≤ 100 (``_emission_low``) and
    route anything below −600 to the log-space path. A Cody–Waite reduction, a degree-13 Taylor polynomial
    (relative error < 4e-16) and a 2**k built from exponent bits: branch-free arithmetic
    LLVM vectorises, unlike a call to libm's exp. ``bits`` is int64 scratch (≥ len(w)).
    """
    K = w.shape[0]
    for j in range(K):
        v = max(w[j], -700.0)
        k = np.floor(v * _INV_LN2 + 0.5)
        bits[j] = (np.int64(np.int32(k)) + 1023) << 52
        r = (v - k * _LN2_HI) - k * _LN2_LO
        out[j] = 1.0 + r * (1.0 + r * (0.5 + r * (1.0 / 6 + r * (1.0 / 24 + r * (1.0 / 120 + r * (
            1.0 / 720 + r * (1.0 / 5040 + r * (1.0 / 40320 + r * (1.0 / 362880 + r * (
                1.0 / 3628800 + r * (1.0 / 39916800 + r * (1.0 / 479001600))))))))))))
    scale = bits[:K].view(np.float64)
    for j in range(K):
        out[j] = out[j] * scale[j] if w[j] != NEG_INF else 0.0


# Doubles as int64 keys that order like the doubles (sign-magnitude → two's complement):
# row maxima and minima become integer reductions, which LLVM vectorises.
_ABS_MASK = np.int64(0x7FFFFFFFFFFFFFFF)
_KEY_NEG_INF = np.int64(-0x7FF0000000000001)
_KEY_MAX = np.int64(0x7FFFFFFFFFFFFFFF)
_KEY_MIN = np.int64(-0x7FFFFFFFFFFFFFFF - 1)


# marginals keep every backward plane (and write node marginals after the backward) while
# a block's planes hold at most this many doubles each
_KEEP_BACKWARD = 1 << 16
# positions whose shifted log-emissions are prepared (and exponentiated) together
_CHUNK = 32


@nb.njit(cache=True)
def _key_range(bits):
    """(largest key, smallest key of a finite value) of the doubles viewed by the 1-d int64
    array ``bits``; a function of its own, over a view indexed from 0 (no wraparound test
    per element), so that LLVM vectorises the two integer reductions."""
    hi = _KEY_MIN
    lo = _KEY_MAX
    for k in range(bits.shape[0]):
        x = bits[k]
        key = x ^ ((x >> 63) & _ABS_MASK)
        hi = max(hi, key)
        lo = min(lo, key if key != _KEY_NEG_INF else _KEY_MAX)
    return hi, lo


@nb.njit(cache=True, fastmath=_FAST)
def _shift_into(x, m, out):
    """out = x − m (views indexed from 0, so the loop vectorises)."""
    for k in range(x.shape[0]):
        out[k] = x[k] - m


@nb.njit(cache=True, fastmath=_FAST)
def _exp_chunk(Eflat, Ebits, L, seqs, lengths, t0, t1, start, tshift, per_row, emission_low, w, wbits, ev, ev_p0,
               ev_stride, bits, conv, convf, row_max, row_low):
    """Exp-emissions of positions t0 ≤ t < t1 of each sequence of the block.

    Row x_t = E[seqs[s], t] (+ start at t = 0) becomes ev[ev_p0 + s·ev_stride + (t − t0)·K
    + j] = exp(x_tj − m) and row_max[t − t0, s] = m plus, after the first position, the
    transition shift (tshift[s or 0]) — the log of the factor the scaled recursion divides
    out; row_low[t − t0, s] bounds the smallest finite x − (the row's largest x) from below
    (≤ 0), the underflow guard's input.

    With emission_low ≤ 0 (``_emission_low``: potentials small enough) m = 0 and row_low =
    emission_low: one exp per entry and nothing else. Otherwise m is one shift for the
    whole chunk of a sequence (its largest entry; position 0, which adds start, gets its
    own), row_low the chunk's smallest finite x − m, and row_max −inf when every entry of
    the chunk is −inf (log Z = −inf).

    Per sequence a chunk is one contiguous run of E, so the maximum (an integer reduction
    over the bit patterns: ``Ebits``/``wbits`` are int64 views, ``convf`` the float64 view
    of ``conv``), the shift and the exp are each one flat loop over it, on views indexed
    from 0 (a loop per K-entry row would leave most of each row to scalar remainder code,
    and an offset index to a wraparound test per element)."""
    K = start.shape[0]
    direct = emission_low <= 0.0
    for s in range(seqs.shape[0]):
        b = seqs[s]
        te = min(t1, lengths[b])
        if te <= t0:
            continue
        c = tshift[s if per_row else 0]
        n = (te - t0) * K
        base = (b * L + t0) * K
        e0 = ev_p0 + s * ev_stride
        x = Eflat[base:base + n]
        first = 0
        if t0 == 0:
            for j in range(K):
                w[j] = x[j] + start[j]
            m = 0.0
            low = emission_low
            if not direct:
                hi, lo = _key_range(wbits[:K])
                conv[0] = hi ^ ((hi >> 63) & _ABS_MASK)
                conv[1] = lo ^ ((lo >> 63) & _ABS_MASK)
                m = convf[0]
                low = 0.0 if m == NEG_INF else convf[1] - m
                if m != NEG_INF:
                    for j in range(K):
                        w[j] = w[j] - m
            row_max[0, s] = m
            row_low[0, s] = low
            first = K
            if direct:
                _exp_into(w[:K], ev[e0:e0 + K], bits)
        if n > first:
            m = 0.0
            low = emission_low
            if not direct:
                hi, lo = _key_range(Ebits[base + first:base + n])
                conv[0] = hi ^ ((hi >> 63) & _ABS_MASK)
                conv[1] = lo ^ ((lo >> 63) & _ABS_MASK)
                m = convf[0]
                low = 0.0 if m == NEG_INF else convf[1] - m
            for p in range(first // K, te - t0):
                row_max[p, s] = m if m == NEG_INF else m + c
                row_low[p, s] = low
            if direct:
                _exp_into(x[first:], ev[e0 + first:e0 + n], bits)
            elif m == NEG_INF:
                for k in range(first, n):
                    w[k] = m
            else:
                _shift_into(x[first:], m, w[first:n])
        if not direct:
            _exp_into(w[:n], ev[e0:e0 + n], bits)


@nb.njit(cache=True, fastmath=_FAST_REDUCE)
def _product_rows(acc, ev, p, out, nact, alive, shared, dense, totals, smalls):
    """out[s] = acc[s] ⊙ ev[s, p] for the running rows (ev is (rows, positions, K)); totals[s]
    = Σ out[s]; smalls[s] = the smallest product whose factors are both nonzero (an
    underflow if tiny), tracked only for matrices with zeros (1 otherwise)."""
    K = out.shape[1]
    for s in range(nact):
        if not alive[s]:
            continue
        total = 0.0
        small = 1.0
        if dense[0 if shared else s]:
            for j in range(K):
                r = acc[s, j] * ev[s, p, j]
                out[s, j] = r
                total += r
        else:
            for j in range(K):
                r = acc[s, j] * ev[s, p, j]
                out[s, j] = r
                total += r
                small = r if ((r < small) & (acc[s, j] > 0.0) & (ev[s, p, j] > 0.0)) else small
        totals[s] = total
        smalls[s] = small


@nb.njit(cache=True)
def _pow2_scale(total):
    """(2**−e, e) with total·2**−e in [0.5, 1): an exact rescaling."""
    _, e = math.frexp(total)
    return math.ldexp(1.0, -e), e


@nb.njit(cache=True, fastmath=_FAST)
def _vec_mat_rows(x, M, out, rows, alive):
    """out[s] = x[s] @ M[s] for s < rows with alive[s] (per-sequence matrices; rows of M
    contiguous, so the inner loop vectorises; plain indexing, no per-row views)."""
    K = M.shape[2]
    n = M.shape[1]
    for s in range(rows):
        if not alive[s]:
            continue
        for j in range(K):
            out[s, j] = 0.0
        i = 0
        while i + 4 <= n:  # four rows of M per sweep: a quarter of the loads and stores of out
            x0, x1, x2, x3 = x[s, i], x[s, i + 1], x[s, i + 2], x[s, i + 3]
            for j in range(K):
                out[s, j] += (x0 * M[s, i, j] + x1 * M[s, i + 1, j]) + (x2 * M[s, i + 2, j] + x3 * M[s, i + 3, j])
            i += 4
        while i < n:
            xi = x[s, i]
            for j in range(K):
                out[s, j] += xi * M[s, i, j]
            i += 1


@nb.njit(cache=True)
def _flat_key_max(bits):
    """Largest key (double order) of a 1-d int64 view of doubles; an integer reduction LLVM vectorises."""
    hi = _KEY_MIN
    for k in range(bits.shape[0]):
        x = bits[k]
        hi = max(hi, x ^ ((x >> 63) & _ABS_MASK))
    return hi


@nb.njit(cache=True)
def _flat_positive_min(bits):
    """(bit pattern of the smallest positive entry, number of zero entries) of a 1-d int64
    view of non-negative doubles (their bit patterns order like the values)."""
    lo = _KEY_MAX
    zeros = 0
    for k in range(bits.shape[0]):
        x = bits[k]
        zeros += x == 0
        lo = min(lo, x if x != 0 else _KEY_MAX)
    return lo, zeros


@nb.njit(cache=True, fastmath=_FAST)
def _exp_matrix(T, expT, w, bits, conv, convf):
    """expT = exp(T − c), c the largest finite entry (0 if none); returns (c, the smallest
    nonzero entry — 1 if none, 0 if some finite entry lies more than 600 nats below c, so
    that the scaled path must not be used — and whether no entry is zero). Like
    ``_exp_transitions``, for one matrix inside a kernel, in flat vectorised passes;
    w (float64) and bits (int64) are scratch of K² entries, convf the float64 view of conv."""
    t_flat = T.reshape(-1)
    e_flat = expT.reshape(-1)
    n = t_flat.shape[0]
    hi = _flat_key_max(t_flat.view(np.int64))
    conv[0] = hi ^ ((hi >> 63) & _ABS_MASK)
    c = convf[0]
    if c == NEG_INF:
        c = 0.0
    for k in range(n):
        w[k] = t_flat[k] - c
    _exp_into(w[:n], e_flat, bits)
    lo, zeros = _flat_positive_min(e_flat.view(np.int64))
    conv[0] = lo
    smallest = convf[0] if lo != _KEY_MAX else 1.0
    if smallest < _MIN_EXP:  # a finite entry more than 600 nats below c (exp clamps at −700)
        smallest = 0.0
    return c, smallest, zeros == 0


@nb.njit(cache=True)
def _chunk(c, num_chunks, B):
    """[lo, hi) of chunk c when B sequences are split into num_chunks parts."""
    return c * B // num_chunks, (c + 1) * B // num_chunks


@nb.njit(cache=True)
def _block_bounds(k, num_blocks, B):
    """[lo, hi) of block k (in the length order) when B sequences form num_blocks blocks."""
    return k * B // num_blocks, (k + 1) * B // num_blocks


@nb.njit(cache=True)
def _plane(buf, t, rows, stride, K):
    """Rows [0, rows) of position t in a flat (positions, stride, K) buffer, as a C-contiguous (rows, K) view."""
    lo = t * stride * K
    return buf[lo:lo + rows * K].reshape((rows, K))




# ---------------------------------------------------------------------------
# the log-space path a sequence is handed to when its scaled products could underflow
# ---------------------------------------------------------------------------


# exp(d) is exactly 0.0 in double precision for every d below this: a sum's terms there are skipped
# without an exp (the log-space paths run at extreme weights, e.g. an optimiser's overshooting trial
# point, where most terms of each row lie thousands below its maximum), and the sum is unchanged
_EXP_UNDERFLOW = -746.0


@nb.njit(cache=True)
def _shifted_logsumexp_row(x):
    """(largest entry m of x, log Σ exp(x − m)); m = −inf when every entry is −inf."""
    m = NEG_INF
    for j in range(x.shape[0]):
        m = max(m, x[j])
    if m == NEG_INF:
        return m, 0.0
    s = 0.0
    for j in range(x.shape[0]):
        d = x[j] - m
        if d > _EXP_UNDERFLOW:
            s += np.exp(d)
    return m, np.log(s)


@nb.njit(cache=True)
def _normalised_log_forward(E, T, start, end, n, a, row):
    """The log-space forward with every row shifted to a largest entry of 0: a[t] = log
    alpha[t] − (its maximum); returns log Z, −inf if no path has a nonzero weight.

    Unshifted, log alpha[t] grows like t (|log alpha| ≈ 5·10⁴ at L = 10⁴), and each
    entry's rounding (ε·|log alpha|, independent per label) becomes noise in the row's
    shape that per-position normalisation cannot remove: node marginals 1.5e-11 relative
    off at L = 10⁴. Shifted rows keep every rounding at ε times the row's
    own spread; the shifts are summed with Kahan's compensation for log Z. ``row`` is
    K scratch."""
    K = E.shape[1]
    for j in range(K):
        row[j] = start[j] + E[0, j]
    total = 0.0
    comp = 0.0
    for t in range(n):
        if t > 0:
            for j in range(K):
                for i in range(K):
                    row[i] = a[t - 1, i] + T[i, j]
                m, ls = _shifted_logsumexp_row(row)
                a[t, j] = m + ls + E[t, j] if m != NEG_INF else NEG_INF
            for j in range(K):
                row[j] = a[t, j]
        m = NEG_INF
        for j in range(K):
            m = max(m, row[j])
        if m == NEG_INF:
            return NEG_INF
        for j in range(K):
            a[t, j] = row[j] - m
        y = m - comp
        summed = total + y
        comp = (summed - total) - y
        total = summed
    for j in range(K):
        row[j] = a[n - 1, j] + end[j]
    m, ls = _shifted_logsumexp_row(row)
    if m == NEG_INF:
        return NEG_INF
    return total + (m + ls - comp)
