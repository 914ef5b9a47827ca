"""sklearn-crfsuite compatibility of the CRF: bytes features, CRFsuite's trainers, sparse feature sets,
the state/transition feature views, size_ and training_log_."""

import numpy as np
import pytest

from varorder.models.crf import CRF


def separable(n=12, seed=0):
    rng = np.random.default_rng(seed)
    vocab = {"the": "DET", "a": "DET", "dog": "NOUN", "cat": "NOUN", "runs": "VERB", "sleeps": "VERB"}
    words = list(vocab)
    X, y = [], []
    for _ in range(n):
        sent = [str(w) for w in rng.choice(words, size=int(rng.integers(2, 6)))]
        X.append([{"w": w, "bias": 1.0} for w in sent])
        y.append([vocab[w] for w in sent])
    return X, y


def test_bytes_feature_values_give_the_same_model_as_str():
    X, y = separable()
    as_bytes = [[{k.encode(): (v.encode() if isinstance(v, str) else v) for k, v in item.items()} for item in xs]
                for xs in X]
    a = CRF(max_iterations=30).fit(X, y)
    b = CRF(max_iterations=30).fit(as_bytes, y)
    assert a.feature_names_ == b.feature_names_
    np.testing.assert_array_equal(a.emission_weights_, b.emission_weights_)
    assert a.predict(as_bytes) == b.predict(X)
    nested = [[{"w": {"form": item["w"]}, "tags": [item["w"], b"x"]} for item in xs] for xs in X]
    c = CRF(max_iterations=5).fit(nested, y)
    assert "w:form:dog" in c.feature_names_ and "tags:x" in c.feature_names_
    with pytest.raises(ValueError, match="not UTF-8"):
        CRF().fit([[{"w": b"\xff"}]], [["A"]])


@pytest.mark.parametrize("algorithm,params", [("ap", {}), ("pa", {"pa_type": 0}), ("pa", {"pa_type": 1}),
                                              ("pa", {"pa_type": 2}), ("arow", {}), ("l2sgd", {"c2": 0.01}),
                                              ("lbfgs", {})])
def test_each_trainer_reaches_zero_training_error(algorithm, params):
    X, y = separable()
    crf = CRF(algorithm=algorithm, max_iterations=50, random_state=0, **params).fit(X, y)
    assert crf.predict(X) == y
    assert crf.training_log_.last_iteration["num"] == crf.n_iter_
    assert len(crf.training_log_.iterations) == len(crf.history_)


def test_sparse_feature_sets():
    X, y = separable()
    dense = CRF(max_iterations=30).fit(X, y)
    sparse = CRF(max_iterations=30, all_possible_states=False, all_possible_transitions=False).fit(X, y)
    seen = {(f"w:{item['w']}", label) for xs, ys in zip(X, y) for item, label in zip(xs, ys)}
    seen |= {("bias", label) for ys in y for label in ys}
    assert set(sparse.state_features_) <= seen
    assert len(dense.state_features_) > len(sparse.state_features_)
    bigrams = {(a, b) for ys in y for a, b in zip(ys, ys[1:])}
    assert set(sparse.transition_features_) <= bigrams
    assert sparse.predict(X) == y
    assert 0 < sparse.size_ < dense.size_
    assert dense.transition_features_[("DET", "NOUN")] == dense.transition_weights_[
        dense.classes_.index("DET"), dense.classes_.index("NOUN")]


def test_online_parameters_are_checked():
    X, y = separable()
    with pytest.raises(ValueError, match="pa_type"):
        CRF(algorithm="pa", pa_type=3).fit(X, y)
    with pytest.raises(ValueError, match="no L1 term"):
        CRF(algorithm="ap", c1=0.1).fit(X, y)
