"""Text-file helpers shared by the readers: transparent gzip and atomic writes."""

from __future__ import annotations

import gzip
import os
import tempfile
from contextlib import contextmanager

__all__ = ["open_text", "atomic_write_text"]


def open_text(path):
    """Open a text file for reading, gunzipping when the name ends in .gz."""
    path = os.fspath(path)
    if path.endswith(".gz"):
        return gzip.open(path, "rt", encoding="utf-8")
    return open(path, encoding="utf-8")


@contextmanager
def atomic_write_text(path):
    """Yield a text handle; on success the file replaces ``path`` atomically (gzip if .gz)."""
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=directory)
    try:
        if path.endswith(".gz"):
            os.close(fd)
            handle = gzip.open(tmp, "wt", encoding="utf-8")
        else:
            handle = os.fdopen(fd, "w", encoding="utf-8")
        with handle:
            yield handle
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
