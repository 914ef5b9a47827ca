"""varorder's binary n-gram model format: the query tables of an :class:`NgramLM` laid out
so that opening a model maps the file and parses nothing (KenLM's ``build_binary`` idea).

Factorization: the back-off model of :mod:`varorder.lm.model` (Carter, Dymetman &
Bouchard 2012, eq. 7), stored exactly as it is held in memory — the packed sorted keys,
the float32 ``(log10 p, log10 bow)`` pairs and the open-addressing hash of each order —
so scores from a binary file equal those of the model that wrote it bit for bit. Format
version 2, a sorted trie five times smaller with optional quantisation, is
:mod:`varorder.lm.trie`; :func:`open_binary` opens either version and :func:`write_binary`
writes either (``trie=True``).

Layout (little-endian), version 1::

    bytes 0..11   magic  b"varorder-lm\\0"
    bytes 12..15  uint32 format version
    bytes 16..23  uint64 length H of the JSON header
    bytes 24..27  uint32 CRC-32 of the JSON header
    bytes 28..31  zero
    32 .. 32+H    JSON header: order, vocabulary size, n-gram counts, whether MAX-ARPA
                  columns are present, and for every array its dtype, shape, offset,
                  byte length and CRC-32
    then          the arrays, each starting on a 64-byte boundary; the file ends exactly
                  where the header says

Opening (:func:`open_binary`) is structural and costs O(number of arrays + vocabulary)
once the file is known sound: the magic, the version, the header's checksum and schema,
every array's dtype, shape, alignment and extent inside the file, the exact file length
(a truncated copy is refused), the checksums of the small control arrays (vocabulary,
per-order bases and hash capacities) and their agreement with each other (counts, bases,
special words); then it maps the file copy-on-write (pages are read on first touch and
shared between processes; the arrays are writable for Numba's sake, but writes never
reach the file), asking for huge pages (``MADV_HUGEPAGE``: the hash probes are random
accesses, and 2 MB folios save most of their TLB misses; :func:`write_binary` drops the
pages it wrote from the cache so that the first open reads them back that way).

The full check (``verify=True``, :func:`verify_binary`, ``varorder lm verify``) reads the
whole file: every array's CRC-32, the key order, every hash slot's row and copied scores,
no NaN/+inf score, so damage anywhere is refused rather than scored. By default it runs
once per *file version*: a file that :func:`write_binary` wrote, or that an earlier open
verified, is recorded by device, inode, size, modification and change times in a small
cache (``$VARORDER_CACHE_DIR``, else ``~/.cache/varorder``); any other file — a copy, a
file changed in any way since — is verified in full before use. So models are validated
fully on load as the project requires, at the cost of one full read per version, and
repeated opens take milliseconds. What a stale stamp cannot see (bits that rot on the
medium without a write, or a rewrite within one timestamp tick of the stamp) the query
code still contains: every lookup kernel bounds-checks what it reads from a table (a
hash probe visits at most the table's capacity, a row read from a slot must lie inside
its order before it indexes anything), so a corrupt file can give wrong scores or a
ValueError naming the file, never a crash, a hang or a read outside an array; whole-model operations (listing n-grams, writing ARPA, MAX-ARPA)
check the key arrays once before using them (``verify=False`` opens on these checks
alone). Nothing is unpickled: the header is JSON and the arrays are raw
numbers.
"""

from __future__ import annotations

import json
import mmap
import os
import zlib
from pathlib import Path

import numpy as np

from varorder.errors import ParameterError
from varorder.lm._binary_file import (_ALIGN, _FORMAT_NAME, _KENLM_MAGIC, _PREAMBLE, MAGIC, BinaryFormatError,
                                     _drop_cached_pages, _known_verified, _record_verified, _refuse)
from varorder.lm.corpus import BOS, EOS, UNK, PathLike, Vocabulary, atomic_output
from varorder.lm.model import MaxBackoffTable, NgramLM, key_tables_problem

FORMAT_VERSION = 1  # the hash-table layout below; version 2 is the trie of varorder.lm.trie
READABLE_VERSIONS = (1, 2)

__all__ = ["BinaryFormatError", "FORMAT_VERSION", "MAGIC", "READABLE_VERSIONS", "is_binary_model", "open_binary",
           "verify_binary", "write_binary"]

