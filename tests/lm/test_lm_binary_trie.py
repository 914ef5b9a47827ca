"""Binary format version 2 (the trie of varorder.lm.trie): scores equal to the model's (and
the ARPA file's), quantised scores within the error the file records, the streamed build
equal to the in-memory one, hostile files refused as version 1 refuses them, and the
kenlm API over a version-2 file."""

from __future__ import annotations

import json
import struct
import zlib

import numpy as np
import pytest

from _lm_oracle import random_corpus, random_model, shared_data
from varorder.errors import FormatError, ParameterError
from varorder.lm import ModifiedKneserNey, _trie_kernels
from varorder.lm.arpa import read_arpa, write_arpa
from varorder.lm.binary import BinaryFormatError, open_binary, verify_binary, write_binary
from varorder.lm.trie import TrieLM, pack, quantize, write_trie
from varorder.lm.trie_build import build_trie


def random_sentences(rng, model, n=30, max_length=9):
    lengths = rng.integers(0, max_length + 1, size=n)
    ids = rng.integers(0, model.vocab_size, size=int(lengths.sum())).astype(np.int32)
    ids[ids == model.vocabulary.bos_id] = model.vocabulary.unk_id
    return ids, lengths.astype(np.int64)


def assert_same_queries(got, expected, rng, atol=0.0):
    """Every query kind of ``got`` equals (within ``atol``) that of ``expected``."""
    ids, lengths = random_sentences(rng, expected)
    close = np.testing.assert_array_equal if atol == 0 else (
        lambda a, b: np.testing.assert_allclose(a, b, rtol=0, atol=atol))
    for bos in (True, False):
        for eos in (True, False):
            ours = got.token_log10probs(ids, lengths, bos=bos, eos=eos)
            theirs = expected.token_log10probs(ids, lengths, bos=bos, eos=eos)
            close(ours[0], theirs[0])
            if atol == 0:
                np.testing.assert_array_equal(ours[1], theirs[1])
    contexts = [ids[i:i + 3] for i in range(0, 24, 3)]
    words = ids[24:32]
    close(got.lookups(contexts, words)[0], expected.lookups(contexts, words)[0])
    grid = (ids[:2], [0, 1, 2]) if expected.order > 1 else (ids[:0], [0, 0])
    close(got.lookup_grid(*grid, np.arange(expected.vocab_size))[0],
          expected.lookup_grid(*grid, np.arange(expected.vocab_size))[0])
    if atol == 0:
        for i in range(20):
            context = ids[i:i + 3].tolist()
            assert got.minimal_state(context) == expected.minimal_state(context)
            assert got.lookup(context, int(ids[i + 3])) == expected.lookup(context, int(ids[i + 3]))


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("order", [1, 2, 3, 5])
def test_trie_scores_equal_the_model(tmp_path, seed, order):
    rng = np.random.default_rng(seed)
    model, _ = random_model(rng, 6, order)
    path = tmp_path / "model.bin"
    write_binary(model, path, trie=True)
    loaded = open_binary(path)
    assert isinstance(loaded, TrieLM) and loaded.ngram_counts == model.ngram_counts
    assert loaded.vocabulary.words == model.vocabulary.words and loaded.max_score_error == 0.0
    assert_same_queries(loaded, model, rng)
    for m in range(1, order + 1):  # the whole tables round-trip
        for ours, theirs in zip(loaded.ngrams(m), model.ngrams(m)):
            np.testing.assert_array_equal(ours, theirs)
    verify_binary(path)


def test_trie_of_a_trained_model_scores_as_its_arpa_file(tmp_path):
    corpus = random_corpus(np.random.default_rng(4), 300, 40, max_length=12)
    model = ModifiedKneserNey(order=4).fit_sentences(corpus).model_
    write_arpa(model, tmp_path / "m.arpa")
    from_arpa = read_arpa(tmp_path / "m.arpa")
    assert build_trie(tmp_path / "m.arpa", tmp_path / "streamed.bin") is True
    write_binary(from_arpa, tmp_path / "in-memory.bin", trie=True)
    # The streamed build and the one from the model in memory write the same bytes.
    assert (tmp_path / "streamed.bin").read_bytes() == (tmp_path / "in-memory.bin").read_bytes()
    trie = open_binary(tmp_path / "streamed.bin", verify=True)
    assert_same_queries(trie, from_arpa, np.random.default_rng(5))
    assert trie.perplexity(corpus[:50]) == from_arpa.perplexity(corpus[:50])
    write_arpa(trie, tmp_path / "again.arpa")  # a trie writes back the ARPA it was built from
    assert (tmp_path / "again.arpa").read_bytes() == (tmp_path / "m.arpa").read_bytes()


