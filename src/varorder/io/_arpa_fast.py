"""The compiled path of :func:`varorder.io.arpa.read_arpa`: n-gram sections parsed from
the file's bytes by a Numba kernel (words looked up in a byte-level hash of the unigram
section, numbers by Clinger's exact fast path), so no Python object is made per line.

It only accepts what it can read exactly as the Python reader does; anything else
(a malformed line, a count mismatch, an unknown word, a number outside the fast path
that Python's ``float`` then cannot read, whitespace or line breaks that Python splits
differently) returns None, and the Python reader takes over and reports the error.
"""

from __future__ import annotations

import gzip
import zlib
import re
from pathlib import Path

import numba
import numpy as np

from varorder.lm import _words

_COUNT_LINE = re.compile(rb"^ngram\s+(\d+)\s*=\s*(\d+)$")
_SECTION_LINE = re.compile(rb"^\\(\d+)-grams:$")
_ODD_CAPACITY = 1 << 12
_FALLBACK = -1


@numba.njit(cache=True)
def _parse_ngram_lines(buffer, pos, order, n_expected, blob, starts, ends, table,
                       ids, probs, backoffs, max_probs, max_backoffs, n_extra, odd):
    """Parse the n-gram lines of one section from ``pos`` up to the next line whose first
    non-blank byte is a backslash. Returns ``(status, position of that line, lines read,
    numbers left for Python)``; ``odd[k] = (line, column, start, end)`` lists the numbers
    outside the fast path (column 0 log10 p, 1 back-off, 2 mf, 3 mbow)."""
    n = buffer.shape[0]
    line = 0
    n_odd = 0
    while pos < n:
        line_end = pos
        while line_end < n and buffer[line_end] != 10:
            line_end += 1
        i = pos
        while i < line_end and _words.is_space(buffer[i]):
            i += 1
        if i == line_end:
            pos = line_end + 1
            continue
        if buffer[i] == 92:
            return 0, pos, line, n_odd
        if line >= n_expected:
            return _FALLBACK, pos, line, n_odd
        field = 0
        while i < line_end:
            start = i
            while i < line_end and not _words.is_space(buffer[i]):
                i += 1
            if field == 0 or field > order:
                column = 0 if field == 0 else field - order
                if column > 3:
                    return _FALLBACK, pos, line, n_odd
                ok, value = _words.parse_decimal(buffer, start, i)
                if not ok:
                    if n_odd == odd.shape[0]:
                        return _FALLBACK, pos, line, n_odd
                    odd[n_odd, 0] = line
                    odd[n_odd, 1] = column
                    odd[n_odd, 2] = start
                    odd[n_odd, 3] = i
                    n_odd += 1
                    value = np.nan
                if column == 0:
                    probs[line] = value
                elif column == 1:
                    backoffs[line] = value
                elif column == 2:
                    max_probs[line] = value
                else:
                    max_backoffs[line] = value
            else:
                word = _words.find_word(buffer, start, i, blob, starts, ends, table)
                if word < 0:
                    return _FALLBACK, pos, line, n_odd
                ids[line, field - 1] = word
            field += 1
            while i < line_end and _words.is_space(buffer[i]):
                i += 1
        extra = field - 1 - order
        if extra != 0 and extra != 1 and extra != 3:
            return _FALLBACK, pos, line, n_odd
        n_extra[line] = extra
        line += 1
        pos = line_end + 1
    return 0, pos, line, n_odd


def _beyond_float32(*columns: np.ndarray) -> bool:
    """A finite value that float32 storage would turn into inf (the slow reader names its line)."""
    limit = float(np.finfo(np.float32).max)
    return any(bool((np.isfinite(c) & (np.abs(c) > limit)).any()) for c in columns)


