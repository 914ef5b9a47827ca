"""ARPA to binary format version 2 (:mod:`varorder.lm.trie`) in one streamed pass, so that
the memory of ``varorder lm build-binary --trie`` follows the size of its output rather
than the model's (KenLM's ``build_binary trie`` works from sorted files the same way).

Factorization: none of its own — the back-off model of the ARPA file (Carter, Dymetman &
Bouchard 2012, eq. 7), copied into the trie layout.

The file is read in pieces of :data:`CHUNK_BYTES`; each piece's n-gram lines are parsed by
the compiled ARPA line parser (:mod:`varorder.lm._arpa_fast`) and entered at once
(:func:`varorder.lm._trie_kernels.link_rows`): each line's prefix and suffix are found in
the trie of the orders below, already complete and held in memory (its pointer and word
columns only, a few bytes per n-gram), and its last word and values go to the output
file. What is held besides is one order's child counts (8 bytes per n-gram of the order
below) and last words (4 bytes each), plus, when quantising, that order's values (8
bytes each: the bins need them all).

This path needs each section in lexicographic order of its word ids (what varorder and
SRILM write) and every n-gram's prefix and suffix listed (what every estimator writes);
gzip files stream too. Any other file — unsorted, not closed, with unusual text, or one
with an error — is read by :func:`varorder.lm.arpa.read_arpa` in memory instead, which closes
the tables and names the file and line of any error, and is then written by
:func:`varorder.lm.trie.write_trie`: the same file either way.
"""

from __future__ import annotations

import gzip
import os
from pathlib import Path

import numpy as np

from varorder.lm.corpus import BOS, EOS, UNK, PathLike, atomic_output
from varorder.lm.trie import TrieWriter, _check_bits, write_trie

__all__ = ["CHUNK_BYTES", "build_trie"]

CHUNK_BYTES = 1 << 20


class _GeneralReader(Exception):
    """The streamed path cannot take this file (see the module): read it in memory."""


def build_trie(arpa: PathLike, output: PathLike, *, prob_bits: int | None = None, backoff_bits: int | None = None,
               minus_99: str = "zero") -> bool:
    """Write the ARPA file ``arpa`` as a version-2 binary ``output`` (atomically), with
    optional quantisation (see :func:`varorder.lm.trie.write_trie`). Returns whether the
    streamed path served (False: the file was read in memory; see the module)."""
    from varorder.lm._binary_file import _drop_cached_pages, _record_verified

    from varorder.lm._disk import release_freed_arrays

    prob_bits, backoff_bits = _check_bits("prob_bits", prob_bits), _check_bits("backoff_bits", backoff_bits)
    arpa, output = Path(arpa), Path(output)
    release_freed_arrays()  # each piece's arrays go back to the system when freed, not to a growing heap
    try:
        with atomic_output(output) as handle:
            _stream(arpa, handle, prob_bits, backoff_bits, minus_99)
    except _GeneralReader:
        from varorder.lm.arpa import read_arpa

        write_trie(read_arpa(arpa, minus_99=minus_99), output, prob_bits=prob_bits, backoff_bits=backoff_bits)
        return False
    _drop_cached_pages(output)
    _record_verified(os.stat(output))  # written from a file every line of which was parsed and checked
    return True


class _Pieces:
    """An ARPA file's bytes a piece at a time: :meth:`more` appends the next piece to the
    unread tail."""

    def __init__(self, handle):
        self.handle = handle
        self.tail = b""
        self.ended = False

    def more(self) -> bool:
        if self.ended:
            return False
        piece = self.handle.read(CHUNK_BYTES)
        if not piece:
            self.ended = True
            return False
        self.tail += piece
        return True

    def lines(self) -> bytes:
        """The tail's complete lines (taken from it; the last may lack its line feed at
        the end of the file), reading more until there is at least one."""
        while True:
            cut = self.tail.rfind(b"\n") + 1
            if cut and (len(self.tail) >= CHUNK_BYTES or self.ended):
                break
            if not self.more():
                cut = len(self.tail)
                break
        lines, self.tail = self.tail[:cut], self.tail[cut:]
        return lines

    def push_back(self, data: bytes) -> None:
        self.tail = data + self.tail


