"""Structured distributions in torch-struct's style (Rush 2020, "Torch-Struct: Deep Structured
Prediction Library"): an object built from log-potentials with ``partition``, ``marginals``,
``argmax``, ``sample``, ``topk``, ``entropy`` and ``log_prob``, every one of them an exact
engine operation over the same structure.

* :class:`ChainCRF` — linear chains, s(y) = start[y₁] + Σₜ E[t, yₜ] + Σₜ T[yₜ₋₁, yₜ] + end[yₙ];
* :class:`DependencyCRF` — projective dependency trees, s(tree) = Σ_{h → m} arc_scores[h, m]
  (Eisner's chart as a hypergraph, :mod:`varorder.torch.dependency`).

``partition`` and ``log_prob`` are differentiable (the gradient of the partition is the
marginals, computed by the engine's forward–backward / inside–outside); the others are
decoded results without gradients. Differences from torch-struct: structures come back as
label or head indices (−1 padded), not as one-hot part tensors; ``sample`` takes a seed.
"""

from __future__ import annotations

from functools import cached_property

import numpy as np
import torch

from varorder import chain as _chain
from varorder import hypergraph as _hypergraph
from varorder.torch import dependency as _dependency
from varorder.torch._convert import as_lengths, to_numpy
from varorder.torch.functions import chain_log_partition

__all__ = ["ChainCRF", "DependencyCRF"]


class ChainCRF:
    """The distribution over label paths of a batch of dense chains.

    emissions (B, L, K), transitions (K, K) or (B, K, K), start / end (K,) or None,
    lengths (B,) or None. ``backend`` as :func:`varorder.torch.chain_log_partition`.

    Examples
    --------
    >>> import torch
    >>> from varorder.torch.distributions import ChainCRF
    >>> dist = ChainCRF(torch.zeros(1, 3, 2), torch.zeros(2, 2))
    >>> float(dist.partition.exp())        # 2³ paths of score 0
    8.0
    >>> dist.argmax.shape, dist.topk(3)[0].shape, dist.sample(5, seed=0).shape
    (torch.Size([1, 3]), torch.Size([1, 3, 3]), torch.Size([5, 1, 3]))
    """

    def __init__(self, emissions, transitions, start=None, end=None, lengths=None, backend: str = "auto"):
        self.emissions, self.transitions, self.start, self.end = emissions, transitions, start, end
        B, L, _ = emissions.shape
        self.lengths = as_lengths(lengths, B, L)
        self.backend = backend

    def _arrays(self):
        return (to_numpy(self.emissions), to_numpy(self.transitions), to_numpy(self.start), to_numpy(self.end),
                self.lengths)

    def _tensor(self, array, dtype=None):
        return torch.from_numpy(np.ascontiguousarray(array)).to(device=self.emissions.device,
                                                               dtype=dtype or self.emissions.dtype)

    @cached_property
    def partition(self) -> torch.Tensor:
        """log Z (B,), differentiable."""
        return chain_log_partition(self.emissions, self.transitions, self.start, self.end, lengths=self.lengths,
                                   backend=self.backend)

    @cached_property
    def marginals(self) -> torch.Tensor:
        """p(yₜ = k) (B, L, K), zero past each length."""
        return self._tensor(_chain.marginals(*self._arrays())[0])

    @cached_property
    def edge_marginals(self) -> torch.Tensor:
        """p(yₜ = i, yₜ₊₁ = j) (B, L − 1, K, K)."""
        return self._tensor(_chain.marginals(*self._arrays(), edges=True)[1])

    @cached_property
    def argmax(self) -> torch.Tensor:
        """The best path (B, L) long, −1 past each length."""
        return self._tensor(_chain.viterbi(*self._arrays())[0], torch.long)

    @cached_property
    def max(self) -> torch.Tensor:
        """The best path's score (B,)."""
        return self._tensor(_chain.viterbi(*self._arrays())[1])

    @cached_property
    def entropy(self) -> torch.Tensor:
        """Entropy in nats (B,)."""
        return self._tensor(_chain.entropy(*self._arrays()))

    def topk(self, k: int):
        """(paths (B, k, L) long, best first, −1 padded; scores (B, k))."""
        paths, scores = _chain.kbest(*self._arrays(), k=k)
        return self._tensor(paths, torch.long), self._tensor(scores)

    def sample(self, n: int = 1, seed=None) -> torch.Tensor:
        """n exact samples (n, B, L) long, −1 past each length."""
        draws = _chain.sample(*self._arrays(), n=n, seed=seed)
        return self._tensor(draws.transpose(1, 0, 2), torch.long)

    def log_prob(self, paths) -> torch.Tensor:
        """log p(paths) (B,) for label paths (B, L) (entries past each length ignored), differentiable."""
        E = self.emissions
        B, L, K = E.shape
        n = torch.as_tensor(np.full(B, L) if self.lengths is None else self.lengths, device=E.device)
        y = paths.long().clamp(min=0)
        valid = torch.arange(L, device=E.device).unsqueeze(0) < n.unsqueeze(1)
        zero = E.new_zeros(())
        score = torch.where(valid, E.gather(2, y.unsqueeze(2)).squeeze(2), zero).sum(1)
        rows = torch.arange(B, device=E.device)
        T = self.transitions
        trans = T[y[:, :-1], y[:, 1:]] if T.dim() == 2 else T[rows.unsqueeze(1), y[:, :-1], y[:, 1:]]
        score = score + torch.where(valid[:, 1:], trans, zero).sum(1)
        if self.start is not None:
            score = score + self.start[y[:, 0]]
        if self.end is not None:
            score = score + self.end[y[rows, n - 1]]
        return score - self.partition


