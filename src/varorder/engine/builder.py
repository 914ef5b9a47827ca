"""The build half of the one idea: growable node and arc tables, and the one selection-builder
loop that RCMS and beam builders run (Steinhardt & Liang 2015, "Reified Context Models",
App. A and §4.1).

Factorization. A builder emits a position-indexed lattice (:mod:`varorder.engine.lattice`):
node (i, c) for each selected context c of position i, one arc per expansion (c_{i−1}, y_i)
into f_i(c_{i−1}, y_i), the least selected context containing it, weighted by the builder's
scorer. Position by position the loop does

1. **expand**: every kept context of position i − 1 by every label (the builder's
   ``expand``: the candidates' parent, label, arc weight, forward score, state key, class,
   flags and arc payload);
2. **group**: candidates whose state keys agree are one group (the state cannot tell them
   apart), their forward scores ⊕-summed in LOG (:func:`varorder.engine.selection.group_of_slot`);
   a negative key is a group of its own;
3. **keep best**: the budget B of groups of largest forward score per class, ties to the
   earlier, −∞ never, plus the forced ones (the builder's ``select``; by default
   :func:`select_best`, :func:`varorder.engine.selection.keep_best`); a group's flags are
   its candidates' OR-ed, so a builder's ``select`` may spend a second budget on a flag
   (the transducer's gold prefix);
4. **merge**: every other group into its least kept ancestor, a root of its class, or
   dropped (the builder's ``merge``, which knows what an ancestor is) — or, with
   ``per_candidate``, every candidate of such a group through its own parent;
5. **emit**: the kept groups become nodes in group order, then the roots in order of first
   use (or root 0 always, first); every candidate not dropped becomes an arc into its
   group's node, in candidate order, and the nodes' forward scores are ⊕-summed from them.

The builder's whole contribution is a :class:`SelectionBuilder` of compiled hooks; the loop
is compiled once per process and builder by :func:`compiled` (the closure carries the
hooks), and a builder's cached kernel calls it, so its code is cached with that kernel.

Tables. Nodes are (position, forward score, state row) and arcs (source, target, label,
weight, position, payload row): the *payload* columns (int64, as wide as the builder needs)
hold the builder's state — the symbols a context fixes, its length, its alignment state;
an arc's pattern or feature indices. They grow by doubling (:func:`grown1`, :func:`grown2`;
:func:`grown_columns` for tables stored one column per record, as the q-automaton's), so a
builder never sizes its output in advance. The forward scores only select contexts;
inference on the built lattice is the engine's.
"""

from __future__ import annotations

from typing import Callable, NamedTuple

import numba as nb
import numpy as np

from varorder.engine.selection import group_of_slot, keep_best
from varorder.engine.semiring import compiled, log_plus
import varorder._numba_start  # noqa: E402,F401,I001  (Numba's cache saves locked across processes)

__all__ = ["SelectionBuilder", "selection_builder", "select_best", "grown1", "grown2", "grown_columns",
           "DROP", "FORCED", "root"]

_NEG_INF = -np.inf
#: a ``merge`` target: drop the group's candidates (beam search)
DROP = -1
#: the candidate flag the default ``select`` keeps whatever its score (a group's flags are
#: its candidates' OR-ed; a builder may use the other bits for its own ``select``)
FORCED = 1


@nb.njit(cache=True, inline="always")
def root(key):
    """The ``merge`` target "root ``key`` of this position" (an encoded negative number)."""
    return -2 - key


@nb.njit(cache=True)
def grown1(a, used, needed):
    """``a`` if it holds ``needed`` entries, else a copy twice as long (at least ``needed``)
    keeping its first ``used`` entries (later entries are written before they are read)."""
    if needed <= a.shape[0]:
        return a
    b = np.empty(max(2 * a.shape[0], needed), a.dtype)
    b[:used] = a[:used]
    return b


@nb.njit(cache=True)
def grown2(a, used, needed):
    """:func:`grown1` for a table of rows (the payload columns)."""
    if needed <= a.shape[0]:
        return a
    b = np.empty((max(2 * a.shape[0], needed), a.shape[1]), a.dtype)
    b[:used] = a[:used]
    return b


@nb.njit(cache=True)
def grown_columns(table, needed, fill):
    """A table stored one column per record, (fields, capacity): ``table`` if it has
    ``needed`` columns, else a copy with twice the columns (at least ``needed``), new
    entries ``fill``."""
    capacity = table.shape[1]
    if needed <= capacity:
        return table
    out = np.full((table.shape[0], max(2 * capacity, needed)), fill, table.dtype)
    out[:, :capacity] = table
    return out


