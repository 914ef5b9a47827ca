"""The q-automaton: a variable-order upper bound q >= p of a high-order HMM, refined
along rejected paths (Carter, Dymetman & Bouchard 2012, §2.1-2.2, Algorithm 2).

Factorization. q(x) = prod_{i=1..T} w(x_i | c_i(x)) p_obs(o_i | x_i), where c_i(x) is a
suffix of the true history <s> x_1 .. x_{i-1} and w(x | c) = max_e p_lm(x | e c) is the
max-backoff bound (eq. 2). Because c_i is a suffix of the history, every factor is at
least the true LM factor, so q(x) >= p(x) for every x; initially every c_i is empty
(the unigram bound q^(0) of eq. 6).

Structure. At each position j the automaton has a set S_j of context states (tuples of
symbols, suffix-closed, each state's prefix without its last symbol a state at j - 1);
reading symbol x from state s at j - 1 leads to the longest state of S_j that is a suffix
of s x (the automaton is deterministic), and the arc weighs w(x | u) p_obs(o_j | x) with
u the longest suffix of s among the n-grams (u, x) refined at position j so far (the
unigram bound when none). Adding a longer n-gram only lowers some arc weights, and adding
a state only splits paths, so q never gains mass.

Refinement (Algorithm 2, UpdateHMM) at position i of a rejected path: if the factor used
the order-k n-gram, raise it to order k + 1: create the context state (and, recursively,
the states at earlier positions that lead to it, which is the paper's "move the incoming
edges of matching suffix states"), copy its outgoing arcs from its suffix state (implicit:
a new state's arcs are looked up through its suffix chain) and lower the weights of the
arcs labelled x_i leaving every state with that context as suffix to w_{k+1}. A factor is
at full order when its context holds the whole history the LM uses (n - 1 symbols, or all
of <s> x_1 .. x_{i-1} near the start), or when its context is not a stored n-gram (then
the bound equals p already, see :class:`~varorder.exact.target.MaxBackoffWeights`); on
such a path q = p.

Unrolled over positions, the automaton is a :class:`varorder.lattice.Lattice` (nodes =
reachable (position, state), arcs labelled by symbols): Viterbi, sampling and log q(X)
are the engine's.
"""

from __future__ import annotations

from array import array
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numba
import numpy as np

from varorder.exact.target import HighOrderTarget
from varorder.engine.lattice import viterbi_kernel
from varorder.lattice import Lattice
from varorder.lm.model import LN10

__all__ = ["QAutomaton", "PathTrace"]

_ROOT = 1  # at position 0, state 0 is the empty context (a prefix only) and state 1 is (<s>,)


@dataclass
class PathTrace:
    """Where one path runs through the automaton: per position 1..T, the source state, the
    state whose n-gram gave the weight (-1: the unigram bound), the LM bound and log q."""

    symbols: list[int]
    sources: list[int]
    weight_states: list[int]
    bounds: list[float]
    log_q: float


class _QArrays(NamedTuple):
    """The current q's lattice arrays plus, per arc, its source's local state and its
    weight state (-1: unigram bound), and the arcs grouped by target."""

    positions: np.ndarray
    sources: np.ndarray
    targets: np.ndarray
    labels: np.ndarray
    weights: np.ndarray
    final: np.ndarray
    from_state: np.ndarray
    weight_state: np.ndarray
    bound: np.ndarray           # the LM bound of the arc's weight (exact stored value)
    candidate: np.ndarray       # flat candidate index (into the concatenated candidate lists)
    context_length: np.ndarray  # length of the weight state's context (0: unigram bound)
    in_offsets: np.ndarray
    in_arcs: np.ndarray
    ints: np.ndarray            # (7, A): the int columns above, one row each
    floats: np.ndarray          # (2, A): weights, bound


