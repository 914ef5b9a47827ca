"""Public API: position-indexed acyclic lattices and exact inference over them.

Factorization: nodes carry positions; node 0 (the root) alone sits at position
0; every arc goes from position p to p + 1 and carries a label and a
log-weight; a path runs from the root to any node v with finite ``final[v]``
and scores Σ arc weights + final[v]. p(path) = exp(score − log Z).

This is the structure every varorder builder emits (dense chains, RCMS context
sets, q-automata, alignment lattices); the kernels live in
:mod:`varorder.engine.lattice` and share the semiring definitions of
:mod:`varorder.engine.semiring` with the dense-chain engine.

Example::

    lat = Lattice.from_chain(emissions[0], transitions)
    log_partition(lat); viterbi(lat); marginals(lat); kbest(lat, 3)
"""

from __future__ import annotations

import numpy as np

from varorder.engine import lattice as _k
from varorder.engine.semiring import resolve
from varorder.engine.validate import as_potentials, as_rng, check_int_at_least, check_no_overflow, first_index
from varorder.errors import ParameterError

__all__ = [
    "Lattice",
    "log_partition",
    "forward",
    "alphas",
    "betas",
    "viterbi",
    "viterbi_arcs",
    "marginals",
    "sample",
    "sample_arcs",
    "kbest",
    "kbest_arcs",
    "entropy",
    "path_labels",
]


def _as_index(name: str, value, size: int | None = None) -> np.ndarray:
    arr = np.asarray(value)
    if arr.ndim != 1:
        raise ParameterError(f"{name} must be one-dimensional, got shape {arr.shape}", name=name, value=value)
    if arr.size and not np.issubdtype(arr.dtype, np.integer):
        raise ParameterError(f"{name} must hold integers, got dtype {arr.dtype}", name=name, value=value)
    if size is not None and arr.shape[0] != size:
        raise ParameterError(f"{name} must have length {size}, got {arr.shape[0]}", name=name, value=value)
    return np.ascontiguousarray(arr, dtype=np.int64)


