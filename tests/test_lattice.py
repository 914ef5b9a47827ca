"""General lattices against the same brute-force oracle, and against the dense-chain engine."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from varorder import chain, lattice
from varorder.lattice import Lattice
from varorder.testing import oracle
from varorder.testing.strategies import lattices

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _close(a, b, tol=1e-9):
    a = np.asarray(a, dtype=float)
    b = np.asarray(b, dtype=float)
    return bool(np.all((np.isneginf(a) & np.isneginf(b)) | np.isclose(a, b, rtol=tol, atol=tol)))


@SETTINGS
@given(lattices())
def test_log_partition_and_max_match_enumeration(lat):
    enum = oracle.lattice_paths(lat)
    assert _close(lattice.log_partition(lat), oracle.log_partition(enum))
    assert _close(lattice.forward(lat, "max"), oracle.max_score(enum))
    beta = lattice.betas(lat)
    assert _close(beta[0], oracle.log_partition(enum))


@SETTINGS
@given(lattices())
def test_viterbi_matches_enumeration(lat):
    enum = oracle.lattice_paths(lat)
    arcs, score = lattice.viterbi_arcs(lat)
    assert _close(score, oracle.max_score(enum))
    if score == -np.inf:
        assert arcs.size == 0
    else:
        assert tuple(arcs) in oracle.argmax_paths(enum, tol=1e-9)
        labels, _ = lattice.viterbi(lat)
        assert list(labels) == [lat.arc_label[a] for a in arcs]


@SETTINGS
@given(lattices())
def test_marginals_match_enumeration(lat):
    enum = oracle.lattice_paths(lat)
    node, arc, fin = lattice.marginals(lat, with_final=True)
    want_node, want_arc, want_fin = oracle.lattice_marginals(lat, enum)
    np.testing.assert_allclose(node, want_node, atol=1e-9)
    np.testing.assert_allclose(arc, want_arc, atol=1e-9)
    np.testing.assert_allclose(fin, want_fin, atol=1e-9)


@SETTINGS
@given(lattices())
def test_log_partition_and_marginals_in_one_pass_match_enumeration(lat):
    enum = oracle.lattice_paths(lat)
    log_z, node, arc = lattice.log_partition_and_marginals(lat)
    want_node, want_arc, _ = oracle.lattice_marginals(lat, enum)
    assert _close(log_z, oracle.log_partition(enum))
    assert log_z == lattice.log_partition(lat) or (np.isneginf(log_z) and np.isneginf(lattice.log_partition(lat)))
    np.testing.assert_allclose(node, want_node, atol=1e-9)
    np.testing.assert_allclose(arc, want_arc, atol=1e-9)


@SETTINGS
@given(lattices())
def test_kbest_matches_enumeration(lat):
    k = 6
    enum = oracle.lattice_paths(lat)
    arcs, scores = lattice.kbest_arcs(lat, k)
    assert _close(scores, oracle.kbest_scores(enum, k))
    score_of = dict(enum)
    seen = set()
    for r in range(k):
        if scores[r] == -np.inf:
            assert (arcs[r] == -1).all()
            continue
        path = tuple(a for a in arcs[r] if a >= 0)
        assert path not in seen
        seen.add(path)
        assert _close(score_of[path], scores[r])


@SETTINGS
@given(lattices())
def test_entropy_matches_enumeration(lat):
    want = oracle.entropy(oracle.lattice_paths(lat))
    got = lattice.entropy(lat)
    assert (np.isnan(want) and np.isnan(got)) or abs(got - want) < 1e-8


def test_sampling_goodness_of_fit():
    rng = np.random.default_rng(0)
    pos = np.array([0, 1, 1, 2, 2, 3])
    src = np.array([0, 0, 1, 1, 2, 2, 3, 4, 4])
    dst = np.array([1, 2, 3, 4, 3, 4, 5, 5, 5])
    lab = np.array([0, 1, 0, 1, 0, 1, 2, 2, 3])
    w = rng.normal(size=9)
    final = np.array([-np.inf, -np.inf, -np.inf, 0.3, -0.5, 0.0])  # paths end at position 2 or 3
    lat = Lattice(pos, src, dst, lab, w, final)
    draws = lattice.sample_arcs(lat, n=40_000, seed=3)
    counts = {}
    for row in draws:
        path = tuple(int(a) for a in row if a >= 0)
        counts[path] = counts.get(path, 0) + 1
    probs = oracle.probabilities(oracle.lattice_paths(lat))
    assert len(probs) == 10
    assert oracle.chi_square_pvalue(counts, probs) > 1e-3


@pytest.mark.parametrize("seed", range(4))
def test_chain_as_lattice_equals_dense_engine(seed):
    rng = np.random.default_rng(seed)
    L, K = 5, 4
    E = rng.normal(size=(L, K))
    T = rng.normal(size=(K, K))
    T[rng.random((K, K)) < 0.2] = -np.inf
    S, F = rng.normal(size=K), rng.normal(size=K)
    lat = Lattice.from_chain(E, T, S, F)
    assert np.isclose(lattice.log_partition(lat), chain.log_partition(E[None], T, S, F)[0])
    labels, score = lattice.viterbi(lat)
    paths, scores = chain.viterbi(E[None], T, S, F)
    assert np.isclose(score, scores[0]) and (labels == paths[0]).all()
    node, arc = lattice.marginals(lat)
    cnode, _ = chain.marginals(E[None], T, S, F)
    np.testing.assert_allclose(node[1:].reshape(L, K), cnode[0], atol=1e-12)
    kl, ks = lattice.kbest(lat, 7)
    cl, cs = chain.kbest(E[None], T, S, F, k=7)
    np.testing.assert_allclose(ks, cs[0])
    assert np.isclose(lattice.entropy(lat), chain.entropy(E[None], T, S, F)[0])


@pytest.mark.parametrize(
    "args, name",
    [
        (([1, 1], [0], [1], [0], [0.0]), "node_position"),
        (([0, 0], [0], [1], [0], [0.0]), "node_position"),
        (([0, 1, 2], [0], [2], [0], [0.0]), "arc"),
        (([0, 1], [0], [5], [0], [0.0]), "arc_target"),
        (([0, 1], [0], [1], [-1], [0.0]), "arc_label"),
        (([0, 1], [0], [1], [0], [np.nan]), "arc_weight"),
        (([0, 1], [0], [1], [0], [0.0, 1.0]), "arc_weight"),
        (([0, 1], [0], [1], [0.5], [0.0]), "arc_label"),
    ],
)
def test_bad_lattice_names_the_argument(args, name):
    with pytest.raises(ValueError, match=name):
        Lattice(*[np.asarray(a) for a in args])


def test_bad_k_and_n():
    lat = Lattice.from_chain(np.zeros((2, 2)), np.zeros((2, 2)))
    with pytest.raises(ValueError, match="k"):
        lattice.kbest(lat, 0)
    with pytest.raises(ValueError, match="n"):
        lattice.sample(lat, 0)
    with pytest.raises(ValueError, match="lattice"):
        lattice.log_partition("not a lattice")


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 12), st.lists(st.integers(0, 11), max_size=60))
def test_csr_index_is_the_stable_argsort_with_bincount_offsets(num_nodes, keys):
    from varorder.engine.lattice import csr_index

    keys = np.array([k % num_nodes for k in keys], dtype=np.int64)
    offsets, order = csr_index(keys, num_nodes)
    np.testing.assert_array_equal(order, np.argsort(keys, kind="stable"))
    np.testing.assert_array_equal(offsets, np.concatenate([[0], np.cumsum(np.bincount(keys, minlength=num_nodes))]))
