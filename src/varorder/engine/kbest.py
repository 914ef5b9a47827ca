"""k-best paths and derivations from the KBEST semiring's forward values: the backtrack.

The generic recursion of each structure, run in the KBEST semiring
(:mod:`varorder.engine.semiring_structured`), leaves at every node (chain position and
label, lattice node, hypergraph node) the k best scores of the paths or derivations that
reach it, best first. The k best complete ones follow by re-deriving, for each entry met
on the way back, which predecessor entry produced it: the candidates a node's ⊕ and ⊗
combined are recomputed with the same arithmetic and ranked with the same tie rule (⊕
takes its left operand first, ⊗ orders equal sums by the left rank, then the right), so
the entry of rank r is the r-th candidate. A node's ranking is computed once, on the
first visit, and kept (no back-pointer table is filled during the forward pass). This is
the k-best counterpart of Viterbi's re-maximising backtrack; for chains and lattices the
paths equal list Viterbi's (Seshadri & Sundberg 1994), ties included; for hypergraphs the
derivations are Huang & Chiang's (2005) k best.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from varorder.engine.chain_viterbi import _top_k
from varorder.engine.semiring_structured import top_sums
import varorder._numba_start  # noqa: E402,F401,I001  (Numba's cache saves locked across processes)

__all__ = ["chain_paths", "lattice_arcs", "hypergraph_derivations"]

NEG_INF = -np.inf


@nb.njit(cache=True, parallel=True)
def chain_paths(E, T, start, end, lengths, alphas, scores):
    """The k best label paths (B, k, L), −1 padded, of chains whose KBEST forward values
    are ``alphas`` (B, L, K, k) and totals ``scores`` (B, k)."""
    B, L, K = E.shape
    k = scores.shape[1]
    paths = np.full((B, k, L), -1, dtype=np.int64)
    for b in nb.prange(B):
        n = lengths[b]
        Tb = T[b % T.shape[0]]
        alpha = alphas[b]
        cand = np.empty(K * k)
        for j in range(K):
            for r in range(k):
                cand[j * k + r] = alpha[n - 1, j, r] + end[j]
        top = _top_k(cand, k)
        bp = np.empty((n, K, k), dtype=np.int64)  # prev_label * k + prev_rank, filled on first visit
        seen = np.zeros((n, K), dtype=np.bool_)
        for r in range(k):
            idx = top[r]
            if idx < 0:
                break
            j = idx // k
            rank = idx % k
            for t in range(n - 1, -1, -1):
                paths[b, r, t] = j
                if t == 0:
                    break
                if not seen[t, j]:
                    for i in range(K):
                        for q in range(k):
                            cand[i * k + q] = alpha[t - 1, i, q] + Tb[i, j]
                    bp[t, j] = _top_k(cand, k)
                    seen[t, j] = True
                prev = bp[t, j, rank]
                j = prev // k
                rank = prev % k
    return paths


@nb.njit(cache=True)
def lattice_arcs(num_nodes, in_offsets, in_arcs, arc_source, arc_weight, final, node_position, alphas):
    """The k best paths as arc ids (k, max_len), −1 padded, and their scores (k,), of a
    lattice whose KBEST forward values are ``alphas`` (N, k)."""
    k = alphas.shape[1]
    cand = np.empty(num_nodes * k)
    for v in range(num_nodes):
        for r in range(k):
            cand[v * k + r] = alphas[v, r] + final[v]
    top = _top_k(cand, k)
    max_len = 0
    for v in range(num_nodes):
        max_len = max(max_len, node_position[v])
    paths = np.full((k, max_len), -1, dtype=np.int64)
    scores = np.full(k, NEG_INF)
    bp_arc = np.empty((num_nodes, k), dtype=np.int64)
    bp_rank = np.empty((num_nodes, k), dtype=np.int64)
    seen = np.zeros(num_nodes, dtype=np.bool_)
    for r in range(k):
        idx = top[r]
        if idx < 0:
            break
        scores[r] = cand[idx]
        v = idx // k
        rank = idx % k
        while v != 0:
            if not seen[v]:
                lo = in_offsets[v]
                hi = in_offsets[v + 1]
                c = np.empty((hi - lo) * k)
                for q in range(lo, hi):
                    a = in_arcs[q]
                    for p in range(k):
                        c[(q - lo) * k + p] = alphas[arc_source[a], p] + arc_weight[a]
                order = _top_k(c, k)
                for p in range(k):
                    if order[p] >= 0:
                        bp_arc[v, p] = in_arcs[lo + order[p] // k]
                        bp_rank[v, p] = order[p] % k
                seen[v] = True
            a = bp_arc[v, rank]
            paths[r, node_position[v] - 1] = a
            rank = bp_rank[v, rank]
            v = arc_source[a]
    return paths, scores


@nb.njit(cache=True)
def _times_ranked(part, ranks, slot, b, out, out_ranks, from_a, from_b):
    """part ⊗ b as the KBEST ⊗ computes it (same branches, same sums), with the tail ranks:
    out_ranks[p] = ranks[row of part used] with rank ``slot`` set to b's rank."""
    k = part.shape[0]
    if k == 1 or b[1] == NEG_INF:
        for p in range(k):
            from_a[p] = p
            from_b[p] = 0
    elif part[1] == NEG_INF:
        for p in range(k):
            from_a[p] = 0
            from_b[p] = p
    else:
        top_sums(part, b, out, from_a, from_b)
    for p in range(k):
        if from_a[p] < 0:
            out[p] = NEG_INF
            continue
        out[p] = part[from_a[p]] + b[from_b[p]]
        out_ranks[p] = ranks[from_a[p]]
        out_ranks[p, slot] = from_b[p]