def test_streamed_build_in_small_pieces_equals_the_whole(tmp_path, monkeypatch):
    """Pieces of the file that end mid-section (and mid-line before the cut) are joined
    correctly: the output does not depend on the piece size."""
    import varorder.lm.trie_build as trie_build

    corpus = random_corpus(np.random.default_rng(6), 200, 30, max_length=10)
    write_arpa(ModifiedKneserNey(order=3).fit_sentences(corpus).model_, tmp_path / "m.arpa")
    assert build_trie(tmp_path / "m.arpa", tmp_path / "whole.bin", prob_bits=6, backoff_bits=5)
    for piece in (97, 1000, 4096):
        monkeypatch.setattr(trie_build, "CHUNK_BYTES", piece)
        assert build_trie(tmp_path / "m.arpa", tmp_path / "pieces.bin", prob_bits=6, backoff_bits=5)
        assert (tmp_path / "pieces.bin").read_bytes() == (tmp_path / "whole.bin").read_bytes()


def test_files_the_stream_cannot_take_are_read_in_memory(tmp_path):
    """An unsorted section, missing prefixes, a gzip file: the general reader serves, with
    the same result as the model it reads."""
    import gzip

    arpa = ("\\data\\\nngram 1=5\nngram 2=3\nngram 3=1\n\n\\1-grams:\n-1.0\t<unk>\t-0.2\n-99\t<s>\t-0.3\n"
            "-0.8\t</s>\n-0.6\ta\t-0.25\n-0.7\tb\t-0.1\n\n\\2-grams:\n-0.3\tb a\t-0.05\n-0.4\t<s> b\n-0.5\ta b\n"
            "\n\\3-grams:\n-0.2\t<s> a b\n\n\\end\\\n")  # unsorted bigrams; "<s> a" is missing
    (tmp_path / "odd.arpa").write_text(arpa)
    with gzip.open(tmp_path / "odd.arpa.gz", "wt") as handle:
        handle.write(arpa)
    expected = read_arpa(tmp_path / "odd.arpa")
    for name in ("odd.arpa", "odd.arpa.gz"):
        assert build_trie(tmp_path / name, tmp_path / "odd.bin") is False
        assert_same_queries(open_binary(tmp_path / "odd.bin"), expected, np.random.default_rng(1))


def test_kenlm_test_arpa_through_the_trie(tmp_path):
    path = shared_data("arpa", "kenlm", "test.arpa")
    build_trie(path, tmp_path / "test.bin", minus_99="literal")
    assert_same_queries(open_binary(tmp_path / "test.bin"), read_arpa(path, minus_99="literal"),
                        np.random.default_rng(2))


@pytest.mark.parametrize("bits", [(8, 8), (4, 3), (16, 16), (2, 8)])
def test_quantised_scores_lie_within_the_recorded_error(tmp_path, bits):
    corpus = random_corpus(np.random.default_rng(7), 400, 60, max_length=12)
    model = ModifiedKneserNey(order=4).fit_sentences(corpus).model_
    write_arpa(model, tmp_path / "m.arpa")
    model = read_arpa(tmp_path / "m.arpa")
    build_trie(tmp_path / "m.arpa", tmp_path / "q.bin", prob_bits=bits[0], backoff_bits=bits[1])
    quantised = open_binary(tmp_path / "q.bin", verify=True)
    bound = quantised.max_score_error
    assert quantised.quantization["prob_bits"] == bits[0]
    assert (bound > 0) == (bits != (16, 16))  # 2**16 centres hold this model's values exactly
    errors = quantised.quantization
    assert errors["prob_max_error"][0] == 0.0 and errors["backoff_max_error"][-1] == 0.0  # unigrams exact
    assert_same_queries(quantised, model, np.random.default_rng(8), atol=bound + 1e-9)
    ids, lengths = model.vocabulary.encode_sentences(s.split() for s in corpus)
    difference = np.abs(quantised.token_log10probs(ids, lengths)[0] - model.token_log10probs(ids, lengths)[0])
    assert difference.max() <= bound + 1e-9
    # A back-off of exactly 1 stays exact, so states agree with the unquantised model's.
    for i in range(len(ids) - 3):
        context = ids[i:i + 3].tolist()
        assert quantised.minimal_state(context) == model.minimal_state(context)


