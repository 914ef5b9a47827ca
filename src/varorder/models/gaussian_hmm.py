"""Gaussian-emission HMMs with hmmlearn's names and call shapes: ``GaussianHMM``.

Factorization: p(xₜ | zₜ = k) = N(xₜ; μₖ, Σₖ) with Σₖ spherical (σ²ₖ I), diagonal, full, or
one full matrix tied across states; the chain around it is :mod:`varorder.models.hmm_em`'s
(one EM loop, this module overriding the emission steps). Log-densities are compiled
(:mod:`varorder.models.emission_densities`).

M-step (hmmlearn's, after Huang, Acero & Hon 2001, §8.2 and §9.5): with posterior mass
Nₖ, first and second moments, a Normal prior on μₖ (``means_prior``, ``means_weight`` λ),
an inverse-gamma (spherical, diagonal) or inverse-Wishart (full, tied) prior on Σₖ
(``covars_prior``, ``covars_weight``):

    μₖ = (λ μ₀ + Σₜ γₜₖ xₜ) / (λ + Nₖ)
    σ²ₖd = (covars_prior + λ (μₖd − μ₀d)² + Σₜ γₜₖ (xₜd − μₖd)²) / max(max(covars_weight − 1, 0) + Nₖ, 1e-5)
    Σₖ = (covars_prior + λ (μₖ − μ₀)(μₖ − μ₀)ᵀ + Σₜ γₜₖ (xₜ − μₖ)(xₜ − μₖ)ᵀ) / (max(covars_weight − D, 0) + Nₖ)

(spherical: numerators and denominators summed over dimensions; tied: numerators and Nₖ summed over k).
``min_covar`` floors every variance (and the eigenvalues of full matrices) after the
M-step, as well as adding to the initial covariance as hmmlearn does.

Missing values: NaN entries of X are marginalised out of each row's density (the
marginal of a Gaussian is the Gaussian of the observed block). In EM, the spherical and
diagonal models use the observed entries' moments (exact: dimensions are independent
given the state); the full and tied models take the conditional expectations
E[x_m | x_o, z] and E[x_m x_mᵀ | x_o, z] of the missing block (Ghahramani & Jordan 1994),
so every EM step is exact.
"""

from __future__ import annotations

import numpy as np

from varorder.base import check_real
from varorder.errors import ParameterError
from varorder.models.emission_densities import (diag_weighted_moments, gaussian_chol_log_density,
                                                gaussian_diag_log_density)
from varorder.models.hmm_em import BaseHMM, store_chain_params

__all__ = ["GaussianHMM", "COVARIANCE_TYPES", "fill_covars", "kmeans_centres", "marginal_log_density",
           "conditional_fill", "missing_patterns"]

COVARIANCE_TYPES = ("spherical", "diag", "full", "tied")
_LOG_2PI = np.log(2.0 * np.pi)


def fill_covars(covars, covariance_type: str, n_components: int, n_features: int) -> np.ndarray:
    """The (n_components, n_features, n_features) matrices of covariances stored per type:
    spherical (K,), diag (K, D), full (K, D, D), tied (D, D)."""
    covars = np.asarray(covars, dtype=np.float64)
    if covariance_type == "full":
        return covars.copy()
    if covariance_type == "diag":
        return np.stack([np.diag(c) for c in covars])
    if covariance_type == "tied":
        return np.repeat(covars[None], n_components, axis=0)
    return np.stack([np.eye(n_features) * c for c in covars])


def _shape_of(covariance_type: str, K: int, D: int) -> tuple:
    return {"spherical": (K,), "diag": (K, D), "full": (K, D, D), "tied": (D, D)}[covariance_type]


