"""The compiled path of :func:`varorder.lm.arpa.read_arpa`: n-gram sections parsed from
the file's bytes by one Numba kernel (:func:`_parse_section_lines`: words looked up in a
byte-level hash of the unigram section, numbers by :func:`varorder.lm._words.scan_decimal`,
Clinger's exact fast path), so no Python object is made per line. The file is read once
(:func:`read_bytes`); a model closed under prefixes and suffixes goes straight into the
model's tables (:func:`read_closed`), any other into word-id rows (:func:`read_sections`)
for :meth:`~varorder.lm.model.NgramLM.from_ngrams`, which inserts what is missing.

It only accepts what it can read exactly as the Python reader does; anything else
(a malformed line, a count mismatch, an unknown word, a number outside the fast path
that Python's ``float`` then cannot read, whitespace or line breaks that Python splits
differently) returns None, and the Python reader takes over and reports the error.
"""

from __future__ import annotations

import contextlib
import gzip
import math
import mmap
import os
import stat
import sys
import zlib
import re
from pathlib import Path

import numpy as np

from varorder import _numba_start  # before numba: see the module

import numba  # noqa: E402
from varorder.errors import FormatError
from varorder.lm import _kernels, _words  # noqa: E402

try:  # NumPy's process-wide switch for madvise(MADV_HUGEPAGE) on its large arrays
    from numpy._core.multiarray import _set_madvise_hugepage
except ImportError:  # pragma: no cover - NumPy < 2
    try:
        from numpy.core.multiarray import _set_madvise_hugepage
    except ImportError:
        _set_madvise_hugepage = None

_COUNT_LINE = re.compile(rb"^ngram\s+(\d+)\s*=\s*(\d+)$")
_SECTION_START = re.compile(rb"^[ \t\r\x0b\x0c]*\\", re.MULTILINE)  # a line whose text starts with a backslash
_ODD_CAPACITY = 1 << 12
_MAP_FROM = 1 << 20  # files larger than this are memory-mapped
_FALLBACK = -1


def read_bytes(path: Path) -> bytes | mmap.mmap:
    """The file's bytes, gunzipped when it starts with gzip's magic bytes. A plain
    regular file over 1 MB is memory-mapped read-only instead, which the parsers read like
    bytes: no copy, and none of the 4 KB page faults a 100 MB ``bytes`` object costs
    (0.15 s of a 1.3 s cold read of the PTB 5-gram). As with every mapped file (KenLM's
    reader maps ARPA files too), truncating the file while it is being read ends the
    process with SIGBUS."""
    with open(path, "rb") as handle:
        magic = handle.read(2)
        status = os.fstat(handle.fileno())
        if magic != b"\x1f\x8b" and stat.S_ISREG(status.st_mode) and status.st_size > _MAP_FROM:
            try:
                return mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
            except (OSError, ValueError):  # a file system that cannot map: read it
                pass
        data = magic + handle.read()
    if data[:2] == b"\x1f\x8b":
        try:  # decompressing the whole stream also checks its CRC and length
            data = gzip.decompress(data)
        except (OSError, EOFError, zlib.error) as exc:
            raise FormatError(f"{path}: corrupt or truncated gzip data ({type(exc).__name__}: {exc})", path=path) from None
    return data


def _lines(data: bytes, pos: int):
    """Yield ``(start, end, stripped line)`` from ``pos`` (line breaks are ``\\n``)."""
    while pos < len(data):
        end = data.find(b"\n", pos)
        end = len(data) if end < 0 else end
        yield pos, end, data[pos:end].strip()
        pos = end + 1


def _declared_counts(data: bytes) -> tuple[list[int], tuple[int, int, bytes]] | None:
    """``(the counts \\data\\ declares, (start, end, text) of the first line after them)``."""
    lines = _lines(data, 0)
    for _, _, text in lines:
        if text == b"\\data\\":
            break
    else:
        return None
    declared: list[int] = []
    for start, end, text in lines:
        if not text:
            continue
        match = _COUNT_LINE.match(text)
        if match:
            if int(match.group(1)) != len(declared) + 1:
                return None
            declared.append(int(match.group(2)))
            continue
        return (declared, (start, end, text)) if declared else None
    return None


