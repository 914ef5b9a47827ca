"""First-order optimisers for minimisation objectives, updating parameters in place.

* :class:`SGD` — plain stochastic gradient descent with a 1/(1 + t·decay) step schedule.
* :class:`AdaGrad` — diagonal AdaGrad (Duchi, Hazan & Singer, "Adaptive Subgradient
  Methods for Online Learning and Stochastic Optimization", JMLR 2011):

      G ← G + g²,   θ ← θ − η · g / (δ + √G)

  With ``l1 > 0`` the step is the composite-mirror-descent (proximal) AdaGrad update of
  the same paper (their eq. for the ℓ1-regularised diagonal case): after the gradient step
  each coordinate is soft-thresholded by η·λ₁ / (δ + √Gᵢ), so ℓ1 produces exact zeros.
  :meth:`AdaGrad.prox_half_step` is the same step for any separable or tree penalty: the
  gradient half-step and the per-coordinate thresholds λ·ηᵢ·aᵢ that the caller's proximal
  operator applies (the structured log-linear LM's ``optimizer="adagrad"``).
* :func:`fista` — FISTA (Beck & Teboulle, "A Fast Iterative Shrinkage-Thresholding
  Algorithm for Linear Inverse Problems", SIAM J. Imaging Sciences 2009) with backtracking
  on the step, step growth between iterations and function-value restart (O'Donoghue &
  Candès, "Adaptive Restart for Accelerated Gradient Schemes", 2015).
* :func:`lbfgs` — L-BFGS, and OWL-QN for an ℓ1 term (Andrew & Gao 2007).

All optimisers take the *gradient of the smooth part* of the objective; ℓ1 is handled
by the optimiser (proximal step), never by adding a subgradient.
"""

from __future__ import annotations

import math
from typing import Callable, NamedTuple

import numba as nb
import numpy as np
import varorder._numba_start  # noqa: E402,F401,I001  (Numba's cache saves locked across processes)

from varorder.engine.semiring import compiled
from varorder.errors import ParameterError

__all__ = ["SGD", "AdaGrad", "fista", "FistaObjective", "fista_loop", "make_fista_loop", "move_terms", "soft_threshold", "lbfgs", "dot", "axpy"]


def soft_threshold(values: np.ndarray, threshold) -> None:
    """In place: values ← sign(values) · max(|values| − threshold, 0) (threshold scalar or array)."""
    np.copyto(values, np.sign(values) * np.maximum(np.abs(values) - threshold, 0.0))


def _check_shapes(params: np.ndarray, grad: np.ndarray) -> None:
    if not isinstance(params, np.ndarray) or params.dtype.kind != "f":
        raise ParameterError("params must be a floating-point numpy array (updated in place)", name='params', value=params)
    if grad.shape != params.shape:
        raise ParameterError(f"grad shape {grad.shape} does not match params shape {params.shape}", name='grad', value=grad)


