"""ARPA n-gram files (SRILM's ``ngram-format``, as KenLM reads and writes them) and the
MAX-ARPA extension of Carter, Dymetman & Bouchard (2012), §2.3.

An ARPA file stores, for every listed n-gram h x, log10 p(x | h) and (below the highest
order) the log10 back-off weight of h x used as a context; the model they define is the
back-off factorization of :mod:`varorder.lm.model` (the paper's eq. 7).

Reading: text before ``\\data\\`` is ignored; ``-99`` (and ``-inf``) mean probability 0; a
missing back-off is 0; ``.gz`` is recognised by its magic bytes. The counts in
``\\data\\`` are checked against the sections. Anything malformed — a binary file, a
positive log-probability, NaN, a wrong number of fields, a word missing from the
unigrams, a duplicate, a missing section — raises ValueError naming the file and line.
A file without ``<unk>`` gets one with log10 probability -100, as KenLM does, so OOV
words score the same in both; like KenLM, ``<UNK>`` (CMU's spelling) is taken as ``<unk>``.

MAX-ARPA files have the same layout with every n-gram line holding five kinds of fields:
``log10 p``, the words, ``log10 bow``, ``log10 mf`` (max probability over left
extensions) and ``log10 mbow`` (max back-off); a comment before ``\\data\\`` says so.
:func:`read_arpa` recognises either layout.
"""

from __future__ import annotations

import gc
import gzip
import zlib
import itertools
import math
import re
from pathlib import Path

import numpy as np

from varorder.errors import FormatError, ParameterError
from varorder.lm.corpus import BOS, EOS, UNK, PathLike, Vocabulary, atomic_output, open_text
from varorder.lm.model import MaxBackoffTable, NgramLM

# KenLM's substitute for a missing <unk>.
MISSING_UNK_LOG10PROB = -100.0
ZERO_PROBABILITY_LOG10 = -99.0
MAX_ARPA_HEADER = (
    "# MAX-ARPA (Carter, Dymetman & Bouchard 2012, sec. 2.3): each n-gram line holds\n"
    "# log10 p, the n-gram, log10 back-off, log10 max p over left extensions (mf),\n"
    "# log10 max back-off (mbow). Written by varorder.\n"
)

_COUNT_LINE = re.compile(r"^ngram\s+(\d+)\s*=\s*(\d+)$")
_SECTION_LINE = re.compile(r"^\\(\d+)-grams:$")


def _fail(path, line_number: int, message: str) -> FormatError:
    return FormatError(f"{path}:{line_number}: {message}", path=path, line=line_number)


def _check_not_binary(path) -> None:
    with open(path, "rb") as handle:
        head = handle.read(4096)
    if head[:2] == b"\x1f\x8b":
        with gzip.open(path, "rb") as handle:
            try:
                head = handle.read(4096)
            except (OSError, EOFError, zlib.error) as exc:
                raise _fail(path, 1, f"corrupt gzip file: {exc}") from None
    if head.startswith(b"mmap lm "):
        raise _fail(path, 1, "this is a KenLM binary model, not an ARPA text file; give the ARPA file")
    if b"\x00" in head:
        raise _fail(path, 1, "binary file (NUL bytes), not an ARPA text file")


