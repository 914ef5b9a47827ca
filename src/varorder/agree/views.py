"""HMMs that share one hidden chain and each observe their own view of the data.

Submodel m is a first-order HMM p_m(x_m, z) = π_m(z₁) Π_t A_m(z_{t−1}, z_t) B_m(z_t, x_{m,t})
over the same hidden label sequence z (K labels). Every feature of z (start,
node and transition indicators) is shared, so Σ_m b_m is again a dense chain and
*exact* product EM (Liang, Klein & Jordan 2008, §2.1) is tractable: its E-step is
one :func:`varorder.chain.marginals` call on the summed log-potentials. With one
view this is Baum–Welch.

Shared-feature layout of a shard with B sequences of padded length L:
``[start (K) | node (B·L·K) | transitions (K·K)]``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from varorder import chain
from varorder.agree.product_em import Statistics, Submodel
from varorder.engine.validate import as_rng
from varorder.errors import ParameterError

__all__ = ["MultiViewSequences", "HMMView"]


@dataclass
class MultiViewSequences:
    """A shard: ``observations[m]`` is an int array (B, L) of view m's symbols; ``lengths`` (B,)."""

    observations: list
    lengths: np.ndarray

    def __post_init__(self):
        self.observations = [np.asarray(o, dtype=np.int64) for o in self.observations]
        self.lengths = np.asarray(self.lengths, dtype=np.int64)
        shapes = {o.shape for o in self.observations}
        if len(shapes) != 1 or len(next(iter(shapes))) != 2:
            raise ParameterError(f"observations must be (B, L) int arrays of one shape, got {sorted(shapes)}", name='observations', value=self.observations)
        B, L = next(iter(shapes))
        if self.lengths.shape != (B,) or (self.lengths < 1).any() or (self.lengths > L).any():
            raise ParameterError(f"lengths must have shape ({B},) with values in [1, {L}]", name='lengths', value=self.lengths)


class HMMView(Submodel):
    """The HMM of view ``view`` over a shared hidden chain of ``n_states`` labels.

    Parameters are probabilities ``start_`` (K,), ``transitions_`` (K, K) and
    ``emissions_`` (K, V); ``initialize(seed)`` draws them from a Dirichlet.
    """

    domain = "shared-chain"
    has_private_features = False

    def __init__(self, view: int, n_states: int, n_symbols: int, smoothing: float = 0.0):
        self.view = view
        self.n_states = n_states
        self.n_symbols = n_symbols
        self.smoothing = smoothing

    def initialize(self, seed=None):
        rng = as_rng(seed)
        K, V = self.n_states, self.n_symbols
        self.start_ = rng.dirichlet(np.ones(K))
        self.transitions_ = rng.dirichlet(np.ones(K), size=K)
        self.emissions_ = rng.dirichlet(np.ones(V), size=K)
        return self

    def shared_log_potentials(self, shard: MultiViewSequences) -> np.ndarray:
        obs = shard.observations[self.view]
        with np.errstate(divide="ignore"):
            node = np.log(self.emissions_.T[obs])  # (B, L, K)
            return np.concatenate([np.log(self.start_), node.ravel(), np.log(self.transitions_).ravel()])

    @staticmethod
    def _unpack(flat, B, L, K):
        start = flat[:K]
        node = flat[K:K + B * L * K].reshape(B, L, K)
        trans = flat[K + B * L * K:].reshape(K, K)
        return start, node, trans

    def expected_statistics(self, shard, shared_log_potentials, private_scale: float = 1.0) -> Statistics:
        B, L = shard.observations[self.view].shape
        K = self.n_states
        start, node, trans = self._unpack(shared_log_potentials, B, L, K)
        mu_node, mu_edge = chain.marginals(node, trans, start=start, lengths=shard.lengths, edges=True)
        logz = chain.log_partition(node, trans, start=start, lengths=shard.lengths)
        mu = np.concatenate([mu_node[:, 0, :].sum(axis=0), mu_node.ravel(), mu_edge.sum(axis=(0, 1)).ravel()])
        return Statistics(shared=mu, log_normalizer=float(logz.sum()))

    def counts(self, shard, shared_marginals, statistics) -> dict:
        obs = shard.observations[self.view]
        B, L = obs.shape
        K, V = self.n_states, self.n_symbols
        start, node, trans = self._unpack(shared_marginals, B, L, K)
        mask = np.arange(L)[None, :] < shard.lengths[:, None]
        index = np.arange(K)[None, None, :] * V + obs[:, :, None]  # (B, L, K) cell of (label, symbol)
        emit = np.bincount(index[mask].ravel(), weights=node[mask].ravel(), minlength=K * V).reshape(K, V)
        return {"start": start, "transitions": trans, "emissions": emit}

    def maximize(self, counts: dict) -> None:
        s = self.smoothing
        self.start_ = _normalize(counts["start"] + s)
        self.transitions_ = _normalize(counts["transitions"] + s)
        self.emissions_ = _normalize(counts["emissions"] + s)


def _normalize(c):
    tot = c.sum(axis=-1, keepdims=True)
    return np.divide(c, tot, out=np.full_like(c, 1.0 / c.shape[-1]), where=tot > 0)
