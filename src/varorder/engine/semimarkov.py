"""Exact inference on semi-Markov chains (segmentations with labelled segments).

Factorization. A sequence of n positions is cut into consecutive segments
[s₁, e₁), [s₂, e₂), … with s₁ = 0, eₘ = n and labels y₁ … yₘ; a segment of label k and
length d + 1 that ends at position t (covers t − d … t) scores ``score(t, d, k)``, and a
segmentation scores

    s = start[y₁] + Σᵢ score(eᵢ − 1, eᵢ − sᵢ − 1, yᵢ) + Σᵢ₌₂ᵐ T[yᵢ₋₁, yᵢ] + end[yₘ],

p = exp(s − log Z). Segments are at most D positions long. Two forms of ``score``:

* dense: an array (L, D, K) per sequence, ``score(t, d, k) = P[t, d, k]`` (semi-Markov
  CRFs, Sarawagi & Cohen 2004);
* factored: emissions (L, K) and durations (K, D), ``score(t, d, k) = Σ_{u=t−d}^{t}
  E[u, k] + dur[k, d]`` (explicit-duration hidden semi-Markov models, Yu 2010), read by
  a running sum inside the recursion, so no (L, D, K) array exists.

Recursion (one definition, written against a :class:`~varorder.engine.semiring.Semiring`
through :func:`~varorder.engine.semiring.cells`, compiled once per semiring and form):

    a*[0, k] = lift(start[k]);    a*[s, k] = ⊕ᵢ α[s − 1, i] ⊗ T[i, k]       (a segment of k starts at s)
    α[t, k] = ⊕_{d < min(D, t + 1)} a*[t − d, k] ⊗ score(t, d, k)            (a segment of k ends at t)
    Z = ⊕ₖ α[n − 1, k] ⊗ end[k]

and the mirror backward (β[t, k]: everything after a segment of k ending at t; b*[s, k]:
everything from a segment of k starting at s), O(n·K² + n·D·K) either way. Operations are
this recursion in a chosen semiring plus a finishing step, as for the dense chain
(:mod:`varorder.engine.chain_generic_ops`): log Z (LOG), marginals (LOG forward and
backward), Viterbi (MAX, re-maximising backtrack), k-best (KBEST, the k-best backtrack
re-ranking each node's candidates once), sampling (LOG, backward sampling with uniforms
drawn outside the kernels from a seeded generator), entropy (EXPECTATION, log Z − E[s]).

References: Sarawagi & Cohen (2004) "Semi-Markov Conditional Random Fields"; Yu (2010)
"Hidden semi-Markov models"; Rush (2020) "Torch-Struct" (semiring-generic segment
recursions).
"""

from __future__ import annotations

import functools
import math

import numba as nb
import numpy as np

from varorder.engine.chain_scaled import _CHUNK, _FAST_REDUCE, _MIN_SHIFTED, _exp_into
from varorder.engine.chain_viterbi import _top_k
from varorder.engine.lattice import _draw_log
from varorder.engine.semiring import LOG, MAX, Semiring, cells, compiled
from varorder.engine.semiring import operation as choose
from varorder.engine.semiring_structured import EXPECTATION, KBEST, entropy_of
import varorder._numba_start  # noqa: E402,F401,I001  (Numba's cache saves locked across processes)

__all__ = ["NEG_INF", "SegmentInput", "forward_batch", "log_partition", "marginals", "viterbi", "kbest", "sample",
           "entropy", "segment_statistics"]

NEG_INF = -np.inf


# ---------------------------------------------------------------------------
# the two forms of a segment's score, read the same way by every recursion: for a fixed
# end t and label k, d = 0, 1, … in turn, ``run`` carrying what the form accumulates
# ---------------------------------------------------------------------------


@nb.njit(cache=True, inline="always")
def _dense_step(P, t, d, k, run):
    return run


@nb.njit(cache=True, inline="always")
def _dense_score(P, Q, t, d, k, run):
    return P[t, d, k]


@nb.njit(cache=True, inline="always")
def _dense_width(P, Q):
    return P.shape[1]


@nb.njit(cache=True, inline="always")
def _factored_step(P, t, d, k, run):
    return run + P[t - d, k]  # the segment grows to the left by one position


@nb.njit(cache=True, inline="always")
def _factored_score(P, Q, t, d, k, run):
    return run + Q[k, d]


@nb.njit(cache=True, inline="always")
def _factored_width(P, Q):
    return Q.shape[1]


_FORMS = {"dense": (_dense_step, _dense_score, _dense_width),
          "factored": (_factored_step, _factored_score, _factored_width)}


# ---------------------------------------------------------------------------
# the generic recursion (closures compiled once per semiring and form)
# ---------------------------------------------------------------------------


