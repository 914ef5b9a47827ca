"""The semi-Markov CRF against enumeration over segmentations, by finite differences, and against the
first-order CRF where the two models coincide."""

import numpy as np
import pytest

from varorder import chain
from varorder.io import schemes
from varorder.models.semicrf import SEGMENT_FEATURES, SegmentFeaturizer, SegmentObjective, SemiMarkovCRF
from varorder.testing import oracle

WORDS = ["Anna", "Smith", "saw", "Oslo", "today", "Ola", "of", "IBM"]


def corpus(seed, n=8, longest=4):
    rng = np.random.default_rng(seed)
    X, y = [], []
    for _ in range(n):
        m = int(rng.integers(1, longest + 1))
        words = [str(w) for w in rng.choice(WORDS, size=m)]
        found, t = [], 0
        while t < m:
            if rng.random() < 0.4:
                e = min(m, t + int(rng.integers(1, 3)))
                found.append((str(rng.choice(["PER", "LOC"])), t, e))
                t = e
            else:
                t += 1
        X.append(words)
        y.append(schemes.encode(found, m, "BIO"))
    return X, y


def fitted(seed, iterations=2, **params):
    X, y = corpus(seed)
    params.setdefault("max_segment_length", 3)
    return SemiMarkovCRF(max_iterations=iterations, **params).fit(X, y), X, y


def objective_of(model, X, y):
    token_X, S, lengths = model._design(X)
    K = len(model.labels_)
    gold = model._gold(X, [schemes.spans(t, "BIO") for t in y], K)
    return SegmentObjective(token_X, S, lengths, gold, K, model.D_, model._roles), gold


@pytest.mark.parametrize("positions", ["BILOU", "BIO", "segment"])
@pytest.mark.parametrize("seed", [0, 1])
def test_objective_equals_enumeration_and_gradient_finite_differences(seed, positions):
    model, X, y = fitted(seed, iterations=1, token_positions=positions)
    objective, gold = objective_of(model, X, y)
    rng = np.random.default_rng(seed)
    theta = rng.normal(scale=0.5, size=objective.n_params)
    f, g = objective(theta)
    W, V, T, start, end = objective.unpack(theta)
    P = objective.segment_scores(W, V)
    expected = 0.0
    for s, segs in enumerate(gold):
        lo, hi = int(objective.offsets[s]), int(objective.offsets[s + 1])
        paths = oracle.segmentation_paths(P[lo:hi], T, start, end)
        gold_score = [sc for seg, sc in paths if list(seg) == segs]
        assert len(gold_score) == 1
        expected += oracle.log_partition(paths) - gold_score[0]
    assert f == pytest.approx(expected, rel=1e-9)
    eps = 1e-6
    # every block of θ: token weights, segment weights, transitions, start, end
    sizes = [W.size, V.size, T.size, start.size, end.size]
    bounds = np.concatenate([[0], np.cumsum(sizes)])
    picks = np.concatenate([rng.choice(np.arange(bounds[i], bounds[i + 1]), min(8, sizes[i]), replace=False)
                            for i in range(5)])
    for i in picks:
        step = np.zeros_like(theta)
        step[i] = eps
        numeric = (objective(theta + step)[0] - objective(theta - step)[0]) / (2 * eps)
        assert g[i] == pytest.approx(numeric, abs=1e-5)


def test_segment_scores_of_a_span_by_hand():
    model, X, y = fitted(2, iterations=1, token_positions="BILOU")
    objective, _ = objective_of(model, X, y)
    rng = np.random.default_rng(2)
    W = rng.normal(size=(objective.F, objective.C))
    V = rng.normal(size=(objective.G, objective.K))
    P = objective.segment_scores(W, V)
    from varorder.models.features import csr_times_dense

    Z = csr_times_dense(objective.X, W)
    SV = csr_times_dense(objective.S, V).reshape(-1, objective.D, objective.K)
    roles = objective.roles
    for s in range(len(X)):
        lo, hi = int(objective.offsets[s]), int(objective.offsets[s + 1])
        for t in range(lo, hi):
            for d in range(objective.D):
                for k in range(objective.K):
                    if t - d < lo or (k == objective.K - 1 and d > 0):
                        assert P[t, d, k] == -np.inf
                        continue
                    if d == 0:
                        want = Z[t, roles.unit[k]]
                    else:
                        want = Z[t - d, roles.first[k]] + Z[t, roles.last[k]] + sum(
                            Z[u, roles.inside[k]] for u in range(t - d + 1, t))
                    assert P[t, d, k] == pytest.approx(want + SV[t, d, k], abs=1e-12)


