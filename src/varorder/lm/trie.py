"""Binary format version 2: the back-off model as a sorted trie with bit-packed columns and
optional quantisation (KenLM's ``trie`` data structure, ``build_binary -q -b``), memory-
mapped and scored in place by :class:`TrieLM`.

Factorization: the back-off model of :mod:`varorder.lm.model` (Carter, Dymetman &
Bouchard 2012, eq. 7) over KenLM's trie (Heafield 2011, "KenLM: Faster and Smaller
Language Model Queries", §3.2): each order's n-grams sorted by (prefix row, last word),
so the extensions of an n-gram are one contiguous range of the next order; a pointer
column gives each row's range and the search among it is by word id. The quantiser is
KenLM's (Whittaker & Raj 2001 as KenLM implements it): per order, 2**q bins of equal
population over the sorted values, each bin's centre the mean of its values, every
value coded by its nearest centre; exact values kept aside (back-off 0, ±inf).

Layout (little-endian) — the preamble, JSON header and 64-byte aligned arrays of version
1 (:mod:`varorder.lm.binary`), with version 2 in the preamble and these arrays, in file
order (w = word bits = bit length of V - 1, p_m = bit length of the m-gram count)::

    vocabulary    uint8    the words, newline-separated (word id = position)
    codebooks     float32  per order m >= 2: 2**q probability centres, then (m < N)
                           2**b back-off centres; empty unless quantised
    probs1        float32  (V,)  unigram log10 p (never quantised, as in KenLM)
    backoffs1     float32  (V,)  unigram log10 bow
    for m = 2 .. N:
    pointers{m-1} uint64   bit-packed, n_{m-1} + 1 entries of p_m bits: row r of order
                           m - 1 extends to rows pointers[r] .. pointers[r + 1] - 1 of order m
    words{m}      uint64   bit-packed, n_m entries of w bits: the last word of each m-gram
    probs{m}      float32 (n_m,), or uint64 bit-packed q-bit codes when quantised
    backoffs{m}   the same for log10 bow, m < N (b bits when quantised)

Every bit-packed array holds entry i at bits i * width .. (little-endian bit order) and
one spare 64-bit word at its end. The header also records, per order, the largest
error quantisation made on a probability and on a back-off: a score differs from the
unquantised model's by at most ``max_score_error`` (the largest probability error plus
the back-off errors of every order below the highest; :attr:`TrieLM.quantization`).

Opening checks what version 1's does: magic, version, header checksum and schema, the
exact file length, and then that every array has exactly the dtype, shape and offset the
counts and bit widths imply (one recomputed plan, compared whole), the vocabulary's and
codebooks' checksums and their sanity; nothing is parsed. The full check (``verify``,
once per file version by default as in version 1) adds every array's CRC-32, the trie's
invariants (:func:`varorder.lm._trie_kernels.check_trie`) and no NaN/+inf value. Lookups
check every pointer before they follow it, so a damaged file opened structurally gives a
:class:`~varorder.errors.FormatError` naming it, never a read outside the mapping.
"""

from __future__ import annotations

import json
import math
import mmap
import os
import zlib
from pathlib import Path

import numpy as np

from varorder.errors import FormatError, ParameterError
from varorder.lm.corpus import BOS, EOS, UNK, PathLike, Vocabulary, atomic_output
from varorder.lm.model import NgramLM
from varorder.lm.state import State

__all__ = ["TRIE_VERSION", "TrieLM", "write_trie", "open_trie", "pack", "quantize", "trie_plan"]

TRIE_VERSION = 2
QUANTIZATION_BITS = range(1, 25)  # build_binary takes 1..25 for -q and -b; 8 is usual


def _trie_kernels():
    from varorder.lm import _trie_kernels

    return _trie_kernels


def _bit_length(value: int) -> int:
    return max(1, int(value).bit_length())


