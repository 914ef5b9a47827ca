"""varorder.lm.kenlm against KenLM's own ``kenlm`` module (the test extra installs it):
every method on the same ARPA file to float32 tolerance, stateful scoring equal to
``score``, State equality and hashing (the same partition of histories as KenLM's), and
KenLM's python/example.py run with only its import changed."""

from __future__ import annotations

import copy
import itertools
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from _lm_oracle import SHARED_DATA
from varorder.errors import ParameterError
from varorder.lm import AbsoluteDiscounting, State as LMState
from varorder.lm.arpa import write_arpa
from varorder.lm.binary import write_binary
import varorder.lm.kenlm as vk

kenlm = pytest.importorskip("kenlm")

ABS = 2e-5  # float32 scores: KenLM sums them in float32, varorder in float64


def _trained_arpa(path: Path) -> Path:
    rng = np.random.default_rng(7)
    words = [f"w{i}" for i in range(12)]
    weights = rng.dirichlet(np.full(len(words), 0.5))
    text = [" ".join(rng.choice(words, size=int(rng.integers(2, 9)), p=weights)) for _ in range(300)]
    corpus = path.parent / "corpus.txt"
    corpus.write_text("\n".join(text) + "\n")
    write_arpa(AbsoluteDiscounting(order=3).fit(corpus).model_, path)
    return path


@pytest.fixture(params=["trained", "kenlm-test"])
def arpa(request, tmp_path):
    if request.param == "kenlm-test":
        path = SHARED_DATA / "arpa" / "kenlm" / "test.arpa"
        if not path.exists():
            pytest.skip(f"shared data {path} is absent on this machine")
        return path
    return _trained_arpa(tmp_path / "trained.arpa")


def sentences_for(model, n=120, seed=0):
    rng = np.random.default_rng(seed)
    plain = [w for w in model.model.vocabulary.words if w not in ("<s>", "</s>", "<unk>")]
    out = ["", "language modeling is fun .", "a sentence", "<unk> <s> </s> x"]
    for _ in range(n):
        words = list(rng.choice(plain, size=int(rng.integers(1, 12))))
        if rng.random() < 0.3:
            words[int(rng.integers(len(words)))] = "never-seen-word"
        out.append(" ".join(words))
    return out


def test_every_method_agrees_with_kenlm(arpa):
    theirs, ours = kenlm.Model(str(arpa)), vk.Model(arpa)
    assert ours.order == theirs.order
    for sentence in sentences_for(ours):
        for bos, eos in itertools.product((True, False), repeat=2):
            assert ours.score(sentence, bos=bos, eos=eos) == pytest.approx(theirs.score(sentence, bos=bos, eos=eos),
                                                                              abs=1e-4)
            mine, reference = list(ours.full_scores(sentence, bos=bos, eos=eos)), \
                list(theirs.full_scores(sentence, bos=bos, eos=eos))
            assert len(mine) == len(reference)
            for (p, length, oov), (q, their_length, their_oov) in zip(mine, reference):
                assert p == pytest.approx(q, abs=ABS) and length == their_length and oov == their_oov, sentence
        assert ours.perplexity(sentence) == pytest.approx(theirs.perplexity(sentence), rel=1e-4)
    for word in list(ours.model.vocabulary.words) + ["never-seen-word", "<UNK>", ""]:
        assert (word in ours) == (word in theirs), word


def test_stateful_scores_equal_kenlm_and_score(arpa):
    theirs, ours = kenlm.Model(str(arpa)), vk.Model(arpa)
    for sentence in sentences_for(ours, 60, seed=1):
        for bos in (True, False):
            mine, reference = vk.State(), kenlm.State()
            (ours.BeginSentenceWrite if bos else ours.NullContextWrite)(mine)
            (theirs.BeginSentenceWrite if bos else theirs.NullContextWrite)(reference)
            total = 0.0
            for word in sentence.split() + ["</s>"]:
                mine_out, reference_out = vk.State(), kenlm.State()
                got = ours.BaseFullScore(mine, word, mine_out)
                expected = theirs.BaseFullScore(reference, word, reference_out)
                assert got.log_prob == pytest.approx(expected.log_prob, abs=ABS)
                assert (got.ngram_length, got.oov) == (expected.ngram_length, expected.oov)
                assert ours.BaseScore(mine, word, vk.State()) == got.log_prob
                total += got.log_prob
                mine, reference = mine_out, reference_out
            assert total == pytest.approx(ours.score(sentence, bos=bos), abs=1e-9)


def test_states_partition_histories_as_kenlm_does_and_hash_as_values(arpa):
    theirs, ours = kenlm.Model(str(arpa)), vk.Model(arpa)
    words = [w for w in ours.model.vocabulary.words if w not in ("</s>",)][:9] + ["never-seen-word"]
    mine, reference = [], []
    for history in itertools.product(words, repeat=2):
        a, b = vk.State(), kenlm.State()
        ours.BeginSentenceWrite(a)
        theirs.BeginSentenceWrite(b)
        for word in history:
            a2, b2 = vk.State(), kenlm.State()
            ours.BaseScore(a, word, a2)
            theirs.BaseScore(b, word, b2)
            a, b = a2, b2
        mine.append(a)
        reference.append(b)
    for i, j in itertools.combinations(range(len(mine)), 2):
        assert (mine[i] == mine[j]) == (reference[i] == reference[j])
        if mine[i] == mine[j]:
            assert hash(mine[i]) == hash(mine[j])
        assert (mine[i] < mine[j]) + (mine[i] == mine[j]) + (mine[i] > mine[j]) == 1
    by_state = {state: k for k, state in enumerate(mine)}
    assert len(by_state) == len(set(reference))
    duplicate = copy.copy(mine[0])
    assert duplicate == mine[0] and duplicate is not mine[0] and copy.deepcopy(mine[0]) == mine[0]