class SGD:
    """θ ← θ − η_t · g with η_t = step_size / (1 + decay · t); optional proximal ℓ1 (threshold η_t·l1)."""

    def __init__(self, step_size: float = 0.1, decay: float = 0.0, l1: float = 0.0):
        if step_size <= 0:
            raise ParameterError(f"step_size must be > 0, got {step_size}", name='step_size', value=step_size)
        if decay < 0 or l1 < 0:
            raise ParameterError(f"decay and l1 must be >= 0, got decay={decay}, l1={l1}", name='decay', value=decay)
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
            raise ParameterError(f"step_size must be > 0, got {step_size}", name='step_size', value=step_size)
        if delta < 0 or l1 < 0:
            raise ParameterError(f"delta and l1 must be >= 0, got delta={delta}, l1={l1}", name='delta', value=delta)
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
            raise ParameterError(f"this AdaGrad tracks shape {self.sum_squared_grad.shape}, got {params.shape}", name='params', value=params)
        self.sum_squared_grad += grad * grad
        scale = self.step_size / (self.delta + np.sqrt(self.sum_squared_grad))
        params -= scale * grad
        if self.l1 > 0:
            soft_threshold(params, scale * self.l1)
        self.steps_taken += 1

    def prox_half_step(self, params: np.ndarray, grad: np.ndarray, out: np.ndarray, thresholds: np.ndarray,
                       lam: float, weights: np.ndarray, positive: bool) -> None:
        """The gradient half of a proximal AdaGrad step for a penalty λ Σ aᵢ·(group or coordinate i):
        ``out`` ← θ − ηᵢ·g (clipped at 0 when ``positive``), ``thresholds`` ← λ·ηᵢ·aᵢ with
        ηᵢ = η / (δ + √Gᵢ), for the caller's proximal operator to apply; ``grad`` is zeroed.
        Without ℓ1 of its own (``l1`` = 0): the penalty is the caller's."""
        if self.sum_squared_grad is None:
            self.sum_squared_grad = np.zeros(params.shape)
        _adagrad_prox_half_step(params, grad, self.sum_squared_grad, float(self.step_size), float(self.delta),
                                float(lam), weights, bool(positive), out, thresholds)
        self.steps_taken += 1

    def _sparse_arguments(self, name: str, params: np.ndarray, indices, values):
        """Checked flat (indices, values) of a sparse step; creates the accumulator on first use."""
        if self.l1 > 0:
            raise ParameterError(f"{name} does not support l1 (the proximal step touches every coordinate)", name='l1', value=self.l1)
        if not isinstance(params, np.ndarray) or params.dtype.kind != "f" or not params.flags.c_contiguous:
            raise ParameterError("params must be a C-contiguous floating-point numpy array (updated in place)", name='params', value=params)
        indices = np.ascontiguousarray(indices, dtype=np.int64).ravel()
        values = np.ascontiguousarray(values, dtype=np.float64).ravel()
        if indices.shape != values.shape:
            raise ParameterError(f"indices and values must have equal length, got {indices.shape} and {values.shape}", name='indices', value=indices)
        if indices.size and (indices.min() < 0 or indices.max() >= params.size):
            raise ParameterError(f"indices must lie in [0, {params.size})", name='indices', value=indices)
        if self.sum_squared_grad is None:
            self.sum_squared_grad = np.zeros(params.shape)
        elif self.sum_squared_grad.shape != params.shape:
            raise ParameterError(f"this AdaGrad tracks shape {self.sum_squared_grad.shape}, got {params.shape}", name='params', value=params)
        return indices, values

    def step_sparse(self, params: np.ndarray, indices, values) -> None:
        """The same step for a gradient that is zero outside ``indices`` (flat; repeats add).

        Identical to :meth:`step` with the dense gradient (a zero coordinate leaves its
        accumulator and, without ℓ1, its parameter unchanged), at a cost in the number of
        non-zeros rather than the size of ``params`` — per-example updates of a large
        sparse feature vector.
        """
        indices, values = self._sparse_arguments("step_sparse", params, indices, values)
        unique, inverse = np.unique(indices, return_inverse=True)
        grad = np.bincount(inverse, weights=values, minlength=unique.size)
        flat_params, flat_sum = params.reshape(-1), self.sum_squared_grad.reshape(-1)
        flat_sum[unique] += grad * grad
        flat_params[unique] -= self.step_size / (self.delta + np.sqrt(flat_sum[unique])) * grad
        self.steps_taken += 1

    def step_distinct(self, params: np.ndarray, indices, values) -> None:
        """:meth:`step_sparse` for ``indices`` the caller guarantees distinct, in any order.

        Each coordinate's update is the same arithmetic as :meth:`step_sparse`'s (so the same
        bits), without sorting the indices: a per-example step costs one pass over them.
        Repeated indices would be applied one after the other (not summed first): the
        guarantee is the caller's (e.g. a gradient summed in a scratch table).
        """
        indices, values = self._sparse_arguments("step_distinct", params, indices, values)
        _adagrad_distinct(params.reshape(-1), self.sum_squared_grad.reshape(-1), indices, values,
                          float(self.step_size), float(self.delta))
        self.steps_taken += 1


@nb.njit(cache=True)
def _adagrad_prox_half_step(w, grad, squares, rate, delta, lam, weights, positive, out, thresholds):
    for i in range(len(w)):
        g = grad[i]
        squares[i] += g * g
        step = rate / (delta + np.sqrt(squares[i]))
        x = w[i] - step * g
        out[i] = x if (x > 0.0 or not positive) else 0.0
        thresholds[i] = lam * step * weights[i]
        grad[i] = 0.0


class FistaObjective(NamedTuple):
    """A composite objective f + g for the FISTA loop, as compiled hooks (``ctx`` is the
    caller's tuple of inputs and scratch, passed through unchanged):

    * ``smooth(ctx, x, grad, want_grad) -> f(x)``, writing ∇f(x) into ``grad`` when
      ``want_grad``;
    * ``prox_step(ctx, y, grad, step, z)``: z ← prox_{step·g}(y − step·grad), any constraint
      (e.g. x ≥ 0) included;
    * ``penalty(ctx, x) -> g(x)``;
    * ``terms(grad, y, z) -> (grad · (z − y), ‖z − y‖²)`` (default :func:`move_terms`).
    """

    smooth: Callable
    prox_step: Callable
    penalty: Callable
    terms: Callable = None


