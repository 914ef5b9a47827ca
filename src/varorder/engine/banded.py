"""Exact inference on chains whose shared transition matrix is *banded*: T[i, j] = −inf when |i − j| > w.

Factorization: the dense chain's (see :mod:`varorder.engine.chain`), with transitions stored by
diagonal, ``band[i, d + w] = T[i, i + d]`` for d = −w … w (entries off the matrix are ignored),
so one position costs O(K·w) instead of O(K²) — what makes a 1,000-word HMM alignment pair
(K = 2,000 states, w = 2·jump band + 1) tractable. When w ≥ K − 1 the band is the whole
matrix and every result equals the dense engine's (tested against it and against enumeration).

Algorithms (Rabiner 1989, §V.A scaling): forward–backward in exp space with per-position
renormalisation (emissions shifted by their row maximum, transitions exponentiated once),
giving node marginals, position-summed edge marginals in band storage and log Z; Viterbi is
the max-plus forward pass in log space with a back-pointer table (L·K int32). Unlike the dense
engine there is no log-space fallback: potentials whose products underflow exp space (a dynamic
range of hundreds of nats within one position) give log Z = −inf; the word aligner's stay within
a few dozen nats (its table floor is 1e-12).
"""

from __future__ import annotations

import math

import numba
import numpy as np

from varorder.engine.chain_generic import generic_forward
from varorder.engine.semiring import LOG, MAX, Semiring, resolve
from varorder.engine.threads import uses_engine_threads
import varorder._numba_start  # noqa: E402,F401,I001  (Numba's cache saves locked across processes)

from varorder.errors import ParameterError

__all__ = ["banded_marginals", "banded_viterbi", "band_of", "dense_of", "forward_values", "SPECIALISED_FORWARD"]

_NEG_INF = -np.inf


def band_of(transitions: np.ndarray, w: int) -> np.ndarray:
    """Band storage (K, 2w + 1) of a dense (K, K) log-transition matrix (entries outside → −inf)."""
    K = transitions.shape[0]
    band = np.full((K, 2 * w + 1), _NEG_INF)
    for d in range(-w, w + 1):
        rows = np.arange(max(0, -d), min(K, K - d))
        band[rows, d + w] = transitions[rows, rows + d]
    return band


def dense_of(band: np.ndarray) -> np.ndarray:
    """The dense (K, K) log-transition matrix of band storage (−inf outside the band)."""
    K, width = band.shape
    w = width // 2
    out = np.full((K, K), _NEG_INF)
    for d in range(-w, w + 1):
        rows = np.arange(max(0, -d), min(K, K - d))
        out[rows, rows + d] = band[rows, d + w]
    return out


@numba.njit(cache=True)
def _one_sequence(E, n, expA, start, w, node, edge_sum):
    """Scaled forward–backward of one sequence (E (L, K) log emissions, first n positions); returns log Z."""
    K = E.shape[1]
    alpha = np.zeros((n, K))
    emit = np.zeros((n, K))
    scale = np.zeros(n)
    log_z = 0.0
    for t in range(n):
        m = _NEG_INF
        for j in range(K):
            v = E[t, j] + (start[j] if t == 0 else 0.0)
            if v > m:
                m = v
        if m == _NEG_INF:
            return _NEG_INF
        for j in range(K):
            emit[t, j] = math.exp(E[t, j] - m)
        s = 0.0
        if t == 0:
            for j in range(K):
                a = math.exp(E[0, j] + start[j] - m)
                alpha[0, j] = a
                s += a
            for j in range(K):  # the start potentials are folded into alpha[0], not into emit
                emit[0, j] = 0.0
        else:
            for j in range(K):
                acc = 0.0
                lo, hi = max(0, j - w), min(K - 1, j + w)
                for i in range(lo, hi + 1):
                    acc += alpha[t - 1, i] * expA[i, j - i + w]
                a = acc * emit[t, j]
                alpha[t, j] = a
                s += a
        if s <= 0.0:
            return _NEG_INF
        scale[t] = s
        for j in range(K):
            alpha[t, j] /= s
        log_z += m + math.log(s)
    beta = np.ones(K)
    nxt = np.zeros(K)
    for j in range(K):
        node[n - 1, j] = alpha[n - 1, j]
    for t in range(n - 2, -1, -1):
        # weighted next-position factor: emit(t+1, j) β(t+1, j) / c(t+1)
        for j in range(K):
            nxt[j] = emit[t + 1, j] * beta[j] / scale[t + 1]
        for i in range(K):
            acc = 0.0
            lo, hi = max(0, i - w), min(K - 1, i + w)
            a_i = alpha[t, i]
            for j in range(lo, hi + 1):
                x = expA[i, j - i + w] * nxt[j]
                acc += x
                edge_sum[i, j - i + w] += a_i * x
            beta[i] = acc
        for i in range(K):
            node[t, i] = alpha[t, i] * beta[i]
    return log_z


@numba.njit(cache=True)
def _marginals_kernel(E, lengths, expA, start, w, node, edge_sum, log_z):
    for b in range(E.shape[0]):
        n = lengths[b]
        if n == 0:
            log_z[b] = 0.0
            continue
        log_z[b] = _one_sequence(E[b], n, expA, start, w, node[b], edge_sum[b])


