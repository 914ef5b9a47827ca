"""Reified context model training: gradients vs finite differences, learning, confidence, persistence."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from varorder import lattice as lt
from varorder.contexts.model import ReifiedContextModel
from varorder.testing import oracle


def _random_model(seed, mode="rcms", coverage="fixed", backoff=False, V=3, n=3, D=2, B=2, **params):
    rng = np.random.default_rng(seed)
    m = ReifiedContextModel(num_labels=V, order=n, num_contexts=B, mode=mode, coverage=coverage, backoff=backoff, **params)
    m._init_state(D)
    m.ngram_weights_ = rng.normal(size=m.ngram_weights_.shape)
    m.observation_weights_ = rng.normal(size=m.observation_weights_.shape)
    if coverage == "learned":
        m.coverage_weight_ = float(rng.normal())
    return m, rng


def _loglik(m, x, y):
    return m.sequence_gradient(x, y).log_likelihood


@pytest.mark.parametrize("mode,coverage,backoff,cap", [("rcms", "fixed", False, None), ("rcms", "fixed", True, None),
                                                       ("rcms", "fixed", False, 2), ("beam", "fixed", False, None),
                                                       ("beam", "learned", False, None), ("rcms", "learned", True, 2)])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_gradient_matches_finite_differences(mode, coverage, backoff, cap, seed):
    m, rng = _random_model(seed, mode, coverage, backoff, max_context=cap)
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
            m2, _ = _random_model(seed, mode, coverage, backoff, max_context=cap)
            m2.ngram_weights_ = m.ngram_weights_ + t * d_ngram
            m2.observation_weights_ = m.observation_weights_ + t * d_obs
            m2.coverage_weight_ = m.coverage_weight_ + t * d_cov
            return _loglik(m2, x, y)

        numeric = (shifted(eps) - shifted(-eps)) / (2 * eps)
        assert analytic == pytest.approx(numeric, rel=1e-5, abs=1e-6)


def test_confidence_is_the_output_probability_and_exact_with_enough_contexts():
    m, rng = _random_model(3, B=9, max_context=2)  # 9 = 3^(3-1) contexts of n − 1 symbols: exact
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


@pytest.mark.parametrize("mode,cap,batch", [("rcms", None, 1), ("rcms", 2, 4), ("beam", None, 1)])
def test_training_raises_likelihood_and_accuracy(mode, cap, batch):
    xs, ys = _synthetic_task(0)
    train_x, train_y, test_x, test_y = xs[:80], ys[:80], xs[80:], ys[80:]
    m = ReifiedContextModel(num_labels=4, order=3, num_contexts=4, mode=mode, epochs=6, batch_size=batch, track_every=20,
                            max_context=cap)
    m.fit(train_x, train_y)
    assert m.history_[-1]["train_log_likelihood"] > m.history_[0]["train_log_likelihood"]
    pred = m.predict(test_x)
    acc = np.mean(np.concatenate([p == y for p, y in zip(pred, test_y)]))
    assert acc > 0.5  # chance is 0.25
    # capped RCMS contexts fix at most n − 1 = 2 symbols; others at most the whole prefix (L ≤ 7)
    top = 6 if cap is None else cap
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
    m = ReifiedContextModel(num_labels=3, order=3, mode="nope")
    with pytest.raises(ValueError, match="mode"):
        m.fit([np.zeros((2, 2))], [np.zeros(2, int)])
    m = ReifiedContextModel(num_labels=3, order=3)
    with pytest.raises(ValueError, match=r"observations\[1\]"):
        m.fit([np.zeros((2, 2)), np.zeros((2, 3))], [np.zeros(2, int)] * 2)
    m = ReifiedContextModel(num_labels=3, order=3)
    with pytest.raises(ValueError, match="labels"):
        m.fit([np.zeros((2, 2))], [np.array([0, 5])])


def _prefix_nodes(cl, prefix):
    """Node reached by following ``prefix`` from the start, and the prefix's path score."""
    lat, node, score = cl.lattice, 0, 0.0
    for y in prefix:
        out = lat.out_arcs[lat.out_offsets[node]:lat.out_offsets[node + 1]]
        arc = out[lat.arc_label[out] == y][0]
        score += lat.arc_weight[arc]
        node = int(lat.arc_target[arc])
    return node, score


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
@pytest.mark.parametrize("mode", ["rcms", "beam"])
def test_context_length_is_weighted_by_partial_model_mass(seed, mode):
    """Fig. 6's statistic from its definition: each context's mass under qⁱ, by enumerating prefixes y_{1:i}."""
    m, rng = _random_model(seed, mode=mode, B=3)
    x = rng.normal(size=(5, 2))
    cl = m.context_lattice(x)
    expected = []
    for i in range(1, 5):
        mass = {}
        for prefix in itertools.product(range(3), repeat=i):
            node, score = _prefix_nodes(cl, prefix)
            mass[node] = mass.get(node, 0.0) + np.exp(score)
        total = sum(mass.values())
        expected.append(sum(w * min(int(cl.node_length[v]), i) for v, w in mass.items()) / total)
    assert m._context_length(cl) == pytest.approx(np.mean(expected), rel=1e-9)
    if mode == "rcms":  # beam contexts are all whole prefixes: any weighting gives i
        node, _ = lt.marginals(cl.lattice)
        assert m._context_length(cl, node) != pytest.approx(np.mean(expected), rel=1e-6)  # a different statistic


