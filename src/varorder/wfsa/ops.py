"""Operations on :class:`varorder.wfsa.Wfsa` in the log and max-plus semirings.

Weights are log scores (higher is better), so the Viterbi semiring is max-plus ("max");
OpenFst's *tropical* semiring is its min-plus mirror on negated costs. The name
``"tropical"`` is still accepted for ``"max"``, with a DeprecationWarning.

* composition with the ε-sequencing filter (Mohri, Pereira & Riley 2002; OpenFst's
  ``SequenceComposeFilter``): between two matched symbols, the left machine's output-ε
  moves come before the right machine's input-ε moves, so every pair of paths is
  counted once; intersection is the composition of acceptors;
* projection onto either tape;
* shortest distance: in the log semiring on *cyclic* machines by one sparse linear solve
  in exp space, α = e_start + Mᵀα and β = f + Mβ with M[i, j] = Σ exp(w) over arcs i → j
  (Mohri 2002, "Semiring frameworks and algorithms for shortest-distance problems": the
  closure (I − M)⁻¹ is exact whenever the series converges); a non-convergent machine
  (spectral radius ≥ 1 on the trimmed part) has no nonnegative solution (Perron–Frobenius)
  and raises DivergenceError; the Neumann series Σ Mᵏ r is summed first when it converges
  fast (machines read against one string are nearly acyclic), the LU solve otherwise; in the max-plus semiring by Bellman–Ford relaxation (a positive
  cycle raises DivergenceError);
* arc posteriors (expected arc counts) α(src)·w·β(dst)/Z and expected n-gram counts;
* the product with a complete deterministic automaton given as a transition table (the
  n-gram and variable-order feature machines of Cotterell & Eisner 2015, §3.4);
* k-best strings by A* over paths with the exact max-plus completion as heuristic
  (each string scored by its best path, the usual "k-best strings" of pruned BP);
* ancestral sampling of strings with the backward weights (log semiring).
"""

from __future__ import annotations

import heapq
import warnings
from collections import deque

import numba as nb
import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg as spla

from varorder.engine.lattice import csr_index
from varorder.engine.validate import as_rng
from varorder.errors import DivergenceError, ParameterError
from varorder.wfsa.fsa import EPSILON, NEG_INF, Wfsa, linear_acceptor
import varorder._numba_start  # noqa: E402,F401,I001  (Numba's cache saves locked across processes)

__all__ = [
    "arc_posteriors", "compose", "connected_states", "expected_ngram_counts", "intersect",
    "kbest_strings", "log_total_weight", "ngram_history_table", "product_with_dfa", "project", "reachable_states",
    "sample_strings", "shortest_distance", "string_weight", "trim",
]

SEMIRINGS = ("log", "max")


def _check_semiring(semiring: str) -> str:
    if semiring == "tropical":
        warnings.warn('semiring "tropical" is deprecated: with log scores (higher is better) this is the '
                      'max-plus semiring, named "max" (OpenFst\'s tropical semiring is min-plus on costs)',
                      DeprecationWarning, stacklevel=3)
        return "max"
    if semiring not in SEMIRINGS:
        raise ParameterError(f"semiring must be one of {SEMIRINGS}, got {semiring!r}", name='semiring', value=semiring)
    return semiring


def _check_alphabets(a: Wfsa, b: Wfsa) -> None:
    if a.alphabet != b.alphabet:
        raise ParameterError("the two machines have different alphabets", name='a', value=a)


# ---------------------------------------------------------------------------
# composition, intersection, projection
# ---------------------------------------------------------------------------


def _arcs_by_state(fsa: Wfsa, labels: np.ndarray) -> list[dict]:
    table: list[dict] = [dict() for _ in range(fsa.n_states)]
    for e in range(fsa.n_arcs):
        table[int(fsa.src[e])].setdefault(int(labels[e]), []).append(e)
    return table


