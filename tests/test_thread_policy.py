"""Every ``parallel=True`` kernel in the package is under the engine's thread policy (issue #32).

The policy (:mod:`varorder.engine.threads`) decides how many threads a kernel call uses, and for a
small input none at all: a kernel declared with :func:`~varorder.engine.threads.parallel_kernel` then
runs its serial twin (no thread pool, no parallel region). The engine's chain kernels are governed at
their entry points (``@uses_engine_threads``). An AST scan of the package lists every parallel kernel
and fails on one that is neither; the serial twins are checked against the parallel kernels bit for
bit, and the small-input paths of the models against their batch paths.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import numba
import numpy as np
import pytest
import scipy.sparse as sp

import varorder
from varorder.engine import threads

PACKAGE = Path(varorder.__file__).parent
GOVERNING_DECORATORS = {"uses_engine_threads"}
GOVERNING_BLOCKS = {"engine_threads", "sequence_threads"}
SERIAL_TWIN = {"serial_twin"}


def _name(node) -> str | None:
    if isinstance(node, ast.Call):
        node = node.func
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Name):
        return node.id
    return None


def _is_parallel_jit(decorator) -> bool:
    return isinstance(decorator, ast.Call) and any(
        k.arg == "parallel" and isinstance(k.value, ast.Constant) and k.value.value is True
        for k in decorator.keywords)


class _Module:
    """One source file: its top-level definitions, its parallel kernels and where each name is read."""

    def __init__(self, path: Path, source: str | None = None, name: str | None = None):
        self.name = name or "varorder." + ".".join(path.relative_to(PACKAGE).with_suffix("").parts)
        self.tree = ast.parse(path.read_text(encoding="utf-8") if source is None else source)
        self.top = {n.name: n for n in self.tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
        self.jit_parallel, self.declared = [], []  # (kernel, top-level name that holds it)
        for top in self.tree.body:
            for node in ast.walk(top):
                if isinstance(node, ast.FunctionDef):
                    holder = top.name if isinstance(top, (ast.FunctionDef, ast.ClassDef)) else node.name
                    if any(_is_parallel_jit(d) for d in node.decorator_list):
                        self.jit_parallel.append((node.name, holder))
                    if any(_name(d) == "parallel_kernel" for d in node.decorator_list):
                        self.declared.append((node.name, holder))
        # every parallel=True anywhere (a call like numba.njit(parallel=True)(f) too)
        self.parallel_keywords = [n.lineno for n in ast.walk(self.tree) if isinstance(n, ast.Call)
                                  and _is_parallel_jit(n)]

    def reads(self, name: str):
        """(enclosing top-level statement, governed here?) for every read of ``name`` outside its own def."""
        out = []
        for top in self.tree.body:
            if isinstance(top, ast.FunctionDef) and top.name == name:
                continue
            governed_def = isinstance(top, ast.FunctionDef) and any(
                _name(d) in GOVERNING_DECORATORS for d in top.decorator_list)
            guarded = set()
            for node in ast.walk(top):
                if isinstance(node, ast.With) and any(_name(i.context_expr) in GOVERNING_BLOCKS for i in node.items):
                    guarded.update(id(n) for n in ast.walk(node))
                # threads.serial_twin(kernel) compiles the kernel's loops without parallel=True: no parallel call
                if isinstance(node, ast.Call) and _name(node) in SERIAL_TWIN and node.args:
                    guarded.add(id(node.args[0]))
            for node in ast.walk(top):
                if isinstance(node, ast.Name) and node.id == name and isinstance(node.ctx, ast.Load):
                    out.append((top, governed_def or id(node) in guarded))
        return out


def _modules():
    return [_Module(p) for p in sorted(PACKAGE.rglob("*.py"))]


def _imports(other: _Module, module: str, name: str) -> list[str] | None:
    """The names under which ``other`` reads ``module``'s ``name``: the local names of ``from module import
    name [as local]``; None when it reads it as ``alias.name`` (alias: ``module`` imported as a module),
    which this scan does not follow."""
    aliases, local = set(), []
    for node in ast.walk(other.tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            for alias in node.names:
                if node.module == module and alias.name == name:
                    local.append(alias.asname or alias.name)
                if f"{node.module}.{alias.name}" == module:
                    aliases.add(alias.asname or alias.name)
        elif isinstance(node, ast.Import):
            aliases.update(a.asname for a in node.names if a.name == module and a.asname)
    if any(isinstance(n, ast.Attribute) and n.attr == name and isinstance(n.value, ast.Name)
           and n.value.id in aliases for n in ast.walk(other.tree)):
        return None
    return local


def _governed(module: _Module, name: str, others, seen=None) -> bool:
    """Whether every read of ``name`` happens under the policy: inside a governed function or block, or in a
    top-level function or assignment that is itself governed; and no other module reads it. A name read
    nowhere in its module is an entry point, hence not governed unless it is decorated so itself."""
    seen = set() if seen is None else seen
    if (module.name, name) in seen:
        return True
    seen.add((module.name, name))
    imported = False
    for other in others:
        if other is module:
            continue
        local = _imports(other, module.name, name)
        if local is None:
            return False
        for alias in local:  # a kernel imported elsewhere (e.g. from a kernels module): governed there?
            imported = True
            if not _governed(other, alias, others, seen):
                return False
    reads = module.reads(name)
    if not reads and not imported:
        return False  # an entry point (read by no one): its callers are outside the policy
    for top, ok in reads:
        if ok:
            continue
        if isinstance(top, ast.FunctionDef):
            holders = [top.name]
        elif isinstance(top, (ast.Assign, ast.AnnAssign)):
            targets = top.targets if isinstance(top, ast.Assign) else [top.target]
            holders = [t.id for t in targets if isinstance(t, ast.Name)]
            if len(holders) != len(targets):
                return False
        else:
            return False
        if not all(_governed(module, h, others, seen) for h in holders):
            return False
    return True


def test_every_parallel_kernel_is_under_the_thread_policy():
    modules = _modules()
    outside, listed = [], []
    for module in modules:
        if module.name == "varorder.engine.threads":
            continue  # the policy itself compiles the parallel twins
        for kernel, holder in module.jit_parallel:
            listed.append(f"{module.name}.{kernel} (@uses_engine_threads callers)")
            if not _governed(module, holder, modules):
                outside.append(f"{module.name}.{kernel}: parallel=True, called outside the thread policy")
        for kernel, _ in module.declared:
            listed.append(f"{module.name}.{kernel} (parallel_kernel)")
        # parallel=True must sit on a kernel's own decorator (not e.g. numba.njit(parallel=True)(f) in a call)
        decorator_lines = set()
        for node in ast.walk(module.tree):
            if isinstance(node, ast.FunctionDef):
                decorator_lines.update(d.lineno for d in node.decorator_list if _is_parallel_jit(d))
        for line in module.parallel_keywords:
            if line not in decorator_lines:
                outside.append(f"{module.name}:{line}: parallel=True outside a kernel's decorator")
    assert not outside, "\n".join(outside)
    # the scan found the kernels it should (a scan that finds nothing cannot fail)
    assert any(k.startswith("varorder.engine.") and "._viterbi_kernel " in k for k in listed)
    assert any("models.features._csr_dense_kernel" in k for k in listed)
    # every declared kernel is registered with the policy once its module is imported
    declared = {f"{m.name}.{k}" for m in modules for k, h in m.declared if k == h}
    for name in declared:
        importlib.import_module(name.rsplit(".", 1)[0])
    assert declared <= set(threads.PARALLEL_KERNELS), declared - set(threads.PARALLEL_KERNELS)


def test_the_scan_flags_a_kernel_called_outside_the_policy():
    source = '''
import numba
from varorder.engine.threads import uses_engine_threads, sequence_threads

@numba.njit(parallel=True)
def _inside(x):
    return x

@numba.njit(parallel=True)
def _guarded(x):
    return x

@numba.njit(parallel=True)
def _outside(x):
    return x

def _helper(x):
    return _inside(x)

@uses_engine_threads
def entry(x):
    return _helper(x)

def block(x):
    with sequence_threads(x.shape[0]):
        return _guarded(x)

def public(x):
    return _outside(x)
'''
    module = _Module(PACKAGE / "_probe.py", source, "varorder._probe")
    assert [k for k, _ in module.jit_parallel] == ["_inside", "_guarded", "_outside"]
    assert _governed(module, "_inside", [module])
    assert _governed(module, "_guarded", [module])
    assert not _governed(module, "_outside", [module])
    # kernels called from another module (a kernels module and its entry points, as after a split)
    user = _Module(PACKAGE / "_probe_user.py", """
