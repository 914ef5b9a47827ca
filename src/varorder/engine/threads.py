"""How many threads the engine's parallel kernels use: one policy, one place.

The dense-chain kernels run one chunk of sequences per Numba ``prange`` iteration. Two
threads only pay when there is enough work to split and a core free to take it: a
parallel region waits for its slowest thread, so on a busy machine (or for a batch of a
few sequences) one thread wins. ``auto`` — the default — therefore uses one thread for
small batches or when the 1-minute load average already exceeds the core count, and
Numba's thread count otherwise. Inside every engine call BLAS is pinned to one thread
(the kernels' (16, K)·(K, K) products are too small for BLAS's own threads, which would
otherwise compete with Numba's).

Set the policy with :func:`set_threads` (an int, or "auto"), the environment variable
``VARORDER_THREADS``, or ``varorder --threads``. Results never depend on the thread
count: every kernel reduces per sequence, and sampling draws its uniforms up front.

Every ``parallel=True`` kernel in the package is under this policy: the engine's chain kernels
through :func:`uses_engine_threads` at their entry points, every other one declared with
:func:`parallel_kernel`, which compiles it twice (parallel and serial) and runs the serial twin
whenever the policy gives the call one thread; a compiled small-input path calls a chain kernel's
:func:`serial_twin` when :func:`runs_serial` says so. A small input (one sentence, one pair) so never
starts Numba's thread pool nor enters a parallel region, whose launch alone costs more than
the work (``tests/test_thread_policy.py`` lists the parallel kernels and fails on one outside).

Numba's threading layer is started here (:func:`start_numba_threads`), so that its start leaves the
process's OpenMP settings to their owners: Numba's count is its own per-thread mask, and the OpenMP
runtime's count (which torch's ``get_num_threads`` and any other OpenMP user read) stays as it was.
"""

from __future__ import annotations

import functools
import os
import threading
from contextlib import contextmanager

import varorder._numba_start  # noqa: F401,I001  (before Numba: its cache saves locked across processes)
import numba

from varorder.errors import ParameterError

__all__ = ["set_threads", "get_threads", "engine_threads", "uses_engine_threads", "MIN_PARALLEL_SEQUENCES",
           "load_cython_blas", "sleep_idle_threads", "sequence_threads", "single_threaded_blas", "threads_for",
           "map_in_order", "parallel_kernel", "serial_twin", "warm_parallel_twin", "runs_serial", "PARALLEL_KERNELS",
           "PARALLEL_START_CPU_S", "SHORT_JOB_WORK", "start_numba_threads", "numba_thread_count", "set_numba_thread_count"]

# below this many sequences a batch fills at most two chunks of 16: not worth a second thread
MIN_PARALLEL_SEQUENCES = 32
_AUTO = "auto"
_policy: str | int | None = None  # None: not read from the environment yet
_blas = None  # threadpoolctl controller, created on first use (False if unavailable)
_blas_pinned = 0  # open single_threaded_blas blocks: engine calls inside need not pin BLAS themselves
# this process's own CPU use, sampled by _machine_busy: (wall, CPU seconds) at the last sample, cores used since
_own_sample = [0.0, 0.0, 0.0]
_OWN_WINDOW_S = 1.0


def _parse(value, source: str):
    if isinstance(value, str):
        if value.strip().lower() == _AUTO:
            return _AUTO
        try:
            value = int(value)
        except ValueError:
            raise ParameterError(f"{source} must be 'auto' or a positive integer, got {value!r}", name=source, value=value) from None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ParameterError(f"{source} must be 'auto' or a positive integer, got {value!r}", name=source, value=value)
    return value


# Numba's own entry points, kept here so that a test's stand-in for numba.get_num_threads cannot start the layer
_numba_get_num_threads = numba.get_num_threads
_numba_started = False
_numba_start_lock = threading.Lock()


_OPENMP_SETTINGS = ("omp_get_max_threads", "omp_set_num_threads", "omp_get_nested", "omp_set_nested",
                    "omp_get_max_active_levels", "omp_set_max_active_levels")