@nb.njit(cache=True)
def select_best(ctx, g_fwd, n_groups, g_class, g_flags, n_classes, budget, active):
    """Step 3 by default: the ``budget`` best groups per class (``keep_best``), then every
    group flagged :data:`FORCED`."""
    keep_best(g_fwd, n_groups, g_class, n_classes, budget, active)
    for g in range(n_groups):
        if g_flags[g] & FORCED:
            active[g] = True


@nb.njit(cache=True)
def no_end_arcs(ctx, i, node_pos, node_fwd, node_state, n_nodes, a_src, a_dst, a_lab, a_w, a_pos, a_payload,
                n_arcs):
    """The default last step of a position: nothing (see ``SelectionBuilder.end``)."""
    return n_nodes, n_arcs


class SelectionBuilder(NamedTuple):
    """A selection builder's compiled hooks (``ctx`` is the builder's own tuple of inputs
    and scratch, passed through unchanged):

    * ``expand(ctx, i, node_pos, node_fwd, node_state, prev_first, prev_count, c_src, c_lab,
      c_w, c_fwd, c_key, c_class, c_flags, c_payload) -> n``: write the candidates of
      position i from the nodes ``prev_first … prev_first + prev_count − 1`` (at most
      ``prev_count · fanout``): parent node, label, arc weight, forward score, state key,
      class, flags (uint8 bits; :data:`FORCED` for the default ``select``) and the arc's
      payload row (the source, label, weight and payload columns are the arc table's own
      rows from the next free arc on: a kept candidate is not copied, a dropped one is
      compacted away);
    * ``open_state(ctx, i, node_state, c, c_src, c_lab, c_payload, row)``: the state row of
      the context candidate c opens (called for the first candidate of each kept group);
    * ``merge(ctx, i, node_state, first, slot_group, c_src, c_lab, c_key, c_group, c_payload,
      n, g_rep, g_fwd, g_flags, active, g_node, n_groups, g_target, c_target)``: set
      ``g_target[g]`` for every group not kept — a node id (a kept context of position i),
      :func:`root` (key) or :data:`DROP`; with ``per_candidate`` set ``c_target[c]``
      instead, for every candidate c (the node of its group when that is kept; candidates
      of a group not kept may come from different parents, each merged through its own);
      ``g_node[g]`` is the node of a kept group, ``g_rep[g]`` its first candidate,
      ``g_flags[g]`` its candidates' flags OR-ed; it may finish the kept nodes' state rows;
    * ``root_state(ctx, i, key, node_state, v, row)``: the state row of root ``key``, node
      ``v`` (made on first use while the arcs are emitted, or eagerly); a builder that needs
      the roots of position i − 1 at position i records them here;
    * ``select(ctx, g_fwd, n_groups, g_class, g_flags, n_classes, budget, active)``: step 3
      (default :func:`select_best`);
    * ``end(ctx, i, node_pos, node_fwd, node_state, n_nodes, a_src, …, n_arcs) -> (n_nodes,
      n_arcs)``: extra nodes and arcs after a position's own (room for one node and
      ``prev_count`` arcs is there; default none); they are not expanded further;
    * ``per_candidate``: ``merge`` targets candidates, not groups (a compile-time switch);
    * ``drop_unkept``: every group not kept is dropped (beam search) and ``merge`` is not
      called (a compile-time switch; with singleton groups the arc pass then visits the kept
      candidates only).
    """

    expand: Callable
    open_state: Callable
    merge: Callable
    root_state: Callable
    select: Callable = select_best
    end: Callable = no_end_arcs
    per_candidate: bool = False
    drop_unkept: bool = False


