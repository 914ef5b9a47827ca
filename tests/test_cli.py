"""The varorder command: help, version, and the engine demo."""

from __future__ import annotations

import subprocess
import sys

from click.testing import CliRunner

import varorder
from varorder.cli.main import main


def test_help_lists_demo():
    result = CliRunner().invoke(main, ["--help"])
    assert result.exit_code == 0
    assert "demo" in result.output


def test_version_via_python_m():
    out = subprocess.run([sys.executable, "-m", "varorder", "--version"], capture_output=True, text=True, check=True)
    assert varorder.__version__ in out.stdout


def test_engine_demo_runs_and_matches_exact_probabilities():
    result = CliRunner().invoke(main, ["demo", "--engine", "--observations", "2,3,1", "--samples", "2000"])
    assert result.exit_code == 0, result.output
    assert "log Z" in result.output and "Viterbi path" in result.output and "3 best paths" in result.output


def test_engine_demo_rejects_bad_observations():
    result = CliRunner().invoke(main, ["demo", "--engine", "--observations", "2,7"])
    assert result.exit_code != 0
    assert "observations" in result.output