def _unigram_section(data: bytes, pos: int, header_line: int) -> tuple[dict, int]:
    """The unigram section's field lists and line numbers, up to the next line that
    starts (after blanks) with a backslash, and the position of that line. The section
    is split in one piece (no generator per line): the same lines as :func:`_lines`."""
    found = _SECTION_START.search(data, pos)
    end = found.start() if found else len(data)
    fields, line_numbers = [], []
    for number, raw in enumerate(data[pos:end].split(b"\n"), start=header_line + 1):
        text = raw.strip()
        if text:
            fields.append(text.decode("utf-8", errors="surrogateescape").split())
            line_numbers.append(number)
    return {"fields": fields, "lines": np.asarray(line_numbers, dtype=np.int64)}, end


# ---------------------------------------------------------------------------------------
# The n-gram sections: one compiled line parser, then the model's tables (closed models)
# or word-id rows (the others).

_NOT_CLOSED = -3  # status: an n-gram's prefix or suffix is not listed (the general path inserts it)
# Byte classes for the single-pass line scanner: 0 part of a token, 1 separator,
# 2 line break, 3 a byte that may start text Python would split differently (checked).
_BYTE_CLASS = np.zeros(256, dtype=np.uint8)
_BYTE_CLASS[[9, 11, 12, 32]] = 1
_BYTE_CLASS[10] = 2
_BYTE_CLASS[[13, 28, 29, 30, 31]] = 3
_BYTE_CLASS[0xC2:] = 3


@numba.njit(cache=True, inline="always")
def _scan_word(buffer, i, n, byte_class):
    """``(end, FNV-1a hash)`` of the token starting at ``i`` (end -1: text the Python
    reader must split); the hash is :func:`varorder.lm._words.find_word`'s."""
    hashed = np.uint64(_words.FNV_OFFSET)
    while i < n:
        kind = byte_class[buffer[i]]
        if kind == 0:
            hashed = (hashed ^ np.uint64(buffer[i])) * np.uint64(_words.FNV_PRIME)
            i += 1
        elif kind == 3:
            if _words.unusual_at(buffer, i):
                return -1, hashed
            if buffer[i] == 13:  # the CR of a CRLF ends the token like a blank
                return i, hashed
            hashed = (hashed ^ np.uint64(buffer[i])) * np.uint64(_words.FNV_PRIME)
            i += 1
        else:
            return i, hashed
    return i, hashed


@numba.njit(cache=True, inline="always")
def _skip_blanks(buffer, i, n, byte_class):
    """First position from ``i`` that is not a blank on this line (-1: unusual text)."""
    while i < n:
        kind = byte_class[buffer[i]]
        if kind == 1:
            i += 1
        elif kind == 3 and buffer[i] == 13:
            if _words.unusual_at(buffer, i):
                return -1
            i += 1
        else:
            return i
    return i


