"""Counting n-grams of text files in memory, a block of sentences at a time, so that the
memory held follows the number of distinct n-grams and not the number of tokens.

Factorization: none of its own — it gives exactly the :class:`NgramCounts` of
:func:`varorder.lm.estimate.count_ngrams` on the whole corpus (tables, row order, suffix
rows and integer widths; tested), so every estimator of :mod:`varorder.lm.estimate`
estimates the same model from it (Chen & Goodman 1999). The design is lmplz's count
stage (Heafield, Pouzyrevsky, Clark & Koehn 2013, "Scalable Modified Kneser-Ney
Language Model Estimation"): count what fits, merge sorted tables.

Steps: one streamed pass builds the vocabulary (:func:`vocabulary_of_text`, the order
:func:`~varorder.lm.corpus.read_corpus` gives); a second encodes the text a block of
sentences at a time (the compiled encoder over 4 MB pieces of text), counts each block with :func:`count_ngrams`
(packed keys ``prefix_row * V + word``, one sort per order), and merges the block's
tables into the ones held (:mod:`varorder.lm._count_kernels`: one linear pass per order).
Tables are kept as a stack of sizes at least doubling downwards, as a binary counter, so
each n-gram takes part in O(log(tokens / block)) merges whatever the corpus size. With a
``spill`` callback (the bounded path of :mod:`varorder.lm.train`), the tables held are
merged whenever they pass ``spill_bytes``, and handed to it when even merged they fill
most of it; counting then starts afresh.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence

import numpy as np

from varorder.lm.corpus import PathLike, Vocabulary
from varorder.lm.estimate import NgramCounts, count_ngrams

__all__ = ["count_corpus", "table_bytes", "vocabulary_of_text", "DEFAULT_BLOCK_TOKENS"]

# Tokens counted at once: count_ngrams holds ~100 bytes per token of its block (padded ids,
# positions, packed keys, np.unique's sort and inverse at order 5), so ~100 MB.
DEFAULT_BLOCK_TOKENS = 1 << 20


# Merged tables above this share of ``spill_bytes`` are spilled (below it, the next blocks
# are merged into them).
_SPILL_FILL = 0.9


def table_bytes(counts: NgramCounts) -> int:
    """Bytes held by the count tables (keys, counts, suffix rows)."""
    return sum(a.nbytes for m in range(counts.order)
               for a in (counts.keys[m], counts.counts[m], counts.suffix_rows[m]) if a is not None)


def _widen(counts: NgramCounts, dtype) -> NgramCounts:
    if counts.order < 2 or counts.counts[1].dtype == dtype:
        return counts
    return NgramCounts(counts.vocabulary, counts.keys, [counts.counts[0]] + [c.astype(dtype) for c in counts.counts[1:]],
                       [None] + [s.astype(dtype) for s in counts.suffix_rows[1:]], counts.n_sentences)


def merge_two(a: NgramCounts, b: NgramCounts) -> NgramCounts:
    """The counts of both corpora (as :func:`varorder.lm.estimate.merge_counts`), by the
    compiled linear merge: the row order, suffix rows and integer widths of one pass."""
    from varorder.lm._count_kernels import merge_tables

    unigrams = a.counts[0] + b.counts[0]
    # the one-pass width rule: int32 below 2^31 padded tokens, and the unigram counts sum to them
    narrow = np.int32 if int(unigrams.sum()) < 2**31 else np.int64
    a, b = _widen(a, narrow), _widen(b, narrow)
    vocab_size = len(a.vocabulary)
    merged = merge_tables(vocab_size, [(a.keys[m], a.counts[m], a.suffix_rows[m]) for m in range(1, a.order)],
                          [(b.keys[m], b.counts[m], b.suffix_rows[m]) for m in range(1, b.order)], narrow)
    return NgramCounts(a.vocabulary, [a.keys[0]] + [k for k, _, _ in merged], [unigrams] + [c for _, c, _ in merged],
                       [None] + [s for _, _, s in merged], a.n_sentences + b.n_sentences)


class _Stack:
    """Count tables held as a binary counter: a new table is merged with the one below
    while that one is at most twice its size (in n-grams)."""

    def __init__(self):
        self.tables: list[NgramCounts] = []

    def push(self, counts: NgramCounts) -> None:
        self.tables.append(counts)
        while len(self.tables) > 1 and _size(self.tables[-2]) <= 2 * _size(self.tables[-1]):
            top = self.tables.pop()
            self.tables[-1] = merge_two(self.tables[-1], top)

    def nbytes(self) -> int:
        return sum(table_bytes(t) for t in self.tables)

    def collapse(self) -> NgramCounts | None:
        while len(self.tables) > 1:
            top = self.tables.pop()
            self.tables[-1] = merge_two(self.tables[-1], top)
        return self.tables.pop() if self.tables else None


def _size(counts: NgramCounts) -> int:
    return sum(len(k) for k in counts.keys[1:])


def _text_batches(paths: Sequence[PathLike], batch_chars: int) -> Iterator[str]:
    """The files' text in pieces of whole lines, about ``batch_chars`` characters each
    (read by :func:`~varorder.lm.corpus.open_text`, which names the file and line of a
    damaged one)."""
    from varorder.lm.corpus import open_text

    for path in paths:
        with open_text(path) as handle:
            carry = ""
            while True:
                text = handle.read(batch_chars)
                if not text:
                    break
                cut = text.rfind("\n") + 1
                if cut == 0:
                    carry += text
                    continue
                yield carry + text[:cut]
                carry = text[cut:]
            if carry:
                yield carry + "\n"


def vocabulary_of_text(paths: Sequence[PathLike], min_count: int = 1, batch_chars: int = 4 << 20) -> Vocabulary:
    """The vocabulary :func:`~varorder.lm.corpus.read_corpus` builds, from one streamed
    pass that holds only the word counts (a text batch split at once)."""
    from collections import Counter

    from varorder.lm.corpus import BOS, EOS
    from varorder.lm.external import _refuse_markers, vocabulary_from_frequencies

    frequency: Counter[str] = Counter()
    for text in _text_batches(paths, batch_chars):
        frequency.update(text.split())
    if BOS in frequency or EOS in frequency:
        _refuse_markers(paths)  # the error of iter_sentences, with the file and line
    return vocabulary_from_frequencies(frequency, min_count)


def _blocks(paths: Sequence[PathLike], vocabulary: Vocabulary, block_tokens: int, batch_chars: int
            ) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """``(ids, lengths)`` of consecutive sentences, at least ``block_tokens`` tokens a
    block (but the last), each block at most one text batch more."""
    pieces: list[tuple[np.ndarray, np.ndarray]] = []
    held = 0
    for text in _text_batches(paths, batch_chars):
        ids, lengths = vocabulary.encode_text(text)
        del text
        pieces.append((ids, lengths))
        held += len(ids)
        if held >= block_tokens:
            yield _joined(pieces)
            pieces, held = [], 0
    if pieces:
        yield _joined(pieces)


def _joined(pieces):
    if len(pieces) == 1:
        return pieces[0]
    return np.concatenate([p[0] for p in pieces]), np.concatenate([p[1] for p in pieces])


def _empty(vocabulary: Vocabulary, order: int) -> NgramCounts:
    vocab_size = len(vocabulary)
    return NgramCounts(vocabulary, [np.arange(vocab_size, dtype=np.int64)] + [np.empty(0, np.int64)] * (order - 1),
                       [np.zeros(vocab_size, dtype=np.int64)] + [np.empty(0, np.int32)] * (order - 1),
                       [None] + [np.empty(0, np.int32)] * (order - 1), 0)


def count_corpus(paths: PathLike | Sequence[PathLike], order: int, *, min_count: int = 1,
                 vocabulary: Vocabulary | None = None, block_tokens: int = DEFAULT_BLOCK_TOKENS,
                 spill: Callable[[NgramCounts], object] | None = None, spill_bytes: int | None = None,
                 progress: bool = False) -> NgramCounts | None:
    """The n-gram counts of orders 1 .. ``order`` of text files (one sentence per line,
    ``.gz`` too), equal to ``count_ngrams(*read_corpus(paths, min_count))``, counted
    ``block_tokens`` tokens at a time (module docstring). Standard input (``"-"``) is
    read once, as :func:`~varorder.lm.corpus.read_corpus` reads it.

    With ``spill``: whenever the tables held pass ``spill_bytes``, they are merged, and
    when the merged tables still fill 90 % of it they are passed to ``spill`` (a part of the corpus's counts, in one vocabulary), and counting
    goes on from empty tables; the tables left at the end are returned (None when no
    n-gram is left), and the parts with them add up to the whole corpus's counts.
    """
    from varorder._progress import Progress
    from varorder.lm.corpus import read_corpus

    paths = [paths] if isinstance(paths, (str, os.PathLike)) else list(paths)
    if any(os.fspath(p) == "-" for p in paths):  # one pass only: the corpus's ids are held
        vocabulary, ids, lengths = read_corpus(paths, min_count=min_count, vocabulary=vocabulary)
        blocks = iter([(ids, lengths)])
    else:
        batch_chars = min(4 << 20, max(256, 6 * block_tokens))
        vocabulary = vocabulary or vocabulary_of_text(paths, min_count, batch_chars)
        blocks = _blocks(paths, vocabulary, max(1, block_tokens), batch_chars)
    stack = _Stack()
    spilled = False
    for ids, lengths in Progress(blocks, enabled=progress, desc="counting blocks", unit=" blocks"):
        stack.push(count_ngrams(ids, lengths, order, vocabulary))
        del ids, lengths
        if spill is not None and spill_bytes is not None and stack.nbytes() > spill_bytes:
            # merged first: only counts that still pass the limit once merged go out
            merged = stack.collapse()
            if table_bytes(merged) > spill_bytes * _SPILL_FILL:
                spill(merged)
                spilled = True
            else:
                stack.tables = [merged]
            del merged
    counts = stack.collapse()
    if counts is None and not spilled:
        return _empty(vocabulary, order)
    return counts