def compose(a: Wfsa, b: Wfsa) -> Wfsa:
    """The composition a ∘ b (a's output tape matched to b's input tape), accessible part."""
    _check_alphabets(a, b)
    a_out = _arcs_by_state(a, a.olabel)
    b_in = _arcs_by_state(b, b.ilabel)
    ids: dict[tuple, int] = {}
    queue: deque = deque()

    def state(qa, qb, f):
        key = (qa, qb, f)
        s = ids.get(key)
        if s is None:
            s = ids[key] = len(ids)
            queue.append(key)
        return s

    state(a.start, b.start, 0)
    arcs, finals = [], {}
    while queue:
        qa, qb, f = queue.popleft()
        s = ids[(qa, qb, f)]
        w_final = a.final[qa] + b.final[qb]
        if w_final > NEG_INF:
            finals[s] = w_final
        for label, edges in a_out[qa].items():
            if label == EPSILON:
                if f == 0:  # a moves alone on an output ε
                    for e in edges:
                        arcs.append((s, int(a.ilabel[e]), EPSILON, float(a.weight[e]),
                                     state(int(a.dst[e]), qb, 0)))
                continue
            for e in edges:
                for g in b_in[qb].get(label, ()):
                    arcs.append((s, int(a.ilabel[e]), int(b.olabel[g]), float(a.weight[e] + b.weight[g]),
                                 state(int(a.dst[e]), int(b.dst[g]), 0)))
        for g in b_in[qb].get(EPSILON, ()):  # b moves alone on an input ε
            arcs.append((s, EPSILON, int(b.olabel[g]), float(b.weight[g]), state(qa, int(b.dst[g]), 1)))
    return Wfsa.from_arcs(a.alphabet, len(ids), 0, arcs, finals)


def intersect(a: Wfsa, b: Wfsa) -> Wfsa:
    """The pointwise product of two acceptors (composition of acceptors)."""
    if not (a.is_acceptor and b.is_acceptor):
        raise ParameterError("intersect needs two acceptors; use compose for transducers", name='a', value=a)
    return compose(a, b)


def project(fsa: Wfsa, side: str = "input") -> Wfsa:
    """The acceptor of one tape (``"input"`` or ``"output"``)."""
    if side not in ("input", "output"):
        raise ParameterError(f"side must be 'input' or 'output', got {side!r}", name='side', value=side)
    labels = fsa.ilabel if side == "input" else fsa.olabel
    return fsa.replace(ilabel=labels.copy(), olabel=labels.copy())


# ---------------------------------------------------------------------------
# shortest distance
# ---------------------------------------------------------------------------


def reachable_states(n: int, src, dst, seeds) -> np.ndarray:
    """Mask of the states reachable from any seed along (src → dst) arcs of a machine of ``n`` states;
    the indices must be in range (a ``Wfsa``'s arcs are validated; so are a feature machine's)."""
    # compiled: most machines here have a few dozen states, where building a SciPy graph
    # cost ~0.75 ms a call, a fifth of PEP's time
    as_index = lambda a: np.ascontiguousarray(a, dtype=np.int64)
    return _reachable_kernel(n, as_index(src), as_index(dst), as_index(seeds))


@nb.njit(cache=True)
def _reachable_kernel(n, src, dst, seeds):
    start, order = csr_index(src, n)
    targets = dst[order]
    mask = np.zeros(n, dtype=np.bool_)
    stack = np.empty(n, dtype=np.int64)
    top = 0
    for s in seeds:
        if not mask[s]:
            mask[s] = True
            stack[top] = s
            top += 1
    while top:
        top -= 1
        u = stack[top]
        for k in range(start[u], start[u + 1]):
            v = targets[k]
            if not mask[v]:
                mask[v] = True
                stack[top] = v
                top += 1
    return mask


def connected_states(fsa: Wfsa) -> np.ndarray:
    """Mask of the states on some start-to-final path of nonzero weight."""
    live = fsa.weight > NEG_INF
    src, dst = fsa.src[live], fsa.dst[live]
    forward = reachable_states(fsa.n_states, src, dst, np.array([fsa.start]))
    backward = reachable_states(fsa.n_states, dst, src, np.flatnonzero(fsa.final > NEG_INF))
    return forward & backward


