"""Compiled merging of sorted n-gram count tables (the in-memory counter of
:mod:`varorder.lm.counting`).

Factorization: none — storage only. A table of order m holds packed keys
``prefix_row * V + word`` (sorted, the prefix row indexing order m - 1), raw counts and
suffix rows. Merging two tables of one order is one linear pass over both, once the
prefix rows of each are mapped to the merged order below (the maps are increasing, so
the re-packed keys stay sorted): equal keys add their counts, and each side's rows get
their merged positions, which the next order's merge uses. This is the merge step of
lmplz's count stage (Heafield, Pouzyrevsky, Clark & Koehn 2013, "Scalable Modified
Kneser-Ney Language Model Estimation"), done on the packed tree instead of word tuples.
"""

from __future__ import annotations

import numba
import numpy as np

import varorder._numba_start  # noqa: F401  (before any kernel's first call: see the module)


@numba.njit(cache=True)
def merged_size(keys_a, map_a, keys_b, map_b, vocab_size):
    """How many distinct keys the two tables hold together (prefix rows mapped)."""
    i = j = n = 0
    na, nb = len(keys_a), len(keys_b)
    while i < na and j < nb:
        a = map_a[keys_a[i] // vocab_size] * vocab_size + keys_a[i] % vocab_size
        b = map_b[keys_b[j] // vocab_size] * vocab_size + keys_b[j] % vocab_size
        if a == b:
            i += 1
            j += 1
        elif a < b:
            i += 1
        else:
            j += 1
        n += 1
    return n + (na - i) + (nb - j)


@numba.njit(cache=True)
def merge_order(keys_a, counts_a, suffix_a, map_a, keys_b, counts_b, suffix_b, map_b, vocab_size, out_keys, out_counts,
                out_suffix, row_a, row_b):
    """Merge two sorted tables of one order into ``out_*`` (sized by
    :func:`merged_size`). ``map_*``: each side's rows of the order below (which both the
    prefixes and the suffixes index) to merged rows. ``row_*`` receive each side's rows'
    merged positions."""
    i = j = n = 0
    na, nb = len(keys_a), len(keys_b)
    while i < na or j < nb:
        if i < na:
            a = map_a[keys_a[i] // vocab_size] * vocab_size + keys_a[i] % vocab_size
        if j < nb:
            b = map_b[keys_b[j] // vocab_size] * vocab_size + keys_b[j] % vocab_size
        if j >= nb or (i < na and a < b):
            out_keys[n] = a
            out_counts[n] = counts_a[i]
            out_suffix[n] = map_a[suffix_a[i]]
            row_a[i] = n
            i += 1
        elif i >= na or b < a:
            out_keys[n] = b
            out_counts[n] = counts_b[j]
            out_suffix[n] = map_b[suffix_b[j]]
            row_b[j] = n
            j += 1
        else:
            out_keys[n] = a
            out_counts[n] = counts_a[i] + counts_b[j]
            out_suffix[n] = map_a[suffix_a[i]]
            row_a[i] = n
            row_b[j] = n
            i += 1
            j += 1
        n += 1
    return n


def merge_tables(vocab_size: int, a, b, count_dtype):
    """Merge two count tables given as lists per order m >= 2 of ``(keys, counts,
    suffix_rows)`` over one vocabulary; returns the merged list. Order-1 tables (word
    ids) need no merge: their rows are the word ids on both sides."""
    identity = np.arange(vocab_size, dtype=np.int64)
    map_a = map_b = identity
    merged = []
    for (keys_a, counts_a, suffix_a), (keys_b, counts_b, suffix_b) in zip(a, b):
        n = merged_size(keys_a, map_a, keys_b, map_b, vocab_size)
        out_keys = np.empty(n, dtype=np.int64)
        out_counts = np.empty(n, dtype=count_dtype)
        out_suffix = np.empty(n, dtype=suffix_a.dtype)
        row_a = np.empty(len(keys_a), dtype=np.int64)
        row_b = np.empty(len(keys_b), dtype=np.int64)
        merge_order(keys_a, counts_a, suffix_a, map_a, keys_b, counts_b, suffix_b, map_b, vocab_size, out_keys, out_counts, out_suffix, row_a, row_b)
        merged.append((out_keys, out_counts, out_suffix))
        map_a, map_b = row_a, row_b
    return merged


@numba.njit(cache=True)
def _counting_pass(keys, n_keys, source, out):
    """One stable counting-sort pass: the indices ``source`` ordered by ``keys[index]``
    (values in [0, n_keys)), ties kept in ``source``'s order, written to ``out``."""
    start = np.zeros(n_keys + 1, dtype=np.int64)
    for k in range(len(source)):
        start[keys[source[k]] + 1] += 1
    for key in range(n_keys):
        start[key + 1] += start[key]
    for k in range(len(source)):
        i = source[k]
        out[start[keys[i]]] = i
        start[keys[i]] += 1


@numba.njit(cache=True)
def unique_packed(prefix, words, n_prefixes, vocab_size, out_keys, out_counts, inverse):
    """``np.unique(prefix * V + words, return_inverse=True, return_counts=True)`` by a
    two-digit radix sort (counting sorts by word, then stably by prefix row, both small
    ranges): fills ``out_keys`` / ``out_counts`` (the first n entries; sized len(prefix))
    and ``inverse``, returns n."""
    n = len(prefix)
    first = np.empty(n, dtype=np.int64)
    _counting_pass(words, vocab_size, np.arange(n), first)
    order = np.empty(n, dtype=np.int64)
    _counting_pass(prefix, n_prefixes, first, order)
    u = -1
    last = -1
    for k in range(n):
        i = order[k]
        key = prefix[i] * vocab_size + words[i]
        if key != last:
            u += 1
            out_keys[u] = key
            out_counts[u] = 0
            last = key
        out_counts[u] += 1
        inverse[i] = u
    return u + 1