@numba.njit(cache=True)
def _parse_section_lines(buffer, words8, pos, order, highest, count, byte_class, blob, starts, ends, word_table,
                         packed_slots, packed_keys, ids, values, max_probs, max_backoffs, minus_99_zero, odd,
                         numbers, last_field, last_packed):
    """Parse the ``count`` lines of one n-gram section (order >= 2) from ``pos``: word ids
    into ``ids``, the float32 ``(log10 p, log10 bow)`` into ``values``, the MAX-ARPA
    columns into ``max_probs``/``max_backoffs``, all in file order.

    Returns ``(status, position of the next section's header, lines, odd numbers, lines
    in strictly increasing lexicographic order of their word ids, max-ARPA)``;
    ``odd[k] = (line, column, start, end)`` lists the numbers outside the fast path
    (column 0 log10 p, 1 back-off, 2 mf, 3 mbow), read by Python's ``float`` afterwards.
    Scratch space comes from the caller (:func:`_parse_order`; a kernel that allocates
    makes Numba import its array support when it loads the cached code): ``numbers``
    (4 float64), ``last_field`` (2 x order int64) and ``last_packed`` (2 x order uint64).
    """
    n = buffer.shape[0]
    lexical = True
    max_arpa = False
    line = 0
    n_odd = 0
    numbers[:] = 0.0
    last_field[:] = 0
    last_packed[:] = 0
    last_start = last_field[0]  # bytes of the last word hashed in each field
    last_end = last_field[1]
    last_low = last_packed[0]  # the same word packed (0: not packed)
    last_high = last_packed[1]
    hashed = np.uint64(0)
    reused = False
    word = -1
    while pos < n:
        i = _skip_blanks(buffer, pos, n, byte_class)
        if i < 0:
            return _FALLBACK, pos, line, n_odd, lexical, max_arpa
        if i == n or buffer[i] == 10:
            pos = i + 1
            continue
        if buffer[i] == 92:
            break
        if line == count:
            return _FALLBACK, pos, line, n_odd, lexical, max_arpa
        field = 0
        while i < n and buffer[i] != 10:
            start = i
            number = field == 0 or field > order
            if number:
                i, ok, value = _words.scan_decimal(buffer, words8, i, n)
                if not ok:  # delimit the token for Python's float (-1: unusual text)
                    i, _ = _scan_word(buffer, start, n, byte_class)
            else:
                # Most words are short ASCII: delimited eight bytes at a time, and a word
                # packed as the previous line's in this field (sorted sections repeat their
                # leading words) takes its id without a lookup.
                k = field - 1
                i, low, high = _words.packed_token(buffer, words8, start)
                if i >= 0:
                    if line > 0 and low == last_low[k] and high == last_high[k]:
                        word = ids[line - 1, k]
                    else:
                        word = _words.find_packed_word(low, high, packed_slots, packed_keys)
                    last_low[k] = low
                    last_high[k] = high
                    last_start[k] = start
                    last_end[k] = i
            if not number and i < 0:
                i = start
                # Sorted sections repeat the previous line's leading words: a token whose
                # bytes and delimiter match that line's word in this field takes its id
                # without hashing (its bytes were checked when that line was scanned).
                k = field - 1
                length = last_end[k] - last_start[k]
                reused = line > 0 and i + length < n and (byte_class[buffer[i + length]] == 1
                                                           or byte_class[buffer[i + length]] == 2)
                if reused:
                    for j in range(length):
                        if buffer[i + j] != buffer[last_start[k] + j]:
                            reused = False
                            break
                if reused:
                    i += length
                    word = ids[line - 1, k]
                else:
                    i, hashed = _scan_word(buffer, i, n, byte_class)
                    if i >= 0:
                        word = _words.find_hashed_word(buffer, start, i, hashed, blob, starts, ends, word_table)
                        last_start[k] = start
                        last_end[k] = i
                last_low[k] = 0  # a word the packed path cannot read
            if i < 0:
                return _FALLBACK, pos, line, n_odd, lexical, max_arpa
            if number:
                column = 0 if field == 0 else field - order
                if column > 3:
                    return _FALLBACK, pos, line, n_odd, lexical, max_arpa
                if not ok:
                    if n_odd == odd.shape[0]:
                        return _FALLBACK, pos, line, n_odd, lexical, max_arpa
                    odd[n_odd, 0] = line
                    odd[n_odd, 1] = column
                    odd[n_odd, 2] = start
                    odd[n_odd, 3] = i
                    n_odd += 1
                    value = 0.0
                elif minus_99_zero and value == -99.0:
                    value = -np.inf
                numbers[column] = value
            else:
                if word < 0:
                    return _FALLBACK, pos, line, n_odd, lexical, max_arpa
                ids[line, field - 1] = word
            field += 1
            # The usual single tab or space is stepped over without a loop (a loop here
            # put two dependent loads between every token and the next); anything else
            # that is no token byte or line feed goes to the blank skipper.
            if i < n and (buffer[i] == 32 or buffer[i] == 9):
                i += 1
            if i < n and byte_class[buffer[i]] != 0 and buffer[i] != 10:
                i = _skip_blanks(buffer, i, n, byte_class)
                if i < 0:
                    return _FALLBACK, pos, line, n_odd, lexical, max_arpa
        pos = i + 1
        extra = field - 1 - order
        if extra != 0 and extra != 1 and extra != 3:
            return _FALLBACK, pos, line, n_odd, lexical, max_arpa
        if line == 0:
            max_arpa = extra == 3
        elif max_arpa != (extra == 3):
            return _FALLBACK, pos, line, n_odd, lexical, max_arpa
        if extra == 0:
            numbers[1] = 0.0
        if numbers[0] > 0 or (highest and numbers[1] != 0):
            return _FALLBACK, pos, line, n_odd, lexical, max_arpa
        if lexical and line > 0:
            k = 0
            while k < order and ids[line, k] == ids[line - 1, k]:
                k += 1
            lexical = k < order and ids[line, k] > ids[line - 1, k]
        values[line, 0] = numbers[0]
        values[line, 1] = numbers[1]
        if max_arpa:
            max_probs[line] = numbers[2]
            max_backoffs[line] = numbers[3]
        line += 1
    return 0, pos, line, n_odd, lexical, max_arpa


