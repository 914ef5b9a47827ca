"""One home for parallel work: executors that map over shards in order and reduce in a fixed order.

Every learner in varorder that sums over examples (EM's expected counts, a likelihood's gradient,
n-gram counts) has the same shape: cut the data into shards, compute one additive statistic per
shard, add the statistics up. This module runs the per-shard step and nothing else; the learner
owns the statistic and the addition. Results come back **in shard order** and
:func:`reduce_in_order` adds them left to right in that order, so a seed gives the same numbers on
any number of workers and on any backend: bit-identical wherever the per-shard step is (every
backend runs the same function on the same shard), whatever the worker count.

Backends (all behind :class:`Executor`):

* :class:`SerialExecutor` — here, one shard after another (the default);
* :class:`ThreadExecutor` — a pool of threads, for per-shard steps whose kernels release the GIL
  (the engine's Numba kernels do);
* :class:`JoblibExecutor` — joblib's ``Parallel`` (processes by default), which honours an active
  ``joblib.parallel_config`` (scikit-learn's ``n_jobs`` convention);
* :class:`DaskExecutor` — a ``dask.distributed`` client (a scheduler address or a ``Client``):
  shared arguments (once per map), scattered shards and :meth:`Executor.map_remote`'s results are
  all tasks of the graph with their lineage, so the scheduler recomputes whatever a lost worker
  held (a scattered shard from the pickle it keeps, a shard read on the workers from its
  source); every task may be retried when a worker is lost (``retries``), and results are
  gathered in submission order, so a lost worker changes nothing in the result.

:func:`as_executor` builds one from what a user has at hand (``n_jobs``, a scheduler address, a
``Client``, a ``concurrent.futures.Executor``, or nothing, in which case an active
``joblib.parallel_config`` with ``n_jobs`` set is taken). The pattern is scikit-learn's ``n_jobs`` with
joblib's ``parallel_config`` and Dask's ``distributed.Client``; see also datatrove's pluggable
local/Slurm executors.
"""

from __future__ import annotations

import concurrent.futures
import os
import socket
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from varorder.errors import ParameterError

__all__ = ["check_n_jobs", "Executor", "SerialExecutor", "ThreadExecutor", "JoblibExecutor", "DaskExecutor", "as_executor",
           "connect_dask", "reduce_in_order", "is_dask_client", "MapStats", "progress_note"]


@dataclass
class MapStats:
    """What an executor's maps did since the last :meth:`Executor.take_stats`: for the progress line
    of a distributed learner (per iteration: workers busy, time)."""

    maps: int = 0
    tasks: int = 0
    #: the workers (host, process, thread) that ran at least one task
    workers: set = field(default_factory=set)
    #: wall time spent inside maps, here
    seconds: float = 0.0
    #: the tasks' own run times summed over the workers
    task_seconds: float = 0.0

    def describe(self, n_workers: int) -> str:
        """``workers busy 2/2, 16 tasks in 0.31 s`` (compute summed over the tasks in brackets)."""
        return (f"workers busy {len(self.workers)}/{n_workers}, {self.tasks} tasks in {self.seconds:.2f} s "
                f"(compute {self.task_seconds:.2f} s)")


class _Tagged:
    """``fn`` run where the task runs, returning (result, the worker that ran it, its run time):
    the executor counts the workers that were busy without changing the result."""

    def __init__(self, fn):
        self.fn = fn

    def __call__(self, item, *shared):
        began = time.perf_counter()
        result = self.fn(item, *shared)
        return result, (socket.gethostname(), os.getpid(), threading.get_ident()), time.perf_counter() - began


