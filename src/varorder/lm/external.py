"""Counting n-grams of corpora larger than memory: sorted runs on disk under a memory
budget (lmplz's ``-S``/``-T``), and the same counts sharded across a Dask cluster.

Factorization: none of its own — it produces exactly the :class:`NgramCounts` that
:func:`varorder.lm.estimate.count_ngrams` gives on the whole corpus (the counts of every
n-gram of ``<s> w_1 .. w_T </s>``), so :meth:`ModifiedKneserNey.fit_counts` then
estimates the same model (Chen & Goodman 1999, as lmplz; Heafield et al. 2013,
"Scalable Modified Kneser-Ney Language Model Estimation", describe lmplz's streaming
design this follows for counting).

Steps: (1) one streaming pass counts word frequencies and builds the vocabulary exactly as
:func:`varorder.lm.corpus.read_corpus` does; (2) a second pass encodes blocks of
sentences sized to the budget, counts each block's n-grams in memory and writes them, per
order, as a run of word-id rows sorted lexicographically with their counts; (3) runs are
merged one first-word range at a time, each range small enough for the budget, summing
counts of equal rows; (4) the merged tables (lexicographic order of word ids is the order
of varorder's packed keys) are turned into packed keys and suffix rows.

The budget bounds the corpus side (blocks and merge ranges): memory no longer grows
with the number of tokens. The merged count tables themselves (24 bytes per distinct
n-gram) and the estimate made from them are held in memory, as by the in-memory path:
unlike lmplz, the estimation step is not streamed.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

import numpy as np

from varorder.lm.corpus import SPECIAL_WORDS, PathLike, Vocabulary, iter_sentences
from varorder.lm.estimate import MAX_ORDER, NgramCounts, count_ngrams

# Bytes the in-memory counter needs per token and order (padded ids, positions, packed
# keys, np.unique's sort and inverse): blocks are sized so that blocks * this <= budget.
_BYTES_PER_TOKEN_AND_ORDER = 64
_UNITS = {"": 1, "B": 1, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}


def parse_memory(text: str) -> int:
    """Bytes of a budget like ``2G``, ``500M``, ``1.5G``, ``800000`` (lmplz's ``-S``
    suffixes; a percentage of physical memory, ``20%``, too)."""
    match = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([BKMGT%]?)\s*", text.upper())
    if not match:
        raise ValueError(f"memory budget {text!r}: expected a number with an optional B, K, M, G, T or % suffix")
    value, unit = float(match.group(1)), match.group(2)
    if unit == "%":
        return int(value / 100 * os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    return int(value * _UNITS[unit])


def vocabulary_of(paths: Sequence[PathLike], min_count: int = 1) -> Vocabulary:
    """The vocabulary :func:`read_corpus` builds (specials first, then words by decreasing
    frequency, ties alphabetically; rarer than ``min_count`` -> ``<unk>``), from one
    streaming pass that holds only the word counts."""
    frequency: Counter[str] = Counter()
    for path in paths:
        for _, tokens in iter_sentences(path):
            frequency.update(tokens)
    return vocabulary_from_frequencies(frequency, min_count)


def vocabulary_from_frequencies(frequency: Counter, min_count: int = 1) -> Vocabulary:
    kept = [w for w, c in frequency.items() if c >= min_count and w not in SPECIAL_WORDS]
    kept.sort(key=lambda w: (-frequency[w], w))
    return Vocabulary(list(SPECIAL_WORDS) + kept)


def _blocks(paths: Sequence[PathLike], vocabulary: Vocabulary, block_tokens: int,
            shard: int = 0, n_shards: int = 1) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """``(ids, lengths)`` of consecutive sentences, about ``block_tokens`` tokens each;
    with ``n_shards`` > 1 only the sentences whose index is ``shard`` modulo it."""
    get, unk = vocabulary.index.get, vocabulary.unk_id
    ids: list[int] = []
    lengths: list[int] = []
    index = 0
    for path in paths:
        for _, tokens in iter_sentences(path):
            index += 1
            if (index - 1) % n_shards != shard:
                continue
            ids.extend(get(t, unk) for t in tokens)
            lengths.append(len(tokens))
            if len(ids) >= block_tokens:
                yield np.asarray(ids, dtype=np.int32), np.asarray(lengths, dtype=np.int64)
                ids, lengths = [], []
    if lengths:
        yield np.asarray(ids, dtype=np.int32), np.asarray(lengths, dtype=np.int64)


def _rows_of(counts: NgramCounts, m: int) -> np.ndarray:
    """Word-id rows (n, m + 1) of order m + 1 from packed keys, in key order (which is the
    lexicographic order of the rows)."""
    vocab_size = len(counts.vocabulary)
    rows = np.arange(vocab_size, dtype=np.int32).reshape(-1, 1)
    for k in range(1, m + 1):
        keys = counts.keys[k]
        rows = np.concatenate([rows[keys // vocab_size], (keys % vocab_size).astype(np.int32).reshape(-1, 1)], axis=1)
    return rows


def block_runs(ids: np.ndarray, lengths: np.ndarray, order: int, vocabulary: Vocabulary):
    """One block's counts: unigram counts (V,), then per order m >= 2 its sorted word-id
    rows and their counts."""
    counts = count_ngrams(ids, lengths, order, vocabulary)
    return counts.counts[0], [(_rows_of(counts, m), counts.counts[m]) for m in range(1, order)]


def _sum_equal_rows(rows: np.ndarray, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    order = np.lexsort(rows.T[::-1])
    rows, counts = rows[order], counts[order]
    starts = np.ones(len(rows), dtype=bool)
    if len(rows) > 1:
        starts[1:] = np.any(rows[1:] != rows[:-1], axis=1)
    first = np.flatnonzero(starts)
    return rows[first], np.add.reduceat(counts, first) if len(first) else counts[:0]


def merge_runs(runs: Sequence[tuple[np.ndarray, np.ndarray]], vocab_size: int, memory: int
               ) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Merge sorted runs of equal-width word-id rows, summing counts of equal rows, one
    range of first words at a time; each range's slices of the runs fit in ``memory``
    (bytes) unless a single first word exceeds it. Yields sorted ``(rows, counts)``."""
    if not runs:
        return
    width = runs[0][0].shape[1]
    bytes_per_row = 3 * (4 * width + 8)  # the slices, their sorted copies, the keys
    firsts = [np.asarray(rows[:, 0]) for rows, _ in runs]
    # Rows per first word over all runs, to cut ranges that fit the budget.
    per_word = np.zeros(vocab_size, dtype=np.int64)
    for first in firsts:
        per_word += np.bincount(first, minlength=vocab_size)
    cumulative = np.cumsum(per_word)
    budget_rows = max(1, memory // bytes_per_row)
    start_word = 0
    while start_word < vocab_size:
        done = cumulative[start_word - 1] if start_word else 0
        end_word = int(np.searchsorted(cumulative, done + budget_rows, side="right"))
        end_word = min(vocab_size, max(end_word, start_word + 1))
        pieces, piece_counts = [], []
        for (rows, counts), first in zip(runs, firsts):
            lo, hi = np.searchsorted(first, [start_word, end_word])
            if hi > lo:
                pieces.append(np.asarray(rows[lo:hi]))
                piece_counts.append(np.asarray(counts[lo:hi]))
        if pieces:
            yield _sum_equal_rows(np.concatenate(pieces), np.concatenate(piece_counts))
        start_word = end_word


def merged_table(runs, vocab_size: int, memory: int, width: int) -> tuple[np.ndarray, np.ndarray]:
    """All of :func:`merge_runs` concatenated: one order's sorted rows and counts."""
    parts = list(merge_runs(runs, vocab_size, memory))
    if not parts:
        return np.empty((0, width), np.int32), np.empty(0, np.int64)
    return np.concatenate([r for r, _ in parts]), np.concatenate([c for _, c in parts])


def counts_from_tables(vocabulary: Vocabulary, unigram_counts: np.ndarray,
                       tables: Iterable[tuple[np.ndarray, np.ndarray]], n_sentences: int) -> NgramCounts:
    """:class:`NgramCounts` from merged per-order ``(sorted word-id rows, counts)``, taken
    one order at a time (pass a generator, and no two orders' merged tables are held at
    once). Counts and rows are int32 when the corpus has fewer than 2^31 tokens, as
    :func:`~varorder.lm.estimate.count_ngrams` holds them."""
    from varorder.lm.model import _find_rows

    vocab_size = len(vocabulary)
    narrow = np.int32 if int(np.sum(unigram_counts)) < 2**31 else np.int64
    keys = [np.arange(vocab_size, dtype=np.int64)]
    counts = [np.asarray(unigram_counts, dtype=np.int64)]
    suffix_rows: list[np.ndarray | None] = [None]
    for rows, order_counts in tables:
        rows = np.asarray(rows, dtype=np.int64)
        prefix = _find_rows(rows[:, :-1], keys, vocab_size)
        keys.append(prefix * vocab_size + rows[:, -1])
        del prefix
        counts.append(np.asarray(order_counts).astype(narrow))
        del order_counts
        suffix_rows.append(_find_rows(rows[:, 1:], keys, vocab_size).astype(narrow))
        del rows  # before the next order's table is merged
    return NgramCounts(vocabulary, keys, counts, suffix_rows, n_sentences)


def count_ngrams_on_disk(paths: PathLike | Sequence[PathLike], order: int, *, memory: int = 1 << 30,
                         temp_dir: PathLike | None = None, min_count: int = 1, vocabulary: Vocabulary | None = None,
                         progress: bool = False) -> NgramCounts:
    """Count n-grams of orders 1 .. ``order`` of text files (one sentence per line, ``.gz``
    too) through sorted runs on disk, holding about ``memory`` bytes of corpus-side data
    at a time. Equals ``count_ngrams(*read_corpus(paths, min_count))`` exactly.

    ``temp_dir``: where the runs go (a fresh folder inside it, removed afterwards);
    the system's temporary folder by default.
    """
    from tqdm import tqdm

    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    if not 1 <= order <= MAX_ORDER:
        raise ValueError(f"order must be between 1 and {MAX_ORDER}, got {order}")
    if memory < 1 << 20:
        raise ValueError(f"a memory budget of {memory} bytes is too small (at least 1M)")
    vocabulary = vocabulary or vocabulary_of(paths, min_count)
    block_tokens = max(1024, memory // (_BYTES_PER_TOKEN_AND_ORDER * order))
    folder = Path(tempfile.mkdtemp(prefix="varorder-counts-", dir=temp_dir))
    try:
        unigram_counts = np.zeros(len(vocabulary), dtype=np.int64)
        runs: list[list[tuple[np.ndarray, np.ndarray]]] = [[] for _ in range(order - 1)]
        n_sentences = 0
        for block, (ids, lengths) in enumerate(tqdm(_blocks(paths, vocabulary, block_tokens), disable=not progress,
                                                     desc="counting blocks", unit=" blocks")):
            n_sentences += len(lengths)
            block_unigrams, block_tables = block_runs(ids, lengths, order, vocabulary)
            unigram_counts += block_unigrams
            for m, (rows, counts) in enumerate(block_tables):
                np.save(folder / f"rows{m + 2}-{block}.npy", rows)
                np.save(folder / f"counts{m + 2}-{block}.npy", counts)
                runs[m].append((np.load(folder / f"rows{m + 2}-{block}.npy", mmap_mode="r", allow_pickle=False),
                                np.load(folder / f"counts{m + 2}-{block}.npy", mmap_mode="r", allow_pickle=False)))
        tables = (merged_table(order_runs, len(vocabulary), memory, m + 2) for m, order_runs in enumerate(runs))
        return counts_from_tables(vocabulary, unigram_counts, tables, n_sentences)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _count_shard(paths, order, vocabulary_words, shard, n_shards, block_tokens):
    """One Dask task: the counts of every ``n_shards``-th sentence, as sorted runs."""
    vocabulary = Vocabulary(vocabulary_words)
    unigram_counts = np.zeros(len(vocabulary), dtype=np.int64)
    tables: list[list] = [[] for _ in range(order - 1)]
    n_sentences = 0
    for ids, lengths in _blocks(paths, vocabulary, block_tokens, shard, n_shards):
        n_sentences += len(lengths)
        block_unigrams, block_tables = block_runs(ids, lengths, order, vocabulary)
        unigram_counts += block_unigrams
        for m, run in enumerate(block_tables):
            tables[m].append(run)
    merged = [merged_table(runs, len(vocabulary), 1 << 62, m + 2) for m, runs in enumerate(tables)]
    return unigram_counts, merged, n_sentences


def count_ngrams_dask(paths: PathLike | Sequence[PathLike], order: int, client, *, n_shards: int | None = None,
                      min_count: int = 1, vocabulary: Vocabulary | None = None, memory: int = 1 << 30) -> NgramCounts:
    """The counts of :func:`count_ngrams_on_disk`, with the counting sharded across the
    workers of a ``dask.distributed`` ``client``: shard s takes every ``n_shards``-th
    sentence starting at s (the files must be readable at the same paths by the
    workers), returns its sorted runs, and the client merges them like disk runs.
    Equals the in-memory counts exactly."""
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    paths = [str(Path(p).resolve()) for p in paths]
    vocabulary = vocabulary or vocabulary_of(paths, min_count)
    if n_shards is None:
        n_shards = max(1, len(client.scheduler_info()["workers"]))
    block_tokens = max(1024, memory // (_BYTES_PER_TOKEN_AND_ORDER * order))
    futures = [client.submit(_count_shard, paths, order, list(vocabulary.words), shard, n_shards, block_tokens,
                             pure=False) for shard in range(n_shards)]
    results = client.gather(futures)
    unigram_counts = sum(r[0] for r in results)
    tables = (merged_table([r[1][m] for r in results], len(vocabulary), memory, m + 2) for m in range(order - 1))
    return counts_from_tables(vocabulary, unigram_counts, tables, sum(r[2] for r in results))

