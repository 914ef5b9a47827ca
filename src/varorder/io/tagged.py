"""Reader for ``word<TAB>tag`` files (one token per line, blank line between sentences).

This is the layout of ``ptb-wsj-sample/wsj_sample.pos.tsv.gz``: a ``# file = NAME`` line
starts each source file; other ``#`` lines without a tab are ignored (``#<TAB>#`` is the
pound-sign token). Each sentence records the
source file it came from (``None`` before any ``# file`` line), which is how that
corpus is split (wsj_0001–0159 train, 0160–0179 dev, 0180–0199 test).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from varorder.errors import FormatError
from varorder.io._text import open_text

__all__ = ["TaggedSentence", "read_tagged"]

_FILE_PREFIX = "# file = "


@dataclass
class TaggedSentence:
    words: list[str]
    tags: list[str]
    source: str | None = None


def read_tagged(path) -> list[TaggedSentence]:
    """Sentences of a word<TAB>tag file (.gz transparent); a malformed line → FormatError with file:line."""
    path = os.fspath(path)
    sentences: list[TaggedSentence] = []
    words: list[str] = []
    tags: list[str] = []
    source = None
    with open_text(path) as handle:
        for lineno, line in enumerate(handle, start=1):
            line = line.rstrip("\r\n")
            # "#\t#" is a token (the WSJ pound sign); a comment line has no tab
            if not line.strip() or (line.startswith("#") and "\t" not in line):
                if words:
                    sentences.append(TaggedSentence(words, tags, source))
                    words, tags = [], []
                if line.startswith(_FILE_PREFIX):
                    source = line[len(_FILE_PREFIX):].strip()
                continue
            fields = line.split("\t")
            if len(fields) != 2 or not fields[0] or not fields[1]:
                raise FormatError(f"{path}:{lineno}: expected 'word<TAB>tag', got {line!r}", path=path, line=lineno)
            words.append(fields[0])
            tags.append(fields[1])
    if words:
        sentences.append(TaggedSentence(words, tags, source))
    return sentences
