"""n-gram counts made shard by shard on an executor's workers and merged in memory.

Counting is additive: the counts of a corpus are the sums of the counts of any partition of its
sentences. Two rounds on a :mod:`varorder.parallel` executor (a Dask client for ``lm train
--dask-scheduler``):

1. shard s of ``n_shards`` (every ``n_shards``-th sentence from s, over all files in order) counts its
   words where it runs; the driver adds the word counts and builds the vocabulary of
   :func:`varorder.lm.corpus.read_corpus` (specials first, then by decreasing frequency, ties
   alphabetically, rarer than ``min_count`` → ``<unk>``), which depends on the counts alone;
2. each shard counts its n-grams over that vocabulary (:func:`varorder.lm.estimate.count_ngrams`) and
   sends its :class:`~varorder.lm.estimate.NgramCounts` back; the driver adds them with
   :func:`~varorder.lm.estimate.merge_counts`.

Integer sums: the merged counts equal one pass over the whole corpus exactly, for any ``n_shards``
and any executor. The driver holds the shards' counts and their merge (about what the in-memory
estimator holds for the whole corpus's counts, times two); the files are read on the workers (which
must reach them at the same paths), never here. For bounded memory the on-disk counter (:mod:`varorder.lm.external`, ``-S``) merges
sorted runs instead.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np

from varorder.errors import ParameterError
from varorder.lm.corpus import BOS, EOS, Vocabulary
from varorder.lm.estimate import NgramCounts, count_ngrams, merge_counts
from varorder.lm.external import _blocks, _refuse_markers, _sentence_batches, vocabulary_from_frequencies
from varorder.parallel import as_executor

__all__ = ["count_ngrams_sharded", "shard_frequencies", "shard_counts"]


def shard_frequencies(shard: int, paths: list[str], n_shards: int) -> Counter:
    """Word counts of shard ``shard``: the sentences whose index is ``shard`` modulo ``n_shards``."""
    frequency: Counter[str] = Counter()
    index = 0
    for lines in _sentence_batches(paths, 1 << 20):
        frequency.update("".join(lines[(shard - index) % n_shards::n_shards]).split())
        index += len(lines)
    if BOS in frequency or EOS in frequency:
        _refuse_markers(paths)  # the file and line that spell a marker out
    return frequency


def shard_counts(shard: int, paths: list[str], n_shards: int, words: list[str], order: int) -> NgramCounts | None:
    """The n-gram counts of shard ``shard`` over the vocabulary ``words`` (None: no sentence)."""
    vocabulary = Vocabulary(words)
    blocks = list(_blocks(paths, vocabulary, 1 << 62, shard, n_shards))
    if not blocks:
        return None
    ids = np.concatenate([b[0] for b in blocks])
    lengths = np.concatenate([b[1] for b in blocks])
    del blocks
    return count_ngrams(ids, lengths, order, vocabulary)


def count_ngrams_sharded(paths, order: int, executor=None, *, min_count: int = 1,
                         n_shards: int | None = None) -> NgramCounts:
    """Counts of orders 1 .. ``order`` of text files (one sentence per line, ``.gz`` too), counted in
    ``n_shards`` shards (default: one per worker) on ``executor`` (anything
    :func:`varorder.parallel.as_executor` takes) and merged here; equal to
    ``count_ngrams(*read_corpus(paths, min_count))`` exactly."""
    if isinstance(paths, (str, Path)):
        paths = [paths]
    paths = [str(Path(p).resolve()) for p in paths]
    if min_count < 1:
        raise ParameterError(f"min_count must be at least 1, got {min_count}", name='min_count', value=min_count)
    executor = as_executor(executor)
    n_shards = int(n_shards or executor.n_workers)
    if n_shards < 1:
        raise ParameterError(f"n_shards must be a positive integer, got {n_shards}", name='n_shards', value=n_shards)
    shards = list(range(n_shards))
    frequency: Counter[str] = Counter()
    for part in executor.map(shard_frequencies, shards, paths, n_shards):
        frequency.update(part)
    vocabulary = vocabulary_from_frequencies(frequency, min_count)
    del frequency
    parts = [p for p in executor.map(shard_counts, shards, paths, n_shards, list(vocabulary.words), order)
             if p is not None]
    if not parts:
        return count_ngrams(np.zeros(0, np.int32), np.zeros(0, np.int64), order, vocabulary)
    return merge_counts(parts)
