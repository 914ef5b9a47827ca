"""Building :class:`~varorder.lm.model.NgramLM`'s tables from word-id rows: sorting into
packed keys, closing the tables under prefixes and suffixes (what KenLM also enforces)
and hashing each order as soon as its keys are known.

Factorization: the back-off recursion of ARPA models (Carter, Dymetman & Bouchard 2012,
eq. 7); an entry inserted to close the tables gets the probability back-off gave it,
bow(h) p(x | h'), and a back-off weight of 1, so no score changes beyond float32 rounding.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from varorder.errors import FormatError
from varorder.lm.corpus import Vocabulary
from varorder.lm.tables import _find_rows, _hash_capacity, kernels

__all__ = ["from_ngrams", "unique_rows"]

if TYPE_CHECKING:
    from varorder.lm.model import NgramLM


def from_ngrams(
    cls: type,
    vocabulary: Vocabulary,
    ngrams: Sequence[tuple[np.ndarray, np.ndarray, np.ndarray]],
    *,
    source: str | None = None,
    line_numbers: Sequence[np.ndarray] | None = None,
) -> "NgramLM":
    """Build a model from word-id rows.

    Parameters
    ----------
    vocabulary : Vocabulary
    ngrams : sequence of ``(rows, log10_probs, log10_backoffs)``
        ``ngrams[m]`` has ``rows`` of shape (n, m + 1); ``ngrams[0]`` must list every
        vocabulary word exactly once (any order).
    source, line_numbers : optional
        A file name and, per order, the line of each row, so that errors (a duplicate
        n-gram) name the file and line.

    N-grams whose prefix or suffix is missing get that prefix or suffix inserted with
    its back-off probability and a back-off weight of 1: scores change only by the
    float32 rounding of those values (about 1e-7), and
    lookups may stop at the first miss.
    """
    order = len(ngrams)
    vocab_size = len(vocabulary)

    def where(m: int, row: int) -> str:
        if source is None or line_numbers is None:
            return f"order {m + 1}, row {row}"
        return f"{source}:{int(line_numbers[m][row])}"

    unigram_rows, unigram_probs, unigram_backoffs = ngrams[0]
    unigram_ids = np.asarray(unigram_rows).reshape(-1)
    if len(unigram_ids) != vocab_size or not np.array_equal(np.sort(unigram_ids), np.arange(vocab_size)):
        seen = np.bincount(unigram_ids, minlength=vocab_size)
        duplicate = np.flatnonzero(seen > 1)
        if duplicate.size:
            row = int(np.flatnonzero(unigram_ids == duplicate[0])[1])
            raise FormatError(f"{where(0, row)}: duplicate unigram {vocabulary.words[duplicate[0]]!r}")
        raise FormatError("the unigram table must list every vocabulary word exactly once")
    log10_probs = [np.empty(vocab_size, np.float64)]
    log10_backoffs = [np.empty(vocab_size, np.float64)]
    log10_probs[0][unigram_ids] = unigram_probs
    log10_backoffs[0][unigram_ids] = unigram_backoffs

    rows = [unigram_ids.reshape(-1, 1).astype(np.int64)]
    for m in range(1, order):
        m_rows, m_probs, m_backoffs = ngrams[m]
        rows.append(np.asarray(m_rows, dtype=np.int64).reshape(-1, m + 1))
        log10_probs.append(np.asarray(m_probs, dtype=np.float64))
        log10_backoffs.append(np.asarray(m_backoffs, dtype=np.float64))
    closed = _keys_if_closed(rows, vocab_size)
    if closed is not None:
        # The common case (files from estimators): nothing to insert, keys found by
        # binary search instead of sorting every order's rows with their candidates.
        keys, permutations, hashes = closed
        return cls(vocabulary, keys, [log10_probs[0]] + [log10_probs[m][permutations[m]] for m in range(1, order)],
                   [log10_backoffs[0]] + [log10_backoffs[m][permutations[m]] for m in range(1, order)],
                   hashes=hashes)
    inserted = [np.zeros(len(r), dtype=bool) for r in rows]

    # Close under prefixes and suffixes, highest order first so that inserted rows
    # get their own prefixes and suffixes checked one order down.
    for m in range(order - 1, 0, -1):
        candidates = np.concatenate([rows[m][:, :-1], rows[m][:, 1:]])
        candidates = unique_rows(candidates)
        if m == 1:
            continue  # unigrams are the whole vocabulary
        present = _row_set_contains(rows[m - 1], candidates)
        missing = candidates[~present]
        if len(missing):
            rows[m - 1] = np.concatenate([rows[m - 1], missing])
            log10_probs[m - 1] = np.concatenate([log10_probs[m - 1], np.full(len(missing), np.nan)])
            log10_backoffs[m - 1] = np.concatenate([log10_backoffs[m - 1], np.zeros(len(missing))])
            inserted[m - 1] = np.concatenate([inserted[m - 1], np.ones(len(missing), dtype=bool)])

    keys = [np.arange(vocab_size, dtype=np.int64)]
    sorted_probs = [log10_probs[0]]
    sorted_backoffs = [log10_backoffs[0]]
    for m in range(1, order):
        prefix_rows = _rows_to_indices(rows[m][:, :-1], keys, vocab_size)
        m_keys = prefix_rows * vocab_size + rows[m][:, -1]
        permutation = np.argsort(m_keys, kind="stable")
        m_keys = m_keys[permutation]
        duplicate = np.flatnonzero(m_keys[1:] == m_keys[:-1])
        if duplicate.size:
            original = permutation[duplicate[0] + 1]
            words = " ".join(vocabulary.decode(rows[m][original]))
            raise FormatError(f"{where(m, int(original))}: duplicate {m + 1}-gram {words!r}")
        keys.append(m_keys)
        probs = log10_probs[m][permutation]
        backoffs = log10_backoffs[m][permutation]
        filled = inserted[m][permutation]
        if filled.any():
            # p(x | h) of an inserted h x is what back-off gave before insertion:
            # bow(h) + log10 p(x | h minus its first word).
            lower = cls(vocabulary, keys[:m], sorted_probs, sorted_backoffs)
            for index in np.flatnonzero(filled):
                ngram = rows[m][permutation[index]]
                context_row = lower._row_of(ngram[:-1])
                backoff = float(lower._values[lower._value_base[m - 1] + context_row, 1]) if context_row >= 0 else 0.0
                probs[index] = backoff + lower.log10prob(ngram[1:-1], int(ngram[-1]))
        sorted_probs.append(probs)
        sorted_backoffs.append(backoffs)
    return cls(vocabulary, keys, sorted_probs, sorted_backoffs)


def _lexicographic_groups(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sort the rows of a 2-D int array lexicographically; return the order and, for each
    sorted position, whether it starts a new distinct row. (``np.unique(axis=0)`` sorts
    opaque byte strings and is many times slower on millions of rows.)"""
    order = np.lexsort(rows.T[::-1])
    ordered = rows[order]
    starts = np.ones(len(rows), dtype=bool)
    if len(rows) > 1:
        starts[1:] = np.any(ordered[1:] != ordered[:-1], axis=1)
    return order, starts


