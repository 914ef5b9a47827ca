"""Dense-chain operations as the generic recursion in a chosen semiring plus a finishing
step (factorization in :mod:`varorder.engine.chain`):

=========  ===========  =============================================================
operation  semiring     finishing step
=========  ===========  =============================================================
kbest      KBEST (k)    the k-best backtrack (:func:`varorder.engine.kbest.chain_paths`)
entropy    EXPECTATION  log Z − E[score] (:func:`~varorder.engine.semiring_structured.entropy_of`)
sample     LOG          backward sampling from the forward values
filtered   LOG          the forward values normalised per position: p(yₜ | x₁..ₜ)
=========  ===========  =============================================================

Each takes a prepared ``ChainInput`` and returns what the public operation of
:mod:`varorder.engine.chain` returns; the fused kernels there (list Viterbi, entropy from
the scaled marginals, sampling fused with the forward per sequence) are registered
specialisations of these, tested equal on random inputs.
"""

from __future__ import annotations

import numpy as np

from varorder.engine.chain_generic import generic_forward
from varorder.engine.chain_sample import sample_from_alphas
from varorder.engine.kbest import chain_paths
from varorder.engine.semiring import LOG
from varorder.engine.semiring_structured import EXPECTATION, KBEST, entropy_of

__all__ = ["generic_kbest", "generic_entropy", "generic_sample", "generic_filtered"]


def _arrays(ci):
    return ci.emissions, ci.transitions, ci.start, ci.end, ci.lengths


def generic_kbest(ci, k: int):
    """(paths (B, k, L), scores (B, k)): the KBEST forward, then the k-best backtrack."""
    scores, alphas = generic_forward(KBEST, k, keep_alphas=True)(*_arrays(ci))
    return chain_paths(*_arrays(ci), alphas, scores), scores


def generic_expectation(ci) -> np.ndarray:
    """(log Z, E[score]) per sequence (B, 2): the EXPECTATION forward."""
    return generic_forward(EXPECTATION)(*_arrays(ci))


def generic_entropy(ci) -> np.ndarray:
    """Entropy (B,), NaN without a path: log Z − E[score] from the EXPECTATION forward."""
    return entropy_of(generic_expectation(ci))


def generic_sample(ci, uniforms: np.ndarray) -> np.ndarray:
    """Paths (B, n, L): the LOG forward (all its values kept), then backward sampling with
    ``uniforms`` (B, n, L)."""
    logz, alphas = generic_forward(LOG, keep_alphas=True)(*_arrays(ci))
    return sample_from_alphas(ci.transitions, ci.end, ci.lengths, alphas, logz, uniforms)


def generic_filtered(ci) -> np.ndarray:
    """Filtered posteriors (B, L, K): p(yₜ = k) under the chain cut after position t (an HMM's p(zₜ | x₁..ₜ)),
    from the LOG forward with all its values kept (``end`` unused), each position's values normalised; NaN
    where a prefix has no path, 0 past each length."""
    B, L, K = ci.emissions.shape
    _, alphas = generic_forward(LOG, keep_alphas=True)(ci.emissions, ci.transitions, ci.start, np.zeros(K),
                                                       ci.lengths)
    top = alphas.max(axis=-1, keepdims=True)
    with np.errstate(invalid="ignore"):
        p = np.exp(alphas - top)
        p /= p.sum(axis=-1, keepdims=True)
    p[np.arange(L)[None, :] >= ci.lengths[:, None]] = 0.0
    return p
