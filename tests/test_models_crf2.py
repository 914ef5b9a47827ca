"""The second-order CRF against enumeration over label paths, finite differences and the first-order CRF."""

import itertools

import numpy as np
import pytest

from varorder.io import schemes
from varorder.models.crf import CRF
from varorder.models.crf2 import PairStates, SecondOrderCRF, SecondOrderObjective
from varorder.models.features import FeatureIndexer

LABELS = schemes.scheme_labels(["A"], "BIO")  # B-A I-A O


def data(seed, n=5):
    rng = np.random.default_rng(seed)
    X, y = [], []
    for _ in range(n):
        m = int(rng.integers(1, 5))
        X.append([{"w": f"w{int(rng.integers(0, 4))}", "bias": 1.0} for _ in range(m)])
        y.append(schemes.encode([("A", 0, min(m, 2))] if rng.random() < 0.6 else [], m, "BIO"))
    return X, y


def path_score(E, T, U, start, end, path):
    K = T.shape[0]
    s = start[path[0]] + sum(E[t, p] for t, p in enumerate(path)) + end[path[-1]]
    for t in range(1, len(path)):
        i = path[t - 2] if t >= 2 else K
        s += T[path[t - 1], path[t]] + U[i, path[t - 1], path[t]]
    return s


def brute(E, T, U, start, end, keep=lambda p: True):
    n, K = E.shape
    out = []
    for p in itertools.product(range(K), repeat=n):
        out.append((p, path_score(E, T, U, start, end, p) if keep(p) else -np.inf))
    return out


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("constraints", [None, "BIO"])
def test_log_z_gradient_and_decoding_equal_enumeration(seed, constraints):
    rng = np.random.default_rng(seed)
    X, y = data(seed)
    indexer = FeatureIndexer().fit(X)
    matrix, lengths = indexer.transform(X)
    K = len(LABELS)
    gold = np.array([LABELS.index(t) for s in y for t in s])
    if constraints:
        allowed, start_ok, _ = schemes.allowed_transitions(LABELS, constraints)
        states = PairStates(K, allowed, start_ok)
    else:
        states = PairStates(K)
    objective = SecondOrderObjective(matrix, lengths, gold, K, states)
    theta = rng.normal(scale=0.7, size=objective.n_params)
    f, g = objective(theta)
    W, T, start, end, U = objective.unpack(theta)
    E = np.asarray(matrix @ W)
    keep = (lambda p: schemes.is_valid([LABELS[i] for i in p], "BIO")) if constraints else (lambda p: True)
    expected, row = 0.0, 0
    for n, labels in zip(lengths.tolist(), y):
        paths = brute(E[row:row + n], T, U, start, end, keep)
        scores = np.array([s for _, s in paths])
        logz = np.logaddexp.reduce(scores)
        expected += logz - path_score(E[row:row + n], T, U, start, end, [LABELS.index(t) for t in labels])
        row += n
    assert f == pytest.approx(expected, rel=1e-9)
    eps = 1e-6
    for i in rng.choice(theta.size, 30, replace=False):
        step = np.zeros_like(theta)
        step[i] = eps
        assert g[i] == pytest.approx((objective(theta + step)[0] - objective(theta - step)[0]) / (2 * eps),
                                     abs=1e-5)
    # the estimator's decoding with these weights
    crf = SecondOrderCRF(constraints=constraints, max_iterations=1).fit(X, y)
    crf.classes_ = LABELS
    crf.feature_names_ = indexer.names_
    crf._indexer = indexer
    crf.n_features_in_ = len(indexer.names_)
    crf._set_params(theta, K)
    xs = [{"w": f"w{int(i)}", "bias": 1.0} for i in rng.integers(0, 4, size=4)]
    Ex = np.asarray(indexer.transform([xs])[0] @ W)
    paths = brute(Ex, T, U, start, end, keep)
    scores = np.array([s for _, s in paths])
    logz = np.logaddexp.reduce(scores)
    best = paths[int(np.argmax(scores))][0]
    assert crf.predict([xs])[0] == [LABELS[i] for i in best]
    taggings, log_p = crf.predict_kbest([xs], k=3)
    np.testing.assert_allclose(log_p[0], np.sort(scores[np.isfinite(scores)])[::-1][:3] - logz, atol=1e-9)
    node = np.zeros((4, K))
    for (p, s) in paths:
        if np.isfinite(s):
            node[np.arange(4), p] += np.exp(s - logz)
    np.testing.assert_allclose(crf.predict_marginals([xs])[0], node, atol=1e-9)
    # scheme constraints at predict (unconstrained model): the best valid path
    valid = [(p, s if schemes.is_valid([LABELS[i] for i in p], "BIO") else -np.inf) for p, s in paths]
    best_valid = max(valid, key=lambda ps: ps[1])[0]
    assert crf.predict([xs], constraints="BIO")[0] == [LABELS[i] for i in best_valid]


