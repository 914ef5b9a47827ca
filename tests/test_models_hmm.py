"""HMM: closed-form supervised counts, Baum–Welch monotonicity, decoding vs brute force, persistence."""

from __future__ import annotations

import itertools
from collections import Counter

import numpy as np
import pytest
from scipy.special import logsumexp

from varorder.models.hmm import HMM


def _sample_hmm(rng, n_seq, K=3, V=5, max_len=8):
    pi = rng.dirichlet(np.ones(K))
    A = rng.dirichlet(np.ones(K) * 0.5, size=K)
    B = rng.dirichlet(np.ones(V) * 0.5, size=K)
    X, Y = [], []
    for _ in range(n_seq):
        n = int(rng.integers(1, max_len + 1))
        y = [int(rng.choice(K, p=pi))]
        for _ in range(n - 1):
            y.append(int(rng.choice(K, p=A[y[-1]])))
        X.append([f"s{int(rng.choice(V, p=B[s]))}" for s in y])
        Y.append(y)
    return X, Y


def test_supervised_estimate_equals_smoothed_counts():
    rng = np.random.default_rng(0)
    X, Y = _sample_hmm(rng, 40)
    alpha_s, alpha_t, alpha_e = 0.5, 0.25, 0.1
    model = HMM(alpha_start=alpha_s, alpha_transition=alpha_t, alpha_emission=alpha_e).fit(X, Y)
    states, symbols = model.classes_, model.symbols_
    K, V = len(states), len(symbols)
    first = Counter(y[0] for y in Y)
    pairs = Counter((a, b) for y in Y for a, b in zip(y, y[1:]))
    emits = Counter((s, x) for xs, ys in zip(X, Y) for x, s in zip(xs, ys))
    for i, si in enumerate(states):
        assert np.exp(model.log_start_[i]) == pytest.approx((first[si] + alpha_s) / (len(Y) + K * alpha_s))
        row_total = sum(pairs[(si, sj)] for sj in states)
        for j, sj in enumerate(states):
            assert np.exp(model.log_transitions_[i, j]) == pytest.approx(
                (pairs[(si, sj)] + alpha_t) / (row_total + K * alpha_t))
        emit_total = sum(emits[(si, v)] for v in symbols)
        for v_index, v in enumerate(symbols):
            assert np.exp(model.log_emissions_[i, v_index]) == pytest.approx(
                (emits[(si, v)] + alpha_e) / (emit_total + (V + 1) * alpha_e))
        # the unseen-symbol slot
        assert np.exp(model.log_emissions_[i, -1]) == pytest.approx(alpha_e / (emit_total + (V + 1) * alpha_e))


def _brute_force(model, x):
    ids = [model._symbol_index.get(v, len(model.symbols_)) for v in x]
    K = len(model.classes_)
    paths = list(itertools.product(range(K), repeat=len(x)))
    scores = np.array([model.log_start_[p[0]] + sum(model.log_transitions_[a, b] for a, b in zip(p, p[1:]))
                       + sum(model.log_emissions_[s, v] for s, v in zip(p, ids)) for p in paths])
    return paths, scores


def test_likelihood_and_decoders_match_brute_force():
    rng = np.random.default_rng(1)
    X, Y = _sample_hmm(rng, 30, max_len=5)
    model = HMM(alpha_emission=0.3).fit(X, Y)
    test = X[:6] + [["s0", "never-seen", "s1"]]
    ll = model.log_likelihood(test)
    viterbi = model.predict(test)
    posterior = model.predict(test, algorithm="posterior")
    marginals = model.predict_marginals(test)
    for x, got_ll, best, post, node in zip(test, ll, viterbi, posterior, marginals):
        paths, scores = _brute_force(model, x)
        assert got_ll == pytest.approx(logsumexp(scores), rel=1e-10)
        assert tuple(model.classes_.index(s) for s in best) == paths[int(np.argmax(scores))]
        expected = np.zeros((len(x), len(model.classes_)))
        for p, sc in zip(paths, scores):
            expected[np.arange(len(x)), p] += np.exp(sc - logsumexp(scores))
        np.testing.assert_allclose(node, expected, atol=1e-10)
        assert [model.classes_.index(s) for s in post] == list(expected.argmax(axis=1))


@pytest.mark.parametrize("alpha", [0.0, 0.5])
@pytest.mark.parametrize("seed", [2, 3])
def test_baum_welch_never_decreases_objective(alpha, seed):
    rng = np.random.default_rng(seed)
    X, _ = _sample_hmm(rng, 60, K=3, V=6, max_len=10)
    model = HMM(n_states=3, alpha_start=alpha, alpha_transition=alpha, alpha_emission=alpha,
                max_iterations=40, tol=0.0, random_state=seed).fit(X)
    key = "log_likelihood" if alpha == 0 else "log_posterior"
    values = np.array([h[key] for h in model.history_])
    assert len(values) == 40
    assert np.all(np.diff(values) >= -1e-8 * np.abs(values[1:]))
    assert values[-1] > values[0] + 1.0  # EM made real progress
    # the recorded log-likelihood is that of the parameters before the final M-step, so
    # the fitted model's likelihood is at least the last recorded one
    if alpha == 0:
        assert model.log_likelihood(X).sum() >= values[-1] - 1e-8 * abs(values[-1])


def test_save_load_round_trip(tmp_path):
    rng = np.random.default_rng(4)
    X, Y = _sample_hmm(rng, 20)
    model = HMM().fit(X, Y)
    model.save(tmp_path / "hmm.npz")
    loaded = HMM.load(tmp_path / "hmm.npz")
    assert loaded.predict(X) == model.predict(X)
    np.testing.assert_array_equal(loaded.log_likelihood(X), model.log_likelihood(X))


def test_bad_arguments():
    with pytest.raises(ValueError, match="n_states"):
        HMM().fit([["a"]])
    with pytest.raises(ValueError, match="alpha_emission"):
        HMM(alpha_emission=-1).fit([["a"]], [[0]])
    with pytest.raises(ValueError, match="algorithm"):
        HMM().fit([["a"]], [[0]]).predict([["a"]], algorithm="beam")
