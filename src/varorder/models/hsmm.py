"""Explicit-duration hidden semi-Markov models: ``GaussianHSMM``, ``PoissonHSMM``.

Factorization (Ferguson 1980; Yu 2010, "Hidden semi-Markov models", §2.2): a sequence is
a run of segments; segment i has state yᵢ, duration dᵢ ∈ 1 … ``max_duration`` and emits
its observations independently given the state:

    p(x, y, d) = π[y₁] · Πᵢ pᵢ(dᵢ | yᵢ) · Πᵢ₌₂ A[yᵢ₋₁, yᵢ] · Πₜ p(xₜ | state at t)

with no self-transitions (A's diagonal is zero when K > 1, so a state's stay is its
duration) and the sequence ending at a segment boundary (no right-censoring). This is
the semi-Markov structure of :mod:`varorder.semimarkov` in its factored form
(``from_emissions``: per-position emission log-densities, durations log p(d | k)); its
segment statistics (position occupancy, expected durations, transitions, first state)
are the E-step. Emission models are the HMMs' own (:class:`GaussianHMM`,
:class:`PoissonHMM`: densities, sufficient statistics and M-steps with the occupancy
p(zₜ = k | x) as weights), so the EM loop is :mod:`varorder.models.hmm_em`'s.

Duration distributions per state, on 1 … D:

* ``"nonparametric"``: any probability vector (M-step: expected counts, normalised);
* ``"poisson"``: d − 1 ~ Poisson(λₖ) truncated to 1 … D (M-step: the λ whose truncated mean
  equals the expected mean, by bisection — exact, so EM stays monotone);
* ``"negative_binomial"``: d − 1 ~ NB(nₖ, pₖ) truncated (M-step: the expected log-likelihood's
  profile in log n, the best p at each n by mean matching — a one-parameter exponential
  family once n is fixed; a step that would not improve it is refused). Stays no more
  dispersed than a Poisson's are fitted by the family's limit n → ∞ at a fixed mean, the
  truncated Poisson, represented exactly: ``duration_n_`` = ∞, ``duration_p_`` = 1 and the
  rate in ``duration_lambdas_`` (the mean of d − 1 before truncation, for every state).
"""

from __future__ import annotations

import varorder._numba_start  # noqa: E402,F401,I001  (Numba's cache saves locked across processes)
import numba as nb
import numpy as np
from scipy import optimize, special

from varorder import semimarkov
from varorder.base import check_choice, check_int
from varorder.errors import ParameterError
from varorder.models.count_hmm import PoissonHMM
from varorder.models.gaussian_hmm import GaussianHMM
from varorder.models.sequences import ChunkPlan

__all__ = ["GaussianHSMM", "PoissonHSMM", "DURATION_DISTRIBUTIONS", "truncated_poisson_log_pmf",
           "truncated_negative_binomial_log_pmf"]

DURATION_DISTRIBUTIONS = ("nonparametric", "poisson", "negative_binomial")


@nb.njit(cache=True, fastmath={"nsz", "arcp", "contract", "reassoc"})
def _weighted_feature_sums(weights, features):
    """Σₜ weights[t, k] · features[t, p], (K, P): the emission moments of an E-step, in one
    pass on one thread."""
    N, K = weights.shape
    P = features.shape[1]
    out = np.zeros((K, P))
    for t in range(N):
        f = features[t]
        for k in range(K):
            w = weights[t, k]
            row = out[k]
            for p in range(P):
                row[p] += w * f[p]
    return out


def _log_normalise(logp: np.ndarray) -> np.ndarray:
    return logp - special.logsumexp(logp, axis=-1, keepdims=True)


def truncated_poisson_log_pmf(lambdas, max_duration: int) -> np.ndarray:
    """(K, D) log p(d) for d = 1 … D with d − 1 ~ Poisson(λₖ) truncated to that range."""
    lam = np.asarray(lambdas, dtype=np.float64)[:, None]
    j = np.arange(max_duration)[None, :]
    with np.errstate(divide="ignore", invalid="ignore"):
        logp = np.where(lam > 0, j * np.log(np.where(lam > 0, lam, 1.0)) - lam - special.gammaln(j + 1),
                        np.where(j == 0, 0.0, -np.inf))
    return _log_normalise(logp)


