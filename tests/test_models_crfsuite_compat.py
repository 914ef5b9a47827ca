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
    if algorithm == "ap":
        # the perceptron stops after its first epoch without a mistake (CRFsuite's epsilon = 0) and returns
        # the average of its iterates, which need not separate the set itself
        assert crf.training_log_.last_iteration["error_norm"] == 0.0
        assert crf.score(X, y) >= 0.8
    else:
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


def flagged(n=40, seed=1):
    """Tokens with a boolean flag that is False for every DET: CRFsuite still fires (flag, DET) with the value 0."""
    X, y = separable(n, seed)
    X = [[dict(item, flag=label != "DET", other=label == "VERB") for item, label in zip(xs, ys)] for xs, ys in zip(X, y)]
    return X, y


def test_a_zero_valued_feature_seen_with_a_label_is_in_the_sparse_set():
    X, y = flagged()
    crf = CRF(c1=0.0, c2=0.1, max_iterations=50, all_possible_states=False).fit(X, y)
    # flag is 0 on every DET token, yet (flag, DET) is a feature (CRFsuite's); it learns a negative weight
    # because flag = 1 on the other tokens makes it a cue against DET
    assert crf.state_features_[("flag", "DET")] < 0
    # a name never seen with a label, at any value, is not a feature of it
    assert ("w:dog", "DET") not in crf.state_features_


def test_boundary_weights_are_off_by_default_and_on_as_an_option():
    X, y = separable()
    plain = CRF(max_iterations=30).fit(X, y)
    assert not plain.start_weights_.any() and not plain.end_weights_.any()
    with_edges = CRF(max_iterations=30, boundary_weights=True).fit(X, y)
    assert with_edges.start_weights_.any() and with_edges.end_weights_.any()
    for algorithm in ("ap", "l2sgd"):
        online = CRF(algorithm=algorithm, max_iterations=5, random_state=0).fit(X, y)
        assert not online.start_weights_.any() and not online.end_weights_.any()
    with pytest.raises(ValueError, match="boundary_weights"):
        CRF(boundary_weights="yes").fit(X, y)


def test_the_objective_and_its_trace_are_crfsuites():
    """Same feature dicts, c1 = c2 = 0.1, sparse states: CRFsuite's loss at every L-BFGS / OWL-QN iteration."""
    pycrfsuite = pytest.importorskip("pycrfsuite", reason="python-crfsuite (the bench extra) is not installed")
    import tempfile

    X, y = flagged(60, 4)
    trainer = pycrfsuite.Trainer(verbose=False)
    for xs, ys in zip(X, y):
        trainer.append(xs, ys)
    trainer.select("lbfgs")
    trainer.set_params({"c1": 0.1, "c2": 0.1, "max_iterations": 15, "feature.possible_transitions": True})
    with tempfile.TemporaryDirectory() as tmp:
        trainer.train(tmp + "/model")
    theirs = [it["loss"] for it in trainer.logparser.iterations]
    crf = CRF(c1=0.1, c2=0.1, max_iterations=15, all_possible_states=False).fit(X, y)
    ours = [entry["objective"] for entry in crf.history_]
    assert len(theirs) >= 5
    np.testing.assert_allclose(ours[:len(theirs)], theirs, rtol=1e-5)  # the log prints 6 decimals