def _make_forward(semiring: Semiring, form: str):
    """forward(P, Q, T, start, end, n, astar, alpha) → ⊕ over segmentations, filling
    ``astar`` (n, K[, w]) and ``alpha`` (n, K[, w]) as in the module docstring."""
    c = cells(semiring)
    zero, plus, times_weight, lift, is_zero, put = c.zero, c.plus, c.times_weight, c.lift, c.is_zero, c.put
    step, score, width = _FORMS[form]

    # not cached (closure factory): see varorder.engine.semiring
    @nb.njit
    def forward(P, Q, T, start, end, n, astar, alpha):
        K = T.shape[0]
        D = width(P, Q)
        tmp = np.empty_like(alpha[0, :1])[0]  # floats (unused) or rows of scratch
        total = np.empty_like(alpha[0, :1])[0]
        row = astar[0]
        for k in range(K):
            put(row, k, lift(row[k], start[k]))
        for t in range(n):
            row = alpha[t]
            for k in range(K):
                acc = zero(row[k])
                run = 0.0
                for d in range(min(D, t + 1)):
                    run = step(P, t, d, k, run)
                    w = score(P, Q, t, d, k, run)
                    if w == NEG_INF:
                        continue
                    a = astar[t - d][k]
                    if is_zero(a):
                        continue
                    acc = plus(acc, acc, times_weight(tmp, a, w))
                put(row, k, acc)
            if t + 1 < n:
                nxt = astar[t + 1]
                for j in range(K):
                    put(nxt, j, zero(nxt[j]))
                for i in range(K):
                    ai = row[i]
                    if is_zero(ai):
                        continue
                    for j in range(K):
                        put(nxt, j, plus(nxt[j], nxt[j], times_weight(tmp, ai, T[i, j])))
        total = zero(total)
        row = alpha[n - 1]
        for k in range(K):
            total = plus(total, total, times_weight(tmp, row[k], end[k]))
        return total

    return forward


def _make_backward(semiring: Semiring, form: str):
    """backward(P, Q, T, start, end, n, bstar, beta) → ⊕ over segmentations (the same
    value as the forward), filling ``beta[t, k]`` (everything after a segment of k ending
    at t, end included) and ``bstar[s, k]`` (everything from a segment of k starting at s)."""
    c = cells(semiring)
    zero, plus, times_weight, lift, is_zero, put = c.zero, c.plus, c.times_weight, c.lift, c.is_zero, c.put
    step, score, width = _FORMS[form]

    # not cached (closure factory): see varorder.engine.semiring
    @nb.njit
    def backward(P, Q, T, start, end, n, bstar, beta):
        K = T.shape[0]
        D = width(P, Q)
        tmp = np.empty_like(beta[0, :1])[0]
        total = np.empty_like(beta[0, :1])[0]
        for s in range(n):
            row = bstar[s]
            for k in range(K):
                put(row, k, zero(row[k]))
        for t in range(n - 1, -1, -1):
            row = beta[t]
            for i in range(K):
                if t == n - 1:
                    acc = lift(row[i], end[i])
                else:
                    acc = zero(row[i])
                    nxt = bstar[t + 1]  # complete: every segment starting at t + 1 ends later
                    for j in range(K):
                        bj = nxt[j]
                        if is_zero(bj):
                            continue
                        acc = plus(acc, acc, times_weight(tmp, bj, T[i, j]))
                put(row, i, acc)
            for k in range(K):
                bk = row[k]
                if is_zero(bk):
                    continue
                run = 0.0
                for d in range(min(D, t + 1)):
                    run = step(P, t, d, k, run)
                    w = score(P, Q, t, d, k, run)
                    if w == NEG_INF:
                        continue
                    cur = bstar[t - d]
                    put(cur, k, plus(cur[k], cur[k], times_weight(tmp, bk, w)))
        total = zero(total)
        row = bstar[0]
        for k in range(K):
            total = plus(total, total, times_weight(tmp, row[k], start[k]))
        return total

    return backward


def _per_form(maker):
    """{form: factory(semiring)} for :func:`compiled`: one function object per form, made once."""
    return {form: functools.partial(maker, form=form) for form in _FORMS}


_FORWARD = _per_form(_make_forward)
_BACKWARD = _per_form(_make_backward)


def forward_kernel(semiring: Semiring, form: str):
    """The generic forward of ``form`` ("dense" or "factored") in ``semiring``, compiled once."""
    return compiled(_FORWARD[form], semiring)


def backward_kernel(semiring: Semiring, form: str):
    """The generic backward of ``form`` in ``semiring``, compiled once."""
    return compiled(_BACKWARD[form], semiring)