def _file_bytes(path: Path) -> bytes:
    with open(path, "rb") as handle:
        data = handle.read()
    if data[:2] == b"\x1f\x8b":
        try:  # decompressing the whole stream also checks its CRC and length
            data = gzip.decompress(data)
        except (OSError, EOFError, zlib.error) as exc:
            raise ValueError(f"{path}: corrupt or truncated gzip data ({type(exc).__name__}: {exc})") from None
    return data


def _lines(data: bytes, pos: int):
    """Yield ``(start, end, stripped line)`` from ``pos`` (line breaks are ``\\n``)."""
    while pos < len(data):
        end = data.find(b"\n", pos)
        end = len(data) if end < 0 else end
        yield pos, end, data[pos:end].strip()
        pos = end + 1


def read_sections(path: Path) -> list[dict] | None:
    """The sections of an ARPA file as :func:`varorder.io.arpa._build_model` takes them
    (the unigram section as field lists, the others parsed), or None (see the module)."""
    data = _file_bytes(path)
    buffer = np.frombuffer(data, dtype=np.uint8)
    if b"\x00" in data[:4096] or _words.has_unusual_text(buffer):
        return None
    lines = _lines(data, 0)
    for start, end, text in lines:
        if text == b"\\data\\":
            break
    else:
        return None
    declared: list[int] = []
    header = None
    for start, end, text in lines:
        if not text:
            continue
        match = _COUNT_LINE.match(text)
        if match:
            if int(match.group(1)) != len(declared) + 1:
                return None
            declared.append(int(match.group(2)))
            continue
        header = (start, end, text)
        break
    if not declared or header is None:
        return None
    sections: list[dict] = []
    counted_to, lines_before = 0, 0
    for order, count in enumerate(declared, start=1):
        start, end, text = header
        match = _SECTION_LINE.match(text)
        if not match or int(match.group(1)) != order:
            return None
        lines_before += data.count(b"\n", counted_to, start)
        counted_to = start
        header_line = lines_before + 1
        if order == 1:
            section, pos = _unigram_section(data, end + 1, header_line)
            if len(section["fields"]) != count:
                return None
            words = [fields[1] for fields in section["fields"] if len(fields) >= 2]
            if len(words) != count or len(set(words)) != count:
                return None
            blob, starts, ends, table = _words.word_table(words)
        elif count > (len(data) - end) // 4:  # no room for that many lines: the slow path names the fault
            return None
        else:
            section = _ngram_section(buffer, data, end + 1, order, count, blob, starts, ends, table)
            if section is None or _beyond_float32(section["probs"], section["backoffs"]):
                return None
            pos = section.pop("pos")
        section["order"] = order
        section["header_line"] = header_line
        sections.append(section)
        header = next(((s, e, t) for s, e, t in _lines(data, pos) if t), None)
        if header is None:
            return None
    if header[2] != b"\\end\\":
        return None
    return sections


def _unigram_section(data: bytes, pos: int, header_line: int) -> tuple[dict, int]:
    fields, line_numbers = [], []
    line_number = header_line
    for start, end, text in _lines(data, pos):
        line_number += 1
        if not text:
            continue
        if text.startswith(b"\\"):
            return {"fields": fields, "lines": np.asarray(line_numbers, dtype=np.int64)}, start
        fields.append(text.decode("utf-8", errors="surrogateescape").split())
        line_numbers.append(line_number)
    return {"fields": fields, "lines": np.asarray(line_numbers, dtype=np.int64)}, len(data)


