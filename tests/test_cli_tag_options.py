"""`varorder tag` options: feature templates, CRFsuite attribute files, --probabilities, documented defaults."""

from __future__ import annotations

import numpy as np
import pytest
from click.testing import CliRunner

from varorder.cli.main import main
from varorder.io.crfsuite import read_crfsuite
from varorder.models.crf import CRF
from varorder.models.features import parse_templates, pos_features, template_features

from test_cli_tag import _write_corpus


def test_templates_parse_and_extract():
    templates = parse_templates("bias, w[0], w[-1]|w[0]\n suf2[1]  # comment\nshape")
    assert templates == ((("bias", 0),), (("w", 0),), (("w", -1), ("w", 0)), (("suf2", 1),), (("shape", 0),))
    feats = template_features(["The", "Dog2"], templates)
    assert feats[0] == {"bias": 1.0, "w[0]=the": 1.0, "w[-1]|w[0]=__BOS__|the": 1.0, "suf2[1]=g2": 1.0,
                        "shape[0]=Aa": 1.0}
    assert feats[1]["suf2[1]=__EOS__"] == 1.0 and feats[1]["shape[0]=Aa0"] == 1.0
    assert template_features(["a", "b"], "pos") == pos_features(["a", "b"])
    with pytest.raises(ValueError, match="bad template 'w\\[x\\]'"):
        parse_templates("w[0],w[x]")


def test_crfsuite_attribute_file(tmp_path):
    path = tmp_path / "train.txt"
    path.write_text("B-NP\tw=He\tpos=PRP\tx:2.5\n"
                    "O\tw=a\\:b\tw=a\\\\b\n\n"
                    "I-NP\tbias\n", encoding="utf-8")
    X, y = read_crfsuite(path)
    assert y == [["B-NP", "O"], ["I-NP"]]
    assert X[0][0] == {"w=He": 1.0, "pos=PRP": 1.0, "x": 2.5}
    assert X[0][1] == {"w=a:b": 1.0, "w=a\\b": 1.0}
    bad = tmp_path / "bad.txt"
    bad.write_text("O\tw:abc\n", encoding="utf-8")
    with pytest.raises(ValueError, match="bad.txt, line 1: attribute 'w:abc'"):
        read_crfsuite(bad)


def _crfsuite_file(path, corpus):
    from varorder.io.conllu import read_conllu

    lines = []
    for s in read_conllu(corpus):
        for feats, tag in zip(pos_features(s.words), s.tags()):
            lines.append("\t".join([tag] + [k.replace("\\", "\\\\").replace(":", "\\:") + (f":{v}" if v != 1 else "")
                                           for k, v in feats.items()]))
        lines.append("")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def test_cli_templates_crfsuite_and_probabilities(tmp_path):
    train, dev = tmp_path / "train.conllu", tmp_path / "dev.conllu"
    _write_corpus(train, 60, 0)
    _write_corpus(dev, 20, 1)
    runner = CliRunner()
    template_file = tmp_path / "templates.txt"
    template_file.write_text("bias\nw[0]\nw[-1]|w[0]\nsuf2[0]\n", encoding="utf-8")
    model = tmp_path / "crf.npz"
    result = runner.invoke(main, ["tag", "train", str(train), "-o", str(model), "--features", f"@{template_file}",
                                  "--max-iterations", "30", "--quiet"])
    assert result.exit_code == 0, result.output
    loaded = CRF.load(model)
    assert loaded.features == "bias,w[0],w[-1]|w[0],suf2[0]"  # an estimator parameter, saved with the model
    assert loaded.c1 == 0.1  # the CLI default is the documented command's
    assert any(name.startswith("w[-1]|w[0]=") for name in loaded.feature_names_)
    result = runner.invoke(main, ["tag", "eval", str(model), str(dev), "--json"])
    assert result.exit_code == 0 and '"accuracy": 1.0' in result.output, result.output
    out, probs = tmp_path / "out.conllu", tmp_path / "probs.tsv"
    result = runner.invoke(main, ["tag", "predict", str(model), str(dev), "-o", str(out), "--probabilities", str(probs)])
    assert result.exit_code == 0, result.output
    rows = [line.split("\t") for line in probs.read_text().splitlines()]
    header, rows = rows[0], rows[1:]
    assert header[:5] == ["sentence", "token", "form", "tag", "p"] and header[5:] == list(loaded.classes_)
    table = np.array([[float(v) for v in r[5:]] for r in rows])
    np.testing.assert_allclose(table.sum(axis=1), 1.0, atol=1e-5)
    assert all(float(r[4]) == max(float(v) for v in r[5:]) for r in rows)
    bad = runner.invoke(main, ["tag", "train", str(train), "-o", str(model), "--features", "w[0],nope[1]"])
    assert bad.exit_code != 0 and "bad template 'nope[1]'" in bad.output

    # the same corpus as a CRFsuite attribute file: same labels out, crfsuite-tag format
    ctrain, cdev = tmp_path / "train.crfsuite", tmp_path / "dev.crfsuite"
    _crfsuite_file(ctrain, train)
    _crfsuite_file(cdev, dev)
    cmodel, labels = tmp_path / "c.npz", tmp_path / "labels.txt"
    result = runner.invoke(main, ["tag", "train", str(ctrain), "--format", "crfsuite", "-o", str(cmodel),
                                  "--max-iterations", "30", "--quiet"])
    assert result.exit_code == 0, result.output
    result = runner.invoke(main, ["tag", "predict", str(cmodel), str(cdev), "--format", "crfsuite", "-o", str(labels)])
    assert result.exit_code == 0, result.output
    _, gold = read_crfsuite(cdev)
    blocks = [b.split("\n") for b in labels.read_text().strip("\n").split("\n\n")]
    assert blocks == gold