def validate_covars(covars, covariance_type: str, n_components: int, n_features: int | None,
                    name: str = "covars_") -> np.ndarray:
    """``covars`` in its type's shape, positive (definite), or a ParameterError naming the state."""
    covars = np.array(covars, dtype=np.float64)
    K = n_components
    if n_features is None:
        n_features = {"spherical": 1, "diag": covars.shape[-1] if covars.ndim else 1,
                      "full": covars.shape[-1] if covars.ndim else 1, "tied": covars.shape[-1] if covars.ndim else 1
                      }[covariance_type]
    want = _shape_of(covariance_type, K, n_features)
    if covars.shape != want:
        raise ParameterError(f"{covariance_type!r} {name} must have shape {want}, got {covars.shape}", name=name,
                             value=covars.shape)
    if not np.isfinite(covars).all():
        idx = tuple(int(i) for i in np.argwhere(~np.isfinite(covars))[0])
        raise ParameterError(f"{name}{list(idx)} is not finite", name=name, value=float(covars[idx]))
    if covariance_type in ("spherical", "diag"):
        bad = covars <= 0
        if bad.any():
            idx = tuple(int(i) for i in np.argwhere(bad)[0])
            raise ParameterError(f"{name}{list(idx)} = {float(covars[idx])!r} must be positive", name=name,
                                 value=float(covars[idx]))
        return covars
    mats = covars[None] if covariance_type == "tied" else covars
    for k, m in enumerate(mats):
        where = "" if covariance_type == "tied" else f" of state {k}"
        if not np.allclose(m, m.T, rtol=1e-10, atol=1e-12):
            raise ParameterError(f"{name}{where} is not symmetric", name=name, value=k)
        try:
            np.linalg.cholesky(m)
        except np.linalg.LinAlgError:
            raise ParameterError(f"{name}{where} is not positive definite", name=name, value=k) from None
    return covars


def kmeans_centres(X: np.ndarray, k: int, rng: np.random.Generator, n_iter: int = 50) -> np.ndarray:
    """k centres of the rows of X by k-means++ seeding (Arthur & Vassilvitskii 2007) and
    Lloyd iterations; NaN entries are filled with their column's mean."""
    X = np.where(np.isnan(X), np.nanmean(X, axis=0), X)
    n = X.shape[0]
    centres = np.empty((k, X.shape[1]))
    centres[0] = X[rng.integers(n)]
    d2 = ((X - centres[0]) ** 2).sum(axis=1)
    for j in range(1, k):
        total = d2.sum()
        i = int(rng.integers(n)) if total <= 0 else int(np.searchsorted(np.cumsum(d2), rng.random() * total))
        centres[j] = X[min(i, n - 1)]
        d2 = np.minimum(d2, ((X - centres[j]) ** 2).sum(axis=1))
    for _ in range(n_iter):
        dist = (X ** 2).sum(1)[:, None] - 2 * X @ centres.T + (centres ** 2).sum(1)[None]
        labels = dist.argmin(axis=1)
        new = centres.copy()
        for j in range(k):
            members = X[labels == j]
            if len(members):
                new[j] = members.mean(axis=0)
        if np.allclose(new, centres):
            break
        centres = new
    return centres


def missing_patterns(missing: np.ndarray):
    """(rows, pattern) for each distinct row of the boolean (N, D) ``missing`` (True: a NaN entry)."""
    patterns, which = np.unique(missing, axis=0, return_inverse=True)
    which = which.ravel()
    return [(np.flatnonzero(which == p), pattern) for p, pattern in enumerate(patterns)]


def marginal_log_density(X: np.ndarray, means: np.ndarray, mats: np.ndarray) -> np.ndarray:
    """(N, C) log N(x_o; μ_o, Σ_oo) of rows X (N, D) under C full-covariance Gaussians (means (C, D), mats
    (C, D, D)), o each row's observed (non-NaN) entries — a Gaussian's marginal; 0 for a row without any."""
    missing = np.isnan(X)
    if not missing.any():
        return gaussian_chol_log_density(X, means, np.linalg.cholesky(mats))
    out = np.empty((X.shape[0], means.shape[0]))
    for rows, pattern in missing_patterns(missing):
        seen = ~pattern
        if not seen.any():
            out[rows] = 0.0  # nothing observed: the density of the empty block is 1
            continue
        sub = np.ascontiguousarray(mats[:, seen][:, :, seen])
        out[rows] = gaussian_chol_log_density(np.ascontiguousarray(X[rows][:, seen]),
                                              np.ascontiguousarray(means[:, seen]), np.linalg.cholesky(sub))
    return out


