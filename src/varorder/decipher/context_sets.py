"""RCMS and beam-search context sets of the decipherment HMM, emitted as engine lattices
(Steinhardt & Liang 2015, §3–4 and App. A; the decipherment task of §6).

Model: the hidden plaintext y_{1:L} follows an n-th order chain (n = 1 or 2,
:mod:`varorder.decipher.transitions`) and emits cipher symbols x_i with p(x_i | y_i).
A context c_{i−1} is a suffix pattern fixing the last ℓ ≤ n words (★ elsewhere); the
lattice has one node per selected context and one arc per expansion (c_{i−1}, y_i) into
f_i(c_{i−1}, y_i), the smallest selected context containing c_{i−1} × {y_i}, weighted
log p(y_i | c_{i−1}) + log p(x_i | y_i); the last position's nodes end with
log p(</s> | c_L). Every word sequence has exactly one path.

Selection follows App. A, specialised to contexts capped at n symbols (the chain cannot
see further, so expansions agreeing on their last n words are merged before selection,
summing forward scores — exact, as in :func:`varorder.contexts.build_context_lattice`):

1. expand every context of position i − 1 by every word (an expansion of the all-★
   context fixes only y_i);
2. keep the B candidates of largest forward score (ties: the earlier candidate);
   candidates with forward score −∞ (nothing reaches them) are never kept;
3. merge every other candidate into its least kept ancestor: (y_{i−1}, y_i) into ★y_i when
   that is kept, else into the all-★ context, which is always present (coverage).

With B ≥ K^n nothing is ever merged and the lattice is the exact n-th order chain.
Contexts that leave y_{i−1} free score transitions with the LM's lower-order distribution
(the paper is silent; see :mod:`varorder.decipher.transitions`).

Beam search (select-by-model, §4.1) is the degenerate case ``mode="beam"``: contexts are
singleton prefixes (no recombination), only expansions of kept prefixes compete, and
the rest are dropped (coverage weight −∞).

The loop (expand, group, keep best, merge, emit) is the engine's selection builder
(:mod:`varorder.engine.builder`); this module supplies its hooks: the state (n-gram
contexts, their merge) and the scorer (the chain's transition rows). The forward scores computed here only *select*; log Z and marginals come from the
engine's lattice kernel (:func:`varorder.engine.lattice.marginals_kernel`), called on
arrays this module already holds in CSR order (arcs are emitted source-major, and a
counting pass orders them by target), as :mod:`varorder.exact` does.
Cost per position: O(|C_{i−1}| · K) expansions plus O(|C_{i−1}| · K · log B) selection.
"""

from __future__ import annotations

from dataclasses import dataclass

import numba as nb
import numpy as np

from varorder.decipher.transitions import TransitionTables, context_row_weights
from varorder.engine.builder import DROP, SelectionBuilder, root, selection_builder
from varorder.engine.lattice import marginals_kernel
from varorder.errors import ParameterError
from varorder.lattice import Lattice
import varorder._numba_start  # noqa: E402,F401,I001  (Numba's cache saves locked across processes)

__all__ = ["MODES", "ContextArrays", "build_context_arrays", "context_estep", "shard_estep"]

MODES = ("rcms", "beam")
_NEG_INF = -np.inf


# state row of a context: the previous word u (−1: free), the last word v (−1: free; K at
# position 0: BOS), the symbols it fixes (BOS counted) and the positions of y_{1:i} it
# determines (Fig. 6)
_U, _V, _LEN, _CTX = range(4)


@nb.njit(cache=True, nogil=True)
def _expand(ctx, i, node_pos, node_fwd, node_state, prev_first, prev_count, c_src, c_lab, c_w, c_fwd, c_key,
            c_class, c_flags, c_payload):
    """Every kept context of position i − 1 by every word, scored by the chain's row; the
    state key is the (y_{i−1}, y_i) pair or the ★y_i pattern (beam: none, singletons)."""
    (obs, order, beam, K, log_unigram, log_bigram, log_bigram_raw, context_row, log_gamma, log_norm,
     trigram_offsets, trigram_words, trigram_logp, row) = ctx
    star_slots = (K + 1) * K
    n = 0
    for k in range(prev_count):
        p = prev_first + k
        length = node_state[p, _LEN]
        last = node_state[p, _V]
        context_row_weights(node_state[p, _U], last, min(length, order), K, log_unigram, log_bigram,
                            log_bigram_raw, context_row, log_gamma, log_norm, trigram_offsets, trigram_words,
                            trigram_logp, row)
        pair = not beam and min(length + 1, order) == 2
        for y in range(K):
            w = row[y] + obs[i - 1, y]
            c = n
            n += 1
            c_src[c] = p
            c_lab[c] = y
            c_w[c] = w
            c_fwd[c] = node_fwd[p] + w
            c_class[c] = 0
            c_flags[c] = 0
            c_key[c] = -1 if beam else last * K + y if pair else star_slots + y
    return n


