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

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from varorder.exact.target import HighOrderTarget
from varorder.lattice import Lattice

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
        self._chains[0].append((1, 0))
        # Per position: suffix state and context length of each state (for the arc tables).
        self._parents: list[list[int]] = [[0] for _ in range(T + 1)]
        self._depths: list[list[int]] = [[0] for _ in range(T + 1)]
        self._parents[0].append(0)
        self._depths[0].append(1)
        # Per position: (prefix state, candidate index, child state) and
        # (context state, candidate index, bound) of every refinement, for the arc tables.
        self._child_entries: list[list[tuple[int, int, int]]] = [[] for _ in range(T + 1)]
        self._ngram_entries: list[list[tuple[int, int, float]]] = [[] for _ in range(T + 1)]
        # _children[j][x][prefix state at j-1] = state (prefix + x) at j.
        self._children: list[dict[int, dict[int, int]]] = [{} for _ in range(T + 1)]
        # _ngrams[j][x][context state at j-1] = log w(x | context) refined at position j.
        self._ngrams: list[dict[int, dict[int, float]]] = [{} for _ in range(T + 1)]
        self._unigram = [None] + [
            np.asarray([self.weights((), int(s)) for s in target.symbols[j - 1]]) for j in range(1, T + 1)
        ]
        self._index_of = [None] + [{int(s): k for k, s in enumerate(target.symbols[j - 1])} for j in range(1, T + 1)]
        self.order_counts: Counter = Counter({1: sum(len(s) for s in target.symbols)})
        self._arcs: list[tuple[np.ndarray, ...] | None] = [None] * (T + 1)
        self._dirty = np.ones(T + 1, dtype=bool)
        self._lattice: Lattice | None = None
        self._node_states: list[np.ndarray] = []
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
        if context == ():
            return 0
        prefix = self._ensure_state(position - 1, context[:-1])
        by_prefix = self._children[position].setdefault(context[-1], {})
        state = by_prefix.get(prefix)
        if state is not None:
            return state
        suffix = self._ensure_state(position, context[1:])
        # The suffix call may have created nothing under this key, so re-read is not needed.
        state = len(self._contexts[position])
        self._contexts[position].append(context)
        self._chains[position].append((state,) + self._chains[position][suffix])
        by_prefix[prefix] = state
        self._parents[position].append(suffix)
        self._depths[position].append(len(context))
        self._child_entries[position].append((prefix, self._index_of[position][context[-1]], state))
        self._dirty[position] = True
        if position < self.num_positions:
            self._dirty[position + 1] = True
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

    def _position_arcs(self, position: int) -> tuple[np.ndarray, ...]:
        """(source state, target state, label, weight) of every arc into ``position``.

        A state's row (target and bound per candidate) is its suffix state's row with the
        entries refined for the state itself overriding it; rows are filled one context
        length at a time, so each suffix row is final before it is copied.
        """
        n_prev = len(self._contexts[position - 1])
        n_cand = len(self.target.symbols[position - 1])
        parents = np.asarray(self._parents[position - 1], dtype=np.int64)
        depths = np.asarray(self._depths[position - 1], dtype=np.int64)
        targets = np.zeros((n_prev, n_cand), dtype=np.int64)
        bounds = np.empty((n_prev, n_cand))
        bounds[0] = self._unigram[position]
        children = np.asarray(self._child_entries[position], dtype=np.int64).reshape(-1, 3)
        ngrams = np.asarray(self._ngram_entries[position], dtype=np.float64).reshape(-1, 3)
        ngram_states = ngrams[:, 0].astype(np.int64)
        ngram_cands = ngrams[:, 1].astype(np.int64)
        for depth in range(int(depths.max()) + 1):
            if depth:
                level = np.flatnonzero(depths == depth)
                targets[level] = targets[parents[level]]
                bounds[level] = bounds[parents[level]]
            at_level = depths[children[:, 0]] == depth
            targets[children[at_level, 0], children[at_level, 1]] = children[at_level, 2]
            at_level = depths[ngram_states] == depth
            bounds[ngram_states[at_level], ngram_cands[at_level]] = ngrams[at_level, 2]
        sources = np.asarray([_ROOT], dtype=np.int64) if position == 1 else np.arange(n_prev, dtype=np.int64)
        weights = bounds[sources] + self.target.logliks[position - 1][None, :]
        return (np.repeat(sources, n_cand), targets[sources].ravel(),
                np.tile(self.target.symbols[position - 1], len(sources)), weights.ravel())

    # ------------------------------------------------------------------ the lattice

    def lattice(self) -> Lattice:
        """q unrolled over positions, restricted to reachable states (cached until the
        next refinement). Arc labels are symbol ids; the score of a path is log q(x)."""
        if self._lattice is not None and not self._dirty.any():
            return self._lattice
        T = self.num_positions
        for j in range(1, T + 1):
            if self._dirty[j] or self._arcs[j] is None:
                self._arcs[j] = self._position_arcs(j)
        self._dirty[:] = False
        node_states = [np.asarray([_ROOT], dtype=np.int64)]
        node_of_state = np.full(2, -1, dtype=np.int64)
        node_of_state[_ROOT] = 0
        n_nodes = 1
        positions = [np.zeros(1, dtype=np.int64)]
        parts = []
        for j in range(1, T + 1):
            src, dst, lab, wts = self._arcs[j]
            keep = node_of_state[src] >= 0
            src, dst, lab, wts = src[keep], dst[keep], lab[keep], wts[keep]
            reached = np.unique(dst)
            next_node = np.full(len(self._contexts[j]), -1, dtype=np.int64)
            next_node[reached] = n_nodes + np.arange(len(reached))
            parts.append((node_of_state[src], next_node[dst], lab, wts))
            positions.append(np.full(len(reached), j, dtype=np.int64))
            node_states.append(reached)
            n_nodes += len(reached)
            node_of_state = next_node
        final = np.full(n_nodes, -np.inf)
        final[n_nodes - len(node_states[-1]):] = 0.0
        self._node_states = node_states
        self._lattice = Lattice(
            np.concatenate(positions),
            np.concatenate([p[0] for p in parts]),
            np.concatenate([p[1] for p in parts]),
            np.concatenate([p[2] for p in parts]),
            np.concatenate([p[3] for p in parts]),
            final,
        )
        return self._lattice

    @property
    def num_states(self) -> int:
        """Reachable states over all positions (lattice nodes, the root included)."""
        self.lattice()
        return int(sum(len(s) for s in self._node_states))

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
        trace = self.trace(path)
        history = (self.target.bos,) + tuple(trace.symbols)
        raised = 0
        for i in range(1, self.num_positions + 1):
            used = trace.weight_states[i - 1]
            context_length = 0 if used < 0 else len(self._contexts[i - 1][used])
            if context_length >= self.target.full_context_length(i):
                continue
            if context_length and not self.weights.context_is_stored(self._contexts[i - 1][used]):
                continue  # the bound is exact already
            symbol = trace.symbols[i - 1]
            context = history[i - context_length - 1 : i]
            state = self._ensure_state(i - 1, context)
            by_context = self._ngrams[i].setdefault(symbol, {})
            if state in by_context:
                continue
            # min(): a longer context never has a larger bound; guard against rounding.
            bound = min(self.weights(context, symbol), trace.bounds[i - 1])
            by_context[state] = bound
            self._ngram_entries[i].append((state, self._index_of[i][symbol], bound))
            self.order_counts[len(context) + 1] += 1
            self._dirty[i] = True
            raised += 1
        self.num_refinements += 1
        return raised