def test_quantize_keeps_exact_values_and_bounds_its_error():
    rng = np.random.default_rng(0)
    values = np.concatenate([rng.normal(-2, 1, 5000), np.zeros(300), [-np.inf] * 7]).astype(np.float32)
    book, codes, error = quantize(values, 6, keep_zero=True)
    assert len(book) == 64 and codes.max() < 64
    decoded = book[codes.astype(np.int64)]
    assert np.array_equal(decoded[values == 0], np.zeros(300)) and np.all(np.isneginf(decoded[np.isneginf(values)]))
    finite = np.isfinite(values)
    assert np.max(np.abs(decoded[finite] - values[finite])) == pytest.approx(error)
    # Each value is coded by its nearest centre (the last two are the exact -inf and 0).
    centres, binned = book[:62], finite & (values != 0)
    nearest = np.min(np.abs(values[binned, None] - centres[None, :]), axis=1)
    np.testing.assert_allclose(np.abs(decoded[binned] - values[binned]), nearest, atol=1e-6)
    few = np.asarray([-1.5, -0.5, -0.5, 0.0], dtype=np.float32)
    book, codes, error = quantize(few, 2, keep_zero=False)  # no more values than centres: exact
    assert error == 0.0 and np.array_equal(book[codes.astype(np.int64)], few)


def test_bad_quantisation_settings_are_refused(tmp_path):
    model, _ = random_model(np.random.default_rng(0), 5, 3)
    for bad in (0.5, 25, -1, True, "8"):
        with pytest.raises(ParameterError, match="prob_bits"):
            write_binary(model, tmp_path / "x.bin", prob_bits=bad)
    with pytest.raises(ParameterError, match="MAX-ARPA"):
        write_binary(model, tmp_path / "x.bin", trie=True, max_arpa=True)


# ---------------------------------------------------------------------------- hostile files

@pytest.fixture()
def trie_file(tmp_path):
    model, _ = random_model(np.random.default_rng(1), 6, 3)
    path = tmp_path / "model.bin"
    write_binary(model, path, trie=True, prob_bits=5, backoff_bits=4)
    return path


@pytest.mark.parametrize("keep", [0, 5, 20, 31, 100, 700, -64, -1])
def test_truncated_trie_is_refused(trie_file, keep):
    data = trie_file.read_bytes()
    cut = trie_file.with_name("cut.bin")
    cut.write_bytes(data[:keep] if keep >= 0 else data[:keep])
    with pytest.raises(BinaryFormatError, match=r"cut\.bin: (truncated|not a varorder binary|corrupt header)"):
        open_binary(cut)


def test_trailing_bytes_and_a_damaged_header_are_refused(trie_file):
    padded = trie_file.with_name("padded.bin")
    padded.write_bytes(trie_file.read_bytes() + b"\x00" * 64)
    with pytest.raises(BinaryFormatError, match=r"padded\.bin: has trailing bytes"):
        open_binary(padded)
    data = bytearray(trie_file.read_bytes())
    data[60] ^= 0x04
    trie_file.write_bytes(bytes(data))
    with pytest.raises(BinaryFormatError, match=r"model\.bin: corrupt header \(checksum"):
        open_binary(trie_file)


