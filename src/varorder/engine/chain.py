"""Exact inference on dense first-order chains (linear-chain CRFs, HMMs, MEMMs).

Factorization. A batch holds B sequences over K labels, padded to length L.
For sequence b with length n = lengths[b], a path y₁ … yₙ scores

    s(y) = start[y₁] + Σₜ emissions[b, t, yₜ] + Σₜ₌₂ⁿ transitions[yₜ₋₁, yₜ] + end[yₙ]

and p(y) = exp(s(y) − log Z). Labels forbidden by ``allowed`` get −inf
emissions; any −inf potential is a hard zero. A sequence with no finite path
has log Z = −inf (never NaN); ``viterbi`` returns score −inf and path −1.

Algorithms (Rabiner 1989; Lafferty et al. 2001; CS287 "Sequence Models 4"):

* forward/backward in any log-domain semiring from
  :mod:`varorder.engine.semiring` (one kernel, specialised per ⊕);
* for the LOG semiring a faster *scaled* exp-space recursion (as in CRFsuite
  and hmmlearn's "scaling" implementation): transitions are exponentiated once
  per matrix, shifted by their largest entry; each step multiplies by the
  exp-transitions and the exp-emissions (exponentiated once per entry, unshifted
  when the validated magnitudes allow, else shifted per chunk of positions) and
  rescales the row by an exact power of two (no rounding, no log per step). Sequences advance in
  blocks, so with shared transitions a step is one small BLAS product for the
  whole block. A bound on the smallest product each step forms (one scalar test
  per step for matrices without zeros, a per-element minimum otherwise) routes
  a sequence whose potentials could underflow (a dynamic range of hundreds of
  nats) to the log-space kernel, so the fast path never trades accuracy for
  speed;
* Viterbi is the MAX-semiring forward pass; the path is recovered by
  re-maximising one column per position, so no back-pointer table is stored;
* k-best is list Viterbi (Seshadri & Sundberg 1994): a sorted top-k list per
  (position, label);
* sampling is forward filtering, backward sampling with uniforms drawn from a
  seeded NumPy generator, so results do not depend on thread scheduling;
* entropy is log Z − E[s(y)], the expectation taken with the marginals.

Kernels run one chunk of sequences (or of blocks) per Numba ``prange``
iteration; blocks and reductions never depend on the thread count, so neither do
the results.
"""

from __future__ import annotations

import math

import numba as nb
import numpy as np

from varorder.engine.semiring import LOG, MAX, Semiring, log_plus, max_plus
from varorder.engine.threads import uses_engine_threads
from varorder.engine.validate import (as_potentials, as_rng, check_int_at_least, check_no_overflow, first_index,
                                      potentials_and_bound)

__all__ = [
    "ChainInput",
    "prepare",
    "log_partition",
    "viterbi",
    "marginals",
    "sample",
    "kbest",
    "entropy",
    "forward_values",
]

NEG_INF = -np.inf
# Products below this bound are treated as a potential underflow: the scaled
# recursion stops and the sequence is redone in log space.
_TINY = 1e-280


# ---------------------------------------------------------------------------
# input preparation
# ---------------------------------------------------------------------------


class ChainInput:
    """Validated, float64, C-contiguous chain potentials (``allowed`` folded in).

    ``transitions`` is always 3-d, (1, K, K) when shared by the batch or
    (B, K, K) per sequence; kernels read ``transitions[b if per-sequence else 0]``.
    ``emission_bound`` bounds |emissions| + |start| and ``transition_bound`` |transitions|
    over their finite entries (found by the validation pass).
    """

    __slots__ = ("emissions", "transitions", "start", "end", "lengths", "emission_bound", "transition_bound")

    def __init__(self, emissions, transitions, start, end, lengths, emission_bound=np.inf, transition_bound=np.inf):
        self.emissions = emissions
        self.transitions = transitions
        self.start = start
        self.end = end
        self.lengths = lengths
        self.emission_bound = emission_bound
        self.transition_bound = transition_bound

    @property
    def shape(self) -> tuple[int, int, int]:
        return self.emissions.shape