def _openmp_runtime():
    """The OpenMP runtime whose settings Numba's OpenMP layer sets (a ctypes library), or None where it cannot
    be had (no such layer, or a platform whose libraries do not expose their symbols this way).

    The layer's calls bind as a shared library's do: to the process's global scope first — a runtime another
    library loaded globally (torch loads its own libgomp so) — and only then to the layer's own dependency,
    which may be a second copy of the runtime; so the lookup goes in that order."""
    import ctypes
    import importlib.util

    try:
        spec = importlib.util.find_spec("numba.np.ufunc.omppool")
    except ImportError:
        return None
    if spec is None or spec.origin is None:
        return None
    for name in (None, spec.origin):
        try:
            runtime = ctypes.CDLL(name)
            for symbol in _OPENMP_SETTINGS:
                getattr(runtime, symbol)
        except (OSError, AttributeError, TypeError):
            continue
        return runtime
    return None


def start_numba_threads() -> None:
    """Start Numba's threading layer (once per process), leaving this thread's OpenMP settings as they were.

    Numba's OpenMP layer, when it starts, sets the OpenMP runtime's thread count to NUMBA_NUM_THREADS and
    enables nested regions (``omp_set_num_threads``, ``omp_set_nested`` in its ``launch_threads``). Every other
    OpenMP user of the process that shares the runtime reads those settings: torch's intra-op count *is*
    ``omp_get_max_threads()``, so a ``torch.set_num_threads(1)`` made before varorder's first parallel-capable
    call became the core count after it, and each later torch op ran on every core (on a busy machine a 10 µs
    op then spun for ms of CPU). Numba does not need them: its parallel regions name their thread count
    (``num_threads(n)``) and ``numba.set_num_threads`` only sets a per-thread mask of Numba's. So the count,
    the nesting flag and the nesting depth read before the start are put back after it (the flag first: in
    newer runtimes setting it sets the depth too)."""
    global _numba_started
    if _numba_started:
        return
    with _numba_start_lock:
        if _numba_started:
            return
        runtime = _openmp_runtime()
        saved = None if runtime is None else (runtime.omp_get_max_threads(), runtime.omp_get_nested(),
                                              runtime.omp_get_max_active_levels())
        _numba_get_num_threads()  # starts the layer
        if saved is not None and numba.threading_layer() == "omp":
            count, nested, levels = saved
            runtime.omp_set_num_threads(count)
            runtime.omp_set_nested(nested)
            runtime.omp_set_max_active_levels(levels)
        _numba_started = True


def numba_thread_count() -> int:
    """Numba's thread count in this thread (:func:`numba.get_num_threads`), its layer started by
    :func:`start_numba_threads`."""
    start_numba_threads()
    return numba.get_num_threads()


def set_numba_thread_count(n: int) -> None:
    """:func:`numba.set_num_threads` in this thread, its layer started by :func:`start_numba_threads`."""
    start_numba_threads()
    numba.set_num_threads(n)


def set_threads(value: int | str = _AUTO) -> None:
    """Use ``value`` threads in the engine (capped by Numba's NUMBA_NUM_THREADS), or "auto"."""
    global _policy
    _policy = _parse(value, "threads")
    if _policy != _AUTO:
        set_numba_thread_count(min(_policy, numba.config.NUMBA_NUM_THREADS))


def get_threads() -> int | str:
    """The current policy: an int, or "auto"."""
    global _policy
    if _policy is None:
        set_threads(_parse(os.environ.get("VARORDER_THREADS", _AUTO), "VARORDER_THREADS"))
    return _policy


@functools.lru_cache(maxsize=None)
def _cpu_count() -> int:
    # os.cpu_count() reads /sys on each call (~20 µs): too slow for a check made on every engine call
    # (the aligner's 100k job makes ~25,000)
    return os.cpu_count() or 1


def _own_cores() -> float:
    """Cores this process kept busy over its last second or so (every thread's CPU time / wall time)."""
    import time

    wall, cpu = time.monotonic(), time.process_time()
    last_wall, last_cpu, cores = _own_sample
    if wall - last_wall >= _OWN_WINDOW_S:
        cores = (cpu - last_cpu) / (wall - last_wall) if last_wall > 0.0 else 0.0
        _own_sample[:] = [wall, cpu, cores]
    return cores