from varorder._probe import _inside as kernel, _guarded
from varorder import _probe
from varorder.engine.threads import uses_engine_threads

@uses_engine_threads
def entry(x):
    return kernel(x)

def loose(x):
    return _guarded(x)
""", "varorder._probe_user")
    both = [module, user]
    assert _governed(module, "_inside", both)
    assert not _governed(module, "_guarded", both)  # read ungoverned by the other module
    attribute = _Module(PACKAGE / "_probe_attr.py", "from varorder import _probe\n\ndef f(x):\n"
                        "    return _probe._inside(x)\n", "varorder._probe_attr")
    assert not _governed(module, "_inside", [module, attribute])


def test_small_inputs_decide_serial_without_starting_the_pool(monkeypatch):
    before = threads.get_threads()
    try:
        threads.set_threads("auto")
        monkeypatch.setattr(threads, "threads_for", lambda n: pytest.fail("asked Numba for its threads"))
        for n in (0, 1, threads.MIN_PARALLEL_SEQUENCES - 1):
            assert threads.runs_serial(n)
    finally:
        threads.set_threads(before)


@pytest.mark.skipif(numba.config.NUMBA_NUM_THREADS < 2, reason="needs NUMBA_NUM_THREADS >= 2")
@pytest.mark.parametrize("shape", [(1, 3, 2), (5, 40, 7), (700, 90, 17)])
def test_csr_kernel_serial_twin_equals_the_parallel_kernel(shape):
    from varorder.models.features import _csr_dense_kernel, csr_times_dense

    rows, cols, K = shape
    rng = np.random.default_rng(rows)
    matrix = sp.random(rows, cols, density=0.3, format="csr", random_state=rng)
    dense = rng.standard_normal((cols, K))
    args = (matrix.indptr, matrix.indices, matrix.data, dense)
    a, b = np.empty((rows, K)), np.empty((rows, K))
    _csr_dense_kernel.serial(*args, a)
    before = threads.get_threads()
    try:
        threads.set_threads(2)
        _csr_dense_kernel.parallel(*args, b)
    finally:
        threads.set_threads(before)
    np.testing.assert_array_equal(a, b)
    np.testing.assert_allclose(csr_times_dense(matrix, dense), matrix @ dense, rtol=1e-12, atol=1e-12)


@pytest.mark.skipif(numba.config.NUMBA_NUM_THREADS < 2, reason="needs NUMBA_NUM_THREADS >= 2")
@pytest.mark.parametrize("training", ["independent", "agreement"])
def test_aligner_serial_twins_equal_the_parallel_kernels(training, monkeypatch):
    """The aligner's declared kernels (E-steps, pair-id search, emissions, posteriors): every call on its
    serial twin against every call on its parallel kernel (two threads), bit for bit."""
    from test_agree_aligner import _synthetic

    from varorder.agree.aligner import WordAligner

    pairs, _ = _synthetic(120, seed=5, vocab=12)
    fitted = {}
    before = threads.get_threads()
    try:
        threads.set_threads(2)
        for serial in (True, False):
            monkeypatch.setattr(threads, "runs_serial", lambda n, serial=serial: serial)
            al = WordAligner(training=training, ibm1_iterations=2, iterations=2, shard_size=60).fit(pairs)
            fitted[serial] = (al, al.align(pairs))
    finally:
        threads.set_threads(before)
    (a, links_a), (b, links_b) = fitted[True], fitted[False]
    for m, n in zip(a.models_, b.models_):
        for name in ("table_", "null_", "jumps_"):
            np.testing.assert_array_equal(getattr(m, name), getattr(n, name))
    assert links_a == links_b


def test_warm_up_compiles_both_twins(monkeypatch):
    """The install-time warm-up (VARORDER_COMPILE_TWINS=1) runs small inputs, i.e. the serial twins: each such
    call compiles the parallel twin for the same argument types too."""
    from varorder.models.features import _csr_dense_kernel, csr_times_dense

    monkeypatch.setattr(threads, "_COMPILE_TWINS", True)
    matrix = sp.csr_matrix(np.eye(3, dtype=np.float32).astype(np.float64))
    csr_times_dense(matrix, np.ones((3, 2)))
    assert set(_csr_dense_kernel.serial.signatures) <= set(_csr_dense_kernel.parallel.signatures)
    assert _csr_dense_kernel.serial.signatures


def test_the_scan_accepts_a_serial_twin_and_still_flags_a_plain_read():
    source = '''
import numba
from varorder.engine.threads import serial_twin, uses_engine_threads

@numba.njit(parallel=True)
def _kernel(x):
    return x

_kernel_serial = serial_twin(_kernel, cache=True)

@uses_engine_threads
def entry(x):
    return _kernel(x)

def small(x):
    return _kernel_serial(x)
'''
    module = _Module(PACKAGE / "_probe_twin.py", source, "varorder._probe_twin")
    assert [k for k, _ in module.jit_parallel] == ["_kernel"]
    assert _governed(module, "_kernel", [module])  # the twin's compilation is no parallel call
    loose = _Module(PACKAGE / "_probe_twin2.py", source + "\ndef loose(x):\n    return _kernel(x)\n",
                    "varorder._probe_twin2")
    assert not _governed(loose, "_kernel", [loose])


def test_a_short_job_runs_serially_without_starting_the_pool(monkeypatch):
    """Under "auto" a process runs even a big batch on one thread until it has used PARALLEL_START_CPU_S since
    its first batch; then the policy asks Numba (the numbers never depend on it)."""
    before = threads.get_threads()
    try:
        threads.set_threads("auto")
        monkeypatch.setattr(threads, "_parallel_since", [None, False])
        monkeypatch.setattr(threads, "threads_for", lambda n: pytest.fail("asked Numba for its threads"))
        assert threads.runs_serial(10_000) and threads.runs_serial(10_000, threads.SHORT_JOB_WORK - 1)
        monkeypatch.setattr(threads, "threads_for", lambda n: 2)
        assert not threads.runs_serial(10_000, threads.SHORT_JOB_WORK)  # a big call: the parallel kernels at once
        monkeypatch.setattr(threads, "threads_for", lambda n: pytest.fail("asked Numba for its threads"))
        threads._parallel_since[0] -= threads.PARALLEL_START_CPU_S + 1.0  # as if the job had run that long
        monkeypatch.setattr(threads, "threads_for", lambda n: 2)
        assert not threads.runs_serial(10_000)
        assert threads._parallel_since[1]
        assert threads.runs_serial(threads.MIN_PARALLEL_SEQUENCES - 1)
    finally:
        threads.set_threads(before)


def test_warm_up_compiles_the_chain_kernels_parallel_twins(monkeypatch):
    """A chain call on a kernel's serial twin (a small input) under the warm-up compiles the parallel kernel for
    the same argument types: a first big batch after install loads it instead of compiling it."""
    from varorder import chain
    from varorder.engine.chain_forward import _logz_serial
    from varorder.engine.chain_viterbi import _viterbi_serial

    monkeypatch.setattr(threads, "_COMPILE_TWINS", True)
    E = np.zeros((2, 3, 2), dtype=np.float64)
    chain.viterbi(E, np.zeros((2, 2)))
    chain.log_partition(E, np.zeros((2, 2)))
    for twin in (_viterbi_serial, _logz_serial):
        assert twin.signatures and set(twin.signatures) <= set(twin.parallel_twin.signatures)
