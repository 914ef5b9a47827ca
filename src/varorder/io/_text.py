"""Text-file helpers shared by the readers: one opening path and atomic writes.

:func:`open_text` is how every reader opens a file: gzip is recognised by its magic
bytes (not by the name), and undecodable bytes or a corrupt compressed stream become a
:class:`~varorder.errors.FormatError` that names the file and the line, never a bare ``UnicodeDecodeError``,
``EOFError`` or ``zlib.error``. :func:`atomic_write_text` writes through a hidden
temporary file in the target's folder and renames it into place, with the mode an
ordinary ``open`` would give under the current umask.
"""

from __future__ import annotations

import errno
import gzip
import io
import os
import tempfile
import zlib
from contextlib import contextmanager

from varorder.errors import FormatError, ParameterError

__all__ = ["open_text", "atomic_write_text", "is_gzip", "umask_mode", "naming_path"]


def naming_path(error: BaseException, path, role: str = "the output") -> BaseException:
    """``error``, when it is an OSError that names no file (``write`` on a full disk:
    ``[Errno 28] No space left on device``, a file past ``RLIMIT_FSIZE``: ``[Errno 27]``),
    made to name ``path`` and what it was (whether the output, the ``-T`` folder or an input
    failed). Returns it, to be re-raised."""
    # EPIPE comes from a pipe (stdout read by `head`), never from writing a file: a writer whose
    # body also printed to stdout must not claim it
    if (isinstance(error, OSError) and error.filename is None and error.errno is not None
            and error.errno != errno.EPIPE):
        error.filename = os.fspath(path)
        error.strerror = f"{error.strerror} while writing {role}"
    return error

GZIP_MAGIC = b"\x1f\x8b"
# what a damaged file can raise while being decoded or decompressed
_CORRUPTION = (UnicodeDecodeError, EOFError, zlib.error, gzip.BadGzipFile)


def is_gzip(path) -> bool:
    """True when the file starts with the gzip magic bytes."""
    with open(path, "rb") as probe:
        return probe.read(2) == GZIP_MAGIC


class CheckedTextReader(io.TextIOBase):
    """A read-only text handle that reports corruption as a ``FormatError(file, line)``."""

    def __init__(self, path: str, raw: io.TextIOBase, compressed: bool):
        self._path = path
        self._raw = raw
        self._compressed = compressed
        self.lines_read = 0

    def _fail(self, exc: BaseException):
        where = f"{self._path}: line {self.lines_read + 1}"
        if isinstance(exc, UnicodeDecodeError):
            raise FormatError(f"{where}: not valid UTF-8 text ({exc.reason} at byte {exc.start} of the block read)", path=self._path, line=self.lines_read + 1) from None
        raise FormatError(f"{where}: corrupt or truncated gzip data ({exc.__class__.__name__}: {exc})", path=self._path, line=self.lines_read + 1) from None

    def readable(self) -> bool:
        return True

    def readline(self, size: int = -1) -> str:
        try:
            line = self._raw.readline(size)
        except _CORRUPTION as exc:
            self._fail(exc)
        if line.endswith("\n"):
            self.lines_read += 1
        return line

    def __next__(self) -> str:
        line = self.readline()
        if not line:
            raise StopIteration
        return line

    def __iter__(self):
        return self

    def read(self, size: int = -1) -> str:
        try:
            text = self._raw.read(size)
        except _CORRUPTION as exc:
            self._fail(exc)
        self.lines_read += text.count("\n")
        return text

    @property
    def name(self) -> str:
        return self._path

    def close(self) -> None:
        self._raw.close()
        super().close()


def open_text(path, errors: str = "strict") -> CheckedTextReader:
    """Open a UTF-8 text file for reading, gunzipping when its content is gzip.

    Raises ``FormatError`` naming the file (and line) for undecodable or corrupt data,
    and ``OSError`` subclasses as usual when the file cannot be opened. ``errors`` is
    the codec's error handler (``"surrogateescape"`` keeps any byte as a distinct
    character, for corpora that are not all UTF-8).
    """
    path = os.fspath(path)
    compressed = is_gzip(path)
    if compressed:
        raw = gzip.open(path, "rt", encoding="utf-8", errors=errors)
    else:
        raw = open(path, encoding="utf-8", errors=errors)
    return CheckedTextReader(path, raw, compressed)


def umask_mode(base: int = 0o666) -> int:
    """The mode ``open`` would give a new file under the current umask."""
    umask = os.umask(0)
    os.umask(umask)
    return base & ~umask


@contextmanager
def atomic_write_text(path):
    """Yield a text handle; on success the file replaces ``path`` atomically (gzip if .gz).

    The file gets the umask's ordinary mode (``mkstemp`` alone would leave it 0600);
    an exception or signal-driven exit (``KeyboardInterrupt``, ``SystemExit``) removes
    the hidden temporary file.
    """
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        raise ParameterError(f"{path}: cannot write: folder {directory!r} does not exist", name='path', value=path)
    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", suffix=".tmp", dir=directory)
    try:
        if path.endswith(".gz"):
            os.close(fd)
            handle = gzip.open(tmp, "wt", encoding="utf-8")
        else:
            handle = os.fdopen(fd, "w", encoding="utf-8")
        with handle:
            yield handle
        os.chmod(tmp, umask_mode())
        os.replace(tmp, path)
    except BaseException as error:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise naming_path(error, path)
