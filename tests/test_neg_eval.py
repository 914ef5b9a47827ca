"""GREC-NEG metrics against hand-computed values: BLEU, word edit distance, the slot figures."""

from __future__ import annotations

import math

import pytest

from varorder.eval.neg import bleu, format_scores, neg_scores, word_edit_distance
from varorder.neg.task import Candidate, NegDocument, Slot, evaluate, regenerate


def test_bleu_hand_computed():
    hyp = "the cat sat on the mat".split()
    ref = "the cat is on the mat".split()
    # clipped precisions 5/6, 3/5, 1/4, 0/3; equal lengths, no brevity penalty
    b1, b2, b3, b4 = bleu([hyp], [ref])
    assert b1 == pytest.approx(5 / 6)
    assert b2 == pytest.approx(math.sqrt(0.5))
    assert b3 == pytest.approx(0.5)
    assert b4 == 0.0


def test_bleu_brevity_penalty_and_corpus_pooling():
    # "the cat" against six words: p1 = p2 = 1, BP = exp(1 − 6/2)
    assert bleu([["the", "cat"]], [ref := "the cat is on the mat".split()], 2) == pytest.approx([math.exp(-2)] * 2)
    # counts pool over sentences (not an average of sentence scores): 2+5 of 2+6 unigrams
    b1 = bleu([["a", "b"], "the cat sat on the mat".split()], [["a", "b"], ref], 1)[0]
    assert b1 == pytest.approx(7 / 8)
    assert bleu([ref], [ref]) == pytest.approx([1.0] * 4)


def test_word_edit_distance():
    assert word_edit_distance("John Napier of Merchiston", "Napier") == 3
    assert word_edit_distance("he", "him") == 1
    assert word_edit_distance("the young poet", "the poet") == 1
    assert word_edit_distance("Napier", "Napier") == 0


def _document():
    words = "John Napier was a mathematician . Napier invented logarithms .".split()
    candidates = {"1": [Candidate("John Napier", "name-plain"), Candidate("Napier", "name-plain"),
                        Candidate("he", "pron3-nom"), Candidate("who", "rel-nom")]}
    slots = [Slot(0, 1, "1", "John Napier", "name", "nom", 0, 0), Slot(6, 6, "1", "Napier", "name", "nom", 1, 0)]
    return NegDocument("d", "bio", words, [True] * len(words), [0, 6], [0, 0], slots, candidates)


def test_regenerate_marks_and_capitalises():
    document = _document()
    assert regenerate(document, ["John Napier", "he"], mark=True) == [
        "[1: John Napier] was a mathematician .", "[1: He] invented logarithms ."]


def test_slot_figures_hand_computed():
    document = _document()
    scores = evaluate([document], [["Napier", "he"]])
    assert scores["total slots"] == 2
    assert scores["reg08 type matches"] == 1 and scores["reg08 type accuracy"] == 0.5  # name/name, pronoun/name
    assert scores["string matches"] == 0 and scores["string accuracy"] == 0.0
    assert scores["mean edit distance"] == pytest.approx((1 + 1) / 2)  # drop "John"; substitute he/Napier
    assert scores["mean normalised edit distance"] == pytest.approx((1 / 2 + 1 / 1) / 2)
    # text: "Napier was a mathematician ." vs "John Napier was a mathematician ."; "He invented ..." vs "Napier ..."
    hyp = [["Napier", "was", "a", "mathematician", "."], ["He", "invented", "logarithms", "."]]
    ref = [["John", "Napier", "was", "a", "mathematician", "."], ["Napier", "invented", "logarithms", "."]]
    assert [scores[f"BLEU {n} score"] for n in range(1, 5)] == pytest.approx(bleu(hyp, ref))
    assert scores["BLEU 1 score"] == pytest.approx(math.exp(1 - 10 / 9) * 8 / 9)
    perfect = evaluate([document], [["John Napier", "Napier"]])
    assert perfect["string accuracy"] == 1.0 and perfect["BLEU 4 score"] == pytest.approx(1.0)
    assert "reg08 type accuracy : 0.500000" in format_scores(scores)
    assert "total slots : 2" in format_scores(scores)


def test_neg_scores_string_outside_candidates_has_no_type():
    scores = neg_scores([("the man", None, "Napier", "name")], [["x"]], [["x"]])
    assert scores["reg08 type accuracy"] == 0.0 and scores["mean edit distance"] == 2.0
