"""Public API: exact inference on dense first-order chains.

Factorization: for sequence b of length n = lengths[b] a label path y scores

    s(y) = start[y₁] + Σₜ emissions[b, t, yₜ] + Σₜ₌₂ⁿ transitions[yₜ₋₁, yₜ] + end[yₙ],

p(y) = exp(s(y) − log Z). Arguments shared by every function:

emissions : (B, L, K) log-potentials
    float64 by default; float32 and ints accepted, computed in float64. −inf entries are
    hard constraints.
transitions : (K, K) or (B, K, K) log-potentials
    transitions[i, j] for label i followed by j, shared by the batch; or one matrix per
    sequence (e.g. alignment HMMs whose jump scores depend on the sentence).
start, end : optional (K,) log-potentials
    for the first and last label (default 0).
lengths : optional (B,) ints in [1, L]
    for ragged batches (default: all L).
allowed : optional boolean (B, L, K)
    False forbids a label at a position (constrained or partial-label decoding).

A sequence with no allowed path has log Z = −inf, Viterbi score −inf and path
−1, and triggers a :class:`NoPathWarning`. Outputs past each sequence's length
are padded (paths with −1, marginals with 0).

Flat sequences (EM over many sequences, HMM inference): :func:`statistics` (Baum–Welch's
E-step as one call), :func:`flat_log_partition` and :func:`filtered` take the emissions of
S sequences laid out one after another, (N, K) with N = Σ lengths, a ``lengths`` (S,)
array and one shared (K, K) transition matrix; nothing is padded.

The algorithms are documented in :mod:`varorder.engine.chain` (Rabiner 1989;
Lafferty, McCallum & Pereira 2001; Seshadri & Sundberg 1994).
"""

from __future__ import annotations

import warnings

import numpy as np

from varorder.engine import chain as _engine
from varorder.engine.semiring import resolve
from varorder.engine.validate import as_index_array
from varorder.errors import ParameterError

ChainStatistics = _engine.ChainStatistics
Workspace = _engine.Workspace

__all__ = [
    "NoPathWarning",
    "log_partition",
    "viterbi",
    "marginals",
    "sample",
    "kbest",
    "entropy",
    "forward",
    "path_score",
    "statistics",
    "flat_log_partition",
    "filtered",
    "Workspace",
    "ChainStatistics",
]


class NoPathWarning(RuntimeWarning):
    """Some sequence in the batch has no path of finite score (log Z = −inf)."""


def _warn_if_impossible(logz: np.ndarray) -> None:
    bad = np.flatnonzero(np.isneginf(logz))
    if bad.size:
        warnings.warn(
            f"{bad.size} sequence(s) have no allowed path (log Z = -inf), first index {bad[0]}",
            NoPathWarning,
            stacklevel=3,
        )


def log_partition(emissions, transitions, start=None, end=None, lengths=None, allowed=None) -> np.ndarray:
    """log Z of each sequence, shape (B,).

    Examples
    --------
    A chain of three positions and two labels whose emission rows are probabilities and
    whose transitions are neutral, so every path's probability is a product of them:

    >>> import numpy as np
    >>> from varorder import chain
    >>> emissions = np.log([[[0.9, 0.1], [0.2, 0.8], [0.6, 0.4]]])   # (B=1, L=3, K=2)
    >>> transitions = np.zeros((2, 2))
    >>> np.exp(chain.log_partition(emissions, transitions))           # Σ over the 8 paths
    array([1.])
    >>> chain.log_partition(np.zeros((2, 3, 2)), transitions, lengths=[3, 2])   # log 8, log 4
    array([2.07944154, 1.38629436])
    """
    if lengths is None and allowed is None:  # a few plain sequences: one compiled call (same numbers)
        small = _engine.small_log_partition(emissions, transitions, start, end)
        if small is not None:
            if small[1]:
                _warn_if_impossible(small[0])
            return small[0]
    ci = _engine.prepare(emissions, transitions, start, end, lengths, allowed)
    logz = _engine.log_partition(ci)
    _warn_if_impossible(logz)
    return logz


def forward(emissions, transitions, start=None, end=None, lengths=None, allowed=None,
            semiring: str = "log", width: int | None = None) -> np.ndarray:
    """⊕ over all paths in a semiring, shape (B,) — or (B, d) for a structured semiring: a
    registered name ("log" → log Z, "max" → best score, "expectation" → (log Z, E[score]),
    "kbest" → the ``width`` best scores) or a :class:`varorder.engine.semiring.Semiring`."""
    semiring = resolve(semiring)
    ci = _engine.prepare(emissions, transitions, start, end, lengths, allowed)
    return _engine.forward_values(ci, semiring, width=width)