def _make_forward_batch(forward, put):
    # not cached (closure factory): see varorder.engine.semiring
    @nb.njit
    def run(P, Q, T, start, end, lengths, astars, alphas, out):
        B = lengths.shape[0]
        keep = alphas.shape[0] == B
        for b in range(B):
            astar = astars[b] if keep else np.empty_like(astars[0])
            alpha = alphas[b] if keep else np.empty_like(alphas[0])
            put(out, b, forward(P[b], Q, T[b % T.shape[0]], start, end, lengths[b], astar, alpha))
        return out

    return run


def _make_batch(semiring: Semiring, form: str):
    return _make_forward_batch(forward_kernel(semiring, form), cells(semiring).put)


_BATCH = _per_form(_make_batch)


# ---------------------------------------------------------------------------
# a validated input (the facade varorder.semimarkov builds it)
# ---------------------------------------------------------------------------


class SegmentInput:
    """A validated batch: ``form`` "dense" (``P`` = segment scores (B, L, D, K), ``Q`` a
    dummy) or "factored" (``P`` = emissions (B, L, K), ``Q`` = durations (K, D));
    ``transitions`` (1 or B, K, K), ``start``, ``end`` (K,), ``lengths`` (B,) int64."""

    __slots__ = ("form", "P", "Q", "transitions", "start", "end", "lengths", "max_length", "num_labels")

    def __init__(self, form, P, Q, transitions, start, end, lengths):
        self.form = form
        self.P = P
        self.Q = Q
        self.transitions = transitions
        self.start = start
        self.end = end
        self.lengths = lengths
        self.num_labels = transitions.shape[-1]
        self.max_length = P.shape[2] if form == "dense" else Q.shape[1]

    @property
    def batch(self) -> int:
        return self.lengths.shape[0]

    @property
    def positions(self) -> int:
        return self.P.shape[1]

    def args(self):
        return self.P, self.Q, self.transitions, self.start, self.end, self.lengths


def forward_batch(si: SegmentInput, semiring: Semiring, width: int | None = None, keep: bool = False):
    """⊕ over each sequence's segmentations, (B,) or (B, w); with ``keep`` also every
    forward value (a*, α), each (B, L, K[, w])."""
    run = compiled(_BATCH[si.form], semiring)
    shape = semiring.value_shape(width)
    B, L, K = si.batch, si.positions, si.num_labels
    lead = (B,) if keep else (1,)
    astars = np.empty(lead + (L, K) + shape)
    alphas = np.empty(lead + (L, K) + shape)
    out = run(si.P, si.Q, si.transitions, si.start, si.end, si.lengths, astars, alphas,
              np.empty((B,) + shape))
    return (out, astars, alphas) if keep else out


def log_partition(si: SegmentInput) -> np.ndarray:
    return forward_batch(si, LOG)


def entropy(si: SegmentInput) -> np.ndarray:
    """Entropy (B,) in nats, NaN without a segmentation: the EXPECTATION forward."""
    return entropy_of(forward_batch(si, EXPECTATION))


# ---------------------------------------------------------------------------
# marginals: the LOG forward and backward, then each segment's share
# ---------------------------------------------------------------------------


@nb.njit(cache=True)
def _finish_occupancy(occ, n):
    """Occupancy from its difference array (+p where a segment starts, −p after it ends):
    the running sum, clipped to [0, 1] against its rounding."""
    K = occ.shape[1]
    for t in range(1, n):
        for k in range(K):
            occ[t, k] += occ[t - 1, k]
    for t in range(n):
        for k in range(K):
            v = occ[t, k]
            occ[t, k] = 0.0 if v < 0.0 else (1.0 if v > 1.0 else v)


