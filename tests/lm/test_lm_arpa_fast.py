"""The compiled ARPA path equals the Python reader on every file it accepts, accepts the
files varorder and KenLM write, and declines (so the Python reader reports) the rest;
its number parser equals Python's float on every string it accepts."""

from __future__ import annotations

import gzip
import math
import mmap

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from _lm_oracle import random_model, shared_data
from varorder.lm import _arpa_fast
from varorder.lm.arpa import _read_arpa, read_arpa, write_arpa
from varorder.lm import _words


def assert_same_model(ours, theirs):
    assert ours.vocabulary.words == theirs.vocabulary.words
    for m in range(1, theirs.order + 1):
        for a, b in zip(ours.ngrams(m), theirs.ngrams(m)):
            np.testing.assert_array_equal(a, b)
    if theirs._max_backoff is not None:
        for a, b in zip(ours.max_backoff().max_log10prob, theirs.max_backoff().max_log10prob):
            np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("suffix", [".arpa", ".arpa.gz"])
@pytest.mark.parametrize("max_arpa", [False, True])
def test_fast_reader_equals_python_reader(tmp_path, seed, suffix, max_arpa):
    model, _ = random_model(np.random.default_rng(seed), 5, 1 + seed % 4)
    path = tmp_path / f"m{suffix}"
    write_arpa(model, path, max_arpa=max_arpa)
    assert _arpa_fast.read_sections(_arpa_fast.read_bytes(path), True) is not None  # the compiled path is the one taken
    assert _arpa_fast.read_closed(_arpa_fast.read_bytes(path), True) is not None  # and the closed-model path before it
    for minus_99 in ("zero", "literal"):
        assert_same_model(read_arpa(path, minus_99=minus_99), _read_arpa(path, False, minus_99))


@pytest.mark.parametrize("seed", range(3))
def test_a_mapped_file_reads_as_its_bytes(tmp_path, monkeypatch, seed):
    # Files over _MAP_FROM are memory-mapped (the tests' files are small: map them all).
    model, _ = random_model(np.random.default_rng(seed), 6, 2 + seed, closed=seed != 1)
    path = tmp_path / "m.arpa"
    write_arpa(model, path, max_arpa=seed == 2)
    expected = read_arpa(path)
    monkeypatch.setattr(_arpa_fast, "_MAP_FROM", 0)
    assert isinstance(_arpa_fast.read_bytes(path), mmap.mmap)
    assert_same_model(read_arpa(path), expected)
    def cannot_map(*args, **kwargs):
        raise OSError("no mmap here")

    with monkeypatch.context() as patch:  # a file system that cannot map: the file is read
        patch.setattr(_arpa_fast.mmap, "mmap", cannot_map)
        assert _arpa_fast.read_bytes(path) == path.read_bytes()
    path.write_text(path.read_text().replace("\\2-grams:\n", "\\2-grams:\nnonsense\n", 1))
    with pytest.raises(ValueError, match=r"m\.arpa"):  # the Python reader still names file and line
        read_arpa(path)


@pytest.mark.parametrize("name", ["kenlm/test.arpa", "kenlm/test_nounk.arpa", "kenlm/toy0.arpa", "kenlm/toy1.arpa",
                                  "pocketsphinx/turtle.lm", "pocketsphinx/100.lm"])
def test_fast_reader_on_shared_files(name):
    path = shared_data("arpa", *name.split("/"))
    assert_same_model(read_arpa(path), _read_arpa(path, False, "zero"))


@pytest.mark.parametrize("edit", [
    lambda t: t.replace("\t", "\u00a0", 1),            # Unicode whitespace: Python splits there
    lambda t: t.replace("\n", "\r", 1),                 # a lone CR is a line break for Python
    lambda t: t.replace("\\2-grams:\n", "\\2-grams:\nnonsense\n", 1),  # a malformed line
])
def test_unusual_files_go_to_the_python_reader(tmp_path, edit):
    model, _ = random_model(np.random.default_rng(7), 4, 2)
    path = tmp_path / "m.arpa"
    write_arpa(model, path)
    path.write_text(edit(path.read_text()))
    assert _arpa_fast.read_sections(_arpa_fast.read_bytes(path), True) is None
    try:
        expected = _read_arpa(path, False, "zero")
    except ValueError as error:
        with pytest.raises(ValueError, match=str(error).split(":")[1]):
            read_arpa(path)
    else:
        assert_same_model(read_arpa(path), expected)


