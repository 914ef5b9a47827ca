"""A semi-Markov CRF layer (Sarawagi & Cohen 2004): labelled segmentations on the engine's
semi-Markov structure (:mod:`varorder.semimarkov`).

Factorization: a segmentation of positions 0..n−1 into segments [sᵢ, eᵢ) with labels yᵢ
(each at most D long) scores

    s = start[y₁] + Σᵢ P[eᵢ − 1, eᵢ − sᵢ − 1, yᵢ] + Σᵢ₌₂ᵐ T[yᵢ₋₁, yᵢ] + end[yₘ],

p = exp(s − log Z). The segment scores P come from the caller as a (B, L, D, K) tensor, or are
built from per-token emissions (B, L, K) as P[t, d, k] = Σ_{u = t−d}^{t} E[u, k] + durations[k, d]
with learned duration scores (the factored, hidden semi-Markov form). log Z and its gradient
(the segment marginals) are one engine forward–backward
(:func:`varorder.torch.semimarkov_log_partition`); decoding, k-best, sampling and entropy are
the engine's exact operations.
"""

from __future__ import annotations

import torch
from torch import nn

from varorder import semimarkov as _semimarkov
from varorder.errors import ParameterError
from varorder.torch._convert import to_numpy
from varorder.torch.functions import BACKENDS, semimarkov_log_partition

__all__ = ["SemiMarkovCRF", "segment_scores_from_emissions"]


def segment_scores_from_emissions(emissions, durations):
    """P[b, t, d, k] = Σ_{u=t−d}^{t} emissions[b, u, k] + durations[k, d] (−inf where t − d < 0),
    differentiable; emissions (B, L, K), durations (K, D)."""
    B, L, K = emissions.shape
    D = durations.shape[1]
    cumulative = torch.cat([emissions.new_zeros(B, 1, K), emissions.cumsum(1)], dim=1)   # (B, L + 1, K)
    t = torch.arange(L, device=emissions.device).view(L, 1)
    d = torch.arange(D, device=emissions.device).view(1, D)
    begin = (t - d).clamp(min=0)                                                           # (L, D)
    sums = cumulative[:, (t + 1).expand(L, D)] - cumulative[:, begin]                      # (B, L, D, K)
    scores = sums + durations.t().view(1, 1, D, K)
    return scores.masked_fill((t - d < 0).view(1, L, D, 1), float("-inf"))


