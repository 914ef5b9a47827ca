"""``varorder tag predict`` on plain text (one sentence a line, :func:`varorder.io.text.tokenize` or
``--no-tokenize``), output to stdout by default, and errors on input of the other format that say which
format was expected and which option reads the other; the tokenizer's rules."""

from __future__ import annotations

import gzip

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from varorder.cli.main import main
from varorder.io.conllu import read_conllu
from varorder.io.text import format_tagged, tokenize
from varorder.testing.hostile import NON_UTF8_LINE, lying_gzip, over_long_line

_TAGS = {"the": "DET", "a": "DET", "The": "DET", "dog": "NOUN", "cat": "NOUN", "runs": "VERB", "sleeps": "VERB",
         ".": "PUNCT", "'s": "PART", "is": "AUX", "n't": "PART"}
_SENTENCES = [["The", "dog", "runs", "."], ["a", "cat", "sleeps", "."], ["the", "cat", "runs", "."],
              ["The", "dog", "'s", "cat", "is", "n't", "."]] * 3


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("tag-text")
    train = folder / "train.conllu"
    train.write_text("".join("".join(f"{i}\t{w}\t_\t{_TAGS[w]}\t_\t_\t_\t_\t_\t_\n" for i, w in enumerate(s, 1)) + "\n"
                             for s in _SENTENCES))
    models = {}
    for kind in ("crf", "hmm"):
        models[kind] = folder / f"{kind}.npz"
        extra = [] if kind == "hmm" else ["--max-iterations", "40"]
        result = CliRunner().invoke(main, ["tag", "train", str(train), "-o", str(models[kind]), "--model", kind,
                                           "--quiet", *extra])
        assert result.exit_code == 0, result.output
    return folder, train, models


def _predict(model, *args, input=None):
    return CliRunner().invoke(main, ["tag", "predict", str(model), *map(str, args)], input=input)


@pytest.mark.parametrize("kind", ["crf", "hmm"])
def test_plain_text_from_stdin_to_stdout(files, kind):
    _, _, models = files
    result = _predict(models[kind], "-", input="The dog runs.\n\nThe dog's cat isn't.\n")
    assert result.exit_code == 0, result.output
    assert result.stdout == ("The\tDET\ndog\tNOUN\nruns\tVERB\n.\tPUNCT\n\n"
                             "\n"  # the blank line: an empty sentence
                             "The\tDET\ndog\tNOUN\n's\tPART\ncat\tNOUN\nis\tAUX\nn't\tPART\n.\tPUNCT\n\n")
    assert "tagged 11 tokens in 3 sentences" in result.stderr and "-> stdout" in result.stderr


def test_no_tokenize_takes_the_tokens_as_given(files):
    _, _, models = files
    result = _predict(models["crf"], "-", "--no-tokenize", input="The dog runs.\n")
    assert result.exit_code == 0, result.output
    assert [line.split("\t")[0] for line in result.stdout.splitlines() if line] == ["The", "dog", "runs."]


def test_a_txt_file_is_text_and_o_writes_a_file(files, tmp_path):
    _, _, models = files
    text = tmp_path / "in.txt"
    text.write_text("a cat sleeps .\n")
    out = tmp_path / "out.tsv"
    result = _predict(models["crf"], text, "-o", out)
    assert result.exit_code == 0 and result.stdout == "", result.output
    assert out.read_text() == format_tagged(["a", "cat", "sleeps", "."], ["DET", "NOUN", "VERB", "PUNCT"])
    gz = tmp_path / "in.txt.gz"
    gz.write_bytes(gzip.compress(b"a cat sleeps .\n"))
    assert _predict(models["crf"], gz).stdout == out.read_text()


def test_conllu_goes_to_stdout_without_o(files):
    _, train, models = files
    result = _predict(models["crf"], train)
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("1\tThe\t_\tDET\t") and result.stdout.count("\n\n") == len(_SENTENCES)


def test_conllu_given_as_text_says_which_option_reads_it(files):
    _, train, models = files
    result = _predict(models["crf"], "-", input=train.read_text())
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert "<stdin>:1:" in result.stderr and "CoNLL-U" in result.stderr and "plain text" in result.stderr
    assert "--format conllu" in result.stderr
    comment = _predict(models["crf"], "-", input="# sent_id = 1\n")
    assert comment.exit_code == 1 and "--format conllu" in comment.stderr


