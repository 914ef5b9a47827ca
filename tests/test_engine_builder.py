"""The engine's build half (varorder.engine.builder): the growable tables, the one
selection-builder loop run by a builder that supplies only its hooks (an exact bigram chain
against enumeration, beam search against its definition), and a rule that no structure
builder keeps node/arc tables of its own."""

from __future__ import annotations

import ast
import itertools
from pathlib import Path

import numba as nb
import numpy as np
import pytest

from varorder.engine.builder import DROP, SelectionBuilder, grown1, grown2, grown_columns, root, selection_builder
from varorder.lattice import Lattice, alphas, log_partition

SRC = Path(__file__).resolve().parents[1] / "src" / "varorder"


def test_tables_grow_by_doubling_and_keep_their_rows():
    a = np.arange(4.0)
    assert grown1(a, 4, 3) is a
    b = grown1(a, 3, 5)
    assert b.shape == (8,) and b[:3].tolist() == [0.0, 1.0, 2.0]
    t = np.arange(6, dtype=np.int64).reshape(3, 2)
    u = grown2(t, 2, 7)
    assert u.shape == (7, 2) and u[:2].tolist() == [[0, 1], [2, 3]]
    cols = np.arange(6, dtype=np.int64).reshape(2, 3)
    grown = grown_columns(cols, 4, -1)
    assert grown.shape == (2, 6) and grown[:, :3].tolist() == cols.tolist() and (grown[:, 3:] == -1).all()
    assert grown_columns(cols, 3, -1) is cols


# A bigram chain as a selection builder: a context is the last label (state row [label]);
# a beam (key −1, singletons) or the exact chain (key = label, B = V: every context kept).
@nb.njit
def _expand(ctx, i, node_pos, node_fwd, node_state, prev_first, prev_count, c_src, c_lab, c_w, c_fwd, c_key,
            c_class, c_flags, c_payload):
    emissions, transitions, start, beam = ctx
    V = emissions.shape[1]
    n = 0
    for k in range(prev_count):
        u = prev_first + k
        last = node_state[u, 0]
        for y in range(V):
            w = emissions[i - 1, y] + (start[y] if last < 0 else transitions[last, y])
            c_src[n] = u
            c_lab[n] = y
            c_w[n] = w
            c_fwd[n] = node_fwd[u] + w
            c_key[n] = -1 if beam else y
            c_class[n] = 0
            c_flags[n] = 0
            c_payload[n, 0] = y
            n += 1
    return n


@nb.njit
def _open_state(ctx, i, node_state, c, c_src, c_lab, c_payload, row):
    row[0] = c_lab[c]


@nb.njit
def _merge(ctx, i, node_state, first, slot_group, c_src, c_lab, c_key, c_group, c_payload, n, g_rep, g_fwd,
           g_flags, active, g_node, n_groups, g_target, c_target):
    for g in range(n_groups):
        if not active[g]:
            g_target[g] = DROP if ctx[3] else root(0)


@nb.njit
def _root_state(ctx, i, key, node_state, v, row):
    row[0] = -2


_BIGRAM = selection_builder(SelectionBuilder(_expand, _open_state, _merge, _root_state))


def _bigram_lattice(emissions, transitions, start, budget, beam):
    L, V = emissions.shape
    pos, fwd, state, src, dst, lab, w, apos, payload, last_first = _BIGRAM(
        (emissions, transitions, start, beam), L, np.array([-1], np.int64), 1, V, budget, 1, -1 if beam else V, 1,
        False, 0.0, False, (1, 1, 1))  # tiny size hints: the tables must grow
    final = np.where(pos == L, 0.0, -np.inf)
    assert (apos == pos[dst]).all() and (payload[:, 0] == lab).all()
    return Lattice(pos, src, dst, lab, w, final), state, fwd


def _chain_log_z(emissions, transitions, start):
    L, V = emissions.shape
    scores = [start[y[0]] + emissions[0, y[0]] + sum(transitions[y[t - 1], y[t]] + emissions[t, y[t]]
                                                      for t in range(1, L))
              for y in itertools.product(range(V), repeat=L)]
    return np.logaddexp.reduce(scores)


