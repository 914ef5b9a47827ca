"""Numba: one stateful query of the kenlm-compatible API (:mod:`varorder.lm.kenlm`) in one
compiled call: log10 p(word | state) by ARPA's back-off recursion (Carter, Dymetman &
Bouchard 2012, eq. 7) and the minimal state after the word (KenLM's right state: the
longest suffix of state + word that is stored and extends or has a back-off other than 1,
as :meth:`varorder.lm.model.NgramLM.minimal_state`)."""

from __future__ import annotations

import sys

import numba
import numpy as np

import varorder._numba_start  # noqa: F401  (before any kernel's first call: see the module)
from varorder.lm._kernels import backoff_log10prob, checked_row, find_ngram


@numba.njit(cache=True)
def base_full_score(context, word, order, vocab_size, hash_rows, hash_base, hash_cap, values, value_base, extends):
    """``(log10 p(word | context), n-gram length, words of context + word to keep as the
    next state)``; ``context`` holds at most order - 1 words."""
    log10prob, length = backoff_log10prob(context, word, vocab_size, hash_rows, hash_base, hash_cap, values,
                                          value_base)
    n = context.shape[0] + 1
    extended = np.empty(n, dtype=np.int64)
    extended[:n - 1] = context
    extended[n - 1] = word
    for start in range(max(0, n - (order - 1)), n):
        size = n - start
        row = checked_row(find_ngram(extended[start:], vocab_size, hash_rows, hash_base, hash_cap), value_base, size)
        if row < 0:
            continue
        flat = value_base[size - 1] + row
        if extends[flat] or values[flat, 1] != 0.0:
            return log10prob, length, size
    return log10prob, length, 0


# cached kernels load without refreshing Numba's registries (see varorder._numba_start)
varorder._numba_start.load_without_refresh(sys.modules[__name__])
