"""Input validation shared by the chain and lattice engines.

Every public inference entry point validates its arguments here before any
kernel sees them, so a bad shape, a NaN or an out-of-range length fails with a
:class:`~varorder.errors.ParameterError` that names the argument (and the first offending index) instead
of surfacing later as a wrong answer or a Numba type error.
"""

from __future__ import annotations

import sys

import numpy as np

from varorder.errors import ParameterError

__all__ = ["as_potentials", "potentials_and_bound", "check_int_at_least", "check_no_overflow", "as_rng", "as_index_array", "first_index"]

# A path score adds at most `terms` potentials; beyond this bound their sum (or the
# log-sum-exp's intermediate max + log K) can reach float64's +inf and turn into NaN.
_MAX_PATH_MAGNITUDE = 1e306
# Arrays at least this large are checked in one compiled pass (engine.potential_scan).
_SCAN_SIZE = 1 << 14
_SMALL_SCAN_SIZE = 32
_FLOAT64 = np.dtype(np.float64)


def first_index(mask: np.ndarray) -> tuple[int, ...]:
    """Index tuple of the first True entry of ``mask`` (row-major)."""
    flat = int(np.flatnonzero(mask.ravel())[0])
    return tuple(int(i) for i in np.unravel_index(flat, mask.shape))


def as_potentials(name: str, value, shape: tuple[int | None, ...], terms: int | None = None) -> np.ndarray:
    """Return ``value`` as a C-contiguous float64 array of log-potentials.

    ``shape`` lists the expected size of each axis (``None`` = any size).
    −inf is legal (a hard zero); NaN and +inf are rejected. With ``terms``, the
    :func:`check_no_overflow` test runs too, in the same pass over the array (large
    arrays are read once, not once per check).
    """
    return potentials_and_bound(name, value, shape, terms)[0]


def potentials_and_bound(name: str, value, shape: tuple[int | None, ...],
                         terms: int | None = None) -> tuple[np.ndarray, float]:
    """:func:`as_potentials` and the largest finite magnitude of the array (0 if none),
    which the validation pass finds anyway (the chain kernels use it to skip shifts)."""
    arr = np.asarray(value)
    # float64 (the common case) skips the dtype classification: ~2 µs of a one-sentence call's budget
    if arr.dtype != _FLOAT64 and (arr.dtype == object or not (
        np.issubdtype(arr.dtype, np.floating) or np.issubdtype(arr.dtype, np.integer)
    )):
        raise ParameterError(f"{name} must be a real-valued array, got dtype {arr.dtype}", name=name, value=value)
    if arr.ndim != len(shape):
        raise ParameterError(
            f"{name} must have {len(shape)} dimensions {_fmt(shape)}, got shape {arr.shape}", name=name, value=value
        )
    for axis, (want, got) in enumerate(zip(shape, arr.shape)):
        if want is not None and want != got:
            raise ParameterError(
                f"{name} must have shape {_fmt(shape)}, got {arr.shape} (axis {axis} differs)", name=name, value=value
            )
    arr = np.ascontiguousarray(arr, dtype=np.float64)
    # the compiled pass beats NumPy's three reductions from a few dozen entries (2.5 vs 4.5 µs on a
    # one-sentence chain's emissions) once Numba is loaded, as it is for every engine call
    if arr.size >= _SCAN_SIZE or (arr.size >= _SMALL_SCAN_SIZE and "numba" in sys.modules):
        from varorder.engine.potential_scan import scan

        has_nan, has_posinf, top = scan(arr)
        if not (has_nan or has_posinf):
            if terms is not None and top >= _overflow_limit(terms):
                _refuse_magnitude(name, arr, terms)
            return arr, top
    elif np.isfinite(arr.sum()):  # no NaN and no ±inf: one pass, no temporaries
        top = max(float(arr.max()), -float(arr.min())) if arr.size else 0.0
        if terms is not None and top >= _overflow_limit(terms):
            _refuse_magnitude(name, arr, terms)
        return arr, top
    bad = np.isnan(arr)
    if bad.any():
        raise ParameterError(f"{name} contains NaN at index {first_index(bad)}", name=name, value=value)
    bad = np.isposinf(arr)
    if bad.any():
        raise ParameterError(f"{name} contains +inf at index {first_index(bad)}", name=name, value=value)
    if terms is not None:
        check_no_overflow(terms, **{name: arr})
    finite = np.abs(arr[np.isfinite(arr)])
    return arr, float(finite.max()) if finite.size else 0.0


