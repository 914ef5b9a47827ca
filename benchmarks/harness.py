"""The one benchmark harness: interleaved rounds, CPU and wall time per round, the machine's
load and CPU model, a baseline tree loaded beside this one, and results files in schema 1.

Every script under ``benchmarks/`` (papers/, peers/, guards/, investigations/) times through
this module, so that a figure means the same thing in every table:

* :func:`interleaved` runs each system once per round, in turn (the order reversed every
  other round), after one warm-up call each; a change in machine load hits every system
  alike. Each round records the process CPU seconds (``time.process_time``: all threads of
  this process) and the wall seconds, and the 1-minute load average is sampled after it.
  On a shared machine the CPU-time ratios are the stable figures; wall goes beside them.
* :func:`run_child` times one child process (its CPU from ``os.wait4``'s resource usage,
  its wall, its peak resident set), for the peers and whole commands that must run in a
  process of their own.
* :func:`baseline_package` copies another source tree's ``varorder`` package under another
  name (``varorder_base``), so a guard loads both versions in one process and compares them
  call by call.
* :func:`results_document`, :func:`row` and :func:`write_results` make the files of
  ``benchmarks/results/`` (schema 1, validated by ``docs/tools/summarize_results.py``
  before they are written; the summary page is generated from them).

A script imports it by putting ``benchmarks/`` on the path first::

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    import harness
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import platform
import re
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Mapping

#: the repository's root, its ``src`` folder and ``benchmarks/results``
ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"
RESULTS = ROOT / "benchmarks" / "results"
#: the shared data sets (``../shared/data`` beside the checkout; ``VARORDER_SHARED_DATA`` overrides)
DATA = Path(os.environ.get("VARORDER_SHARED_DATA", ROOT.parent / "shared" / "data"))


def cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo``), or what :mod:`platform` knows."""
    try:
        with open("/proc/cpuinfo") as handle:
            for line in handle:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def load_average() -> float:
    """The 1-minute load average."""
    return os.getloadavg()[0]


def load_range(loads) -> str:
    """Loads sampled during a run, as the results files write them: ``"1.52"`` or ``"1.20-2.41"``."""
    loads = list(loads) or [load_average()]
    low, high = min(loads), max(loads)
    return f"{low:.2f}" if round(low, 2) == round(high, 2) else f"{low:.2f}-{high:.2f}"


def machine(loads=None, note: str | None = None) -> dict:
    """The results file's ``machine`` object: CPU model, cores, the load (range) during the run."""
    cpu = cpu_model() + (f" ({note})" if note else "")
    return {"cpu": cpu, "cores": os.cpu_count() or 1,
            "load": load_range(loads if loads is not None else [load_average()])}


@dataclass(frozen=True)
class Sample:
    """One timed call: process CPU seconds (all threads) and wall seconds."""
    cpu: float
    wall: float


def timed(fn: Callable[[], object]) -> tuple[Sample, object]:
    """Call ``fn()`` once; its :class:`Sample` and its value."""
    wall0, cpu0 = time.perf_counter(), time.process_time()
    value = fn()
    return Sample(time.process_time() - cpu0, time.perf_counter() - wall0), value


@dataclass
class Rounds:
    """The samples of :func:`interleaved`: ``samples[name]`` holds one :class:`Sample` per round."""
    samples: dict[str, list[Sample]] = field(default_factory=dict)
    loads: list[float] = field(default_factory=list)

    def cpu(self, name: str) -> list[float]:
        return [s.cpu for s in self.samples[name]]

    def wall(self, name: str) -> list[float]:
        return [s.wall for s in self.samples[name]]

    def median(self, name: str, clock: str = "cpu") -> float:
        return statistics.median(getattr(self, clock)(name))

    def best(self, name: str, clock: str = "cpu") -> float:
        return min(getattr(self, clock)(name))

    def ratio(self, name: str, reference: str, clock: str = "cpu") -> float:
        """Median of ``name`` over median of ``reference``."""
        return self.median(name, clock) / self.median(reference, clock)

    def paired_ratio(self, name: str, reference: str, clock: str = "cpu") -> float:
        """Median over rounds of the per-round ratio (robust to a load change between rounds)."""
        mine, theirs = getattr(self, clock)(name), getattr(self, clock)(reference)
        return statistics.median(a / b for a, b in zip(mine, theirs) if b > 0)

    def load(self) -> str:
        return load_range(self.loads)


