"""The binary model format: same tables and bit-identical scores as the model written,
refusal of truncated, foreign, corrupt and wrong-version files, and the Python scorer
used for small inputs against the Numba kernel."""

from __future__ import annotations

import json
import os
import struct
import zlib

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from _lm_oracle import random_corpus, random_model, shared_data
from varorder.lm.arpa import load_model, read_arpa, write_arpa
from varorder.lm import ModifiedKneserNey
from varorder.lm import _kernels
from varorder.lm.binary import BinaryFormatError, is_binary_model, open_binary, verify_binary, write_binary
from varorder.lm.model import score_flat_python


def random_sentences(rng, vocab_size, n=30, max_length=9):
    lengths = rng.integers(0, max_length + 1, size=n)
    return rng.integers(0, vocab_size, size=int(lengths.sum())).astype(np.int32), lengths.astype(np.int64)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("order", [1, 2, 4])
def test_binary_model_scores_equal_the_original(tmp_path, seed, order):
    rng = np.random.default_rng(seed)
    model, _ = random_model(rng, 5, order)
    path = tmp_path / "model.bin"
    write_binary(model, path)
    loaded = open_binary(path)
    assert loaded.ngram_counts == model.ngram_counts and loaded.vocabulary.words == model.vocabulary.words
    for m in range(1, order + 1):
        for ours, theirs in zip(loaded.ngrams(m), model.ngrams(m)):
            np.testing.assert_array_equal(ours, theirs)
    ids, lengths = random_sentences(rng, model.vocab_size)
    ids[ids == model.vocabulary.bos_id] = model.vocabulary.unk_id
    for bos in (True, False):
        expected = model.token_log10probs(ids, lengths, bos=bos)
        got = loaded.token_log10probs(ids, lengths, bos=bos)
        np.testing.assert_array_equal(got[0], expected[0])
        np.testing.assert_array_equal(got[1], expected[1])
    contexts = [ids[i:i + 2] for i in range(0, 20, 2)]
    words = ids[20:30]
    np.testing.assert_array_equal(loaded.lookups(contexts, words)[0], model.lookups(contexts, words)[0])
    assert loaded.minimal_state(ids[:3].tolist()) == model.minimal_state(ids[:3].tolist())
    verify_binary(path)


def test_max_arpa_columns_are_stored_and_read_back(tmp_path):
    model, _ = random_model(np.random.default_rng(5), 4, 3)
    path = tmp_path / "model.bin"
    write_binary(model, path, max_arpa=True)
    loaded = open_binary(path)
    assert loaded._max_backoff is not None
    for ours, theirs in zip(loaded.max_backoff().max_log10prob, model.max_backoff().max_log10prob):
        np.testing.assert_array_equal(ours, theirs)
    contexts, words = [[1, 2], [0], []], [3, 4, 5]
    np.testing.assert_array_equal(loaded.max_log10probs(contexts, words), model.max_log10probs(contexts, words))


def test_load_model_recognises_both_kinds(tmp_path):
    model = ModifiedKneserNey(order=3).fit_sentences(random_corpus(np.random.default_rng(3), 80, 12)).model_
    write_arpa(model, tmp_path / "m.arpa")
    write_binary(model, tmp_path / "m.bin")
    assert is_binary_model(tmp_path / "m.bin") and not is_binary_model(tmp_path / "m.arpa")
    sentences = ["t0 t1 t2", "t3 t4 unseen", "t1"]
    from_arpa = load_model(tmp_path / "m.arpa")
    from_binary = load_model(tmp_path / "m.bin")
    assert from_binary.perplexity(sentences) == from_arpa.perplexity(sentences)


@pytest.fixture()
def binary_file(tmp_path):
    model, _ = random_model(np.random.default_rng(1), 5, 3)
    path = tmp_path / "model.bin"
    write_binary(model, path)
    return path


@pytest.mark.parametrize("keep", [0, 5, 20, 31, 100, -1])
def test_truncated_file_is_refused(binary_file, keep):
    data = binary_file.read_bytes()
    cut = binary_file.with_name("cut.bin")
    cut.write_bytes(data[:keep] if keep >= 0 else data[:-1])
    with pytest.raises(BinaryFormatError, match=r"cut\.bin: (truncated|not a varorder binary|corrupt header)"):
        open_binary(cut)