def _make_marginals(semiring: Semiring, form: str):
    forward = forward_kernel(LOG, form)
    backward = backward_kernel(LOG, form)
    step, score, width = _FORMS[form]

    # not cached (closure factory): see varorder.engine.semiring
    @nb.njit
    def run(P, Q, T, start, end, lengths, seg_out, occupancy, durations, edges, first, logz):
        """Per sequence b: segment marginals into seg_out[b] (L, D, K) when it has B rows;
        occupancy[b] (L, K) = P(position t in a segment of k); durations[b] (K, D) expected
        segments of k and length d + 1; edges[b] (K, K) expected transitions; first[b] (K,)
        the first segment's label. All zero where log Z = −inf."""
        B = lengths.shape[0]
        K = T.shape[-1]
        D = width(P[0], Q)
        L = P.shape[1]
        keep_segments = seg_out.shape[0] == B
        astar = np.empty((L, K))
        alpha = np.empty((L, K))
        bstar = np.empty((L, K))
        beta = np.empty((L, K))
        for b in range(B):
            n = lengths[b]
            Pb = P[b]
            Tb = T[b % T.shape[0]]
            z = forward(Pb, Q, Tb, start, end, n, astar, alpha)
            logz[b] = z
            if z == NEG_INF:
                continue
            backward(Pb, Q, Tb, start, end, n, bstar, beta)
            occ = occupancy[b]
            for k in range(K):
                first[b, k] = np.exp(start[k] + bstar[0, k] - z)
            for t in range(n):
                for k in range(K):
                    bk = beta[t, k]
                    if bk == NEG_INF:
                        continue
                    run_ = 0.0
                    for d in range(min(D, t + 1)):
                        run_ = step(Pb, t, d, k, run_)
                        w = score(Pb, Q, t, d, k, run_)
                        a = astar[t - d, k]
                        if w == NEG_INF or a == NEG_INF:
                            continue
                        p = np.exp(a + w + bk - z)
                        if keep_segments:
                            seg_out[b, t, d, k] = p
                        durations[b, k, d] += p
                        occ[t - d, k] += p  # difference array: + at the start, − after the end
                        if t + 1 < n:
                            occ[t + 1, k] -= p
                if t + 1 < n:
                    for i in range(K):
                        ai = alpha[t, i]
                        if ai == NEG_INF:
                            continue
                        for j in range(K):
                            v = ai + Tb[i, j] + bstar[t + 1, j]
                            if v > NEG_INF:
                                edges[b, i, j] += np.exp(v - z)
            _finish_occupancy(occ, n)
        return logz

    return run


_MARGINALS = _per_form(_make_marginals)


def _statistics(si: SegmentInput, keep_segments: bool):
    run = compiled(_MARGINALS[si.form], LOG)
    B, L, K, D = si.batch, si.positions, si.num_labels, si.max_length
    seg = np.zeros((B, L, D, K) if keep_segments else (0, 1, 1, 1))
    occupancy = np.zeros((B, L, K))
    durations = np.zeros((B, K, D))
    edges = np.zeros((B, K, K))
    first = np.zeros((B, K))
    logz = np.empty(B)
    run(si.P, si.Q, si.transitions, si.start, si.end, si.lengths, seg, occupancy, durations, edges, first, logz)
    return seg, occupancy, durations, edges, first, logz


def marginals(si: SegmentInput, edges: bool = False):
    """Segment marginals (B, L, D, K), with ``edges`` also expected transitions (B, K, K)."""
    seg, _, _, edge, _, _ = _statistics(si, keep_segments=True)
    return (seg, edge) if edges else seg


def generic_segment_statistics(si: SegmentInput):
    """(log Z (B,), occupancy (B, L, K), durations (B, K, D), edges (B, K, K), first (B, K)):
    what EM for a hidden semi-Markov model needs, without the (B, L, D, K) marginals — the
    generic LOG forward and backward."""
    _, occupancy, durations, edges, first, logz = _statistics(si, keep_segments=False)
    return logz, occupancy, durations, edges, first


# Products below this bound are treated as a potential underflow: the scaled recursion
# gives the sequence up and the generic log-space one computes it.
_TINY = 1e-280


@nb.njit(cache=True)
def _compensated_add(total, comp, x):
    """Kahan's step (total + x, compensation), in plain arithmetic (its caller reassociates)."""
    y = x - comp
    summed = total + y
    return summed, (summed - total) - y


@nb.njit(cache=True)
def _shifted_exp(E, n, e0, shift, wbuf, bits):
    """e0[t] = exp(E[t] − shift[t]) for t < n, shift[t] the row's largest entry; False when
    a row is all −inf. Chunks of rows through the vectorised exp; entries below its range
    by the library exp (exact to the last bit it gives)."""
    K = E.shape[1]
    flat = e0.reshape(-1)
    for t0 in range(0, n, _CHUNK):
        t1 = min(n, t0 + _CHUNK)
        low = False
        for t in range(t0, t1):
            m = NEG_INF
            for k in range(K):
                m = max(m, E[t, k])
            if m == NEG_INF:
                return False
            shift[t] = m
            base = (t - t0) * K
            for k in range(K):
                w = E[t, k] - m
                wbuf[base + k] = w
                low |= w < _MIN_SHIFTED
        size = (t1 - t0) * K
        _exp_into(wbuf[:size], flat[t0 * K:t0 * K + size], bits)
        if low:
            for j in range(size):
                if wbuf[j] < _MIN_SHIFTED:
                    flat[t0 * K + j] = math.exp(wbuf[j])
    return True


