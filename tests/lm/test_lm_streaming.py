"""Estimation through disk (``varorder.lm.streaming``): the ARPA file it writes is the
in-memory estimator's, byte for byte, for every estimator and option, with pieces and
table ranges small enough that every pass runs several times; the Dask-sharded counting
gives the same file on a LocalCluster."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from local_clusters import local_cluster
from _lm_oracle import random_corpus
from varorder.cli.main import main
from varorder.lm.arpa import write_arpa
from varorder.lm import AbsoluteDiscounting, AdditiveSmoothing, ModifiedKneserNey
from varorder.lm._disk import DiskColumn, aligned_ranges, find_rows, gather, occurrences, search_sorted
from varorder.lm.streaming import train_on_disk

ESTIMATORS = {
    "kneser-ney": lambda n: ModifiedKneserNey(order=n),
    "kneser-ney refusing fallback": lambda n: ModifiedKneserNey(order=n, discount_fallback=None),
    "kneser-ney pruned": lambda n: ModifiedKneserNey(order=n, prune=[0, 1, 2][:n]),
    "kneser-ney limited vocabulary": lambda n: ModifiedKneserNey(order=n, limit_vocab=["t0", "t1", "t3", "t4", "t9"]),
    "kneser-ney pruned and limited": lambda n: ModifiedKneserNey(order=n, prune=[0, 1][:n], limit_vocab=["t0", "t2"]),
    "absolute": lambda n: AbsoluteDiscounting(order=n, discount=0.4, smoothing=0.1),
    "additive": lambda n: AdditiveSmoothing(order=n, alpha=0.5),
}


def _both(tmp_path, corpus, make, **pieces):
    """(in-memory ARPA bytes or the error, streaming ARPA bytes or the error)."""
    results = []
    for name, run in (("memory", lambda e, out: write_arpa(e.fit(corpus).model_, out)),
                      ("disk", lambda e, out: train_on_disk(e, corpus, out, memory=1 << 20, temp_dir=tmp_path,
                                                            **pieces))):
        out = tmp_path / f"{name}.arpa"
        estimator = make()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            try:
                run(estimator, out)
            except ValueError as error:
                results.append(("refused", str(error).split(";")[0]))
                continue
        results.append((out.read_bytes(), getattr(estimator, "discounts_", None)))
    return results


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(
    seed=st.integers(0, 2**32 - 1),
    method=st.sampled_from(sorted(ESTIMATORS)),
    order=st.integers(1, 5),
    n_sentences=st.integers(1, 120),
    n_words=st.integers(1, 30),
    table_rows=st.integers(1, 50),
)
def test_streaming_arpa_equals_in_memory_arpa(tmp_path, seed, method, order, n_sentences, n_words, table_rows):
    rng = np.random.default_rng(seed)
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(random_corpus(rng, n_sentences, n_words, max_length=9)) + "\n")
    vocab_size = n_words + 3
    # The smallest chunks allowed (one context's continuations) and tiny table ranges:
    # many aligned pieces and several passes per lookup.
    in_memory, on_disk = _both(tmp_path, corpus, lambda: ESTIMATORS[method](order),
                               chunk_rows=vocab_size + 1 + int(rng.integers(0, 20)), table_rows=table_rows)
    assert on_disk == in_memory
    assert sorted(p.name for p in tmp_path.iterdir()) == ["corpus.txt", "disk.arpa", "memory.arpa"] \
        or in_memory[0] == "refused"


@pytest.mark.parametrize("order", [1, 2, 3, 4, 5])
def test_streaming_equals_in_memory_on_a_larger_corpus(tmp_path, order):
    rng = np.random.default_rng(order)
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(random_corpus(rng, 2000, 200, max_length=15)) + "\n")
    in_memory, on_disk = _both(tmp_path, corpus, lambda: ModifiedKneserNey(order=order), chunk_rows=300,
                               table_rows=500)
    assert on_disk == in_memory
    assert in_memory[0].count(b"\n") > 200 * order


def test_smallest_budget_without_piece_overrides_equals_in_memory(tmp_path):
    """-S 1M with the sizes the budget alone gives: blocks of 1,024 tokens, so about 40
    runs per order merged through windows of a few hundred rows."""
    rng = np.random.default_rng(7)
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(random_corpus(rng, 4000, 300, max_length=12)) + "\n")
    in_memory, on_disk = _both(tmp_path, corpus, lambda: ModifiedKneserNey(order=4))
    assert on_disk == in_memory
    assert in_memory[0].count(b"\n") > 20000


def _corpus_and_in_memory_arpa(tmp_path, seed, n_sentences, n_words, max_length):
    """A random corpus file and the 4-gram ARPA file the in-memory estimator writes for it."""
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(random_corpus(np.random.default_rng(seed), n_sentences, n_words,
                                              max_length=max_length)) + "\n")
    expected = tmp_path / "expected.arpa"
    write_arpa(ModifiedKneserNey(order=4).fit(corpus).model_, expected)
    return corpus, expected


def test_dask_sharded_streaming_equals_in_memory(tmp_path):
    pytest.importorskip("dask.distributed")
    corpus, expected = _corpus_and_in_memory_arpa(tmp_path, seed=3, n_sentences=500, n_words=40, max_length=10)
    with local_cluster(processes=False) as (cluster, client):
        train_on_disk(ModifiedKneserNey(order=4), corpus, tmp_path / "got.arpa", memory=1 << 20, temp_dir=tmp_path,
                      client=client, n_shards=3, chunk_rows=60, table_rows=100)
    assert (tmp_path / "got.arpa").read_bytes() == expected.read_bytes()


def test_cli_streams_with_memory_budget(tmp_path):
    rng = np.random.default_rng(5)
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(random_corpus(rng, 400, 50, max_length=12)) + "\n")
    runner = CliRunner()
    outputs = {}
    for name, extra in (("memory", []), ("disk", ["-S", "1M", "-T", str(tmp_path)]),
                        ("disk-binary", ["-S", "1M", "-T", str(tmp_path), "--binary"])):
        out = tmp_path / f"{name}.model"
        result = runner.invoke(main, ["lm", "train", str(corpus), "-n", "3", "--prune", "0 1", "--discount-fallback",
                                     "-o", str(out), *extra])
        assert result.exit_code == 0, result.output
        outputs[name] = out
    assert outputs["disk"].read_bytes() == outputs["memory"].read_bytes()
    from varorder.lm.arpa import load_model

    ids = (np.array([1, 2, 3], dtype=np.int32), np.array([3], dtype=np.int64))
    assert load_model(outputs["disk-binary"]).perplexity(ids) == load_model(outputs["memory"]).perplexity(ids)


def test_corpus_spelling_out_markers_is_refused_with_its_line(tmp_path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("a b\nc <s> d\n")
    with pytest.raises(ValueError, match=r"corpus.txt:2: the corpus spells out"):
        train_on_disk(ModifiedKneserNey(order=2), corpus, tmp_path / "x.arpa", memory=1 << 20, temp_dir=tmp_path)


def _column(tmp_path, name, values, width=1):
    column = DiskColumn(tmp_path / name, np.asarray(values).dtype, width)
    column.append(values)
    return column.finish()


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data(), width=st.integers(1, 4), bits=st.sampled_from([2, 20]))
def test_range_passes_equal_in_memory_lookups(tmp_path, data, width, bits):
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    high = 2 ** min(bits, 4)
    table = np.unique(rng.integers(0, high, size=(data.draw(st.integers(1, 60)), width)).astype(np.int32), axis=0)
    queries = table[rng.integers(0, len(table), size=data.draw(st.integers(0, 80)))]
    table_rows, query_rows = data.draw(st.integers(1, 70)), data.draw(st.integers(1, 90))
    # bits = 20 with width 4 takes the byte-string comparison, 2 the packed integers.
    got = find_rows(_column(tmp_path, "t", table, width), lambda a, b: queries[a:b], len(queries),
                    DiskColumn(tmp_path / "out", np.int64), bits, table_rows, query_rows)
    expected = [next(i for i, row in enumerate(table.tolist()) if row == q) for q in queries.tolist()]
    assert got.read(0, len(got)).tolist() == expected
    values = rng.normal(size=len(table))
    index = _column(tmp_path, "i", np.asarray(expected, dtype=np.int64))
    gathered = gather(_column(tmp_path, "v", values), index, DiskColumn(tmp_path / "g", np.float64), table_rows,
                      query_rows)
    assert gathered.read(0, len(gathered)).tolist() == values[expected].tolist()
    counted = np.concatenate([c for _, c in occurrences(index, len(table), table_rows, query_rows)])
    assert counted.tolist() == np.bincount(np.asarray(expected, dtype=np.int64), minlength=len(table)).tolist()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(children=st.lists(st.integers(0, 6), min_size=1, max_size=30), parent_rows=st.integers(1, 8),
       extra=st.integers(0, 5))
def test_aligned_ranges_cover_both_tables_in_bounded_pieces(tmp_path, children, parent_rows, extra):
    prefix = np.repeat(np.arange(len(children)), children).astype(np.int64)
    child_rows = max(children) + 1 + extra
    column = _column(tmp_path, "p", prefix)
    pieces = list(aligned_ranges(column, len(children), child_rows, parent_rows))
    assert [lo for lo, *_ in pieces] == [0] + [hi for _, hi, *_ in pieces[:-1]]
    assert pieces[-1][1] == len(children)
    assert np.concatenate([rows for *_, rows in pieces]).tolist() == prefix.tolist()
    for lo, hi, start, rows in pieces:
        assert hi - lo <= parent_rows and len(rows) <= child_rows + 1
        assert np.all((rows >= lo) & (rows < hi))
        assert prefix[start:start + len(rows)].tolist() == rows.tolist()
    for value in range(len(children) + 2):
        assert search_sorted(column, value) == int(np.searchsorted(prefix, value))


def test_dask_with_its_own_shard_budget_and_the_cluster_closed_before_merging(tmp_path):
    """Shards count under their own budget and the cluster is closed once the runs are
    written (the benchmark's 2 GB process tree): the file is still the in-memory and the
    on-disk one, and the merge runs with no worker left."""
    pytest.importorskip("dask.distributed")
    corpus, expected = _corpus_and_in_memory_arpa(tmp_path, seed=11, n_sentences=3000, n_words=60, max_length=12)
    train_on_disk(ModifiedKneserNey(order=4), corpus, tmp_path / "disk.arpa", memory=2 << 20, temp_dir=tmp_path)
    closed = []
    with local_cluster(processes=False) as (cluster, client):
        def close_cluster():
            client.close()
            cluster.close()
            closed.append(cluster.status.name)

        train_on_disk(ModifiedKneserNey(order=4), corpus, tmp_path / "dask.arpa", memory=2 << 20, temp_dir=tmp_path,
                      client=client, shard_memory=1 << 20, after_counting=close_cluster)
    assert closed == ["closed"]
    assert (tmp_path / "disk.arpa").read_bytes() == expected.read_bytes()
    assert (tmp_path / "dask.arpa").read_bytes() == expected.read_bytes()


def test_a_shard_budget_below_one_megabyte_is_refused(tmp_path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("a b c\n")
    with pytest.raises(ValueError, match="shard memory budget"):
        train_on_disk(ModifiedKneserNey(order=2), corpus, tmp_path / "out.arpa", memory=2 << 20, temp_dir=tmp_path,
                      shard_memory=1000)