def unique_rows(rows: np.ndarray) -> np.ndarray:
    order, starts = _lexicographic_groups(rows)
    return rows[order[starts]]


def _row_set_contains(table_rows: np.ndarray, queries: np.ndarray) -> np.ndarray:
    """For each row of ``queries``, whether it occurs among ``table_rows`` (same width)."""
    if len(table_rows) == 0 or len(queries) == 0:
        return np.zeros(len(queries), dtype=bool)
    combined = np.concatenate([table_rows, queries])
    order, starts = _lexicographic_groups(combined)
    group = np.cumsum(starts) - 1
    from_table = order < len(table_rows)
    group_has_table_row = np.zeros(group[-1] + 1, dtype=bool)
    group_has_table_row[group[from_table]] = True
    contains = np.empty(len(combined), dtype=bool)
    contains[order] = group_has_table_row[group]
    return contains[len(table_rows) :]


def _rows_to_indices(rows: np.ndarray, keys: Sequence[np.ndarray], vocab_size: int) -> np.ndarray:
    """Row indices of word-id rows (all of one order, present in ``keys``), by walking
    prefixes through the sorted key arrays."""
    index = rows[:, 0].astype(np.int64)
    for position in range(1, rows.shape[1]):
        wanted = index * vocab_size + rows[:, position]
        index = np.searchsorted(keys[position], wanted)
    return index


def _keys_if_closed(rows: Sequence[np.ndarray], vocab_size: int):
    """``(sorted keys, sorting permutation, hash table)`` per order when every n-gram's
    prefix and suffix are themselves listed; None otherwise (the caller inserts them).
    Each order's hash is built as soon as its keys are sorted and serves the lookups of
    the next order's prefixes and suffixes (and then the model itself)."""
    keys = [np.arange(vocab_size, dtype=np.int64)]
    permutations: list[np.ndarray | None] = [None]
    hashes: list[np.ndarray | None] = [None]
    # Every order's table in one array, laid out as NgramLM keeps them (no copy later).
    capacities = [_hash_capacity(len(r)) for r in rows[1:]]
    hash_base = np.concatenate([[0], np.cumsum(capacities)]).astype(np.int64)
    all_hashes = np.empty((int(hash_base[-1]), 3), dtype=np.int64)
    for m in range(1, len(rows)):
        prefix = _find_rows(rows[m][:, :-1], keys, vocab_size, hashes)
        if m > 1 and (prefix < 0).any():
            return None
        if m > 1 and (_find_rows(rows[m][:, 1:], keys, vocab_size, hashes) < 0).any():
            return None
        m_keys = prefix * vocab_size + rows[m][:, -1]
        permutation = np.argsort(m_keys, kind="stable")
        keys.append(m_keys[permutation])
        permutations.append(permutation)
        if len(keys[m]) > 1 and np.any(keys[m][1:] == keys[m][:-1]):
            return None  # duplicates: the general path reports them with their lines
        table = all_hashes[hash_base[m - 1]:hash_base[m]]
        kernels().build_hash_into(keys[m], table)
        hashes.append(table)
    return keys, permutations, hashes
