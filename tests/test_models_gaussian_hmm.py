"""hmmlearn-compatible HMMs (GaussianHMM per covariance type, GMMHMM, PoissonHMM, CategoricalHMM):
likelihood, posteriors (smoothed and filtered), Viterbi, k-best paths and posterior samples
against brute-force enumeration (varorder.testing.oracle) with densities from SciPy, NaN
entries (GaussianHMM and GMMHMM), sample weights and transition zeros included; EM never
decreases its objective; the same numbers as hmmlearn where it is installed; bad input named."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from varorder.errors import ParameterError
from varorder.models.count_hmm import CategoricalHMM, PoissonHMM
from varorder.models.gaussian_hmm import COVARIANCE_TYPES, GaussianHMM
from varorder.testing import oracle

K, D = 3, 2


def _random_covars(rng, covariance_type, k=K, d=D):
    if covariance_type == "diag":
        return rng.uniform(0.5, 2.0, (k, d))
    if covariance_type == "spherical":
        return rng.uniform(0.5, 2.0, k)
    if covariance_type == "full":
        A = rng.normal(size=(k, d, d))
        return A @ A.transpose(0, 2, 1) + np.eye(d)
    A = rng.normal(size=(d, d))
    return A @ A.T + np.eye(d)


def _gaussian(covariance_type, seed=0, mask_zero=False):
    rng = np.random.default_rng(seed)
    model = GaussianHMM(n_components=K, covariance_type=covariance_type, init_params="", min_covar=0.0)
    model.startprob_ = rng.dirichlet(np.ones(K))
    T = rng.dirichlet(np.ones(K), size=K)
    if mask_zero:
        T[0, 2] = 0.0
        T[2, 1] = 0.0
        T /= T.sum(axis=1, keepdims=True)
    model.transmat_ = T
    model.means_ = rng.normal(size=(K, D)) * 2
    model.covars_ = _random_covars(rng, covariance_type)
    return model


def _marginal_frames(X, state_logpdf):
    """log p(x_o | k) per row and state from ``state_logpdf(k, seen, x[seen])``, o a row's observed (non-NaN)
    entries; 0 for a row without any."""
    out = np.empty((len(X), K))
    for t, x in enumerate(X):
        seen = ~np.isnan(x)
        for k in range(K):
            out[t, k] = state_logpdf(k, seen, x[seen]) if seen.any() else 0.0
    return out


def _scipy_frames(model, X):
    """log p(xₜ | k) computed independently: SciPy's density of the observed block."""
    full = model.covars_
    return _marginal_frames(X, lambda k, seen, x: stats.multivariate_normal(
        model.means_[k, seen], full[k][np.ix_(seen, seen)]).logpdf(x))


def _enumerate(model, frames):
    with np.errstate(divide="ignore"):
        return oracle.chain_paths(frames, np.log(model.transmat_), np.log(model.startprob_))


def _data(seed, n=(4, 3), nan=False):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(sum(n), D)) * 2
    if nan:
        X[1, 0] = np.nan
        X[4, :] = np.nan
        X[5, 1] = np.nan
    return X, list(n)


@pytest.mark.parametrize("covariance_type", COVARIANCE_TYPES)
@pytest.mark.parametrize("nan", [False, True])
def test_inference_matches_enumeration(covariance_type, nan):
    model = _gaussian(covariance_type, seed=1, mask_zero=True)
    X, lengths = _data(2, nan=nan)
    _check_inference(model, X, lengths, _scipy_frames(model, X))


def _check_inference(model, X, lengths, frames):
    """Densities, log p(X), smoothed and filtered posteriors, Viterbi and k-best scores of ``model`` against
    enumeration over the chain with emissions ``frames`` (computed independently)."""
    assert np.allclose(model._compute_log_likelihood(X), frames, rtol=1e-12, atol=1e-12)
    total, post = model.score_samples(X, lengths)
    logp, states = model.decode(X, lengths)
    filtered = model.predict_proba(X, lengths, filtered=True)
    kbest = model.kbest_paths(X, lengths, k=3)
    want_total, start = 0.0, 0
    for s, n in enumerate(lengths):
        paths = _enumerate(model, frames[start:start + n])
        want_total += oracle.log_partition(paths)
        assert np.allclose(post[start:start + n], oracle.chain_node_marginals(paths, n, K), atol=1e-12)
        assert tuple(states[start:start + n]) in oracle.argmax_paths(paths, tol=1e-9)
        assert np.allclose(kbest[s][1], oracle.kbest_scores(paths, 3), rtol=1e-12)
        for t in range(n):  # filtered: the last node marginal of the prefix x₁..ₜ
            prefix = _enumerate(model, frames[start:start + t + 1])
            assert np.allclose(filtered[start + t], oracle.chain_node_marginals(prefix, t + 1, K)[t], atol=1e-12)
        start += n
    assert np.isclose(total, want_total, rtol=1e-12)
    assert np.isclose(model.score(X, lengths), want_total, rtol=1e-12)
    best = sum(oracle.max_score(_enumerate(model, frames[a:a + n])) for a, n in zip([0, lengths[0]], lengths))
    assert np.isclose(logp, best, rtol=1e-12)


