"""The aligner's E-steps on worker threads (issue #21): the same numbers, bit for bit, on any thread count.

The HMM E-step runs its chain batches on :func:`varorder.engine.threads.map_in_order`'s pool and IBM 1's
two directions run concurrently on a shard; each writes its own outputs and the order-dependent sums
(jump counts, log-normalizers, count totals) are made in a fixed order afterwards. These tests compare
the threaded paths with the serial ones on small random corpora with several batches per shard.
"""

from __future__ import annotations

import threading

import numba
import numpy as np
import pytest

from varorder.agree.align import HMMAligner, IBM1, _add_jump_moves, _jump_moves
from varorder.agree.aligner import WordAligner
from varorder.engine import threads

from test_agree_align import _corpus, _models
from test_agree_banded import _banded_twin

TWO = pytest.mark.skipif(numba.config.NUMBA_NUM_THREADS < 2, reason="needs NUMBA_NUM_THREADS >= 2")


@pytest.fixture(autouse=True)
def _restore_policy():
    before = threads.get_threads()
    yield
    threads.set_threads(before)


def _jump_counts_reference(node, edge_sum, D):
    """The expected jump counts from their definition: the first position jumps from −1 to word u (bucket
    u + 1), every transition from word or NULL state at position p into word u jumps u − p; buckets
    clipped to [−D, D]."""
    B, L, K = node.shape
    S = K // 2
    jumps = np.zeros(2 * D + 1)
    np.add.at(jumps, np.clip(np.arange(S) + 1, -D, D) + D, node[:, 0, :S].sum(axis=0))
    p = np.arange(K) % S  # state i < S is word i, state S + i is NULL after word i
    d = np.arange(S)[None, :] - p[:, None]
    np.add.at(jumps, np.clip(d, -D, D) + D, edge_sum[:, :, :S].sum(axis=0))
    return jumps


@pytest.mark.parametrize("seed", range(6))
def test_split_jump_counts_equal_their_definition(seed):
    rng = np.random.default_rng(seed)
    S, B, L, D = int(rng.integers(1, 9)), int(rng.integers(1, 6)), int(rng.integers(1, 7)), int(rng.integers(1, 4))
    # small integers: every sum is exact, so any order of the additions gives the same bits
    node = rng.integers(0, 50, (B, L, 2 * S)).astype(float)
    edge_sum = rng.integers(0, 50, (B, 2 * S, 2 * S)).astype(float)
    jumps = np.zeros(2 * D + 1)
    first, moves = _jump_moves(node, edge_sum)
    _add_jump_moves(first, moves, D, jumps)
    np.testing.assert_array_equal(jumps, _jump_counts_reference(node, edge_sum, D))


def _estep_outputs(model, shard, threads_count, add_into=None):
    threads.set_threads(threads_count)
    shared = model.shared_log_potentials(shard)
    out = None if add_into is None else add_into.copy()
    stats = model.expected_statistics(shard, shared, private_scale=1.5, add_shared_to=out)
    return (stats.shared if out is None else out), stats.private["null"], stats.private["jumps"], stats.log_normalizer


@TWO
@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("banded", [False, True])
def test_hmm_estep_on_worker_threads_equals_the_serial_one(seed, banded):
    """Many batches (lengths 1–9, ≥ 32 sentences so the pool is used), with and without the banded
    sentences that run after the full batches, writing and adding into another direction's µ."""
    pairs, shard, index, ev, fv = _corpus(seed, n=120, max_len=9, vocab=6)
    for model in _models("hmm", index, ev, fv, seed):
        if banded:
            model.band = 4  # sentences longer than 4 source words take the banded engine
        base = np.random.default_rng(seed).random(shard.edge_offsets[-1])
        for add_into in (None, base):
            one = _estep_outputs(model, shard, 1, add_into)
            two = _estep_outputs(model, shard, 2, add_into)
            for a, b in zip(one, two):
                np.testing.assert_array_equal(a, b)


@TWO
def test_always_banded_twin_still_equals_the_full_computation_on_threads():
    pairs, shard, index, ev, fv = _corpus(3, n=40, max_len=6)
    threads.set_threads(2)
    for model in _models("hmm", index, ev, fv, 3):
        twin = _banded_twin(model, 6)
        full = model.expected_statistics(shard, model.shared_log_potentials(shard))
        banded = twin.expected_statistics(shard, twin.shared_log_potentials(shard))
        np.testing.assert_allclose(banded.shared, full.shared, atol=1e-10)
        np.testing.assert_allclose(banded.private["jumps"], full.private["jumps"], atol=1e-9)


@TWO
@pytest.mark.parametrize("training", ["independent", "agreement"])
def test_aligner_trained_on_one_and_two_threads_is_bit_identical(training):
    """IBM 1's directions concurrently on each shard and the HMM's batches on the pool, against one thread:
    tables, jumps, objectives and the posterior-decoded links."""
    from test_agree_aligner import _synthetic

    pairs, _ = _synthetic(300, seed=21, vocab=15)
    fitted = {}
    for n in (1, 2):
        threads.set_threads(n)
        al = WordAligner(training=training, ibm1_iterations=2, iterations=2, shard_size=150).fit(pairs)
        fitted[n] = (al, al.align(pairs))
    (a, links_a), (b, links_b) = fitted[1], fitted[2]
    for m, n in zip(a.models_, b.models_):
        for name in ("table_", "null_", "jumps_"):
            np.testing.assert_array_equal(getattr(m, name), getattr(n, name))
    assert a.history_ == b.history_
    assert links_a == links_b


