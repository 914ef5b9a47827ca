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
none                   none        ``estimator.fit(paths)``: counts and model in memory
none                   Dask        counts of one shard per worker, merged here in memory
                                   (:func:`~varorder.lm.sharded.count_ngrams_sharded`)
given, ARPA output     either      the whole estimate by passes over sorted tables on disk, the
                                   ARPA file written as it is computed (lmplz's ``-S``,
                                   :func:`~varorder.lm.streaming.train_on_disk`); no model in memory
given, otherwise       either      counting on disk (sorted runs, merged under the budget;
                                   :func:`~varorder.lm.external.count_ngrams_on_disk`), the model
                                   estimated in memory from those counts
=====================  ==========  ===============================================================

With ``prune_entropy`` the model is pruned by relative entropy (Stolcke 1998, as SRILM's
``-prune``; :mod:`varorder.lm.prune`) before it is written, so it is estimated in memory
(from counts on disk under a budget), as for the binary and MAX-ARPA writers.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Sequence

from varorder.lm.corpus import PathLike

__all__ = ["FileTraining", "train_from_files"]


@dataclass
class FileTraining:
    """What :func:`train_from_files` did.

    ``ngram_counts``: n-grams per order in the model; ``written``: whether ``output`` was
    written; ``streamed``: whether the estimate ran on disk (the estimator then has its
    discounts but no ``model_``); ``n_workers``: the Dask workers that counted, or None when
    this process counted; ``model``: the model written (pruned with ``prune_entropy``), None
    when streamed.
    """

    estimator: object
    ngram_counts: list[int]
    written: bool
    streamed: bool
    n_workers: int | None = None
    model: object = None


def train_from_files(estimator, paths: PathLike | Sequence[PathLike], *, memory: int | None = None,
                     temp_dir: PathLike | None = None, client=None, output: PathLike | None = None,
                     binary: bool = False, max_arpa: bool = False, progress: bool = False,
                     prune_entropy: float | None = None) -> FileTraining:
    """Fit ``estimator`` (a :mod:`varorder.lm.estimate` estimator) on text files (one
    sentence per line, ``.gz`` read transparently) and write the model to ``output`` when
    given: ARPA, MAX-ARPA (``max_arpa``) or the binary format (``binary``).

    ``memory``: bytes of data to hold at most (lmplz's ``-S``); None keeps everything in
    memory. ``temp_dir``: where the tables on disk go (with ``client``, a folder the workers
    reach). ``client``: a ``dask.distributed`` client whose workers count the shards. Which
    path runs is the table of the module docstring. ``prune_entropy``: the threshold θ of
    :func:`varorder.lm.prune.prune_entropy` applied to the model before it is written
    (``estimator.model_`` stays the unpruned model; ``FileTraining.model`` is the written one).
    """
    paths = [paths] if isinstance(paths, (str, os.PathLike)) else list(paths)
    # the binary and MAX-ARPA writers and pruning need the model in memory; plain ARPA can be written as
    # it is computed
    streamed = memory is not None and output is not None and not (binary or max_arpa or prune_entropy is not None)
    n_workers = None
    if client is not None and memory is None:
        from varorder.lm.sharded import count_ngrams_sharded
        from varorder.parallel import DaskExecutor

        executor = DaskExecutor(client)
        estimator.fit_counts(count_ngrams_sharded(paths, estimator.order, executor, min_count=estimator.min_count))
        n_workers = executor.n_workers
    elif streamed:
        from varorder.lm.streaming import train_on_disk

        ngram_counts = train_on_disk(estimator, paths, output, memory=memory, temp_dir=temp_dir, client=client,
                                     progress=progress)
    elif memory is not None:
        from varorder.lm.external import count_ngrams_on_disk

        estimator.fit_counts(count_ngrams_on_disk(paths, estimator.order, memory=memory, temp_dir=temp_dir,
                                                  min_count=estimator.min_count, progress=progress, client=client))
    else:
        estimator.fit(paths)
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
                        n_workers=n_workers, model=model)
