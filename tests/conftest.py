"""Test-session settings.

Hypothesis runs derandomized by default (examples drawn from a fixed seed per test), so that
the CI gate is reproducible: a failure seen once is seen again. Set HYPOTHESIS_PROFILE=explore
to draw fresh random examples each run when hunting for new failures (the attack script
tests/attack_inputs.py does the same at scale).
"""

import atexit
import os
import shutil
import tempfile

from hypothesis import settings

settings.register_profile("ci", derandomize=True)
settings.register_profile("explore", derandomize=False)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

# Binary LMs remember which file versions passed full verification in a cache folder:
# keep the test session's out of the user's ~/.cache (subprocesses inherit it).
if "VARORDER_CACHE_DIR" not in os.environ:
    os.environ["VARORDER_CACHE_DIR"] = tempfile.mkdtemp(prefix="varorder-test-cache-")
    atexit.register(shutil.rmtree, os.environ["VARORDER_CACHE_DIR"], True)

# Dask's own limits (30 s to connect, 30 s before an unresponsive connection is dead) are shorter
# than a worker process's start at load 18; the environment reaches workers and child processes.
os.environ.setdefault("DASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT", "300s")
os.environ.setdefault("DASK_DISTRIBUTED__COMM__TIMEOUTS__TCP", "600s")

# Stress mode (issue #47): VARORDER_TEST_STRESS=1 runs the session beside two busy-loop processes,
# so that a test assuming a quiet machine fails here rather than by chance in CI.
_STRESS = os.environ.get("VARORDER_TEST_STRESS", "") not in ("", "0")
if _STRESS:
    os.environ.setdefault("VARORDER_TEST_TIMEOUT_SCALE", "3")

# each burner spins until stopped, and stops by itself once the test session's process is gone
_BURNER = ("import os, sys\nparent = int(sys.argv[1])\nwhile True:\n"
           "    for _ in range(200000):\n        pass\n    if os.getppid() != parent:\n        break\n")
_burners = []


def pytest_sessionstart(session):
    if not _STRESS or hasattr(session.config, "workerinput"):  # once per session, not per xdist worker
        return
    import subprocess
    import sys

    for _ in range(2):
        _burners.append(subprocess.Popen([sys.executable, "-c", _BURNER, str(os.getpid())]))
    atexit.register(_stop_burners)


def pytest_sessionfinish(session, exitstatus):
    _stop_burners()


def _stop_burners():
    while _burners:
        burner = _burners.pop()
        burner.kill()
        burner.wait()


def pytest_report_header(config):
    if _STRESS:
        return f"stress mode: two busy-loop processes beside the tests (load average {os.getloadavg()})"
