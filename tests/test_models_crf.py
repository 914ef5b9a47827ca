"""CRF: gradient vs finite differences, recovery of a known CRF, persistence, input handling."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from varorder import chain
from varorder.models.crf import CRF, ChainObjective
from varorder.models.features import FeatureIndexer, design_matrix


def _random_dense_problem(rng, n_seq=6, n_features=4, K=3, max_len=6):
    X = [rng.normal(size=(n, n_features)) for n in rng.integers(1, max_len + 1, size=n_seq)]
    y = [rng.integers(0, K, size=len(x)) for x in X]
    return X, y


def _finite_difference(fun, theta, eps=1e-6):
    out = np.empty_like(theta)
    for i in range(theta.size):
        step = np.zeros_like(theta)
        step[i] = eps
        out[i] = (fun(theta + step)[0] - fun(theta - step)[0]) / (2 * eps)
    return out


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_gradient_matches_finite_differences(seed):
    rng = np.random.default_rng(seed)
    K = int(rng.integers(2, 5))
    X, y = _random_dense_problem(rng, K=K)
    matrix, lengths = design_matrix(X, None)
    # A tiny chunk budget forces several padded chunks, exercising the flat ↔ padded maps.
    objective = ChainObjective(matrix, lengths, np.concatenate(y), K, max_cells=8)
    theta = rng.normal(size=objective.n_params)
    _, grad = objective(theta)
    np.testing.assert_allclose(grad, _finite_difference(objective, theta), atol=1e-5, rtol=1e-5)


def test_objective_equals_brute_force_nll():
    rng = np.random.default_rng(5)
    X, y = _random_dense_problem(rng, n_seq=4, K=3)
    matrix, lengths = design_matrix(X, None)
    objective = ChainObjective(matrix, lengths, np.concatenate(y), 3)
    theta = rng.normal(size=objective.n_params)
    W, T, start, end = objective.unpack(theta)
    expected = 0.0
    for x, labels in zip(X, y):
        E = (x @ W)[None]
        logz = chain.log_partition(E, T, start, end)[0]
        expected += logz - chain.path_score(E, T, labels[None], start, end)[0]
    assert objective(theta)[0] == pytest.approx(expected, rel=1e-10)


def test_sparse_feature_dict_gradient():
    # Dict features (names, numeric and string values) go through the indexer into CSR.
    rng = np.random.default_rng(3)
    words = ["a", "b", "c", "d"]
    X = [[{"w": str(rng.choice(words)), "len": float(rng.integers(1, 4)), "bias": 1.0}
          for _ in range(int(n))] for n in rng.integers(1, 5, size=5)]
    y = [list(rng.choice(["N", "V"], size=len(s))) for s in X]
    indexer = FeatureIndexer().fit(X)
    matrix, lengths = indexer.transform(X)
    assert matrix.shape[1] == len({f"w:{it['w']}" for s in X for it in s}) + 2
    gold = np.array([{"N": 0, "V": 1}[t] for s in y for t in s])
    objective = ChainObjective(matrix, lengths, gold, 2)
    theta = rng.normal(size=objective.n_params)
    np.testing.assert_allclose(objective(theta)[1], _finite_difference(objective, theta), atol=1e-5, rtol=1e-5)


def _known_crf_data(rng, n_seq, length, W, T, start, end):
    """Sequences drawn exactly from the CRF p(y | x) with Gaussian feature vectors x."""
    F, K = W.shape
    X = rng.normal(size=(n_seq, length, F))
    E = X @ W
    paths = chain.sample(E, T, start, end, n=1, seed=int(rng.integers(1 << 31)))[:, 0, :]
    return list(X), list(paths), E


def test_training_recovers_bayes_optimal_accuracy():
    rng = np.random.default_rng(11)
    F, K, length = 5, 3, 8
    W = rng.normal(scale=1.2, size=(F, K))
    T = rng.normal(scale=1.5, size=(K, K))
    start, end = rng.normal(size=K), rng.normal(size=K)
    X_train, y_train, _ = _known_crf_data(rng, 600, length, W, T, start, end)
    X_test, y_test, E_test = _known_crf_data(rng, 600, length, W, T, start, end)
    gold = np.array(y_test)
    node, _ = chain.marginals(E_test, T, start, end, edges=False)
    bayes_accuracy = (node.argmax(axis=2) == gold).mean()  # max-marginal decoding is Bayes-optimal per token
    model = CRF(c2=0.01).fit(X_train, y_train)
    learned = np.mean(np.array(model.predict(X_test)) == gold)
    marginal_decoded = np.mean(np.stack([m.argmax(1) for m in model.predict_marginals(X_test)]) == gold)
    assert bayes_accuracy > 0.6  # the task is learnable, not trivial
    assert learned >= bayes_accuracy - 0.03
    assert marginal_decoded >= bayes_accuracy - 0.03
    # T itself is identified only up to T[i, j] + u_i − u_j (absorbed by start/end), so compare
    # the distributions: the learned posteriors must be close to the generator's.
    learned_node = np.stack(model.predict_marginals(X_test))
    assert np.abs(learned_node - node).mean() < 0.05


@pytest.mark.parametrize("algorithm", ["adagrad", "sgd"])
def test_minibatch_training_approaches_lbfgs(algorithm):
    rng = np.random.default_rng(12)
    F, K = 4, 3
    W, T = rng.normal(size=(F, K)), rng.normal(size=(K, K))
    X, y, _ = _known_crf_data(rng, 300, 6, W, T, np.zeros(K), np.zeros(K))
    reference = CRF(c2=0.1).fit(X, y)
    model = CRF(algorithm=algorithm, c2=0.1, max_iterations=30, batch_size=20, step_size=0.5,
                random_state=0).fit(X, y)
    matrix, lengths = design_matrix(X, None)
    objective = ChainObjective(matrix, lengths, np.concatenate(y), K)

    def total(m):
        theta = np.concatenate([m.emission_weights_.ravel(), m.transition_weights_.ravel(),
                                m.start_weights_, m.end_weights_])
        return objective(theta)[0] + 0.1 * theta @ theta

    assert total(model) <= total(reference) * 1.02
    assert len(model.history_) == 30


def test_l1_gives_sparse_weights_and_lower_penalised_objective_than_l2_solution():
    rng = np.random.default_rng(13)
    F, K = 12, 3
    W = np.zeros((F, K))
    W[:3] = rng.normal(scale=2.0, size=(3, K))  # only 3 informative features
    T = rng.normal(size=(K, K))
    X, y, _ = _known_crf_data(rng, 200, 6, W, T, np.zeros(K), np.zeros(K))
    sparse_model = CRF(c1=5.0, c2=0.0, max_iterations=200).fit(X, y)
    dense_model = CRF(c1=0.0, c2=0.01, max_iterations=200).fit(X, y)
    assert (sparse_model.emission_weights_[3:] == 0).mean() > 0.5
    assert (dense_model.emission_weights_ == 0).mean() == 0
    assert sparse_model.score(X, y) > 0.6


def test_save_load_identical_predictions_and_corruption_errors(tmp_path):
    rng = np.random.default_rng(4)
    X = [[{"w": w, "suffix": w[-1:]} for w in rng.choice(["the", "cat", "sat", "on", "mat"], size=n)]
         for n in rng.integers(2, 7, size=40)]
    y = [["D" if it["w"] in ("the", "on") else "N" for it in s] for s in X]
    model = CRF(c2=0.1, max_iterations=30).fit(X, y)
    path = tmp_path / "model.npz"
    model.save(path)
    loaded = CRF.load(path)
    assert loaded.predict(X) == model.predict(X)
    for a, b in zip(loaded.predict_marginals(X), model.predict_marginals(X)):
        np.testing.assert_array_equal(a, b)
    assert loaded.c2 == model.c2 and loaded.classes_ == model.classes_

    data = path.read_bytes()
    truncated = tmp_path / "truncated.npz"
    truncated.write_bytes(data[: len(data) // 2])
    with pytest.raises(ValueError, match="truncated.npz"):
        CRF.load(truncated)
    flipped = bytearray(data)
    middle = len(flipped) // 3
    flipped[middle:middle + 16] = bytes(16)
    corrupt = tmp_path / "corrupt.npz"
    corrupt.write_bytes(bytes(flipped))
    with pytest.raises(ValueError, match="corrupt.npz"):
        CRF.load(corrupt)
    foreign = tmp_path / "foreign.npz"
    np.savez(foreign, weights=np.zeros(3))
    with pytest.raises(ValueError, match="not a varorder model"):
        CRF.load(foreign)


def test_array_and_sparse_inputs_agree():
    rng = np.random.default_rng(6)
    X, y = _random_dense_problem(rng, n_seq=20, K=2)
    dense = CRF(c2=0.5, max_iterations=20).fit(X, y)
    sparse = CRF(c2=0.5, max_iterations=20).fit([sp.csr_matrix(x) for x in X], y)
    np.testing.assert_allclose(dense.emission_weights_, sparse.emission_weights_, atol=1e-10)


def test_bad_inputs_name_the_argument():
    model = CRF()
    with pytest.raises(ValueError, match="X has 1 sequences but y has 2"):
        model.fit([[{"a": 1.0}]], [["x"], ["y"]])
    with pytest.raises(ValueError, match=r"X\[0\] has 1 items but y\[0\] has 2"):
        model.fit([[{"a": 1.0}]], [["x", "y"]])
    with pytest.raises(ValueError, match=r"X\[0\]\[0\]: feature 'a' has value"):
        model.fit([[{"a": [1]}]], [["x"]])
    with pytest.raises(ValueError, match="algorithm"):
        CRF(algorithm="newton").fit([[{"a": 1.0}]], [["x"]])
    with pytest.raises(ValueError, match="not fitted"):
        CRF().predict([[{"a": 1.0}]])
    fitted = CRF(max_iterations=2).fit([[{"a": 1.0}]], [["x"]])
    with pytest.raises(ValueError, match="has 3 features, expected"):
        CRF(max_iterations=2).fit([np.zeros((2, 2))], [[0, 1]]).predict([np.zeros((2, 3))])
    assert fitted.predict([[{"unseen": 1.0}]]) == [["x"]]  # unknown features are dropped


def test_thread_count_does_not_change_the_model():
    rng = np.random.default_rng(7)
    X, y = _random_dense_problem(rng, n_seq=30, K=3)
    one = CRF(c2=0.2, max_iterations=15, n_threads=1).fit(X, y)
    default = CRF(c2=0.2, max_iterations=15).fit(X, y)
    np.testing.assert_allclose(one.emission_weights_, default.emission_weights_, rtol=1e-9, atol=1e-12)
    assert one.predict(X) == default.predict(X)
    with pytest.raises(ValueError, match="n_threads"):
        CRF(n_threads=0).fit(X, y)


# -- solver=CRFSolverOptions(...): the mini-batch knobs, and their old keywords for one release -----

def _weights(model):
    return [model.emission_weights_, model.transition_weights_, model.start_weights_, model.end_weights_]


@pytest.mark.parametrize("algorithm, knobs", [("adagrad", dict(batch_size=7, step_size=0.5)),
                                              ("sgd", dict(batch_size=3)), ("sgd", dict(step_size=0.05))])
def test_solver_options_and_the_old_keywords_give_the_same_model(tmp_path, algorithm, knobs):
    import warnings

    from sklearn.base import clone

    from varorder.base import DEPRECATED
    from varorder.models import persist
    from varorder.models.crf import CRFSolverOptions

    rng = np.random.default_rng(4)
    X, y = _random_dense_problem(rng, n_seq=30, K=3)
    common = dict(algorithm=algorithm, c2=0.1, max_iterations=4, random_state=0)
    old, new = CRF(**knobs, **common), CRF(solver=CRFSolverOptions(**knobs), **common)
    spelled = ", ".join(f"{k}={v!r}" for k, v in knobs.items())
    with pytest.warns(FutureWarning) as told:
        old.fit(X, y)
    assert len(told) == 1 and f"solver=CRFSolverOptions({spelled})" in str(told[0].message)
    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)  # the new spelling warns of nothing
        new.fit(X, y)
    default = CRF(**common).fit(X, y)
    for a, b, c in zip(_weights(old), _weights(new), _weights(default)):
        assert np.array_equal(a, b)
    assert not all(np.array_equal(a, c) for a, c in zip(_weights(new), _weights(default)))  # the knobs act
    # (the mini-batch log has no gradient norm: NaN, which == refuses, so the entries' reprs are compared)
    assert [repr(dict(e, time=0)) for e in old.history_] == [repr(dict(e, time=0)) for e in new.history_]
    # the model file: the same params keys and values as before the move, whichever spelling trained it
    for name, model in (("old", old), ("new", new)):
        model.save(tmp_path / f"{name}.npz")
    params = [persist.load_model(tmp_path / f"{name}.npz", "CRF", ())[0] for name in ("old", "new")]
    assert params[0] == params[1] and "solver" not in params[0]
    assert params[0]["batch_size"] == knobs.get("batch_size", 64)
    assert params[0]["step_size"] == knobs.get("step_size", 0.2)
    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)  # loading an old file warns of nothing
        loaded = CRF.load(tmp_path / "old.npz")
    assert loaded.solver == CRFSolverOptions(**knobs) and loaded.batch_size == DEPRECATED
    assert all(np.array_equal(a, b) for a, b in zip(_weights(loaded), _weights(old)))
    assert loaded.predict(X) == old.predict(X)
    # scikit-learn's convention: the parameters as given; clone rebuilds both spellings
    assert old.get_params()["solver"] is None and new.get_params()["batch_size"] == DEPRECATED
    for estimator in (old, new):
        copy = clone(estimator)
        assert copy.get_params() == estimator.get_params()
    assert clone(new).solver == new.solver and clone(old).batch_size == old.batch_size
    assert CRF().set_params(solver=CRFSolverOptions(batch_size=5)).solver.batch_size == 5


def test_the_default_spellings_warn_of_nothing():
    import warnings

    from varorder.models.crf2 import SecondOrderCRF

    X = [[{"w": "a"}, {"w": "b"}], [{"w": "b"}, {"w": "a"}, {"w": "b"}]]
    y = [["A", "B"], ["B", "A", "B"]]
    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)
        for model in (CRF(max_iterations=3), CRF(algorithm="adagrad", max_iterations=2),
                      SecondOrderCRF(max_iterations=3)):
            assert model.fit(X, y).predict(X) is not None
        assert "batch_size" not in repr(CRF()) and "solver" not in repr(CRF())


def test_solver_options_are_checked_at_fit():
    from varorder.errors import ParameterError
    from varorder.models.crf import CRFSolverOptions

    X, y = _random_dense_problem(np.random.default_rng(0))
    CRF(solver=CRFSolverOptions(batch_size=0))  # accepted by __init__: checked at fit
    with pytest.raises(ParameterError, match=r"CRFSolverOptions: parameter batch_size=0 ") as info:
        CRF(algorithm="adagrad", solver=CRFSolverOptions(batch_size=0)).fit(X, y)
    assert info.value.name == "batch_size"
    with pytest.raises(ParameterError, match=r"step_size=-1\.0"):
        CRF(algorithm="sgd", solver=CRFSolverOptions(step_size=-1.0)).fit(X, y)
    with pytest.raises(ParameterError, match="solver"):
        CRF(solver={"batch_size": 3}).fit(X, y)
    with pytest.raises(ParameterError, match=r"batch_size=2\.5"), pytest.warns(FutureWarning):
        CRF(algorithm="adagrad", batch_size=2.5).fit(X, y)
    with pytest.raises(TypeError):
        CRFSolverOptions(batch_sise=3)  # a misspelt field is no silent default


def test_sklearn_crfsuites_keywords_stay_first_class():
    """A user coming from sklearn-crfsuite passes its keywords: the 21 the CRF shares with it are
    constructor parameters of their own (not moved into ``solver``, no warning)."""
    import inspect
    import warnings

    from varorder.base import DEPRECATED

    peer = pytest.importorskip("sklearn_crfsuite", reason="sklearn-crfsuite is not installed")
    ours = inspect.signature(CRF).parameters
    shared = [name for name in inspect.signature(peer.CRF).parameters if name in ours]
    assert len(shared) == 21 and {"c1", "c2", "epsilon", "calibration_eta", "pa_type", "gamma"} <= set(shared)
    assert all(ours[name].default != DEPRECATED for name in shared)
    X, y = [[{"w": "a"}, {"w": "b"}]], [["A", "B"]]
    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)
        CRF(**{name: ours[name].default for name in shared}).set_params(max_iterations=2).fit(X, y)
