"""MAX-ARPA: every max-backoff value equals the brute-force maximum over all left
extensions of the context (Carter et al. 2012, eq. 2), for every order and context."""

from __future__ import annotations

import itertools
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from _lm_oracle import brute_force_max_log10prob, random_corpus, random_model, table_of
from varorder.lm import AbsoluteDiscounting, ModifiedKneserNey


def check_against_brute_force(model, table):
    vocabulary = model.vocabulary
    extension_words = [w for w in range(model.vocab_size) if w != vocabulary.eos_id]
    n_checked = 0
    for length in range(model.order):
        for context in itertools.product(extension_words, repeat=length):
            for word in range(model.vocab_size):
                expected = brute_force_max_log10prob(table, model.order, context, word, extension_words)
                got = model.max_log10prob(context, word)
                if np.isneginf(expected):
                    assert np.isneginf(got)
                else:
                    assert got == pytest.approx(expected, abs=1e-9), (context, word)
                n_checked += 1
    # The mf column itself, for each stored n-gram.
    mf = model.max_backoff().max_log10prob
    for order in range(1, model.order + 1):
        rows, _, _ = model.ngrams(order)
        for row, value in zip(rows.tolist(), mf[order - 1]):
            expected = brute_force_max_log10prob(table, model.order, row[:-1], row[-1], extension_words)
            assert value == pytest.approx(expected, abs=1e-9) or (np.isneginf(value) and np.isneginf(expected))
    return n_checked


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), order=st.integers(1, 4), n_words=st.integers(1, 3), density=st.floats(0.2, 0.9))
def test_max_backoff_of_random_models_equals_brute_force(seed, order, n_words, density):
    # Random back-offs include positive ones, so the max back-off recursion really works.
    # Brute force runs on the model's own closed table: closure itself is tested in
    # test_lm_query against the unclosed dict.
    model, _ = random_model(np.random.default_rng(seed), n_words, order, density=density)
    assert check_against_brute_force(model, table_of(model)) > 0


@pytest.mark.parametrize("order", [2, 3, 4])
@pytest.mark.parametrize("n_words", [1, 2])
def test_max_backoff_when_every_extension_is_stored_with_a_penalty(order, n_words):
    # Every context's left extensions are all stored with negative back-offs: the pure
    # back-off path (paying nothing) is then not available, and mbow must be negative.
    model, _ = random_model(np.random.default_rng(order), n_words, order, density=1.0, max_backoff=-0.05)
    table = table_of(model)
    check_against_brute_force(model, table)
    if order >= 3:
        # <s> and </s> are never preceded by a word in the table, so only they pay nothing.
        plain = [w for w in range(model.vocab_size) if w not in (model.vocabulary.bos_id, model.vocabulary.eos_id)]
        assert np.all(model.max_backoff().max_log10backoff[0][plain] < 0)


@pytest.mark.parametrize("order", [2, 3, 4])
def test_max_backoff_of_estimated_models_equals_brute_force(order):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        corpus = random_corpus(np.random.default_rng(order), 20, 3)
        for estimator in (ModifiedKneserNey(order=order), AbsoluteDiscounting(order=order)):
            model = estimator.fit_sentences(corpus).model_
            check_against_brute_force(model, table_of(model))


def test_max_backoff_bounds_the_full_context_probability():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        model = ModifiedKneserNey(order=3).fit_sentences(random_corpus(np.random.default_rng(9), 60, 8)).model_
    rng = np.random.default_rng(1)
    for _ in range(200):
        context = list(rng.integers(3, model.vocab_size, size=2))
        word = int(rng.integers(2, model.vocab_size))
        exact = model.log10prob(context, word)
        assert model.max_log10prob(context[1:], word) >= exact - 1e-12
        assert model.max_log10prob([], word) >= model.max_log10prob(context[1:], word) - 1e-12