@nb.njit(cache=True, nogil=True)
def _open_state(ctx, i, node_state, c, c_src, c_lab, c_payload, row):
    order, beam = ctx[1], ctx[2]
    p = c_src[c]
    row[_V] = c_lab[c]
    if beam:
        row[_U] = node_state[p, _V]
        row[_LEN] = order
        row[_CTX] = i
    elif min(node_state[p, _LEN] + 1, order) == 2:
        row[_U] = node_state[p, _V]
        row[_LEN] = 2
        row[_CTX] = min(2, i)
    else:
        row[_U] = -1
        row[_LEN] = 1
        row[_CTX] = 1


@nb.njit(cache=True, nogil=True)
def _merge(ctx, i, node_state, first, slot_group, c_src, c_lab, c_key, c_group, c_payload, n, g_rep, g_fwd,
           g_flags, active, g_node, n_groups, g_target, c_target):
    """(y_{i−1}, y_i) into ★y_i when that is kept, else into the all-★ root (beam: dropped)."""
    order, beam, K = ctx[1], ctx[2], ctx[3]
    star_slots = (K + 1) * K
    for g in range(n_groups):
        if active[g]:
            continue
        if beam:
            g_target[g] = DROP
            continue
        c = g_rep[g]
        pair = min(node_state[c_src[c], _LEN] + 1, order) == 2
        star = slot_group[star_slots + c_lab[c]] if pair else -1
        g_target[g] = g_node[star] if star >= 0 and active[star] else root(0)


@nb.njit(cache=True, nogil=True)
def _root_state(ctx, i, key, node_state, v, row):
    row[_U] = -1
    row[_V] = -1
    row[_LEN] = 0
    row[_CTX] = 0


_LOOP = selection_builder(SelectionBuilder(_expand, _open_state, _merge, _root_state))
# beam search: the candidates not kept are dropped (the loop visits only the kept ones)
_BEAM_LOOP = selection_builder(SelectionBuilder(_expand, _open_state, _merge, _root_state, drop_unkept=True))


@nb.njit(cache=True, nogil=True)
def _build(obs, order, budget, beam, K, log_unigram, log_bigram, log_bigram_raw, context_row, log_gamma,
           log_norm, trigram_offsets, trigram_words, trigram_logp):
    L = obs.shape[0]
    row = np.empty(K + 1)
    ctx = (obs, order, beam, K, log_unigram, log_bigram, log_bigram_raw, context_row, log_gamma, log_norm,
           trigram_offsets, trigram_words, trigram_logp, row)
    state0 = np.array([K, K, order, 0], np.int64)
    sizes = (1 + L * (budget + 1), L * (budget + 1) * K, (budget + 1) * K)
    if beam:
        node_pos, node_fwd, node_state, src, dst, lab, wt, _, _, last_first = _BEAM_LOOP(
            ctx, L, state0, 0, K, budget, 1, -1, 1, False, 0.0, False, sizes)
    else:
        node_pos, node_fwd, node_state, src, dst, lab, wt, _, _, last_first = _LOOP(
            ctx, L, state0, 0, K, budget, 1, (K + 1) * K + K, 1, True, 0.0, False, sizes)
    n_nodes = node_pos.shape[0]
    final = np.full(n_nodes, _NEG_INF)
    for v in range(last_first, n_nodes):
        context_row_weights(node_state[v, _U], node_state[v, _V], min(node_state[v, _LEN], order), K, log_unigram,
                            log_bigram, log_bigram_raw, context_row, log_gamma, log_norm, trigram_offsets,
                            trigram_words, trigram_logp, row)
        final[v] = row[K]
    return node_pos, node_state[:, _CTX].copy(), node_fwd, final, src, dst, lab, wt


@nb.njit(cache=True, nogil=True)
def _csr(num_nodes, src, dst):
    """(in_offsets, in_arcs, out_offsets, out_arcs); arcs are already source-major."""
    n_arcs = src.shape[0]
    out_offsets = np.zeros(num_nodes + 1, np.int64)
    in_offsets = np.zeros(num_nodes + 1, np.int64)
    for a in range(n_arcs):
        out_offsets[src[a] + 1] += 1
        in_offsets[dst[a] + 1] += 1
    for v in range(num_nodes):
        out_offsets[v + 1] += out_offsets[v]
        in_offsets[v + 1] += in_offsets[v]
    out_arcs = np.arange(n_arcs)
    in_arcs = np.empty(n_arcs, np.int64)
    fill = in_offsets[:-1].copy()
    for a in range(n_arcs):
        in_arcs[fill[dst[a]]] = a
        fill[dst[a]] += 1
    return in_offsets, in_arcs, out_offsets, out_arcs