def prepare(emissions, transitions, start=None, end=None, lengths=None, allowed=None) -> ChainInput:
    """Validate chain arguments; raise ValueError naming the offending argument."""
    raw_e = np.asarray(emissions)
    # a path adds 2L + 1 potentials; with no mask to apply, the overflow test rides on the
    # validation pass (large emission arrays are read once)
    terms = 2 * raw_e.shape[1] + 1 if raw_e.ndim == 3 else None
    E, e_top = potentials_and_bound("emissions", raw_e, (None, None, None), terms if allowed is None else None)
    B, L, K = E.shape
    if L < 1:
        raise ValueError(f"emissions must have at least one position (L >= 1), got shape {E.shape}")
    if K < 1:
        raise ValueError(f"emissions must have at least one label (K >= 1), got shape {E.shape}")
    T = np.asarray(transitions)
    T, t_top = potentials_and_bound("transitions", T, (B, K, K) if T.ndim == 3 else (K, K), terms)
    T = T if T.ndim == 3 else T[None]
    S, s_top = (np.zeros(K), 0.0) if start is None else potentials_and_bound("start", start, (K,), terms)
    F = np.zeros(K) if end is None else as_potentials("end", end, (K,), terms)
    if lengths is None:
        n = np.full(B, L, dtype=np.int64)
    else:
        raw = np.asarray(lengths)
        if raw.shape != (B,):
            raise ValueError(f"lengths must have shape ({B},), got {raw.shape}")
        if raw.dtype == np.bool_:
            raise ValueError("lengths must hold integers, got booleans")
        if raw.size and not np.issubdtype(raw.dtype, np.integer):
            if not np.issubdtype(raw.dtype, np.floating) or not np.all(np.isfinite(raw)) or not np.all(raw == np.round(raw)):
                raise ValueError(f"lengths must hold integers, got dtype {raw.dtype}")
        n = raw.astype(np.int64)
        bad = (n < 1) | (n > L)
        if bad.any():
            b = first_index(bad)[0]
            raise ValueError(f"lengths[{b}] = {n[b]} is out of range: must be in [1, {L}]")
    if allowed is not None:
        mask = np.asarray(allowed)
        if mask.dtype != np.bool_:
            raise ValueError(f"allowed must be a boolean array, got dtype {mask.dtype}")
        if mask.shape != E.shape:
            raise ValueError(f"allowed must have shape {E.shape} like emissions, got {mask.shape}")
        E = np.where(mask, E, NEG_INF)
        check_no_overflow(terms, emissions=E)  # masked-out entries may be as large as they like
    return ChainInput(E, T, S, F, n, e_top + s_top, t_top)


def _exp_transitions(T: np.ndarray):
    """exp(T − c) for (Bt, K, K) transitions, c the largest finite entry of each matrix.

    Returns (expT (Bt, K, K), c (Bt,), smallest nonzero entry per matrix (Bt,), dense
    (Bt,): no zero entry). The smallest entry is 0 — never take the scaled path — when a
    finite entry lies more than 600 nats below c.
    """
    flat = T.reshape(T.shape[0], -1)
    top = flat.max(axis=1) if flat.shape[1] else np.zeros(T.shape[0])
    top = np.where(np.isfinite(top), top, 0.0)
    shifted = T - top[:, None, None]
    expT = np.exp(shifted)
    masked = np.where(expT > 0, expT, np.inf).reshape(T.shape[0], -1)
    min_nz = masked.min(axis=1) if masked.shape[1] else np.ones(T.shape[0])
    min_nz = np.where(np.isfinite(min_nz), min_nz, 1.0)
    too_small = ((shifted < _MIN_SHIFTED) & np.isfinite(shifted)).reshape(T.shape[0], -1).any(axis=1)
    min_nz = np.where(too_small, 0.0, min_nz)
    dense = (expT > 0).reshape(T.shape[0], -1).all(axis=1)
    return (np.ascontiguousarray(expT), np.ascontiguousarray(top), np.ascontiguousarray(min_nz),
            np.ascontiguousarray(dense))


# ---------------------------------------------------------------------------
# semiring-generic kernels (one definition, specialised per ⊕)
# ---------------------------------------------------------------------------


def make_chain_forward(plus):
    """Forward pass of one sequence in the semiring whose ⊕ is ``plus``.

    Fills ``alpha[t, j]`` = ⊕ over prefixes ending in label j at position t of
    their score (start and emissions included); returns ⊕ⱼ alpha[n−1, j] + end[j].
    """

    # not cached (closure factory): see varorder.engine.semiring
    @nb.njit
    def forward(E, T, start, end, n, alpha):
        K = E.shape[1]
        acc = np.empty(K)
        for j in range(K):
            alpha[0, j] = start[j] + E[0, j]
        for t in range(1, n):
            for j in range(K):
                acc[j] = NEG_INF
            for i in range(K):
                ai = alpha[t - 1, i]
                if ai == NEG_INF:
                    continue
                for j in range(K):
                    acc[j] = plus(acc[j], ai + T[i, j])
            for j in range(K):
                alpha[t, j] = acc[j] + E[t, j]
        total = NEG_INF
        for j in range(K):
            total = plus(total, alpha[n - 1, j] + end[j])
        return total

    return forward


def make_chain_backward(plus):
    """Backward pass: ``beta[t, i]`` = ⊕ over suffixes after label i at t (end included)."""

    # not cached (closure factory): see varorder.engine.semiring
    @nb.njit
    def backward(E, T, end, n, beta):
        K = E.shape[1]
        for i in range(K):
            beta[n - 1, i] = end[i]
        for t in range(n - 1, 0, -1):
            for i in range(K):
                acc = NEG_INF
                for j in range(K):
                    acc = plus(acc, T[i, j] + E[t, j] + beta[t, j])
                beta[t - 1, i] = acc
        return 0.0

    return backward


_log_forward = make_chain_forward(log_plus)
_max_forward = make_chain_forward(max_plus)
_log_backward = make_chain_backward(log_plus)
_FORWARDS = {"log": _log_forward, "max": _max_forward}


def make_forward_batch(forward):
    # not cached (closure factory): see varorder.engine.semiring
    @nb.njit(parallel=True)
    def run(E, T, start, end, lengths):
        B, L, K = E.shape
        out = np.empty(B)
        for b in nb.prange(B):
            alpha = np.empty((L, K))
            out[b] = forward(E[b], T[b % T.shape[0]], start, end, lengths[b], alpha)
        return out

    return run


