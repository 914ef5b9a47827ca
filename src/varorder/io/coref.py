"""Entity / coreference annotation of CoNLL-U files in the CorefUD convention (as GUM writes it).

The MISC column's ``Entity=`` value carries bracketed mentions (Nedoluzhko et al., CorefUD 1.0,
2022; Zeldes, GUM, 2017): ``(ID-etype-infstat-...`` opens a mention of entity ID on this word,
``ID)`` closes the innermost open mention of ID, ``(ID-...)`` is a one-word mention. The
document header ``# global.Entity = GRP-etype-infstat-...`` names the dash-separated fields
(the last field takes any further dashes, so identities such as ``Jean-Paul_Sartre`` survive).
Mentions nest; discontinuous mentions (``[1/2]`` parts) are refused.

:func:`read_coref` turns a file into :class:`CorefDocument`\\ s (``# newdoc`` starts one):
the sentences (:class:`~varorder.io.conllu.ConlluSentence`) and the mentions, each with its
span (document-level word positions), entity id, fields, and head word by the dependency tree
(the span's first word whose head lies outside the span). :func:`entity_values` re-serialises
the mentions of a document to each word's ``Entity=`` value in GUM's order (openings of
multi-word mentions outer first, then a one-word mention, then closings inner first), so that
reading and writing round-trips. A malformed bracket raises FormatError naming file:line.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field

from varorder.errors import FormatError
from varorder.io._text import open_text
from varorder.io.conllu import ConlluSentence, read_conllu

__all__ = ["Mention", "CorefDocument", "read_coref", "entity_values", "misc_entity"]

_ID = r"[A-Za-z0-9_:.]+"
_PIECE = re.compile(rf"\(({_ID})(-[^()]*)?(\))?|({_ID})\)")


@dataclass
class Mention:
    """One mention: entity id, the fields as written after it, and its span of document word positions.

    ``start``/``end`` are inclusive indices into :attr:`CorefDocument.words` (the document's
    words flat); ``head`` likewise; ``order`` the opening order in the document (ties of equal spans).
    """

    entity: str
    raw: str
    fields: dict
    start: int
    end: int = -1
    head: int = -1
    order: int = 0
    line: int = 0

    @property
    def etype(self) -> str:
        return self.fields.get("etype", "")

    @property
    def infstat(self) -> str:
        return self.fields.get("infstat", "")

    @property
    def link(self) -> str:
        return self.fields.get("link", "")


@dataclass
class CorefDocument:
    """A document's sentences, flat word index and mentions (in opening order)."""

    doc_id: str
    path: str
    sentences: list[ConlluSentence] = field(default_factory=list)
    mentions: list[Mention] = field(default_factory=list)
    header: tuple = ()

    def __post_init__(self):
        self._index()

    def _index(self):
        self.sentence_of, self.word_in_sentence, self.sentence_starts = [], [], []
        for s, sentence in enumerate(self.sentences):
            self.sentence_starts.append(len(self.sentence_of))
            for w in range(len(sentence.word_rows)):
                self.sentence_of.append(s)
                self.word_in_sentence.append(w)

    def row(self, position: int) -> list[str]:
        """The 10 CoNLL-U fields of the word at document position ``position``."""
        sentence = self.sentences[self.sentence_of[position]]
        return sentence.rows[sentence.word_rows[self.word_in_sentence[position]]]

    @property
    def n_words(self) -> int:
        return len(self.sentence_of)

    def text(self, start: int, end: int) -> str:
        """Surface text of words start..end (inclusive), spaces as SpaceAfter says."""
        out = []
        for p in range(start, end + 1):
            row = self.row(p)
            out.append(row[1])
            if p < end and "SpaceAfter=No" not in row[9].split("|"):
                out.append(" ")
        return "".join(out)


def misc_entity(misc: str) -> str | None:
    """The ``Entity=`` value of a MISC field, or None."""
    for item in misc.split("|"):
        if item.startswith("Entity="):
            return item[len("Entity="):]
    return None


def _row_lines(path) -> list[int]:
    """Line number of every token row of a CoNLL-U file, in order (read_conllu validated the layout)."""
    lines = []
    with open_text(path) as handle:
        for lineno, line in enumerate(handle, start=1):
            if line.strip() and not line.startswith("#"):
                lines.append(lineno)
    return lines


def _header(comment: str, path, lineno) -> tuple | None:
    body = comment.lstrip("#").strip()
    if not body.startswith("global.Entity"):
        return None
    _, _, value = body.partition("=")
    names = tuple(value.strip().split("-"))
    if not names or names[0].lower() not in ("grp", "eid") or any(not n for n in names):
        raise FormatError(f"{path}:{lineno}: global.Entity must name dash-separated fields starting with GRP/eid, "
                          f"got {value.strip()!r}", path=path, line=lineno)
    return names