def _negative_binomial_terms(rho, rate, max_duration: int) -> np.ndarray:
    """(K, D) unnormalised log p(d) for d − 1 = j ~ NB(n, p) with rho = 1/n ≥ 0 and rate =
    n(1 − p) ≥ 0: log Γ(j + n)/(Γ(n) j!) + j log(1 − p) (the constant n log p dropped) is
    Σᵢ₌₀^{j−1} log1p(i·rho) − log j! + j log rate, continuous at rho = 0, where it is
    the Poisson's j log rate − log j! (the limit n → ∞ at a fixed rate)."""
    rho = np.asarray(rho, dtype=np.float64)[:, None]
    rate = np.asarray(rate, dtype=np.float64)[:, None]
    j = np.arange(max_duration)[None, :]
    growth = np.concatenate([np.zeros_like(rho), np.cumsum(np.log1p(j[:, :-1] * rho), axis=1)], axis=1)
    with np.errstate(divide="ignore"):
        log_rate = np.log(rate)
    slope = np.where(j == 0, 0.0, j * np.where(rate > 0, log_rate, 0.0))
    return np.where((rate > 0) | (j == 0), growth + slope - special.gammaln(j + 1), -np.inf)


def truncated_negative_binomial_log_pmf(n, p, max_duration: int) -> np.ndarray:
    """(K, D) log p(d) for d = 1 … D with d − 1 ~ NB(nₖ, pₖ) (failures before nₖ successes of
    probability pₖ) truncated to that range; 0 < nₖ < ∞, 0 < pₖ ≤ 1 (the Poisson limit
    nₖ → ∞ at a fixed mean is :func:`truncated_poisson_log_pmf`)."""
    n = np.asarray(n, dtype=np.float64)
    p = np.asarray(p, dtype=np.float64)
    bad = ~(np.isfinite(n) & (n > 0) & (p > 0) & (p <= 1))
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ParameterError(f"negative binomial parameters must be 0 < n < inf and 0 < p <= 1, got n[{i}] = "
                             f"{float(n[i])!r}, p[{i}] = {float(p[i])!r}", name="n", value=float(n[i]))
    return _log_normalise(_negative_binomial_terms(1.0 / n, n * (1.0 - p), max_duration))


def _duration_log_pmf(n, mean, max_duration: int) -> np.ndarray:
    """(K, D) truncated NB log p(d) from nₖ (∞: the Poisson limit) and the mean mₖ of d − 1
    before truncation (p = n / (n + m), n(1 − p) = m / (1 + m/n))."""
    n = np.asarray(n, dtype=np.float64)
    mean = np.asarray(mean, dtype=np.float64)
    rho = np.where(np.isinf(n), 0.0, 1.0 / n)
    return _log_normalise(_negative_binomial_terms(rho, mean / (1.0 + mean * rho), max_duration))


def _truncated_poisson_rate(mean_minus_one: float, max_duration: int) -> float:
    """The λ whose Poisson truncated to 0 … D−1 has the given mean (bisection on a monotone map)."""
    if mean_minus_one <= 0:
        return 0.0
    top = max_duration - 1
    if mean_minus_one >= top:
        return 1e6
    j = np.arange(max_duration)

    def mean(lam):
        w = np.exp(_log_normalise(j * np.log(lam) - special.gammaln(j + 1)))
        return float((w * j).sum())

    lo, hi = 1e-12, max(1.0, 2 * mean_minus_one)
    while mean(hi) < mean_minus_one:
        hi *= 2
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if mean(mid) < mean_minus_one:
            lo = mid
        else:
            hi = mid
        if hi - lo <= 1e-14 * hi:
            break
    return 0.5 * (lo + hi)


