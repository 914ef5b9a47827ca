"""Public API: exact inference on semi-Markov chains (labelled segmentations).

Factorization (Sarawagi & Cohen 2004; Yu 2010): sequence b of length n is cut into
consecutive labelled segments; a segmentation scores

    s = start[y₁] + Σᵢ segment_scores[b, eᵢ − 1, eᵢ − sᵢ − 1, yᵢ] + Σᵢ₌₂ᵐ transitions[yᵢ₋₁, yᵢ] + end[yₘ]

for segments [sᵢ, eᵢ) (end exclusive) with labels yᵢ, and p = exp(s − log Z). Arguments
shared by every function:

segment_scores : (B, L, D, K) log-potentials, or the factored form of :func:`from_emissions`
    ``segment_scores[b, t, d, k]`` scores a segment of label k and length d + 1 that ENDS at
    position t (it covers t − d … t). Entries with t − d < 0 or t ≥ lengths[b] are never
    read (and not validated); −inf forbids a segment.
transitions : (K, K) shared or (B, K, K) per sequence
    label i's segment followed by label j's.
start, end : optional (K,)
    log-potentials of the first / last segment's label (default 0).
lengths : optional (B,)
    ints in 1..L (default L).

A sequence without a segmentation of finite score has log Z = −inf, Viterbi score −inf and
an empty segmentation. The recursion, generic over the semirings of
:mod:`varorder.engine.semiring`, is :mod:`varorder.engine.semimarkov`.

Example::

    >>> import numpy as np
    >>> from varorder import semimarkov
    >>> scores = np.zeros((1, 3, 2, 1))          # one label, segments of length 1 or 2
    >>> round(float(np.exp(semimarkov.log_partition(scores, np.zeros((1, 1)))[0])), 12)   # 1+1+1, 1+2, 2+1
    3.0
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from varorder.engine import semimarkov as _engine
from varorder.engine.semiring import resolve
from varorder.errors import ParameterError
from varorder.engine.validate import (as_index_array, as_potentials, as_rng, check_int_at_least, first_index)

__all__ = ["FactoredSegments", "from_emissions", "log_partition", "marginals", "viterbi", "kbest", "sample",
           "entropy", "forward", "segment_statistics", "segmentation_score"]


@dataclass(frozen=True)
class FactoredSegments:
    """Segment scores in the factored (hidden semi-Markov) form: a segment of label k
    covering positions t − d … t scores Σᵤ emissions[b, u, k] + durations[k, d]. Built by
    :func:`from_emissions`; accepted wherever ``segment_scores`` is."""

    emissions: np.ndarray  # (B, L, K)
    durations: np.ndarray  # (K, D)

    @property
    def shape(self) -> tuple:
        """The shape (B, L, D, K) of the dense array this stands for."""
        B, L, K = self.emissions.shape
        return (B, L, self.durations.shape[1], K)


def from_emissions(emissions, durations) -> FactoredSegments:
    """The factored form: ``emissions`` (B, L, K) per-position log-potentials, ``durations``
    (K, D) log-potentials of a segment of label k and length d + 1 (−inf forbids it). Every
    function of this module gives on it what it gives on the dense (B, L, D, K) array with
    ``segment_scores[b, t, d, k] = emissions[b, t−d..t, k].sum() + durations[k, d]``, in
    O(B·L·D·K) time and without that array."""
    E = as_potentials("emissions", emissions, (None, None, None))
    if E.shape[0] < 1 or E.shape[1] < 1 or E.shape[2] < 1:
        raise ParameterError(f"emissions must have shape (B, L, K) with every axis >= 1, got {E.shape}")
    dur = as_potentials("durations", durations, (E.shape[2], None))
    if dur.shape[1] < 1:
        raise ParameterError(f"durations must have shape (K, D) with D >= 1, got {dur.shape}")
    return FactoredSegments(E, dur)


def _readable(L: int, D: int, lengths: np.ndarray) -> np.ndarray:
    """(B, L, D) True where segment (t, d) lies inside the sequence."""
    t = np.arange(L)[:, None]
    d = np.arange(D)[None, :]
    inside = (t - d >= 0)[None, :, :]
    return inside & (t[None, :, :] < lengths[:, None, None])


def _lengths(lengths, B: int, L: int) -> np.ndarray:
    if lengths is None:
        return np.full(B, L, dtype=np.int64)
    lengths = as_index_array("lengths", lengths, (B,))
    bad = (lengths < 1) | (lengths > L)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ParameterError(f"lengths must be in 1..{L}, got lengths[{i}] = {int(lengths[i])}")
    return lengths


def _dense_scores(value, lengths_arg):
    arr = np.asarray(value)
    if arr.ndim != 4:
        raise ParameterError(f"segment_scores must have 4 dimensions (B, L, D, K), got shape {arr.shape}")
    B, L, D, K = arr.shape
    if min(arr.shape) < 1:
        raise ParameterError(f"segment_scores must have every axis >= 1, got shape {arr.shape}")
    lengths = _lengths(lengths_arg, B, L)
    if arr.dtype == object or not (np.issubdtype(arr.dtype, np.floating) or np.issubdtype(arr.dtype, np.integer)):
        raise ParameterError(f"segment_scores must be a real-valued array, got dtype {arr.dtype}")
    arr = np.ascontiguousarray(arr, dtype=np.float64)
    if not np.isfinite(arr.sum()):  # NaN or +inf somewhere: refuse it where it would be read
        readable = _readable(L, D, lengths)[..., None]
        for what, bad in (("NaN", np.isnan(arr)), ("+inf", np.isposinf(arr))):
            bad &= readable
            if bad.any():
                raise ParameterError(f"segment_scores contains {what} at index {first_index(bad)}")
    return arr, lengths


def prepare(segment_scores, transitions, lengths=None, start=None, end=None) -> _engine.SegmentInput:
    """Validate the arguments once (every error names the argument and index)."""
    if isinstance(segment_scores, FactoredSegments):
        form = "factored"
        P, Q = segment_scores.emissions, segment_scores.durations
        B, L, K = P.shape
        lengths = _lengths(lengths, B, L)
    else:
        form = "dense"
        P, lengths = _dense_scores(segment_scores, lengths)
        B, L, _, K = P.shape
        Q = np.zeros((1, 1))
    T = np.asarray(transitions)
    if T.ndim == 2:
        T = as_potentials("transitions", T, (K, K))[None]
    else:
        T = as_potentials("transitions", T, (B, K, K))
    start = np.zeros(K) if start is None else as_potentials("start", start, (K,))
    end = np.zeros(K) if end is None else as_potentials("end", end, (K,))
    return _engine.SegmentInput(form, P, Q, T, start, end, lengths)


def log_partition(segment_scores, transitions, *, lengths=None, start=None, end=None) -> np.ndarray:
    """log Z of each sequence, (B,)."""
    return _engine.log_partition(prepare(segment_scores, transitions, lengths, start, end))


def forward(segment_scores, transitions, *, lengths=None, start=None, end=None, semiring="log",
            width: int | None = None) -> np.ndarray:
    """⊕ over each sequence's segmentations in a semiring, (B,) or (B, d) for a structured
    one: a registered name ("log", "max", "expectation", "kbest" with ``width`` = k) or a
    :class:`varorder.engine.semiring.Semiring`."""
    semiring = resolve(semiring)
    if width is not None:
        width = check_int_at_least("width", width, 1)
    return _engine.forward_batch(prepare(segment_scores, transitions, lengths, start, end), semiring, width)


def marginals(segment_scores, transitions, *, lengths=None, start=None, end=None, edges: bool = False):
    """Posterior probability of each segment (B, L, D, K), zero where unreadable; with
    ``edges=True`` also the expected transition counts (B, K, K)."""
    si = prepare(segment_scores, transitions, lengths, start, end)
    return _engine.marginals(si, edges=edges)


def segment_statistics(segment_scores, transitions, *, lengths=None, start=None, end=None):
    """What EM needs without the (B, L, D, K) marginals: (log Z (B,), occupancy (B, L, K) =
    p(position t lies in a segment of label k), durations (B, K, D) expected number of
    segments of label k and length d + 1, edges (B, K, K) expected transitions, first (B, K)
    p(the first segment has label k))."""
    return _engine.segment_statistics(prepare(segment_scores, transitions, lengths, start, end))


def viterbi(segment_scores, transitions, *, lengths=None, start=None, end=None):
    """(segmentations, scores (B,)): per sequence the best segmentation as a list of
    (start, end, label) with end exclusive (empty when log Z = −inf)."""
    return _engine.viterbi(prepare(segment_scores, transitions, lengths, start, end))


def kbest(segment_scores, transitions, k: int, *, lengths=None, start=None, end=None):
    """(per sequence a list of up to k segmentations best first, scores (B, k) −inf padded)."""
    k = check_int_at_least("k", k, 1)
    return _engine.kbest(prepare(segment_scores, transitions, lengths, start, end), k)


def sample(segment_scores, transitions, n: int, seed=None, *, lengths=None, start=None, end=None):
    """Per sequence a list of ``n`` exact posterior segmentations (a seed fixes them)."""
    n = check_int_at_least("n", n, 1)
    return _engine.sample(prepare(segment_scores, transitions, lengths, start, end), n, as_rng(seed))


def entropy(segment_scores, transitions, *, lengths=None, start=None, end=None) -> np.ndarray:
    """Entropy (nats) of each sequence's posterior over segmentations, (B,); NaN without one."""
    return _engine.entropy(prepare(segment_scores, transitions, lengths, start, end))


def segmentation_score(segment_scores, transitions, segmentation, b: int = 0, *, start=None, end=None) -> float:
    """The score of one segmentation [(start, end, label), …] of sequence b (checks it tiles 0..n)."""
    si = prepare(segment_scores, transitions, None, start, end)
    T = si.transitions[b % si.transitions.shape[0]]
    total, prev, pos = 0.0, None, 0
    for s, e, k in segmentation:
        if s != pos or e <= s or e - s > si.max_length:
            raise ParameterError(f"segmentation must tile the positions with segments of 1..{si.max_length}, "
                                 f"got segment ({s}, {e}, {k}) at position {pos}")
        d = e - s - 1
        if si.form == "dense":
            w = si.P[b, e - 1, d, k]
        else:
            w = float(si.P[b, s:e, k].sum()) + si.Q[k, d]
        total += w + (si.start[k] if prev is None else T[prev, k])
        prev, pos = k, e
    return float(total + si.end[prev]) if prev is not None else -np.inf
