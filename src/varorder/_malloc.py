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

_M_MMAP_THRESHOLD = -3


def fix_mmap_threshold(nbytes: int) -> None:
    """Serve blocks of ``nbytes`` or more by mmap and return them to the system when freed."""
    import ctypes

    try:
        # the process's own symbols (the C library is already loaded): ctypes.util.find_library would
        # run `ldconfig -p` in a child process, which a memory measurement of the process tree can catch
        # while it still shares the parent's pages (+105 MB in one 100k align run's Σ of peaks)
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return
    mallopt(_M_MMAP_THRESHOLD, int(nbytes))