def test_viterbi_kbest_marginals_equal_enumeration():
    model, X, y = fitted(3)
    rng = np.random.default_rng(3)
    for name in ("token_weights_", "segment_weights_", "transition_weights_", "start_weights_", "end_weights_"):
        setattr(model, name, rng.normal(scale=0.8, size=getattr(model, name).shape))
    sentence = ["Anna", "Smith", "saw", "Oslo"]
    ((_, _, P),) = list(model._chunks([sentence]))
    paths = oracle.segmentation_paths(P[0], model.transition_weights_, model.start_weights_, model.end_weights_, 4)
    best = max(paths, key=lambda p: p[1])[0]
    assert model.predict([sentence])[0] == model._tags(best, 4)
    taggings, log_p = model.predict_kbest([sentence], k=3)
    logz = oracle.log_partition(paths)
    np.testing.assert_allclose(log_p[0], np.array(oracle.kbest_scores(paths, 3)) - logz, atol=1e-9)
    table = np.zeros((4, len(model.classes_)))
    for seg, p in oracle.probabilities(paths).items():
        for t, tag in enumerate(model._tags(seg, 4)):
            table[t, model.classes_.index(tag)] += p
    np.testing.assert_allclose(model.predict_marginals([sentence])[0], table, atol=1e-9)
    # fixing a tag: the best segmentation among those giving it
    allowed = [[None, "O", None, None]]
    keep = [(seg, s) for seg, s in paths if model._tags(seg, 4)[1] == "O"]
    assert model.predict([sentence], allowed=allowed)[0] == model._tags(max(keep, key=lambda p: p[1])[0], 4)


def test_one_word_segments_without_segment_weights_are_the_first_order_crf():
    """D = 1 and V = 0: every segment is one word, so the model is a first-order chain over the labels with
    the unit columns' scores as emissions: log Z and marginals equal the chain engine's."""
    X, y = corpus(4)
    short = [(x, t) for x, t in zip(X, y) if all(e - s == 1 for _, s, e in schemes.spans(t, "BIO"))]
    model = SemiMarkovCRF(max_iterations=1, max_segment_length=1).fit([x for x, _ in short], [t for _, t in short])
    objective, gold = objective_of(model, X[:3], [["O"] * len(x) for x in X[:3]])
    rng = np.random.default_rng(4)
    theta = rng.normal(size=objective.n_params)
    W, V, T, start, end = objective.unpack(theta)
    V[:] = 0.0
    from varorder.engine import semimarkov_flat
    from varorder.models.features import csr_times_dense

    P = objective.segment_scores(W, V)
    logz, seg, _ = semimarkov_flat.marginals(P, objective.offsets, T, start, end)
    Z = csr_times_dense(objective.X, W)[:, objective.roles.unit]
    for s in range(3):
        lo, hi = int(objective.offsets[s]), int(objective.offsets[s + 1])
        node, _ = chain.marginals(Z[None, lo:hi], T, start, end)
        assert logz[s] == pytest.approx(float(chain.log_partition(Z[None, lo:hi], T, start, end)[0]), rel=1e-12)
        np.testing.assert_allclose(seg[lo:hi, 0], node[0], atol=1e-12)


def test_bio_positions_without_segment_weights_equal_the_constrained_bio_crf():
    """token_positions='BIO', V = 0 and segments as long as the sentence: the model is the first-order BIO CRF
    restricted to valid sequences whose transitions do not see inside a segment (B→I, I→I score 0) nor the
    place of its last word (B-j→x = I-j→x = T[j, x])."""
    X, y = corpus(5, n=6, longest=4)
    model = SemiMarkovCRF(max_iterations=1, max_segment_length=4, token_positions="BIO").fit(X, y)
    objective, _ = objective_of(model, X, y)
    rng = np.random.default_rng(5)
    theta = rng.normal(scale=0.7, size=objective.n_params)
    W, V, T, start, end = objective.unpack(theta)
    V[:] = 0.0
    from varorder.engine import semimarkov_flat
    from varorder.models.features import csr_times_dense

    logz, _, _ = semimarkov_flat.marginals(objective.segment_scores(W, V), objective.offsets, T, start, end)
    Z = csr_times_dense(objective.X, W)
    types = model.entity_types_
    tags = [f"{p}-{t}" for t in types for p in "BI"] + ["O"]
    label_of = {tag: (types.index(tag[2:]) if tag != "O" else len(types)) for tag in tags}
    column = {f"B-{t}": 2 * i for i, t in enumerate(types)} | {f"I-{t}": 2 * i + 1 for i, t in enumerate(types)}
    column["O"] = objective.roles.unit[-1]
    E = Z[:, [column[t] for t in tags]]
    M = len(tags)
    Tb = np.full((M, M), -np.inf)
    for a, ta in enumerate(tags):
        for b, tb in enumerate(tags):
            if tb.startswith("I-"):
                if ta != "O" and ta[2:] == tb[2:]:
                    Tb[a, b] = 0.0
            else:
                Tb[a, b] = T[label_of[ta], label_of[tb]]
    sb = np.array([-np.inf if t.startswith("I-") else start[label_of[t]] for t in tags])
    eb = np.array([end[label_of[t]] for t in tags])
    for s in range(len(X)):
        lo, hi = int(objective.offsets[s]), int(objective.offsets[s + 1])
        assert logz[s] == pytest.approx(float(chain.log_partition(E[None, lo:hi], Tb, sb, eb)[0]), rel=1e-11)


