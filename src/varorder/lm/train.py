"""Estimating an n-gram model from text files under a memory budget, optionally on Dask
workers: the one entry point that ``varorder lm train`` calls.

Factorization: the estimator's own (:mod:`varorder.lm.estimate`: interpolated modified
Kneser-Ney, Chen & Goodman 1999; absolute discounting; additive smoothing); this module
only chooses where the numbers live, and every choice gives the same model (the tests of
:mod:`varorder.lm.sharded`, :mod:`varorder.lm.external` and :mod:`varorder.lm.streaming`
check each against the in-memory estimate):

=====================  ==========  ===============================================================
memory budget          client      what runs
=====================  ==========  ===============================================================
none                   none        counts in memory, a block of sentences at a time
                                   (:func:`~varorder.lm.counting.count_corpus`), the model
                                   estimated in memory
given                  none        the same while the count tables and the estimate fit in the
                                   budget (:data:`ESTIMATE_BYTES_PER_NGRAM`); else the tables are
                                   spilled as sorted runs to disk and merged there, then (ARPA
                                   output) the whole estimate by passes over the sorted tables,
                                   the ARPA file written as it is computed (lmplz's ``-S``,
                                   :func:`~varorder.lm.streaming.estimate_to_arpa`), or (other
                                   outputs) the merged counts loaded and estimated in memory
none                   Dask        counts of one shard per worker, merged here in memory
                                   (:func:`~varorder.lm.sharded.count_ngrams_sharded`)
given                  Dask        shards counted into sorted runs on disk, merged under the
                                   budget (:func:`~varorder.lm.external.count_to_disk`), then as
                                   above: streamed to ARPA, or loaded for the other outputs
=====================  ==========  ===============================================================

With ``prune_entropy`` the model is pruned by relative entropy (Stolcke 1998, as SRILM's
``-prune``; :mod:`varorder.lm.prune`) before it is written, so it is estimated in memory
(from counts on disk under a budget), as for the binary and MAX-ARPA writers.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np

from varorder.errors import ParameterError
from varorder.lm.corpus import PathLike
from varorder.lm.estimate import NgramCounts

__all__ = ["FileTraining", "train_from_files"]


@dataclass
class FileTraining:
    """What :func:`train_from_files` did.

    ``ngram_counts``: n-grams per order in the model; ``written``: whether ``output`` was
    written; ``streamed``: whether the estimate ran on disk (the estimator then has its
    discounts but no ``model_``); ``n_workers``: the Dask workers that counted, or None when
    this process counted; ``model``: the model written (pruned with ``prune_entropy``), None
    when streamed; ``path``: where the counts were held, ``"memory"`` or ``"disk"``.
    """

    estimator: object
    ngram_counts: list[int]
    written: bool
    streamed: bool
    n_workers: int | None = None
    model: object = None
    path: str = "memory"


# Bytes the in-memory estimate holds per n-gram at its peak, counts included (keys, counts
# and suffix rows 16; adjusted counts 8; the float32 values 8; the largest order's
# float64 temporaries), measured with tracemalloc on PTB 5-grams and rounded up; used to
# decide whether a budget holds the whole estimate.
ESTIMATE_BYTES_PER_NGRAM = 96
# Of the budget: the share the count tables may fill before they are spilled to disk (a
# merge holds the old tables and the merged ones), and the share of one counted block.
_TABLE_SHARE = 0.4
_BLOCK_SHARE = 0.2


def estimate_bytes(ngram_counts: Sequence[int]) -> int:
    """The memory the in-memory estimate needs for a model of these sizes (an estimate)."""
    return ESTIMATE_BYTES_PER_NGRAM * int(sum(ngram_counts))


def train_from_files(estimator, paths: PathLike | Sequence[PathLike], *, memory: int | None = None,
                     temp_dir: PathLike | None = None, client=None, output: PathLike | None = None,
                     binary: bool = False, max_arpa: bool = False, progress: bool = False,
                     prune_entropy: float | None = None, path: str = "auto") -> FileTraining:
    """Fit ``estimator`` (a :mod:`varorder.lm.estimate` estimator) on text files (one
    sentence per line, ``.gz`` read transparently) and write the model to ``output`` when
    given: ARPA, MAX-ARPA (``max_arpa``) or the binary format (``binary``).

    ``memory``: bytes of data to hold at most (lmplz's ``-S``); None keeps everything in
    memory. With a budget, the corpus is counted in memory a block at a time and the
    counts stay in memory while they and the estimate fit in it (``path="auto"``);
    otherwise they go to sorted runs on disk and the estimate runs from there.
    ``path="memory"`` / ``"disk"`` forces one of the two. ``temp_dir``: where the tables
    on disk go (with ``client``, a folder the workers reach). ``client``: a
    ``dask.distributed`` client whose workers count the shards. Which path runs is the
    table of the module docstring. ``prune_entropy``: the threshold θ of
    :func:`varorder.lm.prune.prune_entropy` applied to the model before it is written
    (``estimator.model_`` stays the unpruned model; ``FileTraining.model`` is the written one).
    """
    if path not in ("auto", "memory", "disk"):
        raise ParameterError(f"path must be 'auto', 'memory' or 'disk', got {path!r}", name="path", value=path)
    paths = [paths] if isinstance(paths, (str, os.PathLike)) else list(paths)
    # the binary and MAX-ARPA writers and pruning need the model in memory; plain ARPA can be written as
    # it is computed
    streamable = output is not None and not (binary or max_arpa or prune_entropy is not None)
    n_workers = None
    streamed = False
    held = "memory"
    if client is not None and memory is None:
        from varorder.lm.sharded import count_ngrams_sharded
        from varorder.parallel import DaskExecutor

        executor = DaskExecutor(client)
        estimator.fit_counts(count_ngrams_sharded(paths, estimator.order, executor, min_count=estimator.min_count))
        n_workers = executor.n_workers
    elif client is not None and streamable:
        from varorder.lm.streaming import train_on_disk

        ngram_counts = train_on_disk(estimator, paths, output, memory=memory, temp_dir=temp_dir, client=client,
                                     progress=progress)
        streamed, held = True, "disk"
    elif client is not None:
        from varorder.lm.external import count_ngrams_on_disk

        estimator.fit_counts(count_ngrams_on_disk(paths, estimator.order, memory=memory, temp_dir=temp_dir,
                                                  min_count=estimator.min_count, progress=progress, client=client))
        held = "disk"
    elif memory is None or path == "memory":
        from varorder.lm.counting import count_corpus

        estimator._validate()
        estimator.fit_counts(count_corpus(paths, estimator.order, min_count=estimator.min_count, progress=progress))
    else:
        estimator._validate()
        result = _count_within(estimator, paths, memory, temp_dir, progress, force_disk=path == "disk")
        if isinstance(result, NgramCounts):
            estimator.fit_counts(result)
        else:
            disk_counts, folder = result
            held = "disk"
            try:
                if streamable:
                    from varorder.lm.streaming import estimate_to_arpa

                    ngram_counts = estimate_to_arpa(estimator, disk_counts, output, memory=memory, folder=folder)
                    streamed = True
                else:
                    from varorder.lm.external import counts_from_tables

                    estimator.fit_counts(counts_from_tables(disk_counts.vocabulary, disk_counts.unigram_counts,
                                                            disk_counts.tables(), disk_counts.n_sentences))
            finally:
                shutil.rmtree(folder, ignore_errors=True)
    model = None
    if not streamed:
        model = estimator.model_
        if prune_entropy is not None:
            from varorder.lm.prune import prune_entropy as prune

            model, _ = prune(model, prune_entropy)
        ngram_counts = list(model.ngram_counts)
        if output is not None and binary:
            from varorder.lm.binary import write_binary

            write_binary(model, output, max_arpa=max_arpa)
        elif output is not None:
            from varorder.lm.arpa import write_arpa

            write_arpa(model, output, max_arpa=max_arpa)
    return FileTraining(estimator, list(ngram_counts), written=output is not None, streamed=streamed,
                        n_workers=n_workers, model=model, path=held)


def _count_within(estimator, paths, memory: int, temp_dir, progress: bool, force_disk: bool = False):
    """Count under a budget: the counts in memory (an :class:`NgramCounts`) when they and
    the estimate fit in ``memory`` (and not ``force_disk``), else ``(DiskCounts, folder)``:
    the sorted tables on disk in a fresh folder inside ``temp_dir``, which the caller
    removes."""
    from varorder.lm.counting import DEFAULT_BLOCK_TOKENS, count_corpus
    from varorder.lm.external import _bytes_per_block_token

    if memory < 1 << 20:
        raise ParameterError(f"a memory budget of {memory} bytes is too small (at least 1M)", name="memory",
                             value=memory)
    order = estimator.order
    block_tokens = max(1024, min(DEFAULT_BLOCK_TOKENS, int(memory * _BLOCK_SHARE) // _bytes_per_block_token(order)))
    spilled = _Spilled(order, temp_dir)
    try:
        left = count_corpus(paths, order, min_count=estimator.min_count, block_tokens=block_tokens,
                            spill=spilled.add, spill_bytes=int(memory * _TABLE_SHARE), progress=progress)
        if not spilled.parts and left is not None and not force_disk \
                and estimate_bytes([len(k) for k in left.keys]) <= memory:
            spilled.close()
            return left
        from varorder.lm._disk import release_freed_arrays

        release_freed_arrays()  # from here on the tables on disk: what is freed goes back at once
        if left is not None:
            spilled.add(left)
        del left
        return spilled.merged(memory), spilled.folder
    except BaseException:
        spilled.close()
        raise


class _Spilled:
    """Parts of the counts spilled to disk as sorted runs of word-id rows (the run format
    of :mod:`varorder.lm.external`), then merged into one table per order."""

    def __init__(self, order: int, temp_dir):
        self.order = order
        self.temp_dir = temp_dir
        self.folder = None
        self.parts = 0
        self.runs: list[list] = [[] for _ in range(order - 1)]
        self.unigram_counts = None
        self.n_sentences = 0
        self.vocabulary = None

    def add(self, counts: NgramCounts) -> None:
        from varorder.lm.external import _DiskRun, _rows_of

        if self.folder is None:
            self.folder = Path(tempfile.mkdtemp(prefix="varorder-lm-", dir=self.temp_dir))
        self.vocabulary = counts.vocabulary
        unigrams = counts.counts[0].astype(np.int64)
        self.unigram_counts = unigrams if self.unigram_counts is None else self.unigram_counts + unigrams
        self.n_sentences += counts.n_sentences
        for m in range(1, self.order):
            rows = _rows_of(counts, m)
            self.runs[m - 1].append(_DiskRun.write(self.folder, f"part{m + 1}-{self.parts}", rows,
                                                   counts.counts[m].astype(np.int64)))
            del rows
        self.parts += 1

    def merged(self, memory: int):
        """The runs merged into one sorted table per order on disk (a single run already
        is one)."""
        from varorder.lm.external import DiskCounts, _merge_to_disk

        if self.parts == 1:
            rows: list = [None] + [run[0].rows for run in self.runs]
            counts: list = [None] + [run[0].counts for run in self.runs]
            return DiskCounts(self.vocabulary, self.unigram_counts, rows, counts, self.n_sentences)
        return _merge_to_disk(self.runs, self.vocabulary, self.unigram_counts, self.n_sentences, self.order, memory,
                              self.folder)

    def close(self) -> None:
        if self.folder is not None:
            shutil.rmtree(self.folder, ignore_errors=True)
