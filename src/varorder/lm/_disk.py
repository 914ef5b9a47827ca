"""Arrays on disk for out-of-memory counting and estimation (:mod:`varorder.lm.external`,
:mod:`varorder.lm.streaming`).

Factorization: none — storage only. A :class:`DiskColumn` is a flat file of fixed-width
numeric rows, appended in pieces and read back by row ranges with explicit reads. No file
is memory-mapped: pages of a mapping that has been read count in the process's resident
set until it is unmapped, so a pass over a mapped table larger than the budget would
show the whole table as resident; explicit reads leave the data in the page cache only.
The range passes below follow lmplz's design of streaming sorted tables through a fixed
buffer (Heafield et al. 2013, "Scalable Modified Kneser-Ney Language Model Estimation").
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np

from varorder.errors import FormatError, ParameterError


class DiskColumn:
    """A file of ``width`` values of ``dtype`` per row, written by :meth:`append`."""

    def __init__(self, path: os.PathLike | str, dtype, width: int = 1):
        self.path = Path(path)
        self.dtype = np.dtype(dtype)
        self.width = width
        self.length = 0
        self._handle = open(self.path, "wb")

    def _failed(self, error: OSError) -> OSError:
        from varorder.io import naming_path

        return naming_path(error, self.path, "a temporary table (the -T folder)")

    @classmethod
    def existing(cls, path: os.PathLike | str, dtype, width: int, length: int) -> "DiskColumn":
        """A finished column written elsewhere (by another process), to read."""
        column = cls.__new__(cls)
        column.path, column.dtype, column.width, column.length, column._handle = \
            Path(path), np.dtype(dtype), width, length, None
        return column

    def __len__(self) -> int:
        return self.length

    @property
    def _row_bytes(self) -> int:
        return self.dtype.itemsize * self.width

    def append(self, values: np.ndarray) -> None:
        values = np.ascontiguousarray(values, dtype=self.dtype)
        if self.width > 1 and (values.ndim != 2 or values.shape[1] != self.width):
            raise ParameterError(f"{self.path.name}: rows of width {self.width} expected, got shape {values.shape}", name='values', value=values)
        try:
            self._handle.write(values.data)  # the array's own buffer: no copy
        except OSError as error:
            raise self._failed(error) from None
        self.length += len(values)

    def finish(self) -> "DiskColumn":
        if self._handle is not None:
            handle, self._handle = self._handle, None
            try:
                handle.close()  # flushes the buffer: a full disk may show only here
            except OSError as error:
                raise self._failed(error) from None
        return self

    def read(self, start: int, stop: int) -> np.ndarray:
        """Rows ``start:stop`` as a fresh array."""
        self.finish()
        start, stop = max(0, start), min(self.length, stop)
        count = max(0, stop - start) * self.width
        with open(self.path, "rb") as handle:
            handle.seek(start * self._row_bytes)
            data = np.fromfile(handle, dtype=self.dtype, count=count)
        if len(data) != count:
            raise FormatError(f"{self.path}: truncated (rows {start}:{stop} of {self.length})", path=self.path)
        return data.reshape(-1, self.width) if self.width > 1 else data

    def write_at(self, start: int, values: np.ndarray) -> None:
        """Overwrite rows from ``start`` (in place)."""
        self.finish()
        try:
            with open(self.path, "r+b") as handle:
                handle.seek(start * self._row_bytes)
                handle.write(np.ascontiguousarray(values, dtype=self.dtype).tobytes())
        except OSError as error:
            raise self._failed(error) from None

    def chunks(self, rows: int) -> Iterator[tuple[int, np.ndarray]]:
        """``(start, rows start:start+rows)`` over the whole column."""
        for start in range(0, self.length, rows):
            yield start, self.read(start, start + rows)

    def delete(self) -> None:
        self.finish()
        self.path.unlink(missing_ok=True)


def release_freed_arrays() -> None:
    """Make glibc return every freed array of 256 KiB or more to the system at once
    (:func:`varorder._malloc.fix_mmap_threshold`): with glibc's rising default the streaming
    path's resident set crept up by ~130 MB that no array held."""
    from varorder._malloc import fix_mmap_threshold

    fix_mmap_threshold(256 << 10)


def ranges(n: int, size: int) -> list[tuple[int, int]]:
    size = max(1, size)
    return [(lo, min(n, lo + size)) for lo in range(0, n, size)] or [(0, 0)]


def sortable(rows: np.ndarray, bits: int) -> np.ndarray:
    """One comparable value per word-id row whose order is the rows' lexicographic order:
    the ids packed into a uint64 when they fit, else big-endian bytes (numpy compares
    unstructured void values byte by byte)."""
    rows = np.asarray(rows)
    width = rows.shape[1]
    if width * bits <= 64:
        packed = np.zeros(len(rows), dtype=np.uint64)
        for column in range(width):
            packed <<= np.uint64(bits)
            packed |= rows[:, column].astype(np.uint64)
        return packed
    return np.ascontiguousarray(rows.astype(">u4")).view(f"V{4 * width}").reshape(-1)


