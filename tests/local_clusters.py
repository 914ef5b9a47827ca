"""Dask LocalClusters and child processes for tests that must pass on a busy machine (issue #47).

A test that starts a cluster gets every port from the operating system (the scheduler's port 0 and
the HTTP server's ``127.0.0.1:0``: distributed's ``dashboard_address=None`` still binds port 8787
first and warns when another cluster holds it), waits for its workers with a generous limit, and
starts the cluster again when a start timed out (a worker process that took minutes to import its
libraries at load 18). A guard against a hung child counts from the child's last sign of progress,
not from its start, so a slow machine is not mistaken for a hang.

``VARORDER_TEST_TIMEOUT_SCALE`` multiplies every limit here (default 1; the stress mode of
tests/conftest.py sets 3)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time

import pytest

TIMEOUT_SCALE = float(os.environ.get("VARORDER_TEST_TIMEOUT_SCALE", "1") or 1)

# how long workers may take to arrive: far past a cold start at load 18 (about a minute)
WORKER_START_S = 300 * TIMEOUT_SCALE


def scaled(seconds: float) -> float:
    """``seconds`` times the session's timeout scale."""
    return seconds * TIMEOUT_SCALE


@contextlib.contextmanager
def local_cluster(n_workers: int = 2, *, processes: bool = True, attempts: int = 3, **options):
    """``(cluster, client)``: a LocalCluster of ``n_workers`` one-thread workers on 127.0.0.1, every
    port chosen by the OS, all workers arrived; a start that times out is retried ``attempts`` times."""
    distributed = pytest.importorskip("distributed")
    from distributed.exceptions import WorkerStartTimeoutError

    settings = dict(n_workers=n_workers, threads_per_worker=1, processes=processes, host="127.0.0.1",
                    scheduler_port=0, dashboard_address="127.0.0.1:0", silence_logs=50)
    if not processes and "protocol" not in options:
        del settings["host"]  # threads in this process talk over inproc://, which has no host
    settings.update(options)
    for attempt in range(attempts):
        stack = contextlib.ExitStack()
        try:
            cluster = stack.enter_context(distributed.LocalCluster(**settings))
            client = stack.enter_context(distributed.Client(cluster, timeout=WORKER_START_S))
            client.wait_for_workers(n_workers, timeout=WORKER_START_S)
        except (WorkerStartTimeoutError, TimeoutError, OSError):
            stack.close()
            if attempt == attempts - 1:
                raise
            continue
        with stack:
            yield cluster, client
        return


def wait_for_workers(client, n_workers: int = 2, seconds: float | None = None) -> None:
    """Until ``n_workers`` are connected (a killed worker restarted by its nanny): at most ``seconds``
    (scaled; default :data:`WORKER_START_S`), then distributed's ``TimeoutError``."""
    client.wait_for_workers(n_workers, timeout=WORKER_START_S if seconds is None else scaled(seconds))


def run_in_guarded_child(code: str, idle_seconds: float, hang: str, progress: str | None = None) -> str:
    """``python -c code`` in a child process in its own session (this process's ``sys.path``), its
    output returned. A test failure (``hang``) when the child shows no progress for ``idle_seconds``
    (scaled): progress is a change under the folder ``progress`` (its files' times) when given. The
    child's process group (the child, its Dask scheduler and workers) is then killed. A failure too
    when the child fails."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    child = subprocess.Popen([sys.executable, "-c", code], env=env, start_new_session=True,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    limit = scaled(idle_seconds)
    last_seen, last_progress = None, time.monotonic()
    while True:
        try:
            output, _ = child.communicate(timeout=min(10.0, limit))
            break
        except subprocess.TimeoutExpired:
            if child.poll() is not None:  # it left, and something it started still holds its output
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(child.pid, signal.SIGKILL)
                continue
            seen = _newest_change(progress)
            if seen != last_seen:
                last_seen, last_progress = seen, time.monotonic()
            if time.monotonic() - last_progress > limit:
                os.killpg(child.pid, signal.SIGKILL)  # the child, its scheduler and its workers
                child.communicate()
                pytest.fail(f"{hang}: no progress for {limit:.0f} s")
    with contextlib.suppress(ProcessLookupError, PermissionError):  # nothing it started outlives it
        os.killpg(child.pid, signal.SIGKILL)
    assert child.returncode == 0, output[-3000:]
    return output


def _newest_change(folder: str | None):
    if folder is None or not os.path.isdir(folder):
        return None
    stamps = []
    for root, _, files in os.walk(folder):
        for name in files:
            with contextlib.suppress(OSError):
                stamps.append((os.stat(os.path.join(root, name)).st_mtime_ns, name))
    return (len(stamps), max(stamps, default=None))