@nb.njit(cache=True)
def _node_ranking(v, in_offsets, in_edges, tail_offsets, tails, edge_weight, beta, prov_edge, prov_ranks):
    """For each entry of node v's k-best list, the edge and the ranks of its tails' entries."""
    k = beta.shape[1]
    width = prov_ranks.shape[2]
    acc = np.full(k, NEG_INF)
    acc_edge = np.full(k, -1, dtype=np.int64)
    acc_ranks = np.zeros((k, width), dtype=np.int64)
    part = np.empty(k)
    ranks = np.zeros((k, width), dtype=np.int64)
    out = np.empty(k)
    out_ranks = np.zeros((k, width), dtype=np.int64)
    from_a = np.empty(k, dtype=np.int64)
    from_b = np.empty(k, dtype=np.int64)
    merged = np.empty(k)
    merged_edge = np.empty(k, dtype=np.int64)
    merged_ranks = np.empty((k, width), dtype=np.int64)
    for q in range(in_offsets[v], in_offsets[v + 1]):
        e = in_edges[q]
        part[:] = NEG_INF
        part[0] = 0.0 + edge_weight[e]  # the lift: one ⊗ w, as the semiring computes it
        for r in range(tail_offsets[e], tail_offsets[e + 1]):
            _times_ranked(part, ranks, r - tail_offsets[e], beta[tails[r]], out, out_ranks, from_a, from_b)
            part[:] = out
            ranks[:] = out_ranks
        # acc ⊕ part: the stable merge, ties to acc
        ia = 0
        ib = 0
        for p in range(k):
            if ib >= k or (ia < k and acc[ia] >= part[ib]):
                merged[p] = acc[ia]
                merged_edge[p] = acc_edge[ia]
                merged_ranks[p] = acc_ranks[ia]
                ia += 1
            else:
                merged[p] = part[ib]
                merged_edge[p] = e
                merged_ranks[p] = ranks[ib]
                ib += 1
        acc[:] = merged
        acc_edge[:] = merged_edge
        acc_ranks[:] = merged_ranks
    prov_edge[v] = acc_edge
    prov_ranks[v] = acc_ranks


@nb.njit(cache=True)
def hypergraph_derivations(node_offsets, in_offsets, in_edges, tail_offsets, tails, edge_weight, beta):
    """The k best derivations of every graph from KBEST inside values ``beta`` (N, k): edge
    ids in preorder (goal edge first, tails left to right), with offsets (G·k + 1,) — entry
    g·k + r is graph g's derivation of rank r (empty past its number of derivations)."""
    n_graphs = node_offsets.shape[0] - 1
    n_nodes, k = beta.shape
    width = 1
    for e in range(tail_offsets.shape[0] - 1):
        width = max(width, tail_offsets[e + 1] - tail_offsets[e])
    prov_edge = np.empty((n_nodes, k), dtype=np.int64)
    prov_ranks = np.empty((n_nodes, k, width), dtype=np.int64)
    seen = np.zeros(n_nodes, dtype=np.bool_)
    offsets = np.zeros(n_graphs * k + 1, dtype=np.int64)
    out = np.empty(16, dtype=np.int64)
    stack = np.empty((16, 2), dtype=np.int64)
    size = 0
    for g in range(n_graphs):
        goal = node_offsets[g + 1] - 1
        for r in range(k):
            if beta[goal, r] > NEG_INF:
                stack[0, 0] = goal
                stack[0, 1] = r
                depth = 1
                while depth > 0:
                    depth -= 1
                    v = stack[depth, 0]
                    rank = stack[depth, 1]
                    if not seen[v]:
                        _node_ranking(v, in_offsets, in_edges, tail_offsets, tails, edge_weight, beta, prov_edge,
                                      prov_ranks)
                        seen[v] = True
                    e = prov_edge[v, rank]
                    if size == out.shape[0]:
                        grown = np.empty(2 * size, dtype=np.int64)
                        grown[:size] = out
                        out = grown
                    out[size] = e
                    size += 1
                    lo = tail_offsets[e]
                    for p in range(tail_offsets[e + 1] - 1, lo - 1, -1):
                        if depth == stack.shape[0]:
                            grown2 = np.empty((2 * depth, 2), dtype=np.int64)
                            grown2[:depth] = stack
                            stack = grown2
                        stack[depth, 0] = tails[p]
                        stack[depth, 1] = prov_ranks[v, rank, p - lo]
                        depth += 1
            offsets[g * k + r + 1] = size
    return out[:size].copy(), offsets
