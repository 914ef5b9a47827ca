"""``varorder lm train | score | maxarpa`` end to end on a small corpus."""

from __future__ import annotations

import numpy as np
import pytest
from click.testing import CliRunner

from _lm_oracle import random_corpus
from varorder.cli.main import main
from varorder.io.arpa import read_arpa


@pytest.fixture()
def corpus(tmp_path):
    path = tmp_path / "train.txt"
    path.write_text("\n".join(random_corpus(np.random.default_rng(0), 200, 40, max_length=10)) + "\n")
    return path


def test_train_score_and_maxarpa(tmp_path, corpus):
    runner = CliRunner()
    arpa = tmp_path / "model.arpa"
    result = runner.invoke(main, ["lm", "train", str(corpus), "-n", "3", "-o", str(arpa)])
    assert result.exit_code == 0, result.output
    model = read_arpa(arpa)
    assert model.order == 3

    test = tmp_path / "test.txt"
    test.write_text("t0 t1 t2\nt3 unseen-word\n")
    result = runner.invoke(main, ["lm", "score", str(arpa), str(test)])
    assert result.exit_code == 0, result.output
    lines = [line for line in result.stdout.splitlines() if line and not line.startswith("reading")]
    assert lines[0] == "log10prob\ttokens\toovs"
    first, second = (line.split("\t") for line in lines[1:3])
    assert float(first[0]) == pytest.approx(model.score_sentence("t0 t1 t2"), abs=1e-5)
    assert (first[1], first[2], second[1], second[2]) == ("4", "0", "3", "1")
    assert f"perplexity={model.perplexity(['t0 t1 t2', 't3 unseen-word']):.4f}" in lines[-1]

    maxarpa = tmp_path / "model.maxarpa"
    result = runner.invoke(main, ["lm", "maxarpa", str(arpa), str(maxarpa)])
    assert result.exit_code == 0, result.output
    again = read_arpa(maxarpa)
    for ours, theirs in zip(model.max_backoff().max_log10prob, again.max_backoff().max_log10prob):
        np.testing.assert_array_equal(ours, theirs)


@pytest.mark.parametrize("method", ["absolute", "additive"])
def test_other_estimators_train(tmp_path, corpus, method):
    arpa = tmp_path / "model.arpa.gz"
    result = CliRunner().invoke(main, ["lm", "train", str(corpus), "-n", "2", "--method", method, "-o", str(arpa)])
    assert result.exit_code == 0, result.output
    assert read_arpa(arpa).order == 2


def test_malformed_model_is_a_clean_error(tmp_path):
    broken = tmp_path / "broken.arpa"
    broken.write_text("\\data\\\nngram 1=1\n\n\\1-grams:\nnan\t<s>\n\\end\\\n")
    text = tmp_path / "t.txt"
    text.write_text("a\n")
    result = CliRunner().invoke(main, ["lm", "score", str(broken), str(text)])
    assert result.exit_code != 0
    assert "broken.arpa:5:" in result.output