def is_binary_model(path: PathLike) -> bool:
    """Whether ``path`` starts with the varorder binary magic bytes."""
    with open(path, "rb") as handle:
        return handle.read(len(MAGIC)) == MAGIC


def _raw_bytes(array: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(array).reshape(-1).view(np.uint8)


def _model_arrays(model: NgramLM) -> dict[str, np.ndarray]:
    words = model.vocabulary.words
    for word in words:
        if "\n" in word:
            raise ParameterError(f"word {word!r} contains a newline; the binary format separates words by newlines", name='model', value=model)
    arrays = {
        "vocabulary": np.frombuffer("\n".join(words).encode("utf-8", errors="surrogateescape"), dtype=np.uint8),
        "values": np.ascontiguousarray(model._values, dtype=np.float32),
        "value_base": np.ascontiguousarray(model._value_base, dtype=np.int64),
        "hash_rows": np.ascontiguousarray(model._hash_rows, dtype=np.int64),
        "hash_base": np.ascontiguousarray(model._hash_base, dtype=np.int64),
        "hash_cap": np.ascontiguousarray(model._hash_cap, dtype=np.int64),
        "extends": np.ascontiguousarray(model._extends_flat, dtype=np.bool_),
    }
    for m in range(1, model.order):
        arrays[f"keys{m + 1}"] = np.ascontiguousarray(model._keys[m], dtype=np.int64)
    if model._max_backoff is not None:
        arrays["max_log10prob"] = np.concatenate(model._max_backoff.max_log10prob).astype(np.float64)
        arrays["max_log10backoff"] = np.concatenate(model._max_backoff.max_log10backoff).astype(np.float64)
    return arrays


def write_binary(model: NgramLM, path: PathLike, *, max_arpa: bool | None = None, trie: bool = False,
                 prob_bits: int | None = None, backoff_bits: int | None = None) -> None:
    """Write ``model`` in the binary format, atomically (a temporary file renamed into
    place; permissions follow the umask).

    ``max_arpa``: store the MAX-ARPA columns (computed if needed); by default they are
    stored when the model already holds them. ``trie``: write format version 2 instead
    (:mod:`varorder.lm.trie`: a sorted trie, about 5 times smaller), with the probabilities
    and back-offs of orders >= 2 quantised to ``prob_bits`` / ``backoff_bits`` bits when
    given (KenLM's ``build_binary -q -b trie``); version 2 stores no MAX-ARPA columns.
    """
    path = Path(path)
    if trie or prob_bits or backoff_bits:
        if max_arpa:
            raise ParameterError("format version 2 (trie) stores no MAX-ARPA columns (they are computed on "
                                 "demand); write version 1 for them", name="max_arpa", value=max_arpa)
        from varorder.lm.trie import write_trie

        write_trie(model, path, prob_bits=prob_bits, backoff_bits=backoff_bits)
        return
    if max_arpa:
        model.max_backoff()
    elif max_arpa is False:
        saved, model._max_backoff = model._max_backoff, None
    try:
        arrays = _model_arrays(model)
    finally:
        if max_arpa is False:
            model._max_backoff = saved
    entries, offset = {}, 0
    for name, array in arrays.items():
        entries[name] = {"dtype": array.dtype.str, "shape": list(array.shape), "offset": offset,
                         "nbytes": int(array.nbytes), "crc32": zlib.crc32(_raw_bytes(array))}
        offset += -(-array.nbytes // _ALIGN) * _ALIGN
    header = {
        "format": _FORMAT_NAME,
        "version": FORMAT_VERSION,
        "order": model.order,
        "vocab_size": model.vocab_size,
        "ngram_counts": list(model.ngram_counts),
        "max_arpa": "max_log10prob" in arrays,
        "arrays": entries,
    }

    def encode(data_start: int) -> bytes:
        header["data_start"] = data_start
        header["file_size"] = data_start + offset
        return json.dumps(header, sort_keys=True).encode("ascii")

    # Room for the two numbers' digits, so that the header fits before data_start.
    data_start = -(-(_PREAMBLE.size + len(encode(0)) + 48) // _ALIGN) * _ALIGN
    header_bytes = encode(data_start)
    header_bytes = header_bytes.ljust(data_start - _PREAMBLE.size, b" ")
    with atomic_output(path) as handle:
        handle.write(_PREAMBLE.pack(MAGIC, FORMAT_VERSION, len(header_bytes), zlib.crc32(header_bytes), 0))
        handle.write(header_bytes)
        for array in arrays.values():
            handle.write(_raw_bytes(array))
            handle.write(b"\x00" * (-array.nbytes % _ALIGN))
    _drop_cached_pages(path)
    _record_verified(os.stat(path))  # written from a validated model: its bytes are sound


def _read_header(path, handle, file_size: int) -> dict:
    preamble = handle.read(_PREAMBLE.size)
    if len(preamble) < len(MAGIC) or preamble[: len(MAGIC)] != MAGIC:
        if preamble.startswith(_KENLM_MAGIC):
            raise _refuse(path, "this is a KenLM binary model, which varorder cannot read; give the ARPA file "
                                "(or convert it with `varorder lm build-binary ARPA OUT`)")
        raise _refuse(path, "not a varorder binary model (wrong magic bytes)")
    if len(preamble) < _PREAMBLE.size:
        raise _refuse(path, f"truncated: {file_size} bytes, shorter than the {_PREAMBLE.size}-byte preamble")
    _, version, header_length, header_crc, reserved = _PREAMBLE.unpack(preamble)
    if reserved != 0:  # written as zero; anything else is damage or a format this reader does not know
        raise _refuse(path, f"field 'reserved' of the preamble is {reserved}, not 0: damaged or not written by varorder")
    if version not in READABLE_VERSIONS:
        raise _refuse(path, f"binary format version {version}, but this varorder reads versions "
                            f"{', '.join(map(str, READABLE_VERSIONS))}; "
                            "rebuild it from the ARPA file with `varorder lm build-binary`")
    if _PREAMBLE.size + header_length > file_size:
        raise _refuse(path, f"truncated: the header needs {_PREAMBLE.size + header_length} bytes, the file has {file_size}")
    header_bytes = handle.read(header_length)
    if zlib.crc32(header_bytes) != header_crc:
        raise _refuse(path, "corrupt header (checksum mismatch)")
    try:
        header = json.loads(header_bytes)
    except ValueError as error:
        raise _refuse(path, f"corrupt header: {error}") from None
    if not isinstance(header, dict):
        raise _refuse(path, "corrupt header: not a JSON object")
    header["_preamble_version"] = version
    return header


def _check_header(path, header: dict, file_size: int) -> None:
    if header.get("format") != _FORMAT_NAME or header.get("version") != FORMAT_VERSION:
        raise _refuse(path, f"corrupt header: format {header.get('format')!r} version {header.get('version')!r}")
    required = {"order": int, "vocab_size": int, "ngram_counts": list, "max_arpa": bool, "arrays": dict,
                "data_start": int, "file_size": int}
    for key, kind in required.items():
        if not isinstance(header.get(key), kind):
            raise _refuse(path, f"corrupt header: field {key!r} missing or not {kind.__name__}")
    if header["file_size"] != file_size:
        state = "truncated" if file_size < header["file_size"] else "has trailing bytes"
        raise _refuse(path, f"{state}: the header announces {header['file_size']} bytes, the file has {file_size}")
    order = header["order"]
    if not 1 <= order or len(header["ngram_counts"]) != order:
        raise _refuse(path, f"corrupt header: order {order} with n-gram counts {header['ngram_counts']}")
    names = ["vocabulary", "values", "value_base", "hash_rows", "hash_base", "hash_cap", "extends"]
    names += [f"keys{m + 1}" for m in range(1, order)]
    names += ["max_log10prob", "max_log10backoff"] if header["max_arpa"] else []
    if set(header["arrays"]) != set(names):
        raise _refuse(path, f"corrupt header: arrays {sorted(header['arrays'])}, expected {sorted(names)}")
    for name, entry in header["arrays"].items():
        try:
            dtype = np.dtype(entry["dtype"])
            shape = tuple(int(n) for n in entry["shape"])
            offset, nbytes = int(entry["offset"]), int(entry["nbytes"])
        except (KeyError, TypeError, ValueError):
            raise _refuse(path, f"corrupt header: array {name!r} is described badly") from None
        if dtype.hasobject or min(shape, default=0) < 0 or nbytes != dtype.itemsize * int(np.prod(shape)):
            raise _refuse(path, f"corrupt header: array {name!r} has dtype {dtype}, shape {shape}, {nbytes} bytes")
        if offset < 0 or offset % _ALIGN or header["data_start"] + offset + nbytes > file_size:
            raise _refuse(path, f"corrupt header: array {name!r} lies outside the file")


def _check_tables(path, header: dict, arrays: dict[str, np.ndarray], words: list[str]) -> None:
    order, counts = header["order"], header["ngram_counts"]
    vocab_size = header["vocab_size"]

    def expect(condition: bool, message: str) -> None:
        if not condition:
            raise _refuse(path, f"inconsistent model: {message}")

    expect(len(words) == vocab_size == counts[0], f"{len(words)} words, vocab_size {vocab_size}, {counts[0]} unigrams")
    distinct = set(words)
    expect(len(distinct) == len(words), "the vocabulary repeats a word")
    expect({BOS, EOS, UNK} <= distinct, f"the vocabulary lacks {BOS}, {EOS} or {UNK}")
    expected_types = {"values": (np.float32, (sum(counts), 2)), "value_base": (np.int64, (order + 1,)),
                      "hash_base": (np.int64, (order,)), "hash_cap": (np.int64, (order,)),
                      "extends": (np.bool_, (sum(counts),))}
    for m in range(1, order):
        expected_types[f"keys{m + 1}"] = (np.int64, (counts[m],))
    if header["max_arpa"]:
        expected_types["max_log10prob"] = expected_types["max_log10backoff"] = (np.float64, (sum(counts),))
    for name, (dtype, shape) in expected_types.items():
        array = arrays[name]
        expect(array.dtype == dtype and array.shape == shape,
               f"array {name!r} has dtype {array.dtype} and shape {array.shape}, expected {np.dtype(dtype)} {shape}")
    expect(np.array_equal(arrays["value_base"], np.concatenate([[0], np.cumsum(counts)])), "value_base disagrees with the counts")
    caps = arrays["hash_cap"]
    expect(bool(np.all(caps[: order - 1] > np.asarray(counts[1:]))) and caps[order - 1] == 0, "hash capacities too small")
    expect(np.array_equal(arrays["hash_base"], np.concatenate([[0], np.cumsum(caps[:-1])])), "hash_base disagrees with hash_cap")
    rows = arrays["hash_rows"]
    expect(rows.dtype == np.int64 and rows.shape == (int(caps.sum()), 3), f"hash_rows has shape {rows.shape}")


def _map_arrays(path, header: dict, buffer) -> dict[str, np.ndarray]:
    arrays = {}
    for name, entry in header["arrays"].items():
        start = header["data_start"] + entry["offset"]
        dtype = np.dtype(entry["dtype"])
        count = entry["nbytes"] // dtype.itemsize
        arrays[name] = np.frombuffer(buffer, dtype=dtype, count=count, offset=start).reshape(entry["shape"])
    return arrays


# Arrays whose checksum every open verifies: small (O(order) or the vocabulary's bytes),
# and the ones the structural checks and the vocabulary are made from.
_CONTROL_ARRAYS = ("vocabulary", "value_base", "hash_base", "hash_cap")


def _check_control_checksums(path, header: dict, arrays: dict[str, np.ndarray]) -> None:
    for name in _CONTROL_ARRAYS:
        if zlib.crc32(_raw_bytes(arrays[name])) != header["arrays"][name]["crc32"]:
            raise _refuse(path, f"array {name!r} is corrupt (checksum mismatch)")


def _verify_arrays(path, header: dict, arrays: dict[str, np.ndarray]) -> None:
    """Every array's CRC-32, then the table invariants: keys strictly increasing packed keys,
    every occupied hash slot naming a row inside its order with that row's scores, no NaN
    or +inf score — so that damage anywhere is refused rather than scored (the kernels'
    own bounds checks already keep a damaged file from reading out of bounds)."""
    for name, entry in header["arrays"].items():
        if zlib.crc32(_raw_bytes(arrays[name])) != entry["crc32"]:
            raise _refuse(path, f"array {name!r} is corrupt (checksum mismatch)")
    counts, vocab_size = header["ngram_counts"], header["vocab_size"]
    keys = [np.arange(vocab_size)] + [arrays[f"keys{m + 1}"] for m in range(1, header["order"])]
    problem = key_tables_problem(keys, vocab_size)
    if problem is not None:
        raise _refuse(path, problem)
    rows, bases, caps = arrays["hash_rows"], arrays["hash_base"], arrays["hash_cap"]
    for m in range(header["order"] - 1):
        table = rows[bases[m]:bases[m] + caps[m]]
        used = table[:, 0] != -1
        if (table[used, 1] < 0).any() or (table[used, 1] >= counts[m + 1]).any() or int(used.sum()) != counts[m + 1]:
            raise _refuse(path, f"the {m + 2}-gram hash table names rows outside its order")
        copies = np.ascontiguousarray(table[used, 2]).view(np.float32).reshape(-1, 2)
        stored = arrays["values"][arrays["value_base"][m + 1] + table[used, 1]]
        if not np.array_equal(copies, stored, equal_nan=True):
            raise _refuse(path, f"the {m + 2}-gram hash table's scores disagree with the score table")
    values = arrays["values"]
    if np.isnan(values).any() or np.isposinf(values).any():
        raise _refuse(path, "the score table holds NaN or +inf")


def verify_binary(path: PathLike) -> None:
    """Full check of a binary model: every array's CRC-32, the key order and the hash rows
    (reads the whole file). Raises :class:`BinaryFormatError` naming the first problem."""
    open_binary(path, verify=True)


def open_binary(path: PathLike, verify: bool | None = None) -> NgramLM:
    """Map a binary model written by :func:`write_binary` (see the module docstring for
    what is checked). Raises :class:`BinaryFormatError` (a ValueError) naming the file
    and the problem. ``verify``: ``True`` also checks every array's checksum and the
    invariants the scorer relies on (:func:`verify_binary`; reads the whole file);
    ``None`` (default) does so unless this very file version was verified before (see
    :func:`_known_verified`); ``False`` never does."""
    path = Path(path)
    with open(path, "rb") as handle:
        file_stat = os.fstat(handle.fileno())
        file_size = file_stat.st_size
        if verify is None:
            verify = not _known_verified(file_stat)
        header = _read_header(path, handle, file_size)
        version = header.pop("_preamble_version")
        if version == FORMAT_VERSION:
            _check_header(path, header, file_size)
        else:
            from varorder.lm.trie import _check_trie_header

            _check_trie_header(path, header, file_size)
        buffer = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_COPY)
    if hasattr(mmap, "MADV_HUGEPAGE"):
        try:  # pages read from disk through this mapping come in huge folios where possible
            buffer.madvise(mmap.MADV_HUGEPAGE)
        except OSError:
            pass
    if version != FORMAT_VERSION:
        from varorder.lm.trie import open_trie

        model = open_trie(path, header, buffer, file_size, bool(verify))
        if verify:
            _record_verified(file_stat)
        return model
    arrays = _map_arrays(path, header, buffer)
    _check_control_checksums(path, header, arrays)
    text = arrays["vocabulary"].tobytes().decode("utf-8", errors="surrogateescape")
    words = text.split("\n") if text else []
    _check_tables(path, header, arrays, words)
    if verify:
        _verify_arrays(path, header, arrays)
        _record_verified(file_stat)
    order = header["order"]
    vocabulary = Vocabulary(words)
    keys = [np.arange(header["vocab_size"], dtype=np.int64)] + [arrays[f"keys{m + 1}"] for m in range(1, order)]
    model = NgramLM._from_tables(
        vocabulary, keys, values=arrays["values"], value_base=arrays["value_base"], hash_rows=arrays["hash_rows"],
        hash_base=arrays["hash_base"], hash_cap=arrays["hash_cap"], extends=arrays["extends"],
    )
    if header["max_arpa"]:
        bases = arrays["value_base"]
        model._max_backoff = MaxBackoffTable(
            tuple(arrays["max_log10prob"][bases[m]:bases[m + 1]] for m in range(order)),
            tuple(arrays["max_log10backoff"][bases[m]:bases[m + 1]] for m in range(order)),
        )
    model._binary_header = header
    model._binary_arrays = arrays
    model._source = str(path)
    # The key arrays were not read: whole-model operations check them once first.
    model._keys_checked = bool(verify)
    return model
