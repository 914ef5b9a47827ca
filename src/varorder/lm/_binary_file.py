"""What both binary format versions share (:mod:`varorder.lm.binary`, version 1, and
:mod:`varorder.lm.trie`, version 2): the magic bytes and preamble, the error kind, and the
record of file versions already verified in full, with the page-cache drop after writing.

Factorization: none — file handling only.
"""

from __future__ import annotations

import json
import os
import struct
from pathlib import Path

from varorder.errors import FormatError
from varorder.lm.corpus import atomic_output

MAGIC = b"varorder-lm\x00"
_PREAMBLE = struct.Struct("<12sIQII")  # magic, version, header length, header CRC, zero
_ALIGN = 64
_KENLM_MAGIC = b"mmap lm "
_FORMAT_NAME = "varorder n-gram language model"


class BinaryFormatError(FormatError):
    """A file that is not a valid varorder binary model (a FormatError, hence a ValueError,
    so callers that catch bad input keep working)."""


def _drop_cached_pages(path: Path) -> None:
    """Flush the file just written and drop it from the page cache. Written pages sit in
    the cache as 4 KB pages, and every later mapping of the file would use them; read
    back by the first :func:`open_binary` (which asks for huge pages), they come in
    2 MB folios where the kernel and file system support it, so that the random probes of
    the hash tables need one TLB entry per 2 MB (about 15% of scoring time on the PTB
    5-gram). Best effort: nothing happens where the calls are missing."""
    if not hasattr(os, "posix_fadvise"):
        return
    descriptor = os.open(path, os.O_RDONLY)
    try:
        os.fdatasync(descriptor)
        os.posix_fadvise(descriptor, 0, 0, os.POSIX_FADV_DONTNEED)
    except OSError:
        pass
    finally:
        os.close(descriptor)


_STAMP_LIMIT = 512


def _stamp_file() -> Path:
    root = os.environ.get("VARORDER_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "varorder")
    return Path(root) / "verified-binary-models.json"


def _stamp(file_stat: os.stat_result) -> str:
    # Any write to the file, a copy, a rename over it or a restore changes one of these
    # (the inode's change time cannot be set back by a user), so a match means the bytes
    # that were verified are the bytes on disk, short of silent media corruption.
    return (f"{file_stat.st_dev}:{file_stat.st_ino}:{file_stat.st_size}:"
            f"{file_stat.st_mtime_ns}:{file_stat.st_ctime_ns}")


def _read_stamps() -> list[str]:
    try:
        stamps = json.loads(_stamp_file().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []  # no cache or an unreadable one: every model is verified in full
    return [s for s in stamps if isinstance(s, str)] if isinstance(stamps, list) else []


def _known_verified(file_stat: os.stat_result) -> bool:
    """Whether this file version passed a full verification before (written by
    :func:`write_binary`, or verified by an earlier open). The default open then checks
    only the structure: the full check is paid once per file version, not per process,
    and a file changed in any way since is verified in full again."""
    return _stamp(file_stat) in _read_stamps()


def _record_verified(file_stat: os.stat_result) -> None:
    stamp = _stamp(file_stat)
    stamps = [s for s in _read_stamps() if s != stamp][-(_STAMP_LIMIT - 1):] + [stamp]
    target = _stamp_file()
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        with atomic_output(target) as handle:
            handle.write(json.dumps(stamps).encode("ascii"))
    except OSError:
        pass  # a read-only home: models are verified in full on every open instead


def _refuse(path, message: str) -> BinaryFormatError:
    return BinaryFormatError(f"{path}: {message}", path=path)