def _open(path: Path):
    with open(path, "rb") as probe:
        gzipped = probe.read(2) == b"\x1f\x8b"
    return gzip.open(path, "rb") if gzipped else open(path, "rb")


def _head(path: Path, pieces: _Pieces, minus_99: str):
    """``(declared counts, words, unigram log10 p, log10 bow, word table)`` of the file's
    head, its unigram section consumed."""
    from varorder.lm import _arpa_fast, _words
    from varorder.lm.arpa import MISSING_UNK_LOG10PROB, _parse_section

    while True:
        start = pieces.tail.find(b"\\1-grams:")
        found = _arpa_fast._SECTION_START.search(pieces.tail, start + 9) if start >= 0 else None
        if found is not None or not pieces.more():
            break
    if found is None:
        raise _GeneralReader
    head = pieces.tail[:found.start()]
    pieces.tail = pieces.tail[found.start():]
    if b"\x00" in head or _words.has_unusual_text(np.frombuffer(head, dtype=np.uint8)):
        raise _GeneralReader
    counted = _arpa_fast._declared_counts(head)
    if counted is None or counted[1][2] != b"\\1-grams:" or len(counted[0]) < 2:
        raise _GeneralReader
    declared, header = counted
    header_line = head[:header[0]].count(b"\n") + 1
    section, _ = _arpa_fast._unigram_section(head, header[1] + 1, header_line)
    try:
        unigrams = _parse_section(path, 1, section["fields"], section["lines"], minus_99)
    except ValueError:
        raise _GeneralReader from None
    words = unigrams["words"][:, 0].tolist()
    if len(words) != declared[0] or len(set(words)) != len(words) or BOS not in words or EOS not in words \
            or unigrams["max_arpa"]:
        raise _GeneralReader
    table = _words.word_table(words)
    probs = np.asarray(unigrams["probs"], dtype=np.float32)
    backoffs = np.asarray(unigrams["backoffs"], dtype=np.float32)
    if UNK not in words:
        if "<UNK>" in words:
            words[words.index("<UNK>")] = UNK
        else:  # appended as the last word, as the reader does
            words.append(UNK)
            probs = np.append(probs, np.float32(MISSING_UNK_LOG10PROB))
            backoffs = np.append(backoffs, np.float32(0.0))
    return declared, words, probs, backoffs, table