class QAutomaton:
    """Variable-order upper bound of a :class:`~varorder.exact.target.HighOrderTarget`.

    Use :meth:`lattice` for the current q (nodes are reachable (position, state) pairs),
    :meth:`refine` on a rejected path, :meth:`log_q` for q of a path.
    """

    def __init__(self, target: HighOrderTarget):
        if not isinstance(target, HighOrderTarget):
            raise ValueError(f"target must be a HighOrderTarget, got {type(target).__name__}")
        self.target = target
        self.weights = target.weights
        T = target.num_positions
        self.num_positions = T
        bos = target.bos
        # Per position j = 0..T: contexts, suffix chains (state, its suffix, ..., empty).
        self._contexts: list[list[tuple[int, ...]]] = [[()] for _ in range(T + 1)]
        self._chains: list[list[tuple[int, ...]]] = [[(0,)] for _ in range(T + 1)]
        self._contexts[0].append((bos,))
        # Every state's id by its context (per position), for the refinement's lookups.
        self._state_of: list[dict[tuple[int, ...], int]] = [{(): 0} for _ in range(T + 1)]
        self._state_of[0][(bos,)] = _ROOT
        self._chains[0].append((1, 0))
        # Flat records for the arc kernel, in creation order (local ids grow within a
        # position): (position, suffix state) per state, (position, prefix state,
        # candidate index, child state) per state, (position, context state, candidate
        # index, bound) per refined n-gram.
        self._state_records = array("q", [v for j in range(T + 1) for v in (j, 0, 0)] + [0, 0, 1])
        self._child_records = array("q")
        self._ngram_keys = array("q")
        self._ngram_bounds = array("d")
        # _children[j][x][prefix state at j-1] = state (prefix + x) at j.
        self._children: list[dict[int, dict[int, int]]] = [{} for _ in range(T + 1)]
        # _ngrams[j][x][context state at j-1] = log w(x | context) refined at position j.
        self._ngrams: list[dict[int, dict[int, float]]] = [{} for _ in range(T + 1)]
        self._candidate_symbols = np.concatenate(target.symbols).astype(np.int64)
        self._candidate_unigram = self.weights.unigram_bounds()[self._candidate_symbols]
        self._candidate_logliks = np.concatenate(target.logliks).astype(np.float64)
        sizes = [len(c) for c in target.symbols]
        self._candidate_offsets = np.zeros(T + 1, dtype=np.int64)
        np.cumsum(sizes, out=self._candidate_offsets[1:])
        offsets = self._candidate_offsets.tolist()
        self._unigram = [None] + [self._candidate_unigram[offsets[j - 1]:offsets[j]] for j in range(1, T + 1)]
        self._index_of = [None] + [dict(zip(symbols.tolist(), range(len(symbols)))) for symbols in target.symbols]
        self.order_counts: Counter = Counter({1: sum(sizes)})
        self._lattice: Lattice | None = None
        self._cached: _QArrays | None = None
        self._num_reachable = 0
        self.num_refinements = 0

    # ------------------------------------------------------------------ structure

    def _ensure_state(self, position: int, context: tuple[int, ...]) -> int:
        """Id of state ``context`` at ``position``, created (with its suffix and its
        prefix one position earlier) when missing."""
        if position == 0:
            if context == ():
                return 0
            if context == (self.target.bos,):
                return _ROOT
            raise AssertionError(f"no state {context} at position 0")
        known = self._state_of[position].get(context)
        if known is not None:
            return known
        # Not a state yet (``_state_of`` lists every state); its prefix and suffix usually are.
        prefix = self._state_of[position - 1].get(context[:-1])
        if prefix is None:
            prefix = self._ensure_state(position - 1, context[:-1])
        suffix = self._state_of[position].get(context[1:])
        if suffix is None:
            suffix = self._ensure_state(position, context[1:])
        by_prefix = self._children[position].setdefault(context[-1], {})
        state = len(self._contexts[position])
        self._contexts[position].append(context)
        self._chains[position].append((state,) + self._chains[position][suffix])
        by_prefix[prefix] = state
        self._state_of[position][context] = state
        self._state_records.extend((position, suffix, len(context)))
        self._child_records.extend((position, prefix, self._index_of[position][context[-1]], state))
        self._invalidate()  # cheap; refine_trace also invalidates once at its end
        return state

    def _step(self, position: int, source: int, symbol: int) -> tuple[int, int, float]:
        """(target state, weight state or -1, LM bound) of reading ``symbol`` at
        ``position`` from ``source`` (a state at position - 1)."""
        chain = self._chains[position - 1][source]
        target = 0
        children = self._children[position].get(symbol)
        if children:
            for u in chain:
                found = children.get(u)
                if found is not None:
                    target = found
                    break
        ngrams = self._ngrams[position].get(symbol)
        if ngrams:
            for u in chain:
                bound = ngrams.get(u)
                if bound is not None:
                    return target, u, bound
        return target, -1, float(self._unigram[position][self._index_of[position][symbol]])

    def _invalidate(self) -> None:
        self._lattice = None
        self._cached = None

    def _arrays(self) -> "_QArrays":
        """The arc arrays of the current q (cached until the next refinement)."""
        if self._cached is not None:
            return self._cached
        T = self.num_positions
        # Copies: a live view would stop the array.array records from growing.
        states = np.frombuffer(self._state_records, dtype=np.int64).copy().reshape(-1, 3)
        children = np.frombuffer(self._child_records, dtype=np.int64).copy().reshape(-1, 4)
        ngram_keys = np.frombuffer(self._ngram_keys, dtype=np.int64).copy().reshape(-1, 3)
        ngram_bounds = np.frombuffer(self._ngram_bounds, dtype=np.float64).copy()
        positions, final, ints, floats, in_offsets, in_arcs = _build_arcs(
            T, states, children, ngram_keys, ngram_bounds,
            self._candidate_offsets, self._candidate_symbols, self._candidate_unigram, self._candidate_logliks)
        n_nodes = len(positions)
        sources, targets, labels, from_state, weight_state, candidate, context_length = ints
        weights, bound = floats
        self._num_reachable = int(n_nodes)
        self._cached = _QArrays(positions, sources, targets, labels, weights, final, from_state, weight_state,
                                bound, candidate, context_length, in_offsets, in_arcs, ints, floats)
        return self._cached

    def lattice(self) -> Lattice:
        """q unrolled over positions, restricted to reachable states (cached until the
        next refinement). Arc labels are symbol ids; the score of a path is log q(x)."""
        if self._lattice is None:
            a = self._arrays()
            self._lattice = Lattice(a.positions, a.sources, a.targets, a.labels, a.weights, a.final)
        return self._lattice

    def best_path(self) -> tuple[np.ndarray, float]:
        """(arc ids of the Viterbi path of q, root first; its log q), -inf when q has no
        path. Runs the engine's lattice Viterbi kernel on the arrays :meth:`lattice` would
        wrap; the decode loop calls it once per iteration, so it skips building (and
        re-validating) a :class:`~varorder.lattice.Lattice` whose arrays this class
        constructs itself."""
        a = self._arrays()
        arcs, score = viterbi_kernel(len(a.positions), a.in_offsets, a.in_arcs, a.sources, a.weights, a.final,
                                     a.positions)
        return arcs, float(score)

    def trace_arcs(self, arcs: np.ndarray) -> PathTrace:
        """:meth:`trace` of a path given as arc ids of the current :meth:`lattice` (as
        :meth:`best_path` and :func:`varorder.lattice.sample_arcs` return them): read off
        the arcs instead of walking the suffix chains."""
        a = self._arrays()
        arcs = np.asarray(arcs, dtype=np.int64)
        if arcs.shape != (self.num_positions,) or arcs.min() < 0 or arcs.max() >= len(a.labels):
            raise ValueError(f"arcs must be {self.num_positions} arc ids of the current lattice")
        ints = a.ints[:, arcs].tolist()  # rows: source, target, label, from, weight state, ...
        floats = a.floats[:, arcs]
        return PathTrace(ints[2], ints[3], ints[4], floats[1].tolist(), float(floats[0].sum()))

    def path_log_p(self, arcs: np.ndarray) -> float:
        """log p of the path given by ``arcs`` of the current lattice: the same value as
        ``target.log_p(labels)``, with the observation terms gathered from the arcs."""
        a = self._arrays()
        target = self.target
        obs = self._candidate_logliks[a.candidate[arcs]]
        words = a.labels[arcs[: target.length]].astype(np.int32)
        log10, _ = target.lm.token_log10probs(words, bos=True, eos=target.eos)
        return float(log10.sum() * LN10 + obs.sum())

    def below_full_order(self, arcs: np.ndarray) -> np.ndarray:
        """Positions (1-based) of the path ``arcs`` whose factor uses a context shorter
        than the history the LM reads there (candidates for refinement)."""
        a = self._arrays()
        positions = np.arange(1, self.num_positions + 1)
        full = np.minimum(positions, self.target.order - 1)
        return positions[a.context_length[arcs] < full]

    @property
    def num_states(self) -> int:
        """Reachable states over all positions (lattice nodes, the root included)."""
        self._arrays()
        return self._num_reachable

    @property
    def num_created_states(self) -> int:
        """Every state ever created (reachable or not), the root included."""
        return 1 + sum(len(c) for c in self._contexts[1:])

    def ngram_counts(self) -> dict[int, int]:
        """n-grams per order in q: order 1 counts the unigram-bounded (position, candidate)
        pairs, order k > 1 the n-grams refined to order k (paper Table 1)."""
        return dict(sorted(self.order_counts.items()))

    # ------------------------------------------------------------------ paths

    def trace(self, path: Sequence[int]) -> PathTrace:
        """Run ``path`` (T symbol ids, ``</s>`` last with eos) through the automaton."""
        path = [int(s) for s in path]
        if len(path) != self.num_positions:
            raise ValueError(f"path must have {self.num_positions} symbols, got {len(path)}")
        state = _ROOT
        sources, weight_states, bounds = [], [], []
        log_q = 0.0
        for j, symbol in enumerate(path, start=1):
            k = self._index_of[j].get(symbol)
            if k is None:
                raise ValueError(f"symbol {symbol} is not a candidate at position {j}")
            target, used, bound = self._step(j, state, symbol)
            sources.append(state)
            weight_states.append(used)
            bounds.append(bound)
            log_q += bound + float(self.target.logliks[j - 1][k])
            state = target
        return PathTrace(path, sources, weight_states, bounds, log_q)

    def log_q(self, path: Sequence[int]) -> float:
        return self.trace(path).log_q

    def refine(self, path: Sequence[int]) -> int:
        """Algorithm 2 at every position of ``path``: raise each factor not yet at full
        order by one order. Returns the number of n-grams raised (0: q = p on the path)."""
        return self.refine_trace(self.trace(path))

    def refine_trace(self, trace: PathTrace, positions=None) -> int:
        """:meth:`refine` of a path already traced (by :meth:`trace` or :meth:`trace_arcs`
        on the current q). ``positions``, when given, lists the positions below full order
        (:meth:`below_full_order`), which are then not recomputed from the trace. The LM
        bounds of the raised n-grams are looked up in one batch."""
        history = (self.target.bos,) + tuple(trace.symbols)
        # Positions whose factor is below full order, and their contexts as stored n-grams.
        if positions is None:
            full_length = self.target.order - 1
            positions = [i for i in range(1, self.num_positions + 1)
                         if (0 if trace.weight_states[i - 1] < 0
                             else len(self._contexts[i - 1][trace.weight_states[i - 1]])) < min(full_length, i)]
        todo = []
        for i in np.asarray(positions, dtype=np.int64).tolist():
            used = trace.weight_states[i - 1]
            todo.append((i, 0 if used < 0 else len(self._contexts[i - 1][used]), used))
        stored = iter(self.weights.contexts_stored([self._contexts[i - 1][used] for i, length, used in todo if length]))
        raising = []
        for i, context_length, used in todo:
            if context_length and not next(stored):
                continue  # the context is not a stored n-gram: the bound is exact already
            symbol = trace.symbols[i - 1]
            context = history[i - context_length - 1 : i]
            state = self._state_of[i - 1].get(context)
            if state is None:
                state = self._ensure_state(i - 1, context)
            if state not in self._ngrams[i].get(symbol, ()):
                raising.append((i, symbol, context, state))
        bounds = self.weights.many([(context, symbol) for i, symbol, context, state in raising])
        raised = 0
        for (i, symbol, context, state), bound in zip(raising, bounds):
            by_context = self._ngrams[i].setdefault(symbol, {})
            if state in by_context:
                continue  # the same n-gram twice on one path cannot happen, but stay safe
            # min(): a longer context never has a larger bound; guard against rounding.
            bound = min(bound, trace.bounds[i - 1])
            by_context[state] = bound
            self._ngram_keys.extend((i, state, self._index_of[i][symbol]))
            self._ngram_bounds.append(bound)
            self.order_counts[len(context) + 1] += 1
            raised += 1
        if raised:
            self._invalidate()
        self.num_refinements += 1
        return raised