@nb.njit(cache=True, inline="always")
def _propagate(v, A, out):
    """out = vᵀA: the rows of A weighted by v, summed in row order. Inlined, so the caller's fastmath
    flags apply (the scaled statistics reassociate; the flat marginals keep plain arithmetic)."""
    out[:] = 0.0
    for i in range(A.shape[0]):
        vi = v[i]
        Ai = A[i]
        for k in range(A.shape[1]):
            out[k] += vi * Ai[k]


@nb.njit(cache=True, fastmath=_FAST_REDUCE)
def _factored_forward(q, shift, n, dur2, A, pi, ring, astar, alpha):
    """The scaled forward of one sequence (see :func:`_scaled_factored_statistics`): a*, α
    normalised per position, q[t] turned from ẽₜ into ẽₜ / sₜ; (log of the scales, ok)."""
    K, D = ring.shape
    ring[:, :] = 0.0
    log_scale = 0.0
    comp = 0.0
    for t in range(n):
        nxt = astar[t]
        if t == 0:
            nxt[:] = pi
        else:
            _propagate(alpha[t - 1], A, nxt)
        c = t % D
        sig = (D - c) % D  # the slot of the segments starting at t (empty: see below)
        after = (D - (t + 1) % D) % D  # the slot of the segments starting at t + 1
        before = t - 1 if t > 0 else 0  # (at t = 0 the ring is empty)
        total = 0.0
        for k in range(K):
            a = nxt[k]
            row = ring[k]
            qk = q[before, k]
            weights = dur2[k, c:c + D]  # slot j holds a segment of length (j + c) mod D + 1
            acc = 0.0
            for j in range(D):
                g = row[j] * qk
                row[j] = g
                acc += weights[j] * g
            row[sig] = a
            # the segment that started at t + 1 − D cannot reach t + 1: its slot is emptied now, after the
            # pass (a store just before the pass's vector loads of the row would stall them)
            row[after] = 0.0
            v = (acc + a * dur2[k, 0]) * q[t, k]
            alpha[t, k] = v
            total += v
        if not (total > _TINY and total < np.inf):
            return log_scale, False
        log_scale, comp = _compensated_add(log_scale, comp, math.log(total) + shift[t])
        inv = 1.0 / total
        for k in range(K):
            alpha[t, k] *= inv
            q[t, k] *= inv
    return log_scale, True


@nb.njit(cache=True, fastmath=_FAST_REDUCE)
def _factored_backward(q, n, dur2, A, At, fin, invR, ring, counts, astar, alpha, bstar, beta, occ, pairs):
    """The scaled backward of one sequence with its statistics (see
    :func:`_scaled_factored_statistics`): b*; rotated duration counts; occupancy as the
    difference array (start mass at t, minus the end mass at t − 1); Σₜ αₜᵀ b*ₜ₊₁ into pairs."""
    K, D = ring.shape
    ring[:, :] = 0.0
    counts[:, :] = 0.0
    pairs[:, :] = 0.0
    beta[:] = fin
    for k in range(K):
        ring[k, (n - 1) % D] = beta[k]
    for s in range(n - 1, -1, -1):
        c = s % D  # the slot of the segments ending at s (holding β[s] already)
        for k in range(K):
            row = ring[k]
            coef = astar[s, k] * invR
            qk = q[s, k]
            weights = dur2[k, D - c:2 * D - c]  # slot j: a segment of length (j − c) mod D + 1
            mass = counts[k, D - c:2 * D - c]
            bs = 0.0
            for j in range(D):
                g = row[j] * qk
                row[j] = g
                w = weights[j] * g
                bs += w
                mass[j] += coef * w
            bstar[s, k] = bs
            occ[s, k] = coef * bs  # segments of k starting at s
            if s + 1 < n:
                occ[s + 1, k] -= alpha[s, k] * beta[k] * invR  # segments of k ending at s
        if s > 0:  # β[s − 1] = A b*[s] into the slot of the segments ending at s − 1 (its ends expired)
            nxt = bstar[s]
            cur = alpha[s - 1]
            _propagate(nxt, At, beta)
            for i in range(K):
                ai = cur[i]
                Pi = pairs[i]
                for j in range(K):
                    Pi[j] += ai * nxt[j]
            slot = (s - 1) % D
            for k in range(K):
                ring[k, slot] = beta[k]


