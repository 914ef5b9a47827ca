"""The build (setup.py): a wheel that carries the Numba caches is tagged for the interpreter and
platform they were compiled for, a VARORDER_NO_WARMUP=1 wheel is pure, an editable install
compiles into the source tree, and the build says on stderr when the kernel warm-up starts and
ends."""

from __future__ import annotations

import os
import runpy
import subprocess
import sys
from pathlib import Path

import pytest

SETUP = Path(__file__).resolve().parent.parent / "setup.py"


@pytest.fixture
def commands(monkeypatch):
    if not SETUP.is_file():
        pytest.skip("not a source checkout")
    setuptools = pytest.importorskip("setuptools")
    try:
        from setuptools.command.bdist_wheel import bdist_wheel  # noqa: F401
    except ImportError:
        pytest.importorskip("wheel.bdist_wheel", reason="needs setuptools >= 70.1 or the wheel package")
    captured = {}
    monkeypatch.setattr(setuptools, "setup", lambda **kw: captured.update(kw))
    runpy.run_path(str(SETUP))
    return captured["cmdclass"]


@pytest.mark.parametrize("no_warmup, pure", [(None, False), ("1", True)])
def test_wheel_tag_follows_what_it_holds(commands, monkeypatch, no_warmup, pure):
    from setuptools import Distribution

    if no_warmup is None:
        monkeypatch.delenv("VARORDER_NO_WARMUP", raising=False)
    else:
        monkeypatch.setenv("VARORDER_NO_WARMUP", no_warmup)
    command = commands["bdist_wheel"](Distribution({"name": "varorder", "version": "0"}))
    command.ensure_finalized()
    python, abi, platform = command.get_tag()
    if pure:
        assert (python, abi, platform) == ("py3", "none", "any")
    else:
        version = f"cp{sys.version_info.major}{sys.version_info.minor}"
        assert (python, abi) == (version, version) and platform != "any"


@pytest.mark.parametrize("editable", [False, True])
def test_build_announces_the_warmup(commands, monkeypatch, capsys, tmp_path, editable):
    """A wheel build compiles into its build folder; an editable install into the source tree (the
    package it installs), once per state of the sources (--if-cold)."""
    from setuptools import Distribution
    from setuptools.command.build_py import build_py

    monkeypatch.delenv("VARORDER_NO_WARMUP", raising=False)
    monkeypatch.setattr(build_py, "run", lambda self: None)  # no sources to copy here
    started = []

    def call(command, env, cwd):
        started.append((command[1:], cwd, env["PYTHONPATH"].split(os.pathsep)[0]))
        return 0

    monkeypatch.setattr(subprocess, "call", call)
    source = tmp_path / "src"
    command = commands["build_py"](Distribution({"name": "varorder"}))
    command.build_lib, command.editable_mode = str(tmp_path / "build"), editable
    command.package_dir = {"": str(source)}  # as pyproject.toml's where = ["src"] sets it
    command.run()
    err = capsys.readouterr().err.splitlines()
    root = str(source if editable else tmp_path / "build")
    assert started == [(["-m", "varorder._warmup", "--jobs", "2"] + (["--if-cold"] if editable else []), root, root)]
    assert err[0].startswith("varorder build: compiling the Numba kernels") and "VARORDER_NO_WARMUP=1" in err[0]
    assert err[-1].startswith("varorder build: kernel warm-up done in ")


def test_no_warmup_skips_it(commands, monkeypatch, tmp_path):
    from setuptools import Distribution
    from setuptools.command.build_py import build_py

    monkeypatch.setenv("VARORDER_NO_WARMUP", "1")
    monkeypatch.setattr(build_py, "run", lambda self: None)
    monkeypatch.setattr(subprocess, "call", lambda *a, **k: pytest.fail("the warm-up ran"))
    command = commands["build_py"](Distribution({"name": "varorder"}))
    command.build_lib, command.editable_mode = str(tmp_path), True
    command.run()
