"""Hypergraph inside/outside/Viterbi/sampling against brute-force enumeration of derivations,
and lattices as one-tail hypergraphs against the lattice engine."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from varorder import hypergraph, lattice
from varorder.hypergraph import Hypergraph
from varorder.testing import oracle
from varorder.testing.strategies import lattices

SETTINGS = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _close(a, b, tol=1e-9):
    a = np.asarray(a, dtype=float)
    b = np.asarray(b, dtype=float)
    return bool(np.all((np.isneginf(a) & np.isneginf(b)) | np.isclose(a, b, rtol=tol, atol=tol)))


@st.composite
def hypergraph_batches(draw, max_graphs=3, max_nodes=6):
    """A batch of small random acyclic hypergraphs (edges with 0–3 tails, some −inf weights)."""
    sizes, heads, tails, weights = [], [], [], []
    base = 0
    for _ in range(draw(st.integers(1, max_graphs))):
        n = draw(st.integers(1, max_nodes))
        for v in range(n):
            for _ in range(draw(st.integers(0 if v else 1, 2))):
                k = draw(st.integers(0, min(v, 3)))
                tails.append([base + draw(st.integers(0, v - 1)) for _ in range(k)])
                heads.append(base + v)
                weights.append(draw(st.one_of(st.floats(-3, 3), st.just(-np.inf)) if draw(st.booleans())
                                    else st.floats(-3, 3)))
        sizes.append(n)
        base += n
    return Hypergraph(sizes, heads, tails, weights)


def _per_graph(hg):
    return [oracle.hypergraph_derivations(hg, g) for g in range(hg.num_graphs)]


@SETTINGS
@given(hypergraph_batches())
def test_inside_matches_enumeration(hg):
    enums = _per_graph(hg)
    assert _close(hypergraph.log_partition(hg), [oracle.log_partition(d) for d in enums])
    assert _close(hypergraph.inside(hg, "max")[1], [oracle.max_score(d) for d in enums])


@SETTINGS
@given(hypergraph_batches(max_graphs=4, max_nodes=9))
def test_the_specialised_log_inside_equals_the_generic_recursion(hg):
    from varorder.engine import hypergraph as kernels

    fast, generic = np.empty(hg.num_nodes), np.empty(hg.num_nodes)
    goal_fast = kernels.log_inside(*hg._args(), fast)
    goal_generic = kernels.generic_log_inside(*hg._args(), generic)
    assert _close(fast, generic, tol=1e-13) and _close(goal_fast, goal_generic, tol=1e-13)


@SETTINGS
@given(hypergraph_batches())
def test_outside_marginals_match_enumeration(hg):
    logz, edge, node = hypergraph.marginals(hg)
    want_edge = np.zeros(hg.num_edges)
    want_node = np.zeros(hg.num_nodes)
    for g, enum in enumerate(_per_graph(hg)):
        for edges, p in oracle.probabilities(enum).items():
            for e in edges:
                want_edge[e] += p
            for e in edges:
                want_node[hg.edge_head[e]] += p
    np.testing.assert_allclose(edge, want_edge, atol=1e-9)
    np.testing.assert_allclose(node, want_node, atol=1e-9)
    feats = np.stack([np.arange(hg.num_edges) % 3, np.where(np.arange(hg.num_edges) % 2 == 0, 3, -1)], axis=1)
    counts = hypergraph.expected_counts(hg, feats, 4)
    np.testing.assert_allclose(counts, [want_edge[np.arange(hg.num_edges) % 3 == f].sum() for f in range(3)]
                               + [want_edge[::2].sum()], atol=1e-9)


@SETTINGS
@given(hypergraph_batches())
def test_viterbi_matches_enumeration(hg):
    scores, derivations = hypergraph.viterbi(hg)
    for g, enum in enumerate(_per_graph(hg)):
        assert _close(scores[g], oracle.max_score(enum))
        if scores[g] == -np.inf:
            assert derivations[g].size == 0
        else:
            assert tuple(derivations[g]) in oracle.argmax_paths(enum, tol=1e-9)
            assert _close(hg.edge_weight[derivations[g]].sum(), scores[g])


def test_sampling_matches_exact_probabilities():
    rng = np.random.default_rng(0)
    # goal 4 ← (2, 3) | (3) ; 3 ← (1, 1) | (0) ; 2 ← () | (0, 1) ; 1 ← () | () ; 0 ← ()
    heads = [0, 1, 1, 2, 2, 3, 3, 4, 4]
    tails = [[], [], [], [], [0, 1], [1, 1], [0], [2, 3], [3]]
    hg = Hypergraph(5, heads, tails, rng.normal(size=len(heads)))
    probs = oracle.probabilities(oracle.hypergraph_derivations(hg))
    assert len(probs) > 10
    draws = hypergraph.sample(hg, n=30_000, seed=5)
    counts = {}
    for d in draws:
        counts[tuple(d)] = counts.get(tuple(d), 0) + 1
    assert oracle.chi_square_pvalue(counts, probs) > 1e-3
    again = hypergraph.sample(hg, n=50, seed=5)
    assert all(np.array_equal(a, b) for a, b in zip(again, draws[:50]))


def test_sampling_without_derivation_is_empty():
    hg = Hypergraph(2, [0, 1], [[], [0]], [0.0, -np.inf])
    assert hypergraph.sample(hg, n=3, seed=0) == []


@SETTINGS
@given(lattices())
def test_lattice_as_one_tail_hypergraph_equals_lattice_engine(lat):
    hg = Hypergraph.from_lattice(lat)
    assert _close(hypergraph.log_partition(hg)[0], lattice.log_partition(lat))
    assert _close(hypergraph.inside(hg, "max")[1][0], lattice.forward(lat, "max"))
    _, edge, node = hypergraph.marginals(hg)
    lnode, larc = lattice.marginals(lat)
    np.testing.assert_allclose(edge[:lat.num_arcs], larc, atol=1e-9)
    np.testing.assert_allclose(node[:lat.num_nodes], lnode, atol=1e-9)
    score, derivations = hypergraph.viterbi(hg)
    arcs, lscore = lattice.viterbi_arcs(lat)
    assert _close(score[0], lscore)
    if lscore > -np.inf:
        path = [e for e in derivations[0] if e < lat.num_arcs][::-1]  # preorder runs goal → root
        assert _close(lat.arc_weight[path].sum() + lat.final[lat.arc_target[path[-1]] if path else 0], lscore)


@pytest.mark.parametrize("bad, message", [
    (dict(num_nodes=2, edge_head=[1], edge_tails=[[1]], edge_weight=[0.0]), "topological"),
    (dict(num_nodes=2, edge_head=[2], edge_tails=[[]], edge_weight=[0.0]), "not a node id"),
    (dict(num_nodes=[1, 1], edge_head=[1], edge_tails=[[0]], edge_weight=[0.0]), "another graph"),
    (dict(num_nodes=2, edge_head=[1], edge_tails=[[0]], edge_weight=[np.nan]), "NaN"),
    (dict(num_nodes=2, edge_head=[1], edge_tails=[[0], []], edge_weight=[0.0]), "one per edge"),
    (dict(num_nodes=0, edge_head=[], edge_tails=[], edge_weight=[]), "num_nodes"),
])
def test_bad_input_is_rejected(bad, message):
    with pytest.raises(ValueError, match=message):
        Hypergraph(**bad)


def test_with_weights_and_expected_counts_validation():
    hg = Hypergraph(3, [0, 1, 2, 2], [[], [], [0, 1], [1]], [0.0, 0.0, 0.0, 0.0])
    assert hypergraph.log_partition(hg)[0] == pytest.approx(np.log(2))
    heavier = hg.with_weights([0.0, 0.0, np.log(3), 0.0])
    assert hypergraph.log_partition(heavier)[0] == pytest.approx(np.log(4))
    np.testing.assert_allclose(hypergraph.marginals(heavier)[1], [0.75, 1.0, 0.75, 0.25])
    with pytest.raises(ValueError, match="NaN"):
        hg.with_weights([0.0, np.nan, 0.0, 0.0])
    with pytest.raises(ValueError, match="num_features"):
        hypergraph.expected_counts(hg, [[0], [1], [2], [3]], 3)
    with pytest.raises(ValueError, match="shape"):
        hypergraph.expected_counts(hg, [0, 1, 2, 3], 4)
