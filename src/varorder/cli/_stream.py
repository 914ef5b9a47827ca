"""Line-by-line input for the commands' ``--stream`` modes: a pipeline starts the command once
and feeds it lines; each line is answered (and stdout flushed) before the next one is read, so the
process's start-up (imports, model load, compiled kernels) is paid once, not per request.

Nothing here reads ahead of the line being answered: stdin's ``readline`` returns a line as soon
as its newline arrives (the text layer reads what the pipe holds, never waiting to fill a buffer).

The conventions every ``--stream`` command shares: a blank line is answered (by the
command's answer to an empty input: an empty line, or the empty sentence's score), never the end of
the stream; a line longer than ``--max-line-chars`` is answered by an empty line on stdout and one
``Error:`` line naming it on stderr, and the stream goes on — it is read in pieces of the limit, so
a 10 MB line costs neither the memory nor the minutes of answering it.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator

import click

from varorder.io.text import MAX_LINE_CHARS  # far past any sentence (some 15,000 words)

__all__ = ["stream_lines", "max_line_option", "MAX_LINE_CHARS"]


def max_line_option(fn):
    """The ``--max-line-chars`` option of a ``--stream`` command."""
    return click.option("--max-line-chars", type=click.IntRange(min=1), default=MAX_LINE_CHARS, show_default=True,
                        help="--stream: a longer line is answered by an empty line and an error on stderr "
                             "(the stream goes on)")(fn)


def stream_lines(path: str, max_chars: int = MAX_LINE_CHARS) -> Iterator[tuple[str, str]]:
    """(``"FILE:LINE"``, the line without its newline) for each line of ``path`` (``-``: stdin), read one
    at a time; a line longer than ``max_chars`` is not yielded but answered here (an empty line on
    stdout, an error on stderr)."""
    from varorder.io import open_stdin, open_text

    with open_stdin() if path == "-" else open_text(path) as handle:
        yield from _lines("<stdin>" if path == "-" else path, handle, max_chars)


def _lines(name, handle, max_chars):
    from varorder.io.text import bounded_lines

    for number, content, length in bounded_lines(handle, max_chars):
        if content is not None:
            yield f"{name}:{number}", content
            continue
        click.echo(f"Error: {name}:{number}: a line of {length} characters, longer than --max-line-chars "
                   f"{max_chars}: answered with an empty line", err=True)
        sys.stdout.write("\n")
        sys.stdout.flush()