def _rewritten(path, edit_header=None, column=None, edit_values=None, fix_crc=True):
    """A copy of the trie at ``path`` whose header is changed by ``edit_header(header)``
    and/or whose bit-packed array ``column`` has its entries changed by
    ``edit_values(entries)``, with the checksums recomputed (a forgery, not an accident)."""
    model = open_binary(path)
    header = json.loads(json.dumps(model._binary_header))
    data = bytearray(path.read_bytes())
    if column is not None:
        entry = header["arrays"][column]
        start = header["data_start"] + entry["offset"]
        bits = np.frombuffer(bytes(data[start:start + entry["nbytes"]]), dtype=np.uint64).copy()
        layout_row = {"pointers": _trie_kernels.POINTER_WIDTH, "words": _trie_kernels.WORD_WIDTH}
        kind = column.rstrip("0123456789")
        level = int(column[len(kind):]) - 1
        width = int(model._layout[level, layout_row[kind]])
        count = model.ngram_counts[level] + (1 if kind == "pointers" else 0)
        entries = np.empty(count, dtype=np.int64)
        _trie_kernels.unpack(bits, 0, width, entries)
        edit_values(entries)
        bits[:] = pack(entries & ((1 << width) - 1), width, len(bits))
        data[start:start + entry["nbytes"]] = bits.tobytes()
        if fix_crc:
            header["arrays"][column]["crc32"] = zlib.crc32(bits.tobytes())
    if edit_header is not None:
        edit_header(header)
    _, version, length, _, _ = struct.unpack("<12sIQII", bytes(data[:32]))
    text = json.dumps(header, sort_keys=True).encode("ascii").ljust(length, b" ")
    data[32:32 + length] = text
    data[:32] = struct.pack("<12sIQII", b"varorder-lm\x00", version, length, zlib.crc32(text), 0)
    forged = path.with_name(f"forged-{column or 'header'}.bin")
    forged.write_bytes(bytes(data))
    return forged


@pytest.mark.parametrize("edit", [
    lambda h: h["ngram_counts"].__setitem__(1, h["ngram_counts"][1] + 1),
    lambda h: h["ngram_counts"].__setitem__(2, h["ngram_counts"][2] - 1),
    lambda h: h.__setitem__("order", 2),
    lambda h: h.__setitem__("vocab_size", h["vocab_size"] + 1),
    lambda h: h["quantization"].__setitem__("prob_bits", 6),
    lambda h: h["quantization"].__setitem__("backoff_bits", 30),
    lambda h: h["quantization"].__setitem__("prob_max_error", [0.0]),
    lambda h: h["arrays"]["words2"].__setitem__("offset", h["arrays"]["words2"]["offset"] + 64),
    lambda h: h["arrays"].pop("backoffs2"),
    lambda h: h.__setitem__("version", 1),
    lambda h: h["ngram_counts"].__setitem__(2, h["ngram_counts"][2] + 1),
])
def test_wrong_counts_and_layouts_are_refused(trie_file, edit):
    forged = _rewritten(trie_file, edit_header=edit)
    with pytest.raises(BinaryFormatError, match=r"forged-header\.bin: (corrupt header|inconsistent model|truncated|has "
                                                r"trailing)"):
        open_binary(forged, verify=False)


def test_pointers_outside_the_next_order_are_a_format_error(trie_file):
    def out_of_range(pointers):
        pointers[2:-1] = pointers[-1] + 5  # ranges past the end of the bigrams (both ends intact)

    forged = _rewritten(trie_file, column="pointers1", edit_values=out_of_range)
    model = open_binary(forged, verify=False)  # structurally intact
    ids = np.asarray([1, 2, 3, 4], dtype=np.int32)
    for query in (lambda: model.token_log10probs(ids), lambda: model.lookups([[1, 2], [3]], [4, 5]),
                  lambda: model.lookup([1, 2], 3), lambda: model.minimal_state([1, 2]),
                  lambda: model.ngrams(2), lambda: model.max_log10probs([[1]], [2])):
        with pytest.raises(ValueError, match=r"forged-pointers1\.bin: corrupt"):
            query()
    with pytest.raises(BinaryFormatError, match=r"forged-pointers1\.bin: the 1-gram trie columns"):
        open_binary(forged, verify=True)


def _swap_first_siblings(trie_file, order):
    """An edit of the words of ``order`` swapping the first two children of one row."""
    pointers = np.diff(open_binary(trie_file)._pointer_column(order - 1))
    first = int(np.cumsum(np.concatenate([[0], pointers]))[np.flatnonzero(pointers >= 2)[0]])
    return lambda words: words.__setitem__(slice(first, first + 2), words[[first + 1, first]])