def test_numbers_outside_the_fast_path_are_read_by_python(tmp_path):
    model, _ = random_model(np.random.default_rng(8), 4, 2)
    path = tmp_path / "m.arpa"
    write_arpa(model, path)
    text = path.read_text().split("\\2-grams:\n")
    lines = text[1].split("\n")
    fields = lines[0].split("\t")
    fields[0] = repr(float(fields[0]) + 1e-17)[:19]  # 17 significant digits
    lines[0] = "\t".join(fields)
    path.write_text(text[0] + "\\2-grams:\n" + "\n".join(lines))
    assert _arpa_fast.read_sections(_arpa_fast.read_bytes(path), True) is not None
    assert_same_model(read_arpa(path), _read_arpa(path, False, "zero"))


@settings(max_examples=300, deadline=None)
@given(st.one_of(
    st.floats(allow_nan=False, allow_infinity=False, width=32).map(lambda x: repr(float(np.float32(x)))),
    st.floats(allow_nan=False, allow_infinity=False).map(repr),
    st.from_regex(r"[-+]?[0-9]{0,8}(\.[0-9]{0,8})?([eE][-+]?[0-9]{1,3})?", fullmatch=True),
))
def test_scan_decimal_equals_float(text):
    data = np.frombuffer(text.encode(), dtype=np.uint8)
    end, ok, value = _words.scan_decimal(data, _NO_WORDS, 0, len(data))
    assert _scan_decimal_eight_at_a_time(text.encode(), b"") == (end, ok, value)
    if ok:
        assert end == len(data)
        expected = float(text)
        assert value == expected and math.copysign(1, value) == math.copysign(1, expected), text


def test_word_table_finds_every_word_and_only_them():
    words = ["a", "b", "<s>", "ü", "longer-word", ""][:-1]
    blob, starts, ends, table = _words.word_table(words)[:4]
    for i, word in enumerate(words):
        data = np.frombuffer(word.encode(), dtype=np.uint8)
        assert _words.find_word(data, 0, len(data), blob, starts, ends, table) == i
    data = np.frombuffer(b"c", dtype=np.uint8)
    assert _words.find_word(data, 0, 1, blob, starts, ends, table) == -1


def test_gzip_and_plain_give_the_same_model(tmp_path):
    model, _ = random_model(np.random.default_rng(9), 4, 3)
    write_arpa(model, tmp_path / "m.arpa")
    (tmp_path / "m.gz").write_bytes(gzip.compress((tmp_path / "m.arpa").read_bytes()))
    assert_same_model(read_arpa(tmp_path / "m.gz"), read_arpa(tmp_path / "m.arpa"))


def _sections(text: str) -> tuple[str, list[list[str]], str]:
    """``(head through the unigram section, n-gram lines per order >= 2, tail)``."""
    head, rest = text.split("\\2-grams:\n", 1)
    parts = rest.split("\n\\")
    blocks = [parts[0]] + [p.split(":\n", 1)[1] for p in parts[1:-1]]
    return head, [[line for line in block.split("\n") if line] for block in blocks], "\\" + parts[-1]


def _join(head: str, blocks: list[list[str]], tail: str) -> str:
    text = head
    for order, lines in enumerate(blocks, start=2):
        text += f"\\{order}-grams:\n" + "\n".join(lines) + "\n\n"
    return text + tail


