"""Torch-native chain recursions, for tensors on a GPU (or anywhere the engine is not wanted).

Factorization as in :mod:`varorder.chain`: for sequence b of length n a label path scores
s(y) = start[y₁] + Σₜ E[b, t, yₜ] + Σₜ₌₂ⁿ T[yₜ₋₁, yₜ] + end[yₙ], T shared (K, K) or per
sequence (B, K, K).

The recursions are the engine's, written as batched log-semiring matrix–vector products
over the whole batch, sequential over positions (Rabiner 1989; Lafferty, McCallum & Pereira
2001): the forward αₜ = logsumexp_i(αₜ₋₁[i] + T[i, ·]) + Eₜ, the backward βₜ likewise, and
the marginals p(yₜ = j) = exp(αₜ[j] + βₜ[j] − log Z),
p(yₜ = i, yₜ₊₁ = j) = exp(αₜ[i] + T[i, j] + Eₜ₊₁[j] + βₜ₊₁[j] − log Z). Sequences shorter
than L keep their last row (a ``where`` per step), so one batch holds ragged lengths. As in
:mod:`varorder.torch.functions`, the backward of :func:`chain_log_partition` is the
marginals (an explicit backward recursion, not autograd through the loop: exact, and
free of the NaN that autograd through logsumexp gives on rows of −inf). Viterbi is the
max-plus forward with back-pointers and a backtrack on the device.

The CPU engine is this module's oracle: ``tests/test_torch.py`` checks log Z, marginals
and Viterbi against it to 1e-10 in float64 on CPU tensors; ``benchmarks/devices/torch_gpu.py``
runs the same checks on CUDA.
"""

from __future__ import annotations

import numpy as np
import torch
from torch.autograd.function import once_differentiable

from varorder.errors import ParameterError

__all__ = ["chain_log_partition", "chain_marginals", "chain_viterbi", "semimarkov_log_partition", "semimarkov_marginals"]

# positions per chunk of the edge-marginal sum: bounds the (B, chunk, K, K) temporary
_EDGE_CHUNK_ELEMENTS = 1 << 22


def _check_finite(name, tensor):
    if tensor is None:
        return
    if torch.isnan(tensor).any() or torch.isposinf(tensor).any():
        raise ParameterError(f"{name} holds NaN or +inf (only -inf, a hard zero, is allowed)", name=name)


def _prepare(emissions, transitions, start, end, lengths, allowed):
    B, L, K = emissions.shape
    for name, value in (("emissions", emissions), ("transitions", transitions), ("start", start), ("end", end)):
        _check_finite(name, value)
    if transitions.shape not in ((K, K), (B, K, K)):
        raise ParameterError(f"transitions must have shape ({K}, {K}) or ({B}, {K}, {K}), got "
                             f"{tuple(transitions.shape)}", name="transitions", value=tuple(transitions.shape))
    T = transitions if transitions.dim() == 3 else transitions.unsqueeze(0)
    S = emissions.new_zeros(K) if start is None else start
    F = emissions.new_zeros(K) if end is None else end
    if lengths is None:
        n = torch.full((B,), L, dtype=torch.long, device=emissions.device)
    else:
        n = torch.as_tensor(np.asarray(lengths), dtype=torch.long, device=emissions.device)
    E = emissions
    if allowed is not None:
        mask = torch.as_tensor(np.asarray(allowed), dtype=torch.bool, device=emissions.device)
        E = E.masked_fill(~mask, float("-inf"))
    return E, T, S, F, n


def _alphas(E, T, S, n):
    B, L, K = E.shape
    alphas = E.new_empty(B, L, K)
    a = E[:, 0] + S
    alphas[:, 0] = a
    for t in range(1, L):
        step = torch.logsumexp(a.unsqueeze(2) + T, dim=1) + E[:, t]
        a = torch.where((t < n).unsqueeze(1), step, a)
        alphas[:, t] = a
    return alphas