def _ngram_section(buffer, data: bytes, pos: int, order: int, count: int, blob, starts, ends, table) -> dict | None:
    ids = np.empty((count, order), dtype=np.int64)
    probs = np.empty(count)
    backoffs = np.zeros(count)
    max_probs = np.zeros(count)
    max_backoffs = np.zeros(count)
    n_extra = np.empty(count, dtype=np.int8)
    odd = np.empty((_ODD_CAPACITY, 4), dtype=np.int64)
    status, pos, n_lines, n_odd = _parse_ngram_lines(buffer, pos, order, count, blob, starts, ends, table,
                                                     ids, probs, backoffs, max_probs, max_backoffs, n_extra, odd)
    if status != 0 or n_lines != count:
        return None
    columns = (probs, backoffs, max_probs, max_backoffs)
    for line, column, start, end in odd[:n_odd].tolist():
        try:
            columns[column][line] = float(data[start:end])
        except ValueError:
            return None
    is_max = n_extra == 3
    if count and is_max.any() and not is_max.all():
        return None
    if np.isnan(probs).any() or np.isnan(backoffs).any() or (probs > 0).any() or np.isposinf(backoffs).any():
        return None
    if count and is_max[0] and (np.isnan(max_probs).any() or np.isnan(max_backoffs).any()):
        return None
    return {"ids": ids, "probs": probs, "backoffs": backoffs, "max_probs": max_probs if count and is_max[0] else np.empty(0),
            "max_backoffs": max_backoffs if count and is_max[0] else np.empty(0), "lines": None,
            "max_arpa": bool(is_max[0]) if count else None, "pos": pos}


@numba.njit(cache=True)
def _write_ngram_lines(out, rows, word_blob, word_starts, word_ends, text, text_lengths, text_index):
    """Write ``log10p <TAB> w1 .. wn [<TAB> column]* <NEWLINE>`` per row into ``out``:
    column c's string is row ``text_index[c, i]`` of the fixed-width table ``text``
    (``text_lengths`` bytes used). Returns the bytes written."""
    position = 0
    n_columns = text_index.shape[0]
    for i in range(rows.shape[0]):
        for c in range(n_columns):
            if c > 0:
                out[position] = 9
                position += 1
            entry = text_index[c, i]
            for k in range(text_lengths[entry]):
                out[position] = text[entry, k]
                position += 1
            if c == 0:
                out[position] = 9
                position += 1
                for w in range(rows.shape[1]):
                    if w > 0:
                        out[position] = 32
                        position += 1
                    word = rows[i, w]
                    for k in range(word_starts[word], word_ends[word]):
                        out[position] = word_blob[k]
                        position += 1
        out[position] = 10
        position += 1
    return position


def _value_strings(values: np.ndarray, dtype) -> tuple[np.ndarray, np.ndarray]:
    """``(fixed-width ASCII strings of the distinct values, index of each value)``: the
    shortest decimal that reads back to the same ``dtype`` value, -inf written as -99."""
    distinct, index = np.unique(np.asarray(values, dtype=dtype), return_inverse=True)
    text = distinct.astype(str)
    text[np.isneginf(distinct)] = "-99"
    return text.astype("S32"), index.reshape(-1)


def format_section(rows: np.ndarray, words: tuple[np.ndarray, np.ndarray, np.ndarray],
                   columns: list[tuple[np.ndarray, type]]) -> np.ndarray:
    """The bytes of one ARPA n-gram section's lines (see :func:`_write_ngram_lines`):
    ``words`` is the vocabulary's ``(blob, starts, ends)``, ``columns`` the value columns
    with the float type each is written at (the first one precedes the words)."""
    tables, indices, offset = [], [], 0
    for values, dtype in columns:
        text, index = _value_strings(values, dtype)
        tables.append(text)
        indices.append(index + offset)
        offset += len(text)
    text = np.concatenate(tables) if tables else np.empty(0, "S32")
    lengths = np.char.str_len(text).astype(np.int64)
    table = np.frombuffer(text.tobytes(), dtype=np.uint8).reshape(len(text), 32) if len(text) else np.zeros((0, 32), np.uint8)
    index = np.stack(indices)
    blob, starts, ends = words
    word_lengths = ends - starts
    total = int(lengths[index].sum() + word_lengths[rows].sum() + rows.size + len(columns) * len(rows))
    out = np.empty(total, dtype=np.uint8)
    written = _write_ngram_lines(out, np.ascontiguousarray(rows), blob, starts, ends, table, lengths, index)
    assert written == total
    return out
