"""Tree message passing and the two-slice phylogenetic HMM of Liang, Klein & Jordan (2008, §5.3).

**Tree DP.** :func:`tree_marginals` computes sum-product on a rooted tree
(Felsenstein 1981 pruning upward, then the downward pass) for a batch of
independent instances: p(x) ∝ Π_v exp φ_v(x_v) Π_{v≠root} exp ψ_v(x_{parent(v)}, x_v).
It returns log Z, node marginals and (parent, child) edge marginals. It builds the
hypergraph of the pruning recursion (:class:`_TreeGraph`) and runs the engine's
inside–outside on it (:mod:`varorder.engine.hypergraph`), so varorder has no tree DP
of its own; it is tested against enumeration (:func:`varorder.testing.oracle.tree_posteriors`).

**Two-slice phylogenetic HMM (paper eq. 15).** Species sit on a fixed tree (hidden
ancestors, observed leaves); d_{s,j} is the nucleotide of species s at column j.
Submodel m (parity m ∈ {0, 1}) covers the disjoint two-column slices (j, j+1),
j ≡ m (mod 2):

    p_m(d) = Π_{slices} r(d_{ρ,j}) r₂(d_{ρ,j+1} | d_{ρ,j})
             Π_{s} Π_{s'∈CH(s)} P1_{s'}(d_{s',j} | d_{s,j}) P2_{s'}(d_{s',j+1} | d_{s',j}, d_{s,j+1}),

first-order mutation along tree edges and second-order mutation between
adjacent sites (ρ is the root; parameters are per tree edge). Pairing the two
columns of a node into one 16-valued variable makes every slice a tree, so the
E-step is :func:`tree_marginals`. Both submodels cover the same hidden
nucleotides (Z₁ = Z₂ = Z∩), but b₁ + b₂ has high tree-width, so agreement
training uses parameter-approximate product EM: E-step E(2·b_m, Z∩) per slice,
M-steps on the averaged expected counts. Because q_m factorizes over its own
slices, submodel m's posterior gives the other submodel's expected counts
(pairs inside one slice, products of marginals across two).

Shared vector of a :class:`PhyloSlices` E-step = both submodels' expected counts
``[parity-0 counts | parity-1 counts]``, each ``[root (4) | root2 (16) | P1 (E·16) | P2 (E·64)]``.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

import numpy as np

from varorder import hypergraph as _hypergraph
from varorder.agree.product_em import Statistics, Submodel
from varorder.engine.validate import as_rng
from varorder.errors import FormatError, ParameterError

__all__ = ["Tree", "parse_newick", "tree_marginals", "PhyloData", "PhyloSlices", "NUCLEOTIDES", "encode_nucleotides"]

NUCLEOTIDES = "ACGT"
_NEG_INF = -np.inf


# ---------------------------------------------------------------------------
# trees
# ---------------------------------------------------------------------------


@dataclass
class Tree:
    """Rooted tree: ``parent[v]`` (−1 for the root), ``names`` (leaf names; '' inside), nodes
    numbered so that every parent precedes its children (root = 0)."""

    parent: np.ndarray
    names: list

    @property
    def n_nodes(self) -> int:
        return self.parent.size

    def children(self, v):
        return np.flatnonzero(self.parent == v)

    @property
    def leaves(self):
        return [v for v in range(self.n_nodes) if not self.children(v).size]


def parse_newick(text: str) -> Tree:
    """Parse a Newick string such as ``((a:0.1,b:0.2):0.3,c:0.4);`` (branch lengths ignored)."""
    tokens = re.findall(r"[(),;]|[^(),;:\s]+(?::[^(),;\s]+)?|:[^(),;\s]+", text.strip())
    parent, names = [], []
    stack = []
    current = None
    pos = 0

    def new_node(par):
        parent.append(par)
        names.append("")
        return len(parent) - 1

    for tok in tokens:
        if tok == "(":
            node = new_node(stack[-1] if stack else -1)
            stack.append(node)
            current = None
        elif tok == ",":
            current = None
        elif tok == ")":
            if not stack:
                raise FormatError(f"newick: unbalanced ')' in {text!r}")
            current = stack.pop()
        elif tok == ";":
            break
        elif tok.startswith(":"):
            continue
        else:
            name = tok.split(":")[0]
            if current is not None:  # label of an internal node just closed
                names[current] = name
            else:
                node = new_node(stack[-1] if stack else -1)
                names[node] = name
        pos += 1
    if stack:
        raise FormatError(f"newick: unbalanced '(' in {text!r}")
    if not parent:
        raise FormatError(f"newick: no nodes in {text!r}")
    return Tree(np.array(parent, dtype=np.int64), names)


def tree_marginals(parent, node_log, edge_log, edges=True):
    """Sum-product on a rooted tree for a batch of C instances, run by the engine's
    hypergraph inside–outside (:mod:`varorder.engine.hypergraph`; the hypergraph is
    built by :func:`_tree_hypergraph`).

    Parameters
    ----------
    parent : (N,) ints
        Parent index, −1 for the root; parents precede children.
    node_log : (C, N, V) array
        Log-potentials φ_v.
    edge_log : (C, N, V, V) array
        Log-potentials ψ_v(x_parent, x_v) (the root's row is ignored); a (N, V, V) array
        is shared by the batch.
    edges : bool or callable
        True (return them), False, or a function ``f(v, edge_v, rows)`` called with each
        non-root node's edge marginals ``edge_v`` (len(rows), V, V) for the instances
        ``rows`` (a slice of the batch; the batch is run in pieces of bounded size, so a
        callback sees every (v, piece) once) instead of storing all of them.

    Returns
    -------
    tuple
        (log Z (C,), node marginals (C, N, V), edge marginals (C, N, V, V) or None),
        edge[c, v, a, b] = p(x_parent(v) = a, x_v = b).
    """
    parent = np.asarray(parent)
    node_log = np.asarray(node_log, dtype=np.float64)
    C, N, V = node_log.shape
    edge_log = np.asarray(edge_log, dtype=np.float64)
    shared = edge_log.ndim == 3
    want = (N, V, V) if shared else (C, N, V, V)
    if parent.shape != (N,) or edge_log.shape != want:
        raise ParameterError(f"parent must be ({N},) and edge_log {want} or ({N}, {V}, {V}); "
                             f"got {parent.shape} and {edge_log.shape}", name='parent', value=parent)
    if (parent[0] != -1) or np.any(parent[1:] >= np.arange(1, N)) or np.any(parent[1:] < 0):
        raise ParameterError("parent must list the root first (−1) and every parent before its children", name='parent', value=parent)
    graph = _tree_hypergraph(tuple(int(p) for p in parent), V)
    piece = max(1, _PIECE_EDGES // graph.n_edges)
    logz = np.empty(C)
    node = np.empty((C, N, V))
    edge = np.zeros((C, N, V, V)) if edges is True else None
    weights = np.zeros((min(piece, C), graph.n_edges))
    if shared:
        weights[:, graph.fan_edges] = edge_log[1:]
    for lo in range(0, C, piece):
        rows = slice(lo, min(lo + piece, C))
        count = rows.stop - lo
        w = weights[:count]
        w[:, graph.belief_edges] = node_log[rows]
        if not shared:
            w[:, graph.fan_edges] = edge_log[rows, 1:]
        batch = graph.batch(count).with_weights(w.ravel())
        logz[rows], edge_marginals, node_marginals = _hypergraph.marginals(batch)
        node[rows] = node_marginals.reshape(count, graph.n_nodes)[:, graph.belief_nodes]
        if edges is not False:
            fan = edge_marginals.reshape(count, graph.n_edges)[:, graph.fan_edges]  # (count, N-1, V, V)
            if edge is not None:
                edge[rows, 1:] = fan
            else:
                for v in range(1, N):
                    edges(v, fan[:, v - 1], rows)
    return logz, node, edge


# Edges per engine call: bounds the flat arrays of one piece of the batch (about 50 bytes
# per edge) while keeping the per-call overhead negligible.
_PIECE_EDGES = 1 << 20


class _TreeGraph:
    """The hypergraph of tree sum-product on one instance, with where its weights go.

    Nodes, in topological order (children before parents: v from N−1 down to 0):
    b(v, x) = φ_v(x) + Σ_{c ∈ CH(v)} m(c, x), the belief of v's subtree; then, for v ≠ root,
    m(v, x) = log Σ_y exp(ψ_v(x, y) + b(v, y)), the message to v's parent; and a goal
    summing b(root, x). So b(v, x) has one edge whose tails are its children's messages
    (an axiom at a leaf), m(v, x) has V one-tail edges (the "fan", weight ψ_v(x, y)), and
    the goal V edges of weight 0. Inside = the upward pass, outside = the downward pass;
    node marginals of b(v, ·) are p(x_v), edge marginals of the fan of v are
    p(x_parent(v) = x, x_v = y).
    """

    def __init__(self, parent: tuple, V: int):
        N = len(parent)
        children = [[] for _ in range(N)]
        for v in range(1, N):
            children[parent[v]].append(v)
        belief = np.empty(N, dtype=np.int64)
        message = np.full(N, -1, dtype=np.int64)
        k = 0
        for v in range(N - 1, -1, -1):
            belief[v] = k
            k += V
            if v:
                message[v] = k
                k += V
        self.n_nodes = k + 1
        heads, tails = [], []
        belief_edges = np.empty((N, V), dtype=np.int64)
        fan_edges = np.empty((max(N - 1, 0), V, V), dtype=np.int64)
        for v in range(N - 1, -1, -1):
            for x in range(V):
                belief_edges[v, x] = len(heads)
                heads.append(belief[v] + x)
                tails.append([message[c] + x for c in children[v]])
            if v:
                for x in range(V):
                    for y in range(V):
                        fan_edges[v - 1, x, y] = len(heads)
                        heads.append(message[v] + x)
                        tails.append([belief[v] + y])
        for x in range(V):
            heads.append(self.n_nodes - 1)
            tails.append([belief[0] + x])
        self.n_edges = len(heads)
        self.belief_nodes = belief[:, None] + np.arange(V)  # (N, V) node ids of b(v, x)
        self.belief_edges = belief_edges
        self.fan_edges = fan_edges
        self.template = _hypergraph.Hypergraph(self.n_nodes, heads, tails, np.zeros(self.n_edges))
        self._batches: dict[int, object] = {}

    def batch(self, count: int):
        """``count`` copies of the graph (kept for the last two sizes asked for)."""
        found = self._batches.get(count)
        if found is None:
            if len(self._batches) >= 2:
                self._batches.pop(next(iter(self._batches)))
            found = self._batches[count] = self.template.repeat(count)
        return found


@functools.lru_cache(maxsize=8)
def _tree_hypergraph(parent: tuple, V: int) -> _TreeGraph:
    return _TreeGraph(parent, V)


# ---------------------------------------------------------------------------
# the two-slice phylogenetic HMM
# ---------------------------------------------------------------------------


def encode_nucleotides(sequence: str) -> np.ndarray:
    """A/C/G/T → 0..3 (either case); anything else (gaps, N) → −1 (missing)."""
    table = np.full(256, -1, dtype=np.int8)
    for i, c in enumerate(NUCLEOTIDES):
        table[ord(c)] = table[ord(c.lower())] = i
    return table[np.frombuffer(sequence.encode("ascii", "replace"), dtype=np.uint8)].astype(np.int64)


@dataclass
class PhyloData:
    """Observed leaf nucleotides: ``leaf_nodes`` (n_leaves,) tree nodes, ``observed`` (n_leaves, L), −1 = missing."""

    tree: Tree
    leaf_nodes: np.ndarray
    observed: np.ndarray

    @property
    def n_columns(self):
        return self.observed.shape[1]


def _slice_starts(L, parity):
    return np.arange(parity, L - 1, 2)


class PhyloSlices(Submodel):
    """Submodel p_m of eq. 15 (``parity`` m) on a :class:`Tree` with 4-letter nucleotides.

    Learned state: ``root_`` (4,), ``root2_`` (4, 4), ``p1_`` (N, 4, 4) = P1_v(child | parent),
    ``p2_`` (N, 4, 4, 4) = P2_v(child_{j+1} | child_j, parent_{j+1}) (row 0, the root, unused).
    """

    domain = "phylo"
    has_private_features = False

    def __init__(self, parity: int, tree: Tree, smoothing: float = 1e-3):
        if parity not in (0, 1):
            raise ParameterError(f"parity must be 0 or 1, got {parity!r}", name='parity', value=parity)
        self.parity = parity
        self.tree = tree
        self.smoothing = smoothing

    @property
    def _sizes(self):
        N = self.tree.n_nodes
        return 4 + 16 + N * 16 + N * 64

    def initialize(self, seed=None, noise: float = 0.05, identity_bias: float = 0.2):
        """Near-uniform parameters with a small bias towards identity mutations (paper footnote 3)."""
        rng = as_rng(seed)
        N = self.tree.n_nodes

        def draw(shape):
            return 1.0 + noise * rng.random(shape)

        eye = np.eye(4)
        self.root_ = _norm(draw(4))
        self.root2_ = _norm(draw((4, 4)) + identity_bias * eye)
        self.p1_ = _norm(draw((N, 4, 4)) + identity_bias * eye)
        self.p2_ = _norm(draw((N, 4, 4, 4)) + identity_bias * (eye[None, :, None, :] + eye[None, None, :, :]) / 2)
        return self

    # -- potentials ----------------------------------------------------------
    def shared_log_potentials(self, data: PhyloData) -> np.ndarray:
        with np.errstate(divide="ignore"):
            return np.concatenate([np.log(self.root_), np.log(self.root2_).ravel(), np.log(self.p1_).ravel(),
                                   np.log(self.p2_).ravel()])

    def _unpack(self, flat):
        N = self.tree.n_nodes
        root, flat = flat[:4], flat[4:]
        root2, flat = flat[:16].reshape(4, 4), flat[16:]
        p1, flat = flat[:N * 16].reshape(N, 4, 4), flat[N * 16:]
        p2 = flat[:N * 64].reshape(N, 4, 4, 4)
        return root, root2, p1, p2

    def _slice_potentials(self, data: PhyloData, log_params):
        """Node (C, N, 16) and shared edge (N, 16, 16) log-potentials of this parity's slices."""
        root, root2, p1, p2 = self._unpack(log_params)
        N = self.tree.n_nodes
        starts = _slice_starts(data.n_columns, self.parity)
        C = starts.size
        node = np.zeros((C, N, 16))
        node[:, 0] = (root[:, None] + root2).ravel()
        # leaf evidence: super-value x = 4a + b must match the observed columns (missing: free)
        a_of, b_of = np.arange(16) // 4, np.arange(16) % 4
        for leaf, v in enumerate(data.leaf_nodes):
            first = data.observed[leaf, starts]
            second = data.observed[leaf, starts + 1]
            bad = ((first[:, None] >= 0) & (a_of[None, :] != first[:, None])) | \
                  ((second[:, None] >= 0) & (b_of[None, :] != second[:, None]))
            node[:, v] = np.where(bad, _NEG_INF, node[:, v])
        # ψ_v(x_p = 4a_p + b_p, x_c = 4a_c + b_c) = log P1[a_p, a_c] + log P2[a_c, b_p, b_c]
        return starts, node, self._edge_potentials(p1, p2)

    @staticmethod
    def _edge_potentials(p1, p2):
        """ψ_v(x_p = 4a_p + b_p, x_c = 4a_c + b_c) = log P1[a_p, a_c] + log P2[a_c, b_p, b_c]."""
        N = p1.shape[0]
        ap, bp, ac, bc = np.meshgrid(np.arange(4), np.arange(4), np.arange(4), np.arange(4), indexing="ij")
        out = p1[:, ap, ac] + p2[:, ac, bp, bc]  # (N, 4, 4, 4, 4) over (a_p, b_p, a_c, b_c)
        return out.reshape(N, 16, 16)

    def posteriors(self, data: PhyloData, log_params=None, edges=False):
        """(log Z per slice, marginals per column and node (L, N, 4), slice node marginals (C, N, 16),
        slice edge marginals or None); ``edges`` as in :func:`tree_marginals`."""
        if log_params is None:
            log_params = self.shared_log_potentials(data)
        starts, node_log, edge_log = self._slice_potentials(data, log_params)
        N = self.tree.n_nodes
        logz, node, edge = tree_marginals(self.tree.parent, node_log, edge_log, edges=edges)
        columns = np.full((data.n_columns, N, 4), 0.25)
        n4 = node.reshape(-1, N, 4, 4)
        columns[starts] = n4.sum(axis=3)
        columns[starts + 1] = n4.sum(axis=2)
        return logz, columns, node, edge

    def expected_statistics(self, data, shared_log_potentials, private_scale: float = 1.0) -> Statistics:
        N = self.tree.n_nodes
        own_p1, own_p2 = np.zeros((N, 4, 4)), np.zeros((N, 4, 4, 4))

        n_slices = _slice_starts(data.n_columns, self.parity).size
        q_pair_first = np.zeros((n_slices, N, 4, 4))
        q_pair_second = np.zeros((n_slices, N, 4, 4))

        def reduce_edge(v, ev, rows):
            e4 = ev.reshape(-1, 4, 4, 4, 4)  # (rows, a_p, b_p, a_c, b_c)
            tot = e4.sum(axis=0)
            own_p1[v] += tot.sum(axis=(1, 3))
            own_p2[v] += np.einsum("pqrs->rqs", tot)  # (a_c, b_p, b_c)
            q_pair_first[rows, v] = e4.sum(axis=(2, 4))  # (rows, a_p, a_c): column j of the slice
            q_pair_second[rows, v] = e4.sum(axis=(1, 3))  # (rows, b_p, b_c): column j+1

        logz, _, node, _ = self.posteriors(data, shared_log_potentials, edges=reduce_edge)
        n4 = node.reshape(-1, N, 4, 4)  # (C, v, a, b)
        own = {"root": n4[:, 0].sum(axis=(0, 2)), "root2": n4[:, 0].sum(axis=0), "p1": own_p1, "p2": own_p2}
        # the other parity's slices (j+1, j+2) straddle this parity's slices s and s+1
        child_second = n4.sum(axis=2)  # (C, v, b)
        root_second = n4[:, 0].sum(axis=1)  # (C, b)
        root_first = n4[:, 0].sum(axis=2)
        other = {
            "root": root_second[:-1].sum(axis=0),
            "root2": np.einsum("ca,cb->ab", root_second[:-1], root_first[1:]),
            "p1": q_pair_second[:-1].sum(axis=0),
            "p2": np.einsum("cva,cvpb->vapb", child_second[:-1], q_pair_first[1:]),
        }
        blocks = [own, other] if self.parity == 0 else [other, own]
        flat = np.concatenate([np.concatenate([b["root"], b["root2"].ravel(), b["p1"].ravel(), b["p2"].ravel()])
                               for b in blocks])
        return Statistics(shared=flat, log_normalizer=float(logz.sum()))

    def counts(self, data, shared_marginals, statistics) -> dict:
        size = self._sizes
        block = shared_marginals[self.parity * size:(self.parity + 1) * size]
        root, root2, p1, p2 = self._unpack(block)
        return {"root": root, "root2": root2, "p1": p1, "p2": p2}

    def maximize(self, counts: dict) -> None:
        s = self.smoothing
        self.root_ = _norm(counts["root"] + s)
        self.root2_ = _norm(counts["root2"] + s)
        self.p1_ = _norm(counts["p1"] + s)
        self.p2_ = _norm(counts["p2"] + s)


def _norm(x):
    return x / x.sum(axis=-1, keepdims=True)