@pytest.mark.parametrize("column, order", [("pointers2", 2), ("words3", 3), ("words2", 2), ("words2-large", 2)])
def test_unsorted_columns_are_refused_by_the_full_check(trie_file, column, order):
    edit = {"pointers2": lambda p: p.__setitem__(3, p[-1]),
            "words2-large": lambda w: w.__setitem__(0, 63)}.get(column) or _swap_first_siblings(trie_file, order)
    column = column.split("-")[0]
    forged = _rewritten(trie_file, column=column, edit_values=edit)
    open_binary(forged, verify=False)
    with pytest.raises(BinaryFormatError, match=rf"forged-{column}\.bin: the {order}-gram trie columns"):
        verify_binary(forged)


def test_a_flipped_table_byte_is_found_by_the_full_check(trie_file):
    data = bytearray(trie_file.read_bytes())
    data[-100] ^= 0x10
    trie_file.write_bytes(bytes(data))
    open_binary(trie_file, verify=False)
    with pytest.raises(BinaryFormatError, match=r"model\.bin: array '.*' is corrupt \(checksum mismatch\)"):
        open_binary(trie_file)  # changed since written: the default open checks it in full


def test_version_one_files_still_open(tmp_path):
    model, _ = random_model(np.random.default_rng(2), 5, 3)
    write_binary(model, tmp_path / "v1.bin")
    write_binary(model, tmp_path / "v2.bin", trie=True)
    v1, v2 = open_binary(tmp_path / "v1.bin"), open_binary(tmp_path / "v2.bin")
    assert not isinstance(v1, TrieLM) and isinstance(v2, TrieLM)
    assert (tmp_path / "v2.bin").stat().st_size < (tmp_path / "v1.bin").stat().st_size
    assert_same_queries(v2, v1, np.random.default_rng(3))


# ---------------------------------------------------------------------------- the kenlm API

def test_kenlm_api_on_a_trie_file(tmp_path):
    import varorder.lm.kenlm as kenlm

    corpus = random_corpus(np.random.default_rng(9), 200, 30, max_length=10)
    write_arpa(ModifiedKneserNey(order=3).fit_sentences(corpus).model_, tmp_path / "m.arpa")
    build_trie(tmp_path / "m.arpa", tmp_path / "m.bin")
    arpa, trie = kenlm.Model(str(tmp_path / "m.arpa")), kenlm.Model(str(tmp_path / "m.bin"))
    assert trie.order == arpa.order and isinstance(trie.model, TrieLM)
    for sentence in corpus[:20] + ["w1 nonword w2"]:
        assert trie.score(sentence) == arpa.score(sentence)
        assert trie.score(sentence, bos=False, eos=False) == arpa.score(sentence, bos=False, eos=False)
        assert list(trie.full_scores(sentence)) == list(arpa.full_scores(sentence))
        assert trie.perplexity(sentence) == arpa.perplexity(sentence)
        states = []
        for model in (arpa, trie):
            state, out = kenlm.State(), kenlm.State()
            model.BeginSentenceWrite(state)
            scores = []
            for word in sentence.split() + ["</s>"]:
                scores.append(model.BaseFullScore(state, word, out))
                state, out = out, state
            states.append((scores, state))
        assert states[0] == states[1]
    assert ("w1" in trie) == ("w1" in arpa) and "nonword" not in trie


# ---------------------------------------------------------------------------- the command

def test_build_binary_command_writes_and_verifies_a_trie(tmp_path):
    from click.testing import CliRunner

    from varorder.cli.main import main

    corpus = random_corpus(np.random.default_rng(10), 100, 20, max_length=8)
    write_arpa(ModifiedKneserNey(order=3).fit_sentences(corpus).model_, tmp_path / "m.arpa")
    runner = CliRunner()
    result = runner.invoke(main, ["lm", "build-binary", "--trie", str(tmp_path / "m.arpa"), str(tmp_path / "t.bin")])
    assert result.exit_code == 0, result.output
    assert "streamed" in result.output
    result = runner.invoke(main, ["lm", "build-binary", "-q", "8", "-b", "8", str(tmp_path / "m.arpa"),
                                  str(tmp_path / "q.bin")])
    assert result.exit_code == 0, result.output
    assert open_binary(tmp_path / "q.bin").quantization["backoff_bits"] == 8
    for path in ("t.bin", "q.bin"):
        result = runner.invoke(main, ["lm", "verify", str(tmp_path / path)])
        assert result.exit_code == 0 and "ok" in result.output, result.output
    result = runner.invoke(main, ["lm", "build-binary", "--trie", "--max-arpa", str(tmp_path / "m.arpa"),
                                  str(tmp_path / "x.bin")])
    assert result.exit_code == 2 and "MAX-ARPA" in result.output
    (tmp_path / "text.txt").write_text("w1 w2\nw3\n")
    result = runner.invoke(main, ["lm", "score", str(tmp_path / "t.bin"), str(tmp_path / "text.txt")])
    assert result.exit_code == 0, result.output


