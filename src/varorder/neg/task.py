"""The named-entity generation task (GREC-NEG'10, Belz & Kow 2010; Bouchard 2010) built from GUM.

From CorefUD-annotated documents (:mod:`varorder.io.coref`):

* **entities**: ``person`` entities named at least once in their document (a mention whose
  head word has UPOS PROPN). Plural groups (e.g. a named band) are kept, with plural pronouns.
* **slots** (GREC's REF holes): every mention of such an entity, in document order, except
  predicative (``pred``) and appositive (``appos``) mentions, which predicate rather than refer,
  and mentions nested inside another slot (the outer slot's text contains them).
* each slot's **gold RE** is its span's text; its **REG08 type** comes from the head's UPOS:
  PROPN → ``name``, PRON → ``pronoun`` (personal, possessive, reflexive and relative pronouns,
  1st/2nd person included), anything else (NOUN, NUM, DET, ADJ, ...) → ``common``.
* a slot's **case** (an input, from the syntax around the hole, not from the gold RE): ``gen``
  when the head's relation is ``nmod:poss`` or it has a ``case`` child ``'s``/``'``;
  ``nom`` for subject relations (nsubj*, csubj*, expl); ``acc`` otherwise.
* each entity's **candidates** (GREC's ALT-REFEX idea): every distinct RE of the entity in the
  document, plus the third-person pronoun forms of its gender/number: he/him/his/himself,
  she/her/her/herself or they/them/their/themselves (gender by the majority of the entity's
  3rd-person pronoun mentions' Gender=; number by its mentions' Number=; unknown singular →
  singular they), plus the relative pronouns who/whom/whose (always; GUM annotates relative
  pronouns as mentions, and GREC's lists carry "who" too). A candidate's attribute is its
  subtype and case: name/common × {plain, gen} (gen: ends in 's or '); pron3 / rel / pron
  (1st/2nd person, other) × {nom, acc, gen}; reflex.

Strings are compared with the first letter lower-cased unless the first word is a proper noun
or "I" (so sentence-initial "He" and "he" are one candidate); regenerated text capitalises a
sentence-initial RE. Each list is sorted canonically (attribute, longer first, then alphabetically),
so that its order carries nothing of the original text.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from dataclasses import dataclass, field

from varorder.errors import FormatError, ParameterError
from varorder.eval.neg import neg_scores
from varorder.io import atomic_write_text, open_text

__all__ = ["ATTRS", "REG08_OF", "Candidate", "Slot", "NegDocument", "build_documents", "save_task", "load_task",
           "regenerate", "normal_key", "task_counts", "evaluate"]

ATTRS = ("name-plain", "name-gen", "common-plain", "common-gen", "pron3-nom", "pron3-acc", "pron3-gen",
         "rel-nom", "rel-acc", "rel-gen", "reflex-acc", "pron-nom", "pron-acc", "pron-gen")
ATTR_INDEX = {a: i for i, a in enumerate(ATTRS)}
REG08_OF = {"name": "name", "common": "common", "pron3": "pronoun", "rel": "pronoun", "reflex": "pronoun",
            "pron": "pronoun"}
_PRONOUN_FORMS = {"masc": ("he", "him", "his", "himself"), "fem": ("she", "her", "her", "herself"),
                  "plural": ("they", "them", "their", "themselves")}
_RELATIVE_FORMS = (("who", "rel-nom"), ("whom", "rel-acc"), ("whose", "rel-gen"))
_SUBJECT = ("nsubj", "csubj", "expl")


@dataclass
class Candidate:
    """One referring expression an entity's slots may take."""

    text: str
    attr: str

    @property
    def reg08(self) -> str:
        return REG08_OF[self.attr.split("-")[0]]

    @property
    def is_name(self) -> bool:
        return self.attr.startswith("name")


@dataclass
class Slot:
    """A hole: its span (document word positions, inclusive), entity, gold RE and context features."""

    start: int
    end: int
    entity: str
    gold: str
    gold_type: str
    case: str
    sentence: int
    paragraph: int
    features: list = field(default_factory=list)


@dataclass
class NegDocument:
    """A document's words (with spacing), sentence and paragraph starts, slots and candidate lists."""

    doc_id: str
    genre: str
    words: list
    space_after: list
    sentence_starts: list
    paragraph_of_sentence: list
    slots: list
    candidates: dict  # entity -> list[Candidate]

    def gold_index(self, slot: Slot) -> int:
        key = normal_key(slot.gold)
        for i, c in enumerate(self.candidates[slot.entity]):
            if normal_key(c.text) == key:
                return i
        raise ParameterError(f"{self.doc_id}: slot gold {slot.gold!r} is not among entity {slot.entity}'s candidates")


