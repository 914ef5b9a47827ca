"""varorder.parallel: every backend maps in item order and the fixed-order reduction makes the
result independent of the backend; n-gram counts merged from shards equal one pass."""

from __future__ import annotations

import concurrent.futures

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from local_clusters import local_cluster
from varorder.parallel import (DaskExecutor, Executor, JoblibExecutor, SerialExecutor, ThreadExecutor,
                               as_executor, reduce_in_order)


def _noisy_sum(shard, scale):
    # floating-point sums whose result depends on the order of addition
    return float(np.sum(np.asarray(shard, dtype=np.float64) * scale))


SHARDS = [[0.1 * k + 1e-9 * j for j in range(50)] for k in range(7)]


def _reduced(executor: Executor) -> float:
    results = executor.map(_noisy_sum, SHARDS, 1.0 / 3.0)
    assert len(results) == len(SHARDS)
    return reduce_in_order(results, lambda a, b: a + b)


def test_every_local_backend_gives_the_serial_numbers_bit_for_bit():
    expected = _reduced(SerialExecutor())
    with ThreadExecutor(3) as threads:
        assert _reduced(threads) == expected
    assert _reduced(JoblibExecutor(2, backend="threading")) == expected
    assert _reduced(JoblibExecutor(2)) == expected  # loky worker processes


def test_map_keeps_item_order_when_items_finish_out_of_order():
    import time

    def slow_first(k, _):
        time.sleep(0.02 * (5 - k))
        return k

    with ThreadExecutor(5) as threads:
        assert threads.map(slow_first, range(5), None) == [0, 1, 2, 3, 4]


def test_as_executor_builds_each_backend():
    assert isinstance(as_executor(), SerialExecutor)
    assert isinstance(as_executor(n_jobs=1), SerialExecutor)
    assert isinstance(as_executor(n_jobs=2), JoblibExecutor)
    pool = concurrent.futures.ThreadPoolExecutor(2)
    wrapped = as_executor(pool)
    assert isinstance(wrapped, ThreadExecutor) and wrapped.pool is pool
    wrapped.close()  # a pool the caller gave stays open
    assert pool.submit(int, "3").result() == 3
    pool.shutdown()
    serial = SerialExecutor()
    assert as_executor(serial) is serial


def test_as_executor_follows_an_active_joblib_parallel_config():
    joblib = pytest.importorskip("joblib")
    with joblib.parallel_config(n_jobs=2, backend="threading"):
        executor = as_executor()
        assert isinstance(executor, JoblibExecutor)
        assert _reduced(executor) == _reduced(SerialExecutor())
    assert isinstance(as_executor(), SerialExecutor)


@pytest.mark.parametrize("n_jobs", [0, 2.5, "2", True])
def test_as_executor_refuses_a_bad_n_jobs_naming_it(n_jobs):
    with pytest.raises(ValueError, match="n_jobs"):
        as_executor(n_jobs=n_jobs)


def test_as_executor_refuses_an_unknown_executor():
    with pytest.raises(TypeError, match="executor"):
        as_executor(executor=object())


def test_unreachable_scheduler_is_a_value_error():
    pytest.importorskip("distributed")
    with pytest.raises(ValueError, match="cannot reach the Dask scheduler"):
        as_executor(dask_scheduler="tcp://127.0.0.1:1", timeout=0.5)


@pytest.mark.slow
def test_dask_local_cluster_gives_the_serial_numbers():
    pytest.importorskip("distributed")
    with local_cluster(processes=False) as (cluster, client):
        executor = as_executor(client)
        assert isinstance(executor, DaskExecutor) and executor.n_workers == 2
        assert _reduced(executor) == _reduced(SerialExecutor())
        executor.close()  # a client the caller gave stays open
        assert client.submit(int, "4").result() == 4


def test_reduce_in_order_is_a_left_fold():
    assert reduce_in_order(["a", "b", "c"], lambda x, y: f"({x}{y})") == "((ab)c)"
    assert reduce_in_order([], lambda x, y: x + y, start=5) == 5
    assert reduce_in_order([1, 2], lambda x, y: x - y, start=10) == 7