@nb.njit(cache=True)
def move_terms(grad, y, z):
    """(grad · (z − y), ‖z − y‖²), summed in index order (the backtracking test's terms)."""
    linear, quadratic = 0.0, 0.0
    for i in range(y.shape[0]):
        move = z[i] - y[i]
        linear += grad[i] * move
        quadratic += move * move
    return linear, quadratic


@nb.njit(cache=True)
def _momentum_step(z, x, y, coef):
    """y ← z + coef·(z − x), x ← z."""
    for i in range(z.shape[0]):
        y[i] = z[i] + coef * (z[i] - x[i])
        x[i] = z[i]


def make_fista_loop(objective: FistaObjective):
    """The FISTA iterations over ``objective``'s hooks (see :func:`fista`), compiled:
    ``loop(ctx, x0, step, max_iterations, tol, stop_after, min_iterations, history)`` returns
    (x, the number of objectives written to ``history``, final step, converged). Its
    ``py_func`` runs the same iterations over Python hooks (:func:`fista`)."""
    smooth, prox_step, penalty, terms = objective
    if terms is None:
        terms = move_terms

    # not cached (closure factory): see varorder.engine.semiring; a caller's cached kernel
    # that calls the loop carries its code
    def loop(ctx, x0, step, max_iterations, tol, stop_after, min_iterations, history):
        n = x0.shape[0]
        empty = np.empty(0)
        x = x0.copy()
        objective = smooth(ctx, x, empty, False) + penalty(ctx, x)
        y = x.copy()
        z = np.empty(n)
        grad = np.empty(n)
        momentum = 1.0
        history[0] = objective
        h = 1
        small = 0
        converged = False
        for _ in range(max_iterations):
            f_y = smooth(ctx, y, grad, True)
            while True:
                prox_step(ctx, y, grad, step, z)
                f_z = smooth(ctx, z, empty, False)
                linear, quadratic = terms(grad, y, z)
                if f_z <= f_y + linear + quadratic / (2.0 * step) + 1e-13 * abs(f_y):
                    break
                step *= 0.5
            objective_z = f_z + penalty(ctx, z)
            if objective_z > objective:  # momentum overshot: restart from x (a plain step from x cannot rise)
                if momentum == 1.0 and np.array_equal(y, x):
                    converged = True  # a plain prox-gradient step from x rises: stationary to rounding
                    break
                y[:] = x
                momentum = 1.0
                continue
            momentum_next = (1.0 + math.sqrt(1.0 + 4.0 * momentum * momentum)) / 2.0
            _momentum_step(z, x, y, (momentum - 1.0) / momentum_next)
            decrease = objective - objective_z
            objective = objective_z
            momentum = momentum_next
            history[h] = objective
            h += 1
            step *= 1.25
            small = small + 1 if decrease <= tol * abs(objective) else 0
            if small >= stop_after and h > min_iterations:
                converged = True
                break
        return x, h, step, converged

    return nb.njit(loop)


def fista_loop(objective: FistaObjective):
    """The compiled FISTA loop of ``objective`` (built once per process and objective; see
    :func:`make_fista_loop`)."""
    return compiled(make_fista_loop, objective)


def _py_smooth(ctx, x, grad, want_grad):
    if not want_grad:
        return ctx[0](x)
    f, g = ctx[1](x)
    grad[:] = g
    return f


def _py_prox_step(ctx, y, grad, step, z):
    z[:] = ctx[2](y, grad, step)


def _py_penalty(ctx, x):
    return ctx[3](x)


def _py_terms(grad, y, z):
    move = z - y
    return float(grad @ move), float(move @ move)


_PY_OBJECTIVE = FistaObjective(_py_smooth, _py_prox_step, _py_penalty, _py_terms)


