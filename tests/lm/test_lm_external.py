"""Out-of-memory counting: sorted runs on disk and Dask-sharded counting give exactly the
in-memory counts, hence exactly the same modified Kneser-Ney model."""

from __future__ import annotations

import gzip

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from local_clusters import local_cluster
from _lm_oracle import random_corpus, table_of
from varorder.lm import ModifiedKneserNey, count_ngrams, read_corpus
from varorder.lm.external import (_blocks, block_tokens_for, count_ngrams_on_disk, merge_bytes_per_row, merge_runs,
                                  parse_memory, vocabulary_of)


def assert_same_counts(ours, theirs):
    assert ours.vocabulary.words == theirs.vocabulary.words
    assert ours.n_sentences == theirs.n_sentences
    for m in range(theirs.order):
        np.testing.assert_array_equal(ours.keys[m], theirs.keys[m])
        np.testing.assert_array_equal(ours.counts[m], theirs.counts[m])
        if m:
            np.testing.assert_array_equal(ours.suffix_rows[m], theirs.suffix_rows[m])


@pytest.fixture()
def corpus_files(tmp_path):
    rng = np.random.default_rng(0)
    first = tmp_path / "a.txt"
    first.write_text("\n".join(random_corpus(rng, 400, 60, max_length=12)) + "\n\n<unk> t1\n")
    second = tmp_path / "b.txt.gz"
    second.write_bytes(gzip.compress(("\n".join(random_corpus(rng, 300, 80, max_length=9)) + "\n").encode()))
    return [first, second]


@pytest.mark.parametrize("order", [1, 2, 4])
@pytest.mark.parametrize("min_count", [1, 2])
def test_on_disk_counts_equal_in_memory_counts(tmp_path, corpus_files, order, min_count):
    vocabulary, ids, lengths = read_corpus(corpus_files, min_count=min_count)
    expected = count_ngrams(ids, lengths, order, vocabulary)
    # A 1 MiB budget makes blocks of a few thousand tokens: several runs per order.
    got = count_ngrams_on_disk(corpus_files, order, memory=1 << 20, temp_dir=tmp_path, min_count=min_count)
    assert_same_counts(got, expected)
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith("varorder-counts-")] == []


def test_on_disk_estimate_equals_in_memory_estimate(tmp_path, corpus_files):
    counts = count_ngrams_on_disk(corpus_files, 3, memory=1 << 20, temp_dir=tmp_path)
    from_disk = ModifiedKneserNey(order=3).fit_counts(counts).model_
    in_memory = ModifiedKneserNey(order=3).fit(corpus_files).model_
    assert table_of(from_disk) == table_of(in_memory)


def test_merge_uses_small_ranges_and_sums_equal_rows():
    rng = np.random.default_rng(1)
    runs, expected = [], {}
    for size in (50, 1, 80, 50, 20):
        # A run holds each row once (a counted block), sorted; runs overlap.
        run = {}
        for row, count in zip(map(tuple, rng.integers(0, 6, size=(size, 3)).tolist()), rng.integers(1, 5, size=size)):
            run[row] = run.get(row, 0) + int(count)
            expected[row] = expected.get(row, 0) + int(count)
        rows = sorted(run)
        runs.append((np.array(rows, dtype=np.int32).reshape(-1, 3), np.array([run[r] for r in rows])))
    parts = list(merge_runs(runs, 6, memory=merge_bytes_per_row(3) * 40))  # windows of 40 rows in all
    assert len(parts) > 1
    assert max(len(c) for _, c in parts) <= 40
    rows = np.concatenate([r for r, _ in parts])
    counts = np.concatenate([c for _, c in parts])
    assert [tuple(r) for r in rows.tolist()] == sorted(expected)
    assert counts.tolist() == [expected[r] for r in sorted(expected)]


@settings(max_examples=60, deadline=None)
@given(runs=st.lists(st.dictionaries(st.tuples(*[st.integers(0, 4)] * 3), st.integers(1, 9), max_size=40), max_size=7),
       window_rows=st.integers(1, 60))
def test_merge_sums_repeat_free_runs_in_windows_of_bounded_size(runs, window_rows):
    expected = {}
    arrays = []
    for run in runs:
        for row, count in run.items():
            expected[row] = expected.get(row, 0) + count
        rows = sorted(run)
        arrays.append((np.array(rows, dtype=np.int32).reshape(-1, 3), np.array([run[r] for r in rows], dtype=np.int64)))
    memory = merge_bytes_per_row(3) * window_rows
    parts = list(merge_runs(arrays, 5, memory=memory))
    got = [tuple(r) for rows, _ in parts for r in rows.tolist()]
    assert got == sorted(expected)
    assert [c for _, counts in parts for c in counts.tolist()] == [expected[r] for r in got]
    # Every step merges at most the rows the windows hold together.
    windows = max(1, window_rows // max(1, sum(1 for run in runs if run)))
    assert all(len(counts) <= windows * len(arrays) for _, counts in parts)


def test_blocks_hold_at_most_the_budgeted_tokens(corpus_files):
    vocabulary = vocabulary_of(corpus_files)
    blocks = list(_blocks(corpus_files, vocabulary, 50, batch_bytes=200))
    _, ids, lengths = read_corpus(corpus_files)
    assert len(blocks) > 10
    assert all(len(ids_) <= 50 or len(lengths_) == 1 for ids_, lengths_ in blocks)
    assert np.array_equal(np.concatenate([b[0] for b in blocks]), ids)
    assert np.array_equal(np.concatenate([b[1] for b in blocks]), lengths)
    assert block_tokens_for(1 << 30, 3) > block_tokens_for(1 << 30, 5) > block_tokens_for(1 << 20, 3) == 1024


@pytest.mark.parametrize("text, expected", [("2G", 2 * 2**30), ("500M", 500 * 2**20), ("1.5k", 1536), ("800", 800)])
def test_parse_memory(text, expected):
    assert parse_memory(text) == expected


def test_parse_memory_refuses_nonsense():
    with pytest.raises(ValueError, match="memory budget"):
        parse_memory("two gigs")


def test_dask_sharded_counts_equal_in_memory_counts(corpus_files):
    pytest.importorskip("dask.distributed")
    from varorder.lm.external import count_ngrams_dask

    vocabulary, ids, lengths = read_corpus(corpus_files)
    expected = count_ngrams(ids, lengths, 3, vocabulary)
    with local_cluster(processes=False) as (cluster, client):
        got = count_ngrams_dask(corpus_files, 3, client, n_shards=3)
    assert_same_counts(got, expected)
