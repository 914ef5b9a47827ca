"""Decoding with per-token candidates, tag-scheme constraints, k-best and constrained marginals on the CRF,
MEMM and HMM, against brute-force enumeration; partial-label training by finite differences."""

import itertools

import numpy as np
import pytest

from varorder.io import schemes
from varorder.models.crf import CRF, PartialChainObjective
from varorder.models.features import FeatureIndexer
from varorder.models.hmm import HMM
from varorder.models.memm import MEMM
from varorder.testing import oracle

LABELS = schemes.scheme_labels(["A", "B"], "BIO")  # B-A B-B I-A I-B O


def tiny_data(rng, n_seq=6):
    words = [f"w{i}" for i in range(5)]
    X, y = [], []
    for _ in range(n_seq):
        n = int(rng.integers(1, 5))
        X.append([{"w": str(rng.choice(words)), "bias": 1.0} for _ in range(n)])
        y.append([str(rng.choice(LABELS)) for _ in range(n)])
    return X, y


def random_crf(seed):
    rng = np.random.default_rng(seed)
    X, y = tiny_data(rng)
    y[0] = list(LABELS)[: len(y[0])] if len(y[0]) >= 1 else y[0]
    y.append(list(LABELS))
    X.append([{"w": "w0", "bias": 1.0}] * len(LABELS))
    crf = CRF(max_iterations=2).fit(X, y)
    K, F = len(crf.classes_), crf.n_features_in_
    crf.emission_weights_ = rng.normal(size=(F, K))
    crf.transition_weights_ = rng.normal(size=(K, K))
    crf.start_weights_ = rng.normal(size=K)
    crf.end_weights_ = rng.normal(size=K)
    return crf, X, rng


def crf_chain(crf, xs):
    indexer = FeatureIndexer.from_names(crf.feature_names_)
    matrix, _ = indexer.transform([xs])
    return np.asarray(matrix @ crf.emission_weights_), crf.transition_weights_, crf.start_weights_, crf.end_weights_


def enumerate_sequence(emissions, T, start, end, keep):
    paths = oracle.chain_paths(emissions, T, start, end)
    return [(p, s if keep(p) else -np.inf) for p, s in paths]


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("scheme", ["BIO", "IOB1", "BIOES"])
def test_constrained_viterbi_kbest_marginals_equal_enumeration(seed, scheme):
    crf, X, rng = random_crf(seed)
    if scheme != "BIO":  # relabel the model's classes into the scheme (weights stay)
        crf.classes_ = schemes.scheme_labels(["A", "B"], scheme)[: len(crf.classes_)]
        if scheme == "BIOES":
            crf.classes_ = ["B-A", "E-A", "I-A", "O", "S-A"]
    classes = crf.classes_
    xs = [{"w": f"w{int(i)}", "bias": 1.0} for i in rng.integers(0, 5, size=4)]
    E, T, S, F = crf_chain(crf, xs)
    # a fixed tag and a candidate set, too
    allowed = [[None, set(classes) - {classes[0]}, None, None]]
    keep = lambda p: schemes.is_valid([classes[i] for i in p], scheme) and p[1] != 0  # noqa: E731
    paths = enumerate_sequence(E, T, S, F, keep)
    best = oracle.argmax_paths(paths, tol=1e-9)
    predicted = crf.predict([xs], allowed=allowed, constraints=scheme)[0]
    assert tuple(classes.index(c) for c in predicted) in best
    taggings, log_p = crf.predict_kbest([xs], k=4, allowed=allowed, constraints=scheme)
    log_z = oracle.log_partition(oracle.chain_paths(E, T, S, F))
    np.testing.assert_allclose(log_p[0], np.array(oracle.kbest_scores(paths, 4)) - log_z, atol=1e-9)
    for tagging in taggings[0]:
        assert keep(tuple(classes.index(c) for c in tagging))
    node = crf.predict_marginals([xs], allowed=allowed, constraints=scheme)[0]
    np.testing.assert_allclose(node, oracle.chain_node_marginals(paths, 4, len(classes)), atol=1e-9)


def test_constraints_bio_never_emit_invalid_sequences():
    rng = np.random.default_rng(7)
    crf, X, _ = random_crf(3)
    crf.transition_weights_[:] = 0
    crf.transition_weights_[crf.classes_.index("O"), crf.classes_.index("I-A")] = 5.0  # the model likes O → I-A
    crf.start_weights_[crf.classes_.index("I-B")] = 5.0
    inputs = [[{"w": f"w{int(i)}", "bias": 1.0} for i in rng.integers(0, 5, size=int(rng.integers(1, 9)))]
              for _ in range(200)]
    free = crf.predict(inputs)
    assert not all(schemes.is_valid(t, "BIO") for t in free)  # the test can fail
    for tags in crf.predict(inputs, constraints="BIO"):
        schemes.validate(tags, "BIO")
    for tags_list in crf.predict_kbest(inputs[:20], k=3, constraints="BIO")[0]:
        for tags in tags_list:
            schemes.validate(tags, "BIO")