# ---- n-gram counts merge -----------------------------------------------------------------------

def _counts(sentences, order, vocabulary):
    from varorder.lm.estimate import count_ngrams

    lengths = np.array([len(s) for s in sentences], dtype=np.int64)
    ids = np.concatenate([vocabulary.encode(s) for s in sentences]) if sentences else np.zeros(0, np.int64)
    return count_ngrams(ids.astype(np.int64), lengths, order, vocabulary)


def _assert_same_counts(a, b):
    assert a.order == b.order and a.n_sentences == b.n_sentences
    for m in range(a.order):
        np.testing.assert_array_equal(a.keys[m], b.keys[m])
        np.testing.assert_array_equal(a.counts[m], b.counts[m])
        assert a.counts[m].dtype == b.counts[m].dtype
        if m:
            np.testing.assert_array_equal(a.suffix_rows[m], b.suffix_rows[m])
            assert a.suffix_rows[m].dtype == b.suffix_rows[m].dtype


@settings(max_examples=40, deadline=None, derandomize=True)
@given(corpus=st.lists(st.lists(st.sampled_from("abcde"), min_size=0, max_size=7), min_size=1, max_size=12),
       order=st.integers(1, 5), cuts=st.lists(st.integers(0, 12), max_size=3))
def test_counts_merged_from_shards_equal_one_pass(corpus, order, cuts):
    from varorder.lm.corpus import Vocabulary
    from varorder.lm.estimate import merge_counts

    vocabulary = Vocabulary(list("abcde"))
    bounds = sorted({0, len(corpus), *[min(c, len(corpus)) for c in cuts]})
    shards = [corpus[lo:hi] for lo, hi in zip(bounds[:-1], bounds[1:])]
    whole = _counts(corpus, order, vocabulary)
    parts = [_counts(s, order, vocabulary) for s in shards]
    _assert_same_counts(merge_counts(parts), whole)
    _assert_same_counts(parts[0].merge(*parts[1:]), whole)


@pytest.mark.filterwarnings("ignore:modified Kneser-Ney")
def test_merged_counts_estimate_the_one_pass_model():
    from varorder.lm import ModifiedKneserNey
    from varorder.lm.corpus import Vocabulary

    rng = np.random.default_rng(0)
    vocabulary = Vocabulary([f"w{k}" for k in range(12)])
    corpus = [[f"w{k}" for k in rng.integers(0, 12, rng.integers(1, 9))] for _ in range(200)]
    whole = _counts(corpus, 3, vocabulary)
    merged = _counts(corpus[:70], 3, vocabulary).merge(_counts(corpus[70:], 3, vocabulary))
    a = ModifiedKneserNey(order=3).fit_counts(whole).model_
    b = ModifiedKneserNey(order=3).fit_counts(merged).model_
    assert a.score_sentence("w1 w2 w3".split()) == b.score_sentence("w1 w2 w3".split())


def test_merge_refuses_different_vocabularies_and_orders():
    from varorder.lm.corpus import Vocabulary

    a = _counts([["a", "b"]], 2, Vocabulary(list("ab")))
    with pytest.raises(ValueError, match="different vocabularies"):
        a.merge(_counts([["a", "b"]], 2, Vocabulary(list("ba"))))
    with pytest.raises(ValueError, match="order 3"):
        a.merge(_counts([["a", "b"]], 3, Vocabulary(list("ab"))))


# ---- sharded objectives ------------------------------------------------------------------------

def _chain_problem(seed=0, n_sequences=40, n_features=30, n_labels=4):
    import scipy.sparse as sp

    rng = np.random.default_rng(seed)
    lengths = rng.integers(1, 9, n_sequences)
    rows = int(lengths.sum())
    X = sp.random(rows, n_features, density=0.2, random_state=seed, format="csr")
    gold = rng.integers(0, n_labels, rows)
    theta = rng.normal(scale=0.3, size=(n_features + n_labels + 2) * n_labels)
    return X, lengths, gold, n_labels, theta


