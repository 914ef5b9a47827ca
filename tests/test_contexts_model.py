"""Reified context model training: gradients vs finite differences, learning, confidence, persistence."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from varorder import lattice as lt
from varorder.contexts.model import ReifiedContextModel
from varorder.testing import oracle


def _random_model(seed, mode="rcms", coverage="fixed", backoff=False, V=3, n=3, D=2, B=2):
    rng = np.random.default_rng(seed)
    m = ReifiedContextModel(V, order=n, num_contexts=B, mode=mode, coverage=coverage, backoff=backoff)
    m._init_state(D)
    m.ngram_weights_ = rng.normal(size=m.ngram_weights_.shape)
    m.observation_weights_ = rng.normal(size=m.observation_weights_.shape)
    if coverage == "learned":
        m.coverage_weight_ = float(rng.normal())
    return m, rng


def _loglik(m, x, y):
    return m.sequence_gradient(x, y).log_likelihood


@pytest.mark.parametrize("mode,coverage,backoff", [("rcms", "fixed", False), ("rcms", "fixed", True),
                                                   ("beam", "fixed", False), ("beam", "learned", False),
                                                   ("rcms", "learned", True)])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_gradient_matches_finite_differences(mode, coverage, backoff, seed):
    m, rng = _random_model(seed, mode, coverage, backoff)
    L = 5
    x = rng.normal(size=(L, 2))
    y = rng.integers(0, 3, size=L)
    g = m.sequence_gradient(x, y)
    assert np.isfinite(g.log_likelihood)
    eps = 1e-6
    for _ in range(3):  # random directions through each block
        d_ngram = rng.normal(size=m.ngram_weights_.shape)
        d_obs = rng.normal(size=m.observation_weights_.shape)
        d_cov = float(rng.normal()) if coverage == "learned" else 0.0
        analytic = -(g.ngram @ d_ngram + (g.observation * d_obs).sum() + g.coverage * d_cov)

        def shifted(t):
            m2, _ = _random_model(seed, mode, coverage, backoff)
            m2.ngram_weights_ = m.ngram_weights_ + t * d_ngram
            m2.observation_weights_ = m.observation_weights_ + t * d_obs
            m2.coverage_weight_ = m.coverage_weight_ + t * d_cov
            return _loglik(m2, x, y)

        numeric = (shifted(eps) - shifted(-eps)) / (2 * eps)
        assert analytic == pytest.approx(numeric, rel=1e-5, abs=1e-6)


def test_confidence_is_the_output_probability_and_exact_with_enough_contexts():
    m, rng = _random_model(3, B=9)  # 9 = 3^(3-1): exact
    xs = [rng.normal(size=(L, 2)) for L in (1, 3, 4)]
    preds, conf = m.predict_with_confidence(xs)
    for x, pred, c in zip(xs, preds, conf):
        cl = m.context_lattice(x)
        paths = oracle.lattice_paths(cl.lattice)
        probs = {tuple(cl.lattice.arc_label[list(p)]): q for p, q in oracle.probabilities(paths).items()}
        best = max(probs, key=probs.get)
        assert tuple(pred) == best
        assert c == pytest.approx(probs[best], rel=1e-9)
        assert len(probs) == 3 ** x.shape[0]


def _synthetic_task(seed, n_seq=120, V=4, D=6):
    """Noisy observations of sequences from a sparse second-order chain: context matters."""
    rng = np.random.default_rng(seed)
    proto = rng.normal(scale=1.0, size=(V, D))
    nxt = rng.integers(0, V, size=(V, V))  # y_i is usually nxt[y_{i-2}, y_{i-1}]
    xs, ys = [], []
    for _ in range(n_seq):
        L = int(rng.integers(3, 8))
        y = list(rng.integers(0, V, size=2))
        while len(y) < L:
            y.append(nxt[y[-2], y[-1]] if rng.random() < 0.9 else int(rng.integers(0, V)))
        y = np.array(y[:L])
        xs.append(proto[y] + rng.normal(scale=1.2, size=(L, D)))
        ys.append(y)
    return xs, ys


@pytest.mark.parametrize("mode", ["rcms", "beam"])
def test_training_raises_likelihood_and_accuracy(mode):
    xs, ys = _synthetic_task(0)
    train_x, train_y, test_x, test_y = xs[:80], ys[:80], xs[80:], ys[80:]
    m = ReifiedContextModel(4, order=3, num_contexts=4, mode=mode, epochs=6, batch_size=4, track_every=20)
    m.fit(train_x, train_y)
    assert m.history_[-1]["train_log_likelihood"] > m.history_[0]["train_log_likelihood"]
    pred = m.predict(test_x)
    acc = np.mean(np.concatenate([p == y for p, y in zip(pred, test_y)]))
    assert acc > 0.5  # chance is 0.25
    # RCMS contexts fix at most n − 1 = 2 symbols; beam contexts are whole prefixes (L ≤ 7)
    top = 2 if mode == "rcms" else 6
    assert m.context_length_trace_ and all(0 <= v <= top for _, v in m.context_length_trace_)


def test_save_load_round_trip(tmp_path):
    m, rng = _random_model(5, mode="beam", B=3)
    path = tmp_path / "m.npz"
    m.save(path)
    back = ReifiedContextModel.load(path)
    x = rng.normal(size=(4, 2))
    assert back.coverage_weight_ == -np.inf
    assert lt.log_partition(back.context_lattice(x).lattice) == lt.log_partition(m.context_lattice(x).lattice)
    np.save(tmp_path / "bad.npy", np.zeros(2))
    with pytest.raises(ValueError, match="bad"):
        (tmp_path / "bad.npz").write_bytes((tmp_path / "bad.npy").read_bytes())
        ReifiedContextModel.load(tmp_path / "bad.npz")


def test_bad_training_input_is_rejected():
    m = ReifiedContextModel(3, order=3, mode="nope")
    with pytest.raises(ValueError, match="mode"):
        m.fit([np.zeros((2, 2))], [np.zeros(2, int)])
    m = ReifiedContextModel(3, order=3)
    with pytest.raises(ValueError, match=r"observations\[1\]"):
        m.fit([np.zeros((2, 2)), np.zeros((2, 3))], [np.zeros(2, int)] * 2)
    m = ReifiedContextModel(3, order=3)
    with pytest.raises(ValueError, match="labels"):
        m.fit([np.zeros((2, 2))], [np.array([0, 5])])
