"""`varorder tag train|predict|eval --task ner` on CoNLL columns and on CoNLL-U with CorefUD entities."""

from __future__ import annotations

import json

import numpy as np
from click.testing import CliRunner

from varorder.cli.main import main
from varorder.io import schemes
from varorder.io.conll import read_conll

PEOPLE = ["Anna", "Boris", "Carla"]
PLACES = ["Paris", "Oslo"]


def write_conll_corpus(path, n, seed):
    rng = np.random.default_rng(seed)
    lines = ["-DOCSTART- -X- O", ""]
    for _ in range(n):
        person = [str(rng.choice(PEOPLE))] + (["Smith"] if rng.random() < 0.5 else [])
        place = str(rng.choice(PLACES))
        rows = [(w, "NNP", "B-PER" if i == 0 else "I-PER") for i, w in enumerate(person)]
        rows += [("visited", "VBD", "O"), (place, "NNP", "B-LOC"), (".", ".", "O")]
        lines += [" ".join(r) for r in rows] + [""]
    path.write_text("\n".join(lines) + "\n")


def test_tag_ner_on_conll_columns(tmp_path):
    train, dev = tmp_path / "train.txt", tmp_path / "dev.txt"
    write_conll_corpus(train, 40, 0)
    write_conll_corpus(dev, 10, 1)
    runner = CliRunner()
    model = tmp_path / "ner.npz"
    result = runner.invoke(main, ["tag", "train", str(train), "--format", "conll", "--task", "ner", "-o", str(model),
                                  "--max-iterations", "30", "--quiet"])
    assert result.exit_code == 0, result.output
    out = tmp_path / "out.txt"
    result = runner.invoke(main, ["tag", "predict", str(model), str(dev), "--format", "conll", "--task", "ner",
                                  "-o", str(out)])
    assert result.exit_code == 0, result.output
    predicted = read_conll(out)
    gold = read_conll(dev)
    assert [s.rows[:-1] for s in predicted] == [s.rows[:-1] for s in gold]  # the input's other columns kept
    assert predicted[0].docstart == "-DOCSTART- -X- O"
    for s in predicted:
        schemes.validate(s.tags(), "BIO")
    result = runner.invoke(main, ["tag", "eval", str(model), str(dev), "--format", "conll", "--task", "ner",
                                  "--json"])
    assert result.exit_code == 0, result.output
    scores = json.loads(result.output)
    assert scores["default"]["micro"]["f1"] == 1.0 and scores["strict"]["micro"]["f1"] == 1.0
    assert set(scores["default"]["per_type"]) == {"PER", "LOC"}
    text = runner.invoke(main, ["tag", "eval", str(model), str(dev), "--format", "conll", "--task", "ner"]).output
    assert "entity F1 1.0000" in text and "micro avg" in text
    bad = runner.invoke(main, ["tag", "eval", str(model), str(dev), "--format", "conll", "--task", "ner",
                               "--scheme", "XYZ"])
    assert bad.exit_code != 0 and "scheme must be one of" in bad.output


def test_tag_ner_on_corefud_conllu(tmp_path):
    from test_io_coref import EXCERPT, HEADER

    path = tmp_path / "gum.conllu"
    path.write_text(EXCERPT.format(header=HEADER))
    runner = CliRunner()
    model = tmp_path / "gum.npz"
    result = runner.invoke(main, ["tag", "train", str(path), "--task", "ner", "-o", str(model), "--max-iterations",
                                  "40", "--quiet", "--algorithm", "pa", "--c1", "0"])
    assert result.exit_code == 0, result.output
    out = tmp_path / "out.conllu"
    result = runner.invoke(main, ["tag", "predict", str(model), str(path), "--task", "ner", "-o", str(out)])
    assert result.exit_code == 0, result.output
    text = out.read_text()
    assert "Entity=(1-person-new-sssss-cf1-1,3-coref-George_Gordon_Byron|NER=B-person" in text
    result = runner.invoke(main, ["tag", "eval", str(model), str(path), "--task", "ner", "--json"])
    assert json.loads(result.output)["default"]["micro"]["f1"] == 1.0
