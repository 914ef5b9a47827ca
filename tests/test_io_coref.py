"""CorefUD Entity= reader: round trip on generated and GUM-shaped documents, malformed brackets refused."""

from __future__ import annotations

import gzip
import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from varorder.io.coref import entity_values, misc_entity, read_coref
from _shared_data import SHARED_DATA

HEADER = "# global.Entity = GRP-etype-infstat-salience-centering-minspan-link-identity"

# A GUM excerpt (GUM_bio_byron, sentence 1, shortened), CC BY-NC-SA: nested, one-word and same-token brackets.
EXCERPT = """# newdoc id = GUM_bio_mini
{header}
# sent_id = mini-1
# text = George Gordon Byron, 6th Baron Byron, was a poet.
1	George	George	PROPN	NNP	Number=Sing	7	nsubj	7:nsubj	Entity=(1-person-new-sssss-cf1-1,3-coref-George_Gordon_Byron
2	Gordon	Gordon	PROPN	NNP	Number=Sing	1	flat	1:flat	_
3	Byron	Byron	PROPN	NNP	Number=Sing	1	flat	1:flat	Entity=1)|SpaceAfter=No
4	,	,	PUNCT	,	_	6	punct	6:punct	_
5	6th	6th	ADJ	JJ	Degree=Pos	6	amod	6:amod	Entity=(1-person-giv:act-sssss-cf1-2-appos
6	Baron	baron	PROPN	NNP	Number=Sing	1	appos	1:appos	_
7	Byron	Byron	PROPN	NNP	Number=Sing	6	flat	6:flat	Entity=(2-place-new-nnnnn-cf2-1-sgl)1)|SpaceAfter=No
8	,	,	PUNCT	,	_	1	punct	1:punct	_
9	was	be	AUX	VBD	Mood=Ind	11	cop	11:cop	_
10	a	a	DET	DT	Definite=Ind	11	det	11:det	Entity=(3-person-new-nnnnn-cf3-2-pred
11	poet	poet	NOUN	NN	Number=Sing	0	root	0:root	Entity=3)|SpaceAfter=No
12	.	.	PUNCT	.	_	11	punct	11:punct	_

# sent_id = mini-2
# text = His poems
1	His	his	PRON	PRP$	Case=Gen|Gender=Masc|Number=Sing|Person=3|Poss=Yes|PronType=Prs	2	nmod:poss	2:nmod:poss	Entity=(4-object-new-nnnnn-cf4-2-sgl(1-person-giv:act-sssss-cf1-1-ana)
2	poems	poem	NOUN	NNS	Number=Plur	0	root	0:root	Entity=4)

"""


def _write(tmp_path, text, name="x.conllu"):
    path = tmp_path / name
    path.write_text(text.format(header=HEADER), encoding="utf-8")
    return path


def test_excerpt_mentions_and_round_trip(tmp_path):
    (doc,) = read_coref(_write(tmp_path, EXCERPT))
    assert doc.doc_id == "GUM_bio_mini"
    spans = [(m.entity, m.start, m.end, m.head, m.etype, m.infstat, m.link) for m in doc.mentions]
    assert spans == [("1", 0, 2, 0, "person", "new", "coref"), ("1", 4, 6, 5, "person", "giv:act", "appos"),
                     ("2", 6, 6, 6, "place", "new", "sgl"), ("3", 9, 10, 10, "person", "new", "pred"),
                     ("4", 12, 13, 13, "object", "new", "sgl"), ("1", 12, 12, 12, "person", "giv:act", "ana")]
    assert doc.mentions[0].fields["identity"] == "George_Gordon_Byron"
    assert doc.text(0, 2) == "George Gordon Byron" and doc.text(9, 11) == "a poet."
    values = entity_values(doc)
    assert values == {p: misc_entity(doc.row(p)[9]) for p in range(doc.n_words) if misc_entity(doc.row(p)[9])}


def test_identity_with_dashes_kept_whole(tmp_path):
    text = EXCERPT.replace("coref-George_Gordon_Byron", "coref-Jean-Paul_Sartre")
    (doc,) = read_coref(_write(tmp_path, text))
    assert doc.mentions[0].fields["identity"] == "Jean-Paul_Sartre"
    assert entity_values(doc)[0] == "(1-person-new-sssss-cf1-1,3-coref-Jean-Paul_Sartre"