def fista(value, value_and_grad, prox_step, penalty, x0: np.ndarray, step: float, max_iterations: int,
          tol: float = 0.0, stop_after: int = 3, min_iterations: int = 20):
    """Minimise f(x) + g(x), f smooth, g with a proximal operator, by FISTA.

    ``value(x)`` and ``value_and_grad(x)`` give f; ``prox_step(point, grad, step)`` is
    prox_{step·g}(point − step·grad) (any constraint, e.g. x ≥ 0, included); ``penalty(x)`` is g.
    Each iteration backtracks the step (halving) until the quadratic upper bound of f holds at
    the prox point, then lets it grow by 1.25 for the next; momentum restarts from x whenever
    the objective would rise, so every accepted iterate lowers it. Stops after
    ``max_iterations``, or once the relative decrease was at most ``tol`` ``stop_after`` times
    running after ``min_iterations`` objectives, or when a plain prox-gradient step from x rises
    (stationary to rounding). Returns (x, objectives per accepted iterate, final step, converged).

    The iterations are :func:`make_fista_loop`'s, run over these Python callables; an
    objective whose parts are compiled hooks runs them compiled (:func:`fista_loop`).
    """
    history = np.empty(max_iterations + 1)
    x, h, step, converged = make_fista_loop(_PY_OBJECTIVE).py_func(
        (value, value_and_grad, prox_step, penalty), x0, step, max_iterations, tol, stop_after, min_iterations,
        history)
    return x, history[:h].tolist(), step, converged


@nb.njit(cache=True)
def _adagrad_distinct(params, sum_squared, indices, values, step_size, delta):
    for k in range(indices.shape[0]):
        i = indices[k]
        g = values[k]
        sum_squared[i] += g * g
        params[i] -= step_size / (delta + np.sqrt(sum_squared[i])) * g


@nb.njit(cache=True)
def _pseudo_gradient_kernel(x, g, c1, out):
    for i in range(x.size):
        if x[i] > 0:
            out[i] = g[i] + c1
        elif x[i] < 0:
            out[i] = g[i] - c1
        elif g[i] + c1 < 0:
            out[i] = g[i] + c1
        elif g[i] - c1 > 0:
            out[i] = g[i] - c1
        else:
            out[i] = 0.0


# Single-threaded Numba vector kernels rather than BLAS: a multithreaded BLAS level-1 call on a
# busy machine waits for its slowest thread and was measured 10x slower than one core.
@nb.njit(cache=True)
def dot(a, b) -> float:
    """a · b (single-threaded)."""
    total = 0.0
    for i in range(a.size):
        total += a[i] * b[i]
    return total


@nb.njit(cache=True)
def _axpy_kernel(x, y, a):
    for i in range(x.size):
        y[i] += a * x[i]


def axpy(x, y, a):
    """y += a·x in place."""
    _axpy_kernel(x, y, float(a))


@nb.njit(cache=True)
def _constrain_direction(direction, pg, x, orthant):
    """OWL-QN: zero direction components that disagree in sign with −pg; set the orthant ξ."""
    for i in range(direction.size):
        if direction[i] * pg[i] >= 0.0:
            direction[i] = 0.0
        if x[i] > 0:
            orthant[i] = 1.0
        elif x[i] < 0:
            orthant[i] = -1.0
        else:
            orthant[i] = -1.0 if pg[i] > 0 else (1.0 if pg[i] < 0 else 0.0)


@nb.njit(cache=True)
def _trial_point(x, direction, step, orthant, project, out):
    """out = x + step·direction (projected onto the orthant when project); returns (‖out‖₁, pg-free)."""
    l1 = 0.0
    for i in range(x.size):
        v = x[i] + step * direction[i]
        if project and v * orthant[i] <= 0.0:
            v = 0.0
        out[i] = v
        l1 += abs(v)
    return l1


@nb.njit(cache=True)
def _dot_of_difference(a, b, c):
    """a · (b − c) without a temporary."""
    total = 0.0
    for i in range(a.size):
        total += a[i] * (b[i] - c[i])
    return total


def _pseudo_gradient(x: np.ndarray, g: np.ndarray, c1: float) -> np.ndarray:
    """Minimum-norm subgradient of f(x) + c1‖x‖₁ (Andrew & Gao 2007, eq. 4)."""
    if c1 == 0:
        return g
    out = np.empty_like(g)
    _pseudo_gradient_kernel(x, g, float(c1), out)
    return out