@nb.njit(cache=True)
def _scaled_factored_statistics(E, logdur, T, start, end, lengths, occupancy, durations, edges, first, logz, done):
    """The factored form's statistics in exp space (the LOG specialisation of
    :func:`generic_segment_statistics`), one forward and one backward pass per sequence.

    Emissions are shifted to a largest entry of 0 per position (ẽ); forward values are
    normalised per position by their sum sₜ, and qᵤ = ẽᵤ / sᵤ. A segment of label k over
    s … t then weighs a*[s, k] · dur[k, t − s] · Πᵤ₌ₛᵗ qᵤ[k] in the forward and
    dur[k, t − s] · Πᵤ₌ₛᵗ qᵤ[k] · β[t, k] in the backward. The running products of the
    D segments alive at a position are kept per label in a ring of D slots (the forward's
    indexed by −s mod D, the backward's by t mod D), every slot multiplied by the new
    position's q in one vectorised pass that also reads the slots against the durations
    (``dur2`` = [dur, dur] turns the ring's rotation into a contiguous slice): K · D
    independent multiply-adds per position, no chain of dependent products. The backward
    sums each segment's posterior into rotated duration counts in the same pass;
    occupancy is the mass of the segments starting at or before t minus that of the
    segments ending before t (a*·b* and α·β per position); expected transitions
    A ⊙ Σₜ αₜᵀ b*ₜ₊₁. ``done[b]`` is False where a product could underflow or overflow, or
    the backward's total strays from the forward's (the caller recomputes that sequence
    with the generic recursion)."""
    B, L, K = E.shape
    D = logdur.shape[1]
    dur2 = np.empty((K, 2 * D))
    for k in range(K):
        for d in range(D):
            v = math.exp(logdur[k, d])
            dur2[k, d] = v
            dur2[k, D + d] = v
    pi = np.exp(start)
    fin = np.exp(end)
    N = 1
    for b in range(B):
        N = max(N, lengths[b])
    q = np.empty((N, K))  # ẽ, then ẽ / s once s is known
    shift = np.empty(N)
    astar = np.empty((N, K))
    alpha = np.empty((N, K))
    bstar = np.empty((N, K))
    ring = np.empty((K, D))
    counts = np.empty((K, 2 * D))
    beta = np.empty(K)
    wbuf = np.empty(_CHUNK * K)
    bits = np.empty(_CHUNK * K, dtype=np.int64)
    pairs = np.empty((K, K))
    A = np.empty((K, K))
    At = np.empty((K, K))
    for b in range(B):
        done[b] = False
        n = lengths[b]
        if b == 0 or T.shape[0] > 1:
            Tb = T[b % T.shape[0]]
            for i in range(K):
                for j in range(K):
                    A[i, j] = math.exp(Tb[i, j])
                    At[j, i] = A[i, j]
        if not _shifted_exp(E[b], n, q, shift, wbuf, bits):
            continue
        log_scale, ok = _factored_forward(q, shift, n, dur2, A, pi, ring, astar, alpha)
        if not ok:
            continue
        R = 0.0
        for k in range(K):
            R += alpha[n - 1, k] * fin[k]
        if not (R > _TINY and R < np.inf):
            continue
        invR = 1.0 / R
        occ = occupancy[b]
        _factored_backward(q, n, dur2, A, At, fin, invR, ring, counts, astar, alpha, bstar, beta, occ, pairs)
        total = 0.0
        for k in range(K):
            first[b, k] = pi[k] * bstar[0, k] * invR
            total += first[b, k]
        if not abs(total - 1.0) < 1e-9:  # NaN fails too
            occ[:n] = 0.0
            first[b] = 0.0
            continue
        for k in range(K):
            for d in range(D):
                durations[b, k, d] = counts[k, d] + counts[k, D + d]
        for i in range(K):
            for j in range(K):
                edges[b, i, j] = A[i, j] * pairs[i, j] * invR
        _finish_occupancy(occ, n)
        logz[b] = log_scale + math.log(R)
        done[b] = True
    return done


def _subset(si: SegmentInput, rows: np.ndarray) -> SegmentInput:
    T = si.transitions if si.transitions.shape[0] == 1 else si.transitions[rows]
    return SegmentInput(si.form, si.P[rows], si.Q, T, si.start, si.end, si.lengths[rows])


def _scaled_segment_statistics(si: SegmentInput):
    """The registered LOG specialisation for the factored form; the dense form, and any
    sequence the scaled recursion gives up, run the generic recursion."""
    if si.form != "factored":
        return generic_segment_statistics(si)
    B, L, K, D = si.batch, si.positions, si.num_labels, si.max_length
    occupancy = np.zeros((B, L, K))
    durations = np.zeros((B, K, D))
    edges = np.zeros((B, K, K))
    first = np.zeros((B, K))
    logz = np.full(B, NEG_INF)
    done = np.zeros(B, dtype=np.bool_)
    _scaled_factored_statistics(si.P, si.Q, si.transitions, si.start, si.end, si.lengths, occupancy, durations,
                                edges, first, logz, done)
    rest = np.flatnonzero(~done)
    if rest.size:
        occupancy[rest] = 0.0
        durations[rest] = 0.0
        edges[rest] = 0.0
        first[rest] = 0.0
        out = generic_segment_statistics(_subset(si, rest))
        logz[rest], occupancy[rest], durations[rest], edges[rest], first[rest] = out
    return logz, occupancy, durations, edges, first


