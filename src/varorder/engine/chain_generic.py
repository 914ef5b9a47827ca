"""Dense chains in any semiring of :mod:`varorder.engine.semiring`: the one generic
forward and backward recursion (Numba closures compiled once per semiring; factorization
in :mod:`varorder.engine.chain`). The LOG fast path (:mod:`varorder.engine.chain_scaled`)
and the max-plus Viterbi (:mod:`varorder.engine.chain_viterbi`) are specialisations of
it, tested equal to it; it is also the exact log-space path a sequence falls back to."""

from __future__ import annotations

import numba as nb
import numpy as np

from varorder.engine.semiring import LOG, Semiring, cells, compiled
import varorder._numba_start  # noqa: E402,F401,I001  (Numba's cache saves locked across processes)

# kernels for engine.chain only
__all__ = ["NEG_INF", "make_chain_forward", "make_chain_backward", "make_forward_batch", "generic_forward"]


NEG_INF = -np.inf
# Products below this bound are treated as a potential underflow: the scaled
# recursion stops and the sequence is redone in log space.
_TINY = 1e-280


# ---------------------------------------------------------------------------
# semiring-generic kernels (one definition, compiled once per semiring)
# ---------------------------------------------------------------------------


def make_chain_forward(semiring: Semiring):
    """Forward pass of one sequence in ``semiring`` (scalar or structured: see
    :func:`varorder.engine.semiring.cells`).

    Fills ``alpha[t, j]`` = ⊕ over prefixes ending in label j at position t of
    their score (start and emissions included); returns ⊕ⱼ alpha[n−1, j] ⊗ end[j]. alpha is
    (n, K) for a scalar semiring, (n, K, d) for a structured one.
    """
    zero, plus, times_weight, lift, is_zero, put = _ops(semiring)

    # not cached (closure factory): see varorder.engine.semiring
    @nb.njit
    def forward(E, T, start, end, n, alpha):
        K = E.shape[1]
        acc = np.empty_like(alpha[0])
        tmp = np.empty_like(alpha[0, :1])[0]  # floats (unused) or rows of scratch
        total = np.empty_like(alpha[0, :1])[0]
        row = alpha[0]
        for j in range(K):
            put(row, j, times_weight(row[j], lift(row[j], start[j]), E[0, j]))
        for t in range(1, n):
            prev = alpha[t - 1]
            for j in range(K):
                put(acc, j, zero(acc[j]))
            for i in range(K):
                ai = prev[i]
                if is_zero(ai):
                    continue
                for j in range(K):
                    put(acc, j, plus(acc[j], acc[j], times_weight(tmp, ai, T[i, j])))
            row = alpha[t]
            for j in range(K):
                put(row, j, times_weight(row[j], acc[j], E[t, j]))
        total = zero(total)
        row = alpha[n - 1]
        for j in range(K):
            total = plus(total, total, times_weight(tmp, row[j], end[j]))
        return total

    return forward


def make_chain_backward(semiring: Semiring):
    """Backward pass: ``beta[t, i]`` = ⊕ over suffixes after label i at t (end included)."""
    zero, plus, times_weight, lift, _, put = _ops(semiring)
    weight_times = cells(semiring).weight_times

    # not cached (closure factory): see varorder.engine.semiring
    @nb.njit
    def backward(E, T, end, n, beta):
        K = E.shape[1]
        tmp = np.empty_like(beta[0, :1])[0]
        row = beta[n - 1]
        for i in range(K):
            put(row, i, lift(row[i], end[i]))
        for t in range(n - 1, 0, -1):
            nxt = beta[t]
            row = beta[t - 1]
            for i in range(K):
                acc = zero(row[i])
                for j in range(K):
                    acc = plus(acc, acc, times_weight(tmp, nxt[j], weight_times(T[i, j], E[t, j])))
                put(row, i, acc)
        return 0.0

    return backward


def _ops(semiring: Semiring):
    c = cells(semiring)
    return c.zero, c.plus, c.times_weight, c.lift, c.is_zero, c.put


def make_forward_batch(semiring: Semiring):
    """⊕ over the paths of every sequence of a batch into ``out`` (B,) or (B, d), the generic
    recursion in ``semiring``; ``alphas`` (B, L, K[, d]) receives every forward value, or is
    a single (L, K[, d]) row of scratch per sequence when its first axis is not B."""
    forward = compiled(make_chain_forward, semiring)
    put = cells(semiring).put

    # not cached (closure factory): see varorder.engine.semiring
    @nb.njit(parallel=True)
    def run(E, T, start, end, lengths, alphas, out):
        B = E.shape[0]
        keep = alphas.shape[0] == B
        for b in nb.prange(B):
            alpha = alphas[b] if keep else np.empty_like(alphas[0])
            put(out, b, forward(E[b], T[b % T.shape[0]], start, end, lengths[b], alpha))
        return out

    return run


# The generic LOG forward, compiled once: what sampling filters with (the scaled kernels'
# underflow fallback is chain_scaled._normalised_log_forward, rows shifted every step).
_log_forward = compiled(make_chain_forward, LOG)


def generic_forward(semiring: Semiring, width: int | None = None, keep_alphas: bool = False):
    """The batch forward of the generic recursion in ``semiring`` (compiled once): a function
    of (E, T, start, end, lengths) giving ⊕ over each sequence's paths, (B,) or (B, d) (d =
    ``width`` where the semiring leaves it to the call, e.g. k for KBEST), and with
    ``keep_alphas`` also every forward value (B, L, K[, d])."""
    run = compiled(make_forward_batch, semiring)
    shape = semiring.value_shape(width)

    def call(E, T, start, end, lengths):
        B, L, K = E.shape
        alphas = np.empty(((B,) if keep_alphas else (1,)) + (L, K) + shape)
        out = run(E, T, start, end, lengths, alphas, np.empty((B,) + shape))
        return (out, alphas) if keep_alphas else out

    return call
