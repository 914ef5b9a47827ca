"""CoNLL column files (CoNLL-2000 chunking, CoNLL-2002/2003 NER): one token per line, columns separated by
white space, the token first and the tags after it; a blank line ends a sentence; a ``-DOCSTART-`` line
(followed by a blank line) starts a document.

    -DOCSTART- -X- -X- O

    EU NNP B-NP B-ORG
    rejects VBZ B-VP O
    German JJ B-NP B-MISC

(Tjong Kim Sang & De Meulder, CoNLL-2003; Tjong Kim Sang, CoNLL-2002, whose Spanish/Dutch files have two
or three columns.) :func:`read_conll` keeps every column of every row, and each sentence the
``-DOCSTART-`` line before it, so that :func:`write_conll` writes a file back unchanged except for the
column it fills with given tags (or a column it appends). Columns are chosen by index, negative from the
end: ``tag_column=-1`` is the last (the NER tags of CoNLL-2003), ``-2`` the chunk tags.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from varorder.errors import FormatError, ParameterError
from varorder.io._text import atomic_write_text, open_text

__all__ = ["ConllSentence", "read_conll", "write_conll", "read_conll_tagged", "DOCSTART"]

DOCSTART = "-DOCSTART-"


@dataclass
class ConllSentence:
    """One sentence: its rows (the columns of each token line) and the ``-DOCSTART-`` line that opened a
    document right before it (None inside a document)."""

    rows: list[list[str]] = field(default_factory=list)
    docstart: str | None = None
    line: int = 0

    @property
    def words(self) -> list[str]:
        return [row[0] for row in self.rows]

    @property
    def n_columns(self) -> int:
        return len(self.rows[0]) if self.rows else 0

    def column(self, index: int = -1) -> list[str]:
        """The values of column ``index`` (negative from the end) of every token."""
        return [row[index] for row in self.rows]

    def tags(self, tag_column: int = -1) -> list[str]:
        return self.column(tag_column)


def _check_column(index, n_columns, path, line):
    if isinstance(index, bool) or not isinstance(index, int):
        raise ParameterError(f"tag_column must be an int (a column index, -1 the last), got {index!r}",
                             name="tag_column", value=index)
    if not -n_columns <= index < n_columns or (index in (0, -n_columns)):
        raise FormatError(f"tag column {index} is not a tag column of a {n_columns}-column file (column 0 is the "
                          "token)", path=path, line=line, expected=f"an index in 1..{n_columns - 1} or "
                          f"-{n_columns - 1}..-1")


def read_conll(path, tag_column: int = -1) -> list[ConllSentence]:
    """The sentences of a CoNLL column file (.gz transparent).

    Every token line must have the file's number of columns (at least 2) and ``tag_column`` must name
    one of the columns after the token; otherwise FormatError names the file and line.
    """
    path = os.fspath(path)
    sentences: list[ConllSentence] = []
    current = ConllSentence()
    docstart = None
    n_columns = None
    with open_text(path) as handle:
        for lineno, line in enumerate(handle, start=1):
            fields = line.split()
            if not fields:
                if current.rows:
                    sentences.append(current)
                    current = ConllSentence()
                continue
            if fields[0] == DOCSTART:
                if current.rows:
                    sentences.append(current)
                    current = ConllSentence()
                docstart = line.rstrip("\r\n")
                continue
            if n_columns is None:
                n_columns = len(fields)
                if n_columns < 2:
                    raise FormatError(f"a token line has {n_columns} column", path=path, line=lineno,
                                      expected="TOKEN ... TAG (at least 2 columns)")
                _check_column(tag_column, n_columns, path, lineno)
            elif len(fields) != n_columns:
                raise FormatError(f"{len(fields)} columns, but the file's first token line has {n_columns}",
                                  path=path, line=lineno, expected=f"{n_columns} columns")
            if not current.rows:
                current.docstart, current.line, docstart = docstart, lineno, None
            current.rows.append(fields)
    if current.rows:
        sentences.append(current)
    return sentences


def read_conll_tagged(path, tag_column: int = -1) -> tuple[list[list[str]], list[list[str]]]:
    """(words, tags) of every sentence: the ``read`` of a tagger trained on files shard by shard."""
    sentences = read_conll(path, tag_column)
    return [s.words for s in sentences], [s.tags(tag_column) for s in sentences]


def write_conll(path, sentences: list[ConllSentence], tags: list[list[str]] | None = None, tag_column: int = -1,
                append: bool = False, separator: str = " ") -> None:
    """Write sentences (atomically; .gz compresses) with ``tags`` in column ``tag_column`` (replaced), or
    as a new last column with ``append=True`` (conlleval's input: gold then predicted); ``-DOCSTART-``
    lines are written back where they were."""
    if tags is not None and len(tags) != len(sentences):
        raise ParameterError(f"tags has {len(tags)} sequences for {len(sentences)} sentences", name="tags",
                             value=len(tags))
    with atomic_write_text(path) as handle:
        for i, sentence in enumerate(sentences):
            if sentence.docstart is not None:
                handle.write(sentence.docstart + "\n\n")
            rows = [list(r) for r in sentence.rows]
            if tags is not None:
                if len(tags[i]) != len(rows):
                    raise ParameterError(f"tags[{i}] has {len(tags[i])} tags for {len(rows)} tokens", name="tags",
                                         value=len(tags[i]))
                for row, tag in zip(rows, tags[i]):
                    if append:
                        row.append(str(tag))
                    else:
                        row[tag_column] = str(tag)
            for row in rows:
                handle.write(separator.join(row) + "\n")
            handle.write("\n")
