"""Log-linear language model (Nelakanti et al. 2013): trie, probabilities, gradients,
training, persistence, CLI."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from varorder.lm import Vocabulary
from varorder.loglinear.model import LogLinearLM, StructuredLogLinear, _loss_and_grad, is_loglinear_model
from varorder.loglinear.trie import build_trie, find_contexts
from varorder.testing.oracle import loglinear_lm_distribution

WORDS = ["a", "b", "c", "d"]


def small_corpus(rng, n_sentences=6, max_len=6):
    vocab = Vocabulary(WORDS)
    ids = [vocab.index[w] for w in WORDS]
    sentences = [list(rng.choice(ids, size=rng.integers(0, max_len + 1))) for _ in range(n_sentences)]
    flat = np.asarray([w for s in sentences for w in s], dtype=np.int64)
    return vocab, sentences, flat, np.asarray([len(s) for s in sentences])


def pairs_of(trie):
    """{(context suffix as a tuple of ids, read left to right), word} of every weight."""
    def context(c):
        words = []
        while c > 0:
            words.append(int(trie.ctx_word[c]))
            c = trie.ctx_parent[c]
        return tuple(words)  # the deepest node holds the leftmost word

    return {(context(c), int(w)): p for c, w, p in zip(trie.param_ctx, trie.param_word, range(trie.n_params))}


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(1, 5))
def test_trie_holds_exactly_the_training_ngrams(seed, order):
    rng = np.random.default_rng(seed)
    vocab, sentences, flat, lengths = small_corpus(rng)
    trie, positions, targets = build_trie(flat, lengths, order, len(vocab), vocab.bos_id, vocab.eos_id)
    trie.validate()
    expected = set()
    for s in sentences:
        padded = [vocab.bos_id] + s + [vocab.eos_id]
        for i in range(1, len(padded)):
            for k in range(0, min(order - 1, i) + 1):
                expected.add((tuple(int(x) for x in padded[i - k:i]), int(padded[i])))
    assert set(pairs_of(trie)) == expected
    again, again_targets = find_contexts(trie, flat, lengths, vocab.bos_id, vocab.eos_id)
    np.testing.assert_array_equal(again, positions)
    np.testing.assert_array_equal(again_targets, targets)


def random_model(seed, order=3, negative=False):
    rng = np.random.default_rng(seed)
    vocab, sentences, flat, lengths = small_corpus(rng)
    trie, positions, targets = build_trie(flat, lengths, order, len(vocab), vocab.bos_id, vocab.eos_id)
    weights = rng.normal(size=trie.n_params) if negative else np.abs(rng.normal(size=trie.n_params))
    return LogLinearLM(vocab, trie, weights), sentences, positions, targets


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(1, 4))
def test_probabilities_match_the_definition_and_sum_to_one(seed, order):
    model, sentences, _, _ = random_model(seed, order, negative=True)
    rng = np.random.default_rng(seed + 1)
    vocab = model.vocabulary
    pairs = pairs_of(model.trie)
    history = [vocab.bos_id] + [int(x) for x in rng.choice([vocab.index[w] for w in WORDS] + [vocab.unk_id], size=rng.integers(0, 4))]
    p = model.distribution(history[1:])
    assert p.sum() == pytest.approx(1.0, abs=1e-12)
    assert p[vocab.bos_id] == 0.0
    expected = loglinear_lm_distribution(sentences, order, lambda c, v: model.weights[pairs[(c, v)]] if (c, v) in pairs else 0.0,
                                         history, len(vocab), vocab.bos_id, vocab.eos_id)
    np.testing.assert_allclose(p, expected, rtol=1e-10, atol=1e-14)


@pytest.mark.parametrize("seed", range(4))
def test_gradient_matches_finite_differences(seed):
    model, _, positions, targets = random_model(seed, order=3, negative=True)
    t, vocab = model.trie, model.vocabulary

    def loss(w, grad=None):
        g = np.zeros_like(w) if grad is None else grad
        return _loss_and_grad(w, positions, targets, t.ctx_parent, t.succ_start, t.succ_word, t.succ_param,
                              model.root_param, vocab.bos_id, g, grad is not None, np.empty(0))

    w = model.weights
    grad = np.zeros_like(w)
    loss(w, grad)
    numeric = np.empty_like(w)
    h = 1e-6
    for i in range(len(w)):
        up, down = w.copy(), w.copy()
        up[i] += h
        down[i] -= h
        numeric[i] = (loss(up) - loss(down)) / (2 * h)
    np.testing.assert_allclose(grad, numeric, atol=1e-8)