@pytest.mark.parametrize("seed", range(6))
def test_the_loop_builds_the_exact_chain_when_every_context_is_kept(seed):
    rng = np.random.default_rng(seed)
    L, V = int(rng.integers(1, 5)), int(rng.integers(1, 4))
    E, T, S = rng.normal(size=(L, V)), rng.normal(size=(V, V)), rng.normal(size=V)
    T[rng.random((V, V)) < 0.2] = -np.inf
    lat, state, fwd = _bigram_lattice(E, T, S, V, beam=False)
    np.testing.assert_allclose(log_partition(lat), _chain_log_z(E, T, S), rtol=1e-12)
    # one context per label and position (a root only where a label is unreachable)
    assert all((lat.node_position == i).sum() <= V + 1 for i in range(1, L + 1)) and lat.max_length == L
    # the forward scores that selected are the engine's LOG forward on the built lattice
    np.testing.assert_allclose(fwd, alphas(lat)[0], rtol=1e-12)


@pytest.mark.parametrize("seed", range(6))
def test_beam_keeps_the_b_best_prefixes_with_ties_to_the_earlier(seed):
    rng = np.random.default_rng(seed)
    L, V, B = 3, 3, int(rng.integers(1, 4))
    E, T, S = np.round(rng.normal(size=(L, V)), 0), np.round(rng.normal(size=(V, V)), 0), np.zeros(V)
    lat, state, fwd = _bigram_lattice(E, T, S, B, beam=True)
    # reference: beam search by a stable sort of the expansions of the kept prefixes
    beam = [((), 0.0)]
    for i in range(L):
        cands = [(p + (y,), s + E[i, y] + (S[y] if not p else T[p[-1], y])) for p, s in beam for y in range(V)]
        order = sorted(range(len(cands)), key=lambda c: (-cands[c][1], c))
        beam = [cands[c] for c in sorted(order[:B])]
        at = lat.node_position == i + 1
        np.testing.assert_array_equal(fwd[at], [s for _, s in beam])
        np.testing.assert_array_equal(state[at, 0], [p[-1] for p, _ in beam])


# Structure builders: modules that build a lattice of contexts (the four of #40, every module
# using the engine's builder or selection, every module that emits a Lattice or Hypergraph)
# keep their nodes and arcs in the engine's tables.
BUILDERS = {"contexts/context_set.py", "decipher/context_sets.py", "transduce/lattice.py", "exact/qautomaton.py"}
_ENGINE_MARKS = ("varorder.engine.builder", "varorder.engine.selection")
_FACADES = {"lattice.py", "hypergraph.py"}  # the engine facades: they wrap tables, they build none
_ALLOCATIONS = {"empty", "zeros", "full", "ones", "empty_like", "zeros_like", "full_like", "concatenate", "resize",
                "append", "copy"}
_GROWN = {"grown1", "grown2", "grown_columns"}
_SELECTION = {"selection_builder", "keep_best", "group_of_slot"}


def _builder_modules():
    found = set(BUILDERS)
    for path in SRC.rglob("*.py"):
        rel = path.relative_to(SRC).as_posix()
        if rel.startswith(("engine/", "testing/")) or rel in _FACADES:
            continue
        text = path.read_text()
        if any(mark in text for mark in _ENGINE_MARKS) or "Lattice(" in text or "Hypergraph(" in text:
            found.add(rel)
    return sorted(found)


def _called(node) -> str:
    """The called name of a Call (``np.empty`` -> "empty", ``grown1`` -> "grown1"), else ""."""
    if isinstance(node, ast.Call):
        if isinstance(node.func, ast.Attribute):
            return node.func.attr
        if isinstance(node.func, ast.Name):
            return node.func.id
    return ""


def _reads_a_shape(node) -> bool:
    return any(isinstance(sub, ast.Attribute) and sub.attr == "shape" for sub in ast.walk(node))


def _doubles_a_shape(node) -> bool:
    """An expression with ``2 * x.shape[...]`` (a doubling growth) in it."""
    for sub in ast.walk(node):
        if isinstance(sub, ast.BinOp) and isinstance(sub.op, ast.Mult):
            sides = (sub.left, sub.right)
            if any(isinstance(s, ast.Constant) and s.value == 2 for s in sides) and any(
                    _reads_a_shape(s) for s in sides):
                return True
    return False


def _prefix_copy(node) -> bool:
    """``b[:used] = a[:used]``: a table's first entries copied into a new one."""
    if not isinstance(node, ast.Assign) or len(node.targets) != 1:
        return False
    target, value = node.targets[0], node.value

    def prefix(expr):
        return (isinstance(expr, ast.Subscript) and isinstance(expr.slice, ast.Slice) and expr.slice.lower is None
                and expr.slice.upper is not None)

    return prefix(target) and prefix(value) and ast.dump(target.value) != ast.dump(value.value)