def interleaved(systems: Mapping[str, Callable[[], object]], rounds: int, *, warmup: bool = True,
                alternate: bool = True, each_round: Callable[[int, "Rounds"], None] | None = None) -> Rounds:
    """Time each of ``systems`` (name → zero-argument callable) once per round, in turn.

    The order is reversed every other round (``alternate``), so neither side always runs
    first after the other's caches; one untimed warm-up call each comes first (``warmup``:
    compilation, caches). ``each_round(r, rounds)`` is called after every round (progress
    lines). The 1-minute load average is sampled before the first round and after each.
    """
    names = list(systems)
    if warmup:
        for name in names:
            systems[name]()
    result = Rounds({name: [] for name in names}, [load_average()])
    for r in range(rounds):
        for name in (names if not alternate or r % 2 == 0 else names[::-1]):
            sample, _ = timed(systems[name])
            result.samples[name].append(sample)
        result.loads.append(load_average())
        if each_round is not None:
            each_round(r, result)
    return result


@dataclass(frozen=True)
class ChildRun:
    """One child process: CPU seconds (user + system, its own children not included), wall
    seconds, peak resident set (MB; the command's own, see :func:`run_child`), exit status
    and what it wrote to stdout."""
    cpu: float
    wall: float
    max_rss_mb: float
    returncode: int
    stdout: str


#: Started in the parent's place: starts the command, waits for it and writes its
#: resource usage to the pipe whose descriptor is its first argument. Linux's peak resident set of a process (``ru_maxrss``) includes
#: the pages of the process it was forked from, kept across ``exec``; a command forked from
#: this small interpreter (a few MB) instead of from the benchmark (often hundreds of MB of
#: NumPy, Numba and data) reports its own peak.
_LAUNCHER = """
import os, sys
fd = int(sys.argv[1])
os.set_inheritable(fd, False)
pid = os.posix_spawnp(sys.argv[2], sys.argv[2:], os.environ)
_, status, u = os.wait4(pid, 0)
os.write(fd, ("%r %r %r" % (u.ru_utime + u.ru_stime, u.ru_maxrss, os.waitstatus_to_exitcode(status))).encode())
"""


def launcher_floor_mb() -> float:
    """The peak resident set (MB) that :func:`run_child` reports for a command that does
    nothing (``true``): the launcher's pages, the floor under every figure it gives."""
    return run_child(["true"]).max_rss_mb


def run_child(command: list[str], *, env: Mapping[str, str] | None = None, cwd=None, stdin: str | None = None,
              check: bool = True) -> ChildRun:
    """Run ``command`` to its end and time it: its CPU and peak resident set from
    ``os.wait4``'s resource usage, taken by a small launcher process (``_LAUNCHER``) that
    starts it, so that the peak is the command's own and not this process's (see
    :func:`launcher_floor_mb`), and its wall (the launcher's start included, ~20 ms)."""
    read_fd, write_fd = os.pipe()
    try:
        with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
            began = time.perf_counter()
            proc = subprocess.Popen([sys.executable, "-S", "-c", _LAUNCHER, str(write_fd), *command],
                                    env=None if env is None else dict(env), cwd=cwd, text=True,
                                    stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                                    stdout=out, stderr=err, pass_fds=(write_fd,))
            os.close(write_fd)
            write_fd = -1
            if stdin is not None:
                proc.stdin.write(stdin)
                proc.stdin.close()
            launcher_status = proc.wait()
            wall = time.perf_counter() - began
            report = b""
            while chunk := os.read(read_fd, 4096):
                report += chunk
            out.seek(0)
            err.seek(0)
            stdout, stderr = out.read(), err.read()
    finally:
        os.close(read_fd)
        if write_fd >= 0:
            os.close(write_fd)
    if not report:
        raise RuntimeError(f"{shlex.join(command)} could not be started (launcher exited {launcher_status}):\n"
                           f"{stderr[-2000:]}")
    cpu, max_rss_kb, returncode = (float(x) for x in report.decode().split())
    returncode = int(returncode)
    if check and returncode != 0:
        raise RuntimeError(f"{shlex.join(command)} exited {returncode}:\n{stderr[-2000:]}")
    return ChildRun(cpu, wall, max_rss_kb / 1024, returncode, stdout)


