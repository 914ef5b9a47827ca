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


# options that the model family or method would ignore (#33: exit 0 with the option silently dropped)
INAPPLICABLE = [
    (["--model", "loglinear", "--binary"], "--binary"),
    (["--model", "loglinear", "--max-arpa"], "--max-arpa"),
    (["--model", "loglinear", "-S", "10M"], "-S"),
    (["--model", "loglinear", "--method", "additive"], "--method"),
    (["--model", "loglinear", "--prune", "0 1"], "--prune"),
    (["--model", "loglinear", "-T", "."], "-T"),
    (["--model", "loglinear", "--discount-fallback"], "--discount-fallback"),
    (["--lam", "0.1"], "--lam"),
    (["--penalty", "l1"], "--penalty"),
    (["--epochs", "3"], "--epochs"),
    (["--discount", "0.1"], "--discount"),
    (["--method", "additive", "--smoothing", "0.1"], "--smoothing"),
    (["--method", "absolute", "--alpha", "2"], "--alpha"),
    (["--fallback-discounts", "1 1 1"], "--fallback-discounts"),
]


@pytest.mark.parametrize("extra, option", INAPPLICABLE, ids=[" ".join(e) for e, _ in INAPPLICABLE])
def test_lm_train_refuses_options_that_do_not_apply(tmp_path, monkeypatch, extra, option):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "c.txt").write_text("the cat sat\na dog ran\n")
    result = CliRunner().invoke(main, ["lm", "train", "c.txt", "-o", "out", *extra])
    assert result.exit_code == 2, result.output
    assert option in result.output and "applies to" in result.output
    assert not (tmp_path / "out").exists()


@pytest.fixture(scope="module")
def loglinear_npz(tmp_path_factory):
    folder = tmp_path_factory.mktemp("ll")
    (folder / "c.txt").write_text("the cat sat\na dog ran\nthe dog sat on the cat\n")
    result = CliRunner().invoke(main, ["lm", "train", str(folder / "c.txt"), "-o", str(folder / "ll.npz"),
                                       "--model", "loglinear", "--epochs", "1"])
    assert result.exit_code == 0, result.output
    return folder / "ll.npz"


@pytest.mark.parametrize("args", [["next", "{m}", "the"], ["build-binary", "{m}", "x.bin"], ["maxarpa", "{m}", "m.arpa"]])
def test_ngram_only_commands_refuse_a_loglinear_model(loglinear_npz, tmp_path, monkeypatch, args):
    """These were AttributeError tracebacks."""
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, ["lm", *[a.replace("{m}", str(loglinear_npz)) for a in args]])
    assert result.exit_code == 2, result.output
    assert "MODEL" in result.output and "n-gram" in result.output and str(loglinear_npz) in result.output
    assert not any(tmp_path.iterdir())


def test_lm_score_names_a_damaged_npz_as_a_model_file(loglinear_npz, tmp_path):
    """It said 'binary file (NUL bytes), not an ARPA text file'."""
    bad = tmp_path / "bad.npz"
    bad.write_bytes(loglinear_npz.read_bytes()[:300])
    (tmp_path / "t.txt").write_text("the cat\n")
    result = CliRunner().invoke(main, ["lm", "score", str(bad), str(tmp_path / "t.txt")])
    assert result.exit_code == 1 and "ARPA" not in result.output, result.output
    assert f"{bad}: not a readable varorder model file" in result.output


# every command family: an option given where this mode, model or method ignores it
IGNORED = [
    (["tag", "train", "t.conllu", "-o", "m.npz", "--model", "hmm", "--c1", "0.5"], "--c1"),
    (["tag", "train", "t.conllu", "-o", "m.npz", "--model", "memm", "--algorithm", "sgd"], "--algorithm"),
    (["tag", "train", "t.conllu", "-o", "m.npz", "--alpha", "0.5"], "--alpha"),
    (["tag", "train", "t.conllu", "-o", "m.npz", "--epochs", "3"], "--epochs"),
    (["tag", "train", "t.conllu", "-o", "m.npz", "--model", "hmm", "--dev", "t.conllu"], "--dev"),
    (["tag", "train", "t.conllu", "-o", "m.npz", "--learner", "samplerank", "--max-iterations", "3"], "--max-iterations"),
    (["strings", "infer", "--synthetic", "5", "--method", "bp", "--lam", "0.1"], "--lam"),
    (["strings", "infer", "--synthetic", "5", "--method", "pep", "--eta", "0.1"], "--eta"),
    (["strings", "infer", "--synthetic", "5", "--method", "pep", "--k", "3"], "--k"),
    (["strings", "infer", "--synthetic", "5", "--em-smoothing", "0.5"], "--em-smoothing"),
    (["strings", "infer", "--hopkins", "a", "--alphabet-size", "5"], "--alphabet-size"),
    (["induce", "train", "t.conllu", "-o", "m.npz", "--model", "dmv", "--ccm-smoothing", "1", "1"], "--ccm-smoothing"),
    (["induce", "train", "t.conllu", "-o", "m.npz", "--model", "ccm", "--dmv-smoothing", "1"], "--dmv-smoothing"),
    (["transduce", "train", "a", "-o", "m.npz", "--sample-seed", "3"], "--sample-seed"),
    (["decipher", "train", "folder", "-o", "out", "--order", "1", "--inference", "exact", "--size", "3"], "--size"),
    (["align", "train", "a", "a", "-o", "m.npz", "--method", "union"], "--method"),
    (["align", "apply", "a", "a", "a", "--method", "intersection", "--threshold", "0.3"], "--threshold"),
    (["decode", "a", "--task", "t9", "--text", "843", "--train", "a"], "--train"),
    (["decode", "a", "--task", "candidates", "--text", "[]", "--max-candidates", "3"], "--max-candidates"),
    (["sample", "a", "--task", "pos", "--train", "a", "--text", "x", "--k", "3"], "--k"),
    (["sample", "a", "--task", "t9", "--text", "843", "--tag-column", "upos"], "--tag-column"),
]


