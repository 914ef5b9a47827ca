"""src/ raises the kinds of varorder.errors, and no handler of a bare ValueError hides one.

Two static scans of the package's source (no import, no timing):

* no ``raise ValueError(...)`` (nor a ``ValueError(...)`` built to be raised or returned)
  outside a short allow-list, so that a caller can always tell a corrupt file
  (FormatError) from a bad argument (ParameterError) from a diverged fit (DivergenceError);
* no ``except ValueError`` that *swallows* (its body raises nothing) around a call that can
  raise one of those kinds: such a handler would treat, say, a bad argument as the
  divergence it meant to retry (the ``StringEP._damped`` defect of issue 40). "Can raise"
  is followed through the package's own calls: a function raises a kind when it raises
  it itself, raises what a helper of its module returns, or calls (by a name imported from
  varorder or defined in its module, or as ``self.method``) a function that does.
"""

from __future__ import annotations

import ast
import pathlib

import numpy as np
import pytest

SRC = pathlib.Path(__file__).resolve().parents[1] / "src" / "varorder"
KINDS = {"VarorderError", "FormatError", "ParameterError", "DivergenceError", "NotFittedError",
         "BinaryFormatError"}

# sites allowed to build a plain ValueError, with the reason
VALUE_ERROR_ALLOWED = {
    # a Numba kernel's bounds check; NgramLM._corrupt turns it into a FormatError naming the file
    "lm/_kernels.py": "checked_row",
    # the trie's pointer check, the same way (TrieLM._corrupt)
    "lm/_trie_kernels.py": "children",
}

# handlers of a bare ValueError allowed to swallow a varorder kind, with the reason
SWALLOW_ALLOWED = {
    # the fast ARPA paths return None on anything they refuse, and the general reader, run
    # next on the same file, raises the error of the right kind
    ("lm/arpa.py", "_read_arpa_fast"), ("lm/arpa.py", "_read_arpa_closed"),
}


def _modules(root):
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        yield rel, ast.parse(path.read_text(encoding="utf-8"), filename=rel)


def _module_name(rel: str) -> str:
    parts = rel[:-3].split("/")
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(["varorder", *parts])


def _enclosing_functions(tree):
    """(function node, qualified name, class name or None) for every function of a module."""
    out = []

    def visit(node, prefix, cls):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                name = f"{prefix}{child.name}"
                out.append((child, name, cls))
                visit(child, name + ".", cls)
            elif isinstance(child, ast.ClassDef):
                visit(child, f"{prefix}{child.name}.", child.name)
            else:
                visit(child, prefix, cls)

    visit(tree, "", None)
    return out


def _called_name(call):
    func = call.func
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "self":
        return "self." + func.attr
    if isinstance(func, ast.Attribute):
        return "." + func.attr  # a method of another object: any package method of that name
    return None


def _value_error_built(node) -> bool:
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "ValueError") or (
        isinstance(node, ast.Name) and node.id == "ValueError")


def _bare_value_errors(root) -> list[str]:
    found = []
    for rel, tree in _modules(root):
        allowed = VALUE_ERROR_ALLOWED.get(rel)
        for fn, name, _ in _enclosing_functions(tree):
            for node in ast.walk(fn):
                built = (isinstance(node, ast.Raise) and node.exc is not None and _value_error_built(node.exc)) or (
                    isinstance(node, ast.Return) and node.value is not None and _value_error_built(node.value))
                if built and name != allowed:
                    found.append(f"{rel}:{node.lineno} ({name})")
    return sorted(set(found))


def test_src_raises_no_bare_value_error():
    found = _bare_value_errors(SRC)
    assert not found, ("raise a kind of varorder.errors (FormatError, ParameterError, DivergenceError), "
                       "not ValueError: " + ", ".join(found))


