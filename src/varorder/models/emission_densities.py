"""Compiled emission log-densities of the continuous and count HMMs (Numba).

Each kernel fills a (N, K) table ``log p(xₜ | zₜ = k)`` that the engine's chain takes as its
emissions; none builds an (N, K, D) temporary.

* Gaussian, diagonal covariance (spherical and diagonal models): per row and state
  −½ (Dₒ log 2π + Σ_d log σ²_kd + Σ_d (x_d − μ_kd)² / σ²_kd), the sums over the row's
  observed (non-NaN) dimensions only: a missing dimension of a Gaussian with diagonal
  covariance is marginalised by dropping it (Little & Rubin 2002, ch. 11).
* Gaussian, full covariance (full and tied models), rows without NaN: with Σₖ = LₖLₖᵀ,
  −½ (D log 2π + 2 Σ log diag Lₖ + |Lₖ⁻¹(x − μₖ)|²), one triangular solve per row and state.
  Rows with missing dimensions are handled in :mod:`varorder.models.gaussian_hmm` per
  pattern of missingness (the marginal of the observed block, Σ_oo).
* Poisson (per dimension, independent): Σ_d x_d log λ_kd − λ_kd − log Γ(x_d + 1).
"""

from __future__ import annotations

import math

import numba as nb
import numpy as np
import varorder._numba_start  # noqa: E402,F401,I001  (Numba's cache saves locked across processes)

__all__ = ["gaussian_diag_log_density", "gaussian_chol_log_density", "poisson_log_density",
           "diag_weighted_moments"]

_LOG_2PI = math.log(2.0 * math.pi)


@nb.njit(cache=True)
def gaussian_diag_log_density(X, means, variances):
    """(N, K) log-densities of rows X (N, D) under K diagonal Gaussians (means, variances
    (K, D)); NaN entries of X are left out of each row's density (marginalised). A complete
    row's quadratic forms run over the states in the inner loop (means and inverse variances
    transposed to (D, K)), which vectorises."""
    N, D = X.shape
    K = means.shape[0]
    out = np.empty((N, K))
    inv_t = np.empty((D, K))
    means_t = np.empty((D, K))
    log_det = np.zeros(K)
    for k in range(K):
        for d in range(D):
            inv_t[d, k] = 1.0 / variances[k, d]
            means_t[d, k] = means[k, d]
            log_det[k] += math.log(variances[k, d])
    base = np.empty(K)
    for k in range(K):
        base[k] = D * _LOG_2PI + log_det[k]
    quad = np.empty(K)
    for n in range(N):
        row = X[n]
        complete = True
        for d in range(D):
            if math.isnan(row[d]):
                complete = False
                break
        if complete:
            for k in range(K):
                quad[k] = 0.0
            for d in range(D):
                x = row[d]
                for k in range(K):
                    diff = x - means_t[d, k]
                    quad[k] += diff * diff * inv_t[d, k]
            for k in range(K):
                out[n, k] = -0.5 * (base[k] + quad[k])
            continue
        for k in range(K):
            q = 0.0
            seen = 0
            ld = 0.0
            for d in range(D):
                x = row[d]
                if not math.isnan(x):
                    diff = x - means[k, d]
                    q += diff * diff * inv_t[d, k]
                    ld += math.log(variances[k, d])
                    seen += 1
            out[n, k] = -0.5 * (seen * _LOG_2PI + ld + q)
    return out


@nb.njit(cache=True)
def gaussian_chol_log_density(X, means, chols):
    """(N, K) log-densities of complete rows X (N, D) under K full-covariance Gaussians
    given by their lower Cholesky factors chols (K, D, D)."""
    N, D = X.shape
    K = means.shape[0]
    out = np.empty((N, K))
    y = np.empty(D)
    log_det = np.zeros(K)
    for k in range(K):
        for d in range(D):
            log_det[k] += 2.0 * math.log(chols[k, d, d])
    for n in range(N):
        for k in range(K):
            L = chols[k]
            quad = 0.0
            for i in range(D):  # forward substitution: L y = x − μ
                s = X[n, i] - means[k, i]
                for j in range(i):
                    s -= L[i, j] * y[j]
                y[i] = s / L[i, i]
                quad += y[i] * y[i]
            out[n, k] = -0.5 * (D * _LOG_2PI + log_det[k] + quad)
    return out


@nb.njit(cache=True)
def poisson_log_density(X, rates):
    """(N, K) log-probabilities of count rows X (N, D) under K products of Poissons
    (rates (K, D)); a zero rate gives probability 1 to a zero count, 0 otherwise."""
    N, D = X.shape
    K = rates.shape[0]
    out = np.empty((N, K))
    log_rates = np.empty((K, D))
    for k in range(K):
        for d in range(D):
            log_rates[k, d] = math.log(rates[k, d]) if rates[k, d] > 0.0 else -np.inf
    for n in range(N):
        base = 0.0
        for d in range(D):
            base -= math.lgamma(X[n, d] + 1.0)
        for k in range(K):
            s = base
            for d in range(D):
                x = X[n, d]
                s -= rates[k, d]
                if x != 0.0:
                    s += x * log_rates[k, d]
            out[n, k] = s
    return out


@nb.njit(cache=True)
def diag_weighted_moments(X, weights):
    """Per state and dimension Σₜ wₜₖ [xₜd seen], Σ wₜₖ xₜd, Σ wₜₖ xₜd² over the observed
    entries of X (N, D) (NaN = missing), weights (N, K): three (K, D) arrays."""
    N, D = X.shape
    K = weights.shape[1]
    count = np.zeros((K, D))
    first = np.zeros((K, D))
    second = np.zeros((K, D))
    for n in range(N):
        for d in range(D):
            x = X[n, d]
            if math.isnan(x):
                continue
            for k in range(K):
                w = weights[n, k]
                count[k, d] += w
                first[k, d] += w * x
                second[k, d] += w * x * x
    return count, first, second
