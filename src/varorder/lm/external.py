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
sentences sized to the budget (a batch of lines at a time, by the compiled
:meth:`Vocabulary.encode_lines`), counts each block's n-grams in memory and writes them,
per order, as a run of word-id rows sorted lexicographically with their counts; (3) each
order's runs are merged by a k-way merge in batches through a window per run (all
windows together sized to the budget, read with plain file reads, never memory-mapped),
summing counts of equal rows, into one sorted table on disk (:func:`count_to_disk`).
Nothing held grows with the number of runs but a few integers each. With Dask, each
shard writes its runs into the shared folder and this process merges them the same way.

:mod:`varorder.lm.streaming` estimates from those tables without loading them; the
older entry points :func:`count_ngrams_on_disk` / :func:`count_ngrams_dask` load them
as :class:`NgramCounts` for ``fit_counts`` (used by ``--binary`` / ``--max-arpa``,
whose writers need the model in memory).
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from varorder.errors import ParameterError
from varorder.lm._disk import DiskColumn, release_freed_arrays
from varorder.lm.corpus import BOS, EOS, SPECIAL_WORDS, PathLike, Vocabulary, iter_sentences, open_text
from varorder.lm.estimate import MAX_ORDER, NgramCounts, count_ngrams

# Bytes the in-memory counter (count_ngrams, then the rows of block_runs) holds per token
# of a block: padded ids and positions, packed keys, np.unique's sort and inverse, every
# order's keys and rows. tracemalloc measured 120 at order 3 and 147 at order 5 (about
# 87 + 11 per order); this rounds it up.
def _bytes_per_block_token(order: int) -> int:
    return 112 + 16 * order


