"""Numba's start-up in a fresh process, without work that a command's cached kernels do
not need. A fresh ``read_arpa`` of the PTB 5-gram paid about 0.33 s of CPU before its
first line was parsed — importing Numba, then Numba's first call of a cached kernel —
against KenLM's whole load of 0.87 s; three pieces of that work are avoidable:

* **SciPy's version check.** ``import numba`` imports ``scipy`` (its ``__init__``: SciPy's
  test utilities, Cython's shadow module, ``subprocess``...) only to refuse SciPy < 1.0;
  varorder requires SciPy >= 1.11, so the check cannot fail. :func:`import_numba` imports
  Numba with ``scipy`` marked absent for the duration of that import (about 35 ms), as
  when SciPy is not installed; ``scipy`` itself is untouched and imports normally after.
* **The registries, on a cache hit.** Numba's first load of *any* cached kernel refreshes
  its typing and target contexts: it imports every module of its NumPy, typed-container,
  random, polynomial, jitclass and datetime support and installs their typing templates
  and lowering registries (about 70 ms). Those are what *compiling* needs; loading cached
  machine code needs only the runtime (NRT) initialised. :func:`load_without_refresh`
  makes the given modules' cached dispatchers do exactly that on a cache hit; on a miss
  they compile as usual (Numba's compiler refreshes both contexts itself first). The
  modules given must not use what a refresh would have set up for loading (this holds
  for kernels without ``parallel=True``, typed containers or hashing of strings and
  tuples: their machine code links only against the runtime and the C helpers the
  target context registers when it is created).
* **Numba's extension entry points, on a cache hit.** Before a dispatcher's first call Numba scans
  every installed distribution's entry points for its extensions (importing
  ``importlib.metadata`` and reading each ``*.dist-info``: ~0.05 + 0.04 CPU s). The dispatchers
  given to :func:`load_without_refresh` skip that scan (their arguments are arrays and numbers, no
  extension types); a compilation still runs it, from the target context's refresh, and
  ``importlib.metadata`` is imported lazily (on first use) when Numba is imported from here.
* **SciPy's BLAS, when a refresh does happen.** Initialising the CPU target imports
  ``numba.np.arraymath``, which asks at import time whether BLAS can be had by importing
  ``scipy.linalg.cython_blas``: all of ``scipy.linalg`` (0.13–0.2 s of CPU). The CPU
  target context's ``refresh`` first runs :func:`defer_scipy_linalg`, which imports
  ``numba.np.arraymath`` with that module marked absent and records the answer the check
  would have given (whether ``scipy.linalg`` is installed, found without importing it):
  only ``np.convolve``/``np.correlate`` read the flag, when they are compiled, and they
  then call ``np.dot``, whose typing imports ``scipy.linalg`` itself — deferred to the
  first kernel that uses BLAS, not dropped.

Everything else about Numba is untouched. The modules defining varorder's LM kernels
import this one before ``numba``; the chain engine (``engine.chain``), the feature products and
the CRF's optimiser register their serial kernels too (the serial twins of the chain's and the
feature product's parallel kernels included), so that a short job on one thread — a one-sentence
tagging process, a tiny ``tag train`` — loads its cached kernels without the refresh.

One addition speaks instead of saving time: :class:`CompileNotice` says on a terminal's stderr when
a call is compiling varorder's kernels (no cached machine code: a tree never warmed by
``python -m varorder._warmup``, another CPU, a new Numba), and at exit how many and how long.
"""

from __future__ import annotations

import atexit
import importlib.util
import os
import sys
import time
import types

_BLAS_MODULE = "scipy.linalg.cython_blas"


def _imported_without(module: str, target: str) -> types.ModuleType:
    """Import ``target`` with ``module`` marked absent (an import of it raises
    ImportError without loading its parents) unless ``module`` is already loaded."""
    if target in sys.modules:
        return sys.modules[target]
    blocked = module not in sys.modules
    if blocked:
        sys.modules[module] = None
    try:
        return importlib.import_module(target)
    finally:
        if blocked and sys.modules.get(module, 0) is None:
            del sys.modules[module]