# The search domain of the negative binomial M-step: n in [_NB_MIN_N, _NB_MAX_N] or n = ∞ (the
# Poisson limit), log of n(1 − p) in [−_NB_LOG_RATE, _NB_LOG_RATE] and p > 0.
_NB_MIN_N, _NB_MAX_N, _NB_LOG_RATE = 1e-8, 1e8, 60.0


def _negative_binomial_profile(counts, rho: float, growth_of=None):
    """(Σⱼ cⱼ log p(j), rate) at 1/n = rho with the rate n(1 − p) that maximises it: the truncated
    family at a fixed n is exponential in θ = log rate with statistic j, so the maximiser matches
    the expected mean of j = d − 1 (a safeguarded Newton iteration on a monotone map)."""
    D = counts.shape[0]
    j = np.arange(D, dtype=np.float64)
    base = _negative_binomial_terms(np.array([rho]), np.array([1.0]), D)[0]  # the terms at rate 1
    total = counts.sum()
    target = float(counts @ j) / total
    lo = -_NB_LOG_RATE
    hi = _NB_LOG_RATE if rho == 0.0 else min(_NB_LOG_RATE, -np.log(rho) - 1e-12)  # p > 0
    theta = float(np.clip(np.log(max(target, 1e-300)), lo, hi))
    for _ in range(200):
        lw = base + theta * j
        w = np.exp(lw - lw.max())
        w /= w.sum()
        mean = float(w @ j)
        var = float(w @ (j * j)) - mean * mean
        if mean > target:
            hi = theta
        else:
            lo = theta
        step = (mean - target) / var if var > 0 else np.inf
        new = theta - step
        if not lo < new < hi:
            new = 0.5 * (lo + hi)
        if abs(new - theta) <= 1e-13 * max(1.0, abs(theta)):
            theta = new
            break
        theta = new
    lw = base + theta * j
    return float(counts @ lw - total * special.logsumexp(lw)), float(np.exp(theta))


def _fit_negative_binomial(counts):
    """(n, mean of d − 1 before truncation, Σⱼ cⱼ log p(j)) maximising the expected
    log-likelihood of expected duration counts ``counts`` (D,) over the truncated NB family:
    the profile in log n (bounded Brent search over [_NB_MIN_N, _NB_MAX_N]) of the best rate at
    each n. The rule for stays no more dispersed than a Poisson's: the family's limit n → ∞ at a
    fixed mean is the truncated Poisson, evaluated exactly (1/n = 0); when it is at least as good
    as the best finite n, the result is n = ∞ (p = 1) with the Poisson's rate as the mean."""
    limit, limit_rate = _negative_binomial_profile(counts, 0.0)
    res = optimize.minimize_scalar(lambda u: -_negative_binomial_profile(counts, float(np.exp(-u)))[0],
                                   bounds=(np.log(_NB_MIN_N), np.log(_NB_MAX_N)), method="bounded",
                                   options={"xatol": 1e-7})
    n = float(np.exp(res.x))
    value, rate = _negative_binomial_profile(counts, 1.0 / n)
    if limit >= value - 1e-12 * abs(value):  # a tie within rounding goes to the limit too
        return np.inf, limit_rate, limit
    return n, rate / (1.0 - rate / n), value  # the mean n(1 − p)/p from the rate n(1 − p)