_PREFETCH_AHEAD = 16  # lines


@numba.njit(cache=True)
def _link_section(order, ids, lower_ids, lower_suffix_rows, vocab_size, hash_rows, hash_values, hash_base, hash_cap,
                  values, keys, suffix_rows, lower_extends, suffix_keys):
    """Enter one order's n-grams, given in lexicographic order of their word ids (which
    is the order of their packed keys), into the model's tables.

    Each n-gram's prefix is found by merging with the order below (``lower_ids``, in row
    order), so its row costs no hash probe; the row of its suffix's context is the
    suffix row of that prefix (``lower_suffix_rows``), and one probe of the table below
    finds the suffix itself, checking that the model is closed. Fills ``keys``, this
    order's ``suffix_rows`` (for the order above), the hash slots (row = position) and
    ``lower_extends``; ``suffix_keys`` is scratch space (at least as many as n-grams).
    Returns 0, ``_NOT_CLOSED`` or ``_FALLBACK`` (a duplicate).
    """
    count = ids.shape[0]
    n_lower = lower_ids.shape[0]
    prefix = 0
    for line in range(count):
        if order == 2:
            prefix = ids[line, 0]
        else:
            while True:  # advance to the first lower row not before this line's prefix
                if prefix == n_lower:
                    return _NOT_CLOSED
                k = 0
                while k < order - 1 and lower_ids[prefix, k] == ids[line, k]:
                    k += 1
                if k == order - 1:
                    break
                if lower_ids[prefix, k] > ids[line, k]:
                    return _NOT_CLOSED
                prefix += 1
        key = prefix * vocab_size + ids[line, order - 1]
        if line and key <= keys[line - 1]:
            return _FALLBACK  # a duplicate n-gram: the general path names its line
        keys[line] = key
        lower_extends[prefix] = True
        if order == 2:
            suffix_rows[line] = ids[line, 1]
        else:
            suffix_keys[line] = lower_suffix_rows[prefix] * vocab_size + ids[line, order - 1]
    # Both hash passes below visit slots at random in tables far larger than the caches:
    # each line's slot is prefetched _PREFETCH_AHEAD lines before it is probed, so the
    # memory accesses of many lines overlap instead of each waiting on its own miss.
    if order > 2:
        base, capacity = hash_base[order - 3], hash_cap[order - 3]
        for line in range(count):
            if line + _PREFETCH_AHEAD < count:
                _kernels._prefetch_row_for_write(hash_rows, base + _kernels._slot(suffix_keys[line + _PREFETCH_AHEAD], capacity))
            suffix_rows[line] = _kernels.find(hash_rows, base, capacity, suffix_keys[line])
        for line in range(count):
            if suffix_rows[line] < 0:
                return _NOT_CLOSED
    base, capacity = hash_base[order - 2], hash_cap[order - 2]
    for line in range(count):
        if line + _PREFETCH_AHEAD < count:
            _kernels._prefetch_row_for_write(hash_rows, base + _kernels._slot(keys[line + _PREFETCH_AHEAD], capacity))
        key = keys[line]
        slot = _kernels._slot(key, capacity)
        while hash_rows[base + slot, 0] != -1:
            slot += 1
            if slot == capacity:
                slot = 0
        hash_rows[base + slot, 0] = key
        hash_rows[base + slot, 1] = line
        hash_values[base + slot, 4] = values[line, 0]
        hash_values[base + slot, 5] = values[line, 1]
    return 0


