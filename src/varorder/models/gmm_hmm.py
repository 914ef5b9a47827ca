"""HMM with Gaussian-mixture emissions, hmmlearn's ``GMMHMM`` (names, priors, M-step).

Factorization: p(xₜ | zₜ = k) = Σₘ wₖₘ N(xₜ; μₖₘ, Σₖₘ) with M = ``n_mix`` components per
state, Σₖₘ spherical (K, M), diagonal (K, M, D), full (K, M, D, D), or tied within a state
(K, D, D); the chain and the EM loop are :mod:`varorder.models.hmm_em`'s. The E-step adds
the mixture responsibilities rₜₖₘ = γₜₖ · wₖₘ N(xₜ; μₖₘ, Σₖₘ) / p(xₜ | k); the M-step is
hmmlearn's MAP update (Dirichlet prior ``weights_prior`` on wₖ, Normal prior on μₖₘ,
inverse-gamma / inverse-Wishart priors on the covariances, hmmlearn's defaults per
covariance type), the covariances' scatter taken about the means of the E-step, as
hmmlearn does. Densities are the compiled Gaussian kernels of
:mod:`varorder.models.emission_densities` over the K·M components.

Missing values: NaN entries of X are marginalised out of every component's density (the
marginal of a Gaussian is the Gaussian of the observed block: the observed dimensions of a
diagonal or spherical component, the sub-covariance Σ_oo of a full or tied one), so the
mixture and the chain see p(x_o | z). EM stays exact: for spherical and diagonal
components (dimensions independent given the component) the missing entries are left out
of the moments, which are taken per dimension over the entries observed (the counts
replacing Σₜ rₜₖₘ in the means' and variances' denominators); for full and tied ones the
moments take the conditional expectations E[x_m | x_o] and E[x_m x_mᵀ | x_o] of the missing
block under each component (Ghahramani & Jordan 1994). Without NaN entries both are
hmmlearn's M-step. With flat priors (the defaults but for spherical covariances, whose
default prior is hmmlearn's) the M-step maximises the expected complete-data
log-likelihood in the covariances given the E-step's means and then in the means, so EM
never decreases log p(X).
"""

from __future__ import annotations

import numpy as np
from scipy import special

from varorder.base import check_int, check_real
from varorder.errors import ParameterError
from varorder.models.emission_densities import gaussian_diag_log_density
from varorder.models.gaussian_hmm import (COVARIANCE_TYPES, _nan_cov, conditional_fill, kmeans_centres,
                                          marginal_log_density, missing_patterns)
from varorder.models.hmm_em import BaseHMM, store_chain_params

__all__ = ["GMMHMM"]