def normal_key(text: str) -> str:
    """Comparison form: first letter lower-cased unless the first word looks like a name or is "I"."""
    first = text.split(" ", 1)[0]
    if not text or first == "I" or first.startswith("I'") or _looks_named(first):
        return text
    return text[0].lower() + text[1:]


_PRONOUN_WORDS = {"he", "him", "his", "himself", "she", "her", "hers", "herself", "they", "them", "their", "theirs",
                  "themselves", "who", "whom", "whose", "we", "us", "our", "you", "your", "my", "me", "it", "its",
                  "the", "a", "an", "this", "that", "these", "those", "one", "both", "all", "some", "many", "most",
                  "mine", "yours", "ours", "myself", "yourself", "ourselves", "yourselves", "someone", "everyone"}


def _looks_named(word: str) -> bool:
    return word[:1].isupper() and word.lower() not in _PRONOUN_WORDS and not word.isupper()


def _feats(row) -> dict:
    return dict(item.split("=", 1) for item in row[5].split("|") if "=" in item)


def _mention_attr(doc, mention) -> str:
    row = doc.row(mention.head)
    upos, feats = row[3], _feats(row)
    if upos == "PRON":
        case = "gen" if feats.get("Poss") == "Yes" or feats.get("Case") == "Gen" else \
            "nom" if feats.get("Case") == "Nom" else "acc" if feats.get("Case") == "Acc" else \
            ("nom" if row[7].split(":")[0] in _SUBJECT else "acc")
        if feats.get("PronType") == "Rel":
            return f"rel-{case}"
        if feats.get("Reflex") == "Yes":
            return "reflex-acc"
        if feats.get("Person") == "3" and feats.get("PronType") == "Prs":
            return f"pron3-{case}"
        return f"pron-{case}"
    kind = "name" if upos == "PROPN" else "common"
    text = doc.text(mention.start, mention.end)
    return f"{kind}-{'gen' if text.endswith((chr(39) + 's', chr(39), chr(8217) + 's')) else 'plain'}"


def _slot_case(doc, mention) -> str:
    row = doc.row(mention.head)
    relation = row[7]
    sentence = doc.sentence_of[mention.head]
    start = doc.sentence_starts[sentence]
    head_id = str(mention.head - start + 1)
    for p in range(start, start + len(doc.sentences[sentence].word_rows)):
        other = doc.row(p)
        if other[6] == head_id and other[7] == "case" and other[1].lower() in ("'s", "'", "’s", "’"):
            return "gen"
    if relation == "nmod:poss":
        return "gen"
    return "nom" if relation.split(":")[0] in _SUBJECT else "acc"


def _bucket(value: int, edges) -> str:
    for edge in edges:
        if value <= edge:
            return str(edge)
    return f">{edges[-1]}"


def _genre(doc_id: str) -> str:
    parts = doc_id.split("_")
    return parts[1] if len(parts) > 2 and parts[0] == "GUM" else "other"


def _paragraphs(coref_doc) -> list[int]:
    out, current = [], -1
    for s, sentence in enumerate(coref_doc.sentences):
        if current < 0 or any(c.lstrip("# ").startswith("newpar") for c in sentence.comments):
            current += 1
        out.append(current)
    return out


def _entity_pronouns(doc, mentions) -> tuple:
    genders, numbers = Counter(), Counter()
    for m in mentions:
        feats = _feats(doc.row(m.head))
        if "Number" in feats:
            numbers[feats["Number"]] += 1
        if doc.row(m.head)[3] == "PRON" and feats.get("Person") == "3" and "Gender" in feats:
            genders[feats["Gender"]] += 1
    if numbers["Plur"] > numbers["Sing"]:
        return _PRONOUN_FORMS["plural"]
    if genders["Masc"] or genders["Fem"]:
        return _PRONOUN_FORMS["masc" if genders["Masc"] >= genders["Fem"] else "fem"]
    return _PRONOUN_FORMS["plural"]  # singular they for an unknown gender


