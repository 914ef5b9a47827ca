"""Public API: batches of acyclic hypergraphs and exact inference over them.

Factorization: a hyperedge e = (head, tails, weight) with every tail id below
the head id; a derivation of the goal (each graph's last node) picks one edge
into the goal and recursively a derivation of each of its tails; its score is
Σ weight(e) over the edges it uses; p(d) = exp(score − log Z). Chart parsers
(:mod:`varorder.grammar`: DMV, CCM and their product) build these; lattices are
the one-tail special case (:meth:`Hypergraph.from_lattice`). The kernels live
in :mod:`varorder.engine.hypergraph` and share the semiring definitions of
:mod:`varorder.engine.semiring` with the chain and lattice engines.

A :class:`Hypergraph` holds a *batch* of graphs (one or more) in flat arrays;
every operation runs over the whole batch in one compiled call and returns one
value per graph.

Example::

    hg = Hypergraph(3, edge_head=[0, 1, 2], edge_tails=[[], [], [0, 1]], edge_weight=[0.0, -1.0, 0.5])
    log_partition(hg); viterbi(hg); marginals(hg); sample(hg, 10, seed=0)
"""

from __future__ import annotations

import numpy as np

from varorder.engine import hypergraph as _k
from varorder.engine.semiring import resolve
from varorder.engine.validate import as_rng, as_potentials, check_int_at_least, first_index
from varorder.errors import ParameterError

__all__ = [
    "Hypergraph",
    "inside",
    "log_partition",
    "viterbi",
    "marginals",
    "expected_counts",
    "sample",
    "kbest",
    "entropy",
]


def _as_ints(name: str, value) -> np.ndarray:
    arr = np.asarray(value)
    if arr.ndim != 1:
        raise ParameterError(f"{name} must be one-dimensional, got shape {arr.shape}", name=name, value=value)
    if arr.size and not np.issubdtype(arr.dtype, np.integer):
        raise ParameterError(f"{name} must hold integers, got dtype {arr.dtype}", name=name, value=value)
    return np.ascontiguousarray(arr, dtype=np.int64)