@pytest.mark.parametrize("seed", range(3))
def test_closed_path_reads_lines_in_any_order(tmp_path, seed):
    # KenLM writes n-grams in another order than varorder's key order: same model.
    rng = np.random.default_rng(seed)
    model, _ = random_model(rng, 5, 2 + seed)
    path = tmp_path / "m.arpa"
    write_arpa(model, path, max_arpa=seed == 1)
    head, blocks, tail = _sections(path.read_text())
    path.write_text(_join(head, [list(rng.permutation(b)) for b in blocks], tail))
    assert _arpa_fast.read_closed(_arpa_fast.read_bytes(path), True) is not None
    assert_same_model(read_arpa(path), _read_arpa(path, False, "zero"))
    assert_same_model(read_arpa(path), model)


@pytest.mark.parametrize("seed", range(3))
def test_words_repeated_from_the_line_above_are_read_like_any_other(tmp_path, seed):
    # The line parser takes a word's id from the line above when its bytes and delimiter
    # match there: words that are prefixes of others (w1, w10), and any run of blanks
    # between and after them, must still give the Python reader's model.
    rng = np.random.default_rng(seed)
    model, _ = random_model(rng, 12, 4, density=0.6, closed=True)
    path = tmp_path / "m.arpa"
    write_arpa(model, path)
    head, blocks, tail = _sections(path.read_text())
    blanks = [" ", "\t", "  ", " \t "]
    def respace(line):
        fields = line.split("\t")
        words = fields[1].split(" ")
        fields[1] = "".join(w + blanks[rng.integers(len(blanks))] for w in words[:-1]) + words[-1]
        return (blanks[rng.integers(len(blanks))]).join(fields)
    path.write_text(_join(head, [[respace(line) for line in block] for block in blocks], tail))
    assert _arpa_fast.read_closed(_arpa_fast.read_bytes(path), True) is not None
    assert_same_model(read_arpa(path), _read_arpa(path, False, "zero"))
    assert_same_model(read_arpa(path), model)


def test_a_model_not_closed_goes_to_the_general_path(tmp_path):
    model, _ = random_model(np.random.default_rng(3), 4, 3)
    path = tmp_path / "m.arpa"
    write_arpa(model, path)
    head, blocks, tail = _sections(path.read_text())
    prefixes = {" ".join(line.split("\t")[1].split()[:-1]) for line in blocks[1]}
    dropped = next(i for i, line in enumerate(blocks[0]) if line.split("\t")[1] in prefixes)
    del blocks[0][dropped]  # a bigram that is the prefix of a listed trigram
    text = _join(head, blocks, tail).replace(f"ngram 2={len(blocks[0]) + 1}", f"ngram 2={len(blocks[0])}")
    path.write_text(text)
    assert _arpa_fast.read_closed(_arpa_fast.read_bytes(path), True) is None
    assert _arpa_fast.read_sections(_arpa_fast.read_bytes(path), True) is not None
    assert_same_model(read_arpa(path), _read_arpa(path, False, "zero"))


def test_a_duplicate_ngram_is_reported_by_the_python_reader(tmp_path):
    model, _ = random_model(np.random.default_rng(4), 4, 3)
    path = tmp_path / "m.arpa"
    write_arpa(model, path)
    head, blocks, tail = _sections(path.read_text())
    blocks[1].insert(1, blocks[1][0])
    text = _join(head, blocks, tail).replace(f"ngram 3={len(blocks[1]) - 1}", f"ngram 3={len(blocks[1])}")
    path.write_text(text)
    assert _arpa_fast.read_closed(_arpa_fast.read_bytes(path), True) is None
    with pytest.raises(ValueError, match="duplicate 3-gram"):
        read_arpa(path)


