"""Explicit-duration HSMMs (GaussianHSMM, PoissonHSMM) against enumeration over
segmentations (varorder.testing.oracle) with densities from SciPy; EM never decreases its
objective for each duration distribution; the duration M-steps; bad input named."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from varorder.errors import ParameterError
from varorder.models.hsmm import (DURATION_DISTRIBUTIONS, GaussianHSMM, PoissonHSMM, truncated_negative_binomial_log_pmf,
                                  truncated_poisson_log_pmf)
from varorder.testing import oracle
from varorder.testing.strategies import dense_segment_scores

K, D, MAXD = 3, 2, 3


def _model(seed=0, covariance_type="full"):
    rng = np.random.default_rng(seed)
    m = GaussianHSMM(n_components=K, max_duration=MAXD, covariance_type=covariance_type, init_params="", min_covar=0)
    m.startprob_ = rng.dirichlet(np.ones(K))
    T = rng.dirichlet(np.ones(K), size=K)
    np.fill_diagonal(T, 0.0)
    m.transmat_ = T / T.sum(axis=1, keepdims=True)
    m.means_ = rng.normal(size=(K, D)) * 2
    A = rng.normal(size=(K, D, D))
    m.covars_ = A @ A.transpose(0, 2, 1) + np.eye(D) if covariance_type == "full" else rng.uniform(0.5, 2, (K, D))
    m.durations_ = rng.dirichlet(np.ones(MAXD), size=K)
    return m


def _paths(model, X):
    frames = np.stack([stats.multivariate_normal(model.means_[k], model.covars_[k]).logpdf(X) for k in range(K)],
                      axis=1)
    scores = dense_segment_scores(frames[None], np.log(model.durations_))[0]
    with np.errstate(divide="ignore"):
        return oracle.segmentation_paths(scores, np.log(model.transmat_), np.log(model.startprob_)), frames


def test_inference_matches_enumeration():
    model = _model(1)
    rng = np.random.default_rng(2)
    X = rng.normal(size=(9, D)) * 2
    lengths = [5, 4]
    total, post = model.score_samples(X, lengths)
    logp, states = model.decode(X, lengths)
    kbest = model.kbest_paths(X, lengths, k=3)
    segs = model.segments(X, lengths)
    want, best, start = 0.0, 0.0, 0
    for s, n in enumerate(lengths):
        paths, _ = _paths(model, X[start:start + n])
        want += oracle.log_partition(paths)
        best += oracle.max_score(paths)
        occ = np.zeros((n, K))
        for seg, p in oracle.probabilities(paths).items():
            for a, e, k in seg:
                occ[a:e, k] += p
        assert np.allclose(post[start:start + n], occ, atol=1e-12)
        assert tuple(segs[s]) in oracle.argmax_paths(paths, tol=1e-9)
        assert np.array_equal(states[start:start + n], model._states_of(segs[s], n))
        assert np.allclose(kbest[s][1], oracle.kbest_scores(paths, 3), rtol=1e-12)
        start += n
    assert np.isclose(total, want, rtol=1e-12) and np.isclose(model.score(X, lengths), want, rtol=1e-12)
    assert np.isclose(logp, best, rtol=1e-12)


def test_posterior_samples_follow_the_posterior():
    model = _model(3)
    X = np.random.default_rng(4).normal(size=(4, D))
    paths, _ = _paths(model, X)
    probs = {}
    for seg, p in oracle.probabilities(paths).items():  # distinct segmentations can share a state path
        key = tuple(model._states_of(seg, 4))
        probs[key] = probs.get(key, 0.0) + p
    counts = {}
    for row in model.sample_paths(X, n=3000, random_state=5)[0]:
        counts[tuple(row)] = counts.get(tuple(row), 0) + 1
    assert oracle.chi_square_pvalue(counts, probs) > 1e-3


@pytest.mark.parametrize("distribution", DURATION_DISTRIBUTIONS)
def test_em_never_decreases_its_objective(distribution):
    rng = np.random.default_rng(6)
    truth = _model(7, covariance_type="diag")
    truth.max_duration = 8
    truth.durations_ = np.exp(truncated_poisson_log_pmf([2.0, 4.0, 1.0], 8))
    X, _ = truth.sample(300, random_state=8)
    model = GaussianHSMM(n_components=K, max_duration=8, duration_distribution=distribution, n_iter=8, tol=0,
                         random_state=0)
    model.fit(X, [150, 100, 50], sample_weight=[1.0, 0.5, 2.0])
    objective = np.array([h["log_posterior"] for h in model.history_])
    assert np.all(np.diff(objective) >= -1e-7 * np.abs(objective[1:])), objective
    assert np.allclose(model.durations_.sum(axis=1), 1.0)
    assert (np.diag(model.transmat_) == 0).all()


def test_poisson_hsmm_fits_counts():
    rng = np.random.default_rng(9)
    X = np.concatenate([rng.poisson(1.0, (30, 1)), rng.poisson(9.0, (30, 1))] * 3)
    model = PoissonHSMM(n_components=2, max_duration=40, duration_distribution="poisson", n_iter=20,
                        random_state=0).fit(X)
    seg = model.segments(X)[0]
    assert len(seg) == 6 and all(abs(e - 30 * (i + 1)) <= 2 for i, (s, e, _) in enumerate(seg))
    states = model.predict(X)
    for k in range(2):  # the rates are (near) the means of the samples decoded to each state
        assert np.isclose(model.lambdas_[k, 0], X[states == k].mean(), rtol=0.05)


def test_duration_pmfs_and_their_m_steps():
    lp = truncated_poisson_log_pmf([0.0, 2.5], 6)
    assert np.allclose(np.exp(lp).sum(axis=1), 1.0) and np.exp(lp[0, 0]) == 1.0
    j = np.arange(6)
    want = stats.poisson(2.5).pmf(j)
    assert np.allclose(np.exp(lp[1]), want / want.sum())
    nb = truncated_negative_binomial_log_pmf([3.0], [0.4], 6)[0]
    want = stats.nbinom(3.0, 0.4).pmf(j)
    assert np.allclose(np.exp(nb), want / want.sum())


def test_bad_input_names_the_argument():
    model = _model()
    with pytest.raises(ParameterError, match="durations_ must have shape"):
        model.durations_ = np.ones((K, 2)) / 2
        model.score(np.zeros((3, D)))
    with pytest.raises(ParameterError, match="filtered=True and lag= are not available"):
        _model().predict_proba(np.zeros((3, D)), filtered=True)
    with pytest.raises(ValueError, match="max_duration"):
        GaussianHSMM(n_components=2, max_duration=0).fit(np.zeros((5, 1)))


def _nb_counts(name, D):
    j = np.arange(D)
    pmf = {"nb": stats.nbinom(3.0, 0.3).pmf(j), "geometric": stats.geom(0.2).pmf(j + 1),
           "under": stats.binom(20, 0.5).pmf(j), "point": (j == 9) * 1.0}[name]
    return 100.0 * pmf / pmf.sum()


@pytest.mark.parametrize("name", ["nb", "geometric", "under", "point"])
def test_negative_binomial_m_step_maximises_the_expected_log_likelihood(name):
    """The profile search's result is at least as good as every point of a grid over (n, p),
    and as the truncated Poisson of the same mean; under-dispersed counts (a binomial's, a
    point mass) give the Poisson limit exactly: n = inf, p = 1, the pmf the truncated Poisson's."""
    from varorder.models.hsmm import _duration_log_pmf, _fit_negative_binomial

    D = 30
    c = _nb_counts(name, D)
    n, mean, value = _fit_negative_binomial(c)
    assert np.isclose(value, c @ _duration_log_pmf(np.array([n]), np.array([mean]), D)[0], rtol=1e-12)
    grid = [(nn, pp) for nn in np.geomspace(0.05, 1e4, 40) for pp in np.linspace(0.01, 0.99, 40)]
    lp = truncated_negative_binomial_log_pmf(np.array([g[0] for g in grid]), np.array([g[1] for g in grid]), D)
    assert value >= (lp @ c).max() - 1e-9 * abs(value)
    poisson_mean = float(c @ np.arange(D)) / c.sum()
    from varorder.models.hsmm import _truncated_poisson_rate

    lam = _truncated_poisson_rate(poisson_mean, D)
    assert value >= c @ truncated_poisson_log_pmf([lam], D)[0] - 1e-9 * abs(value)
    if name == "nb":
        assert np.isclose(n, 3.0, rtol=1e-4) and np.isclose(mean, 3.0 * 0.7 / 0.3, rtol=1e-4)
    if name in ("under", "point"):
        assert n == np.inf
        assert np.allclose(_duration_log_pmf(np.array([n]), np.array([mean]), D)[0],
                           truncated_poisson_log_pmf([mean], D)[0], atol=1e-12)


