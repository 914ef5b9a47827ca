"""ARPA and MAX-ARPA reading and writing: exact round trips, the conventions of the
format, and errors naming file and line for malformed files."""

from __future__ import annotations

import gzip
import math
import warnings

import numpy as np
import pytest

from _lm_oracle import random_corpus, random_model, shared_data
from varorder.lm.arpa import read_arpa, write_arpa
from varorder.lm import AbsoluteDiscounting, ModifiedKneserNey

GOOD = """\\data\\
ngram 1=5
ngram 2=3

\\1-grams:
-99\t<s>\t-0.5
-0.5\ta\t-0.2
-0.7\tb
-1.0\t</s>
-2.0\t<unk>

\\2-grams:
-0.1\t<s> a
-0.3\ta b
-0.2\tb </s>

\\end\\
"""


def write(tmp_path, text, name="model.arpa"):
    path = tmp_path / name
    path.write_text(text)
    return path


def all_ngram_scores(model):
    return [model.ngrams(m) for m in range(1, model.order + 1)]


@pytest.mark.parametrize("name", ["model.arpa", "model.arpa.gz"])
def test_write_then_read_gives_identical_tables_and_scores(tmp_path, name):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        model = ModifiedKneserNey(order=4).fit_sentences(random_corpus(np.random.default_rng(2), 40, 7)).model_
    path = tmp_path / name
    write_arpa(model, path)
    again = read_arpa(path)
    assert again.vocabulary.words == model.vocabulary.words
    for (rows_a, p_a, b_a), (rows_b, p_b, b_b) in zip(all_ngram_scores(model), all_ngram_scores(again)):
        np.testing.assert_array_equal(rows_a, rows_b)
        np.testing.assert_array_equal(p_a, p_b)
        np.testing.assert_array_equal(b_a, b_b)
    ids = np.random.default_rng(0).integers(3, model.vocab_size, size=50).astype(np.int32)
    np.testing.assert_array_equal(model.token_log10probs(ids)[0], again.token_log10probs(ids)[0])
    assert list(tmp_path.iterdir()) == [path]  # no temporary file left behind


def test_max_arpa_round_trip_keeps_both_extra_columns(tmp_path):
    model, _ = random_model(np.random.default_rng(4), 3, 3, density=0.6)
    path = tmp_path / "model.maxarpa"
    write_arpa(model, path, max_arpa=True)
    text = path.read_text()
    assert text.startswith("# MAX-ARPA")
    first_bigram = text.split("\\2-grams:\n")[1].splitlines()[0].split("\t")
    assert len(first_bigram) == 5
    again = read_arpa(path)
    for mine, theirs in zip(model.max_backoff().max_log10prob, again.max_backoff().max_log10prob):
        np.testing.assert_array_equal(mine, theirs)
    for mine, theirs in zip(model.max_backoff().max_log10backoff, again.max_backoff().max_log10backoff):
        np.testing.assert_array_equal(mine, theirs)


def test_format_conventions(tmp_path):
    model = read_arpa(write(tmp_path, GOOD))
    vocabulary = model.vocabulary
    a, b = vocabulary.id_of("a"), vocabulary.id_of("b")
    assert model.ngram_counts == (5, 3)
    assert model.log10prob([], vocabulary.bos_id) == -math.inf  # -99 reads as log 0
    assert model.log10prob([vocabulary.bos_id], a) == pytest.approx(-0.1)
    # Missing back-off of b is 0: p(a | b) = p(a).
    assert model.log10prob([b], a) == pytest.approx(-0.5)
    assert model.log10prob([a], a) == pytest.approx(-0.2 - 0.5)
    assert model.score_sentence("a b") == pytest.approx(-0.1 - 0.3 - 0.2)
    assert model.score_sentence("zzz") == pytest.approx(-0.5 + -2.0 + -1.0)


def test_file_without_unk_gets_kenlm_substitute(tmp_path):
    text = GOOD.replace("ngram 1=5", "ngram 1=4").replace("-2.0\t<unk>\n", "")
    model = read_arpa(write(tmp_path, text))
    assert model.log10prob([], model.vocabulary.unk_id) == -100.0


def test_gzip_input(tmp_path):
    path = tmp_path / "model.arpa.gz"
    with gzip.open(path, "wt") as handle:
        handle.write(GOOD)
    assert read_arpa(path).ngram_counts == (5, 3)