@settings(max_examples=300, deadline=None)
@given(st.one_of(
    st.floats(allow_nan=False, allow_infinity=False, width=32).map(lambda x: repr(float(np.float32(x)))),
    st.from_regex(r"-?[0-9]{0,17}(\.[0-9]{0,17})?(e-?[0-9])?", fullmatch=True),
), st.sampled_from([b"", b" ", b"\t", b"\n", b"\r\n", b"x", "\u00e9".encode()]))
def test_decimal_scanner_inside_a_line_equals_float(text, after):
    # As the line parser uses it: a number it accepts ends where the token ends and
    # equals float; one it declines is delimited by the word scanner for float.
    data = np.frombuffer(text.encode() + after, dtype=np.uint8)
    end, ok, value = _words.scan_decimal(data, _NO_WORDS, 0, len(data))
    assert _scan_decimal_eight_at_a_time(text.encode(), after) == (end, ok, value)
    token_end, _ = _arpa_fast._scan_word(data, 0, len(data), _arpa_fast._BYTE_CLASS)
    if ok:
        assert end == token_end
        expected = float(text)
        assert value == expected and math.copysign(1, value) == math.copysign(1, expected), text
    else:
        assert after in (b"x", "\u00e9".encode()) or not text or _declined_by_float_or_fast_path(text)


_NO_WORDS = np.zeros(0, dtype=np.uint64)  # no uint64 view: the digit-by-digit scanner alone


def _scan_decimal_eight_at_a_time(number: bytes, after: bytes):
    """:func:`_words.scan_decimal` with the buffer's uint64 view, so the digits after the
    point are read eight at a time: ``number + after`` then padding (a line break and
    more text, as in a file), at each of the eight alignments; all must agree."""
    results = set()
    for shift in range(8):
        data = np.frombuffer(b"x" * shift + number + after + b"\n" + b"-1.5 word\n" * 4, dtype=np.uint8)
        end, ok, value = _words.scan_decimal(data, _words.uint64_view(data), shift, len(data))
        results.add((end - shift, ok, value, math.copysign(1, value)))
    assert len(results) == 1, results
    end, ok, value, _ = results.pop()
    return end, ok, value


def _declined_by_float_or_fast_path(text: str) -> bool:
    """Whether ``text`` is no number for ``float`` or lies outside Clinger's fast path."""
    try:
        float(text)
    except ValueError:
        return True
    mantissa, _, exponent = text.lower().partition("e")
    whole, _, fraction = mantissa.lstrip("+-").partition(".")
    significant = (whole + fraction).lstrip("0")
    return len(significant) > 15 or not -22 <= int(exponent or 0) - len(fraction) <= 22


# Words around the packed path's limits: 1, 7, 8, 9, 15, 16 and 17 bytes, two sharing
# their first 8 bytes, prefixes of others, DEL (0x7F, still packed), a control byte
# (0x01, a token byte the packed path leaves to the byte-wise one), UTF-8.
_EDGE_WORDS = ["a", "ab", "abcdefg", "abcdefgh", "abcdefgh1", "abcdefgh2", "x" * 15, "y" * 16, "z" * 17,
               "del\x7f", "ctl\x01x", "é", "naïve", "a" * 40, "ab" * 4 + "é"]


@pytest.mark.parametrize("seed", range(3))
def test_edge_words_are_read_like_any_other(tmp_path, seed):
    # The parser delimits and looks up short ASCII words by their packed bytes and
    # leaves the rest to the byte-wise path: every word must still get its own id.
    rng = np.random.default_rng(seed)
    model, _ = random_model(rng, len(_EDGE_WORDS), 4, density=0.6, closed=True)
    path = tmp_path / "m.arpa"
    write_arpa(model, path)
    names = {f"w{i}": word for i, word in enumerate(rng.permutation(_EDGE_WORDS))}
    text = path.read_text()
    lines = []
    for line in text.split("\n"):
        fields = line.split("\t")
        if len(fields) >= 2:
            fields[1] = " ".join(names.get(w, w) for w in fields[1].split(" "))
        lines.append("\t".join(fields))
    path.write_text("\n".join(lines), encoding="utf-8")
    assert _arpa_fast.read_closed(_arpa_fast.read_bytes(path), True) is not None
    fast, slow = read_arpa(path), _read_arpa(path, False, "zero")
    assert_same_model(fast, slow)
    assert sorted(fast.vocabulary.words) == sorted(["<unk>", "<s>", "</s>"] + _EDGE_WORDS)
