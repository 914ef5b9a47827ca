"""MAX-ARPA: max-backoff weights of every stored n-gram (Carter, Dymetman & Bouchard
2012, "Exact Sampling and Decoding in High-Order Hidden Markov Models", §2.3).

For an order-N model, the max-backoff weight of word x after a context c shorter than
N - 1 words is w(x | c) = max_e p(x | e c) over left extensions e that fill the context
(eq. 2; extension words range over the vocabulary except ``</s>``, which never precedes
a word). The paper's MAX-ARPA table adds two columns to each stored n-gram c x:

* mf(c x)  = w(x | c);
* mbow(c x) = max_e of the total back-off paid from e c x (as a context) down to c x,
  so that for a stored context c and an unstored c x, w(x | c) = mbow(c) p(x | c);
  and for an unstored context, w(x | c) = p(x | c) (eq. 8).

Both are computed from the highest order down. With tables closed under prefixes and
suffixes (which :class:`~varorder.lm.model.NgramLM` guarantees; this module reads them through
its :class:`~varorder.lm.tables.TableView`), for an order-m n-gram c x:

* mbow(c)  = max over y of bow(y c) + mbow(y c), where an unstored y c contributes 0;
* mf(c x)  = max( max over stored y c x of mf(y c x),
                  f(c x) + max over y with y c x unstored of bow(y c) + mbow(y c) ),

in log10; the second maximum walks the y c sorted best-first and stops at the first y
with y c x unstored (see :func:`varorder.lm._kernels.best_unexcluded_extension`), so the
whole table costs time linear in the model size.
"""

from __future__ import annotations

import numpy as np

from varorder.lm import _kernels
from varorder.lm.tables import TableView, first_words, suffix_rows

__all__ = ["compute_max_backoff", "first_words", "suffix_rows"]


def compute_max_backoff(model: TableView) -> tuple[tuple[np.ndarray, ...], tuple[np.ndarray, ...]]:
    """The mf and mbow columns (log10, float64) of every stored n-gram of ``model``, one
    array per order each (the fields of :class:`varorder.lm.model.MaxBackoffTable`)."""
    order = model.order
    vocab_size = model.vocab_size
    eos = model.eos_id
    n_extension_words = vocab_size - 1  # every word but </s> may precede a context
    keys = model.keys
    log10_probs = [p.astype(np.float64) for p in model.log10_probs]
    log10_backoffs = [b.astype(np.float64) for b in model.log10_backoffs]
    suffixes = suffix_rows(model)
    firsts = first_words(model)

    max_prob: list[np.ndarray] = [np.empty(0)] * order
    max_backoff: list[np.ndarray] = [np.empty(0)] * order
    max_prob[order - 1] = log10_probs[order - 1].copy()
    max_backoff[order - 1] = np.zeros(len(keys[order - 1]))
    if order >= 2:
        # A context of order - 1 words cannot be extended: nothing more to pay.
        max_backoff[order - 2] = np.zeros(len(keys[order - 2]))

    for m in range(order - 1, 0, -1):  # m is the order being filled in, 1-based
        index = m - 1
        n_rows = len(keys[index])
        above = m  # index of order m + 1
        above_usable = firsts[above] != eos
        above_groups = suffixes[above][above_usable]
        if m <= order - 2:
            best_above = _group_max(above_groups, (log10_backoffs[above] + max_backoff[above])[above_usable], n_rows)
            stored_extensions = np.bincount(above_groups, minlength=n_rows)
            # Some extension word makes an unstored context, which pays nothing.
            max_backoff[index] = np.where(stored_extensions < n_extension_words, np.maximum(best_above, 0.0), best_above)

        best_stored = _group_max(above_groups, max_prob[above][above_usable], n_rows)

        # Extensions y c of this n-gram's context c (same order) whose y c x is not stored.
        extension_score = log10_backoffs[index] + max_backoff[index]
        if m == 1:
            groups = np.zeros(n_rows, dtype=np.int64)
            ngram_contexts = np.zeros(n_rows, dtype=np.int64)
            n_groups = 1
        else:
            groups = suffixes[index]
            ngram_contexts = keys[index] // vocab_size
            n_groups = len(keys[index - 1])
        members = np.lexsort((-extension_score, groups))
        group_offsets = np.zeros(n_groups + 1, dtype=np.int64)
        np.cumsum(np.bincount(groups, minlength=n_groups), out=group_offsets[1:])
        capacity = int(model.hash_cap[m - 1])  # hash tables start at bigrams: order m + 1 sits at m - 1
        best_unstored = np.empty(n_rows)
        _kernels.best_unexcluded_extension(
            ngram_contexts, keys[index] % vocab_size, group_offsets, members, extension_score,
            firsts[index] == eos, model.hash_table(m + 1), capacity, vocab_size, best_unstored,
        )
        usable_members = np.bincount(groups[firsts[index] != eos], minlength=n_groups)
        unstored_context_exists = usable_members[ngram_contexts] < n_extension_words
        best_unstored = np.where(unstored_context_exists, np.maximum(best_unstored, 0.0), best_unstored)
        with np.errstate(invalid="ignore"):
            max_prob[index] = np.maximum(best_stored, log10_probs[index] + best_unstored)

    return tuple(max_prob), tuple(max_backoff)


def _group_max(groups: np.ndarray, values: np.ndarray, n_groups: int) -> np.ndarray:
    result = np.full(n_groups, -np.inf)
    np.maximum.at(result, groups, values)
    return result
