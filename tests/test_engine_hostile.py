"""Engine entry points on hostile arguments: values near float64's range, wrong dtypes,
bad seeds. Each ends in a ValueError naming the argument or in finite, correct numbers —
never NaN, never another exception type."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from varorder import chain, lattice

E = np.zeros((2, 3, 2))
T = np.zeros((2, 2))


@settings(max_examples=80, deadline=None)
@given(scale=st.floats(min_value=0, max_value=1e308, allow_nan=False), sign=st.sampled_from([-1.0, 1.0]),
       where=st.sampled_from(["emissions", "transitions"]))
def test_large_potentials_give_numbers_or_a_named_error(scale, sign, where):
    emissions, transitions = E.copy(), T.copy()
    (emissions if where == "emissions" else transitions).flat[0] = sign * scale
    try:
        logz = chain.log_partition(emissions, transitions)
        node, _ = chain.marginals(emissions, transitions, edges=False)
    except ValueError as exc:
        assert where in str(exc) and "overflow" in str(exc)
        return
    assert np.isfinite(logz).all() and np.isfinite(node).all()
    np.testing.assert_allclose(node.sum(axis=2), 1.0, rtol=1e-9)


@pytest.mark.parametrize("call, match", [
    (lambda: chain.log_partition(E, T, lengths=[True, True]), "lengths must hold integers"),
    (lambda: chain.log_partition(E, T, lengths=["3", "3"]), "lengths must hold integers"),
    (lambda: chain.sample(E, T, seed="x"), "seed must be"),
    (lambda: chain.sample(E, T, seed=-3), "seed must be non-negative"),
    (lambda: chain.sample(E, T, seed=True), "seed must be"),
    (lambda: chain.path_score(E, T, np.zeros((2, 3))), "paths must hold integers"),
    (lambda: chain.path_score(E, T, np.zeros((2, 2), dtype=int)), r"paths must have shape \(2, 3\)"),
    (lambda: lattice.Lattice([0, 1], [0], [1], [0], [1e308]), "arc_weight .* overflow"),
    (lambda: lattice.sample(lattice.Lattice([0, 1], [0], [1], [0], [0.5]), seed=1.5), "seed must be"),
])
def test_bad_arguments_are_named(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_seed_accepts_generators_and_numpy_ints():
    a = chain.sample(E, T, n=5, seed=np.int64(7))
    b = chain.sample(E, T, n=5, seed=np.random.default_rng(7))
    np.testing.assert_array_equal(a, b)