def conditional_fill(X: np.ndarray, pattern: np.ndarray, mean: np.ndarray, cov: np.ndarray):
    """(rows of X (n, D) with their missing block — ``pattern`` (D,), True where missing — replaced by
    E[x_m | x_o] = μ_m + Σ_mo Σ_oo⁻¹ (x_o − μ_o), the (D, D) covariance of x given x_o: Σ_mm − Σ_mo Σ_oo⁻¹ Σ_om
    in the missing block, zero elsewhere) under N(mean, cov) (Ghahramani & Jordan 1994)."""
    m, o = pattern, ~pattern
    D = mean.shape[0]
    filled = np.empty((X.shape[0], D))
    cond = np.zeros((D, D))
    if not o.any():
        filled[:] = mean
        return filled, cov.copy()
    filled[:, o] = X[:, o]
    if m.any():
        S_oo = cov[np.ix_(o, o)]
        S_mo = cov[np.ix_(m, o)]
        gain = np.linalg.solve(S_oo, S_mo.T).T  # Σ_mo Σ_oo⁻¹
        filled[:, m] = mean[m] + (X[:, o] - mean[o]) @ gain.T
        cond[np.ix_(m, m)] = cov[np.ix_(m, m)] - gain @ S_mo.T
    return filled, cond


def _nan_cov(X: np.ndarray) -> np.ndarray:
    """The (D, D) covariance of X's columns from pairwise-complete entries (np.cov without NaN)."""
    if not np.isnan(X).any():
        cv = np.cov(X.T)
        return np.atleast_2d(cv)
    D = X.shape[1]
    mu = np.nanmean(X, axis=0)
    Z = np.where(np.isnan(X), 0.0, X - mu)
    seen = (~np.isnan(X)).astype(float)
    counts = seen.T @ seen
    return (Z.T @ Z) / np.maximum(counts - 1, 1) + 0 * np.eye(D)


def _floor_matrix(m: np.ndarray, floor: float) -> np.ndarray:
    """m with eigenvalues below ``floor`` raised to it (m symmetric)."""
    m = 0.5 * (m + m.T)
    low = np.linalg.eigvalsh(m)[0]
    return m if low >= floor else m + (floor - low) * np.eye(m.shape[0])


