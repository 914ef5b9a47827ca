"""CoNLL-U reader and writer (Universal Dependencies format, https://universaldependencies.org/format.html).

A sentence is a block of comment lines (``#``) and 10-column tab-separated token lines,
ended by a blank line. Word lines have an integer ID; multiword-token ranges (``3-4``)
and empty nodes (``5.1``) are kept verbatim for writing but are not words. Tags are
read from the UPOS (4th) or XPOS (5th) column; :func:`write_conllu` writes sentences
back unchanged except for that column, which it fills with given tags.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from varorder.errors import FormatError, ParameterError
from varorder.io._text import atomic_write_text, open_text

__all__ = ["ConlluSentence", "read_conllu", "read_tagged", "write_conllu", "TAG_COLUMNS"]

TAG_COLUMNS = {"upos": 3, "xpos": 4}
_N_COLUMNS = 10


@dataclass
class ConlluSentence:
    """One sentence: its comment lines, all its token rows (10 fields each), and which rows are words."""

    comments: list[str] = field(default_factory=list)
    rows: list[list[str]] = field(default_factory=list)
    word_rows: list[int] = field(default_factory=list)

    @property
    def words(self) -> list[str]:
        return [self.rows[i][1] for i in self.word_rows]

    def tags(self, tag_column: str = "upos") -> list[str]:
        column = _column(tag_column)
        return [self.rows[i][column] for i in self.word_rows]


def _column(tag_column: str) -> int:
    try:
        return TAG_COLUMNS[tag_column.lower()]
    except (KeyError, AttributeError):
        raise ParameterError(f"tag_column must be one of {sorted(TAG_COLUMNS)}, got {tag_column!r}", name='tag_column', value=tag_column) from None


def read_conllu(path) -> list[ConlluSentence]:
    """Sentences of a CoNLL-U file (.gz transparent); a malformed line → FormatError with file:line."""
    path = os.fspath(path)
    sentences: list[ConlluSentence] = []
    current = ConlluSentence()
    lineno = 0

    def finish():
        nonlocal current
        if current.rows:
            if not current.word_rows:
                raise FormatError(f"{path}:{lineno}: sentence has no word lines", path=path, line=lineno)
            sentences.append(current)
        elif current.comments:
            raise FormatError(f"{path}:{lineno}: comment lines without a sentence", path=path, line=lineno)
        current = ConlluSentence()

    with open_text(path) as handle:
        for lineno, line in enumerate(handle, start=1):
            line = line.rstrip("\r\n")
            if not line.strip():
                finish()
                continue
            if line.startswith("#"):
                if current.rows:
                    raise FormatError(f"{path}:{lineno}: comment line inside a sentence", path=path, line=lineno)
                current.comments.append(line)
                continue
            fields = line.split("\t")
            if len(fields) != _N_COLUMNS:
                raise FormatError(f"{path}:{lineno}: expected {_N_COLUMNS} tab-separated columns, got {len(fields)}", path=path, line=lineno)
            if "" in fields:  # CoNLL-U writes "_" for an unspecified field, never nothing
                column = fields.index("")
                raise FormatError(f"{path}:{lineno}: column {column + 1} is empty (CoNLL-U writes '_' for no value)", path=path, line=lineno)
            token_id = fields[0]
            if "-" in token_id or "." in token_id:
                current.rows.append(fields)
                continue
            if not token_id.isdigit() or int(token_id) != len(current.word_rows) + 1:
                raise FormatError(f"{path}:{lineno}: word ID {token_id!r}, expected {len(current.word_rows) + 1}", path=path, line=lineno)
            current.word_rows.append(len(current.rows))
            current.rows.append(fields)
        lineno += 1
        finish()
    return sentences


def read_tagged(path, tag_column: str = "upos") -> tuple[list[list[str]], list[list[str]]]:
    """(words, tags) of every sentence of a CoNLL-U file: the ``read`` of a tagger trained on
    files shard by shard (:meth:`varorder.models.CRF.fit_sources`)."""
    sentences = read_conllu(path)
    return [s.words for s in sentences], [s.tags(tag_column) for s in sentences]


def write_conllu(path, sentences: list[ConlluSentence], tags: list[list[str]] | None = None,
                 tag_column: str = "upos") -> None:
    """Write sentences (atomically; .gz compresses), replacing ``tag_column`` with ``tags`` when given."""
    column = _column(tag_column)
    if tags is not None and len(tags) != len(sentences):
        raise ParameterError(f"tags has {len(tags)} sequences for {len(sentences)} sentences", name='tags', value=tags)
    with atomic_write_text(path) as handle:
        for i, sentence in enumerate(sentences):
            rows = [list(r) for r in sentence.rows]
            if tags is not None:
                if len(tags[i]) != len(sentence.word_rows):
                    raise ParameterError(f"tags[{i}] has {len(tags[i])} tags for {len(sentence.word_rows)} words", name='tags', value=tags)
                for row, tag in zip(sentence.word_rows, tags[i]):
                    rows[row][column] = str(tag)
            for comment in sentence.comments:
                handle.write(comment + "\n")
            for row in rows:
                handle.write("\t".join(row) + "\n")
            handle.write("\n")