def baseline_package(tree: str | os.PathLike, name: str = "varorder_base",
                     dest: str | os.PathLike | None = None) -> Path:
    """Copy ``tree``'s ``varorder`` package (``tree`` is a checkout or its ``src``) as package
    ``name`` into ``dest``, its own imports renamed, and put ``dest`` first on ``sys.path``;
    returns ``dest``. Both versions then load in one process and a guard times them in the
    same rounds. ``dest`` defaults to a folder under the temporary directory named after
    ``tree``; files whose renamed text is unchanged are not rewritten, so the copy's Numba
    cache (keyed by each file's time stamp) survives from one run to the next."""
    tree = Path(tree).resolve()
    package = tree / "varorder" if (tree / "varorder").is_dir() else tree / "src" / "varorder"
    if not package.is_dir():
        raise FileNotFoundError(f"{tree}: no varorder package (looked for varorder/ and src/varorder/)")
    if dest is None:
        digest = hashlib.sha1(str(package).encode()).hexdigest()[:10]
        dest = Path(tempfile.gettempdir()) / f"{name}-{digest}"
    dest = Path(dest)
    target = dest / name
    wanted = set()
    for source in package.rglob("*"):
        if "__pycache__" in source.parts or not source.is_file():
            continue
        out = target / source.relative_to(package)
        wanted.add(out)
        data = source.read_bytes()
        if source.suffix == ".py":
            text = re.sub(r"\bvarorder\.", f"{name}.", data.decode())
            data = re.sub(r"\b(from|import)\s+varorder\b(?!\.)", rf"\1 {name}", text).encode()
        if out.is_file() and out.read_bytes() == data:
            continue
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_bytes(data)
    for stale in [p for p in target.rglob("*") if p.is_file() and "__pycache__" not in p.parts and p not in wanted]:
        stale.unlink()
    if str(dest) not in sys.path:
        sys.path.insert(0, str(dest))
    return dest


def row(system: str, task: str, metric: str, varorder: float, reference: float | None = None,
        reference_name: str | None = None, better: str = "lower", note: str | None = None,
        digits: int = 4) -> dict:
    """One results row; ``ratio`` is varorder / reference (``None`` without a reference)."""
    out = {"system": system, "task": task, "metric": metric, "varorder": _round(varorder, digits),
           "reference": _round(reference, digits), "reference_name": reference_name,
           "ratio": None if not reference else round(varorder / reference, 3), "better": better}
    if note is not None:
        out["note"] = note
    return out


def _round(value, digits):
    if value is None:
        return None
    return float(f"{value:.{digits}g}")


def command_line() -> str:
    """This process's command line, the script given relative to the checkout."""
    argv = list(sys.argv)
    try:
        argv[0] = str(Path(argv[0]).resolve().relative_to(ROOT))
    except ValueError:
        pass
    return "python " + shlex.join(argv)


def results_document(area: str, title: str, rows: list[dict], *, issue: int | None = None,
                     command: str | None = None, date: str | None = None, machine_info: dict | None = None,
                     loads=None, details: dict | None = None) -> dict:
    """A schema-1 results file (docs/tools/summarize_results.py): today's date, this command
    line and this machine (with the loads sampled during the run) unless given."""
    doc = {"schema": 1, "area": area, "title": title, "issue": issue,
           "command": command if command is not None else command_line(),
           "date": date or time.strftime("%Y-%m-%d", time.gmtime()),
           "machine": machine_info or machine(loads), "rows": rows}
    if details is not None:
        doc["details"] = details
    return doc


def _summarize_results():
    spec = importlib.util.spec_from_file_location("summarize_results", ROOT / "docs" / "tools" / "summarize_results.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def write_results(path: str | os.PathLike, document: dict) -> Path:
    """Validate ``document`` against schema 1, then write it to ``path`` atomically (a
    temporary file beside it, renamed)."""
    path = Path(path)
    _summarize_results().validate(json.loads(json.dumps(document)), path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".")
    with os.fdopen(fd, "w") as handle:
        handle.write(json.dumps(document, indent=1, ensure_ascii=False) + "\n")
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o666 & ~umask)  # mkstemp's file is private; a results file is not
    os.replace(tmp, path)
    return path