class _Package:
    """Which functions of the package can raise a varorder error kind (a fixpoint over calls)."""

    def __init__(self, root):
        self.functions = {}  # (module, qualname) -> node
        self.class_of = {}
        self.imports = {}  # module -> {local name: (module, name)}
        for rel, tree in _modules(root):
            module = _module_name(rel)
            names = {}
            for node in tree.body:
                if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("varorder"):
                    for alias in node.names:
                        names[alias.asname or alias.name] = (node.module, alias.name)
            self.imports[module] = names
            for fn, name, cls in _enclosing_functions(tree):
                self.functions[module, name] = fn
                self.class_of[module, name] = cls
        # a method called on another object stands for every package method of that name, unless
        # the name is one of the builtin containers' or NumPy arrays' (x.split(), a.astype(...))
        common = set().union(*(dir(t) for t in (str, bytes, list, tuple, dict, set, np.ndarray, np.generic)))
        self.methods = {}
        for (module, name), cls in self.class_of.items():
            if cls is not None and name.count(".") == 1 and name.split(".")[1] not in common:
                self.methods.setdefault(name.split(".")[1], set()).add((module, name))
        self.returns_kind = {key for key, fn in self.functions.items() if any(
            isinstance(n, ast.Return) and isinstance(n.value, ast.Call) and isinstance(n.value.func, ast.Name)
            and n.value.func.id in KINDS for n in ast.walk(fn))}
        # functions that end in a raise: a handler calling one reports the error rather than hiding it
        self.no_return = {key for key, fn in self.functions.items() if isinstance(fn.body[-1], ast.Raise)}
        self.raises = {key for key, fn in self.functions.items() if self._raises_directly(key, fn)}
        callees = {key: set().union(*(self.resolve(key, _called_name(n)) for n in ast.walk(fn) if isinstance(n, ast.Call)))
                   for key, fn in self.functions.items()}
        changed = True
        while changed:
            changed = False
            for key, targets in callees.items():
                if key not in self.raises and targets & self.raises:
                    self.raises.add(key)
                    changed = True

    def resolve(self, where, called) -> set:
        """The (module, qualname)s a call by ``called`` inside function ``where`` may reach."""
        if called is None:
            return set()
        module, qualname = where
        if called.startswith("."):
            return self.methods.get(called[1:], set())
        if called.startswith("self."):
            cls = self.class_of.get(where)
            return {(module, f"{cls}.{called[5:]}")} if cls else set()
        scope = qualname.rsplit(".", 1)[0] + "." if "." in qualname else ""
        for candidate in (f"{scope}{called}", called):
            if (module, candidate) in self.functions:
                return {(module, candidate)}
        target = self.imports.get(module, {}).get(called)
        if target is not None and target not in self.functions:
            target = self.imports.get(target[0], {}).get(target[1])  # re-exported by a package's __init__
        return {target} if target in self.functions else set()

    def calls_raising(self, where, nodes) -> bool:
        return any(self.resolve(where, _called_name(n)) & self.raises
                   for node in nodes for n in ast.walk(node) if isinstance(n, ast.Call))

    def _raises_directly(self, key, fn) -> bool:
        for node in ast.walk(fn):
            if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call):
                if isinstance(node.exc.func, ast.Name) and node.exc.func.id in KINDS:
                    return True
                if self.resolve(key, _called_name(node.exc)) & self.returns_kind:
                    return True
        return False


def _catches_bare_value_error(handler) -> bool:
    kind = handler.type
    names = kind.elts if isinstance(kind, ast.Tuple) else [kind]
    return any(isinstance(n, ast.Name) and n.id == "ValueError" for n in names)


def _swallowing_handlers(root) -> list[str]:
    package = _Package(root)
    found = []
    for (module, qualname), fn in package.functions.items():
        rel = module[len("varorder."):].replace(".", "/") + ".py"
        for node in ast.walk(fn):
            if not isinstance(node, ast.Try):
                continue
            for handler in node.handlers:
                reports = any(isinstance(n, ast.Raise) or (isinstance(n, ast.Call) and package.resolve(
                    (module, qualname), _called_name(n)) & package.no_return) for n in ast.walk(handler))
                if not _catches_bare_value_error(handler) or reports:
                    continue  # a handler that raises reports the error; only one that returns or goes on hides it
                direct = any(isinstance(n, ast.Raise) and isinstance(n.exc, ast.Call) and isinstance(n.exc.func, ast.Name)
                             and n.exc.func.id in KINDS for stmt in node.body for n in ast.walk(stmt))
                if (direct or package.calls_raising((module, qualname), node.body)) and (rel, qualname.split(".")[-1]) not in SWALLOW_ALLOWED:
                    found.append(f"{rel}:{handler.lineno} ({qualname})")
    return sorted(found)


def test_no_value_error_handler_swallows_a_varorder_kind():
    found = _swallowing_handlers(SRC)
    assert not found, ("an `except ValueError` that goes on silently wraps code raising a varorder error kind; "
                       "catch the kind meant (e.g. DivergenceError): " + ", ".join(sorted(found)))


def test_the_scans_can_fail(tmp_path):
    # a module retrying on any ValueError around a helper raising ParameterError, and a bare raise
    package = tmp_path / "varorder"
    package.mkdir()
    (package / "retry.py").write_text(
        "from varorder.errors import ParameterError\n"
        "def check(x):\n"
        "    if x < 0:\n"
        "        raise ParameterError('x must be >= 0', name='x', value=x)\n"
        "def retry(x):\n"
        "    try:\n"
        "        return check(x)\n"
        "    except ValueError:\n"
        "        return None\n"
        "def narrow(x):\n"
        "    try:\n"
        "        return float(x)\n"
        "    except ValueError:\n"
        "        return None\n")
    (package / "bare.py").write_text("def f():\n    raise ValueError('x')\n")
    assert _swallowing_handlers(package) == ["retry.py:8 (retry)"]
    assert _bare_value_errors(package) == ["bare.py:2 (f)"]


def test_damped_retries_divergence_only():
    # StringEP._damped retries a product that diverged with a smaller damping α, and lets
    # any other error through at once (its `compute` is a callable the scan cannot follow)
    from varorder.errors import DivergenceError, ParameterError
    from varorder.strings.inference import StringEP

    ep, seen = StringEP(), []

    def bad_argument():
        seen.append(ep._alpha)
        raise ParameterError("k must be >= 1", name="k", value=0)

    with pytest.raises(ParameterError):
        ep._damped(bad_argument)
    assert seen == [1.0]

    def diverges_above_a_quarter():
        if ep._alpha > 0.25:
            raise DivergenceError("Z = inf")
        return "done"

    assert ep._damped(diverges_above_a_quarter) == ("done", 0.25)
