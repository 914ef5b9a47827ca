"""Vocabulary and streaming corpus reading for n-gram language models.

A corpus is a text file with one sentence per line and whitespace-separated tokens;
``.gz`` files are recognised by their magic bytes, whatever their name. Every sentence
is modelled as ``<s> w_1 ... w_T </s>``: ``<s>`` is only ever a context, ``</s>`` only
ever predicted, and a word outside the vocabulary is read as ``<unk>``.
"""

from __future__ import annotations

import contextlib
import io
import itertools
import os
import sys
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

import numpy as np

from varorder.errors import FormatError, ParameterError

BOS = "<s>"
EOS = "</s>"
UNK = "<unk>"
SPECIAL_WORDS = (UNK, BOS, EOS)

PathLike = str | os.PathLike


def open_text(path: PathLike) -> io.TextIOBase:
    """Open ``path`` for reading text, gunzipping it when it starts with gzip's magic bytes.

    Bytes that are not UTF-8 are kept as surrogate escapes, so any byte sequence makes a
    distinct token and is written back unchanged. A corrupt or truncated gzip stream is a
    ValueError naming the file and line (the one opening path, :mod:`varorder.io._text`).
    """
    from varorder.io._text import open_text as checked_open

    return checked_open(path, errors="surrogateescape")