def test_negative_binomial_em_is_monotone_and_warning_free_with_under_dispersed_stays(tmp_path):
    """Segments of exactly 6 positions (variance 0): the M-step takes the Poisson limit (no
    search drifting n to infinity, no RuntimeWarning: the module runs under
    ``warnings.simplefilter("error")``), EM never decreases its objective, and the fitted
    model scores, saves and loads."""
    import warnings

    rng = np.random.default_rng(11)
    means = np.array([[-4.0], [0.0], [4.0]])
    states = np.concatenate([np.full(6, k) for k in rng.integers(0, 3, 40)])
    X = means[states] + 0.3 * rng.normal(size=(states.size, 1))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model = GaussianHSMM(n_components=3, max_duration=12, duration_distribution="negative_binomial", n_iter=12,
                             tol=0, random_state=0).fit(X)
        objective = np.array([h["log_posterior"] for h in model.history_])
        assert np.all(np.diff(objective) >= -1e-7 * np.abs(objective[1:])), objective
        assert np.isinf(model.duration_n_).any() and (model.duration_p_[np.isinf(model.duration_n_)] == 1.0).all()
        limit = np.isinf(model.duration_n_)
        assert np.allclose(model.durations_[limit],
                           np.exp(truncated_poisson_log_pmf(model.duration_lambdas_[limit], 12)), atol=1e-12)
        assert np.isfinite(model.score(X))
        path = tmp_path / "nb.npz"
        model.save(path)  # n = inf is stored as 1/n = 0 (model files hold no +inf)
        loaded = GaussianHSMM.load(path)
        assert np.array_equal(loaded.duration_n_, model.duration_n_)
        assert np.array_equal(loaded.durations_, model.durations_) and loaded.score(X) == model.score(X)


