"""EM for the DMV, the CCM and their product: exact product EM never decreases its objective;
training, parsing and model files."""

from __future__ import annotations

import numpy as np
import pytest

from varorder.grammar.induce import GrammarInducer

TAGS = ["D", "N", "V", "P", "J"]


def _corpus(seed, n_sentences=40):
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n_sentences):
        n = int(rng.integers(1, 7))
        out.append([TAGS[t] for t in rng.integers(0, len(TAGS), size=n)])
    # a little structure: determiner–noun–verb patterns
    out += [["D", "N", "V"], ["D", "J", "N", "V", "D", "N"], ["N", "V", "P", "D", "N"]] * 5
    return out


@pytest.mark.parametrize("model", ["product", "dmv", "ccm"])
@pytest.mark.parametrize("seed", [0, 1])
def test_em_objective_never_decreases(model, seed):
    est = GrammarInducer(model=model, n_iter=8, ccm_smoothing=(0.0, 0.0), shard_size=17).fit(_corpus(seed))
    obj = np.array(est.objectives_)
    assert np.all(np.isfinite(obj))
    assert np.all(np.diff(obj) >= -1e-8 * np.abs(obj[1:])), obj
    assert obj[-1] > obj[0]


def test_product_objective_is_the_log_of_the_summed_product():
    corpus = _corpus(3)
    est = GrammarInducer(model="product", n_iter=2, shard_size=1000).fit(corpus)
    # the objective of the parameters entering iteration 2 equals the agreement log-likelihood
    # of the final parameters only after another E-step: recompute it with the public method
    again = GrammarInducer(model="product", n_iter=3, shard_size=1000).fit(corpus)
    assert again.objectives_[2] == pytest.approx(est.log_likelihood(corpus), rel=1e-10)


@pytest.mark.parametrize("model", ["product", "dmv", "ccm"])
def test_parse_and_model_file_round_trip(model, tmp_path):
    corpus = _corpus(4)
    est = GrammarInducer(model=model, n_iter=2).fit(corpus)
    heads, spans = est.parse(corpus[:10])
    for sentence, h, s in zip(corpus[:10], heads, spans):
        n = len(sentence)
        assert (0, n) in s and all((i, i + 1) in s for i in range(n))
        assert len(s) == 2 * n - 1  # a binary bracketing
        if model == "ccm":
            assert h is None
        else:
            assert sorted(h.tolist()).count(-1) == 1 and all(-1 <= x < n for x in h)
    path = tmp_path / "m.npz"
    est.save(path)
    back = GrammarInducer.load(path)
    h2, s2 = back.parse(corpus[:10])
    assert s2 == spans
    if model != "ccm":
        assert all(np.array_equal(a, b) for a, b in zip(h2, heads))


def test_unknown_tag_and_bad_file_are_reported(tmp_path):
    est = GrammarInducer(model="dmv", n_iter=1).fit([["D", "N"], ["N", "V"]])
    with pytest.raises(ValueError, match="'X' was not seen"):
        est.parse([["D", "X"]])
    bad = tmp_path / "bad.npz"
    bad.write_bytes(b"not a zip")
    with pytest.raises(ValueError, match="bad.npz"):
        GrammarInducer.load(bad)
    with pytest.raises(ValueError, match="model must be one of"):
        GrammarInducer(model="pcfg").fit([["D"]])


@pytest.mark.parametrize("model", ["product", "ccm"])
def test_em_with_ccm_empty_spans_never_decreases_and_survives_a_model_file(model, tmp_path):
    corpus = _corpus(5)
    est = GrammarInducer(model=model, n_iter=6, ccm_smoothing=(0.0, 0.0), ccm_empty_spans=True).fit(corpus)
    obj = np.array(est.objectives_)
    assert np.all(np.diff(obj) >= -1e-8 * np.abs(obj[1:])), obj
    plain = GrammarInducer(model=model, n_iter=6, ccm_smoothing=(0.0, 0.0)).fit(corpus)
    assert not np.allclose(obj, plain.objectives_)  # the option reaches the model
    est.save(tmp_path / "m.npz")
    back = GrammarInducer.load(tmp_path / "m.npz")
    assert back.ccm_empty_spans is True
    assert back.log_likelihood(corpus) == pytest.approx(est.log_likelihood(corpus), rel=1e-12)


@pytest.mark.parametrize("model", ["product", "dmv"])
def test_a_sentence_of_probability_zero_still_gets_a_tree(model):
    # the unsmoothed DMV never saw V and D together: no tree of "V D" has positive probability
    est = GrammarInducer(model=model, n_iter=3).fit([["D", "N"], ["N", "V"], ["D", "N", "V"]])
    assert est.log_likelihood([["V", "D"]]) == -np.inf
    heads, spans = est.parse([["V", "D"], ["D", "N", "V"]])
    assert sorted(heads[0].tolist()) in ([-1, 0], [-1, 1]) and spans[0] == {(0, 1), (1, 2), (0, 2)}
    alone_heads, alone_spans = est.parse([["D", "N", "V"]])
    assert np.array_equal(heads[1], alone_heads[0]) and spans[1] == alone_spans[0]


@pytest.mark.parametrize("empty_spans", [False, True])
def test_ccm_is_mirror_symmetric(empty_spans):
    """The CCM has no built-in direction: trained on the reversed sentences it reaches the same
    objective with every yield reversed and every context's sides swapped."""
    corpus = _corpus(6)
    kw = dict(model="ccm", n_iter=4, ccm_empty_spans=empty_spans)
    a = GrammarInducer(**kw).fit(corpus)
    b = GrammarInducer(**kw).fit([s[::-1] for s in corpus])
    np.testing.assert_allclose(a.objectives_, b.objectives_, rtol=1e-10)
    ca, cb = a.submodels_[0], b.submodels_[0]
    index_b = {y: i for i, y in enumerate(cb.yields_)}
    for i, y in enumerate(ca.yields_[1:], start=1):
        np.testing.assert_allclose(ca.yield_probs_[i], cb.yield_probs_[index_b[y[::-1]]], rtol=1e-9)
    T = len(a.tags_) + 1
    mirrored = np.arange(T * T).reshape(T, T).T.ravel()  # context (l, r) ↔ (r, l)
    np.testing.assert_allclose(ca.context_probs_, cb.context_probs_[mirrored], rtol=1e-9)