def test_fixed_tags_and_errors():
    crf, X, _ = random_crf(4)
    xs = X[-1][:3]
    out = crf.predict([xs], allowed=[["B-B", None, "O"]])[0]
    assert out[0] == "B-B" and out[2] == "O"
    with pytest.raises(ValueError, match="not one of the model's classes_"):
        crf.predict([xs], allowed=[["B-Z", None, None]])
    with pytest.raises(ValueError, match="has 2 entries for 3 tokens"):
        crf.predict([xs], allowed=[["O", None]])
    with pytest.raises(ValueError, match="no tagging"):
        crf.predict([xs], allowed=[["O", "I-A", None]], constraints="BIO")
    with pytest.raises(ValueError, match="scheme must be one of"):
        crf.predict([xs], constraints="BIOX")


def test_memm_and_hmm_constrained_decoding_equal_enumeration():
    rng = np.random.default_rng(11)
    X, y = tiny_data(rng, 40)
    y.append(list(LABELS))
    X.append([{"w": "w1", "bias": 1.0}] * len(LABELS))
    memm = MEMM(max_iterations=20).fit(X, y)
    words = [[x["w"] for x in xs] for xs in X]
    hmm = HMM().fit(words, y)
    xs = X[0] if len(X[0]) >= 3 else X[-1][:4]
    for model, inputs in ((memm, [xs]), (hmm, [[x["w"] for x in xs]])):
        classes = model.classes_
        n = len(xs)
        if isinstance(model, MEMM):  # the brute force: log p(y | x) of every path by the model's own scorer
            paths = [(p, float(model.sequence_log_probability(inputs, [[classes[i] for i in p]])[0]))
                     for p in itertools.product(range(len(classes)), repeat=n)]
        else:
            ids, _ = model._encode_symbols(inputs)
            paths = oracle.chain_paths(model.log_emissions_[:, ids].T, model.log_transitions_, model.log_start_)
        keep = lambda p: schemes.is_valid([classes[i] for i in p], "BIO")  # noqa: E731
        constrained = [(p, s if keep(p) else -np.inf) for p, s in paths]
        predicted = model.predict(inputs, constraints="BIO")[0]
        assert tuple(classes.index(c) for c in predicted) in oracle.argmax_paths(constrained, tol=1e-9)
        node = model.predict_marginals(inputs, constraints="BIO")[0]
        np.testing.assert_allclose(node, oracle.chain_node_marginals(constrained, n, len(classes)), atol=1e-8)
        taggings, log_p = model.predict_kbest(inputs, k=3, constraints="BIO")
        log_z = oracle.log_partition(paths)
        np.testing.assert_allclose(log_p[0], np.array(oracle.kbest_scores(constrained, 3)) - log_z, atol=1e-8)


@pytest.mark.parametrize("seed", [0, 1])
def test_partial_label_objective_equals_enumeration_and_finite_differences(seed):
    rng = np.random.default_rng(seed)
    X, y = tiny_data(rng, 4)
    indexer = FeatureIndexer().fit(X)
    matrix, lengths = indexer.transform(X)
    K = len(LABELS)
    allowed = rng.random((int(lengths.sum()), K)) < 0.5
    allowed[np.arange(allowed.shape[0]), rng.integers(0, K, allowed.shape[0])] = True
    objective = PartialChainObjective(matrix, lengths, allowed, K)
    theta = rng.normal(scale=0.5, size=objective.n_params)
    f, g = objective(theta)
    W, T, S, F = objective.unpack(theta)
    E = np.asarray(matrix @ W)
    expected, row = 0.0, 0
    for n in lengths.tolist():
        paths = oracle.chain_paths(E[row:row + n], T, S, F)
        constrained = oracle.chain_paths(E[row:row + n], T, S, F, allowed=allowed[row:row + n])
        expected += oracle.log_partition(paths) - oracle.log_partition(constrained)
        row += n
    assert f == pytest.approx(expected, rel=1e-10)
    eps = 1e-6
    for i in rng.choice(theta.size, 25, replace=False):
        step = np.zeros_like(theta)
        step[i] = eps
        numeric = (objective(theta + step)[0] - objective(theta - step)[0]) / (2 * eps)
        assert g[i] == pytest.approx(numeric, abs=1e-5)


def test_partial_labels_in_fit():
    rng = np.random.default_rng(2)
    X, y = tiny_data(rng, 30)
    full = CRF(max_iterations=60).fit(X, y)
    partial_y = [[v if t % 2 == 0 else None for t, v in enumerate(seq)] for seq in y]
    partial_y[0][0] = {"O", "B-A"}
    model = CRF(max_iterations=60).fit(X, partial_y)
    assert set(model.classes_) <= set(LABELS)
    # fully labelled sequences given as one-element sets train the same model
    as_sets = CRF(max_iterations=60).fit(X, [[{v} for v in seq] for seq in y])
    np.testing.assert_allclose(as_sets.emission_weights_, full.emission_weights_, atol=1e-6)