def _lazy_import(name: str) -> None:
    """Put ``name`` in ``sys.modules`` as a module that executes on first attribute access (the standard
    ``importlib.util.LazyLoader``), unless it is loaded already or cannot be found."""
    if name in sys.modules:
        return
    spec = importlib.util.find_spec(name)
    if spec is None or spec.loader is None:
        return
    spec.loader = importlib.util.LazyLoader(spec.loader)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    parent, _, child = name.rpartition(".")
    if parent in sys.modules:
        setattr(sys.modules[parent], child, module)


def import_numba() -> types.ModuleType:
    """``numba``, imported without importing ``scipy`` for its version check, and with ``importlib.metadata``
    (~0.05 CPU s, for the extension entry points Numba scans before its first compilation) loaded lazily
    (see the module)."""
    if "numba" not in sys.modules:
        _lazy_import("importlib.metadata")
    return _imported_without("scipy", "numba")


def _entry_points_on_compile():
    """A dispatcher's hook before its first call: Numba scans the installed packages' entry points for its
    extensions there (~0.04 CPU s). A cached kernel loaded without a refresh needs none (its arguments
    are arrays and numbers); a compilation refreshes the target context, which scans them itself."""


def defer_scipy_linalg() -> None:
    """Import ``numba.np.arraymath`` without importing ``scipy.linalg`` (see the module)."""
    if "numba.np.arraymath" in sys.modules or _BLAS_MODULE in sys.modules:
        return  # too late, or already paid
    arraymath = _imported_without(_BLAS_MODULE, "numba.np.arraymath")
    try:
        installed = importlib.util.find_spec("scipy.linalg") is not None
    except ImportError:  # scipy itself is absent
        installed = False
    arraymath._HAVE_BLAS = installed


def _defer_scipy_linalg_before_refresh() -> None:
    """Make the CPU target context run :func:`defer_scipy_linalg` before its first refresh."""
    from numba.core.registry import cpu_target

    context = cpu_target.target_context
    if "refresh" in vars(context):
        return

    def refresh():
        defer_scipy_linalg()
        del context.refresh  # the class's method from now on
        return context.refresh()

    context.refresh = refresh


def load_without_refresh(*modules: types.ModuleType) -> None:
    """Let the cached Numba dispatchers defined in ``modules`` load their machine code on a
    cache hit without refreshing Numba's typing and target contexts (see the module).
    Safe to call more than once."""
    from numba.core.caching import Cache
    from numba.core.dispatcher import Dispatcher
    from numba.core.runtime import rtsys

    if not (hasattr(Cache, "_load_overload") and hasattr(Cache, "_guard_against_spurious_io_errors")
            and hasattr(rtsys, "initialize")):
        return  # a Numba whose cache is laid out otherwise: its own (slower) start-up, same results
    for module in modules:
        for value in vars(module).values():
            # a kernel declared with engine.threads.parallel_kernel: its serial twin (the parallel one is skipped)
            dispatcher = getattr(value, "serial", value) if callable(value) else value
            cache = getattr(dispatcher, "_cache", None) if isinstance(dispatcher, Dispatcher) else None
            if not isinstance(cache, Cache) or "load_overload" in vars(cache) \
                    or dispatcher.targetoptions.get("parallel"):  # its threading layer is set up by a refresh
                continue

            def load_overload(sig, target_context, cache=cache):
                rtsys.initialize(target_context)  # what the machine code links against
                with cache._guard_against_spurious_io_errors():
                    return cache._load_overload(sig, target_context)  # None: a miss, compiled as usual
                return None  # an I/O error Numba's guard swallowed (Windows)

            cache.load_overload = load_overload
            dispatcher._compilation_chain_init_hook = _entry_points_on_compile


