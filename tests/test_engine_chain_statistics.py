"""engine.chain.statistics (Baum–Welch's E-step over flat sequences): the scaled per-sequence specialisation
against the generic definition (marginals) and against enumeration; the guard's hand-back; matrices with
zeros; the same numbers on any thread count; bad input."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from varorder.engine import chain, threads
from varorder.errors import ParameterError
from varorder.testing import oracle


def _instance(rng, K, lengths, scale=3.0, P=3):
    lengths = np.asarray(lengths, dtype=np.int64)
    N = int(lengths.sum())
    E = rng.normal(size=(N, K)) * scale
    T = np.log(rng.dirichlet(np.ones(K), size=K))
    S = np.log(rng.dirichlet(np.ones(K)))
    F = rng.normal(size=(N, P))
    w = rng.uniform(0.0, 2.0, lengths.size)
    return E, lengths, T, S, F, w


def _assert_same(a, b, rtol=1e-11):
    for name, x, y in zip(a._fields, a, b):
        if y is None:
            assert x is None, name
            continue
        assert np.allclose(x, y, rtol=rtol, atol=1e-13), name


def _enumerated(E, lengths, T, S, F, w, end=None):
    """ChainStatistics by enumerating every path of every sequence (varorder.testing.oracle)."""
    K = E.shape[1]
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    log_z, first, edges, occ = [], np.zeros(K), np.zeros((K, K)), np.zeros(K)
    feats, node = np.zeros((K, F.shape[1])), np.zeros_like(E)
    for s, n in enumerate(lengths):
        rows = slice(offsets[s], offsets[s + 1])
        paths = oracle.chain_paths(E[rows], T, S, end)
        log_z.append(oracle.log_partition(paths))
        gamma = oracle.chain_node_marginals(paths, n, K)
        node[rows] = gamma
        first += w[s] * gamma[0]
        occ += w[s] * gamma.sum(axis=0)
        feats += w[s] * gamma.T @ F[rows]
        edges += w[s] * oracle.chain_edge_marginals(paths, n, K).sum(axis=0)
    return chain.ChainStatistics(np.array(log_z), first, edges, occ, feats, node)


@settings(max_examples=25, deadline=None)
@given(K=st.integers(1, 4), lengths=st.lists(st.integers(1, 5), min_size=1, max_size=3), seed=st.integers(0, 2**31))
def test_statistics_match_enumeration(K, lengths, seed):
    rng = np.random.default_rng(seed)
    E, lengths, T, S, F, w = _instance(rng, K, lengths)
    end = rng.normal(size=K)
    want = _enumerated(E, lengths, T, S, F, w, end)
    for specialised in (True, False):
        got = chain.statistics(E, lengths, T, S, end, weights=w, features=F, node=True, specialised=specialised)
        _assert_same(got, want, rtol=1e-10)
    assert np.allclose(chain.flat_log_partition(E, lengths, T, S, end), want.log_z, rtol=1e-12)


@pytest.mark.parametrize("K, lengths", [(2, [300, 1, 64, 65, 129]), (10, [1000]), (45, [200, 3]), (7, [40] * 70)])
def test_specialisation_equals_the_generic_statistics(K, lengths):
    rng = np.random.default_rng(K)
    E, lengths, T, S, F, w = _instance(rng, K, lengths)
    generic = chain.statistics(E, lengths, T, S, weights=w, features=F, node=True, specialised=False)
    _assert_same(chain.statistics(E, lengths, T, S, weights=w, features=F, node=True), generic)
    # without node or features: the same sums (the posteriors then live in the kernel's scratch)
    bare = chain.statistics(E, lengths, T, S, weights=w)
    assert bare.node is None and bare.features is None
    assert np.allclose(bare.transitions, generic.transitions, rtol=1e-11)
    assert np.allclose(bare.occupancy, generic.occupancy, rtol=1e-11)
    ws = chain.Workspace()
    again = [chain.statistics(E, lengths, T, S, weights=w, features=F, workspace=ws) for _ in range(2)]
    for x, y in zip(again[0], again[1]):
        assert x is None or np.array_equal(x, y)


def test_rows_the_guard_refuses_go_to_the_generic_path():
    rng = np.random.default_rng(3)
    E, lengths, T, S, F, w = _instance(rng, 4, [30, 20, 25])
    E[35, 2] = E[35].max() - 900.0  # sequence 1: a row whose range could underflow the scaled products
    E[5, 1] = -np.inf  # sequence 0: a hard zero (no hand-back)
    generic = chain.statistics(E, lengths, T, S, weights=w, features=F, node=True, specialised=False)
    got = chain.statistics(E, lengths, T, S, weights=w, features=F, node=True)
    _assert_same(got, generic)
    assert got.node[5, 1] == 0.0
    assert np.allclose(chain.flat_log_partition(E, lengths, T, S), generic.log_z, rtol=1e-12)


def test_impossible_sequence_has_log_z_minus_inf():
    rng = np.random.default_rng(4)
    E, lengths, T, S, F, w = _instance(rng, 3, [5, 6])
    E[7] = -np.inf
    got = chain.statistics(E, lengths, T, S, weights=w)
    assert np.isneginf(got.log_z[1]) and np.isfinite(got.log_z[0])
    assert np.isneginf(chain.flat_log_partition(E, lengths, T, S)[1])


def test_matrix_with_zeros_takes_the_generic_path():
    rng = np.random.default_rng(5)
    E, lengths, T, S, F, w = _instance(rng, 3, [4, 5])
    T[0, 2] = T[2, 1] = -np.inf  # a left-right-like matrix
    want = _enumerated(E, lengths, T, S, F, w)
    _assert_same(chain.statistics(E, lengths, T, S, weights=w, features=F, node=True), want, rtol=1e-10)
    assert np.allclose(chain.flat_log_partition(E, lengths, T, S), want.log_z, rtol=1e-12)


def test_same_numbers_on_any_thread_count():
    rng = np.random.default_rng(6)
    E, lengths, T, S, F, w = _instance(rng, 5, rng.integers(1, 60, size=200))
    before = threads.get_threads()
    try:
        results = []
        for n in (1, 2):
            threads.set_threads(n)
            results.append(chain.statistics(E, lengths, T, S, weights=w, features=F, node=True))
            results.append((chain.flat_log_partition(E, lengths, T, S),))
    finally:
        threads.set_threads(before)
    for a, b in ((results[0], results[2]), (results[1], results[3])):
        for x, y in zip(a, b):
            assert np.array_equal(x, y)


@pytest.mark.parametrize("change, match", [
    (dict(lengths=np.array([3, 3])), "lengths sum to 6"),
    (dict(lengths=np.array([0, 7])), r"lengths\[0\] = 0"),
    (dict(emissions=np.full((7, 2), np.nan)), "emissions"),
    (dict(features=np.ones((6, 2))), r"features must have shape \(7, P\)"),
    (dict(features=np.array([[np.nan]] * 7)), r"features\[0, 0\] is not finite"),
    (dict(weights=np.array([1.0, -1.0])), "weights"),
    (dict(transitions=np.zeros((3, 3))), "transitions"),
])
def test_bad_input_names_the_argument(change, match):
    args = dict(emissions=np.zeros((7, 2)), lengths=np.array([3, 4]), transitions=np.zeros((2, 2)))
    kw = {k: change.pop(k) for k in ("features", "weights") if k in change}
    args.update(change)
    with pytest.raises(ParameterError, match=match):
        chain.statistics(**args, **kw)
