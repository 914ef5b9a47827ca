"""Issue #47: degenerate tasks, forged task and model files, a diverging fit, the older suites' cases
and inputs larger than a command may hold. Each test here failed on the main of 2026-12-01 (adb08d3)
and passes now (docs/notes/47-hostile-round-three.md lists which case each covers)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner

from varorder.cli.main import main
from varorder.testing.hostile import (NON_UTF8_LINE, SHORT_ENTITY_HEADER, commands_with, lying_gzip, model_members,
                                      saved_model, write_members)

_HEADER = "# global.Entity = GRP-etype-infstat-salience-centering-minspan-link-identity"
_GUM = """# newdoc id = GUM_bio_mini
{header}
# sent_id = mini-1
# text = Ada Lovelace wrote .
1	Ada	Ada	PROPN	NNP	Number=Sing	3	nsubj	3:nsubj	Entity=(1-person-new-sssss-cf1-1,2-coref-Ada_Lovelace
2	Lovelace	Lovelace	PROPN	NNP	Number=Sing	1	flat	1:flat	Entity=1)
3	wrote	write	VERB	VBD	_	0	root	0:root	_
4	.	.	PUNCT	.	_	3	punct	3:punct	_

# sent_id = mini-2
# text = She wrote notes .
1	She	she	PRON	PRP	Case=Nom|Gender=Fem|Number=Sing|Person=3|PronType=Prs	2	nsubj	2:nsubj	Entity=(1-person-giv:act-sssss-cf1-1-coref)
2	wrote	write	VERB	VBD	_	0	root	0:root	_
3	notes	note	NOUN	NNS	Number=Plur	2	obj	2:obj	_
4	.	.	PUNCT	.	_	2	punct	2:punct	_