_FORWARD_BATCH = {name: make_forward_batch(fn) for name, fn in _FORWARDS.items()}


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


@nb.njit(cache=True)
def _block_forward(E, seqs, lengths, shared, expT, tshift, min_expT, dense, start, exp_end, min_exp_end,
                   end_shift, emission_low, store, a_buf, ev_buf, acc_buf, bits, logz, ok, amin, low):
    """Scaled forward of the sequences ``seqs`` (decreasing lengths) advancing together.

    expT (Tb, K, K) = exp(T − tshift), tshift (Tb,), min_expT (Tb,), dense (Tb,): row s uses index 0 when
    ``shared`` (one BLAS product per position) and s otherwise. With ``store`` a_buf holds
    every position ((L, nseq, K) flat, a[t] ∝ alpha[t]) and ev_buf every shifted
    exp-emission, sequence by sequence ((nseq, L, K) flat, L the block's longest length);
    otherwise a_buf holds two alternating planes and ev_buf _CHUNK positions per sequence. On return logz[s] is log Z;
    ok[s] False marks a sequence to redo in log space (a possible underflow).

    Underflow guard. With a dense matrix (no zero entry) every entry of a[t] (rows scaled
    to sum in [½, 1)) is ≥ min_expT·e^{lowest_t}/(4K), lowest_t the smallest shifted
    log-emission, so one scalar test per step bounds every product the forward *and* the
    backward will form; a matrix with hard zeros tracks the smallest product instead.
    """
    nseq = seqs.shape[0]
    K = E.shape[2]
    L = lengths[seqs[0]]
    acc_all = acc_buf[:nseq * K].reshape((nseq, K))
    Eflat = E.reshape(-1)
    Ebits = Eflat.view(np.int64)
    Lbuf = E.shape[1]
    w = np.zeros(_CHUNK * K)
    wbits = w.view(np.int64)
    # exp-emissions sequence by sequence: (nseq, L, K) with store, else (nseq, _CHUNK, K)
    ev_stride = (L if store else _CHUNK) * K
    ev_all = ev_buf[:nseq * ev_stride].reshape((nseq, L if store else _CHUNK, K))
    conv = np.empty(2, dtype=np.int64)
    convf = conv.view(np.float64)
    row_max = np.empty((_CHUNK, nseq))
    row_low = np.empty((_CHUNK, nseq))
    totals = np.empty(nseq)
    smalls = np.empty(nseq)
    alive = np.ones(nseq, dtype=np.bool_)
    log_4k = np.log(4.0 * K)
    log_tiny = np.log(_TINY)
    log_end = np.log(min_exp_end)
    log_min_expT = np.log(min_expT[:1 if shared else nseq])
    for s in range(nseq):
        logz[s] = 0.0
        ok[s] = min_expT[0 if shared else s] > 0.0
        alive[s] = ok[s]
        amin[s] = 1.0
        low[s] = 0.0
    nact = nseq
    for t in range(L):
        while lengths[seqs[nact - 1]] <= t:
            nact -= 1
        p = t % _CHUNK
        if p == 0:  # the shifted exp-emissions of the next _CHUNK positions
            _exp_chunk(Eflat, Ebits, Lbuf, seqs, lengths, t, min(t + _CHUNK, L), start, tshift, not shared,
                       emission_low, w, wbits,
                       ev_buf, t * K if store else 0, ev_stride, bits, conv, convf, row_max, row_low)
        pa = t if store else t & 1
        a_t = _plane(a_buf, pa, nseq, nseq, K)
        if t == 0:
            acc_all[:, :] = 1.0
        else:
            a_prev = _plane(a_buf, t - 1 if store else (t - 1) & 1, nact, nseq, K)
            if shared:
                np.dot(a_prev, expT[0], acc_all[:nact])
            else:
                _vec_mat_rows(a_prev, expT, acc_all, nact, alive)
        _product_rows(acc_all, ev_all, t if store else p, a_t, nact, alive, shared, dense, totals, smalls)
        for s in range(nact):
            if not alive[s]:
                a_t[s, :] = 0.0
                continue
            b = seqs[s]
            ts = 0 if shared else s
            m = row_max[p, s]
            lowest = row_low[p, s]
            if m == NEG_INF:  # no label allowed here: a genuine log Z = −inf
                logz[s] = NEG_INF
                alive[s] = False
                a_t[s, :] = 0.0
                continue
            total = totals[s]
            small = smalls[s]
            lme = log_min_expT[ts]
            fail = lowest < _MIN_SHIFTED
            if t == 0:
                small = np.exp(lowest)
            elif dense[ts]:
                fail = fail or lowest + low[s] + 2.0 * lme - log_4k < log_tiny
            else:
                # every product a_i·expT_ij formed this step is ≥ amin · min_expT
                fail = fail or amin[s] * min_expT[ts] < _TINY
            fail = fail or small < _TINY or total == 0.0
            if not fail:
                f, e = _pow2_scale(total)
                for j in range(K):
                    a_t[s, j] *= f
                amin[s] = small * f
                low[s] = lowest
                logz[s] += m + e * _LN2
                if t == lengths[b] - 1:
                    fin = 0.0
                    for j in range(K):
                        fin += a_t[s, j] * exp_end[j]
                    if dense[ts]:
                        fail = lowest + lme + log_end - log_4k < log_tiny
                    else:
                        fail = amin[s] * min_exp_end < _TINY
                    fail = fail or fin == 0.0
                    logz[s] += end_shift + np.log(fin)
            if fail:
                ok[s] = False
                alive[s] = False
                a_t[s, :] = 0.0