def _betas(E, T, F, n):
    B, L, K = E.shape
    betas = E.new_empty(B, L, K)
    b = F.expand(B, K)
    betas[:, L - 1] = b
    for t in range(L - 2, -1, -1):
        step = torch.logsumexp(T + (E[:, t + 1] + b).unsqueeze(1), dim=2)
        b = torch.where((t + 1 < n).unsqueeze(1), step, b)
        betas[:, t] = b
    return betas


def _log_z(alphas, F, n):
    B = alphas.shape[0]
    last = alphas[torch.arange(B, device=alphas.device), n - 1]
    return torch.logsumexp(last + F, dim=1)


def _marginals(E, T, S, F, n, edges: bool):
    """(log Z (B,), node (B, L, K), position-summed edge (B, K, K) or None)."""
    B, L, K = E.shape
    alphas = _alphas(E, T, S, n)
    logz = _log_z(alphas, F, n)
    betas = _betas(E, T, F, n)
    safe = torch.where(torch.isfinite(logz), logz, torch.zeros_like(logz)).view(B, 1, 1)
    positions = torch.arange(L, device=E.device)
    inside = (positions.unsqueeze(0) < n.unsqueeze(1)).unsqueeze(2)
    node = torch.where(inside, torch.exp(alphas + betas - safe), torch.zeros_like(alphas))
    if not edges:
        return logz, node, None
    edge = E.new_zeros(B, K, K)
    chunk = max(1, _EDGE_CHUNK_ELEMENTS // max(1, B * K * K))
    for lo in range(0, L - 1, chunk):
        hi = min(L - 1, lo + chunk)
        a = alphas[:, lo:hi].unsqueeze(3)                                  # (B, c, K, 1)
        right = (E[:, lo + 1:hi + 1] + betas[:, lo + 1:hi + 1]).unsqueeze(2)  # (B, c, 1, K)
        joint = torch.exp(a + T.unsqueeze(1) + right - safe.unsqueeze(1))
        valid = (positions[lo + 1:hi + 1].unsqueeze(0) < n.unsqueeze(1)).view(B, hi - lo, 1, 1)
        edge += torch.where(valid, joint, torch.zeros_like(joint)).sum(dim=1)
    return logz, node, edge


def _save_parts(ctx, main, edge, first, last, transitions, start, end) -> None:
    ctx.save_for_backward(main, edge, first, last)
    ctx.shared = transitions.dim() == 2
    ctx.has_start, ctx.has_end = start is not None, end is not None


def _chain_like_backward(ctx, grad):
    """(grad main, grad transitions, grad start, grad end) = the incoming gradient times the marginals."""
    main, edge, first, last = ctx.saved_tensors
    g = grad.view(-1, 1, 1)
    grad_t = (g * edge).sum(0) if ctx.shared else g * edge
    grad_s = (g[:, 0] * first).sum(0) if ctx.has_start else None
    grad_f = (g[:, 0] * last).sum(0) if ctx.has_end else None
    return grad.view((-1,) + (1,) * (main.dim() - 1)) * main, grad_t, grad_s, grad_f


class _NativeChainLogPartition(torch.autograd.Function):
    @staticmethod
    def forward(ctx, emissions, transitions, start, end, lengths, allowed):
        E, T, S, F, n = _prepare(emissions, transitions, start, end, lengths, allowed)
        logz, node, edge = _marginals(E, T, S, F, n, edges=True)
        last = node[torch.arange(node.shape[0], device=node.device), n - 1]
        _save_parts(ctx, node, edge, node[:, 0], last, transitions, start, end)
        return logz

    @staticmethod
    @once_differentiable
    def backward(ctx, grad):
        return (*_chain_like_backward(ctx, grad), None, None)


def chain_log_partition(emissions, transitions, start=None, end=None, lengths=None, allowed=None):
    """log Z (B,) by the torch recursion on the tensors' device; backward = the exact marginals.
    Arguments as :func:`varorder.torch.chain_log_partition` (lengths and allowed as arrays)."""
    if not torch.is_grad_enabled() or not any(
            t is not None and t.requires_grad for t in (emissions, transitions, start, end)):
        E, T, S, F, n = _prepare(emissions, transitions, start, end, lengths, allowed)
        return _log_z(_alphas(E, T, S, n), F, n)
    return _NativeChainLogPartition.apply(emissions, transitions, start, end, lengths, allowed)


def chain_marginals(emissions, transitions, start=None, end=None, lengths=None, allowed=None, edges: bool = False):
    """(node marginals (B, L, K) zero past each length, position-summed edge marginals
    (B, K, K) or None, log Z (B,)) by the torch recursion."""
    with torch.no_grad():
        E, T, S, F, n = _prepare(emissions, transitions, start, end, lengths, allowed)
        logz, node, edge = _marginals(E, T, S, F, n, edges)
    return node, edge, logz


def chain_viterbi(emissions, transitions, start=None, end=None, lengths=None, allowed=None):
    """(best paths (B, L) int64 with −1 past each length, scores (B,)): max-plus forward with
    back-pointers, backtrack on the device. A sequence without a finite path gets −inf and
    whatever labels the back-pointers give (check the score)."""
    with torch.no_grad():
        E, T, S, F, n = _prepare(emissions, transitions, start, end, lengths, allowed)
        B, L, K = E.shape
        pointers = torch.zeros(B, L, K, dtype=torch.long, device=E.device)
        a = E[:, 0] + S
        for t in range(1, L):
            best, arg = (a.unsqueeze(2) + T).max(dim=1)
            live = (t < n).unsqueeze(1)
            a = torch.where(live, best + E[:, t], a)
            pointers[:, t] = arg
        scores, y = (a + F).max(dim=1)
        paths = torch.full((B, L), -1, dtype=torch.long, device=E.device)
        rows = torch.arange(B, device=E.device)
        for t in range(L - 1, -1, -1):
            live = t < n  # past its length a sequence keeps its final label, the argmax above
            paths[:, t] = torch.where(live, y, paths[:, t])
            if t > 0:
                y = torch.where(live, pointers[rows, t, y], y)
        return paths, scores


# -- semi-Markov chains ------------------------------------------------------------------------
#
# Segments of label k and length d + 1 ending at t score P[b, t, d, k] (varorder.semimarkov's
# call shape). With Pm = P where the segment lies inside the sequence (−inf elsewhere):
#   into[s, k]  = start[k] if s = 0 else logsumexp_i(alpha[s − 1, i] + T[i, k])   (prefixes before s, next label k)
#   alpha[t, k] = logsumexp_d(into[t − d, k] + Pm[t, d, k])                        (prefixes ending at t with label k)
#   out[t, k]   = end[k] if t = n − 1 else logsumexp_j(T[k, j] + after[t + 1, j])  (suffixes after a k-segment ending at t)
#   after[s, j] = logsumexp_d(Pm[s + d, d, j] + out[s + d, j])                     (suffixes from s, first label j)
# p(segment t, d, k) = exp(into[t − d, k] + Pm[t, d, k] + out[t, k] − log Z);
# E[transitions i → j] = Σ_t exp(alpha[t, i] + T[i, j] + after[t + 1, j] − log Z).


def _semimarkov_prepare(segment_scores, transitions, start, end, lengths):
    B, L, D, K = segment_scores.shape
    for name, value in (("segment_scores", segment_scores), ("transitions", transitions), ("start", start),
                        ("end", end)):
        _check_finite(name, value)
    if transitions.shape not in ((K, K), (B, K, K)):
        raise ParameterError(f"transitions must have shape ({K}, {K}) or ({B}, {K}, {K}), got "
                             f"{tuple(transitions.shape)}", name="transitions", value=tuple(transitions.shape))
    device = segment_scores.device
    T = transitions if transitions.dim() == 3 else transitions.unsqueeze(0)
    S = segment_scores.new_zeros(K) if start is None else start
    F = segment_scores.new_zeros(K) if end is None else end
    n = torch.full((B,), L, dtype=torch.long, device=device) if lengths is None else \
        torch.as_tensor(np.asarray(lengths), dtype=torch.long, device=device)
    t = torch.arange(L, device=device).view(1, L, 1)
    d = torch.arange(D, device=device).view(1, 1, D)
    inside = (t - d >= 0) & (t < n.view(B, 1, 1))
    Pm = segment_scores.masked_fill(~inside.unsqueeze(3), float("-inf"))
    return Pm, T, S, F, n


def _semimarkov_marginals(Pm, T, S, F, n):
    B, L, D, K = Pm.shape
    neg = Pm.new_full((B, K), float("-inf"))
    into = [S.expand(B, K)]
    alpha = []
    for t in range(L):
        terms = torch.stack([into[t - d] + Pm[:, t, d] if t - d >= 0 else neg for d in range(D)], dim=1)
        alpha.append(torch.logsumexp(terms, dim=1))
        into.append(torch.logsumexp(alpha[t].unsqueeze(2) + T, dim=1))
    alpha_t = torch.stack(alpha, dim=1)                                     # (B, L, K)
    rows = torch.arange(B, device=Pm.device)
    logz = torch.logsumexp(alpha_t[rows, n - 1] + F, dim=1)
    out = [neg] * L
    after = [neg] * (L + 1)
    for t in range(L - 1, -1, -1):
        onward = torch.logsumexp(T + after[t + 1].unsqueeze(1), dim=2)
        out[t] = torch.where((t == n - 1).unsqueeze(1), F.expand(B, K), onward)
        after[t] = torch.logsumexp(torch.stack([Pm[:, t + d, d] + out[t + d] if t + d < L else neg
                                                for d in range(D)], dim=1), dim=1)
    safe = torch.where(torch.isfinite(logz), logz, torch.zeros_like(logz)).view(B, 1)
    into_t = torch.stack(into[:L], dim=1)                                   # (B, L, K)
    out_t = torch.stack(out, dim=1)
    after_t = torch.stack(after[1:], dim=1)                                 # after[t + 1] at index t
    seg = torch.zeros_like(Pm)
    for d in range(D):
        if d >= L:
            break
        value = into_t[:, :L - d] + Pm[:, d:, d] + out_t[:, d:] - safe.unsqueeze(1)
        seg[:, d:, d] = torch.exp(value)
    joint = torch.exp(alpha_t.unsqueeze(3) + T.unsqueeze(1) + after_t.unsqueeze(2) - safe.view(B, 1, 1, 1))
    edge = joint.sum(dim=1)
    return logz, seg, edge


class _NativeSemiMarkovLogPartition(torch.autograd.Function):
    @staticmethod
    def forward(ctx, segment_scores, transitions, start, end, lengths):
        Pm, T, S, F, n = _semimarkov_prepare(segment_scores, transitions, start, end, lengths)
        logz, seg, edge = _semimarkov_marginals(Pm, T, S, F, n)
        B, L, D, _ = seg.shape
        first = sum(seg[:, t, t] for t in range(min(L, D)))
        last = seg[torch.arange(B, device=seg.device), n - 1].sum(1)
        _save_parts(ctx, seg, edge, first, last, transitions, start, end)
        return logz

    @staticmethod
    @once_differentiable
    def backward(ctx, grad):
        return (*_chain_like_backward(ctx, grad), None)


def semimarkov_log_partition(segment_scores, transitions, start=None, end=None, lengths=None):
    """log Z (B,) of semi-Markov chains by the torch recursion on the tensors' device; backward =
    the exact segment / transition / start / end marginals. Arguments as
    :func:`varorder.torch.semimarkov_log_partition`."""
    if not torch.is_grad_enabled() or not any(
            t is not None and t.requires_grad for t in (segment_scores, transitions, start, end)):
        with torch.no_grad():
            return _semimarkov_marginals(*_semimarkov_prepare(segment_scores, transitions, start, end, lengths))[0]
    return _NativeSemiMarkovLogPartition.apply(segment_scores, transitions, start, end, lengths)


def semimarkov_marginals(segment_scores, transitions, start=None, end=None, lengths=None):
    """(segment marginals (B, L, D, K), expected transitions (B, K, K), log Z (B,)) by the torch recursion."""
    with torch.no_grad():
        logz, seg, edge = _semimarkov_marginals(*_semimarkov_prepare(segment_scores, transitions, start, end,
                                                                     lengths))
    return seg, edge, logz