def _shards(X, lengths, gold, K, n_shards):
    from varorder.models.crf import ChainObjective
    from varorder.models.sharded import shard_bounds

    offsets = np.concatenate([[0], np.cumsum(lengths)])
    return [ChainObjective(X[offsets[a]:offsets[b]], lengths[a:b], gold[offsets[a]:offsets[b]], K)
            for a, b in shard_bounds(lengths, n_shards)]


def test_shard_bounds_cover_every_sequence_once_in_order():
    from varorder.models.sharded import shard_bounds

    rng = np.random.default_rng(1)
    for _ in range(50):
        lengths = rng.integers(1, 20, rng.integers(1, 30))
        for n in (1, 2, 3, 7, 100):
            bounds = shard_bounds(lengths, n)
            assert bounds[0][0] == 0 and bounds[-1][1] == lengths.size and len(bounds) <= n
            assert all(a < b for a, b in bounds) and all(b == c for (_, b), (c, _) in zip(bounds, bounds[1:]))
    with pytest.raises(ValueError, match="n_shards"):
        shard_bounds([3, 4], 0)


def test_sharded_objective_equals_the_whole_and_is_the_same_on_every_backend():
    from varorder.models.crf import ChainObjective
    from varorder.models.sharded import ShardedObjective

    X, lengths, gold, K, theta = _chain_problem()
    whole_f, whole_g = ChainObjective(X, lengths, gold, K)(theta)
    serial_f, serial_g = ShardedObjective(_shards(X, lengths, gold, K, 4))(theta)
    # only the order of additions differs from the unsharded objective
    assert serial_f == pytest.approx(whole_f, rel=1e-12)
    np.testing.assert_allclose(serial_g, whole_g, rtol=1e-12, atol=1e-12)
    with ThreadExecutor(2) as threads:
        f, g = ShardedObjective(_shards(X, lengths, gold, K, 4), threads)(theta)
    assert f == serial_f and np.array_equal(g, serial_g)
    f, g = ShardedObjective(_shards(X, lengths, gold, K, 4), JoblibExecutor(2, backend="threading"))(theta)
    assert f == serial_f and np.array_equal(g, serial_g)
    # the gradient is the derivative of the value (central differences on a few coordinates)
    objective = ShardedObjective(_shards(X, lengths, gold, K, 3))
    rng = np.random.default_rng(2)
    _, g = objective(theta)
    for i in rng.choice(theta.size, 6, replace=False):
        step = np.zeros_like(theta)
        step[i] = 1e-6
        numeric = (objective(theta + step)[0] - objective(theta - step)[0]) / 2e-6
        assert numeric == pytest.approx(g[i], rel=1e-5, abs=1e-6)


# ---- learners on executors ---------------------------------------------------------------------

def _tagging_data(seed=0, n=60):
    rng = np.random.default_rng(seed)
    words = [f"w{k}" for k in range(15)]
    X, y = [], []
    for _ in range(n):
        length = int(rng.integers(1, 8))
        sentence = [str(rng.choice(words)) for _ in range(length)]
        X.append([{"w=" + w: 1.0, "bias": 1.0} for w in sentence])
        y.append(["A" if int(w[1:]) % 3 == 0 else ("B" if int(w[1:]) % 3 == 1 else "C") for w in sentence])
    return X, y


def _weights(crf):
    return [crf.emission_weights_, crf.transition_weights_, crf.start_weights_, crf.end_weights_]


def test_crf_on_an_executor_trains_the_bit_identical_model():
    from varorder.models import CRF

    X, y = _tagging_data()
    params = dict(max_iterations=15, c2=0.1, n_shards=4)
    serial = CRF(**params).fit(X, y)
    for executor_kwargs in ({"n_jobs": 2}, {"executor": ThreadExecutor(2)}):
        parallel = CRF(**params, **executor_kwargs).fit(X, y)
        for a, b in zip(_weights(serial), _weights(parallel)):
            assert np.array_equal(a, b)
    whole = CRF(max_iterations=15, c2=0.1).fit(X, y)  # one shard: only the order of additions differs
    for a, b in zip(_weights(serial), _weights(whole)):
        np.testing.assert_allclose(a, b, rtol=1e-7, atol=1e-9)


