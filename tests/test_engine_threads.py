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


_OPENMP_PROBE = """
import ctypes, importlib.util, json, os, sys
spec = importlib.util.find_spec("numba.np.ufunc.omppool")
try:
    runtime = ctypes.CDLL(spec.origin)
    runtime.omp_get_max_active_levels
except (AttributeError, OSError, TypeError):
    print(json.dumps(None)); sys.exit()
runtime.omp_set_num_threads(1)
runtime.omp_set_nested(0)
runtime.omp_set_max_active_levels(1)
import numba
import numpy as np
from varorder import chain
from varorder.engine import threads
if sys.argv[1] == "engine":   # a batch on two threads under an explicit policy (VARORDER_THREADS=2)
    rng = np.random.default_rng(0)
    chain.log_partition(rng.normal(size=(64, 8, 4)), rng.normal(size=(4, 4)))
else:                         # the policy's first look at Numba's count, under "auto"
    threads.threads_for(64)

@numba.njit(parallel=True)
def thread_ids(n):
    out = np.zeros(n, np.int64)
    for i in numba.prange(n):
        out[i] = numba.np.ufunc.parallel._iget_thread_id()
    return out

threads.set_threads(2)
used = len(set(thread_ids(20000).tolist()))
print(json.dumps([numba.threading_layer(), runtime.omp_get_max_threads(), runtime.omp_get_nested(),
                  runtime.omp_get_max_active_levels(), used]))
"""


@pytest.mark.parametrize("path", ["engine", "policy"])
def test_starting_numbas_threads_leaves_the_openmp_settings_alone(path):
    """Numba's OpenMP layer sets the OpenMP runtime's thread count (to NUMBA_NUM_THREADS) and its nesting when it
    starts; other OpenMP users of the process read them (torch's intra-op count is the runtime's). The engine
    starts the layer itself and puts them back; Numba's kernels still run on the threads the policy gives them."""
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1] / "src"), "NUMBA_NUM_THREADS": "3",
           "NUMBA_THREADING_LAYER": "omp", "VARORDER_THREADS": "2" if path == "engine" else "auto"}
    out = subprocess.run([sys.executable, "-c", _OPENMP_PROBE, path], capture_output=True, text=True, env=env)
    if out.returncode != 0 and "No threading layer could be loaded" in out.stderr:
        pytest.skip("Numba's OpenMP threading layer is not available here")
    assert out.returncode == 0, out.stderr
    found = json.loads(out.stdout.strip().splitlines()[-1])
    if found is None:
        pytest.skip("this platform's OpenMP runtime cannot be reached through Numba's layer (ctypes)")
    layer, count, nested, levels, used = found
    assert layer == "omp"
    assert (count, nested, levels) == (1, 0, 1)
    assert used == 2  # the restored runtime count does not cap Numba's own (its regions name their thread count)