def trim(fsa: Wfsa) -> Wfsa:
    """The connected part (a machine of one state with no arcs when nothing is accepted)."""
    keep = connected_states(fsa)
    if not keep[fsa.start]:
        return Wfsa.from_arcs(fsa.alphabet, 1, 0, [], {})
    new_id = np.cumsum(keep) - 1
    arcs = keep[fsa.src] & keep[fsa.dst] & (fsa.weight > NEG_INF)
    return Wfsa(fsa.alphabet, int(new_id[fsa.start]), fsa.final[keep].copy(), new_id[fsa.src[arcs]],
                fsa.ilabel[arcs].copy(), fsa.olabel[arcs].copy(), fsa.weight[arcs].copy(), new_id[fsa.dst[arcs]])


def _closure(M, rhs: np.ndarray, transpose: bool, lu_cache: list | None = None) -> np.ndarray:
    """x = rhs + M x (Mᵀ with ``transpose``) for M ≥ 0, rhs ≥ 0: the Neumann series
    Σ Mᵏ rhs while its terms shrink fast (product machines with a string are nearly
    acyclic: only deletion loops stay at one position), else one sparse LU solve."""
    op = M.T.tocsr() if transpose else M
    x = rhs.copy()
    term = rhs
    for _ in range(NEUMANN_MAX_TERMS):
        term = op @ term
        x += term
        top = x.max()
        if not np.isfinite(top):
            break
        if term.max() <= NEUMANN_TOLERANCE * top:
            return x
    n = M.shape[0]
    A = (sp.identity(n, format="csc") - M.tocsc()).tocsc()
    if n == 1:
        return rhs / A.toarray()[0, 0]
    if lu_cache is not None and lu_cache:
        lu = lu_cache[0]
    else:
        lu = spla.splu(A)
        if lu_cache is not None:
            lu_cache.append(lu)
    return lu.solve(rhs, trans="T" if transpose else "N")


NEUMANN_MAX_TERMS = 200
NEUMANN_TOLERANCE = 1e-15


def _log_solve(n, src, dst, weight, rhs_log, transpose: bool, shift: float):
    """log x for x = r + M x (or Mᵀ x) in exp space, weights shifted by ``shift`` for range."""
    M = sp.csr_matrix((np.exp(weight), (src, dst)), shape=(n, n))
    rhs = np.exp(rhs_log - shift)
    x = np.atleast_1d(_closure(M, rhs, transpose))
    if not np.all(np.isfinite(x)) or (x < -1e-12 * max(1.0, np.abs(x).max())).any():
        raise DivergenceError("the machine's total weight diverges (the closure series does not converge)")
    with np.errstate(divide="ignore"):
        return np.log(np.maximum(x, 0.0)) + shift


def shortest_distance(fsa: Wfsa, semiring: str = "log", reverse: bool = False, initial=None) -> np.ndarray:
    """Per-state ⊕ of path weights: from the start (α, ``reverse=False``) or to a final
    state including its final weight (β, ``reverse=True``). ``initial`` (log weights per
    state) replaces the start state by an initial weight vector for α. States off every
    initial-to-final path get −inf. Raises DivergenceError when the ⊕-sum diverges."""
    semiring = _check_semiring(semiring)
    if initial is None:
        initial = np.full(fsa.n_states, NEG_INF)
        initial[fsa.start] = 0.0
    initial = np.asarray(initial, dtype=np.float64)
    live = fsa.weight > NEG_INF
    seeds = np.flatnonzero(initial > NEG_INF)
    keep = reachable_states(fsa.n_states, fsa.dst[live], fsa.src[live], np.flatnonzero(fsa.final > NEG_INF))
    if not reverse:  # β is wanted at every state that reaches a final one
        keep &= reachable_states(fsa.n_states, fsa.src[live], fsa.dst[live], seeds)
    out = np.full(fsa.n_states, NEG_INF)
    if not keep.any():
        return out
    index = np.flatnonzero(keep)
    new_id = np.cumsum(keep) - 1
    arcs = keep[fsa.src] & keep[fsa.dst] & live
    src, dst, weight = new_id[fsa.src[arcs]], new_id[fsa.dst[arcs]], fsa.weight[arcs]
    n = len(index)
    rhs = fsa.final[keep] if reverse else initial[keep]
    if semiring == "log":
        finite = rhs[rhs > NEG_INF]
        shift = float(finite.max()) if len(finite) else 0.0
        values = _log_solve(n, src, dst, weight, rhs, transpose=not reverse, shift=shift)
    else:
        values = _bellman_ford(n, src, dst, weight, rhs, reverse)
    out[index] = values
    return out