"""


def _invoke(*args, **kwargs):
    return CliRunner().invoke(main, [str(a) for a in args], **kwargs)


def _one_error(result, *needles):
    errors = [line for line in result.output.splitlines() if line.startswith("Error")]
    assert len(errors) == 1 and "Traceback" not in result.output, result.output[-2000:]
    for needle in needles:
        assert str(needle) in errors[0], (needle, errors[0])
    return errors[0]


# ---- NEG: degenerate tasks ---------------------------------------------------------------------

@pytest.fixture
def neg_task(tmp_path):
    """A prepared task (one document, two slots) and a model trained on it."""
    conllu = tmp_path / "gum.conllu"
    conllu.write_text(_GUM.format(header=_HEADER))
    task, model = tmp_path / "task.json", tmp_path / "neg.npz"
    result = _invoke("neg", "prepare", conllu, "-o", task)
    assert result.exit_code == 0, result.output
    result = _invoke("neg", "train", task, "-o", model, "--method", "unary")
    assert result.exit_code == 0, result.output
    return task, model


def test_neg_prepare_refuses_an_empty_conllu_file(tmp_path):
    empty = tmp_path / "empty.conllu"
    empty.write_text("")
    result = _invoke("neg", "prepare", empty, "-o", tmp_path / "task.json")
    assert result.exit_code == 1
    _one_error(result, empty, "0 slots")
    assert not (tmp_path / "task.json").exists()


def test_neg_prepare_refuses_a_two_field_entity_header(tmp_path):
    # every person mention's etype swallowed the other fields: every person dropped, without a word
    conllu = tmp_path / "short.conllu"
    conllu.write_text(_GUM.format(header=SHORT_ENTITY_HEADER))
    result = _invoke("neg", "prepare", conllu, "-o", tmp_path / "task.json")
    assert result.exit_code == 1
    _one_error(result, f"{conllu}:5:", "global.Entity")


def _task_with(task, edit):
    payload = json.loads(task.read_text())
    edit(payload)
    forged = task.with_name("forged.json")
    forged.write_text(json.dumps(payload))
    return forged


def _no_documents(payload):
    payload["documents"] = []


def _no_slots(payload):
    for document in payload["documents"]:
        document["slots"] = []


@pytest.mark.parametrize("edit", [_no_documents, _no_slots], ids=["0 documents", "0 slots"])
def test_neg_train_refuses_a_task_without_slots(neg_task, tmp_path, edit):
    task, _ = neg_task
    forged = _task_with(task, edit)
    result = _invoke("neg", "train", forged, "-o", tmp_path / "m.npz")
    assert result.exit_code == 1
    _one_error(result, forged, "0 slots")
    assert not (tmp_path / "m.npz").exists()


@pytest.mark.parametrize("command", ["eval", "predict"])
@pytest.mark.parametrize("edit", [_no_documents, _no_slots], ids=["0 documents", "0 slots"])
def test_neg_eval_and_predict_warn_and_exit_1_on_a_task_without_slots(neg_task, tmp_path, edit, command):
    task, model = neg_task
    forged = _task_with(task, edit)
    extra = ["-o", tmp_path / "out.txt"] if command == "predict" else []
    result = _invoke("neg", command, model, forged, *extra)
    assert result.exit_code == 1, result.output
    assert result.stderr.startswith("Warning: ") and str(forged) in result.stderr and "0 slots" in result.stderr
    assert "accuracy" not in result.stdout and not (tmp_path / "out.txt").exists()


def _slot_field(index, value):
    def edit(payload):
        payload["documents"][0]["slots"][0][index] = value
    return edit


@pytest.mark.parametrize("edit, what", [
    (_slot_field(6, 10 ** 6), "sentence"), (_slot_field(7, -5), "paragraph"), (_slot_field(6, -1), "sentence"),
    (_slot_field(8, "dep=nsubj"), "features"),
    (lambda p: p["documents"][0].update(sentence_starts=[0, 99]), "sentence_starts"),
    (lambda p: p["documents"][0].update(paragraph_of_sentence=[0, -5]), "paragraph_of_sentence"),
], ids=["sentence 10^6", "paragraph -5", "sentence -1", "features a string", "sentence start", "paragraph -5 list"])
def test_neg_task_indices_are_checked_on_load(neg_task, edit, what):
    from varorder.neg.task import load_task

    forged = _task_with(neg_task[0], edit)
    with pytest.raises(ValueError, match=f"{forged}.*{what}"):
        load_task(forged)


# ---- model files -----------------------------------------------------------------------------------

def _forge(path, section, key, value):
    members = model_members(path)
    meta = json.loads(members["__meta__"].tobytes())
    meta[section][key] = value
    members["__meta__"] = np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)
    bad = path.with_name("forged.npz")
    write_members(bad, members)
    return bad


@pytest.mark.parametrize("value", [[], {}, "x", -1, True, 0.5])
def test_a_forged_neg_random_state_is_refused_naming_the_file(tmp_path, value):
    cls, _, path = saved_model("NegGenerator", tmp_path)
    bad = _forge(path, "params", "random_state", value)
    with pytest.raises(ValueError, match=f"{bad}.*random_state"):
        cls.load(bad)


def test_a_loglinear_root_context_with_a_negative_word_id_is_refused(tmp_path):
    cls, _, path = saved_model("LogLinearLM", tmp_path)
    members = model_members(path)
    for value in (-2, -42):
        words = members["ctx_word"].copy()
        words[0] = value
        bad = tmp_path / "forged.npz"
        write_members(bad, {**members, "ctx_word": words})
        with pytest.raises(ValueError, match=f"{bad}.*root"):
            cls.load(bad)


def test_flipped_zip_flags_are_a_clear_error(tmp_path):
    # a compression method or encryption flag flipped by damage (NotImplementedError, RuntimeError)
    cls, _, path = saved_model("ReifiedContextModel", tmp_path)
    raw = bytearray(path.read_bytes())
    local = raw.index(b"PK\x03\x04")
    for offset, value in ((8, 99), (6, 1)):  # compression method; general purpose flags (encrypted)
        damaged = bytearray(raw)
        damaged[local + offset] = value
        central = damaged.index(b"PK\x01\x02")
        damaged[central + offset + 2] = value
        bad = tmp_path / f"flag{offset}.npz"
        bad.write_bytes(bytes(damaged))
        with pytest.raises(ValueError, match=f"{bad}"):
            cls.load(bad)


# ---- a fit that diverges fails -----------------------------------------------------------------------

@pytest.mark.parametrize("epochs", ["1", "10"])
def test_a_diverging_loglinear_fit_fails_naming_the_option_and_writes_nothing(tmp_path, epochs):
    corpus = tmp_path / "c.txt"
    corpus.write_text("the dog runs\na cat sleeps\nthe cat runs\n" * 20)
    out = tmp_path / "ll.npz"
    result = _invoke("lm", "train", corpus, "-n", "2", "--model", "loglinear", "--lipschitz", "1e-300",
                     "--epochs", epochs, "-o", out)
    assert result.exit_code == 1
    _one_error(result, "diverged", "--lipschitz")
    assert not out.exists()


def test_the_library_raises_divergence_error_with_the_option():
    from varorder.errors import DivergenceError
    from varorder.lm.corpus import Vocabulary
    from varorder.loglinear.model import StructuredLogLinear

    sentences = [["the", "dog", "runs"], ["a", "cat", "sleeps"], ["the", "cat", "runs"]] * 20
    vocabulary = Vocabulary(sorted({w for s in sentences for w in s}))
    ids, lengths = vocabulary.encode_sentences(sentences)
    with pytest.raises(DivergenceError, match="lipschitz") as caught:
        StructuredLogLinear(order=2, lipschitz=1e-300, epochs=3, polish=0).fit_ids(ids, lengths, vocabulary)
    assert caught.value.option == "lipschitz"


# ---- the older suites' cases ------------------------------------------------------------------------

@pytest.mark.parametrize("text", ["kat\tcat\nkats\tcats\n", "\x00\x01\tzz\n\xff\tq=\n", "kat\t=x\n"],
                         ids=["two-column word list", "garbage", "empty key"])
def test_strings_infer_refuses_a_file_that_is_not_hopkins(tmp_path, text):
    path = tmp_path / "lex"
    path.write_text(text, encoding="utf-8", errors="surrogateescape")
    result = _invoke("strings", "infer", "--hopkins", path, "--method", "ep1", "--iterations", "1",
                     "--inner-passes", "1")
    assert result.exit_code in (1, 2)
    _one_error(result, f"{path}:1:")


@pytest.mark.parametrize("args", [["align", "train", "-", "-o", "{out}", "--iterations", "1", "--ibm1-iterations",
                                   "1", "-q"], ["align", "apply", "{model}", "-"],
                                  ["align", "apply", "--stream", "{model}", "-"]],
                         ids=["train", "apply", "apply --stream"])
def test_align_refuses_non_utf8_stdin(tmp_path, args):
    good = tmp_path / "good.txt"
    good.write_text("the dog ||| le chien\nthe cat ||| le chat\n")
    model = tmp_path / "al.npz"
    assert _invoke("align", "train", good, "-o", model, "--iterations", "1", "--ibm1-iterations", "1",
                   "-q").exit_code == 0
    args = [a.replace("{out}", str(tmp_path / "out.npz")).replace("{model}", str(model)) for a in args]
    result = _invoke(*args, input=b"the dog ||| le chien\n" + NON_UTF8_LINE)
    assert result.exit_code == 1
    _one_error(result, "<stdin>", "UTF-8")
    assert not (tmp_path / "out.npz").exists()


def test_align_refuses_non_utf8_stdin_under_the_c_locale(tmp_path):
    """A real process under LC_ALL=C (Python reads stdin with surrogateescape there)."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    import varorder

    env = {**os.environ, "LC_ALL": "C", "LANG": "C", "PYTHONPATH": str(Path(varorder.__file__).parents[1])}
    env.pop("PYTHONUTF8", None)
    env.pop("PYTHONIOENCODING", None)
    result = subprocess.run([sys.executable, "-m", "varorder", "align", "train", "-", "-o", str(tmp_path / "o.npz"),
                             "--iterations", "1", "--ibm1-iterations", "1", "-q"],
                            input=b"the dog ||| le chien\n" + NON_UTF8_LINE, capture_output=True,
                            env=env, timeout=600)
    assert result.returncode == 1 and b"UTF-8" in result.stderr, result.stderr[-2000:]
    assert not (tmp_path / "o.npz").exists()