def _batch_bytes(memory: int) -> int:
    """Text read at a time while counting: its strings and the line encoder's buffers
    (about 10 bytes per byte of text) stay a small share of the budget."""
    return int(min(4 << 20, max(64 << 10, memory // 128)))


def block_tokens_for(memory: int, order: int) -> int:
    """Tokens per counted block under a budget of ``memory`` bytes: the budget less the
    text batch's share, over the counter's bytes per token."""
    return max(1024, (memory - 16 * _batch_bytes(memory)) // _bytes_per_block_token(order))
_UNITS = {"": 1, "B": 1, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}


def parse_memory(text: str) -> int:
    """Bytes of a budget like ``2G``, ``500M``, ``1.5G``, ``800000`` (lmplz's ``-S``
    suffixes; a percentage of physical memory, ``20%``, too)."""
    match = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([BKMGT%]?)\s*", text.upper())
    if not match:
        raise ParameterError(f"memory budget {text!r}: expected a number with an optional B, K, M, G, T or % suffix", name='memory', value=text)
    value, unit = float(match.group(1)), match.group(2)
    if unit == "%":
        return int(value / 100 * os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    return int(value * _UNITS[unit])


def _sentence_batches(paths: Sequence[PathLike], batch_bytes: int = 4 << 20) -> Iterator[list[str]]:
    """The corpus's non-blank lines (sentences), about ``batch_bytes`` of text at a time."""
    for path in paths:
        with open_text(path) as handle:
            while True:
                lines = handle.readlines(batch_bytes)
                if not lines:
                    break
                yield [line for line in lines if not line.isspace()]


def _refuse_markers(paths: Sequence[PathLike]) -> None:
    """Raise the ValueError (file and line) of :func:`iter_sentences` for a corpus that
    spells out ``<s>`` or ``</s>``."""
    for path in paths:
        for _ in iter_sentences(path):
            pass


def vocabulary_of(paths: Sequence[PathLike], min_count: int = 1) -> Vocabulary:
    """The vocabulary :func:`read_corpus` builds (specials first, then words by decreasing
    frequency, ties alphabetically; rarer than ``min_count`` -> ``<unk>``), from one
    streaming pass that holds only the word counts (a batch of lines split at once)."""
    frequency: Counter[str] = Counter()
    for lines in _sentence_batches(paths, 1 << 20):  # 1 MiB of text split at once
        frequency.update("".join(lines).split())
    if BOS in frequency or EOS in frequency:
        _refuse_markers(paths)
    return vocabulary_from_frequencies(frequency, min_count)


def vocabulary_from_frequencies(frequency: Counter, min_count: int = 1) -> Vocabulary:
    kept = [w for w, c in frequency.items() if c >= min_count and w not in SPECIAL_WORDS]
    kept.sort(key=lambda w: (-frequency[w], w))
    return Vocabulary(list(SPECIAL_WORDS) + kept)


def _blocks(paths: Sequence[PathLike], vocabulary: Vocabulary, block_tokens: int,
            shard: int = 0, n_shards: int = 1, batch_bytes: int = 4 << 20) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """``(ids, lengths)`` of consecutive sentences, at most ``block_tokens`` tokens each
    (or one sentence, if longer); with ``n_shards`` > 1 only the sentences whose index is
    ``shard`` modulo it. Lines are read ``batch_bytes`` of text at a time and encoded by
    :meth:`Vocabulary.encode_text` (compiled); no text is held while a block is counted."""
    ids = np.empty(0, dtype=np.int32)
    lengths = np.empty(0, dtype=np.int64)
    index = 0
    markers = np.array([vocabulary.bos_id, vocabulary.eos_id])
    for lines in _sentence_batches(paths, batch_bytes):
        selected = lines if n_shards == 1 else lines[(shard - index) % n_shards::n_shards]
        index += len(lines)
        # the lines keep their breaks (only a file's last line may lack one, and it ends the
        # batch), so their concatenation is the text the compiled encoder reads
        batch_ids, batch_lengths = vocabulary.encode_text("".join(selected))
        del lines, selected
        if np.isin(batch_ids, markers).any():
            _refuse_markers(paths)
        ids = np.concatenate([ids, batch_ids])
        lengths = np.concatenate([lengths, batch_lengths.astype(np.int64, copy=False)])
        del batch_ids, batch_lengths
        while len(ids) >= block_tokens:
            ends = np.cumsum(lengths)
            fit = max(1, int(np.searchsorted(ends, block_tokens, side="right")))
            cut = int(ends[fit - 1])
            del ends
            block = ids[:cut], lengths[:fit]
            ids, lengths = ids[cut:].copy(), lengths[fit:].copy()
            yield block
            del block
    if len(lengths):
        yield ids, lengths


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


class _MemoryRun:
    """A sorted run held in memory (rows ``start:stop`` by slicing)."""

    def __init__(self, rows: np.ndarray, counts: np.ndarray):
        self.rows, self.counts = rows, counts

    def __len__(self) -> int:
        return len(self.counts)

    def read(self, start: int, stop: int) -> tuple[np.ndarray, np.ndarray]:
        return np.asarray(self.rows[start:stop]), np.asarray(self.counts[start:stop])


class _DiskRun:
    """A sorted run in two files (word-id rows, counts), read by row ranges."""

    def __init__(self, rows: DiskColumn, counts: DiskColumn):
        self.rows, self.counts = rows, counts

    def __len__(self) -> int:
        return len(self.rows)

    @classmethod
    def write(cls, folder: Path, name: str, rows: np.ndarray, counts: np.ndarray) -> "_DiskRun":
        rows_column = DiskColumn(folder / f"{name}.rows", np.int32, rows.shape[1])
        rows_column.append(rows)
        counts_column = DiskColumn(folder / f"{name}.counts", np.int64)
        counts_column.append(counts)
        return cls(rows_column.finish(), counts_column.finish())

    def describe(self) -> tuple:
        """What rebuilds it in another process (a Dask task returns this)."""
        return str(self.rows.path), str(self.counts.path), self.rows.width, len(self.rows)

    @classmethod
    def described(cls, rows_path, counts_path, width, length) -> "_DiskRun":
        return cls(DiskColumn.existing(rows_path, np.int32, width, length),
                   DiskColumn.existing(counts_path, np.int64, 1, length))

    def read(self, start: int, stop: int) -> tuple[np.ndarray, np.ndarray]:
        return self.rows.read(start, stop), self.counts.read(start, stop)

    def delete(self) -> None:
        self.rows.delete()
        self.counts.delete()


def _sum_equal_rows(rows: np.ndarray, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    order = np.lexsort(rows.T[::-1])
    rows = rows[order]
    counts = counts[order]
    del order
    starts = np.ones(len(rows), dtype=bool)
    for column in range(rows.shape[1] if len(rows) > 1 else 0):
        starts[1:] &= rows[1:, column] == rows[:-1, column]
    if len(rows) > 1:
        np.logical_not(starts[1:], out=starts[1:])
    first = np.flatnonzero(starts)
    del starts
    return rows[first], np.add.reduceat(counts, first) if len(first) else counts[:0]


def merge_bytes_per_row(width: int) -> int:
    """Bytes :func:`merge_runs` holds per row of its read windows: the window itself, the
    rows taken from it concatenated, lexsort's index and key copies, the sorted copies,
    the summed output, and the previous output still held by the caller while the next
    one is merged (measured with tracemalloc, rounded up)."""
    return 6 * (4 * width + 8) + 32


def merge_runs(runs: Sequence, vocab_size: int, memory: int) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Merge sorted runs of equal-width word-id rows without repeats within a run
    (``(rows, counts)`` arrays, or runs on disk), summing counts of equal rows. A k-way
    merge in batches: each run is read through a window of ``k`` rows (all windows
    together ``memory / merge_bytes_per_row`` rows); each step merges, from every window,
    the rows up to the smallest last row of a window whose run goes on (no later row of
    any run can precede it), so every step takes at least one whole window and the
    memory held never depends on the corpus or the number of runs beyond ``k`` >= 1.
    Yields sorted ``(rows, counts)``; ``vocab_size`` is unused (kept for callers)."""
    runs = [_MemoryRun(*run) if isinstance(run, tuple) else run for run in runs]
    runs = [run for run in runs if len(run)]
    if not runs:
        return
    width = runs[0].read(0, 1)[0].shape[1]
    window = max(1, memory // merge_bytes_per_row(width) // len(runs))
    cursor = [0] * len(runs)  # rows of each run read so far
    buffered: list[tuple[np.ndarray, np.ndarray] | None] = [None] * len(runs)
    while True:
        for r, run in enumerate(runs):
            rows, counts = buffered[r] if buffered[r] is not None else (None, None)
            have = 0 if rows is None else len(rows)
            if have < window and cursor[r] < len(run):
                more_rows, more_counts = run.read(cursor[r], cursor[r] + window - have)
                cursor[r] += len(more_counts)
                if have:
                    more_rows, more_counts = np.concatenate([rows, more_rows]), np.concatenate([counts, more_counts])
                buffered[r] = (more_rows, more_counts)
                del more_rows, more_counts
            del rows, counts
        live = [r for r in range(len(runs)) if buffered[r] is not None and len(buffered[r][1])]
        if not live:
            return
        going_on = [tuple(buffered[r][0][-1].tolist()) for r in live if cursor[r] < len(runs[r])]
        boundary = min(going_on) if going_on else None
        taken_rows, taken_counts, partial = [], [], []
        for r in live:
            rows, counts = buffered[r]
            n = len(rows) if boundary is None else _rows_up_to(rows, boundary)
            taken_rows.append(rows[:n])
            taken_counts.append(counts[:n])
            buffered[r] = None if n == len(rows) else (rows[n:], counts[n:]) if n else (rows, counts)
            if 0 < n < len(rows):
                partial.append(r)
        del rows, counts
        merged_rows = np.concatenate(taken_rows)
        merged_counts = np.concatenate(taken_counts)
        del taken_rows, taken_counts
        result = _sum_equal_rows(merged_rows, merged_counts)
        del merged_rows, merged_counts
        yield result
        del result
        # A window consumed only in part keeps its tail as a view of the larger read:
        # copy it so the rest of that read can be freed.
        for r in partial:
            buffered[r] = (buffered[r][0].copy(), buffered[r][1].copy())


def _rows_up_to(rows: np.ndarray, boundary: tuple) -> int:
    """How many rows of a sorted, repeat-free window are <= ``boundary`` (binary search)."""
    lo, hi = 0, len(rows)
    while lo < hi:
        middle = (lo + hi) // 2
        if tuple(rows[middle].tolist()) <= boundary:
            lo = middle + 1
        else:
            hi = middle
    return lo


@dataclass
class DiskCounts:
    """Raw n-gram counts on disk: ``rows[m]`` / ``counts[m]`` (m >= 1) are order m + 1's
    sorted word-id rows and counts; unigram counts in memory (V)."""

    vocabulary: Vocabulary
    unigram_counts: np.ndarray
    rows: list[DiskColumn | None]
    counts: list[DiskColumn | None]
    n_sentences: int

    @property
    def order(self) -> int:
        return len(self.rows)

    def tables(self) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        for rows, counts in zip(self.rows[1:], self.counts[1:]):
            yield rows.read(0, len(rows)), counts.read(0, len(counts))

    def delete(self) -> None:
        for column in self.rows[1:] + self.counts[1:]:
            column.delete()


def _merge_to_disk(runs: list, vocabulary: Vocabulary, unigram_counts: np.ndarray, n_sentences: int, order: int,
                   memory: int, folder: Path) -> DiskCounts:
    """Merge each order's runs into one sorted table on disk, deleting the runs."""
    rows: list[DiskColumn | None] = [None]
    counts: list[DiskColumn | None] = [None]
    for m, order_runs in enumerate(runs, start=2):
        rows.append(DiskColumn(folder / f"merged{m}.rows", np.int32, m))
        counts.append(DiskColumn(folder / f"merged{m}.counts", np.int64))
        for part_rows, part_counts in merge_runs(order_runs, len(vocabulary), memory):
            rows[-1].append(part_rows)
            counts[-1].append(part_counts)
        rows[-1].finish()
        counts[-1].finish()
        for run in order_runs:
            run.delete()
    return DiskCounts(vocabulary, unigram_counts, rows, counts, n_sentences)


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


def count_to_disk(paths: PathLike | Sequence[PathLike], order: int, folder: PathLike, *, memory: int = 1 << 30,
                  min_count: int = 1, vocabulary: Vocabulary | None = None, client=None, n_shards: int | None = None,
                  shard_memory: int | None = None, after_counting: Callable[[], object] | None = None,
                  progress: bool = False) -> DiskCounts:
    """Count n-grams of orders 1 .. ``order`` of text files (one sentence per line, ``.gz``
    too) into sorted tables on disk inside ``folder``, holding about ``memory`` bytes of
    corpus-side data at a time. With a ``dask.distributed`` ``client``, shard s of
    ``n_shards`` (one per worker by default) counts every ``n_shards``-th sentence from s
    under ``shard_memory`` bytes (``memory`` by default) and writes its runs into
    ``folder``, which the workers must reach at the same path (a LocalCluster always
    does); this process then merges every run under ``memory``. ``after_counting`` is
    called once every shard's runs are written, before the merge: closing a LocalCluster
    there gives the workers' memory back while this process merges and estimates."""
    from varorder._progress import Progress

    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    paths = [str(Path(p).resolve()) for p in paths]
    if not 1 <= order <= MAX_ORDER:
        raise ParameterError(f"order must be between 1 and {MAX_ORDER}, got {order}", name='order', value=order)
    if memory < 1 << 20:
        raise ParameterError(f"a memory budget of {memory} bytes is too small (at least 1M)", name='memory', value=memory)
    folder = Path(folder)
    release_freed_arrays()
    vocabulary = vocabulary or vocabulary_of(paths, min_count)
    if shard_memory is not None and shard_memory < 1 << 20:
        raise ParameterError(f"a shard memory budget of {shard_memory} bytes is too small (at least 1M)", name='shard_memory', value=shard_memory)
    if client is not None:
        if n_shards is None:
            n_shards = max(1, len(client.scheduler_info()["workers"]))
        shard_memory = shard_memory or memory
        futures = [client.submit(_count_shard, paths, order, list(vocabulary.words), shard, n_shards,
                                 block_tokens_for(shard_memory, order), str(folder), _batch_bytes(shard_memory),
                                 pure=False) for shard in range(n_shards)]
        results = client.gather(futures)
        del futures  # nothing of the shards is left on the workers
        unigram_counts = sum(r[0] for r in results)
        runs = [[_DiskRun.described(*run) for r in results for run in r[1][m]] for m in range(order - 1)]
        n_sentences = sum(r[2] for r in results)
    else:
        block_tokens = block_tokens_for(memory, order)
        blocks = Progress(_blocks(paths, vocabulary, block_tokens, batch_bytes=_batch_bytes(memory)), enabled=progress,
                          desc="counting blocks", unit=" blocks")
        unigram_counts, described, n_sentences = _count_blocks(blocks, order, vocabulary, folder, "run")
        runs = [[_DiskRun.described(*run) for run in order_runs] for order_runs in described]
    if after_counting is not None:
        after_counting()
    return _merge_to_disk(runs, vocabulary, unigram_counts, n_sentences, order, memory, folder)


def _count_blocks(blocks, order: int, vocabulary: Vocabulary, folder: Path, name: str):
    """Count each block in memory and write its sorted runs: ``(unigram counts, per order
    the runs' descriptions, sentences)``."""
    unigram_counts = np.zeros(len(vocabulary), dtype=np.int64)
    runs: list[list[tuple]] = [[] for _ in range(order - 1)]
    n_sentences = 0
    for block, (ids, lengths) in enumerate(blocks):
        n_sentences += len(lengths)
        block_unigrams, block_tables = block_runs(ids, lengths, order, vocabulary)
        unigram_counts += block_unigrams
        for m, (rows, counts) in enumerate(block_tables):
            runs[m].append(_DiskRun.write(folder, f"{name}{m + 2}-{block}", rows, counts).describe())
        # Nothing of this block is held while the next one is read.
        ids = lengths = block_tables = rows = counts = None
    return unigram_counts, runs, n_sentences


def _count_shard(paths, order, vocabulary_words, shard, n_shards, block_tokens, folder, batch_bytes=4 << 20):
    """One Dask task: the counts of every ``n_shards``-th sentence, as sorted runs written
    into ``folder``."""
    release_freed_arrays()
    vocabulary = Vocabulary(vocabulary_words)
    return _count_blocks(_blocks(paths, vocabulary, block_tokens, shard, n_shards, batch_bytes), order, vocabulary,
                         Path(folder), f"shard{shard}-")


def count_ngrams_on_disk(paths: PathLike | Sequence[PathLike], order: int, *, memory: int = 1 << 30,
                         temp_dir: PathLike | None = None, min_count: int = 1, vocabulary: Vocabulary | None = None,
                         progress: bool = False, client=None, n_shards: int | None = None) -> NgramCounts:
    """:func:`count_to_disk`, then the tables loaded as :class:`NgramCounts` (for
    ``fit_counts``). Equals ``count_ngrams(*read_corpus(paths, min_count))`` exactly.

    ``temp_dir``: where the runs go (a fresh folder inside it, removed afterwards);
    the system's temporary folder by default.
    """
    folder = Path(tempfile.mkdtemp(prefix="varorder-counts-", dir=temp_dir))
    try:
        counts = count_to_disk(paths, order, folder, memory=memory, min_count=min_count, vocabulary=vocabulary,
                               client=client, n_shards=n_shards, progress=progress)
        return counts_from_tables(counts.vocabulary, counts.unigram_counts, counts.tables(), counts.n_sentences)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def count_ngrams_dask(paths: PathLike | Sequence[PathLike], order: int, client, *, n_shards: int | None = None,
                      min_count: int = 1, vocabulary: Vocabulary | None = None, memory: int = 1 << 30,
                      temp_dir: PathLike | None = None) -> NgramCounts:
    """The counts of :func:`count_ngrams_on_disk`, with the counting sharded across the
    workers of a ``dask.distributed`` ``client`` (see :func:`count_to_disk`; ``temp_dir``
    must be reachable by the workers). Equals the in-memory counts exactly."""
    return count_ngrams_on_disk(paths, order, memory=memory, temp_dir=temp_dir, min_count=min_count,
                                vocabulary=vocabulary, client=client, n_shards=n_shards)
