"""Count- and symbol-emission HMMs with hmmlearn's names: ``PoissonHMM``, ``CategoricalHMM``.

Factorization: the chain of :mod:`varorder.models.hmm_em` with

* PoissonHMM: p(xₜ | zₜ = k) = Π_d Poisson(xₜd; λₖd) (independent counts per feature);
  M-step hmmlearn's: λₖ = (``lambdas_prior`` + Σₜ γₜₖ xₜ) / (``lambdas_weight`` + N), with
  N the total posterior mass — for the default zero prior the posterior-weighted mean
  (a Gamma(α, β) prior's posterior mean; Hyvönen & Tolonen 2019, §3.2);
* CategoricalHMM: p(xₜ = v | zₜ = k) = Bₖᵥ over symbols 0 … n_features−1 (X of shape
  (n_samples, 1), integers); M-step Bₖ ∝ max(``emissionprob_prior`` − 1 + E[counts], 0),
  the MAP estimate under a Dirichlet prior. This is the discrete model of
  :class:`varorder.models.hmm.HMM` (which keeps its word-level, supervised-or-EM tagger
  interface) in hmmlearn's call shapes.
"""

from __future__ import annotations

import numpy as np

from varorder.base import check_int
from varorder.errors import ParameterError
from varorder.models.emission_densities import poisson_log_density
from varorder.models.hmm_em import BaseHMM, store_chain_params

__all__ = ["PoissonHMM", "CategoricalHMM"]


def _checked_table(value, name, shape, probabilities: bool):
    arr = np.asarray(value, dtype=np.float64)
    if arr.shape != shape:
        raise ParameterError(f"{name} must have shape {shape}, got {arr.shape}", name=name, value=arr.shape)
    bad = ~np.isfinite(arr) | (arr < 0)
    if bad.any():
        idx = tuple(int(i) for i in np.argwhere(bad)[0])
        raise ParameterError(f"{name}{list(idx)} = {float(arr[idx])!r} must be finite and >= 0", name=name,
                             value=float(arr[idx]))
    if probabilities:
        sums = arr.sum(axis=1)
        off = np.flatnonzero(np.abs(sums - 1.0) > 1e-8)
        if off.size:
            raise ParameterError(f"{name} row {int(off[0])} sums to {float(sums[off[0]])!r}, not 1", name=name,
                                 value=float(sums[off[0]]))
    return arr


class PoissonHMM(BaseHMM):
    """HMM with independent Poisson counts per feature (hmmlearn's ``PoissonHMM``).

    Parameters are hmmlearn's (``params``/``init_params`` letters 's', 't', 'l' for the
    rates); see :class:`~varorder.models.gaussian_hmm.GaussianHMM` for the shared ones.
    Learned: ``startprob_``, ``transmat_``, ``lambdas_`` (K, n_features), ``n_features``."""

    _integer_X = True
    _emission_letters = "l"
    _LEARNED = ("startprob_", "transmat_", "lambdas_")

    def __init__(self, *, n_components: int = 1, startprob_prior=1.0, transmat_prior=1.0, lambdas_prior=0.0,
                 lambdas_weight=0.0, algorithm: str = "viterbi", random_state=None, n_iter: int = 10,
                 tol: float = 1e-2, verbose: bool = False, params: str = "stl", init_params: str = "stl",
                 implementation: str = "log"):
        store_chain_params(self, n_components, startprob_prior, transmat_prior, algorithm, random_state, n_iter, tol, verbose,
                params, init_params, implementation)
        self.lambdas_prior = lambdas_prior
        self.lambdas_weight = lambdas_weight

    @property
    def n_features(self) -> int:
        return int(np.atleast_2d(self.lambdas_).shape[1])

    def _check_common(self):
        super()._check_common()
        self._check_prior("lambdas_prior")
        self._check_prior("lambdas_weight")

    def _init_emissions(self, X, lengths, rng):
        n_features = X.shape[1]
        if self._needs_init("l", "lambdas_"):
            mean, var = X.mean(), X.var()
            if mean > 0 and var > 0:  # method of moments, as hmmlearn
                self.lambdas_ = rng.gamma(shape=mean ** 2 / var, scale=var / mean,
                                          size=(self.n_components, n_features))
            else:
                self.lambdas_ = np.full((self.n_components, n_features), max(mean, 1e-3))

    def _check_emissions(self):
        lam = np.atleast_2d(np.asarray(self.lambdas_, dtype=np.float64))
        self.lambdas_ = _checked_table(lam, "lambdas_", (self.n_components, lam.shape[1]), probabilities=False)

    def _observations(self, X, lengths, name="X"):
        X, lengths = super()._observations(X, lengths, name)
        D = np.atleast_2d(self.lambdas_).shape[1] if getattr(self, "lambdas_", None) is not None else None
        if D is not None and X.shape[1] != D and "l" not in self.init_params:
            raise ParameterError(f"X has {X.shape[1]} features but the model has {D}", name="X", value=X.shape[1])
        return X, lengths

    def _compute_log_likelihood(self, X):
        return poisson_log_density(X, self.lambdas_)

    def _accumulate_emission_statistics(self, stats, X, posteriors):
        if "l" in self.params:
            stats["post"] = posteriors.sum(axis=0)
            stats["obs"] = posteriors.T @ X

    def _do_emission_mstep(self, stats):
        if "l" in self.params:
            n = stats["post"].sum()
            with np.errstate(invalid="ignore", divide="ignore"):
                y_bar = stats["obs"] / stats["post"][:, None]
                lam = (self.lambdas_prior + n * y_bar) / (self.lambdas_weight + n)
            self.lambdas_ = np.where(np.isfinite(lam), lam, self.lambdas_)

    def _emission_scalars(self):
        return {"l": int(np.asarray(self.lambdas_).size)}

    def _sample_emissions(self, states, rng):
        return rng.poisson(self.lambdas_[states]).astype(np.int64)