@pytest.mark.parametrize("text", ["", "1\tthe\t_\t_\t_\t_\t_\t_\t_\t_\n"], ids=["empty", "one word"])
def test_samplerank_errors_name_the_file(tmp_path, text):
    path = tmp_path / "train.conllu"
    path.write_text(text)
    result = _invoke("tag", "train", path, "-o", tmp_path / "m.npz", "--learner", "samplerank", "--epochs", "1")
    if result.exit_code == 0:
        return
    _one_error(result, path)


def test_samplerank_fit_errors_name_the_file(tmp_path, monkeypatch):
    from varorder.factorgraph import SampleRankTagger

    def refuse(self, *args, **kwargs):
        raise ValueError("y holds no labels")

    monkeypatch.setattr(SampleRankTagger, "fit", refuse)
    path = tmp_path / "train.conllu"
    path.write_text("1\tthe\t_\tDET\t_\t_\t_\t_\t_\t_\n\n")
    result = _invoke("tag", "train", path, "-o", tmp_path / "m.npz", "--learner", "samplerank")
    assert result.exit_code == 1
    _one_error(result, f"{path}: y holds no labels")


@pytest.fixture(scope="module")
def transducer(tmp_path_factory):
    folder = tmp_path_factory.mktemp("transducer")
    pairs = folder / "p.tsv"
    pairs.write_text("".join(f"{x}\t{y}\n" for x, y in [("a b", "xyy"), ("b a", "yyx"), ("a", "x"), ("b", "yy")] * 3))
    model = folder / "tr.npz"
    result = _invoke("transduce", "train", pairs, "-o", model, "--size", "2", "--order", "2", "--epochs", "1",
                     "--hash-bits", "10")
    assert result.exit_code == 0, result.output
    return model