def test_foreign_files_are_refused(tmp_path, binary_file):
    kenlm = tmp_path / "kenlm.binary"
    kenlm.write_bytes(b"mmap lm http://kheafield.com/code format version 5\n\x00\x00")
    with pytest.raises(BinaryFormatError, match="KenLM binary model"):
        open_binary(kenlm)
    text = tmp_path / "model.arpa"
    text.write_text("\\data\\\nngram 1=3\n")
    with pytest.raises(BinaryFormatError, match="wrong magic"):
        open_binary(text)
    data = bytearray(binary_file.read_bytes())
    newer = tmp_path / "newer.bin"
    newer.write_bytes(bytes(data[:12]) + struct.pack("<I", 99) + bytes(data[16:]))
    with pytest.raises(BinaryFormatError, match="version 99"):
        open_binary(newer)
    corrupt = tmp_path / "corrupt.bin"
    data[40] ^= 0xFF  # inside the JSON header
    corrupt.write_bytes(bytes(data))
    with pytest.raises(BinaryFormatError, match="checksum"):
        open_binary(corrupt)
    padded = tmp_path / "padded.bin"
    padded.write_bytes(binary_file.read_bytes() + b"\x00")
    with pytest.raises(BinaryFormatError, match="trailing bytes"):
        open_binary(padded)


def test_verify_detects_a_flipped_table_byte(binary_file):
    data = bytearray(binary_file.read_bytes())
    data[-70] ^= 0x01  # inside the last arrays, past the header
    binary_file.write_bytes(bytes(data))
    open_binary(binary_file, verify=False)  # the layout is intact: the structural open does not read the tables
    with pytest.raises(BinaryFormatError, match="checksum mismatch"):
        open_binary(binary_file)  # the file changed since it was written: the default open verifies it in full
    with pytest.raises(BinaryFormatError, match="checksum mismatch"):
        verify_binary(binary_file)
    with pytest.raises(BinaryFormatError, match="checksum mismatch"):
        open_binary(binary_file, verify=True)


def _forged(path, name, edit):
    """A copy of the binary model at ``path`` with array ``name`` changed by ``edit(array)``
    in place and its CRC-32 in the header updated (a forgery, not an accident)."""
    model = open_binary(path)
    header = model._binary_header
    entry = header["arrays"][name]
    data = bytearray(path.read_bytes())
    start = header["data_start"] + entry["offset"]
    array = np.frombuffer(data, dtype=np.dtype(entry["dtype"]), count=entry["nbytes"] // np.dtype(entry["dtype"]).itemsize,
                          offset=start).reshape(entry["shape"]).copy()
    edit(array)
    data[start:start + entry["nbytes"]] = array.tobytes()
    header = json.loads(json.dumps(header))
    header["arrays"][name]["crc32"] = zlib.crc32(array.tobytes())
    _, version, length, _, _ = struct.unpack("<12sIQII", bytes(data[:32]))
    text = json.dumps(header, sort_keys=True).encode("ascii").ljust(length, b" ")
    assert len(text) == length
    data[32:32 + length] = text
    data[:32] = struct.pack("<12sIQII", b"varorder-lm\x00", version, length, zlib.crc32(text), 0)
    forged = path.with_name(f"forged-{name}.bin")
    forged.write_bytes(bytes(data))
    return forged


def _every_query(model):
    """Each kind of query a user can make of a model."""
    ids = np.arange(model.vocab_size, dtype=np.int32)
    ids[ids == model.vocabulary.bos_id] = model.vocabulary.unk_id
    model.token_log10probs(ids, np.asarray([len(ids)]))
    model.token_log10probs(ids[:3])  # small: the Python scorer
    model.score_sentences(["w1 w2 w3", "w4"])
    contexts = [ids[i:i + 2] for i in range(len(ids) - 2)]
    model.lookups(contexts, ids[2:])
    model.lookup_grid(ids[:2], [0, 2], ids)
    for i in range(len(ids) - 2):
        model.minimal_state(ids[i:i + 2].tolist())
        model.log10prob(ids[i:i + 2], int(ids[i + 2]))
    model.next_word_log10probs("w1 w2")
    model.ngrams(model.order)
    model.max_log10probs(contexts, ids[2:])