class Lattice:
    """A position-indexed acyclic lattice stored as flat arrays.

    Parameters
    ----------
    node_position : (N,) ints, non-decreasing; node_position[0] == 0 and no
        other node at position 0.
    arc_source, arc_target : (A,) node ids with
        node_position[target] == node_position[source] + 1.
    arc_label : (A,) ints ≥ 0 (the symbol the arc emits).
    arc_weight : (A,) log-weights (−inf allowed).
    final : (N,) log final weights (−inf: not an end node). Default: 0 at the
        nodes of the last position, −inf elsewhere.

    Examples
    --------
    Two paths from the root (node 0) to node 3, labelled 0 0 (weight 0.3 · 0.5) and 1 1
    (weight 0.7 · 1.0):

    >>> import numpy as np
    >>> from varorder import lattice
    >>> lat = lattice.Lattice(node_position=[0, 1, 1, 2], arc_source=[0, 0, 1, 2], arc_target=[1, 2, 3, 3],
    ...                       arc_label=[0, 1, 0, 1], arc_weight=np.log([0.3, 0.7, 0.5, 1.0]))
    >>> round(float(np.exp(lattice.log_partition(lat))), 6)                 # 0.15 + 0.7
    0.85
    >>> labels, score = lattice.viterbi(lat)
    >>> labels, round(float(np.exp(score)), 6)
    (array([1, 1]), 0.7)
    >>> paths, scores = lattice.kbest(lat, 2)
    >>> paths
    array([[1, 1],
           [0, 0]])
    """

    __slots__ = ("node_position", "arc_source", "arc_target", "arc_label", "arc_weight", "final",
                 "in_offsets", "in_arcs", "out_offsets", "out_arcs")

    def __init__(self, node_position, arc_source, arc_target, arc_label, arc_weight, final=None):
        pos = _as_index("node_position", node_position)
        n_nodes = pos.shape[0]
        if n_nodes < 1:
            raise ParameterError("node_position must list at least the root node", name='node_position', value=node_position)
        if pos[0] != 0:
            raise ParameterError(f"node_position[0] must be 0 (the root), got {pos[0]}", name='node_position', value=node_position)
        if n_nodes > 1:
            step = np.diff(pos)
            if (step < 0).any():
                i = first_index(step < 0)[0] + 1
                raise ParameterError(f"node_position must be non-decreasing (nodes in topological order); "
                                     f"node {i} has position {pos[i]} after {pos[i - 1]}", name='node_position', value=node_position)
            if (pos[1:] == 0).any():
                i = first_index(pos[1:] == 0)[0] + 1
                raise ParameterError(f"node_position[{i}] is 0: only the root may sit at position 0", name='node_position', value=node_position)
        src = _as_index("arc_source", arc_source)
        n_arcs = src.shape[0]
        dst = _as_index("arc_target", arc_target, n_arcs)
        lab = _as_index("arc_label", arc_label, n_arcs)
        w = as_potentials("arc_weight", arc_weight, (n_arcs,))
        for name, ids in (("arc_source", src), ("arc_target", dst)):
            bad = (ids < 0) | (ids >= n_nodes)
            if bad.any():
                a = first_index(bad)[0]
                raise ParameterError(f"{name}[{a}] = {ids[a]} is not a node id in [0, {n_nodes})")
        bad = pos[dst] != pos[src] + 1
        if bad.any():
            a = first_index(bad)[0]
            raise ParameterError(f"arc {a} goes from position {pos[src[a]]} to {pos[dst[a]]}; "
                                 f"arcs must advance exactly one position", name='arc_target', value=arc_target)
        if (lab < 0).any():
            a = first_index(lab < 0)[0]
            raise ParameterError(f"arc_label[{a}] = {lab[a]} must be >= 0", name='arc_label', value=arc_label)
        if final is None:
            fin = np.where(pos == pos.max(), 0.0, -np.inf)
        else:
            fin = as_potentials("final", final, (n_nodes,))
        check_no_overflow(int(pos.max()) + 2, arc_weight=w, final=fin)
        self.node_position = pos
        self.arc_source = src
        self.arc_target = dst
        self.arc_label = lab
        self.arc_weight = w
        self.final = fin
        self.in_offsets, self.in_arcs = _k.csr_index(dst, n_nodes)
        self.out_offsets, self.out_arcs = _k.csr_index(src, n_nodes)

    @property
    def num_nodes(self) -> int:
        return int(self.node_position.shape[0])

    @property
    def num_arcs(self) -> int:
        return int(self.arc_source.shape[0])

    @property
    def max_length(self) -> int:
        return int(self.node_position.max())

    def __repr__(self) -> str:
        return f"Lattice(nodes={self.num_nodes}, arcs={self.num_arcs}, max_length={self.max_length})"

    def with_weights(self, arc_weight, final=None) -> "Lattice":
        """The same structure with new arc log-weights (and final weights, when given); the
        structure is not validated again, the weights are."""
        new = object.__new__(Lattice)
        for name in Lattice.__slots__:
            setattr(new, name, getattr(self, name))
        new.arc_weight = as_potentials("arc_weight", arc_weight, (self.num_arcs,))
        if final is not None:
            new.final = as_potentials("final", final, (self.num_nodes,))
        check_no_overflow(self.max_length + 2, arc_weight=new.arc_weight, final=new.final)
        return new

    @classmethod
    def from_chain(cls, emissions, transitions, start=None, end=None) -> "Lattice":
        """The lattice of one dense chain: emissions (L, K), transitions (K, K).

        Node 1 + t·K + j stands for label j at position t + 1; arc labels are
        the chain labels. Scores equal those of :mod:`varorder.chain`.
        """
        E = as_potentials("emissions", emissions, (None, None))
        L, K = E.shape
        if L < 1 or K < 1:
            raise ParameterError(f"emissions must have shape (L >= 1, K >= 1), got {E.shape}", name='emissions', value=emissions)
        T = as_potentials("transitions", transitions, (K, K))
        S = np.zeros(K) if start is None else as_potentials("start", start, (K,))
        F = np.zeros(K) if end is None else as_potentials("end", end, (K,))
        pos = np.concatenate([[0], np.repeat(np.arange(1, L + 1), K)])
        labels = np.arange(K)
        src = [np.zeros(K, dtype=np.int64)]
        dst = [1 + labels]
        lab = [labels]
        w = [S + E[0]]
        ii, jj = np.meshgrid(labels, labels, indexing="ij")
        for t in range(1, L):
            src.append((1 + (t - 1) * K + ii).ravel())
            dst.append((1 + t * K + jj).ravel())
            lab.append(jj.ravel())
            w.append((T + E[t][None, :]).ravel())
        final = np.full(pos.shape[0], -np.inf)
        final[1 + (L - 1) * K:] = F
        return cls(pos, np.concatenate(src), np.concatenate(dst), np.concatenate(lab),
                   np.concatenate(w), final)

    def _args(self):
        return self.num_nodes, self.in_offsets, self.in_arcs, self.arc_source, self.arc_weight, self.final


def _check(lattice) -> Lattice:
    if not isinstance(lattice, Lattice):
        raise ParameterError(f"lattice must be a varorder.lattice.Lattice, got {type(lattice).__name__}", name='lattice', value=lattice)
    return lattice


