"""Full n-th-order Viterbi: the explicit (n - 1)-tuple state space of a high-order HMM,
the baseline that Carter, Dymetman & Bouchard (2012) call "F" (Fig. 4b).

Factorization: the same p(x) as :class:`~varorder.exact.target.HighOrderTarget`; the state
at position j is the tuple of the last min(n - 1, j) candidates, so every arc
(state, x) carries the exact factor log p_lm(x | <s> history) + log p_obs(o_j | x). The
state space at position j has prod of the candidate counts over the last n - 1 positions
states: exponential in n, which is what the q-automaton avoids. The lattice is built with
vectorised NumPy and scored with the LM's batched kernel; Viterbi is the engine's.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from varorder.exact.target import HighOrderTarget
from varorder.lattice import Lattice, path_labels, viterbi_arcs
from varorder.lm.model import LN10

__all__ = ["FullViterbiResult", "full_lattice", "full_viterbi"]


@dataclass
class FullViterbiResult:
    path: list[int] | None     # None when a limit stopped the construction
    log_p: float
    num_states: int
    num_arcs: int
    seconds: float
    finished: bool


class _Limit(Exception):
    pass


def full_lattice(target: HighOrderTarget, *, max_arcs: int = 20_000_000, time_limit: float | None = None) -> Lattice:
    """The explicit n-th-order lattice of ``target`` (arc score = exact log factor).

    Raises ``RuntimeError`` when it would exceed ``max_arcs`` arcs or ``time_limit`` seconds.
    """
    start = time.perf_counter()
    lm = target.lm
    window = lm.order - 1
    T = target.num_positions
    sizes = [len(s) for s in target.symbols]  # candidates at positions 1..T
    # State j: digits of the candidates at positions max(1, j - window + 1) .. j.
    state_symbols = [np.zeros((1, 0), dtype=np.int64)]
    counts = [1]
    positions, sources, targets, labels, weights = [np.zeros(1, dtype=np.int64)], [], [], [], []
    offset = 1
    prev_offset = 0
    for j in range(1, T + 1):
        k = sizes[j - 1]
        n_src = counts[-1]
        n_arcs = n_src * k
        if n_arcs + sum(len(a) for a in sources) > max_arcs:
            raise RuntimeError(f"full lattice exceeds {max_arcs} arcs at position {j}")
        if time_limit is not None and time.perf_counter() - start > time_limit:
            raise RuntimeError(f"full lattice exceeds the time limit of {time_limit} s at position {j}")
        symbols = target.symbols[j - 1]
        src = np.repeat(np.arange(n_src, dtype=np.int64), k)
        cand = np.tile(np.arange(k, dtype=np.int64), n_src)
        context = state_symbols[-1][src]
        drop = window > 0 and context.shape[1] >= window
        # History the LM sees: at most window symbols, <s> included while j <= window.
        sequences = np.concatenate([context, symbols[cand][:, None]], axis=1)
        bos = j <= window
        width = sequences.shape[1]
        log10, _ = lm.token_log10probs(sequences.reshape(-1).astype(np.int32),
                                       np.full(n_arcs, width, dtype=np.int64), bos=bos, eos=False)
        lm_score = log10.reshape(n_arcs, width)[:, -1] * LN10
        if window == 0:
            new_state = np.zeros(n_arcs, dtype=np.int64)
            n_dst = 1
            new_symbols = np.zeros((1, 0), dtype=np.int64)
        else:
            kept = context[:, 1:] if drop else context
            new_symbols_all = np.concatenate([kept, symbols[cand][:, None]], axis=1)
            if drop:
                radix = n_src // sizes[j - 1 - window]  # states sharing the dropped digit
                new_state = (src % radix) * k + cand
                n_dst = radix * k
            else:
                new_state = src * k + cand
                n_dst = n_src * k
            new_symbols = np.empty((n_dst, new_symbols_all.shape[1]), dtype=np.int64)
            new_symbols[new_state] = new_symbols_all
        sources.append(prev_offset + src)
        targets.append(offset + new_state)
        labels.append(symbols[cand])
        weights.append(lm_score + target.logliks[j - 1][cand])
        positions.append(np.full(n_dst, j, dtype=np.int64))
        state_symbols.append(new_symbols)
        counts.append(n_dst)
        prev_offset = offset
        offset += n_dst
    final = np.full(offset, -np.inf)
    final[prev_offset:] = 0.0
    return Lattice(np.concatenate(positions), np.concatenate(sources), np.concatenate(targets),
                   np.concatenate(labels), np.concatenate(weights), final)


def full_viterbi(target: HighOrderTarget, *, max_arcs: int = 20_000_000, time_limit: float | None = None) -> FullViterbiResult:
    """Viterbi over :func:`full_lattice`; a result with ``finished`` False when a limit hit."""
    start = time.perf_counter()
    try:
        lat = full_lattice(target, max_arcs=max_arcs, time_limit=time_limit)
    except RuntimeError:
        return FullViterbiResult(None, float("nan"), 0, 0, time.perf_counter() - start, False)
    arcs, score = viterbi_arcs(lat)
    return FullViterbiResult(path_labels(lat, arcs).tolist(), float(score), lat.num_nodes, lat.num_arcs,
                             time.perf_counter() - start, True)
