"""Log-partition functions with exact gradients: the engine's forward–backward as
:class:`torch.autograd.Function` s.

For an exponential family over structures y with score s(y; θ) = Σ_parts θ_part, the
gradient of log Z(θ) is the vector of part marginals, ∂ log Z / ∂θ_part = p(part ∈ y)
(Wainwright & Jordan 2008, Prop. 3.1; Eisner 2016, "Inside-outside and forward-backward
algorithms are just backprop"). Each Function here therefore computes log Z *and* the
marginals in one call of the engine (forward–backward on chains, lattices; inside–outside
on hypergraphs) and its backward is one multiplication of those marginals by the incoming
gradient — exact gradients for the price of one forward–backward, with no autograd graph
over the recursion.

Structures and their factorizations:

* chains (:mod:`varorder.chain`): s(y) = start[y₁] + Σₜ E[b, t, yₜ] + Σₜ T[yₜ₋₁, yₜ] + end[yₙ]
  with per-sequence lengths, an optional ``allowed`` mask and shared (K, K) or per-sequence
  (B, K, K) transitions; gradients: node marginals (emissions), position-summed edge
  marginals (transitions), first / last-position marginals (start / end);
* lattices (:mod:`varorder.lattice`): s(path) = Σ arc weights + final[last node];
  gradients: arc marginals, final marginals;
* hypergraphs (:mod:`varorder.hypergraph`): s(d) = Σ edge weights of derivation d;
  gradients: edge marginals (expected uses), one log Z per graph of the batch;
* semi-Markov chains (:mod:`varorder.semimarkov`): s = start[y₁] + Σᵢ P[b, eᵢ − 1, eᵢ − sᵢ − 1, yᵢ]
  + Σᵢ T[yᵢ₋₁, yᵢ] + end[yₘ] over labelled segments [sᵢ, eᵢ); gradients: segment marginals
  (P), expected transitions (T), first / last segment-label marginals (start / end).

The engine computes in float64 on the CPU; float32 inputs are widened for the computation
and the results narrowed back, CUDA tensors are copied (use ``backend="native"`` or
``"auto"`` for the torch-native chain recursion of :mod:`varorder.torch.native` instead).
Second derivatives are not provided (``once_differentiable``).
"""

from __future__ import annotations

import numpy as np
import torch
from torch.autograd.function import once_differentiable

from varorder import chain as _chain
from varorder import semimarkov as _semimarkov
from varorder.engine import lattice as _engine_lattice
from varorder.errors import ParameterError
from varorder.hypergraph import Hypergraph, marginals as _hypergraph_marginals
from varorder.lattice import Lattice
from varorder.torch._convert import as_lengths, check_float, to_numpy, to_tensor
from varorder.torch import native as _native

__all__ = ["chain_log_partition", "lattice_log_partition", "hypergraph_log_partition", "semimarkov_log_partition",
           "BACKENDS"]

BACKENDS = ("auto", "engine", "native")


def _check_backend(backend: str) -> str:
    if backend not in BACKENDS:
        raise ParameterError(f"backend must be one of {BACKENDS}, got {backend!r}", name="backend", value=backend)
    return backend


def _as_allowed(allowed, shape):
    if allowed is None:
        return None
    if isinstance(allowed, torch.Tensor):
        allowed = allowed.detach().cpu().numpy()
    allowed = np.asarray(allowed)
    if allowed.shape != tuple(shape):
        raise ParameterError(f"allowed must have shape {tuple(shape)}, got {allowed.shape}", name="allowed",
                             value=allowed.shape)
    return allowed.astype(bool)


def _save_parts(ctx, main, edge, first, last, transitions, start, end) -> None:
    """Keep the marginals a chain-like backward needs: of the main potentials (any shape with
    the batch first), of the transitions (B, K, K), of the first and last labels (B, K)."""
    ctx.parts = (main, edge, first, last)
    ctx.shared = transitions.dim() == 2
    ctx.has_start, ctx.has_end = start is not None, end is not None