class SemiMarkovCRF(nn.Module):
    """Semi-Markov CRF over ``num_tags`` labels and segments of at most ``max_duration`` positions.

    Inputs are batch-first: segment scores (B, L, D, K), or emissions (B, L, K) combined with
    the learned ``durations`` (K, D). Segmentations are lists of (start, end, label), end
    exclusive, one list per sequence. ``backend`` as :class:`varorder.torch.CRF`.
    """

    def __init__(self, num_tags: int, max_duration: int, backend: str = "auto"):
        for name, value in (("num_tags", num_tags), ("max_duration", max_duration)):
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise ParameterError(f"{name} must be a positive integer, got {value!r}", name=name, value=value)
        if backend not in BACKENDS:
            raise ParameterError(f"backend must be one of {BACKENDS}, got {backend!r}", name="backend",
                                 value=backend)
        super().__init__()
        self.num_tags, self.max_duration, self.backend = num_tags, max_duration, backend
        self.start_transitions = nn.Parameter(torch.empty(num_tags))
        self.end_transitions = nn.Parameter(torch.empty(num_tags))
        self.transitions = nn.Parameter(torch.empty(num_tags, num_tags))
        self.durations = nn.Parameter(torch.empty(num_tags, max_duration))
        for p in self.parameters():
            nn.init.uniform_(p, -0.1, 0.1)

    def segment_scores(self, inputs):
        """(B, L, D, K) segment scores: ``inputs`` itself, or built from emissions (B, L, K)."""
        if inputs.dim() == 4:
            if tuple(inputs.shape[2:]) != (self.max_duration, self.num_tags):
                raise ParameterError(f"segment scores must have shape (B, L, {self.max_duration}, {self.num_tags}), "
                                     f"got {tuple(inputs.shape)}", name="inputs", value=tuple(inputs.shape))
            return inputs
        if inputs.dim() != 3 or inputs.shape[2] != self.num_tags:
            raise ParameterError(f"inputs must be emissions (B, L, {self.num_tags}) or segment scores "
                                 f"(B, L, {self.max_duration}, {self.num_tags}), got {tuple(inputs.shape)}",
                                 name="inputs", value=tuple(inputs.shape))
        return segment_scores_from_emissions(inputs, self.durations.to(inputs.dtype))

    def _params(self, dtype):
        return (self.transitions.to(dtype), self.start_transitions.to(dtype), self.end_transitions.to(dtype))

    def log_partition(self, inputs, lengths=None):
        P = self.segment_scores(inputs)
        T, S, F = self._params(P.dtype)
        return semimarkov_log_partition(P, T, S, F, lengths=lengths, backend=self.backend)

    def score(self, inputs, segmentations):
        """s(segmentation) per sequence (B,), differentiable."""
        P = self.segment_scores(inputs)
        T, S, F = self._params(P.dtype)
        D = self.max_duration
        totals = []
        for b, segments in enumerate(segmentations):
            if not segments:
                raise ParameterError(f"segmentations[{b}] is empty", name="segmentations", value=b)
            pos, total, prev = 0, S[segments[0][2]] + F[segments[-1][2]], None
            for s, e, k in segments:
                if s != pos or not 0 < e - s <= D or not 0 <= k < self.num_tags:
                    raise ParameterError(f"segmentations[{b}] has segment {(s, e, k)}: segments must tile the "
                                         f"sequence from 0, be 1..{D} long and have labels in [0, {self.num_tags})",
                                         name="segmentations", value=(s, e, k))
                total = total + P[b, e - 1, e - s - 1, k] + (T[prev, k] if prev is not None else 0)
                prev, pos = k, e
            totals.append(total)
        return torch.stack(totals)

    def forward(self, inputs, segmentations, lengths=None, reduction: str = "sum"):
        """Log-likelihood of the gold segmentations ("none", "sum" or "mean" over sequences)."""
        if reduction not in ("none", "sum", "mean"):
            raise ParameterError(f"invalid reduction: {reduction}", name="reduction", value=reduction)
        if lengths is None:
            lengths = [segs[-1][1] if segs else 0 for segs in segmentations]
        P = self.segment_scores(inputs)
        llh = self.score(P, segmentations) - self.log_partition(P, lengths)
        return llh if reduction == "none" else (llh.sum() if reduction == "sum" else llh.mean())

    def _arrays(self, inputs, lengths):
        P = self.segment_scores(inputs)
        T, S, F = self._params(P.dtype)
        n = None if lengths is None else (lengths.cpu().numpy() if isinstance(lengths, torch.Tensor) else lengths)
        return (to_numpy(P), to_numpy(T)), dict(lengths=n, start=to_numpy(S), end=to_numpy(F))

    def decode(self, inputs, lengths=None):
        """The best segmentation of each sequence: a list of (start, end, label) per sequence."""
        with torch.no_grad():
            args, kw = self._arrays(inputs, lengths)
            return _semimarkov.viterbi(*args, **kw)[0]

    def kbest(self, inputs, k: int, lengths=None):
        """(per sequence up to k segmentations best first, scores (B, k))."""
        with torch.no_grad():
            args, kw = self._arrays(inputs, lengths)
            found, scores = _semimarkov.kbest(*args, k, **kw)
        return found, torch.from_numpy(scores)

    def sample(self, inputs, n: int = 1, lengths=None, seed=None):
        """Per sequence ``n`` exact posterior segmentations."""
        with torch.no_grad():
            args, kw = self._arrays(inputs, lengths)
            return _semimarkov.sample(*args, n, seed, **kw)

    def marginals(self, inputs, lengths=None) -> torch.Tensor:
        """p(segment of label k covering t − d … t) (B, L, D, K)."""
        with torch.no_grad():
            args, kw = self._arrays(inputs, lengths)
            return torch.from_numpy(_semimarkov.marginals(*args, **kw))

    def entropy(self, inputs, lengths=None) -> torch.Tensor:
        """Entropy (nats) of the posterior over segmentations (B,)."""
        with torch.no_grad():
            args, kw = self._arrays(inputs, lengths)
            return torch.from_numpy(_semimarkov.entropy(*args, **kw))