def _machine_busy() -> bool:
    """Whether the other processes' share of the 1-minute load average exceeds the core count (+ 0.5).

    This process's own recent CPU use is taken out of the load: a job that keeps both cores busy
    raises the load average to ~2 by itself, and counting that would drop it to one thread on an
    otherwise idle 2-core machine as soon as anything else ran (the 100k-pair align job did)."""
    try:
        load = os.getloadavg()[0]
    except OSError:  # no load average on this platform
        return False
    return load - _own_cores() > _cpu_count() + 0.5


def threads_for(num_sequences: int) -> int:
    """Threads an engine call over ``num_sequences`` sequences will use now.

    Numba's thread count is per thread, and a thread that never set it starts at NUMBA_NUM_THREADS, whatever
    :func:`set_threads` chose in the thread that called it: a fixed policy therefore caps the count here, so
    that ``VARORDER_THREADS=1`` means one thread in an executor's threads too (not their kernels' batches
    on two pool threads and their parallel regions on every core)."""
    current = numba_thread_count()
    policy = get_threads()
    if policy != _AUTO:
        return min(policy, current)
    if current == 1:
        return current
    if num_sequences < MIN_PARALLEL_SEQUENCES or _machine_busy():
        return 1
    return current


# Under "auto", a process runs its kernels on one thread until its engine work has taken this much CPU time:
# its first parallel kernel costs ~0.15-0.3 CPU s (Numba refreshes its typing and target registries to load a
# parallel kernel, and starts the thread pool), more than a short job's whole kernel time (a 200-sentence
# CRF training run: ~0.1 s), while a long job pays it once and then runs parallel.
PARALLEL_START_CPU_S = 0.25
_parallel_since = [None, False]  # CPU time at the process's first batch a parallel kernel could take; started?


def _short_job() -> bool:
    if _parallel_since[1]:
        return False
    import time

    now = time.process_time()
    if _parallel_since[0] is None:
        _parallel_since[0] = now
    if now - _parallel_since[0] < PARALLEL_START_CPU_S:
        return True
    _parallel_since[1] = True
    return False


# a call of at least this many multiply-adds (~5 ms on one core) takes the parallel kernels at once: the start-up
# cost is then paid by a job big enough to amortise it (a batch prediction), not in the middle of it
SHORT_JOB_WORK = 1 << 23


def runs_serial(num_sequences: int, work: int | None = None) -> bool:
    """Whether a kernel over ``num_sequences`` sequences runs on one thread now, decided without starting
    Numba's thread pool where the answer does not need it (``numba.get_num_threads`` starts it): a
    policy of one thread, one item, a small batch under "auto", a process under "auto" whose kernels
    have not yet taken :data:`PARALLEL_START_CPU_S` since its first batch (a short job never starts the
    parallel machinery) unless this call's ``work`` (multiply-adds, when the caller knows them) reaches
    :data:`SHORT_JOB_WORK`, or a worker of :func:`map_in_order`. The numbers never depend on the answer."""
    if num_sequences < 2 or getattr(_on_pool, "active", False):
        return True
    policy = get_threads()
    if policy == 1 or (policy == _AUTO and (num_sequences < MIN_PARALLEL_SEQUENCES or (
            (work is None or work < SHORT_JOB_WORK) and _short_job()))):
        return True
    return threads_for(num_sequences) == 1


# every kernel declared with parallel_kernel, by "module.name" (the thread-policy test reads it)
PARALLEL_KERNELS: dict[str, object] = {}
# set by the install-time warm-up (varorder._warmup): a call on one twin compiles the other for the same
# argument types too, so that a small warm-up input also leaves the parallel twin in Numba's cache
_COMPILE_TWINS = os.environ.get("VARORDER_COMPILE_TWINS") == "1"


def _compile_twin(done, twin) -> None:
    start_numba_threads()  # compiling a parallel kernel starts Numba's layer
    for signature in done.signatures:
        if signature not in twin.signatures:
            twin.compile(signature)