def _chain_like_backward(ctx, grad):
    """(grad main, grad transitions, grad start, grad end) = the incoming gradient times the marginals."""
    g = grad.detach().to("cpu", torch.float64).numpy()
    main, edge, first, last = ctx.parts
    out_main = to_tensor(g.reshape((-1,) + (1,) * (main.ndim - 1)) * main, grad)
    out_t = to_tensor(np.tensordot(g, edge, axes=1) if ctx.shared else g[:, None, None] * edge, grad)
    out_s = to_tensor(g @ first, grad) if ctx.has_start else None
    out_f = to_tensor(g @ last, grad) if ctx.has_end else None
    return out_main, out_t, out_s, out_f


class _ChainLogPartition(torch.autograd.Function):
    @staticmethod
    def forward(ctx, emissions, transitions, start, end, lengths, allowed):
        node, edge, logz = _chain.marginals(to_numpy(emissions), to_numpy(transitions), to_numpy(start),
                                            to_numpy(end), lengths, allowed, edges="sum", return_log_z=True)
        B, L, _ = node.shape
        last = np.full(B, L - 1) if lengths is None else lengths - 1
        _save_parts(ctx, node, edge, node[:, 0], node[np.arange(B), last], transitions, start, end)
        return to_tensor(logz, emissions)

    @staticmethod
    @once_differentiable
    def backward(ctx, grad):
        return (*_chain_like_backward(ctx, grad), None, None)


def chain_log_partition(emissions, transitions, start=None, end=None, lengths=None, allowed=None,
                        backend: str = "auto") -> torch.Tensor:
    """log Z per sequence (B,) of the dense chain, differentiable in every tensor argument.

    emissions (B, L, K), transitions (K, K) shared or (B, K, K) per sequence, start and end
    (K,) or None, lengths (B,) ints in [1, L] or None, allowed (B, L, K) bool or None (a
    False entry forbids that label there: the constrained log Z of partial labels).
    ``backend``: "engine" (the CPU engine, float64), "native" (the torch recursion of
    :mod:`varorder.torch.native`, any device) or "auto" (native for CUDA tensors).
    """
    backend = _check_backend(backend)
    for name, value in (("emissions", emissions), ("transitions", transitions), ("start", start), ("end", end)):
        check_float(name, value)
    if emissions.dim() != 3:
        raise ParameterError(f"emissions must have shape (B, L, K), got {tuple(emissions.shape)}", name="emissions",
                             value=tuple(emissions.shape))
    B, L, K = emissions.shape
    n = as_lengths(lengths, B, L)
    mask = _as_allowed(allowed, (B, L, K))
    if backend == "native" or (backend == "auto" and emissions.is_cuda):
        return _native.chain_log_partition(emissions, transitions, start, end, n, mask)
    if not any(t is not None and t.requires_grad for t in (emissions, transitions, start, end)) \
            or not torch.is_grad_enabled():
        logz = _chain.log_partition(to_numpy(emissions), to_numpy(transitions), to_numpy(start), to_numpy(end),
                                    n, mask)
        return to_tensor(logz, emissions)
    return _ChainLogPartition.apply(emissions, transitions, start, end, n, mask)


class _LatticeLogPartition(torch.autograd.Function):
    @staticmethod
    def forward(ctx, arc_weight, final, lattice):
        lat = lattice.with_weights(to_numpy(arc_weight), to_numpy(final))
        logz, _, arc, fin = _engine_lattice.marginals_kernel(
            lat.num_nodes, lat.in_offsets, lat.in_arcs, lat.out_offsets, lat.out_arcs, lat.arc_source,
            lat.arc_target, lat.arc_weight, lat.final)
        ctx.arc, ctx.fin, ctx.has_final = arc, fin, final is not None
        return torch.tensor(float(logz), dtype=arc_weight.dtype, device=arc_weight.device)

    @staticmethod
    @once_differentiable
    def backward(ctx, grad):
        g = float(grad)
        out_f = to_tensor(g * ctx.fin, grad) if ctx.has_final else None
        return to_tensor(g * ctx.arc, grad), out_f, None


def lattice_log_partition(lattice: Lattice, arc_weight: torch.Tensor, final: torch.Tensor | None = None):
    """log Z (a 0-d tensor) of ``lattice``'s structure with arc log-weights ``arc_weight`` (A,)
    and, when given, final log-weights ``final`` (N,) (else the lattice's own); gradients are
    the arc (and final) marginals."""
    if not isinstance(lattice, Lattice):
        raise ParameterError(f"lattice must be a varorder.lattice.Lattice, got {type(lattice).__name__}",
                             name="lattice", value=type(lattice).__name__)
    check_float("arc_weight", arc_weight)
    check_float("final", final)
    return _LatticeLogPartition.apply(arc_weight, final, lattice)


