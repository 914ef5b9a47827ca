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
    ["lm", "train", "a", "-o", "{missing}/m.arpa"],
    ["lm", "train", "a", "-o", "m.arpa", "--discount", "-0.5"],
    ["lm", "train", "a", "-o", "m.arpa", "--smoothing", "nan"],
    ["lm", "train", "a", "-o", "m.arpa", "--alpha", "0"],
    ["lm", "train", "a", "-o", "m.arpa", "--prune", "0 x"],
    ["lm", "train", "a", "-o", "m.arpa", "--fallback-discounts", "0.5 nan 1"],
    ["lm", "train", "a", "-o", "m.arpa", "-S", "12Q"],
    ["lm", "train", "a", "-o", "m.arpa", "-S", "0"],
    ["lm", "train", "a", "-o", "m.arpa", "-T", "{missing}"],
    ["lm", "train", "a", "-o", "m.npz", "--model", "loglinear", "--lam", "-1"],
    ["lm", "train", "a", "-o", "m.npz", "--model", "loglinear", "--mu", "inf"],
    ["lm", "train", "a", "-o", "m.npz", "--model", "loglinear", "--learning-rate", "0"],
    ["lm", "train", "a", "-o", "m.npz", "--model", "loglinear", "--lipschitz", "-2"],
    ["lm", "train", "a", "-o", "m.npz", "--model", "loglinear", "--depth-alpha", "nan"],
    ["lm", "train", "a", "-o", "m.npz", "--model", "loglinear", "--seed", "-1"],
    ["lm", "train", "a", "-o", "m.npz", "--model", "loglinear", "--epochs", "-1"],
    ["lm", "train", "a", "-o", "m.arpa", "--order", "11"],
    ["lm", "train", "a", "-o", "m.npz", "--model", "loglinear", "--order", "33"],
    ["lm", "build-binary", "a", "{missing}/m.bin"],
    ["lm", "maxarpa", "a", "{missing}/m.arpa"],
    ["lm", "next", "a", "--top", "0"],
    ["decipher", "prepare", "a", "-o", "{missing}/x/task", "--num-words", "0"],
    ["decipher", "prepare", "a", "-o", "task", "--num-cipher", "-5"],
    ["decipher", "prepare", "a", "-o", "a/task"],
    ["decipher", "train", "folder", "-o", "out", "--size", "0"],
    ["decipher", "train", "folder", "-o", "out", "--iterations", "-1"],
    ["decipher", "train", "folder", "-o", "out", "--laplace", "nan"],
    ["decipher", "train", "folder", "-o", "out", "--discount", "-1"],
    ["decipher", "train", "folder", "-o", "out", "--init-noise", "inf"],
    ["decipher", "train", "folder", "-o", "out", "--workers", "0"],
    ["decipher", "train", "folder", "-o", "out", "--shards", "0"],
    ["decipher", "train", "folder", "-o", "out", "--num-cipher", "0"],
    ["decipher", "train", "folder", "-o", "a/out"],
    ["decipher", "eval", "folder", "m.npz", "--decoded", "{missing}/d.txt"],
    ["decipher", "eval", "folder", "m.npz", "--num-cipher", "0"],
    ["demo", "--engine", "--samples", "0"],
    ["demo", "--engine", "--seed", "-1"],
    ["demo", "--out", "a/plots"],
    ["induce", "train", "t.conllu", "-o", "m.npz", "--dmv-smoothing", "nan"],
    ["induce", "train", "t.conllu", "-o", "m.npz", "--ccm-smoothing", "2", "-8"],
]


@pytest.mark.parametrize("args", BAD, ids=[" ".join(a) for a in BAD])
def test_bad_values_refused_before_work(tmp_path, monkeypatch, args):
    # every input named exists, so that the refusal can only come from the bad value
    monkeypatch.chdir(tmp_path)
    for name in ("a", "b", "m.npz", "t.conllu", "x.arpa"):
        (tmp_path / name).write_text("x\n")
    (tmp_path / "folder").mkdir()
    args = [a.replace("{missing}", str(tmp_path / "no-such-folder")) for a in args]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 2, (result.exit_code, result.output)
    bad_option = next((a for a, after in zip(args[-2::-1], args[::-1]) if a.startswith("--") or a == "-S"), None)
    if bad_option is not None and not any("no-such-folder" in a or a.startswith("a/") for a in args):
        assert bad_option in result.output or bad_option.lstrip("-") in result.output.lower(), result.output
    assert isinstance(result.exception, SystemExit), repr(result.exception)
    assert "Traceback" not in result.output
    error_lines = [line for line in result.output.splitlines() if line.startswith("Error")]
    assert len(error_lines) == 1, result.output


def test_loglinear_penalty_names_match_the_operators():
    """cli._loglinear names the penalties without importing the kernels; they must agree."""
    from varorder.cli._loglinear import PENALTY_NAMES
    from varorder.loglinear.prox import PENALTIES

    assert sorted(PENALTY_NAMES) == sorted(PENALTIES)


def test_cli_ngram_order_bound_matches_the_estimators():
    """cli.lm names the n-gram models' largest order without importing them; they must agree."""
    from varorder.cli.lm import NGRAM_MAX_ORDER
    from varorder.lm.estimate import MAX_ORDER

    assert NGRAM_MAX_ORDER == MAX_ORDER