def _bellman_ford(n, src, dst, weight, rhs, reverse: bool) -> np.ndarray:
    d = rhs.copy()
    head, tail = (src, dst) if reverse else (dst, src)
    for _ in range(n + 1):
        new = d.copy()
        np.maximum.at(new, head, d[tail] + weight)
        if np.array_equal(new, d):
            return d
        d = new
    raise DivergenceError("the machine has a cycle of positive weight: its max-plus shortest distance is unbounded")


def log_total_weight(fsa: Wfsa, semiring: str = "log") -> float:
    """⊕ over all accepting paths (log Z in the log semiring)."""
    beta = shortest_distance(fsa, semiring, reverse=True)
    return float(beta[fsa.start])


def arc_posteriors(fsa: Wfsa):
    """Expected number of traversals of each arc and of each final state (log semiring),
    and log Z: ``(arc_counts (n_arcs,), final_counts (n_states,), log_z)``. One sparse LU
    factorisation of I − M on the connected part serves both α (transposed) and β."""
    keep = connected_states(fsa)
    if not keep[fsa.start]:
        raise ParameterError("the machine accepts nothing: posteriors are undefined", name='fsa', value=fsa)
    index = np.flatnonzero(keep)
    new_id = np.cumsum(keep) - 1
    live = keep[fsa.src] & keep[fsa.dst] & (fsa.weight > NEG_INF)
    src, dst = new_id[fsa.src[live]], new_id[fsa.dst[live]]
    n = len(index)
    final = fsa.final[keep]
    shift = float(final[final > NEG_INF].max())
    M = sp.csr_matrix((np.exp(fsa.weight[live]), (src, dst)), shape=(n, n))
    e_start = np.zeros(n)
    e_start[new_id[fsa.start]] = 1.0
    f = np.exp(final - shift)
    lu_cache: list = []
    beta = np.atleast_1d(_closure(M, f, False, lu_cache))
    alpha = np.atleast_1d(_closure(M, e_start, True, lu_cache))
    for x in (alpha, beta):
        if not np.all(np.isfinite(x)) or (x < -1e-12 * max(1.0, np.abs(x).max())).any():
            raise DivergenceError("the machine's total weight diverges (the closure series does not converge)")
    alpha, beta = np.maximum(alpha, 0.0), np.maximum(beta, 0.0)
    z = beta[new_id[fsa.start]]
    if not z > 0:
        raise ParameterError("the machine accepts nothing: posteriors are undefined", name='fsa', value=fsa)
    arc = np.zeros(fsa.n_arcs)
    arc[live] = alpha[src] * np.exp(fsa.weight[live]) * beta[dst] / z
    final_counts = np.zeros(fsa.n_states)
    final_counts[index] = alpha * f / z
    return arc, final_counts, float(np.log(z) + shift)


def string_weight(fsa: Wfsa, string, semiring: str = "log") -> float:
    """The ⊕ over the accepting paths of one string (input tape for a transducer)."""
    chain = linear_acceptor(fsa.alphabet, string)
    machine = project(fsa, "input") if not fsa.is_acceptor else fsa
    return log_total_weight(intersect(machine, chain), semiring)


