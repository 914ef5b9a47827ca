"""One-pass checks of large potential arrays (NaN, +inf, largest finite magnitude).

No factorization of its own: this is the validation pass every engine entry point runs
on its log-potentials (see :mod:`varorder.engine.validate`), done as one integer
sweep over the float64 bit patterns instead of several NumPy passes with temporaries.
With the sign bit cleared, IEEE-754 doubles order like their bit patterns read as
integers, so NaN (above the +inf pattern), ±inf (equal to it) and the largest finite
magnitude are integer comparisons and an integer max — reductions LLVM vectorises.
Used for arrays large enough that the saving matters; small ones keep the NumPy path, and
inside the compiled small-input paths of the chain (:func:`checked_top`, :func:`within`), where the check rides
in the same compiled call as the inference.
"""

from __future__ import annotations

import numba as nb
import numpy as np
import varorder._numba_start  # noqa: E402,F401,I001  (Numba's cache saves locked across processes)

_ABS_MASK = np.int64(0x7FFFFFFFFFFFFFFF)
_INF_BITS = np.int64(0x7FF0000000000000)


@nb.njit(cache=True)
def _scan(bits):
    nan = 0
    posinf = 0
    top = np.int64(0)
    for i in range(bits.shape[0]):
        b = bits[i]
        mag = b & _ABS_MASK
        nan += mag > _INF_BITS
        posinf += b == _INF_BITS
        finite_mag = mag if mag < _INF_BITS else np.int64(0)
        top = max(top, finite_mag)
    return nan, posinf, top


def scan(arr: np.ndarray) -> tuple[bool, bool, float]:
    """(any NaN, any +inf, largest finite |x| (0 if none)) of a C-contiguous float64 array."""
    nan, posinf, top = _scan(arr.reshape(-1).view(np.int64))
    return nan > 0, posinf > 0, float(np.array([top], dtype=np.int64).view(np.float64)[0])


@nb.njit(cache=True)
def checked_top(x, limit):
    """The largest finite |x| of a C-contiguous float64 array (0 if none), or −1 when ``x`` holds NaN,
    +inf or a finite magnitude ≥ ``limit`` (compiled code's form of :func:`scan` plus the overflow test
    of :mod:`varorder.engine.validate`: the caller then takes the checked path, which names the entry)."""
    nan, posinf, top = _scan(x.reshape(-1).view(np.int64))
    if nan or posinf:
        return -1.0
    conv = np.empty(1, dtype=np.int64)
    conv[0] = top
    magnitude = conv.view(np.float64)[0]
    return magnitude if magnitude < limit else -1.0


@nb.njit(cache=True)
def within(x, limit):
    """Whether every entry of ``x`` is −inf or a finite number of magnitude below ``limit`` (no NaN, no
    +inf): :func:`checked_top`'s test without the magnitude, in one branch-free pass."""
    flat = x.reshape(-1)
    bad = False
    for i in range(flat.shape[0]):
        v = flat[i]
        bad |= ~((v < limit) & (v > -limit) | (v == -np.inf))  # no branches: the loop vectorises
    return not bad