class _SemiMarkovChain:
    """The chain part of an explicit-duration HSMM, mixed before an HMM emission model: the
    E-step, decoding and sampling on :mod:`varorder.semimarkov`; the duration M-step."""

    def _check_common(self):
        super()._check_common()
        check_int(self, "max_duration", 1)
        check_choice(self, "duration_distribution", DURATION_DISTRIBUTIONS)

    # -- parameters ---------------------------------------------------------------------

    def _init(self, X, lengths):
        super()._init(X, lengths)
        K, D = self.n_components, self.max_duration
        if "t" in self.init_params and K > 1:  # no self-transitions: a state's stay is its duration
            T = np.array(self.transmat_, dtype=np.float64)
            np.fill_diagonal(T, 0.0)
            self.transmat_ = T / T.sum(axis=1, keepdims=True)
        if self._needs_init("d", "durations_"):
            mean = min(max(float(np.mean(lengths)) / (2 * K), 1.0), D)  # a few segments per sequence
            self._set_poisson(np.full(K, max(mean - 1.0, 0.5)))
            if self.duration_distribution == "negative_binomial":
                self._set_negative_binomial(np.full(K, 2.0), self.duration_lambdas_)
            if self.duration_distribution == "nonparametric":
                del self.duration_lambdas_

    def _set_poisson(self, lambdas):
        self.duration_lambdas_ = np.asarray(lambdas, dtype=np.float64)
        self.durations_ = np.exp(truncated_poisson_log_pmf(self.duration_lambdas_, self.max_duration))

    @property
    def duration_n_(self) -> np.ndarray:
        """The negative binomial's n per state, ∞ for the Poisson limit; stored (and saved) as 1/n, which is
        finite (model files hold no +inf)."""
        inverse = getattr(self, "_duration_inverse_n_", None)
        if inverse is None:
            raise AttributeError("duration_n_")
        inverse = np.asarray(inverse, dtype=np.float64)
        out = np.full(inverse.shape, np.inf)
        np.divide(1.0, inverse, out=out, where=inverse > 0)
        return out

    @duration_n_.setter
    def duration_n_(self, n):
        n = np.asarray(n, dtype=np.float64)
        inverse = np.zeros(n.shape)
        np.divide(1.0, n, out=inverse, where=np.isfinite(n))
        self._duration_inverse_n_ = inverse

    def _set_negative_binomial(self, n, mean):
        """n (∞: the Poisson limit), the mean of d − 1 before truncation (``duration_lambdas_``), p = n / (n + mean)
        (1 in the limit) and the truncated pmf."""
        n = np.asarray(n, dtype=np.float64)
        mean = np.asarray(mean, dtype=np.float64)
        self.duration_n_ = n
        self.duration_lambdas_ = mean
        finite = np.isfinite(n)
        self.duration_p_ = np.ones_like(n)
        self.duration_p_[finite] = n[finite] / (n[finite] + mean[finite])
        self.durations_ = np.exp(_duration_log_pmf(n, mean, self.max_duration))

    def _check(self):
        super()._check()
        dur = np.asarray(self.durations_, dtype=np.float64)
        want = (self.n_components, self.max_duration)
        if dur.shape != want:
            raise ParameterError(f"durations_ must have shape {want}, got {dur.shape}", name="durations_",
                                 value=dur.shape)
        bad = ~np.isfinite(dur) | (dur < 0)
        if bad.any():
            idx = tuple(int(i) for i in np.argwhere(bad)[0])
            raise ParameterError(f"durations_{list(idx)} = {float(dur[idx])!r} is not a probability",
                                 name="durations_", value=float(dur[idx]))
        off = np.flatnonzero(np.abs(dur.sum(axis=1) - 1.0) > 1e-8)
        if off.size:
            raise ParameterError(f"durations_ row {int(off[0])} does not sum to 1", name="durations_",
                                 value=int(off[0]))
        self.durations_ = dur

    def _log_durations(self):
        with np.errstate(divide="ignore"):
            return np.log(self.durations_)

    # -- the structure ---------------------------------------------------------------------

    def _chunks(self, frames, lengths):
        """Per chunk of the length plan: (seq_ids, flat_index, valid, SegmentInput arguments)."""
        plan = ChunkPlan(lengths)
        log_T, log_pi = self._chain_arrays()
        log_d = self._log_durations()
        for seq_ids, chunk_lengths, flat_index, valid in plan.chunks:
            emissions = frames[None] if lengths.size == 1 else frames[flat_index]
            yield seq_ids, flat_index, valid, (semimarkov.from_emissions(emissions, log_d), log_T,
                                               dict(lengths=chunk_lengths, start=log_pi))

    def _posteriors(self, frames, lengths):  # (posteriors, log p, expected transitions per sequence)
        K, D = self.n_components, self.max_duration
        post = np.empty_like(frames)
        logp = np.empty(lengths.size)
        trans = np.zeros((lengths.size, K, K))
        first = np.zeros((lengths.size, K))
        durations = np.zeros((lengths.size, K, D))
        offsets = np.concatenate([[0], np.cumsum(lengths)])
        for seq_ids, flat_index, valid, (seg, T, kw) in self._chunks(frames, lengths):
            logz, occupancy, dur, edge, fst = semimarkov.segment_statistics(seg, T, **kw)
            for i, s in enumerate(seq_ids):
                post[offsets[s]:offsets[s + 1]] = occupancy[i, :lengths[s]]
            logp[seq_ids] = logz
            trans[seq_ids] = edge
            first[seq_ids] = fst
            durations[seq_ids] = dur
        self._last_first, self._last_durations = first, durations
        return post, logp, trans

    def _do_estep(self, X, lengths, weights, workspace=None):
        frames = self._compute_log_likelihood(X)
        post, logp, trans = self._posteriors(frames, lengths)
        if not np.isfinite(logp).all():
            bad = int(np.flatnonzero(~np.isfinite(logp))[0])
            raise ParameterError(f"sequence {bad} of X has probability zero under the current parameters "
                                 f"(is it shorter than every allowed segmentation? max_duration={self.max_duration})",
                                 name="X", value=bad)
        if (weights != 1.0).any():
            post *= np.repeat(weights, lengths)[:, None]
        stats = {"start": weights @ self._last_first, "trans": np.einsum("s,sij->ij", weights, trans),
                 "durations": np.einsum("s,skd->kd", weights, self._last_durations)}
        stats.update(self._initialize_emission_statistics())
        features = self._emission_features(X)
        if features is not None:  # the emission model's moments: Σₜ p(zₜ = k | x) · featuresₜ
            self._accumulate_feature_statistics(stats, post.sum(axis=0), _weighted_feature_sums(post, features))
        else:
            self._accumulate_emission_statistics(stats, X, post)
        return stats, float(weights @ logp)

    def _do_mstep(self, stats):
        super()._do_mstep(stats)
        if "d" not in self.params:
            return
        counts = stats["durations"]
        K, D = counts.shape
        if self.duration_distribution == "nonparametric":
            totals = counts.sum(axis=1, keepdims=True)
            with np.errstate(invalid="ignore"):
                self.durations_ = np.where(totals > 0, counts / np.where(totals > 0, totals, 1), self.durations_)
        elif self.duration_distribution == "poisson":
            lam = self.duration_lambdas_.copy()
            for k in range(K):
                total = counts[k].sum()
                if total > 0:
                    lam[k] = _truncated_poisson_rate(float(counts[k] @ np.arange(D)) / total, D)
            self._set_poisson(lam)
        else:
            self._negative_binomial_mstep(counts)

    def _negative_binomial_mstep(self, counts):
        """Each state's (n, mean) by :func:`_fit_negative_binomial`, kept only where it does not lower the expected
        log-likelihood of the current durations (so EM stays monotone)."""
        K = counts.shape[0]
        n = np.array(self.duration_n_, dtype=np.float64)
        mean = np.array(getattr(self, "duration_lambdas_", None) if getattr(self, "duration_lambdas_", None) is not None
                        else n * (1.0 - self.duration_p_) / self.duration_p_, dtype=np.float64)
        with np.errstate(divide="ignore"):
            current = np.log(self.durations_)
        for k in range(K):
            c = counts[k]
            if c.sum() <= 0:
                continue
            nk, mk, value = _fit_negative_binomial(c)
            if value >= float(c[c > 0] @ current[k, c > 0]):
                n[k], mean[k] = nk, mk
        self._set_negative_binomial(n, mean)

    def _emission_scalars(self):
        K, D = self.n_components, self.max_duration
        dur = {"nonparametric": K * (D - 1), "poisson": K, "negative_binomial": 2 * K}[self.duration_distribution]
        return {**super()._emission_scalars(), "d": dur}

    def _get_n_fit_scalars_per_param(self):
        K = self.n_components
        return {"s": K - 1, "t": K * (K - 2) if K > 1 else 0, **self._emission_scalars()}

    # -- inference --------------------------------------------------------------------------

    def score(self, X, lengths=None) -> float:
        _, lengths, frames = self._frames(X, lengths)
        return float(sum(semimarkov.log_partition(seg, T, **kw).sum()
                         for _, _, _, (seg, T, kw) in self._chunks(frames, lengths)))

    def predict_proba(self, X, lengths=None, filtered: bool = False, lag: int | None = None):
        if filtered or lag is not None:
            raise ParameterError("filtered=True and lag= are not available for semi-Markov models (the forward "
                                 "values are per segment end, not per position)", name="filtered", value=filtered)
        return super().predict_proba(X, lengths)

    @staticmethod
    def _states_of(segmentation, n):
        out = np.full(n, -1, dtype=np.int64)
        for s, e, k in segmentation:
            out[s:e] = k
        return out

    def decode(self, X, lengths=None, algorithm=None):
        algorithm = self.algorithm if algorithm is None else algorithm
        if algorithm == "map":
            return super().decode(X, lengths, algorithm)
        if algorithm != "viterbi":
            return super().decode(X, lengths, algorithm)  # refuses it by name
        _, lengths, frames = self._frames(X, lengths)
        states = np.empty(frames.shape[0], dtype=np.int64)
        offsets = np.concatenate([[0], np.cumsum(lengths)])
        total = 0.0
        for seq_ids, _, _, (seg, T, kw) in self._chunks(frames, lengths):
            segs, scores = semimarkov.viterbi(seg, T, **kw)
            total += float(scores.sum())
            for s, segmentation in zip(seq_ids, segs):
                n = int(lengths[s])
                states[offsets[s]:offsets[s] + n] = self._states_of(segmentation, n)
        return total, states

    def segments(self, X, lengths=None):
        """The Viterbi segmentation of each sequence: a list of (start, end, state) per
        sequence, end exclusive."""
        _, lengths, frames = self._frames(X, lengths)
        out = [None] * lengths.size
        for seq_ids, _, _, (seg, T, kw) in self._chunks(frames, lengths):
            for s, segmentation in zip(seq_ids, semimarkov.viterbi(seg, T, **kw)[0]):
                out[s] = segmentation
        return out

    def kbest_paths(self, X, lengths=None, k: int = 2):
        """The k most probable (segmentation, states) of each sequence: a list per sequence of
        (states (k, n), log p(x, y, d) (k,)), −1 / −inf padded."""
        _, lengths, frames = self._frames(X, lengths)
        out = [None] * lengths.size
        for seq_ids, _, _, (seg, T, kw) in self._chunks(frames, lengths):
            lists, scores = semimarkov.kbest(seg, T, k, **kw)
            for i, s in enumerate(seq_ids):
                n = int(lengths[s])
                paths = np.full((k, n), -1, dtype=np.int64)
                for r, segmentation in enumerate(lists[i]):
                    paths[r] = self._states_of(segmentation, n)
                out[s] = (paths, scores[i])
        return out

    def sample_paths(self, X, lengths=None, n: int = 1, random_state=None):
        """``n`` exact posterior state paths per sequence, (n, length) each."""
        _, lengths, frames = self._frames(X, lengths)
        seed = self._rng(random_state).integers(0, 2**63 - 1)
        out = [None] * lengths.size
        for seq_ids, _, _, (seg, T, kw) in self._chunks(frames, lengths):
            draws = semimarkov.sample(seg, T, n, seed + int(seq_ids[0]), **kw)
            for i, s in enumerate(seq_ids):
                out[s] = np.stack([self._states_of(d, int(lengths[s])) for d in draws[i]])
        return out

    def sample(self, n_samples: int = 1, random_state=None, currstate=None):
        """(X, states): segments drawn (state, then duration, then the next state) until
        ``n_samples`` positions are filled (the last segment cut there)."""
        rng, state = self._sampling_start(n_samples, random_state, currstate)
        out = np.empty(n_samples, dtype=np.int64)
        t = 0
        D = self.max_duration
        while t < n_samples:
            d = int(rng.choice(D, p=self.durations_[state])) + 1
            out[t:t + d] = state
            t += d
            state = int(rng.choice(self.n_components, p=self.transmat_[state]))
        return self._sample_emissions(out, rng), out


