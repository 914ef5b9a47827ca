"""Hypothesis strategies for small random chains and lattices (test-only; needs hypothesis).

Arrays are drawn from a NumPy generator seeded by hypothesis: fast, and the
seed, sizes and the −inf rate still shrink.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from hypothesis import strategies as st

from varorder.lattice import Lattice

__all__ = ["ChainCase", "chains", "lattices", "SegmentCase", "segment_chains", "dense_segment_scores"]


@dataclass
class ChainCase:
    emissions: np.ndarray
    transitions: np.ndarray
    start: np.ndarray
    end: np.ndarray
    lengths: np.ndarray
    allowed: np.ndarray | None

    def transitions_of(self, b: int) -> np.ndarray:
        return self.transitions[b] if self.transitions.ndim == 3 else self.transitions

    @property
    def kwargs(self):
        return dict(start=self.start, end=self.end, lengths=self.lengths, allowed=self.allowed)


def _potentials(rng, shape, inf_rate, integer):
    x = rng.integers(-2, 3, size=shape).astype(float) if integer else rng.normal(scale=2.0, size=shape)
    x[rng.random(shape) < inf_rate] = -np.inf
    return x


@st.composite
def chains(draw, max_batch=3, max_len=6, max_labels=4, allow_inf=True, allow_mask=True):
    seed = draw(st.integers(0, 2**32 - 1))
    B = draw(st.integers(1, max_batch))
    L = draw(st.integers(1, max_len))
    K = draw(st.integers(1, max_labels))
    inf_rate = draw(st.sampled_from([0.0, 0.1, 0.3])) if allow_inf else 0.0
    integer = draw(st.booleans())  # integer potentials create exact ties
    per_sequence = draw(st.booleans())
    rng = np.random.default_rng(seed)
    allowed = None
    if allow_mask and draw(st.booleans()):
        allowed = rng.random((B, L, K)) > 0.2
    return ChainCase(
        emissions=_potentials(rng, (B, L, K), inf_rate, integer),
        transitions=_potentials(rng, (B, K, K) if per_sequence else (K, K), inf_rate, integer),
        start=_potentials(rng, (K,), inf_rate / 2, integer),
        end=_potentials(rng, (K,), inf_rate / 2, integer),
        lengths=rng.integers(1, L + 1, size=B),
        allowed=allowed,
    )


@st.composite
def lattices(draw, max_positions=5, max_width=3, max_labels=4, allow_inf=True):
    """Random position-indexed lattices: 1..max_width nodes per position, random arcs."""
    seed = draw(st.integers(0, 2**32 - 1))
    P = draw(st.integers(1, max_positions))
    inf_rate = draw(st.sampled_from([0.0, 0.15])) if allow_inf else 0.0
    integer = draw(st.booleans())
    rng = np.random.default_rng(seed)
    widths = [1] + list(rng.integers(1, max_width + 1, size=P))
    pos = np.repeat(np.arange(P + 1), widths)
    first = np.concatenate([[0], np.cumsum(widths)])
    src, dst, lab = [], [], []
    for p in range(P):
        for u in range(first[p], first[p + 1]):
            for v in range(first[p + 1], first[p + 2]):
                if rng.random() < 0.7:
                    for _ in range(rng.integers(1, 3)):  # parallel arcs are legal
                        src.append(u)
                        dst.append(v)
                        lab.append(int(rng.integers(0, max_labels)))
    A = len(src)
    weights = _potentials(rng, (A,), inf_rate, integer)
    final = _potentials(rng, (len(pos),), inf_rate, integer)
    final[rng.random(len(pos)) < 0.5] = -np.inf
    final[pos == P] = _potentials(rng, (widths[-1],), inf_rate, integer)
    return Lattice(pos, np.array(src, dtype=np.int64), np.array(dst, dtype=np.int64),
                   np.array(lab, dtype=np.int64), weights, final)


@dataclass
class SegmentCase:
    """A small semi-Markov batch (see :mod:`varorder.semimarkov`); with ``factored`` the
    scores come from emissions (B, L, K) and durations (K, D), ``scores`` being their
    dense (B, L, D, K) expansion (computed here by plain sums, for the oracle)."""

    scores: np.ndarray
    transitions: np.ndarray
    start: np.ndarray
    end: np.ndarray
    lengths: np.ndarray
    emissions: np.ndarray | None = None
    durations: np.ndarray | None = None

    def transitions_of(self, b: int) -> np.ndarray:
        return self.transitions[b] if self.transitions.ndim == 3 else self.transitions

    @property
    def kwargs(self):
        return dict(start=self.start, end=self.end, lengths=self.lengths)


def dense_segment_scores(emissions, durations) -> np.ndarray:
    """(B, L, D, K): segment_scores[b, t, d, k] = Σ emissions[b, t−d..t, k] + durations[k, d]
    (−inf where t − d < 0)."""
    B, L, K = emissions.shape
    D = durations.shape[1]
    out = np.full((B, L, D, K), -np.inf)
    for t in range(L):
        for d in range(min(D, t + 1)):
            with np.errstate(invalid="ignore"):
                out[:, t, d, :] = emissions[:, t - d:t + 1, :].sum(axis=1) + durations[:, d][None, :]
    return out


@st.composite
def segment_chains(draw, max_batch=3, max_len=5, max_duration=3, max_labels=3, allow_inf=True, factored=None):
    seed = draw(st.integers(0, 2**32 - 1))
    B = draw(st.integers(1, max_batch))
    L = draw(st.integers(1, max_len))
    D = draw(st.integers(1, max_duration))
    K = draw(st.integers(1, max_labels))
    inf_rate = draw(st.sampled_from([0.0, 0.1, 0.3])) if allow_inf else 0.0
    integer = draw(st.booleans())
    per_sequence = draw(st.booleans())
    if factored is None:
        factored = draw(st.booleans())
    rng = np.random.default_rng(seed)
    transitions = _potentials(rng, (B, K, K) if per_sequence else (K, K), inf_rate, integer)
    start = _potentials(rng, (K,), inf_rate / 2, integer)
    end = _potentials(rng, (K,), inf_rate / 2, integer)
    lengths = rng.integers(1, L + 1, size=B)
    if factored:
        emissions = _potentials(rng, (B, L, K), inf_rate, integer)
        durations = _potentials(rng, (K, D), inf_rate, integer)
        return SegmentCase(dense_segment_scores(emissions, durations), transitions, start, end, lengths,
                           emissions, durations)
    scores = _potentials(rng, (B, L, D, K), inf_rate, integer)
    return SegmentCase(scores, transitions, start, end, lengths)