def build_document(coref_doc) -> NegDocument:
    """The task's slots and candidates of one :class:`~varorder.io.coref.CorefDocument`."""
    doc = coref_doc
    named = {m.entity for m in doc.mentions if m.etype == "person" and doc.row(m.head)[3] == "PROPN"}
    chosen = [m for m in doc.mentions if m.entity in named and m.etype == "person" and m.link not in ("pred", "appos")]
    chosen.sort(key=lambda m: (m.start, -m.end, m.order))
    kept = []
    for m in chosen:
        if kept and any(k.start <= m.start and m.end <= k.end for k in kept[-8:]):
            continue  # nested inside an earlier (outer) slot
        kept.append(m)
    paragraph_of = _paragraphs(doc)
    words = [doc.row(p)[1] for p in range(doc.n_words)]
    space_after = ["SpaceAfter=No" not in doc.row(p)[9].split("|") for p in range(doc.n_words)]
    candidates: dict[str, list[Candidate]] = {}
    keys: dict[str, set] = {}
    slots = []
    last_seen: dict[str, int] = {}  # entity -> index of its previous slot
    seen_paragraphs: dict[str, set] = {}
    genre = _genre(doc.doc_id)
    counts = Counter(m.entity for m in kept)
    for index, m in enumerate(kept):
        text = doc.text(m.start, m.end)
        attr = _mention_attr(doc, m)
        entity_candidates = candidates.setdefault(m.entity, [])
        key = normal_key(text)
        if key not in keys.setdefault(m.entity, set()):
            keys[m.entity].add(key)
            entity_candidates.append(Candidate(key, attr))
        sentence = doc.sentence_of[m.start]
        paragraph = paragraph_of[sentence]
        case = _slot_case(doc, m)
        relation = doc.row(m.head)[7]
        before = doc.row(m.start - 1) if m.start > 0 and doc.sentence_of[m.start - 1] == sentence else None
        after = doc.row(m.end + 1) if m.end + 1 < doc.n_words and doc.sentence_of[m.end + 1] == sentence else None
        previous = last_seen.get(m.entity)
        features = [f"dep={relation}", f"depc={relation.split(':')[0]}", f"case={case}",
                    f"prevpos={before[3] if before else 'BOS'}", f"nextpos={after[3] if after else 'EOS'}",
                    f"prevw={before[1].lower() if before else 'BOS'}", f"nextw={after[1].lower() if after else 'EOS'}",
                    f"sentpos={_bucket(m.start - doc.sentence_starts[sentence], (0, 1, 3, 7))}",
                    f"genre={genre}", f"mentions={_bucket(counts[m.entity], (1, 2, 5, 10, 20))}"]
        if previous is None:
            features.append("first_in_doc")
        else:
            prev_slot = slots[previous]
            features.append(f"prevdist={_bucket(sentence - prev_slot.sentence, (0, 1, 2, 5))}")
            between = {s.entity for s in slots[previous + 1:]} - {m.entity}
            features.append(f"other_between={bool(between)}")
        if paragraph not in seen_paragraphs.setdefault(m.entity, set()):
            features.append("first_in_paragraph")
        seen_paragraphs[m.entity].add(paragraph)
        if slots and slots[-1].sentence == sentence:
            features.append("not_first_slot_in_sentence")
            features.append(f"same_entity_earlier_in_sentence={slots[-1].entity == m.entity}")
        if sentence == 0 or paragraph_of[sentence - 1] != paragraph:
            features.append("paragraph_first_sentence")
        last_seen[m.entity] = index
        slots.append(Slot(m.start, m.end, m.entity, text, REG08_OF[attr.split("-")[0]], case, sentence, paragraph,
                          features))
    for entity, entity_candidates in candidates.items():
        mentions = [m for m in doc.mentions if m.entity == entity]
        have = keys[entity]
        nom, acc, gen, reflexive = _entity_pronouns(doc, mentions)
        for text, attr in ((nom, "pron3-nom"), (acc, "pron3-acc"), (gen, "pron3-gen"), (reflexive, "reflex-acc"),
                           *_RELATIVE_FORMS):
            if text not in have:
                have.add(text)
                entity_candidates.append(Candidate(text, attr))
        # a canonical order: the order of first use in the document would tell a tie-breaking argmax
        # which name the original introduced the entity with
        entity_candidates.sort(key=lambda c: (ATTR_INDEX[c.attr], -len(c.text.split()), c.text))
    return NegDocument(doc.doc_id, genre, words, space_after, list(doc.sentence_starts), paragraph_of, slots,
                       candidates)