def test_posterior_path_samples_follow_the_posterior():
    model = _gaussian("full", seed=3)
    X, _ = _data(4, n=(4,))
    probs = oracle.probabilities(_enumerate(model, _scipy_frames(model, X)))
    draws = model.sample_paths(X, n=3000, random_state=7)[0]
    counts = {}
    for row in draws:
        counts[tuple(row)] = counts.get(tuple(row), 0) + 1
    assert oracle.chi_square_pvalue(counts, probs) > 1e-3


def test_generative_samples_follow_the_model():
    model = _gaussian("diag", seed=5)
    pairs = {}
    for seed in range(3000):
        _, z = model.sample(2, random_state=seed)
        pairs[tuple(z)] = pairs.get(tuple(z), 0) + 1
    probs = {(i, j): model.startprob_[i] * model.transmat_[i, j] for i in range(K) for j in range(K)}
    assert oracle.chi_square_pvalue(pairs, probs) > 1e-3
    X, z = model.sample(20000, random_state=1)
    for k in range(K):
        assert np.allclose(X[z == k].mean(axis=0), model.means_[k], atol=0.1)


@pytest.mark.parametrize("covariance_type", COVARIANCE_TYPES)
@pytest.mark.parametrize("nan", [False, True])
def test_em_never_decreases_its_objective(covariance_type, nan):
    rng = np.random.default_rng(6)
    X = np.concatenate([rng.normal(0, 1, (60, D)), rng.normal(3, 1, (60, D)), rng.normal(-2, 0.5, (40, D))])
    if nan:
        X[rng.random(X.shape) < 0.1] = np.nan
    model = GaussianHMM(n_components=K, covariance_type=covariance_type, n_iter=15, tol=0, random_state=0,
                        transmat_prior=1.5, startprob_prior=2.0)
    model.fit(X, [80, 50, 30], sample_weight=[1.0, 2.0, 0.5])
    objective = np.array([h["log_posterior"] for h in model.history_])
    assert np.all(np.diff(objective) >= -1e-8 * np.abs(objective[1:])), objective


def test_sample_weights_equal_repeated_sequences():
    rng = np.random.default_rng(8)
    a, b = rng.normal(size=(30, D)), rng.normal(2, 1, size=(20, D))
    kw = dict(covariance_type="full", n_iter=3, tol=0, random_state=0)
    start = GaussianHMM(n_components=K, **kw).fit(np.concatenate([a, b]), [30, 20])  # shared initial parameters
    init = {n: getattr(start, n).copy() for n in ("startprob_", "transmat_", "means_")}

    def fitted(X, lengths, w=None):
        m = GaussianHMM(n_components=K, init_params="", **kw)
        for n, v in init.items():
            setattr(m, n, v.copy())
        m.covars_ = start._covars_.copy()
        return m.fit(X, lengths, sample_weight=w)

    weighted = fitted(np.concatenate([a, b]), [30, 20], [2.0, 1.0])
    repeated = fitted(np.concatenate([a, a, b]), [30, 30, 20])
    for name in ("startprob_", "transmat_", "means_", "covars_"):
        assert np.allclose(getattr(weighted, name), getattr(repeated, name), rtol=1e-10, atol=1e-12)