def _parse_float(path, line_number: int, text: str, what: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise _fail(path, line_number, f"{what} {text!r} is not a number") from None
    if math.isnan(value):
        raise _fail(path, line_number, f"{what} is NaN")
    return value


MINUS_99_READINGS = ("zero", "literal")
_WRITE_BLOCK_BYTES = 16 << 20  # text formatted at a time by write_arpa, padding included
FLOAT32_MAX = float(np.finfo(np.float32).max)


def read_arpa(path: PathLike, *, progress: bool = False, minus_99: str = "zero", verify: bool | None = None) -> NgramLM:
    """Read an ARPA or MAX-ARPA file (``.gz`` transparently) into an :class:`NgramLM`.

    The vocabulary is the unigram section in file order (plus ``<unk>`` when absent).
    MAX-ARPA columns, when present, are attached (see :meth:`NgramLM.max_backoff`).
    ``progress`` shows a bar over the n-grams read (stderr).

    ``minus_99``: ``"zero"`` (default, SRILM's convention) reads a log10 value of -99 as
    probability 0 (-inf); ``"literal"`` reads it as the number -99, as KenLM does, so an
    ordinary word listed with -99 scores -99 rather than -inf.

    A varorder binary model (:mod:`varorder.lm.binary`, recognised by its magic bytes)
    is opened by memory-mapping instead, so every command that reads a model takes
    either kind; it keeps the ``minus_99`` reading it was built with, and ``verify``
    says whether the whole binary file is read and checked first
    (:func:`varorder.lm.binary.open_binary`: by default only a file version not verified
    before is).
    """
    if minus_99 not in MINUS_99_READINGS:
        raise ParameterError(f"minus_99 must be one of {MINUS_99_READINGS}, got {minus_99!r}", name='minus_99', value=minus_99)
    path = Path(path)
    from varorder.lm.binary import is_binary_model, open_binary

    if is_binary_model(path):
        # Every caller that reads a model file accepts varorder's binary format too.
        return open_binary(path, verify=verify)
    _check_not_binary(path)
    from varorder.lm import _arpa_fast

    # Millions of small field lists would trigger repeated full garbage collections
    # (they hold no cycles), which dominate the reading time on large files.
    collecting = gc.isenabled()
    gc.disable()
    try:
        data = _arpa_fast.read_bytes(path)  # read once for both compiled paths
        model = _read_arpa_closed(path, data, minus_99)
        if model is None:
            model = _read_arpa_fast(path, data, minus_99)
        del data
        return model if model is not None else _read_arpa(path, progress, minus_99)
    finally:
        if collecting:
            gc.enable()


def _read_arpa(path: Path, progress: bool, minus_99: str) -> NgramLM:
    declared: dict[int, int] = {}
    sections: list[dict] = []  # per order: words, probs, backoffs, max cols, lines
    max_arpa: bool | None = None
    with open_text(path) as handle:
        lines = iter(enumerate(handle, start=1))
        line_number = 0
        for line_number, line in lines:
            if line.strip() == "\\data\\":
                break
        else:
            raise _fail(path, max(line_number, 1), "no \\data\\ header: not an ARPA file")
        data_line = line_number
        pending = None
        for line_number, line in lines:
            text = line.strip()
            if not text:
                continue
            match = _COUNT_LINE.match(text)
            if match:
                order, count = int(match.group(1)), int(match.group(2))
                if order != len(declared) + 1:
                    raise _fail(path, line_number, f"expected 'ngram {len(declared) + 1}=...', got {text!r}")
                declared[order] = count
                continue
            pending = (line_number, text)
            break
        if not declared:
            raise _fail(path, data_line, "\\data\\ lists no 'ngram N=count' lines")
        max_order = len(declared)
        from varorder._progress import Progress

        bar = Progress(total=sum(declared.values()), unit=" n-grams", unit_scale=True, enabled=progress,
                       desc=f"reading {path.name}")

        expected_order = 1
        ended = False
        while pending is not None:
            header_line, header = pending
            pending = None
            if header == "\\end\\":
                if expected_order <= max_order:
                    raise _fail(path, header_line, f"\\end\\ before the \\{expected_order}-grams: section that \\data\\ announces")
                ended = True
                break
            match = _SECTION_LINE.match(header)
            if not match:
                raise _fail(path, header_line, f"expected the \\{expected_order}-grams: section header, got {header[:60]!r}")
            order = int(match.group(1))
            if order > max_order:
                raise _fail(path, header_line, f"section \\{order}-grams: but \\data\\ announces only {max_order} orders")
            if order != expected_order:
                raise _fail(path, header_line, f"expected the \\{expected_order}-grams: section, got \\{order}-grams: (missing section)")
            fields_per_line: list[list[str]] = []
            line_numbers: list[int] = []
            for line_number, line in lines:
                fields = line.split()
                if not fields:
                    continue
                if fields[0].startswith("\\"):
                    pending = (line_number, line.strip())
                    break
                fields_per_line.append(fields)
                line_numbers.append(line_number)
                if len(line_numbers) & 0xFFFF == 0:
                    bar.update(0x10000)
            if len(fields_per_line) != declared[order]:
                where = pending[0] if pending is not None else line_number
                raise _fail(
                    path, where,
                    f"\\data\\ announces ngram {order}={declared[order]} but the \\{order}-grams: section has {len(fields_per_line)} entries",
                )
            section = _parse_section(path, order, fields_per_line, np.asarray(line_numbers, dtype=np.int64), minus_99)
            if section["max_arpa"] is not None:
                if max_arpa is not None and max_arpa != section["max_arpa"]:
                    raise _fail(path, header_line, "mixes ARPA and MAX-ARPA sections (the number of columns changed)")
                max_arpa = section["max_arpa"]
            section["header_line"] = header_line
            sections.append(section)
            bar.update(len(line_numbers) & 0xFFFF)
            expected_order += 1
        bar.close()
        if not ended:
            if expected_order <= max_order:
                raise _fail(path, line_number, f"file ends before the \\{expected_order}-grams: section that \\data\\ announces")
            raise _fail(path, line_number, "file ends without \\end\\ (truncated?)")

    return _build_model(path, sections, bool(max_arpa))


def _parse_section(path, order: int, fields_per_line: list[list[str]], line_numbers: np.ndarray,
                   minus_99: str = "zero") -> dict:
    """Columns of one n-gram section, parsed a block of equal-length lines at a time so that
    numbers convert in NumPy rather than one Python call per field."""
    n = len(fields_per_line)
    n_fields = np.fromiter(map(len, fields_per_line), dtype=np.int64, count=n)
    n_extra = n_fields - 1 - order
    bad = np.flatnonzero(~np.isin(n_extra, (0, 1, 3)))
    if bad.size:
        first = int(bad[0])
        raise _fail(
            path, int(line_numbers[first]),
            f"a {order}-gram line needs a log-probability, {order} word(s) and an optional "
            f"back-off (or three MAX-ARPA columns); got {n_fields[first]} fields",
        )
    is_max = n_extra == 3
    if is_max.any() and not is_max.all():
        first = int(np.flatnonzero(is_max != is_max[0])[0])
        raise _fail(path, int(line_numbers[first]), "mixes ARPA and MAX-ARPA lines (the number of columns changed)")
    words = np.empty((n, order), dtype=object)
    probs = np.empty(n)
    backoffs = np.zeros(n)
    max_probs = np.empty(n) if n and is_max[0] else np.empty(0)
    max_backoffs = np.empty(n) if n and is_max[0] else np.empty(0)
    for extra in np.unique(n_extra):
        rows = np.flatnonzero(n_extra == extra)
        block = np.empty((len(rows), order + 1 + int(extra)), dtype=object)
        block[:] = [fields_per_line[i] for i in rows]
        where = line_numbers[rows]
        words[rows] = block[:, 1 : order + 1]
        probs[rows] = _column_floats(path, where, block[:, 0], "log-probability")
        if extra >= 1:
            backoffs[rows] = _column_floats(path, where, block[:, order + 1], "back-off")
        if extra == 3:
            max_probs[rows] = _column_floats(path, where, block[:, order + 2], "MAX-ARPA max log-probability")
            max_backoffs[rows] = _column_floats(path, where, block[:, order + 3], "MAX-ARPA max back-off")
    positive = np.flatnonzero(probs > 0)
    if positive.size:
        first = int(positive[0])
        raise _fail(path, int(line_numbers[first]), f"positive log-probability {probs[first]:g} (a probability above 1)")
    infinite = np.flatnonzero(np.isposinf(backoffs))
    if infinite.size:
        raise _fail(path, int(line_numbers[infinite[0]]), "infinite back-off weight")
    if minus_99 == "zero":
        for column in (probs, backoffs, max_probs, max_backoffs):
            column[column == ZERO_PROBABILITY_LOG10] = -math.inf
    return dict(words=words, probs=probs, backoffs=backoffs, max_probs=max_probs, max_backoffs=max_backoffs,
                lines=line_numbers, max_arpa=bool(is_max[0]) if n else None)


def _column_floats(path, line_numbers: np.ndarray, column: np.ndarray, what: str) -> np.ndarray:
    try:
        values = column.astype(np.float64)
    except ValueError:
        values = None
    if values is None or np.isnan(values).any():
        for line_number, text in zip(line_numbers, column):
            _parse_float(path, int(line_number), text, what)
    # probabilities and back-offs are stored as float32: a larger finite value would become inf
    too_large = np.isfinite(values) & (np.abs(values) > FLOAT32_MAX)
    if too_large.any():
        i = int(np.flatnonzero(too_large)[0])
        raise _fail(path, int(line_numbers[i]), f"{what} {column[i]} is outside the float32 range (|x| <= {FLOAT32_MAX:.4g})")
    return values


def _build_model(path, sections: list[dict], max_arpa: bool) -> NgramLM:
    unigrams = sections[0]
    unigrams["words"] = unigrams["words"][:, 0].tolist()
    index: dict[str, int] = {}
    for position, word in enumerate(unigrams["words"]):
        if word in index:
            raise _fail(path, unigrams["lines"][position], f"duplicate unigram {word!r}")
        index[word] = position
    for special in (BOS, EOS):
        if special not in index:
            raise _fail(path, unigrams["header_line"], f"the unigram section has no {special}")
    unigram_words = list(unigrams["words"])
    if UNK not in index and "<UNK>" in index:
        # CMU/pocketsphinx spelling; KenLM takes it as the unknown word too.
        unigram_words[index["<UNK>"]] = UNK
        index[UNK] = index["<UNK>"]
    vocabulary = Vocabulary(unigram_words)
    n_file_unigrams = len(unigrams["words"])
    missing_unk = UNK not in index
    unigram_probs = np.concatenate([unigrams["probs"], [MISSING_UNK_LOG10PROB] if missing_unk else []])
    unigram_backoffs = np.concatenate([unigrams["backoffs"], [0.0] if missing_unk else []])
    ngrams = [(np.arange(len(vocabulary)), unigram_probs, unigram_backoffs)]
    line_numbers = [np.concatenate([unigrams["lines"], [unigrams["header_line"]] if missing_unk else []]).astype(np.int64)]
    unigrams["ids"] = np.arange(n_file_unigrams, dtype=np.int64).reshape(-1, 1)
    for order, section in enumerate(sections[1:], start=2):
        if "ids" not in section:
            section["ids"] = _word_ids(section["words"], index)
        ids = section["ids"]
        unknown = np.flatnonzero((ids < 0).any(axis=1))
        if unknown.size:
            row = int(unknown[0])
            missing = next(w for w in section["words"][row] if w not in index)
            raise _fail(path, int(section["lines"][row]), f"word {missing!r} of this {order}-gram is not in the unigram section")
        ngrams.append((ids, section["probs"], section["backoffs"]))
        line_numbers.append(section["lines"])
    lines_known = all(lines is not None for lines in line_numbers)
    model = NgramLM.from_ngrams(vocabulary, ngrams, source=str(path), line_numbers=line_numbers if lines_known else None)
    if max_arpa:
        model.set_max_backoff(_read_max_columns(model, sections, index, n_file_unigrams, missing_unk))
    return model


def _read_max_columns(model: NgramLM, sections, index, n_file_unigrams: int, missing_unk: bool) -> MaxBackoffTable:
    """Align the file's mf/mbow columns with the model's rows; rows the model inserted
    (or a missing <unk>) get their values recomputed from the rest."""
    computed = model.max_backoff() if (missing_unk or any(
        count != len(s["ids"]) for count, s in zip(model.ngram_counts, sections)
    )) else None
    max_probs, max_backoffs = [], []
    for order, section in enumerate(sections, start=1):
        if computed is not None:
            mf = computed.max_log10prob[order - 1].copy()
            mbow = computed.max_log10backoff[order - 1].copy()
        else:
            mf = np.empty(model.ngram_counts[order - 1])
            mbow = np.empty(model.ngram_counts[order - 1])
        rows = _file_rows_to_model_rows(model, section["ids"], order)
        mf[rows] = section["max_probs"]
        mbow[rows] = section["max_backoffs"]
        max_probs.append(mf)
        max_backoffs.append(mbow)
    return MaxBackoffTable(tuple(max_probs), tuple(max_backoffs))


def _word_ids(words: np.ndarray, index: dict[str, int]) -> np.ndarray:
    """Ids of a 2-D array of word strings, -1 for words not in ``index``."""
    flat = words.ravel()
    return np.fromiter(map(index.get, flat, itertools.repeat(-1)), dtype=np.int64, count=len(flat)).reshape(words.shape)


def _file_rows_to_model_rows(model: NgramLM, ids: np.ndarray, order: int) -> np.ndarray:
    rows = ids[:, 0].copy()
    for position in range(1, order):
        rows = np.searchsorted(model._keys[position], rows * model.vocab_size + ids[:, position])
    return rows


def write_arpa(model: NgramLM, path: PathLike, *, max_arpa: bool = False) -> None:
    """Write ``model`` as ARPA (or MAX-ARPA with ``max_arpa=True``), atomically.

    A ``.gz`` name is gzip-compressed. Values are written with the shortest decimal that
    reads back to the stored float32 (float64 for the MAX-ARPA columns), so reading the
    file gives identical scores. Back-offs are written for every order but the highest.
    """
    table = model.max_backoff() if max_arpa else None
    width = max(len(w.encode("utf-8", errors="surrogateescape")) for w in model.vocabulary.words)
    from varorder._malloc import release_free_heap

    release_free_heap()  # what estimating the model freed, before the compiled writer loads Numba

    def section(order):
        values = model._order_values(order)
        # A block of rows at a time: the section's text is never held whole.
        block = max(1, _WRITE_BLOCK_BYTES // (max(1, width) * order + 64 * (2 + 2 * max_arpa)))
        for start in range(0, len(values), block):
            stop = min(len(values), start + block)
            columns = [(values[start:stop, 0], np.float32)]
            if order < model.order or max_arpa:
                columns.append((values[start:stop, 1], np.float32))
            if max_arpa:
                columns.append((table.max_log10prob[order - 1][start:stop], np.float64))
                columns.append((table.max_log10backoff[order - 1][start:stop], np.float64))
            yield model._word_rows(order, start, stop), columns

    write_arpa_stream(path, model.vocabulary.words, model.ngram_counts,
                      (section(order) for order in range(1, model.order + 1)), max_arpa=max_arpa)


def write_arpa_stream(path: PathLike, words, ngram_counts, sections, *, max_arpa: bool = False) -> None:
    """Write ARPA text atomically from a stream: ``words`` in id order, the n-gram count
    of each order, and per order (``sections``, in order) an iterable of blocks
    ``(word-id rows, [(values, float type), ...])`` in the file's row order, columns as
    :func:`write_arpa` writes them. Used by :func:`write_arpa` and by the streaming
    estimator (:mod:`varorder.lm.streaming`), which never holds a whole model."""
    path = Path(path)
    words = _word_matrix(words)
    with atomic_output(path) as raw:
        stream = gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) if path.name.endswith(".gz") else raw
        try:
            if max_arpa:
                stream.write(MAX_ARPA_HEADER.encode() + b"\n")
            stream.write(b"\\data\\\n")
            for order, count in enumerate(ngram_counts, start=1):
                stream.write(f"ngram {order}={count}\n".encode())
            for order, blocks in enumerate(sections, start=1):
                stream.write(f"\n\\{order}-grams:\n".encode())
                for rows, columns in blocks:
                    if len(rows):
                        stream.write(_format_lines(rows, words, columns))
            stream.write(b"\n\\end\\\n")
        finally:
            if stream is not raw:
                stream.close()


def load_model(path: PathLike, *, progress: bool = False, minus_99: str = "zero", verify: bool | None = None) -> NgramLM:
    """A model file of either kind: :func:`read_arpa` (which recognises binary models)."""
    return read_arpa(path, progress=progress, minus_99=minus_99, verify=verify)


def _read_arpa_fast(path: Path, data: bytes, minus_99: str) -> NgramLM | None:
    """Read a well-formed ARPA file with compiled kernels over its bytes
    (:mod:`varorder.lm._arpa_fast`): the unigram section is parsed in Python as by the general reader,
    the n-gram sections without a Python object per line. Returns None on anything
    unusual — a malformed line, a count mismatch, an unknown word, a duplicate, text the
    byte tokenizer would split differently — and :func:`read_arpa` then reads the file the
    slow way, which gives the precise error (file and line) when there is one."""
    from varorder.lm import _arpa_fast

    sections = _arpa_fast.read_sections(data, minus_99 == "zero")
    if sections is None:
        return None
    unigram_lines = sections[0]
    try:
        parsed = _parse_section(path, 1, unigram_lines["fields"], unigram_lines["lines"], minus_99)
    except ValueError:
        return None
    parsed["header_line"] = unigram_lines["header_line"]
    sections[0] = parsed
    kinds = {s["max_arpa"] for s in sections if s["max_arpa"] is not None}
    if len(kinds) > 1:
        return None
    try:
        return _build_model(path, sections, bool(kinds.pop()) if kinds else False)
    except ValueError:
        return None


def _read_arpa_closed(path: Path, data: bytes, minus_99: str) -> NgramLM | None:
    """Read a well-formed ARPA file whose n-grams' prefixes and suffixes are all listed
    (every file varorder or KenLM writes) straight into the model's tables
    (:func:`varorder.lm._arpa_fast.read_closed`): no word-id rows, no sorting when the
    file is in key order, each hash slot written once. None when the file needs the
    general readers (which insert missing prefixes, or report the error)."""
    from varorder.lm import _arpa_fast

    tables = _arpa_fast.read_closed(data, minus_99 == "zero")
    if tables is None:
        return None
    try:
        unigrams = _parse_section(path, 1, tables["unigram_fields"], tables["unigram_lines"], minus_99)
    except ValueError:
        return None
    words = unigrams["words"][:, 0].tolist()
    if BOS not in words or EOS not in words:
        return None
    missing_unk = UNK not in words and "<UNK>" not in words
    if UNK not in words and not missing_unk:
        words[words.index("<UNK>")] = UNK
    vocabulary = Vocabulary(words)
    if len(vocabulary) != tables["vocab_size"] or bool(unigrams["max_arpa"]) != tables["max_arpa"] \
            or (missing_unk and tables["max_arpa"]):
        return None
    values = tables["values"]
    n_words = len(words)
    values[:n_words, 0] = unigrams["probs"]
    values[:n_words, 1] = unigrams["backoffs"]
    if missing_unk:
        values[n_words] = (MISSING_UNK_LOG10PROB, 0.0)
    model = NgramLM._from_tables(vocabulary, tables["keys"], values=values, value_base=tables["value_base"],
                                 hash_rows=tables["hash_rows"], hash_base=tables["hash_base"],
                                 hash_cap=tables["hash_cap"], extends=tables["extends"])
    if tables["max_arpa"]:
        columns = [(unigrams["max_probs"], unigrams["max_backoffs"])] + tables["max_columns"]
        model.set_max_backoff(MaxBackoffTable(tuple(mf for mf, _ in columns), tuple(mbow for _, mbow in columns)))
    return model


def _word_matrix(words) -> tuple[np.ndarray, list[bytes] | None]:
    """The UTF-8 bytes of each word as one row of a NUL-padded ``(V, longest)`` matrix,
    and the words' bytes when one is empty or holds a NUL (which the padding would lose)."""
    encoded = [w.encode("utf-8", errors="surrogateescape") for w in words]
    as_array = np.array(encoded, dtype=bytes)
    width = max(1, as_array.dtype.itemsize)
    matrix = np.frombuffer(as_array.astype(f"S{width}").tobytes(), dtype=np.uint8).reshape(len(words), width)
    unusual = any(not w or b"\0" in w for w in encoded)
    return matrix, encoded if unusual else None


def _value_strings(values: np.ndarray, dtype) -> tuple[np.ndarray, np.ndarray]:
    """``(NUL-padded ASCII of the distinct values as a (k, width) matrix, index of each
    value)``: the shortest decimal that reads back to the same ``dtype`` value, -inf
    written as -99."""
    distinct, index = np.unique(np.asarray(values, dtype=dtype), return_inverse=True)
    text = distinct.astype(str)
    text[np.isneginf(distinct)] = "-99"
    text = text.astype(f"S{max(1, text.dtype.itemsize // 4)}")
    return np.frombuffer(text.tobytes(), dtype=np.uint8).reshape(len(text), text.dtype.itemsize), index.reshape(-1)


def _format_lines_compiled(rows: np.ndarray, matrix: np.ndarray, columns: list[tuple[np.ndarray, type]]) -> bytes:
    """:func:`_format_lines` for float32 columns by one compiled kernel
    (:mod:`varorder.lm._arpa_write`), the few values it leaves to NumPy (see there)
    formatted by :func:`_value_strings`: the same bytes. None for a block whose column
    holds both 0.0 and -0.0, which NumPy's path writes alike (whichever its sort puts first)."""
    from varorder.lm import _arpa_write

    n, order = rows.shape
    bits = np.empty((n, len(columns)), dtype=np.float32)
    for c, (column, _) in enumerate(columns):
        bits[:, c] = column  # float64 columns are rounded to float32 as _value_strings does
    bits = bits.view(np.uint32)
    if _arpa_write.mixed_zeros(bits):
        return None
    odd = _arpa_write.needs_numpy(bits)
    fallback_index = np.full(bits.shape, -1, dtype=np.int32)
    if odd.any():
        fallback, index = _value_strings(bits.view(np.float32)[odd], np.float32)
        fallback_index[odd] = index
    else:
        fallback = np.zeros((1, 1), dtype=np.uint8)
    value_width = max(_arpa_write.FAST_WIDTH, fallback.shape[1])
    out = np.empty(n * (len(columns) * (value_width + 1) + order * (matrix.shape[1] + 1) + 1), dtype=np.uint8)
    length = _arpa_write.format_lines(np.ascontiguousarray(rows), matrix, bits, fallback, fallback_index, out)
    return out[:length].tobytes()


def _format_lines(rows: np.ndarray, words: tuple[np.ndarray, list[bytes] | None],
                  columns: list[tuple[np.ndarray, type]]) -> bytes:
    """ARPA n-gram lines ``v0 <TAB> w1 .. wn [<TAB> v]* <NEWLINE>`` for word-id ``rows``:
    each line is laid out at fixed width, NUL-padded (words from :func:`_word_matrix`,
    values from :func:`_value_strings` at the float type given with each column), and
    the padding removed, so no Python object is made per line (except for a vocabulary
    with an empty word or a NUL byte, written a line at a time)."""
    matrix, unusual_words = words
    n, order = rows.shape
    if unusual_words is None and all(dtype is np.float32 for _, dtype in columns):
        text = _format_lines_compiled(rows, matrix, columns)
        if text is not None:
            return text
    values = [_value_strings(v, dtype) for v, dtype in columns]
    if unusual_words is not None:
        text = [[bytes(row).rstrip(b"\0") for row in table] for table, _ in values]
        return b"".join(
            b"\t".join([text[0][values[0][1][i]], b" ".join(unusual_words[w] for w in rows[i])]
                       + [text[c][values[c][1][i]] for c in range(1, len(columns))]) + b"\n"
            for i in range(n))
    separator = {b: np.full((n, 1), ord(b), dtype=np.uint8) for b in "\t \n"}
    parts = []
    for c, (table, index) in enumerate(values):
        if c:
            parts.append(separator["\t"])
        parts.append(table[index])
        if c == 0:
            parts.append(separator["\t"])
            for w in range(order):
                if w:
                    parts.append(separator[" "])
                parts.append(matrix[rows[:, w]])
    parts.append(separator["\n"])
    lines = np.concatenate(parts, axis=1)
    return lines[lines != 0].tobytes()
