"""glibc's malloc: a fixed mmap threshold, so freed large arrays leave the resident set.

By default glibc raises its mmap threshold each time a mapped block is freed (up to 32 MiB),
so later arrays below that size come from the heap, whose freed space stays resident while
a live block sits above it. Long jobs that allocate and free many large NumPy arrays (the
aligner's E-steps, the streaming n-gram estimation) then hold memory no array uses. A fixed
threshold turns that adjustment off; its price is system time for mapping and zero-filling
each array at or above it afresh, so each caller picks its threshold from measurements (see
the call sites). A process-wide setting; a no-op where the C library is not glibc.
"""

from __future__ import annotations

_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
_M_ARENA_MAX = -8


def _mallopt():
    import ctypes

    try:
        # the process's own symbols (the C library is already loaded): ctypes.util.find_library would
        # run `ldconfig -p` in a child process, which a memory measurement of the process tree can catch
        # while it still shares the parent's pages (+105 MB in one 100k align run's Σ of peaks)
        return ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return None


def fix_mmap_threshold(nbytes: int, single_arena: bool = False, trim_threshold: int | None = None) -> None:
    """Serve blocks of ``nbytes`` or more by mmap and return them to the system when freed.
    ``trim_threshold``: free space at the heap's top that glibc keeps instead of handing back (its
    default, 128 KiB, stays fixed once the mmap threshold is set, so a job that frees and reallocates
    blocks below ``nbytes`` at the top of the heap has them faulted in afresh each time).

    ``single_arena``: every thread allocates from the main arena (``M_ARENA_MAX`` = 1; call before the
    process starts its threads). Each worker thread otherwise gets an arena of its own, which glibc
    trims as soon as its top is free: the aligner's batch arrays (1–6 MiB, allocated and freed ~8,000
    times a job on its worker threads) were faulted in afresh each time — 3.3 M minor page faults
    instead of 0.9 M and +9 MB resident at 100k pairs."""
    mallopt = _mallopt()
    if mallopt is None:
        return
    if single_arena:
        mallopt(_M_ARENA_MAX, 1)
    mallopt(_M_MMAP_THRESHOLD, int(nbytes))
    if trim_threshold is not None:
        mallopt(_M_TRIM_THRESHOLD, int(trim_threshold))


def release_free_heap() -> None:
    """Hand the heap's free pages back to the system (glibc's ``malloc_trim(0)``; a no-op elsewhere):
    after a phase that freed many large temporaries below the mmap threshold (the n-gram estimation's,
    ~60 MB on the PTB 5-gram), before one that adds memory of its own (the ARPA writer loads Numba)."""
    import ctypes

    try:
        ctypes.CDLL(None).malloc_trim(0)
    except (OSError, AttributeError):
        pass