def viterbi(emissions, transitions, start=None, end=None, lengths=None, allowed=None):
    """Best path per sequence: (paths (B, L) int64 with −1 past each length, scores (B,)).

    Examples
    --------
    A chain of three positions and two labels whose emission rows are probabilities and
    whose transitions are neutral, so every path's probability is a product of them:

    >>> import numpy as np
    >>> from varorder import chain
    >>> emissions = np.log([[[0.9, 0.1], [0.2, 0.8], [0.6, 0.4]]])   # (B=1, L=3, K=2)
    >>> transitions = np.zeros((2, 2))
    >>> paths, scores = chain.viterbi(emissions, transitions)
    >>> paths, np.exp(scores)                                          # 0.9 · 0.8 · 0.6
    (array([[0, 1, 0]]), array([0.432]))
    """
    if lengths is None and allowed is None:  # a few plain sequences: one compiled call (same numbers)
        small = _engine.small_viterbi(emissions, transitions, start, end)
        if small is not None:
            if small[2]:
                _warn_if_impossible(small[1])
            return small[0], small[1]
    ci = _engine.prepare(emissions, transitions, start, end, lengths, allowed)
    paths, scores = _engine.viterbi(ci)
    _warn_if_impossible(scores)
    return paths, scores


def marginals(emissions, transitions, start=None, end=None, lengths=None, allowed=None, edges=False,
              return_log_z: bool = False):
    """Posterior marginals: (node (B, L, K), edge) [, log Z (B,) if return_log_z].

    node[b, t, j] = p(yₜ = j). ``edges`` chooses the edge output:
    False (default) → None;
    "sum" → (B, K, K) summed over positions (expected transition counts, the
    CRF gradient's transition term) without building the B·L·K² array;
    True → (B, L−1, K, K) with edge[b, t, i, j] = p(yₜ = i, yₜ₊₁ = j) — B·(L−1)·K²
    floats (939 MB at B = 2000, L = 25, K = 45), so only on request.

    Examples
    --------
    A chain of three positions and two labels whose emission rows are probabilities and
    whose transitions are neutral, so every path's probability is a product of them:

    >>> import numpy as np
    >>> from varorder import chain
    >>> emissions = np.log([[[0.9, 0.1], [0.2, 0.8], [0.6, 0.4]]])   # (B=1, L=3, K=2)
    >>> transitions = np.zeros((2, 2))
    >>> node, edge = chain.marginals(emissions, transitions)
    >>> node[0].round(3)                                               # p(y_t = j)
    array([[0.9, 0.1],
           [0.2, 0.8],
           [0.6, 0.4]])
    >>> node, edge_sum = chain.marginals(emissions, transitions, edges="sum")
    >>> round(float(edge_sum[0].sum()), 6)                             # L − 1 transitions
    2.0
    """
    ci = _engine.prepare(emissions, transitions, start, end, lengths, allowed)
    node, edge, logz = _engine.marginals(ci, edges=edges)
    _warn_if_impossible(logz)
    return (node, edge, logz) if return_log_z else (node, edge)


def sample(emissions, transitions, start=None, end=None, lengths=None, allowed=None, n: int = 1, seed=None):
    """n exact samples per sequence: int64 array (B, n, L), −1 past each length.

    Forward filtering, backward sampling; ``seed`` makes the draw reproducible.

    Examples
    --------
    A chain of three positions and two labels whose emission rows are probabilities and
    whose transitions are neutral, so every path's probability is a product of them:

    >>> import numpy as np
    >>> from varorder import chain
    >>> emissions = np.log([[[0.9, 0.1], [0.2, 0.8], [0.6, 0.4]]])   # (B=1, L=3, K=2)
    >>> transitions = np.zeros((2, 2))
    >>> draws = chain.sample(emissions, transitions, n=1000, seed=0)
    >>> draws.shape
    (1, 1000, 3)
    >>> float((draws[0] == [0, 1, 0]).all(axis=1).mean())              # p = 0.432
    0.434
    """
    ci = _engine.prepare(emissions, transitions, start, end, lengths, allowed)
    paths = _engine.sample(ci, n, seed)
    if (paths[:, 0, 0] < 0).any():
        warnings.warn("some sequence(s) have no allowed path; their samples are -1", NoPathWarning, stacklevel=2)
    return paths


def kbest(emissions, transitions, start=None, end=None, lengths=None, allowed=None, k: int = 1):
    """The k best paths, best first: (paths (B, k, L), scores (B, k)).

    Where a sequence has fewer than k finite-score paths the remaining rows are
    −1 with score −inf.

    Examples
    --------
    A chain of three positions and two labels whose emission rows are probabilities and
    whose transitions are neutral, so every path's probability is a product of them:

    >>> import numpy as np
    >>> from varorder import chain
    >>> emissions = np.log([[[0.9, 0.1], [0.2, 0.8], [0.6, 0.4]]])   # (B=1, L=3, K=2)
    >>> transitions = np.zeros((2, 2))
    >>> paths, scores = chain.kbest(emissions, transitions, k=3)
    >>> paths[0]
    array([[0, 1, 0],
           [0, 1, 1],
           [0, 0, 0]])
    >>> np.exp(scores).round(3)
    array([[0.432, 0.288, 0.108]])
    """
    ci = _engine.prepare(emissions, transitions, start, end, lengths, allowed)
    paths, scores = _engine.kbest(ci, k)
    _warn_if_impossible(scores[:, 0])
    return paths, scores


