"""`varorder tag train|predict|eval` round trip and `varorder ocr` on small generated files."""

from __future__ import annotations

import json

import numpy as np
from click.testing import CliRunner

from varorder.cli.main import main
from varorder.io.conllu import read_conllu

_LEXICON = {"the": "DET", "a": "DET", "dog": "NOUN", "cat": "NOUN", "runs": "VERB", "sleeps": "VERB",
            "big": "ADJ", "small": "ADJ", ".": "PUNCT"}


def _write_corpus(path, n, seed):
    rng = np.random.default_rng(seed)
    lines = []
    for s in range(n):
        words = [str(rng.choice(["the", "a"]))]
        if rng.random() < 0.5:
            words.append(str(rng.choice(["big", "small"])))
        words += [str(rng.choice(["dog", "cat"])), str(rng.choice(["runs", "sleeps"])), "."]
        lines.append(f"# sent_id = {s}")
        for i, w in enumerate(words, start=1):
            lines.append(f"{i}\t{w}\t{w}\t{_LEXICON[w]}\t_\t_\t0\tdep\t_\t_")
        lines.append("")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def test_tag_train_predict_eval_round_trip(tmp_path):
    train, dev = tmp_path / "train.conllu", tmp_path / "dev.conllu"
    _write_corpus(train, 60, 0)
    _write_corpus(dev, 20, 1)
    runner = CliRunner()
    for model in ("crf", "memm", "hmm"):
        model_path = tmp_path / f"{model}.npz"
        iterations = [] if model == "hmm" else ["--max-iterations", "30"]  # the HMM counts: no iterations
        result = runner.invoke(main, ["tag", "train", str(train), "-o", str(model_path), "--model", model,
                                      *iterations, "--quiet"])
        assert result.exit_code == 0, result.output
        out = tmp_path / f"{model}.out.conllu"
        result = runner.invoke(main, ["tag", "predict", str(model_path), str(dev), "-o", str(out)])
        assert result.exit_code == 0, result.output
        gold = read_conllu(dev)
        predicted = read_conllu(out)
        assert [s.words for s in predicted] == [s.words for s in gold]
        result = runner.invoke(main, ["tag", "eval", str(model_path), str(out), "--json"])
        assert result.exit_code == 0, result.output
        assert json.loads(result.output)["accuracy"] == 1.0  # its own output agrees with itself
        result = runner.invoke(main, ["tag", "eval", str(model_path), str(dev), "--json"])
        assert json.loads(result.output)["accuracy"] >= 0.95


def test_tag_reports_bad_model_file(tmp_path):
    bad = tmp_path / "bad.npz"
    bad.write_bytes(b"not a zip file")
    corpus = tmp_path / "c.conllu"
    _write_corpus(corpus, 2, 0)
    result = CliRunner().invoke(main, ["tag", "eval", str(bad), str(corpus)])
    assert result.exit_code != 0
    assert "bad.npz" in result.output and "not a readable varorder model" in result.output


def test_ocr_command_on_generated_letters(tmp_path):
    # Two letters whose images differ in one pixel block; a CRF must separate them perfectly.
    rng = np.random.default_rng(0)
    lines, letter_id = [], 1
    for word_id in range(1, 41):
        word = "".join(rng.choice(["a", "b"], size=int(rng.integers(2, 5))))
        for pos, ch in enumerate(word, start=1):
            image = (rng.random((16, 8)) < 0.1).astype(int)
            image[1::2, 1::2][:4] = 1 if ch == "a" else 0
            next_id = -1 if pos == len(word) else letter_id + 1
            lines.append("\t".join(map(str, [letter_id, ch, next_id, word_id, pos, word_id % 3,
                                             *image.ravel()])) + "\t")
            letter_id += 1
    data = tmp_path / "letter.data"
    data.write_text("\n".join(lines) + "\n")
    result = CliRunner().invoke(main, ["ocr", "--data", str(data), "--test-fold", "1", "--json",
                                       "--max-iterations", "30"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["letter_accuracy"] == 1.0 and report["test_words"] == sum(1 for w in range(1, 41) if w % 3 == 1)


def test_tag_train_on_jobs_and_shards_writes_the_same_model(tmp_path):
    import numpy as np

    from varorder.models import CRF, MEMM

    train = tmp_path / "train.conllu"
    _write_corpus(train, 30, 3)
    runner = CliRunner()
    for model_name, cls in (("crf", CRF), ("memm", MEMM)):
        models = []
        for extra in (["--shards", "3"], ["--shards", "3", "--jobs", "2"]):
            out = tmp_path / f"{model_name}{len(extra)}.npz"
            result = runner.invoke(main, ["tag", "train", str(train), "-o", str(out), "--model", model_name,
                                          "--max-iterations", "8", "--quiet", *extra])
            assert result.exit_code == 0, result.output
            models.append(cls.load(out))
        assert np.array_equal(models[0].emission_weights_, models[1].emission_weights_)
    result = runner.invoke(main, ["tag", "train", str(train), "-o", str(tmp_path / "h.npz"), "--model", "hmm",
                                  "--jobs", "2"])
    assert result.exit_code == 2 and "--jobs" in result.output
    result = runner.invoke(main, ["tag", "train", str(train), "-o", str(tmp_path / "s.npz"), "--algorithm", "sgd",
                                  "--shards", "2"])
    assert result.exit_code == 2 and "L-BFGS" in result.output


def test_samplerank_model_kind_named_in_the_cli_is_the_models():
    from varorder.cli._samplerank import MODEL_KIND
    from varorder.factorgraph import SampleRankTagger

    assert MODEL_KIND == SampleRankTagger._MODEL_KIND
