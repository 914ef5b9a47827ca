"""Viterbi over a deterministic weighted automaton unrolled over positions, without materialising it.

Factorization. A deterministic automaton has S states and an alphabet of X
symbol columns; reading symbol x in state s goes to ``next_state[s, x]`` with
log-weight ``weight[s, x]``. Over T positions a path x₁ … x_T from ``start``
scores Σₜ weight[sₜ₋₁, xₜ] + symbol_scores[t, xₜ] (symbol_scores −inf forbids a
symbol at a position). When ``final_column`` ≥ 0 the last symbol is forced to
that column (e.g. ``</s>``), whose arcs end the path.

The unrolled automaton is a position-indexed lattice (T·S nodes, T·S·X arcs),
but for a full n-gram WFSA that is tens of millions of arcs per sentence, too
many to build as a :class:`varorder.lattice.Lattice`; this kernel relaxes the
(state × symbol) table position by position instead — the MAX semiring of
:mod:`varorder.engine.semiring` with back-pointers. Tests check it against the
lattice engine on the unrolled automaton. Used for the full-model baseline F of
Carter, Dymetman & Bouchard (EMNLP 2012, §3.2).
"""

from __future__ import annotations

import numba as nb
import numpy as np

from varorder.engine.lattice import csr_index, forward_kernel
from varorder.engine.semiring import MAX, Semiring, resolve
import varorder._numba_start  # noqa: E402,F401,I001  (Numba's cache saves locked across processes)

from varorder.errors import ParameterError

__all__ = ["automaton_viterbi", "unrolled", "forward_value", "SPECIALISED_FORWARD"]


def automaton_viterbi(next_state, weight, symbol_scores, start: int, final_column: int = -1):
    """(symbol column per position (T,), best score); score −inf (columns undefined) if no path."""
    next_state = np.ascontiguousarray(next_state, dtype=np.int64)
    weight = np.ascontiguousarray(weight, dtype=np.float64)
    symbol_scores = np.ascontiguousarray(symbol_scores, dtype=np.float64)
    if next_state.ndim != 2 or weight.shape != next_state.shape:
        raise ParameterError(f"next_state and weight must be (S, X) arrays of one shape, got "
                             f"{next_state.shape} and {weight.shape}", name='next_state', value=next_state)
    S, X = next_state.shape
    if symbol_scores.ndim != 2 or symbol_scores.shape[1] != X or symbol_scores.shape[0] < 1:
        raise ParameterError(f"symbol_scores must have shape (T >= 1, {X}), got {symbol_scores.shape}", name='symbol_scores', value=symbol_scores)
    if not 0 <= start < S:
        raise ParameterError(f"start must be a state in [0, {S}), got {start}", name='start', value=start)
    if final_column >= X:
        raise ParameterError(f"final_column must be < {X}, got {final_column}", name='final_column', value=final_column)
    if ((next_state < 0) | (next_state >= S)).any():
        raise ParameterError(f"next_state must hold states in [0, {S})", name='next_state', value=next_state)
    columns, score = _automaton_viterbi(next_state, weight, symbol_scores, int(start), int(final_column))
    return columns, float(score)


@nb.njit(cache=True)
def _automaton_viterbi(next_state, weight, obs, start, final_column):
    S, X = next_state.shape
    T = obs.shape[0]
    delta = np.full(S, -np.inf)
    delta[start] = 0.0
    back = np.empty((T, S), np.int64)
    last = T - 1 if final_column >= 0 else T
    for t in range(last):
        new = np.full(S, -np.inf)
        for s in range(S):
            d = delta[s]
            if d == -np.inf:
                continue
            for x in range(X):
                v = d + weight[s, x] + obs[t, x]
                n = next_state[s, x]
                if v > new[n]:
                    new[n] = v
                    back[t, n] = s * X + x
        delta = new
    columns = np.empty(T, np.int64)
    best = -np.inf
    state = -1
    if final_column >= 0:
        for s in range(S):
            v = delta[s] + weight[s, final_column] + obs[T - 1, final_column]
            if v > best:
                best = v
                state = s
        columns[T - 1] = final_column
    else:
        for s in range(S):
            if delta[s] > best:
                best = delta[s]
                state = s
    if state < 0:
        return columns, best
    for t in range(last - 1, -1, -1):
        arc = back[t, state]
        columns[t] = arc % X
        state = arc // X
    return columns, best


def unrolled(next_state, weight, symbol_scores, start: int, final_column: int = -1):
    """The automaton unrolled over positions as lattice arrays (node_position, arc_source,
    arc_target, arc_label (the symbol column), arc_weight, final): node 0 is ``start`` at
    position 0, node 1 + (t − 1)·S + s is state s at position t; the definition that
    :func:`automaton_viterbi` specialises (small automata only: T·S·X arcs)."""
    next_state = np.asarray(next_state, dtype=np.int64)
    weight = np.asarray(weight, dtype=np.float64)
    obs = np.asarray(symbol_scores, dtype=np.float64)
    S, X = next_state.shape
    T = obs.shape[0]
    position = np.concatenate([[0], np.repeat(np.arange(1, T + 1), S)]).astype(np.int64)
    src, dst, lab, w = [], [], [], []
    for t in range(1, T + 1):
        sources = [(0, start)] if t == 1 else [(1 + (t - 2) * S + s, s) for s in range(S)]
        columns = [final_column] if final_column >= 0 and t == T else range(X)
        for node, s in sources:
            for x in columns:
                src.append(node)
                dst.append(1 + (t - 1) * S + next_state[s, x])
                lab.append(x)
                w.append(weight[s, x] + obs[t - 1, x])
    final = np.where(position == T, 0.0, -np.inf)
    return (position, np.array(src, np.int64), np.array(dst, np.int64), np.array(lab, np.int64),
            np.array(w, np.float64), final)


def _generic_forward(semiring, next_state, weight, symbol_scores, start, final_column):
    position, src, dst, _, w, final = unrolled(next_state, weight, symbol_scores, start, final_column)
    in_offsets, in_arcs = csr_index(dst, position.shape[0])
    alpha = np.empty((position.shape[0],) + semiring.value_shape(None))
    return float(forward_kernel(semiring)(position.shape[0], in_offsets, in_arcs, src, w, final, alpha))


# Registered specialisations of the unrolled automaton's forward: MAX by the relaxation
# above, without the unrolled lattice; the lattice's generic recursion on
# :func:`unrolled` is the definition (tests/test_automaton.py checks them equal).
SPECIALISED_FORWARD = {MAX: lambda *args: automaton_viterbi(*args)[1]}


def forward_value(next_state, weight, symbol_scores, start: int, final_column: int = -1,
                  semiring: Semiring | str = MAX, specialised: bool = True) -> float:
    """⊕ over the automaton's paths of T symbols: the registered kernel for the semiring
    (and ``specialised``), else the lattice engine's generic forward on :func:`unrolled`."""
    semiring = resolve(semiring)
    fast = SPECIALISED_FORWARD.get(semiring) if specialised else None
    if fast is not None:
        return fast(next_state, weight, symbol_scores, start, final_column)
    return _generic_forward(semiring, next_state, weight, symbol_scores, int(start), int(final_column))