@pytest.mark.parametrize("args, option", IGNORED, ids=[" ".join(a) for a, _ in IGNORED])
def test_options_the_command_would_ignore_are_refused(tmp_path, monkeypatch, args, option):
    monkeypatch.chdir(tmp_path)
    for name in ("a", "t.conllu"):
        (tmp_path / name).write_text("x\n")
    (tmp_path / "folder").mkdir()
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 2, result.output
    assert option in result.output and "applies to" in result.output, result.output
    assert not (tmp_path / "m.npz").exists() and not (tmp_path / "out").exists()


# inputs with nothing in them, or not what the command needs: an error naming the file
EMPTY_INPUTS = [
    (["lm", "train", "empty.txt", "-o", "m.arpa", "--discount-fallback"], 2, "empty.txt is empty"),
    (["lm", "train", "empty.txt", "-o", "m.npz", "--model", "loglinear"], 2, "empty.txt is empty"),
    (["lm", "train", "blank.txt", "-o", "m.npz", "--model", "loglinear"], 1, "blank.txt: no sentences"),
    (["tag", "train", "empty.txt", "-o", "m.npz"], 1, "empty.txt: no sentences"),
    (["align", "train", "empty.txt", "empty.txt", "-o", "m.npz"], 1, "empty.txt: no sentence pairs"),
    (["induce", "eval", "g.npz", "tags.txt", "--format", "tags"], 2, "tags.txt has no trees"),
]


@pytest.fixture(scope="module")
def grammar_npz(tmp_path_factory):
    folder = tmp_path_factory.mktemp("induce")
    (folder / "train.txt").write_text("DT NN VB\nDT JJ NN VB\nNN VB\n")
    result = CliRunner().invoke(main, ["induce", "train", str(folder / "train.txt"), "--format", "tags", "-o",
                                       str(folder / "g.npz"), "--model", "dmv", "--iterations", "1", "--quiet"])
    assert result.exit_code == 0, result.output
    return folder / "g.npz"


@pytest.mark.parametrize("args, code, message", EMPTY_INPUTS, ids=[" ".join(a) for a, _, _ in EMPTY_INPUTS])
def test_empty_or_unsuitable_inputs_are_named(tmp_path, monkeypatch, grammar_npz, args, code, message):
    """#33: 'need at least one array to concatenate'; "sentence 0: tag 'PUNCT' was not seen in training"
    for a tags file given to induce eval (the real problem: it has no trees)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "empty.txt").write_text("")
    (tmp_path / "blank.txt").write_text("\n\n")
    (tmp_path / "tags.txt").write_text("DT NN PUNCT\n")  # PUNCT unseen in training: no longer what is reported
    (tmp_path / "g.npz").write_bytes(grammar_npz.read_bytes())
    result = CliRunner().invoke(main, args)
    assert result.exit_code == code, result.output
    assert message in result.output and "Traceback" not in result.output, result.output
    assert not (tmp_path / "m.npz").exists() and not (tmp_path / "m.arpa").exists()


def test_lm_score_refuses_arpa_options_with_a_loglinear_model(loglinear_npz, tmp_path):
    (tmp_path / "t.txt").write_text("the cat\n")
    for option in (["--verify"], ["--minus-99", "literal"]):
        result = CliRunner().invoke(main, ["lm", "score", str(loglinear_npz), str(tmp_path / "t.txt"), *option])
        assert result.exit_code == 2 and option[0] in result.output and "applies to" in result.output, result.output


def test_decode_pos_without_train_is_refused_before_reading_the_model(tmp_path):
    (tmp_path / "m.arpa").write_text("not an ARPA file\n")  # never read: the usage error comes first
    result = CliRunner().invoke(main, ["decode", str(tmp_path / "m.arpa"), "--task", "pos", "--text", "a"])
    assert result.exit_code == 2 and "--task pos needs --train" in result.output, result.output
