"""Segment marginals of dense semi-Markov chains stored flat: ragged sequences, one row per position.

Factorization (Sarawagi & Cohen, "Semi-Markov conditional random fields for information
extraction", NIPS 2004): the dense form of :mod:`varorder.engine.semimarkov`. Sequence b
holds the positions ``offsets[b] … offsets[b + 1] − 1`` of a flat (N, D, K) array P; a
segment of label k and length d + 1 ending at flat position t scores ``P[t, d, k]`` (it
covers t − d … t, and is unreadable when it would start before its sequence), and a
segmentation scores

    s = start[y₁] + Σᵢ P[eᵢ − 1, eᵢ − sᵢ − 1, yᵢ] + Σᵢ₌₂ᵐ T[yᵢ₋₁, yᵢ] + end[yₘ].

Operation: ``marginals`` → log Z per sequence, the segment marginals (N, D, K) and the
expected transition counts summed over the sequences (K, K) — what a semi-Markov CRF's
gradient needs. Its definition is the engine's generic LOG forward–backward
(:func:`generic_marginals`, each sequence through :mod:`varorder.engine.semimarkov`); the
registered LOG specialisation (:data:`SPECIALISED`) is the same recursion in exp space:

    ŝ[t, d, k] = exp(P[t, d, k] + τ·[t − d > 0] + C_{t−d−1} − C_t)        (C₋₁ = log-shift of start)
    α̂[t, k] = Σ_d â*[t − d, k] ŝ[t, d, k],   â*[s, k] = Σᵢ α̂[s − 1, i] Â[i, k],   Â = exp(T − τ)

with τ the largest transition score (each segment but the first has one incoming
transition, so τ moves into its score), C_t chosen so that Σₖ α̂[t, k] = 1 (Rabiner's
scaling, per position), and the backward on the same scales (β̂[n − 1] = exp(end)/R,
b̂*[s, k] = Σ_d ŝ[s + d, d, k] β̂[s + d, k], β̂[t] = Â b̂*[t + 1]), so that the segment
marginal is â*[s, k] ŝ[t, d, k] β̂[t, k] and the transition's α̂[t, i] Â[i, j] b̂*[t + 1, j];
log Z = C_{n−1} + log R. The factors ŝ are computed once and overwritten by the marginals.
A sequence whose factors could underflow — transition, start or end scores, or the readable
segment scores of one position, spread over more than ``_SPREAD`` nats (a value lost to
underflow could be multiplied back by a later factor that large); a scale below 1e-280; a
backward value beyond 1e280 — is handed to the log-space form of the same recursion (log-sum-exp at
every sum, exact at any magnitude). ``tests/test_engine_semimarkov_flat.py`` checks both against each other and
against enumeration.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from varorder.engine import semimarkov as _semimarkov
from varorder.engine.semimarkov import _propagate
from varorder.engine.semiring import LOG
from varorder.engine.semiring import operation as choose
import varorder._numba_start  # noqa: E402,F401,I001  (Numba's cache saves locked across processes)

__all__ = ["marginals", "generic_marginals", "SPECIALISED", "GENERIC"]

NEG_INF = -np.inf
# every factor of a step (Â, ŝ, exp(start − max), exp(end − max)) lies in [e^-_SPREAD, 1] or is 0 (a hard
# zero): two steps stay above 1e-261, within the doubles; a larger spread sends the sequence to the generic path
_SPREAD = 300.0
_TINY = 1e-280
_HUGE = 1e280


def _one(P, offsets, b, T, start, end):
    """The generic recursion on sequence b: (log Z, segment marginals (n, D, K), edges (K, K))."""
    lo, hi = int(offsets[b]), int(offsets[b + 1])
    n = hi - lo
    D = P.shape[1]
    block = np.full((1, n, D, P.shape[2]), NEG_INF)
    for d in range(min(D, n)):
        block[0, d:, d] = P[lo + d:hi, d]
    si = _semimarkov.SegmentInput("dense", block, np.zeros((1, 1)), T[None], start, end,
                                  np.array([n], dtype=np.int64))
    logz = float(_semimarkov.log_partition(si)[0])
    seg, edges = _semimarkov.marginals(si, edges=True)
    return logz, seg[0], edges[0]


def generic_marginals(P, offsets, T, start, end):
    """(log Z (B,), segment marginals (N, D, K), expected transitions summed over the sequences (K, K)) by the
    generic LOG forward–backward of :mod:`varorder.engine.semimarkov`, one sequence at a time; zero marginals
    where a segment is unreadable or log Z = −inf."""
    B = offsets.size - 1
    seg = np.zeros(P.shape)
    edges = np.zeros(T.shape)
    logz = np.empty(B)
    for b in range(B):
        logz[b], s, e = _one(P, offsets, b, T, start, end)
        seg[int(offsets[b]):int(offsets[b + 1])] = s
        edges += e
    return logz, seg, edges


@nb.njit(cache=True)
def _spread(values):
    """True when the finite entries of ``values`` lie within ``_SPREAD`` of each other."""
    high = NEG_INF
    low = np.inf
    for v in values:
        if v > NEG_INF:
            high = max(high, v)
            low = min(low, v)
    return high == NEG_INF or high - low <= _SPREAD


@nb.njit(cache=True)
def _scaled(P, offsets, T, start, end, seg, logz, edges, done):
    """The exp-space recursion of the module docstring on every sequence; ``done[b]`` False where it gave up
    (its rows of ``seg`` are then left zero and its edges not added)."""
    B = offsets.shape[0] - 1
    D = P.shape[1]
    K = P.shape[2]
    tau = NEG_INF
    tlow = np.inf
    for i in range(K):
        for j in range(K):
            v = T[i, j]
            if v > tau:
                tau = v
            if v > NEG_INF and v < tlow:
                tlow = v
    if tau == NEG_INF:
        tau = 0.0
        tlow = 0.0
    spread_ok = _spread(start) and _spread(end) and tau - tlow <= _SPREAD
    A = np.empty((K, K))
    At = np.empty((K, K))
    for i in range(K):
        for j in range(K):
            A[i, j] = np.exp(T[i, j] - tau)
            At[j, i] = A[i, j]
    smax = NEG_INF
    emax = NEG_INF
    for k in range(K):
        if start[k] > smax:
            smax = start[k]
        if end[k] > emax:
            emax = end[k]
    pi = np.empty(K)
    fin = np.empty(K)
    for k in range(K):
        pi[k] = np.exp(start[k] - smax) if smax > NEG_INF else 0.0
        fin[k] = np.exp(end[k] - emax) if emax > NEG_INF else 0.0
    nmax = 0
    for b in range(B):
        if offsets[b + 1] - offsets[b] > nmax:
            nmax = offsets[b + 1] - offsets[b]
    astar = np.empty((nmax, K))
    alpha = np.empty((nmax, K))
    beta = np.empty(K)
    bstar = np.empty((nmax + 1, K))
    C = np.empty(nmax + 1)  # C[t + 1] is the log-scale of position t; C[0] that of the start
    edge_b = np.empty((K, K))
    for b in range(B):
        done[b] = False
        if not spread_ok or smax == NEG_INF or emax == NEG_INF:
            continue
        lo = offsets[b]
        n = offsets[b + 1] - lo
        for k in range(K):
            astar[0, k] = pi[k]
        C[0] = smax
        ok = True
        for t in range(n):
            # the reference shift: the largest readable log-factor at t
            m = NEG_INF
            low = np.inf
            for d in range(min(D, t + 1)):
                shift = C[t - d] + (tau if t - d > 0 else 0.0)
                for k in range(K):
                    v = P[lo + t, d, k]
                    if v > NEG_INF:
                        v += shift
                        if v > m:
                            m = v
                        if v < low:
                            low = v
            if m == NEG_INF or m - low > _SPREAD:
                ok = False
                break
            total = 0.0
            for k in range(K):
                acc = 0.0
                for d in range(min(D, t + 1)):
                    v = P[lo + t, d, k]
                    f = 0.0
                    if v > NEG_INF:
                        f = np.exp(v + C[t - d] + (tau if t - d > 0 else 0.0) - m)
                    seg[lo + t, d, k] = f
                    acc += astar[t - d, k] * f
                alpha[t, k] = acc
                total += acc
            if not (total > _TINY) or not np.isfinite(total):
                ok = False
                break
            inv = 1.0 / total
            C[t + 1] = m + np.log(total)
            for k in range(K):
                alpha[t, k] *= inv
                for d in range(min(D, t + 1)):
                    seg[lo + t, d, k] *= inv
            if t + 1 < n:
                _propagate(alpha[t], A, astar[t + 1])
        if ok:
            R = 0.0
            for k in range(K):
                R += alpha[n - 1, k] * fin[k]
            ok = R > _TINY
        if not ok:
            seg[lo:lo + n] = 0.0
            continue
        invR = 1.0 / R
        for i in range(K):
            for j in range(K):
                edge_b[i, j] = 0.0
        for s in range(n + 1):
            for k in range(K):
                bstar[s, k] = 0.0
        for t in range(n - 1, -1, -1):
            if t == n - 1:
                for i in range(K):
                    beta[i] = fin[i] * invR
            else:
                _propagate(bstar[t + 1], At, beta)
            big = 0.0
            for i in range(K):
                if beta[i] > big:
                    big = beta[i]
            if not (big < _HUGE):
                ok = False
                break
            if t + 1 < n:
                for i in range(K):
                    ai = alpha[t, i]
                    if ai == 0.0:
                        continue
                    for j in range(K):
                        edge_b[i, j] += ai * A[i, j] * bstar[t + 1, j]
            for k in range(K):
                bk = beta[k]
                for d in range(min(D, t + 1)):
                    w = seg[lo + t, d, k] * bk
                    bstar[t - d, k] += w
                    seg[lo + t, d, k] = astar[t - d, k] * w
        if not ok:
            seg[lo:lo + n] = 0.0
            continue
        logz[b] = C[n] + emax + np.log(R)
        for i in range(K):
            for j in range(K):
                edges[i, j] += edge_b[i, j]
        done[b] = True
    return done


@nb.njit(cache=True, inline="always")
def _log_add(a, b):
    if a == NEG_INF:
        return b
    if b == NEG_INF:
        return a
    if a < b:
        a, b = b, a
    return a + np.log1p(np.exp(b - a))


@nb.njit(cache=True)
def _log_space(P, offsets, T, start, end, rows, seg, logz, edges):
    """The same recursion in log space (log-sum-exp at every sum, exact at any magnitude) on the sequences
    ``rows``: what the scaled path hands back."""
    D = P.shape[1]
    K = P.shape[2]
    nmax = 1
    for b in rows:
        nmax = max(nmax, offsets[b + 1] - offsets[b])
    la_star = np.empty((nmax, K))
    la = np.empty((nmax, K))
    lb_star = np.empty((nmax + 1, K))
    lb = np.empty(K)
    for b in rows:
        lo = offsets[b]
        n = offsets[b + 1] - lo
        for k in range(K):
            la_star[0, k] = start[k]
        for t in range(n):
            for k in range(K):
                acc = NEG_INF
                for d in range(min(D, t + 1)):
                    acc = _log_add(acc, la_star[t - d, k] + P[lo + t, d, k])
                la[t, k] = acc
            if t + 1 < n:
                for j in range(K):
                    acc = NEG_INF
                    for i in range(K):
                        acc = _log_add(acc, la[t, i] + T[i, j])
                    la_star[t + 1, j] = acc
        z = NEG_INF
        for k in range(K):
            z = _log_add(z, la[n - 1, k] + end[k])
        logz[b] = z
        if z == NEG_INF:
            continue
        for s in range(n + 1):
            for k in range(K):
                lb_star[s, k] = NEG_INF
        for t in range(n - 1, -1, -1):
            for i in range(K):
                if t == n - 1:
                    lb[i] = end[i]
                else:
                    acc = NEG_INF
                    for j in range(K):
                        acc = _log_add(acc, T[i, j] + lb_star[t + 1, j])
                    lb[i] = acc
            if t + 1 < n:
                for i in range(K):
                    if la[t, i] == NEG_INF:
                        continue
                    for j in range(K):
                        v = la[t, i] + T[i, j] + lb_star[t + 1, j]
                        if v > NEG_INF:
                            edges[i, j] += np.exp(v - z)
            for k in range(K):
                for d in range(min(D, t + 1)):
                    w = P[lo + t, d, k] + lb[k]
                    lb_star[t - d, k] = _log_add(lb_star[t - d, k], w)
                    v = la_star[t - d, k] + w
                    seg[lo + t, d, k] = np.exp(v - z) if v > NEG_INF else 0.0


def _scaled_marginals(P, offsets, T, start, end):
    """The registered LOG specialisation: the exp-space recursion, and the generic one for the sequences it
    gives up."""
    B = offsets.size - 1
    seg = np.zeros(P.shape)
    edges = np.zeros(T.shape)
    logz = np.full(B, NEG_INF)
    done = np.zeros(B, dtype=np.bool_)
    _scaled(P, offsets, T, start, end, seg, logz, edges, done)
    rest = np.flatnonzero(~done)
    if rest.size:
        _log_space(P, offsets, T, start, end, rest, seg, logz, edges)
    return logz, seg, edges


# name → (semiring, function with the generic operation's signature and results)
SPECIALISED = {"marginals": (LOG, _scaled_marginals)}
GENERIC = {"marginals": generic_marginals}


def marginals(P, offsets, T, start, end, specialised: bool = True):
    """(log Z (B,), segment marginals (N, D, K), expected transitions summed over sequences (K, K)) of the flat
    dense semi-Markov chain (see the module doc). ``P`` (N, D, K) float64, ``offsets`` (B + 1,) int64 from 0 to
    N, ``T`` (K, K), ``start``, ``end`` (K,); log-potentials, −inf forbids; NaN and +inf are the caller's to
    refuse (:mod:`varorder.semimarkov` validates, this module does not)."""
    P = np.ascontiguousarray(P, dtype=np.float64)
    offsets = np.ascontiguousarray(offsets, dtype=np.int64)
    T = np.ascontiguousarray(T, dtype=np.float64)
    start = np.ascontiguousarray(start, dtype=np.float64)
    end = np.ascontiguousarray(end, dtype=np.float64)
    return choose("marginals", GENERIC, SPECIALISED, specialised)(P, offsets, T, start, end)