def _hash_capacity(n_keys: int) -> int:
    from varorder.lm.model import _hash_capacity as capacity

    return capacity(n_keys)


def _unigrams(data: bytes, buffer: np.ndarray) -> tuple | None:
    """``(declared counts, unigram section, position after it, words, byte-level word
    table)`` of an ARPA file's head, or None when it needs the general path."""
    if b"\x00" in data[:4096]:
        return None
    found = _declared_counts(data)
    if found is None or found[1][2] != b"\\1-grams:":
        return None
    declared, header = found
    if sum(declared) > len(data) // 4:  # no room for that many lines: the slow path names the fault
        return None
    header_line = data[:header[0]].count(b"\n") + 1
    unigrams, pos = _unigram_section(data, header[1] + 1, header_line)
    unigrams["header_line"] = header_line
    if _words.has_unusual_text(buffer[:pos]):
        return None
    words = [fields[1] for fields in unigrams["fields"] if len(fields) >= 2]
    if len(unigrams["fields"]) != declared[0] or len(words) != declared[0] or len(set(words)) != declared[0]:
        return None
    return declared, unigrams, pos, words, _words.word_table(words)


def _parse_order(data: bytes, buffer: np.ndarray, pos: int, order: int, count: int, highest: bool, word_table,
                 values: np.ndarray, minus_99_zero: bool, odd: np.ndarray, ids_space: np.ndarray | None = None
                 ) -> tuple | None:
    """Parse the section of ``order`` (>= 2) whose header comes next after ``pos``:
    ``(position after it, word ids in file order, mf, mbow, lines in lexicographic
    order, MAX-ARPA)``, the ``(log10 p, log10 bow)`` written into ``values``; None when
    the general path must read the file. The ids go into ``ids_space`` when given (at
    least ``count * order`` int32)."""
    header = next(((s, e, t) for s, e, t in _lines(data, pos) if t), None)
    if header is None or header[2] != b"\\%d-grams:" % order:
        return None
    if ids_space is None:
        ids = np.empty((count, order), dtype=np.int32)
    else:
        ids = ids_space[:count * order].reshape(count, order)
    max_probs, max_backoffs = np.empty(count), np.empty(count)
    status, pos, n_lines, n_odd, lexical, max_arpa = _parse_section_lines(
        buffer, _words.uint64_view(buffer), header[1] + 1, order, highest, count, _BYTE_CLASS, *word_table, ids,
        values, max_probs, max_backoffs, minus_99_zero, odd, np.zeros(4), np.zeros((2, order), dtype=np.int64),
        np.zeros((2, order), dtype=np.uint64))
    if status != 0 or n_lines != count:
        return None
    if n_odd and not _odd_numbers(data, odd[:n_odd], values, max_probs, max_backoffs, minus_99_zero, highest):
        return None
    return pos, ids, max_probs, max_backoffs, lexical, max_arpa


_NO_COLUMN = np.empty(0)


def _release_parsed(data, pos: int) -> None:
    """Drop the pages of a memory-mapped file before ``pos`` (a section parsed) from the
    process's resident set: they stay in the page cache and a later read faults them back
    in, but a model read a section at a time no longer holds the whole file resident
    besides its tables (the PTB 5-gram's ARPA is 93 MB; its largest section 35 MB)."""
    if isinstance(data, mmap.mmap) and hasattr(mmap, "MADV_DONTNEED"):
        end = pos - pos % mmap.PAGESIZE
        if end > 0:
            try:
                data.madvise(mmap.MADV_DONTNEED, 0, end)
            except (OSError, ValueError):
                pass


def _ends(data: bytes, pos: int) -> bool:
    end = next(((s, e, t) for s, e, t in _lines(data, pos) if t), None)
    return end is not None and end[2] == b"\\end\\"


