"""Text-file helpers shared by the readers: one opening path and atomic writes.

:func:`open_text` is how every reader opens a file: gzip is recognised by its magic
bytes (not by the name), and undecodable bytes or a corrupt compressed stream become a
:class:`~varorder.errors.FormatError` that names the file and the line, never a bare ``UnicodeDecodeError``,
``EOFError`` or ``zlib.error``. :func:`atomic_write_text` writes through a hidden
temporary file in the target's folder and renames it into place, with the mode an
ordinary ``open`` would give under the current umask.
"""

from __future__ import annotations

import contextvars
import errno
import gzip
import io
import os
import struct
import tempfile
import zlib
from contextlib import contextmanager

from varorder.errors import FormatError, ParameterError

__all__ = ["open_text", "open_stdin", "atomic_write_text", "is_gzip", "umask_mode", "naming_path", "input_limit",
           "InputTooLargeError"]


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


# (bytes, option) while a command that holds its whole input reads it (:func:`input_limit`)
_INPUT_LIMIT: contextvars.ContextVar = contextvars.ContextVar("varorder_input_limit", default=None)


class InputTooLargeError(ParameterError):
    """An input file larger than the limit of a command that holds its whole input in memory."""


@contextmanager
def input_limit(max_bytes: int | None, option: str = "--max-input-bytes"):
    """Within the block, every file :func:`open_text` opens may hold at most ``max_bytes`` of text
    (None: no limit): a larger one is refused before it is read when its size says so (a plain
    file's size, a gzip file's recorded size), or as soon as its text passes the limit (a gzip
    bomb), with an :class:`InputTooLargeError` naming the file, its size and ``option``."""
    token = _INPUT_LIMIT.set(None if max_bytes is None else (int(max_bytes), option))
    try:
        yield
    finally:
        _INPUT_LIMIT.reset(token)


def _too_large(path, size: int | None, limit) -> InputTooLargeError:
    """``size``: the file's text size when known before reading, None when the reading passed the limit."""
    max_bytes, option = limit
    what = (f"{size:,} bytes of text, more than {option} {max_bytes:,} allows" if size is not None
            else f"its text passed {option} {max_bytes:,} while being read")
    return InputTooLargeError(f"{path}: {what}: this command holds its whole input in memory",
                              name="max_input_bytes", value=size)


def _expected_size(path: str, compressed: bool) -> int:
    """The text's size as the file says it: its size, or a gzip member's recorded size (mod 2^32)."""
    if not compressed:
        return os.path.getsize(path)
    with open(path, "rb") as handle:
        handle.seek(0, os.SEEK_END)
        if handle.tell() < 4:
            return 0
        handle.seek(-4, os.SEEK_END)
        return struct.unpack("<I", handle.read(4))[0]


class CheckedTextReader(io.TextIOBase):
    """A read-only text handle that reports corruption as a ``FormatError(file, line)`` (and a file
    past the :func:`input_limit` in force as :class:`InputTooLargeError`)."""

    def __init__(self, path: str, raw: io.TextIOBase, compressed: bool):
        self._path = path
        self._raw = raw
        self._compressed = compressed
        self.lines_read = 0
        self._limit = _INPUT_LIMIT.get()
        self._chars = 0

    def _count(self, text: str) -> None:
        if self._limit is not None:
            self._chars += len(text)
            if self._chars > self._limit[0]:
                raise _too_large(self._path, None, self._limit)

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
        self._count(line)
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
        self._count(text)
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
    limit = _INPUT_LIMIT.get()
    if limit is not None and os.path.isfile(path) and _expected_size(path, compressed) > limit[0]:
        raise _too_large(path, _expected_size(path, compressed), limit)
    if compressed:
        raw = gzip.open(path, "rt", encoding="utf-8", errors=errors)
    else:
        raw = open(path, encoding="utf-8", errors=errors)
    return CheckedTextReader(path, raw, compressed)


def open_stdin(errors: str = "strict") -> CheckedTextReader:
    """Standard input under :func:`open_text`'s rules: UTF-8 with ``errors`` whatever the locale (under
    the C or POSIX locale Python reads stdin with ``surrogateescape``, which let any bytes through as
    text), undecodable bytes a ``ValueError`` naming ``<stdin>`` and the line. Closing it leaves stdin
    open."""
    import sys

    buffer = getattr(sys.stdin, "buffer", None)
    if buffer is None:  # a text stream with no bytes beneath (a StringIO in place of stdin)
        return CheckedTextReader("<stdin>", _Borrowed(sys.stdin, detach=False), False)
    wrapper = io.TextIOWrapper(buffer, encoding="utf-8", errors=errors)
    return CheckedTextReader("<stdin>", _Borrowed(wrapper, detach=True), False)


class _Borrowed(io.TextIOBase):
    """A text stream read through, whose ``close`` leaves stdin open (a wrapper made over stdin's
    buffer is detached from it, not closed with it)."""

    def __init__(self, stream, detach: bool):
        self._stream = stream
        self._detach = detach

    def readline(self, size: int = -1) -> str:
        return self._stream.readline(size)

    def read(self, size: int = -1) -> str:
        return self._stream.read(size)

    def close(self) -> None:
        if self._detach and not self.closed:
            self._stream.detach()
        super().close()


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
    the hidden temporary file. ``"-"`` is standard output (written as it comes, flushed
    at the end; nothing to replace).
    """
    path = os.fspath(path)
    if path == "-":
        import sys

        yield sys.stdout
        sys.stdout.flush()
        return
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
