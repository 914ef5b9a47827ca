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