@contextlib.contextmanager
def _huge_pages(enabled: bool):
    """Inside the block, NumPy asks for transparent huge pages on new large arrays only
    when ``enabled`` (NumPy's own process-wide switch, restored after); yields the
    setting it found. The reader's temporaries are written once in order, where 4 KB
    pages cost nothing in TLB misses, while each fresh 2 MB page the kernel must find
    (compacting memory on a busy machine) cost 0.1-0.2 s of system time per cold read of
    the PTB 5-gram; the hash table, probed at random by every query, keeps huge pages."""
    if _set_madvise_hugepage is None:
        yield True
        return
    previous = _set_madvise_hugepage(enabled)
    try:
        yield previous
    finally:
        _set_madvise_hugepage(previous)


def read_closed(data: bytes, minus_99_zero: bool) -> dict | None:
    """The tables of a model whose file (``data``, its bytes) lists every n-gram's prefix
    and suffix (what varorder and KenLM write), parsed with no Python object per line:
    the unigram section's fields and lines (for :func:`varorder.lm.arpa._parse_section`)
    and, for orders >= 2, ``keys``, ``values``, ``hash_rows``, ``hash_base``,
    ``hash_cap``, ``extends`` in :class:`~varorder.lm.model.NgramLM`'s layout, the unigram
    rows of ``values`` left for the caller (``vocab_size`` counts a ``<unk>`` the file
    lacks). None when the file needs :func:`read_sections` (a model not closed under
    prefixes and suffixes) or the Python reader (see the module)."""
    with _huge_pages(False) as huge:
        return _read_closed(data, minus_99_zero, huge)


def _read_closed(data: bytes, minus_99_zero: bool, huge: bool) -> dict | None:
    buffer = np.frombuffer(data, dtype=np.uint8)
    head = _unigrams(data, buffer)
    if head is None:
        return None
    declared, unigrams, pos, words, word_table = head
    # A <unk> the file lacks is appended as the last unigram row.
    vocab_size = declared[0] + 1 if "<unk>" not in words and "<UNK>" not in words else declared[0]
    order = len(declared)
    value_base = np.concatenate([[0], np.cumsum([vocab_size] + declared[1:])]).astype(np.int64)
    capacities = [_hash_capacity(count) for count in declared[1:]]
    hash_base = np.concatenate([[0], np.cumsum(capacities)]).astype(np.int64)
    hash_cap = np.asarray(capacities + [0], dtype=np.int64)
    with _huge_pages(huge):
        hash_rows = np.full((int(hash_base[-1]), 3), -1, dtype=np.int64)
    hash_values = hash_rows.view(np.float32)
    values = np.empty((int(value_base[-1]), 2), dtype=np.float32)
    extends = np.zeros(int(value_base[-1]), dtype=bool)
    keys = [np.arange(vocab_size, dtype=np.int64)]
    max_columns: list[tuple[np.ndarray, np.ndarray]] = []
    odd = np.empty((_ODD_CAPACITY, 4), dtype=np.int64)
    max_arpa = None
    lower_ids = np.zeros((0, 1), dtype=np.int32)
    lower_suffix_rows = np.zeros(0, dtype=np.int64)
    # Two orders' ids and suffix rows are alive at a time: two spaces for each, reused
    # (fresh pages cost a fault each, about a tenth of a cold read).
    most = max(declared[1:], default=0)
    ids_spaces = [np.empty(max([count * (m + 1) for m, count in enumerate(declared) if m], default=0), dtype=np.int32)
                  for _ in range(2)]
    row_spaces = [np.empty(most, dtype=np.int64) for _ in range(2)]
    suffix_keys = np.empty(most, dtype=np.int64)
    for m in range(2, order + 1):
        count = declared[m - 1]
        section_values = values[value_base[m - 1]:value_base[m]]
        parsed = _parse_order(data, buffer, pos, m, count, m == order, word_table, section_values, minus_99_zero, odd,
                              ids_spaces[m % 2])
        if parsed is None:
            return None
        pos, ids, max_probs, max_backoffs, lexical, m_max = parsed
        if count and max_arpa is not None and m_max != max_arpa:
            return None
        if count:
            max_arpa = m_max
        if not lexical:  # rows are in key order, which is the lexicographic order of the word ids
            permutation = np.lexsort(ids.T[::-1])
            ids = ids[permutation]
            section_values[:] = section_values[permutation]
            max_probs, max_backoffs = max_probs[permutation], max_backoffs[permutation]
        if not m_max:  # no MAX-ARPA columns: their float64 buffers (16 bytes an n-gram) go now
            max_probs = max_backoffs = _NO_COLUMN
        _release_parsed(data, pos)
        m_keys = np.empty(count, dtype=np.int64)
        suffix_rows = row_spaces[m % 2][:count]
        status = _link_section(m, ids, lower_ids, lower_suffix_rows, vocab_size, hash_rows, hash_values, hash_base,
                               hash_cap, section_values, m_keys, suffix_rows,
                               extends[value_base[m - 2]:value_base[m - 1]], suffix_keys)
        if status != 0:
            return None
        keys.append(m_keys)
        max_columns.append((max_probs, max_backoffs))
        lower_ids, lower_suffix_rows = ids, suffix_rows
    if not _ends(data, pos):
        return None
    return {"unigram_fields": unigrams["fields"], "unigram_lines": unigrams["lines"],
            "keys": keys, "values": values, "value_base": value_base, "hash_rows": hash_rows,
            "hash_base": hash_base, "hash_cap": hash_cap, "extends": extends, "vocab_size": vocab_size,
            "max_arpa": bool(max_arpa), "max_columns": max_columns}


