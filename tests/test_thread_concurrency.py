"""The thread policy under concurrency (#33 item 5): what one thread sets holds for the engine calls of every
thread, so that a job run from several threads (a thread executor's tasks, the aligner's E-step batches)
gets the numbers of a job run from one.

Both tests fail on the code before #33: Numba's thread count is per thread and starts at NUMBA_NUM_THREADS
in a new thread, which ``threads_for`` returned whatever the policy; and each single-threaded-BLAS block
restored BLAS's own setting when it closed, even while another thread's engine call still ran under it."""

from __future__ import annotations

import threading

import numba
import numpy as np
import pytest

from varorder.engine import threads


def _in_new_thread(function):
    out = []
    worker = threading.Thread(target=lambda: out.append(function()))
    worker.start()
    worker.join()
    return out[0]


def test_a_fixed_policy_holds_in_threads_that_never_set_it(monkeypatch):
    if numba.config.NUMBA_NUM_THREADS < 2:
        pytest.skip("Numba has one thread here: every count is 1")
    previous = numba.get_num_threads()
    monkeypatch.setattr(threads, "_policy", None)  # restored afterwards
    try:
        threads.set_threads(1)
        numba_count, policy_count = _in_new_thread(lambda: (numba.get_num_threads(), threads.threads_for(10_000)))
        assert numba_count == numba.config.NUMBA_NUM_THREADS  # the premise: Numba's count there ignores set_threads
        assert policy_count == 1
        assert _in_new_thread(lambda: threads.runs_serial(10_000))
        threads.set_threads(2)
        assert _in_new_thread(lambda: threads.threads_for(10_000)) == 2
    finally:
        numba.set_num_threads(previous)


def test_blas_stays_pinned_while_any_thread_still_needs_it():
    threadpoolctl = pytest.importorskip("threadpoolctl")
    controller = threads._blas_controller()
    if not controller:
        pytest.skip("no BLAS that threadpoolctl controls")

    def blas_threads():
        return min(info["num_threads"] for info in threadpoolctl.threadpool_info() if info["user_api"] == "blas")

    with threadpoolctl.threadpool_limits(2, user_api="blas"):  # the user's own setting
        if blas_threads() < 2:
            pytest.skip("BLAS runs one thread here")
        a_open, a_close, b_open, b_close = (threading.Event() for _ in range(4))
        seen = {}

        def a():  # e.g. one shard's E-step batches on the worker pool (map_in_order)
            with threads.single_threaded_blas():
                a_open.set()
                a_close.wait(10)

        def b():  # another shard's engine call, big enough for BLAS to pin
            with threads.engine_threads(1, blas_work=1 << 30):
                b_open.set()
                b_close.wait(10)
                seen["b, after a closed"] = blas_threads()

        first, second = threading.Thread(target=a), threading.Thread(target=b)
        first.start()
        assert a_open.wait(10)
        second.start()
        assert b_open.wait(10)
        a_close.set()
        first.join()
        seen["after a closed"] = blas_threads()
        b_close.set()
        second.join()
        assert seen == {"after a closed": 1, "b, after a closed": 1}
        assert blas_threads() == 2  # the last block to close restored the user's setting
        assert threads._blas_pinned == 0


# ---- compiled sums do not depend on where their arrays lie in memory ------------------------------------------
# A sum compiled with Numba's fastmath 'reassoc' in a loop that also stores is compiled twice, behind a run-time
# check on the arrays' addresses: a vectorised sum when the stored-to array lies far enough from the ones read,
# a sequential one when it lies just past them — two roundings. Which one ran depended on the heap's layout,
# i.e. (worker threads allocating) on timing: the aligner's rare nondeterminism of #33 (fit_sources on a thread
# executor gave tables one unit in the last place apart in about 1 run of 70). Each test places the stored-to
# array right after an array it reads (the sequential branch) and far from it. The node-marginal test fails on
# the code before #33; the other two kernels have the same shape of loop but showed no difference there (kept
# as guards: a compiler that versions their loops would make them fail).


def _adjacent(shape, after):
    """An array of ``shape`` lying right after ``after`` (a copy of it, at the start of one buffer)."""
    buf = np.zeros(after.size + int(np.prod(shape)) + 8)
    head = buf[:after.size].reshape(after.shape)
    head[...] = after
    return head, buf[after.size:after.size + int(np.prod(shape))].reshape(shape)


def test_node_marginal_rows_do_not_depend_on_placement():
    from varorder.engine.chain_marginals import _node_row

    rng = np.random.default_rng(0)
    for K in (3, 8, 10, 21):
        for _ in range(30):
            a = (rng.random((2, 1, K)) * 10.0 ** rng.integers(-8, 3, (2, 1, K)))
            bb = rng.random((2, 1, K))
            far = np.zeros((1, 2, K))
            total = _node_row(a, 1, bb, 0, 0, far, 0, 1)
            a_near, near = _adjacent((1, 2, K), a)
            assert _node_row(a_near, 1, bb, 0, 0, near, 0, 1) == total
            assert near.tobytes() == far.tobytes()


@pytest.mark.parametrize("dense", [True, False])
def test_scaled_row_products_do_not_depend_on_placement(dense):
    from varorder.engine.chain_scaled import _product_rows

    rng = np.random.default_rng(1)
    for K in (3, 8, 10, 21):
        for _ in range(30):
            acc = rng.random((2, K)) * 10.0 ** rng.integers(-8, 3, (2, K))
            ev = rng.random((2, 3, K))
            results = []
            for acc_, out in ((acc, np.zeros((2, K))), _adjacent((2, K), acc)):
                totals, smalls = np.zeros(2), np.zeros(2)
                _product_rows(acc_, ev, 1, out, 2, np.ones(2, dtype=np.bool_), True, np.array([dense]), totals,
                              smalls)
                results.append((out.tobytes(), totals.tobytes(), smalls.tobytes()))
            assert results[0] == results[1]


def test_expected_transition_score_does_not_depend_on_placement():
    from varorder.engine.chain_marginals import _scaled_posteriors

    rng = np.random.default_rng(2)
    for K in (3, 8, 10):
        L = 5
        for _ in range(20):
            a, bb, ev = rng.random((L, 1, K)), rng.random((L, 1, K)), rng.random((1, L, K))
            bscale, node_total = rng.random((L, 1)) + 0.5, rng.random((L, 1)) + 0.5
            expT = rng.random((K, K)) * 10.0 ** rng.integers(-6, 2, (K, K))
            T = rng.normal(size=(K, K))
            results = []
            for outer, edge_sum in ((np.zeros((K, K)), np.zeros((K, K))), _adjacent((K, K), np.zeros((K, K)))):
                texp = _scaled_posteriors(a, ev, bb, bscale, 0, L, expT, T, np.zeros((0, K, K)), edge_sum, False,
                                          True, True, node_total, np.zeros(L * K), np.zeros(L * K), outer)
                results.append((texp, edge_sum.tobytes()))
            assert results[0] == results[1]