def read_coref(path) -> list[CorefDocument]:
    """Documents of a CoNLL-U file with CorefUD ``Entity=`` annotation (.gz transparent).

    A malformed ``Entity=`` value, a closing bracket with no open mention of its id, a mention
    left open at the end of its document, or annotation before any ``# global.Entity`` header
    raises FormatError naming file:line.
    """
    path = os.fspath(path)
    sentences = read_conllu(path)
    row_lines = _row_lines(path)
    documents: list[CorefDocument] = []
    header: tuple | None = None
    row_number = 0
    current: CorefDocument | None = None
    open_mentions: list[Mention] = []
    n_opened = 0

    def close_document():
        if current is not None and open_mentions:
            m = open_mentions[0]
            raise FormatError(f"{path}:{m.line}: mention of entity {m.entity} opened here is never closed "
                              f"(document {current.doc_id})", path=path, line=m.line)

    for sentence in sentences:
        first_line = row_lines[row_number] if row_number < len(row_lines) else 0
        for comment in sentence.comments:
            names = _header(comment, path, first_line)
            if names is not None:
                header = names
            if comment.lstrip("# ").startswith("newdoc"):
                close_document()
                _, _, doc_id = comment.partition("=")
                current = CorefDocument(doc_id.strip() or f"doc{len(documents) + 1}", path, header=header or ())
                documents.append(current)
                open_mentions, n_opened = [], 0
        if current is None:
            current = CorefDocument(f"doc{len(documents) + 1}", path, header=header or ())
            documents.append(current)
        if header is not None and current.header != header and not current.sentences:
            current.header = header
        base = current.n_words
        current.sentences.append(sentence)
        current._index()
        words = 0
        for r, row in enumerate(sentence.rows):
            lineno = row_lines[row_number + r]
            value = misc_entity(row[9])
            is_word = r in sentence.word_rows
            if value is None:
                words += is_word
                continue
            if not is_word:
                raise FormatError(f"{path}:{lineno}: Entity= on a multiword-token or empty-node line", path=path, line=lineno)
            if header is None:
                raise FormatError(f"{path}:{lineno}: Entity= annotation before any '# global.Entity' header", path=path, line=lineno)
            position = base + words
            words += 1
            pieces = list(_PIECE.finditer(value))
            if not value or "".join(p.group(0) for p in pieces) != value:
                raise FormatError(f"{path}:{lineno}: malformed Entity value {value!r}: expected '(ID-fields', "
                                  f"'(ID-fields)' or 'ID)' brackets", path=path, line=lineno)
            for piece in pieces:
                if piece.group(4) is not None:  # ID)
                    entity = piece.group(4)
                    for j in range(len(open_mentions) - 1, -1, -1):
                        if open_mentions[j].entity == entity:
                            mention = open_mentions.pop(j)
                            mention.end = position
                            break
                    else:
                        raise FormatError(f"{path}:{lineno}: closing bracket '{entity})' with no open mention of "
                                          f"entity {entity}", path=path, line=lineno)
                    continue
                entity, rest = piece.group(1), (piece.group(2) or "")[1:]
                if "[" in rest or "]" in rest:
                    raise FormatError(f"{path}:{lineno}: discontinuous mention of entity {entity} is not supported", path=path, line=lineno)
                if piece.group(2) is None:
                    raise FormatError(f"{path}:{lineno}: opening '({entity}' has no fields (expected "
                                      f"{'-'.join(header)})", path=path, line=lineno)
                values = rest.split("-", len(header) - 2) if len(header) > 1 else []
                mention = Mention(entity, rest, dict(zip(header[1:], values)), position, order=n_opened, line=lineno)
                n_opened += 1
                current.mentions.append(mention)
                if piece.group(3):
                    mention.end = position
                else:
                    open_mentions.append(mention)
        row_number += len(sentence.rows)
    close_document()
    for document in documents:
        for mention in document.mentions:
            mention.head = _head(document, mention)
    return documents


def _head(document: CorefDocument, mention: Mention) -> int:
    """The span's first word whose dependency head lies outside the span (the root of its subtree)."""
    for p in range(mention.start, mention.end + 1):
        row = document.row(p)
        head = int(row[6]) if row[6].isdigit() else 0
        if head == 0:
            return p
        sentence_start = document.sentence_starts[document.sentence_of[p]]
        target = sentence_start + head - 1
        if not mention.start <= target <= mention.end:
            return p
    return mention.start


def entity_values(document: CorefDocument) -> dict[int, str]:
    """Each annotated word's ``Entity=`` value, rebuilt from the mentions (document position → value)."""
    opens: dict[int, list[Mention]] = {}
    closes: dict[int, list[Mention]] = {}
    for m in document.mentions:
        opens.setdefault(m.start, []).append(m)
        if m.end != m.start:
            closes.setdefault(m.end, []).append(m)
    out = {}
    for position in sorted(set(opens) | set(closes)):
        parts = []
        here = opens.get(position, [])
        for m in sorted((m for m in here if m.end != m.start), key=lambda m: (-m.end, m.order)):
            parts.append(f"({m.entity}-{m.raw}")
        for m in sorted((m for m in here if m.end == m.start), key=lambda m: m.order):
            parts.append(f"({m.entity}-{m.raw})")
        for m in sorted(closes.get(position, []), key=lambda m: (-m.start, -m.order)):
            parts.append(f"{m.entity})")
        out[position] = "".join(parts)
    return out