def test_log_probability_matches_enumeration_and_beam_loses_outputs():
    for mode in ("rcms", "beam"):
        m, rng = _random_model(4, mode=mode, B=2)
        x = rng.normal(size=(4, 2))
        scored = {}
        for y in itertools.product(range(3), repeat=4):
            _, score = _prefix_nodes(m.context_lattice(x), y)
            scored[y] = score
        log_z = oracle.log_partition(list(scored.items()))
        lost = 0
        for y, score in scored.items():
            assert m.log_probability(x, np.array(y)) == pytest.approx(score - log_z, abs=1e-9)
            lost += score == -np.inf
        assert (lost == 0) if mode == "rcms" else (lost == 81 - 2)


def test_off_beam_skip_makes_no_update_and_force_does():
    m, rng = _random_model(6, mode="beam", B=1, off_beam="skip")
    x = rng.normal(size=(5, 2))
    pred = m.predict([x])[0]
    gold = pred.copy()
    gold[0] = (gold[0] + 1) % 3  # the beam of one never holds this output
    skipped = m.sequence_gradient(x, gold)
    assert skipped.log_likelihood == -np.inf and skipped.ngram_indices.size == 0 and not skipped.observation.any()
    m.off_beam = "force"
    forced = m.sequence_gradient(x, gold)
    assert np.isfinite(forced.log_likelihood) and np.abs(forced.ngram).sum() > 0


def test_per_example_updates_equal_dense_adagrad_steps():
    """batch_size=1 with sparse n-gram steps is plain per-example AdaGrad on the dense gradient."""
    from varorder.models.optim import AdaGrad

    xs, ys = _synthetic_task(1, n_seq=6)
    m = ReifiedContextModel(num_labels=4, order=3, num_contexts=3, epochs=1, batch_size=1, seed=0).fit(xs, ys)
    ref = ReifiedContextModel(num_labels=4, order=3, num_contexts=3, epochs=1, batch_size=1, seed=0)
    ref._init_state(xs[0].shape[1])
    opts = [AdaGrad(0.2, 1e-4), AdaGrad(0.2, 1e-4)]
    for k in np.random.default_rng(0).permutation(len(xs)):
        g = ref.sequence_gradient(xs[k], ys[k])
        opts[0].step(ref.ngram_weights_, g.ngram)
        opts[1].step(ref.observation_weights_, g.observation)
    np.testing.assert_allclose(m.ngram_weights_, ref.ngram_weights_, atol=1e-12)
    np.testing.assert_allclose(m.observation_weights_, ref.observation_weights_, atol=1e-12)


def test_options_are_validated_and_saved(tmp_path):
    for bad in ({"max_context": 1}, {"off_beam": "late"}, {"context_mass": "final"}):
        with pytest.raises(ValueError, match=next(iter(bad))):
            ReifiedContextModel(num_labels=3, order=3, **bad).fit([np.zeros((2, 2))], [np.zeros(2, int)])
    m, rng = _random_model(2, max_context=3)
    m.save(tmp_path / "m.npz")
    back = ReifiedContextModel.load(tmp_path / "m.npz")
    assert back.options.max_context == 3 and back.batch_size == 1
    x = rng.normal(size=(6, 2))
    assert lt.log_partition(back.context_lattice(x).lattice) == lt.log_partition(m.context_lattice(x).lattice)


def test_early_update_is_the_forced_objective_on_the_prefix_where_the_gold_fell_off():
    m, rng = _random_model(6, mode="beam", B=1, off_beam="early")
    x = rng.normal(size=(5, 2))
    gold = m.predict([x])[0].copy()
    same = m.sequence_gradient(x, gold)  # the gold stays on the beam: the usual update
    m.off_beam = "force"
    np.testing.assert_allclose(same.ngram, m.sequence_gradient(x, gold).ngram)
    gold[2] = (gold[2] + 1) % 3  # now the beam of one loses the gold at position 3 (or earlier)
    m.off_beam = "early"
    early = m.sequence_gradient(x, gold)
    cl = m.context_lattice(x)
    t = int(np.flatnonzero(cl.lattice.arc_weight[cl.path_arcs(gold)] == -np.inf)[0]) + 1
    assert t <= 3
    m.off_beam = "force"
    prefix = m.sequence_gradient(x[:t], gold[:t])
    assert early.log_likelihood == pytest.approx(prefix.log_likelihood)
    np.testing.assert_allclose(early.ngram, prefix.ngram)
    np.testing.assert_allclose(early.observation, prefix.observation)
