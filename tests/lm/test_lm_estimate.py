"""Estimation: every conditional distribution sums to one (by enumeration, seen and
unseen contexts), and each estimator equals its textbook definition on dicts."""

from __future__ import annotations

import gzip
import itertools
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from _lm_oracle import InterpolatedReference, random_corpus
from varorder.lm import AbsoluteDiscounting, AdditiveSmoothing, ModifiedKneserNey, count_ngrams, read_corpus

ESTIMATORS = {
    "kneser-ney": lambda order: ModifiedKneserNey(order=order),
    "absolute": lambda order: AbsoluteDiscounting(order=order, discount=0.25, smoothing=0.01),
    "additive": lambda order: AdditiveSmoothing(order=order, alpha=0.5),
}


def fit_quietly(estimator, sentences):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # discount fallback on tiny corpora
        return estimator.fit_sentences(sentences)


def all_contexts(model, length):
    vocabulary = model.vocabulary
    context_words = [w for w in range(len(vocabulary)) if w != vocabulary.eos_id]
    return itertools.product(context_words, repeat=length)


@pytest.mark.parametrize("method", sorted(ESTIMATORS))
@pytest.mark.parametrize("order", [1, 2, 3, 4])
def test_every_context_distribution_sums_to_one(method, order):
    rng = np.random.default_rng(order * 7 + len(method))
    model = fit_quietly(ESTIMATORS[method](order), random_corpus(rng, 25, 4)).model_
    vocabulary = model.vocabulary
    predictable = [w for w in range(len(vocabulary)) if w != vocabulary.bos_id]
    n_checked = 0
    for length in range(order):
        for context in all_contexts(model, length):
            total = sum(10.0 ** model.log10prob(context, w) for w in predictable)
            assert total == pytest.approx(1.0, abs=2e-6), (context, total)
            n_checked += 1
    assert n_checked == sum((len(vocabulary) - 1) ** k for k in range(order))


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 2**32 - 1),
    method=st.sampled_from(sorted(ESTIMATORS)),
    order=st.integers(1, 4),
    n_sentences=st.integers(1, 30),
)
def test_estimators_match_textbook_definitions(seed, method, order, n_sentences):
    rng = np.random.default_rng(seed)
    sentences = random_corpus(rng, n_sentences, 5)
    model = fit_quietly(ESTIMATORS[method](order), sentences).model_
    reference = InterpolatedReference(sentences, order, method, alpha=0.5)
    words = model.vocabulary.words
    for length in range(order):
        for context in itertools.islice(all_contexts(model, length), 60):
            history = tuple(words[i] for i in context)
            for word in range(len(words)):
                expected = reference.prob(history, words[word])
                got = 10.0 ** model.log10prob(context, word)
                assert got == pytest.approx(expected, rel=2e-6, abs=1e-12), (history, words[word])


def test_kneser_ney_discounts_follow_chen_goodman():
    rng = np.random.default_rng(3)
    sentences = random_corpus(rng, 400, 400, max_length=12)
    estimator = ModifiedKneserNey(order=3).fit_sentences(sentences)
    reference = InterpolatedReference(sentences, 3, "kneser-ney")
    assert estimator.fallback_orders_ == []
    for m in (1, 2, 3):
        assert estimator.discounts_[m - 1] == pytest.approx(reference.discounts[m])


def test_tiny_corpus_falls_back_to_default_discounts_with_a_warning():
    with pytest.warns(RuntimeWarning, match="order 1 .*fallback"):
        estimator = ModifiedKneserNey(order=3).fit_sentences(["a"])
    assert estimator.fallback_orders_ == [1, 2, 3]
    assert estimator.discounts_[0] == (0.5, 1.0, 1.5)
    model = estimator.model_
    assert np.isfinite(model.score_sentence("a a b"))


def test_parameters_are_validated():
    with pytest.raises(ValueError, match="order"):
        ModifiedKneserNey(order=11).fit_sentences(["a b"])
    with pytest.raises(ValueError, match="order"):
        AdditiveSmoothing(order=0).fit_sentences(["a b"])
    with pytest.raises(ValueError, match="alpha"):
        AdditiveSmoothing(order=2, alpha=0).fit_sentences(["a b"])
    with pytest.raises(ValueError, match="discount=-1 is invalid: expected a finite number >= 0"):
        AbsoluteDiscounting(order=2, discount=-1).fit_sentences(["a b"])
    with pytest.raises(ValueError, match="discount_fallback"):
        ModifiedKneserNey(order=2, discount_fallback=(0.5, 2.5, 1.0)).fit_sentences(["a b"])


def test_order_ten_works():
    model = fit_quietly(ModifiedKneserNey(order=10), ["a b c d e f g h i j k l"] * 3 + ["a b a b"]).model_
    assert model.order == 10
    ids = model.vocabulary.encode("a b c d e f g h i j k l".split())
    _, lengths = model.token_log10probs(ids)
    assert lengths.max() == 10


def test_counts_of_a_known_corpus(tmp_path):
    path = tmp_path / "c.txt"
    path.write_text("a b\na\n")
    vocabulary, ids, lengths = read_corpus(path)
    counts = count_ngrams(ids, lengths, 3, vocabulary)
    words = vocabulary.words
    as_dict = {}
    for m in range(3):
        rows = np.arange(len(words)).reshape(-1, 1)
        for k in range(1, m + 1):
            keys = counts.keys[k]
            rows = np.concatenate([rows[keys // len(words)], (keys % len(words)).reshape(-1, 1)], axis=1)
        for row, c in zip(rows, counts.counts[m]):
            if c:
                as_dict[" ".join(words[i] for i in row)] = int(c)
    assert as_dict == {
        "<s>": 2, "a": 2, "b": 1, "</s>": 2,
        "<s> a": 2, "a b": 1, "b </s>": 1, "a </s>": 1,
        "<s> a b": 1, "a b </s>": 1, "<s> a </s>": 1,
    }


def test_corpus_reading_gzip_cutoff_and_marker_errors(tmp_path):
    path = tmp_path / "corpus.txt.gz"
    with gzip.open(path, "wt") as handle:
        handle.write("the cat sat\n\nthe dog sat\nthe end\n")
    vocabulary, ids, lengths = read_corpus(path, min_count=2)
    assert list(lengths) == [3, 3, 2]  # the blank line is skipped
    assert vocabulary.words[:5] == ("<unk>", "<s>", "</s>", "the", "sat")
    assert vocabulary.decode(ids) == "the <unk> sat the <unk> sat the <unk>".split()
    bad = tmp_path / "bad.txt"
    bad.write_text("fine line\nhas <s> inside\n")
    with pytest.raises(ValueError, match=r"bad\.txt:2: .*<s>"):
        read_corpus(bad)
