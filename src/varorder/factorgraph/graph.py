"""Factor graphs over discrete label variables: structure, parameter layout and the full score.

Factorization (Bouchard, GREC-NEG 2010, §2; the templates of a skip-chain / higher-order CRF).
One variable yₜ ∈ {0…K−1} per token; tokens are laid out flat (sequences concatenated).
With xₜ the token's sparse feature vector and θ = (W, T, start, end, S, U),

    s(x, y) = Σₜ xₜ·W[:, yₜ]                                   unary factors
            + Σ_seq start[y_first] + end[y_last] + Σₜ T[yₜ₋₁, yₜ]  neighbour pairwise factors
            + Σ_(i, j) ∈ skip  S[y_i, y_j]                        skip pairwise factors (i < j)
            + Σₜ U[yₜ₋₂, yₜ₋₁, yₜ]                                 second-order window factors

and p(y | x) ∝ exp s(x, y). The unary and neighbour factors are exactly the linear-chain CRF
of :mod:`varorder.models.crf` (same W, T, start, end), so a graph without skip pairs or
window factors is that CRF. Skip pairs are arbitrary chosen token pairs (possibly in
different sentences of one document, so the graph is loopy); :func:`repeated_key_pairs`
links each token to the previous token with the same key (e.g. the same lower-cased word)
in the same document, as Bouchard's skip factors reach back to the previous mention.

All parameters live in one flat vector θ; :class:`ParameterLayout` gives each block's
offset. :func:`full_score` is the plain NumPy rescoring used to check the incremental
scores of :mod:`varorder.factorgraph.kernels`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from varorder.errors import ParameterError

__all__ = ["ParameterLayout", "FactorGraph", "repeated_key_pairs", "document_ids", "full_score"]


@dataclass(frozen=True)
class ParameterLayout:
    """Offsets of the parameter blocks in the flat vector θ (−1: block absent)."""

    n_features: int
    n_labels: int
    skip: bool = False
    second_order: bool = False

    @property
    def offsets(self) -> dict[str, int]:
        F, K = self.n_features, self.n_labels
        out = {"W": 0, "T": F * K, "start": F * K + K * K, "end": F * K + K * K + K}
        position = F * K + K * K + 2 * K
        out["S"] = position if self.skip else -1
        position += K * K if self.skip else 0
        out["U"] = position if self.second_order else -1
        return out

    @property
    def n_params(self) -> int:
        K = self.n_labels
        return (self.n_features + K + 2) * K + (K * K if self.skip else 0) + (K ** 3 if self.second_order else 0)

    def kernel_layout(self) -> np.ndarray:
        """[K, o_T, o_start, o_end, o_S, o_U] as the kernels take it."""
        o = self.offsets
        return np.array([self.n_labels, o["T"], o["start"], o["end"], o["S"], o["U"]], dtype=np.int64)

    def unpack(self, theta: np.ndarray) -> dict[str, np.ndarray]:
        """Views of θ's blocks: W (F, K), T (K, K), start (K,), end (K,), and S (K, K), U (K, K, K) when present."""
        F, K = self.n_features, self.n_labels
        if theta.shape != (self.n_params,):
            raise ParameterError(f"theta has shape {theta.shape}, expected ({self.n_params},)", name='theta', value=theta)
        o = self.offsets
        out = {"W": theta[: F * K].reshape(F, K), "T": theta[o["T"]: o["T"] + K * K].reshape(K, K),
               "start": theta[o["start"]: o["start"] + K], "end": theta[o["end"]: o["end"] + K]}
        if self.skip:
            out["S"] = theta[o["S"]: o["S"] + K * K].reshape(K, K)
        if self.second_order:
            out["U"] = theta[o["U"]: o["U"] + K ** 3].reshape(K, K, K)
        return out


