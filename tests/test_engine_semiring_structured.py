"""The structured semirings (EXPECTATION for entropy, KBEST for k-best lists) through the one
generic recursion of each structure — dense chains, lattices, hypergraphs — against
enumeration (varorder.testing.oracle), and the fused kernels registered as specialisations
of the operations (chain entropy / k-best / sampling, lattice entropy / k-best) equal to the
generic operation on random inputs."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from varorder import chain, hypergraph, lattice
from varorder.engine import chain as chain_engine
from varorder.engine import lattice as lattice_engine
from varorder.engine.semiring import SEMIRINGS, cells, resolve
from varorder.engine.semiring_structured import EXPECTATION, KBEST, entropy_of
from varorder.testing import oracle
from varorder.testing.strategies import chains, lattices

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _close(a, b, tol=1e-9):
    a, b = np.asarray(a, float), np.asarray(b, float)
    same_special = (np.isneginf(a) & np.isneginf(b)) | (np.isnan(a) & np.isnan(b))
    return bool(np.all(same_special | np.isclose(a, b, rtol=tol, atol=tol)))


def _chain_paths(case, b):
    return oracle.chain_paths(case.emissions[b], case.transitions_of(b), case.start, case.end, case.lengths[b],
                              None if case.allowed is None else case.allowed[b])


# ---------------------------------------------------------------------------
# the semirings themselves
# ---------------------------------------------------------------------------


def _value(rng, semiring, k):
    if semiring is EXPECTATION:
        return np.array([-np.inf, 0.0]) if rng.random() < 0.2 else np.array([rng.normal(), rng.normal()])
    v = np.sort(rng.integers(-3, 3, size=k).astype(float))[::-1].copy()
    v[rng.integers(0, k + 1):] = -np.inf
    return v


@pytest.mark.parametrize("semiring", [EXPECTATION, KBEST], ids=lambda s: s.name)
def test_semiring_laws_hold_on_random_values(semiring):
    c = cells(semiring)
    rng = np.random.default_rng(0)
    k = 4
    width = semiring.value_shape(k)[0]

    def op(f, *args):
        return f(np.empty(width), *args).copy()

    zero, one = op(c.zero), op(c.one)
    for _ in range(200):
        a, b, d = (_value(rng, semiring, k) for _ in range(3))
        assert _close(op(c.plus, a, b), op(c.plus, b, a), 1e-12)
        assert _close(op(c.plus, op(c.plus, a, b), d), op(c.plus, a, op(c.plus, b, d)), 1e-10)
        assert _close(op(c.times, op(c.times, a, b), d), op(c.times, a, op(c.times, b, d)), 1e-10)
        assert _close(op(c.times, a, op(c.plus, b, d)), op(c.plus, op(c.times, a, b), op(c.times, a, d)), 1e-10)
        assert _close(op(c.plus, a, zero), a) and _close(op(c.times, a, one), a)
        assert _close(op(c.times, a, zero), zero)
        w = float(rng.normal())
        assert _close(op(c.times_weight, a, w), op(c.times, a, op(c.lift, w)), 1e-15)
        # ⊕ may write into either operand
        x = a.copy()
        assert _close(c.plus(x, x, b), op(c.plus, a, b), 0) and _close(x, op(c.plus, a, b), 0)
        x = b.copy()
        c.plus(x, a, x)
        assert _close(x, op(c.plus, a, b), 0)


def test_structured_semirings_are_registered_and_refuse_a_missing_width():
    assert resolve("expectation") is EXPECTATION and resolve("kbest") is KBEST
    assert SEMIRINGS["kbest"].structured and not SEMIRINGS["log"].structured
    with pytest.raises(ValueError, match="needs a value width"):
        chain.forward(np.zeros((1, 2, 2)), np.zeros((2, 2)), semiring="kbest")
    with pytest.raises(ValueError, match="no NumPy reduction"):
        KBEST.sum(np.zeros(2))


# ---------------------------------------------------------------------------
# chains
# ---------------------------------------------------------------------------


@SETTINGS
@given(chains(max_batch=3, max_len=4, max_labels=3), st.integers(1, 6))
def test_chain_generic_kbest_and_entropy_match_enumeration(case, k):
    ci = chain_engine.prepare(case.emissions, case.transitions, **case.kwargs)
    paths, scores = chain_engine.kbest(ci, k, specialised=False)
    values = chain.forward(case.emissions, case.transitions, semiring="expectation", **case.kwargs)
    assert _close(chain.forward(case.emissions, case.transitions, semiring="kbest", width=k, **case.kwargs), scores, 0)
    h = chain_engine.entropy(ci, specialised=False)
    for b in range(case.emissions.shape[0]):
        enum = _chain_paths(case, b)
        assert _close(scores[b], oracle.kbest_scores(enum, k))
        by_path = dict(enum)
        found = [tuple(p[:case.lengths[b]]) for p, s in zip(paths[b], scores[b]) if s > -np.inf]
        assert len(set(found)) == len(found)
        assert _close([by_path[p] for p in found], scores[b][:len(found)])
        assert _close(values[b, 0], oracle.log_partition(enum))
        assert _close(h[b], oracle.entropy(enum))


@SETTINGS
@given(chains(max_batch=4, max_len=7, max_labels=4), st.integers(1, 7), st.integers(0, 2**31 - 1))
def test_chain_fused_kernels_equal_the_generic_operations(case, k, seed):
    ci = chain_engine.prepare(case.emissions, case.transitions, **case.kwargs)
    assert chain_engine.SPECIALISED["kbest"][0] is KBEST and chain_engine.SPECIALISED["entropy"][0] is EXPECTATION
    fast, generic = chain_engine.kbest(ci, k), chain_engine.kbest(ci, k, specialised=False)
    assert np.array_equal(fast[0], generic[0]) and np.array_equal(fast[1], generic[1])  # ties included
    assert _close(chain_engine.entropy(ci), chain_engine.entropy(ci, specialised=False), 1e-10)
    assert np.array_equal(chain_engine.sample(ci, 5, seed), chain_engine.sample(ci, 5, seed, specialised=False))


@pytest.mark.parametrize("seed", range(3))
def test_chain_fused_kernels_equal_the_generic_operations_on_larger_batches(seed):
    rng = np.random.default_rng(seed)
    B, L, K = 12, int(rng.integers(20, 80)), int(rng.integers(2, 12))
    E = rng.normal(scale=[1.0, 4.0, 30.0][seed], size=(B, L, K))
    if seed == 1:
        E = np.round(E)  # ties
    T = rng.normal(size=(K, K) if seed != 2 else (B, K, K))
    T[rng.random(T.shape) < 0.1] = -np.inf
    ci = chain_engine.prepare(E, T, lengths=rng.integers(1, L + 1, size=B))
    for k in (1, 3, 10):
        fast, generic = chain_engine.kbest(ci, k), chain_engine.kbest(ci, k, specialised=False)
        assert np.array_equal(fast[0], generic[0]) and np.array_equal(fast[1], generic[1])
    logz = chain_engine.log_partition(ci)
    h_fast, h_generic = chain_engine.entropy(ci), chain_engine.entropy(ci, specialised=False)
    assert np.all(np.abs(h_fast - h_generic) <= 1e-11 * np.maximum(1.0, np.abs(logz)))
    assert np.array_equal(chain_engine.sample(ci, 3, seed), chain_engine.sample(ci, 3, seed, specialised=False))
    # the EXPECTATION forward's first entry is LOG's value, computed the same way
    values = chain_engine.forward_values(ci, EXPECTATION)
    assert np.array_equal(values[:, 0], chain_engine.forward_values(ci, "log", specialised=False))


# ---------------------------------------------------------------------------
# lattices
# ---------------------------------------------------------------------------


@SETTINGS
@given(lattices(), st.integers(1, 6))
def test_lattice_generic_kbest_and_entropy_match_enumeration(lat, k):
    enum = oracle.lattice_paths(lat)
    arcs, scores = lattice_engine.operation("kbest", specialised=False)(lat, k)
    assert _close(scores, oracle.kbest_scores(enum, k))
    assert _close(lattice.forward(lat, "kbest", width=k), scores, 0)
    by_path = dict(enum)
    found = [tuple(int(a) for a in row if a >= 0) for row, s in zip(arcs, scores) if s > -np.inf]
    assert len(set(found)) == len(found) and _close([by_path[p] for p in found], scores[:len(found)])
    assert _close(lattice_engine.operation("entropy", specialised=False)(lat), oracle.entropy(enum))
    assert _close(lattice.forward(lat, "expectation")[0], oracle.log_partition(enum))


@SETTINGS
@given(lattices(max_positions=7, max_width=4), st.integers(1, 8))
def test_lattice_fused_kernels_equal_the_generic_operations(lat, k):
    fast = lattice_engine.operation("kbest")(lat, k)
    generic = lattice_engine.operation("kbest", specialised=False)(lat, k)
    assert np.array_equal(fast[0], generic[0]) and np.array_equal(fast[1], generic[1])
    assert _close(lattice.entropy(lat), lattice_engine.operation("entropy", specialised=False)(lat), 1e-10)


# ---------------------------------------------------------------------------
# hypergraphs
# ---------------------------------------------------------------------------


@st.composite
def hypergraphs(draw, max_graphs=3, max_nodes=7, max_derivations=200):
    """Random batches of acyclic hypergraphs: 0–2 edges per node (one at least at node 0),
    0–3 tails each (repeats allowed: a node used twice), integer weights for ties, −inf;
    tails are dropped where a node would get more than ``max_derivations`` derivations
    (the enumeration stays small)."""
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    counts, heads, tails, weights = [], [], [], []
    base = 0
    for _ in range(draw(st.integers(1, max_graphs))):
        n = int(rng.integers(1, max_nodes + 1))
        derivations = []
        for v in range(n):
            total = 0
            for _ in range(int(rng.integers(0 if v else 1, 3))):
                m = int(rng.integers(0, min(v, 3) + 1)) if v else 0
                ts = sorted(int(t) for t in rng.integers(0, v, size=m)) if m else []
                while int(np.prod([derivations[t] for t in ts])) + total > max_derivations:
                    ts.pop()
                total += int(np.prod([derivations[t] for t in ts]))
                heads.append(base + v)
                tails.append([base + t for t in ts])
                w = float(rng.integers(-2, 3)) if rng.random() < 0.5 else float(rng.normal())
                weights.append(-np.inf if rng.random() < 0.1 else w)
            derivations.append(total)
        counts.append(n)
        base += n
    return hypergraph.Hypergraph(counts, heads, tails, weights)


@SETTINGS
@given(hypergraphs(), st.integers(1, 6))
def test_hypergraph_kbest_and_entropy_match_enumeration(hg, k):
    scores, found = hypergraph.kbest(hg, k)
    h = hypergraph.entropy(hg)
    _, goal = hypergraph.inside(hg, "expectation")
    assert _close(hypergraph.inside(hg, "kbest", width=k)[1], scores, 0)
    for g in range(hg.num_graphs):
        enum = oracle.hypergraph_derivations(hg, g)
        assert _close(scores[g], oracle.kbest_scores(enum, k))
        by_derivation = dict(enum)
        got = [tuple(int(e) for e in d) for d in found[g]]
        assert len(got) == int((scores[g] > -np.inf).sum()) and len(set(got)) == len(got)
        assert _close([by_derivation[d] for d in got], scores[g][:len(got)])
        assert _close(goal[g, 0], oracle.log_partition(enum))
        assert _close(h[g], oracle.entropy(enum))
    assert np.array_equal(entropy_of(goal), h, equal_nan=True)


@SETTINGS
@given(lattices(), st.integers(1, 5))
def test_kbest_and_entropy_agree_across_structures(lat, k):
    """A lattice, its hypergraph and (for a chain-shaped lattice) the chain give one answer."""
    hg = hypergraph.Hypergraph.from_lattice(lat)
    scores, _ = hypergraph.kbest(hg, k)
    assert _close(scores[0], lattice.kbest(lat, k)[1])
    assert _close(hypergraph.entropy(hg)[0], lattice.entropy(lat))


def test_kbest_ties_and_repeated_tails_on_a_hand_made_hypergraph():
    # node 0: two axioms of weight 0 (a tie); node 1 = 0 ⊗ 0 (the same tail twice), goal = 1
    hg = hypergraph.Hypergraph(2, [0, 0, 1], [[], [], [0, 0]], [0.0, 0.0, 1.0])
    scores, found = hypergraph.kbest(hg, 5)
    assert scores[0].tolist() == [1.0, 1.0, 1.0, 1.0, -np.inf]
    # derivations in (left rank, right rank) order: (0,0), (0,1), (1,0), (1,1)
    assert [d.tolist() for d in found[0]] == [[2, 0, 0], [2, 0, 1], [2, 1, 0], [2, 1, 1]]
    assert hypergraph.entropy(hg)[0] == pytest.approx(np.log(4.0))
