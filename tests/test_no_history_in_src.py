"""src/ says what the code does and why, never its history: no issue numbers and no
markers of when something changed ("before s60", "the default before 24 Nov", "kept
from earlier sessions"). That history belongs in CHANGELOG.md and docs/notes/.

The scan reads the comments and string literals (docstrings, help texts, messages) of
every module with :mod:`tokenize`, so code cannot trip it and prose cannot slip past.
"""

from __future__ import annotations

import io
import pathlib
import re
import tokenize

SRC = pathlib.Path(__file__).resolve().parents[1] / "src" / "varorder"
_MONTH = r"(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\.?"
PATTERNS = {
    "an issue number": re.compile(r"(?i)\bissues?\s*#?\d+|(?<![\w#&/])#\d{1,4}\b"),
    "a session marker": re.compile(
        rf"(?i)\b(?:before|after|since|until|from|in)\s+s\d{{1,3}}\b|\bsessions?\b|\bearlier\s+versions?\b"
        rf"|\b(?:before|after|since|until)\s+(?:\d{{1,2}}\s+{_MONTH}|{_MONTH}\s+\d{{1,2}}\b)"),
}


def _prose(path: pathlib.Path):
    """(line, text) of every comment and string literal of a module."""
    source = path.read_text(encoding="utf-8")
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type in (tokenize.COMMENT, tokenize.STRING) or token.type == getattr(tokenize, "FSTRING_MIDDLE", -1):
            yield token.start[0], token.string


def history_mentions(root: pathlib.Path) -> list[str]:
    found = []
    for path in sorted(root.rglob("*.py")):
        for line, text in _prose(path):
            for what, pattern in PATTERNS.items():
                for match in pattern.finditer(text):
                    found.append(f"{path.relative_to(root)}:{line + text[:match.start()].count(chr(10))}: "
                                 f"{what} {match.group(0)!r}")
    return found


def test_src_tells_no_history():
    found = history_mentions(SRC)
    assert not found, "move the history to CHANGELOG.md or docs/notes/: " + "; ".join(found)


def test_the_scan_finds_each_kind(tmp_path):
    (tmp_path / "m.py").write_text(
        '"""Docstring (issue #30)."""\n'
        "x = 1  # the behaviour before s60\n"
        "y = '#1f77b4'  # a colour, not an issue\n"
        "z = 'the default before 24 Nov'\n"
        "# kept from earlier sessions\n")
    found = history_mentions(tmp_path)
    assert [entry.split(": ", 1)[0] for entry in found] == ["m.py:1", "m.py:2", "m.py:4", "m.py:5"], found
