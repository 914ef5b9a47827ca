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
  per call, column-shifted so every column's largest entry is 1, and each step
  is a K×K multiply–add followed by renormalisation. Each step checks a lower
  bound on the smallest product it forms; if that bound could underflow
  (potentials with a dynamic range of hundreds of nats) the sequence is redone
  in the log-space kernel, so the fast path never trades accuracy for speed;
* Viterbi is the MAX-semiring forward pass; the path is recovered by
  re-maximising one column per position, so no back-pointer table is stored;
* k-best is list Viterbi (Seshadri & Sundberg 1994): a sorted top-k list per
  (position, label);
* sampling is forward filtering, backward sampling with uniforms drawn from a
  seeded NumPy generator, so results do not depend on thread scheduling;
* entropy is log Z − E[s(y)], the expectation taken with the marginals.

Kernels run one sequence per Numba ``prange`` iteration.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from varorder.engine.semiring import LOG, MAX, Semiring, log_plus, max_plus
from varorder.engine.threads import uses_engine_threads
from varorder.engine.validate import as_potentials, as_rng, check_int_at_least, check_no_overflow, first_index

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
    """

    __slots__ = ("emissions", "transitions", "start", "end", "lengths")

    def __init__(self, emissions, transitions, start, end, lengths):
        self.emissions = emissions
        self.transitions = transitions
        self.start = start
        self.end = end
        self.lengths = lengths

    @property
    def shape(self) -> tuple[int, int, int]:
        return self.emissions.shape


def prepare(emissions, transitions, start=None, end=None, lengths=None, allowed=None) -> ChainInput:
    """Validate chain arguments; raise ValueError naming the offending argument."""
    E = as_potentials("emissions", emissions, (None, None, None))
    B, L, K = E.shape
    if L < 1:
        raise ValueError(f"emissions must have at least one position (L >= 1), got shape {E.shape}")
    if K < 1:
        raise ValueError(f"emissions must have at least one label (K >= 1), got shape {E.shape}")
    T = np.asarray(transitions)
    if T.ndim == 3:
        T = as_potentials("transitions", T, (B, K, K))
    else:
        T = as_potentials("transitions", T, (K, K))[None]
    S = np.zeros(K) if start is None else as_potentials("start", start, (K,))
    F = np.zeros(K) if end is None else as_potentials("end", end, (K,))
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
    check_no_overflow(2 * L + 1, emissions=E, transitions=T, start=S, end=F)
    return ChainInput(E, T, S, F, n)


def _exp_transitions(T: np.ndarray):
    """Column-shifted exp(T) for (Bt, K, K) transitions.

    Returns (expT (Bt, K, K), colmax (Bt, K), smallest nonzero entry per matrix (Bt,)).
    """
    colmax = T.max(axis=1)
    colmax = np.where(np.isfinite(colmax), colmax, 0.0)
    expT = np.exp(T - colmax[:, None, :])
    masked = np.where(expT > 0, expT, np.inf).reshape(T.shape[0], -1)
    min_nz = masked.min(axis=1) if masked.shape[1] else np.ones(T.shape[0])
    min_nz = np.where(np.isfinite(min_nz), min_nz, 1.0)
    return np.ascontiguousarray(expT), np.ascontiguousarray(colmax), np.ascontiguousarray(min_nz)


# ---------------------------------------------------------------------------
# semiring-generic kernels (one definition, specialised per ⊕)
# ---------------------------------------------------------------------------


def make_chain_forward(plus):
    """Forward pass of one sequence in the semiring whose ⊕ is ``plus``.

    Fills ``alpha[t, j]`` = ⊕ over prefixes ending in label j at position t of
    their score (start and emissions included); returns ⊕ⱼ alpha[n−1, j] + end[j].
    """

    @nb.njit(cache=True)
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

    @nb.njit(cache=True)
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
    @nb.njit(cache=True, parallel=True)
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
# scaled exp-space kernels (LOG semiring fast path)
# ---------------------------------------------------------------------------


# Cody–Waite constants for exp(x) = 2**k · exp(r), |r| ≤ ln2 / 2.
_LN2_HI = 6.93147180369123816490e-01
_LN2_LO = 1.90821492927058770002e-10
_INV_LN2 = 1.44269504088896338700e00
# Shifted log-weights below this are treated as a possible underflow (fallback).
_MIN_SHIFTED = -600.0
# Arithmetic-only flags: no 'nnan'/'ninf', so −inf keeps its meaning.
_FAST = {"nsz", "arcp", "contract"}
_FAST_REDUCE = {"nsz", "arcp", "contract", "reassoc"}


@nb.njit(cache=True, fastmath=_FAST)
def _exp_shifted(w, m, out, bits):
    """out[j] = exp(w[j] − m) (exactly 0 where w[j] = −inf); returns min finite w[j] − m.

    Valid for shifted values in [−700, 0], which the callers guarantee by
    routing anything below −600 to the log-space path. A Cody–Waite reduction,
    a degree-13 Taylor polynomial (relative error < 4e-16) and a 2**k built from
    exponent bits: arithmetic LLVM can vectorise, unlike a call to libm's exp.
    ``bits`` is int64 scratch of the same length.
    """
    K = w.shape[0]
    lowest = 0.0
    for j in range(K):
        x = w[j] - m
        lowest = min(lowest, x if x != NEG_INF else 0.0)
    for j in range(K):
        x = max(w[j] - m, -700.0)
        k = np.floor(x * _INV_LN2 + 0.5)
        bits[j] = (np.int64(np.int32(k)) + 1023) << 52
        r = (x - k * _LN2_HI) - k * _LN2_LO
        out[j] = 1.0 + r * (1.0 + r * (0.5 + r * (1.0 / 6 + r * (1.0 / 24 + r * (1.0 / 120 + r * (
            1.0 / 720 + r * (1.0 / 5040 + r * (1.0 / 40320 + r * (1.0 / 362880 + r * (
                1.0 / 3628800 + r * (1.0 / 39916800 + r * (1.0 / 479001600))))))))))))
    scale = bits.view(np.float64)
    for j in range(K):
        out[j] = out[j] * scale[j] if w[j] != NEG_INF else 0.0
    return lowest


@nb.njit(cache=True, fastmath=_FAST_REDUCE)
def _normalise(v):
    """Scale v to sum 1 in place; return the old sum and the smallest nonzero entry."""
    s = 0.0
    lo = np.inf
    for j in range(v.shape[0]):
        s += v[j]
        if v[j] > 0.0:
            lo = min(lo, v[j])
    if s > 0.0:
        inv = 1.0 / s
        for j in range(v.shape[0]):
            v[j] *= inv
    return s, lo


@nb.njit(cache=True, fastmath=_FAST)
def _vec_mat(a, M, out):
    """out = a @ M (rows of M contiguous, so the inner loop vectorises)."""
    K = M.shape[1]
    for j in range(K):
        out[j] = 0.0
    for i in range(M.shape[0]):
        ai = a[i]
        if ai != 0.0:
            for j in range(K):
                out[j] += ai * M[i, j]


@nb.njit(cache=True)
def _scaled_forward(E, expT, colmax, min_expT, start, exp_end, min_exp_end, end_shift, n, a, ev, shift):
    """Scaled forward of one sequence; returns (log Z, ok).

    On return a[t] ∝ alpha[t] (normalised to sum 1), ev[t, j] = exp(E'[t, j] − shift[t])
    where E' folds start (t = 0) or the column shift (t > 0) into the emissions.
    ok = False means a possible underflow was detected: redo in log space.
    """
    K = E.shape[1]
    w = np.empty(K)
    acc = np.empty(K)
    bits = np.empty(K, dtype=np.int64)
    logc = 0.0
    a_min = 1.0
    for t in range(n):
        m = NEG_INF
        for j in range(K):
            v = E[t, j] + (start[j] if t == 0 else colmax[j])
            w[j] = v
            m = max(m, v)
        if m == NEG_INF:
            return NEG_INF, True
        shift[t] = m
        lowest = _exp_shifted(w, m, ev[t], bits)
        if lowest < _MIN_SHIFTED:
            return NEG_INF, False
        if t == 0:
            a[0, :] = ev[0]
        else:
            # smallest product formed this step is ≥ a_min · min_expT · e^lowest
            if a_min * min_expT * np.exp(lowest) < _TINY:
                return NEG_INF, False
            # a separate accumulator: writing into a row of `a` itself would
            # alias the input row and stop LLVM from vectorising
            _vec_mat(a[t - 1], expT, acc)
            for j in range(K):
                a[t, j] = acc[j] * ev[t, j]
        s, a_min = _normalise(a[t])
        if s == 0.0:
            return NEG_INF, False
        logc += m + np.log(s)
    s = 0.0
    for j in range(K):
        s += a[n - 1, j] * exp_end[j]
    if a_min * min_exp_end < _TINY or s == 0.0:
        return NEG_INF, False
    return logc + end_shift + np.log(s), True


@nb.njit(cache=True)
def _scaled_backward(expT, min_expT, exp_end, n, ev, bb):
    """Scaled backward of one sequence: bb[t] ∝ beta[t]. Returns ok (False = redo in log space)."""
    K = expT.shape[0]
    tmp = np.empty(K)
    s = 0.0
    for j in range(K):
        bb[n - 1, j] = exp_end[j]
        s += exp_end[j]
    for j in range(K):
        bb[n - 1, j] /= s
    for t in range(n - 1, 0, -1):
        w_min = np.inf
        for j in range(K):
            w = ev[t, j] * bb[t, j]
            tmp[j] = w
            if w > 0.0 and w < w_min:
                w_min = w
        if w_min * min_expT < _TINY:
            return False
        s = 0.0
        for i in range(K):
            acc = 0.0
            for j in range(K):
                acc += expT[i, j] * tmp[j]
            bb[t - 1, i] = acc
            s += acc
        if s == 0.0:
            return False
        inv = 1.0 / s
        for i in range(K):
            bb[t - 1, i] *= inv
    return True


@nb.njit(cache=True)
def _chunk(c, num_chunks, B):
    """[lo, hi) of chunk c when B sequences are split into num_chunks parts."""
    return c * B // num_chunks, (c + 1) * B // num_chunks


@nb.njit(cache=True, parallel=True)
def _logz_kernel(E, T, start, end, lengths, expT, colmax, min_expT, exp_end, min_exp_end, end_shift,
                 num_chunks):
    B, L, K = E.shape
    out = np.empty(B)
    # one prange iteration per chunk, so scratch is allocated per chunk, not per sequence
    for c in nb.prange(num_chunks):
        lo, hi = _chunk(c, num_chunks, B)
        a = np.empty((L, K))
        ev = np.empty((L, K))
        shift = np.empty(L)
        for b in range(lo, hi):
            n = lengths[b]
            tb = b % T.shape[0]
            z, ok = _scaled_forward(
                E[b], expT[tb], colmax[tb], min_expT[tb], start, exp_end, min_exp_end, end_shift, n, a, ev, shift
            )
            if not ok:
                z = _log_forward(E[b], T[tb], start, end, n, a)
            out[b] = z
    return out


# ---------------------------------------------------------------------------
# marginals and expected transition score
# ---------------------------------------------------------------------------


@nb.njit(cache=True)
def _marginals_one(E, T, start, end, n, expT, colmax, min_expT, exp_end, min_exp_end, end_shift,
                   node, edge, edge_sum, want_edges, want_sum, want_texp, work, shift):
    """Node (and optionally edge) marginals of one sequence.

    ``work`` is (3, L, K) scratch, ``shift`` (L,). Returns (log Z,
    E[Σₜ transitions[yₜ₋₁, yₜ]]) — the second only if want_texp. With
    want_edges the edge marginals are stored per position in ``edge``; with
    want_sum they are added, summed over positions, into ``edge_sum`` (K, K).
    """
    K = E.shape[1]
    a = work[0]
    ev = work[1]
    bb = work[2]
    z, ok = _scaled_forward(E, expT, colmax, min_expT, start, exp_end, min_exp_end, end_shift, n, a, ev, shift)
    texp = 0.0
    if ok and z == NEG_INF:
        return z, texp
    if ok:
        ok = _scaled_backward(expT, min_expT, exp_end, n, ev, bb)
    if ok:
        for t in range(n):
            s = 0.0
            for j in range(K):
                v = a[t, j] * bb[t, j]
                node[t, j] = v
                s += v
            inv = 1.0 / s
            for j in range(K):
                node[t, j] *= inv
        if want_edges or want_sum or want_texp:
            xi = np.empty((K, K))
            for t in range(1, n):
                s = 0.0
                for i in range(K):
                    ai = a[t - 1, i]
                    for j in range(K):
                        v = ai * expT[i, j] * ev[t, j] * bb[t, j]
                        xi[i, j] = v
                        s += v
                inv = 1.0 / s
                for i in range(K):
                    for j in range(K):
                        v = xi[i, j] * inv
                        if want_edges:
                            edge[t - 1, i, j] = v
                        if want_sum:
                            edge_sum[i, j] += v
                        if want_texp and v > 0.0:
                            texp += v * T[i, j]
        return z, texp
    # robust log-space path
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
def _marginals_kernel(E, T, start, end, lengths, expT, colmax, min_expT, exp_end, min_exp_end, end_shift,
                      node, edge, edge_sum, want_edges, want_sum, num_chunks):
    B, L, K = E.shape
    logz = np.empty(B)
    dummy = np.zeros((0, K, K))
    for c in nb.prange(num_chunks):
        lo, hi = _chunk(c, num_chunks, B)
        work = np.empty((3, L, K))
        shift = np.empty(L)
        for b in range(lo, hi):
            eb = edge[b] if want_edges else dummy
            sb = edge_sum[b] if want_sum else dummy[0]
            tb = b % T.shape[0]
            z, _ = _marginals_one(E[b], T[tb], start, end, lengths[b], expT[tb], colmax[tb], min_expT[tb],
                                  exp_end, min_exp_end, end_shift, node[b], eb, sb, want_edges, want_sum, False,
                                  work, shift)
            logz[b] = z
    return logz


@nb.njit(cache=True, parallel=True)
def _entropy_kernel(E, T, start, end, lengths, expT, colmax, min_expT, exp_end, min_exp_end, end_shift,
                    num_chunks):
    B, L, K = E.shape
    out = np.empty(B)
    dummy = np.zeros((0, K, K))
    for c in nb.prange(num_chunks):
        lo, hi = _chunk(c, num_chunks, B)
        work = np.empty((3, L, K))
        shift = np.empty(L)
        node = np.empty((L, K))
        for b in range(lo, hi):
            n = lengths[b]
            tb = b % T.shape[0]
            z, texp = _marginals_one(E[b], T[tb], start, end, n, expT[tb], colmax[tb], min_expT[tb], exp_end,
                                     min_exp_end, end_shift, node, dummy, dummy[0], False, False, True, work, shift)
            if z == NEG_INF:
                out[b] = np.nan
                continue
            escore = texp
            for t in range(n):
                for j in range(K):
                    p = node[t, j]
                    if p > 0.0:
                        escore += p * E[b, t, j]
                        if t == 0:
                            escore += p * start[j]
                        if t == n - 1:
                            escore += p * end[j]
            h = z - escore
            out[b] = h if h > 0.0 else 0.0
    return out


# ---------------------------------------------------------------------------
# blocked scaled kernels: several sequences share one transition matrix, so the
# K×K step becomes a small matrix product (BLAS) instead of one vector–matrix
# product per sequence
# ---------------------------------------------------------------------------

_BLOCK = 16


@nb.njit(cache=True)
def _block_forward(E, idx, lengths, expT, colmax, min_expT, start, exp_end, min_exp_end, end_shift,
                   a, ev, acc, logz, ok):
    """Scaled forward of the sequences ``idx`` (at most _BLOCK) at once.

    a, ev: (L, _BLOCK, K) scratch (a[t, s] ∝ alpha of sequence idx[s] at t,
    ev[t, s] its shifted exp-emissions); acc (_BLOCK, K). Whole _BLOCK-row
    planes go to BLAS (they must be contiguous); rows past len(idx) are
    ignored. On return logz[s] is log Z, and ok[s] False marks a sequence to
    redo in log space.
    """
    nseq = idx.shape[0]
    K = E.shape[2]
    w = np.empty(K)
    bits = np.empty(K, dtype=np.int64)
    a_min = np.ones(nseq)
    active = np.ones(nseq, dtype=np.bool_)
    L = 0
    for s in range(nseq):
        logz[s] = 0.0
        ok[s] = True
        L = max(L, lengths[idx[s]])
    for t in range(L):
        if t > 0:
            np.dot(a[t - 1], expT, acc)
        for s in range(nseq):
            b = idx[s]
            if not active[s] or t >= lengths[b]:
                if t == 0:
                    a[t, s, :] = 0.0
                else:
                    a[t, s, :] = a[t - 1, s, :]
                continue
            m = NEG_INF
            for j in range(K):
                v = E[b, t, j] + (start[j] if t == 0 else colmax[j])
                w[j] = v
                m = max(m, v)
            if m == NEG_INF:  # no label allowed here: a genuine log Z = −inf
                logz[s] = NEG_INF
                active[s] = False
                a[t, s, :] = 0.0
                continue
            lowest = _exp_shifted(w, m, ev[t, s], bits)
            fail = lowest < _MIN_SHIFTED
            if not fail and t > 0:
                fail = a_min[s] * min_expT * np.exp(lowest) < _TINY
            if not fail:
                if t == 0:
                    a[0, s, :] = ev[0, s, :]
                else:
                    for j in range(K):
                        a[t, s, j] = acc[s, j] * ev[t, s, j]
                total, a_min[s] = _normalise(a[t, s])
                fail = total == 0.0
                if not fail:
                    logz[s] += m + np.log(total)
            if fail:
                ok[s] = False
                active[s] = False
                a[t, s, :] = 0.0
    for s in range(nseq):
        if not active[s]:
            continue
        n = lengths[idx[s]]
        total = 0.0
        for j in range(K):
            total += a[n - 1, s, j] * exp_end[j]
        if a_min[s] * min_exp_end < _TINY or total == 0.0:
            ok[s] = False
        else:
            logz[s] += end_shift + np.log(total)


@nb.njit(cache=True)
def _block_backward(idx, lengths, expT_t, min_expT, exp_end, ev, bb, tmp, acc, ok, scale):
    """Scaled backward for a block (bb like ``a`` in _block_forward); clears ok[s] on underflow.

    expT_t is exp-transitions transposed (C-contiguous), so each step is tmp @ expT_t.
    ``scale[t, s]`` receives the sum that normalised bb[t - 1, s], so that
    expT @ (ev[t] * bb[t]) = scale[t] * bb[t - 1].
    """
    nseq = idx.shape[0]
    K = expT_t.shape[0]
    L = 0
    for s in range(nseq):
        L = max(L, lengths[idx[s]])
    end_total = 0.0
    for j in range(K):
        end_total += exp_end[j]
    for s in range(nseq):
        if not ok[s]:
            continue
        n = lengths[idx[s]]
        for j in range(K):
            bb[n - 1, s, j] = exp_end[j] / end_total
    for t in range(L - 1, 0, -1):
        for s in range(nseq):
            if ok[s] and t < lengths[idx[s]]:
                w_min = np.inf
                for j in range(K):
                    v = ev[t, s, j] * bb[t, s, j]
                    tmp[s, j] = v
                    if v > 0.0:
                        w_min = min(w_min, v)
                if w_min * min_expT < _TINY:
                    ok[s] = False
            else:
                tmp[s, :] = 0.0
        np.dot(tmp, expT_t, acc)
        for s in range(nseq):
            if ok[s] and t < lengths[idx[s]]:
                bb[t - 1, s, :] = acc[s, :]
                total, _ = _normalise(bb[t - 1, s])
                scale[t, s] = total
                if total == 0.0:
                    ok[s] = False


@nb.njit(cache=True, parallel=True)
def _block_logz_kernel(E, T, start, end, lengths, expT, colmax, min_expT, exp_end, min_exp_end, end_shift,
                       num_chunks):
    B, L, K = E.shape
    out = np.empty(B)
    for c in nb.prange(num_chunks):
        lo, hi = _chunk(c, num_chunks, B)
        a = np.zeros((L, _BLOCK, K))
        ev = np.zeros((L, _BLOCK, K))
        acc = np.empty((_BLOCK, K))
        fallback = np.empty((L, K))
        logz = np.empty(_BLOCK)
        ok = np.empty(_BLOCK, dtype=np.bool_)
        for b0 in range(lo, hi, _BLOCK):
            idx = np.arange(b0, min(b0 + _BLOCK, hi))
            nseq = idx.shape[0]
            _block_forward(E, idx, lengths, expT, colmax, min_expT, start, exp_end, min_exp_end, end_shift,
                           a, ev, acc, logz, ok)
            for s in range(nseq):
                b = idx[s]
                out[b] = logz[s] if ok[s] else _log_forward(E[b], T, start, end, lengths[b], fallback)
    return out


@nb.njit(cache=True, parallel=True)
def _block_marginals_kernel(E, T, start, end, lengths, expT, colmax, min_expT, exp_end, min_exp_end,
                            end_shift, node, edge_sum, want_sum, num_chunks):
    """Node marginals (and position-summed edge marginals) for a shared transition matrix."""
    B, L, K = E.shape
    out = np.empty(B)
    expT_t = np.ascontiguousarray(expT.T)
    for c in nb.prange(num_chunks):
        lo, hi = _chunk(c, num_chunks, B)
        a = np.zeros((L, _BLOCK, K))
        ev = np.zeros((L, _BLOCK, K))
        bb = np.zeros((L, _BLOCK, K))
        acc = np.empty((_BLOCK, K))
        tmp = np.zeros((_BLOCK, K))
        logz = np.empty(_BLOCK)
        ok = np.empty(_BLOCK, dtype=np.bool_)
        work = np.empty((3, L, K))
        shift = np.empty(L)
        outer = np.empty((K, K))
        dummy = np.zeros((0, K, K))
        scale = np.empty((L, _BLOCK))
        node_total = np.empty(L)
        for b0 in range(lo, hi, _BLOCK):
            idx = np.arange(b0, min(b0 + _BLOCK, hi))
            nseq = idx.shape[0]
            _block_forward(E, idx, lengths, expT, colmax, min_expT, start, exp_end, min_exp_end, end_shift,
                           a, ev, acc, logz, ok)
            for s in range(nseq):  # impossible sequences: nothing to propagate backwards
                if ok[s] and logz[s] == NEG_INF:
                    ok[s] = False
            _block_backward(idx, lengths, expT_t, min_expT, exp_end, ev, bb, tmp, acc, ok, scale)
            for s in range(nseq):
                b = idx[s]
                n = lengths[b]
                if not ok[s]:
                    # the per-sequence path decides between a genuine −inf and a log-space redo
                    sb = edge_sum[b] if want_sum else dummy[0]
                    out[b], _ = _marginals_one(E[b], T, start, end, n, expT, colmax, min_expT, exp_end,
                                               min_exp_end, end_shift, node[b], dummy, sb, False, want_sum,
                                               False, work, shift)
                    continue
                out[b] = logz[s]
                for t in range(n):
                    total = 0.0
                    for j in range(K):
                        v = a[t, s, j] * bb[t, s, j]
                        node[b, t, j] = v
                        total += v
                    node_total[t] = total
                    inv = 1.0 / total
                    for j in range(K):
                        node[b, t, j] *= inv
                if want_sum and n > 1:
                    # Σₜ ξₜ = expT ⊙ Σₜ a[t−1] ⊗ (ev[t]·bb[t]) / Zₜ, the sum as one outer-product GEMM;
                    # Zₜ = a[t−1] · expT (ev[t]·bb[t]) = scale[t] (a[t−1] · bb[t−1]), the backward's own product.
                    U = np.empty((n - 1, K))
                    V = np.empty((n - 1, K))
                    for t in range(1, n):
                        for j in range(K):
                            V[t - 1, j] = ev[t, s, j] * bb[t, s, j]
                        inv = 1.0 / (scale[t, s] * node_total[t - 1])
                        for i in range(K):
                            U[t - 1, i] = a[t - 1, s, i] * inv
                    np.dot(U.T, V, outer)
                    for i in range(K):
                        for j in range(K):
                            edge_sum[b, i, j] += expT[i, j] * outer[i, j]
    return out


# ---------------------------------------------------------------------------
# Viterbi, k-best, sampling
# ---------------------------------------------------------------------------


@nb.njit(cache=True, parallel=True)
def _viterbi_kernel(E, T, start, end, lengths, num_chunks):
    B, L, K = E.shape
    paths = np.full((B, L), -1, dtype=np.int64)
    scores = np.empty(B)
    for c in nb.prange(num_chunks):
        lo, hi = _chunk(c, num_chunks, B)
        delta = np.empty((L, K))
        for b in range(lo, hi):
            n = lengths[b]
            Tb = T[b % T.shape[0]]
            best = _max_forward(E[b], Tb, start, end, n, delta)
            scores[b] = best
            if best == NEG_INF:
                continue
            y = 0
            top = NEG_INF
            for j in range(K):
                v = delta[n - 1, j] + end[j]
                if v > top:
                    top = v
                    y = j
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
    """Work units for prange: a few per thread balances ragged lengths without per-sequence scratch,
    while keeping chunks long enough to fill blocks of _BLOCK sequences."""
    return max(1, min(ci.shape[0] // _BLOCK + 1, 4 * nb.get_num_threads()))


def _scaling(ci: ChainInput):
    expT, colmax, min_expT = _exp_transitions(ci.transitions)
    end_shift = float(ci.end.max()) if np.isfinite(ci.end.max()) else 0.0
    exp_end = np.exp(ci.end - end_shift)
    nz = exp_end[exp_end > 0]
    min_exp_end = float(nz.min()) if nz.size else 1.0
    return expT, colmax, min_expT, exp_end, min_exp_end, end_shift


@uses_engine_threads
def forward_values(ci: ChainInput, semiring: Semiring = LOG) -> np.ndarray:
    """⊕ over all paths of each sequence, with the generic (log-space) kernel."""
    return _FORWARD_BATCH[semiring.name](ci.emissions, ci.transitions, ci.start, ci.end, ci.lengths)


@uses_engine_threads
def log_partition(ci: ChainInput) -> np.ndarray:
    expT, colmax, min_expT, exp_end, min_exp_end, end_shift = _scaling(ci)
    if ci.transitions.shape[0] == 1:
        return _block_logz_kernel(ci.emissions, ci.transitions[0], ci.start, ci.end, ci.lengths, expT[0],
                                  colmax[0], min_expT[0], exp_end, min_exp_end, end_shift, _num_chunks(ci))
    return _logz_kernel(ci.emissions, ci.transitions, ci.start, ci.end, ci.lengths, expT, colmax,
                        min_expT, exp_end, min_exp_end, end_shift, _num_chunks(ci))


@uses_engine_threads
def viterbi(ci: ChainInput):
    return _viterbi_kernel(ci.emissions, ci.transitions, ci.start, ci.end, ci.lengths, _num_chunks(ci))


@uses_engine_threads
def marginals(ci: ChainInput, edges=True):
    """(node (B, L, K), edge, log Z (B,)).

    edges=True: edge (B, L−1, K, K) per position; edges="sum": (B, K, K) summed
    over positions (expected transition counts, without the B·L·K² array);
    edges=False: None.
    """
    if edges not in (True, False, "sum"):
        raise ValueError(f"edges must be True, False or 'sum', got {edges!r}")
    B, L, K = ci.shape
    want_edges = edges is True
    want_sum = edges == "sum"
    node = np.zeros((B, L, K))
    edge = np.zeros((B, max(L - 1, 0), K, K)) if want_edges else np.zeros((B, 0, K, K))
    edge_sum = np.zeros((B, K, K)) if want_sum else np.zeros((B, 0, 0))
    expT, colmax, min_expT, exp_end, min_exp_end, end_shift = _scaling(ci)
    if ci.transitions.shape[0] == 1 and not want_edges:
        logz = _block_marginals_kernel(ci.emissions, ci.transitions[0], ci.start, ci.end, ci.lengths, expT[0],
                                       colmax[0], min_expT[0], exp_end, min_exp_end, end_shift, node,
                                       edge_sum if want_sum else np.zeros((B, K, K)), want_sum, _num_chunks(ci))
        return node, (edge_sum if want_sum else None), logz
    logz = _marginals_kernel(ci.emissions, ci.transitions, ci.start, ci.end, ci.lengths, expT, colmax,
                             min_expT, exp_end, min_exp_end, end_shift, node, edge, edge_sum, want_edges,
                             want_sum, _num_chunks(ci))
    return node, (edge if want_edges else edge_sum if want_sum else None), logz


@uses_engine_threads
def entropy(ci: ChainInput) -> np.ndarray:
    expT, colmax, min_expT, exp_end, min_exp_end, end_shift = _scaling(ci)
    return _entropy_kernel(ci.emissions, ci.transitions, ci.start, ci.end, ci.lengths, expT, colmax,
                           min_expT, exp_end, min_exp_end, end_shift, _num_chunks(ci))


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
