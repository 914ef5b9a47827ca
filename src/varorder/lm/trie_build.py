"""ARPA to binary format version 2 (:mod:`varorder.lm.trie`) in one streamed pass, so that
the memory of ``varorder lm build-binary --trie`` follows the size of its output rather
than the model's (KenLM's ``build_binary trie`` works from sorted files the same way).

Factorization: none of its own — the back-off model of the ARPA file (Carter, Dymetman &
Bouchard 2012, eq. 7), copied into the trie layout.

The file is read in pieces of :data:`CHUNK_BYTES`; each piece's lines are tokenised in
NumPy (tokens split on spaces and tabs as ``str.split`` splits them; words looked up by a
hash of their bytes, every match compared byte for byte; numbers read by NumPy's string
to float conversion, which reads them as Python's ``float`` does, with the reader's checks
and ``-99`` handling) and entered at once: each n-gram's prefix and suffix rows are found by binary search in the
sorted packed keys ``prefix row * V + last word`` of the orders below (8 bytes per n-gram
of orders 2 .. N - 1, the only table held), which checks that the model is closed; the
section's keys must rise strictly (its lexicographic order); its last words and values go
to the output file as they come, its child counts are summed per prefix row. Held besides:
one order's child counts and last words, plus, when quantising, that order's values (the
bins need them all). Nothing here imports Numba: the process's floor is the interpreter
and NumPy, as a C++ tool's is its binary.

This path needs each section in lexicographic order of its word ids (what varorder and
SRILM write) and every n-gram's prefix and suffix listed (what every estimator writes);
gzip files stream too. Any other file — unsorted, not closed, MAX-ARPA, or one with an
error — is read by :func:`varorder.lm.arpa.read_arpa` in memory instead, which closes
the tables and names the file and line of any error, and is then written by
:func:`varorder.lm.trie.write_trie`: the same file either way.
"""

from __future__ import annotations

import gzip
import os
import re
from pathlib import Path

import numpy as np

from varorder.lm.corpus import BOS, EOS, UNK, PathLike, atomic_output
from varorder.lm.arpa import FLOAT32_MAX, ZERO_PROBABILITY_LOG10  # light: no compiled kernels
from varorder.lm.trie import TrieWriter, _check_bits, write_trie

__all__ = ["CHUNK_BYTES", "build_trie"]

# Bytes of the file tokenised at a time: the NumPy temporaries of a piece are some tens
# of bytes per byte of text.
CHUNK_BYTES = 1 << 16


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

    def line(self) -> bytes | None:
        """The next line without its line feed (consumed), None at the end of the file."""
        while True:
            end = self.tail.find(b"\n")
            if end >= 0 or not self.more():
                break
        if end < 0:
            if not self.tail:
                return None
            end = len(self.tail)
        line, self.tail = self.tail[:end], self.tail[end + 1:]
        return line


def _open(path: Path):
    with open(path, "rb") as probe:
        gzipped = probe.read(2) == b"\x1f\x8b"
    return gzip.open(path, "rb") if gzipped else open(path, "rb")


def _next_text(pieces: _Pieces) -> bytes:
    """The next non-blank line, stripped (consumed), or b"" at the end of the file."""
    while True:
        line = pieces.line()
        if line is None:
            return b""
        if line.strip():
            return line.strip()


def _declared(pieces: _Pieces) -> list[int]:
    """The counts of the ``\\data\\`` section, the ``\\1-grams:`` header consumed."""
    from varorder.lm.arpa import _COUNT_LINE

    while True:
        text = _next_text(pieces)
        if not text:
            raise _GeneralReader
        if text == b"\\data\\":
            break
    declared = []
    while True:
        text = _next_text(pieces)
        match = _COUNT_LINE.match(text.decode("utf-8", errors="surrogateescape"))
        if not match:
            break
        if int(match.group(1)) != len(declared) + 1:
            raise _GeneralReader
        declared.append(int(match.group(2)))
    if text != b"\\1-grams:" or len(declared) < 2:
        raise _GeneralReader
    return declared