def make_selection_loop(builder: SelectionBuilder):
    """The selection-builder loop specialised to ``builder``'s hooks (see the module docstring)."""
    expand, open_state, merge, root_state, select, end, per_candidate, drop_unkept = builder

    # not cached (closure factory): see varorder.engine.semiring
    @nb.njit
    def build(ctx, positions, state0, payload_width, fanout, budget, n_classes, n_slots, n_root_keys, eager_root,
              coverage, has_coverage, sizes):
        width = state0.shape[0]
        cap_n = max(sizes[0], 2)
        node_pos = np.empty(cap_n, np.int64)
        node_fwd = np.empty(cap_n)
        node_state = np.empty((cap_n, width), np.int64)
        cap_a = max(sizes[1], 1)
        a_src = np.empty(cap_a, np.int64)
        a_dst = np.empty(cap_a, np.int64)
        a_lab = np.empty(cap_a, np.int64)
        a_w = np.empty(cap_a)
        a_pos = np.empty(cap_a, np.int64)
        a_payload = np.empty((cap_a, payload_width), np.int64)
        node_pos[0] = 0
        node_fwd[0] = 0.0
        node_state[0, :] = state0
        n_nodes = 1
        n_arcs = 0
        cap_c = max(sizes[2], 1)
        c_fwd = np.empty(cap_c)
        c_key = np.empty(cap_c, np.int64)
        c_class = np.empty(cap_c, np.int64)
        c_flags = np.empty(cap_c, np.uint8)
        c_group = np.empty(cap_c, np.int64)
        c_target = np.empty(cap_c if per_candidate else 1, np.int64)
        kept = np.empty(cap_c if drop_unkept else 1, np.int64)  # the kept groups, in order (drop_unkept)
        g_rep = np.empty(cap_c, np.int64)
        g_fwd = np.empty(cap_c)
        g_class = np.empty(cap_c, np.int64)
        g_flags = np.empty(cap_c, np.uint8)
        g_target = np.empty(cap_c, np.int64)
        active = np.empty(cap_c, np.bool_)
        keys_used = np.empty(cap_c if n_slots > 0 else 1, np.int64)  # slot keys to reset after a position
        runs = n_slots == 0
        singletons = n_slots < 0
        ident = np.arange(cap_c)
        slot_group = np.full(max(n_slots, 1), -1, np.int64)
        root_of = np.full(max(n_root_keys, 1), -1, np.int64)
        roots_made = np.empty(max(n_root_keys, 1), np.int64)
        prev_first = 0
        prev_count = 1
        for i in range(1, positions + 1):
            if prev_count == 0:
                break
            need = prev_count * fanout
            # candidate c is written straight into arc slot n_arcs + c (source, label, weight,
            # payload); the arcs kept are compacted in order after the merge
            room = n_arcs + need + prev_count
            a_src = grown1(a_src, n_arcs, room)
            a_dst = grown1(a_dst, n_arcs, room)
            a_lab = grown1(a_lab, n_arcs, room)
            a_w = grown1(a_w, n_arcs, room)
            a_pos = grown1(a_pos, n_arcs, room)
            a_payload = grown2(a_payload, n_arcs, room)
            c_src = a_src[n_arcs:]
            c_lab = a_lab[n_arcs:]
            c_w = a_w[n_arcs:]
            c_payload = a_payload[n_arcs:]
            if need > c_fwd.shape[0]:
                cap_c = max(2 * c_fwd.shape[0], need)
                c_fwd = np.empty(cap_c)
                c_key = np.empty(cap_c, np.int64)
                c_class = np.empty(cap_c, np.int64)
                c_flags = np.empty(cap_c, np.uint8)
                c_group = np.empty(cap_c, np.int64)
                if per_candidate:
                    c_target = np.empty(cap_c, np.int64)
                if drop_unkept:
                    kept = np.empty(cap_c, np.int64)
                g_rep = np.empty(cap_c, np.int64)
                g_fwd = np.empty(cap_c)
                g_class = np.empty(cap_c, np.int64)
                g_flags = np.empty(cap_c, np.uint8)
                g_target = np.empty(cap_c, np.int64)
                active = np.empty(cap_c, np.bool_)
                if n_slots > 0:
                    keys_used = np.empty(cap_c, np.int64)
                ident = np.arange(cap_c)
            # 1. expand
            n_c = expand(ctx, i, node_pos, node_fwd, node_state, prev_first, prev_count, c_src, c_lab, c_w, c_fwd,
                         c_key, c_class, c_flags, c_payload)
            # 2. group
            n_g = 0
            n_keyed = 0
            if singletons:  # every candidate is a group of its own: the candidate columns serve
                n_g = n_c
                g_rep, g_fwd, g_class, g_flags, c_group = ident, c_fwd, c_class, c_flags, ident
                for g in range(n_g):
                    active[g] = False
            for c in range(0 if singletons else n_c):
                key = c_key[c]
                if key >= 0 and runs:  # keys of one group are adjacent
                    if c > 0 and key == c_key[c - 1]:
                        g = n_g - 1
                        g_fwd[g] = log_plus(g_fwd[g], c_fwd[c])
                        new = False
                    else:
                        g = n_g
                        n_g += 1
                        g_fwd[g] = c_fwd[c]
                        new = True
                elif key >= 0:
                    g, n_g, new = group_of_slot(slot_group, key, c_fwd[c], n_g, g_fwd)
                    if new:
                        keys_used[n_keyed] = key
                        n_keyed += 1
                else:
                    g = n_g
                    n_g += 1
                    g_fwd[g] = c_fwd[c]
                    new = True
                if new:
                    g_rep[g] = c
                    g_class[g] = c_class[c]
                    g_flags[g] = c_flags[c]
                    active[g] = False
                else:
                    g_flags[g] |= c_flags[c]
                c_group[c] = g
            # 3. keep best
            select(ctx, g_fwd, n_g, g_class, g_flags, n_classes, budget, active)
            # 5a. the kept groups become nodes, in group order (g_target: their node)
            room = n_nodes + n_g + min(n_root_keys, n_c if per_candidate else n_g) + 2
            node_pos = grown1(node_pos, n_nodes, room)
            node_fwd = grown1(node_fwd, n_nodes, room)
            node_state = grown2(node_state, n_nodes, room)
            first = n_nodes
            n_kept = 0
            for g in range(n_g):
                if active[g]:
                    v = n_nodes
                    n_nodes += 1
                    g_target[g] = v
                    node_pos[v] = i
                    node_fwd[v] = _NEG_INF
                    open_state(ctx, i, node_state, g_rep[g], c_src, c_lab, c_payload, node_state[v])
                    if drop_unkept:
                        kept[n_kept] = g
                        n_kept += 1
                elif drop_unkept:
                    g_target[g] = DROP
            first_root = n_nodes
            n_roots = 0
            if eager_root:
                v = n_nodes
                n_nodes += 1
                node_pos[v] = i
                node_fwd[v] = _NEG_INF
                root_state(ctx, i, 0, node_state, v, node_state[v])
                root_of[0] = v
                roots_made[0] = 0
                n_roots = 1
            # 4. merge the others (g_target of the kept groups is their node)
            if not drop_unkept:
                merge(ctx, i, node_state, first, slot_group, c_src, c_lab, c_key, c_group, c_payload, n_c, g_rep,
                      g_fwd, g_flags, active, g_target, n_g, g_target, c_target)
            for k in range(n_keyed):
                slot_group[keys_used[k]] = -1
            # 5b. arcs, in candidate order; a root is made on first use
            base = n_arcs
            for k in range(n_kept if drop_unkept and singletons else n_c):
                c = kept[k] if drop_unkept and singletons else k
                if per_candidate:
                    v = c_target[c]
                else:
                    g = c if singletons else c_group[c]
                    v = g_target[g]
                if v < 0:
                    if v == DROP:
                        continue
                    key = -2 - v
                    v = root_of[key]
                    if v < 0:
                        v = n_nodes
                        n_nodes += 1
                        node_pos[v] = i
                        node_fwd[v] = _NEG_INF
                        root_state(ctx, i, key, node_state, v, node_state[v])
                        root_of[key] = v
                        roots_made[n_roots] = key
                        n_roots += 1
                    if not per_candidate:
                        g_target[g] = v
                a = n_arcs
                n_arcs += 1
                if a != base + c:  # candidates dropped before this one: move it down, order kept
                    a_src[a] = c_src[c]
                    a_lab[a] = c_lab[c]
                    a_w[a] = c_w[c]
                    for t in range(payload_width):
                        a_payload[a, t] = c_payload[c, t]
                f = c_fwd[c]
                if has_coverage and v >= first_root:
                    a_w[a] += coverage
                    f += coverage
                a_dst[a] = v
                a_pos[a] = i
                node_fwd[v] = log_plus(node_fwd[v], f)
            for k in range(n_roots):
                root_of[roots_made[k]] = -1
            n_regular = n_nodes - first
            n_nodes, n_arcs = end(ctx, i, node_pos, node_fwd, node_state, n_nodes, a_src, a_dst, a_lab, a_w, a_pos,
                                  a_payload, n_arcs)
            prev_first = first
            prev_count = n_regular
        return (node_pos[:n_nodes], node_fwd[:n_nodes], node_state[:n_nodes], a_src[:n_arcs], a_dst[:n_arcs],
                a_lab[:n_arcs], a_w[:n_arcs], a_pos[:n_arcs], a_payload[:n_arcs], prev_first)

    return build


def selection_builder(builder: SelectionBuilder):
    """The compiled selection-builder loop of ``builder`` (built once per process):
    ``loop(ctx, positions, state0, payload_width, fanout, budget, n_classes, n_slots,
    n_root_keys, eager_root, coverage, has_coverage, sizes)`` returns the node table (positions,
    forward scores, state rows), the arc table (sources, targets, labels, weights,
    positions, payload rows) and the first node of the last position.

    ``state0`` is node 0's state row (position 0, forward 0); ``fanout`` bounds the
    candidates per kept context; ``n_slots`` the state keys (0: the candidates of one group
    come one after another, compared with the previous key only; −1: every candidate is a
    group of its own, keys unused), ``n_root_keys`` the root keys;
    ``eager_root``: root 0 of every position exists (right after the kept nodes) whether
    used or not; ``coverage`` is added to the weight of every arc into a root when
    ``has_coverage`` (the coverage feature of §4.1; −∞ for plain beam search); ``sizes``:
    (nodes, arcs, candidates of one position) to make room for first (the tables grow past
    them)."""
    return compiled(make_selection_loop, builder)