def path_labels(lattice: Lattice, arcs: np.ndarray) -> np.ndarray:
    """Map arc ids (any shape, −1 = padding) to their labels (−1 kept)."""
    arcs = np.asarray(arcs)
    if lattice.num_arcs == 0:  # every entry is padding
        return np.full(arcs.shape, -1, dtype=np.int64)
    return np.where(arcs >= 0, lattice.arc_label[np.maximum(arcs, 0)], -1)


def forward(lattice: Lattice, semiring: str = "log", width: int | None = None):
    """⊕ over all paths in a semiring: a registered name ("log" → log Z, "max" → best
    score, "expectation" → (log Z, E[score]), "kbest" → the ``width`` best scores) or a
    :class:`varorder.engine.semiring.Semiring`. A float for a scalar semiring, an array
    of the value's width for a structured one."""
    total = alphas(lattice, semiring, width)[1]
    return total if isinstance(total, np.ndarray) else float(total)


def alphas(lattice: Lattice, semiring: str = "log", width: int | None = None):
    """(alpha (N,) or (N, d), total): forward values per node in the named semiring."""
    lat = _check(lattice)
    semiring = resolve(semiring)
    kernel = _k.forward_kernel(semiring)
    alpha = np.empty((lat.num_nodes,) + semiring.value_shape(width))
    total = kernel(*lat._args(), alpha)
    return alpha, total


def betas(lattice: Lattice) -> np.ndarray:
    """Backward values (log semiring) per node, final weights included."""
    lat = _check(lattice)
    beta = np.empty(lat.num_nodes)
    _k.log_backward(lat.num_nodes, lat.out_offsets, lat.out_arcs, lat.arc_target, lat.arc_weight,
                    lat.final, beta)
    return beta


def log_partition(lattice: Lattice) -> float:
    """log Z: log-sum-exp of all path scores (−inf if no path)."""
    return forward(lattice, "log")


def viterbi_arcs(lattice: Lattice):
    """(arc ids of the best path, root first; its score). Empty and −inf if no path."""
    lat = _check(lattice)
    arcs, score = _k.viterbi_kernel(*lat._args(), lat.node_position)
    return arcs, float(score)


def viterbi(lattice: Lattice):
    """(labels of the best path, its score)."""
    arcs, score = viterbi_arcs(lattice)
    return path_labels(lattice, arcs), score


def marginals(lattice: Lattice, with_final: bool = False):
    """(node marginals (N,), arc marginals (A,)) [, final marginals (N,) if with_final].

    node[v] = p(path visits v); arc[a] = p(path uses a); final[v] = p(path ends at v).
    All zero when log Z = −inf.
    """
    lat = _check(lattice)
    _, node, arc, fin = _k.marginals_kernel(lat.num_nodes, lat.in_offsets, lat.in_arcs, lat.out_offsets,
                                            lat.out_arcs, lat.arc_source, lat.arc_target, lat.arc_weight,
                                            lat.final)
    return (node, arc, fin) if with_final else (node, arc)


def log_partition_and_marginals(lattice: Lattice):
    """(log Z, node marginals (N,), arc marginals (A,)) from one forward and one backward pass
    (:func:`log_partition` then :func:`marginals` would run the forward twice)."""
    lat = _check(lattice)
    logz, node, arc, _ = _k.marginals_kernel(lat.num_nodes, lat.in_offsets, lat.in_arcs, lat.out_offsets,
                                             lat.out_arcs, lat.arc_source, lat.arc_target, lat.arc_weight,
                                             lat.final)
    return float(logz), node, arc


def sample_arcs(lattice: Lattice, n: int = 1, seed=None) -> np.ndarray:
    """n exact samples as arc ids (n, max_length), −1 padded (all −1 if no path)."""
    lat = _check(lattice)
    n = check_int_at_least("n", n, 1)
    uniforms = as_rng(seed).random((n, lat.max_length + 1))
    arcs, _ = _k.sample_kernel(*lat._args(), lat.node_position, lat.max_length, uniforms)
    return arcs


def sample(lattice: Lattice, n: int = 1, seed=None) -> np.ndarray:
    """n exact samples as label sequences (n, max_length), −1 padded."""
    return path_labels(lattice, sample_arcs(lattice, n, seed))


def kbest_arcs(lattice: Lattice, k: int):
    """(arc ids (k, max_length) −1 padded, scores (k,)), best first; −inf rows if fewer paths."""
    lat = _check(lattice)
    k = check_int_at_least("k", k, 1)
    return _k.operation("kbest")(lat, k)


def kbest(lattice: Lattice, k: int):
    """(label sequences (k, max_length) −1 padded, scores (k,)), best first."""
    arcs, scores = kbest_arcs(lattice, k)
    return path_labels(lattice, arcs), scores


def entropy(lattice: Lattice) -> float:
    """Entropy (nats) of the path distribution; NaN if there is no path."""
    return _k.operation("entropy")(_check(lattice))