def own_table_problems(rel: str, source: str) -> list[str]:
    """Where a builder module grows node/arc tables of its own instead of the engine's: a grow
    helper, a doubled allocation, a table reallocated when full or its prefix copied into a
    new one; and, in a module that selects contexts (the engine's loop, ``keep_best`` or
    ``group_of_slot``), any growth at all — its nodes and arcs are the selection-builder
    loop's (``grown1`` and friends serve the other builders)."""
    tree = ast.parse(source)
    selects = any(_called(node) in _SELECTION for node in ast.walk(tree))
    problems = []
    for node in ast.walk(tree):
        where = f"{rel}:{getattr(node, 'lineno', '?')}"
        if isinstance(node, ast.FunctionDef) and "grow" in node.name.lower():
            problems.append(f"{where}: defines {node.name} (use varorder.engine.builder's tables)")
        if _called(node) in _ALLOCATIONS and node.args and _doubles_a_shape(node.args[0]):
            problems.append(f"{where}: allocates a doubled table (use varorder.engine.builder's grown1 / grown2 / "
                            "grown_columns)")
        if isinstance(node, ast.If) and _reads_a_shape(node.test) and any(
                isinstance(sub, ast.Assign) and _called(sub.value) in _ALLOCATIONS
                for stmt in node.body for sub in ast.walk(stmt)):
            problems.append(f"{where}: reallocates a table when it is full (use varorder.engine.builder's tables)")
        if _prefix_copy(node):
            problems.append(f"{where}: copies a table's first entries into a new one (a grow helper)")
        if selects and _called(node) in _GROWN:
            problems.append(f"{where}: a selection builder grows a table of its own ({_called(node)}); its nodes "
                            "and arcs are the selection-builder loop's (varorder.engine.builder.selection_builder)")
    return problems


def test_no_builder_module_grows_tables_of_its_own():
    modules = _builder_modules()
    assert set(BUILDERS) <= set(modules)
    problems = [p for rel in modules for p in own_table_problems(rel, (SRC / rel).read_text())]
    assert not problems, "\n".join(problems)


_PLANTED = {
    "a grow helper": ("import numpy as np\n"
                      "def _grow(a, n):\n    b = np.empty(max(2 * a.shape[0], n))\n    b[:a.shape[0]] = a\n"
                      "    return b\n"),
    "a table reallocated in the loop": ("import numpy as np\n"
                                        "def build(n):\n    a_src = np.empty(4, np.int64)\n    used = 0\n"
                                        "    for i in range(n):\n        if used + 1 > a_src.shape[0]:\n"
                                        "            bigger = np.empty(used + 8, np.int64)\n"
                                        "            bigger[:used] = a_src[:used]\n            a_src = bigger\n"
                                        "        a_src[used] = i\n        used += 1\n    return a_src[:used]\n"),
    "a hand-written selection loop on grown1": (
        "from varorder.engine.builder import grown1\nfrom varorder.engine.selection import keep_best\n"
        "def build(fwd, n):\n    a_src = grown1(a_src, 0, n)\n    keep_best(fwd, n, cls, 1, 2, active)\n"),
}


@pytest.mark.parametrize("what", sorted(_PLANTED))
def test_the_rule_fails_on_a_planted_table_of_its_own(what):
    assert own_table_problems("planted.py", _PLANTED[what]), what


def test_the_rule_passes_a_builder_that_grows_through_the_engine():
    clean = ("from varorder.engine.builder import grown1\n"
             "def build(n):\n    a = grown1(a, 0, n)\n    return a\n")
    assert own_table_problems("clean.py", clean) == []


def test_the_rule_fails_on_mains_hand_written_transducer_loop():
    """The transducer's own loop before it moved onto the engine (grown1 arc tables beside
    keep_best and group_of_slot), kept in miniature: the rule must reject it."""
    before = ("from varorder.engine.builder import grown1, grown2\n"
              "from varorder.engine.selection import group_of_slot, keep_best\n"
              "def _build_kernel(n):\n"
              "    for i in range(n):\n"
              "        need = n_arcs + max_c\n"
              "        if need > a_src.shape[0]:\n"
              "            a_src = grown1(a_src, n_arcs, need)\n"
              "            a_feat = grown2(a_feat, n_arcs, need)\n"
              "        g, n_g, new = group_of_slot(table, key, f, n_g, g_fwd)\n"
              "        keep_best(g_fwd, n_g, classes, groups, B, active)\n")
    assert len(own_table_problems("transduce/lattice.py", before)) >= 2