def _packed_nbytes(entries: int, width: int) -> int:
    return 8 * (-(-entries * width // 64) + 1)


def trie_plan(order: int, counts, vocabulary_nbytes: int, prob_bits: int, backoff_bits: int) -> list[tuple]:
    """The arrays of a version-2 file, in file order: ``(name, dtype, shape, width)`` with
    ``width`` the bits per entry of a bit-packed array (0 for a plain one). ``prob_bits``,
    ``backoff_bits``: 0 for float32 values."""
    vocab_size = counts[0]
    books = sum((1 << prob_bits if prob_bits else 0) + (1 << backoff_bits if backoff_bits and m < order else 0)
                for m in range(2, order + 1))
    plan = [("vocabulary", "|u1", (vocabulary_nbytes,), 0), ("codebooks", "<f4", (books,), 0),
            ("probs1", "<f4", (vocab_size,), 0), ("backoffs1", "<f4", (vocab_size,), 0)]
    word_width = _bit_length(vocab_size - 1)
    for m in range(2, order + 1):
        n_below, n = counts[m - 2], counts[m - 1]
        plan.append((f"pointers{m - 1}", "<u8", (_packed_nbytes(n_below + 1, _bit_length(n)) // 8,), _bit_length(n)))
        plan.append((f"words{m}", "<u8", (_packed_nbytes(n, word_width) // 8,), word_width))
        for name, bits in (("probs", prob_bits), ("backoffs", backoff_bits)):
            if name == "backoffs" and m == order:
                continue
            if bits:
                plan.append((f"{name}{m}", "<u8", (_packed_nbytes(n, bits) // 8,), bits))
            else:
                plan.append((f"{name}{m}", "<f4", (n,), 0))
    return plan


def _offsets(plan) -> tuple[dict[str, dict], int]:
    from varorder.lm._binary_file import _ALIGN

    entries, offset = {}, 0
    for name, dtype, shape, _ in plan:
        nbytes = np.dtype(dtype).itemsize * int(np.prod(shape))
        entries[name] = {"dtype": dtype, "shape": list(shape), "offset": offset, "nbytes": nbytes}
        offset += -(-nbytes // _ALIGN) * _ALIGN
    return entries, offset


def _layout(order: int, counts, entries: dict, plan, prob_bits: int, backoff_bits: int) -> np.ndarray:
    """The kernels' layout table (:mod:`varorder.lm._trie_kernels`) of a planned file."""
    k = _trie_kernels()
    widths = {name: width for name, _, _, width in plan}
    layout = np.zeros((order, k.LAYOUT_COLUMNS), dtype=np.int64)
    book = entries["codebooks"]["offset"] // 4
    samples = 0
    layout[0, k.SAMPLE_START] = -1
    for level in range(1, order):
        layout[level, k.SAMPLE_START] = samples
        samples += -(-counts[level] // k.SAMPLE_STRIDE)
    for level in range(order):
        m = level + 1
        layout[level, k.COUNT] = counts[level]
        if m > 1:
            layout[level, k.WORD_START] = entries[f"words{m}"]["offset"] * 8
            layout[level, k.WORD_WIDTH] = widths[f"words{m}"]
        if m < order:
            layout[level, k.POINTER_START] = entries[f"pointers{m}"]["offset"] * 8
            layout[level, k.POINTER_WIDTH] = widths[f"pointers{m}"]
        else:
            layout[level, k.POINTER_WIDTH] = k.NO_COLUMN
        for name, start, width_column, book_column, bits in (
                ("probs", k.PROB_START, k.PROB_WIDTH, k.PROB_BOOK, prob_bits),
                ("backoffs", k.BACKOFF_START, k.BACKOFF_WIDTH, k.BACKOFF_BOOK, backoff_bits)):
            if name == "backoffs" and m == order and m > 1:
                layout[level, width_column] = k.NO_COLUMN
                continue
            entry = entries[f"{name}{m}"]
            if m > 1 and bits:
                layout[level, start] = entry["offset"] * 8
                layout[level, width_column] = bits
                layout[level, book_column] = book
                book += 1 << bits
            else:
                layout[level, start] = entry["offset"] // 4
    return layout


# ------------------------------------------------------------------ quantisation

_QUANTIZE_PIECE = 1 << 16  # values coded at a time: the coder's temporaries stay small


def quantize(values: np.ndarray, bits: int, keep_zero: bool) -> tuple[np.ndarray, np.ndarray, float]:
    """``(codebook of 2**bits float32 centres, codes, largest |value - its centre|)``.

    KenLM's binning: the values sorted, cut into bins of equal population, each centre
    the mean of its bin; then each value coded by its nearest centre. Infinite values
    (and 0 when ``keep_zero``: a back-off of 1, which decides the LM state) get centres of
    their own, so they come back exactly; with no more distinct values than centres, every
    value comes back exactly."""
    values = np.asarray(values, dtype=np.float32)
    size = 1 << bits
    book = np.zeros(size, dtype=np.float32)
    ordered = np.sort(values)
    starts = np.ones(len(ordered), dtype=bool)
    starts[1:] = ordered[1:] != ordered[:-1]
    if int(np.count_nonzero(starts)) <= size:
        distinct = ordered[starts]
        book[:len(distinct)] = distinct
        book[len(distinct):] = distinct[-1] if len(distinct) else 0.0
        return book, _coded(values, lambda piece: np.searchsorted(distinct, piece))[0], 0.0
    del starts
    exact = [v for v, present in ((-np.inf, ordered[0] == -np.inf), (np.inf, ordered[-1] == np.inf)) if present]
    exact += [0.0] if keep_zero else []
    exact_values = np.sort(np.asarray(exact, dtype=np.float32))
    bins = size - len(exact)
    if bins < 1:
        raise ParameterError(f"{bits} bits leave no centre beside the {len(exact)} exact values", name="bits",
                             value=bits)
    finite = ordered[~np.isin(ordered, exact_values)]
    del ordered
    cuts = (len(finite) * np.arange(bins + 1, dtype=np.int64)) // bins
    widths = np.diff(cuts)
    filled = np.flatnonzero(widths > 0)
    means = np.add.reduceat(finite, cuts[filled], dtype=np.float64) / widths[filled]
    # An empty bin (more bins than values in a stretch) repeats its neighbour's centre.
    centres = np.sort(means[np.minimum(np.searchsorted(filled, np.arange(bins)), len(filled) - 1)]
                      .astype(np.float32))
    book[:bins] = centres
    book[bins:] = exact_values

    def nearest(piece: np.ndarray) -> np.ndarray:
        piece64 = piece.astype(np.float64)
        above = np.clip(np.searchsorted(centres, piece), 1, max(bins - 1, 1)) if bins > 1 else \
            np.zeros(len(piece), np.int64)
        below = above - 1 if bins > 1 else above
        codes = np.where(np.abs(piece64 - centres[below]) <= np.abs(piece64 - centres[above]), below, above)
        is_exact = np.isin(piece, exact_values)
        codes[is_exact] = bins + np.searchsorted(exact_values, piece[is_exact])
        return codes

    codes, error = _coded(values, nearest, book)
    return book, codes, error


def _coded(values: np.ndarray, code, book: np.ndarray | None = None) -> tuple[np.ndarray, float]:
    """``(code(values) as uint64, largest |value - book[code]|)``, a piece at a time."""
    codes = np.empty(len(values), dtype=np.uint64)
    error = 0.0
    for start in range(0, len(values), _QUANTIZE_PIECE):
        piece = values[start:start + _QUANTIZE_PIECE]
        piece_codes = code(piece)
        codes[start:start + len(piece)] = piece_codes
        if book is not None:
            decoded = book[piece_codes].astype(np.float64)
            finite = np.isfinite(piece)
            if finite.any():
                error = max(error, float(np.max(np.abs(piece[finite].astype(np.float64) - decoded[finite]))))
    return codes, error


# ------------------------------------------------------------------ writing

_PACK_PIECE = 1 << 16  # entries packed at a time (a multiple of 64: each piece starts a word)


def pack(values: np.ndarray, width: int, n_words: int) -> np.ndarray:
    """``values`` (non-negative, below 2**width) as a bit-packed column of ``n_words``
    uint64 (entry i at bits i * width .., the rest zero), in NumPy: the builds import no
    compiled kernels."""
    bits = np.zeros(n_words, dtype=np.uint64)
    width64 = np.uint64(width)
    for start in range(0, len(values), _PACK_PIECE):
        piece = np.asarray(values[start:start + _PACK_PIECE]).astype(np.uint64)
        position = np.arange(len(piece), dtype=np.uint64) * width64
        word = (position >> np.uint64(6)).astype(np.int64) + (start * width) // 64
        shift = position & np.uint64(63)
        # Entries sharing a word never overlap, so OR-ing them is summing them, word by word.
        starts = np.flatnonzero(np.concatenate(([True], word[1:] != word[:-1])))
        bits[word[starts]] |= np.bitwise_or.reduceat(piece << shift, starts)
        straddles = shift + width64 > np.uint64(64)
        if straddles.any():
            high = piece[straddles] >> (np.uint64(64) - shift[straddles])
            bits[word[straddles] + 1] |= high
    return bits

class TrieWriter:
    """Writes a version-2 file whose counts are known up front: every array goes to its
    planned offset (whole, or a float32 array in sequential pieces), so an order can be
    written as soon as it is built and nothing of the file is held in memory. The header
    (with every array's CRC-32 and the quantisation errors) is written last, into room
    reserved before the data."""

    def __init__(self, handle, order: int, counts, words: list[str], prob_bits: int = 0, backoff_bits: int = 0):
        from varorder.lm._binary_file import _ALIGN, _PREAMBLE

        for word in words:
            if "\n" in word:
                raise ParameterError(f"word {word!r} contains a newline; the binary format separates words by "
                                     "newlines", name="words", value=word)
        self.handle = handle
        self.order, self.counts = order, [int(c) for c in counts]
        self.prob_bits, self.backoff_bits = int(prob_bits or 0), int(backoff_bits or 0)
        vocabulary = "\n".join(words).encode("utf-8", errors="surrogateescape")
        self.plan = trie_plan(order, self.counts, len(vocabulary), self.prob_bits, self.backoff_bits)
        self.widths = {name: width for name, _, _, width in self.plan}
        self.entries, data_bytes = _offsets(self.plan)
        self.errors = {"prob": [0.0] * order, "backoff": [0.0] * order}
        self._crc = {}
        self._written = {}
        self._book = np.zeros(self.entries["codebooks"]["shape"][0], dtype=np.float32)
        self._book_at = 0
        # Room for the header with its longest numbers (CRCs, errors written as floats).
        longest = len(self._header_bytes(0, data_bytes, placeholder=True))
        self.data_start = -(-(_PREAMBLE.size + longest + 256) // _ALIGN) * _ALIGN
        self.file_size = self.data_start + data_bytes
        handle.truncate(self.file_size)
        self.put("vocabulary", np.frombuffer(vocabulary, dtype=np.uint8))

    def _header_bytes(self, data_start: int, data_bytes: int, placeholder: bool = False) -> bytes:
        from varorder.lm._binary_file import _FORMAT_NAME

        arrays = {name: dict(entry, crc32=(0xFFFFFFFF if placeholder else self._crc[name]))
                  for name, entry in self.entries.items()}
        errors = {kind: ([-1.2345678901234567e-300] * self.order if placeholder else values)
                  for kind, values in self.errors.items()}
        header = {"format": _FORMAT_NAME, "version": TRIE_VERSION, "order": self.order,
                  "vocab_size": self.counts[0], "ngram_counts": self.counts, "max_arpa": False,
                  "quantization": {"prob_bits": self.prob_bits, "backoff_bits": self.backoff_bits,
                                   "prob_max_error": errors["prob"], "backoff_max_error": errors["backoff"]},
                  "arrays": arrays, "data_start": data_start, "file_size": data_start + data_bytes}
        return json.dumps(header, sort_keys=True).encode("ascii")

    def _seek(self, name: str, within: int = 0) -> None:
        self.handle.seek(self.data_start + self.entries[name]["offset"] + within)

    def put(self, name: str, array: np.ndarray) -> None:
        """Write a whole array (its planned dtype and size)."""
        entry = self.entries[name]
        data = np.ascontiguousarray(array, dtype=np.dtype(entry["dtype"])).reshape(-1).view(np.uint8)
        if data.nbytes != entry["nbytes"]:
            raise AssertionError(f"{name}: {data.nbytes} bytes, planned {entry['nbytes']}")
        self._seek(name)
        self.handle.write(data)
        self._crc[name] = zlib.crc32(data)
        self._written[name] = data.nbytes

    def append(self, name: str, array: np.ndarray) -> None:
        """Write the next piece of a float32 array, sequentially."""
        data = np.ascontiguousarray(array, dtype=np.float32).view(np.uint8)
        done = self._written.get(name, 0)
        if done + data.nbytes > self.entries[name]["nbytes"]:
            raise AssertionError(f"{name}: more values than planned")
        self._seek(name, done)
        self.handle.write(data)
        self._crc[name] = zlib.crc32(data, self._crc.get(name, 0))
        self._written[name] = done + data.nbytes

    def put_packed(self, name: str, values: np.ndarray) -> None:
        """Write ``values`` (non-negative integers) as the bit-packed array ``name``."""
        width = self.widths[name]
        values = np.asarray(values)
        if len(values) and (values.min() < 0 or int(values.max()) >= 1 << width):
            raise AssertionError(f"{name}: a value does not fit in {width} bits")
        self.put(name, pack(values, width, self.entries[name]["shape"][0]))

    def put_values(self, kind: str, m: int, values: np.ndarray) -> None:
        """Order m's log10 probabilities (``kind`` "probs") or back-offs ("backoffs"),
        quantised when the file says so (orders >= 2)."""
        name = f"{kind}{m}"
        bits = self.prob_bits if kind == "probs" else self.backoff_bits
        if m == 1 or not bits:
            self.put(name, np.asarray(values, dtype=np.float32))
            return
        book, codes, error = quantize(values, bits, keep_zero=kind == "backoffs")
        self.errors["prob" if kind == "probs" else "backoff"][m - 1] = error
        self._book[self._book_at:self._book_at + len(book)] = book
        self._book_at += len(book)
        self.put_packed(name, codes)

    def finish(self) -> None:
        from varorder.lm._binary_file import _PREAMBLE, MAGIC

        self.put("codebooks", self._book)
        missing = [name for name, entry in self.entries.items() if self._written.get(name) != entry["nbytes"]]
        if missing:
            raise AssertionError(f"arrays not written: {missing}")
        header = self._header_bytes(self.data_start, self.file_size - self.data_start)
        room = self.data_start - _PREAMBLE.size
        if len(header) > room:
            raise AssertionError("the header outgrew its reserved room")
        header = header.ljust(room, b" ")
        self.handle.seek(0)
        self.handle.write(_PREAMBLE.pack(MAGIC, TRIE_VERSION, len(header), zlib.crc32(header), 0))
        self.handle.write(header)


def _check_bits(name: str, bits) -> int:
    if bits is None or bits == 0:
        return 0
    if isinstance(bits, bool) or not isinstance(bits, (int, np.integer)) or bits not in QUANTIZATION_BITS:
        raise ParameterError(f"{name} must be a number of bits from 1 to 24 (or None: float32), got {bits!r}",
                             name=name, value=bits)
    return int(bits)


def write_trie(model: NgramLM, path: PathLike, *, prob_bits: int | None = None,
               backoff_bits: int | None = None) -> None:
    """Write ``model`` as a version-2 (trie) binary, atomically. ``prob_bits`` /
    ``backoff_bits``: quantise the log10 probabilities / back-offs of orders >= 2 to that
    many bits (KenLM's ``build_binary -q`` / ``-b``); None keeps float32 (scores equal to
    the model's bit for bit)."""
    from varorder.lm._binary_file import _drop_cached_pages, _record_verified

    prob_bits, backoff_bits = _check_bits("prob_bits", prob_bits), _check_bits("backoff_bits", backoff_bits)
    path = Path(path)
    model._ensure_keys()
    order, vocab_size = model.order, model.vocab_size
    with atomic_output(path) as handle:
        writer = TrieWriter(handle, order, model.ngram_counts, model.vocabulary.words, prob_bits, backoff_bits)
        for m in range(1, order + 1):
            values = model._order_values(m)
            if m > 1:
                keys = model._keys[m - 1]
                prefix = keys // vocab_size
                writer.put_packed(f"pointers{m - 1}", np.searchsorted(prefix, np.arange(len(model._keys[m - 2]) + 1)))
                writer.put_packed(f"words{m}", keys % vocab_size)
            writer.put_values("probs", m, values[:, 0])
            if m < order or m == 1:
                writer.put_values("backoffs", m, values[:, 1])
        writer.finish()
    _drop_cached_pages(path)
    _record_verified(os.stat(path))


# ------------------------------------------------------------------ opening

def _check_trie_header(path, header: dict, file_size: int) -> tuple[list, dict]:
    """Everything the header says, against the plan its counts and bit widths imply."""
    from varorder.lm._binary_file import _FORMAT_NAME, _refuse

    if header.get("format") != _FORMAT_NAME or header.get("version") != TRIE_VERSION:
        raise _refuse(path, f"corrupt header: format {header.get('format')!r} version {header.get('version')!r}")
    required = {"order": int, "vocab_size": int, "ngram_counts": list, "quantization": dict, "arrays": dict,
                "data_start": int, "file_size": int}
    for key, kind in required.items():
        if not isinstance(header.get(key), kind) or isinstance(header.get(key), bool):
            raise _refuse(path, f"corrupt header: field {key!r} missing or not {kind.__name__}")
    if header["file_size"] != file_size:
        state = "truncated" if file_size < header["file_size"] else "has trailing bytes"
        raise _refuse(path, f"{state}: the header announces {header['file_size']} bytes, the file has {file_size}")
    order, counts = header["order"], header["ngram_counts"]
    if not 1 <= order <= 64 or len(counts) != order or not all(isinstance(c, int) and not isinstance(c, bool)
                                                              and 0 <= c < 1 << 40 for c in counts):
        raise _refuse(path, f"corrupt header: order {order} with n-gram counts {counts}")
    if counts[0] != header["vocab_size"] or counts[0] < 3:
        raise _refuse(path, f"inconsistent model: vocab_size {header['vocab_size']}, {counts[0]} unigrams")
    quantization = header["quantization"]
    bits = {}
    for name in ("prob_bits", "backoff_bits"):
        value = quantization.get(name)
        if not isinstance(value, int) or isinstance(value, bool) or not (value == 0 or value in QUANTIZATION_BITS):
            raise _refuse(path, f"corrupt header: quantization {name} is {value!r}")
        bits[name] = value
    for name in ("prob_max_error", "backoff_max_error"):
        errors = quantization.get(name)
        if not isinstance(errors, list) or len(errors) != order or not all(
                isinstance(e, (int, float)) and not isinstance(e, bool) and math.isfinite(e) and e >= 0
                for e in errors):
            raise _refuse(path, f"corrupt header: quantization {name} is {errors!r}")
    vocabulary = header["arrays"].get("vocabulary")
    try:
        vocabulary_nbytes = int(vocabulary["nbytes"])
    except (KeyError, TypeError, ValueError):
        raise _refuse(path, "corrupt header: array 'vocabulary' is described badly") from None
    plan = trie_plan(order, counts, vocabulary_nbytes, bits["prob_bits"], bits["backoff_bits"])
    entries, data_bytes = _offsets(plan)
    arrays = header["arrays"]
    if set(arrays) != set(entries):
        raise _refuse(path, f"corrupt header: arrays {sorted(arrays)}, expected {sorted(entries)}")
    for name, expected in entries.items():
        got = arrays[name]
        if not isinstance(got, dict) or any(got.get(key) != value for key, value in expected.items()) \
                or not isinstance(got.get("crc32"), int):
            raise _refuse(path, f"inconsistent model: array {name!r} is {got!r}, but the counts and bit widths "
                                f"imply {expected}")
    if header["data_start"] % 64 or header["data_start"] < 32 or header["data_start"] + data_bytes != file_size:
        raise _refuse(path, f"corrupt header: data_start {header['data_start']} does not fit the file")
    return plan, entries


def _checksum(region: np.ndarray, entry: dict) -> int:
    return zlib.crc32(region[entry["offset"]:entry["offset"] + entry["nbytes"]])


def open_trie(path: Path, header: dict, buffer, file_size: int, verify: bool) -> "TrieLM":
    """A :class:`TrieLM` over ``buffer`` (the whole file mapped), ``header`` read and
    checksummed by :func:`varorder.lm.binary.open_binary`; see the module for the checks."""
    from varorder.lm._binary_file import _refuse

    plan, entries = _check_trie_header(path, header, file_size)
    order, counts = header["order"], header["ngram_counts"]
    quantization = header["quantization"]
    start = header["data_start"]
    region = np.frombuffer(buffer, dtype=np.uint8, offset=start, count=file_size - start)
    for name in ("vocabulary", "codebooks"):
        if _checksum(region, entries[name]) != header["arrays"][name]["crc32"]:
            raise _refuse(path, f"array {name!r} is corrupt (checksum mismatch)")
    text = region[:entries["vocabulary"]["nbytes"]].tobytes().decode("utf-8", errors="surrogateescape")
    words = text.split("\n") if text else []
    if len(words) != counts[0] or len(set(words)) != len(words) or not {BOS, EOS, UNK} <= set(words):
        raise _refuse(path, f"inconsistent model: {len(words)} distinct words for {counts[0]} unigrams, "
                            f"or {BOS}, {EOS} or {UNK} missing")
    layout = _layout(order, counts, entries, plan, quantization["prob_bits"], quantization["backoff_bits"])
    bits = region.view(np.uint64)
    floats = region.view(np.float32)
    k = _trie_kernels()
    for level in range(order - 1):  # where each pointer column starts and ends: the counts again
        start, width = layout[level, k.POINTER_START], layout[level, k.POINTER_WIDTH]
        if k.field(bits, start, width, 0) != 0 or k.field(bits, start, width, counts[level]) != counts[level + 1]:
            raise _refuse(path, f"inconsistent model: the {level + 1}-gram pointers do not end at the "
                                f"{counts[level + 1]} {level + 2}-grams the header counts")
    samples = np.empty(sum(-(-c // k.SAMPLE_STRIDE) for c in counts[1:]), dtype=np.int32)
    k.fill_samples(bits, layout, samples)
    book = entries["codebooks"]
    if np.isnan(floats[book["offset"] // 4:(book["offset"] + book["nbytes"]) // 4]).any():
        raise _refuse(path, "the codebooks hold NaN")
    if verify:
        for name, entry in entries.items():
            if _checksum(region, entry) != header["arrays"][name]["crc32"]:
                raise _refuse(path, f"array {name!r} is corrupt (checksum mismatch)")
        problem = _trie_kernels().check_trie(bits, layout, counts[0])
        if problem:
            raise _refuse(path, f"the {problem}-gram trie columns are not sorted pointers and words "
                                "(damaged file)")
        for name, _, _, width in plan:
            if name.startswith(("probs", "backoffs", "codebooks")) and not width:
                entry = entries[name]
                column = floats[entry["offset"] // 4:(entry["offset"] + entry["nbytes"]) // 4]
                if np.isnan(column).any() or np.isposinf(column).any():
                    raise _refuse(path, f"array {name!r} holds NaN or +inf")
    return TrieLM._mapped(Vocabulary(words), header, layout, bits, floats, samples, str(path), bool(verify))


# ------------------------------------------------------------------ the model

_DECODED = frozenset({"_keys", "_values", "_value_base", "_hash_table", "_hash_base", "_hash_cap", "_extends_flat",
                      "_extends"})


class TrieLM(NgramLM):
    """An :class:`~varorder.lm.model.NgramLM` over a mapped version-2 (trie) file: every
    query (scoring, lookups, states, the kenlm API) runs on the trie in place. Whole-model
    operations that read the hash format's tables (listing n-grams, writing ARPA,
    MAX-ARPA, mixing, pruning) decode the trie into them once, in memory.

    ``quantization``: the bits and the largest errors recorded in the file;
    ``max_score_error``: the bound on |log10 p - that of the unquantised model| for any
    query (0 when unquantised)."""

    @classmethod
    def _mapped(cls, vocabulary: Vocabulary, header: dict, layout, bits, floats, samples, source: str,
                checked: bool) -> "TrieLM":
        model = cls.__new__(cls)
        model.vocabulary = vocabulary
        model.order = header["order"]
        model.vocab_size = header["vocab_size"]
        model._counts = tuple(header["ngram_counts"])
        model._layout, model._bits, model._floats, model._samples = layout, bits, floats, samples
        model._source = source
        model._keys_checked = checked
        model._max_backoff = None
        model._binary_header = header
        model.quantization = dict(header["quantization"])
        return model

    def __getattr__(self, name: str):
        # The hash format's tables, decoded from the trie on first use (see the class).
        if name in _DECODED:
            self._decode()
            return self.__dict__[name]
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def _decode(self) -> None:
        self._ensure_keys()
        k = _trie_kernels()
        layout, bits, floats = self._layout, self._bits, self._floats
        keys, values = [np.arange(self.vocab_size, dtype=np.int64)], []
        for level in range(self.order):
            n = self._counts[level]
            if level:
                pointers = self._pointer_column(level)
                words = np.empty(n, dtype=np.int64)
                k.unpack(bits, layout[level, k.WORD_START], layout[level, k.WORD_WIDTH], words)
                prefix = np.repeat(np.arange(self._counts[level - 1], dtype=np.int64), np.diff(pointers))
                keys.append(prefix * self.vocab_size + words)
            values.append(_decode_values(bits, floats, layout, level, n))
        model = NgramLM(self.vocabulary, keys, None, None, values=np.concatenate(values).astype(np.float32))
        for name in _DECODED:
            self.__dict__[name] = model.__dict__[name]

    def _pointer_column(self, order: int) -> np.ndarray:
        """The pointers of the ``order``-grams into the next order, unpacked."""
        k = _trie_kernels()
        pointers = np.empty(self._counts[order - 1] + 1, dtype=np.int64)
        k.unpack(self._bits, self._layout[order - 1, k.POINTER_START], self._layout[order - 1, k.POINTER_WIDTH],
                 pointers)
        return pointers

    @property
    def ngram_counts(self) -> tuple[int, ...]:
        return self._counts

    @property
    def nbytes(self) -> int:
        """Bytes of the mapped tables (the file's data region)."""
        return int(self._bits.nbytes)

    @property
    def max_score_error(self) -> float:
        errors = self.quantization
        return float(max(errors["prob_max_error"]) + sum(errors["backoff_max_error"][:-1]))

    def __repr__(self) -> str:
        return f"TrieLM(order={self.order}, vocab={self.vocab_size}, ngrams={self.ngram_counts})"

    def _ensure_keys(self) -> None:
        if self._keys_checked:
            return
        problem = _trie_kernels().check_trie(self._bits, self._layout, self.vocab_size)
        if problem:
            raise FormatError(f"{self._source}: corrupt model file: the {problem}-gram trie columns are not "
                              "sorted pointers and words", path=self._source)
        self._keys_checked = True

    def _corrupt(self, error: ValueError) -> ValueError:
        if self._source is not None and str(error) == _trie_kernels().CORRUPT_POINTER:
            return FormatError(f"{self._source}: {error} (run `varorder lm verify` on it)", path=self._source)
        return error

    def _tables(self) -> tuple:
        return self._bits, self._floats, self._layout, self._samples

    def _query_kernels(self) -> tuple:
        return _trie_kernels(), self._tables()

    def _row_of(self, ngram: np.ndarray) -> int:
        if len(ngram) == 0 or len(ngram) > self.order:
            return -1
        with self.naming_damage():
            return int(_trie_kernels().find_ngram(np.asarray(ngram, dtype=np.int64), self._bits, self._layout,
                                                  self._samples))

    def minimal_state(self, context) -> State:
        context = self._context_array(context)
        if len(context) == 0:
            return State()
        with self.naming_damage():
            length = _trie_kernels().state_length(context, self.order, *self._tables())
        return State(context[len(context) - length:] if length else ())

    def _run_scorer(self, ids, offsets, bos: bool, eos: bool, out_log10prob, out_length, out_sentence) -> None:
        with self.naming_damage():
            _trie_kernels().score_flat(ids, offsets, bos, eos, self.vocabulary.bos_id, self.vocabulary.eos_id,
                                       self.order, *self._tables(), out_log10prob, out_length, out_sentence)

    def state_tables(self) -> tuple:
        return (self.order, *self._tables())

    def state_query(self) -> tuple:
        return _trie_kernels().base_full_score, self.state_tables()


def _decode_values(bits, floats, layout, level: int, n: int) -> np.ndarray:
    """``(n, 2)`` float32 ``(log10 p, log10 bow)`` of one order."""
    k = _trie_kernels()
    out = np.zeros((n, 2), dtype=np.float32)
    for column, (start, width, book) in enumerate(((k.PROB_START, k.PROB_WIDTH, k.PROB_BOOK),
                                                   (k.BACKOFF_START, k.BACKOFF_WIDTH, k.BACKOFF_BOOK))):
        w = layout[level, width]
        if w == k.NO_COLUMN:
            continue
        if w == 0:
            out[:, column] = floats[layout[level, start]:layout[level, start] + n]
        else:
            codes = np.empty(n, dtype=np.int64)
            k.unpack(bits, layout[level, start], w, codes)
            out[:, column] = floats[layout[level, book] + codes]
    return out