def build_documents(coref_documents) -> list[NegDocument]:
    """:func:`build_document` of each document that has at least one slot. A mention whose entity
    type is not one word (a ``# global.Entity`` header naming fewer fields than the mentions hold,
    so that ``etype`` swallowed the rest) raises a :class:`~varorder.errors.FormatError` naming it."""
    coref_documents = list(coref_documents)
    for document in coref_documents:
        for m in document.mentions:
            if "-" in m.etype:
                raise FormatError(f"mention of entity {m.entity} has the entity type {m.etype!r:.60}: the "
                                  "'# global.Entity' header names fewer fields than the mentions hold",
                                  path=document.path, line=m.line or None,
                                  expected="a header such as GRP-etype-infstat-saliency-centering-minspan-link-identity")
    out = [build_document(d) for d in coref_documents]
    return [d for d in out if d.slots]


def task_counts(documents) -> dict:
    """Documents, entities, slots and candidates per slot (mean) of a task."""
    n_slots = sum(len(d.slots) for d in documents)
    return {"documents": len(documents), "entities": sum(len(d.candidates) for d in documents), "slots": n_slots,
            "mean_candidates_per_slot": round(sum(len(d.candidates[s.entity]) for d in documents for s in d.slots)
                                              / max(n_slots, 1), 2),
            "gold_types": dict(Counter(s.gold_type for d in documents for s in d.slots))}


def regenerate(document: NegDocument, choices, mark: bool = False) -> list[str]:
    """The document's sentences with each slot's span replaced by its chosen RE (``choices[i]`` a string).

    ``mark`` wraps each chosen RE as ``[entity: RE]``. A sentence-initial RE is capitalised.
    """
    if len(choices) != len(document.slots):
        raise ParameterError(f"{document.doc_id}: {len(choices)} choices for {len(document.slots)} slots", name='choices', value=choices)
    by_start = {s.start: (s, c) for s, c in zip(document.slots, choices)}
    starts = set(document.sentence_starts)
    sentences, pieces = [], []
    p, n = 0, len(document.words)
    while p < n:
        if p in starts and pieces:
            sentences.append("".join(pieces).strip())
            pieces = []
        if p in by_start:
            slot, text = by_start[p]
            if p in starts and text:
                text = text[0].upper() + text[1:]
            pieces.append(f"[{slot.entity}: {text}]" if mark else text)
            p = slot.end
        else:
            pieces.append(document.words[p])
        pieces.append(" " if document.space_after[p] else "")
        p += 1
    if pieces:
        sentences.append("".join(pieces).strip())
    return sentences


def evaluate(documents, choices) -> dict:
    """GREC-NEG figures (:func:`varorder.eval.neg.neg_scores`) of chosen RE strings, one list per document.

    A chosen string's type is that of the entity's candidate with the same comparison key
    (a string outside the candidate list counts as no type).
    """
    if len(choices) != len(documents):
        raise ParameterError(f"{len(choices)} choice lists for {len(documents)} documents", name='choices', value=choices)
    slots, hypotheses, references = [], [], []
    for document, chosen in zip(documents, choices):
        if len(chosen) != len(document.slots):
            raise ParameterError(f"{document.doc_id}: {len(chosen)} choices for {len(document.slots)} slots", name='choices', value=choices)
        for slot, text in zip(document.slots, chosen):
            types = {normal_key(c.text): c.reg08 for c in document.candidates[slot.entity]}
            slots.append((text, types.get(normal_key(text)), slot.gold, slot.gold_type))
        hypotheses += [s.split() for s in regenerate(document, chosen)]
        references += [s.split() for s in regenerate(document, [s.gold for s in document.slots])]
    return neg_scores(slots, hypotheses, references, key=normal_key)


# -- the prepared task file -----------------------------------------------------------------

_FORMAT = "varorder-neg-task"


def save_task(path, documents, source: str = "") -> None:
    """Write the prepared task as JSON (atomic; .gz compresses)."""
    payload = {"format": _FORMAT, "version": 1, "source": source, "documents": [
        {"doc_id": d.doc_id, "genre": d.genre, "words": d.words, "space_after": d.space_after,
         "sentence_starts": d.sentence_starts, "paragraph_of_sentence": d.paragraph_of_sentence,
         "slots": [[s.start, s.end, s.entity, s.gold, s.gold_type, s.case, s.sentence, s.paragraph, s.features]
                   for s in d.slots],
         "candidates": {e: [[c.text, c.attr] for c in cs] for e, cs in d.candidates.items()}} for d in documents]}
    with atomic_write_text(path) as handle:
        json.dump(payload, handle, ensure_ascii=False)


