"""Determinism of every command family (#33): the same seed gives bit-identical outputs on one
thread and on two (``VARORDER_THREADS``), in separate processes with different string hashing
(``PYTHONHASHSEED``: a set or dict of strings iterated in hash order showed as a 1.3e-8
relative difference in ``strings infer --method pep``).

One process per configuration runs every command (loading Numba once), then each family's
outputs are compared: text byte for byte; model files array by array and metadata field by
field, wall-clock fields (``seconds``, ``*_seconds``, ``sha256`` which covers them) aside."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

# (family, outputs to compare, command lines); "{d}" is the run's output folder
COMMANDS = {
    "lm": (["m.arpa", "ll.npz", "score.stdout", "max.arpa", "m.bin", "mq.bin"], [
        ["lm", "train", "words.txt", "-n", "3", "--discount-fallback", "-o", "{d}/m.arpa"],
        ["lm", "maxarpa", "{d}/m.arpa", "{d}/max.arpa"],
        ["lm", "build-binary", "{d}/m.arpa", "{d}/m.bin"],
        ["lm", "build-binary", "-q", "8", "-b", "8", "{d}/m.arpa", "{d}/mq.bin"],
        ["lm", "train", "words.txt", "-n", "3", "--model", "loglinear", "--epochs", "2", "--batch-size", "7",
         "-o", "{d}/ll.npz"],
        ["lm", "score", "{d}/ll.npz", "words.txt", ">score"]]),
    "tag": (["crf.npz", "sr.npz", "crf.conllu"], [
        ["tag", "train", "train.conllu", "-o", "{d}/crf.npz", "--max-iterations", "8", "--quiet"],
        ["tag", "train", "train.conllu", "-o", "{d}/sr.npz", "--learner", "samplerank", "--epochs", "2", "--seed", "3",
         "--quiet"],
        ["tag", "predict", "{d}/crf.npz", "train.conllu", "-o", "{d}/crf.conllu"]]),
    "align": (["al.npz", "out.align", "gdf.align", "al_w1.npz"], [
        ["align", "train", "c.e", "c.f", "-o", "{d}/al.npz", "--iterations", "2", "--ibm1-iterations", "2", "-q",
         "--workers", "2", "--shard-size", "7", "-a", "{d}/out.align"],
        ["align", "train", "c.e", "c.f", "-o", "{d}/al_w1.npz", "--iterations", "2", "--ibm1-iterations", "2", "-q",
         "--workers", "1", "--shard-size", "7"],  # serial EM: the same model as two workers' (#33)
        ["align", "apply", "{d}/al.npz", "c.e", "c.f", "--method", "grow-diag-final", "-o", "{d}/gdf.align", "-q"]]),
    "decipher": (["dec/model.npz", "dec/table.tsv", "eval.stdout"], [
        ["decipher", "train", "task", "-o", "{d}/dec", "--order", "2", "--inference", "rcms", "--size", "4",
         "--iterations", "2", "--init-noise", "0.3", "--seed", "5", "--workers", "2"],
        ["decipher", "eval", "task", "{d}/dec/model.npz", ">eval"]]),
    "induce": (["g.npz", "g.trees"], [
        ["induce", "train", "trees.conllu", "-o", "{d}/g.npz", "--iterations", "2", "--quiet"],
        ["induce", "parse", "{d}/g.npz", "trees.conllu", "--trees", "{d}/g.trees"]]),
    "transduce": (["t.npz", "t.tsv"], [
        ["transduce", "train", "pairs.tsv", "-o", "{d}/t.npz", "--size", "2", "--epochs", "2", "--hash-bits", "12",
         "--order", "3", "--truncation", "0.01", "--seed", "4"],
        ["transduce", "apply", "{d}/t.npz", "pairs.tsv", "-o", "{d}/t.tsv"]]),
    "strings": (["s.json", "sp.json"], [
        ["strings", "infer", "--synthetic", "30", "--method", "pep", "--seed", "3", "--iterations", "2",
         "--json", "{d}/s.json", ">strings"],
        ["strings", "infer", "--synthetic", "12", "--seed", "3", "--iterations", "2", "--inner-passes", "2",
         "--json", "{d}/sp.json"]]),  # the default method, pep-prox
    "sample": (["sample.stdout", "decode.stdout"], [
        ["sample", "{d}/m.arpa", "--task", "t9", "--text", "843 364", "--samples", "5", "--seed", "7", ">sample"],
        ["decode", "{d}/m.arpa", "--task", "t9", "--text", "843 364 227533", ">decode"]]),
}

RUNNER = textwrap.dedent("""
    import contextlib, json, os, sys
    from varorder.cli.main import main
    out = sys.argv[1]
    for args in json.loads(sys.argv[2]):
        args = [a.replace("{d}", out) for a in args]
        target = os.devnull
        if args[-1].startswith(">"):
            target = os.path.join(out, args.pop()[1:] + ".stdout")
        with open(target, "w") as handle, contextlib.redirect_stdout(handle):
            try:
                main(args, prog_name="varorder", standalone_mode=False)
            except SystemExit as stop:
                assert not stop.code, (args, stop.code)
