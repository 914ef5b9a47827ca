"""Tensor ↔ array conversion shared by the Functions: the engine computes in float64 on the
CPU; results go back in the caller's dtype and device."""

from __future__ import annotations

import numpy as np
import torch

from varorder.errors import ParameterError

__all__ = ["to_numpy", "to_tensor", "as_lengths", "check_float"]


def to_numpy(tensor):
    """float64 NumPy copy (or view) of a tensor; None stays None."""
    if tensor is None:
        return None
    return tensor.detach().to(device="cpu", dtype=torch.float64).numpy()


def to_tensor(array, like: torch.Tensor) -> torch.Tensor:
    """An array as a tensor of ``like``'s dtype and device."""
    return torch.from_numpy(np.ascontiguousarray(array)).to(device=like.device, dtype=like.dtype)


def as_lengths(lengths, batch: int, length: int):
    """(B,) int64 NumPy lengths in [1, L], or None for all L; a ParameterError naming the argument."""
    if lengths is None:
        return None
    if isinstance(lengths, torch.Tensor):
        if lengths.dtype.is_floating_point or lengths.dtype == torch.bool:
            raise ParameterError(f"lengths must hold integers, got dtype {lengths.dtype}", name="lengths", value=lengths.dtype)
        lengths = lengths.detach().cpu().numpy()
    n = np.asarray(lengths)
    if n.shape != (batch,):
        raise ParameterError(f"lengths must have shape ({batch},), got {n.shape}", name="lengths", value=n.shape)
    n = n.astype(np.int64)
    bad = (n < 1) | (n > length)
    if bad.any():
        b = int(np.flatnonzero(bad)[0])
        raise ParameterError(f"lengths[{b}] = {n[b]} is outside [1, {length}]", name="lengths", value=int(n[b]))
    return n


def check_float(name: str, tensor) -> None:
    if tensor is not None and tensor.dtype not in (torch.float32, torch.float64):
        raise ParameterError(f"{name} must be a float32 or float64 tensor, got {tensor.dtype}", name=name, value=tensor.dtype)
