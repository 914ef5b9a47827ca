"""Exact inference on acyclic hypergraphs (batched): inside, outside, Viterbi, sampling.

Factorization. A hypergraph has nodes 0 … N−1 and hyperedges e = (head, tails,
weight) with every tail id smaller than the head id (node ids are a topological
order). An edge with no tails is an axiom. A *derivation* of node v picks one
edge e into v and, recursively, one derivation of each tail of e; its score is
the sum of the weights of every edge it uses (an edge used twice counts twice).
The goal is the graph's last node: p(d) = exp(score(d) − log Z) over the
derivations d of the goal. Lattices are the special case where every edge has
one tail (plus one axiom at the root and one edge per final weight into an
extra goal node); CKY charts, the dependency model with valence and the
constituent-context model (:mod:`varorder.grammar`) are hypergraphs with two
tails per binary rule.

Storage is flat and batched: graph g owns nodes ``node_offsets[g] …
node_offsets[g+1]−1`` and edges ``edge_offsets[g] … edge_offsets[g+1]−1`` (node
and tail ids are global); tails are CSR (``tail_offsets``, ``tails``) and edges
are indexed by head in CSR form (``in_offsets``, ``in_edges``), so each pass is
one sweep over nodes in id order.

Algorithms: one semiring-generic inside (⊕, ⊗ from :mod:`varorder.engine.semiring`,
scalar or structured): log Z in LOG, entropy in EXPECTATION (log Z − E[score]), the k
best derivations in KBEST plus the k-best backtrack (:mod:`varorder.engine.kbest`);
outside and edge/node marginals in the LOG semiring (the expected counts of
EM are sums of edge marginals); Viterbi as the MAX inside plus a top-down
re-maximising backtrack; sampling top-down over the LOG inside values with a
seeded generator. References: Klein & Manning (2001) "Parsing and
Hypergraphs"; Goodman (1999) "Semiring Parsing"; Huang (2008) "Advanced
Dynamic Programming in Semiring and Hypergraph Frameworks".
"""

from __future__ import annotations

import numba as nb
import numpy as np

from varorder.engine.lattice import _draw_log
from varorder.engine.kbest import hypergraph_derivations
from varorder.engine.semiring import LOG, MAX, Semiring, cells, compiled
from varorder.engine.semiring_structured import EXPECTATION, KBEST, entropy_of
import varorder._numba_start  # noqa: E402,F401,I001  (Numba's cache saves locked across processes)

NEG_INF = -np.inf


def make_inside(semiring: Semiring):
    """inside[v] = ⊕ over edges e into v of lift(weight(e)) ⊗ ⨂_{t ∈ tails(e)} inside[t];
    returns goal values (G,) or (G, d). beta is (N,) for a scalar semiring, (N, d) for a
    structured one."""
    c = cells(semiring)
    zero, plus, times, lift, put = c.zero, c.plus, c.times, c.lift, c.put

    # not cached (closure factory): see varorder.engine.semiring
    @nb.njit
    def inside(node_offsets, in_offsets, in_edges, tail_offsets, tails, edge_weight, beta):
        n_graphs = node_offsets.shape[0] - 1
        goal = np.empty_like(beta[:n_graphs])
        s = np.empty_like(beta[:1])[0]  # a float (unused) or a row of scratch
        for g in range(n_graphs):
            for v in range(node_offsets[g], node_offsets[g + 1]):
                acc = zero(beta[v])
                for q in range(in_offsets[v], in_offsets[v + 1]):
                    e = in_edges[q]
                    s = lift(s, edge_weight[e])
                    for r in range(tail_offsets[e], tail_offsets[e + 1]):
                        s = times(s, s, beta[tails[r]])
                    acc = plus(acc, acc, s)
                put(beta, v, acc)
            put(goal, g, beta[node_offsets[g + 1] - 1])
        return goal

    return inside


generic_log_inside = compiled(make_inside, LOG)
max_inside = compiled(make_inside, MAX)


@nb.njit(cache=True)
def log_inside(node_offsets, in_offsets, in_edges, tail_offsets, tails, edge_weight, beta):
    """The LOG inside of :func:`make_inside`, specialised: per node the incoming edge
    scores are gathered once, then beta[v] = top + log Σ exp(s_e − top), one exp per
    edge and one log per node instead of a log1p and an exp per edge (tested equal to
    ``generic_log_inside``)."""
    return _log_inside(node_offsets, in_offsets, in_edges, tail_offsets, tails, edge_weight, beta,
                       np.empty(0))


