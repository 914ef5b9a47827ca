"""Issue #47, the ``--stream`` commands' shared conventions, attacked on every one of them.

* A blank line is answered, never the end of the stream (``align apply --stream`` ended there,
  with an error; the three others answered it).
* A line longer than ``--max-line-chars`` is answered by an empty line on stdout and one ``Error:``
  line naming it on stderr, and the stream goes on (a 10 MB line gave no answer in 420 s at load 19).

Every command with a ``--stream`` flag is found by walking the command tree, so a new one must come
with a model here (the first test fails otherwise)."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from varorder.cli.main import main
from varorder.testing.hostile import commands_with, over_long_line


def _stream_commands():
    return commands_with(main, lambda params: any(p.name == "stream" for p in params))


# command: (a valid line, what a blank line is answered with: None for "anything on one line")
_LINES = {"tag predict": ("the dog runs .", ""), "lm score": ("the dog runs", None),
          "align apply": ("the dog ||| le chien", ""), "transduce apply": ("a b", "")}


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    folder = tmp_path_factory.mktemp("stream-models")
    runner = CliRunner()
    conllu = folder / "t.conllu"
    conllu.write_text("".join(f"1\tthe\t_\tDET\t_\t_\t_\t_\t_\t_\n2\t{w}\t_\tNOUN\t_\t_\t_\t_\t_\t_\n"
                              f"3\truns\t_\tVERB\t_\t_\t_\t_\t_\t_\n4\t.\t_\tPUNCT\t_\t_\t_\t_\t_\t_\n\n"
                              for w in ["dog", "cat", "fox"] * 4))
    corpus = folder / "c.txt"
    corpus.write_text("the dog runs\na cat sleeps\nthe cat runs\n" * 5)
    joint = folder / "j.txt"
    joint.write_text("the dog ||| le chien\nthe cat ||| le chat\na dog ||| un chien\n" * 4)
    pairs = folder / "p.tsv"
    pairs.write_text("".join(f"{x}\t{y}\n" for x, y in [("a b", "xyy"), ("b a", "yyx"), ("a", "x"), ("b", "yy")] * 3))
    commands = {
        "tag predict": ["tag", "train", str(conllu), "-o", str(folder / "tag.npz"), "--max-iterations", "3", "--quiet"],
        "lm score": ["lm", "train", str(corpus), "-n", "2", "--discount-fallback", "-o", str(folder / "lm.arpa")],
        "align apply": ["align", "train", str(joint), "-o", str(folder / "al.npz"), "--iterations", "1",
                        "--ibm1-iterations", "1", "-q"],
        "transduce apply": ["transduce", "train", str(pairs), "-o", str(folder / "tr.npz"), "--size", "2",
                            "--order", "2", "--epochs", "1", "--hash-bits", "10"],
    }
    out = {}
    for name, args in commands.items():
        result = runner.invoke(main, args)
        assert result.exit_code == 0, (name, result.output)
        out[name] = args[args.index("-o") + 1]
    return out


def _run(command, model, text, *options):
    return CliRunner().invoke(main, [*command.split(), "--stream", *options, model, "-"], input=text)


def test_every_stream_command_is_attacked_here():
    assert sorted(_stream_commands()) == sorted(_LINES)


@pytest.mark.parametrize("command", sorted(_LINES))
def test_a_blank_line_is_answered_and_the_stream_goes_on(command, models):
    line, blank_answer = _LINES[command]
    result = _run(command, models[command], f"{line}\n\n{line}\n")
    assert result.exit_code == 0, (result.output, result.stderr)
    answers = result.stdout.splitlines()
    if command == "lm score":  # a header line first, a summary last; a blank line is the empty sentence
        answers = answers[1:-1]
    assert len(answers) == 3 and answers[0] == answers[2], answers
    if blank_answer is not None:
        assert answers[1] == blank_answer


@pytest.mark.parametrize("command", sorted(_LINES))
def test_an_over_long_line_is_refused_alone(command, models):
    line, _ = _LINES[command]
    long_line = over_long_line(line, 40)
    result = _run(command, models[command], f"{line}\n{long_line}\n{line}\n", "--max-line-chars", "40")
    assert result.exit_code == 0, (result.output, result.stderr)
    answers = result.stdout.splitlines()
    if command == "lm score":
        answers = answers[1:-1]
    assert len(answers) == 3 and answers[1] == "" and answers[0] == answers[2] != "", answers
    errors = result.stderr.splitlines()
    errors = [e for e in errors if e.startswith("Error")]
    assert errors == [f"Error: <stdin>:2: a line of {len(long_line)} characters, longer than --max-line-chars 40: "
                      "answered with an empty line"], result.stderr


@pytest.mark.parametrize("command", ["tag predict", "align apply"])
def test_a_ten_megabyte_line_does_not_stall_the_stream(command, models):
    # the case, at the default limit: read in pieces, answered at once with an empty line
    line, _ = _LINES[command]
    huge = ("word " * 2_000_000)[:10_000_000]
    result = _run(command, models[command], f"{huge}\n{line}\n")
    assert result.exit_code == 0, (result.output[-500:], result.stderr[-500:])
    answers = result.stdout.splitlines()
    assert len(answers) == 2 and answers[0] == "" and answers[1] != "", answers[:3]
    assert "a line of 10000000 characters" in result.stderr
