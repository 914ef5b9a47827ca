"""Time series for the HMM command line: CSV or ``.npy``, one row per time step.

CSV: comma-separated numbers, an optional header line (detected: a first line with a
field that is not a number), empty fields / ``NA`` / ``NaN`` read as NaN (missing). An
optional sequence-id column (by header name or 0-based index) cuts the rows into
sequences: a new sequence starts wherever the id changes. ``.npy``: a 1-D or 2-D numeric
array (no pickle); the sequence column by index. Errors name the file and line.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from varorder.errors import FormatError, ParameterError
from varorder.io._text import open_text

__all__ = ["Series", "read_series", "write_rows"]

_MISSING = {"", "na", "nan", "n/a", "null"}


@dataclass
class Series:
    """Rows ``X`` (N, D) float64 (NaN = missing), ``lengths`` (S,) of the consecutive
    sequences, their ``ids`` (strings; "0" when there is no id column) and the feature
    ``names``."""

    X: np.ndarray
    lengths: np.ndarray
    ids: list
    names: list


def _cut(ids: list) -> tuple[np.ndarray, list]:
    lengths, names = [], []
    for value in ids:
        if names and names[-1] == value:
            lengths[-1] += 1
        else:
            names.append(value)
            lengths.append(1)
    return np.array(lengths, dtype=np.int64), names


def _number(text: str) -> float | None:
    s = text.strip()
    if s.lower() in _MISSING:
        return float("nan")
    try:
        return float(s)
    except ValueError:
        return None


def _column_index(sequence_column, header: list | None, width: int, path) -> int | None:
    if sequence_column is None:
        return None
    if isinstance(sequence_column, int) or str(sequence_column).lstrip("-").isdigit():
        index = int(sequence_column)
        if not 0 <= index < width:
            raise ParameterError(f"sequence column {index} is outside the {width} columns of {path}",
                                 name="sequence_column", value=sequence_column)
        return index
    if header is None or sequence_column not in header:
        raise ParameterError(f"{path} has no column named {sequence_column!r}"
                             + (f" (its header: {', '.join(header)})" if header else " (it has no header line)"),
                             name="sequence_column", value=sequence_column)
    return header.index(sequence_column)


def read_series(path, sequence_column=None) -> Series:
    """Read a CSV or ``.npy`` series (see the module docstring)."""
    path = os.fspath(path)
    if path.endswith(".npy"):
        try:
            arr = np.load(path, allow_pickle=False)
        except (ValueError, OSError, EOFError) as err:
            raise FormatError(f"not a readable .npy array ({err})", path=path, expected="a numeric .npy array") \
                from None
        if arr.dtype.kind not in "fiub" or arr.ndim not in (1, 2) or arr.size == 0:
            raise FormatError(f"holds a {arr.dtype} array of shape {arr.shape}", path=path,
                              expected="a non-empty 1-D or 2-D numeric array")
        arr = np.asarray(arr, dtype=np.float64).reshape(arr.shape[0], -1)
        index = _column_index(sequence_column, None, arr.shape[1], path)
        if index is None:
            return Series(arr, np.array([arr.shape[0]]), ["0"], [str(j) for j in range(arr.shape[1])])
        ids = [format(v, "g") for v in arr[:, index]]
        lengths, names = _cut(ids)
        keep = [j for j in range(arr.shape[1]) if j != index]
        return Series(np.ascontiguousarray(arr[:, keep]), lengths, names, [str(j) for j in keep])
    rows, ids, header, width, index = [], [], None, None, None
    with open_text(path) as handle:
        for line_no, line in enumerate(handle, 1):
            if not line.strip():
                continue
            fields = line.rstrip("\r\n").split(",")
            if width is None:
                width = len(fields)
                if any(_number(f) is None for f in fields):  # a header line
                    header = [f.strip() for f in fields]
                    index = _column_index(sequence_column, header, width, path)
                    continue
                index = _column_index(sequence_column, None, width, path)
            if len(fields) != width:
                raise FormatError(f"has {len(fields)} fields, the file's rows have {width}", path=path, line=line_no)
            values = []
            for j, field in enumerate(fields):
                if j == index:
                    ids.append(field.strip())
                    continue
                v = _number(field)
                if v is None:
                    raise FormatError(f"field {j + 1} ({field.strip()!r}) is not a number", path=path, line=line_no,
                                      expected="a number, or empty/NA for a missing value")
                values.append(v)
            rows.append(values)
    if not rows or not rows[0]:
        raise FormatError("holds no data rows" if not rows else "has no feature columns", path=path,
                          expected="one row of numbers per time step")
    X = np.array(rows, dtype=np.float64)
    names = [n for j, n in enumerate(header or [str(j) for j in range(width)]) if j != index]
    if index is None:
        return Series(X, np.array([X.shape[0]]), ["0"], names)
    lengths, seq_names = _cut(ids)
    return Series(X, lengths, seq_names, names)


def write_rows(handle, header: list, rows) -> None:
    """CSV lines to ``handle``: a header, then each row's fields (floats shortest round-trip)."""
    handle.write(",".join(header) + "\n")
    for row in rows:
        handle.write(",".join(repr(float(v)) if isinstance(v, (float, np.floating)) else str(v) for v in row) + "\n")