def test_transduce_apply_refuses_a_ten_thousand_phoneme_input_at_once(tmp_path, transducer):
    long_input = tmp_path / "long.txt"
    long_input.write_text(" ".join(["a", "b"] * 5000) + "\n")
    result = _invoke("transduce", "apply", transducer, long_input, "--format", "inputs")
    assert result.exit_code == 1
    _one_error(result, "10000 symbols", "max_input_symbols=200")
    result = _invoke("transduce", "apply", transducer, long_input, "--format", "inputs", "--max-input-symbols",
                     "10")
    _one_error(result, "max_input_symbols=10")


def test_transduce_apply_stream_answers_a_too_long_input_empty_and_goes_on(transducer):
    result = _invoke("transduce", "apply", "--stream", "--max-input-symbols", "5", transducer, "-",
                     input="a b\n" + "a b " * 10 + "\nb a\n")
    assert result.exit_code == 0, result.output
    answers = result.stdout.splitlines()
    assert len(answers) == 3 and answers[1] == "" and answers[0] and answers[2]
    assert "an input of 20 symbols, longer than --max-input-symbols 5" in result.stderr


# ---- bounded memory or a clear refusal ---------------------------------------------------------------

def _conllu(n):
    return "".join(f"1\tthe\t_\tDET\t_\t_\t_\t_\t_\t_\n2\tdog{k % 5}\t_\tNOUN\t_\t_\t_\t_\t_\t_\n\n" for k in range(n))


def _commands(tmp_path, transducer):
    conllu = tmp_path / "big.conllu"
    conllu.write_text(_GUM.format(header=_HEADER) * 3 + _conllu(40))
    pairs = tmp_path / "big.tsv"
    pairs.write_text("a b\txyy\n" * 40)
    return {"tag train": (conllu, ["tag", "train", conllu, "-o", tmp_path / "o.npz", "--quiet"]),
            "neg prepare": (conllu, ["neg", "prepare", conllu, "-o", tmp_path / "o.json"]),
            "induce train": (conllu, ["induce", "train", conllu, "-o", tmp_path / "o.npz", "--quiet"]),
            "transduce eval": (pairs, ["transduce", "eval", transducer, pairs])}


def test_every_command_with_an_input_limit_is_attacked_here(tmp_path):
    found = commands_with(main, lambda params: any(p.name == "max_input_bytes" for p in params))
    assert sorted(found) == sorted(_commands(tmp_path, tmp_path / "model.npz"))


@pytest.mark.parametrize("command", ["tag train", "neg prepare", "induce train", "transduce eval"])
def test_commands_that_hold_their_input_refuse_past_the_limit_before_reading(tmp_path, transducer, command):
    path, args = _commands(tmp_path, transducer)[command]
    size = path.stat().st_size
    result = _invoke(*args, "--max-input-bytes", size - 1)
    assert result.exit_code == 1
    _one_error(result, path, f"{size:,} bytes", "--max-input-bytes")
    assert not any(p.name.startswith("o.") for p in tmp_path.iterdir())


def test_a_gzip_whose_recorded_size_lies_is_refused_while_reading(tmp_path):
    # two members: the trailer read first records only the last (small) one's size
    path = tmp_path / "bomb.conllu.gz"
    path.write_bytes(lying_gzip(_conllu(2000), _conllu(1)))
    result = _invoke("tag", "train", path, "-o", tmp_path / "o.npz", "--quiet", "--max-input-bytes", "10000")
    assert result.exit_code == 1
    _one_error(result, path, "passed --max-input-bytes 10,000 while being read")


def test_lm_score_answers_before_reading_its_whole_input(tmp_path, monkeypatch):
    """``lm score`` (not --stream) scores the text a batch at a time: the first scores are written
    before the end of the text is read (it held every sentence in a list before #47)."""
    import varorder.cli.lm as lm_cli
    import varorder.lm.corpus as corpus_module

    corpus = tmp_path / "c.txt"
    corpus.write_text("the dog runs\na cat sleeps\n" * 10)
    model = tmp_path / "m.arpa"
    assert _invoke("lm", "train", corpus, "-n", "2", "--discount-fallback", "-o", model).exit_code == 0
    real = corpus_module.iter_sentences

    def endless(path):
        for k, item in enumerate(real(path)):
            yield item
        raise ValueError("the end of the text was read")  # reached only once every line was consumed

    monkeypatch.setattr(corpus_module, "iter_sentences", endless)
    monkeypatch.setattr(lm_cli, "_SCORE_BATCH_TOKENS", 8, raising=False)
    result = _invoke("lm", "score", model, corpus)
    assert "the end of the text was read" in result.output
    assert result.stdout.count("\n") >= 3, result.stdout  # header and scores came out before the end
