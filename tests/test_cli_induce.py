"""`varorder induce train | parse | eval` on small generated CoNLL-U, PTB and tag files."""

from __future__ import annotations

import json

import numpy as np
from click.testing import CliRunner

from varorder.cli.main import main
from varorder.io.conllu import read_conllu
from varorder.io.ptb import read_ptb


def _write_conllu(path, n, seed):
    rng = np.random.default_rng(seed)
    lines = []
    for s in range(n):
        # DET (ADJ) NOUN VERB [DET NOUN] PUNCT, heads: det→noun, adj→noun, noun→verb, verb root
        words = [("the", "DET", "N"), *([("big", "ADJ", "N")] if rng.random() < 0.5 else []), ("dog", "NOUN", "V"),
                 ("runs", "VERB", "0")]
        if rng.random() < 0.5:
            words += [("a", "DET", "O"), ("cat", "NOUN", "V")]
        words.append((".", "PUNCT", "V"))
        index = {"N": next(i for i, w in enumerate(words) if w[1] == "NOUN") + 1,
                 "V": next(i for i, w in enumerate(words) if w[1] == "VERB") + 1,
                 "O": len(words) - 1 if words[-2][1] == "NOUN" else 0}
        lines.append(f"# sent_id = {s}")
        for i, (w, tag, h) in enumerate(words, start=1):
            head = 0 if h == "0" else index[h]
            lines.append(f"{i}\t{w}\t{w}\t{tag}\t_\t_\t{head}\t{'root' if head == 0 else 'dep'}\t_\t_")
        lines.append("")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def test_induce_train_parse_eval_round_trip(tmp_path):
    train = tmp_path / "train.conllu"
    _write_conllu(train, 40, 0)
    runner = CliRunner()
    for model in ("product", "dmv", "ccm"):
        model_path = tmp_path / f"{model}.npz"
        result = runner.invoke(main, ["induce", "train", str(train), "-o", str(model_path), "--model", model,
                                      "--iterations", "3", "--quiet"])
        assert result.exit_code == 0, result.output
        assert json.loads(result.output)["sentences"] == 40
        result = runner.invoke(main, ["induce", "eval", str(model_path), str(train)])
        assert result.exit_code == 0, result.output
        scores = json.loads(result.output)
        assert 0 <= scores["f1"] <= 1 and ("directed" in scores) == (model != "ccm")
        trees = tmp_path / f"{model}.trees"
        args = ["induce", "parse", str(model_path), str(train), "--trees", str(trees)]
        if model != "ccm":
            args += ["--conllu", str(tmp_path / f"{model}.conllu")]
        result = runner.invoke(main, args)
        assert result.exit_code == 0, result.output
        parsed = read_ptb(trees)
        assert len(parsed) == 40 and "." not in parsed[0].words()
        if model != "ccm":
            out = read_conllu(tmp_path / f"{model}.conllu")
            assert len(out) == 40
            assert all(sum(r[6] == "0" for r in s.rows) == 1 for s in out)
    result = runner.invoke(main, ["induce", "parse", str(tmp_path / "ccm.npz"), str(train), "--conllu",
                                  str(tmp_path / "x.conllu")])
    assert result.exit_code != 0 and "heads" in result.output


def test_induce_tags_format_and_errors(tmp_path):
    tags = tmp_path / "tags.txt"
    tags.write_text("DT NN VBD\nDT JJ NN VBD DT NN\n\nPRP VBD\n")
    runner = CliRunner()
    model_path = tmp_path / "m.npz"
    result = runner.invoke(main, ["induce", "train", str(tags), "-o", str(model_path), "--iterations", "2", "--quiet"])
    assert result.exit_code == 0, result.output
    result = runner.invoke(main, ["induce", "parse", str(model_path), str(tags)])
    assert result.exit_code == 0 and result.output.count("\n") == 3
    result = runner.invoke(main, ["induce", "eval", str(model_path), str(tags)])
    assert result.exit_code != 0 and "no trees" in result.output
    other = tmp_path / "other.txt"
    other.write_text("DT XX\n")
    result = runner.invoke(main, ["induce", "parse", str(model_path), str(other)])
    assert result.exit_code != 0 and "'XX' was not seen" in result.output
    bad = tmp_path / "bad.mrg"
    bad.write_text("(S (NP (DT a))\n")
    result = runner.invoke(main, ["induce", "train", str(bad), "-o", str(model_path)])
    assert result.exit_code != 0 and "bad.mrg:1:" in result.output


def test_induce_train_ccm_empty_spans_flag_reaches_the_model(tmp_path):
    from varorder.grammar.induce import GrammarInducer

    train = tmp_path / "train.conllu"
    _write_conllu(train, 20, 1)
    runner = CliRunner()
    for flag in ([], ["--ccm-empty-spans"]):
        path = tmp_path / f"m{len(flag)}.npz"
        result = runner.invoke(main, ["induce", "train", str(train), "-o", str(path), "--iterations", "2", "--quiet",
                                      *flag])
        assert result.exit_code == 0, result.output
        assert GrammarInducer.load(path).ccm_empty_spans is bool(flag)


def test_induce_eval_head_style_function_rescores_against_ptb_style_heads(tmp_path):
    train = tmp_path / "train.conllu"
    # "John will go": nsubj aux root; the PTB-style gold makes "will" the head
    train.write_text("1\tJohn\t_\tPROPN\t_\t_\t3\tnsubj\t_\t_\n2\twill\t_\tAUX\t_\t_\t3\taux\t_\t_\n"
                     "3\tgo\t_\tVERB\t_\t_\t0\troot\t_\t_\n\n" * 5, encoding="utf-8")
    runner = CliRunner()
    model_path = tmp_path / "m.npz"
    assert runner.invoke(main, ["induce", "train", str(train), "-o", str(model_path), "--model", "dmv",
                                "--iterations", "2", "--quiet"]).exit_code == 0
    scores = {}
    for style in ("content", "function"):
        result = runner.invoke(main, ["induce", "eval", str(model_path), str(train), "--head-style", style])
        assert result.exit_code == 0, result.output
        scores[style] = json.loads(result.output)["directed"]
    from varorder.grammar.induce import GrammarInducer

    (heads,), _ = GrammarInducer.load(model_path).parse([["PROPN", "AUX", "VERB"]])
    for style, gold in (("content", [2, 2, -1]), ("function", [1, -1, 1])):
        assert scores[style] == np.mean(np.asarray(heads) == gold)
