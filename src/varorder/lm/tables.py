"""The layout of :class:`~varorder.lm.model.NgramLM`'s query tables and the read-only view
other modules read them through.

Factorization: none of its own; the tables store ARPA's back-off factors p(x | h) =
f(h x) or bow(h) p(x | h'), (Carter, Dymetman & Bouchard 2012, eq. 7) per order as sorted
packed keys ``prefix_row * V + word`` (int64), ``(log10 p, log10 bow)`` pairs (float32)
and an open-addressing hash of the keys (:mod:`varorder.lm._kernels`).

:class:`TableView` is the public view of one model's tables (no copies): what
:mod:`varorder.lm.maxarpa`, pruning and mixing read instead of the model's private
attributes, so that those modules need not import the model class.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

__all__ = ["kernels", "TableView", "QueryTables", "key_tables_problem", "suffix_rows", "first_words"]

# Hash tables are sized for this load factor: linear probing stays at about 1.5 probes
# for a hit and 2.5 for a miss, while the table costs 16 / 0.67 = 24 bytes per n-gram.
_LOAD_FACTOR = 0.67


def kernels():
    """The Numba kernels, imported on first use: opening a binary model and scoring a few
    sentences (:meth:`NgramLM.token_log10probs` on small inputs) never load Numba, which
    keeps a one-sentence ``varorder lm score`` well under a second."""
    from varorder.lm import _kernels

    return _kernels


class TableView(NamedTuple):
    """One model's tables, read-only by contract (the arrays are the model's own).

    ``keys[m]``: the sorted packed keys of order m + 1 (``keys[0]`` is ``arange(V)``);
    ``log10_probs[m]``, ``log10_backoffs[m]``: their float32 columns; ``hash_rows``,
    ``hash_base``, ``hash_cap``: every order's hash table from bigrams up (order m + 1's
    table is ``hash_rows[hash_base[m - 1] : hash_base[m]]``, capacity ``hash_cap[m - 1]``).
    """

    order: int
    vocab_size: int
    bos_id: int
    eos_id: int
    keys: tuple
    log10_probs: tuple
    log10_backoffs: tuple
    hash_rows: np.ndarray
    hash_base: np.ndarray
    hash_cap: np.ndarray

    def hash_table(self, order: int) -> np.ndarray:
        """The hash table of n-grams of ``order`` (>= 2)."""
        return self.hash_rows[self.hash_base[order - 2]:self.hash_base[order - 1]]


class QueryTables(NamedTuple):
    """An LM's compiled tables in the argument order of the query kernels."""

    vocab_size: int
    hash_rows: np.ndarray
    hash_base: np.ndarray
    hash_cap: np.ndarray
    values: np.ndarray
    value_base: np.ndarray
    max_log10prob: np.ndarray
    max_log10backoff: np.ndarray


def key_tables_problem(keys: Sequence[np.ndarray], vocab_size: int) -> str | None:
    """What is wrong with per-order packed key arrays (``keys[0]`` the unigram ids), or
    None: each order's keys must increase strictly and name prefix rows of the order below."""
    for m in range(1, len(keys)):
        k = keys[m]
        if len(k) and (k[0] < 0 or k[-1] >= len(keys[m - 1]) * vocab_size or bool(np.any(k[1:] <= k[:-1]))):
            return f"the {m + 1}-gram keys are not strictly increasing packed keys"
    return None


def _find_rows(rows: np.ndarray, keys: Sequence[np.ndarray], vocab_size: int, hashes=None) -> np.ndarray:
    """Row indices of word-id rows in the sorted ``keys`` tables, -1 where absent; by
    hash lookups when ``hashes[m]`` (the :func:`build_hash` table of ``keys[m]``) is
    given, else by binary search."""
    index = rows[:, 0].astype(np.int64)
    for position in range(1, rows.shape[1]):
        table = keys[position]
        if len(table) == 0:
            return np.full(len(rows), -1, dtype=np.int64)
        wanted = index * vocab_size + rows[:, position]  # negative once absent: never found
        if hashes is not None:
            kernels().find_many(hashes[position], len(hashes[position]), wanted, index)
            continue
        found_at = np.minimum(np.searchsorted(table, wanted), len(table) - 1)
        index = np.where(table[found_at] == wanted, found_at, -1)
    return index


def _hash_capacity(n_keys: int) -> int:
    return max(8, int(n_keys / _LOAD_FACTOR) + 1)


def suffix_rows(model: "TableView") -> list[np.ndarray | None]:
    """Per order m >= 2, the row one order down of each n-gram's suffix (last m - 1 words)."""
    vocab_size = model.vocab_size
    keys = model.keys
    suffixes: list[np.ndarray | None] = [None]
    for m in range(1, model.order):
        words = keys[m] % vocab_size
        if m == 1:
            suffixes.append(words)
            continue
        # suffix(h w) = suffix(h) w: look up one order down from the prefix's suffix.
        wanted = suffixes[m - 1][keys[m] // vocab_size] * vocab_size + words
        found = np.searchsorted(keys[m - 1], wanted)
        if np.any(found >= len(keys[m - 1])) or np.any(keys[m - 1][np.minimum(found, len(keys[m - 1]) - 1)] != wanted):
            raise AssertionError("model tables are not closed under suffixes")
        suffixes.append(found)
    return suffixes


def first_words(model: "TableView") -> list[np.ndarray]:
    """Per order, the first word of every stored n-gram."""
    first = [np.arange(model.vocab_size, dtype=np.int64)]
    for m in range(1, model.order):
        first.append(first[-1][model.keys[m] // model.vocab_size])
    return first