def test_a_slot_naming_a_row_outside_its_order_is_a_valueerror(binary_file):
    def row_too_large(table):
        used = np.flatnonzero(table[:, 0] != -1)
        table[used, 1] = 10 ** 9  # every occupied slot of every order

    forged = _forged(binary_file, "hash_rows", row_too_large)
    model = open_binary(forged, verify=False)  # structurally intact
    with pytest.raises(ValueError, match=r"forged-hash_rows\.bin: corrupt n-gram model: a hash slot names a row"):
        model.lookups([[1, 2], [3]], [4, 5])
    with pytest.raises(ValueError, match=r"forged-hash_rows\.bin"):
        model.minimal_state([1, 2])
    with pytest.raises(ValueError, match=r"forged-hash_rows\.bin"):
        model.lookup([1, 2], 3)
    model.token_log10probs(np.asarray([1, 2, 3], dtype=np.int32))  # rows are only keys there: no read through them
    with pytest.raises(BinaryFormatError, match="names rows outside its order"):
        open_binary(forged, verify=True)


def test_exact_decoding_on_a_damaged_model_names_its_file(binary_file):
    """The q-automaton (varorder.exact) runs the lookup kernels in its own compiled loops;
    their bounds-check failure on a structurally opened damaged model names the file too."""
    from varorder.exact import HighOrderTarget, QAutomaton

    def row_too_large(table):
        used = np.flatnonzero(table[:, 0] != -1)
        table[used, 1] = 10 ** 9

    model = open_binary(_forged(binary_file, "hash_rows", row_too_large), verify=False)
    vocabulary = model.vocabulary
    words = np.asarray([i for i in range(len(vocabulary)) if i not in (vocabulary.bos_id, vocabulary.eos_id)])
    target = HighOrderTarget(model, [(words, np.zeros(len(words)))] * 3)
    q = QAutomaton(target)
    path = [int(symbols[0]) for symbols in target.symbols]  # the first candidate everywhere
    for call in (lambda: q.decode_steps(5), lambda: q.refine(path), lambda: q.path_log_p(q.best_path()[0])):
        with pytest.raises(ValueError, match=r"forged-hash_rows\.bin: corrupt n-gram model: a hash slot names a row"):
            call()


def test_a_hash_table_without_an_empty_slot_cannot_hang_a_lookup(binary_file):
    def fill(table):
        empty = table[:, 0] == -1
        table[empty, 0] = 2 ** 62  # a key no query makes

    model = open_binary(_forged(binary_file, "hash_rows", fill), verify=False)
    reference = open_binary(binary_file)
    ids = np.asarray([1, 2, 3, 4, 1, 1], dtype=np.int32)
    np.testing.assert_array_equal(model.token_log10probs(ids)[0], reference.token_log10probs(ids)[0])
    model.lookups([[5, 5], [4, 1]], [5, 5])  # absent n-grams: every probe of the table, then a miss
    np.testing.assert_array_equal(score_flat_python_run(model, ids), score_flat_python_run(reference, ids))


def score_flat_python_run(model, ids):
    out = (np.empty(len(ids) + 1), np.empty(len(ids) + 1, np.int8), np.empty(1))
    score_flat_python(ids, np.asarray([0, len(ids)]), True, True, model.vocabulary.bos_id, model.vocabulary.eos_id,
                      model.order, model.vocab_size, model._hash_rows, model._hash_values, model._hash_base,
                      model._hash_cap, model._values, *out)
    return out[0]