def test_lm_state_is_a_small_immutable_value():
    state = LMState([4, 7])
    assert state == (4, 7) == LMState((4, 7)) and hash(state) == hash((4, 7)) and state.words == (4, 7)
    assert not LMState() and repr(state) == "State(4, 7)" and LMState([1]) < LMState([2])
    with pytest.raises(AttributeError):
        state.extra = 1
    with pytest.raises(TypeError):
        state[0] = 3


def test_binary_file_and_model_in_memory_score_as_the_arpa(tmp_path):
    arpa = _trained_arpa(tmp_path / "m.arpa")
    reference = vk.Model(arpa)
    write_binary(reference.model, tmp_path / "m.bin")
    for other in (vk.LanguageModel(tmp_path / "m.bin", vk.Config()), vk.Model.from_ngram_lm(reference.model)):
        for sentence in sentences_for(reference, 20):
            assert other.score(sentence) == reference.score(sentence)
            assert list(other.full_scores(sentence, eos=False)) == list(reference.full_scores(sentence, eos=False))
    assert "m.bin" in repr(vk.Model(tmp_path / "m.bin"))


def test_bad_arguments_are_parameter_errors(tmp_path):
    model = vk.Model(_trained_arpa(tmp_path / "m.arpa"))
    with pytest.raises(ParameterError, match="sentence must be a str"):
        model.score(["w1", "w2"])
    with pytest.raises(ParameterError, match="in_state must be"):
        model.BaseScore(kenlm.State(), "w1", vk.State())
    with pytest.raises(ParameterError, match="word must be a str"):
        model.BaseScore(vk.State(), 3, vk.State())


# KenLM's python/example.py (kpu/kenlm), its calls and checks as published; only the
# import line differs.
EXAMPLE = '''\
#!/usr/bin/env python
import os
{import_line}

LM = os.path.join(os.path.dirname(__file__), '..', 'lm', 'test.arpa')
model = kenlm.LanguageModel(LM)
print('{{0}}-gram model'.format(model.order))

sentence = 'language modeling is fun .'
print(sentence)
print(model.score(sentence))

# Check that total full score = direct score
def score(s):
    return sum(prob for prob, _, _ in model.full_scores(s))

assert (abs(score(sentence) - model.score(sentence)) < 1e-3)

# Show scores and n-gram matches
words = ['<s>'] + sentence.split() + ['</s>']
for i, (prob, length, oov) in enumerate(model.full_scores(sentence)):
    print('{{0}} {{1}}: {{2}}'.format(prob, length, ' '.join(words[i+2-length:i+2])))
    if oov:
        print('\\t"{{0}}" is an OOV'.format(words[i+1]))

# Find out-of-vocabulary words
for w in words:
    if not w in model:
        print('"{{0}}" is an OOV'.format(w))

#Stateful query
state = kenlm.State()
state2 = kenlm.State()
#Use <s> as context.  If you don't want <s>, use model.NullContextWrite(state).
model.BeginSentenceWrite(state)
accum = 0.0
accum += model.BaseScore(state, "a", state2)
accum += model.BaseScore(state2, "sentence", state)
#score defaults to bos = True and eos = True.  Here we'll check without the end
#of sentence marker.
assert (abs(accum - model.score("a sentence", eos = False)) < 1e-3)
accum += model.BaseScore(state, "</s>", state2)
assert (abs(accum - model.score("a sentence")) < 1e-3)
'''


def _run_example(folder: Path, import_line: str) -> list[str]:
    script = folder / "python" / "example.py"
    script.parent.mkdir(parents=True, exist_ok=True)
    script.write_text(EXAMPLE.format(import_line=import_line))
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


def test_kenlm_example_script_runs_unchanged_but_for_the_import(arpa, tmp_path):
    (tmp_path / "lm").mkdir()
    (tmp_path / "lm" / "test.arpa").write_bytes(Path(arpa).read_bytes())
    ours = _run_example(tmp_path, "import varorder.lm.kenlm as kenlm")
    theirs = _run_example(tmp_path, "import kenlm")
    assert len(ours) == len(theirs)
    for mine, reference in zip(ours, theirs):
        mine_fields, reference_fields = mine.split(), reference.split()
        try:
            assert float(mine_fields[0]) == pytest.approx(float(reference_fields[0]), abs=1e-4)
            mine_fields, reference_fields = mine_fields[1:], reference_fields[1:]
        except (ValueError, IndexError):
            pass
        assert mine_fields == reference_fields
    assert textwrap.dedent(ours[0]).endswith("-gram model")