def _serial_copy(function):
    """``function`` again under the qualified name ``<name>__serial``: Numba's on-disk cache keys entries
    by function name and bytecode but not by the ``parallel`` flag, so a serial compilation of a
    ``prange`` kernel needs a name of its own."""
    import types

    copy = types.FunctionType(function.__code__, function.__globals__, function.__name__,
                              function.__defaults__, function.__closure__)
    copy.__qualname__ = function.__qualname__ + "__serial"
    copy.__module__ = function.__module__
    return copy


def serial_twin(kernel, **options):
    """The serial twin of a ``parallel=True`` Numba kernel (a dispatcher), compiled as ``numba.njit(**options)``:
    ``prange`` runs as ``range`` over the same loop bodies, so the same numbers bit for bit, with no thread
    pool and no parallel region. For compiled small-input paths that call a parallel kernel's body
    directly (e.g. the chain's one-sentence Viterbi): the policy's decision is :func:`runs_serial`, made
    by their Python entry point."""
    twin = numba.njit(**options)(_serial_copy(kernel.py_func))
    twin.parallel_twin = kernel  # for warm_parallel_twin
    return twin


def warm_parallel_twin(twin) -> None:
    """Under the install-time warm-up (``VARORDER_COMPILE_TWINS=1``), compile a :func:`serial_twin`'s parallel
    kernel for every argument types the twin has been compiled for: the warm-up's small inputs run the
    twins, and a first big batch after install should not compile the parallel kernels."""
    if _COMPILE_TWINS:
        _compile_twin(twin, twin.parallel_twin)


def parallel_kernel(work, **options):
    """Declare a Numba ``prange`` kernel under the thread policy: ``@parallel_kernel(work, cache=True)``
    compiles the function as ``numba.njit(parallel=True, **options)`` and, lazily, as a serial twin
    (``prange`` runs as ``range``, the same loop bodies, so the same numbers bit for bit); a call runs
    the serial one when :func:`runs_serial` says so for ``work(*args)`` sequences, else the parallel one
    on :func:`threads_for` threads. ``work`` counts the call's independent units of work in the
    policy's unit (sequences, or sentences). The twin has its own ``__qualname__`` so that Numba's
    on-disk cache, which keys entries by function name and bytecode but not by the ``parallel``
    flag, keeps the two compilations apart."""
    def declare(function):
        parallel = numba.njit(parallel=True, **options)(function)
        serial = numba.njit(**options)(_serial_copy(function))

        @functools.wraps(function)
        def run(*args):
            units = work(*args)
            if runs_serial(units):
                result = serial(*args)
                if _COMPILE_TWINS:
                    _compile_twin(serial, parallel)
                return result
            with sequence_threads(units):
                result = parallel(*args)
            if _COMPILE_TWINS:
                _compile_twin(parallel, serial)
            return result

        run.parallel, run.serial = parallel, serial
        PARALLEL_KERNELS[f"{function.__module__}.{function.__qualname__}"] = run
        return run

    return declare


_CYTHON_BLAS = "scipy.linalg.cython_blas"
_OMP_WAIT_SETTINGS = ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "KMP_BLOCKTIME")


def sleep_idle_threads() -> None:
    """Let Numba's OpenMP worker threads sleep between parallel regions instead of spinning
    (``OMP_WAIT_POLICY=PASSIVE``), unless the user chose a wait policy.

    GNU OpenMP keeps a worker spinning for ~300,000 iterations after each region ends. A job that
    alternates short parallel kernels with serial work — the aligner's E-steps launch tens of
    thousands of regions, with Python and serial kernels between them — then pays for the serial
    stretches twice: the 100k-pair align job used 37 CPU s with spinning workers and 29.6 s with
    sleeping ones (one thread: 29.8 s), same output. The OpenMP runtime reads the setting when
    it is loaded, i.e. at the process's first parallel kernel: call this before then (the align
    commands do); later it changes nothing."""
    if not any(name in os.environ for name in _OMP_WAIT_SETTINGS):
        os.environ["OMP_WAIT_POLICY"] = "PASSIVE"


