"""Hostile command lines: out-of-range, NaN and missing-folder values are refused before any
work, with a one-line message and a non-zero exit — never a traceback, never exit 0."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from varorder.cli.main import main

BAD = [
    ["align", "apply", "m.npz", "a", "b", "--threshold", "-1"],
    ["align", "apply", "m.npz", "a", "b", "--threshold", "nan"],
    ["align", "train", "a", "b", "-o", "m.npz", "--iterations", "0"],
    ["align", "train", "a", "b", "-o", "m.npz", "--null-prob", "1.5"],
    ["align", "train", "a", "b", "-o", "m.npz", "--workers", "0"],
    ["align", "train", "a", "b", "-o", "{missing}/m.npz"],
    ["tag", "train", "t.conllu", "-o", "m.npz", "--max-iterations", "0"],
    ["tag", "train", "t.conllu", "-o", "m.npz", "--c2", "-1"],
    ["tag", "train", "t.conllu", "-o", "m.npz", "--c1", "inf"],
    ["tag", "train", "t.conllu", "-o", "m.npz", "--threads", "0"],
    ["tag", "train", "t.conllu", "-o", "{missing}/m.npz"],
    ["decode", "x.arpa", "--text", "1", "--time-limit", "-1"],
    ["decode", "x.arpa", "--text", "1", "--max-candidates", "0"],
    ["sample", "x.arpa", "--text", "1", "--max-trials", "0"],
    ["sample", "x.arpa", "--text", "1", "--samples", "-3"],
    ["sample", "x.arpa", "--text", "1", "--target-ar", "nan"],
    ["ocr", "--c2", "-0.5"],
    ["induce", "train", "t.conllu", "-o", "{missing}/m.npz"],
    ["--threads", "0", "demo", "--engine"],
]


@pytest.mark.parametrize("args", BAD, ids=[" ".join(a) for a in BAD])
def test_bad_values_refused_before_work(tmp_path, args):
    args = [a.replace("{missing}", str(tmp_path / "no-such-folder")) for a in args]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 2, (result.exit_code, result.output)
    assert isinstance(result.exception, SystemExit), repr(result.exception)
    assert "Traceback" not in result.output
    error_lines = [line for line in result.output.splitlines() if line.startswith("Error")]
    assert len(error_lines) == 1, result.output


def test_loglinear_penalty_names_match_the_operators():
    """cli._loglinear names the penalties without importing the kernels; they must agree."""
    from varorder.cli._loglinear import PENALTY_NAMES
    from varorder.loglinear.prox import PENALTIES

    assert sorted(PENALTY_NAMES) == sorted(PENALTIES)