def load_task(path) -> list[NegDocument]:
    """Read a file written by :func:`save_task`; anything malformed raises FormatError naming the file."""
    path = os.fspath(path)
    try:
        with open_text(path) as handle:
            payload = json.load(handle)
    except json.JSONDecodeError as err:
        raise FormatError(f"{path}: not a prepared NEG task (JSON error: {err})", path=path) from None
    if not isinstance(payload, dict) or payload.get("format") != _FORMAT or payload.get("version") != 1:
        raise FormatError(f"{path}: not a prepared NEG task (format {_FORMAT!r} version 1 expected)", path=path)
    documents = []
    try:
        for i, d in enumerate(payload["documents"]):
            n = len(d["words"])
            if len(d["space_after"]) != n or not all(isinstance(w, str) and w for w in d["words"]):
                raise FormatError(f"document {i}: words and space_after disagree or hold empty words")
            candidates = {str(e): [Candidate(str(t), str(a)) for t, a in cs] for e, cs in d["candidates"].items()}
            for e, cs in candidates.items():
                if not cs or any(c.attr not in ATTR_INDEX or not c.text for c in cs):
                    raise FormatError(f"document {i}: entity {e} has an empty candidate list or an unknown attribute")
            slots = []
            for s in d["slots"]:
                start, end, entity, gold, gold_type, case, sentence, paragraph, features = s
                if not (isinstance(start, int) and isinstance(end, int) and 0 <= start <= end < n):
                    raise FormatError(f"document {i}: slot span {start}..{end} outside its {n} words")
                if entity not in candidates or gold_type not in ("name", "pronoun", "common") \
                        or case not in ("nom", "acc", "gen"):
                    raise FormatError(f"document {i}: slot at {start} has entity/type/case {entity!r}/{gold_type!r}/"
                                      f"{case!r}")
                slots.append(Slot(start, end, str(entity), str(gold), gold_type, case, sentence, paragraph,
                                  features))
            _check_structure(i, d, n, slots)
            document = NegDocument(str(d["doc_id"]), str(d["genre"]), list(d["words"]),
                                   [bool(x) for x in d["space_after"]], [int(x) for x in d["sentence_starts"]],
                                   [int(x) for x in d["paragraph_of_sentence"]], slots, candidates)
            for slot in slots:
                document.gold_index(slot)
            documents.append(document)
    except (KeyError, TypeError, ValueError) as err:
        raise FormatError(f"{path}: invalid NEG task ({type(err).__name__}: {err})", path=path) from None
    return documents


def _is_index(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _check_structure(i: int, d: dict, n: int, slots) -> None:
    """Sentence starts, paragraphs and each slot's sentence and paragraph in range and consistent
    (a slot at sentence 10**6 or paragraph -5 would index past the document)."""
    starts, paragraphs = d["sentence_starts"], d["paragraph_of_sentence"]
    if not isinstance(starts, list) or not isinstance(paragraphs, list) or not all(map(_is_index, starts + paragraphs)):
        raise FormatError(f"document {i}: sentence_starts and paragraph_of_sentence must be lists of indices >= 0")
    if n and (not starts or starts[0] != 0) or any(b < a for a, b in zip(starts, starts[1:])) \
            or any(s > n for s in starts):
        raise FormatError(f"document {i}: sentence_starts must rise from 0 within its {n} words")
    if len(paragraphs) != len(starts) or (paragraphs and paragraphs[0] != 0) \
            or any(b - a not in (0, 1) for a, b in zip(paragraphs, paragraphs[1:])):
        raise FormatError(f"document {i}: paragraph_of_sentence must count paragraphs from 0, one per sentence")
    ends = starts[1:] + [n]
    for slot in slots:
        if not _is_index(slot.sentence) or slot.sentence >= len(starts):
            raise FormatError(f"document {i}: slot at {slot.start} is in sentence {slot.sentence!r} of "
                              f"{len(starts)}")
        if not starts[slot.sentence] <= slot.start < ends[slot.sentence]:
            raise FormatError(f"document {i}: slot at {slot.start} does not start in its sentence {slot.sentence}")
        if slot.paragraph != paragraphs[slot.sentence]:
            raise FormatError(f"document {i}: slot at {slot.start} is in paragraph {slot.paragraph!r}, its sentence "
                              f"in paragraph {paragraphs[slot.sentence]}")
        if not isinstance(slot.features, list) or not all(isinstance(f, str) for f in slot.features):
            raise FormatError(f"document {i}: slot at {slot.start} has features that are not a list of strings")