class Hypergraph:
    """A batch of acyclic hypergraphs in flat arrays.

    Parameters
    ----------
    num_nodes : int, or a sequence of per-graph node counts (a batch). Node ids
        are global: graph g owns the ids after those of graphs 0 … g−1; its goal
        is its last node.
    edge_head : (E,) node ids.
    edge_tails : either a list of E lists of node ids, or a pair
        ``(tail_offsets (E+1,), tails (T,))`` in CSR form.
    edge_weight : (E,) log-weights (−inf allowed).
    edge_offsets : (G+1,) for a batch: graph g owns edges
        ``edge_offsets[g] … edge_offsets[g+1]−1``; inferred from the heads when omitted.

    Every tail id must be below its edge's head id and in the same graph.
    """

    __slots__ = ("node_offsets", "edge_offsets", "edge_head", "tail_offsets", "tails", "edge_weight",
                 "in_offsets", "in_edges")

    def __init__(self, num_nodes, edge_head, edge_tails, edge_weight, edge_offsets=None):
        counts = np.atleast_1d(np.asarray(num_nodes))
        if counts.ndim != 1 or counts.size < 1 or not np.issubdtype(counts.dtype, np.integer) or (counts < 1).any():
            raise ParameterError(f"num_nodes must be a positive integer or a sequence of them, got {num_nodes!r}", name='num_nodes', value=num_nodes)
        node_offsets = np.zeros(counts.size + 1, dtype=np.int64)
        np.cumsum(counts, out=node_offsets[1:])
        n_nodes = int(node_offsets[-1])
        head = _as_ints("edge_head", edge_head)
        n_edges = head.shape[0]
        if isinstance(edge_tails, tuple) and len(edge_tails) == 2:
            tail_offsets = _as_ints("tail_offsets", edge_tails[0])
            tails = _as_ints("tails", edge_tails[1])
            if tail_offsets.shape[0] != n_edges + 1 or tail_offsets[0] != 0 or (np.diff(tail_offsets) < 0).any() \
                    or tail_offsets[-1] != tails.shape[0]:
                raise ParameterError(f"tail_offsets must be a non-decreasing (E+1,) = ({n_edges + 1},) array from 0 "
                                     f"to len(tails) = {tails.shape[0]}", name='tail_offsets', value=self.tail_offsets)
        else:
            edge_tails = list(edge_tails)
            if len(edge_tails) != n_edges:
                raise ParameterError(f"edge_tails must list {n_edges} tail lists (one per edge), got {len(edge_tails)}", name='edge_tails', value=edge_tails)
            lengths = np.array([len(t) for t in edge_tails], dtype=np.int64)
            tail_offsets = np.zeros(n_edges + 1, dtype=np.int64)
            np.cumsum(lengths, out=tail_offsets[1:])
            tails = _as_ints("tails", [int(t) for ts in edge_tails for t in ts]) if tail_offsets[-1] else \
                np.zeros(0, dtype=np.int64)
        weight = as_potentials("edge_weight", edge_weight, (n_edges,))
        bad = (head < 0) | (head >= n_nodes)
        if bad.any():
            e = first_index(bad)[0]
            raise ParameterError(f"edge_head[{e}] = {head[e]} is not a node id in [0, {n_nodes})", name='edge_head', value=edge_head)
        edge_of_tail = np.repeat(np.arange(n_edges), np.diff(tail_offsets))
        graph_of = np.searchsorted(node_offsets, np.arange(n_nodes), side="right") - 1
        bad = (tails < 0) | (tails >= head[edge_of_tail])
        if bad.any():
            r = first_index(bad)[0]
            raise ParameterError(f"edge {edge_of_tail[r]} has tail {tails[r]} not in [0, head = {head[edge_of_tail[r]]}): "
                                 "node ids must be a topological order (tails before heads)", name='edge_tails', value=edge_tails)
        bad = graph_of[tails] != graph_of[head[edge_of_tail]]
        if bad.any():
            r = first_index(bad)[0]
            raise ParameterError(f"edge {edge_of_tail[r]} joins node {tails[r]} to node {head[edge_of_tail[r]]} "
                                 "of another graph", name='edge_tails', value=edge_tails)
        if edge_offsets is None:
            if n_edges and (np.diff(graph_of[head]) < 0).any():
                raise ParameterError("edges must be grouped by graph (pass edge_offsets, or list graph 0's edges first)", name='edge_offsets', value=edge_offsets)
            edge_offsets = np.searchsorted(graph_of[head], np.arange(counts.size + 1), side="left")
        edge_offsets = _as_ints("edge_offsets", edge_offsets)
        if edge_offsets.shape[0] != counts.size + 1 or edge_offsets[0] != 0 or edge_offsets[-1] != n_edges \
                or (np.diff(edge_offsets) < 0).any():
            raise ParameterError(f"edge_offsets must be a non-decreasing ({counts.size + 1},) array from 0 to {n_edges}", name='edge_offsets', value=edge_offsets)
        graph_of_edge = np.repeat(np.arange(counts.size), np.diff(edge_offsets))
        bad = graph_of[head] != graph_of_edge
        if bad.any():
            e = first_index(bad)[0]
            raise ParameterError(f"edge {e} is listed in graph {graph_of_edge[e]} but its head {head[e]} is in "
                                 f"graph {graph_of[head[e]]}", name='edge_offsets', value=edge_offsets)
        self.node_offsets = node_offsets
        self.edge_offsets = edge_offsets
        self.edge_head = head
        self.tail_offsets = tail_offsets
        self.tails = tails
        self.edge_weight = weight
        self.in_edges = np.argsort(head, kind="stable").astype(np.int64)
        self.in_offsets = np.zeros(n_nodes + 1, dtype=np.int64)
        np.cumsum(np.bincount(head, minlength=n_nodes), out=self.in_offsets[1:])

    @property
    def num_graphs(self) -> int:
        return int(self.node_offsets.shape[0] - 1)

    @property
    def num_nodes(self) -> int:
        return int(self.node_offsets[-1])

    @property
    def num_edges(self) -> int:
        return int(self.edge_head.shape[0])

    def edge_tails(self, e: int) -> np.ndarray:
        return self.tails[self.tail_offsets[e]:self.tail_offsets[e + 1]]

    def goals(self) -> np.ndarray:
        return self.node_offsets[1:] - 1

    def __repr__(self) -> str:
        return f"Hypergraph(graphs={self.num_graphs}, nodes={self.num_nodes}, edges={self.num_edges})"

    def with_weights(self, edge_weight) -> "Hypergraph":
        """The same structure with new edge log-weights (no re-validation of the structure)."""
        new = object.__new__(Hypergraph)
        for name in Hypergraph.__slots__:
            setattr(new, name, getattr(self, name))
        new.edge_weight = as_potentials("edge_weight", edge_weight, (self.num_edges,))
        return new

    def repeat(self, copies: int) -> "Hypergraph":
        """A batch of ``copies`` copies of this batch, graph after graph (copy k's ids shifted
        by k times this batch's node, edge and tail counts); the structure is not validated
        again, so building a batch of many equal graphs costs only the index arithmetic."""
        copies = check_int_at_least("copies", copies, 1)
        shift = np.arange(copies, dtype=np.int64)[:, None]
        n_nodes, n_edges, n_tails = self.num_nodes, self.num_edges, self.tails.shape[0]

        def offsets(values, step):
            return np.concatenate([values[:1], (values[1:][None] + step * shift).ravel()])

        new = object.__new__(Hypergraph)
        new.node_offsets = offsets(self.node_offsets, n_nodes)
        new.edge_offsets = offsets(self.edge_offsets, n_edges)
        new.edge_head = (self.edge_head[None] + n_nodes * shift).ravel()
        new.tail_offsets = offsets(self.tail_offsets, n_tails)
        new.tails = (self.tails[None] + n_nodes * shift).ravel()
        new.edge_weight = np.tile(self.edge_weight, copies)
        # Copy k's heads all exceed copy k-1's, so the stable sort by head is copy after copy.
        new.in_edges = (self.in_edges[None] + n_edges * shift).ravel()
        new.in_offsets = offsets(self.in_offsets, n_edges)
        return new

    @classmethod
    def from_lattice(cls, lattice) -> "Hypergraph":
        """The one-tail hypergraph of a :class:`varorder.lattice.Lattice`.

        Node v of the lattice is node v here; edge a (< A) is arc a (tail = its
        source); edge A is the axiom of the root; each node with a finite final
        weight gets one more edge into an added goal node. Derivations are the
        lattice's paths with equal scores.
        """
        n = lattice.num_nodes
        ends = np.flatnonzero(lattice.final > -np.inf)
        n_arcs = lattice.num_arcs
        head = np.concatenate([lattice.arc_target, [0], np.full(ends.size, n)])
        tail_offsets = np.concatenate([np.arange(n_arcs + 1), [n_arcs], n_arcs + 1 + np.arange(ends.size)])
        tails = np.concatenate([lattice.arc_source, ends])
        weight = np.concatenate([lattice.arc_weight, [0.0], lattice.final[ends]])
        return cls(n + 1, head, (tail_offsets, tails), weight)

    def _args(self):
        return self.node_offsets, self.in_offsets, self.in_edges, self.tail_offsets, self.tails, self.edge_weight