def test_dictionary_is_jackknifed():
    words = [["Anna", "saw", "Oslo"], ["Oslo", "slept"], ["Anna", "ran"], ["Lima", "is", "far"]]
    y = [["B-PER", "O", "B-LOC"], ["B-LOC", "O"], ["B-PER", "O"], ["B-LOC", "O", "O"]]
    model = SemiMarkovCRF(max_iterations=1, segment_features="dictionary", dictionary_folds=2,
                          max_segment_length=2)
    model.fit(words, y)
    names = model.segment_feature_names_
    assert names == ["dict=LOC", "dict=PER"]
    featurizer = model._segments
    K = len(model.labels_)
    gold = model._gold(words, [schemes.spans(t, "BIO") for t in y], K)
    fresh = SegmentFeaturizer(("dictionary",), 2, model.entity_types_, folds=2)
    S = fresh.fit_transform(words, gold).toarray()
    D = 2

    def fired(flat_t, d):
        return {names[c] for c in np.flatnonzero(S[flat_t * D + d])}

    # folds: sentences 0–1 and 2–3. "Anna" (sentence 0) is a PER in fold 1 too; "Oslo" only in fold 0
    assert fired(0, 0) == {"dict=PER"}
    assert fired(2, 0) == set() and fired(3, 0) == set()
    assert fired(9, 0) == set()  # Lima: only in its own fold
    # at prediction every training entity counts
    S_new = featurizer.transform([["Oslo", "and", "Lima"]]).toarray()
    assert {names[c] for c in np.flatnonzero(S_new[0 * D])} == {"dict=LOC"}
    assert {names[c] for c in np.flatnonzero(S_new[2 * D])} == {"dict=LOC"}


def test_segment_feature_names_and_families():
    model, X, y = fitted(6, iterations=1)
    names = model.segment_feature_names_
    for prefix in ("len=", "shape=", "case=", "frame=", "text=", "first=", "last=", "prev=", "next=", "dict="):
        assert any(n.startswith(prefix) for n in names), prefix
    assert SEGMENT_FEATURES[0] == "length"
    with pytest.raises(ValueError, match="segment_features"):
        SemiMarkovCRF(segment_features="length,colour").fit(X, y)
    bare = SemiMarkovCRF(max_iterations=1, segment_features="none", max_segment_length=3).fit(X, y)
    assert bare.segment_feature_names_ == []


def test_sparse_states_keep_only_gold_pairs():
    model, X, y = fitted(7, iterations=5, all_possible_states=False)
    objective, _ = objective_of(model, X, y)
    keep = SemiMarkovCRF._sparse_mask(objective)
    W, V = model.token_weights_, model.segment_weights_
    F, C = W.shape
    assert not W.ravel()[~keep[: F * C]].any()
    assert not V.ravel()[~keep[F * C:F * C + V.size]].any()
    assert W.ravel()[keep[: F * C]].any()


def test_training_fits_and_outputs_are_valid():
    rng = np.random.default_rng(5)
    X, y = [], []
    for _ in range(30):  # names are persons (one or two words), Oslo and Lima places
        person = [str(rng.choice(["Anna", "Ola"]))] + (["Smith"] if rng.random() < 0.5 else [])
        words = person + ["saw", str(rng.choice(["Oslo", "Lima"]))]
        X.append(words)
        y.append(schemes.encode([("PER", 0, len(person)), ("LOC", len(person) + 1, len(words))], len(words), "BIO"))
    model = SemiMarkovCRF(max_iterations=60).fit(X, y)
    assert model.predict(X) == y
    assert model.predict([["Ola", "Smith", "saw", "Lima"]])[0] == ["B-PER", "I-PER", "O", "B-LOC"]
    for tags in model.predict(X, constraints="BIO"):
        schemes.validate(tags, "BIO")
    with pytest.raises(ValueError, match="cannot follow"):
        SemiMarkovCRF().fit([["a", "b"]], [["O", "I-PER"]])