def banded_marginals(emissions, band, start=None, lengths=None):
    """(node (B, L, K), position-summed edge marginals in band storage (B, K, 2w + 1), log Z (B,)).

    ``emissions`` (B, L, K) log-potentials; ``band`` (K, 2w + 1) log-transitions shared by the batch;
    ``start`` (K,) log-potentials of the first label. A sequence with no finite path gets log Z = −inf.
    """
    E = np.ascontiguousarray(emissions, dtype=np.float64)
    B, L, K = E.shape
    band = np.ascontiguousarray(band, dtype=np.float64)
    if band.ndim != 2 or band.shape[0] != K or band.shape[1] % 2 != 1:
        raise ParameterError(f"band must have shape (K={K}, 2w + 1), got {band.shape}", name='band', value=band)
    w = band.shape[1] // 2
    start = np.zeros(K) if start is None else np.ascontiguousarray(start, dtype=np.float64)
    lengths = np.full(B, L, dtype=np.int64) if lengths is None else np.ascontiguousarray(lengths, dtype=np.int64)
    node = np.zeros((B, L, K))
    edge_sum = np.zeros((B, K, 2 * w + 1))
    log_z = np.zeros(B)
    _marginals_kernel(E, lengths, np.exp(band), start, w, node, edge_sum, log_z)
    return node, edge_sum, log_z


@numba.njit(cache=True)
def _viterbi_kernel(E, lengths, band, start, w, paths, scores):
    B, L, K = E.shape
    for b in range(B):
        n = lengths[b]
        if n == 0:
            scores[b] = 0.0
            continue
        delta = np.empty(K)
        new = np.empty(K)
        back = np.zeros((n, K), dtype=np.int32)
        for j in range(K):
            delta[j] = start[j] + E[b, 0, j]
        for t in range(1, n):
            for j in range(K):
                best, arg = _NEG_INF, -1
                lo, hi = max(0, j - w), min(K - 1, j + w)
                for i in range(lo, hi + 1):
                    v = delta[i] + band[i, j - i + w]
                    if v > best:
                        best, arg = v, i
                new[j] = best + E[b, t, j]
                back[t, j] = arg
            delta[:] = new
        best, arg = _NEG_INF, -1
        for j in range(K):
            if delta[j] > best:
                best, arg = delta[j], j
        scores[b] = best
        if arg < 0:
            continue
        for t in range(n - 1, -1, -1):
            paths[b, t] = arg
            arg = back[t, arg]


def banded_viterbi(emissions, band, start=None, lengths=None):
    """Best path per sequence: (paths (B, L) int64, −1 past each length or when none is finite; scores (B,))."""
    E = np.ascontiguousarray(emissions, dtype=np.float64)
    B, L, K = E.shape
    band = np.ascontiguousarray(band, dtype=np.float64)
    if band.ndim != 2 or band.shape[0] != K or band.shape[1] % 2 != 1:
        raise ParameterError(f"band must have shape (K={K}, 2w + 1), got {band.shape}", name='band', value=band)
    start = np.zeros(K) if start is None else np.ascontiguousarray(start, dtype=np.float64)
    lengths = np.full(B, L, dtype=np.int64) if lengths is None else np.ascontiguousarray(lengths, dtype=np.int64)
    paths = np.full((B, L), -1, dtype=np.int64)
    scores = np.zeros(B)
    _viterbi_kernel(E, lengths, band, start, band.shape[1] // 2, paths, scores)
    return paths, scores


def _banded_log_z(emissions, band, start, lengths):
    return banded_marginals(emissions, band, start, lengths)[2]


def _banded_scores(emissions, band, start, lengths):
    return banded_viterbi(emissions, band, start, lengths)[1]


# Registered specialisations of the banded chain's forward (⊕ over the paths of each
# sequence): the chain's generic recursion run on the band's dense matrix is the
# definition (tests/test_engine_banded.py checks them equal on random inputs).
SPECIALISED_FORWARD = {LOG: _banded_log_z, MAX: _banded_scores}


def forward_values(emissions, band, start=None, lengths=None, semiring: Semiring | str = LOG,
                   specialised: bool = True) -> np.ndarray:
    """⊕ over the paths of each sequence (B,) of a chain with banded transitions: the
    registered O(L·K·w) kernel for the semiring (and ``specialised``), else the dense
    chain's generic recursion (:mod:`varorder.engine.chain_generic`) on ``dense_of(band)``."""
    return _forward_values(np.ascontiguousarray(emissions, dtype=np.float64), band, start, lengths,
                           resolve(semiring), specialised)


@uses_engine_threads
def _forward_values(E, band, start, lengths, semiring: Semiring, specialised: bool) -> np.ndarray:
    fast = SPECIALISED_FORWARD.get(semiring) if specialised else None
    if fast is not None:
        return fast(E, band, start, lengths)
    B, L, K = E.shape
    start = np.zeros(K) if start is None else np.ascontiguousarray(start, dtype=np.float64)
    lengths = np.full(B, L, dtype=np.int64) if lengths is None else np.ascontiguousarray(lengths, dtype=np.int64)
    dense = dense_of(np.ascontiguousarray(band, dtype=np.float64))[None]
    return generic_forward(semiring)(E, dense, start, np.zeros(K), lengths)
