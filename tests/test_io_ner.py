"""CoNLL column files, chunk tag schemes and the GUM → flat NER converter."""

import itertools
import random

import pytest

from varorder.errors import FormatError
from varorder.io import schemes
from varorder.io.conll import read_conll, read_conll_tagged, write_conll
from _shared_data import SHARED_DATA

CONLL = """-DOCSTART- -X- -X- O

EU NNP B-NP I-ORG
rejects VBZ B-VP O
German JJ B-NP I-MISC
call NN I-NP O

Peter NNP B-NP I-PER
Blackburn NNP I-NP I-PER

-DOCSTART- -X- -X- O

BRUSSELS NNP B-NP I-LOC
"""


def test_conll_round_trip_and_columns(tmp_path):
    path = tmp_path / "train.txt"
    path.write_text(CONLL)
    sentences = read_conll(path)
    assert [s.words for s in sentences] == [["EU", "rejects", "German", "call"], ["Peter", "Blackburn"], ["BRUSSELS"]]
    assert sentences[0].tags() == ["I-ORG", "O", "I-MISC", "O"]
    assert sentences[0].tags(-2) == ["B-NP", "B-VP", "B-NP", "I-NP"]
    assert sentences[0].docstart and sentences[1].docstart is None and sentences[2].docstart
    out = tmp_path / "out.txt"
    write_conll(out, sentences)
    assert out.read_text() == CONLL.replace("I-LOC\n", "I-LOC\n\n")
    words, tags = read_conll_tagged(path)
    bio = [schemes.convert(t, "IOB1", "BIO") for t in tags]
    write_conll(out, sentences, bio)
    assert read_conll(out)[1].tags() == ["B-PER", "I-PER"]
    write_conll(out, sentences, bio, append=True)
    assert read_conll(out)[0].n_columns == 5


def test_conll_errors_name_file_and_line(tmp_path):
    path = tmp_path / "bad.txt"
    path.write_text("a B-X\nb c B-X\n")
    with pytest.raises(FormatError, match=r"bad.txt:2: 3 columns"):
        read_conll(path)
    path.write_text("a B-X\n")
    with pytest.raises(FormatError, match="not a tag column"):
        read_conll(path, tag_column=0)
    with pytest.raises(FormatError, match="not a tag column"):
        read_conll(path, tag_column=3)


TYPES = ["PER", "LOC"]


def random_spans(rng, n):
    out, t = [], 0
    while t < n:
        if rng.random() < 0.4:
            stop = rng.randint(t + 1, n)
            out.append((rng.choice(TYPES), t, stop))
            t = stop
        else:
            t += 1
    return out


@pytest.mark.parametrize("scheme", schemes.SCHEMES)
def test_encode_read_back_and_convert(scheme):
    rng = random.Random(1)
    for _ in range(200):
        n = rng.randint(1, 7)
        found = random_spans(rng, n)
        tags = schemes.encode(found, n, scheme)
        schemes.validate(tags, scheme)
        assert schemes.spans(tags, scheme) == found
        for other in schemes.SCHEMES:
            assert schemes.spans(schemes.convert(tags, scheme, other), other) == found
        if scheme in ("IOB2", "BIOES"):
            assert schemes.spans(tags) == found  # conlleval reads valid BIO and BIOES the same (it knows no U, L, and IOB1 differs)


@pytest.mark.parametrize("scheme", schemes.SCHEMES)
def test_allowed_transitions_are_exactly_the_valid_sequences(scheme):
    labels = schemes.scheme_labels(["A", "B"], scheme)
    T, start, end = schemes.allowed_transitions(labels, scheme)
    for n in (1, 2, 3):
        for seq in itertools.product(range(len(labels)), repeat=n):
            ok = start[seq[0]] and end[seq[-1]] and all(T[a, b] for a, b in zip(seq, seq[1:]))
            assert ok == schemes.is_valid([labels[i] for i in seq], scheme)


def test_validation_messages():
    with pytest.raises(FormatError, match="'I-PER' at position 1 cannot follow 'O' in IOB2"):
        schemes.validate(["O", "I-PER"], "BIO")
    with pytest.raises(FormatError, match="cannot end a sentence in BIOES"):
        schemes.validate(["B-PER"], "IOBES")
    with pytest.raises(FormatError, match="not a BILOU tag"):
        schemes.validate(["E-PER"], "BILOU")
    assert schemes.convert(["O", "I-PER", "I-PER"], "BIO", "BIOES", repair=True) == ["O", "B-PER", "E-PER"]
    with pytest.raises(ValueError, match="scheme must be one of"):
        schemes.canonical_scheme("XYZ")


GUM = str(SHARED_DATA / "gum" / "en_gum-ud-dev.conllu.gz")


@pytest.mark.shared_data
def test_gum_named_entities():
    import os

    if not os.path.exists(GUM):
        pytest.skip("../shared/data/gum is absent")
    from varorder.io.coref import read_coref, read_ner

    sentences, tags = read_ner(GUM)
    assert len(sentences) == 1341
    for t in tags:
        schemes.validate(t, "BIO")
    found = [s for t in tags for s in schemes.spans(t, "BIO")]
    kinds = {s[0] for s in found}
    assert {"person", "place", "organization"} <= kinds <= {"person", "place", "organization", "object", "event",
                                                             "time", "substance", "animal", "plant", "abstract",
                                                             "quantity"}
    assert 500 < len(found) < 1000
    inner = [s for t in read_ner(GUM, nesting="innermost")[1] for s in schemes.spans(t, "BIO")]
    assert len(inner) >= len(found)  # an outer named mention may hold several inner ones
    bioes = read_ner(GUM, scheme="BIOES")[1]
    assert [schemes.spans(t, "BIOES") for t in bioes] == [schemes.spans(t, "BIO") for t in tags]
    doc = read_coref(GUM)[0]
    assert doc.mentions  # the converter reads the same mentions


def test_named_entity_converter_by_hand(tmp_path):
    from test_io_coref import EXCERPT, HEADER

    from varorder.io.coref import read_ner

    path = tmp_path / "mini.conllu"
    path.write_text(EXCERPT.format(header=HEADER), encoding="utf-8")
    sentences, tags = read_ner(path)
    # "George Gordon Byron" and "6th Baron Byron" (heads PROPN, person); the nested "Byron" (place) is inside
    # the outer named mention; "a poet" (head NOUN) and "His" (PRON) are not named
    assert tags[0] == ["B-person", "I-person", "I-person", "O", "B-person", "I-person", "I-person"] + ["O"] * 5
    assert tags[1] == ["O", "O"]
    _, inner = read_ner(path, nesting="innermost")
    assert inner[0][4:7] == ["O", "O", "B-place"]
    _, bioes = read_ner(path, scheme="BIOES")
    assert bioes[0][:3] == ["B-person", "I-person", "E-person"]
    _, linked = read_ner(path, named="identity")
    assert linked[0][:3] == ["B-person", "I-person", "I-person"] and linked[0][4] == "O"