def load_cython_blas() -> None:
    """Import ``scipy.linalg.cython_blas``, the BLAS that Numba's ``np.dot`` calls, without running
    ``scipy.linalg``'s package ``__init__``: that loads all of SciPy's linear algebra (~12 MB resident,
    4% of the aligner's peak at 100k pairs), none of which the engine uses. The extension module is
    loaded from its file under its own name, so Numba's ``import scipy.linalg.cython_blas`` finds it in
    ``sys.modules``; a later ``import scipy.linalg`` still works. Falls back to the ordinary import.

    Numba imports that module when it builds its CPU target, i.e. when the process loads its first
    compiled kernel: call this before then (the align command does) for the saving to count."""
    import sys

    if _CYTHON_BLAS in sys.modules:
        return
    try:
        import importlib.machinery
        import importlib.util

        import scipy

        found = importlib.machinery.PathFinder.find_spec("cython_blas", [os.path.join(p, "linalg")
                                                                          for p in scipy.__path__])
        if found is None or not isinstance(found.loader, importlib.machinery.ExtensionFileLoader):
            raise ImportError(_CYTHON_BLAS)
        spec = importlib.util.spec_from_file_location(_CYTHON_BLAS, found.origin)
        module = importlib.util.module_from_spec(spec)
        sys.modules[_CYTHON_BLAS] = module
        spec.loader.exec_module(module)
    except Exception:  # any surprise in SciPy's layout: the ordinary (heavier) import
        sys.modules.pop(_CYTHON_BLAS, None)
        import scipy.linalg.cython_blas  # noqa: F401


def _blas_controller():
    global _blas
    if _blas is None:
        try:
            load_cython_blas()  # Numba's np.dot calls this BLAS: load it first (threadpoolctl then sees it)
            from threadpoolctl import ThreadpoolController

            _blas = ThreadpoolController()
        except ImportError:
            _blas = False
    return _blas


@contextmanager
def sequence_threads(num_sequences: int):
    """Run the enclosed parallel kernels over ``num_sequences`` sequences with :func:`threads_for`
    threads (the engine's policy, for a model's own per-sequence kernels around engine calls)."""
    wanted = threads_for(num_sequences)
    previous = numba_thread_count()
    if wanted == previous:
        yield wanted
        return
    numba.set_num_threads(wanted)
    try:
        yield wanted
    finally:
        numba.set_num_threads(previous)


_blas_lock = threading.Lock()
_blas_original = None  # (library controller, its thread count) while BLAS is pinned


def _set_blas_threads(lib, n: int) -> None:
    # threadpoolctl (3.8 here) lets only one "controlling" Python thread change OpenBLAS's (process-wide) count and
    # silently ignores the others, which left a worker thread's pin undone; the counted pin below coordinates
    # the threads itself, so it sets the count directly where threadpoolctl offers that
    getattr(lib, "_real_set_num_threads", lib.set_num_threads)(n)


def _pin_blas() -> None:
    global _blas_pinned, _blas_original
    with _blas_lock:
        if _blas_pinned == 0:
            controller = _blas_controller()
            if controller:
                libs = [lib for lib in controller.lib_controllers if lib.user_api == "blas"]
                _blas_original = [(lib, lib.num_threads) for lib in libs]
                for lib in libs:
                    _set_blas_threads(lib, 1)
        _blas_pinned += 1


def _unpin_blas() -> None:
    global _blas_pinned, _blas_original
    with _blas_lock:
        _blas_pinned -= 1
        if _blas_pinned == 0 and _blas_original is not None:
            original, _blas_original = _blas_original, None
            for lib, n in original:
                _set_blas_threads(lib, n)


