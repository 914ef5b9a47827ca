"""The thread policy under concurrency (#33 item 5): what one thread sets holds for the engine calls of every
thread, so that a job run from several threads (a thread executor's tasks, the aligner's E-step batches)
gets the numbers of a job run from one.

Both tests fail on the code before #33: Numba's thread count is per thread and starts at NUMBA_NUM_THREADS
in a new thread, which ``threads_for`` returned whatever the policy; and each single-threaded-BLAS block
restored BLAS's own setting when it closed, even while another thread's engine call still ran under it."""

from __future__ import annotations

import threading

import numba
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