def find_rows(table: DiskColumn, queries: Callable[[int, int], np.ndarray], n_queries: int, out: DiskColumn,
              bits: int, table_rows: int, query_rows: int) -> DiskColumn:
    """``out[i]`` = the row of ``table`` (sorted word-id rows) equal to query row i, for
    queries given by ``queries(start, stop)``; every query must be in the table. The table
    is held ``table_rows`` rows at a time (one pass over the queries per such range)."""
    if n_queries == 0:
        return out.finish()
    passes = ranges(len(table), table_rows)
    found = 0
    for number, (lo, hi) in enumerate(passes):
        keys = sortable(table.read(lo, hi).reshape(hi - lo, -1), bits)
        for start in range(0, n_queries, query_rows):
            stop = min(n_queries, start + query_rows)
            wanted = sortable(queries(start, stop), bits)
            position = np.searchsorted(keys, wanted)
            hit = position < len(keys)
            hit[hit] = keys[position[hit]] == wanted[hit]
            found += int(np.count_nonzero(hit))
            if len(passes) == 1:
                out.append(position + lo)
            elif number == 0:
                out.append(np.where(hit, position + lo, -1))
            else:
                result = out.read(start, stop)
                result[hit] = position[hit] + lo
                out.write_at(start, result)
    if found != n_queries:
        raise AssertionError(f"{n_queries - found} of {n_queries} rows have no row in {table.path.name}")
    return out.finish()


def gather(table: DiskColumn, index: DiskColumn, out: DiskColumn, table_rows: int, query_rows: int) -> DiskColumn:
    """``out[i] = table[index[i]]``, the table held ``table_rows`` rows at a time."""
    passes = ranges(len(table), table_rows)
    for number, (lo, hi) in enumerate(passes):
        values = table.read(lo, hi)
        for start, where in index.chunks(query_rows):
            if len(passes) == 1:
                out.append(values[where])
                continue
            inside = (where >= lo) & (where < hi)
            result = np.zeros(len(where), dtype=out.dtype) if number == 0 else out.read(start, start + len(where))
            result[inside] = values[where[inside] - lo]
            if number == 0:
                out.append(result)
            else:
                out.write_at(start, result)
    return out.finish()


def occurrences(index: DiskColumn, n_targets: int, target_rows: int, query_rows: int) -> Iterator[tuple[int, np.ndarray]]:
    """Per range of target rows ``(lo, counts)``: how often each row ``lo + i`` appears in
    ``index`` (a bincount held ``target_rows`` targets at a time)."""
    for lo, hi in ranges(n_targets, target_rows):
        counts = np.zeros(hi - lo, dtype=np.int64)
        for _, where in index.chunks(query_rows):
            if lo == 0 and hi == n_targets:
                counts += np.bincount(where, minlength=hi - lo)
            else:
                selected = where[(where >= lo) & (where < hi)]
                counts += np.bincount(selected - lo, minlength=hi - lo)
        yield lo, counts


def aligned_ranges(prefix: DiskColumn, n_parents: int, child_rows: int, parent_rows: int
                   ) -> Iterator[tuple[int, int, int, np.ndarray]]:
    """Walk a table (children) and the table one order down (parents) together:
    ``prefix`` (non-decreasing) gives each child's parent row. Yields ``(lo, hi, start,
    child_prefixes)``: parents ``lo:hi`` (at most ``parent_rows``) and their children
    ``start:start + len(child_prefixes)`` (at most ``child_rows``), every parent's children
    in one piece. ``child_rows`` must exceed the number of children a parent can have."""
    n_children = len(prefix)
    lo = start = 0
    while lo < n_parents:
        window = prefix.read(start, start + child_rows + 1)
        hi = min(n_parents, lo + parent_rows)
        taken = int(np.searchsorted(window, hi))
        if taken == len(window) and start + taken < n_children:
            # The window is full: stop before its last parent, whose children may go on.
            hi = int(window[-1])
            if hi <= lo:
                raise AssertionError("a parent has more children than a chunk holds")
            taken = int(np.searchsorted(window, hi))
        yield lo, hi, start, window[:taken]
        lo, start = hi, start + taken


def search_sorted(column: DiskColumn, value: int) -> int:
    """The first row of a non-decreasing column that is >= ``value`` (one small read per
    step of a binary search)."""
    lo, hi = 0, len(column)
    while lo < hi:
        middle = (lo + hi) // 2
        if column.read(middle, middle + 1)[0] < value:
            lo = middle + 1
        else:
            hi = middle
    return lo