class CategoricalHMM(BaseHMM):
    """HMM over symbols 0 … n_features−1 (hmmlearn's ``CategoricalHMM``; X of shape
    (n_samples, 1)). Letters 's', 't', 'e' (emission probabilities). Learned:
    ``startprob_``, ``transmat_``, ``emissionprob_`` (K, n_features), ``n_features_``."""

    _integer_X = True
    _emission_letters = "e"
    _LEARNED = ("startprob_", "transmat_", "emissionprob_")

    def __init__(self, *, n_components: int = 1, startprob_prior=1.0, transmat_prior=1.0, emissionprob_prior=1.0,
                 n_features: int | None = None, algorithm: str = "viterbi", random_state=None, n_iter: int = 10,
                 tol: float = 1e-2, verbose: bool = False, params: str = "ste", init_params: str = "ste",
                 implementation: str = "log"):
        store_chain_params(self, n_components, startprob_prior, transmat_prior, algorithm, random_state, n_iter, tol, verbose,
                params, init_params, implementation)
        self.emissionprob_prior = emissionprob_prior
        self.n_features = n_features

    def _check_common(self):
        super()._check_common()
        self._check_prior("emissionprob_prior")
        if self.n_features is not None:
            check_int(self, "n_features", 1)

    def _observations(self, X, lengths, name="X"):
        X, lengths = super()._observations(X, lengths, name)
        if X.shape[1] != 1:
            raise ParameterError(f"{name} must have shape (n_samples, 1) (one symbol per sample), got {X.shape}",
                                 name=name, value=X.shape)
        n = self.n_features if self.n_features is not None else (
            np.atleast_2d(self.emissionprob_).shape[1] if getattr(self, "emissionprob_", None) is not None
            and "e" not in self.init_params else None)
        if n is not None and X.max() >= n:
            i = int(np.argmax(X[:, 0] >= n))
            raise ParameterError(f"{name}[{i}, 0] = {int(X[i, 0])} but the model emits symbols 0..{n - 1}", name=name,
                                 value=int(X[i, 0]))
        return X, lengths

    def _init_emissions(self, X, lengths, rng):
        if self._needs_init("e", "emissionprob_"):
            n = self.n_features if self.n_features is not None else int(X.max()) + 1
            b = rng.random((self.n_components, n))
            self.emissionprob_ = b / b.sum(axis=1, keepdims=True)

    def _check_emissions(self):
        B = np.atleast_2d(np.asarray(self.emissionprob_, dtype=np.float64))
        n = B.shape[1] if self.n_features is None else self.n_features
        self.emissionprob_ = _checked_table(B, "emissionprob_", (self.n_components, n), probabilities=True)
        self.n_features_ = n

    def _compute_log_likelihood(self, X):
        with np.errstate(divide="ignore"):
            return np.ascontiguousarray(np.log(self.emissionprob_)[:, X[:, 0].astype(np.int64)].T)

    def _accumulate_emission_statistics(self, stats, X, posteriors):
        if "e" in self.params:
            obs = np.zeros((self.n_components, self.n_features_))
            symbols = X[:, 0].astype(np.int64)
            for k in range(self.n_components):
                obs[k] = np.bincount(symbols, weights=posteriors[:, k], minlength=self.n_features_)
            stats["obs"] = obs

    def _do_emission_mstep(self, stats):
        if "e" in self.params:
            new = np.maximum(np.asarray(self.emissionprob_prior, dtype=np.float64) - 1 + stats["obs"], 0)
            totals = new.sum(axis=1, keepdims=True)
            with np.errstate(invalid="ignore"):
                self.emissionprob_ = np.where(totals > 0, new / totals, self.emissionprob_)

    def _emission_log_prior(self):
        alpha = np.broadcast_to(np.asarray(self.emissionprob_prior, dtype=np.float64), self.emissionprob_.shape)
        used = (self.emissionprob_ > 0) & (alpha != 1.0)
        return float(((alpha - 1.0)[used] * np.log(self.emissionprob_[used])).sum()) if "e" in self.params else 0.0

    def _emission_scalars(self):
        B = np.atleast_2d(self.emissionprob_)
        return {"e": B.shape[0] * (B.shape[1] - 1)}

    def _sample_emissions(self, states, rng):
        cdf = np.cumsum(self.emissionprob_, axis=1)
        u = rng.random(states.size)
        out = np.array([min(int(np.searchsorted(cdf[s], u_ * cdf[s, -1], side="right")), self.n_features_ - 1)
                        for s, u_ in zip(states, u)])
        return out[:, None].astype(np.int64)
