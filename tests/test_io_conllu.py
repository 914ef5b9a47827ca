"""CoNLL-U and word<TAB>tag readers: generated files, round trips, error positions, real data."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from varorder.io.conllu import read_conllu, write_conllu
from varorder.io.tagged import read_tagged
from _shared_data import SHARED_DATA

SHARED = SHARED_DATA

SAMPLE = """# sent_id = 1
# text = I don't know.
1\tI\tI\tPRON\tPRP\t_\t3\tnsubj\t_\t_
2-3\tdon't\t_\t_\t_\t_\t_\t_\t_\t_
2\tdo\tdo\tAUX\tVBP\t_\t3\taux\t_\t_
3\tn't\tnot\tPART\tRB\t_\t0\troot\t_\t_
4\tknow\tknow\tVERB\tVB\t_\t3\txcomp\t_\t_
4.1\tit\tit\tPRON\tPRP\t_\t_\t_\t_\t_
5\t.\t.\tPUNCT\t.\t_\t3\tpunct\t_\t_

# sent_id = 2
1\tHi\thi\tINTJ\tUH\t_\t0\troot\t_\t_

"""


@pytest.mark.parametrize("name", ["s.conllu", "s.conllu.gz"])
def test_read_words_tags_and_round_trip(tmp_path, name):
    path = tmp_path / name
    if name.endswith(".gz"):
        with gzip.open(path, "wt", encoding="utf-8") as handle:
            handle.write(SAMPLE)
    else:
        path.write_text(SAMPLE, encoding="utf-8")
    sentences = read_conllu(path)
    assert [s.words for s in sentences] == [["I", "do", "n't", "know", "."], ["Hi"]]
    assert sentences[0].tags("upos") == ["PRON", "AUX", "PART", "VERB", "PUNCT"]
    assert sentences[0].tags("xpos") == ["PRP", "VBP", "RB", "VB", "."]
    out = tmp_path / ("out" + name)
    write_conllu(out, sentences)
    reread = (gzip.open(out, "rt", encoding="utf-8").read() if name.endswith(".gz")
              else out.read_text(encoding="utf-8"))
    assert reread == SAMPLE
    new_tags = [["X"] * 5, ["Y"]]
    write_conllu(out, sentences, new_tags, "xpos")
    again = read_conllu(out)
    assert [s.tags("xpos") for s in again] == new_tags
    assert [s.tags("upos") for s in again] == [s.tags("upos") for s in sentences]
    assert again[0].rows[1] == sentences[0].rows[1]  # multiword token line untouched


@pytest.mark.parametrize("bad_line, lineno, message", [
    ("1\tI\tI\tPRON\n", 3, "expected 10 tab-separated columns, got 4"),
    ("7\tI\tI\tPRON\tPRP\t_\t3\tnsubj\t_\t_\n", 3, "word ID '7', expected 1"),
])
def test_malformed_conllu_names_file_and_line(tmp_path, bad_line, lineno, message):
    path = tmp_path / "bad.conllu"
    path.write_text("# sent_id = 1\n# text = x\n" + bad_line + "\n", encoding="utf-8")
    with pytest.raises(ValueError, match=rf"bad\.conllu:{lineno}: {message}"):
        read_conllu(path)


def test_write_rejects_wrong_tag_counts(tmp_path):
    path = tmp_path / "s.conllu"
    path.write_text(SAMPLE, encoding="utf-8")
    sentences = read_conllu(path)
    with pytest.raises(ValueError, match=r"tags\[1\] has 2 tags for 1 words"):
        write_conllu(tmp_path / "o.conllu", sentences, [["X"] * 5, ["A", "B"]])
    with pytest.raises(ValueError, match="tag_column"):
        sentences[0].tags("lemma")


def test_read_tagged_with_file_markers(tmp_path):
    path = tmp_path / "t.tsv"
    path.write_text("# file = wsj_0001.mrg\nPierre\tNNP\nVinken\tNNP\n\nHe\tPRP\n#\t#\n# file = wsj_0002.mrg\nOk\tUH\n",
                    encoding="utf-8")
    sentences = read_tagged(path)
    assert [(s.words, s.tags, s.source) for s in sentences] == [
        (["Pierre", "Vinken"], ["NNP", "NNP"], "wsj_0001.mrg"),
        (["He", "#"], ["PRP", "#"], "wsj_0001.mrg"),
        (["Ok"], ["UH"], "wsj_0002.mrg"),
    ]
    path.write_text("a\tDT\nb c\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"t\.tsv:2: expected 'word<TAB>tag'"):
        read_tagged(path)


@pytest.mark.shared_data
def test_real_files():
    ewt = SHARED / "ud-english-ewt" / "en_ewt-ud-dev.conllu.gz"
    wsj = SHARED / "ptb-wsj-sample" / "wsj_sample.pos.tsv.gz"
    if not ewt.exists() or not wsj.exists():
        pytest.skip("../shared/data not present")
    dev = read_conllu(ewt)
    assert len(dev) == 2001
    assert {t for s in dev for t in s.tags()} <= {"ADJ", "ADP", "ADV", "AUX", "CCONJ", "DET", "INTJ", "NOUN", "NUM",
                                                 "PART", "PRON", "PROPN", "PUNCT", "SCONJ", "SYM", "VERB", "X"}
    sentences = read_tagged(wsj)
    assert len(sentences) == 3914
    assert sum(len(s.words) for s in sentences) > 90_000