@numba.njit(cache=True)
def _build_arcs(T, states, children, ngram_keys, ngram_bounds,
                cand_offsets, cand_symbols, cand_unigram, cand_logliks):
    """Arcs of q over reachable states, position by position.

    A state's row (target state, weight and the state whose n-gram gave the weight, per
    candidate) is its suffix state's row with the entries refined for the state itself
    overriding it; suffix states have smaller ids, so rows are filled in id order. Only
    states reached from the root emit arcs. Besides the lattice arrays, every arc records
    its source's local state id and its weight state (-1: the unigram bound), so that a
    path's trace is read off its arcs; and the arcs grouped by target (``in_offsets``,
    ``in_arcs``, the engine's layout) come out of a counting sort.
    """
    # States (position, suffix, context length) in creation order; grouped by position
    # (a stable counting sort keeps each position's local ids in order).
    state_counts = np.zeros(T + 1, np.int64)
    for r in range(states.shape[0]):
        state_counts[states[r, 0]] += 1
    state_offsets = np.zeros(T + 2, np.int64)
    for j in range(T + 1):
        state_offsets[j + 1] = state_offsets[j] + state_counts[j]
    state_parents = np.empty(states.shape[0], np.int64)
    state_lengths = np.empty(states.shape[0], np.int64)
    fill_state = state_offsets[: T + 1].copy()
    for r in range(states.shape[0]):
        slot = fill_state[states[r, 0]]
        state_parents[slot] = states[r, 1]
        state_lengths[slot] = states[r, 2]
        fill_state[states[r, 0]] += 1
    # Entries grouped by (position, state) through linked lists.
    n_states_total = state_offsets[T + 1]
    child_head = np.full(n_states_total, -1, np.int64)
    child_next = np.full(children.shape[0], -1, np.int64)
    for e in range(children.shape[0]):
        key = state_offsets[children[e, 0] - 1] + children[e, 1]  # prefix state lives at position - 1
        child_next[e] = child_head[key]
        child_head[key] = e
    ngram_head = np.full(n_states_total, -1, np.int64)
    ngram_next = np.full(ngram_keys.shape[0], -1, np.int64)
    for e in range(ngram_keys.shape[0]):
        key = state_offsets[ngram_keys[e, 0] - 1] + ngram_keys[e, 1]
        ngram_next[e] = ngram_head[key]
        ngram_head[key] = e
    max_arcs = 0
    for j in range(1, T + 1):
        max_arcs += state_counts[j - 1] * (cand_offsets[j] - cand_offsets[j - 1])
    # Per-arc columns packed into two matrices (one row per field): returning two arrays
    # instead of nine saves the per-array boxing on every decode iteration.
    arc_ints = np.empty((7, max_arcs), np.int64)
    arc_floats = np.empty((2, max_arcs), np.float64)
    sources = arc_ints[0]
    targets = arc_ints[1]
    labels = arc_ints[2]
    from_state = arc_ints[3]
    weight_state = arc_ints[4]
    arc_candidate = arc_ints[5]
    arc_context_length = arc_ints[6]
    weights = arc_floats[0]
    arc_bound = arc_floats[1]
    positions = np.empty(n_states_total, np.int64)
    # Position 0: only the root (local state 1) is a node.
    node_of = np.full(state_counts[0], -1, np.int64)
    node_of[1] = 0
    positions[0] = 0
    n_nodes = 1
    n_arcs = 0
    for j in range(1, T + 1):
        n_prev = state_counts[j - 1]
        c0 = cand_offsets[j - 1]
        k = cand_offsets[j] - c0
        base = state_offsets[j - 1]
        row_target = np.zeros((n_prev, k), np.int64)
        row_bound = np.empty((n_prev, k), np.float64)
        row_wstate = np.full((n_prev, k), -1, np.int64)
        for s in range(n_prev):
            if s == 0:
                for c in range(k):
                    row_bound[0, c] = cand_unigram[c0 + c]
            else:
                parent = state_parents[base + s]
                for c in range(k):
                    row_target[s, c] = row_target[parent, c]
                    row_bound[s, c] = row_bound[parent, c]
                    row_wstate[s, c] = row_wstate[parent, c]
            e = child_head[base + s]
            while e >= 0:
                row_target[s, children[e, 2]] = children[e, 3]
                e = child_next[e]
            e = ngram_head[base + s]
            while e >= 0:
                c = ngram_keys[e, 2]
                row_bound[s, c] = ngram_bounds[e]
                row_wstate[s, c] = s
                e = ngram_next[e]
        next_node = np.full(state_counts[j], -1, np.int64)
        first_arc = n_arcs
        for s in range(n_prev):
            if node_of[s] < 0:
                continue
            for c in range(k):
                t = row_target[s, c]
                if next_node[t] < 0:
                    next_node[t] = 0  # reached; numbered below
                sources[n_arcs] = node_of[s]
                targets[n_arcs] = t
                labels[n_arcs] = cand_symbols[c0 + c]
                weights[n_arcs] = row_bound[s, c] + cand_logliks[c0 + c]
                from_state[n_arcs] = s
                u = row_wstate[s, c]
                weight_state[n_arcs] = u
                arc_bound[n_arcs] = row_bound[s, c]
                arc_candidate[n_arcs] = c0 + c
                arc_context_length[n_arcs] = 0 if u < 0 else state_lengths[base + u]
                n_arcs += 1
        for t in range(state_counts[j]):
            if next_node[t] == 0:
                next_node[t] = n_nodes
                positions[n_nodes] = j
                n_nodes += 1
        for a in range(first_arc, n_arcs):
            targets[a] = next_node[targets[a]]
        node_of = next_node
    # Arcs grouped by target, in arc order within a target (a stable counting sort).
    in_offsets = np.zeros(n_nodes + 1, np.int64)
    for a in range(n_arcs):
        in_offsets[targets[a] + 1] += 1
    for v in range(n_nodes):
        in_offsets[v + 1] += in_offsets[v]
    fill = in_offsets[:n_nodes].copy()
    in_arcs = np.empty(n_arcs, np.int64)
    for a in range(n_arcs):
        in_arcs[fill[targets[a]]] = a
        fill[targets[a]] += 1
    final = np.full(n_nodes, -np.inf)
    for v in range(n_nodes):
        if positions[v] == T:
            final[v] = 0.0
    return positions[:n_nodes], final, arc_ints[:, :n_arcs], arc_floats[:, :n_arcs], in_offsets, in_arcs
