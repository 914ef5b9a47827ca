"""Numba's on-disk cache saves are locked across processes (varorder._numba_start.lock_cache_saves): two
processes compiling two signatures of one function into one cache folder at once could otherwise leave an
index naming one signature's machine code for the other (docs/notes/33-determinism.md)."""

from __future__ import annotations

import ast
import fcntl
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import varorder

SRC = Path(varorder.__file__).parent


def _imports(node) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if isinstance(node, ast.ImportFrom):
        base = node.module or ""
        if node.level:  # relative: only "from . import threads" / "from .threads import ..." matter here
            return [f".{base}"] + [f".{base}.{alias.name}" for alias in node.names]
        return [base] + [f"{base}.{alias.name}" for alias in node.names]
    return []


def _locks_first(name: str) -> bool:
    return name in ("varorder._numba_start", "varorder.engine.threads", ".threads") or name.endswith("._numba_start")


def test_every_module_importing_numba_installs_the_lock_before():
    """A module that imports Numba at its top level also imports varorder._numba_start (or the engine's
    thread policy, which does) at its top level before its first definition, so that the lock is in place
    before any of its kernels compiles (on first call, or at decoration for an explicit signature)."""
    offenders = []
    for path in sorted(SRC.rglob("*.py")):
        if path.name == "_numba_start.py":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        uses_numba = locked = False
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                break
            names = _imports(node)
            uses_numba |= any(n == "numba" or n.startswith("numba.") for n in names)
            locked |= any(_locks_first(n) for n in names)
        if uses_numba and not locked:
            offenders.append(str(path.relative_to(SRC)))
    assert not offenders, f"import varorder._numba_start at the top of: {offenders}"


def test_a_save_waits_for_another_process_holding_the_index_lock(tmp_path):
    """While this process holds a function's index lock, another process's save of that function does not
    write its index; it does as soon as the lock is released."""
    import varorder._numba_start  # noqa: F401  (installs the lock in this process too)
    from numba.core.caching import IndexDataCacheFile

    assert getattr(IndexDataCacheFile.save, "locked_across_processes", False)
    index = tmp_path / "kernel-1.py311.nbi"
    child = textwrap.dedent(f"""
        import varorder._numba_start
        from numba.core.caching import IndexDataCacheFile
        cache = IndexDataCacheFile({str(tmp_path)!r}, "kernel-1.py311", ("stamp", 1))
        print("ready", flush=True)
        cache.save(("sig", "target"), b"machine code")
        print("saved", flush=True)
    """)
    with open(str(index) + ".lock", "ab") as lock:
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
        proc = subprocess.Popen([sys.executable, "-c", child], stdout=subprocess.PIPE, text=True)
        assert proc.stdout.readline().strip() == "ready"
        time.sleep(1.0)  # an unlocked save writes its index in well under a millisecond
        assert proc.poll() is None and not index.exists(), \
            "the save wrote the index while another process held the lock"
        fcntl.flock(lock.fileno(), fcntl.LOCK_UN)
    out, _ = proc.communicate(timeout=600)  # importing Numba at load 18 takes a minute
    assert proc.returncode == 0 and out.strip() == "saved"
    assert index.exists()
    assert IndexDataCacheFile(str(tmp_path), "kernel-1.py311", ("stamp", 1)).load(("sig", "target")) == b"machine code"
