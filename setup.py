"""Build hook: compile varorder's Numba kernels into the built package.

All metadata lives in pyproject.toml. This file only extends ``build_py``: after the
sources are copied into the build folder, ``python -m varorder._warmup`` runs there (two
processes, one per half of the steps), so the wheel carries Numba's cache files and a
user's first call loads machine code instead of compiling for tens of seconds. Skipped
for editable installs (the source tree compiles its own cache on first use) and when
VARORDER_NO_WARMUP=1. A failed warm-up never fails the build.
"""

import os
import subprocess
import sys

from setuptools import setup
from setuptools.command.build_py import build_py


class build_py_with_compiled_kernels(build_py):
    def run(self):
        super().run()
        if getattr(self, "editable_mode", False) or os.environ.get("VARORDER_NO_WARMUP"):
            return
        # pip's isolated build environment reaches its build requirements through
        # PYTHONPATH: keep them, with the built package in front
        path = os.pathsep.join(p for p in (os.path.abspath(self.build_lib), os.environ.get("PYTHONPATH")) if p)
        env = dict(os.environ, PYTHONPATH=path, NUMBA_NUM_THREADS="1", VARORDER_THREADS="1", MPLBACKEND="Agg")
        command = [sys.executable, "-m", "varorder._warmup", "--part"]
        try:
            workers = [subprocess.Popen(command + [f"{i}/2"], env=env, cwd=self.build_lib) for i in range(2)]
            for worker in workers:
                worker.wait()
        except OSError as exc:
            print(f"varorder: kernel warm-up skipped ({exc})", file=sys.stderr)


setup(cmdclass={"build_py": build_py_with_compiled_kernels})
