"""Hostile inputs generated for every command family (#33): a valid input file of each
command, its bytes overwritten and cut (hypothesis, derandomized so CI is reproducible),
run through the command line. The command must succeed, or fail with exit 1 or 2 and one
``Error:`` line naming the damaged file — never a traceback, never another exception.

Model files are attacked in tests/test_models_hostile.py, task folders in
tests/test_decipher_hostile.py, readers alone in tests/test_io_hostile.py; this module is
the commands' half: the same damage reaching each command's own checks."""

from __future__ import annotations

import os

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from varorder.cli.main import main
from varorder.testing.hostile import HypothesisChooser, mutate_bytes

_CONLLU = "".join(f"# sent_id = {k}\n1\tthe\tthe\tDET\t_\t_\t2\tdet\t_\t_\n2\t{w}\t{w}\tNOUN\t_\t_\t3\tnsubj\t_\t_\n"
                  f"3\truns\trun\tVERB\t_\t_\t0\troot\t_\t_\n\n" for k, w in enumerate(["dog", "cat", "fox"] * 3))
_CORPUS = "".join(f"the {w} runs\na {w} sat on the mat\n" for w in ["dog", "cat", "fox", "hen"] * 2)

# family: (damaged input's name, its valid text, command line with {f} for it)
FAMILIES = {
    "lm train": ("c.txt", _CORPUS, ["lm", "train", "{f}", "-n", "3", "--discount-fallback", "-o", "out.arpa"]),
    "lm train loglinear": ("c.txt", _CORPUS, ["lm", "train", "{f}", "-n", "2", "--model", "loglinear", "--epochs", "1",
                                              "-o", "out.npz"]),
    "lm score": ("m.arpa", None, ["lm", "score", "{f}", "c.txt"]),
    "lm next": ("m.arpa", None, ["lm", "next", "{f}", "the"]),
    "decode": ("m.arpa", None, ["decode", "{f}", "--task", "t9", "--text", "843"]),
    "tag train": ("t.conllu", _CONLLU, ["tag", "train", "{f}", "-o", "out.npz", "--max-iterations", "2", "--quiet"]),
    "induce train": ("t.conllu", _CONLLU, ["induce", "train", "{f}", "-o", "out.npz", "--model", "dmv", "--iterations",
                                           "1", "--quiet"]),
    "align train": ("j.txt", "".join(f"the {w} ||| le {w}x\n" for w in ["dog", "cat", "fox"] * 3),
                    ["align", "train", "{f}", "-o", "out.npz", "--iterations", "1", "--ibm1-iterations", "1", "-q"]),
    "transduce train": ("p.tsv", "K AE T\tcat\nD AO G\tdog\nAE T\tat\n",
                        ["transduce", "train", "{f}", "-o", "out.npz", "--epochs", "1", "--size", "2", "--order", "2",
                         "--hash-bits", "8"]),
    "strings infer": ("lex", "kat\tcat\tsg\nkats\tcat\tpl\ndog\tdog\tsg\ndogz\tdog\tpl\n",
                      ["strings", "infer", "--hopkins", "{f}", "--method", "ep1", "--iterations", "1",
                       "--inner-passes", "1"]),
}


@pytest.fixture(scope="module")
def arpa_text(tmp_path_factory):
    folder = tmp_path_factory.mktemp("arpa")
    (folder / "c.txt").write_text(_CORPUS)
    result = CliRunner().invoke(main, ["lm", "train", str(folder / "c.txt"), "-n", "3", "--discount-fallback",
                                       "-o", str(folder / "m.arpa")])
    assert result.exit_code == 0, result.output
    return (folder / "m.arpa").read_text()


@pytest.mark.parametrize("family", sorted(FAMILIES))
@settings(max_examples=int(os.environ.get("HOSTILE_EXAMPLES", "20")), deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=st.data())
def test_damaged_input_is_refused_naming_it_or_used(family, arpa_text, tmp_path_factory, data):
    name, text, args = FAMILIES[family]
    folder = tmp_path_factory.mktemp("run")
    (folder / "c.txt").write_text(_CORPUS)
    raw = (text if text is not None else arpa_text).encode()
    damaged = mutate_bytes(HypothesisChooser(data), raw, max_edits=4)
    (folder / name).write_bytes(damaged)
    cwd = os.getcwd()
    os.chdir(folder)
    try:
        result = CliRunner().invoke(main, [a.replace("{f}", name) for a in args])
    finally:
        os.chdir(cwd)
    if result.exit_code == 0:
        return
    assert result.exit_code in (1, 2) and isinstance(result.exception, SystemExit), \
        (result.exit_code, repr(result.exception), result.output[-2000:])
    errors = [line for line in result.output.splitlines() if line.startswith("Error")]
    assert len(errors) == 1 and "Traceback" not in result.output, result.output[-2000:]
    assert name in errors[0], f"the error does not name {name}: {errors[0]}"