def test_map_in_order_keeps_item_order_and_runs_nested_calls_in_place():
    seen = []

    def task(k):
        seen.append(threading.get_ident())
        # a call from a pool thread runs here, in order, instead of waiting on the pool it occupies
        inner = threads.map_in_order(lambda j: (k, j), range(3), 2)
        return k * k, inner

    for workers in (1, 2, 3):
        for costliest_first in (False, True):
            got = threads.map_in_order(task, range(7), workers, costliest_first=costliest_first)
            assert got == [(k * k, [(k, j) for j in range(3)]) for k in range(7)]
    assert threads.map_in_order(task, [], 2) == []


def test_pool_threads_run_their_kernels_on_one_thread():
    got = threads.map_in_order(lambda _: numba.get_num_threads(), range(4), 2)
    assert got == [1, 1, 1, 1]


def test_busy_machine_leaves_out_this_process_own_load(monkeypatch):
    """The load average counts this job's own threads: 2.6 with two cores of it busy is an idle machine."""
    import os

    threads.set_threads("auto")
    monkeypatch.setattr(threads, "_cpu_count", lambda: 2)
    monkeypatch.setattr(os, "getloadavg", lambda: (2.6, 2.0, 2.0))
    monkeypatch.setattr(threads, "_own_cores", lambda: 2.0)
    assert not threads._machine_busy()
    monkeypatch.setattr(threads, "_own_cores", lambda: 0.0)
    assert threads._machine_busy()
    monkeypatch.setattr(os, "getloadavg", lambda: (4.6, 2.0, 2.0))
    monkeypatch.setattr(threads, "_own_cores", lambda: 2.0)
    assert threads._machine_busy()


def test_own_cores_measures_this_process_cpu_share(monkeypatch):
    import time as time_module

    clock = {"wall": 100.0, "cpu": 10.0}
    monkeypatch.setattr(threads, "_own_sample", [0.0, 0.0, 0.0])
    monkeypatch.setattr(time_module, "monotonic", lambda: clock["wall"])
    monkeypatch.setattr(time_module, "process_time", lambda: clock["cpu"])
    assert threads._own_cores() == 0.0  # no earlier sample
    clock.update(wall=102.0, cpu=13.0)
    assert threads._own_cores() == pytest.approx(1.5)
    clock.update(wall=102.5, cpu=14.0)  # within the window: the last figure
    assert threads._own_cores() == pytest.approx(1.5)


def test_single_threaded_blas_pins_once_for_the_block():
    controller = threads._blas_controller()
    if not controller:
        pytest.skip("threadpoolctl is not installed")
    with threads.single_threaded_blas():
        assert all(lib["num_threads"] == 1 for lib in controller.select(user_api="blas").info())
        assert threads._blas_pinned == 1
        with threads.engine_threads(100):  # inside: no pinning of its own, BLAS stays at one thread
            assert all(lib["num_threads"] == 1 for lib in controller.select(user_api="blas").info())
        assert all(lib["num_threads"] == 1 for lib in controller.select(user_api="blas").info())
    assert threads._blas_pinned == 0


def test_ibm1_directions_concurrently_equal_one_after_the_other():
    """The independent (IBM 1) pass's per-direction count totals with the directions run concurrently."""
    from varorder.agree.product_em import _independent_estep

    pairs, shard, index, ev, fv = _corpus(5, n=80, max_len=8, vocab=7)
    results = {}
    for n in (1, 2):
        threads.set_threads(n)
        models = _models("ibm1", index, ev, fv, 5)
        assert all(isinstance(m, IBM1) and not isinstance(m, HMMAligner) for m in models)
        results[n] = _independent_estep(models, [shard, shard])
    (totals_1, obj_1), (totals_2, obj_2) = results[1], results[2]
    assert obj_1 == obj_2
    for t1, t2 in zip(totals_1, totals_2):
        assert t1.keys() == t2.keys()
        for key in t1:
            np.testing.assert_array_equal(t1[key], t2[key])


@pytest.mark.parametrize("seed", range(4))
def test_ibm1_counts_added_during_the_estep_equal_the_estep_then_the_adds(seed):
    """``own_accumulated_counts`` (posteriors added to the count table sentence by sentence, no shard µ)
    against ``accumulate_counts`` of ``own_estep``: the same table, null counts and log-normalizer, bit for
    bit, over two shards (repeated words make several edges of a sentence share a pair)."""
    from varorder.agree.product_em import own_estep

    pairs, shard, index, ev, fv = _corpus(seed, n=30, max_len=7, vocab=3)
    for model in _models("ibm1", index, ev, fv, seed):
        want, fused, terms_want, terms_fused = None, None, [], []
        for _ in range(2):
            stats = own_estep(model, shard)
            terms_want.append(stats.log_normalizer)
            want = model.accumulate_counts(want, shard, stats.shared, stats, {})
            fused, term = model.own_accumulated_counts(fused, shard, {})
            terms_fused.append(term)
        assert terms_fused == terms_want
        assert fused.keys() == want.keys()
        for key in want:
            np.testing.assert_array_equal(fused[key], want[key])