def test_zero_second_order_weights_equal_the_first_order_crf():
    X, y = data(5, 20)
    first = CRF(max_iterations=40).fit(X, y)
    second = SecondOrderCRF(max_iterations=1).fit(X, y)
    second._set_params(np.concatenate([np.concatenate([first.emission_weights_.ravel(),
                                                       first.transition_weights_.ravel(), first.start_weights_,
                                                       first.end_weights_]),
                                       np.zeros((len(LABELS) + 1) * len(LABELS) ** 2)]), len(LABELS))
    assert second.predict(X) == first.predict(X)
    for a, b in zip(second.predict_marginals(X), first.predict_marginals(X)):
        np.testing.assert_allclose(a, b, atol=1e-10)
    np.testing.assert_allclose(second.predict_kbest(X, 3)[1][0], first.predict_kbest(X, 3)[1][0], atol=1e-10)


def test_training_save_load(tmp_path):
    X, y = data(7, 30)
    crf = SecondOrderCRF(constraints="BIO", max_iterations=50).fit(X, y)
    assert crf.score(X, y) > 0.9
    path = tmp_path / "crf2.npz"
    crf.save(path)
    again = SecondOrderCRF.load(path)
    assert again.predict(X) == crf.predict(X)
    for tags in crf.predict(X):
        schemes.validate(tags, "BIO")
    with pytest.raises(ValueError, match="constraints forbid"):
        SecondOrderCRF(constraints="BIO").fit([[{"w": "a"}]], [["I-A"]])


def test_c2_second_order_penalises_only_the_pair_weights():
    X, y = data(8, 30)
    crf = SecondOrderCRF(constraints="BIO", max_iterations=1, c2=0.1, c2_second_order=2.5)
    crf._check_params()
    crf.classes_ = LABELS
    indexer = FeatureIndexer()
    matrix, lengths = indexer.fit_transform(X, csr=False)
    crf.n_features_in_ = indexer.n_features
    gold = np.array([LABELS.index(t) for tags in y for t in tags])
    penalised = crf._objective(matrix, lengths, gold, len(LABELS))
    plain = SecondOrderObjective(matrix, lengths, gold, len(LABELS), crf._states)
    rng = np.random.default_rng(8)
    theta = rng.normal(size=plain.n_params)
    base = (indexer.n_features + len(LABELS) + 2) * len(LABELS)
    f, g = penalised(theta)
    f0, g0 = plain(theta)
    U = theta[base:]
    assert f == pytest.approx(f0 + 2.4 * float(U @ U), rel=1e-12)
    np.testing.assert_allclose(g[:base], g0[:base], rtol=1e-12)
    np.testing.assert_allclose(g[base:], g0[base:] + 4.8 * U, rtol=1e-12, atol=1e-12)
    strong = SecondOrderCRF(constraints="BIO", max_iterations=30, c2_second_order=1e6).fit(X, y)
    weak = SecondOrderCRF(constraints="BIO", max_iterations=30).fit(X, y)
    assert np.abs(strong.second_order_weights_).max() < 1e-3 < np.abs(weak.second_order_weights_).max()
