"""Plaintext transition tables of the decipherment HMM (Steinhardt & Liang 2015, §6, App. B).

Factorization: p(y_1 .. y_L) = Π_i p(y_i | y_{i-n} .. y_{i-1}) · p(</s> | y_{L-n+1} .. y_L)
over the K plaintext words, an n-th order chain (n = 1 or 2) whose conditionals come from
an interpolated absolute-discounting LM of order n + 1 estimated on the plaintext
(:class:`varorder.lm.AbsoluteDiscounting`, discount 0.25 and smoothing 0.01 as App. B).

The LM also predicts ``<unk>`` (plaintext words outside the K-word list); the hidden chain
ranges over the K words only, so every conditional is renormalised over the K words and
``</s>``, which keeps p(y) a distribution over in-list sentences. When the word list ends
with ``<unk>`` (lenient preparation, :mod:`varorder.decipher.data`) that word is hidden
state K − 1 and scores with the LM's own ``<unk>`` estimates.

RCMS contexts that leave history free (★) need a transition score and the paper is silent
on it: a context that fixes only the previous word scores with the LM's bigram
distribution p(y | y_{i-1}) (the back-off estimate the trigram interpolates with), and the
context that fixes nothing with the unigram distribution. Both are renormalised likewise.

Storage (log natural base; index K stands for ``<s>`` as a context and ``</s>`` as a word):

* ``log_unigram`` (K + 1,): p(w), w a word or ``</s>``;
* ``log_bigram`` (K + 1, K + 1): row v (a word, or K = ``<s>``), p(w | v);
* 2nd order only, the trigram p(w | u v): a seen context (u v) (``context_row`` ≥ 0)
  scores ``log_gamma[r] + log_bigram_raw[v, w] − log_norm[r]`` except at its seen words
  ``trigram_words[trigram_offsets[r]:trigram_offsets[r + 1]]`` which carry their own
  ``trigram_logp``; an unseen context backs off with weight 1, i.e. scores ``log_bigram``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numba as nb
import numpy as np

from varorder.errors import ParameterError
from varorder.lm import AbsoluteDiscounting, Vocabulary
import varorder._numba_start  # noqa: E402,F401,I001  (Numba's cache saves locked across processes)

__all__ = ["TransitionTables", "fit_transitions"]

LN10 = np.log(10.0)


@dataclass
class TransitionTables:
    """Log transition tables of an ``order``-th order plaintext chain over ``num_words`` words."""

    order: int
    num_words: int
    log_unigram: np.ndarray
    log_bigram: np.ndarray
    log_bigram_raw: np.ndarray
    context_row: np.ndarray
    log_gamma: np.ndarray
    log_norm: np.ndarray
    trigram_offsets: np.ndarray
    trigram_words: np.ndarray
    trigram_logp: np.ndarray

    def arrays(self):
        """The tables in the argument order of the compiled scorers."""
        return (self.log_unigram, self.log_bigram, self.log_bigram_raw, self.context_row, self.log_gamma,
                self.log_norm, self.trigram_offsets, self.trigram_words, self.trigram_logp)

    def logprob(self, history, word: int) -> float:
        """log p(word | history) with history a sequence of word ids (K = ``<s>``), full length."""
        row = np.empty(self.num_words + 1)
        h = list(history)[-self.order:] if self.order else []
        u = h[-2] if len(h) >= 2 else -1
        v = h[-1] if len(h) >= 1 else -1
        length = len(h)
        context_row_weights(u, v, min(length, self.order), self.num_words, *self.arrays(), row)
        return float(row[word])


@nb.njit(cache=True, nogil=True)
def context_row_weights(u, v, length, K, log_unigram, log_bigram, log_bigram_raw, context_row, log_gamma,
                        log_norm, trigram_offsets, trigram_words, trigram_logp, out):
    """Fill ``out`` (K + 1,) with log p(w | context) for a context fixing its last ``length``
    symbols (… u v); K as u or v is ``<s>``. Length 0 → unigram, 1 → bigram of v, 2 → trigram."""
    if length == 0:
        out[:] = log_unigram
        return
    if length == 1 or v == K:
        out[:] = log_bigram[v]
        return
    r = context_row[u * K + v]
    if r < 0:
        out[:] = log_bigram[v]
        return
    shift = log_gamma[r] - log_norm[r]
    for w in range(K + 1):
        out[w] = log_bigram_raw[v, w] + shift
    for q in range(trigram_offsets[r], trigram_offsets[r + 1]):
        out[trigram_words[q]] = trigram_logp[q] - log_norm[r]


def fit_transitions(words, sentences, order: int, discount: float = 0.25, smoothing: float = 0.01) -> TransitionTables:
    """Estimate the chain of ``order`` (1 or 2) from plaintext ``sentences`` (token lists).

    ``words`` are the K hidden-state words in id order; tokens outside them are ``<unk>``
    to the LM (they shape its counts but are no hidden state unless ``words`` ends with
    ``<unk>``, which makes it hidden word K − 1).
    """
    if order not in (1, 2):
        raise ParameterError(f"order must be 1 or 2, got {order!r}", name='order', value=order)
    words = list(words)
    K = len(words)
    vocabulary = Vocabulary(words)
    unk_is_hidden = bool(words) and words[-1] == "<unk>"
    if len(vocabulary) != K + 3 - unk_is_hidden:
        raise ParameterError("the plaintext word list must not contain <s> or </s>, nor <unk> except as its last word", name='words', value=words)
    ids, lengths = vocabulary.encode_sentences(sentences)
    if len(lengths) == 0:
        raise ParameterError("no plaintext sentences to estimate the transitions from", name='sentences', value=sentences)
    lm = AbsoluteDiscounting(order=order + 1, discount=discount, smoothing=smoothing).fit_ids(ids, lengths, vocabulary).model_
    bos, eos = vocabulary.bos_id, vocabulary.eos_id
    # LM id of each table index: words 0..K-1, then </s> (as a word) / <s> (as a context)
    predicted = np.concatenate([np.arange(K), [eos]]).astype(np.int64)
    contexts = np.concatenate([np.arange(K), [bos]]).astype(np.int64)
    uni, _ = lm.lookup_grid(np.zeros(0, np.int64), np.zeros(2, np.int64), predicted)
    log_unigram = _normalise(uni[0] * LN10)
    bi, _ = lm.lookup_grid(contexts, np.arange(K + 2, dtype=np.int64), predicted)
    log_bigram_raw = bi * LN10
    log_bigram = _normalise(log_bigram_raw)
    to_table = np.full(len(vocabulary), -1, dtype=np.int64)
    to_table[:K] = np.arange(K)
    to_table[bos] = K
    to_word = np.full(len(vocabulary), -1, dtype=np.int64)
    to_word[:K] = np.arange(K)
    to_word[eos] = K
    context_row = np.full((K + 1) * K, -1, dtype=np.int64)
    empty_f, empty_i = np.zeros(0), np.zeros(0, dtype=np.int64)
    log_gamma, log_norm, offsets, tri_words, tri_logp = empty_f, empty_f, np.zeros(1, np.int64), empty_i, empty_f
    if order == 2:
        rows2, _, backoff2 = lm.ngrams(2)
        u2, v2 = to_table[rows2[:, 0]], to_table[rows2[:, 1]]
        keep2 = (u2 >= 0) & (v2 >= 0) & (v2 < K)
        u2, v2, log_gamma = u2[keep2], v2[keep2], backoff2[keep2] * LN10
        context_row[u2 * K + v2] = np.arange(len(u2))
        rows3, logp3, _ = lm.ngrams(3)
        u3, v3, w3 = to_table[rows3[:, 0]], to_table[rows3[:, 1]], to_word[rows3[:, 2]]
        keep3 = (u3 >= 0) & (v3 >= 0) & (v3 < K) & (w3 >= 0)
        r3 = context_row[u3[keep3] * K + v3[keep3]]
        if (r3 < 0).any():
            raise AssertionError("a stored trigram's context is missing from the bigram table")
        order3 = np.argsort(r3, kind="stable")
        r3, tri_words, tri_logp = r3[order3], w3[keep3][order3], logp3[keep3][order3] * LN10
        offsets = np.zeros(len(u2) + 1, dtype=np.int64)
        np.cumsum(np.bincount(r3, minlength=len(u2)), out=offsets[1:])
        # normaliser over the K words and </s>: gamma · Σ_w p(w|v) with the seen words replaced
        backed = np.exp(log_gamma[r3] + log_bigram_raw[v2[r3], tri_words])
        seen_mass = np.bincount(r3, weights=np.exp(tri_logp) - backed, minlength=len(u2))
        total = np.exp(log_gamma) * np.exp(log_bigram_raw[v2]).sum(axis=1) + seen_mass
        log_norm = np.log(total)
    return TransitionTables(order, K, log_unigram, log_bigram, log_bigram_raw, context_row, log_gamma, log_norm,
                            offsets, tri_words.astype(np.int64), tri_logp)


def _normalise(log_rows: np.ndarray) -> np.ndarray:
    m = log_rows.max(axis=-1, keepdims=True)
    return log_rows - (m + np.log(np.exp(log_rows - m).sum(axis=-1, keepdims=True)))
