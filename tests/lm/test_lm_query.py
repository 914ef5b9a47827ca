"""Querying: batched scoring, single lookups and state minimization against equation 7
evaluated by recursion on the original (unclosed) n-gram dict."""

from __future__ import annotations

import itertools
import math
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from _lm_oracle import backoff_log10prob, random_corpus, random_model, table_of
from varorder.lm import ModifiedKneserNey
from varorder.lm.model import NgramLM


def random_sentences(rng, model, n, max_length=9):
    words = [w for w in range(model.vocab_size) if w not in (model.vocabulary.bos_id, model.vocabulary.eos_id)]
    return [rng.choice(words, size=int(rng.integers(0, max_length + 1))).astype(np.int32) for _ in range(n)]


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), order=st.integers(1, 5), n_words=st.integers(1, 5))
def test_batched_scores_and_lengths_follow_equation_7(seed, order, n_words):
    rng = np.random.default_rng(seed)
    model, table = random_model(rng, n_words, order)
    sentences = random_sentences(rng, model, 12)
    ids = np.concatenate(sentences)
    lengths = np.asarray([len(s) for s in sentences])
    for bos, eos in [(True, True), (False, True), (True, False)]:
        scores, matched = model.token_log10probs(ids, lengths, bos=bos, eos=eos)
        cursor = 0
        for sentence in sentences:
            history = [model.vocabulary.bos_id] if bos else []
            predicted = list(sentence) + ([model.vocabulary.eos_id] if eos else [])
            for word in predicted:
                expected = backoff_log10prob(table, order, history, int(word))
                assert scores[cursor] == pytest.approx(expected, abs=1e-6)
                single, length = model.lookup(history, int(word))
                assert single == pytest.approx(expected, abs=1e-6)
                assert matched[cursor] == length
                # The matched n-gram is the longest stored suffix of history + word.
                assert tuple(history[len(history) - length + 1:] + [int(word)]) in table_of(model) if length > 1 else True
                history.append(int(word))
                cursor += 1
        assert cursor == len(scores)
        per_sentence = model.sentence_log10probs(ids, lengths, bos=bos, eos=eos)
        assert per_sentence.sum() == pytest.approx(scores.sum())


def test_natural_log_and_log10_agree_and_ids_are_checked():
    rng = np.random.default_rng(0)
    model, _ = random_model(rng, 3, 3)
    assert model.logprob([1, 3], 4) == pytest.approx(model.log10prob([1, 3], 4) * math.log(10))
    with pytest.raises(ValueError, match="outside the vocabulary"):
        model.token_log10probs(np.asarray([0, 99]))
    with pytest.raises(ValueError, match="outside the vocabulary"):
        model.log10prob([0], -1)
    with pytest.raises(ValueError, match="sum to len"):
        model.token_log10probs(np.asarray([0, 1]), np.asarray([3]))


@settings(max_examples=10, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), order=st.integers(2, 4))
def test_minimal_state_determines_every_future_score_and_is_minimal(seed, order):
    rng = np.random.default_rng(seed)
    model, table = random_model(rng, 3, order, density=0.5, closed=True)
    # Some stored n-grams are dead ends (no extension): minimization must drop them
    # when their back-off is 1.
    for gram in [g for g in table if 1 < len(g) < order and rng.random() < 0.3]:
        table[gram] = (table[gram][0], 0.0)
    model = rebuild(model, table)
    context_words = [w for w in range(model.vocab_size) if w != model.vocabulary.eos_id]
    continuations = [c for k in range(1, order) for c in itertools.product(range(model.vocab_size), repeat=k)]
    for context in itertools.product(context_words, repeat=order - 1):
        state = model.minimal_state(context)
        assert tuple(context[len(context) - len(state):]) == state if state else True

        def future(history, continuation):
            history = list(history)
            total = 0.0
            for word in continuation:
                total += backoff_log10prob(table, order, history, word)
                history.append(word)
            return total

        for continuation in continuations:
            assert future(state, continuation) == pytest.approx(future(context, continuation), abs=1e-6)
        if state:
            shorter = state[1:]
            assert any(
                abs(future(shorter, c) - future(state, c)) > 1e-6 for c in continuations
            ), f"state {state} of {context} could lose its first word"


def rebuild(model, table):
    ngrams = []
    for m in range(1, model.order + 1):
        items = sorted((k, v) for k, v in table.items() if len(k) == m)
        rows = np.asarray([k for k, _ in items], dtype=np.int64).reshape(-1, m)
        ngrams.append((rows, np.asarray([v[0] for _, v in items]), np.asarray([v[1] for _, v in items])))
    rebuilt = NgramLM.from_ngrams(model.vocabulary, ngrams)
    assert rebuilt.ngram_counts == tuple(sum(1 for k in table if len(k) == m) for m in range(1, model.order + 1))
    return rebuilt


def test_perplexity_is_ten_to_minus_mean_log10_over_words_and_end_markers():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        model = ModifiedKneserNey(order=2).fit_sentences(random_corpus(np.random.default_rng(1), 30, 6)).model_
    sentences = ["t0 t1 t2", "t3 zzz", ""]
    total = sum(model.score_sentence(s) for s in sentences)
    n_predicted = 3 + 1 + 2 + 1 + 0 + 1
    assert model.perplexity(sentences) == pytest.approx(10 ** (-total / n_predicted))
    unk = model.vocabulary.unk_id
    assert model.score_sentence("zzz") == pytest.approx(model.score_sentence([model.vocabulary.words[unk]]))


def test_storage_reports_its_size():
    rng = np.random.default_rng(5)
    model, _ = random_model(rng, 4, 3)
    assert model.nbytes > 0
    assert model.bytes_per_ngram == pytest.approx(model.nbytes / sum(model.ngram_counts))


@pytest.mark.parametrize("seed", range(3))
def test_score_sentences_from_strings_equals_encoding_in_python(seed):

    model, _ = random_model(np.random.default_rng(seed), 5, 3)
    words = [w for w in model.vocabulary.words if w not in ("<s>", "</s>")] + ["oov", "ü"]
    rng = np.random.default_rng(seed + 100)
    sentences = [" ".join(rng.choice(words, size=int(rng.integers(0, 8)))) for _ in range(40)]
    sentences += ["", "  w0\tw1  ", "w0 \u00a0w1", "w0\nw1", "w2\u2003w3"]
    expected = [model.score_sentence(s) for s in sentences]
    np.testing.assert_array_equal(model.score_sentences(sentences), expected)
    ids, lengths = model.vocabulary.encode_lines(sentences[:40])
    np.testing.assert_array_equal(lengths, [len(s.split()) for s in sentences[:40]])
