"""Line-by-line input for the commands' ``--stream`` modes: a pipeline starts the command once
and feeds it lines; each line is answered (and stdout flushed) before the next one is read, so the
process's start-up (imports, model load, compiled kernels) is paid once, not per request.

Nothing here reads ahead of the line being answered: ``sys.stdin``'s iteration returns a line as soon
as its newline arrives (the text layer reads what the pipe holds, never waiting to fill a buffer).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator

__all__ = ["stream_lines"]


def stream_lines(path: str) -> Iterator[tuple[str, str]]:
    """(``"FILE:LINE"``, the line without its newline) for each line of ``path`` (``-``: stdin), read one
    at a time."""
    if path == "-":
        name, handle = "<stdin>", sys.stdin
        yield from ((f"{name}:{number}", line.rstrip("\r\n")) for number, line in enumerate(handle, 1))
        return
    from varorder.io import open_text

    with open_text(path) as handle:
        for number, line in enumerate(handle, 1):
            yield f"{path}:{number}", line.rstrip("\r\n")
