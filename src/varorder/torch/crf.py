"""A linear-chain CRF layer for neural taggers, with pytorch-crf's interface.

Factorization (Lafferty, McCallum & Pereira 2001): an encoder gives emission scores
E[t, k] per token; tag sequence y of length n scores

    s(y) = start[y₁] + Σₜ E[t, yₜ] + Σₜ₌₂ⁿ T[yₜ₋₁, yₜ] + end[yₙ],   p(y | x) = exp(s(y) − log Z(x)),

with learned ``start_transitions``, ``end_transitions`` and ``transitions`` (the names and
initialisation of pytorch-crf 0.7.2, so its state dicts load). log Z and its gradient come
from the engine in one forward–backward (:func:`varorder.torch.chain_log_partition`);
decoding, marginals, k-best, sampling and entropy are the engine's exact operations.

Beyond pytorch-crf:

* ``constraints``: a tagging scheme ("BIO", "IOB1", "BIOUL", "BMES" with ``labels``) or a list of
  allowed (from, to) pairs with AllenNLP's start/end indices (``num_tags``, ``num_tags + 1``),
  as AllenNLP's ``allowed_transitions``; forbidden transitions get −inf, so training and every
  decoder respect the scheme;
* partial labels: :meth:`CRF.partial_log_likelihood` takes a set of allowed tags per token and
  returns the marginal likelihood log Σ_{y consistent} p(y | x) (Tsuboi et al. 2008);
* sub-word masks: a ``mask`` that is not a prefix of each row (first sub-token tagging) selects
  the tokens that are tagged; the chain runs over the selected tokens in order, transitions
  joining consecutive selected tokens, and results are per selected token.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from varorder import chain as _chain
from varorder.errors import ParameterError
from varorder.torch import native as _native
from varorder.torch._convert import to_numpy
from varorder.torch.functions import BACKENDS, chain_log_partition

__all__ = ["CRF", "allowed_transitions", "is_transition_allowed", "SCHEMES"]

SCHEMES = ("BIO", "IOB1", "BIOUL", "BMES")
REDUCTIONS = ("none", "sum", "mean", "token_mean")


def is_transition_allowed(scheme: str, from_tag: str, from_entity: str, to_tag: str, to_entity: str) -> bool:
    """Whether tag ``to_tag``-``to_entity`` may follow ``from_tag``-``from_entity`` in ``scheme``
    (AllenNLP's rules; "START" and "END" stand for the sequence's boundaries)."""
    if to_tag == "START" or from_tag == "END":
        return False
    same = from_entity == to_entity
    if scheme == "BIO":
        if from_tag == "START":
            return to_tag in ("O", "B")
        if to_tag == "END":
            return from_tag in ("O", "B", "I")
        return to_tag in ("O", "B") or (to_tag == "I" and from_tag in ("B", "I") and same)
    if scheme == "IOB1":
        if from_tag == "START":
            return to_tag in ("O", "I")
        if to_tag == "END":
            return from_tag in ("O", "B", "I")
        return to_tag in ("O", "I") or (to_tag == "B" and from_tag in ("B", "I") and same)
    if scheme == "BIOUL":
        if from_tag == "START":
            return to_tag in ("O", "B", "U")
        if to_tag == "END":
            return from_tag in ("O", "L", "U")
        return (from_tag in ("O", "L", "U") and to_tag in ("O", "B", "U")) or (
            from_tag in ("B", "I") and to_tag in ("I", "L") and same)
    if scheme == "BMES":
        if from_tag == "START":
            return to_tag in ("B", "S")
        if to_tag == "END":
            return from_tag in ("E", "S")
        return (to_tag in ("B", "S") and from_tag in ("E", "S")) or (
            to_tag in ("M", "E") and from_tag in ("B", "M") and same)
    raise ParameterError(f"constraints must be one of {SCHEMES} or a list of pairs, got {scheme!r}",
                         name="constraints", value=scheme)


def allowed_transitions(scheme: str, labels) -> list[tuple[int, int]]:
    """The allowed (from, to) label-id pairs of ``scheme`` over ``labels`` (a list of label
    strings or a dict id → label), with ``len(labels)`` as the start and ``len(labels) + 1``
    as the end index — AllenNLP's ``allowed_transitions``."""
    if scheme not in SCHEMES:
        raise ParameterError(f"constraints must be one of {SCHEMES}, got {scheme!r}", name="constraints",
                             value=scheme)
    names = dict(labels) if isinstance(labels, dict) else dict(enumerate(labels))
    n = len(names)
    items = list(names.items()) + [(n, "START"), (n + 1, "END")]

    def split(label: str):
        if label in ("START", "END", "O"):
            return label, ""
        return label[0], label[1:]

    pairs = []
    for i, from_label in items:
        from_tag, from_entity = split(from_label)
        for j, to_label in items:
            to_tag, to_entity = split(to_label)
            if is_transition_allowed(scheme, from_tag, from_entity, to_tag, to_entity):
                pairs.append((i, j))
    return pairs


