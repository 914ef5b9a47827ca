"""Estimation of corpora larger than memory: counting, adjusted counts, discounts,
interpolated probabilities and back-off weights computed by passes over sorted tables on
disk, and the ARPA file written as it is computed (lmplz's ``-S``/``-T`` design,
Heafield, Pouzyrevsky, Clark & Koehn 2013, "Scalable Modified Kneser-Ney Language Model
Estimation").

Factorization: the interpolated model of :mod:`varorder.lm.estimate` (Chen & Goodman
1999, §2.8), p(w | h) = num(h w) / den(h) + gamma(h) p(w | h'), unchanged; only where the
numbers live changes. The output is the ARPA file the in-memory path writes, byte for
byte (tests check it), because every order's probabilities come from the same function
(:meth:`_InterpolatedEstimator._order_probabilities`) applied to whole context groups.

Tables (one per order m, on disk): the sorted word-id rows and raw counts that
:func:`varorder.lm.external.count_to_disk` merges, then

1. each n-gram's *prefix* and *suffix* row one order down (``find_rows``: the lower table
   held a range at a time, queries streamed);
2. the counts the estimate uses: Kneser-Ney continuation counts = how often each row is
   some (m+1)-gram's suffix (a bincount by ranges), raw counts for n-grams starting with
   ``<s>`` (one contiguous range of the sorted table) and at the highest order; their
   counts-of-counts give the discounts;
3. pruning and the limited vocabulary as a flag per n-gram (a word outside the
   vocabulary is in the prefix or the suffix);
4. order by order, the suffix's lower-order probability gathered (float64), then the
   table walked with the order below in aligned ranges (every context's n-grams in one
   piece, so group sums are added in the in-memory order), giving this order's
   probabilities and the back-off weights of the contexts;
5. the ARPA file written a block at a time.

Memory: ``memory`` (``-S``) bounds the data the process holds at any time, whichever
step runs: the block being counted and the text batch being encoded
(:func:`varorder.lm.external.block_tokens_for`), the merge's windows over the runs
(:func:`varorder.lm.external.merge_runs`), a chunk of rows (``memory / 256`` rows, at
least the vocabulary size, since one context can have V continuations) with one range
of a lower table (``memory / 64`` rows), and the ARPA write block (at most
``memory / 16``). Each size depends on ``memory`` only, never on the corpus or the number
of runs (a larger table costs more passes, not memory). Not in the budget: the fixed
floor of the interpreter, NumPy and Numba's compiled kernels (~156 MB) and the
vocabulary (its words, which grow with the vocabulary, not the corpus); the peak is
measured below ``floor + memory`` in docs/notes/benchmarks-notebook.md. Freed arrays go back to the
system at once (:func:`varorder.lm._disk.release_freed_arrays`). Files are read with
explicit reads, never memory-mapped (mapped pages that were read count as resident).
``--binary`` / ``--max-arpa`` output is not
streamed (their writers need the model in memory).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from varorder.errors import ParameterError
from varorder.lm._disk import DiskColumn, aligned_ranges, find_rows, gather, occurrences, search_sorted
from varorder.lm.corpus import PathLike
from varorder.lm.estimate import backoff_log10, counts_of_counts, store_log10
from varorder.lm.external import DiskCounts, count_to_disk

# Bytes of working memory per row of a chunk (about fifteen 8-byte arrays and temporaries),
# and per row of a lower table held for a range pass.
_BYTES_PER_CHUNK_ROW = 256
_BYTES_PER_TABLE_ROW = 64


def train_on_disk(estimator, paths: PathLike | Sequence[PathLike], output: PathLike, *, memory: int,
                  temp_dir: PathLike | None = None, client=None, n_shards: int | None = None,
                  shard_memory: int | None = None, after_counting=None,
                  progress: bool = False, chunk_rows: int | None = None, table_rows: int | None = None) -> list[int]:
    """Estimate ``estimator`` (a :mod:`varorder.lm.estimate` estimator, not fitted) from
    text files and write the model to ``output`` as ARPA, holding at most about ``memory``
    bytes of data above the fixed floor (module docstring); counting sharded over a Dask ``client`` when given
    (each shard under ``shard_memory``, ``memory`` by default; ``after_counting`` is called
    before this process merges: see :func:`~varorder.lm.external.count_to_disk`). Sets the
    estimator's ``discounts_``/``fallback_orders_`` (Kneser-Ney) but no ``model_``.
    Returns the n-gram counts per order written. ``chunk_rows`` / ``table_rows`` override
    the piece sizes the budget gives (tests use tiny ones to force many pieces and passes;
    ``chunk_rows`` must exceed the vocabulary size)."""
    estimator._validate()
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    folder = Path(tempfile.mkdtemp(prefix="varorder-lm-", dir=temp_dir))
    try:
        counts = count_to_disk(paths, estimator.order, folder, memory=memory, min_count=estimator.min_count,
                               client=client, n_shards=n_shards, shard_memory=shard_memory,
                               after_counting=after_counting, progress=progress)
        return estimate_to_arpa(estimator, counts, output, memory=memory, folder=folder, chunk_rows=chunk_rows,
                                table_rows=table_rows)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


class _Sizes:
    def __init__(self, memory: int, vocab_size: int, chunk_rows: int | None, table_rows: int | None):
        self.chunk = chunk_rows or max(vocab_size + 1, memory // _BYTES_PER_CHUNK_ROW)
        self.table = table_rows or max(1, memory // _BYTES_PER_TABLE_ROW)
        if self.chunk <= vocab_size:
            raise ParameterError(f"chunks of {self.chunk} rows cannot hold one context's {vocab_size} continuations", name='vocab_size', value=vocab_size)


def estimate_to_arpa(estimator, counts: DiskCounts, output: PathLike, *, memory: int, folder: PathLike,
                     chunk_rows: int | None = None, table_rows: int | None = None) -> list[int]:
    """Steps 1-5 of the module docstring on counts already on disk (in ``folder``)."""
    from varorder.lm.arpa import _WRITE_BLOCK_BYTES, write_arpa_stream

    folder = Path(folder)
    vocabulary = counts.vocabulary
    vocab_size, order = len(vocabulary), counts.order
    sizes = _Sizes(memory, vocab_size, chunk_rows, table_rows)
    bits = max(1, (vocab_size - 1).bit_length())

    def column(name, dtype, width=1):
        return DiskColumn(folder / name, dtype, width)

    prefix, suffix = _prefixes_and_suffixes(counts, sizes, bits, column)
    used = _used_counts(estimator, counts, prefix, suffix, sizes, column)
    limited = _limited_vocabulary(estimator, counts, prefix, suffix, sizes, column)
    thresholds = estimator._prune_thresholds()

    def removed_rows(m, start, stop):
        """Which rows start:stop of order m are dropped (None: none of the order)."""
        gone = None
        if limited[m - 1] is not None:
            gone = limited[m - 1].read(start, stop).astype(bool)
        if m > 1 and thresholds[m - 1] > 0:
            low = counts.counts[m - 1].read(start, stop) <= thresholds[m - 1]
            gone = low if gone is None else gone | low
        return gone

    values = [column(f"values{m}", np.float32, 2) for m in range(1, order + 1)]
    # Order 1, in memory (V rows): interpolated with the uniform distribution over every
    # word but <s>.
    uniform = np.full(vocab_size, 1.0 / (vocab_size - 1))
    uniform[vocabulary.bos_id] = 0.0
    unigram_counts = used[0].read(0, vocab_size).astype(np.float64)
    unigram_counts[vocabulary.bos_id] = 0.0
    gone = removed_rows(1, 0, vocab_size)
    probabilities, _, _ = estimator._order_probabilities(1, unigram_counts, np.zeros(vocab_size, dtype=np.int64), 1,
                                                         uniform, gone, vocabulary)
    lower = column("probabilities1", np.float64)
    lower.append(probabilities)
    lower.finish()
    for m in range(2, order + 1):
        suffix_probabilities = gather(lower, suffix[m - 1], column(f"lower{m}", np.float64), sizes.table, sizes.chunk)
        current = column(f"probabilities{m}", np.float64)
        for lo, hi, start, context_rows in aligned_ranges(prefix[m - 1], len(lower), sizes.chunk, sizes.chunk):
            stop = start + len(context_rows)
            order_probabilities, denominators, gamma = estimator._order_probabilities(
                m, used[m - 1].read(start, stop).astype(np.float64), context_rows - lo, hi - lo,
                suffix_probabilities.read(start, stop), removed_rows(m, start, stop), vocabulary)
            current.append(order_probabilities)
            _append_values(values[m - 2], lower.read(lo, hi), backoff_log10(denominators, gamma))
        current.finish()
        suffix_probabilities.delete()
        lower.delete()
        lower = current
    for start, order_probabilities in lower.chunks(sizes.chunk):
        _append_values(values[-1], order_probabilities, np.zeros(len(order_probabilities)))
    lower.delete()

    longest_word = max(len(w.encode("utf-8", errors="surrogateescape")) for w in vocabulary.words)

    def section(m):
        table = values[m - 1]
        # Formatted text takes far more than a row's numbers: blocks as write_arpa's, at
        # most a 16th of the budget.
        block_bytes = min(_WRITE_BLOCK_BYTES, memory // 16)
        block_rows = min(sizes.chunk, max(1, block_bytes // (max(1, longest_word) * m + 128)))
        for start in range(0, len(table), block_rows):
            stop = min(len(table), start + block_rows)
            rows = np.arange(start, stop).reshape(-1, 1) if m == 1 else counts.rows[m - 1].read(start, stop)
            block = table.read(start, stop)
            gone = removed_rows(m, start, stop)
            if gone is not None:
                rows, block = rows[~gone], block[~gone]
            columns = [(block[:, 0], np.float32)] + ([(block[:, 1], np.float32)] if m < order else [])
            yield rows, columns

    kept = [0] * order
    for m in range(1, order + 1):
        kept[m - 1] = len(values[m - 1])
        for start in range(0, len(values[m - 1]), sizes.chunk):
            gone = removed_rows(m, start, start + sizes.chunk)
            kept[m - 1] -= 0 if gone is None else int(np.count_nonzero(gone))
    write_arpa_stream(output, vocabulary.words, kept, (section(m) for m in range(1, order + 1)))
    return kept


def _append_values(table: DiskColumn, probabilities: np.ndarray, log10_backoffs: np.ndarray) -> None:
    block = np.empty((len(probabilities), 2), dtype=np.float32)
    store_log10(block[:, 0], probabilities)
    block[:, 1] = log10_backoffs
    table.append(block)


def _prefixes_and_suffixes(counts: DiskCounts, sizes: _Sizes, bits: int, column):
    """Per order m >= 2, the row one order down of each n-gram's first m - 1 words and of
    its last m - 1 words (int64 columns; unigram rows are word ids)."""
    prefix: list[DiskColumn | None] = [None]
    suffix: list[DiskColumn | None] = [None]
    for m in range(2, counts.order + 1):
        rows = counts.rows[m - 1]
        if m == 2:
            first, last = column("prefix2", np.int64), column("suffix2", np.int64)
            for _, block in rows.chunks(sizes.chunk):
                first.append(block[:, 0])
                last.append(block[:, 1])
            prefix.append(first.finish())
            suffix.append(last.finish())
            continue
        lower_rows = counts.rows[m - 2]
        prefix.append(find_rows(lower_rows, lambda a, b: rows.read(a, b)[:, :-1], len(rows),
                                column(f"prefix{m}", np.int64), bits, sizes.table, sizes.chunk))
        suffix.append(find_rows(lower_rows, lambda a, b: rows.read(a, b)[:, 1:], len(rows),
                                column(f"suffix{m}", np.int64), bits, sizes.table, sizes.chunk))
    return prefix, suffix


def _used_counts(estimator, counts: DiskCounts, prefix, suffix, sizes: _Sizes, column) -> list[DiskColumn]:
    """Per order, the counts the estimate uses (Kneser-Ney: continuation counts below the
    highest order, raw counts for n-grams starting with ``<s>``); sets the discounts."""
    order = counts.order
    unigrams = column("used1", np.int64)
    unigrams.append(counts.unigram_counts)
    used: list[DiskColumn] = [unigrams.finish()] + list(counts.counts[1:])
    if not estimator.uses_continuation_counts:
        return used
    bos = counts.vocabulary.bos_id
    starts_with_bos = [(bos, bos + 1)]  # rows of each order whose first word is <s>: one range
    for m in range(2, order + 1):
        lo, hi = starts_with_bos[-1]
        starts_with_bos.append((search_sorted(prefix[m - 1], lo), search_sorted(prefix[m - 1], hi)))
    for m in range(1, order):
        n_rows = len(counts.unigram_counts) if m == 1 else len(counts.counts[m - 1])
        adjusted = column(f"adjusted{m}", np.int64)
        bos_lo, bos_hi = starts_with_bos[m - 1]
        for lo, continuation in occurrences(suffix[m], n_rows, sizes.table, sizes.chunk):
            hi = lo + len(continuation)
            a, b = max(lo, bos_lo), min(hi, bos_hi)
            if a < b:
                continuation[a - lo:b - lo] = used[m - 1].read(a, b)
            adjusted.append(continuation)
        if m > 1:
            used[m - 1] = adjusted.finish()
        else:
            used[0].delete()
            used[0] = adjusted.finish()
    tallies = []
    for m in range(1, order + 1):
        n = np.zeros(4, dtype=np.int64)
        for start, block in used[m - 1].chunks(sizes.chunk):
            if m == 1:
                block = np.delete(block, bos - start) if start <= bos < start + len(block) else block
            n += counts_of_counts(block)
        tallies.append([int(k) for k in n])
    estimator._choose_discounts(tallies)
    return used


def _limited_vocabulary(estimator, counts: DiskCounts, prefix, suffix, sizes: _Sizes, column) -> list:
    """Per order, a uint8 column flagging n-grams that hold a word outside the limited
    vocabulary (None everywhere without a limit)."""
    allowed = estimator._allowed_words(counts.vocabulary)
    if allowed is None or allowed.all():
        return [None] * counts.order
    flags = column("limited1", np.uint8)
    flags.append(~allowed)
    limited = [flags.finish()]
    for m in range(2, counts.order + 1):
        by_prefix = gather(limited[-1], prefix[m - 1], column(f"limited-prefix{m}", np.uint8), sizes.table, sizes.chunk)
        by_suffix = gather(limited[-1], suffix[m - 1], column(f"limited-suffix{m}", np.uint8), sizes.table, sizes.chunk)
        flags = column(f"limited{m}", np.uint8)
        for start, block in by_prefix.chunks(sizes.chunk):
            flags.append(block | by_suffix.read(start, start + len(block)))
        by_prefix.delete()
        by_suffix.delete()
        limited.append(flags.finish())
    return limited