@nb.njit(cache=True, fastmath=_FAST_REDUCE)
def _node_row(a, ta, bb, tb, s, node, b, t):
    """node[b, t] = a[ta, s] ⊙ bb[tb, s] normalised (a, bb: (positions, rows, K)); returns
    the normaliser."""
    K = a.shape[2]
    total = 0.0
    for j in range(K):
        v = a[ta, s, j] * bb[tb, s, j]
        node[b, t, j] = v
        total += v
    inv = 1.0 / total
    for j in range(K):
        node[b, t, j] *= inv
    return total


@nb.njit(cache=True)
def _node_rows(a, bb, tb, rows, seqs, t, node, node_total, ok):
    """Position t's node marginals of the rows s < rows with ok[s]: a[t, s] ⊙ bb[tb, s]
    normalised into node[seqs[s], t], the normaliser into node_total[t, s]."""
    for s in range(rows):
        if ok[s]:
            node_total[t, s] = _node_row(a, t, bb, tb, s, node, seqs[s], t)


@nb.njit(cache=True)
def _node_sequences(a, bb, seqs, lengths, node, node_total, ok):
    """Every position's node marginals of each row s with ok[s], sequence by sequence (bb
    holds every position)."""
    for s in range(seqs.shape[0]):
        if ok[s]:
            for t in range(lengths[seqs[s]]):
                node_total[t, s] = _node_row(a, t, bb, t, s, node, seqs[s], t)


@nb.njit(cache=True)
def _block_backward(seqs, lengths, shared, expT_t, min_expT, dense, exp_end, a_buf, ev_buf, bb_buf, tmp_buf, acc_buf,
                    ok, bscale, node, node_total, store_bb):
    """Scaled backward for a block (buffers as ``_block_forward`` with store); clears ok[s]
    on a possible underflow (only checked for matrices with zeros: the forward's guard
    covers dense ones). expT_t is (Tb, K, K) exp-transitions transposed, so each step is
    tmp @ expT_t. bscale[t, s] receives the power of two f with
    expT @ (ev[t]·bb[t]) = bb[t − 1] / f.

    With ``store_bb`` bb_buf keeps every position and node marginals are written after the
    backward, sequence by sequence in position order (one forward stream through node: in
    the backward's order — 32 sequences' rows, positions descending — writing them costs
    2.6× as much). Without it bb_buf holds two alternating planes and node marginals are
    written as soon as bb[t] exists, while the planes are in cache (long sequences, whose
    planes would not stay there). node_total[t, s] = a[t]·bb[t] either way."""
    nseq = seqs.shape[0]
    K = expT_t.shape[1]
    L = lengths[seqs[0]]
    tmp_all = tmp_buf[:nseq * K].reshape((nseq, K))
    acc_all = acc_buf[:nseq * K].reshape((nseq, K))
    ev_all = ev_buf[:nseq * L * K].reshape((nseq, L, K))
    a_all = a_buf[:L * nseq * K].reshape((L, nseq, K))
    bb_all = bb_buf[:(L if store_bb else 2) * nseq * K].reshape((L if store_bb else 2, nseq, K))
    totals = np.empty(nseq)
    smalls = np.empty(nseq)
    end_total = 0.0
    for j in range(K):
        end_total += exp_end[j]
    for s in range(nseq):
        if ok[s]:
            n = lengths[seqs[s]]
            last = _plane(bb_buf, n - 1 if store_bb else (n - 1) & 1, nseq, nseq, K)
            for j in range(K):
                last[s, j] = exp_end[j] / end_total
    nact = 0  # rows with a position t (a prefix that grows as t falls)
    for t in range(L - 1, 0, -1):
        first = nact
        while nact < nseq and lengths[seqs[nact]] > t:
            nact += 1
        if nact > first and not store_bb:  # rows whose last position is t: their node marginals there
            last_ok = ok.copy()
            last_ok[:first] = False
            _node_rows(a_all, bb_all, t & 1, nact, seqs, t, node, node_total, last_ok)
        bb_t = _plane(bb_buf, t if store_bb else t & 1, nseq, nseq, K)
        bb_prev = _plane(bb_buf, t - 1 if store_bb else (t - 1) & 1, nseq, nseq, K)
        _product_rows(bb_t, ev_all, t, tmp_all, nact, ok, shared, dense, totals, smalls)
        for s in range(nact):
            if ok[s] and (smalls[s] < _TINY or smalls[s] * min_expT[0 if shared else s] < _TINY):
                ok[s] = False
            if not ok[s]:
                tmp_all[s, :] = 0.0
        if shared:
            np.dot(tmp_all[:nact], expT_t[0], acc_all[:nact])
        else:
            _vec_mat_rows(tmp_all, expT_t, acc_all, nact, ok)
        for s in range(nact):
            if not ok[s]:
                continue
            total = 0.0
            for j in range(K):
                total += acc_all[s, j]
            if total == 0.0:
                ok[s] = False
                continue
            f, _ = _pow2_scale(total)
            for j in range(K):
                bb_prev[s, j] = acc_all[s, j] * f
            bscale[t, s] = f
        if not store_bb:
            _node_rows(a_all, bb_all, (t - 1) & 1, nact, seqs, t - 1, node, node_total, ok)
    if store_bb:
        _node_sequences(a_all, bb_all, seqs, lengths, node, node_total, ok)
    elif L == 1 or nact < nseq:  # sequences of length 1
        only = ok.copy()
        only[:nact] = False
        _node_rows(a_all, bb_all, 0, nseq, seqs, 0, node, node_total, only)