def entropy(emissions, transitions, start=None, end=None, lengths=None, allowed=None) -> np.ndarray:
    """Entropy (nats) of each sequence's path distribution, shape (B,); NaN where log Z = −inf."""
    ci = _engine.prepare(emissions, transitions, start, end, lengths, allowed)
    h = _engine.entropy(ci)
    if np.isnan(h).any():
        warnings.warn(f"{int(np.isnan(h).sum())} sequence(s) have no allowed path; entropy is NaN",
                      NoPathWarning, stacklevel=2)
    return h


def path_score(emissions, transitions, paths, start=None, end=None, lengths=None) -> np.ndarray:
    """Score s(y) of given paths (B, L) (entries past each length ignored), shape (B,)."""
    ci = _engine.prepare(emissions, transitions, start, end, lengths)
    B, L, K = ci.shape
    paths = as_index_array("paths", paths, (B, L))
    out = np.empty(B)
    for b in range(B):
        n = ci.lengths[b]
        y = paths[b, :n]
        if ((y < 0) | (y >= K)).any():
            raise ParameterError(f"paths[{b}] has labels outside [0, {K}) within its length", name='paths', value=paths)
        T = ci.transitions[b % ci.transitions.shape[0]]
        out[b] = (ci.start[y[0]] + ci.emissions[b, np.arange(n), y].sum()
                  + T[y[:-1], y[1:]].sum() + ci.end[y[-1]])
    return out


def statistics(emissions, lengths, transitions, start=None, end=None, *, weights=None, features=None,
               node: bool = False, workspace=None) -> ChainStatistics:
    """Expected sufficient statistics of flat sequences — Baum–Welch's E-step as one call.

    ``emissions`` (N, K) hold S sequences one after another (sequence s: ``lengths[s]`` rows);
    ``transitions`` (K, K) are shared; ``start``, ``end`` (K,) optional. Returns a
    :class:`ChainStatistics`: ``log_z`` (S,), and, each weighted by ``weights`` (S,) (default 1),
    ``start`` Σₛ p(y₁ = k), ``transitions`` Σₛ Σₜ p(yₜ = i, yₜ₊₁ = j), ``occupancy``
    Σₛ Σₜ p(yₜ = k), ``features`` Σₛ Σₜ p(yₜ = k) features[t] for ``features`` (N, P) (an
    emission model's moments, e.g. [x, x²]; else None), and with ``node=True`` the posteriors
    (N, K) (unweighted). A :class:`Workspace` passed as ``workspace`` keeps the kernel's scratch
    across calls (an EM loop's iterations). Sequences without a path have log Z = −inf and
    contribute nothing.

    Examples
    --------
    Two sequences (three positions, then one) whose emission rows are probabilities, under
    neutral transitions, so every posterior is its emission row:

    >>> import numpy as np
    >>> from varorder import chain
    >>> emissions = np.log([[0.9, 0.1], [0.2, 0.8], [0.6, 0.4], [0.5, 0.5]])   # (N=4, K=2)
    >>> result = chain.statistics(emissions, [3, 1], np.zeros((2, 2)))
    >>> np.exp(result.log_z)
    array([1., 1.])
    >>> result.start, result.occupancy                                         # Σ p(y_1), Σ p(y_t)
    (array([1.4, 0.6]), array([2.2, 1.8]))
    >>> result.transitions                                                     # expected i → j counts
    array([[0.3, 0.8],
           [0.5, 0.4]])
    """
    return _engine.statistics(emissions, lengths, transitions, start, end, weights=weights, features=features,
                              node=node, workspace=workspace)


def flat_log_partition(emissions, lengths, transitions, start=None, end=None) -> np.ndarray:
    """log Z (S,) of flat sequences (arguments as :func:`statistics`); −inf without a path.

    Examples
    --------
    >>> import numpy as np
    >>> from varorder import chain
    >>> chain.flat_log_partition(np.zeros((5, 2)), [3, 2], np.zeros((2, 2)))   # log 8, log 4
    array([2.07944154, 1.38629436])
    """
    return _engine.flat_log_partition(emissions, lengths, transitions, start, end)


def filtered(emissions, lengths, transitions, start=None) -> np.ndarray:
    """Filtered posteriors (N, K) of flat sequences (arguments as :func:`statistics`).

    Row t of sequence s is p(yₜ = k) under the chain cut after position t — for an HMM whose
    emissions are log p(xₜ | zₜ), the causal p(zₜ | x₁..ₜ) — from the forward pass alone.
    Rows of a prefix without a path are NaN.

    Examples
    --------
    A sticky chain: the second observation favours label 1, but the first one and the
    transitions keep the filtered belief on label 0; the third tips it:

    >>> import numpy as np
    >>> from varorder import chain
    >>> emissions = np.log([[0.9, 0.1], [0.2, 0.8], [0.2, 0.8]])
    >>> transitions = np.log([[0.9, 0.1], [0.1, 0.9]])
    >>> chain.filtered(emissions, [3], transitions).round(3)
    array([[0.9  , 0.1  ],
           [0.532, 0.468],
           [0.217, 0.783]])
    """
    return _engine.filtered(emissions, lengths, transitions, start)
