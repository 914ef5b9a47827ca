"""Numba's first compiled call in a process, without an import it does not need.

The first call of any Numba function — a cached kernel too — initialises the CPU
target, which imports every module of Numba's NumPy support. One of them,
``numba.np.arraymath``, asks at import time whether BLAS can be had by importing
``scipy.linalg.cython_blas``: all of ``scipy.linalg`` (with ``numpy.f2py`` and SciPy's
array-API layer), 0.13–0.2 s of CPU in a fresh process — half the cost of Numba's first
call, paid by a command that reads an ARPA file or scores a sentence, none of whose
kernels use BLAS.

:func:`defer_scipy_linalg` imports ``numba.np.arraymath`` early with that module
marked absent, then records the answer the check would have given (whether
``scipy.linalg`` is installed, found without importing it): only
``np.convolve``/``np.correlate`` read the flag, when they are compiled, and they then call
``np.dot``, whose typing imports ``scipy.linalg`` itself, so the import is deferred to the
first kernel that uses BLAS, not dropped. Everything else about Numba is untouched. The
modules defining varorder's LM kernels import this one, so it runs before their first call.
"""

from __future__ import annotations

import importlib.util
import sys

_BLAS_MODULE = "scipy.linalg.cython_blas"


def defer_scipy_linalg() -> None:
    """Import ``numba.np.arraymath`` without importing ``scipy.linalg`` (see the module)."""
    if "numba.np.arraymath" in sys.modules or _BLAS_MODULE in sys.modules:
        return  # too late, or already paid
    sys.modules[_BLAS_MODULE] = None  # an import of it raises ImportError without loading its parents
    try:
        from numba.np import arraymath
    finally:
        if sys.modules.get(_BLAS_MODULE, 0) is None:
            del sys.modules[_BLAS_MODULE]
    try:
        installed = importlib.util.find_spec("scipy.linalg") is not None
    except ImportError:  # scipy itself is absent
        installed = False
    arraymath._HAVE_BLAS = installed


defer_scipy_linalg()