@nb.njit(cache=True)
def _chain_blocks(lengths, block, order, num_chunks, c):
    """Blocks [k0, k1) handled by chunk c, and the number of blocks."""
    B = order.shape[0]
    num_blocks = (B + block - 1) // block
    return c * num_blocks // num_chunks, (c + 1) * num_blocks // num_chunks, num_blocks


@nb.njit(cache=True)
def _block_transitions(T, seqs, expT_s, tshift_s, min_expT_s, dense_s, want_t, expT_t_s):
    """Exp-transitions of each sequence of a block (per-sequence matrices)."""
    K = T.shape[1]
    w = np.empty(K * K)
    bits = np.empty(K * K, dtype=np.int64)
    conv = np.empty(1, dtype=np.int64)
    convf = conv.view(np.float64)
    for s in range(seqs.shape[0]):
        tshift_s[s], min_expT_s[s], dense_s[s] = _exp_matrix(T[seqs[s]], expT_s[s], w, bits, conv, convf)
        if want_t:
            for i in range(K):
                for j in range(K):
                    expT_t_s[s, j, i] = expT_s[s, i, j]


@nb.njit(cache=True, parallel=True)
def _logz_kernel(E, T, start, end, lengths, order, block, expT, tshift, min_expT, dense, exp_end, min_exp_end,
                 end_shift, emission_low, num_chunks):
    B, L, K = E.shape
    shared = T.shape[0] == 1
    out = np.empty(B)
    for c in nb.prange(num_chunks):
        k0, k1, num_blocks = _chain_blocks(lengths, block, order, num_chunks, c)
        a_buf = np.zeros(2 * block * K)
        ev_buf = np.zeros(_CHUNK * block * K)
        acc_buf = np.zeros(block * K)
        bits = np.empty(_CHUNK * K, dtype=np.int64)
        logz = np.empty(block)
        ok = np.empty(block, dtype=np.bool_)
        amin = np.empty(block)
        low = np.empty(block)
        tb = 1 if shared else block
        expT_s = np.empty((tb, K, K))
        tshift_s = np.empty(tb)
        min_expT_s = np.empty(tb)
        dense_s = np.empty(tb, dtype=np.bool_)
        fallback = np.empty((L, K))
        for k in range(k0, k1):
            lo, hi = _block_bounds(k, num_blocks, B)
            seqs = order[lo:hi]
            if shared:
                _block_forward(E, seqs, lengths, True, expT, tshift, min_expT, dense, start, exp_end, min_exp_end,
                               end_shift, emission_low, False, a_buf, ev_buf, acc_buf, bits, logz, ok, amin, low)
            else:
                _block_transitions(T, seqs, expT_s, tshift_s, min_expT_s, dense_s, False, expT_s)
                _block_forward(E, seqs, lengths, False, expT_s, tshift_s, min_expT_s, dense_s, start, exp_end,
                               min_exp_end, end_shift, emission_low, False, a_buf, ev_buf, acc_buf, bits, logz, ok, amin, low)
            for s in range(hi - lo):
                b = seqs[s]
                if ok[s]:
                    out[b] = logz[s]
                else:
                    out[b] = _log_forward(E[b], T[0 if shared else b], start, end, lengths[b], fallback)
    return out


# ---------------------------------------------------------------------------
# marginals, expected transition score, entropy
# ---------------------------------------------------------------------------


@nb.njit(cache=True, fastmath=_FAST_REDUCE)
def _scaled_posteriors(a, ev, bb, bscale, s, n, expT, T, edge, edge_sum, want_edges, want_sum, want_texp,
                       node_total, U_buf, V_buf, outer):
    """Edge marginals per position / summed / E[Σ transition score] of row s of a block from
    its scaled forward (a, (L, nseq, K)), exp-emissions (ev, (nseq, L, K)), backward (bb) and
    node_total (a·bb).

    ξₜ(i, j) = a[t−1, i]·expT[i, j]·ev[t, j]·bb[t, j]·f / (a[t−1]·bb[t−1]) with f = bscale[t]:
    the backward's own product gives the normaliser. Returns E[Σₜ T[yₜ₋₁, yₜ]] (if want_texp).
    """
    K = expT.shape[0]
    texp = 0.0
    if n < 2 or not (want_edges or want_sum or want_texp):
        return texp
    U = U_buf[:(n - 1) * K].reshape((n - 1, K))
    V = V_buf[:(n - 1) * K].reshape((n - 1, K))
    for t in range(1, n):
        scale = bscale[t, s] / node_total[t - 1, s]
        for i in range(K):
            U[t - 1, i] = a[t - 1, s, i] * scale
        for j in range(K):
            V[t - 1, j] = ev[s, t, j] * bb[t, s, j]
    if want_edges:
        for t in range(n - 1):
            for i in range(K):
                u = U[t, i]
                for j in range(K):
                    edge[t, i, j] = u * expT[i, j] * V[t, j]
    if want_sum or want_texp:
        # Σₜ ξₜ = expT ⊙ (Uᵀ V): the sum over positions as one GEMM
        np.dot(U.T, V, outer)
        for i in range(K):
            for j in range(K):
                w = expT[i, j] * outer[i, j]
                if want_sum:
                    edge_sum[i, j] += w
                if want_texp and w > 0.0:
                    texp += w * T[i, j]
    return texp


