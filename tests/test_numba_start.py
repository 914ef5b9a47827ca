"""varorder._numba_start: a fresh process's first Numba call no longer imports
scipy.linalg, and kernels that need BLAS still compile and agree with NumPy."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

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


def test_numba_is_imported_without_scipy_and_scipy_still_imports_after():
    out = run_fresh("import sys\n"
                    "import varorder._numba_start\n"
                    "print('numba' in sys.modules, 'scipy' in sys.modules)\n"
                    "import scipy, scipy.special\n"
                    "print(scipy.special.gammaln(4.0) > 1.79)")
    assert out.split() == ["True", "False", "True"]


KERNEL_MODULE = '''
import numpy as np
from varorder import _numba_start
import numba

@numba.njit(cache=True)
def running_total(values):
    out = np.empty_like(values)
    total = 0.0
    for i in range(values.shape[0]):
        total += values[i]
        out[i] = total
    return out

_numba_start.load_without_refresh(__import__(__name__))
'''

LIGHT_CALL = ("import sys\n"
              "import numpy as np\n"
              "import light_kernels\n"
              "print(light_kernels.running_total(np.arange(5.0)).tolist() == [0.0, 1.0, 3.0, 6.0, 10.0],\n"
              "      light_kernels.running_total.stats.cache_hits.get(light_kernels.running_total.signatures[0], 0),\n"
              "      'numba.np.linalg' in sys.modules, 'scipy.linalg' in sys.modules)")


def test_a_cache_miss_compiles_as_usual_and_a_hit_loads_without_the_registries(tmp_path):
    (tmp_path / "light_kernels.py").write_text(KERNEL_MODULE)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([SRC, str(tmp_path)]), NUMBA_CACHE_DIR=str(tmp_path / "cache"))

    def run():
        return subprocess.run([sys.executable, "-c", LIGHT_CALL], env=env, capture_output=True, text=True,
                              check=True).stdout.split()

    # First process: nothing cached, so Numba compiles (refreshing its registries, whose
    # BLAS probe stays deferred); second: the cached code is loaded without them.
    assert run() == ["True", "0", "True", "False"]
    assert run() == ["True", "1", "False", "False"]


@pytest.mark.filterwarnings("ignore:modified Kneser-Ney")  # a tiny corpus: fallback discounts
def test_arpa_read_on_the_light_path_scores_as_after_a_full_refresh(tmp_path):
    from varorder.lm.arpa import write_arpa
    from varorder.lm import ModifiedKneserNey

    text = tmp_path / "train.txt"
    text.write_text("the cat sat on the mat\nthe dog sat\na cat and a dog\n" * 3)
    arpa = tmp_path / "model.arpa"
    write_arpa(ModifiedKneserNey(order=3).fit(str(text)).model_, arpa)
    read = ("import sys\n"
            "{refresh}"
            "from varorder.lm.arpa import read_arpa\n"
            "model = read_arpa(sys.argv[1])\n"
            "print(repr(model.score_sentences(['the cat sat', 'a dog sat on the mat', 'zebra']).tolist()))\n"
            "print('numba.np.linalg' in sys.modules)")
    env = dict(os.environ, PYTHONPATH=SRC)
    # a cold on-disk cache compiles the reader's kernels, and compiling refreshes the registries
    # anyway: the light path is about loading cached kernels, so warm the cache first
    subprocess.run([sys.executable, "-c", read.format(refresh=""), str(arpa)], env=env, capture_output=True,
                   check=True)
    outputs = []
    for refresh in ("", "import numba\nfrom numba.core.registry import cpu_target\n"
                        "cpu_target.target_context.refresh()\n"):
        code = read.format(refresh=refresh)
        outputs.append(subprocess.run([sys.executable, "-c", code, str(arpa)], env=env, capture_output=True,
                                      text=True, check=True).stdout.split("\n"))
    light, refreshed = outputs
    assert light[0] == refreshed[0]
    assert (light[1], refreshed[1]) == ("False", "True")
