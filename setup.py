"""Build hook: compile varorder's Numba kernels into the built package.

All metadata lives in pyproject.toml. This file only extends two commands:

* ``build_py``: after the sources are copied into the build folder, ``python -m
  varorder._warmup`` runs there (two processes, one per half of the steps), so the
  wheel carries Numba's cache files and a user's first call loads machine code instead
  of compiling for tens of seconds. The build says so on stderr before and after (pip
  shows a build's output with ``pip install -v .``; ``python -m build`` always). An
  editable install (``pip install -e .``) runs it on the source tree instead, whose
  ``__pycache__`` folders the installed package reads: once per state of the sources
  (``varorder._warmup`` keeps a stamp; a second editable install of unchanged sources
  takes a second). Skipped when VARORDER_NO_WARMUP=1 (the kernels then compile on first
  use, and the first call says so on a terminal). A failed warm-up never fails the build.
* ``bdist_wheel``: a wheel holding those caches holds machine code for one CPython
  version on one platform, so it is tagged for them (``cp312-cp312-linux_x86_64``), not
  ``py3-none-any``. Numba keys each cache entry by the CPU model and its features as well:
  on another CPU of the same platform the entries are not used and the kernels compile on
  first use, as without the caches. With VARORDER_NO_WARMUP=1 the wheel holds only Python
  and is tagged ``py3-none-any``.
"""

import os
import subprocess
import sys
import time

from setuptools import setup
from setuptools.command.build_py import build_py

try:  # setuptools >= 70.1 ships the command; older setups take it from wheel
    from setuptools.command.bdist_wheel import bdist_wheel
except ImportError:  # pragma: no cover
    from wheel.bdist_wheel import bdist_wheel


def _warmup_enabled() -> bool:
    return not os.environ.get("VARORDER_NO_WARMUP")


def _say(message: str) -> None:
    print(f"varorder build: {message}", file=sys.stderr, flush=True)


class build_py_with_compiled_kernels(build_py):
    def run(self):
        super().run()
        if not _warmup_enabled():
            return
        editable = getattr(self, "editable_mode", False)
        # an editable install's package is the source tree itself (src/varorder): compile into it
        root = os.path.abspath(os.path.dirname(self.get_package_dir("varorder")) if editable else self.build_lib)
        # pip's isolated build environment reaches its build requirements through
        # PYTHONPATH: keep them, with the package to compile in front
        path = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)
        env = dict(os.environ, PYTHONPATH=path, MPLBACKEND="Agg")
        # the times are issue #31's measurements of the whole install
        _say("compiling the Numba kernels into the package (two processes; 146 s on a quiet 2-core "
             "machine, 13 min on a busy one; VARORDER_NO_WARMUP=1 skips this and the kernels compile "
             "on first use instead) ...")
        began = time.perf_counter()
        try:
            code = subprocess.call([sys.executable, "-m", "varorder._warmup", "--jobs", "2"]
                                   + (["--if-cold"] if editable else []), env=env, cwd=root)
        except OSError as exc:
            _say(f"kernel warm-up skipped ({exc}); the kernels compile on first use")
            return
        outcome = "done" if not code else "done, some steps failed (their kernels compile on first use)"
        _say(f"kernel warm-up {outcome} in {time.perf_counter() - began:.0f} s")


class bdist_wheel_for_compiled_kernels(bdist_wheel):
    def finalize_options(self):
        super().finalize_options()
        if _warmup_enabled():
            # the Numba caches are machine code: tag the wheel cpXY-cpXY-<platform>
            self.root_is_pure = False


setup(cmdclass={"build_py": build_py_with_compiled_kernels, "bdist_wheel": bdist_wheel_for_compiled_kernels})
