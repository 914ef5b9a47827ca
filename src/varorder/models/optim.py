"""First-order optimisers for minimisation objectives, updating parameters in place.

* :class:`SGD` — plain stochastic gradient descent with a 1/(1 + t·decay) step schedule.
* :class:`AdaGrad` — diagonal AdaGrad (Duchi, Hazan & Singer, "Adaptive Subgradient
  Methods for Online Learning and Stochastic Optimization", JMLR 2011):

      G ← G + g²,   θ ← θ − η · g / (δ + √G)

  With ``l1 > 0`` the step is the composite-mirror-descent (proximal) AdaGrad update of
  the same paper (their eq. for the ℓ1-regularised diagonal case): after the gradient step
  each coordinate is soft-thresholded by η·λ₁ / (δ + √Gᵢ), so ℓ1 produces exact zeros.

All optimisers take the *gradient of the smooth part* of the objective; ℓ1 is handled
by the optimiser (proximal step), never by adding a subgradient.
"""

from __future__ import annotations

import numpy as np

__all__ = ["SGD", "AdaGrad", "soft_threshold"]


def soft_threshold(values: np.ndarray, threshold) -> None:
    """In place: values ← sign(values) · max(|values| − threshold, 0) (threshold scalar or array)."""
    np.copyto(values, np.sign(values) * np.maximum(np.abs(values) - threshold, 0.0))


def _check_shapes(params: np.ndarray, grad: np.ndarray) -> None:
    if not isinstance(params, np.ndarray) or params.dtype.kind != "f":
        raise ValueError("params must be a floating-point numpy array (updated in place)")
    if grad.shape != params.shape:
        raise ValueError(f"grad shape {grad.shape} does not match params shape {params.shape}")


class SGD:
    """θ ← θ − η_t · g with η_t = step_size / (1 + decay · t); optional proximal ℓ1 (threshold η_t·l1)."""

    def __init__(self, step_size: float = 0.1, decay: float = 0.0, l1: float = 0.0):
        if step_size <= 0:
            raise ValueError(f"step_size must be > 0, got {step_size}")
        if decay < 0 or l1 < 0:
            raise ValueError(f"decay and l1 must be >= 0, got decay={decay}, l1={l1}")
        self.step_size = step_size
        self.decay = decay
        self.l1 = l1
        self.steps_taken = 0

    def step(self, params: np.ndarray, grad: np.ndarray) -> None:
        grad = np.asarray(grad, dtype=np.float64)
        _check_shapes(params, grad)
        eta = self.step_size / (1.0 + self.decay * self.steps_taken)
        params -= eta * grad
        if self.l1 > 0:
            soft_threshold(params, eta * self.l1)
        self.steps_taken += 1


class AdaGrad:
    """Diagonal AdaGrad descent: θ ← θ − η · g / (δ + √(Σ past g²)); optional proximal ℓ1.

    The squared-gradient accumulator is created on the first :meth:`step` with the
    parameters' shape; one optimiser instance serves one parameter array.
    """

    def __init__(self, step_size: float = 0.2, delta: float = 1e-4, l1: float = 0.0):
        if step_size <= 0:
            raise ValueError(f"step_size must be > 0, got {step_size}")
        if delta < 0 or l1 < 0:
            raise ValueError(f"delta and l1 must be >= 0, got delta={delta}, l1={l1}")
        self.step_size = step_size
        self.delta = delta
        self.l1 = l1
        self.sum_squared_grad: np.ndarray | None = None
        self.steps_taken = 0

    def step(self, params: np.ndarray, grad: np.ndarray) -> None:
        grad = np.asarray(grad, dtype=np.float64)
        _check_shapes(params, grad)
        if self.sum_squared_grad is None:
            self.sum_squared_grad = np.zeros(params.shape)
        elif self.sum_squared_grad.shape != params.shape:
            raise ValueError(f"this AdaGrad tracks shape {self.sum_squared_grad.shape}, got {params.shape}")
        self.sum_squared_grad += grad * grad
        scale = self.step_size / (self.delta + np.sqrt(self.sum_squared_grad))
        params -= scale * grad
        if self.l1 > 0:
            soft_threshold(params, scale * self.l1)
        self.steps_taken += 1
