"""Input validation shared by the chain and lattice engines.

Every public inference entry point validates its arguments here before any
kernel sees them, so a bad shape, a NaN or an out-of-range length fails with a
``ValueError`` that names the argument (and the first offending index) instead
of surfacing later as a wrong answer or a Numba type error.
"""

from __future__ import annotations

import numpy as np

__all__ = ["as_potentials", "check_int_at_least", "first_index"]


def first_index(mask: np.ndarray) -> tuple[int, ...]:
    """Index tuple of the first True entry of ``mask`` (row-major)."""
    flat = int(np.flatnonzero(mask.ravel())[0])
    return tuple(int(i) for i in np.unravel_index(flat, mask.shape))


def as_potentials(name: str, value, shape: tuple[int | None, ...]) -> np.ndarray:
    """Return ``value`` as a C-contiguous float64 array of log-potentials.

    ``shape`` lists the expected size of each axis (``None`` = any size).
    −inf is legal (a hard zero); NaN and +inf are rejected.
    """
    arr = np.asarray(value)
    if arr.dtype == object or not (
        np.issubdtype(arr.dtype, np.floating) or np.issubdtype(arr.dtype, np.integer)
    ):
        raise ValueError(f"{name} must be a real-valued array, got dtype {arr.dtype}")
    if arr.ndim != len(shape):
        raise ValueError(
            f"{name} must have {len(shape)} dimensions {_fmt(shape)}, got shape {arr.shape}"
        )
    for axis, (want, got) in enumerate(zip(shape, arr.shape)):
        if want is not None and want != got:
            raise ValueError(
                f"{name} must have shape {_fmt(shape)}, got {arr.shape} (axis {axis} differs)"
            )
    arr = np.ascontiguousarray(arr, dtype=np.float64)
    bad = np.isnan(arr)
    if bad.any():
        raise ValueError(f"{name} contains NaN at index {first_index(bad)}")
    bad = np.isposinf(arr)
    if bad.any():
        raise ValueError(f"{name} contains +inf at index {first_index(bad)}")
    return arr


def check_int_at_least(name: str, value, minimum: int) -> int:
    """``value`` as an int, or a ValueError naming ``name`` if it is below ``minimum``."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ValueError(f"{name} must be an integer, got {value!r}")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    return int(value)


def _fmt(shape: tuple[int | None, ...]) -> str:
    return "(" + ", ".join("?" if s is None else str(s) for s in shape) + ")"