def check_int_at_least(name: str, value, minimum: int) -> int:
    """``value`` as an int, or a ParameterError naming ``name`` if it is below ``minimum``."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ParameterError(f"{name} must be an integer, got {value!r}", name=name, value=value)
    if value < minimum:
        raise ParameterError(f"{name} must be >= {minimum}, got {value}", name=name, value=value)
    return int(value)


def _overflow_limit(terms: int) -> float:
    return _MAX_PATH_MAGNITUDE / max(int(terms), 1)


def _refuse_magnitude(name: str, arr: np.ndarray, terms: int) -> None:
    limit = _overflow_limit(terms)
    finite = np.abs(arr[np.isfinite(arr)])
    bad = np.isfinite(arr) & (np.abs(arr) >= limit)
    raise ParameterError(
        f"{name} has a finite potential of magnitude {float(finite.max()):.3g} at index {first_index(bad)}: "
        f"a path adds up to {max(int(terms), 1)} potentials, which would overflow float64 "
        f"(keep |potential| below {limit:.3g}; use -inf for a hard zero)", name=name, value=arr
    )


def check_no_overflow(terms: int, **arrays: np.ndarray) -> None:
    """Refuse finite potentials so large that a sum of ``terms`` of them overflows float64.

    −inf (a hard zero) is fine; what is refused is a finite value whose magnitude
    times the number of terms on a path reaches float64's range, which would make
    log Z or a marginal NaN instead of a number.
    """
    limit = _overflow_limit(terms)
    for name, arr in arrays.items():
        if arr.size == 0:
            continue
        if arr.size >= _SCAN_SIZE and arr.dtype == np.float64 and arr.flags.c_contiguous:
            from varorder.engine.potential_scan import scan

            if scan(arr)[2] < limit:
                continue
        elif np.isfinite(arr.sum()):  # every entry finite: the largest magnitude without copies
            if max(float(arr.max()), -float(arr.min())) < limit:
                continue
        finite = np.abs(arr[np.isfinite(arr)])
        if finite.size and float(finite.max()) >= limit:
            _refuse_magnitude(name, arr, terms)


def as_rng(seed) -> np.random.Generator:
    """A NumPy generator from ``seed`` (None, a non-negative int, a SeedSequence or a Generator)."""
    if seed is None or isinstance(seed, (np.random.Generator, np.random.SeedSequence)):
        return np.random.default_rng(seed)
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise ParameterError(f"seed must be None, a non-negative integer or a numpy Generator, got {seed!r}", name='seed', value=seed)
    if seed < 0:
        raise ParameterError(f"seed must be non-negative, got {seed}", name='seed', value=seed)
    return np.random.default_rng(int(seed))


def as_index_array(name: str, value, shape: tuple[int, ...] | None = None) -> np.ndarray:
    """``value`` as an int64 array, refusing booleans, floats and other dtypes by name."""
    arr = np.asarray(value)
    if arr.size and (arr.dtype == np.bool_ or not np.issubdtype(arr.dtype, np.integer)):
        raise ParameterError(f"{name} must hold integers, got dtype {arr.dtype}", name=name, value=value)
    if shape is not None and arr.shape != shape:
        raise ParameterError(f"{name} must have shape {shape}, got {arr.shape}", name=name, value=value)
    return arr.astype(np.int64)


def _fmt(shape: tuple[int | None, ...]) -> str:
    return "(" + ", ".join("?" if s is None else str(s) for s in shape) + ")"
