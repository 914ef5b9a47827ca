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

Representation. States and refined n-grams live in flat integer tables, one column per
record, that compiled kernels read and extend (the engine's growable tables,
:func:`varorder.engine.builder.grown_columns`): a state is (position, suffix state, prefix state, last
symbol, context length) plus the heads of two linked lists (the states it is the prefix
of, the n-grams it is the context of). Tracing a path, refining it, its log p (exact
back-off, :func:`varorder.lm._kernels.backoff_log10prob`) and the bounds of the raised
n-grams (:func:`varorder.lm._kernels.max_backoff_log10prob`) are Numba code, and so is
one whole iteration of Algorithm 1 in optimisation mode (:meth:`QAutomaton.decode_steps`),
whose Viterbi is the engine's lattice kernel.

Unrolled over positions, the automaton is a :class:`varorder.lattice.Lattice` (nodes =
reachable (position, state), arcs labelled by symbols): Viterbi, sampling and log q(X)
are the engine's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numba
import numpy as np

from varorder.engine.builder import grown1, grown_columns
from varorder.engine.lattice import sample_kernel, viterbi_kernel
from varorder.errors import ParameterError
from varorder.exact import model as model_kernels
from varorder.exact.target import HighOrderTarget
from varorder.lattice import Lattice
import varorder._numba_start  # noqa: E402,F401,I001  (Numba's cache saves locked across processes)

__all__ = ["QAutomaton", "PathTrace", "DecodeSteps"]

_ROOT = 1  # global id of (<s>,) at position 0; state 0 is position 0's empty context

# Rows of the state table (one column per state, global ids in creation order).
_POS, _LOCAL, _SUFFIX, _PREFIX, _CAND, _LENGTH, _CHILD_HEAD, _SIBLING, _NGRAM_HEAD = range(9)
_STATE_ROWS = 9
# Rows of the n-gram table: candidate index (at the context's position + 1), next n-gram
# of the same context, the context state.
_NG_CAND, _NG_NEXT, _NG_CONTEXT = range(3)
_NGRAM_ROWS = 3

# Status codes of the compiled decode loop.
_RUNNING, _EXACT, _NO_PATH, _STUCK = 0, 1, 2, 3
# q(x*) = p(x*) is tested in log space up to float64 summation rounding.
EXACT_TOLERANCE = 1e-9


@dataclass
class PathTrace:
    """Where one path runs through the automaton: per position 1..T, the source state, the
    state whose n-gram gave the weight (-1: the unigram bound), the LM bound and log q.
    State ids are the automaton's global ids."""

    symbols: list[int]
    sources: list[int]
    weight_states: list[int]
    bounds: list[float]
    log_q: float


class DecodeSteps(NamedTuple):
    """What :meth:`QAutomaton.decode_steps` did: per Viterbi iteration log q and log p of
    the Viterbi path; after each refinement the reachable states of the new q and its
    n-grams per order (row k: index = order); the last Viterbi path and how the run ended."""

    log_q: np.ndarray
    log_p: np.ndarray
    refined_states: np.ndarray
    refined_ngrams: np.ndarray
    path: list[int]
    num_states: int  # reachable states of q after the run
    status: str  # "exact", "running" (iteration budget spent)


class _QArrays(NamedTuple):
    """The current q's lattice arrays plus, per arc, its source state and its weight state
    (global ids, -1: unigram bound), the LM bound, the flat candidate index and the weight
    state's context length; and the arcs grouped by target."""

    positions: np.ndarray
    sources: np.ndarray
    targets: np.ndarray
    labels: np.ndarray
    weights: np.ndarray
    final: np.ndarray
    from_state: np.ndarray
    weight_state: np.ndarray
    bound: np.ndarray
    candidate: np.ndarray
    context_length: np.ndarray
    in_offsets: np.ndarray
    in_arcs: np.ndarray
    ints: np.ndarray            # (7, A): the int columns above, one row each
    floats: np.ndarray          # (2, A): weights, bound