@pytest.mark.parametrize("old, new, message", [
    ("1:flat\tEntity=1)", "1:flat\tEntity=9)", "closing bracket '9\\)'"),
    ("Entity=3)|SpaceAfter=No", "SpaceAfter=No", "never closed"),
    ("Entity=4)", "Entity=4))", "malformed Entity value"),
    ("Entity=(3-person", "Entity=(3-person(", "malformed Entity value"),
    ("Entity=(3-person-new-nnnnn-cf3-2-pred", "Entity=(3[1/2]-person-new-nnnnn-cf3-2-pred", "malformed"),
    ("Entity=(2-place-new-nnnnn-cf2-1-sgl)1)", "Entity=(2)1)", "has no fields"),
])
def test_malformed_brackets_name_file_and_line(tmp_path, old, new, message):
    assert old in EXCERPT
    path = _write(tmp_path, EXCERPT.replace(old, new, 1))
    with pytest.raises(ValueError, match=message) as info:
        read_coref(path)
    assert f"{path}:" in str(info.value)
    line = int(str(info.value).split(f"{path}:")[1].split(":")[0])
    assert 1 <= line <= EXCERPT.count("\n")
    if message.startswith("closing"):
        assert line == 7  # the first 'Byron' line


def test_annotation_before_header_refused(tmp_path):
    path = _write(tmp_path, EXCERPT.replace("{header}\n", ""))
    with pytest.raises(ValueError, match=r":4: Entity= annotation before any '# global.Entity' header"):
        read_coref(path)


@st.composite
def nested_documents(draw):
    """Random properly nested spans over n words (ids from a small pool, so the same entity can nest)."""
    n = draw(st.integers(1, 9))
    spans = []

    def fill(lo, hi, depth):
        i = lo
        while i <= hi:
            if depth < 3 and draw(st.booleans()):
                j = draw(st.integers(i, hi))
                spans.append((i, j, draw(st.sampled_from("123"))))
                if j > i:
                    fill(i, j, depth + 1)
                i = j + 1
            else:
                i += 1

    fill(0, n - 1, 0)
    return n, spans


def _misc_column(n, spans):
    """The writer GUM uses, written independently of the reader's serialiser."""
    cells = []
    for p in range(n):
        opening = sorted([s for s in enumerate(spans) if s[1][0] == p and s[1][1] > p], key=lambda s: (-s[1][1], s[0]))
        single = [s for s in enumerate(spans) if s[1][0] == p == s[1][1]]
        closing = sorted([s for s in enumerate(spans) if s[1][1] == p and s[1][0] < p], key=lambda s: (-s[1][0], -s[0]))
        value = "".join([f"({e}-person-new-x{k}" for k, (_, _, e) in opening]
                        + [f"({e}-person-new-x{k})" for k, (_, _, e) in single] + [f"{e})" for _, (_, _, e) in closing])
        cells.append(f"Entity={value}" if value else "_")
    return cells


@settings(max_examples=60, deadline=None)
@given(nested_documents())
def test_round_trip_generated(tmp_path_factory, document):
    n, spans = document
    # one-word spans at one word: at most one (GUM never writes two), so keep the first
    seen, kept = set(), []
    for i, j, e in spans:
        if i == j and i in seen:
            continue
        seen.add(i) if i == j else None
        kept.append((i, j, e))
    order = sorted(range(len(kept)), key=lambda k: (kept[k][0], -kept[k][1]))
    kept = [kept[k] for k in order]  # opening order = document order, outer first
    cells = _misc_column(n, kept)
    lines = ["# newdoc id = g", HEADER, "# text = x"]
    lines += [f"{p + 1}\tw{p}\tw\tX\tX\t_\t{0 if p == 0 else 1}\t{'root' if p == 0 else 'dep'}\t_\t{cells[p]}"
              for p in range(n)]
    path = tmp_path_factory.mktemp("g") / "g.conllu"
    path.write_text("\n".join(lines) + "\n\n", encoding="utf-8")
    (doc,) = read_coref(path)
    assert sorted((m.start, m.end, m.entity) for m in doc.mentions) == sorted((i, j, e) for i, j, e in kept)
    values = entity_values(doc)
    assert [values.get(p, None) for p in range(n)] == [c[len("Entity="):] if c != "_" else None for c in cells]


GUM_DEV = str(SHARED_DATA / "gum" / "en_gum-ud-dev.conllu.gz")


@pytest.mark.shared_data
@pytest.mark.skipif(not os.path.exists(GUM_DEV), reason="GUM dev (../shared/data/gum) not present")
def test_gum_dev_round_trips():
    documents = read_coref(GUM_DEV)
    assert len(documents) == 26
    person = 0
    for doc in documents:
        values = entity_values(doc)
        for p in range(doc.n_words):
            assert values.get(p) == misc_entity(doc.row(p)[9]), (doc.doc_id, p)
        person += sum(m.etype == "person" for m in doc.mentions)
    assert person == 2261  # SOURCE.txt's count of person mention starts in dev
    with gzip.open(GUM_DEV, "rt", encoding="utf-8") as handle:
        assert sum(line.startswith("# newdoc") for line in handle) == 26