def test_text_given_as_conllu_says_which_option_reads_it(files, tmp_path):
    _, _, models = files
    text = tmp_path / "sentences.conllu"
    text.write_text("The dog runs.\n")
    result = _predict(models["crf"], text)
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert f"{text}:1:" in result.stderr and "expected 10 tab-separated columns" in result.stderr
    assert "--format text" in result.stderr


def test_stdin_in_another_format_is_refused_with_the_options(files):
    _, train, models = files
    result = _predict(models["crf"], "--format", "conllu", "-", input=train.read_text())
    assert result.exit_code == 2 and "--format text" in result.output and "--stream" in result.output


def test_hostile_text(files, tmp_path):
    _, _, models = files
    undecodable = CliRunner().invoke(main, ["tag", "predict", str(models["crf"]), "-"], input=NON_UTF8_LINE)
    assert undecodable.exit_code == 1 and "<stdin>: line 1: not valid UTF-8" in undecodable.stderr
    assert "Traceback" not in undecodable.output
    long_line = _predict(models["crf"], "-", "--max-line-chars", "50", input=over_long_line("the dog runs .", 50))
    assert long_line.exit_code == 1 and "<stdin>:1:" in long_line.stderr and "--max-line-chars" in long_line.stderr
    assert _predict(models["crf"], "-", input="").stdout == ""  # no lines: no sentences, exit 0
    only_blank = _predict(models["crf"], "-", input="\n \n")
    assert only_blank.exit_code == 0 and only_blank.stdout == "\n\n"
    lying = tmp_path / "lying.txt.gz"  # a recorded size that lies: read as a stream, tagged in full
    lying.write_bytes(lying_gzip("the dog runs .\n" * 600, tail="a cat sleeps .\n"))
    result = _predict(models["crf"], lying)
    assert result.exit_code == 0 and result.stdout.count("\n\n") == 601
    odd = _predict(models["crf"], "-", input="\u200b \x00 \ufeffdog \U0001F600 runs\t.\r\n")
    assert odd.exit_code == 0 and "Traceback" not in odd.output
    assert _predict(models["crf"], "-", "--probabilities", tmp_path / "p.tsv", input="a dog\n").exit_code == 2


def test_text_output_reads_back_as_conll_columns(files, tmp_path):
    _, _, models = files
    out = tmp_path / "tagged.conll"
    assert _predict(models["crf"], "-", "-o", out, input="The dog runs.\na cat sleeps.\n").exit_code == 0
    again = _predict(models["crf"], "--format", "conll", out)
    assert again.exit_code == 0, again.output
    columns = [line.split() for line in out.read_text().splitlines()]
    assert [line.split() for line in again.stdout.splitlines()] == columns


def test_stream_still_answers_line_by_line(files):
    _, _, models = files
    result = _predict(models["crf"], "--stream", "-", input="The dog runs .\n")
    assert result.exit_code == 0 and result.stdout == "DET NOUN VERB PUNCT\n"


def test_a_conllu_round_trip_keeps_its_words(files, tmp_path):
    _, train, models = files
    out = tmp_path / "out.conllu"
    assert _predict(models["hmm"], train, "-o", out).exit_code == 0
    assert [s.words for s in read_conllu(out)] == [s.words for s in read_conllu(train)]


def test_the_tokenizer_rules():
    assert tokenize("The dog runs.") == ["The", "dog", "runs", "."]
    assert tokenize("I can't, won't; they're here.") == ["I", "ca", "n't", ",", "wo", "n't", ";", "they", "'re",
                                                         "here", "."]
    assert tokenize("o'clock state-of-the-art 1,000.50 $5 e.g. U.S.") == [
        "o'clock", "state-of-the-art", "1,000.50", "$", "5", "e.g.", "U.S."]
    assert tokenize("“Hi,” she said — twice!") == ["“", "Hi", ",", "”", "she", "said", "—", "twice", "!"]
    assert tokenize("Müller’s café") == ["Müller", "'s", "café"]
    assert tokenize("") == [] and tokenize(" \t ") == []


@settings(max_examples=300, deadline=None)
@given(st.text(st.characters(blacklist_categories=("Cs",)), max_size=60))
def test_tokens_cover_every_character_but_spaces(line):
    tokens = tokenize(line)
    assert all(token and not any(c.isspace() for c in token) for token in tokens)
    assert "".join(tokens) == "".join(line.replace("’", "'").replace("‘", "'").split())
