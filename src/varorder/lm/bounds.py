"""MAX-ARPA bounds of an n-gram model (Carter, Dymetman & Bouchard 2012, "Exact Sampling
and Decoding in High-Order Hidden Markov Models", §2.3): the queries of the max-backoff
weight w(x | c) = max_e p(x | e c) over left extensions e (eq. 2, computed by eq. 8),
one at a time or batched, and the compiled tables for Numba code that bounds in its own
loops. The columns themselves are computed by :mod:`varorder.lm.maxarpa`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from varorder.errors import ParameterError
from varorder.lm.tables import QueryTables, kernels

__all__ = ["MaxBackoffTable", "MaxBackoffBounds"]

LN10 = math.log(10.0)


@dataclass(frozen=True)
class MaxBackoffTable:
    """The two MAX-ARPA columns of Carter et al. (2012), §2.3, per order (log10).

    ``max_log10prob[m][i]`` (mf) is the largest log10 p(x | e c) over every left extension
    e of the context of the i-th stored (m+1)-gram c x; ``max_log10backoff[m][i]`` (mbow)
    is the largest total log10 back-off paid on the way down from any left extension of
    that n-gram, used as a context, to the n-gram itself. Extensions range over every
    vocabulary word except ``</s>`` (which never precedes a word) and fill the context to
    order - 1 words.
    """

    max_log10prob: tuple[np.ndarray, ...]
    max_log10backoff: tuple[np.ndarray, ...]


class MaxBackoffBounds:
    """The MAX-ARPA queries of :class:`~varorder.lm.model.NgramLM` (a base class of it:
    they use its lookups, checks and :meth:`~varorder.lm.model.NgramLM.table_view`)."""

    def max_backoff(self) -> MaxBackoffTable:
        """The MAX-ARPA columns (computed once, then cached)."""
        if self._max_backoff is None:
            from varorder.lm.maxarpa import compute_max_backoff

            self._ensure_keys()
            max_prob, max_backoff = compute_max_backoff(self.table_view())
            self._max_backoff = MaxBackoffTable(max_prob, max_backoff)
        return self._max_backoff

    def set_max_backoff(self, table: MaxBackoffTable) -> None:
        """Attach MAX-ARPA columns read from a file (shapes are checked)."""
        for m in range(self.order):
            n = len(self._keys[m])
            if len(table.max_log10prob[m]) != n or len(table.max_log10backoff[m]) != n:
                raise ParameterError(f"order {m + 1}: MAX-ARPA columns have the wrong length", name='table', value=table)
        self._max_backoff = table

    def max_log10prob(self, context: Sequence[int], word: int) -> float:
        """log10 of w(word | context) = max over left extensions e of p(word | e context)
        (Carter et al. 2012, eq. 2, computed by eq. 8), for any context, stored or not.

        Extensions fill the context up to order - 1 words with any word but ``</s>``.
        """
        context = self._context_array(context)
        word = self._check_word(word)
        table = self.max_backoff()
        ngram_row = self._row_of(np.append(context, word))
        if ngram_row >= 0:
            return float(table.max_log10prob[len(context)][ngram_row])
        log10prob = self.lookup(context, word)[0]
        context_row = self._row_of(context)
        if context_row < 0:
            # No stored left extension of an absent context: every one backs off to it.
            return log10prob
        return float(table.max_log10backoff[len(context) - 1][context_row]) + log10prob

    def max_logprob(self, context: Sequence[int], word: int) -> float:
        """Natural-log version of :meth:`max_log10prob`."""
        return self.max_log10prob(context, word) * LN10

    def query_tables(self) -> "QueryTables":
        """The compiled lookup tables, for Numba code that queries the LM in its own loops
        (:func:`varorder.lm._kernels.backoff_log10prob` and
        :func:`~varorder.lm._kernels.max_backoff_log10prob` take them in this order)."""
        table = self.max_backoff()
        if getattr(self, "_max_flat_of", None) is not table:
            # One flat column per MAX-ARPA field, addressed like ``_values`` by order base.
            self._max_flat = (np.concatenate(table.max_log10prob).astype(np.float64),
                              np.concatenate(table.max_log10backoff).astype(np.float64))
            self._max_flat_of = table
        return QueryTables(self.vocab_size, self._hash_rows, self._hash_base, self._hash_cap, self._values,
                           self._value_base, self._max_flat[0], self._max_flat[1])

    def max_log10probs(self, contexts: Sequence[Sequence[int]], words: Sequence[int]) -> np.ndarray:
        """Batched :meth:`max_log10prob` (M,) for M (context, word) queries in one compiled
        call (the same eq. 8 case analysis, per query)."""
        flat, offsets, words = self._flat_queries(contexts, words)
        out = np.empty(len(words))
        try:
            kernels().batched_max_log10prob(flat, offsets, words, *self.query_tables(), out)
        except ValueError as error:
            raise self._corrupt(error) from None
        return out

    def max_logprobs(self, contexts: Sequence[Sequence[int]], words: Sequence[int]) -> np.ndarray:
        """Natural-log version of :meth:`max_log10probs`."""
        return self.max_log10probs(contexts, words) * LN10