# Registered specialisations of the operations: name → (semiring, function with the
# generic operation's signature and results; tests/test_semimarkov.py checks them equal).
SPECIALISED = {"segment_statistics": (LOG, _scaled_segment_statistics)}
GENERIC = {"segment_statistics": generic_segment_statistics}


def segment_statistics(si: SegmentInput, specialised: bool = True):
    """(log Z (B,), occupancy (B, L, K), durations (B, K, D), edges (B, K, K), first (B, K)):
    what EM for a hidden semi-Markov model needs, without the (B, L, D, K) marginals."""
    return choose("segment_statistics", GENERIC, SPECIALISED, specialised)(si)


# ---------------------------------------------------------------------------
# Viterbi and sampling: backtracks over the kept forward values
# ---------------------------------------------------------------------------



@nb.njit(cache=True)
def _argmax(values, count):
    best = NEG_INF
    arg = -1
    for i in range(count):
        if values[i] > best:
            best = values[i]
            arg = i
    return arg


def _make_backtrack(semiring: Semiring, form: str):
    """Walk back from the end choosing, at a segment end (t, k), its length and, at a
    segment start s > 0, the previous label: by argmax of the candidates (``uniforms``
    empty: Viterbi over MAX values) or by drawing from them (LOG values)."""
    step, score, width = _FORMS[form]

    # not cached (closure factory): see varorder.engine.semiring
    @nb.njit
    def walk(P, Q, T, end, n, astar, alpha, total, uniforms, segs):
        """Fills segs (n, 3) with (start, end, label) from the last segment back; returns
        how many. ``uniforms`` (2n + 1,) or empty."""
        K = T.shape[0]
        D = width(P, Q)
        draw = uniforms.shape[0] > 0
        cand = np.empty(max(K, D))
        for k in range(K):
            cand[k] = alpha[n - 1, k] + end[k]
        k = _draw_log(cand[:K], uniforms[0]) if draw else _argmax(cand, K)
        t = n - 1
        m = 0
        u = 1
        while k >= 0:
            run = 0.0
            reach = min(D, t + 1)
            for d in range(reach):
                run = step(P, t, d, k, run)
                cand[d] = astar[t - d, k] + score(P, Q, t, d, k, run)
            d = _draw_log(cand[:reach], uniforms[u]) if draw else _argmax(cand, reach)
            u += 1
            s = t - d
            segs[m, 0] = s
            segs[m, 1] = t + 1
            segs[m, 2] = k
            m += 1
            if s == 0:
                break
            for i in range(K):
                cand[i] = alpha[s - 1, i] + T[i, k]
            k = _draw_log(cand[:K], uniforms[u]) if draw else _argmax(cand, K)
            u += 1
            t = s - 1
        return m

    return walk


_BACKTRACK = _per_form(_make_backtrack)


def _segmentation(segs, m):
    return [(int(segs[i, 0]), int(segs[i, 1]), int(segs[i, 2])) for i in range(m - 1, -1, -1)]


def _forward_one(si: SegmentInput, b: int, semiring: Semiring, width: int | None = None):
    """(total, a*, α) of sequence b in ``semiring``, every value kept."""
    n = int(si.lengths[b])
    shape = semiring.value_shape(width)
    astar = np.empty((n, si.num_labels) + shape)
    alpha = np.empty((n, si.num_labels) + shape)
    P = si.P[b]
    T = si.transitions[b % si.transitions.shape[0]]
    total = forward_kernel(semiring, si.form)(P, si.Q, T, si.start, si.end, n, astar, alpha)
    return total, astar, alpha, P, T, n


def viterbi(si: SegmentInput):
    """(segmentations: per sequence a list of (start, end, label), end exclusive, empty
    without a segmentation; scores (B,)): the MAX forward, the re-maximising backtrack."""
    walk = compiled(_BACKTRACK[si.form], MAX)
    out, scores = [], np.empty(si.batch)
    none = np.empty(0)
    for b in range(si.batch):
        best, astar, alpha, P, T, n = _forward_one(si, b, MAX)
        scores[b] = best
        if best == NEG_INF:
            out.append([])
            continue
        segs = np.empty((n, 3), dtype=np.int64)
        m = walk(P, si.Q, T, si.end, n, astar, alpha, best, none, segs)
        out.append(_segmentation(segs, m))
    return out, scores