MALFORMED = {
    "binary": (b"\x00\x01\x02mmap garbage\n", 1, "binary"),
    "kenlm binary": (b"mmap lm http://kheafield.com/code format version 5\n\x00\x00", 1, "KenLM binary"),
    "no data": ("just some text\nmore\n", 2, "no \\\\data\\\\"),
    "positive": (GOOD.replace("-0.7\tb", "0.7\tb"), 8, "positive log-probability"),
    "nan": (GOOD.replace("-0.3\ta b", "nan\ta b"), 14, "NaN"),
    "not a number": (GOOD.replace("-0.3\ta b", "-0.x3\ta b"), 14, "not a number"),
    "count mismatch": (GOOD.replace("ngram 2=3", "ngram 2=4"), 17, "ngram 2=4 but"),
    "missing section": (GOOD.replace("ngram 2=3", "ngram 2=3\nngram 3=1"), 18, "3-grams"),
    "wrong section": (GOOD.replace("\\2-grams:", "\\3-grams:"), 12, "3-grams"),
    "too many fields": (GOOD.replace("-0.2\tb </s>", "-0.2\tb </s> -0.1 -0.3"), 15, "fields"),
    "unknown word": (GOOD.replace("-0.3\ta b", "-0.3\ta c"), 14, "'c'"),
    "duplicate": (GOOD.replace("-0.2\tb </s>", "-0.2\ta b"), 15, "duplicate 2-gram"),
    "truncated": (GOOD.replace("\\end\\\n", ""), 16, "without \\\\end\\\\"),
    "no s marker": (GOOD.replace("-99\t<s>\t-0.5\n", "").replace("ngram 1=5", "ngram 1=4")
                    .replace("-0.1\t<s> a\n", "").replace("ngram 2=3", "ngram 2=2"), 5, "no <s>"),
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_malformed_files_raise_value_errors_naming_file_and_line(tmp_path, case):
    content, line, message = MALFORMED[case]
    path = tmp_path / "broken.arpa"
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content)
    with pytest.raises(ValueError, match=rf"broken\.arpa:{line}: .*{message}"):
        read_arpa(path)


def test_missing_prefixes_and_suffixes_are_inserted_without_changing_scores(tmp_path):
    # "x a b" lacks its prefix "x a" and its suffix "a b"... here only the trigram and unigrams.
    text = """\\data\\
ngram 1=5
ngram 2=1
ngram 3=1

\\1-grams:
-1\t<s>\t-0.5
-0.5\ta\t-0.25
-0.7\tb\t-0.125
-1.0\t</s>
-2.0\t<unk>

\\2-grams:
-0.3\t<s> b\t-0.1

\\3-grams:
-0.05\t<s> a b

\\end\\
"""
    model = read_arpa(write(tmp_path, text))
    assert model.ngram_counts == (5, 3, 1)  # "<s> a" and "a b" inserted
    v = model.vocabulary
    bos, a, b = v.bos_id, v.id_of("a"), v.id_of("b")
    assert model.log10prob([bos, a], b) == pytest.approx(-0.05)
    assert model.log10prob([bos], a) == pytest.approx(-0.5 + -0.5)
    assert model.log10prob([a], b) == pytest.approx(-0.25 + -0.7)
    assert model.log10prob([b, a], b) == pytest.approx(-0.25 - 0.7)


@pytest.mark.parametrize("name", ["kenlm/test.arpa", "kenlm/test_nounk.arpa", "kenlm/toy0.arpa", "kenlm/toy1.arpa",
                                  "pocketsphinx/turtle.lm", "pocketsphinx/turtle.ug.lm", "pocketsphinx/100.lm"])
def test_published_arpa_files_read_and_round_trip(tmp_path, name):
    path = shared_data("arpa", name)
    model = read_arpa(path)
    write_arpa(model, tmp_path / "copy.arpa")
    again = read_arpa(tmp_path / "copy.arpa")
    for (rows_a, p_a, b_a), (rows_b, p_b, b_b) in zip(all_ngram_scores(model), all_ngram_scores(again)):
        np.testing.assert_array_equal(rows_a, rows_b)
        np.testing.assert_array_equal(p_a, p_b)
        np.testing.assert_array_equal(b_a, b_b)


def test_absolute_discounting_with_zero_smoothing_writes_minus_99(tmp_path):
    model = AbsoluteDiscounting(order=2, discount=0.0, smoothing=0.0).fit_sentences(["a b", "a"]).model_
    assert model.log10prob([], model.vocabulary.unk_id) == -math.inf
    write_arpa(model, tmp_path / "m.arpa")
    assert "-99\t<unk>" in (tmp_path / "m.arpa").read_text()
    assert read_arpa(tmp_path / "m.arpa").log10prob([], model.vocabulary.unk_id) == -math.inf