def _check(hypergraph) -> Hypergraph:
    if not isinstance(hypergraph, Hypergraph):
        raise ParameterError(f"hypergraph must be a varorder.hypergraph.Hypergraph, got {type(hypergraph).__name__}", name='hypergraph', value=hypergraph)
    return hypergraph


def inside(hypergraph: Hypergraph, semiring: str = "log", width: int | None = None):
    """(inside values per node, goal values per graph) in a named semiring: (N,) and (G,) for
    a scalar semiring, (N, d) and (G, d) for a structured one (``width`` = d where the
    call chooses it, e.g. k for "kbest")."""
    hg = _check(hypergraph)
    semiring = resolve(semiring)
    kernel = _k.inside_kernel(semiring)
    beta = np.empty((hg.num_nodes,) + semiring.value_shape(width))
    goal = kernel(*hg._args(), beta)
    return beta, goal


def log_partition(hypergraph: Hypergraph) -> np.ndarray:
    """log Z per graph (G,): −inf where the goal has no derivation."""
    return inside(hypergraph, "log")[1]


def marginals(hypergraph: Hypergraph):
    """(log Z (G,), edge marginals (E,), node marginals (N,)).

    edge[e] = expected number of uses of e; node[v] = expected uses of v (the
    probability that a derivation contains v when no node can occur twice).
    Zero for graphs without a derivation.
    """
    hg = _check(hypergraph)
    return _k.marginals_kernel(*hg._args())


