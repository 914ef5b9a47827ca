"""`varorder tag train --learner samplerank [--skip-factors] [--second-order]`, then predict and eval."""

from __future__ import annotations

import json

from click.testing import CliRunner
from test_cli_tag import _write_corpus as write_toy_corpus

from varorder.cli.main import main
from varorder.io.conllu import read_conllu


def _write_corpus(path, n, seed):
    """test_cli_tag's toy corpus, grouped into documents of four sentences by ``# newdoc`` comments."""
    write_toy_corpus(path, n, seed)
    lines = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("# sent_id = ") and int(line.split("= ")[1]) % 4 == 0:
            lines.append(f"# newdoc id = doc{int(line.split('= ')[1]) // 4}")
        lines.append(line)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def test_samplerank_train_predict_eval(tmp_path):
    train, dev = tmp_path / "train.conllu", tmp_path / "dev.conllu"
    _write_corpus(train, 60, 0)
    _write_corpus(dev, 20, 1)
    runner = CliRunner()
    for flags in ([], ["--skip-factors", "--second-order", "--rule", "mira"]):
        model_path = tmp_path / "model.npz"
        result = runner.invoke(main, ["tag", "train", str(train), "-o", str(model_path), "--dev", str(dev),
                                      "--learner", "samplerank", "--epochs", "20", "--quiet", *flags])
        assert result.exit_code == 0, result.output
        out = tmp_path / "out.conllu"
        result = runner.invoke(main, ["tag", "predict", str(model_path), str(dev), "-o", str(out)])
        assert result.exit_code == 0, result.output
        gold, predicted = read_conllu(dev), read_conllu(out)
        assert [s.words for s in predicted] == [s.words for s in gold]
        assert [s.tags("upos") for s in predicted] == [s.tags("upos") for s in gold]  # a trivially learnable corpus
        result = runner.invoke(main, ["tag", "eval", str(model_path), str(dev), "--json"])
        assert result.exit_code == 0, result.output
        assert json.loads(result.output)["accuracy"] == 1.0


def test_samplerank_options_need_the_samplerank_learner(tmp_path):
    train = tmp_path / "train.conllu"
    _write_corpus(train, 10, 0)
    result = CliRunner().invoke(main, ["tag", "train", str(train), "-o", str(tmp_path / "m.npz"), "--skip-factors"])
    assert result.exit_code != 0 and "--learner samplerank" in result.output
    result = CliRunner().invoke(main, ["tag", "train", str(train), "-o", str(tmp_path / "m.npz"), "--model", "hmm",
                                       "--learner", "samplerank"])
    assert result.exit_code != 0 and "--model" in result.output
