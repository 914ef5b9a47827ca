"""benchmarks/harness.py: a child's figures are its own (peak memory not the parent's)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import harness  # noqa: E402


def test_child_peak_memory_is_not_the_parents():
    held = np.ones(40_000_000)  # 320 MB resident in this process
    held[::512] += 1.0
    run = harness.run_child([sys.executable, "-S", "-c", "pass"])
    assert run.returncode == 0
    assert run.max_rss_mb < 100, run
    bigger = harness.run_child([sys.executable, "-S", "-c", "x = bytearray(150_000_000); x[::4096] = b'1' * len(x[::4096])"])
    assert 150 <= bigger.max_rss_mb < 300, bigger
    assert held.sum() > 0


def test_child_status_output_and_input():
    run = harness.run_child(["sh", "-c", "cat; echo done; exit 3"], stdin="abc\n", check=False)
    assert run.returncode == 3 and run.stdout == "abc\ndone\n"
    assert run.cpu >= 0 and run.wall > 0
    try:
        harness.run_child(["sh", "-c", "exit 2"])
    except RuntimeError as exc:
        assert "exited 2" in str(exc)
    else:
        raise AssertionError("a failing command must raise when check=True")