def read_sections(data: bytes, minus_99_zero: bool) -> list[dict] | None:
    """The sections of an ARPA file (``data``, its bytes) as
    :func:`varorder.lm.arpa._build_model` takes them: the unigram section as field lists,
    every other as word-id rows (ids = unigram positions in the file) with float32-exact
    ``probs``/``backoffs`` and the MAX-ARPA columns; None when the Python reader must read
    the file (see the module)."""
    buffer = np.frombuffer(data, dtype=np.uint8)
    head = _unigrams(data, buffer)
    if head is None:
        return None
    declared, unigrams, pos, _, word_table = head
    sections: list[dict] = [unigrams]
    odd = np.empty((_ODD_CAPACITY, 4), dtype=np.int64)
    for m in range(2, len(declared) + 1):
        count = declared[m - 1]
        values = np.empty((count, 2), dtype=np.float32)
        parsed = _parse_order(data, buffer, pos, m, count, m == len(declared), word_table, values, minus_99_zero, odd)
        if parsed is None:
            return None
        pos, ids, max_probs, max_backoffs, _, max_arpa = parsed
        sections.append({"ids": ids, "probs": values[:, 0].astype(np.float64),
                         "backoffs": values[:, 1].astype(np.float64),
                         "max_probs": max_probs if count and max_arpa else np.empty(0),
                         "max_backoffs": max_backoffs if count and max_arpa else np.empty(0),
                         "lines": None, "max_arpa": bool(max_arpa) if count else None})
    return sections if _ends(data, pos) else None


def _odd_numbers(data: bytes, odd: np.ndarray, values: np.ndarray, max_probs, max_backoffs,
                 minus_99_zero: bool, highest: bool) -> bool:
    """Parse the numbers outside the fast path with Python's ``float`` into their rows;
    False when one is not a number the general path would accept as it is."""
    limit = float(np.finfo(np.float32).max)
    for line, column, start, end in odd.tolist():
        try:
            value = float(data[start:end])
        except ValueError:
            return False
        if value != value or (column < 2 and math.isfinite(value) and abs(value) > limit):
            return False
        if (column == 0 and value > 0) or (column == 1 and (value == math.inf or (highest and value != 0))):
            return False
        if minus_99_zero and value == -99.0:
            value = -math.inf
        if column < 2:
            values[line, column] = value
        else:
            (max_probs if column == 2 else max_backoffs)[line] = value
    return True


# A cache hit loads these modules' machine code without Numba's compiler registries.
_numba_start.load_without_refresh(sys.modules[__name__])  # _words and _kernels register themselves
