"""Optimisers: exact update formulas, convergence on a quadratic, proximal ℓ1 sparsity."""

from __future__ import annotations

import numpy as np
import pytest

from varorder.models.optim import SGD, AdaGrad, soft_threshold


def test_adagrad_matches_formula_over_steps():
    rng = np.random.default_rng(0)
    params = rng.normal(size=5)
    expected = params.copy()
    opt = AdaGrad(step_size=0.3, delta=1e-3)
    accumulated = np.zeros(5)
    for _ in range(4):
        grad = rng.normal(size=5)
        accumulated += grad**2
        expected -= 0.3 * grad / (1e-3 + np.sqrt(accumulated))
        opt.step(params, grad)
    np.testing.assert_allclose(params, expected, rtol=1e-12)


@pytest.mark.parametrize("opt", [AdaGrad(step_size=0.5), SGD(step_size=0.1, decay=0.01)])
def test_descends_to_quadratic_minimum(opt):
    rng = np.random.default_rng(1)
    scales = rng.uniform(0.5, 3.0, size=4)
    target = rng.normal(size=4)
    params = np.zeros(4)
    for _ in range(2000):
        opt.step(params, scales * (params - target))
    np.testing.assert_allclose(params, target, atol=1e-3)


def test_proximal_l1_solves_lasso_on_separable_quadratic():
    # min ½(θ − a)² + λ|θ| has the closed form soft_threshold(a, λ).
    target = np.array([2.0, 0.3, -0.05, -1.5])
    lam = 0.4
    for opt in (AdaGrad(step_size=0.5, l1=lam), SGD(step_size=0.05, l1=lam)):
        params = np.zeros(4)
        for _ in range(3000):
            opt.step(params, params - target)
        expected = target.copy()
        soft_threshold(expected, lam)
        np.testing.assert_allclose(params, expected, atol=1e-3)
        assert params[1] == 0.0 and params[2] == 0.0  # exact zeros, not just small


def test_shape_mismatch_is_rejected():
    with pytest.raises(ValueError, match="grad shape"):
        AdaGrad().step(np.zeros(3), np.zeros(4))
    with pytest.raises(ValueError, match="floating-point"):
        SGD().step(np.zeros(3, dtype=int), np.zeros(3))


def test_sparse_adagrad_step_equals_the_dense_step():
    rng = np.random.default_rng(0)
    dense, sparse = AdaGrad(step_size=0.3, delta=1e-3), AdaGrad(step_size=0.3, delta=1e-3)
    a = rng.normal(size=(4, 5))
    b = a.copy()
    for _ in range(5):
        idx = rng.integers(0, 20, size=7)  # repeats add
        val = rng.normal(size=7)
        dense.step(a, np.bincount(idx, weights=val, minlength=20).reshape(4, 5))
        sparse.step_sparse(b, idx, val)
    np.testing.assert_allclose(a, b, atol=1e-14)
    with pytest.raises(ValueError, match="indices"):
        sparse.step_sparse(b, [20], [1.0])
    with pytest.raises(ValueError, match="l1"):
        AdaGrad(l1=0.1).step_sparse(b, [0], [1.0])


def test_distinct_adagrad_step_equals_the_sparse_step_bit_for_bit():
    rng = np.random.default_rng(1)
    sparse, distinct = AdaGrad(step_size=0.2, delta=1e-4), AdaGrad(step_size=0.2, delta=1e-4)
    a = rng.normal(size=50)
    b = a.copy()
    for _ in range(6):
        idx = rng.permutation(50)[:rng.integers(1, 30)]  # distinct, in no particular order
        val = rng.normal(size=idx.size) * 10.0 ** rng.integers(-6, 2, size=idx.size)
        sparse.step_sparse(a, idx, val)
        distinct.step_distinct(b, idx, val)
        np.testing.assert_array_equal(a, b)
        np.testing.assert_array_equal(sparse.sum_squared_grad, distinct.sum_squared_grad)
    assert distinct.steps_taken == sparse.steps_taken == 6
    with pytest.raises(ValueError, match="indices"):
        distinct.step_distinct(b, [50], [1.0])
    with pytest.raises(ValueError, match="l1"):
        AdaGrad(l1=0.1).step_distinct(b, [0], [1.0])


def test_fista_reaches_the_lasso_optimum_of_a_generic_solver():
    # min ½‖Ax − b‖² + λ‖x‖₁ by FISTA against L-BFGS-B on the split x = u − v, u, v ≥ 0
    from scipy.optimize import minimize

    from varorder.models.optim import fista

    rng = np.random.default_rng(0)
    A, b, lam = rng.normal(size=(30, 12)), rng.normal(size=30), 2.0

    def value(x):
        r = A @ x - b
        return 0.5 * float(r @ r)

    def value_and_grad(x):
        r = A @ x - b
        return 0.5 * float(r @ r), A.T @ r

    def prox_step(point, grad, step):
        out = point - step * grad
        soft_threshold(out, step * lam)
        return out

    x, history, _, converged = fista(value, value_and_grad, prox_step, lambda x: lam * float(np.abs(x).sum()),
                                     np.zeros(12), 1.0, 5000, tol=1e-14)
    assert converged and (np.diff(history) <= 0).all()

    def split(z):
        u, v = z[:12], z[12:]
        r = A @ (u - v) - b
        g = A.T @ r
        return 0.5 * float(r @ r) + lam * float(z.sum()), np.concatenate([g + lam, -g + lam])

    ref = minimize(split, np.zeros(24), jac=True, method="L-BFGS-B", bounds=[(0, None)] * 24,
                   options={"ftol": 1e-15, "gtol": 1e-12, "maxiter": 10000})
    assert history[-1] == pytest.approx(ref.fun, rel=1e-9)
    np.testing.assert_allclose(x, ref.x[:12] - ref.x[12:], atol=1e-5)


def test_adagrad_prox_half_step_is_adagrads_step_with_the_thresholds_beside():
    rng = np.random.default_rng(1)
    w, weights = rng.normal(size=8), rng.uniform(0.5, 2.0, size=8)
    plain, half = AdaGrad(step_size=0.3, delta=1e-8), AdaGrad(step_size=0.3, delta=1e-8)
    expected, out, thresholds = w.copy(), np.empty(8), np.empty(8)
    for _ in range(3):
        grad = rng.normal(size=8)
        plain.step(expected, grad.copy())
        half.prox_half_step(w, grad, out, thresholds, 0.5, weights, positive=False)
        np.testing.assert_array_equal(out, expected)
        np.testing.assert_array_equal(grad, 0.0)
        np.testing.assert_allclose(thresholds, 0.5 * 0.3 / (1e-8 + np.sqrt(half.sum_squared_grad)) * weights)
        w = out.copy()
    half.prox_half_step(np.full(8, 0.1), np.full(8, 1e6), out, thresholds, 0.0, weights, positive=True)
    np.testing.assert_array_equal(out, 0.0)  # every coordinate stepped below 0 and clipped