class DependencyCRF:
    """The distribution over projective dependency trees (one root word) of a batch of
    sentences: ``arc_scores[b, h, m]`` scores h → m, h = 0 the root, words 1..n; lengths (B,)."""

    def __init__(self, arc_scores, lengths=None):
        self.arc_scores = arc_scores
        self.lengths = lengths

    @cached_property
    def partition(self) -> torch.Tensor:
        """log Z (B,), differentiable."""
        return _dependency.tree_log_partition(self.arc_scores, self.lengths)

    @cached_property
    def marginals(self) -> torch.Tensor:
        """p(h → m) (B, L + 1, L + 1)."""
        return _dependency.tree_marginals(self.arc_scores, self.lengths)

    @cached_property
    def argmax(self) -> torch.Tensor:
        """The best tree's heads (B, L) long (head of word m at m − 1; 0 = root; −1 padded)."""
        return self._heads(_dependency.tree_argmax(self.arc_scores, self.lengths)[0])

    @cached_property
    def entropy(self) -> torch.Tensor:
        """Entropy in nats (B,)."""
        graph, edge_arc, _ = _dependency._inputs(self.arc_scores, self.lengths)
        weights = _dependency._edge_weights(self.arc_scores, edge_arc).detach().to("cpu", torch.float64).numpy()
        h = _hypergraph.entropy(graph.with_weights(weights))
        return torch.from_numpy(h).to(device=self.arc_scores.device, dtype=self.arc_scores.dtype)

    def _heads(self, arrays):
        L = self.arc_scores.shape[1] - 1
        out = torch.full((len(arrays), L), -1, dtype=torch.long)
        for b, heads in enumerate(arrays):
            out[b, :len(heads)] = torch.from_numpy(heads)
        return out.to(self.arc_scores.device)

    def topk(self, k: int):
        """(heads (B, k, L) long, best first, −1 padded; scores (B, k))."""
        found, scores = _dependency.tree_kbest(self.arc_scores, k, self.lengths)
        L = self.arc_scores.shape[1] - 1
        out = torch.full((len(found), k, L), -1, dtype=torch.long)
        for b, trees in enumerate(found):
            for r, heads in enumerate(trees):
                out[b, r, :len(heads)] = torch.from_numpy(heads)
        return out, scores

    def sample(self, n: int = 1, seed=None) -> torch.Tensor:
        """n exact samples of heads (n, B, L) long."""
        draws = _dependency.tree_sample(self.arc_scores, n, self.lengths, seed)
        return torch.stack([self._heads([d[s] for d in draws]) for s in range(n)])

    def log_prob(self, heads) -> torch.Tensor:
        """log p(tree) (B,) for head tensors (B, L) (−1 past each length), differentiable."""
        S = self.arc_scores
        B, width, _ = S.shape
        heads = heads.long()
        rows = torch.arange(B, device=S.device).unsqueeze(1)
        words = torch.arange(1, width, device=S.device).unsqueeze(0)
        picked = S[rows, heads.clamp(min=0), words]                            # S[b, head of word m, m]
        score = torch.where(heads >= 0, picked, S.new_zeros(())).sum(1)
        return score - self.partition