@nb.njit(cache=True)
def _log_marginals_one(E, T, start, end, n, node, edge, edge_sum, want_edges, want_sum, want_texp, work):
    """The log-space path of one sequence (no scaling, no underflow): (log Z, E[Σ transition score]).

    ``work`` is (2, L, K) scratch. Outputs as in ``_scaled_posteriors``.
    """
    K = E.shape[1]
    a = work[0]
    bb = work[1]
    texp = 0.0
    z = _log_forward(E, T, start, end, n, a)
    if z == NEG_INF:
        return z, texp
    _log_backward(E, T, end, n, bb)
    # Normalising per position (rather than subtracting the global log Z)
    # keeps rounding drift of long log-space recursions out of the marginals.
    for t in range(n):
        m = NEG_INF
        for j in range(K):
            v = a[t, j] + bb[t, j]
            if v > m:
                m = v
        s = 0.0
        for j in range(K):
            v = np.exp(a[t, j] + bb[t, j] - m)
            node[t, j] = v
            s += v
        for j in range(K):
            node[t, j] /= s
    if want_edges or want_sum or want_texp:
        xi = np.empty((K, K))
        for t in range(1, n):
            m = NEG_INF
            for i in range(K):
                for j in range(K):
                    v = a[t - 1, i] + T[i, j] + E[t, j] + bb[t, j]
                    xi[i, j] = v
                    if v > m:
                        m = v
            s = 0.0
            for i in range(K):
                for j in range(K):
                    v = np.exp(xi[i, j] - m)
                    xi[i, j] = v
                    s += v
            for i in range(K):
                for j in range(K):
                    v = xi[i, j] / s
                    if want_edges:
                        edge[t - 1, i, j] = v
                    if want_sum:
                        edge_sum[i, j] += v
                    if want_texp and v > 0.0:
                        texp += v * T[i, j]
    return z, texp


@nb.njit(cache=True, parallel=True)
def _marginals_kernel(E, T, start, end, lengths, order, block, expT, tshift, min_expT, dense, exp_end, min_exp_end,
                      end_shift, emission_low, node, edge, edge_sum, texp, want_edges, want_sum, want_texp, num_chunks):
    """log Z, node marginals and, as asked, edge marginals per position, summed over
    positions, or the expected transition score (texp) of every sequence."""
    B, L, K = E.shape
    shared = T.shape[0] == 1
    out = np.empty(B)
    dummy = np.zeros((0, K, K))
    for c in nb.prange(num_chunks):
        k0, k1, num_blocks = _chain_blocks(lengths, block, order, num_chunks, c)
        a_buf = np.zeros(L * block * K)
        ev_buf = np.zeros(L * block * K)
        want_extra = want_edges or want_sum or want_texp
        keep_bb = want_extra or L * block * K <= _KEEP_BACKWARD  # bb per position: node marginals afterwards
        bb_buf = np.zeros((L if keep_bb else 2) * block * K)
        acc_buf = np.zeros(block * K)
        tmp_buf = np.zeros(block * K)
        bits = np.empty(_CHUNK * K, dtype=np.int64)
        logz = np.empty(block)
        ok = np.empty(block, dtype=np.bool_)
        amin = np.empty(block)
        low = np.empty(block)
        bscale = np.empty((L, block))
        tb = 1 if shared else block
        expT_s = np.empty((tb, K, K))
        expT_t_s = np.empty((tb, K, K))
        tshift_s = np.empty(tb)
        min_expT_s = np.empty(tb)
        dense_s = np.empty(tb, dtype=np.bool_)
        expT_t = np.empty((1, K, K))
        if shared:
            expT_t[0] = expT[0].T
        work = np.empty((2, L, K))
        node_total = np.empty((L, block))
        U = np.empty(max(L - 1, 1) * K)
        V = np.empty(max(L - 1, 1) * K)
        outer = np.empty((K, K))
        for k in range(k0, k1):
            lo, hi = _block_bounds(k, num_blocks, B)
            seqs = order[lo:hi]
            nseq = hi - lo
            if shared:
                ex, ex_t, cm, mins, dn = expT, expT_t, tshift, min_expT, dense
            else:
                _block_transitions(T, seqs, expT_s, tshift_s, min_expT_s, dense_s, True, expT_t_s)
                ex, ex_t, cm, mins, dn = expT_s, expT_t_s, tshift_s, min_expT_s, dense_s
            _block_forward(E, seqs, lengths, shared, ex, cm, mins, dn, start, exp_end, min_exp_end, end_shift,
                           emission_low, True,
                           a_buf, ev_buf, acc_buf, bits, logz, ok, amin, low)
            impossible = np.zeros(nseq, dtype=np.bool_)
            for s in range(nseq):
                if ok[s] and logz[s] == NEG_INF:  # nothing to propagate backwards
                    ok[s] = False
                    impossible[s] = True
            _block_backward(seqs, lengths, shared, ex_t, mins, dn, exp_end, a_buf, ev_buf, bb_buf, tmp_buf, acc_buf,
                            ok, bscale, node, node_total, keep_bb)
            La = lengths[seqs[0]]
            a = a_buf[:La * nseq * K].reshape((La, nseq, K))
            ev = ev_buf[:nseq * La * K].reshape((nseq, La, K))
            Lb = La if want_extra else 1  # bb is only read back for edges / sums
            bb = bb_buf[:Lb * nseq * K].reshape((Lb, nseq, K))
            for s in range(nseq):
                b = seqs[s]
                n = lengths[b]
                Tb = T[0 if shared else b]
                eb = edge[b] if want_edges else dummy
                sb = edge_sum[b] if want_sum else dummy[0]
                if impossible[s]:
                    out[b] = NEG_INF
                elif ok[s]:
                    out[b] = logz[s]
                    if want_extra:
                        texp[b] = _scaled_posteriors(a, ev, bb, bscale, s, n, ex[0 if shared else s], Tb, eb, sb,
                                                     want_edges, want_sum, want_texp, node_total, U, V, outer)
                else:
                    out[b], texp[b] = _log_marginals_one(E[b], Tb, start, end, n, node[b], eb, sb, want_edges,
                                                         want_sum, want_texp, work)
                # node arrives uninitialised (no calloc of B·L·K): clear what no path wrote
                node[b, 0 if out[b] == NEG_INF else n:, :] = 0.0
    return out


