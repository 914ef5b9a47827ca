"""engine.chain.filtered (the filtered posteriors p(yₜ | positions 1..t) over flat sequences): the LOG
specialisation (scaled exp-space pass, log-space where its guard refuses or the matrix has zeros) against
the generic definition (the generic LOG forward normalised per position) and against enumeration; prefixes
without a path; the same numbers on any thread count; the facade; bad input."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from varorder import chain as facade
from varorder.engine import chain, threads
from varorder.errors import ParameterError
from varorder.testing import oracle


def _instance(rng, K, lengths, scale=3.0, zeros=False):
    lengths = np.asarray(lengths, dtype=np.int64)
    E = rng.normal(size=(int(lengths.sum()), K)) * scale
    A = rng.dirichlet(np.ones(K), size=K)
    if zeros and K > 1:
        A[0, K - 1] = 0.0  # a structured matrix (the scaled pass refuses it whole)
        A /= A.sum(axis=1, keepdims=True)
    with np.errstate(divide="ignore"):
        T = np.log(A)
    S = np.log(rng.dirichlet(np.ones(K)))
    return E, lengths, T, S


def _enumerated(E, lengths, T, S):
    """Row t of each sequence: the last node marginal of the chain over its prefix 1..t (enumerated)."""
    K = E.shape[1]
    out = np.empty_like(E)
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    for s, n in enumerate(lengths):
        for t in range(n):
            paths = oracle.chain_paths(E[offsets[s]:offsets[s] + t + 1], T, S)
            if oracle.log_partition(paths) == -np.inf:  # a prefix without a path: NaN rows
                out[offsets[s] + t] = np.nan
            else:
                out[offsets[s] + t] = oracle.chain_node_marginals(paths, t + 1, K)[t]
    return out


@settings(max_examples=30, deadline=None)
@given(K=st.integers(1, 4), lengths=st.lists(st.integers(1, 5), min_size=1, max_size=3), zeros=st.booleans(),
       seed=st.integers(0, 2**31))
def test_filtered_matches_enumeration(K, lengths, zeros, seed):
    rng = np.random.default_rng(seed)
    E, lengths, T, S = _instance(rng, K, lengths, zeros=zeros)
    if rng.random() < 0.5:
        E[rng.random(E.shape) < 0.15] = -np.inf  # hard zeros (rows left with a path are checked below)
    want = _enumerated(E, lengths, T, S)
    defined = ~np.isnan(want).any(axis=1)
    for specialised in (True, False):
        got = chain.filtered(E, lengths, T, S, specialised=specialised)
        assert np.allclose(got[defined], want[defined], rtol=1e-10, atol=1e-13)
        assert np.isnan(got[~defined]).all()


@pytest.mark.parametrize("K, lengths, zeros", [(2, [300, 1, 64, 65, 129], False), (10, [1000], False),
                                               (45, [200, 3], False), (7, [40] * 70, False), (5, [90, 33], True)])
def test_specialisation_equals_the_generic_recursion(K, lengths, zeros):
    E, lengths, T, S = _instance(np.random.default_rng(K), K, lengths, zeros=zeros)
    generic = chain.filtered(E, lengths, T, S, specialised=False)
    got = chain.filtered(E, lengths, T, S)
    assert np.allclose(got, generic, rtol=1e-11, atol=1e-300)
    assert np.allclose(got.sum(axis=1), 1.0, rtol=1e-13)
    assert chain.SPECIALISED["filtered"][1] is chain._scaled_filtered
    assert chain.GENERIC["filtered"] is chain._generic_filtered


def test_rows_the_guard_refuses_and_prefixes_without_a_path():
    rng = np.random.default_rng(3)
    E, lengths, T, S = _instance(rng, 4, [30, 20, 25])
    E[35, 2] = E[35].max() - 690.0  # sequence 1: a range the scaled products could underflow in
    E[5, 1] = -np.inf  # sequence 0: a hard zero (no hand-back)
    E[60, :] = -np.inf  # sequence 2 (rows 50..74): no path from its position 10 on
    generic = chain.filtered(E, lengths, T, S, specialised=False)
    got = chain.filtered(E, lengths, T, S)
    assert np.isnan(got[60:]).all() and np.isnan(generic[60:]).all()
    assert not np.isnan(got[:60]).any()
    assert np.allclose(got[:60], generic[:60], rtol=1e-11, atol=1e-300)
    assert got[35, 2] > 0.0 and np.isclose(got[35, 2], generic[35, 2], rtol=1e-11)  # kept its relative accuracy


def test_the_same_numbers_on_any_thread_count():
    E, lengths, T, S = _instance(np.random.default_rng(4), 6, [50] * 80)
    before = threads.get_threads()
    try:
        results = []
        for n in (1, 2):
            threads.set_threads(n)
            results.append(chain.filtered(E, lengths, T, S))
    finally:
        threads.set_threads(before)
    assert np.array_equal(results[0], results[1])


def test_the_facade_and_bad_input():
    E, lengths, T, S = _instance(np.random.default_rng(5), 3, [4, 2])
    assert np.array_equal(facade.filtered(E, lengths, T, S), chain.filtered(E, lengths, T, S))
    with pytest.raises(ParameterError, match="lengths"):
        facade.filtered(E, [4, 3], T, S)
    with pytest.raises(ParameterError, match="transitions"):
        facade.filtered(E, lengths, T[:2], S)
    with pytest.raises(ParameterError, match="emissions"):
        facade.filtered(E[:, :, None], lengths, T, S)