def test_transition_zeros_stay_zero_through_em():
    rng = np.random.default_rng(9)
    X = np.concatenate([rng.normal(0, 1, (50, 1)), rng.normal(4, 1, (50, 1)), rng.normal(8, 1, (50, 1))])
    model = GaussianHMM(n_components=3, init_params="mc", n_iter=20, random_state=0, transmat_prior=2.0)
    model.startprob_ = np.array([1.0, 0.0, 0.0])
    model.transmat_ = np.array([[0.9, 0.1, 0.0], [0.0, 0.9, 0.1], [0.0, 0.0, 1.0]])  # left-right
    model.fit(X)
    assert model.startprob_[1] == 0.0 and model.startprob_[2] == 0.0
    assert model.transmat_[0, 2] == 0.0 and (np.tril(model.transmat_, -1) == 0).all()


def test_poisson_and_categorical_match_enumeration():
    rng = np.random.default_rng(10)
    pois = PoissonHMM(n_components=K, init_params="")
    pois.startprob_ = rng.dirichlet(np.ones(K))
    pois.transmat_ = rng.dirichlet(np.ones(K), size=K)
    pois.lambdas_ = rng.uniform(0.5, 6.0, (K, 2))
    X = rng.poisson(3.0, size=(5, 2))
    frames = np.stack([stats.poisson(pois.lambdas_[k]).logpmf(X).sum(axis=1) for k in range(K)], axis=1)
    assert np.allclose(pois._compute_log_likelihood(X.astype(float)), frames, rtol=1e-12)
    paths = oracle.chain_paths(frames, np.log(pois.transmat_), np.log(pois.startprob_))
    assert np.isclose(pois.score(X), oracle.log_partition(paths), rtol=1e-12)
    cat = CategoricalHMM(n_components=K, init_params="")
    cat.startprob_ = pois.startprob_
    cat.transmat_ = pois.transmat_
    cat.emissionprob_ = rng.dirichlet(np.ones(4), size=K)
    S = rng.integers(0, 4, size=(5, 1))
    frames = np.log(cat.emissionprob_[:, S[:, 0]].T)
    paths = oracle.chain_paths(frames, np.log(cat.transmat_), np.log(cat.startprob_))
    assert np.isclose(cat.score(S), oracle.log_partition(paths), rtol=1e-12)
    assert np.allclose(cat.predict_proba(S), oracle.chain_node_marginals(paths, 5, K), atol=1e-12)


@pytest.mark.parametrize("model", [PoissonHMM(n_components=2, n_iter=20, tol=0, random_state=0, lambdas_prior=0.5),
                                   CategoricalHMM(n_components=2, n_iter=20, tol=0, random_state=0, emissionprob_prior=1.5)],
                         ids=["poisson", "categorical"])
def test_count_models_em_never_decreases(model):
    rng = np.random.default_rng(11)
    if isinstance(model, PoissonHMM):
        X = np.concatenate([rng.poisson(1, (80, 2)), rng.poisson(7, (80, 2))])
    else:
        X = np.concatenate([rng.integers(0, 2, (80, 1)), rng.integers(2, 5, (80, 1))])
    model.fit(X, [100, 60])
    objective = np.array([h["log_posterior"] for h in model.history_])
    assert np.all(np.diff(objective) >= -1e-8 * np.abs(objective[1:]))


def test_aic_bic_count_hmmlearn_parameters():
    model = _gaussian("full", seed=0)
    X, lengths = _data(1)
    n_params = (K - 1) + K * (K - 1) + K * D + K * D * (D + 1) // 2
    assert np.isclose(model.aic(X, lengths), -2 * model.score(X, lengths) + 2 * n_params)
    assert np.isclose(model.bic(X, lengths), -2 * model.score(X, lengths) + n_params * np.log(len(X)))


@pytest.mark.parametrize("call, match", [
    (lambda m: m.score(np.zeros((5, D)), [2, 2]), r"lengths sum to 4 but X has 5 samples"),
    (lambda m: m.score(np.zeros((5, D)), [5, 0]), r"lengths\[1\] = 0"),
    (lambda m: m.score(np.zeros((5, 3))), "X has 3 features but the model has 2"),
    (lambda m: m.score(np.array([[0.0, np.inf]])), r"X\[0, 1\] is an infinite value"),
    (lambda m: m.fit(np.zeros((4, D)), sample_weight=[-1.0]), r"sample_weight\[0\] = -1.0"),
    (lambda m: setattr(m, "covars_", -np.ones((K, D))), r"covars_\[0, 0\] = -1.0 must be positive"),
])
def test_bad_input_names_the_argument(call, match):
    with pytest.raises(ParameterError, match=match):
        call(_gaussian("diag"))


