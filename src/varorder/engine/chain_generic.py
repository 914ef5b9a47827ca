"""Dense chains in any semiring of :mod:`varorder.engine.semiring`: the one generic
forward and backward recursion (Numba closures compiled once per semiring; factorization
in :mod:`varorder.engine.chain`). The LOG fast path (:mod:`varorder.engine.chain_scaled`)
and the max-plus Viterbi (:mod:`varorder.engine.chain_viterbi`) are specialisations of
it, tested equal to it; it is also the exact log-space path a sequence falls back to."""

from __future__ import annotations

import numba as nb
import numpy as np

from varorder.engine.semiring import LOG, Semiring, compiled

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
    """Forward pass of one sequence in ``semiring`` (its ⊕, ⊗ and zero).

    Fills ``alpha[t, j]`` = ⊕ over prefixes ending in label j at position t of
    their score (start and emissions included); returns ⊕ⱼ alpha[n−1, j] ⊗ end[j].
    """
    plus, times, zero = semiring.plus, semiring.times, semiring.zero

    # not cached (closure factory): see varorder.engine.semiring
    @nb.njit
    def forward(E, T, start, end, n, alpha):
        K = E.shape[1]
        acc = np.empty(K)
        for j in range(K):
            alpha[0, j] = times(start[j], E[0, j])
        for t in range(1, n):
            for j in range(K):
                acc[j] = zero
            for i in range(K):
                ai = alpha[t - 1, i]
                if ai == zero:
                    continue
                for j in range(K):
                    acc[j] = plus(acc[j], times(ai, T[i, j]))
            for j in range(K):
                alpha[t, j] = times(acc[j], E[t, j])
        total = zero
        for j in range(K):
            total = plus(total, times(alpha[n - 1, j], end[j]))
        return total

    return forward


def make_chain_backward(semiring: Semiring):
    """Backward pass: ``beta[t, i]`` = ⊕ over suffixes after label i at t (end included)."""
    plus, times, zero = semiring.plus, semiring.times, semiring.zero

    # not cached (closure factory): see varorder.engine.semiring
    @nb.njit
    def backward(E, T, end, n, beta):
        K = E.shape[1]
        for i in range(K):
            beta[n - 1, i] = end[i]
        for t in range(n - 1, 0, -1):
            for i in range(K):
                acc = zero
                for j in range(K):
                    acc = plus(acc, times(times(T[i, j], E[t, j]), beta[t, j]))
                beta[t - 1, i] = acc
        return 0.0

    return backward


def make_forward_batch(semiring: Semiring):
    """⊕ over the paths of every sequence of a batch (B,), the generic recursion in ``semiring``."""
    forward = compiled(make_chain_forward, semiring)

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


# The exact log-space path: the generic LOG recursion, which the scaled kernels call for
# a sequence whose products could underflow.
_log_forward = compiled(make_chain_forward, LOG)
_log_backward = compiled(make_chain_backward, LOG)


def generic_forward(semiring: Semiring):
    """The batch forward of the generic recursion in ``semiring`` (compiled once)."""
    return compiled(make_forward_batch, semiring)
