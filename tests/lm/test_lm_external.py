"""Out-of-memory counting: sorted runs on disk and Dask-sharded counting give exactly the
in-memory counts, hence exactly the same modified Kneser-Ney model."""

from __future__ import annotations

import gzip

import numpy as np
import pytest

from _lm_oracle import random_corpus, table_of
from varorder.lm import ModifiedKneserNey, count_ngrams, read_corpus
from varorder.lm.external import count_ngrams_on_disk, merge_runs, parse_memory


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
    for _ in range(5):
        rows = rng.integers(0, 6, size=(50, 3)).astype(np.int32)
        counts = rng.integers(1, 5, size=50)
        for row, count in zip(map(tuple, rows), counts):
            expected[row] = expected.get(row, 0) + int(count)
        order = np.lexsort(rows.T[::-1])
        runs.append((rows[order], counts[order]))
    parts = list(merge_runs(runs, 6, memory=3 * (4 * 3 + 8) * 40))  # ranges of about 40 rows
    assert len(parts) > 1
    rows = np.concatenate([r for r, _ in parts])
    counts = np.concatenate([c for _, c in parts])
    assert [tuple(r) for r in rows.tolist()] == sorted(expected)
    assert counts.tolist() == [expected[r] for r in sorted(expected)]


@pytest.mark.parametrize("text, expected", [("2G", 2 * 2**30), ("500M", 500 * 2**20), ("1.5k", 1536), ("800", 800)])
def test_parse_memory(text, expected):
    assert parse_memory(text) == expected


def test_parse_memory_refuses_nonsense():
    with pytest.raises(ValueError, match="memory budget"):
        parse_memory("two gigs")


def test_dask_sharded_counts_equal_in_memory_counts(corpus_files):
    distributed = pytest.importorskip("dask.distributed")
    from varorder.lm.external import count_ngrams_dask

    vocabulary, ids, lengths = read_corpus(corpus_files)
    expected = count_ngrams(ids, lengths, 3, vocabulary)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:
        got = count_ngrams_dask(corpus_files, 3, client, n_shards=3)
    assert_same_counts(got, expected)
