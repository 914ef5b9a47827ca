"""Pharaoh / Moses word-alignment format: one line per sentence pair, links ``i-j``.

``i`` indexes the first (English) sentence and ``j`` the second (French), 0-based;
``i?j`` or ``i-j-P`` marks a possible link (some gold files use them). An empty
line is an empty alignment.
"""

from __future__ import annotations

import re

from varorder.errors import FormatError
from varorder.io._text import atomic_write_text, open_text

__all__ = ["parse_line", "read_pharaoh", "format_line", "write_pharaoh"]

_LINK = re.compile(r"^(\d+)([-?])(\d+)(-[SP])?$")


def parse_line(line: str, where: str = "<string>") -> tuple[set, set]:
    """(sure links, possible links) of one line; possible ⊇ sure."""
    sure, possible = set(), set()
    for tok in line.split():
        m = _LINK.match(tok)
        if m is None:
            raise FormatError(f"{where}: malformed link {tok!r}; expected 'i-j' with 0-based integers")
        link = (int(m.group(1)), int(m.group(3)))
        possible.add(link)
        if m.group(2) == "-" and m.group(4) != "-P":
            sure.add(link)
    return sure, possible


def read_pharaoh(path, with_possible: bool = False):
    """List of link sets per line (or (sure, possible) pairs with ``with_possible``)."""
    out = []
    with open_text(path) as fh:
        for no, line in enumerate(fh, 1):
            sure, possible = parse_line(line, f"{path}, line {no}")
            out.append((sure, possible) if with_possible else possible)
    return out


def format_line(links) -> str:
    return " ".join(f"{i}-{j}" for i, j in sorted(links))


def write_pharaoh(path, alignments) -> None:
    """Write one line per alignment atomically (temp file + os.replace)."""
    with atomic_write_text(path) as fh:
        for links in alignments:
            fh.write(format_line(links) + "\n")