@pytest.mark.parametrize("damage", ["unsorted", "prefix row outside"])
def test_corrupt_keys_are_refused_before_whole_model_operations(tmp_path, binary_file, damage):
    def edit(keys):
        if damage == "unsorted":
            keys[[0, -1]] = keys[[-1, 0]]
        else:
            keys[-1] = 10 ** 12

    model = open_binary(_forged(binary_file, "keys3", edit), verify=False)
    with pytest.raises(ValueError, match=r"forged-keys3\.bin: corrupt model file: the 3-gram keys"):
        model.ngrams(3)
    with pytest.raises(ValueError, match=r"forged-keys3\.bin"):
        write_arpa(model, tmp_path / "out.arpa")
    with pytest.raises(ValueError, match=r"forged-keys3\.bin"):
        model.max_backoff()
    with pytest.raises(BinaryFormatError, match="3-gram keys"):
        open_binary(binary_file.with_name("forged-keys3.bin"), verify=True)


@pytest.mark.parametrize("name", ["vocabulary", "value_base", "hash_base", "hash_cap"])
def test_damaged_control_arrays_are_refused_on_every_open(binary_file, name):
    data = bytearray(binary_file.read_bytes())
    header = open_binary(binary_file)._binary_header
    data[header["data_start"] + header["arrays"][name]["offset"]] ^= 0x04
    binary_file.write_bytes(bytes(data))
    with pytest.raises(BinaryFormatError, match=f"array '{name}' is corrupt"):
        open_binary(binary_file)


def test_binary_file_is_never_written_through(binary_file):
    before = binary_file.read_bytes()
    model = open_binary(binary_file)
    model._values[:] = 0.0  # copy-on-write mapping: the file keeps its bytes
    del model
    assert binary_file.read_bytes() == before


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("bos, eos", [(True, True), (False, True), (True, False), (False, False)])
def test_python_scorer_equals_the_numba_kernel(seed, bos, eos):
    # The compiled scorer interleaves SCORE_LANES sentences; the Python one scores them one
    # at a time: every output must agree bit for bit, empty sentences (some scoring no
    # token at all without </s>) and more sentences than lanes included.
    rng = np.random.default_rng(seed)
    model, _ = random_model(rng, 6, int(rng.integers(1, 5)))
    n_sentences = int(rng.integers(1, 4 * _kernels.SCORE_LANES))
    ids, lengths = random_sentences(rng, model.vocab_size, n=n_sentences, max_length=int(rng.integers(1, 12)))
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    n_out = len(ids) + (len(lengths) if eos else 0)
    outputs = []
    for scorer in (score_flat_python, _kernels.score_flat):
        out = (np.full(n_out, np.nan), np.full(n_out, -1, np.int8), np.full(len(lengths), np.nan))
        scorer(ids, offsets, bos, eos, model.vocabulary.bos_id, model.vocabulary.eos_id, model.order,
               model.vocab_size, model._hash_rows, model._hash_values, model._hash_base, model._hash_cap,
               model._values, *out)
        outputs.append(out)
    for python, compiled in zip(*outputs):
        np.testing.assert_array_equal(python, compiled)
    assert not np.isnan(outputs[1][2]).any() and (outputs[1][1] >= 1).all()


def test_ptb_like_arpa_round_trip_through_binary(tmp_path):
    arpa = shared_data("arpa", "kenlm", "test.arpa")
    model = read_arpa(arpa)
    write_binary(model, tmp_path / "t.bin")
    loaded = open_binary(tmp_path / "t.bin")
    sentences = ["looking on a little more loin", "this is a sentence", "unknown words here"]
    assert loaded.perplexity(sentences) == model.perplexity(sentences)


def test_read_arpa_opens_binary_models_too(tmp_path):
    model, _ = random_model(np.random.default_rng(11), 4, 3)
    write_binary(model, tmp_path / "m.bin")
    ids = np.asarray([0, 1, 2, 3], dtype=np.int32)
    np.testing.assert_array_equal(read_arpa(tmp_path / "m.bin").token_log10probs(ids)[0], model.token_log10probs(ids)[0])