class Executor(ABC):
    """Runs ``fn(item, *shared)`` for every item, results in item order.

    ``shared`` arguments are the same for every item (a model, a vocabulary): backends that
    ship work elsewhere send them once per :meth:`map`, not once per item.
    """

    #: workers the backend runs tasks on (1 for the serial backend)
    n_workers: int = 1

    def map(self, fn: Callable, items: Iterable, *shared: Any) -> list:
        """``[fn(item, *shared) for item in items]``, computed by the backend, in item order (the
        workers busy and the time are added to :meth:`take_stats`'s record)."""
        began = time.perf_counter()
        tagged = self._map(_Tagged(fn), items, *shared)
        stats = self._stats()
        stats.maps += 1
        stats.tasks += len(tagged)
        stats.workers.update(worker for _, worker, _ in tagged)
        stats.task_seconds += sum(seconds for _, _, seconds in tagged)
        stats.seconds += time.perf_counter() - began
        return [result for result, _, _ in tagged]

    @abstractmethod
    def _map(self, fn: Callable, items: Iterable, *shared: Any) -> list:
        """The backend's ``[fn(item, *shared) for item in items]``, in item order."""

    def _stats(self) -> MapStats:
        stats = getattr(self, "_map_stats", None)
        if stats is None:
            stats = self._map_stats = MapStats()
        return stats

    def take_stats(self) -> MapStats:
        """What the maps did since the last call (workers busy, tasks, time), and start a new record."""
        stats = self._stats()
        self._map_stats = MapStats()
        return stats

    def map_remote(self, fn: Callable, items: Iterable, *shared: Any) -> list:
        """:meth:`map`, its results left where they were computed (handles for later maps, e.g.
        shards read and featurised on the workers); local backends return the results."""
        return self.map(fn, items, *shared)

    def scatter(self, items: Sequence) -> list:
        """Place ``items`` (e.g. data shards) where the work runs once, for many later maps; local
        backends return them as they are."""
        return list(items)

    def close(self) -> None:
        """Release what the executor started (pools; never a client the caller gave)."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self) -> str:
        return f"{type(self).__name__}(n_workers={self.n_workers})"


class SerialExecutor(Executor):
    """Here, in this thread, one item after another."""

    def _map(self, fn, items, *shared):
        return [fn(item, *shared) for item in items]


class ThreadExecutor(Executor):
    """A pool of ``n_workers`` threads (or an existing ``concurrent.futures.Executor``); worth it
    only when the per-item step releases the GIL."""

    def __init__(self, n_workers: int = 2, pool: concurrent.futures.Executor | None = None):
        self._own = pool is None
        self._pool = pool if pool is not None else concurrent.futures.ThreadPoolExecutor(int(n_workers))
        self.n_workers = int(getattr(self._pool, "_max_workers", n_workers) or n_workers)

    @property
    def pool(self) -> concurrent.futures.Executor:
        return self._pool

    def _map(self, fn, items, *shared):
        futures = [self._pool.submit(fn, item, *shared) for item in items]
        return [f.result() for f in futures]

    def close(self):
        if self._own:
            self._pool.shutdown(wait=True)


class JoblibExecutor(Executor):
    """joblib's ``Parallel``: ``n_jobs`` workers on ``backend`` (None: joblib's default, or what an
    active ``joblib.parallel_config`` says)."""

    def __init__(self, n_jobs: int | None = None, backend: str | None = None):
        import joblib

        self.n_jobs = n_jobs
        self.backend = backend
        self._joblib = joblib
        parallel = joblib.Parallel(n_jobs=n_jobs, backend=backend)
        self.n_workers = max(1, int(parallel.n_jobs if parallel.n_jobs and parallel.n_jobs > 0
                                    else joblib.cpu_count()))

    def _map(self, fn, items, *shared):
        delayed = self._joblib.delayed
        return list(self._joblib.Parallel(n_jobs=self.n_jobs, backend=self.backend)(
            delayed(fn)(item, *shared) for item in items))


class DaskExecutor(Executor):
    """A ``dask.distributed`` client: tasks retried ``retries`` times when a worker is lost."""

    def __init__(self, client, retries: int = 2, own_client: bool = False):
        if not is_dask_client(client):
            raise TypeError(f"expected a dask.distributed Client, got {type(client).__name__}")
        self.client = client
        self.retries = int(retries)
        self._own = own_client
        try:
            self.n_workers = max(1, len(client.scheduler_info().get("workers", {})))
        except Exception:  # a client that cannot report its workers still runs tasks
            self.n_workers = 1

    def scatter(self, items):
        """Place ``items`` on the workers once, for many later maps: each a task of the graph whose
        value is embedded in it (:func:`_shipped`), so that a worker lost between or during maps
        loses nothing the scheduler cannot rebuild (it keeps each item's pickle while the handle
        lives: memory on the scheduler's machine for resilience). Items already on the workers
        (:meth:`map_remote`'s futures) are returned as they are.

        Not ``Client.scatter`` with ``Client.replicate(n=2)``: scattered data has no lineage, and the
        Active Memory Manager's default ReduceReplicas policy drops the second copy within seconds,
        so a single lost worker could lose a shard for good."""
        items = list(items)
        if items and all(_is_future(item) for item in items):
            return items
        return [self._submit_value(item) for item in items]

    def _submit_value(self, value):
        """``value`` as a task of the graph (see :meth:`_ship`)."""
        import warnings

        with warnings.catch_warnings():  # the value is in the graph on purpose (lineage)
            warnings.filterwarnings("ignore", message="Sending large graph", category=UserWarning)
            return self.client.submit(_shipped, _Bundle(value), pure=False, retries=self.retries)

    def _ship(self, shared) -> list:
        """Shared arguments as the workers will get them: each sizeable one a task of the graph
        (:meth:`_submit_value`), so the scheduler can recompute it. The scheduler sends it to one
        worker; the others fetch it from there (peer to peer), so it leaves here once per map.

        Not ``scatter(broadcast=True)``: scattered data has no lineage, and a broadcast begun after a
        worker was killed between two maps never returned (dask/distributed#3149 and dask/distributed#3196; see
        docs/notes/35-scale-out.md). A task the scheduler can rerun also lets
        :meth:`map_remote`'s results (e.g. the aligner's pieces) be recomputed from their sources
        when the worker holding them is lost.

        Each value travels inside a :class:`_Bundle`: Dask serializes a list element by element,
        and one pickle keeps objects its elements share shared, as in a process pool (e.g. two
        aligner directions' one pair table, which their summed E-step relies on)."""
        return [self._submit_value(value) if _worth_scattering(value) else value for value in shared]

    def map_remote(self, fn, items, *shared):
        """:meth:`Executor.map`, the results left on the workers as tasks with their lineage (the
        shared arguments and the items' own tasks): a result lost with its worker is computed again
        where it is next needed (for shards read on the workers: read again from their source)."""
        from distributed import wait

        shipped = self._ship(shared)
        futures = [self.client.submit(_Unbundled(fn), item, *shipped, pure=False, retries=self.retries)
                   for item in items]
        wait(futures)
        return futures

    def _map(self, fn, items, *shared):
        shipped = self._ship(shared)
        futures = [self.client.submit(_Unbundled(fn), item, *shipped, pure=False, retries=self.retries)
                   for item in items]
        return self.client.gather(futures)

    def close(self):
        if self._own:
            self.client.close()


class _Bundle:
    """One shared argument sent to Dask workers as a single pickle (see :meth:`DaskExecutor._ship`)."""

    def __init__(self, value):
        self.value = value


def _shipped(bundle: _Bundle) -> _Bundle:
    """The task that holds a shared argument in a Dask graph: its result is the argument itself."""
    return bundle


class _Unbundled:
    """``fn`` with its :class:`_Bundle` arguments (scattered items, shared arguments) unwrapped where
    the task runs."""

    def __init__(self, fn):
        self.fn = fn

    def __call__(self, item, *shared):
        return self.fn(*[s.value if isinstance(s, _Bundle) else s for s in (item, *shared)])


def _is_future(obj) -> bool:
    return type(obj).__name__ == "Future" and hasattr(obj, "key") and hasattr(obj, "result")


def _worth_scattering(obj) -> bool:
    # small scalars, strings and functions travel inside every task; anything else is sent once per
    # map as a task of its own (pure=False, a new key each time: two maps shipping equal values
    # would otherwise share one key, and the first map's release could drop the second's data)
    return not (isinstance(obj, (int, float, str, bool, type(None))) or callable(obj))


def is_dask_client(obj) -> bool:
    """Whether ``obj`` behaves as a ``dask.distributed`` client (scatter, submit, gather)."""
    return all(hasattr(obj, name) for name in ("scatter", "gather", "submit"))


def connect_dask(address: str, timeout: float = 10.0):
    """A ``distributed.Client`` of the scheduler at ``address``. Raises ImportError (with the
    install hint) without the optional package; a :class:`~varorder.errors.ParameterError` for an
    empty address, and for an unreachable or malformed address or one where something other than a
    Dask scheduler answers (:func:`probe_dask_scheduler`), within about ``timeout`` seconds."""
    if not isinstance(address, str) or not address.strip():
        raise ParameterError(f"the Dask scheduler address is empty: got {address!r}, expected e.g. tcp://host:8786",
                             name="dask_scheduler", value=address)
    try:
        from distributed import Client
    except ImportError:
        raise ImportError("Dask needs the optional package 'distributed' (pip install 'varorder[dask]')") from None
    probe_dask_scheduler(address, timeout)
    try:
        return Client(address, timeout=timeout)
    except (OSError, TimeoutError, ValueError, TypeError, MemoryError) as exc:
        raise ParameterError(f"cannot reach the Dask scheduler at {address!r}: {exc}",
                             name="dask_scheduler", value=address) from None


# a scheduler's first message (its handshake) is a few hundred bytes; a frame length past this is
# not Dask's protocol (an HTTP reply's "HTTP/1.1" read as a length is 3.5 EiB)
_HANDSHAKE_MAX_BYTES = 1 << 20
_DASK_DEFAULT_PORT = 8786


def _tcp_endpoint(address: str):
    """(host, port) of a ``tcp://`` or scheme-less address; None for another scheme (tls://,
    inproc://, ucx://: left to distributed); a ParameterError for a malformed one."""
    scheme, sep, rest = address.strip().rpartition("://")
    if sep and scheme != "tcp":
        if scheme in ("http", "https", "ws", "wss"):
            raise ParameterError(f"{scheme}:// is a web address, not a Dask scheduler's (tcp://host:8786)",
                                 name="dask_scheduler", value=address)
        return None
    host, colon, port = rest.rstrip("/").rpartition(":")
    if not colon:
        host, port = rest.rstrip("/"), str(_DASK_DEFAULT_PORT)
    host = host.strip("[]")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ParameterError("expected tcp://host:port", name="dask_scheduler", value=address)
    return host, int(port)


def _receive(sock, n: int, deadline: float) -> tuple[bytes, bool]:
    """Up to ``n`` bytes from ``sock`` (fewer once ``deadline`` passed), and whether the stream ended."""
    data = b""
    while len(data) < n:
        left = deadline - time.monotonic()
        if left <= 0:
            break
        sock.settimeout(left)
        try:
            chunk = sock.recv(n - len(data))
        except (socket.timeout, TimeoutError):
            break
        except OSError:
            return data, True
        if not chunk:
            return data, True
        data += chunk
    return data, False


def _describe_answer(data: bytes) -> str:
    if data.startswith(b"HTTP/"):
        status = data.splitlines()[0].decode("latin-1")[:60]
        return f"an HTTP server answered ({status}), not a Dask scheduler"
    return f"what answered is not a Dask scheduler (its first bytes: {data[:16]!r})"


def probe_dask_scheduler(address: str, timeout: float = 10.0) -> None:
    """Check, before any work, that a Dask scheduler answers at ``address`` (``tcp://`` or no scheme;
    other schemes are left to distributed): a TCP connection within ``timeout`` seconds, then the
    scheduler's greeting (it speaks first) within ``timeout`` more, whose frame length must be that of
    a small message. Anything else — a refused or unreachable port, an HTTP server (a dashboard port,
    ``python -m http.server``), a listener that stays silent, bytes of another protocol — raises a
    :class:`~varorder.errors.ParameterError` naming the address and what answered; a silent
    listener is sent one HTTP ``HEAD`` request to tell an HTTP server apart."""
    import struct

    def refuse(what):
        raise ParameterError(f"cannot reach the Dask scheduler at {address!r}: {what}", name="dask_scheduler",
                             value=address)

    try:
        endpoint = _tcp_endpoint(address)
    except ParameterError as exc:
        refuse(str(exc))
    if endpoint is None:
        return
    try:
        sock = socket.create_connection(endpoint, timeout=timeout)
    except (socket.timeout, TimeoutError):
        refuse(f"no connection within {timeout:g} s")
    except OSError as exc:
        refuse(exc.strerror or str(exc))
    with sock:
        head, ended = _receive(sock, 8, time.monotonic() + timeout)
        if not head and ended:
            refuse("the listener there closed the connection without a word: it is not a Dask scheduler")
        if not head:
            try:
                sock.sendall(b"HEAD / HTTP/1.0\r\n\r\n")
            except OSError:
                refuse(f"the listener there sent nothing within {timeout:g} s and closed the connection "
                       "(a Dask scheduler greets at once)")
            reply, _ = _receive(sock, 64, time.monotonic() + min(timeout, 3.0))
            if reply.startswith(b"HTTP/"):
                refuse(_describe_answer(reply))
            refuse(f"the listener there sent nothing within {timeout:g} s (a Dask scheduler greets at once)")
        if len(head) < 8:
            refuse(_describe_answer(head))
        (length,) = struct.unpack("<Q", head)
        if not 16 <= length <= _HANDSHAKE_MAX_BYTES:
            refuse(_describe_answer(head + _receive(sock, 56, time.monotonic() + 0.2)[0]))
        frames, _ = _receive(sock, 8, time.monotonic() + timeout)
        if len(frames) < 8 or not 1 <= struct.unpack("<Q", frames)[0] <= 64:
            refuse(_describe_answer(head + frames))


def _active_joblib_config() -> int | None:
    """``n_jobs`` of an active ``joblib.parallel_config`` that sets it, else None."""
    import sys

    if "joblib.parallel" not in sys.modules:  # nobody configured joblib in this process
        return None
    try:
        from joblib.parallel import _get_active_backend  # joblib >= 1.3
        _, config = _get_active_backend()
    except (ImportError, TypeError, ValueError):
        return None
    n_jobs = config.get("n_jobs") if isinstance(config, dict) else config
    # an unset field is joblib's default(...) marker, not an int
    return n_jobs if isinstance(n_jobs, int) and not isinstance(n_jobs, bool) and n_jobs != 1 else None


def as_executor(executor=None, n_jobs: int | None = None, dask_scheduler: str | None = None,
                timeout: float = 10.0) -> Executor:
    """The executor a learner runs its shards on.

    Parameters
    ----------
    executor : None, an :class:`Executor`, a ``concurrent.futures.Executor`` or a
        ``dask.distributed.Client``.
    n_jobs : number of local workers (joblib's convention: None or 1 = serial, -1 = every core);
        used when ``executor`` is None.
    dask_scheduler : address of a Dask scheduler (``tcp://host:8786``); used when ``executor`` is
        None, and wins over ``n_jobs``.
    timeout : seconds to wait for the scheduler.

    Returns
    -------
    Executor
        With nothing given, an active ``joblib.parallel_config(n_jobs=...)`` decides; otherwise the
        serial executor.

    Raises
    ------
    ParameterError
        ``n_jobs`` is not an integer other than 0, or the scheduler cannot be reached.
    TypeError
        ``executor`` is of an unknown kind.
    """
    if executor is not None:
        if isinstance(executor, Executor):
            return executor
        if is_dask_client(executor):
            return DaskExecutor(executor)
        if isinstance(executor, concurrent.futures.Executor):
            return ThreadExecutor(pool=executor)
        raise TypeError("executor must be a varorder.parallel.Executor, a concurrent.futures.Executor or a "
                        f"dask.distributed.Client, got {type(executor).__name__}")
    if dask_scheduler is not None:
        return DaskExecutor(connect_dask(dask_scheduler, timeout), own_client=True)
    if n_jobs is not None:
        if isinstance(n_jobs, bool) or not isinstance(n_jobs, int) or n_jobs == 0:
            raise ParameterError(f"n_jobs must be a non-zero integer or None, got {n_jobs!r}", name='n_jobs', value=n_jobs)
        if n_jobs == 1:
            return SerialExecutor()
        return JoblibExecutor(n_jobs)
    config = _active_joblib_config()
    if config is not None:
        return JoblibExecutor(None)
    return SerialExecutor()


def progress_note(executor) -> str:
    """``", workers busy 2/2, 16 tasks in 0.31 s (compute 0.52 s)"``: what ``executor``'s maps did since
    the last note (the per-iteration progress line of a learner on an executor); "" for none or the
    serial executor."""
    if executor is None or isinstance(executor, SerialExecutor):
        return ""
    return ", " + executor.take_stats().describe(executor.n_workers)


def check_n_jobs(owner) -> None:
    """Refuse ``owner.n_jobs`` unless None or a non-zero integer (a ParameterError naming the value)."""
    n_jobs = getattr(owner, "n_jobs", None)
    if n_jobs is not None and (isinstance(n_jobs, bool) or not isinstance(n_jobs, int) or n_jobs == 0):
        raise ParameterError(f"{type(owner).__name__}: parameter n_jobs={n_jobs!r} is invalid: "
                             "expected None or a non-zero integer", name='n_jobs', value=n_jobs)


def reduce_in_order(results: Iterable, add: Callable[[Any, Any], Any], start: Any = None) -> Any:
    """``add(...add(add(start, r0), r1)..., rN)``: the fixed left-to-right order that makes a sum
    of per-shard statistics independent of the backend and the worker count. ``start`` None
    means the first result is the start."""
    total = start
    first = start is None
    for result in results:
        if first:
            total, first = result, False
        else:
            total = add(total, result)
    return total