""")


def _data(folder: Path) -> None:
    from varorder._warmup import _tagged_corpus
    from varorder.testing.hostile import cipher_task

    rng = np.random.default_rng(0)
    words = ["the", "dog", "barked", "fog", "lifted", "two", "dogs", "ate", "a", "came", "good", "home"]
    (folder / "words.txt").write_text("".join(" ".join(rng.choice(words, size=int(rng.integers(2, 8)))) + "\n"
                                              for _ in range(60)))
    _tagged_corpus(folder / "train.conllu", 30, 0)
    english = [f"e{i}" for i in range(12)]
    pairs = []
    for _ in range(40):
        e = list(rng.choice(english, size=int(rng.integers(2, 7))))
        f = ["f" + w[1:] for w in e]
        rng.shuffle(f)
        pairs.append((e, f))
    (folder / "c.e").write_text("".join(" ".join(e) + "\n" for e, _ in pairs))
    (folder / "c.f").write_text("".join(" ".join(f) + "\n" for _, f in pairs))
    cipher_task(folder / "task")
    tags = {"the": "DET", "a": "DET", "big": "ADJ", "dog": "NOUN", "cat": "NOUN", "runs": "VERB", "eats": "VERB"}
    lines = []
    for s, sentence in enumerate([["the", "dog", "runs"], ["a", "big", "cat", "eats"], ["the", "cat", "runs"],
                                  ["a", "dog", "eats"]] * 3):
        verb = next(i for i, w in enumerate(sentence, 1) if tags[w] == "VERB")
        lines += [f"# sent_id = {s}"] + [f"{i}\t{w}\t{w}\t{tags[w]}\t_\t_\t{0 if i == verb else verb}\tdep\t_\t_"
                                         for i, w in enumerate(sentence, 1)] + [""]
    (folder / "trees.conllu").write_text("\n".join(lines) + "\n")
    (folder / "pairs.tsv").write_text("".join(f"{x}\t{y}\n" for x, y in [("K AE T", "cat"), ("D AO G", "dog"),
                                                                           ("AE T", "at"), ("K AO T", "cot")] * 2))


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Every command in two processes: (1 thread, hash seed 1) and (2 threads, hash seed 2)."""
    import varorder

    folder = tmp_path_factory.mktemp("determinism")
    _data(folder)
    commands = [args for _, lines in COMMANDS.values() for args in lines]
    source = str(Path(varorder.__file__).resolve().parents[1])
    outputs = []
    for threads, hash_seed in ((1, 1), (2, 2)):
        out = folder / f"out{threads}"
        out.mkdir()
        env = dict(os.environ, VARORDER_THREADS=str(threads), NUMBA_NUM_THREADS="2", PYTHONHASHSEED=str(hash_seed),
                   PYTHONPATH=os.pathsep.join([source, os.environ.get("PYTHONPATH", "")]))
        done = subprocess.run([sys.executable, "-c", RUNNER, str(out), json.dumps(commands)], cwd=folder, env=env,
                              capture_output=True, text=True, timeout=900)
        assert done.returncode == 0, done.stderr[-3000:]
        outputs.append(out)
    return outputs


_CLOCK = ("seconds", "cpu_seconds", "inference_seconds", "total_seconds", "sha256", "elapsed", "time")


def _without_clocks(value):
    if isinstance(value, dict):
        return {k: _without_clocks(v) for k, v in value.items() if k not in _CLOCK}
    if isinstance(value, list):
        return [_without_clocks(v) for v in value]
    return value


def _same(a: Path, b: Path) -> None:
    if a.suffix == ".npz":
        from varorder.testing.hostile import model_members

        first, second = model_members(a), model_members(b)
        assert first.keys() == second.keys()
        meta = [_without_clocks(json.loads(m.pop("__meta__").tobytes())) for m in (first, second)]
        assert meta[0] == meta[1], a.name
        for name in first:
            assert first[name].dtype == second[name].dtype and first[name].tobytes() == second[name].tobytes(), \
                f"{a.name}: array {name} differs"
    elif a.suffix == ".json":
        assert _without_clocks(json.loads(a.read_text())) == _without_clocks(json.loads(b.read_text())), a.name
    else:  # text: byte for byte but for the wall-clock figure a summary line ends with ("0.084 s")
        import re

        clock = re.compile(rb"\d+\.\d+ s$", re.MULTILINE)
        assert clock.sub(b"<clock>", a.read_bytes()) == clock.sub(b"<clock>", b.read_bytes()), a.name


@pytest.mark.parametrize("family", sorted(COMMANDS))
def test_same_seed_same_outputs_on_one_and_two_threads(runs, family):
    one, two = runs
    for name in COMMANDS[family][0]:
        assert (one / name).exists(), name
        _same(one / name, two / name)


def test_align_same_model_on_one_or_two_workers(runs):
    """``align train --workers 1`` (serial EM) and ``--workers 2`` (a thread executor) write the same model: a
    serial E-step adds each shard's counts as an executor does (before #33 the tables differed in the last bits)."""
    for out in runs:
        _same(out / "al.npz", out / "al_w1.npz")