def test_non_positive_definite_covariance_is_refused():
    model = _gaussian("full")
    bad = model.covars_.copy()
    bad[1] = -np.eye(D)
    with pytest.raises(ParameterError, match="state 1 is not positive definite"):
        model.covars_ = bad
    with pytest.raises(ParameterError, match=r"X\[2, 0\] is NaN"):
        PoissonHMM(n_components=2).fit(np.array([[1.0], [2.0], [np.nan]]))
    with pytest.raises(ParameterError, match=r"X\[1, 0\] = 1.5 is not a non-negative integer"):
        PoissonHMM(n_components=2).fit(np.array([[1.0], [1.5]]))


# ---------------------------------------------------------------------------
# hmmlearn: the same parameters give the same numbers
# ---------------------------------------------------------------------------


def _hmmlearn():
    return pytest.importorskip("hmmlearn.hmm", reason="hmmlearn is not installed (pip install hmmlearn)")


@pytest.mark.parametrize("name", ["GaussianHMM", "GMMHMM", "PoissonHMM"])
def test_constructors_take_hmmlearns_keywords_and_defaults_and_no_others(name):
    """A user coming from hmmlearn passes the same keywords (none is deprecated or moved into an
    options object): the constructors' parameters are hmmlearn's, with its defaults."""
    import inspect
    import warnings

    from varorder.models.gmm_hmm import GMMHMM

    H = _hmmlearn()
    ours = {"GaussianHMM": GaussianHMM, "GMMHMM": GMMHMM, "PoissonHMM": PoissonHMM}[name]

    def defaults(cls):
        return {p.name: p.default for p in inspect.signature(cls).parameters.values()}

    assert defaults(ours) == defaults(getattr(H, name))
    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)
        ours(**{k: v for k, v in defaults(getattr(H, name)).items()})


@pytest.mark.parametrize("covariance_type", COVARIANCE_TYPES)
def test_same_numbers_as_hmmlearn(covariance_type):
    H = _hmmlearn()
    mine = _gaussian(covariance_type, seed=12)
    ref = H.GaussianHMM(K, covariance_type=covariance_type, init_params="", params="stmc", n_iter=1)
    ref.startprob_, ref.transmat_, ref.means_ = mine.startprob_.copy(), mine.transmat_.copy(), mine.means_.copy()
    ref.covars_ = mine._covars_.copy()
    rng = np.random.default_rng(13)
    X = rng.normal(size=(300, D)) * 2
    lengths = [100, 150, 50]
    assert np.isclose(mine.score(X, lengths), ref.score(X, lengths), rtol=1e-9, atol=0)
    assert np.allclose(mine.predict_proba(X, lengths), ref.predict_proba(X, lengths), rtol=1e-9, atol=1e-12)
    for algorithm in ("viterbi", "map"):
        a, b = mine.decode(X, lengths, algorithm=algorithm), ref.decode(X, lengths, algorithm=algorithm)
        assert np.isclose(a[0], b[0], rtol=1e-9) and np.array_equal(a[1], b[1])
    mine.set_params(n_iter=1)
    mine.fit(X, lengths)
    ref.fit(X, lengths)
    for name in ("startprob_", "transmat_", "means_"):
        assert np.allclose(getattr(mine, name), getattr(ref, name), rtol=1e-9, atol=1e-12), name
    want = ref._covars_[:, 0] if covariance_type == "spherical" else ref._covars_
    assert np.allclose(mine._covars_, want, rtol=1e-9, atol=1e-12)