def test_crf_refuses_executor_settings_that_do_not_apply():
    from varorder.models import CRF

    X, y = _tagging_data(n=5)
    with pytest.raises(ValueError, match="n_jobs"):
        CRF(n_jobs=0).fit(X, y)
    with pytest.raises(ValueError, match="lbfgs"):
        CRF(algorithm="sgd", n_jobs=2).fit(X, y)
    with pytest.raises(ValueError, match="n_shards"):
        CRF(n_shards=0).fit(X, y)


@pytest.mark.slow
def test_crf_on_a_local_dask_cluster_of_two_processes_trains_the_same_model():
    pytest.importorskip("distributed")
    from varorder.models import CRF

    X, y = _tagging_data()
    params = dict(max_iterations=10, c2=0.1, n_shards=4)
    serial = CRF(**params).fit(X, y)
    with local_cluster(processes=True) as (cluster, client):
        parallel = CRF(**params, executor=client).fit(X, y)
    for a, b in zip(_weights(serial), _weights(parallel)):
        assert np.array_equal(a, b)


def test_hmm_baum_welch_on_an_executor_gives_the_bit_identical_model():
    from varorder.models import HMM

    rng = np.random.default_rng(3)
    X = [[str(s) for s in rng.integers(0, 6, rng.integers(1, 9))] for _ in range(50)]
    params = dict(n_states=3, max_iterations=8, random_state=0, tol=0.0, n_shards=5)
    serial = HMM(**params).fit(X)
    for executor_kwargs in ({"n_jobs": 2}, {"executor": ThreadExecutor(2)}):
        parallel = HMM(**params, **executor_kwargs).fit(X)
        for name in ("log_start_", "log_transitions_", "log_emissions_"):
            assert np.array_equal(getattr(serial, name), getattr(parallel, name))
        assert [h["log_likelihood"] for h in serial.history_] == [h["log_likelihood"] for h in parallel.history_]
    whole = HMM(**{**params, "n_shards": None}).fit(X)
    np.testing.assert_allclose(whole.log_emissions_, serial.log_emissions_, rtol=1e-9, atol=1e-9)
    with pytest.raises(ValueError, match="n_jobs"):
        HMM(n_states=2, n_jobs=0).fit(X)


class _DiesOnce:
    """A shard objective whose first evaluation anywhere kills the worker process running it."""

    def __init__(self, objective, marker):
        self.objective = objective
        self.marker = marker

    def __call__(self, theta):
        import os

        if not os.path.exists(self.marker):
            with open(self.marker, "w"):
                pass
            os._exit(1)  # the worker dies mid-iteration, its task unfinished
        return self.objective(theta)


@pytest.mark.slow
def test_a_worker_lost_mid_iteration_changes_nothing(tmp_path):
    pytest.importorskip("distributed")
    from varorder.models.sharded import ShardedObjective

    X, lengths, gold, K, theta = _chain_problem(seed=4)
    expected = ShardedObjective(_shards(X, lengths, gold, K, 3))(theta)
    shards = _shards(X, lengths, gold, K, 3)
    shards[1] = _DiesOnce(shards[1], str(tmp_path / "died"))
    with local_cluster(processes=True) as (cluster, client):
        objective = ShardedObjective(shards, client)
        value, grad = objective(theta)
    assert (tmp_path / "died").exists()
    assert value == expected[0] and np.array_equal(grad, expected[1])