def ngram_history_table(alphabet, order: int, boundaries: bool = True) -> tuple[list, np.ndarray]:
    """The complete DFA of n-gram histories over ``alphabet``: state = the last
    min(n − 1, t + 1) symbols of ``^ x₁…x_t`` (``^`` only with ``boundaries``), state 0 the
    start. Returns ``(histories as tuples, next_state (S, A))``, histories in breadth-first
    order of discovery."""
    if order < 1:
        raise ParameterError(f"order must be ≥ 1, got {order}", name='order', value=order)
    history_ids: dict[tuple, int] = {}
    histories: list[tuple] = []

    def hid(h):
        i = history_ids.get(h)
        if i is None:
            i = history_ids[h] = len(histories)
            histories.append(h)
        return i

    hid(("^",)[: order - 1] if boundaries else ())
    table = []
    i = 0
    while i < len(histories):
        h = histories[i]
        table.append([hid((h + (s,))[-(order - 1):] if order > 1 else ()) for s in alphabet])
        i += 1
    return histories, np.array(table, dtype=np.int64).reshape(len(histories), len(alphabet))


def expected_ngram_counts(fsa: Wfsa, order: int, boundaries: bool = True) -> dict:
    """Expected count of every n-gram of length ``order`` in a string drawn from the
    normalised acceptor; with ``boundaries`` the string is read as ``^ x $`` (n-grams may
    contain ``"^"`` / ``"$"``), the convention of Cotterell & Eisner (2015, App. B.2)."""
    if order < 1:
        raise ParameterError(f"order must be ≥ 1, got {order}", name='order', value=order)
    if not fsa.is_acceptor:
        raise ParameterError("expected_ngram_counts needs an acceptor", name='fsa', value=fsa)
    histories, next_state = ngram_history_table(fsa.alphabet, order, boundaries)
    symbols = fsa.alphabet
    S = len(histories)
    product, arc_cell, _ = product_with_dfa(fsa, next_state, 0, np.zeros((S, len(symbols))), np.zeros(S))
    arc_counts, final_counts, _ = arc_posteriors(product)
    counts: dict = {}

    def add(h, s, c):
        gram = (h + (s,))
        if len(gram) == order and c > 0:
            counts[gram] = counts.get(gram, 0.0) + c

    for e in np.flatnonzero(arc_cell >= 0):
        cell = int(arc_cell[e])
        add(histories[cell // len(symbols)], symbols[cell % len(symbols)], float(arc_counts[e]))
    if boundaries:
        if order == 1:
            counts[("^",)] = 1.0
        state_of = np.arange(product.n_states) % S
        for q in np.flatnonzero(final_counts > 0):
            add(histories[state_of[q]], "$", float(final_counts[q]))
    return counts


# ---------------------------------------------------------------------------
# product with a complete deterministic automaton
# ---------------------------------------------------------------------------


def product_with_dfa(fsa: Wfsa, next_state: np.ndarray, start: int, cell_weight: np.ndarray,
                     end_weight: np.ndarray):
    """The acceptor ``fsa`` ⊙ D where D is complete and deterministic: ``next_state[s, a]``
    (a = label − 1), weights ``cell_weight[s, a]`` and ``end_weight[s]`` (final weight).

    Product state (q, s) has id ``q · S + s``; ε arcs of ``fsa`` move q alone. Returns the
    product (all q · S states, not trimmed), ``arc_cell`` (product arc → s · A + a, −1 for
    ε) and ``state_cell`` is implicit (state id mod S). Vectorised over D's states.
    """
    S, A = next_state.shape
    if A != len(fsa.alphabet):
        raise ParameterError(f"next_state has {A} symbol columns, the alphabet has {len(fsa.alphabet)}", name='next_state', value=next_state)
    s_all = np.arange(S)
    m = fsa.n_arcs
    src = (fsa.src[:, None] * S + s_all[None, :]).ravel()
    labels = np.repeat(fsa.ilabel, S)
    s_rep = np.tile(s_all, m)
    eps = labels == EPSILON
    sym = np.where(eps, 0, labels - 1)
    d_next = np.where(eps, s_rep, next_state[s_rep, sym])
    dst = np.repeat(fsa.dst, S) * S + d_next
    weight = np.repeat(fsa.weight, S) + np.where(eps, 0.0, cell_weight[s_rep, sym])
    arc_cell = np.where(eps, -1, s_rep * A + sym)
    final = (fsa.final[:, None] + end_weight[None, :]).ravel()
    product = Wfsa(fsa.alphabet, int(fsa.start * S + start), final, src, labels, labels.copy(), weight, dst)
    return product, arc_cell, None


# ---------------------------------------------------------------------------
# k-best strings and sampling
# ---------------------------------------------------------------------------


def kbest_strings(fsa: Wfsa, k: int, max_pops: int = 200_000) -> list:
    """The ``k`` strings (input tape) of highest best-path weight, best first, as
    ``(symbols tuple, best-path log weight)``. A* over paths; the heuristic is the exact
    max-plus completion, so complete paths pop in order of weight. ``max_pops`` bounds the
    work on machines whose many paths share few strings (fewer than k may come back)."""
    if k < 1:
        raise ParameterError(f"k must be ≥ 1, got {k}", name='k', value=k)
    machine = project(fsa, "input") if not fsa.is_acceptor else fsa
    h = shortest_distance(machine, "max", reverse=True)
    if h[machine.start] == NEG_INF:
        return []
    out_arcs: list[list] = [[] for _ in range(machine.n_states)]
    for e in range(machine.n_arcs):
        d = int(machine.dst[e])
        if h[d] > NEG_INF and machine.weight[e] > NEG_INF:
            out_arcs[int(machine.src[e])].append((float(machine.weight[e]), int(machine.ilabel[e]), d))
    # heap entries: (-(g + h), tie, g, state or -1 for "stopped", labels)
    heap = [(-h[machine.start], 0, 0.0, machine.start, ())]
    tie = 1
    seen: set = set()
    results = []
    pops = 0
    while heap and len(results) < k and pops < max_pops:
        _, _, g, q, labels = heapq.heappop(heap)
        pops += 1
        if q < 0:
            if labels not in seen:
                seen.add(labels)
                results.append((machine.decode(labels), g))
            continue
        if machine.final[q] > NEG_INF:
            total = g + machine.final[q]
            heapq.heappush(heap, (-total, tie, total, -1, labels))
            tie += 1
        for w, lab, d in out_arcs[q]:
            g2 = g + w
            heapq.heappush(heap, (-(g2 + h[d]), tie, g2, d, labels + ((lab,) if lab != EPSILON else ())))
            tie += 1
    return results


def sample_strings(fsa: Wfsa, n: int, seed=None, max_length: int = 10_000) -> list:
    """``n`` strings drawn from the normalised acceptor (input tape), by walking from the
    start and choosing each arc or stop in proportion to w · β(target)."""
    rng = as_rng(seed)
    machine = project(fsa, "input") if not fsa.is_acceptor else fsa
    beta = shortest_distance(machine, "log", reverse=True)
    if beta[machine.start] == NEG_INF:
        raise ParameterError("the machine accepts nothing: nothing to sample", name='fsa', value=fsa)
    order = np.argsort(machine.src, kind="stable")
    first = np.searchsorted(machine.src[order], np.arange(machine.n_states + 1))
    out = []
    for _ in range(int(n)):
        q, labels = machine.start, []
        for _step in range(max_length):
            arcs = order[first[q]:first[q + 1]]
            scores = np.concatenate([[machine.final[q]], machine.weight[arcs] + beta[machine.dst[arcs]]]) - beta[q]
            probs = np.exp(scores)
            choice = rng.choice(len(probs), p=probs / probs.sum())
            if choice == 0:
                break
            e = arcs[choice - 1]
            if machine.ilabel[e] != EPSILON:
                labels.append(int(machine.ilabel[e]))
            q = int(machine.dst[e])
        else:
            raise DivergenceError(f"a sampled path exceeded {max_length} arcs", option='max_length')
        out.append(machine.decode(labels))
    return out