@nb.njit(cache=True)
def _log_inside(node_offsets, in_offsets, in_edges, tail_offsets, tails, edge_weight, beta, local):
    """:func:`log_inside`; when ``local`` has a slot per edge it also receives each edge's
    share of its head's inside, exp(s_e − beta[head]) (0 where the head has none), which
    is all the outside pass needs."""
    n_graphs = node_offsets.shape[0] - 1
    keep = local.shape[0] > 0
    goal = np.empty(n_graphs)
    most = 0
    for v in range(node_offsets[n_graphs]):
        most = max(most, in_offsets[v + 1] - in_offsets[v])
    scores = np.empty(most)
    for g in range(n_graphs):
        for v in range(node_offsets[g], node_offsets[g + 1]):
            lo = in_offsets[v]
            hi = in_offsets[v + 1]
            top = NEG_INF
            for q in range(lo, hi):
                e = in_edges[q]
                s = edge_weight[e]
                for r in range(tail_offsets[e], tail_offsets[e + 1]):
                    s += beta[tails[r]]
                scores[q - lo] = s
                if s > top:
                    top = s
            if top == NEG_INF:
                beta[v] = NEG_INF
                if keep:
                    for q in range(lo, hi):
                        local[in_edges[q]] = 0.0
                continue
            acc = 0.0
            for q in range(hi - lo):
                scores[q] = np.exp(scores[q] - top)
                acc += scores[q]
            beta[v] = top + np.log(acc)
            if keep:
                for q in range(lo, hi):
                    local[in_edges[q]] = scores[q - lo] / acc
        goal[g] = beta[node_offsets[g + 1] - 1]
    return goal


# Registered specialisations of the generic inside (tested equal to it).
SPECIALISED_INSIDE = {LOG: log_inside}


def inside_kernel(semiring: Semiring):
    """The inside kernel for ``semiring``: its registered specialisation, else the generic
    recursion compiled for it."""
    found = SPECIALISED_INSIDE.get(semiring)
    return found if found is not None else compiled(make_inside, semiring)


@nb.njit(cache=True)
def _edge_score(e, tail_offsets, tails, edge_weight, beta):
    s = edge_weight[e]
    for r in range(tail_offsets[e], tail_offsets[e + 1]):
        s += beta[tails[r]]
    return s


@nb.njit(cache=True)
def marginals_kernel(node_offsets, in_offsets, in_edges, tail_offsets, tails, edge_weight):
    """(log Z (G,), edge marginals (E,), node marginals (N,)); a graph with log Z = −inf gets zeros.

    Outside in the probability domain: with μ(v) the expected uses of node v (μ(goal) = 1),
    an edge's marginal is μ(e) = μ(head) · exp(w(e) + Σ_{t ∈ tails} beta[t] − beta[head])
    (= exp(alpha[head] + w(e) + Σ beta[tails] − log Z), since alpha[head] = log μ(head) −
    beta[head] + log Z), where the exp factor is the edge's share of its head's inside,
    kept by the inside pass; and μ(t) = Σ over the edges e with t among their tails (once
    per occurrence) of μ(e). Heads are visited in decreasing id, so μ(head) is complete
    before it is used: no exp or log in this pass. Node marginals count expected uses (a
    node used twice in a derivation counts twice).
    """
    n_nodes = node_offsets[node_offsets.shape[0] - 1]
    beta = np.empty(n_nodes)
    edge = np.empty(edge_weight.shape[0])
    logz = _log_inside(node_offsets, in_offsets, in_edges, tail_offsets, tails, edge_weight, beta, edge)
    node = np.zeros(n_nodes)
    for g in range(node_offsets.shape[0] - 1):
        if logz[g] == NEG_INF:
            for e in range(in_offsets[node_offsets[g]], in_offsets[node_offsets[g + 1]]):
                edge[in_edges[e]] = 0.0
            continue
        node[node_offsets[g + 1] - 1] = 1.0
        for v in range(node_offsets[g + 1] - 1, node_offsets[g] - 1, -1):
            mv = node[v]
            for q in range(in_offsets[v], in_offsets[v + 1]):
                e = in_edges[q]
                me = mv * edge[e]
                edge[e] = me
                if me != 0.0:
                    for r in range(tail_offsets[e], tail_offsets[e + 1]):
                        node[tails[r]] += me
    return logz, edge, node


@nb.njit(cache=True)
def _best_edges(node_offsets, in_offsets, in_edges, tail_offsets, tails, edge_weight, beta):
    """Per node the incoming edge attaining the MAX inside value (−1 if none is finite)."""
    n_nodes = node_offsets[node_offsets.shape[0] - 1]
    best = np.full(n_nodes, -1, dtype=np.int64)
    for v in range(n_nodes):
        top = NEG_INF
        for q in range(in_offsets[v], in_offsets[v + 1]):
            e = in_edges[q]
            s = _edge_score(e, tail_offsets, tails, edge_weight, beta)
            if s > top:
                top = s
                best[v] = e
    return best