def test_same_numbers_as_hmmlearn_for_counts():
    H = _hmmlearn()
    rng = np.random.default_rng(14)
    X = rng.poisson(3.0, size=(200, 2))
    mine, ref = PoissonHMM(n_components=K, init_params="", n_iter=1), H.PoissonHMM(K, init_params="", n_iter=1)
    sp, tm, lam = rng.dirichlet(np.ones(K)), rng.dirichlet(np.ones(K), size=K), rng.uniform(1, 5, (K, 2))
    for m in (mine, ref):
        m.startprob_, m.transmat_, m.lambdas_ = sp.copy(), tm.copy(), lam.copy()
    assert np.isclose(mine.score(X, [120, 80]), ref.score(X, [120, 80]), rtol=1e-9)
    assert np.allclose(mine.predict_proba(X, [120, 80]), ref.predict_proba(X, [120, 80]), rtol=1e-9, atol=1e-12)
    mine.fit(X, [120, 80])
    ref.fit(X, [120, 80])
    assert np.allclose(mine.lambdas_, ref.lambdas_, rtol=1e-9)
    assert np.allclose(mine.transmat_, ref.transmat_, rtol=1e-9)
    S = rng.integers(0, 4, size=(150, 1))
    mine, ref = CategoricalHMM(n_components=K, init_params="", n_iter=1), H.CategoricalHMM(K, init_params="", n_iter=1)
    B = rng.dirichlet(np.ones(4), size=K)
    for m in (mine, ref):
        m.startprob_, m.transmat_, m.emissionprob_ = sp.copy(), tm.copy(), B.copy()
    assert np.isclose(mine.score(S), ref.score(S), rtol=1e-9)
    assert np.array_equal(mine.predict(S), ref.predict(S))
    mine.fit(S)
    ref.fit(S)
    assert np.allclose(mine.emissionprob_, ref.emissionprob_, rtol=1e-9)


# ---------------------------------------------------------------------------
# GMMHMM
# ---------------------------------------------------------------------------


def _gmm(covariance_type, seed=15, M=2):
    from varorder.models.gmm_hmm import GMMHMM

    rng = np.random.default_rng(seed)
    model = GMMHMM(n_components=K, n_mix=M, covariance_type=covariance_type, init_params="", n_iter=1)
    model.startprob_, model.transmat_ = rng.dirichlet(np.ones(K)), rng.dirichlet(np.ones(K), size=K)
    model.weights_, model.means_ = rng.dirichlet(np.ones(M), size=K), rng.normal(size=(K, M, D)) * 2
    if covariance_type == "diag":
        model.covars_ = rng.uniform(0.5, 2, (K, M, D))
    elif covariance_type == "spherical":
        model.covars_ = rng.uniform(0.5, 2, (K, M))
    else:
        A = rng.normal(size=(K, M, D, D) if covariance_type == "full" else (K, D, D))
        model.covars_ = A @ np.swapaxes(A, -1, -2) + np.eye(D)
    return model


@pytest.mark.parametrize("covariance_type", COVARIANCE_TYPES)
def test_gmm_densities_match_scipy_and_enumeration(covariance_type):
    model = _gmm(covariance_type)
    X, lengths = _data(16, n=(4,))
    want = _gmm_scipy_frames(model, X)
    assert np.allclose(model._compute_log_likelihood(X), want, rtol=1e-12)
    paths = oracle.chain_paths(want, np.log(model.transmat_), np.log(model.startprob_))
    assert np.isclose(model.score(X), oracle.log_partition(paths), rtol=1e-12)


@pytest.mark.parametrize("covariance_type", COVARIANCE_TYPES)
def test_gmm_same_numbers_as_hmmlearn(covariance_type):
    H = _hmmlearn()
    mine = _gmm(covariance_type, seed=17)
    ref = H.GMMHMM(n_components=K, n_mix=2, covariance_type=covariance_type, init_params="", n_iter=1)
    for name in ("startprob_", "transmat_", "weights_", "means_", "covars_"):
        setattr(ref, name, getattr(mine, name).copy())
    X = np.random.default_rng(18).normal(size=(120, D)) * 2
    lengths = [70, 50]
    assert np.isclose(mine.score(X, lengths), ref.score(X, lengths), rtol=1e-9)
    assert np.allclose(mine.predict_proba(X, lengths), ref.predict_proba(X, lengths), rtol=1e-9, atol=1e-12)
    mine.fit(X, lengths)
    ref.fit(X, lengths)
    for name in ("startprob_", "transmat_", "weights_", "means_", "covars_"):
        assert np.allclose(getattr(mine, name), getattr(ref, name), rtol=1e-9, atol=1e-12), name


@pytest.mark.parametrize("lag", [0, 1, 3])
def test_fixed_lag_smoothing_matches_enumeration(lag):
    model = _gaussian("diag", seed=19, mask_zero=True)
    X, lengths = _data(20, n=(5, 3), nan=True)
    frames = _scipy_frames(model, X)
    got = model.predict_proba(X, lengths, lag=lag)
    start = 0
    for n in lengths:
        for t in range(n):
            horizon = min(t + lag, n - 1) + 1
            prefix = _enumerate(model, frames[start:start + horizon])
            assert np.allclose(got[start + t], oracle.chain_node_marginals(prefix, horizon, K)[t], atol=1e-12)
        start += n
    with pytest.raises(ParameterError, match="lag must be a non-negative integer"):
        model.predict_proba(X, lengths, lag=-1)


