"""varorder._numba_start: a fresh process's first Numba call no longer imports
scipy.linalg, and kernels that need BLAS still compile and agree with NumPy."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

SRC = str(Path(__file__).resolve().parents[1] / "src")


def run_fresh(code: str) -> str:
    env = dict(os.environ, PYTHONPATH=SRC)
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout


def test_first_kernel_call_does_not_import_scipy_linalg():
    out = run_fresh("import sys\n"
                    "from varorder.lm import _words\n"
                    "_words.word_table(['a', 'b'])  # a cached kernel: initialises Numba's CPU target\n"
                    "print('scipy.linalg' in sys.modules)")
    assert out.split() == ["False"]


def test_kernels_using_blas_still_work_after_the_deferral():
    out = run_fresh("import numba, numpy as np\n"
                    "import varorder._numba_start\n"
                    "from numba.np import arraymath\n"
                    "rng = np.random.default_rng(0)\n"
                    "a, b = rng.normal(size=7), rng.normal(size=4)\n"
                    "m = rng.normal(size=(3, 3))\n"
                    "conv = numba.njit(lambda x, y: np.convolve(x, y))(a, b)\n"
                    "dot = numba.njit(lambda x: np.dot(x, x))(m)\n"
                    "print(arraymath._HAVE_BLAS, np.allclose(conv, np.convolve(a, b)), np.allclose(dot, m @ m))")
    assert out.split() == ["True", "True", "True"]
