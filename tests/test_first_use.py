"""First use: the install-time warm-up's stamp (varorder._warmup: run once per state of the
sources, again after a change) and the notice a first call gives when it compiles kernels
(varorder._numba_start.CompileNotice)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from varorder import _warmup

SRC = str(Path(__file__).resolve().parents[1] / "src")


@pytest.fixture
def package(tmp_path):
    root = tmp_path / "varorder"
    (root / "engine").mkdir(parents=True)
    (root / "__init__.py").write_text("")
    (root / "engine" / "kernels.py").write_text("def f():\n    return 1\n")
    return root


def test_the_stamp_follows_the_sources(package, monkeypatch):
    started = []

    class Worker:
        def __init__(self, command, env, cwd):
            started.append(command[-1])

        def wait(self):
            return 0

    monkeypatch.setattr(_warmup.subprocess, "Popen", Worker)
    assert not _warmup.is_warm(package)
    assert _warmup.warm(2, package=package) == []
    assert started == ["0/2", "1/2"] and _warmup.is_warm(package)
    assert _warmup.warm(2, package=package) == [] and len(started) == 2  # warm: nothing runs
    assert _warmup.warm(2, if_cold=False, package=package) == [] and len(started) == 4
    (package / "engine" / "kernels.py").write_text("def f():\n    return 2\n")  # an edit: cold again
    assert not _warmup.is_warm(package)


def test_a_failed_part_records_no_stamp(package, monkeypatch, capsys):
    class Worker:
        def __init__(self, command, env, cwd):
            self.part = command[-1]

        def wait(self):
            return 1 if self.part == "1/2" else 0

    monkeypatch.setattr(_warmup.subprocess, "Popen", Worker)
    assert _warmup.warm(2, package=package) == ["part 2 of 2"]
    assert not _warmup.is_warm(package)
    err = capsys.readouterr().err
    assert "compiling the Numba kernels" in err and "some steps failed" in err


def test_a_damaged_stamp_reads_as_cold(package):
    (package / "__pycache__").mkdir()
    (package / "__pycache__" / "warmup-stamp.json").write_text("{not json")
    assert not _warmup.is_warm(package)


FIRST_CALL = ("from varorder.lm import _words\n"
              "_words.word_table(['a', 'b'])\n"
              "print('called')\n")


def _first_call(tmp_path, notice):
    env = dict(os.environ, PYTHONPATH=SRC, NUMBA_CACHE_DIR=str(tmp_path / "cache"), VARORDER_COMPILE_NOTICE=notice)
    return subprocess.run([sys.executable, "-c", FIRST_CALL], env=env, capture_output=True, text=True, check=True,
                          timeout=900)


@pytest.mark.slow
def test_a_compiling_first_call_says_so_and_how_long(tmp_path):
    silent = _first_call(tmp_path / "silent", "0")  # compiles, but told to keep quiet
    assert silent.stdout == "called\n" and "varorder:" not in silent.stderr
    cold = _first_call(tmp_path, "1")  # an empty cache: the kernels compile
    assert cold.stdout == "called\n"
    lines = [line for line in cold.stderr.splitlines() if line.startswith("varorder:")]
    assert len(lines) == 2, cold.stderr
    assert lines[0].startswith("varorder: compiling Numba kernels on first use") and "_warmup" in lines[0]
    assert lines[1].startswith("varorder: compiled ") and " s (cached for later calls)" in lines[1]
    warm = _first_call(tmp_path, "1")  # the same cache, now filled: no compilation, no word
    assert warm.stdout == "called\n" and "varorder:" not in warm.stderr