class GaussianHMM(BaseHMM):
    """HMM with Gaussian emissions (hmmlearn's ``GaussianHMM``, the same parameters).

    Parameters
    ----------
    n_components : number of states.
    covariance_type : "spherical", "diag" (default), "full" or "tied".
    min_covar : floor on variances (added to the initial covariance; applied after each M-step).
    startprob_prior, transmat_prior : Dirichlet parameters (scalars or arrays) of π and A's rows.
    means_prior, means_weight, covars_prior, covars_weight : the priors of the module docstring.
    algorithm : decoder of :meth:`decode` / :meth:`predict`, "viterbi" or "map".
    random_state : seed (int, NumPy Generator or RandomState) of the initialisation and of sampling.
    n_iter, tol : EM stops after n_iter iterations or when log p(X) rises by less than tol.
    verbose : print each iteration's log-likelihood to stderr (hmmlearn's format).
    params, init_params : letters of the parameters updated / initialised by fit: 's' start,
        't' transitions, 'm' means, 'c' covariances.
    implementation : accepted for hmmlearn compatibility and ignored: the engine picks its own
        (scaled exp-space recursion, falling back to log space where it could underflow).

    Learned: ``startprob_`` (K,), ``transmat_`` (K, K), ``means_`` (K, D), ``covars_`` (K, D, D)
    as hmmlearn returns them (set it in the type's own shape: spherical (K,), diag (K, D),
    full (K, D, D), tied (D, D)), ``n_features``, ``monitor_``, ``history_``, ``n_iter_``.

    Examples
    --------
    >>> import numpy as np
    >>> from varorder.models.gaussian_hmm import GaussianHMM
    >>> rng = np.random.default_rng(0)
    >>> X = np.concatenate([rng.normal(0, 1, (200, 1)), rng.normal(6, 1, (200, 1))])
    >>> model = GaussianHMM(n_components=2, n_iter=20, random_state=0).fit(X)
    >>> sorted(np.round(model.means_[:, 0]).tolist())
    [0.0, 6.0]
    """

    _allow_nan = True
    _emission_letters = "mc"
    _LEARNED = ("startprob_", "transmat_", "means_", "_covars_")

    def __init__(self, *, n_components: int = 1, covariance_type: str = "diag", min_covar: float = 1e-3,
                 startprob_prior=1.0, transmat_prior=1.0, means_prior=0, means_weight=0, covars_prior=1e-2,
                 covars_weight=1, algorithm: str = "viterbi", random_state=None, n_iter: int = 10,
                 tol: float = 1e-2, verbose: bool = False, params: str = "stmc", init_params: str = "stmc",
                 implementation: str = "log"):
        store_chain_params(self, n_components, startprob_prior, transmat_prior, algorithm, random_state, n_iter, tol,
                           verbose, params, init_params, implementation)
        self.covariance_type = covariance_type
        self.min_covar = min_covar
        self.means_prior = means_prior
        self.means_weight = means_weight
        self.covars_prior = covars_prior
        self.covars_weight = covars_weight

    @property
    def n_features(self) -> int:
        """The dimension of the observations (of ``means_``)."""
        return int(np.asarray(self.means_).shape[1])

    # -- covariances in hmmlearn's two views --------------------------------------------

    @property
    def covars_(self) -> np.ndarray:
        """Covariances as (n_components, n_features, n_features) matrices."""
        if getattr(self, "_covars_", None) is None:
            raise AttributeError("covars_")
        D = self.means_.shape[1] if getattr(self, "means_", None) is not None else None
        if D is None:
            D = np.asarray(self._covars_).shape[-1] if self.covariance_type != "spherical" else 1
        return fill_covars(self._covars_, self.covariance_type, self.n_components, D)

    @covars_.setter
    def covars_(self, covars):
        if self.covariance_type not in COVARIANCE_TYPES:
            raise ParameterError(f"covariance_type must be one of {COVARIANCE_TYPES}, got {self.covariance_type!r}",
                                 name="covariance_type", value=self.covariance_type)
        self._covars_ = validate_covars(covars, self.covariance_type, self.n_components, None)

    def _variances(self) -> np.ndarray:
        """(K, D) variances of the spherical and diagonal models."""
        c = np.asarray(self._covars_, dtype=np.float64)
        if self.covariance_type == "spherical":
            return np.repeat(c[:, None], np.asarray(self.means_).shape[1], axis=1)
        return c

    def _matrices(self) -> np.ndarray:
        c = np.asarray(self._covars_, dtype=np.float64)
        return np.repeat(c[None], self.n_components, axis=0) if self.covariance_type == "tied" else c

    # -- the emission model's overrides -------------------------------------------------

    def _check_common(self):
        super()._check_common()
        if self.covariance_type not in COVARIANCE_TYPES:
            raise ParameterError(f"{type(self).__name__}: covariance_type must be one of {COVARIANCE_TYPES}, got "
                                 f"{self.covariance_type!r}", name="covariance_type", value=self.covariance_type)
        check_real(self, "min_covar", 0)
        self._check_prior("covars_prior")
        self._check_prior("means_weight")
        self._check_prior("means_prior", minimum=None)
        self._check_prior("covars_weight", minimum=None)

    def _init_emissions(self, X, lengths, rng):
        K, D = self.n_components, X.shape[1]
        if getattr(self, "means_", None) is not None and "m" not in self.init_params:
            if np.asarray(self.means_).shape[1:] != (D,):
                raise ParameterError(f"X has {D} features but means_ has shape {np.asarray(self.means_).shape}",
                                     name="X", value=D)
        if self._needs_init("m", "means_"):
            self.means_ = kmeans_centres(X, K, rng)
        if self._needs_init("c", "_covars_"):
            cv = _nan_cov(X) + self.min_covar * np.eye(D)
            if self.covariance_type == "spherical":
                self._covars_ = np.full(K, np.diag(cv).mean())
            elif self.covariance_type == "diag":
                self._covars_ = np.tile(np.diag(cv), (K, 1))
            elif self.covariance_type == "full":
                self._covars_ = np.tile(cv, (K, 1, 1))
            else:
                self._covars_ = cv

    def _check_emissions(self):
        if self.covariance_type not in COVARIANCE_TYPES:
            raise ParameterError(f"covariance_type must be one of {COVARIANCE_TYPES}, got {self.covariance_type!r}",
                                 name="covariance_type", value=self.covariance_type)
        means = np.asarray(self.means_, dtype=np.float64)
        if means.ndim != 2 or means.shape[0] != self.n_components:
            raise ParameterError(f"means_ must have shape ({self.n_components}, n_features), got {means.shape}",
                                 name="means_", value=means.shape)
        if not np.isfinite(means).all():
            idx = tuple(int(i) for i in np.argwhere(~np.isfinite(means))[0])
            raise ParameterError(f"means_{list(idx)} is not finite", name="means_", value=float(means[idx]))
        self.means_ = means
        self._covars_ = validate_covars(self._covars_, self.covariance_type, self.n_components, self.n_features)

    def _observations(self, X, lengths, name="X"):
        X, lengths = super()._observations(X, lengths, name)
        D = np.asarray(self.means_).shape[1] if getattr(self, "means_", None) is not None else None
        if D is not None and X.shape[1] != D and "m" not in self.init_params:
            raise ParameterError(f"X has {X.shape[1]} features but the model has {D}", name="X", value=X.shape[1])
        return X, lengths

    def _compute_log_likelihood(self, X) -> np.ndarray:
        if self.covariance_type in ("spherical", "diag"):
            return gaussian_diag_log_density(X, self.means_, self._variances())
        return marginal_log_density(X, self.means_, self._matrices())

    def _initialize_emission_statistics(self) -> dict:
        return {}

    def _emission_features(self, X):
        """Spherical and diagonal models: [x, x²] per sample (with NaN entries: [seen, x, x²], missing entries 0),
        whose posterior-weighted sums are the M-step's moments; full and tied models: None (posteriors)."""
        if self.covariance_type not in ("spherical", "diag") or not ({"m", "c"} & set(self.params)):
            return None
        missing = np.isnan(X)
        if not missing.any():
            return np.concatenate([X, X * X], axis=1)
        filled = np.where(missing, 0.0, X)
        return np.concatenate([(~missing).astype(np.float64), filled, filled * filled], axis=1)

    def _accumulate_feature_statistics(self, stats, occupancy, feature_sums) -> None:
        D = self.n_features
        stats["post"] = occupancy
        if feature_sums.shape[1] == 3 * D:
            stats["count"], stats["obs"], stats["obs**2"] = np.split(feature_sums, 3, axis=1)
        else:
            stats["obs"], stats["obs**2"] = np.split(feature_sums, 2, axis=1)
            stats["count"] = np.repeat(occupancy[:, None], D, axis=1)

    def _accumulate_emission_statistics(self, stats, X, posteriors) -> None:
        if not ({"m", "c"} & set(self.params)):
            return
        stats["post"] = posteriors.sum(axis=0)
        if self.covariance_type in ("spherical", "diag"):
            count, first, second = diag_weighted_moments(X, posteriors)
            stats["count"], stats["obs"], stats["obs**2"] = count, first, second
            return
        K, D = self.n_components, X.shape[1]
        missing = np.isnan(X)
        if not missing.any():
            stats["obs"] = posteriors.T @ X
            stats["obs*obs.T"] = np.stack([(X * posteriors[:, k:k + 1]).T @ X for k in range(K)])
            return
        # conditional expectations of the missing block, per pattern and state
        obs = np.zeros((K, D))
        outer = np.zeros((K, D, D))
        mats = self._matrices()
        for rows, pattern in missing_patterns(missing):
            w = posteriors[rows]
            for k in range(K):
                filled, cond = conditional_fill(X[rows], pattern, self.means_[k], mats[k])
                wk = w[:, k]
                obs[k] += wk @ filled
                outer[k] += (filled * wk[:, None]).T @ filled + wk.sum() * cond
        stats["obs"], stats["obs*obs.T"] = obs, outer

    def _do_emission_mstep(self, stats) -> None:
        if not ({"m", "c"} & set(self.params)):
            return
        K, D = self.n_components, self.n_features
        lam = np.asarray(self.means_weight, dtype=np.float64)
        mu0 = np.asarray(self.means_prior, dtype=np.float64)
        diagonal = self.covariance_type in ("spherical", "diag")
        denom = stats["count"] if diagonal else stats["post"][:, None]
        if "m" in self.params:
            with np.errstate(invalid="ignore", divide="ignore"):
                means = (lam * mu0 + stats["obs"]) / (lam + denom)
            self.means_ = np.where(np.isfinite(means), means, self.means_)  # a state without mass keeps its means
        if "c" not in self.params:
            return
        prior = np.asarray(self.covars_prior, dtype=np.float64)
        weight = np.asarray(self.covars_weight, dtype=np.float64)
        diff = self.means_ - mu0
        if diagonal:
            c_n = lam * diff ** 2 + stats["obs**2"] - 2 * self.means_ * stats["obs"] + self.means_ ** 2 * denom
            c_d = np.maximum(weight - 1, 0) + denom
            if self.covariance_type == "spherical":  # pooled over dimensions (their mean without NaN)
                var = (prior + c_n).sum(axis=1) / np.maximum(c_d, 1e-5).sum(axis=1)
            else:
                var = (prior + c_n) / np.maximum(c_d, 1e-5)
            self._covars_ = np.maximum(var, self.min_covar) if self.min_covar > 0 else var
            return
        c_n = np.empty((K, D, D))
        for k in range(K):
            obsmean = np.outer(stats["obs"][k], self.means_[k])
            c_n[k] = (lam * np.outer(diff[k], diff[k]) + stats["obs*obs.T"][k] - obsmean - obsmean.T
                      + np.outer(self.means_[k], self.means_[k]) * stats["post"][k])
        cvweight = max(float(np.max(weight)) - D, 0.0) if weight.ndim == 0 else np.maximum(weight - D, 0)
        if self.covariance_type == "tied":
            cov = (prior + c_n.sum(axis=0)) / (cvweight + stats["post"].sum())
            self._covars_ = _floor_matrix(cov, self.min_covar)
        else:
            cov = (prior + c_n) / (cvweight + stats["post"][:, None, None])
            self._covars_ = np.stack([_floor_matrix(c, self.min_covar) for c in cov])

    def _emission_log_prior(self) -> float:
        """log p(μ, Σ) up to constants for the priors of the M-step (λ = 0: the covariance
        prior alone, whose maximiser the M-step is)."""
        if "c" not in self.params:
            return 0.0
        prior = float(np.mean(self.covars_prior))
        weight = float(np.mean(self.covars_weight))
        D = self.n_features
        if self.covariance_type in ("spherical", "diag"):
            var = self._variances()
            return float((-0.5 * max(weight - 1, 0) * np.log(var) - 0.5 * prior / var).sum())
        psi = np.broadcast_to(np.asarray(self.covars_prior, dtype=np.float64), (D, D))
        mats = self._matrices()[:1] if self.covariance_type == "tied" else self._matrices()
        total = 0.0
        for m in mats:
            total += -0.5 * max(weight - D, 0) * np.linalg.slogdet(m)[1] - 0.5 * float((psi * np.linalg.inv(m)).sum())
        return total + 0.0 * prior

    def _emission_scalars(self) -> dict:
        K, D = self.n_components, np.asarray(self.means_).shape[1]
        return {"m": K * D, "c": {"spherical": K, "diag": K * D, "full": K * D * (D + 1) // 2,
                                  "tied": D * (D + 1) // 2}[self.covariance_type]}

    def _sample_emissions(self, states, rng) -> np.ndarray:
        out = np.empty((states.size, self.n_features))
        full = self.covars_
        for k in range(self.n_components):
            rows = np.flatnonzero(states == k)
            if rows.size:
                out[rows] = rng.multivariate_normal(self.means_[k], full[k], size=rows.size)
        return out