@nb.njit(cache=True)
def viterbi_kernel(node_offsets, in_offsets, in_edges, tail_offsets, tails, edge_weight):
    """Best derivation of every graph: (scores (G,), edge ids in preorder, per-graph offsets (G+1,)).

    A graph without a derivation gets score −inf and no edges.
    """
    n_nodes = node_offsets[node_offsets.shape[0] - 1]
    n_graphs = node_offsets.shape[0] - 1
    beta = np.empty(n_nodes)
    scores = max_inside(node_offsets, in_offsets, in_edges, tail_offsets, tails, edge_weight, beta)
    best = _best_edges(node_offsets, in_offsets, in_edges, tail_offsets, tails, edge_weight, beta)
    size = np.zeros(n_nodes, dtype=np.int64)  # edges in the best derivation of each node
    for v in range(n_nodes):
        e = best[v]
        if e >= 0:
            s = 1
            for r in range(tail_offsets[e], tail_offsets[e + 1]):
                s += size[tails[r]]
            size[v] = s
    offsets = np.zeros(n_graphs + 1, dtype=np.int64)
    for g in range(n_graphs):
        offsets[g + 1] = offsets[g] + (size[node_offsets[g + 1] - 1] if scores[g] != NEG_INF else 0)
    out = np.empty(offsets[n_graphs], dtype=np.int64)
    stack = np.empty(n_nodes + 1, dtype=np.int64)
    for g in range(n_graphs):
        if scores[g] == NEG_INF:
            continue
        k = offsets[g]
        stack[0] = node_offsets[g + 1] - 1
        depth = 1
        while depth > 0:
            depth -= 1
            v = stack[depth]
            e = best[v]
            out[k] = e
            k += 1
            for r in range(tail_offsets[e + 1] - 1, tail_offsets[e] - 1, -1):
                stack = _push(stack, depth, tails[r])
                depth += 1
    return scores, out, offsets


@nb.njit(cache=True)
def _push(stack, depth, value):
    """stack[depth] = value, growing the stack when full; returns the (possibly new) stack."""
    if depth == stack.shape[0]:
        grown = np.empty(2 * stack.shape[0], dtype=np.int64)
        grown[:depth] = stack[:depth]
        stack = grown
    stack[depth] = value
    return stack


@nb.njit(cache=True)
def sample_kernel(node_offsets, in_offsets, in_edges, tail_offsets, tails, edge_weight, graph, n, seed):
    """n exact derivations of graph ``graph``: (edge ids in preorder, per-sample offsets (n+1,), log Z).

    Top-down: at node v draw edge e with probability exp(w(e) + Σ beta[tails] − beta[v]).
    The generator is seeded here, so a seed gives the same samples on any thread count.
    """
    np.random.seed(seed)
    n_nodes = node_offsets[node_offsets.shape[0] - 1]
    beta = np.empty(n_nodes)
    logz = log_inside(node_offsets, in_offsets, in_edges, tail_offsets, tails, edge_weight, beta)[graph]
    offsets = np.zeros(n + 1, dtype=np.int64)
    out = np.empty(16, dtype=np.int64)
    if logz == NEG_INF:
        return out[:0], offsets, logz
    k = 0
    stack = np.empty(16, dtype=np.int64)
    goal = node_offsets[graph + 1] - 1
    for s in range(n):
        stack[0] = goal
        depth = 1
        while depth > 0:
            depth -= 1
            v = stack[depth]
            lo = in_offsets[v]
            hi = in_offsets[v + 1]
            w = np.empty(hi - lo)
            for q in range(lo, hi):
                w[q - lo] = _edge_score(in_edges[q], tail_offsets, tails, edge_weight, beta)
            e = in_edges[lo + _draw_log(w, np.random.random())]
            out = _push(out, k, e)
            k += 1
            for r in range(tail_offsets[e + 1] - 1, tail_offsets[e] - 1, -1):
                stack = _push(stack, depth, tails[r])
                depth += 1
        offsets[s + 1] = k
    return out[:k].copy(), offsets, logz


def kbest(node_offsets, in_offsets, in_edges, tail_offsets, tails, edge_weight, k):
    """The k best derivations of every graph: (scores (G, k) best first, −inf padded; edge
    ids in preorder; offsets (G·k + 1,)), from the generic inside in the KBEST semiring."""
    beta = np.empty((node_offsets[-1], k))
    scores = compiled(make_inside, KBEST)(node_offsets, in_offsets, in_edges, tail_offsets, tails, edge_weight, beta)
    edges, offsets = hypergraph_derivations(node_offsets, in_offsets, in_edges, tail_offsets, tails, edge_weight,
                                            beta)
    return scores, edges, offsets


def entropy(node_offsets, in_offsets, in_edges, tail_offsets, tails, edge_weight):
    """Entropy (nats) of each graph's derivation distribution (G,), NaN without a
    derivation: the generic inside in the EXPECTATION semiring, log Z − E[score]."""
    beta = np.empty((node_offsets[-1], 2))
    goal = compiled(make_inside, EXPECTATION)(node_offsets, in_offsets, in_edges, tail_offsets, tails, edge_weight,
                                              beta)
    return entropy_of(goal)
