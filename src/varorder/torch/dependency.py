"""Projective dependency trees as hypergraphs: Eisner's algorithm on the engine.

Factorization (first-order, arc-factored; McDonald, Crammer & Pereira 2005): a projective
tree of n words with exactly one word attached to the root scores
s(tree) = Σ_{(h → m) ∈ tree} arc_scores[h, m], h ∈ 0..n (0 the root), m ∈ 1..n, and
p(tree) = exp(s − log Z).

The structure is Eisner's (1996) chart as a hypergraph (Klein & Manning 2001's view of
parsing as hypergraph search): complete and incomplete spans of each direction are nodes,
each way of combining two smaller spans is an edge, and the edge that creates an incomplete
span i…j carries the arc between its ends; the goal joins a left and a right complete span
at the root word r with the arc 0 → r (one root word). The engine's inside–outside then
gives log Z and every arc's marginal (the sum of its edges' marginals), Viterbi the best
tree, k-best and sampling from the same hypergraph; O(n³) edges.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
import torch

from varorder import hypergraph as _hypergraph
from varorder.errors import ParameterError
from varorder.hypergraph import Hypergraph
from varorder.torch._convert import as_lengths, check_float
from varorder.torch.functions import hypergraph_log_partition

__all__ = ["eisner_template", "tree_batch", "tree_log_partition", "tree_marginals", "tree_argmax",
           "tree_kbest", "tree_sample"]


@lru_cache(maxsize=64)
def eisner_template(n: int):
    """(num_nodes, edge_head, tail_offsets, tails, edge_arc) of the Eisner hypergraph of n words;
    ``edge_arc[e]`` = h · (n + 1) + m for the edge carrying arc h → m, −1 for the others."""
    if n < 1:
        raise ParameterError(f"a sentence needs at least one word, got n = {n}", name="lengths", value=n)
    ids = {}

    def node(kind, i, j, d):
        return ids.setdefault((kind, i, j, d), len(ids))

    heads, tails, arcs = [], [], []

    def edge(head, tail, arc=-1):
        heads.append(head)
        tails.append(tail)
        arcs.append(arc)

    width = n + 1
    for i in range(1, n + 1):                       # one-word complete spans: leaves
        for d in "RL":
            edge(node("C", i, i, d), [])
    for w in range(1, n):
        for i in range(1, n - w + 1):
            j = i + w
            right, left = node("I", i, j, "R"), node("I", i, j, "L")
            for k in range(i, j):
                parts = [ids[("C", i, k, "R")], ids[("C", k + 1, j, "L")]]
                edge(right, parts, i * width + j)    # arc i → j
                edge(left, parts, j * width + i)     # arc j → i
            cr, cl = node("C", i, j, "R"), node("C", i, j, "L")
            for k in range(i + 1, j + 1):
                edge(cr, [ids[("I", i, k, "R")], ids[("C", k, j, "R")]])
            for k in range(i, j):
                edge(cl, [ids[("C", i, k, "L")], ids[("I", k, j, "L")]])
    goal = len(ids)
    for r in range(1, n + 1):
        edge(goal, [ids[("C", 1, r, "L")], ids[("C", r, n, "R")]], r)   # arc 0 → r
    offsets = np.zeros(len(heads) + 1, dtype=np.int64)
    np.cumsum([len(t) for t in tails], out=offsets[1:])
    flat = np.array([x for t in tails for x in t], dtype=np.int64)
    return goal + 1, np.array(heads, dtype=np.int64), offsets, flat, np.array(arcs, dtype=np.int64)


def tree_batch(lengths, max_length: int):
    """(Hypergraph of the batch with zero weights, edge_arc (E,) into the flattened (B, L+1, L+1)
    score tensor or −1) for sentences of the given lengths, padded to ``max_length`` words."""
    width = max_length + 1
    counts, heads, tail_offsets, tails, arcs = [], [], [np.zeros(1, dtype=np.int64)], [], []
    node_base = tail_base = 0
    for b, n in enumerate(lengths):
        num, head, offsets, flat, arc = eisner_template(int(n))
        h, m = arc // (n + 1), arc % (n + 1)
        counts.append(num)
        heads.append(head + node_base)
        tail_offsets.append(offsets[1:] + tail_base)
        tails.append(flat + node_base)
        arcs.append(np.where(arc >= 0, b * width * width + h * width + m, -1))
        node_base += num
        tail_base += flat.shape[0]
    head = np.concatenate(heads)
    graph = Hypergraph(counts, head, (np.concatenate(tail_offsets), np.concatenate(tails)), np.zeros(head.shape[0]))
    return graph, np.concatenate(arcs)


def _inputs(arc_scores, lengths):
    check_float("arc_scores", arc_scores)
    if arc_scores.dim() != 3 or arc_scores.shape[1] != arc_scores.shape[2] or arc_scores.shape[1] < 2:
        raise ParameterError(f"arc_scores must have shape (B, L + 1, L + 1) with L >= 1, got "
                             f"{tuple(arc_scores.shape)}", name="arc_scores", value=tuple(arc_scores.shape))
    B, width, _ = arc_scores.shape
    n = as_lengths(lengths, B, width - 1)
    n = np.full(B, width - 1, dtype=np.int64) if n is None else n
    graph, edge_arc = tree_batch(n.tolist(), width - 1)
    return graph, edge_arc, n


def _edge_weights(arc_scores, edge_arc):
    index = torch.as_tensor(edge_arc, device=arc_scores.device)
    flat = arc_scores.reshape(-1)
    return torch.where(index >= 0, flat[index.clamp(min=0)], flat.new_zeros(()))


def tree_log_partition(arc_scores, lengths=None) -> torch.Tensor:
    """log Z (B,) over projective trees; ``arc_scores[b, h, m]`` scores h → m (h = 0 the root,
    words 1..n); differentiable (the gradient is the arc marginals)."""
    graph, edge_arc, _ = _inputs(arc_scores, lengths)
    return hypergraph_log_partition(graph, _edge_weights(arc_scores, edge_arc))


def tree_marginals(arc_scores, lengths=None) -> torch.Tensor:
    """p(h → m ∈ tree) (B, L + 1, L + 1), zero for impossible arcs."""
    graph, edge_arc, _ = _inputs(arc_scores, lengths)
    weights = _edge_weights(arc_scores, edge_arc).detach().to("cpu", torch.float64).numpy()
    _, edge, _ = _hypergraph.marginals(graph.with_weights(weights))
    use = edge_arc >= 0
    out = np.bincount(edge_arc[use], weights=edge[use], minlength=arc_scores.numel())
    return torch.from_numpy(out.reshape(arc_scores.shape)).to(device=arc_scores.device, dtype=arc_scores.dtype)


def _heads(edges, edge_arc, width, n):
    heads = np.full(n, -1, dtype=np.int64)
    for e in edges:
        a = edge_arc[e]
        if a >= 0:
            local = a % (width * width)
            heads[local % width - 1] = local // width
    return heads


def tree_argmax(arc_scores, lengths=None):
    """(heads: a list of B int arrays, heads[b][m − 1] = h of word m (0 = root); scores (B,))."""
    graph, edge_arc, n = _inputs(arc_scores, lengths)
    weights = _edge_weights(arc_scores, edge_arc).detach().to("cpu", torch.float64).numpy()
    scores, derivations = _hypergraph.viterbi(graph.with_weights(weights))
    width = arc_scores.shape[1]
    return [_heads(d, edge_arc, width, int(n[b])) for b, d in enumerate(derivations)], torch.from_numpy(scores)


def tree_kbest(arc_scores, k: int, lengths=None):
    """(per sentence a list of up to k head arrays, best first; scores (B, k))."""
    graph, edge_arc, n = _inputs(arc_scores, lengths)
    weights = _edge_weights(arc_scores, edge_arc).detach().to("cpu", torch.float64).numpy()
    scores, found = _hypergraph.kbest(graph.with_weights(weights), k)
    width = arc_scores.shape[1]
    return [[_heads(d, edge_arc, width, int(n[b])) for d in ds] for b, ds in enumerate(found)], \
        torch.from_numpy(scores)


def tree_sample(arc_scores, n_samples: int = 1, lengths=None, seed=None):
    """Per sentence, ``n_samples`` exact draws of head arrays."""
    graph, edge_arc, n = _inputs(arc_scores, lengths)
    weights = _edge_weights(arc_scores, edge_arc).detach().to("cpu", torch.float64).numpy()
    graph = graph.with_weights(weights)
    rng = np.random.default_rng(seed)
    width = arc_scores.shape[1]
    return [[_heads(d, edge_arc, width, int(n[b])) for d in
             _hypergraph.sample(graph, n_samples, seed=int(rng.integers(2**31 - 1)), graph=b)]
            for b in range(graph.num_graphs)]