class GMMHMM(BaseHMM):
    """Gaussian-mixture HMM (hmmlearn's ``GMMHMM``): letters 's', 't', 'm', 'c', 'w'.
    Learned: ``startprob_``, ``transmat_``, ``weights_`` (K, M), ``means_`` (K, M, D),
    ``covars_`` in hmmlearn's per-type shape (spherical (K, M), diag (K, M, D), full
    (K, M, D, D), tied (K, D, D))."""

    _allow_nan = True  # missing dimensions marginalised (module docstring)
    _emission_letters = "mcw"
    _LEARNED = ("startprob_", "transmat_", "weights_", "means_", "covars_")

    def __init__(self, *, n_components: int = 1, n_mix: int = 1, min_covar: float = 1e-3, startprob_prior=1.0,
                 transmat_prior=1.0, weights_prior=1.0, means_prior=0.0, means_weight=0.0, covars_prior=None,
                 covars_weight=None, algorithm: str = "viterbi", covariance_type: str = "diag", random_state=None,
                 n_iter: int = 10, tol: float = 1e-2, verbose: bool = False, params: str = "stmcw",
                 init_params: str = "stmcw", implementation: str = "log"):
        store_chain_params(self, n_components, startprob_prior, transmat_prior, algorithm, random_state, n_iter, tol,
                           verbose, params, init_params, implementation)
        self.n_mix = n_mix
        self.min_covar = min_covar
        self.weights_prior = weights_prior
        self.means_prior = means_prior
        self.means_weight = means_weight
        self.covars_prior = covars_prior
        self.covars_weight = covars_weight
        self.covariance_type = covariance_type

    @property
    def n_features(self) -> int:
        return int(np.asarray(self.means_).shape[-1])

    def _check_common(self):
        super()._check_common()
        check_int(self, "n_mix", 1)
        check_real(self, "min_covar", 0)
        if self.covariance_type not in COVARIANCE_TYPES:
            raise ParameterError(f"{type(self).__name__}: covariance_type must be one of {COVARIANCE_TYPES}, got "
                                 f"{self.covariance_type!r}", name="covariance_type", value=self.covariance_type)
        for name in ("weights_prior", "means_weight"):
            self._check_prior(name)
        if self.means_prior is not None:  # None: 0
            self._check_prior("means_prior", minimum=None)
        for name in ("covars_prior", "covars_weight"):
            if getattr(self, name) is not None:
                self._check_prior(name, minimum=None)

    def _priors(self):
        """hmmlearn's prior arrays (its defaults per covariance type where None), broadcast."""
        K, M, D = self.n_components, self.n_mix, self.n_features
        ct = self.covariance_type
        default_prior = {"full": 0.0, "tied": 0.0, "diag": -1.5, "spherical": -(M + 2.0) / 2.0}[ct]
        default_weight = {"full": -(1.0 + D + 1.0), "tied": -(M + D + 1.0), "diag": 0.0, "spherical": 0.0}[ct]
        cp = default_prior if self.covars_prior is None else self.covars_prior
        cw = default_weight if self.covars_weight is None else self.covars_weight
        shape_p = {"full": (K, M, D, D), "tied": (K, D, D), "diag": (K, M, D), "spherical": (K, M)}[ct]
        shape_w = {"full": (K, M), "tied": (K,), "diag": (K, M, D), "spherical": (K, M)}[ct]
        return (np.broadcast_to(np.asarray(self.weights_prior, float), (K, M)),
                np.broadcast_to(np.asarray(0.0 if self.means_prior is None else self.means_prior, float), (K, M, D)),
                np.broadcast_to(np.asarray(self.means_weight, float), (K, M)),
                np.broadcast_to(np.asarray(cp, float), shape_p), np.broadcast_to(np.asarray(cw, float), shape_w))

    def _init_emissions(self, X, lengths, rng):
        K, M, D = self.n_components, self.n_mix, X.shape[1]
        needs_cov = self._needs_init("m", "means_") or self._needs_init("c", "covars_")
        cv = _nan_cov(X) + self.min_covar * np.eye(D) if needs_cov else None
        if self._needs_init("m", "means_"):
            if np.isnan(X).any():  # k-means on the columns' means where entries are missing
                X = np.where(np.isnan(X), np.nanmean(X, axis=0), X)
            labels = ((X[:, None, :] - kmeans_centres(X, K, rng)[None]) ** 2).sum(-1).argmin(axis=1)
            means = np.empty((K, M, D))
            for k in range(K):
                members = X[labels == k]
                means[k] = kmeans_centres(members, M, rng) if len(members) >= M else \
                    rng.multivariate_normal(X.mean(axis=0), cv, size=M)
            self.means_ = means
        if self._needs_init("w", "weights_"):
            self.weights_ = np.full((K, M), 1.0 / M)
        if self._needs_init("c", "covars_"):
            self.covars_ = {"tied": np.tile(cv, (K, 1, 1)), "full": np.tile(cv, (K, M, 1, 1)),
                            "diag": np.tile(np.diag(cv), (K, M, 1)), "spherical": np.full((K, M), cv.mean())
                            }[self.covariance_type]

    def _check_emissions(self):
        K, M = self.n_components, self.n_mix
        means = np.asarray(self.means_, dtype=np.float64)
        if means.ndim != 3 or means.shape[:2] != (K, M) or not np.isfinite(means).all():
            raise ParameterError(f"means_ must be finite of shape ({K}, {M}, n_features), got {means.shape}",
                                 name="means_", value=means.shape)
        D = means.shape[2]
        w = np.asarray(self.weights_, dtype=np.float64)
        if w.shape != (K, M) or (w < 0).any() or not np.allclose(w.sum(axis=1), 1.0, rtol=0, atol=1e-8):
            raise ParameterError(f"weights_ must be ({K}, {M}) rows of probabilities", name="weights_", value=w.shape)
        c = np.asarray(self.covars_, dtype=np.float64)
        want = {"spherical": (K, M), "diag": (K, M, D), "full": (K, M, D, D), "tied": (K, D, D)}[self.covariance_type]
        if c.shape != want or not np.isfinite(c).all():
            raise ParameterError(f"{self.covariance_type!r} covars_ must be finite of shape {want}, got {c.shape}",
                                 name="covars_", value=c.shape)
        if self.covariance_type in ("spherical", "diag"):
            if (c <= 0).any():
                raise ParameterError("covars_ must be positive", name="covars_", value=float(c.min()))
        else:
            try:
                np.linalg.cholesky(c)
            except np.linalg.LinAlgError:
                raise ParameterError("covars_ are not all positive definite", name="covars_", value=None) from None
        self.means_, self.weights_, self.covars_ = means, w, c

    def _component_log_densities(self, X) -> np.ndarray:
        """(N, K, M) log wₖₘ + log N(xₜ; μₖₘ, Σₖₘ)."""
        K, M, D = self.n_components, self.n_mix, self.n_features
        means = self.means_.reshape(K * M, D)
        c = self.covars_
        if self.covariance_type in ("spherical", "diag"):
            var = np.repeat(c[..., None], D, axis=-1) if self.covariance_type == "spherical" else c
            dens = gaussian_diag_log_density(X, means, np.ascontiguousarray(var.reshape(K * M, D)))
        else:
            dens = marginal_log_density(X, means, self._matrices().reshape(K * M, D, D))
        with np.errstate(divide="ignore"):
            return dens.reshape(-1, K, M) + np.log(self.weights_)[None]

    def _matrices(self) -> np.ndarray:
        """(K, M, D, D) covariances of the full and tied models."""
        c = self.covars_
        return np.repeat(c[:, None], self.n_mix, axis=1) if self.covariance_type == "tied" else c

    def _compute_log_likelihood(self, X):
        return special.logsumexp(self._component_log_densities(X), axis=2)

    def _accumulate_emission_statistics(self, stats, X, posteriors):
        if not ({"m", "c", "w"} & set(self.params)):
            return
        log_dens = self._component_log_densities(X)
        resp = np.exp(log_dens - special.logsumexp(log_dens, axis=2, keepdims=True))
        pcm = posteriors[:, :, None] * resp  # (N, K, M)
        stats["post_mix_sum"] = pcm.sum(axis=0)
        stats["post_sum"] = posteriors.sum(axis=0)
        _, mu0, lam, _, _ = self._priors()
        if np.isnan(X).any():
            self._accumulate_with_missing(stats, X, pcm, mu0, lam)
            return
        stats["m_n"] = lam[:, :, None] * mu0 + np.einsum("ijk,il->jkl", pcm, X)
        if "c" in self.params:
            K, M, D = self.n_components, self.n_mix, self.n_features
            ct = self.covariance_type
            c_n = np.zeros({"full": (K, M, D, D), "tied": (K, D, D), "diag": (K, M, D), "spherical": (K, M)}[ct])
            for k in range(K):
                for m in range(M):
                    centred = X - self.means_[k, m]
                    w = pcm[:, k, m]
                    if ct == "diag":
                        c_n[k, m] = w @ centred ** 2
                    elif ct == "spherical":
                        c_n[k, m] = w @ (centred ** 2).sum(axis=1)
                    else:
                        scatter = (centred * w[:, None]).T @ centred
                        if ct == "full":
                            c_n[k, m] = scatter
                        else:
                            c_n[k] += scatter
            stats["c_n"] = c_n

    def _accumulate_with_missing(self, stats, X, pcm, mu0, lam):
        """The moments of :meth:`_accumulate_emission_statistics` with NaN entries in X (module docstring):
        spherical and diagonal components from the observed entries, per dimension (``count`` (K, M, D): Σ rₜₖₘ
        over the rows observing each dimension); full and tied ones from the conditional expectations of each
        row's missing block under each component, per pattern of missingness."""
        K, M, D = self.n_components, self.n_mix, self.n_features
        ct = self.covariance_type
        missing = np.isnan(X)
        if ct in ("spherical", "diag"):
            filled = np.where(missing, 0.0, X)
            count = np.einsum("tkm,td->kmd", pcm, (~missing).astype(np.float64))
            first = np.einsum("tkm,td->kmd", pcm, filled)
            stats["count"] = count
            stats["m_n"] = lam[:, :, None] * mu0 + first
            if "c" in self.params:  # Σ rₜₖₘ (xₜd − μₖₘd)² over the observed entries, about the E-step's means
                second = np.einsum("tkm,td->kmd", pcm, filled * filled)
                scatter = second - 2.0 * self.means_ * first + self.means_ ** 2 * count
                stats["c_n"] = scatter if ct == "diag" else scatter.sum(axis=-1)
            return
        mats = self._matrices()
        m_n = lam[:, :, None] * mu0
        c_n = np.zeros((K, M, D, D))
        for rows, pattern in missing_patterns(missing):
            for k in range(K):
                for m in range(M):
                    filled, cond = conditional_fill(X[rows], pattern, self.means_[k, m], mats[k, m])
                    w = pcm[rows, k, m]
                    m_n[k, m] += w @ filled
                    centred = filled - self.means_[k, m]
                    c_n[k, m] += (centred * w[:, None]).T @ centred + w.sum() * cond
        stats["m_n"] = m_n
        if "c" in self.params:
            stats["c_n"] = c_n if ct == "full" else c_n.sum(axis=1)

    def _do_emission_mstep(self, stats):
        if not ({"m", "c", "w"} & set(self.params)):
            return
        alpha_w, mu0, lam, psi, nu = self._priors()
        D, M = self.n_features, self.n_mix
        if "w" in self.params:
            a1 = alpha_w - 1
            self.weights_ = (stats["post_mix_sum"] + a1) / (stats["post_sum"] + a1.sum(axis=1))[:, None]
        # per dimension, the mass of the rows observing it (spherical and diagonal models with NaN entries)
        count = stats.get("count")
        if "m" in self.params:
            if count is None:
                m_d = stats["post_mix_sum"] + lam
                m_d = np.where((self.weights_ == 0) & (stats["m_n"] == 0).all(axis=-1), 1.0, m_d)
                self.means_ = stats["m_n"] / m_d[:, :, None]
            else:  # a dimension no row with mass observes keeps its mean
                with np.errstate(invalid="ignore", divide="ignore"):
                    means = stats["m_n"] / (count + lam[:, :, None])
                self.means_ = np.where(np.isfinite(means), means, self.means_)
        if "c" in self.params:
            centred = self.means_ - mu0
            ct = self.covariance_type
            mass = np.broadcast_to(stats["post_mix_sum"][:, :, None], (*stats["post_mix_sum"].shape, D)) \
                if count is None else count
            if ct == "full":
                c_n = np.transpose(psi, (0, 1, 3, 2)) + lam[:, :, None, None] * centred[..., :, None] * \
                    centred[..., None, :] + stats["c_n"]
                c_d = (stats["post_mix_sum"] + 1 + nu + D + 1)[:, :, None, None]
            elif ct == "diag":
                c_n = lam[:, :, None] * centred ** 2 + 2 * nu + stats["c_n"]
                c_d = mass + 1 + 2 * (psi + 1)
            elif ct == "spherical":
                c_n = lam * (centred ** 2).sum(axis=-1) + 2 * nu + stats["c_n"]
                c_d = (mass + 1).sum(axis=-1) + 2 * (psi + 1)
            else:
                c_n = np.einsum("ij,ijk,ijl->ikl", lam, centred, centred) + np.transpose(psi, (0, 2, 1)) + \
                    stats["c_n"]
                c_d = (stats["post_sum"] + M + nu + D + 1)[:, None, None]
            if count is None:
                self.covars_ = c_n / c_d
            else:  # a variance without observed mass keeps its value
                with np.errstate(invalid="ignore", divide="ignore"):
                    var = c_n / c_d
                self.covars_ = np.where(np.isfinite(var) & (var > 0), var, self.covars_)

    def _emission_scalars(self):
        K, M, D = self.n_components, self.n_mix, self.n_features
        return {"m": K * M * D, "w": K * (M - 1),
                "c": {"spherical": K * M, "diag": K * M * D, "full": K * M * D * (D + 1) // 2,
                      "tied": K * D * (D + 1) // 2}[self.covariance_type]}

    def _sample_emissions(self, states, rng):
        K, M, D = self.n_components, self.n_mix, self.n_features
        c = self.covars_
        out = np.empty((states.size, D))
        for t, k in enumerate(states):
            m = int(rng.choice(M, p=self.weights_[k]))
            if self.covariance_type == "full":
                cov = c[k, m]
            elif self.covariance_type == "tied":
                cov = c[k]
            elif self.covariance_type == "diag":
                cov = np.diag(c[k, m])
            else:
                cov = np.eye(D) * c[k, m]
            out[t] = rng.multivariate_normal(self.means_[k, m], cov)
        return out
