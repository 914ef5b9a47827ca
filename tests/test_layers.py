"""The layer rule of docs/ARCHITECTURE.md, read from the source: every module's imports
(function-level ones included, ``if TYPE_CHECKING:`` blocks excepted) go to packages of
its own rank or lower in the table there, and the module graph has no cycle."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "varorder"
DOC = ROOT / "docs" / "ARCHITECTURE.md"


def layer_table() -> dict[str, int | None]:
    """package (``varorder.x``, or ``varorder`` for the root) -> rank; None for testing."""
    text = DOC.read_text(encoding="utf-8")
    section = text[text.index("## Layers"):]
    block = section[section.index("```") + 3:]
    block = block[:block.index("```")]
    table: dict[str, int | None] = {}
    for line in block.splitlines():
        match = re.match(r"\s*(\d+|-)\s+(varorder(?:\.\w+)?)\s", line + " ")
        if match:
            table[match.group(2)] = None if match.group(1) == "-" else int(match.group(1))
    return table


def module_files() -> dict[str, Path]:
    modules = {}
    for path in SRC.rglob("*.py"):
        parts = list(path.relative_to(SRC.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        modules[".".join(parts)] = path
    return modules


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _import_nodes(tree: ast.AST):
    """Every Import/ImportFrom node at any depth, skipping ``if TYPE_CHECKING:`` bodies."""
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            stack.extend(node.orelse)
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        stack.extend(ast.iter_child_nodes(node))


def import_graph() -> dict[str, set[str]]:
    """module -> the varorder modules (or packages) it imports."""
    modules = module_files()
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
        targets: set[str] = set()
        for node in _import_nodes(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.Import):
                bases = [alias.name for alias in node.names]
                targets.update(b for b in bases if b.split(".")[0] == "varorder")
                continue
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                base_name = ".".join(base + ([node.module] if node.module else []))
            else:
                base_name = node.module or ""
            if base_name.split(".")[0] != "varorder":
                continue
            for alias in node.names:
                full = f"{base_name}.{alias.name}"
                targets.add(full if full in modules else base_name)
        targets.discard(name)
        graph[name] = targets
    return graph


def package_of(module: str, table: dict[str, int | None]) -> str:
    parts = module.split(".")
    if len(parts) >= 2 and ".".join(parts[:2]) in table:
        return ".".join(parts[:2])
    return "varorder"  # the root and its private helpers (_numba_start, _malloc)


def test_the_table_parses_and_names_every_package():
    table = layer_table()
    assert table["varorder.engine"] == 1 and table["varorder.cli"] > table["varorder.tasks"]
    packages = {p.parent.name for p in SRC.glob("*/__init__.py")}
    missing = sorted(p for p in packages if f"varorder.{p}" not in table)
    assert not missing, f"packages without a row in the layer table of docs/ARCHITECTURE.md: {missing}"


def test_no_module_imports_upward():
    table = layer_table()
    problems = []
    for module, targets in sorted(import_graph().items()):
        source_rank = table[package_of(module, table)]
        for target in sorted(targets):
            target_package = package_of(target, table)
            target_rank = table[target_package]
            if target_rank is None:
                if source_rank is not None:
                    problems.append(f"{module} -> {target} (varorder.testing is for tests and benchmarks only)")
            elif source_rank is not None and target_rank > source_rank:
                problems.append(f"{module} (rank {source_rank}) -> {target} (rank {target_rank})")
    assert not problems, "upward imports:\n" + "\n".join(problems)


def strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's algorithm, iterative; components with more than one module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    components = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.get(root, ()))))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    components.append(sorted(component))
    return components


def test_strongly_connected_finds_a_cycle_and_only_cycles():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert strongly_connected(graph) == [["a", "b", "c"]]
    assert strongly_connected({"a": {"b"}, "b": set()}) == []


def test_the_import_reader_sees_function_level_imports_and_skips_type_checking(tmp_path):
    tree = ast.parse("from typing import TYPE_CHECKING\n"
                     "if TYPE_CHECKING:\n    from varorder.lm.model import NgramLM\n"
                     "def f():\n    from varorder.io import _text\n")
    names = [node.module for node in _import_nodes(tree)]
    assert "varorder.io" in names and "varorder.lm.model" not in names


def test_no_import_cycle_between_modules():
    graph = import_graph()
    # An edge to a package means its __init__; a package importing its own submodules is
    # how packages work, so only edges between distinct modules count.
    cycles = strongly_connected(graph)
    assert not cycles, "import cycles:\n" + "\n".join(" <-> ".join(c) for c in cycles)


if __name__ == "__main__":  # pragma: no cover
    pytest.main([__file__, "-q"])
