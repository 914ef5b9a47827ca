"""Pharaoh and NAACL readers, bitext reading and normalisation, AER, symmetrization."""

import gzip

import pytest

from varorder.agree.symmetrize import symmetrize
from varorder.eval.aer import alignment_error_rate
from varorder.io.bitext import normalize, read_bitext, strip_accents
from varorder.io.naacl import read_naacl
from varorder.io.pharaoh import parse_line, read_pharaoh, write_pharaoh


def test_aer_hand_made_example():
    # sentence 1: S = {(0,0), (1,1)}, P adds (1,2); sentence 2: S = {(0,1)}
    sure = [{(0, 0), (1, 1)}, {(0, 1)}]
    possible = [{(1, 2)}, set()]
    predicted = [{(0, 0), (1, 2), (2, 2)}, {(0, 1)}]
    # |A| = 4, |S| = 3, |A∩S| = 2 ((0,0), (0,1)), |A∩P| = 3 ((0,0), (1,2), (0,1))
    s = alignment_error_rate(predicted, sure, possible)
    assert s.aer == pytest.approx(1 - 5 / 7)
    assert s.precision == pytest.approx(3 / 4)
    assert s.recall == pytest.approx(2 / 3)
    assert alignment_error_rate([set(), set()], sure, possible).aer == pytest.approx(1.0)
    assert alignment_error_rate(sure, sure, possible).aer == 0.0
    with pytest.raises(ValueError, match="one entry per sentence"):
        alignment_error_rate(predicted[:1], sure, possible)


def test_pharaoh_round_trip_and_errors(tmp_path):
    path = tmp_path / "a.align"
    write_pharaoh(path, [{(0, 1), (2, 0)}, set(), {(3, 3)}])
    assert path.read_text() == "0-1 2-0\n\n3-3\n"
    assert read_pharaoh(path) == [{(0, 1), (2, 0)}, set(), {(3, 3)}]
    assert parse_line("0-0 1?2 3-4-P") == ({(0, 0)}, {(0, 0), (1, 2), (3, 4)})
    bad = tmp_path / "bad.align"
    bad.write_text("0-1\n0-1 2:3\n")
    with pytest.raises(ValueError, match=r"bad.align, line 2: malformed link '2:3'"):
        read_pharaoh(bad)
    with pytest.raises(ValueError, match="malformed"):
        parse_line("-1-2")


def test_naacl_reader(tmp_path):
    path = tmp_path / "gold.wa"
    path.write_text("1 1 1 S\n1 2 3 P\n1 0 2 S\n3 2 2\n3 1 1 P 0.5\n")
    gold = read_naacl(path, n_sentences=3)
    assert gold[0] == ({(0, 0)}, {(0, 0), (1, 2)})
    assert gold[1] == (set(), set())
    assert gold[2] == ({(1, 1)}, {(1, 1), (0, 0)})
    for text, msg in [("1 1\n", "line 1: expected"), ("1 a 2 S\n", "integers"), ("1 1 1 X\n", "label"),
                      ("0 1 1 S\n", "1-based"), ("1 1 1 S x\n", "confidence"), ("1 1 1 S\n5 1 1 S\n", "beyond")]:
        p = tmp_path / "bad.wa"
        p.write_text(text)
        with pytest.raises(ValueError, match=msg):
            read_naacl(p, n_sentences=2)


def test_read_bitext_and_mismatch(tmp_path):
    e = tmp_path / "c.e.gz"
    f = tmp_path / "c.f"
    with gzip.open(e, "wt") as fh:
        fh.write("The House met .\nHello\n")
    f.write_text("La Chambre .\n")
    with pytest.raises(ValueError, match=r"c.f: ends at line 1 but .*c.e.gz has line 2"):
        read_bitext(e, f)
    assert read_bitext(e, f, limit=1) == [(["The", "House", "met", "."], ["La", "Chambre", "."])]


def test_normalize_follows_naacl_conventions():
    assert strip_accents("très œuvre à") == "tres oeuvre a"
    assert normalize("L'hon. député s'il vous plaît, du pain aux États-Unis.", "fr") == [
        "le", "hon.", "depute", "se", "il", "vous", "plait", ",", "de", "le", "pain", "a", "les",
        "etats", "-", "unis", "."]
    assert normalize("(Mr. Speaker, the minister's bill doesn't pass.", "en") == [
        "(", "mr.", "speaker", ",", "the", "minister", "'s", "bill", "does", "not", "pass", "."]


def test_symmetrizations():
    e2f = {(0, 0), (1, 1), (2, 3)}
    f2e = {(0, 0), (1, 2), (2, 2)}
    assert symmetrize(e2f, f2e, "intersection") == {(0, 0)}
    assert symmetrize(e2f, f2e, "union") == e2f | f2e
    # grow from (0,0): neighbour (1,1) covers unaligned words; then (1,2)? e1 aligned, f2 not: added;
    # (2,2)/(2,3) are diagonal/adjacent neighbours of (1,1)/(1,2) with e2 unaligned
    g = symmetrize(e2f, f2e, "grow-diag-final-and")
    assert {(0, 0), (1, 1), (1, 2)} <= g and g <= e2f | f2e
    with pytest.raises(ValueError, match="method"):
        symmetrize(e2f, f2e, "nope")
