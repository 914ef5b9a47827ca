"""The engine's thread policy: same numbers on any thread count, one thread for small
batches under "auto", explicit counts and bad values handled."""

from __future__ import annotations

import numba
import numpy as np
import pytest

from varorder import chain
from varorder.engine import threads


@pytest.fixture(autouse=True)
def _restore_policy():
    before = threads.get_threads()
    yield
    threads.set_threads(before)


def test_results_identical_on_any_thread_count():
    rng = np.random.default_rng(0)
    E, T = rng.normal(size=(200, 12, 5)), rng.normal(size=(5, 5))
    lengths = rng.integers(1, 13, size=200)
    outputs = []
    for n in sorted({1, numba.config.NUMBA_NUM_THREADS}):
        threads.set_threads(n)
        node, edge_sum, logz = chain.marginals(E, T, lengths=lengths, edges="sum", return_log_z=True)
        paths, _ = chain.viterbi(E, T, lengths=lengths)
        outputs.append((logz, node, edge_sum, paths, chain.sample(E, T, lengths=lengths, n=3, seed=5)))
    for other in outputs[1:]:
        for a, b in zip(outputs[0], other):
            np.testing.assert_array_equal(a, b)


def test_auto_uses_one_thread_for_small_batches(monkeypatch):
    threads.set_threads("auto")
    monkeypatch.setattr(threads, "_machine_busy", lambda: False)
    monkeypatch.setattr(numba, "get_num_threads", lambda: 4)
    assert threads.threads_for(1) == 1
    assert threads.threads_for(threads.MIN_PARALLEL_SEQUENCES) == 4
    monkeypatch.setattr(threads, "_machine_busy", lambda: True)
    assert threads.threads_for(10_000) == 1


def test_explicit_count_and_bad_values(monkeypatch):
    threads.set_threads(1)
    assert threads.get_threads() == 1 and threads.threads_for(10_000) == 1
    for bad in (0, -2, "many", True, 1.5):
        with pytest.raises(ValueError, match="positive integer"):
            threads.set_threads(bad)
    monkeypatch.setattr(threads, "_policy", None)
    monkeypatch.setenv("VARORDER_THREADS", "zero")
    with pytest.raises(ValueError, match="VARORDER_THREADS"):
        threads.get_threads()


def test_sleep_idle_threads_sets_passive_wait_unless_the_user_chose(monkeypatch):
    for name in threads._OMP_WAIT_SETTINGS:
        monkeypatch.delenv(name, raising=False)
    threads.sleep_idle_threads()
    assert threads.os.environ["OMP_WAIT_POLICY"] == "PASSIVE"
    for name, value in (("OMP_WAIT_POLICY", "ACTIVE"), ("GOMP_SPINCOUNT", "1000")):
        for other in threads._OMP_WAIT_SETTINGS:
            monkeypatch.delenv(other, raising=False)
        monkeypatch.setenv(name, value)
        threads.sleep_idle_threads()
        assert threads.os.environ[name] == value
        assert all(other not in threads.os.environ for other in threads._OMP_WAIT_SETTINGS if other != name)


def test_a_thread_count_on_the_command_line_keeps_the_sleeping_wait_policy(monkeypatch):
    """``varorder --threads N`` starts the OpenMP runtime before any command runs; the wait policy the
    align commands choose is set before it, or the runtime would never read it."""
    from click.testing import CliRunner

    from varorder.cli.main import main

    for name in threads._OMP_WAIT_SETTINGS:
        monkeypatch.delenv(name, raising=False)
    result = CliRunner().invoke(main, ["--threads", "auto", "align", "--help"])
    assert result.exit_code == 0 and "OMP_WAIT_POLICY" not in threads.os.environ
    result = CliRunner().invoke(main, ["--threads", "1", "align", "--help"])
    assert result.exit_code == 0 and threads.os.environ["OMP_WAIT_POLICY"] == "PASSIVE"