def _gmm_scipy_frames(model, X):
    """log Σₘ wₖₘ N(x_o; μₖₘ,o, Σₖₘ,oo) per row and state from SciPy: each component's marginal of the observed
    block (0 for a row without observed entries)."""
    return _marginal_frames(X, lambda k, seen, x: np.logaddexp.reduce(_gmm_component_logpdfs(model, k, seen, x)))


def _gmm_component_logpdfs(model, k, seen, x):
    """[log wₖₘ + log N(x; μₖₘ,seen, Σₖₘ,seen seen) for each m] from SciPy."""
    c = model.covars_
    out = []
    for m in range(model.n_mix):
        cov = {"full": lambda: c[k, m], "tied": lambda: c[k], "diag": lambda: np.diag(c[k, m]),
               "spherical": lambda: np.eye(D) * c[k, m]}[model.covariance_type]()
        out.append(np.log(model.weights_[k, m]) + stats.multivariate_normal(
            model.means_[k, m, seen], cov[np.ix_(seen, seen)]).logpdf(x))
    return out


@pytest.mark.parametrize("covariance_type", COVARIANCE_TYPES)
def test_gmm_with_nan_matches_enumeration(covariance_type):
    model = _gmm(covariance_type, seed=21)
    X, lengths = _data(22, nan=True)
    _check_inference(model, X, lengths, _gmm_scipy_frames(model, X))


def _ml_gmm(covariance_type, **kw):
    """A GMMHMM whose M-step is maximum likelihood: flat Dirichlet priors, no mean prior, and the covariance
    priors at which hmmlearn's update is the plain scatter over the mass (its defaults, except for spherical
    covariances, whose default prior has 2(ψ + 1) = −M in the denominator instead of −D)."""
    from varorder.models.gmm_hmm import GMMHMM

    prior = {"spherical": -D / 2.0 - 1.0, "diag": -1.5, "full": 0.0, "tied": 0.0}[covariance_type]
    weight = {"spherical": 0.0, "diag": 0.0, "full": -(D + 2.0), "tied": -(2 + D + 1.0)}[covariance_type]
    return GMMHMM(n_components=K, n_mix=2, covariance_type=covariance_type, covars_prior=prior,
                  covars_weight=weight, weights_prior=1.0, means_weight=0.0, startprob_prior=1.0,
                  transmat_prior=1.0, min_covar=1e-3, **kw)


@pytest.mark.parametrize("covariance_type", COVARIANCE_TYPES)
@pytest.mark.parametrize("nan", [False, True])
def test_gmm_em_never_decreases_the_likelihood(covariance_type, nan):
    """Generalised EM: with the priors flat (``_ml_gmm``) the objective is log p(X) — with NaN entries the
    likelihood of the observed entries — and hmmlearn's M-step (covariances from the scatter about the
    E-step's means, then the means) raises the expected complete-data log-likelihood in each block, so log
    p(X) never falls. (hmmlearn's default spherical prior, and priors in general, would make the objective a
    posterior whose prior terms the M-step does not maximise exactly for every type.)"""
    rng = np.random.default_rng(23)
    X = np.concatenate([rng.normal(0, 1, (60, D)), rng.normal(3, 1, (60, D)), rng.normal(-2, 0.5, (40, D))])
    if nan:
        X[rng.random(X.shape) < 0.15] = np.nan
        X[7] = np.nan  # a row with nothing observed
    model = _ml_gmm(covariance_type, n_iter=12, tol=0, random_state=0)
    model.fit(X, [80, 50, 30])
    ll = np.array([h["log_likelihood"] for h in model.history_])
    assert len(ll) == 12 and np.isfinite(ll).all()
    assert np.all(np.diff(ll) >= -1e-9 * np.abs(ll[1:])), ll
    assert np.isfinite(model.means_).all() and np.isfinite(model.covars_).all()