@contextlib.contextmanager
def atomic_output(path: PathLike) -> Iterator[io.BufferedWriter]:
    """Write a file atomically: yield a binary handle on a temporary file beside ``path``,
    renamed over ``path`` only when the block succeeds, with the permissions ``open``
    would have given under the current umask (``mkstemp`` makes files 0600)."""
    path = Path(path)
    folder = path.parent if str(path.parent) else Path(".")
    descriptor, temporary = tempfile.mkstemp(dir=folder, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(descriptor, "wb") as handle:
            yield handle
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(temporary, 0o666 & ~umask)
        os.replace(temporary, path)
    except BaseException as error:
        from varorder.io._text import naming_path

        if os.path.exists(temporary):
            os.unlink(temporary)
        raise naming_path(error, path)


def iter_sentences(path: PathLike) -> Iterator[tuple[int, list[str]]]:
    """Yield ``(line_number, tokens)`` for each non-blank line of ``path`` (1-based numbers).

    Raises ValueError naming the file and line when a line holds ``<s>`` or ``</s>``: the
    model adds those markers itself, so a corpus that spells them out would be counted twice.
    ``path`` ``"-"`` reads standard input, under the same rules.
    """
    if os.fspath(path) == "-":
        handle, path = contextlib.nullcontext(sys.stdin), "<stdin>"
    else:
        handle = open_text(path)
    with handle as lines:
        for line_number, line in enumerate(lines, start=1):
            tokens = line.split()
            if not tokens:
                continue
            if BOS in tokens or EOS in tokens:
                raise FormatError(
                    f"{path}:{line_number}: the corpus spells out {BOS} or {EOS}; "
                    "write sentences without them (the model adds them)", path=path, line=line_number
                )
            yield line_number, tokens


class Vocabulary:
    """A bijection between word strings and dense integer ids.

    Parameters
    ----------
    words : sequence of str
        The words in id order. ``<unk>``, ``<s>`` and ``</s>`` are added at the end
        when absent, so every vocabulary can encode any sentence.
    """

    def __init__(self, words: Sequence[str]):
        words = list(words)
        index: dict[str, int] = {}
        for position, word in enumerate(words):
            if word in index:
                raise ParameterError(f"word {word!r} appears twice in the vocabulary (ids {index[word]} and {position})", name='words', value=words)
            index[word] = position
        for special in SPECIAL_WORDS:
            if special not in index:
                index[special] = len(words)
                words.append(special)
        self.words: tuple[str, ...] = tuple(words)
        self.index = index
        self.unk_id = index[UNK]
        self.bos_id = index[BOS]
        self.eos_id = index[EOS]

    def __len__(self) -> int:
        return len(self.words)

    def __contains__(self, word: str) -> bool:
        return word in self.index

    def __repr__(self) -> str:
        return f"Vocabulary({len(self)} words)"

    def id_of(self, word: str) -> int:
        """The id of ``word``, or of ``<unk>`` when it is not in the vocabulary."""
        return self.index.get(word, self.unk_id)

    def encode(self, tokens: Iterable[str]) -> np.ndarray:
        """Ids (int32) of ``tokens``, unknown words mapped to ``<unk>``."""
        return np.fromiter(map(self.index.get, tokens, itertools.repeat(self.unk_id)), dtype=np.int32)

    def encode_sentences(self, sentences: Iterable[Sequence[str]]) -> tuple[np.ndarray, np.ndarray]:
        """Encode many sentences into the flat layout the batched scorers take.

        Returns ``(ids, lengths)``: all ids concatenated (int32), and each sentence's length
        (int64), without ``<s>``/``</s>``.
        """
        get, unk = self.index.get, itertools.repeat(self.unk_id)
        flat: list[int] = []
        lengths: list[int] = []
        for tokens in sentences:
            flat.extend(map(get, tokens, unk))
            lengths.append(len(tokens))
        return np.asarray(flat, dtype=np.int32), np.asarray(lengths, dtype=np.int64)

    def encode_lines(self, sentences: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`encode_sentences` of sentence strings (tokens split on whitespace), done
        by a compiled kernel over their UTF-8 bytes and a byte-level hash of the
        vocabulary (built on first use): no Python string per token. Gives exactly
        :meth:`encode_sentences`'s result; text the kernel would split differently
        (a sentence holding a line break, Unicode whitespace) goes through it instead."""
        from varorder.lm import _encode, _words

        text = "\n".join(sentences) + "\n"
        data = np.frombuffer(text.encode("utf-8", errors="surrogateescape"), dtype=np.uint8)
        ids = np.empty(len(data) // 2 + 1, dtype=np.int32)
        lengths = np.empty(len(data) + 1, dtype=np.int64)
        n_tokens, n_sentences = _encode.encode_sentence_lines(data, _words.uint64_view(data), *self.byte_table(),
                                                              self.unk_id, ids, lengths)
        if n_tokens == _words.UNUSUAL_TEXT or n_sentences != len(sentences):  # or a sentence spans several lines
            return self.encode_sentences(s.split() for s in sentences)
        return ids[:n_tokens], lengths[:n_sentences]

    def encode_text(self, text: str) -> tuple[np.ndarray, np.ndarray]:
        """``(ids, lengths)`` of the non-blank lines of ``text`` (whole lines, one sentence
        each), by the compiled encoder of :meth:`encode_lines`; text it would split
        otherwise than ``str.split`` goes through :meth:`encode_sentences`."""
        from varorder.lm import _encode, _words

        data = np.frombuffer(text.encode("utf-8", errors="surrogateescape"), dtype=np.uint8)
        ids = np.empty(len(data) // 2 + 1, dtype=np.int32)
        lengths = np.empty(text.count("\n") + 1, dtype=np.int64)
        n_tokens, n_lines = _encode.encode_sentence_lines(data, _words.uint64_view(data), *self.byte_table(),
                                                          self.unk_id, ids, lengths)
        if n_tokens == _words.UNUSUAL_TEXT:
            return self.encode_sentences(tokens for tokens in (line.split() for line in text.split("\n")) if tokens)
        lengths = lengths[:n_lines]
        return ids[:n_tokens], lengths[lengths > 0]

    def byte_table(self) -> tuple[np.ndarray, ...]:
        """The byte-level hash of the words (:func:`varorder.lm._words.word_table`), built
        on first use."""
        if getattr(self, "_byte_table", None) is None:
            from varorder.lm import _words

            self._byte_table = _words.word_table(self.words)
        return self._byte_table

    def decode(self, ids: Iterable[int]) -> list[str]:
        """The words of ``ids``."""
        return [self.words[i] for i in ids]


def read_corpus(
    paths: PathLike | Sequence[PathLike],
    min_count: int = 1,
    vocabulary: Vocabulary | None = None,
) -> tuple[Vocabulary, np.ndarray, np.ndarray]:
    """Read sentences from text files into ids, building the vocabulary on the way.

    Parameters
    ----------
    paths : path or sequence of paths
        Text files, one sentence per line (``.gz`` transparently). Read line by line: the
        text is never held in memory, only its ids (4 bytes a token).
    min_count : int
        Words seen fewer times than this become ``<unk>`` (ignored when ``vocabulary`` is
        given).
    vocabulary : Vocabulary, optional
        A fixed vocabulary to encode with instead of building one.

    Returns
    -------
    vocabulary, ids, lengths
        ``ids`` concatenates all sentences (int32, no markers); ``lengths`` gives each
        sentence's token count. Built vocabularies put ``<unk>``, ``<s>``, ``</s>`` first,
        then words by decreasing frequency (ties alphabetically), so ids are reproducible.
    """
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    if min_count < 1:
        raise ParameterError(f"min_count must be at least 1, got {min_count}", name='min_count', value=min_count)
    # Build ids against a growing first-seen dictionary; remap once at the end so the
    # frequency cut-off needs a single pass over the text.
    if vocabulary is not None:
        seen, unk_id = vocabulary.index, vocabulary.unk_id
    else:
        seen = {word: i for i, word in enumerate(SPECIAL_WORDS)}
        unk_id = 0
    chunks: list[np.ndarray] = []
    lengths: list[int] = []
    buffer: list[int] = []
    for path in paths:
        for _, tokens in iter_sentences(Path(path)):
            if vocabulary is None:
                for token in tokens:
                    if token not in seen:
                        seen[token] = len(seen)
                buffer.extend(seen[token] for token in tokens)
            else:
                buffer.extend(seen.get(token, unk_id) for token in tokens)
            lengths.append(len(tokens))
            if len(buffer) >= 1 << 20:
                chunks.append(np.asarray(buffer, dtype=np.int32))
                buffer = []
    chunks.append(np.asarray(buffer, dtype=np.int32))
    ids = np.concatenate(chunks)
    lengths_array = np.asarray(lengths, dtype=np.int64)
    if vocabulary is not None:
        return vocabulary, ids, lengths_array

    first_seen_words = list(seen)
    frequency = np.bincount(ids, minlength=len(first_seen_words))
    kept = [
        first_seen_id
        for first_seen_id in range(len(SPECIAL_WORDS), len(first_seen_words))
        if frequency[first_seen_id] >= min_count and first_seen_words[first_seen_id] != UNK
    ]
    kept.sort(key=lambda i: (-frequency[i], first_seen_words[i]))
    remap = np.full(len(first_seen_words), unk_id, dtype=np.int32)
    for special_id in range(len(SPECIAL_WORDS)):
        remap[special_id] = special_id
    remap[np.asarray(kept, dtype=np.int64)] = np.arange(len(SPECIAL_WORDS), len(SPECIAL_WORDS) + len(kept), dtype=np.int32)
    vocabulary = Vocabulary(list(SPECIAL_WORDS) + [first_seen_words[i] for i in kept])
    return vocabulary, remap[ids], lengths_array