def expected_counts(hypergraph: Hypergraph, edge_features, num_features: int, edge_marginals=None) -> np.ndarray:
    """Σ_e marginal(e) · [f ∈ features(e)] for f < num_features: the E-step of EM.

    ``edge_features`` is an (E, F) int array, −1 padded (an edge may fire several features).
    """
    hg = _check(hypergraph)
    feats = np.asarray(edge_features, dtype=np.int64)
    if feats.ndim != 2 or feats.shape[0] != hg.num_edges:
        raise ParameterError(f"edge_features must have shape ({hg.num_edges}, F), got {feats.shape}", name='edge_features', value=edge_features)
    if edge_marginals is None:
        edge_marginals = marginals(hg)[1]
    use = feats >= 0
    if (feats >= num_features).any():
        e = first_index(feats >= num_features)
        raise ParameterError(f"edge_features{e} = {feats[e]} is not below num_features = {num_features}", name='edge_features', value=edge_features)
    weights = np.broadcast_to(edge_marginals[:, None], feats.shape)[use]
    return np.bincount(feats[use], weights=weights, minlength=num_features)


def viterbi(hypergraph: Hypergraph):
    """(best scores (G,), list of G edge-id arrays of the best derivations in preorder, goal edge first).

    A graph with no derivation gets −inf and an empty array; ties go to the first edge in the
    order of the heads' incoming edge lists (edge id order).
    """
    hg = _check(hypergraph)
    scores, edges, offsets = _k.viterbi_kernel(*hg._args())
    return scores, [edges[offsets[g]:offsets[g + 1]] for g in range(hg.num_graphs)]


def sample(hypergraph: Hypergraph, n: int = 1, seed=None, graph: int = 0):
    """n exact derivations of graph ``graph`` (a list of edge-id arrays in preorder); [] if none exists."""
    hg = _check(hypergraph)
    n = check_int_at_least("n", n, 1)
    graph = check_int_at_least("graph", graph, 0)
    if graph >= hg.num_graphs:
        raise ParameterError(f"graph must be < {hg.num_graphs}, got {graph}", name='graph', value=graph)
    seed = int(as_rng(seed).integers(2**31 - 1))
    edges, offsets, logz = _k.sample_kernel(*hg._args(), graph, n, seed)
    if logz == -np.inf:
        return []
    return [edges[offsets[s]:offsets[s + 1]] for s in range(n)]


def kbest(hypergraph: Hypergraph, k: int):
    """The k best derivations of every graph: (scores (G, k) best first, −inf past the number
    of derivations; a list of G lists of edge-id arrays in preorder, goal edge first, one per
    finite score). The inside pass in the k-best semiring plus a backtrack; equal scores
    keep the order of the heads' incoming edge lists, then of the tails' ranks."""
    hg = _check(hypergraph)
    k = check_int_at_least("k", k, 1)
    scores, edges, offsets = _k.kbest(*hg._args(), k)
    found = [[edges[offsets[g * k + r]:offsets[g * k + r + 1]] for r in range(k) if scores[g, r] > -np.inf]
             for g in range(hg.num_graphs)]
    return scores, found


def entropy(hypergraph: Hypergraph) -> np.ndarray:
    """Entropy (nats) of each graph's derivation distribution (G,); NaN where the goal has no
    derivation. The inside pass in the expectation semiring (log Z, E[score])."""
    return _k.entropy(*_check(hypergraph)._args())