STREAMED_ARPA = ("\\data\\\nngram 1=6\nngram 2=4\nngram 3=2\n\n\\1-grams:\n-1.0\t<unk>\t-0.2\n-99\t<s>\t-0.3\n"
                 "-0.8\t</s>\n-0.6\ta\t-0.25\n-0.7\tb\t-0.1\n-0.9\tcafé\t-0.05\n\n\\2-grams:\n-0.3\t<s> a\t-0.05\n"
                 "-0.4\t<s> b\n-0.5\ta b  -0.15\n-0.45 b café\n\n\\3-grams:\n-0.2\t<s> a b\t-0.0\n-0.25 a b café\n\n"
                 "\\end\\\n")  # missing back-offs, spaces for tabs, a non-ASCII word, a back-off on the top order


@pytest.mark.parametrize("variant", ["plain", "crlf", "nbsp", "unknown word", "positive"])
def test_the_stream_reads_each_line_as_the_reader_does(tmp_path, variant):
    """What the stream takes it reads as read_arpa does (same bytes as the model in memory);
    what its byte-level tokens could read differently (\\r line breaks, a no-break space,
    which ``str.split`` splits on) or cannot take goes to the reader, whose result or error
    is then the command's."""
    text = {"plain": STREAMED_ARPA, "crlf": STREAMED_ARPA.replace("\n", "\r\n"),
            "nbsp": STREAMED_ARPA.replace("a b  -0.15", "a\u00a0b -0.15"),
            "unknown word": STREAMED_ARPA.replace("<s> b\n", "<s> zz\n"),
            "positive": STREAMED_ARPA.replace("-0.4\t<s> b", "0.4\t<s> b")}[variant]
    (tmp_path / "m.arpa").write_bytes(text.encode("utf-8"))
    if variant in ("unknown word", "positive"):
        with pytest.raises(FormatError):
            build_trie(tmp_path / "m.arpa", tmp_path / "m.bin")
        assert not (tmp_path / "m.bin").exists()
        return
    assert build_trie(tmp_path / "m.arpa", tmp_path / "streamed.bin") is (variant == "plain")
    write_trie(read_arpa(tmp_path / "m.arpa"), tmp_path / "in-memory.bin")
    assert (tmp_path / "streamed.bin").read_bytes() == (tmp_path / "in-memory.bin").read_bytes()


def test_the_streamed_build_imports_no_compiled_kernels(tmp_path):
    """Its peak memory is the interpreter's and NumPy's plus the data: Numba's import alone
    would be about 65 MB."""
    import subprocess
    import sys

    (tmp_path / "m.arpa").write_text(STREAMED_ARPA)
    script = ("import sys; from varorder.lm.trie_build import build_trie; "
              f"assert build_trie({str(tmp_path / 'm.arpa')!r}, {str(tmp_path / 'm.bin')!r}, prob_bits=4); "
              "print(sorted(m for m in sys.modules if m.split('.')[0] in ('numba', 'llvmlite')))")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_pack_equals_the_bit_layout():
    rng = np.random.default_rng(11)
    for width in (1, 7, 14, 33, 56, _trie_kernels.MAX_FIELD_WIDTH, 63):
        values = rng.integers(0, 1 << width, size=int(rng.integers(0, 300)), dtype=np.uint64)
        n_words = -(-len(values) * width // 64) + 1
        bits = pack(values, width, n_words)
        as_int = int.from_bytes(bits.tobytes(), "little")
        expected = sum(int(v) << (i * width) for i, v in enumerate(values))
        assert as_int == expected
        if width > _trie_kernels.MAX_FIELD_WIDTH:
            continue  # wider than one unaligned 64-bit load reads; no file's fields are (counts < 2**40)
        got = np.empty(len(values), dtype=np.int64)
        _trie_kernels.unpack(bits, 0, width, got)
        assert np.array_equal(got.astype(np.uint64), values)
