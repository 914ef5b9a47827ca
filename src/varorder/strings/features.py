"""Log-linear families over strings and their encodings as weighted automata.

Cotterell & Eisner (2015), "Penalized Expectation Propagation for Graphical Models over
Strings", §3 (eq. 1): q_θ(v) = exp(θ · f(v)) / Z_θ, with f(v) read off a complete
deterministic (hence unambiguous) feature automaton 𝒜 (§3.4): each (state, symbol) cell
and each state's end cell fires a list of features. ENCODE(θ) is 𝒜 with cell weight
Σ θ[fired features]; the string v = x₁…x_T is read as ``^ x₁ … x_T $``.

Two families:

* :func:`ngram_machine` — the fixed n-gram family (App. B.2): states are histories (the
  last n − 1 symbols, ``^`` at the start), one feature per cell, so θ is a table of log
  conditional probabilities and the KL projection (eq. 2) is closed form: expected cell
  counts, normalised per state (§6, "closed-form").
* :func:`substring_machine` — the variable-order family of §3.3/§3.5: one feature per
  substring w of ``^ v $`` in a prefix-closed set 𝒲 (a trie), f_w(v) = occurrences of w.
  The automaton is Aho–Corasick's: the state is the longest suffix of the history that
  is an inner trie node (leaves need no state); reading a fires every trie node that is
  a suffix of (state · a). Its
  size is governed by the number of distinct prefixes — the quantity eq. 8 counts.

:meth:`FeatureMachine.expected_counts` computes E_p[f] for p = W ⊙ ENCODE(θ) (W any
acceptor, possibly cyclic, with ε arcs) by the product with 𝒜 and one pair of sparse
solves (:func:`varorder.wfsa.arc_posteriors`) — Li, Eisner & Khudanpur (2009, fn. 9).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from varorder.errors import DivergenceError, ParameterError
from varorder.wfsa import Wfsa, arc_posteriors, ngram_history_table, product_with_dfa, reachable_states

__all__ = ["BOS", "EOS", "FeatureMachine", "SubstringRegistry", "ngram_closed_form", "ngram_machine", "substring_machine"]

BOS, EOS = "^", "$"


@dataclass(frozen=True, eq=False)
class FeatureMachine:
    """A complete DFA over ``alphabet`` whose cells fire features.

    ``next_state`` (S, A); cells ``s·A + a`` read symbol a in state s, cells ``S·A + s`` end
    the string in state s; ``cell_ptr`` / ``cell_feature`` (CSR over the S·(A+1) cells)
    list the *local* features each cell fires; ``feature_ids`` maps local → global ids (the
    caller's parameter vector). ``labels`` names each state (its history string).
    """

    alphabet: tuple
    next_state: np.ndarray
    start: int
    cell_ptr: np.ndarray
    cell_feature: np.ndarray
    feature_ids: np.ndarray
    labels: tuple = ()

    @property
    def n_states(self) -> int:
        return self.next_state.shape[0]

    @property
    def n_cells(self) -> int:
        return self.n_states * (len(self.alphabet) + 1)

    @cached_property
    def _cell_of_entry(self) -> np.ndarray:
        # the cell of every (cell, feature) entry; built once per machine (machines are
        # immutable and cached per support, and weights() runs on every message update)
        return np.repeat(np.arange(self.n_cells), np.diff(self.cell_ptr))

    def weights(self, theta) -> tuple[np.ndarray, np.ndarray]:
        """ENCODE(θ): (cell weights (S, A), end weights (S,)) from the global vector θ."""
        local = np.asarray(theta, dtype=np.float64)[self.feature_ids]
        w = np.bincount(self._cell_of_entry, weights=local[self.cell_feature], minlength=self.n_cells)
        S, A = self.next_state.shape
        return w[: S * A].reshape(S, A), w[S * A:]

    def encode(self, theta) -> Wfsa:
        """ENCODE(θ) as an acceptor (each string's weight is exp(θ · f(v)))."""
        cell, end = self.weights(theta)
        S, A = self.next_state.shape
        arcs = [(s, a + 1, a + 1, float(cell[s, a]), int(self.next_state[s, a])) for s in range(S) for a in range(A)]
        return Wfsa.from_arcs(self.alphabet, S, self.start, arcs, {s: float(end[s]) for s in range(S)})

    def expected_counts(self, acceptor: Wfsa | None, theta) -> tuple[np.ndarray, float]:
        """E_p[f] (local feature order) and log Z for p ∝ acceptor ⊙ ENCODE(θ); ``None``
        stands for the universal acceptor (then p = q_θ: one sparse LU of the machine's S × S
        transitions, :meth:`_own_cell_counts`). DivergenceError when Z diverges."""
        cell_w, end_w = self.weights(theta)
        S, A = self.next_state.shape
        if acceptor is None:
            cell_counts, log_z = self._own_cell_counts(cell_w, end_w)
        else:
            product, arc_cell, _ = product_with_dfa(acceptor, self.next_state, self.start, cell_w, end_w)
            arc_counts, final_counts, log_z = arc_posteriors(product)
            cell_counts = np.bincount(arc_cell[arc_cell >= 0], weights=arc_counts[arc_cell >= 0],
                                      minlength=self.n_cells)
            cell_counts[S * A:] += np.bincount(np.arange(product.n_states) % S, weights=final_counts, minlength=S)
        counts = np.bincount(self.cell_feature, weights=cell_counts[self._cell_of_entry],
                             minlength=len(self.feature_ids))
        return counts, log_z

    def _own_cell_counts(self, cell_w, end_w) -> tuple[np.ndarray, float]:
        """Expected cell counts and log Z of q_θ itself: α = e_startᵀ(I − M)⁻¹ and
        β = (I − M)⁻¹ e^end on the states that are reachable and reach an end, M[s, s'] =
        Σ_{a: next(s, a) = s'} e^cell(s, a) — the sums :func:`varorder.wfsa.arc_posteriors`
        forms on the product with the universal acceptor, by one sparse LU of I − M (the
        general path first tries a Neumann series, ~100 sparse products per solve on these
        cyclic machines, before it falls back to the LU). Z is finite iff the spectral radius
        of M is < 1, which holds iff β > 0 solves β = e^end + Mβ on those states (a positive
        vector with Mβ ≤ β, strictly where an end weight is positive); else DivergenceError."""
        import scipy.sparse as sp
        import scipy.sparse.linalg as spla

        S, A = self.next_state.shape
        with np.errstate(over="ignore"):  # a weight whose exp is 0.0 (LOG_ZERO, −∞) is no arc
            live = np.exp(cell_w) > 0.0
            end_live = np.exp(end_w) > 0.0
        src = np.repeat(np.arange(S), A)[live.ravel()]
        dst = self.next_state[live]
        keep = reachable_states(S, src, dst, [self.start]) & reachable_states(S, dst, src, np.flatnonzero(end_live))
        if not keep[self.start]:
            raise ParameterError("the machine accepts nothing: posteriors are undefined")
        index = np.flatnonzero(keep)
        new_id = np.cumsum(keep) - 1
        arcs = keep[src] & keep[dst]
        n = len(index)
        with np.errstate(over="ignore"):
            w = np.exp(cell_w[live][arcs])
        shift = float(end_w[keep].max())
        rhs = np.exp(end_w[keep] - shift)
        e = np.zeros(n)
        e[new_id[self.start]] = 1.0
        with np.errstate(all="ignore"):
            # I − M (duplicate entries summed: two symbols may lead to the same state)
            rows = np.concatenate([np.arange(n), new_id[src[arcs]]])
            cols = np.concatenate([np.arange(n), new_id[dst[arcs]]])
            system = sp.csc_matrix((np.concatenate([np.ones(n), -w]), (rows, cols)), shape=(n, n))
            try:
                lu = spla.splu(system)
                beta = lu.solve(rhs)
                alpha = lu.solve(e, trans="T")
            except RuntimeError:  # exactly singular
                raise DivergenceError("the machine's total weight diverges (its transitions have spectral radius 1)")
        if not (np.all(np.isfinite(beta)) and np.all(np.isfinite(alpha)) and (beta > 0).all() and (alpha > 0).all()):
            raise DivergenceError("the machine's total weight diverges (the spectral radius of its transitions is ≥ 1)")
        z = beta[new_id[self.start]]
        a_full = np.zeros(S)
        b_full = np.zeros(S)
        a_full[index], b_full[index] = alpha, beta
        counts = np.zeros(self.n_cells)
        with np.errstate(under="ignore"):
            reading = a_full[:, None] * np.where(live, np.exp(np.where(live, cell_w, 0.0)), 0.0) \
                * b_full[self.next_state] / z
            ending = a_full * np.exp(end_w - shift) / z
        counts[: S * A] = reading.ravel()
        counts[S * A:] = ending
        return counts, float(np.log(z) + shift)

    def log_partition(self, theta) -> float:
        return self.expected_counts(None, theta)[1]


# ---------------------------------------------------------------------------
# the fixed n-gram family
# ---------------------------------------------------------------------------


def ngram_machine(alphabet, order: int) -> FeatureMachine:
    """The n-gram family's automaton: state = last min(n − 1, t + 1) symbols of ``^ x₁…x_t``,
    one feature per cell (global id = cell id)."""
    alphabet = tuple(alphabet)
    names, next_state = ngram_history_table(alphabet, order)
    A = len(alphabet)
    n_cells = len(names) * (A + 1)
    return FeatureMachine(alphabet, next_state, 0, np.arange(n_cells + 1), np.arange(n_cells),
                          np.arange(n_cells), tuple("".join(h) for h in names))


def ngram_closed_form(machine: FeatureMachine, counts: np.ndarray, floor: float = 1e-12) -> np.ndarray:
    """θ of the KL projection onto the n-gram family (§6 closed form): per state, the log of
    expected cell counts normalised over its A + 1 cells. A state never visited gets a
    uniform row; ``floor`` keeps unseen cells at a large finite negative weight (so that
    message differences θ_V − θ_{V→F} stay defined; the paper's −∞, footnotes 1 and 4)."""
    S, A = machine.next_state.shape
    table = np.concatenate([counts[: S * A].reshape(S, A), counts[S * A:, None]], axis=1) + floor
    table /= table.sum(axis=1, keepdims=True)
    with np.errstate(divide="ignore"):
        logs = np.log(table)
    return np.concatenate([logs[:, :A].ravel(), logs[:, A]])


# ---------------------------------------------------------------------------
# the variable-order substring family
# ---------------------------------------------------------------------------


class SubstringRegistry:
    """Global ids of substrings (tuples over alphabet ∪ {^, $}) for one variable; the
    parameter vectors of that variable are indexed by these ids and grow with it."""

    def __init__(self, alphabet):
        self.alphabet = tuple(alphabet)
        self.ids: dict[tuple, int] = {(): 0}
        self.strings: list[tuple] = [()]
        self._column = {x: a for a, x in enumerate(self.alphabet)}
        self._column[BOS], self._column[EOS] = len(self.alphabet), len(self.alphabet) + 1
        self.parent = np.full(16, -1, dtype=np.int64)  # id of string[:-1] (grown by doubling)
        self.column = np.zeros(16, dtype=np.int64)  # last symbol: alphabet index, A for ^, A + 1 for $
        self.depth = np.zeros(16, dtype=np.int64)
        self.machines: dict = {}  # frozenset(ids) -> FeatureMachine (ids never change meaning)
        self._extensions: dict = {}

    def __len__(self) -> int:
        return len(self.strings)

    def add(self, string: tuple) -> int:
        """The id of ``string``, registering it (its prefix must be registered)."""
        i = self.ids.get(string)
        if i is None:
            parent = self.ids[string[:-1]]
            i = self.ids[string] = len(self.strings)
            self.strings.append(string)
            if i >= len(self.parent):
                grow = len(self.parent)
                self.parent = np.concatenate([self.parent, np.full(grow, -1, dtype=np.int64)])
                self.column = np.concatenate([self.column, np.zeros(grow, dtype=np.int64)])
                self.depth = np.concatenate([self.depth, np.zeros(grow, dtype=np.int64)])
            self.parent[i] = parent
            self.column[i] = self._column[string[-1]]
            self.depth[i] = len(string)
        return i

    def add_with_prefixes(self, string: tuple) -> int:
        for n in range(1, len(string)):
            self.add(string[:n])
        return self.add(string)

    def children_symbols(self, string: tuple) -> tuple:
        """The symbols that may extend ``string`` into a feature: ^ only at the start,
        nothing after $."""
        if string and string[-1] == EOS:
            return ()
        return ((BOS,) if not string else ()) + self.alphabet + (EOS,)

    def extension_ids(self, context: tuple) -> np.ndarray:
        """Ids of ``context · a`` for every a in alphabet ∪ {$} (prefixes registered too)."""
        ids = self._extensions.get(context)
        if ids is None:
            self.add_with_prefixes(context) if context else None
            ids = self._extensions[context] = np.array([self.add(context + (a,)) for a in self.alphabet + (EOS,)],
                                                       dtype=np.int64)
        return ids

    def extend(self, string: tuple) -> list:
        return [self.add(string + (x,)) for x in self.children_symbols(string)]

    def preorder(self, ids) -> tuple[np.ndarray, np.ndarray]:
        """``ids`` (prefix-closed, containing the root 0) in depth-first preorder and each
        one's parent position in that order (−1 for the root): the forest layout of
        :func:`varorder.loglinear.prox.prox_tree_l2`."""
        ordered = sorted(int(i) for i in ids)
        ordered.sort(key=lambda i: self.strings[i])
        position = {i: k for k, i in enumerate(ordered)}
        parent = np.array([position[self.ids[self.strings[i][:-1]]] if i else -1 for i in ordered], dtype=np.int64)
        return np.array(ordered, dtype=np.int64), parent


def substring_machine(registry: SubstringRegistry, ids) -> FeatureMachine:
    """The Aho–Corasick feature automaton of the substrings ``ids`` (closed under prefixes
    here; the root id 0 is not a feature and fires nothing). Cached on the registry."""
    key = frozenset(int(i) for i in ids)
    cached = registry.machines.get(key)
    if cached is not None:
        return cached
    machine = _build_substring_machine(registry, key)
    if len(registry.machines) >= 32:
        registry.machines.pop(next(iter(registry.machines)))
    registry.machines[key] = machine
    return machine


def _build_substring_machine(registry: SubstringRegistry, ids) -> FeatureMachine:
    # Aho–Corasick over the trie of the closed set: goto/failure tables row by row in
    # breadth-first order, then each cell's features = the failure chain of its node
    alphabet = registry.alphabet
    A = len(alphabet)
    size = len(registry)
    parent_of, column_of, depth_of = registry.parent[:size], registry.column[:size], registry.depth[:size]
    in_closure = np.zeros(size, dtype=bool)
    current = np.fromiter(ids, dtype=np.int64)
    while current.size:
        in_closure[current] = True
        current = parent_of[current]
        current = current[current >= 0]
        current = current[~in_closure[current]]
    in_closure[0] = True
    nodes = np.flatnonzero(in_closure)
    nodes = nodes[np.argsort(depth_of[nodes], kind="stable")]  # breadth-first: the root first
    n = len(nodes)
    local = np.full(size, -1, dtype=np.int64)
    local[nodes] = np.arange(n)
    node_parent = local[parent_of[nodes]]
    node_column = column_of[nodes]
    node_depth = depth_of[nodes]
    is_eos_node = node_column == A + 1
    is_eos_node[0] = False
    goto = np.zeros((n, A + 2), dtype=np.int64)
    fail = np.zeros(n, dtype=np.int64)
    # one depth at a time: a node's failure node is shallower, so its goto row is final
    # before the node's own row copies it (a per-node loop cost ~15 % of PEP's time)
    level_starts = np.searchsorted(node_depth, np.arange(node_depth[-1] + 2))
    for d in range(len(level_starts) - 1):
        level = np.arange(level_starts[d], level_starts[d + 1])
        if d:
            level = level[~is_eos_node[level]]
            goto[level] = goto[fail[level]]
        if d + 1 < len(level_starts) - 1:
            child = np.arange(level_starts[d + 1], level_starts[d + 2])
            parent, c = node_parent[child], node_column[child]
            fail[child] = goto[fail[parent], c] if d else 0
            goto[parent, c] = child
    # states: the root and every node with a child (a leaf's future equals its failure
    # state's; its features still fire on the cell that reaches it)
    has_child = np.zeros(n, dtype=bool)
    has_child[node_parent[1:]] = True
    is_state = has_child.copy()
    is_state[0] = True
    state_rep = np.arange(n)
    for d in range(1, len(level_starts) - 1):
        level = np.arange(level_starts[d], level_starts[d + 1])
        level = level[~is_state[level]]
        state_rep[level] = state_rep[fail[level]]
    state_nodes = np.flatnonzero(is_state)
    state_of_node = np.full(n, -1, dtype=np.int64)
    state_of_node[state_nodes] = np.arange(len(state_nodes))
    S = len(state_nodes)
    next_state = state_of_node[state_rep[goto[state_nodes, :A]]]
    cell_node = np.concatenate([goto[state_nodes, :A].ravel(), goto[state_nodes, A + 1]])
    cells, feats = [], []
    current = cell_node.copy()
    cell_index = np.arange(len(cell_node))
    while True:
        live = current != 0
        if not live.any():
            break
        cells.append(cell_index[live])
        feats.append(current[live] - 1)  # local feature = node index − 1 (the root fires nothing)
        current = np.where(live, fail[current], 0)
    cell_of = np.concatenate(cells) if cells else np.zeros(0, dtype=np.int64)
    feat_of = np.concatenate(feats) if feats else np.zeros(0, dtype=np.int64)
    order = np.argsort(cell_of, kind="stable")
    ptr = np.zeros(S * (A + 1) + 1, dtype=np.int64)
    ptr[1:] = np.cumsum(np.bincount(cell_of, minlength=S * (A + 1)))
    # the features fired by reading ^ are constant (count 1 in every string): left out
    start = int(state_of_node[state_rep[goto[0, A]]])
    labels = tuple("".join(registry.strings[int(i)]) for i in nodes[state_nodes])
    return FeatureMachine(alphabet, next_state, start, ptr, feat_of[order], nodes[1:].copy(), labels)
