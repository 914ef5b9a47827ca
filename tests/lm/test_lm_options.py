"""Estimation options a KenLM user relies on: per-order count pruning, a limited
vocabulary, explicit discount fallback, KenLM's reading of -99, next-word distributions;
checked by enumerating every context's distribution and against the unpruned model."""

from __future__ import annotations

import itertools
import math
import warnings

import numpy as np
import pytest

from _lm_oracle import random_corpus, table_of
from varorder.lm.arpa import read_arpa
from varorder.lm import ModifiedKneserNey, count_ngrams, read_corpus


def fit(sentences, **options):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return ModifiedKneserNey(**options).fit_sentences(sentences)


def assert_distributions_sum_to_one(model):
    vocabulary = model.vocabulary
    predictable = [w for w in range(len(vocabulary)) if w != vocabulary.bos_id]
    context_words = [w for w in range(len(vocabulary)) if w != vocabulary.eos_id]
    for length in range(model.order):
        for context in itertools.product(context_words, repeat=length):
            total = sum(10.0 ** model.log10prob(context, w) for w in predictable)
            assert total == pytest.approx(1.0, abs=3e-6), (context, total)


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("prune", [(0, 1), (0, 0, 1), (0, 1, 2)])
def test_pruned_model_is_normalised_and_drops_rare_ngrams(seed, prune):
    sentences = random_corpus(np.random.default_rng(seed), 40, 5)
    full = fit(sentences, order=3).model_
    pruned = fit(sentences, order=3, prune=prune).model_
    assert_distributions_sum_to_one(pruned)
    vocabulary, ids, lengths = read_corpus_from(sentences)
    counts = count_ngrams(ids, lengths, 3, vocabulary)
    thresholds = list(prune) + [prune[-1]] * (3 - len(prune))
    stored = table_of(pruned)
    for m in range(1, 3):
        for key, count in zip(counts.keys[m], counts.counts[m]):
            ngram = unpack(key, m + 1, counts)
            assert (ngram in stored) == (count > thresholds[m]), (ngram, count)
    if thresholds[1] == 0:
        # Only the highest order is pruned: lower orders keep their values; a kept trigram
        # h w gains (gamma'(h) - gamma(h)) p(w | h') from the mass its pruned siblings freed.
        full_table = table_of(full)
        for ngram, (log10prob, log10backoff) in stored.items():
            if len(ngram) < 3:
                assert log10prob == full_table[ngram][0]
            else:
                gained = 10.0 ** stored[ngram[:2]][1] - 10.0 ** full_table[ngram[:2]][1]
                lower = 10.0 ** full.log10prob(ngram[1:2], ngram[2])
                assert 10.0 ** log10prob == pytest.approx(10.0 ** full_table[ngram][0] + gained * lower, rel=1e-5)


def read_corpus_from(sentences):
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "c.txt"
        path.write_text("\n".join(sentences) + "\n")
        return read_corpus(path)


def unpack(key, order, counts):
    vocab_size = len(counts.vocabulary)
    words = []
    for m in range(order - 1, 0, -1):
        words.append(int(key % vocab_size))
        key = counts.keys[m - 1][key // vocab_size] if m > 1 else key // vocab_size
    words.append(int(key))
    return tuple(reversed(words))


def test_prune_zero_is_the_unpruned_model():
    sentences = random_corpus(np.random.default_rng(4), 40, 5)
    assert table_of(fit(sentences, order=3, prune=[0, 0, 0]).model_) == table_of(fit(sentences, order=3).model_)


@pytest.mark.parametrize("prune", [(1,), (0, 2, 1), (0, -1)])
def test_bad_prune_thresholds_are_refused(prune):
    with pytest.raises(ValueError, match="prune"):
        ModifiedKneserNey(order=3, prune=prune).fit_sentences(["a b c"] * 10)


@pytest.mark.parametrize("seed", range(3))
def test_limited_vocabulary_keeps_only_listed_words(seed):
    sentences = random_corpus(np.random.default_rng(seed + 10), 50, 6)
    allowed = {"t0", "t1", "t3", "not-in-corpus"}
    model = fit(sentences, order=3, limit_vocab=allowed).model_
    assert set(model.vocabulary.words) == {"t0", "t1", "t3", "<unk>", "<s>", "</s>"}
    assert_distributions_sum_to_one(model)
    # <unk> now stands for the dropped words: it carries their unigram mass.
    full = fit(sentences, order=3).model_
    full_unigram = {w: 10.0 ** full.log10prob([], full.vocabulary.index[w]) for w in full.vocabulary.words}
    dropped = sum(p for w, p in full_unigram.items() if w not in model.vocabulary.index)
    got = 10.0 ** model.log10prob([], model.vocabulary.unk_id)
    assert got == pytest.approx(full_unigram["<unk>"] + dropped, rel=1e-6)


def test_discount_fallback_must_be_asked_for():
    with pytest.raises(ValueError, match="discount-fallback"):
        ModifiedKneserNey(order=2, discount_fallback=None).fit_sentences(["a b"])
    estimator = fit(["a b"], order=2, discount_fallback=(0.4, 0.9, 1.3))
    assert estimator.discounts_[0] == (0.4, 0.9, 1.3)


MINUS_99_ARPA = """\\data\\
ngram 1=4

\\1-grams:
-99\t<s>
-0.5\t</s>
-0.3\ta
-99\tb

\\end\\
"""


def test_minus_99_reading(tmp_path):
    path = tmp_path / "m.arpa"
    path.write_text(MINUS_99_ARPA)
    zero = read_arpa(path)
    literal = read_arpa(path, minus_99="literal")
    b = zero.vocabulary.index["b"]
    assert zero.log10prob([], b) == -math.inf
    assert literal.log10prob([], b) == -99.0
    with pytest.raises(ValueError, match="minus_99"):
        read_arpa(path, minus_99="kenlm")


def test_next_word_distribution_matches_lookups():
    model = fit(random_corpus(np.random.default_rng(2), 60, 6), order=3).model_
    distribution = model.next_word_log10probs("t0 t1")
    context = [model.vocabulary.index[w] for w in ("t0", "t1")]
    for word in range(model.vocab_size):
        assert distribution[word] == model.log10prob(context, word)
    without_bos = model.vocabulary.bos_id
    total = sum(10.0 ** p for w, p in enumerate(distribution) if w != without_bos)
    assert total == pytest.approx(1.0, abs=2e-6)
    with_bos = model.next_word_log10probs([], bos=True)
    assert with_bos[3] == model.log10prob([model.vocabulary.bos_id], 3)
