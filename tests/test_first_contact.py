"""What a new user meets first (issue #31): progress that does not flood a redirected stderr,
a summary line from ``tag predict``, feature templates as an estimator parameter (with model
files written before 0.3.0 still loading), and the package's version and marker files."""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

import varorder
from varorder._progress import Progress
from varorder.cli.main import main
from varorder.models import CRF, MEMM, pos_features
from varorder.models.persist import FORMAT_NAME

from test_cli_tag import _write_corpus

_WORDS = [["the", "dog", "runs"], ["a", "cat", "sleeps"], ["the", "cat", "runs"], ["a", "dog", "sleeps"]] * 3
_TAGS = [["D", "N", "V"]] * 12


class _Stream(io.StringIO):
    def __init__(self, tty):
        super().__init__()
        self.tty = tty

    def isatty(self):
        return self.tty


def test_progress_redirected_is_one_summary_line_per_stage(monkeypatch):
    monkeypatch.delenv("VARORDER_PROGRESS", raising=False)
    stream = _Stream(tty=False)
    with Progress(total=500, desc="EM", unit="iter", file=stream) as bar:
        for i in range(500):
            bar.update(1)
            if i == 3:
                bar.write("a log line")
        bar.set_postfix(loglik="-1.5")
    lines = stream.getvalue().splitlines()
    assert lines[0] == "a log line" and len(lines) == 2
    assert lines[1].startswith("EM: 500/500 iter in ") and lines[1].endswith("s (loglik=-1.5)")
    silent = _Stream(tty=False)
    with Progress(total=5, enabled=False, file=silent) as bar:
        bar.update(5)
        bar.write("not shown")
    assert silent.getvalue() == ""
    assert list(Progress(range(3), file=_Stream(tty=False))) == [0, 1, 2]


def test_progress_on_a_terminal_is_a_bar_and_the_setting_overrides(monkeypatch):
    monkeypatch.delenv("VARORDER_PROGRESS", raising=False)
    terminal = _Stream(tty=True)
    with Progress(total=3, desc="CRF lbfgs", file=terminal) as bar:
        bar.update(3)
    assert "CRF lbfgs" in terminal.getvalue() and "3/3" in terminal.getvalue() and "\r" in terminal.getvalue()
    monkeypatch.setenv("VARORDER_PROGRESS", "off")
    stream = _Stream(tty=False)
    with Progress(total=3, desc="x", file=stream) as bar:
        bar.update(3)
    assert stream.getvalue() == ""


def test_verbose_crf_redirected_logs_each_iteration_once_and_one_summary(capsys, monkeypatch):
    monkeypatch.delenv("VARORDER_PROGRESS", raising=False)
    CRF(max_iterations=3, verbose=True).fit([pos_features(w) for w in _WORDS], _TAGS)
    lines = capsys.readouterr().err.splitlines()
    iterations = [line for line in lines if line.startswith("iter ")]
    assert len(iterations) == len(set(iterations)) == 3
    assert len(lines) == 4 and lines[-1].startswith("CRF lbfgs: 3/3 it in ")


def test_tag_predict_prints_a_summary(tmp_path):
    train = tmp_path / "train.conllu"
    _write_corpus(train, 30, 0)
    model, out = tmp_path / "m.npz", tmp_path / "out.conllu"
    runner = CliRunner()
    assert runner.invoke(main, ["tag", "train", str(train), "-o", str(model), "--max-iterations", "5",
                                "--quiet"]).exit_code == 0
    result = runner.invoke(main, ["tag", "predict", str(model), str(train), "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert result.stdout == ""
    assert result.stderr.startswith("tagged ") and "sentences with CRF in " in result.stderr
    assert result.stderr.strip().endswith(f"-> {out}")


@pytest.mark.parametrize("estimator", [CRF, MEMM])
def test_features_parameter_reads_words_and_equals_feature_dicts(estimator):
    by_words = estimator(max_iterations=10, features="pos").fit(_WORDS, _TAGS)
    by_dicts = estimator(max_iterations=10).fit([pos_features(w) for w in _WORDS], _TAGS)
    np.testing.assert_array_equal(by_words.emission_weights_, by_dicts.emission_weights_)
    assert by_words.predict([["a", "dog", "runs"]]) == [["D", "N", "V"]]
    with pytest.raises(ValueError, match=r"X\[0\] is not a sequence of words"):
        by_words.predict([pos_features(["a", "dog"])])
    with pytest.raises(ValueError, match=r"parameter features='w\[0\],nope\[1\]'"):
        estimator(features="w[0],nope[1]").fit(_WORDS, _TAGS)


def _rewrite_meta(path, change):
    """Rewrite a model file's JSON metadata with ``change(meta)`` (as an older varorder wrote it)."""
    with np.load(path, allow_pickle=False) as archive:
        members = {name: archive[name] for name in archive.files}
    meta = json.loads(members.pop("__meta__").tobytes().decode("utf-8"))
    assert meta["format"] == FORMAT_NAME
    change(meta)
    members["__meta__"] = np.frombuffer(json.dumps(meta).encode("utf-8"), dtype=np.uint8)
    np.savez(path, **members)


@pytest.mark.parametrize("estimator", [CRF, MEMM])
def test_model_files_from_before_the_parameter_still_load(estimator, tmp_path):
    model = estimator(max_iterations=10, features="bias,w[0],suf2[0]").fit(_WORDS, _TAGS)
    path = tmp_path / "model.npz"
    model.save(path)
    assert estimator.load(path).features == "bias,w[0],suf2[0]"

    def as_before(meta):  # the templates were learned state then, set by the command line
        meta["state"]["feature_template"] = meta["params"].pop("features")
        meta.pop("sha256", None)  # and files carried no content digest

    _rewrite_meta(path, as_before)
    old = estimator.load(path)
    assert old.features == "bias,w[0],suf2[0]"
    assert old.predict(_WORDS[:2]) == model.predict(_WORDS[:2])

    def forged(meta):
        meta["state"]["feature_template"] = 7

    _rewrite_meta(path, forged)
    with pytest.raises(ValueError, match="model.npz.*feature_template"):
        estimator.load(path)


def test_version_and_marker_files():
    assert varorder.__version__ == "0.3.0"
    package = Path(varorder.__file__).parent
    assert (package / "py.typed").is_file()
    root = package.parent.parent
    if (root / "pyproject.toml").is_file():  # a source checkout
        assert "MIT License" in (root / "LICENSE").read_text(encoding="utf-8")
        assert "## [0.3.0] - " in (root / "CHANGELOG.md").read_text(encoding="utf-8")