class _LowerTrie:
    """The pointer and word columns of the orders built so far, in memory, with the
    kernels' layout over them."""

    def __init__(self, order: int, counts):
        from varorder.lm import _trie_kernels as k

        self.k = k
        self.bits = np.zeros(1, dtype=np.uint64)
        self.layout = np.zeros((order, k.LAYOUT_COLUMNS), dtype=np.int64)
        self.layout[:, k.COUNT] = counts
        self.layout[:, k.SAMPLE_START] = -1  # no samples: the build's searches are binary
        self.samples = np.zeros(0, dtype=np.int32)

    def add(self, level: int, column: str, values: np.ndarray, width: int) -> None:
        packed = np.zeros(-(-len(values) * width // 64) + 1, dtype=np.uint64)
        self.k.pack_into(np.ascontiguousarray(values, dtype=np.int64), packed, 0, width)
        start = len(self.bits) * 64
        self.bits = np.concatenate([self.bits, packed])
        start_column, width_column = ((self.k.WORD_START, self.k.WORD_WIDTH) if column == "words"
                                      else (self.k.POINTER_START, self.k.POINTER_WIDTH))
        self.layout[level, start_column] = start
        self.layout[level, width_column] = width


def _next_header(pieces: _Pieces) -> bytes:
    """The next non-blank line (consumed), or b"" at the end of the file."""
    while True:
        end = pieces.tail.find(b"\n")
        if end < 0 and pieces.more():
            continue
        line = pieces.tail if end < 0 else pieces.tail[:end]
        pieces.tail = b"" if end < 0 else pieces.tail[end + 1:]
        if line.strip() or (end < 0 and not pieces.more()):
            return line.strip()


def _stream(path: Path, handle, prob_bits: int, backoff_bits: int, minus_99: str) -> None:
    from varorder.lm import _arpa_fast, _trie_kernels, _words

    with _open(path) as source:
        pieces = _Pieces(source)
        declared, words, probs, backoffs, word_table = _head(path, pieces, minus_99)
        order = len(declared)
        counts = [len(words)] + declared[1:]
        writer = TrieWriter(handle, order, counts, words, prob_bits, backoff_bits)
        writer.put("probs1", probs)
        writer.put("backoffs1", backoffs)
        lower = _LowerTrie(order, counts)
        odd = np.empty((_arpa_fast._ODD_CAPACITY, 4), dtype=np.int64)
        minus_99_zero = minus_99 == "zero"
        for m in range(2, order + 1):
            if _next_header(pieces) != b"\\%d-grams:" % m:
                raise _GeneralReader
            count, highest = counts[m - 1], m == order
            quantised = [kind for kind, bits in (("probs", prob_bits), ("backoffs", backoff_bits))
                         if bits and (kind == "probs" or not highest)]
            kept = np.empty((count, 2), dtype=np.float32) if quantised else None
            child_counts = np.zeros(counts[m - 2], dtype=np.int64)
            last_words = np.empty(count, dtype=np.int32)
            path_rows = np.zeros(2 * m, dtype=np.int64)
            suffix_rows = np.zeros(m, dtype=np.int64)
            done, max_arpa = 0, None
            while True:
                lines = pieces.lines()
                if not lines:
                    break
                buffer = np.frombuffer(lines, dtype=np.uint8)
                room = min(count - done, lines.count(b"\n") + 1)
                ids = np.empty((room, m), dtype=np.int32)
                values = np.empty((room, 2), dtype=np.float32)
                max_probs, max_backoffs = np.empty(room), np.empty(room)
                status, pos, n_lines, n_odd, _, piece_max = _arpa_fast._parse_section_lines(
                    buffer, _words.uint64_view(buffer), 0, m, highest, room, _arpa_fast._BYTE_CLASS, *word_table,
                    ids, values, max_probs, max_backoffs, minus_99_zero, odd, np.zeros(4),
                    np.zeros((2, m), dtype=np.int64), np.zeros((2, m), dtype=np.uint64))
                if status != 0:
                    raise _GeneralReader
                if n_odd and not _arpa_fast._odd_numbers(lines, odd[:n_odd], values, max_probs, max_backoffs,
                                                         minus_99_zero, highest):
                    raise _GeneralReader
                if n_lines and max_arpa is not None and piece_max != max_arpa:
                    raise _GeneralReader
                if n_lines:
                    max_arpa = piece_max
                if _trie_kernels.link_rows(ids, done, n_lines, lower.bits, lower.layout, lower.samples, path_rows, suffix_rows, child_counts, last_words) != 0:
                    raise _GeneralReader
                if kept is not None:
                    kept[done:done + n_lines] = values[:n_lines]
                for column, kind in enumerate(("probs", "backoffs")):
                    if kind not in quantised and (kind == "probs" or not highest):
                        writer.append(f"{kind}{m}", values[:n_lines, column])
                done += n_lines
                if pos < len(lines):  # the next section's header: this section is over
                    pieces.push_back(lines[pos:])
                    break
            if done != count:
                raise _GeneralReader
            pointers = np.zeros(counts[m - 2] + 1, dtype=np.int64)
            np.cumsum(child_counts, out=pointers[1:])
            del child_counts
            writer.put_packed(f"pointers{m - 1}", pointers)
            writer.put_packed(f"words{m}", last_words)
            for kind in quantised:
                writer.put_values(kind, m, kept[:, 0 if kind == "probs" else 1])
            if m < order:
                lower.add(m - 2, "pointers", pointers, writer.widths[f"pointers{m - 1}"])
                lower.add(m - 1, "words", last_words, writer.widths[f"words{m}"])
            del pointers, last_words, kept
        if _next_header(pieces) != b"\\end\\":
            raise _GeneralReader
        writer.finish()