class CRF(nn.Module):
    """Linear-chain CRF over ``num_tags`` tags (pytorch-crf's ``torchcrf.CRF`` interface).

    Parameters
    ----------
    num_tags : number of tags K.
    batch_first : inputs are (B, L, ...) when True, (L, B, ...) otherwise (pytorch-crf's default).
    constraints : None, a scheme name in :data:`SCHEMES` (needs ``labels``), or a list of allowed
        (from, to) pairs where index K is the start and K + 1 the end.
    labels : the tag strings (list, or dict id → tag) for a scheme.
    backend : "auto" (the engine for CPU tensors, the torch recursion for CUDA), "engine" or "native".

    Examples
    --------
    >>> import torch
    >>> from varorder.torch import CRF
    >>> _ = torch.manual_seed(0)
    >>> crf = CRF(3, batch_first=True)
    >>> emissions = torch.randn(2, 4, 3)
    >>> tags = torch.tensor([[0, 1, 2, 1], [2, 2, 0, 0]])
    >>> mask = torch.tensor([[1, 1, 1, 1], [1, 1, 0, 0]], dtype=torch.bool)
    >>> llh = crf(emissions, tags, mask)          # sum of log-likelihoods, differentiable
    >>> llh.backward()
    >>> crf.decode(emissions, mask)
    [[0, 1, 2, 2], [0, 2]]
    """

    def __init__(self, num_tags: int, batch_first: bool = False, constraints=None, labels=None,
                 backend: str = "auto"):
        if not isinstance(num_tags, int) or isinstance(num_tags, bool) or num_tags <= 0:
            raise ParameterError(f"invalid number of tags (num_tags): {num_tags}", name="num_tags", value=num_tags)
        if backend not in BACKENDS:
            raise ParameterError(f"backend must be one of {BACKENDS}, got {backend!r}", name="backend",
                                 value=backend)
        super().__init__()
        self.num_tags = num_tags
        self.batch_first = batch_first
        self.backend = backend
        self.start_transitions = nn.Parameter(torch.empty(num_tags))
        self.end_transitions = nn.Parameter(torch.empty(num_tags))
        self.transitions = nn.Parameter(torch.empty(num_tags, num_tags))
        self.reset_parameters()
        bias = torch.zeros(num_tags + 2, num_tags + 2)
        if constraints is not None:
            if isinstance(constraints, str):
                if labels is None:
                    raise ParameterError(f"constraints={constraints!r} needs the tag strings: pass labels=",
                                         name="labels", value=None)
                if len(labels) != num_tags:
                    raise ParameterError(f"labels must name {num_tags} tags, got {len(labels)}", name="labels",
                                         value=len(labels))
                pairs = allowed_transitions(constraints, labels)
            else:
                pairs = [(int(i), int(j)) for i, j in constraints]
            bias.fill_(float("-inf"))
            for i, j in pairs:
                if not (0 <= i < num_tags + 2 and 0 <= j < num_tags + 2):
                    raise ParameterError(f"constraint pair ({i}, {j}) is outside [0, {num_tags + 2})",
                                         name="constraints", value=(i, j))
                bias[i, j] = 0.0
        self.register_buffer("constraint_bias", bias, persistent=False)
        self.constrained = constraints is not None

    def reset_parameters(self) -> None:
        """Uniform in [−0.1, 0.1], as pytorch-crf."""
        nn.init.uniform_(self.start_transitions, -0.1, 0.1)
        nn.init.uniform_(self.end_transitions, -0.1, 0.1)
        nn.init.uniform_(self.transitions, -0.1, 0.1)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(num_tags={self.num_tags})"

    # -- potentials and inputs ---------------------------------------------------------------

    def potentials(self):
        """(transitions (K, K), start (K,), end (K,)) with the constraints applied (−inf where forbidden)."""
        K = self.num_tags
        if not self.constrained:
            return self.transitions, self.start_transitions, self.end_transitions
        bias = self.constraint_bias.to(self.transitions.dtype)
        return (self.transitions + bias[:K, :K], self.start_transitions + bias[K, :K],
                self.end_transitions + bias[:K, K + 1])

    def _inputs(self, emissions, mask, tags=None, tag_sets=None):
        """Batch-first, compacted inputs: (emissions (B, L', K), lengths (B,) ≥ 1, empty (B,) bool,
        positions (B, L') of the selected tokens or None, tags (B, L') or None, tag sets or None)."""
        if emissions.dim() != 3:
            raise ParameterError(f"emissions must have dimension of 3, got {emissions.dim()}", name="emissions",
                                 value=tuple(emissions.shape))
        if emissions.size(2) != self.num_tags:
            raise ParameterError(f"expected last dimension of emissions is {self.num_tags}, got {emissions.size(2)}",
                                 name="emissions", value=tuple(emissions.shape))
        if not self.batch_first:
            emissions = emissions.transpose(0, 1)
            mask = None if mask is None else mask.transpose(0, 1)
            tags = None if tags is None else tags.transpose(0, 1)
            tag_sets = None if tag_sets is None else tag_sets.transpose(0, 1)
        B, L, K = emissions.shape
        if tags is not None and tuple(tags.shape) != (B, L):
            raise ParameterError(f"the first two dimensions of emissions and tags must match, got "
                                 f"{(B, L)} and {tuple(tags.shape)}", name="tags", value=tuple(tags.shape))
        if tag_sets is not None and tuple(tag_sets.shape[:2]) != (B, L):
            raise ParameterError(f"tag_sets must have first dimensions {(B, L)}, got {tuple(tag_sets.shape)}",
                                 name="tag_sets", value=tuple(tag_sets.shape))
        if mask is None:
            lengths = torch.full((B,), L, dtype=torch.long)
            return emissions, lengths, torch.zeros(B, dtype=torch.bool), None, tags, tag_sets
        if tuple(mask.shape) != (B, L):
            raise ParameterError(f"the first two dimensions of emissions and mask must match, got "
                                 f"{(B, L)} and {tuple(mask.shape)}", name="mask", value=tuple(mask.shape))
        mask = mask.to(torch.bool)
        counts = mask.sum(1)
        prefix = torch.arange(L, device=mask.device).unsqueeze(0) < counts.unsqueeze(1)
        empty = (counts == 0).cpu()
        lengths = counts.clamp(min=1).cpu()
        if bool((mask == prefix).all()):
            return emissions, lengths, empty, None, tags, tag_sets
        # sub-word mask: the selected tokens of each row, in order, moved to the front
        width = max(1, int(counts.max()))
        positions = torch.sort((~mask).to(torch.int8), dim=1, stable=True).indices[:, :width]
        emissions = emissions.gather(1, positions.unsqueeze(2).expand(B, width, K))
        if tags is not None:
            tags = tags.gather(1, positions)
        if tag_sets is not None:
            tag_sets = tag_sets.gather(1, positions.unsqueeze(2).expand(B, width, tag_sets.shape[2])) \
                if tag_sets.dim() == 3 else tag_sets.gather(1, positions)
        return emissions, lengths, empty, positions, tags, tag_sets

    def _backend_for(self, emissions) -> str:
        if self.backend == "auto":
            return "native" if emissions.is_cuda else "engine"
        return self.backend

    def _log_partition(self, emissions, lengths, allowed=None):
        T, S, F = self.potentials()
        return chain_log_partition(emissions, T.to(emissions.dtype), S.to(emissions.dtype), F.to(emissions.dtype),
                                   lengths=lengths.numpy(), allowed=allowed, backend=self._backend_for(emissions))

    def _score(self, emissions, tags, lengths):
        T, S, F = (p.to(emissions.dtype) for p in self.potentials())
        B, L, K = emissions.shape
        if bool(((tags < 0) | (tags >= K)).any()):
            raise ParameterError(f"tags must lie in [0, {K})", name="tags", value=None)
        n = lengths.to(emissions.device)
        valid = torch.arange(L, device=emissions.device).unsqueeze(0) < n.unsqueeze(1)
        zero = emissions.new_zeros(())
        emit = torch.where(valid, emissions.gather(2, tags.unsqueeze(2)).squeeze(2), zero).sum(1)
        trans = torch.where(valid[:, 1:], T[tags[:, :-1], tags[:, 1:]], zero).sum(1)
        rows = torch.arange(B, device=emissions.device)
        return S[tags[:, 0]] + emit + trans + F[tags[rows, n - 1]]

    @staticmethod
    def _reduce(llh, reduction, lengths, empty):
        llh = torch.where(empty.to(llh.device), llh.new_zeros(()), llh)
        if reduction == "none":
            return llh
        if reduction == "sum":
            return llh.sum()
        if reduction == "mean":
            return llh.mean()
        tokens = torch.where(empty, torch.zeros_like(lengths), lengths).sum()
        return llh.sum() / tokens.to(llh.dtype)

    # -- training ----------------------------------------------------------------------------

    def forward(self, emissions, tags, mask=None, reduction: str = "sum"):
        """Log-likelihood log p(tags | emissions) per sequence, reduced by ``reduction``
        ("none", "sum", "mean" over sequences, "token_mean" over tagged tokens)."""
        if reduction not in REDUCTIONS:
            raise ParameterError(f"invalid reduction: {reduction}", name="reduction", value=reduction)
        if mask is not None and mask.dtype != torch.bool:
            mask = mask.to(torch.bool)
        emissions, lengths, empty, _, tags, _ = self._inputs(emissions, mask, tags=tags.long())
        llh = self._score(emissions, tags, lengths) - self._log_partition(emissions, lengths)
        return self._reduce(llh, reduction, lengths, empty)

    def partial_log_likelihood(self, emissions, tag_sets, mask=None, reduction: str = "sum"):
        """Marginal log-likelihood of partial labels: log Σ_{y ∈ sets} p(y | emissions).

        ``tag_sets``: a bool tensor (..., K) of the tags allowed at each token, or a long tensor
        of tags with −1 where any tag is allowed. A token whose set is empty makes the
        sequence impossible (−inf)."""
        if reduction not in REDUCTIONS:
            raise ParameterError(f"invalid reduction: {reduction}", name="reduction", value=reduction)
        emissions, lengths, empty, _, _, sets = self._inputs(emissions, mask, tag_sets=tag_sets)
        if sets.dtype != torch.bool:
            if sets.dim() != 2:
                raise ParameterError("tag_sets must be bool (..., K) or long tags with -1 for unknown",
                                     name="tag_sets", value=tuple(sets.shape))
            sets = sets.long()
            known = sets >= 0
            sets = torch.where(known.unsqueeze(2), nn.functional.one_hot(sets.clamp(min=0), self.num_tags).bool(),
                               torch.ones_like(known).unsqueeze(2).expand(-1, -1, self.num_tags))
        constrained = self._log_partition(emissions, lengths, allowed=sets.cpu().numpy())
        llh = constrained - self._log_partition(emissions, lengths)
        return self._reduce(llh, reduction, lengths, empty)

    # -- inference ---------------------------------------------------------------------------

    def _arrays(self, emissions, lengths):
        T, S, F = self.potentials()
        return to_numpy(emissions), to_numpy(T), to_numpy(S), to_numpy(F), lengths.numpy()

    def decode(self, emissions, mask=None) -> list[list[int]]:
        """The best tag sequence of each sequence (Viterbi), one list per sequence (per selected
        token under a sub-word mask)."""
        with torch.no_grad():
            emissions, lengths, empty, _, _, _ = self._inputs(emissions, mask)
            if self._backend_for(emissions) == "native":
                T, S, F = self.potentials()
                paths, _ = _native.chain_viterbi(emissions, T.to(emissions.dtype), S.to(emissions.dtype),
                                                 F.to(emissions.dtype), lengths=lengths.numpy())
                paths = paths.cpu().numpy()
            else:
                paths, _ = _chain.viterbi(*self._arrays(emissions, lengths))
        return [[] if empty[b] else paths[b, :int(lengths[b])].tolist() for b in range(paths.shape[0])]

    def kbest(self, emissions, k: int, mask=None):
        """The k best tag sequences: (one list of up to k tag lists per sequence, best first;
        scores (B, k) with −inf past the number of paths)."""
        with torch.no_grad():
            out, lengths, empty, _, _, _ = self._inputs(emissions, mask)
            paths, scores = _chain.kbest(*self._arrays(out, lengths), k=k)
        found = [[] if empty[b] else [paths[b, r, :int(lengths[b])].tolist() for r in range(k)
                                      if scores[b, r] > -np.inf] for b in range(paths.shape[0])]
        return found, torch.from_numpy(scores).to(device=emissions.device, dtype=emissions.dtype)

    def sample(self, emissions, n: int = 1, mask=None, seed=None) -> list[list[list[int]]]:
        """n exact samples from p(y | emissions) per sequence (forward filtering, backward
        sampling; ``seed`` makes them reproducible)."""
        with torch.no_grad():
            emissions, lengths, empty, _, _, _ = self._inputs(emissions, mask)
            draws = _chain.sample(*self._arrays(emissions, lengths), n=n, seed=seed)
        return [[] if empty[b] else [draws[b, s, :int(lengths[b])].tolist() for s in range(n)]
                for b in range(draws.shape[0])]

    def marginals(self, emissions, mask=None) -> torch.Tensor:
        """p(yₜ = k | emissions) in the layout of ``emissions`` (zero at unselected tokens)."""
        with torch.no_grad():
            out, lengths, empty, positions, _, _ = self._inputs(emissions, mask)
            if self._backend_for(out) == "native":
                T, S, F = self.potentials()
                node, _, _ = _native.chain_marginals(out, T.to(out.dtype), S.to(out.dtype), F.to(out.dtype),
                                                     lengths=lengths.numpy())
            else:
                node = torch.from_numpy(_chain.marginals(*self._arrays(out, lengths))[0]).to(out.device)
            node = node.to(emissions.dtype)
            node[empty.to(node.device)] = 0
            if positions is not None:
                B, L = (emissions.shape[0], emissions.shape[1]) if self.batch_first else \
                    (emissions.shape[1], emissions.shape[0])
                full = node.new_zeros(B, L, self.num_tags)
                valid = torch.arange(node.shape[1], device=node.device).unsqueeze(0) < lengths.to(node.device).unsqueeze(1)
                full.scatter_(1, positions.unsqueeze(2).expand_as(node),
                              torch.where(valid.unsqueeze(2), node, node.new_zeros(())))
                node = full
            return node if self.batch_first else node.transpose(0, 1)

    def entropy(self, emissions, mask=None) -> torch.Tensor:
        """Entropy (nats) of p(y | emissions) per sequence (B,) (0 for a sequence with no selected token)."""
        with torch.no_grad():
            out, lengths, empty, _, _, _ = self._inputs(emissions, mask)
            h = _chain.entropy(*self._arrays(out, lengths))
        h = torch.from_numpy(h).to(device=emissions.device, dtype=emissions.dtype)
        return torch.where(empty.to(h.device), h.new_zeros(()), h)