class _HypergraphLogPartition(torch.autograd.Function):
    @staticmethod
    def forward(ctx, edge_weight, hypergraph):
        hg = hypergraph.with_weights(to_numpy(edge_weight))
        logz, edge, _ = _hypergraph_marginals(hg)
        ctx.edge = edge
        ctx.graph_of_edge = np.repeat(np.arange(hg.num_graphs), np.diff(hg.edge_offsets))
        return to_tensor(logz, edge_weight)

    @staticmethod
    @once_differentiable
    def backward(ctx, grad):
        g = grad.detach().to("cpu", torch.float64).numpy()
        return to_tensor(g[ctx.graph_of_edge] * ctx.edge, grad), None


def hypergraph_log_partition(hypergraph: Hypergraph, edge_weight: torch.Tensor) -> torch.Tensor:
    """log Z per graph (G,) of ``hypergraph``'s structure with edge log-weights ``edge_weight``
    (E,); gradients are the edge marginals (expected uses of each edge)."""
    if not isinstance(hypergraph, Hypergraph):
        raise ParameterError(f"hypergraph must be a varorder.hypergraph.Hypergraph, got "
                             f"{type(hypergraph).__name__}", name="hypergraph", value=type(hypergraph).__name__)
    check_float("edge_weight", edge_weight)
    return _HypergraphLogPartition.apply(edge_weight, hypergraph)


class _SemiMarkovLogPartition(torch.autograd.Function):
    @staticmethod
    def forward(ctx, segment_scores, transitions, start, end, lengths):
        args = (to_numpy(segment_scores), to_numpy(transitions))
        kw = dict(lengths=lengths, start=to_numpy(start), end=to_numpy(end))
        seg, edge = _semimarkov.marginals(*args, edges=True, **kw)
        logz = _semimarkov.log_partition(*args, **kw)
        B, L, D, _ = seg.shape
        # the first segment starts at 0 (it ends at t with length t + 1); the last ends at n − 1
        first = sum(seg[:, t, t, :] for t in range(min(L, D)))
        last = seg[np.arange(B), np.full(B, L - 1) if lengths is None else lengths - 1].sum(1)
        _save_parts(ctx, seg, edge, first, last, transitions, start, end)
        return to_tensor(logz, segment_scores)

    @staticmethod
    @once_differentiable
    def backward(ctx, grad):
        return (*_chain_like_backward(ctx, grad), None)


def semimarkov_log_partition(segment_scores, transitions, start=None, end=None, lengths=None,
                             backend: str = "auto") -> torch.Tensor:
    """log Z per sequence (B,) over labelled segmentations (:mod:`varorder.semimarkov`'s
    call shape: ``segment_scores[b, t, d, k]`` scores a segment of label k and length d + 1
    ending at t), differentiable in every tensor argument (the gradient of the segment
    scores is the segment marginals, zero where unreadable). ``backend`` as
    :func:`chain_log_partition`."""
    backend = _check_backend(backend)
    for name, value in (("segment_scores", segment_scores), ("transitions", transitions), ("start", start),
                        ("end", end)):
        check_float(name, value)
    if segment_scores.dim() != 4:
        raise ParameterError(f"segment_scores must have shape (B, L, D, K), got {tuple(segment_scores.shape)}",
                             name="segment_scores", value=tuple(segment_scores.shape))
    B, L, _, _ = segment_scores.shape
    n = as_lengths(lengths, B, L)
    if backend == "native" or (backend == "auto" and segment_scores.is_cuda):
        return _native.semimarkov_log_partition(segment_scores, transitions, start, end, n)
    if not torch.is_grad_enabled() or not any(
            t is not None and t.requires_grad for t in (segment_scores, transitions, start, end)):
        logz = _semimarkov.log_partition(to_numpy(segment_scores), to_numpy(transitions), lengths=n,
                                         start=to_numpy(start), end=to_numpy(end))
        return to_tensor(logz, segment_scores)
    return _SemiMarkovLogPartition.apply(segment_scores, transitions, start, end, n)
