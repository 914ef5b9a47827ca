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