@pytest.mark.parametrize("covariance_type", ["diag", "full", "tied"])
def test_gmm_a_dimension_missing_everywhere_leaves_the_others_as_without_it(covariance_type):
    """Marginalising a dimension that no row observes gives, for the observed one, the fit of the model
    without it: the same posteriors, means and (co)variances of the observed block after two EM steps."""
    from varorder.models.gmm_hmm import GMMHMM

    both = _gmm(covariance_type, seed=24)
    both.set_params(n_iter=2, tol=0, init_params="")
    one = GMMHMM(n_components=K, n_mix=2, covariance_type=covariance_type, init_params="", n_iter=2, tol=0)
    one.startprob_, one.transmat_, one.weights_ = both.startprob_.copy(), both.transmat_.copy(), both.weights_.copy()
    one.means_ = both.means_[..., :1].copy()
    one.covars_ = both.covars_[..., :1, :1].copy() if covariance_type != "diag" else both.covars_[..., :1].copy()
    rng = np.random.default_rng(25)
    X = np.concatenate([rng.normal(-1, 1, (40, 1)), rng.normal(2, 1, (40, 1))])
    X2 = np.concatenate([X, np.full_like(X, np.nan)], axis=1)
    assert np.allclose(both.predict_proba(X2, [50, 30]), one.predict_proba(X, [50, 30]), rtol=1e-12, atol=1e-14)
    one.fit(X, [50, 30])
    both.fit(X2, [50, 30])
    for name in ("startprob_", "transmat_", "weights_"):
        assert np.allclose(getattr(both, name), getattr(one, name), rtol=1e-10), name
    assert np.allclose(both.means_[..., :1], one.means_, rtol=1e-10)
    block = both.covars_[..., :1, :1] if covariance_type != "diag" else both.covars_[..., :1]
    assert np.allclose(block, one.covars_, rtol=1e-10)


@pytest.mark.parametrize("covariance_type", COVARIANCE_TYPES)
def test_gmm_em_mean_step_with_nan_follows_the_likelihood_gradient(covariance_type):
    """The exact EM step for the means with missing entries satisfies Fisher's identity: the gradient of
    log p(X_observed) in μₖₘ (central differences of ``score``, itself checked against enumeration) is
    Nₖₘ Σₖₘ⁻¹ (μₖₘ' − μₖₘ) — per dimension Nₖₘd (μ' − μ) / σ² for spherical and diagonal components, Nₖₘd the
    mass of the rows observing d — with the masses from independent posteriors (smoothed state posteriors ×
    SciPy's component responsibilities). Wrong missing-data moments or denominators break it."""
    model = _gmm(covariance_type, seed=26)
    rng = np.random.default_rng(27)
    X = rng.normal(size=(14, D)) * 2
    X[rng.random(X.shape) < 0.3] = np.nan
    X[3] = np.nan
    lengths = [8, 6]
    old_means, covars = model.means_.copy(), model._matrices() if covariance_type in ("full", "tied") else None
    h = 1e-5
    plus = np.empty_like(old_means)
    minus = np.empty_like(old_means)
    for idx in np.ndindex(old_means.shape):
        for sign, out in ((1, plus), (-1, minus)):
            model.means_ = old_means.copy()
            model.means_[idx] += sign * h
            out[idx] = model.score(X, lengths)
    model.means_ = old_means.copy()
    grad = (plus - minus) / (2 * h)
    gamma = model.predict_proba(X, lengths)  # (N, K)
    c = model.covars_
    seen = ~np.isnan(X)
    mass = np.zeros(old_means.shape)  # Σₜ rₜₖₘ per observed dimension
    for t, x in enumerate(X):
        for k in range(K):
            if not seen[t].any():
                resp = model.weights_[k]
            else:
                logs = _gmm_component_logpdfs(model, k, seen[t], x[seen[t]])
                resp = np.exp(np.array(logs) - np.logaddexp.reduce(logs))
            if covariance_type in ("full", "tied"):
                mass[k] += gamma[t, k] * resp[:, None]
            else:
                mass[k] += gamma[t, k] * resp[:, None] * seen[t][None, :]
    model.set_params(n_iter=1, params="m")
    model.fit(X, lengths)
    step = model.means_ - old_means
    if covariance_type in ("full", "tied"):
        want = np.einsum("kmij,kmj->kmi", np.linalg.inv(covars), mass * step)
    else:
        var = c if covariance_type == "diag" else np.repeat(c[..., None], D, axis=-1)
        want = mass * step / var
    assert np.allclose(grad, want, rtol=1e-5, atol=1e-7), (grad, want)