@contextmanager
def single_threaded_blas():
    """Pin BLAS to one thread over the enclosed block. BLAS's thread count is one setting for the whole
    process, so the pin is counted process-wide under a lock: the first block to open (in any thread) pins
    it, the last to close restores what was there before, and every engine call in between, from any
    thread, finds it pinned and skips its own pinning (~50 µs a call through threadpoolctl, which the
    aligner's ~8,000 chain batches of a 100k-pair job paid each).

    Were each block to pin and restore on its own, with an unlocked counter, two blocks of
    different threads (two shards' E-steps on a thread executor) overlapping as A opens, B opens, A closes
    had A restore the user's BLAS threads while B's kernels still ran (and threadpoolctl ignored a pin
    from a thread other than the one controlling OpenBLAS), and OpenBLAS's multi-threaded products round
    differently from its single-threaded ones (a (64, 300)·(300, 300) product differs in the last bits),
    so such a run's numbers could depend on timing."""
    _pin_blas()
    try:
        yield
    finally:
        _unpin_blas()


# OpenBLAS runs a product of m·n·k multiply-adds at most SMP_THRESHOLD_MIN (65536) × GEMM_MULTITHREAD_THRESHOLD
# (4) on one thread by itself; below a quarter of that, pinning BLAS (~25 µs through threadpoolctl, more than
# a one-sentence Viterbi) changes nothing
_BLAS_SERIAL_WORK = 1 << 16


@contextmanager
def engine_threads(num_sequences: int, blas_work: int | None = None):
    """Run the enclosed engine kernels with :func:`threads_for` threads and single-threaded BLAS, which is left
    as it is when ``blas_work`` — a bound on the multiply-adds of any one BLAS product in the enclosed
    kernels — is under ``_BLAS_SERIAL_WORK`` (see there)."""
    small = blas_work is not None and blas_work < _BLAS_SERIAL_WORK
    with sequence_threads(num_sequences) as wanted:
        if small:
            yield wanted
        else:
            with single_threaded_blas():  # the process-wide pin: see there
                yield wanted


def uses_engine_threads(operation):
    """Decorate an engine operation whose first argument has ``.shape[0]`` sequences."""

    @functools.wraps(operation)
    def run(ci, *args, **kwargs):
        B, L, K = ci.shape
        # the chain kernels' products are (rows ≤ B, K)·(K, K) per step and (K, n ≤ L)·(n, K) per sequence
        with engine_threads(B, B * L * K * K):
            return operation(ci, *args, **kwargs)

    return run


_pools = {}
_pools_lock = threading.Lock()
_on_pool = threading.local()


def _enter_worker():
    _on_pool.active = True
    set_numba_thread_count(1)  # thread-local in Numba: this worker's kernels run on it alone


def _worker_pool(workers: int):
    """A pool of ``workers`` threads whose Numba kernels run single-threaded (kept for the process)."""
    with _pools_lock:
        pool = _pools.get(workers)
        if pool is None:
            from concurrent.futures import ThreadPoolExecutor

            pool = _pools[workers] = ThreadPoolExecutor(workers, thread_name_prefix="varorder-worker",
                                                        initializer=_enter_worker)
        return pool


def map_in_order(task, items, workers: int, costliest_first: bool = False) -> list:
    """``[task(item) for item in items]``, on ``workers`` pool threads when ``workers`` > 1 (each task on one
    thread, its Numba kernels single-threaded, BLAS pinned to one thread), else here; results in item order.

    For coarse work units made of short kernels with Python between them (e.g. the aligner's chain
    batches): parallel regions of ~1 ms each, serial Python between them, kept ~1.3 of 2 cores busy where
    whole units on two threads keep ~1.7. Tasks must write disjoint outputs and leave any order-dependent
    reduction to the caller (which gets the results in order), so the numbers do not depend on
    ``workers``; they must release the GIL in their kernels (``nogil=True``) for the threads to overlap.
    ``costliest_first``: hand out the last items first (when items come in increasing cost), so the
    threads finish together. Called from a pool thread, it runs the tasks there (no nested pools)."""
    items = list(items)
    if workers <= 1 or len(items) < 2 or getattr(_on_pool, "active", False):
        return [task(item) for item in items]
    pool = _worker_pool(workers)
    with single_threaded_blas():
        futures = [None] * len(items)
        for k in (range(len(items) - 1, -1, -1) if costliest_first else range(len(items))):
            futures[k] = pool.submit(task, items[k])
        return [f.result() for f in futures]