@nb.njit(cache=True, nogil=True)
def _sentence_estep(obs, order, budget, beam, K, t0, t1, t2, t3, t4, t5, t6, t7, t8, posterior):
    """Build, run the engine's marginals, write label posteriors (L, K); returns
    (log Z, Σ over positions 1..L−1 of the expected context length, arcs)."""
    pos, ctx, _, final, src, dst, lab, wt = _build(obs, order, budget, beam, K, t0, t1, t2, t3, t4, t5, t6, t7, t8)
    n = pos.shape[0]
    in_off, in_arcs, out_off, out_arcs = _csr(n, src, dst)
    logz, node_m, arc_m, _ = marginals_kernel(n, in_off, in_arcs, out_off, out_arcs, src, dst, wt, final)
    posterior[:, :] = 0.0
    for a in range(src.shape[0]):
        posterior[pos[dst[a]] - 1, lab[a]] += arc_m[a]
    L = obs.shape[0]
    ctx_sum = 0.0
    for v in range(n):
        if 1 <= pos[v] <= L - 1:
            ctx_sum += node_m[v] * ctx[v]
    return logz, ctx_sum, src.shape[0]


@nb.njit(cache=True, nogil=True)
def shard_kernel(symbols, offsets, log_emission_t, order, budget, beam, K, t0, t1, t2, t3, t4, t5, t6, t7, t8,
                 counts):
    """E-step over sentences: add expected (symbol, word) counts into ``counts`` (C, K);
    returns (Σ log Z, Σ expected context length, Σ arcs, sentences with log Z = −∞)."""
    total_logz = 0.0
    total_ctx = 0.0
    total_arcs = 0
    failed = 0
    for s in range(offsets.shape[0] - 1):
        a, b = offsets[s], offsets[s + 1]
        L = b - a
        obs = np.empty((L, K))
        for t in range(L):
            obs[t, :] = log_emission_t[symbols[a + t]]
        posterior = np.empty((L, K))
        logz, ctx, arcs = _sentence_estep(obs, order, budget, beam, K, t0, t1, t2, t3, t4, t5, t6, t7, t8, posterior)
        total_arcs += arcs
        if logz == _NEG_INF:
            failed += 1
            continue
        total_logz += logz
        total_ctx += ctx
        for t in range(L):
            c = symbols[a + t]
            for w in range(K):
                counts[c, w] += posterior[t, w]
    return total_logz, total_ctx, total_arcs, failed


@dataclass
class ContextArrays:
    """One sentence's selected contexts: an engine :class:`~varorder.lattice.Lattice` plus
    each node's context length (positions of y_{1:i} it determines) and forward score."""

    lattice: Lattice
    context_length: np.ndarray
    forward: np.ndarray


def _check_mode(mode: str, size: int) -> bool:
    if mode not in MODES:
        raise ParameterError(f"mode must be one of {MODES}, got {mode!r}", name='mode', value=mode)
    if int(size) != size or size < 1:
        raise ParameterError(f"size (contexts or beam entries per position) must be a positive integer, got {size!r}", name='size', value=size)
    return mode == "beam"


def build_context_arrays(observation_scores, tables: TransitionTables, size: int, mode: str = "rcms") -> ContextArrays:
    """Select the contexts of one sentence (observation_scores (L, K): log p(x_i | y))."""
    beam = _check_mode(mode, size)
    obs = np.ascontiguousarray(observation_scores, dtype=np.float64)
    if obs.ndim != 2 or obs.shape[0] < 1 or obs.shape[1] != tables.num_words:
        raise ParameterError(f"observation_scores must have shape (L >= 1, {tables.num_words}), got {obs.shape}", name='observation_scores', value=observation_scores)
    pos, ctx, fwd, final, src, dst, lab, wt = _build(obs, tables.order, int(size), beam, tables.num_words,
                                                     *tables.arrays())
    return ContextArrays(Lattice(pos, src, dst, lab, wt, final), ctx, fwd)


def context_estep(observation_scores, tables: TransitionTables, size: int, mode: str = "rcms"):
    """(label posteriors (L, K), log Z, Σ expected context length over positions 1..L−1) of one sentence."""
    beam = _check_mode(mode, size)
    obs = np.ascontiguousarray(observation_scores, dtype=np.float64)
    if obs.ndim != 2 or obs.shape[0] < 1 or obs.shape[1] != tables.num_words:
        raise ParameterError(f"observation_scores must have shape (L >= 1, {tables.num_words}), got {obs.shape}", name='observation_scores', value=observation_scores)
    posterior = np.empty_like(obs)
    logz, ctx, _ = _sentence_estep(obs, tables.order, int(size), beam, tables.num_words, *tables.arrays(), posterior)
    return posterior, float(logz), float(ctx)


def shard_estep(symbols, offsets, log_emission_t, tables: TransitionTables, size: int, mode: str = "rcms"):
    """Expected counts (C, K) and (Σ log Z, Σ context length, arcs, failed sentences) of a shard."""
    beam = _check_mode(mode, size)
    counts = np.zeros_like(log_emission_t)
    stats = shard_kernel(symbols, offsets, log_emission_t, tables.order, int(size), beam, tables.num_words,
                         *tables.arrays(), counts)
    return counts, stats