def test_negative_binomial_pmf_refuses_parameters_outside_its_domain():
    with pytest.raises(ParameterError, match=r"n\[0\] = inf"):
        truncated_negative_binomial_log_pmf([np.inf], [1.0], 5)
    with pytest.raises(ParameterError, match=r"p\[1\] = 0.0"):
        truncated_negative_binomial_log_pmf([1.0, 2.0], [0.5, 0.0], 5)
    lp = truncated_negative_binomial_log_pmf([2.0], [1.0], 5)[0]  # p = 1: all mass at d = 1
    assert lp[0] == 0.0 and np.isneginf(lp[1:]).all()


@pytest.mark.parametrize("hsmm, base", [("GaussianHSMM", "GaussianHMM"), ("PoissonHSMM", "PoissonHMM")])
def test_constructor_is_the_hmms_plus_the_duration_model(hsmm, base):
    """An HSMM takes its HMM's keywords (hmmlearn's, with their defaults: a GaussianHMM user
    switches by adding the duration model) and only ``max_duration`` and
    ``duration_distribution`` of its own; ``params`` / ``init_params`` gain ``d`` (durations)."""
    import inspect

    def defaults(cls):
        return {p.name: p.default for p in inspect.signature(cls).parameters.values()}

    from varorder import models

    hsmm, hmm = getattr(models, hsmm), defaults(getattr(models, base))
    own = {k: v for k, v in defaults(hsmm).items() if k not in hmm}
    assert own == {"max_duration": 50, "duration_distribution": "nonparametric"}
    assert {k: v + "d" if k in ("params", "init_params") else v for k, v in hmm.items()} == \
        {k: v for k, v in defaults(hsmm).items() if k in hmm}
    assert hsmm(max_duration=7).get_params()["max_duration"] == 7
