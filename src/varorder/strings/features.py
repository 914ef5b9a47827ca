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
  is a trie node; reading a fires every trie node that is a suffix of (state · a). Its
  size is governed by the number of distinct prefixes — the quantity eq. 8 counts.

:meth:`FeatureMachine.expected_counts` computes E_p[f] for p = W ⊙ ENCODE(θ) (W any
acceptor, possibly cyclic, with ε arcs) by the product with 𝒜 and one pair of sparse
solves (:func:`varorder.wfsa.arc_posteriors`) — Li, Eisner & Khudanpur (2009, fn. 9).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from varorder.wfsa import Wfsa, arc_posteriors, product_with_dfa, universal_acceptor

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

    def _cell_of_entry(self) -> np.ndarray:
        return np.repeat(np.arange(self.n_cells), np.diff(self.cell_ptr))

    def weights(self, theta) -> tuple[np.ndarray, np.ndarray]:
        """ENCODE(θ): (cell weights (S, A), end weights (S,)) from the global vector θ."""
        local = np.asarray(theta, dtype=np.float64)[self.feature_ids]
        w = np.bincount(self._cell_of_entry(), weights=local[self.cell_feature], minlength=self.n_cells)
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
        stands for the universal acceptor (then p = q_θ). ValueError when Z diverges."""
        if acceptor is None:
            acceptor = universal_acceptor(self.alphabet)
        cell_w, end_w = self.weights(theta)
        product, arc_cell, _ = product_with_dfa(acceptor, self.next_state, self.start, cell_w, end_w)
        arc_counts, final_counts, log_z = arc_posteriors(product)
        S, A = self.next_state.shape
        cell_counts = np.bincount(arc_cell[arc_cell >= 0], weights=arc_counts[arc_cell >= 0], minlength=self.n_cells)
        cell_counts[S * A:] += np.bincount(np.arange(product.n_states) % S, weights=final_counts, minlength=S)
        counts = np.bincount(self.cell_feature, weights=cell_counts[self._cell_of_entry()],
                             minlength=len(self.feature_ids))
        return counts, log_z

    def log_partition(self, theta) -> float:
        return self.expected_counts(None, theta)[1]


# ---------------------------------------------------------------------------
# the fixed n-gram family
# ---------------------------------------------------------------------------


def ngram_machine(alphabet, order: int) -> FeatureMachine:
    """The n-gram family's automaton: state = last min(n − 1, t + 1) symbols of ``^ x₁…x_t``,
    one feature per cell (global id = cell id)."""
    if order < 1:
        raise ValueError(f"order must be ≥ 1, got {order}")
    alphabet = tuple(alphabet)
    A = len(alphabet)
    ids: dict[tuple, int] = {}
    names: list[tuple] = []

    def sid(h):
        if h not in ids:
            ids[h] = len(names)
            names.append(h)
        return ids[h]

    sid((BOS,)[: order - 1])
    table = []
    i = 0
    while i < len(names):
        h = names[i]
        table.append([sid((h + (x,))[-(order - 1):] if order > 1 else ()) for x in alphabet])
        i += 1
    next_state = np.array(table, dtype=np.int64).reshape(len(names), A)
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

    def __len__(self) -> int:
        return len(self.strings)

    def add(self, string: tuple) -> int:
        i = self.ids.get(string)
        if i is None:
            i = self.ids[string] = len(self.strings)
            self.strings.append(string)
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
    here; the root id 0 is not a feature and fires nothing)."""
    alphabet = registry.alphabet
    A = len(alphabet)
    nodes = {registry.strings[int(i)] for i in ids}
    closed = set()
    for w in nodes:
        for n in range(len(w) + 1):
            closed.add(w[:n])
    local_of = {}
    feature_ids = []
    for w in sorted(closed):
        if w:
            local_of[w] = len(feature_ids)
            feature_ids.append(registry.add(w))
    states = sorted((w for w in closed if EOS not in w), key=lambda w: (len(w), w))
    state_of = {w: k for k, w in enumerate(states)}

    def longest_suffix_state(h):
        for i in range(len(h) + 1):
            if h[i:] in state_of:
                return state_of[h[i:]]
        return state_of[()]

    def fired(h):
        return [local_of[h[i:]] for i in range(len(h)) if h[i:] in local_of]

    next_state = np.zeros((len(states), A), dtype=np.int64)
    cells: list[list] = [[] for _ in range(len(states) * (A + 1))]
    for s, h in enumerate(states):
        for a, x in enumerate(alphabet):
            ha = h + (x,)
            next_state[s, a] = longest_suffix_state(ha)
            cells[s * A + a] = fired(ha)
        cells[len(states) * A + s] = fired(h + (EOS,))
    start_history = (BOS,)
    start = longest_suffix_state(start_history)
    # the features fired by reading ^ are constant (count 1 in every string): left out
    ptr = np.zeros(len(cells) + 1, dtype=np.int64)
    ptr[1:] = np.cumsum([len(c) for c in cells])
    flat = np.array([f for c in cells for f in c], dtype=np.int64)
    return FeatureMachine(alphabet, next_state, start, ptr, flat, np.array(feature_ids, dtype=np.int64),
                          tuple("".join(h) for h in states))
