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

Grouping and selection are the engine's shared pass (:mod:`varorder.engine.selection`);
this module supplies the state (n-gram contexts) and the scorer (the chain's transition
rows). The forward scores computed here only *select*; log Z and marginals come from the
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
from varorder.engine.lattice import marginals_kernel
from varorder.engine.selection import group_of_slot, keep_best
from varorder.engine.semiring import log_plus
from varorder.errors import ParameterError
from varorder.lattice import Lattice
import varorder._numba_start  # noqa: E402,F401,I001  (Numba's cache saves locked across processes)

__all__ = ["MODES", "ContextArrays", "build_context_arrays", "context_estep", "shard_estep"]

MODES = ("rcms", "beam")
_NEG_INF = -np.inf


@nb.njit(cache=True, nogil=True)
def _merge_candidate(slot_group, slot, f, length, u, v, n_groups, g_fwd, g_len, g_u, g_v):
    """Add forward score f to the candidate pattern in ``slot`` (created on first use)."""
    g, n_groups, new = group_of_slot(slot_group, slot, f, n_groups, g_fwd)
    if new:
        g_len[g] = length
        g_u[g] = u
        g_v[g] = v
    return g, n_groups


@nb.njit(cache=True, nogil=True)
def _build(obs, order, budget, beam, K, log_unigram, log_bigram, log_bigram_raw, context_row, log_gamma,
           log_norm, trigram_offsets, trigram_words, trigram_logp):
    L = obs.shape[0]
    width = budget + 1
    max_nodes = 1 + L * width
    max_arcs = L * width * K
    node_pos = np.zeros(max_nodes, np.int64)
    node_u = np.full(max_nodes, -1, np.int64)
    node_v = np.full(max_nodes, -1, np.int64)
    node_len = np.zeros(max_nodes, np.int64)  # symbols the context fixes (BOS counted)
    node_ctx = np.zeros(max_nodes, np.int64)  # positions of y_{1:i} it determines (Fig. 6)
    node_fwd = np.full(max_nodes, _NEG_INF)
    src = np.empty(max_arcs, np.int64)
    dst = np.empty(max_arcs, np.int64)
    lab = np.empty(max_arcs, np.int64)
    wt = np.empty(max_arcs)
    row = np.empty(K + 1)
    pair_group = np.full((K + 1) * K, -1, np.int64)
    star_group = np.full(K, -1, np.int64)
    n_cand_max = width * K
    e_group = np.empty(n_cand_max, np.int64)
    e_w = np.empty(n_cand_max)
    g_fwd = np.empty(n_cand_max)
    g_len = np.empty(n_cand_max, np.int64)
    g_u = np.empty(n_cand_max, np.int64)
    g_v = np.empty(n_cand_max, np.int64)
    g_target = np.empty(n_cand_max, np.int64)
    active = np.zeros(n_cand_max, np.bool_)
    one_class = np.zeros(n_cand_max, np.int64)  # decipherment keeps the B best overall
    node_u[0] = K
    node_v[0] = K
    node_len[0] = order
    node_fwd[0] = 0.0
    n_nodes = 1
    n_arcs = 0
    prev_first = 0
    pc = 1
    for i in range(1, L + 1):
        n_groups = 0
        for k in range(pc):
            p = prev_first + k
            context_row_weights(node_u[p], node_v[p], min(node_len[p], order), K, log_unigram, log_bigram,
                                log_bigram_raw, context_row, log_gamma, log_norm, trigram_offsets,
                                trigram_words, trigram_logp, row)
            for y in range(K):
                e = k * K + y
                w = row[y] + obs[i - 1, y]
                e_w[e] = w
                f = node_fwd[p] + w
                if beam:
                    g = n_groups
                    n_groups += 1
                    g_fwd[g] = f
                    g_len[g] = order
                    g_u[g] = node_v[p]
                    g_v[g] = y
                else:
                    if min(node_len[p] + 1, order) == 2:
                        g, n_groups = _merge_candidate(pair_group, node_v[p] * K + y, f, 2, node_v[p], y,
                                                       n_groups, g_fwd, g_len, g_u, g_v)
                    else:
                        g, n_groups = _merge_candidate(star_group, y, f, 1, -1, y, n_groups, g_fwd, g_len, g_u, g_v)
                e_group[e] = g
        for g in range(n_groups):
            active[g] = False
        keep_best(g_fwd, n_groups, one_class, 1, budget, active)
        first = n_nodes
        for g in range(n_groups):
            if active[g]:
                v = n_nodes
                n_nodes += 1
                node_pos[v] = i
                node_u[v] = g_u[g]
                node_v[v] = g_v[g]
                node_len[v] = g_len[g]
                node_ctx[v] = i if beam else min(g_len[g], i)
                g_target[g] = v
        root = -1
        if not beam:
            root = n_nodes
            n_nodes += 1
            node_pos[root] = i
        for g in range(n_groups):
            if not active[g]:
                if beam:
                    g_target[g] = -1
                elif g_len[g] == 2:
                    star = star_group[g_v[g]]
                    g_target[g] = g_target[star] if star >= 0 and active[star] else root
                else:
                    g_target[g] = root
        for e in range(pc * K):
            t = g_target[e_group[e]]
            if t < 0:
                continue
            s = prev_first + e // K
            src[n_arcs] = s
            dst[n_arcs] = t
            lab[n_arcs] = e % K
            wt[n_arcs] = e_w[e]
            node_fwd[t] = log_plus(node_fwd[t], node_fwd[s] + e_w[e])
            n_arcs += 1
        # reset the merge scratch for the next position
        for g in range(n_groups):
            if g_len[g] == 2:
                pair_group[g_u[g] * K + g_v[g]] = -1
            else:
                star_group[g_v[g]] = -1
        prev_first = first
        pc = n_nodes - first
    final = np.full(n_nodes, _NEG_INF)
    for v in range(prev_first, n_nodes):
        context_row_weights(node_u[v], node_v[v], min(node_len[v], order), K, log_unigram, log_bigram,
                            log_bigram_raw, context_row, log_gamma, log_norm, trigram_offsets,
                            trigram_words, trigram_logp, row)
        final[v] = row[K]
    return (node_pos[:n_nodes], node_ctx[:n_nodes], node_fwd[:n_nodes], final, src[:n_arcs], dst[:n_arcs],
            lab[:n_arcs], wt[:n_arcs])


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