_SPACE, _TAB, _NEWLINE, _BACKSLASH = 32, 9, 10, 92
# Bytes a block may hold: anything but the control bytes Python's str.split or universal
# newlines treat specially (\r, \v, \f, \x1c-\x1f) and NUL.
_REFUSED = np.zeros(256, dtype=bool)
_REFUSED[[0, 11, 12, 13, 28, 29, 30, 31]] = True
# The UTF-8 forms of the non-ASCII characters str.split splits on.
_UNICODE_SPACE = re.compile(rb"\xc2[\x85\xa0]|\xe1\x9a\x80|\xe2\x80[\x80-\x8a\xa8\xa9\xaf]|\xe2\x81\x9f|\xe3\x80\x80")
_NUMBER_BYTE = np.zeros(256, dtype=bool)
_NUMBER_BYTE[np.frombuffer(b"0123456789.+-_eEinftyaINFTYA", dtype=np.uint8)] = True
_LONGEST_NUMBER = 40
_HASH_BASE = np.uint64(0x100000001B3)


def _hashes(buffer: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(hash of each token, the tokens' bytes end to end as positions in buffer, each
    byte's offset within its token)``: a polynomial hash over the bytes, mod 2**64."""
    total = int(lengths.sum())
    token_offsets = np.zeros(len(lengths), dtype=np.int64)
    np.cumsum(lengths[:-1], out=token_offsets[1:])
    within = np.arange(total, dtype=np.int64) - np.repeat(token_offsets, lengths)
    positions = np.repeat(starts, lengths) + within
    powers = np.cumprod(np.full(int(lengths.max()), _HASH_BASE, dtype=np.uint64)) if total else np.ones(1, np.uint64)
    terms = (buffer[positions].astype(np.uint64) + np.uint64(1)) * powers[within]
    hashes = np.add.reduceat(terms, token_offsets) if total else np.zeros(0, np.uint64)
    return hashes ^ lengths.astype(np.uint64), positions, within


class _Words:
    """The unigram words' bytes and hashes, to look tokens up by (exactly: the bytes of a
    hash match are compared)."""

    def __init__(self, words: list[str]):
        encoded = [word.encode("utf-8", errors="surrogateescape") for word in words]
        self.blob = np.frombuffer(b"".join(encoded) or b"\0", dtype=np.uint8)
        self.lengths = np.fromiter(map(len, encoded), dtype=np.int64, count=len(encoded))
        self.starts = np.zeros(len(encoded), dtype=np.int64)
        np.cumsum(self.lengths[:-1], out=self.starts[1:])
        hashes, _, _ = _hashes(self.blob, self.starts, self.lengths)
        self.order = np.argsort(hashes, kind="stable")
        self.sorted = hashes[self.order]
        if len(self.sorted) > 1 and np.any(self.sorted[1:] == self.sorted[:-1]):
            raise _GeneralReader  # two words with one hash: not worth a second scheme

    def ids(self, buffer: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
        hashes, positions, within = _hashes(buffer, starts, lengths)
        at = np.minimum(np.searchsorted(self.sorted, hashes), len(self.sorted) - 1)
        if np.any(self.sorted[at] != hashes):
            raise _GeneralReader  # a word not in the unigram section
        ids = self.order[at]
        if np.any(self.lengths[ids] != lengths) or np.any(
                self.blob[np.repeat(self.starts[ids], lengths) + within] != buffer[positions]):
            raise _GeneralReader
        return ids


def _numbers(buffer: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """The tokens as float64, read as Python's ``float`` reads them."""
    if not len(starts):
        return np.zeros(0)
    width = int(lengths.max())
    if width > _LONGEST_NUMBER:
        raise _GeneralReader
    columns = np.arange(width, dtype=np.int64)
    inside = columns < lengths[:, None]
    text = np.where(inside, buffer[np.minimum(starts[:, None] + columns, len(buffer) - 1)], 0).astype(np.uint8)
    if not np.all(_NUMBER_BYTE[text] | ~inside):
        raise _GeneralReader
    try:
        values = text.view(f"S{width}").reshape(-1).astype(np.float64)
    except ValueError:
        raise _GeneralReader from None
    return values


def _parse_block(block: bytes, order: int, highest: bool, words: "_Words | None", minus_99: str):
    """The n-gram lines at the start of ``block`` (complete lines) up to the next section
    header: ``(n-gram word ids or the word tokens' (starts, lengths) for unigrams, log10 p,
    log10 bow, bytes consumed)``. What the reader would refuse, or read differently from
    these rules, raises :class:`_GeneralReader`."""
    buffer = np.frombuffer(block, dtype=np.uint8)
    empty = np.zeros(0, dtype=np.int64)
    if _REFUSED[buffer].any() or ((buffer >= 128).any() and _UNICODE_SPACE.search(block)):
        raise _GeneralReader
    separator = (buffer == _SPACE) | (buffer == _TAB) | (buffer == _NEWLINE)
    body = ~separator
    starts = np.flatnonzero(body & np.concatenate(([True], separator[:-1])))
    ends = np.flatnonzero(body & np.concatenate((separator[1:], [True]))) + 1
    if not len(starts):
        return ((empty, empty) if words is None else np.zeros((0, order), np.int64)), np.zeros(0), np.zeros(0), \
            len(block)
    newlines = np.flatnonzero(buffer == _NEWLINE)
    line_of = np.searchsorted(newlines, starts)
    first = np.flatnonzero(np.concatenate(([True], line_of[1:] != line_of[:-1])))  # each non-blank line's first token
    header = np.flatnonzero(buffer[starts[first]] == _BACKSLASH)
    consumed = len(block)
    if header.size:
        line = line_of[first[header[0]]]
        consumed = int(newlines[line - 1]) + 1 if line else 0
        n_tokens = first[header[0]]
        first = first[:header[0]]
        starts, ends = starts[:n_tokens], ends[:n_tokens]
    n_fields = np.diff(np.append(first, len(starts)))
    if not np.all((n_fields == order + 1) | (n_fields == order + 2)):
        raise _GeneralReader  # a MAX-ARPA file or a malformed line
    lengths = ends - starts
    probs = _numbers(buffer, starts[first], lengths[first])
    backoffs = np.zeros(len(first))
    has_backoff = np.flatnonzero(n_fields == order + 2)
    backoffs[has_backoff] = _numbers(buffer, starts[first[has_backoff] + order + 1],
                                     lengths[first[has_backoff] + order + 1])
    if np.isnan(probs).any() or np.isnan(backoffs).any() or np.any(probs > 0) or np.isposinf(backoffs).any() \
            or np.any(np.isfinite(probs) & (np.abs(probs) > FLOAT32_MAX)) \
            or np.any(np.isfinite(backoffs) & (np.abs(backoffs) > FLOAT32_MAX)):
        raise _GeneralReader
    if minus_99 == "zero":
        for column in (probs, backoffs):
            column[column == ZERO_PROBABILITY_LOG10] = -np.inf
    tokens = (first[:, None] + np.arange(1, order + 1)).reshape(-1)
    if words is None:
        return (starts[tokens], lengths[tokens]), probs, backoffs, consumed
    ids = words.ids(buffer, starts[tokens], lengths[tokens]).reshape(-1, order)
    return ids, probs, backoffs, consumed


def _section(pieces: _Pieces, order: int, highest: bool, words, minus_99: str):
    """The blocks of one section, parsed (see :func:`_parse_block`); the next section's
    header line is left unread."""
    while True:
        block = pieces.lines()
        if not block:
            return
        if not block.endswith(b"\n"):
            block += b"\n"  # the file's last line
        ids, probs, backoffs, consumed = _parse_block(block, order, highest, words, minus_99)
        if len(probs):
            yield (block, ids) if words is None else ids, probs, backoffs
        if consumed < len(block):
            pieces.push_back(block[consumed:])
            return


def _unigrams(pieces: _Pieces, count: int, minus_99: str):
    """``(words, log10 p, log10 bow)`` of the unigram section, as the reader takes them
    (``<UNK>`` read as ``<unk>``, a missing ``<unk>`` appended)."""
    from varorder.lm.arpa import MISSING_UNK_LOG10PROB

    words, probs, backoffs = [], [], []
    for (block, (starts, lengths)), block_probs, block_backoffs in _section(pieces, 1, False, None, minus_99):
        words.extend(block[s:s + n].decode("utf-8", errors="surrogateescape")
                     for s, n in zip(starts.tolist(), lengths.tolist()))
        probs.append(block_probs)
        backoffs.append(block_backoffs)
        if len(words) > count:
            raise _GeneralReader
    if len(words) != count or len(set(words)) != len(words) or BOS not in words or EOS not in words:
        raise _GeneralReader
    probs, backoffs = np.concatenate(probs).astype(np.float32), np.concatenate(backoffs).astype(np.float32)
    if UNK not in words:
        if "<UNK>" in words:
            words[words.index("<UNK>")] = UNK
        else:
            words.append(UNK)
            probs = np.append(probs, np.float32(MISSING_UNK_LOG10PROB))
            backoffs = np.append(backoffs, np.float32(0.0))
    return words, probs, backoffs


def _rows(words: np.ndarray, keys: dict, vocab_size: int) -> np.ndarray:
    """Row of each k-gram (word-id rows ``words``, k >= 1) in its order, -1 where absent."""
    rows = words[:, 0].astype(np.int64)
    for position in range(1, words.shape[1]):
        order_keys = keys[position + 1]
        absent = rows < 0
        wanted = (np.maximum(rows, 0) * vocab_size + words[:, position]).astype(order_keys.dtype)
        at = np.searchsorted(order_keys, wanted)
        found = (at < len(order_keys)) & ~absent
        found[found] = order_keys[at[found]] == wanted[found]
        rows = np.where(found, at, -1)
    return rows


def _small_uint(limit: int):
    return np.uint16 if limit <= 1 << 16 else np.uint32 if limit <= 1 << 32 else np.uint64


def _stream(path: Path, handle, prob_bits: int, backoff_bits: int, minus_99: str) -> None:
    with _open(path) as source:
        pieces = _Pieces(source)
        declared = _declared(pieces)
        words, probs, backoffs = _unigrams(pieces, declared[0], minus_99)
        table = _Words(words)
        order, vocab_size = len(declared), len(words)
        counts = [vocab_size] + declared[1:]
        writer = TrieWriter(handle, order, counts, words, prob_bits, backoff_bits)
        writer.put("probs1", probs)
        writer.put("backoffs1", backoffs)
        del probs, backoffs
        keys: dict[int, np.ndarray] = {}  # order -> its packed keys, sorted (the smallest dtype that holds them)
        for m in range(2, order + 1):
            if _next_text(pieces) != b"\\%d-grams:" % m:
                raise _GeneralReader
            count, highest = counts[m - 1], m == order
            quantised = [kind for kind, bits in (("probs", prob_bits), ("backoffs", backoff_bits))
                         if bits and (kind == "probs" or not highest)]
            kept = np.empty((count, 2), dtype=np.float32) if quantised else None
            order_keys = None if highest else np.empty(count, dtype=_small_uint(counts[m - 2] * vocab_size))
            child_counts = np.zeros(counts[m - 2], dtype=_small_uint(count))
            last_words = np.empty(count, dtype=_small_uint(vocab_size))
            done, previous_key = 0, -1
            for ids, block_probs, block_backoffs in _section(pieces, m, highest, table, minus_99):
                n = len(ids)
                if done + n > count:
                    raise _GeneralReader
                prefix, suffix = _rows(ids[:, :-1], keys, vocab_size), _rows(ids[:, 1:], keys, vocab_size)
                if prefix.min() < 0 or suffix.min() < 0:
                    raise _GeneralReader  # not closed under prefixes or suffixes
                block_keys = prefix * vocab_size + ids[:, -1]
                if block_keys[0] <= previous_key or (n > 1 and np.any(block_keys[1:] <= block_keys[:-1])):
                    raise _GeneralReader  # not in lexicographic order, or a duplicate
                previous_key = int(block_keys[-1])
                if order_keys is not None:
                    order_keys[done:done + n] = block_keys
                first = int(prefix[0])
                child_counts[first:int(prefix[-1]) + 1] += np.bincount(prefix - first).astype(child_counts.dtype)
                last_words[done:done + n] = ids[:, -1]
                values = (block_probs, block_backoffs)
                if kept is not None:
                    kept[done:done + n, 0], kept[done:done + n, 1] = values
                for column, kind in enumerate(("probs", "backoffs")):
                    if kind not in quantised and (kind == "probs" or not highest):
                        writer.append(f"{kind}{m}", values[column])
                done += n
            if done != count:
                raise _GeneralReader
            pointers = np.zeros(counts[m - 2] + 1, dtype=child_counts.dtype)
            np.cumsum(child_counts, out=pointers[1:])
            del child_counts
            writer.put_packed(f"pointers{m - 1}", pointers)
            del pointers
            writer.put_packed(f"words{m}", last_words)
            del last_words
            for kind in quantised:
                writer.put_values(kind, m, kept[:, 0 if kind == "probs" else 1])
            del kept
            if order_keys is not None:
                keys[m] = order_keys
            del order_keys
        if _next_text(pieces) != b"\\end\\":
            raise _GeneralReader
        writer.finish()
