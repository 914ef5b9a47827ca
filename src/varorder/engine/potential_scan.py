"""One-pass checks of large potential arrays (NaN, +inf, largest finite magnitude).

No factorization of its own: this is the validation pass every engine entry point runs
on its log-potentials (see :mod:`varorder.engine.validate`), done as one integer
sweep over the float64 bit patterns instead of several NumPy passes with temporaries.
With the sign bit cleared, IEEE-754 doubles order like their bit patterns read as
integers, so NaN (above the +inf pattern), ±inf (equal to it) and the largest finite
magnitude are integer comparisons and an integer max — reductions LLVM vectorises.
Used for arrays large enough that the saving matters; small ones keep the NumPy path.
"""

from __future__ import annotations

import numba as nb
import numpy as np

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