@nb.njit(cache=True)
def _entropy_finish(E, start, end, lengths, node, logz, texp):
    """H = log Z − E[s(y)] from node marginals and the expected transition score."""
    B, L, K = E.shape
    out = np.empty(B)
    for b in range(B):
        n = lengths[b]
        if logz[b] == NEG_INF:
            out[b] = np.nan
            continue
        escore = texp[b]
        for t in range(n):
            for j in range(K):
                p = node[b, t, j]
                if p > 0.0:
                    escore += p * E[b, t, j]
                    if t == 0:
                        escore += p * start[j]
                    if t == n - 1:
                        escore += p * end[j]
        h = logz[b] - escore
        out[b] = h if h > 0.0 else 0.0
    return out


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
def _viterbi_kernel(E, T, start, end, lengths, num_chunks):
    B, L, K = E.shape
    paths = np.full((B, L), -1, dtype=np.int64)
    scores = np.empty(B)
    for c in nb.prange(num_chunks):
        lo, hi = _chunk(c, num_chunks, B)
        delta = np.empty((L, K))
        acc = np.empty(K)
        for b in range(lo, hi):
            n = lengths[b]
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
    return paths, scores


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


@nb.njit(cache=True, parallel=True)
def _sample_kernel(E, T, start, end, lengths, uniforms):
    B, L, K = E.shape
    n_samples = uniforms.shape[1]
    paths = np.full((B, n_samples, L), -1, dtype=np.int64)
    for b in nb.prange(B):
        n = lengths[b]
        alpha = np.empty((n, K))
        Tb = T[b % T.shape[0]]
        z = _log_forward(E[b], Tb, start, end, n, alpha)
        if z == NEG_INF:
            continue
        w = np.empty(K)
        for s in range(n_samples):
            for j in range(K):
                w[j] = np.exp(alpha[n - 1, j] + end[j] - z)
            y = _draw(w, uniforms[b, s, n - 1])
            paths[b, s, n - 1] = y
            for t in range(n - 1, 0, -1):
                m = NEG_INF
                for i in range(K):
                    v = alpha[t - 1, i] + Tb[i, y]
                    w[i] = v
                    if v > m:
                        m = v
                for i in range(K):
                    w[i] = np.exp(w[i] - m)
                y = _draw(w, uniforms[b, s, t - 1])
                paths[b, s, t - 1] = y
    return paths


# ---------------------------------------------------------------------------
# public operations on a prepared ChainInput
# ---------------------------------------------------------------------------


def _num_chunks(ci: ChainInput) -> int:
    """Work units for prange: a few per thread balances ragged lengths without per-sequence scratch."""
    return max(1, min(ci.shape[0], 4 * nb.get_num_threads()))


