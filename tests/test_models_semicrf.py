"""The semi-Markov CRF against enumeration over segmentations and by finite differences."""

import numpy as np
import pytest

semimarkov = pytest.importorskip("varorder.semimarkov", reason="the engine's semi-Markov structure is not here")
from varorder.io import schemes  # noqa: E402
from varorder.models.semicrf import SemiMarkovCRF, SegmentObjective  # noqa: E402
from varorder.testing import oracle  # noqa: E402

WORDS = ["Anna", "Smith", "saw", "Oslo", "today", "Ola"]


def corpus(seed, n=8):
    rng = np.random.default_rng(seed)
    X, y = [], []
    for _ in range(n):
        m = int(rng.integers(1, 5))
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


def fitted(seed, iterations=3):
    X, y = corpus(seed)
    model = SemiMarkovCRF(max_iterations=iterations, max_segment_length=3).fit(X, y)
    return model, X, y


@pytest.mark.parametrize("seed", [0, 1])
def test_objective_equals_enumeration_and_gradient_finite_differences(seed):
    model, X, y = fitted(seed, iterations=1)
    token_X, S, lengths = model._design(X)
    K = len(model.labels_)
    found = [schemes.spans(t, "BIO") for t in y]
    index = {t: k for k, t in enumerate(model.labels_)}
    gold = []
    for w, spans_ in zip(X, found):
        segs, pos = [], 0
        for type_, s, e in spans_:
            segs += [(t, t + 1, K - 1) for t in range(pos, s)] + [(s, e, index[type_])]
            pos = e
        gold.append(segs + [(t, t + 1, K - 1) for t in range(pos, len(w))])
    objective = SegmentObjective(token_X, S, lengths, gold, K, model.D_, K - 1)
    rng = np.random.default_rng(seed)
    theta = rng.normal(scale=0.5, size=objective.n_params)
    f, g = objective(theta)
    W, V, T, start, end = objective.unpack(theta)
    expected = 0.0
    chunks = {int(s): (P[b], int(n)) for seq_ids, lengths_, _, _, P in objective.scores(theta)
              for b, (s, n) in enumerate(zip(seq_ids, lengths_))}
    for s, segs in enumerate(gold):
        P, n = chunks[s]
        paths = oracle.segmentation_paths(P[:n], T, start, end, n)
        gold_score = [sc for seg, sc in paths if list(seg) == segs]
        assert len(gold_score) == 1
        expected += oracle.log_partition(paths) - gold_score[0]
    assert f == pytest.approx(expected, rel=1e-9)
    eps = 1e-6
    for i in rng.choice(theta.size, 30, replace=False):
        step = np.zeros_like(theta)
        step[i] = eps
        assert g[i] == pytest.approx((objective(theta + step)[0] - objective(theta - step)[0]) / (2 * eps), abs=1e-5)


def test_viterbi_kbest_marginals_equal_enumeration():
    model, X, y = fitted(3)
    rng = np.random.default_rng(3)
    for name in ("token_weights_", "segment_weights_", "transition_weights_", "start_weights_", "end_weights_"):
        setattr(model, name, rng.normal(scale=0.8, size=getattr(model, name).shape))
    sentence = ["Anna", "Smith", "saw", "Oslo"]
    _, _, chunks = model._chunks([sentence])
    ((_, _, _, _, P),) = list(chunks)
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