@settings(max_examples=int(os.environ.get("HOSTILE_EXAMPLES", "40")), deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
@pytest.mark.parametrize("form", [{}, {"trie": True}, {"trie": True, "prob_bits": 4, "backoff_bits": 3}],
                         ids=["version-1", "version-2", "version-2-quantised"])
def test_damaged_binary_never_crashes_and_verify_refuses_it(tmp_path, form, data):
    """Bytes overwritten and the file cut anywhere. The structural open: a
    ValueError naming the file, or a model on which every query returns or raises such a
    ValueError (damage inside a table can change scores: that is what verification is
    for). ``verify=True``: a ValueError naming the file, or (damage only in alignment
    padding) a model whose scores equal the original's."""
    from varorder.testing.hostile import HypothesisChooser, mutate_bytes

    model, _ = random_model(np.random.default_rng(3), 6, 3)
    good = tmp_path / "good.bin"
    write_binary(model, good, **form)
    bad = tmp_path / "bad.bin"
    bad.write_bytes(mutate_bytes(HypothesisChooser(data), good.read_bytes(), max_edits=4))
    try:
        _every_query(open_binary(bad, verify=False))
    except ValueError as exc:
        assert str(bad) in str(exc), exc
    try:
        damaged = open_binary(bad, verify=True)
    except ValueError as exc:
        assert str(bad) in str(exc), exc
        return
    reference = open_binary(good)
    sentences = [["w1", "w2"], ["w3"], ["w2", "w2", "w5"], []]
    assert [damaged.score_sentence(" ".join(s)) for s in sentences] == \
        [reference.score_sentence(" ".join(s)) for s in sentences]


@pytest.fixture
def full_checks(monkeypatch):
    """The files :func:`open_binary` verified in full, in order."""
    import varorder.lm.binary as binary

    checked = []
    real = binary._verify_arrays
    monkeypatch.setattr(binary, "_verify_arrays", lambda *a: (checked.append(a[0]), real(*a)))
    return checked


def test_full_verification_is_paid_once_per_file_version(tmp_path, monkeypatch, full_checks):
    """The default open verifies in full a file it has not seen verified (a copy, or any
    change since), and only the structure of one that :func:`write_binary` wrote or an
    earlier open verified."""
    monkeypatch.setenv("VARORDER_CACHE_DIR", str(tmp_path / "cache"))
    model, _ = random_model(np.random.default_rng(5), 6, 3)
    written = tmp_path / "m.bin"
    write_binary(model, written)
    open_binary(written)
    assert full_checks == []
    copy = tmp_path / "copy.bin"
    copy.write_bytes(written.read_bytes())
    open_binary(copy)
    open_binary(copy)
    assert full_checks == [copy]
    data = bytearray(written.read_bytes())
    data[-70] ^= 0x01
    written.write_bytes(bytes(data))
    with pytest.raises(BinaryFormatError, match="checksum mismatch"):
        open_binary(written)
    open_binary(copy, verify=False)
    open_binary(copy, verify=True)
    assert full_checks == [copy, written, copy]


def test_an_unwritable_cache_means_full_verification_every_time(tmp_path, monkeypatch, full_checks):
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("")
    monkeypatch.setenv("VARORDER_CACHE_DIR", str(blocker / "cache"))
    model, _ = random_model(np.random.default_rng(5), 6, 3)
    path = tmp_path / "m.bin"
    write_binary(model, path)
    open_binary(path)
    open_binary(path)
    assert full_checks == [path, path]


def test_nonzero_reserved_preamble_field_is_refused(tmp_path):
    """The preamble's last field is written as 0; another value is damage (#33), refused naming it."""
    from varorder.lm.binary import _PREAMBLE

    model, _ = random_model(np.random.default_rng(0), 4, 2)
    write_binary(model, tmp_path / "m.bin")
    raw = bytearray((tmp_path / "m.bin").read_bytes())
    magic, version, length, crc, _ = _PREAMBLE.unpack(bytes(raw[:_PREAMBLE.size]))
    raw[:_PREAMBLE.size] = _PREAMBLE.pack(magic, version, length, crc, 7)
    (tmp_path / "bad.bin").write_bytes(bytes(raw))
    for verify in (False, True):
        with pytest.raises(BinaryFormatError, match="bad.bin.*reserved"):
            open_binary(tmp_path / "bad.bin", verify=verify)