def _hsmm_doc(base):
    return f"""Explicit-duration HSMM with {base}'s emissions (see :mod:`varorder.models.hsmm`).

    Parameters: {base}'s, plus ``max_duration`` (D, the longest segment), ``duration_distribution``
    ("nonparametric", "poisson", "negative_binomial") and the letter 'd' in ``params`` /
    ``init_params`` for the durations. Learned: {base}'s, plus ``durations_`` (K, D) with
    ``durations_[k, d]`` = p(duration d + 1 | state k) (and ``duration_lambdas_`` or
    ``duration_n_``, ``duration_p_`` for the parametric ones). :meth:`segments` gives the
    Viterbi segmentation; ``predict_proba`` the occupancy p(zₜ = k | x)."""


_DURATION_ARRAYS = ("durations_", "duration_lambdas_", "_duration_inverse_n_", "duration_p_")


class GaussianHSMM(_SemiMarkovChain, GaussianHMM):
    __doc__ = _hsmm_doc("GaussianHMM")
    _LEARNED = GaussianHMM._LEARNED + _DURATION_ARRAYS

    def __init__(self, *, n_components: int = 1, max_duration: int = 50, duration_distribution: str = "nonparametric",
                 covariance_type: str = "diag", min_covar: float = 1e-3, startprob_prior=1.0, transmat_prior=1.0,
                 means_prior=0, means_weight=0, covars_prior=1e-2, covars_weight=1, algorithm: str = "viterbi",
                 random_state=None, n_iter: int = 10, tol: float = 1e-2, verbose: bool = False,
                 params: str = "stmcd", init_params: str = "stmcd", implementation: str = "log"):
        super().__init__(n_components=n_components, covariance_type=covariance_type, min_covar=min_covar,
                         startprob_prior=startprob_prior, transmat_prior=transmat_prior, means_prior=means_prior,
                         means_weight=means_weight, covars_prior=covars_prior, covars_weight=covars_weight,
                         algorithm=algorithm, random_state=random_state, n_iter=n_iter, tol=tol, verbose=verbose,
                         params=params, init_params=init_params, implementation=implementation)
        self.max_duration = max_duration
        self.duration_distribution = duration_distribution


class PoissonHSMM(_SemiMarkovChain, PoissonHMM):
    __doc__ = _hsmm_doc("PoissonHMM")
    _LEARNED = PoissonHMM._LEARNED + _DURATION_ARRAYS

    def __init__(self, *, n_components: int = 1, max_duration: int = 50, duration_distribution: str = "nonparametric",
                 startprob_prior=1.0, transmat_prior=1.0, lambdas_prior=0.0, lambdas_weight=0.0,
                 algorithm: str = "viterbi", random_state=None, n_iter: int = 10, tol: float = 1e-2,
                 verbose: bool = False, params: str = "stld", init_params: str = "stld", implementation: str = "log"):
        super().__init__(n_components=n_components, startprob_prior=startprob_prior, transmat_prior=transmat_prior,
                         lambdas_prior=lambdas_prior, lambdas_weight=lambdas_weight, algorithm=algorithm,
                         random_state=random_state, n_iter=n_iter, tol=tol, verbose=verbose, params=params,
                         init_params=init_params, implementation=implementation)
        self.max_duration = max_duration
        self.duration_distribution = duration_distribution
