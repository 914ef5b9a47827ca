"""Scores agree with KenLM's own Python module (an optional test dependency) to 1e-5 in
log10, on KenLM's and pocketsphinx's ARPA files and on a model varorder trained on PTB."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from _lm_oracle import shared_data
from varorder.lm.arpa import read_arpa, write_arpa
from varorder.lm import ModifiedKneserNey, iter_sentences

kenlm = pytest.importorskip("kenlm")


def sample_sentences(model, rng, n, max_length=12):
    plain = [w for w in model.vocabulary.words if w not in ("<s>", "</s>")]
    sentences = []
    for _ in range(n):
        words = list(rng.choice(plain, size=int(rng.integers(1, max_length + 1))))
        if rng.random() < 0.3:
            words[int(rng.integers(len(words)))] = "never-seen-word"
        sentences.append(" ".join(words))
    return sentences


def assert_same_scores(model, reference, sentences):
    for sentence in sentences:
        theirs = list(reference.full_scores(sentence))
        ids = model.vocabulary.encode(sentence.split())
        ours, lengths = model.token_log10probs(ids)
        assert len(ours) == len(theirs)
        for (their_score, their_length, _), our_score, our_length in zip(theirs, ours, lengths):
            assert our_score == pytest.approx(their_score, abs=1e-5), sentence
            assert our_length == their_length, sentence
        assert model.score_sentence(sentence) == pytest.approx(reference.score(sentence), abs=1e-4)


@pytest.mark.parametrize("name", ["kenlm/test.arpa", "kenlm/test_nounk.arpa", "pocketsphinx/turtle.lm", "pocketsphinx/100.lm"])
def kenlm_layout(path, destination):
    """The same file as KenLM's reader wants it: ``\\data\\`` first and tabs between the
    log-probability, the n-gram and the back-off (pocketsphinx writes spaces and a preamble).
    Written independently of varorder's writer."""
    lines = path.read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip() == "\\data\\")
    order = 0
    out = []
    for line in lines[start:]:
        fields = line.split()
        if line.strip().endswith("-grams:"):
            order = int(line.strip()[1:].split("-")[0])
        elif order and fields and not line.startswith("\\"):
            line = "\t".join([fields[0], " ".join(fields[1 : order + 1])] + fields[order + 1 :])
        out.append(line)
    destination.write_text("\n".join(out) + "\n")
    return destination


@pytest.mark.parametrize("name", ["kenlm/test.arpa", "kenlm/test_nounk.arpa", "pocketsphinx/turtle.lm", "pocketsphinx/100.lm"])
def test_published_files_score_as_kenlm_scores_them(name, tmp_path):
    path = shared_data("arpa", name)
    model = read_arpa(path)
    sentences = ["language modeling is fun .", "looking on a little more loin", "biarritz"]
    sentences += sample_sentences(model, np.random.default_rng(0), 150)
    assert_same_scores(model, kenlm.Model(str(kenlm_layout(path, tmp_path / "kenlm.arpa"))), sentences)
    # What varorder writes, KenLM reads into the same model.
    write_arpa(model, tmp_path / "varorder.arpa")
    assert_same_scores(model, kenlm.Model(str(tmp_path / "varorder.arpa")), sentences)


def test_model_trained_on_ptb_loads_in_kenlm_and_scores_identically(tmp_path):
    train = shared_data("ptb-lm", "ptb.train.txt.gz")
    valid = shared_data("ptb-lm", "ptb.valid.txt.gz")
    subset = tmp_path / "train.txt"
    with subset.open("w") as handle:
        for _, tokens in itertools.islice(iter_sentences(train), 4000):
            handle.write(" ".join(tokens) + "\n")
    model = ModifiedKneserNey(order=4).fit(subset).model_
    arpa = tmp_path / "ptb4.arpa"
    write_arpa(model, arpa)
    reference = kenlm.Model(str(arpa))
    sentences = [" ".join(tokens) for _, tokens in itertools.islice(iter_sentences(valid), 300)]
    assert_same_scores(model, reference, sentences)
    assert_same_scores(read_arpa(arpa), reference, sentences[:50])