@dataclass
class FactorGraph:
    """The factor structure over a batch of sequences: features, chain neighbours, skip pairs.

    ``X`` (N, F) CSR holds the tokens' features, ``lengths`` (S,) the sequence lengths
    (tokens flat, in order), ``skip_pairs`` (M, 2) flat token pairs (i < j) joined by a skip
    factor. The kernels' arrays (``prev``/``next`` neighbour ids, −1 at sequence edges, and
    each token's skip adjacency in CSR form) are derived once here.
    """

    X: sp.csr_matrix
    lengths: np.ndarray
    skip_pairs: np.ndarray = field(default_factory=lambda: np.zeros((0, 2), dtype=np.int64))

    def __post_init__(self):
        self.X = sp.csr_matrix(self.X, dtype=np.float64)
        self.X.sort_indices()
        self.lengths = np.asarray(self.lengths, dtype=np.int64)
        if self.lengths.ndim != 1 or (self.lengths < 1).any():
            raise ParameterError("lengths must be a 1-d array of positive sequence lengths", name='lengths', value=self.lengths)
        N = int(self.lengths.sum())
        if self.X.shape[0] != N:
            raise ParameterError(f"X has {self.X.shape[0]} rows but the lengths sum to {N} tokens", name='X', value=self.X)
        pairs = np.asarray(self.skip_pairs, dtype=np.int64).reshape(-1, 2)
        if pairs.size and ((pairs < 0).any() or (pairs >= N).any() or (pairs[:, 0] >= pairs[:, 1]).any()):
            raise ParameterError("skip_pairs must hold flat token ids 0 <= i < j < n_tokens", name='skip_pairs', value=self.skip_pairs)
        self.skip_pairs = pairs
        self.offsets = np.concatenate([[0], np.cumsum(self.lengths)])
        positions = np.arange(N)
        self.prev = positions - 1
        self.prev[self.offsets[:-1]] = -1
        self.next = positions + 1
        self.next[self.offsets[1:] - 1] = -1
        # Each pair appears twice in the adjacency: once from i (first argument), once from j.
        ends = np.concatenate([pairs[:, 0], pairs[:, 1]])
        others = np.concatenate([pairs[:, 1], pairs[:, 0]])
        first = np.concatenate([np.ones(len(pairs), dtype=np.int64), np.zeros(len(pairs), dtype=np.int64)])
        order = np.argsort(ends, kind="stable")
        self.skip_other = others[order]
        self.skip_first = first[order]
        self.skip_ptr = np.zeros(N + 1, dtype=np.int64)
        np.cumsum(np.bincount(ends, minlength=N), out=self.skip_ptr[1:])

    @property
    def n_tokens(self) -> int:
        return int(self.offsets[-1])

    @property
    def max_skip_degree(self) -> int:
        return int(np.diff(self.skip_ptr).max(initial=0))

    def kernel_arrays(self) -> tuple:
        """(indptr, indices, data, prev, next, skip_ptr, skip_other, skip_first) as the kernels take them."""
        X = self.X
        return (X.indptr.astype(np.int64), X.indices.astype(np.int64), X.data.astype(np.float64),
                self.prev, self.next, self.skip_ptr, self.skip_other, self.skip_first)


def repeated_key_pairs(keys, documents=None) -> np.ndarray:
    """Skip pairs (i, j): token j and the previous token i with the same key in the same document.

    ``keys`` is one sequence of hashable keys per sequence (e.g. lower-cased words, or None
    to exclude a token); ``documents`` one document id per sequence (None: each sequence is
    its own document). Flat token ids follow the sequences' order.
    """
    if documents is not None and len(documents) != len(keys):
        raise ParameterError(f"documents has {len(documents)} entries but there are {len(keys)} sequences", name='documents', value=documents)
    last_seen: dict = {}
    current_document = object()
    pairs = []
    position = 0
    for s, sequence in enumerate(keys):
        document = s if documents is None else documents[s]
        if document != current_document:
            last_seen = {}  # documents are contiguous runs of sequences
            current_document = document
        for key in sequence:
            if key is not None:
                previous = last_seen.get(key)
                if previous is not None:
                    pairs.append((previous, position))
                last_seen[key] = position
            position += 1
    return np.array(pairs, dtype=np.int64).reshape(-1, 2)


def document_ids(comment_lists) -> list[int]:
    """Document index of each CoNLL-U sentence from its ``# newdoc`` comments (a run until the next one).

    Without any ``# newdoc`` comment each sentence is its own document.
    """
    ids, current = [], -1
    starts = [any(c.lstrip("# ").startswith("newdoc") for c in comments) for comments in comment_lists]
    if not any(starts):
        return list(range(len(comment_lists)))
    for index, starts_document in enumerate(starts):
        if starts_document or current < 0:
            current += 1
        ids.append(current)
    return ids


def full_score(graph: FactorGraph, layout: ParameterLayout, theta: np.ndarray, y: np.ndarray) -> float:
    """s(x, y) summed over every factor of the graph, computed from scratch (NumPy)."""
    blocks = layout.unpack(theta)
    y = np.asarray(y, dtype=np.int64)
    emissions = graph.X @ blocks["W"]
    total = emissions[np.arange(y.size), y].sum()
    total += blocks["start"][y[graph.offsets[:-1]]].sum() + blocks["end"][y[graph.offsets[1:] - 1]].sum()
    inner = np.flatnonzero(graph.prev >= 0)
    total += blocks["T"][y[graph.prev[inner]], y[inner]].sum()
    if layout.skip and len(graph.skip_pairs):
        total += blocks["S"][y[graph.skip_pairs[:, 0]], y[graph.skip_pairs[:, 1]]].sum()
    if layout.second_order:
        third = inner[graph.prev[graph.prev[inner]] >= 0]
        total += blocks["U"][y[graph.prev[graph.prev[third]]], y[graph.prev[third]], y[third]].sum()
    return float(total)
