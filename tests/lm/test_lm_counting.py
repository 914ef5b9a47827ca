"""Counting a block at a time (varorder.lm.counting) and the memory budget of
train_from_files: the counts equal one pass of count_ngrams over the whole corpus, and
every path the budget chooses writes the in-memory model's ARPA file byte for byte."""

from __future__ import annotations

import gzip

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from _lm_oracle import random_corpus
from varorder.errors import ParameterError
from varorder.lm import ModifiedKneserNey, count_ngrams, read_corpus, train_from_files
from varorder.lm.arpa import write_arpa
from varorder.lm.counting import count_corpus, merge_two
from varorder.lm.estimate import merge_counts
from varorder.lm.external import parse_memory
from varorder.lm.train import ESTIMATE_BYTES_PER_NGRAM, estimate_bytes


def assert_identical(ours, theirs):
    """Tables, row order, suffix rows and integer widths."""
    assert ours.vocabulary.words == theirs.vocabulary.words
    assert ours.n_sentences == theirs.n_sentences
    assert ours.order == theirs.order
    for m in range(theirs.order):
        for a, b in ((ours.keys[m], theirs.keys[m]), (ours.counts[m], theirs.counts[m]),
                     (ours.suffix_rows[m], theirs.suffix_rows[m])):
            if b is None:
                assert a is None
                continue
            assert a.dtype == b.dtype
            np.testing.assert_array_equal(a, b)


def _write(tmp_path, seed, n_sentences=300, n_words=50, max_length=10, gz=False):
    rng = np.random.default_rng(seed)
    text = "\n".join(random_corpus(rng, n_sentences, n_words, max_length=max_length)) + "\n\n<unk> t1\n"
    path = tmp_path / f"c{seed}.txt{'.gz' if gz else ''}"
    path.write_bytes(gzip.compress(text.encode()) if gz else text.encode())
    return path


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 10_000), order=st.integers(1, 5), block=st.sampled_from([1, 7, 50, 400, 1 << 20]),
       min_count=st.integers(1, 2))
def test_block_counts_equal_one_pass(tmp_path_factory, seed, order, block, min_count):
    folder = tmp_path_factory.mktemp("c")
    paths = [_write(folder, seed, 120), _write(folder, seed + 1, 80, gz=True)]
    expected = count_ngrams(*read_corpus(paths, min_count=min_count)[1:], order,
                            read_corpus(paths, min_count=min_count)[0])
    assert_identical(count_corpus(paths, order, min_count=min_count, block_tokens=block), expected)


def test_compiled_merge_equals_merge_counts():
    rng = np.random.default_rng(5)
    vocabulary, ids, lengths = read_corpus_of(random_corpus(rng, 200, 30, max_length=9))
    cut = int(lengths[:90].sum())
    a = count_ngrams(ids[:cut], lengths[:90], 4, vocabulary)
    b = count_ngrams(ids[cut:], lengths[90:], 4, vocabulary)
    assert_identical(merge_two(a, b), merge_counts([a, b]))
    assert_identical(merge_two(a, b), count_ngrams(ids, lengths, 4, vocabulary))


def read_corpus_of(sentences):
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "s.txt"
        path.write_text("\n".join(sentences) + "\n")
        return read_corpus(path)


def test_spilled_parts_add_up_to_the_whole(tmp_path):
    path = _write(tmp_path, 11, 400)
    parts = []
    left = count_corpus(path, 3, block_tokens=64, spill=parts.append, spill_bytes=4000)
    assert len(parts) > 2
    whole = count_corpus(path, 3)
    assert_identical(merge_counts(parts + [left]), whole)


def test_empty_corpus_counts(tmp_path):
    path = tmp_path / "blank.txt"
    path.write_text("\n\n")
    counts = count_corpus(path, 3)
    assert counts.n_sentences == 0 and [len(k) for k in counts.keys[1:]] == [0, 0]


@pytest.fixture
def corpus(tmp_path):
    # ~25k n-grams of orders 1-3: the estimate needs more than 1 MB
    return str(_write(tmp_path, 3, 2500, 400, max_length=12))


def _expected_arpa(corpus, tmp_path):
    write_arpa(ModifiedKneserNey(order=3).fit(corpus).model_, tmp_path / "expected.arpa")
    return (tmp_path / "expected.arpa").read_bytes()


