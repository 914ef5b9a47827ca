"""Plain text for the taggers: one sentence a line, split into tokens by a small documented tokenizer.

:func:`tokenize` is deliberately simple and predictable (English conventions of the Penn Treebank and
Universal Dependencies' English treebanks, which the shipped taggers are trained on), not a
linguistic tokenizer:

* whitespace separates tokens;
* a word is a run of letters and digits, with inner hyphens, apostrophes, periods between letters
  (``U.S.``, ``e.g.``, kept whole with their last period) and periods or commas between digits
  (``3.5``, ``1,000``);
* the English clitics ``n't``, ``'s``, ``'re``, ``'ve``, ``'ll``, ``'d``, ``'m`` are their own tokens
  (``don't`` → ``do n't``; ``dog's`` → ``dog 's``), as in those treebanks;
* every other character (``.``, ``,``, ``"``, ``(``, ``$``, ...) is a token of its own.

Text already split into tokens (space-separated) is read as it is with ``tokenize=False``.

:func:`read_sentences` reads such a file (or ``-``, standard input) line by line, so an input of any
size is read in bounded memory; a line that is a CoNLL-U token line (10 tab-separated columns, an
integer ID first) or a CoNLL-U sentence comment is refused with a :class:`~varorder.errors.FormatError`
naming the file and line, since tagging it as words would give a wrong answer, not an error.
:func:`format_tagged` writes a tagged sentence as ``TOKEN<TAB>TAG`` lines and a blank line (two CoNLL
columns, which ``--format conll`` reads back).
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from varorder.errors import FormatError

__all__ = ["tokenize", "read_sentences", "bounded_lines", "format_tagged", "PLAIN_TEXT", "MAX_LINE_CHARS"]

PLAIN_TEXT = "plain text, one sentence a line"
# far past any sentence (a 100,000-character line is some 15,000 words)
MAX_LINE_CHARS = 100_000

_CLITIC = r"(?:n't|'s|'re|'ve|'ll|'d|'m)"
_TOKEN = re.compile(
    r"[^\W\d_]+(?=n't\b)"  # "do" of "don't" (the clitic is the next token)
    rf"|{_CLITIC}\b"
    r"|(?:[^\W\d_]\.){2,}"  # U.S. e.g.
    r"|\d+(?:[.,]\d+)+"  # 3.5 1,000
    r"|\w+(?:[-'](?!(?:t|s|re|ve|ll|d|m)\b)\w+)*"  # words with inner hyphens and apostrophes (o'clock)
    r"|\S",
    re.IGNORECASE)
_QUOTES = str.maketrans({"’": "'", "‘": "'"})
_CONLLU_ID = re.compile(r"\d+(?:[-.]\d+)?")
_CONLLU_COMMENT = re.compile(r"#\s*(?:sent_id|text|newdoc|newpar)\b")


def tokenize(line: str) -> list[str]:
    """The tokens of one line of text (see the module for the rules).

    >>> tokenize("The dog's bone isn't here, it's in the U.S. (3.5 km away).")  # doctest: +NORMALIZE_WHITESPACE
    ['The', 'dog', "'s", 'bone', 'is', "n't", 'here', ',', 'it', "'s", 'in', 'the', 'U.S.',
     '(', '3.5', 'km', 'away', ')', '.']
    """
    return _TOKEN.findall(line.translate(_QUOTES))


def _conllu_line(line: str) -> bool:
    fields = line.split("\t")
    return (len(fields) == 10 and _CONLLU_ID.fullmatch(fields[0]) is not None) or bool(_CONLLU_COMMENT.match(line))


def read_sentences(path, tokenize_text: bool = True, max_line_chars: int = MAX_LINE_CHARS
                   ) -> Iterator[tuple[int, list[str]]]:
    """(line number, tokens) for each line of ``path`` (``-``: standard input; ``.gz`` transparent), read one
    line at a time; a blank line gives an empty sentence. ``tokenize_text=False`` splits on whitespace only.
    FormatError (file and line) for a CoNLL-U line or a line longer than ``max_line_chars``."""
    from varorder.io._text import open_stdin, open_text

    name = "<stdin>" if str(path) == "-" else str(path)
    with open_stdin() if str(path) == "-" else open_text(path) as handle:
        for number, content, length in bounded_lines(handle, max_line_chars):
            if content is None:
                raise FormatError(f"a line of {length:,} characters, longer than {max_line_chars:,} (max_line_chars; "
                                  "the command option --max-line-chars)", path=name, line=number, expected=PLAIN_TEXT)
            if _conllu_line(content):
                raise FormatError("this line is CoNLL-U (10 tab-separated columns or a sentence comment), not "
                                  "plain text", path=name, line=number, expected=PLAIN_TEXT)
            yield number, tokenize(content) if tokenize_text else content.split()


def bounded_lines(handle, max_chars: int) -> Iterator[tuple[int, str | None, int]]:
    """(line number, the line without its newline, its length) for each line of the text ``handle``, read
    one at a time; a line longer than ``max_chars`` comes as (number, None, length), read in pieces of the
    limit, so that it never costs more memory than the limit."""
    number = 0
    while True:
        line = handle.readline(max_chars + 2)  # the limit, then "\r\n"
        if not line:
            return
        number += 1
        content = line.rstrip("\r\n")
        if len(content) <= max_chars:
            yield number, content, len(content)
            continue
        length = len(content)
        while line and not line.endswith("\n"):  # the rest of the line, a piece at a time
            line = handle.readline(max_chars + 2)
            length += len(line.rstrip("\r\n"))
        yield number, None, length


def format_tagged(tokens, tags) -> str:
    """One tagged sentence as ``TOKEN<TAB>TAG`` lines and a blank line (an empty sentence: the blank line)."""
    return "".join(f"{token}\t{tag}\n" for token, tag in zip(tokens, tags, strict=True)) + "\n"