def lock_cache_saves() -> None:
    """Make Numba's on-disk cache safe for processes that compile into one cache folder at once (the
    install-time warm-up's two processes, joblib and Dask worker processes in a fresh tree). Numba's
    ``IndexDataCacheFile.save`` reads a function's index, picks the first free data file number, writes
    the index, then the data, with no lock between processes: two processes compiling two signatures of
    one function can leave an index that names one signature's machine code for the other, and every
    later process then fails on that signature until the source changes (docs/notes/33-determinism.md).
    Each save here holds an exclusive ``flock`` on ``<index>.lock`` from reading the index to writing the
    data, so saves of one function run one after the other. Safe to call more than once; without
    ``fcntl`` (Windows) or where the lock file cannot be opened, Numba's own save runs unlocked."""
    try:
        import fcntl

        from numba.core.caching import IndexDataCacheFile
    except ImportError:  # pragma: no cover - no fcntl, or a Numba whose cache is laid out otherwise
        return
    save = IndexDataCacheFile.save
    if getattr(save, "locked_across_processes", False):
        return

    def locked_save(self, key, data):
        try:
            lock = open(self._index_path + ".lock", "ab")
        except OSError:
            return save(self, key, data)
        with lock:
            fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
            try:
                return save(self, key, data)
            finally:
                fcntl.flock(lock.fileno(), fcntl.LOCK_UN)

    locked_save.locked_across_processes = True
    locked_save.__doc__ = save.__doc__
    IndexDataCacheFile.save = locked_save


numba = import_numba()
from numba.core import event as _event  # noqa: E402  (after import_numba: Numba without SciPy's check)


class CompileNotice(_event.Listener):
    """Say on stderr, once per process, that varorder's kernels are being compiled, and at exit how long it
    took: a first call that finds no cached machine code (a source tree that was never warmed, another
    CPU, a new Numba) spends seconds to minutes in LLVM, which without a word looks like a hang or, in a
    printed timing, like slowness. Listens to Numba's ``numba:compile`` event, which fires only on a cache
    miss, for the cached dispatchers defined in varorder (``cache=True``; kernels a factory makes at run
    time have no on-disk cache and are left out). Speaks when stderr is a terminal, or always with
    ``VARORDER_COMPILE_NOTICE=1`` (never with ``=0``)."""

    def __init__(self, stream=None):
        self.stream = stream
        self.kernels = 0
        self.seconds = 0.0
        self._depth = 0
        self._began = 0.0

    def _speaks(self) -> bool:
        setting = os.environ.get("VARORDER_COMPILE_NOTICE", "")
        stream = self.stream or sys.stderr
        return setting == "1" or (setting != "0" and hasattr(stream, "isatty") and stream.isatty())

    def on_start(self, event):
        from numba.core.caching import Cache

        dispatcher = (event.data or {}).get("dispatcher")
        module = getattr(getattr(dispatcher, "py_func", None), "__module__", "") or ""
        # cached kernels only: a kernel made by a factory at run time has no on-disk cache, compiles in every
        # process, and is no warm-up's to fix
        cached = isinstance(getattr(dispatcher, "_cache", None), Cache)
        if self._depth or (cached and module.split(".")[0] == "varorder"):
            self._depth += 1
            if self._depth == 1:
                self._began = time.perf_counter()
                if not self.kernels and self._speaks():
                    atexit.register(self.summary)
                    print("varorder: compiling Numba kernels on first use (no cached machine code for them yet): "
                          "a first call can take from seconds to a few minutes on a 2-core machine; later calls "
                          "load the cached code. `python -m varorder._warmup --jobs 2` compiles every kernel "
                          "ahead (about 2.5 min).", file=self.stream or sys.stderr, flush=True)
                self.kernels += 1

    def on_end(self, event):
        if self._depth:
            self._depth -= 1
            if not self._depth:
                self.seconds += time.perf_counter() - self._began

    def summary(self):
        print(f"varorder: compiled {self.kernels} kernel(s) in {self.seconds:.0f} s (cached for later calls)",
              file=self.stream or sys.stderr, flush=True)


def announce_compilation() -> None:
    """Register one :class:`CompileNotice` for Numba's compile events (safe to call more than once)."""
    global _NOTICE
    if _NOTICE is None:
        _NOTICE = CompileNotice()
        _event.register("numba:compile", _NOTICE)


_NOTICE = None
lock_cache_saves()
_defer_scipy_linalg_before_refresh()
announce_compilation()
