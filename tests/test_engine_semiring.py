"""Semirings as objects: every registered specialisation equals the generic recursion
of its structure on random inputs, and a semiring defined here (not known to the engine)
runs on chains, lattices and hypergraphs alike, checked against enumeration."""

from __future__ import annotations

import numba as nb
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from varorder import chain, hypergraph, lattice
from varorder.engine import chain as chain_engine
from varorder.engine import hypergraph as hypergraph_engine
from varorder.engine.semiring import LOG, MAX, SEMIRINGS, Semiring, resolve
from varorder.testing import oracle
from varorder.testing.strategies import chains, lattices

SETTINGS = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _same(a, b, rtol=1e-12):
    a, b = np.asarray(a, float), np.asarray(b, float)
    both_inf = np.isneginf(a) & np.isneginf(b)
    return bool(np.all(both_inf | np.isclose(a, b, rtol=rtol, atol=rtol)))


@SETTINGS
@given(chains(max_batch=5, max_len=12, max_labels=6))
def test_chain_specialisations_equal_the_generic_recursion(case):
    ci = chain_engine.prepare(case.emissions, case.transitions, **case.kwargs)
    for semiring in (LOG, MAX):
        assert chain_engine.SPECIALISED_FORWARD[semiring] is not None
        fast = chain_engine.forward_values(ci, semiring)
        generic = chain_engine.forward_values(ci, semiring, specialised=False)
        assert _same(fast, generic), (semiring.name, fast, generic)


@pytest.mark.parametrize("seed", range(4))
def test_chain_specialisations_equal_the_generic_recursion_on_larger_batches(seed):
    rng = np.random.default_rng(seed)
    B, L, K = 40, int(rng.integers(20, 200)), int(rng.integers(2, 40))
    E = rng.normal(scale=[1.0, 5.0, 40.0, 300.0][seed], size=(B, L, K))  # the last forces the log-space fallback
    T = rng.normal(size=(K, K) if seed % 2 == 0 else (B, K, K))
    T[rng.random(T.shape) < 0.1] = -np.inf
    ci = chain_engine.prepare(E, T, lengths=rng.integers(1, L + 1, size=B))
    for semiring in (LOG, MAX):
        assert _same(chain_engine.forward_values(ci, semiring),
                     chain_engine.forward_values(ci, semiring, specialised=False), rtol=1e-11)


@nb.njit(cache=True, inline="always")
def _half_plus(a, b):
    """⊕ of the log semiring at temperature 1/2: ½ log(e^{2a} + e^{2b})."""
    if a == -np.inf:
        return b
    if b == -np.inf:
        return a
    top = max(a, b)
    return top + 0.5 * np.log1p(np.exp(-2.0 * abs(a - b)))


HALF = Semiring("test-log-half", _half_plus, reduce=lambda v: float(0.5 * LOG.sum(2.0 * v)))


def _tempered(scores):
    scores = np.asarray([s for s in scores], dtype=float)
    return HALF.sum(scores) if scores.size else -np.inf


@SETTINGS
@given(chains(max_batch=2, max_len=4, max_labels=3))
def test_a_new_semiring_runs_on_chains(case):
    got = chain.forward(case.emissions, case.transitions, semiring=HALF, **case.kwargs)
    T = case.transitions
    for b in range(case.emissions.shape[0]):
        paths = oracle.chain_paths(case.emissions[b], T if T.ndim == 2 else T[b], case.start, case.end,
                                   case.lengths[b], None if case.allowed is None else case.allowed[b])
        assert _same(got[b], _tempered([s for _, s in paths]), rtol=1e-9)


@SETTINGS
@given(lattices())
def test_a_new_semiring_runs_on_lattices_and_their_hypergraphs(lat):
    want = _tempered([s for _, s in oracle.lattice_paths(lat)])
    assert _same(lattice.forward(lat, HALF), want, rtol=1e-9)
    hg = hypergraph.Hypergraph.from_lattice(lat)
    assert _same(hypergraph.inside(hg, HALF)[1], [want], rtol=1e-9)


@SETTINGS
@given(st.integers(0, 2**31 - 1))
def test_hypergraph_log_specialisation_is_registered_and_equal_to_generic(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 8))
    heads, tails, weights = [], [], []
    for v in range(n):
        for _ in range(int(rng.integers(0 if v else 1, 3))):
            heads.append(v)
            tails.append(sorted(int(t) for t in rng.integers(0, v, size=int(rng.integers(0, min(v, 3) + 1)))) if v else [])
            weights.append(-np.inf if rng.random() < 0.15 else float(rng.normal(scale=2)))
    hg = hypergraph.Hypergraph(n, heads, tails, weights)
    assert hypergraph_engine.inside_kernel(LOG) is hypergraph_engine.log_inside
    fast, generic = np.empty(n), np.empty(n)
    hypergraph_engine.log_inside(*hg._args(), fast)
    hypergraph_engine.generic_log_inside(*hg._args(), generic)
    assert _same(fast, generic, rtol=1e-13)


def test_a_registered_semiring_is_found_by_name_and_a_name_is_not_taken_twice():
    from varorder.engine.semiring import register

    register(HALF)
    try:
        E = np.array([[[0.0, 1.0], [0.5, -1.0]]])
        T = np.zeros((2, 2))
        assert chain.forward(E, T, semiring="test-log-half")[0] == chain.forward(E, T, semiring=HALF)[0]
        with pytest.raises(ValueError, match="already registered"):
            register(Semiring("test-log-half", _half_plus))
    finally:
        SEMIRINGS.pop("test-log-half")


def test_semirings_resolve_by_name_and_refuse_unknown_ones():
    assert resolve("log") is LOG and resolve("max") is MAX and resolve(HALF) is HALF
    assert SEMIRINGS["log"] is LOG
    with pytest.raises(ValueError, match="semiring must be one of"):
        resolve("tropical")
    with pytest.raises(ValueError, match="semiring must be one of"):
        chain.forward(np.zeros((1, 2, 2)), np.zeros((2, 2)), semiring="min")
    assert LOG.sum(np.array([0.0, 0.0])) == pytest.approx(np.log(2.0)) and MAX.sum(np.array([1.0, 3.0])) == 3.0
    assert LOG.sum(np.array([])) == -np.inf