@pytest.mark.parametrize("memory, path, held, streamed", [
    (None, "auto", "memory", False),
    (64 << 20, "auto", "memory", False),  # fits: counted and estimated in memory
    (1 << 20, "auto", "disk", True),  # the estimate does not fit in 1 MB
    (64 << 20, "disk", "disk", True),
    (1 << 20, "memory", "memory", False),
])
def test_the_budget_chooses_the_path_and_every_path_writes_the_same_file(tmp_path, corpus, memory, path, held,
                                                                         streamed):
    expected = _expected_arpa(corpus, tmp_path)
    counts = [int(line.split("=")[1]) for line in expected.decode().splitlines() if line.startswith("ngram ")]
    assert (estimate_bytes(counts) > 1 << 20) and (estimate_bytes(counts) < 64 << 20)
    out = tmp_path / "model.arpa"
    trained = train_from_files(ModifiedKneserNey(order=3), corpus, memory=memory, temp_dir=tmp_path, output=out,
                               path=path)
    assert (trained.path, trained.streamed) == (held, streamed)
    assert out.read_bytes() == expected
    assert trained.ngram_counts == counts
    assert not [p for p in tmp_path.iterdir() if p.name.startswith("varorder-")]


def test_spilled_runs_are_merged_on_disk(tmp_path, corpus, monkeypatch):
    """A budget whose count tables fill up spills several runs; the merged file is the same."""
    import varorder.lm.train as train

    expected = _expected_arpa(corpus, tmp_path)
    monkeypatch.setattr(train, "_TABLE_SHARE", 0.005)  # tables of 5 KB under a 1 MB budget
    monkeypatch.setattr(train, "_BLOCK_SHARE", 0.0)  # the smallest blocks (1024 tokens)
    spilled = []
    original = train._Spilled.add
    monkeypatch.setattr(train._Spilled, "add", lambda self, counts: (spilled.append(1), original(self, counts)))
    for binary in (False, True):
        out = tmp_path / ("model.bin" if binary else "model.arpa")
        trained = train_from_files(ModifiedKneserNey(order=3), corpus, memory=1 << 20, temp_dir=tmp_path,
                                   output=out, binary=binary)
        assert trained.path == "disk" and trained.streamed != binary
        if binary:
            from varorder.lm.binary import open_binary

            write_arpa(open_binary(out), tmp_path / "back.arpa")
            out = tmp_path / "back.arpa"
        assert out.read_bytes() == expected
    assert len(spilled) > 4


def test_budget_parsing_and_refusals(tmp_path, corpus):
    assert parse_memory("100M") == 100 << 20
    assert parse_memory("1.5G") == int(1.5 * 2**30)
    assert 0 < parse_memory("20%") < parse_memory("100%")
    with pytest.raises(ParameterError):
        parse_memory("lots")
    with pytest.raises(ParameterError):
        train_from_files(ModifiedKneserNey(order=2), corpus, memory=1000, output=tmp_path / "x.arpa")
    with pytest.raises(ParameterError):
        train_from_files(ModifiedKneserNey(order=2), corpus, memory=1 << 20, path="sometimes")
    assert ESTIMATE_BYTES_PER_NGRAM * 10 == estimate_bytes([3, 7])


@pytest.mark.parametrize("text", ["a b\r\nc d a\r\n", "a\u00a0b c\n  \n\u2003a b\n", "x " * 3000 + "\ny z\n",
                                  "no newline at the end"])
def test_unusual_text_is_read_as_read_corpus_reads_it(tmp_path, text):
    path = tmp_path / "u.txt"
    path.write_text(text, encoding="utf-8")
    vocabulary, ids, lengths = read_corpus(path)
    assert_identical(count_corpus(path, 3, block_tokens=2), count_ngrams(ids, lengths, 3, vocabulary))


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 10_000), n=st.integers(0, 300), n_prefixes=st.integers(1, 40), vocab=st.integers(1, 30))
def test_radix_unique_equals_numpy_unique(seed, n, n_prefixes, vocab):
    from varorder.lm.estimate import _unique_packed

    rng = np.random.default_rng(seed)
    prefix, words = rng.integers(0, n_prefixes, n), rng.integers(0, vocab, n)
    keys, inverse, counts = _unique_packed(prefix, words, n_prefixes, vocab)
    expected = np.unique(prefix * vocab + words, return_inverse=True, return_counts=True)
    for got, want in zip((keys, inverse, counts), expected):
        np.testing.assert_array_equal(got, want)