@pytest.mark.parametrize("conjoin", [False, True])
def test_memm_on_an_executor_trains_the_bit_identical_model(conjoin):
    from varorder.models import MEMM

    X, y = _tagging_data(seed=5)
    params = dict(max_iterations=12, c2=0.1, n_shards=3, conjoin_previous=conjoin)
    serial = MEMM(**params).fit(X, y)
    parallel = MEMM(**params, executor=ThreadExecutor(2)).fit(X, y)
    joblib_fit = MEMM(**params, n_jobs=2).fit(X, y)
    for name in ("emission_weights_", "transition_weights_", "start_weights_"):
        assert np.array_equal(getattr(serial, name), getattr(parallel, name))
        assert np.array_equal(getattr(serial, name), getattr(joblib_fit, name))
    whole = MEMM(**{**params, "n_shards": None}).fit(X, y)
    np.testing.assert_allclose(whole.emission_weights_, serial.emission_weights_, rtol=1e-7, atol=1e-9)


def _conllu_files(tmp_path, n_files=3, seed=0):
    rng = np.random.default_rng(seed)
    lexicon = {"the": "DET", "a": "DET", "dog": "NOUN", "cat": "NOUN", "runs": "VERB", "sleeps": "VERB",
               "big": "ADJ", ".": "PUNCT", "old": "ADJ"}
    paths, all_words, all_tags = [], [], []
    for f in range(n_files):
        lines = []
        for s in range(int(rng.integers(4, 9))):
            words = [str(rng.choice(["the", "a"]))] + ([str(rng.choice(["big", "old"]))] if rng.random() < .5 else [])
            words += [str(rng.choice(["dog", "cat"])), str(rng.choice(["runs", "sleeps"])), "."]
            lines.append(f"# sent_id = {f}-{s}")
            lines += [f"{i}\t{w}\t{w}\t{lexicon[w]}\t_\t_\t0\tdep\t_\t_" for i, w in enumerate(words, 1)]
            lines.append("")
            all_words.append(words)
            all_tags.append([lexicon[w] for w in words])
        path = tmp_path / f"part{f}.conllu"
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        paths.append(str(path))
    return paths, all_words, all_tags


def test_crf_fit_sources_reads_shards_where_they_run_and_equals_fit_on_the_concatenation(tmp_path):
    from varorder.io.conllu import read_tagged
    from varorder.models import CRF

    paths, words, tags = _conllu_files(tmp_path)
    params = dict(max_iterations=10, c2=0.1, features="pos", min_feature_count=2)
    serial = CRF(**params).fit_sources(paths, read_tagged)
    threaded = CRF(**params, executor=ThreadExecutor(2)).fit_sources(paths, read_tagged)
    processes = CRF(**params, n_jobs=2).fit_sources(paths, read_tagged)
    whole = CRF(**params).fit(words, tags)
    assert serial.feature_names_ == whole.feature_names_ and serial.classes_ == whole.classes_
    for other in (threaded, processes):
        for a, b in zip(_weights(serial), _weights(other)):
            assert np.array_equal(a, b)
    for a, b in zip(_weights(serial), _weights(whole)):
        np.testing.assert_allclose(a, b, rtol=1e-7, atol=1e-9)
    assert serial.predict(words[:3]) == whole.predict(words[:3])
    with pytest.raises(ValueError, match="sources is empty"):
        CRF().fit_sources([], read_tagged)


@pytest.mark.slow
def test_crf_fit_sources_on_a_dask_cluster_writes_the_local_model_file(tmp_path):
    pytest.importorskip("distributed")
    from varorder.io.conllu import read_tagged
    from varorder.models import CRF

    paths, _, _ = _conllu_files(tmp_path, n_files=4, seed=1)
    params = dict(max_iterations=8, c2=0.1, features="pos")
    CRF(**params).fit_sources(paths, read_tagged).save(tmp_path / "local.npz")
    with local_cluster(processes=True) as (cluster, client):
        CRF(**params, executor=client).fit_sources(paths, read_tagged).save(tmp_path / "dask.npz")
    local, remote = np.load(tmp_path / "local.npz"), np.load(tmp_path / "dask.npz")
    assert sorted(local.files) == sorted(remote.files)
    for name in local.files:
        assert np.array_equal(local[name], remote[name]), name
