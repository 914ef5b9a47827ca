"""A suffix-array index over a tokenised corpus: n-gram counts, next-token distributions
after any context, the longest matching suffix of a context and where each match lies.

Factorization: none — the index stores the corpus itself. Sentences (documents) are laid
end to end as ``<s> w1 .. wn </s>``; the suffix array lists every position in the
lexicographic order of the token sequence starting there (Manber & Myers 1993). The
positions where an n-gram occurs are then one contiguous range of the array, found by
two binary searches, so ``count`` costs O(n log N) and needs no table of n-grams: the
model is of unbounded order (infini-gram, Liu et al. 2024, "Infini-gram: Scaling
Unbounded n-gram Language Models to a Trillion Tokens", §3). Inside a context's range the
suffixes are sorted by their next token, so the next-token distribution is read as runs
(:func:`varorder.lm._suffix.next_token_runs`). The unbounded-order LMs built on it are in
:mod:`varorder.lm.unbounded`.

The suffix array is built by libdivsufsort through ``pydivsufsort`` (MIT licence; Mori's
induced-sorting suffix sorter, O(N log N) worst case, about 0.16 s of CPU per million
tokens here, working on integer alphabets directly); a NumPy prefix-doubling sorter
(O(N log² N)) is the fallback when it is not installed and the test oracle.

On-disk format (a directory, version 1; every integer little-endian)::

    index.json   {"format": "varorder-suffix-index", "version": 1, "num_tokens": N,
                  "num_documents": D, "vocabulary_size": V, "token_dtype": "uint16"|"uint32",
                  "sa_dtype": "int32"|"int64",
                  "files": {name: {"bytes": size, "crc32": CRC-32 of the file}}}
    tokens.bin   N token ids (token_dtype): the corpus, <s> and </s> included
    sa.bin       N positions (sa_dtype): the suffix array
    docs.bin     D + 1 int64: document d is tokens[docs[d] : docs[d + 1]]
    vocab.txt    V words, one per line (UTF-8, id order)

``index.json`` is written last (every file atomically), so an interrupted build leaves no
index that opens. :func:`open_index` maps ``tokens.bin`` and ``sa.bin`` read-only and
validates the header's schema and every file's size against it, the document offsets and
the vocabulary; by default (``verify=True``) it also checks every file's CRC-32, that
every token id is below V and that the suffix array is a permutation (one pass over the
files, ~0.1 s per 10⁷ tokens). Damage is refused with a
:class:`~varorder.errors.FormatError` naming the file. With ``verify=False`` the kernels
still bounds-check every position they read, so a damaged file gives a FormatError or a
wrong count, never a read outside the arrays.

Building in bounded memory (``memory=`` bytes; ``varorder lm index -S``): the vocabulary
from one streaming pass, the framed ids written to ``tokens.bin`` block by block in a
second, then the suffix array of the memory-mapped ``tokens.bin`` in shards of ~``memory /``
:func:`shard_bytes_per_token` positions. Shard [a, b) is sorted by libdivsufsort over
``tokens[a : b + overlap]``, its positions below b kept, and every adjacent pair checked as
suffixes of the *whole* corpus (a pair whose common prefix runs past the window is the only
one the window can misorder; such shards are merge-sorted by the whole-corpus comparison), so
each shard holds its suffixes in their true global order. The shards, written to temporary
files, are merged k-way by the same comparison against the memory-mapped tokens
(the scheme of the part-and-merge builder infini-gram uses, from Lee et al. 2022's
text-deduplication tools, which sorts parts with a fixed overlap and merges them by comparing
whole suffixes; here the pairs the overlap cannot order are repaired, so the result is exact
for any overlap). The result is one global suffix array, the same bytes as the in-memory
build: queries need no per-shard summing (infini-gram keeps a large corpus as several shard
indexes queried together and sums their counts), and n-grams that cross a shard boundary are
counted like any other. Cost: O(N log N) sorting plus
a whole-corpus comparison per merged position, O(ℓ log k) with ℓ the common prefix of the
compared suffixes and k shards: fast on natural text (short repeats), slow on a corpus of long
repeated passages (a duplicated document makes ℓ its length). Memory: the shard's working
set, the merge's windows (``memory / 2``) and the pages of ``tokens.bin`` the operating
system keeps cached (file-backed, evictable).

Index size: 4 bytes per token for the suffix array (8 above 2³¹ tokens) beside the token
ids (2 bytes per token when V ≤ 65,536), plus 8 bytes per document.

Typical use::

    from varorder.lm.suffix_index import build_index, open_index
    build_index("train.txt.gz", "train.idx")
    index = open_index("train.idx")
    index.count("the cat".split()); index.ntd("<s> the".split()); index.longest_suffix("a b c".split())
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np

from varorder.errors import FormatError, ParameterError
from varorder.lm.corpus import Vocabulary, atomic_output, read_corpus

__all__ = ["Occurrence", "SuffixIndex", "build_index", "build_index_from_ids", "open_index", "suffix_array",
           "sorted_suffixes_to_file", "shard_bytes_per_token", "FORMAT_NAME", "FORMAT_VERSION"]

FORMAT_NAME = "varorder-suffix-index"
FORMAT_VERSION = 1
HEADER = "index.json"
_FILES = ("tokens.bin", "sa.bin", "docs.bin", "vocab.txt")
_CHUNK = 1 << 24


def suffix_array(tokens: np.ndarray, *, method: str = "auto", keep: int | None = None) -> np.ndarray:
    """The suffix array of a sequence of non-negative integers (int32 below 2³¹
    positions, else int64); with ``keep``, only its positions below ``keep`` (in order).

    ``method``: "divsufsort" (libdivsufsort through pydivsufsort), "numpy" (prefix
    doubling) or "auto" (the first when installed). libdivsufsort sorts bytes: each token
    is written as w big-endian bytes (w the fewest that hold the largest id: 2 for up to
    65,536 words, 3 for up to 16.7 M), so the byte suffixes at multiples of w sort as the
    token suffixes do, and only those are kept — 5w + 4 bytes a token at the peak (the
    bytes, libdivsufsort's int32 output for each of them, the positions kept)."""
    tokens = np.asarray(tokens)
    if method not in ("auto", "divsufsort", "numpy"):
        raise ParameterError(f"method must be 'auto', 'divsufsort' or 'numpy', got {method!r}", name="method",
                             value=method)
    n = tokens.shape[0]
    keep = n if keep is None else int(keep)
    index_dtype = np.int32 if n < 2**31 else np.int64
    if n == 0 or keep <= 0:
        return np.empty(0, index_dtype)
    if method != "numpy":
        try:
            import pydivsufsort
        except ImportError:
            if method == "divsufsort":
                raise
        else:
            from varorder.lm import _suffix

            top = int(tokens.max())
            if top < 0 or int(tokens.min()) < 0:
                raise ParameterError("suffix_array sorts non-negative integers", name="tokens", value=int(tokens.min()))
            width = max(1, (top.bit_length() + 7) // 8)
            data = np.empty(n * width, np.uint8)
            _suffix.big_endian_bytes(tokens, width, data)
            byte_sa = pydivsufsort.divsufsort(data)
            del data
            out = np.empty(keep, index_dtype)
            if _suffix.aligned_positions(byte_sa, width, keep, out) != keep:
                raise RuntimeError("libdivsufsort returned an array that is not a permutation")
            return out
    order = _prefix_doubling(np.ascontiguousarray(tokens))
    return order[order < keep].astype(index_dtype)


def _prefix_doubling(tokens: np.ndarray) -> np.ndarray:
    """Manber & Myers' prefix doubling: rank by the first 2^k tokens, k = 0, 1, ..."""
    n = tokens.shape[0]
    _, rank = np.unique(tokens, return_inverse=True)
    rank = rank.astype(np.int64).reshape(-1)
    step = 1
    while True:
        second = np.full(n, -1, np.int64)
        if step < n:
            second[:n - step] = rank[step:]
        order = np.lexsort((second, rank))
        key_rank, key_second = rank[order], second[order]
        new_group = np.empty(n, bool)
        new_group[0] = True
        new_group[1:] = (key_rank[1:] != key_rank[:-1]) | (key_second[1:] != key_second[:-1])
        ranks_sorted = np.cumsum(new_group) - 1
        rank = np.empty(n, np.int64)
        rank[order] = ranks_sorted
        if ranks_sorted[-1] == n - 1:
            return order
        step *= 2


def _crc32(path: Path) -> int:
    crc = 0
    with open(path, "rb") as handle:
        while True:
            block = handle.read(_CHUNK)
            if not block:
                return crc
            crc = zlib.crc32(block, crc)


def _write_array(path: Path, array: np.ndarray) -> dict:
    with atomic_output(path) as handle:
        handle.write(np.ascontiguousarray(array).astype(array.dtype.newbyteorder("<"), copy=False).tobytes())
    return {"bytes": path.stat().st_size, "crc32": _crc32(path)}


def build_index(paths, output, *, min_count: int = 1, vocabulary: Vocabulary | None = None,
                method: str = "auto", memory: int | None = None, temp_dir=None, shard_tokens: int | None = None,
                overlap: int | None = None) -> "SuffixIndex":
    """Tokenise text files (one sentence per line, ``.gz`` too) and write their index to
    the directory ``output`` (created if needed); returns the opened index.

    ``min_count`` and ``vocabulary`` are those of :func:`varorder.lm.read_corpus`
    (words rarer than ``min_count`` become ``<unk>``). ``memory=None`` builds in memory:
    the token ids (4 bytes a token while reading), the suffix array (4 or 8 bytes a token)
    and the sorter's work space. ``memory`` (bytes) builds in bounded memory instead (see
    the module): two streaming passes over the text (the vocabulary, then the ids written
    to ``tokens.bin``), the suffix array sorted in shards of about ``memory /``
    :func:`shard_bytes_per_token` tokens written under ``temp_dir`` (default: a folder inside
    ``output``) and merged. The files are the same bytes either way. ``shard_tokens`` /
    ``overlap`` override the shard size and the tokens each shard's sorter sees past its
    end (tests use tiny ones)."""
    if memory is None and shard_tokens is None:
        vocabulary, ids, lengths = read_corpus(paths, min_count=min_count, vocabulary=vocabulary)
        return build_index_from_ids(vocabulary, ids, lengths, output, method=method)
    from varorder.lm.external import _batch_bytes, _blocks, vocabulary_of

    paths = [paths] if isinstance(paths, (str, os.PathLike)) else list(paths)
    budget = _budget(memory)
    if vocabulary is None:
        if min_count < 1:
            raise ParameterError(f"min_count must be at least 1, got {min_count}", name="min_count", value=min_count)
        vocabulary = vocabulary_of(paths, min_count)
    block_tokens = max(1 << 12, budget // _ENCODE_BYTES_PER_TOKEN)
    folder = _prepare(output)
    token_dtype = _token_dtype(len(vocabulary))
    framed = _FramedWriter(folder, vocabulary, token_dtype)
    with framed:
        for ids, lengths in _blocks(paths, vocabulary, block_tokens, batch_bytes=_batch_bytes(budget)):
            framed.add(ids, lengths)
            del ids, lengths
    return _sort_and_finish(folder, vocabulary, framed, method=method, memory=budget, temp_dir=temp_dir,
                            shard_tokens=shard_tokens, overlap=overlap)


def build_index_from_ids(vocabulary: Vocabulary, ids: np.ndarray, lengths: np.ndarray, output, *,
                         method: str = "auto", memory: int | None = None, temp_dir=None,
                         shard_tokens: int | None = None, overlap: int | None = None) -> "SuffixIndex":
    """:func:`build_index` of sentences already encoded: ``ids`` concatenated (no markers),
    ``lengths`` per sentence (``memory`` etc.: the suffix array sorted in shards and merged)."""
    ids = np.asarray(ids).reshape(-1)
    lengths = np.asarray(lengths, dtype=np.int64).reshape(-1)
    if lengths.size and (lengths.min() < 0 or lengths.sum() != ids.size):
        raise ParameterError(f"lengths must be non-negative and sum to len(ids) = {ids.size}", name="lengths",
                             value=int(lengths.sum()))
    V = len(vocabulary)
    if ids.size and (ids.min() < 0 or ids.max() >= V):
        raise ParameterError(f"ids must lie in [0, {V})", name="ids", value=int(ids.max()))
    token_dtype = _token_dtype(V)
    folder = _prepare(output)
    if memory is not None or shard_tokens is not None:
        budget = _budget(memory)
        block_tokens = max(1 << 12, budget // _ENCODE_BYTES_PER_TOKEN)
        framed = _FramedWriter(folder, vocabulary, token_dtype)
        ends = np.cumsum(lengths)
        with framed:
            first, start = 0, 0
            while first < lengths.shape[0]:  # a block of whole sentences at a time
                last = max(first + 1, int(np.searchsorted(ends, start + block_tokens, side="right")))
                stop = int(ends[last - 1])
                framed.add(ids[start:stop], lengths[first:last])
                first, start = last, stop
        del ends
        return _sort_and_finish(folder, vocabulary, framed, method=method, memory=budget, temp_dir=temp_dir,
                                shard_tokens=shard_tokens, overlap=overlap)
    tokens, docs = _frame(vocabulary, ids, lengths, token_dtype)
    sa = suffix_array(tokens, method=method)
    files = {
        "tokens.bin": _write_array(folder / "tokens.bin", tokens),
        "sa.bin": _write_array(folder / "sa.bin", sa),
        "docs.bin": _write_array(folder / "docs.bin", docs),
    }
    return _finish(folder, vocabulary, int(docs[-1]), lengths.shape[0], token_dtype, sa.dtype, files)


# Bytes a token of working memory: encoding (the block's int32 ids, their framed copy and
# the line encoder's buffers) and sorting a shard (suffix_array's 5w + 4 bytes a token for
# w-byte ids, and the merge sort's buffer when a shard needs repairing: 4 more).
_ENCODE_BYTES_PER_TOKEN = 32
_DEFAULT_OVERLAP = 4096


def shard_bytes_per_token(vocabulary_size: int) -> int:
    """Working bytes a shard token costs while its suffixes are sorted (5w + 8 for ids of w
    bytes: 23 for up to 65,536 words... 28 up to 16.7 M)."""
    width = max(1, ((max(vocabulary_size, 2) - 1).bit_length() + 7) // 8)
    return 5 * width + 8


def _budget(memory) -> int:
    if memory is None:
        return 1 << 30
    if not isinstance(memory, (int, np.integer)) or memory < 1 << 20:
        raise ParameterError(f"memory must be at least 1 MB (in bytes), got {memory!r}", name="memory", value=memory)
    return int(memory)


def _token_dtype(V: int):
    return np.uint16 if V <= 1 << 16 else np.uint32


def _prepare(output) -> Path:
    folder = Path(output)
    folder.mkdir(parents=True, exist_ok=True)
    header_path = folder / HEADER
    if header_path.exists():
        header_path.unlink()  # the old index stops opening before its files change
    return folder


def _frame(vocabulary: Vocabulary, ids: np.ndarray, lengths: np.ndarray, token_dtype) -> tuple[np.ndarray, np.ndarray]:
    """(tokens, docs): the sentences as ``<s> w.. </s>`` end to end and their offsets."""
    docs = np.zeros(lengths.shape[0] + 1, np.int64)
    np.cumsum(lengths + 2, out=docs[1:])
    tokens = np.empty(int(docs[-1]), token_dtype)
    tokens[docs[:-1]] = vocabulary.bos_id
    tokens[docs[1:] - 1] = vocabulary.eos_id
    inner = np.ones(tokens.shape[0], bool)
    inner[docs[:-1]] = False
    inner[docs[1:] - 1] = False
    tokens[inner] = ids
    return tokens, docs


class _FramedWriter:
    """Writes framed sentences to ``tokens.bin`` and their offsets to ``docs.bin`` as they
    come (both atomically, CRC-32s accumulated), holding one block at a time."""

    def __init__(self, folder: Path, vocabulary: Vocabulary, token_dtype):
        self.folder, self.vocabulary, self.token_dtype = folder, vocabulary, token_dtype
        self.num_tokens = 0
        self.num_documents = 0
        self.crc = {"tokens.bin": 0, "docs.bin": 0}

    def __enter__(self):
        self._stack = contextlib.ExitStack()
        self._tokens = self._stack.enter_context(atomic_output(self.folder / "tokens.bin"))
        self._docs = self._stack.enter_context(atomic_output(self.folder / "docs.bin"))
        self._write("docs.bin", self._docs, np.zeros(1, "<i8"))
        return self

    def _write(self, name, handle, array) -> None:
        data = array.tobytes()
        handle.write(data)
        self.crc[name] = zlib.crc32(data, self.crc[name])

    def add(self, ids, lengths) -> None:
        tokens, docs = _frame(self.vocabulary, ids, lengths, self.token_dtype)
        self._write("tokens.bin", self._tokens, tokens.astype(np.dtype(self.token_dtype).newbyteorder("<"), copy=False))
        self._write("docs.bin", self._docs, (docs[1:] + self.num_tokens).astype("<i8", copy=False))
        self.num_tokens += tokens.shape[0]
        self.num_documents += lengths.shape[0]

    def __exit__(self, *exc):
        return self._stack.__exit__(*exc)

    def files(self) -> dict:
        return {name: {"bytes": (self.folder / name).stat().st_size, "crc32": self.crc[name]}
                for name in ("tokens.bin", "docs.bin")}


def _sort_and_finish(folder: Path, vocabulary: Vocabulary, framed: _FramedWriter, *, method: str, memory: int,
                     temp_dir, shard_tokens: int | None, overlap: int | None) -> "SuffixIndex":
    n = framed.num_tokens
    sa_dtype = np.dtype(np.int32 if n < 2**31 else np.int64)
    files = framed.files()
    if shard_tokens is None:
        shard_tokens = max(1 << 10, memory // shard_bytes_per_token(len(vocabulary)))
    if shard_tokens < 1:
        raise ParameterError(f"shard_tokens must be positive, got {shard_tokens}", name="shard_tokens",
                             value=shard_tokens)
    if overlap is None:
        overlap = min(_DEFAULT_OVERLAP, shard_tokens)
    if n:
        tokens = np.memmap(folder / "tokens.bin", dtype=np.dtype(framed.token_dtype).newbyteorder("<"), mode="r")
    else:
        tokens = np.empty(0, framed.token_dtype)
    files["sa.bin"] = sorted_suffixes_to_file(tokens, folder / "sa.bin", sa_dtype, shard_tokens=shard_tokens,
                                              overlap=overlap, memory=memory, temp_dir=temp_dir or folder,
                                              method=method)
    del tokens
    return _finish(folder, vocabulary, n, framed.num_documents, framed.token_dtype, sa_dtype, files)


def sorted_suffixes_to_file(tokens: np.ndarray, output, sa_dtype, *, shard_tokens: int, overlap: int = 0,
                            memory: int = 1 << 30, temp_dir=None, method: str = "auto",
                            merge_window: int | None = None) -> dict:
    """Write the suffix array of ``tokens`` (an array or a read-only memory map) to
    ``output`` atomically, holding about ``shard_tokens`` positions at a time; returns its
    ``{"bytes", "crc32"}``.

    Each shard ``[a, b)`` is sorted by the suffix sorter over ``tokens[a : b + overlap]``
    and its positions below b kept: that order is right for every pair whose common prefix
    ends inside the window. The pairs it may get wrong (a common prefix reaching the
    window's end) are found by comparing neighbours as suffixes of the *whole* corpus
    (:func:`varorder.lm._suffix.sort_suffixes`, which then merge-sorts them). The sorted
    shards go to files in ``temp_dir`` and are merged k-way by the same whole-corpus
    comparison (:func:`varorder.lm._suffix.merge_shards`), each shard read through a window
    of positions with plain file reads, the windows together about ``memory / 2`` bytes
    (``merge_window``: the positions of each window instead; tests use tiny ones)."""
    from varorder.lm import _suffix

    n = int(tokens.shape[0])
    sa_dtype = np.dtype(sa_dtype)
    disk_dtype = sa_dtype.newbyteorder("<")
    output = Path(output)
    bounds = list(range(0, n, shard_tokens)) + [n]
    shards = tempfile.mkdtemp(prefix=".sa-shards-", dir=temp_dir)
    try:
        shard_files = []
        for a, b in zip(bounds[:-1], bounds[1:]):
            positions = suffix_array(tokens[a:min(n, b + overlap)], method=method, keep=b - a).astype(sa_dtype,
                                                                                                      copy=False)
            positions += a
            _suffix.sort_suffixes(tokens, positions)
            path = Path(shards) / f"shard{len(shard_files)}.bin"
            positions.astype(disk_dtype, copy=False).tofile(path)
            shard_files.append((path, b - a))
            del positions
        crc = 0
        with atomic_output(output) as handle:
            if len(shard_files) == 1:
                with open(shard_files[0][0], "rb") as shard:
                    while True:
                        block = shard.read(_CHUNK)
                        if not block:
                            break
                        handle.write(block)
                        crc = zlib.crc32(block, crc)
            elif shard_files:
                crc = _merge_shard_files(tokens, shard_files, handle, sa_dtype, memory, merge_window)
    finally:
        shutil.rmtree(shards, ignore_errors=True)
    return {"bytes": output.stat().st_size, "crc32": crc}


def _merge_shard_files(tokens, shard_files, handle, sa_dtype, memory: int, entries: int | None) -> int:
    from varorder.lm import _suffix

    k = len(shard_files)
    disk_dtype = sa_dtype.newbyteorder("<")
    if entries is None:
        entries = max(1 << 10, memory // 2 // (sa_dtype.itemsize * (k + 1)))
    buffers = np.empty((k, entries), sa_dtype)
    pos = np.zeros(k, np.int64)
    lens = np.zeros(k, np.int64)
    done = np.zeros(k, np.bool_)
    remaining = [size for _, size in shard_files]
    readers = [open(path, "rb") for path, _ in shard_files]
    try:
        def refill(s: int) -> None:
            block = np.fromfile(readers[s], dtype=disk_dtype, count=min(entries, remaining[s]))
            remaining[s] -= block.shape[0]
            buffers[s, :block.shape[0]] = block
            pos[s] = 0
            lens[s] = block.shape[0]
            done[s] = remaining[s] == 0

        for s in range(k):
            refill(s)
        heap = np.arange(k, dtype=np.int64)
        _suffix.heapify_shards(tokens, buffers, pos, heap, k)
        state = np.array([k, 0], np.int64)
        out = np.empty(entries, sa_dtype)
        crc = 0
        while True:
            written, code = _suffix.merge_shards(tokens, buffers, pos, lens, done, heap, state, out)
            if written:
                data = out[:written].astype(disk_dtype, copy=False).tobytes()
                handle.write(data)
                crc = zlib.crc32(data, crc)
            if code == -2:
                return crc
            if code >= 0:
                refill(int(code))
    finally:
        for reader in readers:
            reader.close()


def _finish(folder: Path, vocabulary: Vocabulary, n: int, n_docs: int, token_dtype, sa_dtype, files: dict
            ) -> "SuffixIndex":
    """Write ``vocab.txt`` and, last, ``index.json``; returns the opened index."""
    with atomic_output(folder / "vocab.txt") as handle:
        handle.write("".join(word + "\n" for word in vocabulary.words).encode("utf-8", errors="surrogateescape"))
    files["vocab.txt"] = {"bytes": (folder / "vocab.txt").stat().st_size, "crc32": _crc32(folder / "vocab.txt")}
    header = {"format": FORMAT_NAME, "version": FORMAT_VERSION, "num_tokens": n, "num_documents": n_docs,
              "vocabulary_size": len(vocabulary), "token_dtype": np.dtype(token_dtype).name,
              "sa_dtype": np.dtype(sa_dtype).name, "files": dict(sorted(files.items()))}
    with atomic_output(folder / HEADER) as handle:
        handle.write((json.dumps(header, indent=1, sort_keys=True) + "\n").encode("ascii"))
    return open_index(folder, verify=False)


def _refuse(path, message: str, expected: str | None = None) -> FormatError:
    return FormatError(f"damaged suffix index: {message}", path=path, expected=expected)


def _read_header(folder: Path) -> dict:
    path = folder / HEADER
    if not folder.is_dir():
        raise FormatError("not a suffix index directory (built by `varorder lm index`)", path=folder)
    try:
        header = json.loads(path.read_text(encoding="ascii"))
    except FileNotFoundError:
        raise FormatError(f"no {HEADER}: not a suffix index, or its build did not finish", path=folder) from None
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise _refuse(path, f"unreadable header ({error})") from None
    expected_keys = {"format", "version", "num_tokens", "num_documents", "vocabulary_size", "token_dtype",
                     "sa_dtype", "files"}
    if not isinstance(header, dict) or set(header) != expected_keys:
        raise _refuse(path, "header fields differ", expected=", ".join(sorted(expected_keys)))
    if header["format"] != FORMAT_NAME:
        raise _refuse(path, f"format {header['format']!r}", expected=repr(FORMAT_NAME))
    if header["version"] != FORMAT_VERSION:
        raise _refuse(path, f"version {header['version']!r}", expected=str(FORMAT_VERSION))
    for key in ("num_tokens", "num_documents", "vocabulary_size"):
        if not isinstance(header[key], int) or isinstance(header[key], bool) or header[key] < 0:
            raise _refuse(path, f"{key} = {header[key]!r}", expected="a non-negative integer")
    if header["token_dtype"] not in ("uint16", "uint32"):
        raise _refuse(path, f"token_dtype {header['token_dtype']!r}", expected="uint16 or uint32")
    if header["sa_dtype"] not in ("int32", "int64"):
        raise _refuse(path, f"sa_dtype {header['sa_dtype']!r}", expected="int32 or int64")
    files = header["files"]
    if not isinstance(files, dict) or set(files) != set(_FILES):
        raise _refuse(path, "file list differs", expected=", ".join(_FILES))
    for name, entry in files.items():
        if (not isinstance(entry, dict) or set(entry) != {"bytes", "crc32"}
                or not all(isinstance(entry[k], int) and entry[k] >= 0 for k in entry)):
            raise _refuse(path, f"entry of {name} is {entry!r}", expected="{bytes, crc32}")
    n, d = header["num_tokens"], header["num_documents"]
    sizes = {"tokens.bin": n * np.dtype(header["token_dtype"]).itemsize,
             "sa.bin": n * np.dtype(header["sa_dtype"]).itemsize, "docs.bin": 8 * (d + 1)}
    for name, size in sizes.items():
        if files[name]["bytes"] != size:
            raise _refuse(path, f"{name} listed with {files[name]['bytes']} bytes", expected=f"{size} bytes")
    return header


def open_index(folder, *, verify: bool = True) -> "SuffixIndex":
    """Open an index directory written by :func:`build_index` (see the module for the
    checks; ``verify=False`` skips the CRCs and whole-array checks)."""
    folder = Path(folder)
    header = _read_header(folder)
    files = header["files"]
    for name in _FILES:
        path = folder / name
        try:
            size = path.stat().st_size
        except FileNotFoundError:
            raise _refuse(path, "file missing") from None
        if size != files[name]["bytes"]:
            raise _refuse(path, f"{size} bytes (truncated or extended)", expected=f"{files[name]['bytes']} bytes")
        if verify or name in ("docs.bin", "vocab.txt"):
            if _crc32(path) != files[name]["crc32"]:
                raise _refuse(path, "CRC-32 differs from index.json (the file changed after it was written)")
    n, V = header["num_tokens"], header["vocabulary_size"]
    try:
        words = (folder / "vocab.txt").read_bytes().decode("utf-8", errors="surrogateescape").split("\n")
    except OSError as error:
        raise _refuse(folder / "vocab.txt", str(error)) from None
    if words[-1] != "" or len(words) - 1 != V:
        raise _refuse(folder / "vocab.txt", f"{len(words) - 1} lines", expected=f"{V} words, one per line")
    try:
        vocabulary = Vocabulary(words[:-1])
    except ValueError as error:
        raise _refuse(folder / "vocab.txt", str(error)) from None
    if len(vocabulary) != V:
        raise _refuse(folder / "vocab.txt", "<unk>, <s> or </s> missing")
    docs = np.fromfile(folder / "docs.bin", dtype="<i8")
    if docs[0] != 0 or docs[-1] != n or np.any(np.diff(docs) < 2):
        raise _refuse(folder / "docs.bin", "document offsets out of order",
                      expected=f"increasing offsets from 0 to {n}, each document holding <s> and </s>")
    if n:
        tokens = np.memmap(folder / "tokens.bin", dtype=np.dtype(header["token_dtype"]).newbyteorder("<"), mode="r")
        sa = np.memmap(folder / "sa.bin", dtype=np.dtype(header["sa_dtype"]).newbyteorder("<"), mode="r")
    else:
        tokens = np.empty(0, header["token_dtype"])
        sa = np.empty(0, header["sa_dtype"])
    if verify and n:
        starts = tokens[docs[:-1]]
        if np.any(starts != vocabulary.bos_id) or np.any(tokens[docs[1:] - 1] != vocabulary.eos_id):
            raise _refuse(folder / "tokens.bin", "a document does not start with <s> and end with </s>")
        for block in range(0, n, _CHUNK):
            if tokens[block:block + _CHUNK].max() >= V:
                raise _refuse(folder / "tokens.bin", "a token id outside the vocabulary", expected=f"ids < {V}")
        from varorder.lm import _suffix

        seen = np.zeros((n + 7) // 8, np.uint8)  # a bit a position: n distinct positions below n
        for block in range(0, n, _CHUNK):
            part = sa[block:block + _CHUNK]
            if part.min() < 0 or part.max() >= n:
                raise _refuse(folder / "sa.bin", "a position outside the corpus", expected=f"positions < {n}")
            if _suffix.mark_positions(seen, part, n) != 0:
                raise _refuse(folder / "sa.bin", "not a permutation of the positions (a position repeats)")
    return SuffixIndex(folder, vocabulary, tokens, sa, docs)


@dataclass(frozen=True)
class Occurrence:
    """Where a match lies: ``document`` (0-based line of the corpus), ``offset`` (the
    token within it, 0 = the first word after ``<s>``), ``position`` in the corpus."""

    document: int
    offset: int
    position: int


class SuffixIndex:
    """An opened suffix-array index (see the module). Queries take words (str) or ids."""

    def __init__(self, folder, vocabulary: Vocabulary, tokens, sa, docs):
        self.folder = Path(folder)
        self.vocabulary = vocabulary
        self.tokens = tokens
        self.sa = sa
        self.docs = docs
        self._unigrams = None

    def __repr__(self) -> str:
        return f"SuffixIndex({str(self.folder)!r}, {self.num_tokens} tokens, {self.num_documents} documents)"

    @property
    def num_tokens(self) -> int:
        return int(self.tokens.shape[0])

    @property
    def num_documents(self) -> int:
        return int(self.docs.shape[0] - 1)

    @property
    def nbytes(self) -> dict:
        """Bytes of each stored array."""
        return {"tokens": int(self.tokens.nbytes), "sa": int(self.sa.nbytes), "docs": int(self.docs.nbytes)}

    def encode(self, words: Iterable, *, unknown: str = "none") -> np.ndarray:
        """Ids of ``words`` (str or int). An unknown word becomes -1 (``unknown="none"``:
        it matches nothing) or ``<unk>``'s id (``unknown="unk"``)."""
        ids = []
        missing = -1 if unknown == "none" else self.vocabulary.unk_id
        V = len(self.vocabulary)
        for word in words:
            if isinstance(word, (int, np.integer)):
                if not 0 <= int(word) < V:
                    raise ParameterError(f"token id {word} outside the vocabulary [0, {V})", name="ngram",
                                         value=int(word))
                ids.append(int(word))
            else:
                ids.append(self.vocabulary.index.get(word, missing))
        return np.asarray(ids, dtype=np.int64)

    def _damaged(self) -> FormatError:
        return _refuse(self.folder / "sa.bin", "a position outside the corpus (open with verify=True to check)")

    def find(self, ngram) -> tuple[int, int]:
        """(first, end): the suffix-array rows of the n-gram's occurrences."""
        from varorder.lm import _suffix

        ids = self.encode(ngram)
        if (ids < 0).any():
            return 0, 0
        first, end = _suffix.range_of(self.tokens, self.sa, ids)
        if first == _suffix.DAMAGED:
            raise self._damaged()
        return int(first), int(end)

    def count(self, ngram) -> int:
        """Occurrences of the n-gram (the empty n-gram: the number of tokens)."""
        first, end = self.find(ngram)
        return end - first

    def ntd(self, context) -> tuple[np.ndarray, np.ndarray]:
        """The next-token distribution after ``context`` as counts: (ids ascending,
        counts) of every token that follows an occurrence of it (empty if it does not
        occur). Its sum is the context's continuation count."""
        from varorder.lm import _suffix

        ids = self.encode(context)
        first, end = self.find(ids) if ids.size else (0, self.num_tokens)
        V = len(self.vocabulary)
        out_tokens = np.empty(min(V, max(end - first, 0)) + 1, np.int64)
        out_counts = np.empty_like(out_tokens)
        k = _suffix.next_token_runs(self.tokens, self.sa, first, end, ids.size, out_tokens, out_counts)
        if k == _suffix.DAMAGED:
            raise self._damaged()
        if k and out_tokens[:k].max() >= V:
            raise _refuse(self.folder / "tokens.bin", "a token id outside the vocabulary")
        return out_tokens[:k].copy(), out_counts[:k].copy()

    def longest_suffix(self, context) -> tuple[int, int]:
        """(m, count): the longest suffix of ``context`` that occurs in the corpus has m
        tokens and occurs count times (m = 0: the empty suffix, count = N)."""
        from varorder.lm import _suffix

        ids = self.encode(context)
        firsts = np.empty(ids.size + 1, np.int64)
        ends = np.empty(ids.size + 1, np.int64)
        m = _suffix.longest_suffix_ranges(self.tokens, self.sa, ids, firsts, ends)
        if m == _suffix.DAMAGED:
            raise self._damaged()
        return int(m), int(ends[m] - firsts[m])

    def locate(self, ngram, limit: int | None = 10) -> list[Occurrence]:
        """Where the n-gram occurs (in suffix-array order; at most ``limit``)."""
        first, end = self.find(ngram)
        if limit is not None:
            end = min(end, first + int(limit))
        positions = np.asarray(self.sa[first:end], dtype=np.int64)
        if positions.size and (positions.min() < 0 or positions.max() >= self.num_tokens):
            raise self._damaged()
        documents = np.searchsorted(self.docs, positions, side="right") - 1
        return [Occurrence(int(d), int(p - self.docs[d] - 1), int(p)) for d, p in zip(documents, positions)]

    def document(self, d: int) -> list[str]:
        """The words of document ``d`` (without ``<s>``/``</s>``)."""
        if not 0 <= d < self.num_documents:
            raise ParameterError(f"document {d} outside [0, {self.num_documents})", name="document", value=d)
        return self.vocabulary.decode(np.asarray(self.tokens[self.docs[d] + 1:self.docs[d + 1] - 1]))

    def unigram_counts(self) -> np.ndarray:
        """Counts of each id as a predicted token (every token but ``<s>``), int64 (V,)."""
        if self._unigrams is None:
            counts = np.zeros(len(self.vocabulary), np.int64)
            for block in range(0, self.num_tokens, _CHUNK):
                counts += np.bincount(self.tokens[block:block + _CHUNK], minlength=len(self.vocabulary))
            counts[self.vocabulary.bos_id] = 0
            self._unigrams = counts
        return self._unigrams

