"""The commands' ``--stream`` modes answer each line before the next one is read (issue #32).

Each test starts the command once with a pipe on stdin, writes one line, waits for that line's answer
(a command that did not flush would time out here, the next line never being written), then the next;
the answers must equal what the same command gives on the whole input at once. Then stdin is closed and
the command must exit cleanly.
"""

from __future__ import annotations

import os
import queue
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

import varorder
from varorder.cli.main import main

from test_cli_tag import _write_corpus

# a first run may compile kernels (minutes on a busy 2-core machine); a missing flush waits forever
_ANSWER_TIMEOUT_S = 300


def _converse(args, lines, leading=0):
    """Start ``varorder ARGS``, read ``leading`` lines, then per line of ``lines``: write it, read one answer.
    Returns (answers, what it wrote after stdin closed)."""
    env = dict(os.environ, PYTHONPATH=str(Path(varorder.__file__).parents[1]))
    proc = subprocess.Popen([sys.executable, "-m", "varorder", *map(str, args)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    answers_queue = queue.Queue()
    threading.Thread(target=lambda: [answers_queue.put(x) for x in iter(proc.stdout.readline, "")] + [
        answers_queue.put(None)], daemon=True).start()

    def answer():
        try:
            got = answers_queue.get(timeout=_ANSWER_TIMEOUT_S)
        except queue.Empty:
            proc.kill()
            pytest.fail(f"no answer within {_ANSWER_TIMEOUT_S} s: the line was not answered (or not flushed)")
        if got is None:
            proc.wait()
            pytest.fail(f"the command ended early: {proc.stderr.read()}")
        return got.rstrip("\n")

    try:
        for _ in range(leading):
            answer()
        answers = []
        for line in lines:
            proc.stdin.write(line + "\n")
            proc.stdin.flush()
            answers.append(answer())
        proc.stdin.close()
        rest = []
        while (got := answers_queue.get(timeout=_ANSWER_TIMEOUT_S)) is not None:
            rest.append(got.rstrip("\n"))
        assert proc.wait(timeout=_ANSWER_TIMEOUT_S) == 0, proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
    return answers, rest


def test_tag_predict_stream(tmp_path):
    train = tmp_path / "train.conllu"
    _write_corpus(train, 40, 0)
    model = tmp_path / "crf.npz"
    result = CliRunner().invoke(main, ["tag", "train", str(train), "-o", str(model), "--max-iterations", "10",
                                       "--quiet"])
    assert result.exit_code == 0, result.output
    lines = ["the dog runs .", "a big cat sleeps .", "", "the small dog sleeps ."]
    answers, rest = _converse(["tag", "predict", "--stream", model, "-"], lines)
    assert rest == []
    from varorder.models.crf import CRF
    from varorder.models.features import parse_templates, template_features

    crf = CRF.load(model)
    if crf.features is not None:  # the model extracts its own features from words
        def inputs(words):
            return words
    else:
        templates = parse_templates("pos")

        def inputs(words):
            return template_features(words, templates)
    expected = [" ".join(crf.predict([inputs(x.split())])[0]) if x else "" for x in lines]
    assert answers == expected
    batch = crf.predict([inputs(x.split()) for x in lines if x])
    assert [a for a in answers if a] == [" ".join(t) for t in batch]


def test_lm_score_stream(tmp_path):
    corpus = tmp_path / "corpus.txt"
    rng = np.random.default_rng(0)
    words = ["the", "dog", "cat", "runs", "sleeps", "a"]
    corpus.write_text("".join(" ".join(rng.choice(words, rng.integers(1, 6))) + "\n" for _ in range(200)))
    model = tmp_path / "lm.arpa"
    result = CliRunner().invoke(main, ["lm", "train", str(corpus), "-n", "3", "-o", str(model), "--discount-fallback"])
    assert result.exit_code == 0, result.output
    binary = tmp_path / "lm.bin"
    result = CliRunner().invoke(main, ["lm", "build-binary", str(model), str(binary)])
    assert result.exit_code == 0, result.output
    lines = ["the dog runs", "a cat sleeps sleeps", "unknown words here", "the"]
    # long lines: past 2,000 tokens the stream switches to the compiled scorer (the same numbers)
    lines += [" ".join(rng.choice(words + ["oov"], 450)) for _ in range(6)] + ["a dog", "cat"]
    text = tmp_path / "text.txt"
    text.write_text("\n".join(lines) + "\n")
    batch = CliRunner().invoke(main, ["lm", "score", str(binary), str(text)]).output.splitlines()
    answers, rest = _converse(["lm", "score", "--stream", binary, "-"], lines, leading=1)
    assert answers == batch[1:-1]  # the per-sentence lines, in order
    assert rest == [batch[-1]]  # the same summary at the end


def test_align_apply_stream(tmp_path):
    from varorder.agree.aligner import WordAligner

    from test_agree_aligner import _synthetic

    pairs, _ = _synthetic(60, seed=3, vocab=10)
    model = tmp_path / "al.npz"
    WordAligner(ibm1_iterations=2, iterations=2).fit(pairs).save(model)
    lines = [f"{' '.join(e)} ||| {' '.join(f)}" for e, f in pairs[:5]]
    joint = tmp_path / "joint.txt"
    joint.write_text("\n".join(lines) + "\n")
    batch = CliRunner().invoke(main, ["align", "apply", str(model), str(joint), "-q"])
    assert batch.exit_code == 0, batch.output
    answers, rest = _converse(["align", "apply", "--stream", model, "-"], lines)
    assert answers == batch.output.splitlines()
    assert rest == []


def test_transduce_apply_stream(tmp_path):
    data = tmp_path / "train.tsv"
    data.write_text("".join(f"{x}\t{y}\n" for x, y in [("a b", "xyy"), ("b a", "yyx"), ("a", "x"), ("b", "yy")] * 3))
    model = tmp_path / "m.npz"
    result = CliRunner().invoke(main, ["transduce", "train", str(data), "-o", str(model), "--size", "3",
                                       "--order", "3", "--epochs", "2", "--hash-bits", "14"])
    assert result.exit_code == 0, result.output
    inputs = tmp_path / "inputs.txt"
    lines = ["a b", "b", "b a a"]
    inputs.write_text("\n".join(lines) + "\n")
    batch = CliRunner().invoke(main, ["transduce", "apply", str(model), str(inputs), "--format", "inputs"])
    assert batch.exit_code == 0, batch.output
    answers, rest = _converse(["transduce", "apply", "--stream", model, "-"], lines)
    assert answers == batch.output.splitlines()
    assert rest == []


def test_stream_refuses_file_outputs(tmp_path):
    runner = CliRunner()
    model = tmp_path / "m.npz"
    model.write_bytes(b"")
    for args in (["tag", "predict", "--stream", str(model), "-", "-o", str(tmp_path / "o")],
                 ["lm", "score", "--stream", "--no-sentences", str(model), "-"],
                 ["transduce", "apply", "--stream", str(model), "-", "-o", str(tmp_path / "o")]):
        result = runner.invoke(main, args)
        assert result.exit_code == 2 and "--stream" in result.output, result.output