def lbfgs(objective, x0: np.ndarray, c1: float = 0.0, max_iterations: int = 100, memory: int = 6,
          delta: float = 1e-5, period: int = 10, gtol: float = 1e-8, max_backtracks: int = 40,
          callback=None) -> tuple[np.ndarray, dict]:
    """Minimise f(x) + c1‖x‖₁ with L-BFGS (c1 = 0) or OWL-QN (c1 > 0).

    ``objective(x) -> (f, grad)`` is the smooth part. OWL-QN (Andrew & Gao, "Scalable
    Training of L1-Regularized Log-Linear Models", ICML 2007): the quasi-Newton direction
    is computed from the pseudo-gradient, sign-constrained to it, and each trial point
    is projected onto the current orthant; the curvature pairs use the smooth gradient.
    The line search is backtracking with the Armijo condition (halving). Stops after
    ``max_iterations`` iterations, when ‖pseudo-gradient‖ ≤ gtol·max(1, ‖x‖), or — as
    CRFsuite does — when the objective improved by less than ``delta`` (relative) over the
    last ``period`` iterations. ``callback(iteration, x, f, pseudo_grad_norm)`` runs after
    each iteration; returning True stops.

    Returns (x, info) with info = {"iterations", "evaluations", "objective", "reason"}.
    """
    x = np.array(x0, dtype=np.float64)
    f_smooth, g = objective(x)
    f = f_smooth + c1 * np.abs(x).sum()
    evaluations = 1
    s_hist: list[np.ndarray] = []
    y_hist: list[np.ndarray] = []
    rho_hist: list[float] = []
    past = [f]
    q_buffer = np.empty_like(x)
    orthant_buffer = np.empty_like(x) if c1 > 0 else None
    spare = np.empty_like(x)  # the trial-point buffer; x and it swap roles each iteration
    reason = "max_iterations"
    iteration = 0

    def pg_norm_after(x, g):
        pg = _pseudo_gradient(x, g, c1)
        return float(np.sqrt(dot(pg, pg)))

    for iteration in range(1, max_iterations + 1):
        pg = _pseudo_gradient(x, g, c1)
        pg_norm = float(np.sqrt(dot(pg, pg)))
        if pg_norm <= gtol * max(1.0, float(np.sqrt(dot(x, x)))):
            reason = "gradient"
            iteration -= 1
            break
        # two-loop recursion, in place (BLAS axpy/dot: no full-length temporaries)
        q = np.negative(pg, out=q_buffer)
        alphas = []
        for s, y, rho in zip(reversed(s_hist), reversed(y_hist), reversed(rho_hist)):
            a = rho * dot(s, q)
            axpy(y, q, a=-a)
            alphas.append(a)
        if s_hist:
            q *= dot(s_hist[-1], y_hist[-1]) / dot(y_hist[-1], y_hist[-1])
        for (s, y, rho), a in zip(zip(s_hist, y_hist, rho_hist), reversed(alphas)):
            b = rho * dot(y, q)
            axpy(s, q, a=a - b)
        direction = q
        orthant = orthant_buffer if c1 > 0 else x  # x: an unused placeholder when not projecting
        if c1 > 0:
            _constrain_direction(direction, pg, x, orthant)
        slope = dot(direction, pg)
        if slope >= 0:  # not a descent direction (lost curvature): restart from steepest descent
            s_hist.clear(), y_hist.clear(), rho_hist.clear()
            direction = -pg
            slope = -pg_norm ** 2
        step = 1.0 / pg_norm if not s_hist else 1.0
        x_new = spare
        for _ in range(max_backtracks):
            l1 = _trial_point(x, direction, step, orthant, c1 > 0, x_new)
            f_smooth_new, g_new = objective(x_new)
            evaluations += 1
            f_new = f_smooth_new + c1 * l1
            if f_new <= f + 1e-4 * _dot_of_difference(pg, x_new, x):
                break
            step *= 0.5
        else:
            reason = "line_search"
            break
        # Reuse the oldest curvature pair's arrays once the memory is full (no fresh 8·n-byte allocations).
        if len(s_hist) >= memory:
            s, y = s_hist.pop(0), y_hist.pop(0)
            rho_hist.pop(0)
        else:
            s, y = np.empty_like(x), np.empty_like(x)
        np.subtract(x_new, x, out=s)
        np.subtract(g_new, g, out=y)
        sy = dot(s, y)
        if sy > 1e-12:
            s_hist.append(s), y_hist.append(y), rho_hist.append(1.0 / sy)
        spare = x
        x, f, g = x_new, f_new, g_new
        past.append(f)
        if callback is not None and callback(iteration, x, f, pg_norm_after(x, g)):
            reason = "callback"
            break
        if len(past) > period and (past[-1 - period] - f) / max(abs(f), 1e-300) < delta:
            reason = "delta"
            break
    return x, {"iterations": iteration, "evaluations": evaluations, "objective": f, "reason": reason}