def sample(si: SegmentInput, n_samples: int, rng: np.random.Generator):
    """Per sequence a list of ``n_samples`` exact posterior segmentations (empty lists where
    log Z = −inf): the LOG forward, then backward sampling. The uniforms come from ``rng``
    in a fixed order (sequence by sequence), so a seed fixes the samples."""
    walk = compiled(_BACKTRACK[si.form], LOG)
    out = []
    for b in range(si.batch):
        n = int(si.lengths[b])
        uniforms = rng.random((n_samples, 2 * n + 1))
        logz, astar, alpha, P, T, n = _forward_one(si, b, LOG)
        if logz == NEG_INF:
            out.append([])
            continue
        segs = np.empty((n, 3), dtype=np.int64)
        found = []
        for r in range(n_samples):
            m = walk(P, si.Q, T, si.end, n, astar, alpha, logz, uniforms[r], segs)
            found.append(_segmentation(segs, m))
        out.append(found)
    return out


# ---------------------------------------------------------------------------
# k-best: the KBEST forward and the k-best backtrack
# ---------------------------------------------------------------------------



def _make_kbest_backtrack(semiring: Semiring, form: str):
    """The k best segmentations from KBEST values: an entry of rank r at a node is the r-th
    of the candidates its ⊕ combined, re-ranked with the same arithmetic on the first
    visit of the node (as :mod:`varorder.engine.kbest` does for chains)."""
    step, score, width = _FORMS[form]

    # not cached (closure factory): see varorder.engine.semiring
    @nb.njit
    def walk(P, Q, T, end, n, astar, alpha, segs, counts, scores):
        K = T.shape[0]
        D = width(P, Q)
        kk = alpha.shape[2]
        cand = np.empty(max(K, D) * kk)
        end_bp = np.empty(kk, dtype=np.int64)
        seen_end = np.zeros((n, K), dtype=np.bool_)  # α nodes: rank → d·kk + rank of a*
        bp_end = np.empty((n, K, kk), dtype=np.int64)
        seen_start = np.zeros((n, K), dtype=np.bool_)  # a* nodes (s > 0): rank → i·kk + rank of α
        bp_start = np.empty((n, K, kk), dtype=np.int64)
        for k in range(K):
            for r in range(kk):
                cand[k * kk + r] = alpha[n - 1, k, r] + end[k]
        end_bp[:] = _top_k(cand[:K * kk], kk)
        for q in range(kk):
            if end_bp[q] < 0:
                counts[q] = 0
                scores[q] = NEG_INF
                continue
            k = end_bp[q] // kk
            rank = end_bp[q] % kk
            scores[q] = alpha[n - 1, k, rank] + end[k]
            t = n - 1
            m = 0
            while True:
                if not seen_end[t, k]:
                    run = 0.0
                    reach = min(D, t + 1)
                    for d in range(reach):
                        run = step(P, t, d, k, run)
                        w = score(P, Q, t, d, k, run)
                        for r in range(kk):
                            cand[d * kk + r] = astar[t - d, k, r] + w
                    bp_end[t, k] = _top_k(cand[:reach * kk], kk)
                    seen_end[t, k] = True
                idx = bp_end[t, k, rank]
                d = idx // kk
                rank = idx % kk
                s = t - d
                segs[q, m, 0] = s
                segs[q, m, 1] = t + 1
                segs[q, m, 2] = k
                m += 1
                if s == 0:
                    break
                if not seen_start[s, k]:
                    for i in range(K):
                        for r in range(kk):
                            cand[i * kk + r] = alpha[s - 1, i, r] + T[i, k]
                    bp_start[s, k] = _top_k(cand[:K * kk], kk)
                    seen_start[s, k] = True
                idx = bp_start[s, k, rank]
                k = idx // kk
                rank = idx % kk
                t = s - 1
            counts[q] = m
        return scores

    return walk


_KBEST_WALK = _per_form(_make_kbest_backtrack)


def kbest(si: SegmentInput, k: int):
    """(per sequence a list of up to k segmentations, best first; scores (B, k), −inf
    padded): the KBEST forward, then the k-best backtrack."""
    walk = compiled(_KBEST_WALK[si.form], KBEST)
    out, scores = [], np.full((si.batch, k), NEG_INF)
    for b in range(si.batch):
        totals, astar, alpha, P, T, n = _forward_one(si, b, KBEST, k)
        segs = np.empty((k, n, 3), dtype=np.int64)
        counts = np.zeros(k, dtype=np.int64)
        walk(P, si.Q, T, si.end, n, astar, alpha, segs, counts, scores[b])
        out.append([_segmentation(segs[q], counts[q]) for q in range(k) if counts[q] > 0])
    return out, scores