def _block_size(ci: ChainInput) -> int:
    """Sequences per block; a function of the shapes only (never of the thread count).

    Shared transitions: the rows of each BLAS product (more rows amortise the call and fill
    the kernel better for small K). Per-sequence transitions: how many exp-transition
    matrices a block keeps (no product is shared, so only their size matters)."""
    B, L, K = ci.shape
    if ci.transitions.shape[0] > 1:
        return max(1, min(B, 16, 8192 // (K * K)))
    return max(1, min(B, 64 if K <= 16 else 32 if K <= 128 else 16))


def _blocking(ci: ChainInput, block: int):
    """(length order, number of prange chunks of blocks)."""
    order = np.argsort(-ci.lengths, kind="stable").astype(np.int64)
    num_blocks = -(-ci.shape[0] // block)
    return order, max(1, min(num_blocks, 4 * nb.get_num_threads()))


def _scaling(ci: ChainInput):
    """exp-transitions, column maxima, smallest nonzero entry (shared matrix; placeholders
    when per sequence: the kernels exponentiate per block), exp(end) shifted, its smallest
    nonzero entry and the shift."""
    if ci.transitions.shape[0] == 1:
        expT, tshift, min_expT, dense = _exp_transitions(ci.transitions)
    else:
        K = ci.shape[2]
        expT, tshift, min_expT, dense = np.zeros((1, K, K)), np.zeros(1), np.zeros(1), np.zeros(1, bool)
    end_shift = float(ci.end.max()) if np.isfinite(ci.end.max()) else 0.0
    exp_end = np.exp(ci.end - end_shift)
    nz = exp_end[exp_end > 0]
    min_exp_end = float(nz.min()) if nz.size else 1.0
    return expT, tshift, min_expT, dense, exp_end, min_exp_end, end_shift, _emission_low(ci, min_expT)


# Unshifted exp-emissions are used while this bound on the underflow guard's exponent
# (see ``_emission_low``) stays this far above log(_TINY) ≈ −645: the guard never fires.
_DIRECT_LIMIT = 400.0


def _emission_low(ci: ChainInput, min_expT) -> float:
    """A lower bound (≤ 0) on every row's smallest log-emission minus its largest when the
    kernels may exponentiate emissions without shifting them, +1 when they must shift.

    Unshifted, exp(x) lies in [e^−M, e^M] for M = ``emission_bound`` (start included): no
    overflow and, with rows rescaled every step, the underflow guard's bound (two such
    row ranges, twice log min exp-transition, log 4K) stays above _TINY by a margin —
    so skipping the shift never sends a sequence to the log-space path. Typical
    potentials (all within about ±30) take this path; larger ones are shifted chunk by chunk."""
    K = ci.shape[2]
    if ci.transitions.shape[0] == 1:
        t_range = -math.log(float(min_expT[0])) if min_expT[0] > 0.0 else math.inf
    else:
        t_range = 2.0 * ci.transition_bound
    if 4.0 * ci.emission_bound + 2.0 * t_range + math.log(4.0 * K) <= _DIRECT_LIMIT:
        return -2.0 * ci.emission_bound
    return 1.0


@uses_engine_threads
def forward_values(ci: ChainInput, semiring: Semiring = LOG) -> np.ndarray:
    """⊕ over all paths of each sequence, with the generic (log-space) kernel."""
    return _FORWARD_BATCH[semiring.name](ci.emissions, ci.transitions, ci.start, ci.end, ci.lengths)


@uses_engine_threads
def log_partition(ci: ChainInput) -> np.ndarray:
    block = _block_size(ci)
    order, chunks = _blocking(ci, block)
    return _logz_kernel(ci.emissions, ci.transitions, ci.start, ci.end, ci.lengths, order, block, *_scaling(ci),
                        chunks)


@uses_engine_threads
def viterbi(ci: ChainInput):
    return _viterbi_kernel(ci.emissions, ci.transitions, ci.start, ci.end, ci.lengths, _num_chunks(ci))


def _marginals(ci: ChainInput, want_edges: bool, want_sum: bool, want_texp: bool):
    B, L, K = ci.shape
    node = np.empty((B, L, K))  # every entry is written by the kernel
    edge = np.zeros((B, max(L - 1, 0), K, K)) if want_edges else np.zeros((B, 0, K, K))
    edge_sum = np.zeros((B, K, K)) if want_sum else np.zeros((B, 0, 0))
    texp = np.zeros(B)
    block = _block_size(ci)
    order, chunks = _blocking(ci, block)
    logz = _marginals_kernel(ci.emissions, ci.transitions, ci.start, ci.end, ci.lengths, order, block,
                             *_scaling(ci), node, edge, edge_sum, texp, want_edges, want_sum, want_texp, chunks)
    return node, edge, edge_sum, texp, logz


@uses_engine_threads
def marginals(ci: ChainInput, edges=True):
    """(node (B, L, K), edge, log Z (B,)).

    edges=True: edge (B, L−1, K, K) per position; edges="sum": (B, K, K) summed
    over positions (expected transition counts, without the B·L·K² array);
    edges=False: None.
    """
    if edges not in (True, False, "sum"):
        raise ValueError(f"edges must be True, False or 'sum', got {edges!r}")
    want_edges = edges is True
    want_sum = edges == "sum"
    node, edge, edge_sum, _, logz = _marginals(ci, want_edges, want_sum, False)
    return node, (edge if want_edges else edge_sum if want_sum else None), logz


@uses_engine_threads
def entropy(ci: ChainInput) -> np.ndarray:
    node, _, _, texp, logz = _marginals(ci, False, False, True)
    return _entropy_finish(ci.emissions, ci.start, ci.end, ci.lengths, node, logz, texp)


@uses_engine_threads
def kbest(ci: ChainInput, k: int):
    k = check_int_at_least("k", k, 1)
    return _kbest_kernel(ci.emissions, ci.transitions, ci.start, ci.end, ci.lengths, k)


@uses_engine_threads
def sample(ci: ChainInput, n: int, seed=None):
    n = check_int_at_least("n", n, 1)
    B, L, _ = ci.shape
    uniforms = as_rng(seed).random((B, n, L))
    return _sample_kernel(ci.emissions, ci.transitions, ci.start, ci.end, ci.lengths, uniforms)