class QAutomaton:
    """Variable-order upper bound of a :class:`~varorder.exact.target.HighOrderTarget`.

    Use :meth:`lattice` for the current q (nodes are reachable (position, state) pairs),
    :meth:`refine` on a rejected path, :meth:`log_q` for q of a path, :meth:`decode_steps`
    for iterations of Algorithm 1 in optimisation mode run in compiled code.
    """

    def __init__(self, target: HighOrderTarget):
        if not isinstance(target, HighOrderTarget):
            raise ParameterError(f"target must be a HighOrderTarget, got {type(target).__name__}", name='target', value=target)
        self.target = target
        self.weights = target.weights
        T = target.num_positions
        self.num_positions = T
        self.model = target.model
        self._kernels = tuple(self.model.kernels())  # tables, scale
        self._candidate_symbols = np.concatenate(target.symbols).astype(np.int64)
        self._candidate_unigram = self.weights.unigram_bounds_of(self._candidate_symbols)
        self._candidate_logliks = np.concatenate(target.logliks).astype(np.float64)
        sizes = [len(c) for c in target.symbols]
        self._candidate_offsets = np.zeros(T + 1, dtype=np.int64)
        np.cumsum(sizes, out=self._candidate_offsets[1:])
        self._index_of_cache: list[dict[int, int]] | None = None
        (self._states, self._ngrams, self._ngram_bounds, self._sizes, self._empty_of, self._num_local,
         self._order_counts) = _initial_tables(T, target.order, self._candidate_offsets[-1])
        self._lattice: Lattice | None = None
        self._cached: _QArrays | None = None
        self.num_refinements = 0

    # ------------------------------------------------------------------ structure

    def _kernel_state(self):
        return (self._states, self._ngrams, self._ngram_bounds, self._sizes, self._empty_of, self._num_local,
                self._order_counts)

    def _store(self, states, ngrams, ngram_bounds) -> None:
        self._states, self._ngrams, self._ngram_bounds = states, ngrams, ngram_bounds
        self._lattice = None
        self._cached = None

    def _arrays(self) -> _QArrays:
        """The arc arrays of the current q (cached until the next refinement)."""
        if self._cached is not None:
            return self._cached
        positions, final, ints, floats, in_offsets, in_arcs = _build_arcs(
            self.num_positions, self._states, self._sizes, self._ngrams, self._ngram_bounds,
            self._candidate_offsets, self._candidate_symbols, self._candidate_unigram, self._candidate_logliks)
        sources, targets, labels, from_state, weight_state, candidate, context_length = ints
        weights, bound = floats
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
        path: the engine's lattice Viterbi kernel on the arrays :meth:`lattice` wraps."""
        a = self._arrays()
        arcs, score = viterbi_kernel(len(a.positions), a.in_offsets, a.in_arcs, a.sources, a.weights, a.final,
                                     a.positions)
        return arcs, float(score)

    def sample_arcs(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """n exact samples of q / q(X) as arc ids of the current :meth:`lattice` (n, T)
        (all -1 when q has no path): the engine's lattice sampling kernel (forward
        filtering, backward sampling) on q's own arrays, drawing the same uniforms as
        :func:`varorder.lattice.sample_arcs` with the same generator."""
        a = self._arrays()
        uniforms = rng.random((n, self.num_positions + 1))
        arcs, _ = sample_kernel(len(a.positions), a.in_offsets, a.in_arcs, a.sources, a.weights, a.final,
                                a.positions, self.num_positions, uniforms)
        return arcs

    def trace_arcs(self, arcs: np.ndarray) -> PathTrace:
        """:meth:`trace` of a path given as arc ids of the current :meth:`lattice` (as
        :meth:`best_path` and :func:`varorder.lattice.sample_arcs` return them), read off
        the arcs."""
        a = self._arrays()
        arcs = np.asarray(arcs, dtype=np.int64)
        if arcs.shape != (self.num_positions,) or arcs.min() < 0 or arcs.max() >= len(a.labels):
            raise ParameterError(f"arcs must be {self.num_positions} arc ids of the current lattice", name='arcs', value=arcs)
        ints = a.ints[:, arcs].tolist()  # rows: source, target, label, from, weight state, ...
        floats = a.floats[:, arcs]
        return PathTrace(ints[2], ints[3], ints[4], floats[1].tolist(), float(floats[0].sum()))

    def path_log_p(self, arcs: np.ndarray) -> float:
        """log p of the path given by ``arcs`` of the current lattice: the same value as
        ``target.log_p(labels)``, computed in compiled code from the arcs."""
        a = self._arrays()
        arcs = np.asarray(arcs, dtype=np.int64)
        with self.model.naming_damage():
            return float(_path_log_p(self._history(a.labels[arcs]), self._candidate_logliks[a.candidate[arcs]],
                                     self.target.order, *self._kernels))

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
        return len(self._arrays().positions)

    @property
    def num_created_states(self) -> int:
        """Every state ever created (reachable or not), the root included."""
        return int(self._sizes[0]) - 1

    def ngram_counts(self) -> dict[int, int]:
        """n-grams per order in q: order 1 counts the unigram-bounded (position, candidate)
        pairs, order k > 1 the n-grams refined to order k (paper Table 1)."""
        return {k: int(c) for k, c in enumerate(self._order_counts) if c}

    def state_context(self, state: int) -> tuple[int, ...]:
        """The context (symbol ids, ``<s>`` included) of a state given by its global id."""
        if not 0 <= state < self._sizes[0]:
            raise ParameterError(f"no state {state}", name='state', value=state)
        symbols = []
        while self._states[_LENGTH, state] > 0:
            position, cand = self._states[_POS, state], self._states[_CAND, state]
            if position == 0:
                symbols.append(self.target.bos)
                break
            symbols.append(int(self._candidate_symbols[self._candidate_offsets[position - 1] + cand]))
            state = self._states[_PREFIX, state]
        return tuple(reversed(symbols))

    # ------------------------------------------------------------------ paths

    @property
    def _index_of(self) -> list[dict[int, int]]:
        """Per position, candidate index by symbol (built on first use: the compiled decode
        loop never needs it)."""
        if self._index_of_cache is None:
            self._index_of_cache = [dict(zip(symbols.tolist(), range(len(symbols)))) for symbols in self.target.symbols]
        return self._index_of_cache

    def _candidates(self, path: Sequence[int]) -> np.ndarray:
        path = [int(s) for s in path]
        if len(path) != self.num_positions:
            raise ParameterError(f"path must have {self.num_positions} symbols, got {len(path)}", name='path', value=path)
        cands = np.empty(len(path), dtype=np.int64)
        for j, symbol in enumerate(path):
            k = self._index_of[j].get(symbol)
            if k is None:
                raise ParameterError(f"symbol {symbol} is not a candidate at position {j + 1}", name='path', value=path)
            cands[j] = k
        return cands

    def _history(self, symbols) -> np.ndarray:
        history = np.empty(self.num_positions + 1, dtype=np.int64)
        history[0] = self.target.bos
        history[1:] = symbols
        return history

    def trace(self, path: Sequence[int]) -> PathTrace:
        """Run ``path`` (T symbol ids, ``</s>`` last with eos) through the automaton."""
        cands = self._candidates(path)
        sources, weight_states, bounds = _trace(self._states, self._ngrams, self._ngram_bounds, self._empty_of,
                                                self._candidate_offsets, self._candidate_unigram, cands)
        logliks = self._candidate_logliks[self._candidate_offsets[:-1] + cands]
        log_q = float(np.sum(bounds + logliks))
        return PathTrace([int(s) for s in path], sources.tolist(), weight_states.tolist(), bounds.tolist(), log_q)

    def log_q(self, path: Sequence[int]) -> float:
        return self.trace(path).log_q

    def refine(self, path: Sequence[int]) -> int:
        """Algorithm 2 at every position of ``path``: raise each factor not yet at full
        order by one order. Returns the number of n-grams raised (0: q = p on the path)."""
        cands = self._candidates(path)
        with self.model.naming_damage():
            states, ngrams, ngram_bounds, raised = _refine(
                *self._kernel_state(), cands,
                self._history(self._candidate_symbols[self._candidate_offsets[:-1] + cands]),
                self.target.order, self._candidate_offsets, self._candidate_unigram, *self._kernels)
        self.num_refinements += 1
        self._store(states, ngrams, ngram_bounds)
        return int(raised)

    def refine_trace(self, trace: PathTrace) -> int:
        """:meth:`refine` of a path traced by :meth:`trace` or :meth:`trace_arcs`."""
        return self.refine(trace.symbols)

    def decode_steps(self, max_iterations: int) -> DecodeSteps:
        """Up to ``max_iterations`` iterations of Algorithm 1 in optimisation mode, in
        compiled code: Viterbi on q (the engine's lattice kernel), log p of the Viterbi
        path, stop when p = q there, else refine q along it (Algorithm 2) and repeat."""
        if max_iterations < 1:
            raise ParameterError(f"max_iterations must be >= 1, got {max_iterations}", name='max_iterations', value=max_iterations)
        with self.model.naming_damage():
            (states, ngrams, ngram_bounds, status, n_iter, log_q, log_p, refined_states, refined_ngrams,
             path, num_states) = _decode_loop(
                self._states, self._ngrams, self._ngram_bounds, self._sizes, self._num_local, self._order_counts,
                self.num_positions, self.target.order, int(max_iterations), EXACT_TOLERANCE,
                self._candidate_offsets, self._candidate_symbols, self._candidate_unigram,
                self._candidate_logliks, self.target.bos, *self._kernels)
        refinements = max(n_iter - 1, 0) if status == _EXACT else n_iter
        self.num_refinements += refinements
        self._store(states, ngrams, ngram_bounds)
        if status == _NO_PATH:
            raise ParameterError("the target gives probability zero to every candidate sequence")
        if status == _STUCK:
            raise RuntimeError(f"q and p differ on a fully refined path (log q {log_q[n_iter - 1]}, "
                               f"log p {log_p[n_iter - 1]})")
        return DecodeSteps(log_q[:n_iter], log_p[:n_iter], refined_states[:refinements],
                           refined_ngrams[:refinements], path.tolist(), int(num_states),
                           "exact" if status == _EXACT else "running")


# ---------------------------------------------------------------------- compiled kernels


@numba.njit(cache=True)
def _initial_tables(T, order, n_candidates):
    """The unigram q: position 0 holds the empty context (global id 0, a prefix only) and
    (<s>,) (id 1); every later position j its empty context (id j + 1); no n-gram yet."""
    capacity = max(64, 8 * (T + 2))
    states = np.full((_STATE_ROWS, capacity), -1, np.int64)
    n = T + 2
    empty_of = np.empty(T + 1, np.int64)
    num_local = np.ones(T + 1, np.int64)
    for g in range(n):
        position = 0 if g < 2 else g - 1
        states[_POS, g] = position
        states[_LOCAL, g] = 1 if g == _ROOT else 0
        states[_LENGTH, g] = 1 if g == _ROOT else 0
        if g != _ROOT:
            empty_of[position] = g
    states[_SUFFIX, _ROOT] = 0
    num_local[0] = 2
    sizes = np.array([n, 0], np.int64)  # states, n-grams
    order_counts = np.zeros(order + 2, np.int64)
    order_counts[1] = n_candidates
    return (states, np.full((_NGRAM_ROWS, capacity), -1, np.int64), np.empty(capacity, np.float64), sizes, empty_of,
            num_local, order_counts)


@numba.njit(cache=True)
def _step(states, ngrams, ngram_bounds, empty_of, cand_offsets, cand_unigram, position, source, cand):
    """(target state, weight state or -1, LM bound) of reading candidate ``cand`` at
    ``position`` from ``source``: the first states of the source's suffix chain with a
    child / an n-gram labelled ``cand``."""
    target = -1
    weight_state = -1
    bound = cand_unigram[cand_offsets[position - 1] + cand]
    u = source
    while True:
        if target < 0:
            e = states[_CHILD_HEAD, u]
            while e >= 0:
                if states[_CAND, e] == cand:
                    target = e
                    break
                e = states[_SIBLING, e]
        if weight_state < 0:
            e = states[_NGRAM_HEAD, u]
            while e >= 0:
                if ngrams[_NG_CAND, e] == cand:
                    weight_state = u
                    bound = ngram_bounds[e]
                    break
                e = ngrams[_NG_NEXT, e]
        if (target >= 0 and weight_state >= 0) or states[_LENGTH, u] == 0:
            break
        u = states[_SUFFIX, u]
    if target < 0:
        target = empty_of[position]
    return target, weight_state, bound


@numba.njit(cache=True)
def _trace(states, ngrams, ngram_bounds, empty_of, cand_offsets, cand_unigram, cands):
    T = cands.shape[0]
    sources = np.empty(T, np.int64)
    weight_states = np.empty(T, np.int64)
    bounds = np.empty(T, np.float64)
    state = _ROOT
    for j in range(1, T + 1):
        sources[j - 1] = state
        state, weight_state, bound = _step(states, ngrams, ngram_bounds, empty_of, cand_offsets, cand_unigram, j,
                                           state, cands[j - 1])
        weight_states[j - 1] = weight_state
        bounds[j - 1] = bound
    return sources, weight_states, bounds


@numba.njit(cache=True)
def _suffix_of_length(states, state, length):
    while states[_LENGTH, state] > length:
        state = states[_SUFFIX, state]
    return state


@numba.njit(cache=True)
def _refine(states, ngrams, ngram_bounds, sizes, empty_of, num_local, order_counts, cands, history, order,
            cand_offsets, cand_unigram, tables, scale):
    """Algorithm 2 along one path (candidate indices ``cands``, ``history`` = <s> and its
    symbols). Returns the (possibly reallocated) tables and the number of n-grams raised."""
    T = cands.shape[0]
    # The path's states: reach[j] is the longest state at j that is a suffix of the history.
    reach = np.empty(T + 1, np.int64)
    used = np.empty(T + 1, np.int64)
    old_bound = np.empty(T + 1, np.float64)
    reach[0] = _ROOT
    for j in range(1, T + 1):
        target, weight_state, bound = _step(states, ngrams, ngram_bounds, empty_of, cand_offsets, cand_unigram, j,
                                            reach[j - 1], cands[j - 1])
        reach[j] = target
        used[j] = weight_state
        old_bound[j] = bound
    return _refine_traced(states, ngrams, ngram_bounds, sizes, num_local, order_counts, cands, history, order,
                          reach, used, old_bound, tables, scale)


@numba.njit(cache=True)
def _refine_traced(states, ngrams, ngram_bounds, sizes, num_local, order_counts, cands, history, order, reach, used,
                   old_bound, tables, scale):
    """:func:`_refine` given the path's trace: per position j, ``reach[j]`` the state the
    path is in (j = 0 .. T - 1 are read), ``used[j]`` the weight state of its factor and
    ``old_bound[j]`` its bound (j = 1 .. T). ``reach`` is updated as states are created."""
    T = cands.shape[0]
    raised = 0
    for i in range(1, T + 1):
        k = 0 if used[i] < 0 else states[_LENGTH, used[i]]
        if k >= min(order - 1, i):
            continue
        if k > 0 and not model_kernels.relevant(tables, history[i - k:i]):
            continue  # no left extension changes the factor (an absent n-gram): the bound is exact already
        # The state with context history[i-k-1 : i] at position i - 1, created (with the
        # states before it that lead to it) when missing: position p needs a state of
        # length m - (i - 1 - p), and each new state's suffix is the longest one there.
        m = k + 1
        for p in range(i - m, i):
            wanted = m - (i - 1 - p)
            while states[_LENGTH, reach[p]] < wanted:
                length = states[_LENGTH, reach[p]] + 1
                prefix = _suffix_of_length(states, reach[p - 1], length - 1)
                g = sizes[0]
                states = grown_columns(states, g + 1, -1)
                states[_POS, g] = p
                states[_LOCAL, g] = num_local[p]
                states[_SUFFIX, g] = reach[p]
                states[_PREFIX, g] = prefix
                states[_CAND, g] = cands[p - 1]
                states[_LENGTH, g] = length
                states[_CHILD_HEAD, g] = -1
                states[_NGRAM_HEAD, g] = -1
                states[_SIBLING, g] = states[_CHILD_HEAD, prefix]
                states[_CHILD_HEAD, prefix] = g
                num_local[p] += 1
                sizes[0] = g + 1
                reach[p] = g
        context = _suffix_of_length(states, reach[i - 1], m)
        e = states[_NGRAM_HEAD, context]
        while e >= 0 and ngrams[_NG_CAND, e] != cands[i - 1]:
            e = ngrams[_NG_NEXT, e]
        if e >= 0:
            continue  # already refined (cannot happen on a path traced through this q)
        weight = model_kernels.bound(tables, history[i - m:i], history[i]) * scale
        # A longer context never has a larger bound; guard against rounding.
        weight = min(weight, old_bound[i])
        e = sizes[1]
        ngrams = grown_columns(ngrams, e + 1, -1)
        ngram_bounds = grown1(ngram_bounds, ngram_bounds.shape[0], e + 1)
        ngrams[_NG_CAND, e] = cands[i - 1]
        ngrams[_NG_CONTEXT, e] = context
        ngrams[_NG_NEXT, e] = states[_NGRAM_HEAD, context]
        states[_NGRAM_HEAD, context] = e
        ngram_bounds[e] = weight
        sizes[1] = e + 1
        order_counts[m + 1] += 1
        raised += 1
    return states, ngrams, ngram_bounds, raised


@numba.njit(cache=True)
def _path_log_p(history, logliks, order, tables, scale):
    """log p of a path: exact LM factors (last order - 1 symbols of the history, <s>
    included) plus the observation log-likelihoods; summed like
    :meth:`HighOrderTarget.log_p` (the model's terms, in its units, first)."""
    factors = np.empty(history.shape[0], np.float64)
    reads = np.empty(history.shape[0], np.int64)
    previous = np.empty(history.shape[0], np.int64)
    total = _update_factors(history, previous, factors, reads, order, True, tables)
    return total * scale + logliks.sum()


@numba.njit(cache=True)
def _update_factors(history, previous, factors, reads, order, fresh, tables):
    """Sum of the path's LM factors (the model's kernel units), ``factors[i]`` recomputed only where
    history[i - reads[i] .. i] differs from ``previous`` (all when ``fresh``): ``reads[i]``
    is how many symbols before i the factor depended on when it was computed (the score
    function says; at most order - 1); ``previous`` becomes ``history``. Successive Viterbi
    paths of q differ in few places."""
    last_change = -1  # the last index <= i where history and previous differ
    total = 0.0
    for i in range(1, history.shape[0]):
        if fresh or history[i] != previous[i]:
            last_change = i
        if fresh or last_change >= i - reads[i]:
            start = max(0, i - (order - 1))
            factors[i], reads[i] = model_kernels.score(tables, history[start:i], history[i])
        total += factors[i]
    previous[:] = history
    return total


@numba.njit(cache=True)
def _build_arcs(T, states, sizes, ngrams, ngram_bounds, cand_offsets, cand_symbols, cand_unigram, cand_logliks):
    """Arcs of q over reachable states, position by position.

    A state's row (target state, weight and the state whose n-gram gave the weight, per
    candidate) is its suffix state's row with the entries refined for the state itself
    overriding it; suffix states are created first, so rows are filled in creation order.
    Only states reached from the root emit arcs. Besides the lattice arrays, every arc
    records its source state and its weight state (global ids, -1: the unigram bound),
    so that a path's trace is read off its arcs; and the arcs grouped by target
    (``in_offsets``, ``in_arcs``, the engine's layout) come out of a counting sort.
    """
    n_states = sizes[0]
    # Global ids grouped by position, local (creation) order within a position.
    counts = np.zeros(T + 1, np.int64)
    for g in range(n_states):
        counts[states[_POS, g]] += 1
    offsets = np.zeros(T + 2, np.int64)
    for j in range(T + 1):
        offsets[j + 1] = offsets[j] + counts[j]
    members = np.empty(n_states, np.int64)
    for g in range(n_states):
        members[offsets[states[_POS, g]] + states[_LOCAL, g]] = g
    max_arcs = 0
    for j in range(1, T + 1):
        max_arcs += counts[j - 1] * (cand_offsets[j] - cand_offsets[j - 1])
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
    positions = np.empty(n_states, np.int64)
    # Scratch rows of every position in three flat tables and the node number of every
    # state in one array (a few allocations per build instead of a few per position).
    row_target = np.empty(max_arcs, np.int64)
    row_bound = np.empty(max_arcs, np.float64)
    row_wstate = np.empty(max_arcs, np.int64)
    node_of = np.full(n_states, -1, np.int64)  # by position offset + local id
    # Position 0: only the root (local state 1) is a node.
    node_of[1] = 0
    positions[0] = 0
    n_nodes = 1
    n_arcs = 0
    row_base = 0
    for j in range(1, T + 1):
        n_prev = counts[j - 1]
        c0 = cand_offsets[j - 1]
        k = cand_offsets[j] - c0
        base = offsets[j - 1]
        for s in range(n_prev):
            g = members[base + s]
            row = row_base + s * k
            if s == 0:
                for c in range(k):
                    row_target[row + c] = 0
                    row_bound[row + c] = cand_unigram[c0 + c]
                    row_wstate[row + c] = -1
            else:
                parent = row_base + states[_LOCAL, states[_SUFFIX, g]] * k
                for c in range(k):
                    row_target[row + c] = row_target[parent + c]
                    row_bound[row + c] = row_bound[parent + c]
                    row_wstate[row + c] = row_wstate[parent + c]
            e = states[_CHILD_HEAD, g]
            while e >= 0:
                row_target[row + states[_CAND, e]] = states[_LOCAL, e]
                e = states[_SIBLING, e]
            e = states[_NGRAM_HEAD, g]
            while e >= 0:
                c = ngrams[_NG_CAND, e]
                row_bound[row + c] = ngram_bounds[e]
                row_wstate[row + c] = g
                e = ngrams[_NG_NEXT, e]
        next_base = offsets[j]
        first_arc = n_arcs
        for s in range(n_prev):
            if node_of[base + s] < 0:
                continue
            g = members[base + s]
            row = row_base + s * k
            for c in range(k):
                t = row_target[row + c]
                node_of[next_base + t] = 0  # reached; numbered below
                sources[n_arcs] = node_of[base + s]
                targets[n_arcs] = t
                labels[n_arcs] = cand_symbols[c0 + c]
                weights[n_arcs] = row_bound[row + c] + cand_logliks[c0 + c]
                from_state[n_arcs] = g
                u = row_wstate[row + c]
                weight_state[n_arcs] = u
                arc_bound[n_arcs] = row_bound[row + c]
                arc_candidate[n_arcs] = c0 + c
                arc_context_length[n_arcs] = 0 if u < 0 else states[_LENGTH, u]
                n_arcs += 1
        for t in range(counts[j]):
            if node_of[next_base + t] == 0:
                node_of[next_base + t] = n_nodes
                positions[n_nodes] = j
                n_nodes += 1
        for a in range(first_arc, n_arcs):
            targets[a] = node_of[next_base + targets[a]]
        row_base += n_prev * k
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


@numba.njit(cache=True)
def _decode_loop(states, ngrams, ngram_bounds, sizes, num_local, order_counts, T, order, max_iterations,
                 tolerance, cand_offsets, cand_symbols, cand_unigram, cand_logliks, bos, tables, scale):
    """Algorithm 1, optimisation mode, for up to ``max_iterations`` Viterbi calls."""
    # Per-iteration records, grown by doubling (max_iterations is a budget, often huge).
    capacity = min(max_iterations, 64)
    log_q = np.empty(capacity, np.float64)
    log_p = np.empty(capacity, np.float64)
    refined_states = np.zeros(capacity, np.int64)
    refined_ngrams = np.zeros((capacity, order_counts.shape[0]), np.int64)
    history = np.empty(T + 1, np.int64)
    history[0] = bos
    cands = np.empty(T, np.int64)
    logliks = np.empty(T, np.float64)
    reach = np.empty(T + 1, np.int64)
    used = np.empty(T + 1, np.int64)
    old_bound = np.empty(T + 1, np.float64)
    previous_history = np.empty(T + 1, np.int64)
    factors = np.empty(T + 1, np.float64)
    reads = np.empty(T + 1, np.int64)
    status = _RUNNING
    n_iter = 0
    num_nodes = 0
    while n_iter < max_iterations:
        positions, final, ints, floats, in_offsets, in_arcs = _build_arcs(
            T, states, sizes, ngrams, ngram_bounds, cand_offsets, cand_symbols, cand_unigram, cand_logliks)
        num_nodes = positions.shape[0]
        if n_iter > 0:
            refined_states[n_iter - 1] = num_nodes
        arcs, score = viterbi_kernel(positions.shape[0], in_offsets, in_arcs, ints[0], floats[0], final, positions)
        if score == -np.inf:
            status = _NO_PATH
            break
        for j in range(T):
            a = arcs[j]
            flat = ints[5, a]
            history[j + 1] = cand_symbols[flat]
            cands[j] = flat - cand_offsets[j]
            logliks[j] = cand_logliks[flat]
            reach[j] = ints[3, a]
            used[j + 1] = ints[4, a]
            old_bound[j + 1] = floats[1, a]
        if n_iter == capacity:
            capacity = min(2 * capacity, max_iterations)
            log_q = grown1(log_q, log_q.shape[0], capacity)
            log_p = grown1(log_p, log_p.shape[0], capacity)
            grown = np.zeros(capacity, np.int64)
            grown[:n_iter] = refined_states[:n_iter]
            refined_states = grown
            grown_ngrams = np.zeros((capacity, order_counts.shape[0]), np.int64)
            grown_ngrams[:n_iter] = refined_ngrams[:n_iter]
            refined_ngrams = grown_ngrams
        lp = _update_factors(history, previous_history, factors, reads, order, n_iter == 0,
                             tables) * scale + logliks.sum()
        log_q[n_iter] = score
        log_p[n_iter] = lp
        n_iter += 1
        if score - lp <= tolerance * max(1.0, abs(lp)):
            status = _EXACT
            break
        # Refined even after the last allowed iteration: a next call starts from this q.
        states, ngrams, ngram_bounds, raised = _refine_traced(
            states, ngrams, ngram_bounds, sizes, num_local, order_counts, cands, history, order, reach, used,
            old_bound, tables, scale)
        if raised == 0:
            status = _STUCK
            break
        refined_ngrams[n_iter - 1, :] = order_counts
    if status == _RUNNING and n_iter > 0:
        positions, final, ints, floats, in_offsets, in_arcs = _build_arcs(
            T, states, sizes, ngrams, ngram_bounds, cand_offsets, cand_symbols, cand_unigram, cand_logliks)
        num_nodes = positions.shape[0]
        refined_states[n_iter - 1] = num_nodes
    return (states, ngrams, ngram_bounds, status, n_iter, log_q, log_p, refined_states, refined_ngrams,
            history[1:].copy(), num_nodes)
