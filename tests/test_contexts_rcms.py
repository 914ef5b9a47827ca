"""RCMS context sets and the lattice built from them, against brute force.

* exactness: with contexts capped at n − 1 (the ``max_context`` extension) and
  B ≥ |𝒴|^{n−1} the lattice is the dense n-gram model (explicit (n−1)-tuple state space,
  and full enumeration); with App. A's uncapped contexts (the default) and B ≥ |𝒴|^L;
* uncapped (default) and capped selection keep different contexts for the same B;
* coverage: every output keeps positive probability under RCMS, not under beam search;
* context sets: coverage, closure, order and lcs lists, least-ancestor merging (checked
  on explicit sets of sequences), forward scores and top-B selection;
* beam search as the degenerate case equals an independent plain beam search.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from varorder import lattice as lt
from varorder.contexts import NgramFeatureSpace, build_context_lattice
from varorder.testing import oracle


def _model(seed, V, n, L, backoff=False):
    rng = np.random.default_rng(seed)
    fs = NgramFeatureSpace(V, n, backoff=backoff)
    return fs, rng.normal(scale=1.5, size=(L, V)), rng.normal(scale=1.5, size=fs.size)


def _dense_score(fs, theta, obs, y):
    """n-gram score of a whole sequence, written from the definition (eq. 6, BOS padding)."""
    K, V = fs.window, fs.num_labels
    hist = [V] * K  # BOS
    total = 0.0
    for i, label in enumerate(y):
        kept_range = range(K + 1) if fs.backoff else [K]
        for kept in kept_range:
            slots = [V + 1] * (K - kept) + hist[len(hist) - kept:]
            code = 0
            for s in slots:
                code = code * (V + 2) + s
            total += theta[code * V + label]
        total += obs[i, label]
        hist.append(label)
    return total


def _tuple_state_lattice(fs, theta, obs):
    """The dense n-gram model as an explicit lattice: node = (position, last n−1 labels)."""
    K, V = fs.window, fs.num_labels
    L = obs.shape[0]
    states = {(0, (V,) * K): 0}
    pos, src, dst, lab, w = [0], [], [], [], []
    frontier = [(V,) * K]
    for i in range(1, L + 1):
        nxt = []
        for h in frontier:
            for y in range(V):
                g = h[1:] + (y,)
                key = (i, g)
                if key not in states:
                    states[key] = len(pos)
                    pos.append(i)
                    nxt.append(g)
                src.append(states[(i - 1, h)])
                dst.append(states[key])
                lab.append(y)
                w.append(_arc_score(fs, theta, obs[i - 1], h, y))
        frontier = nxt
    return lt.Lattice(np.array(pos), np.array(src), np.array(dst), np.array(lab), np.array(w)), states


def _arc_score(fs, theta, obs_row, h, y):
    K, V = fs.window, fs.num_labels
    total = obs_row[y]
    for kept in (range(K + 1) if fs.backoff else [K]):
        slots = [V + 1] * (K - kept) + list(h[K - kept:])
        code = 0
        for s in slots:
            code = code * (V + 2) + s
        total += theta[code * V + y]
    return total


def _label_marginals(lattice, arc_marg, L, V):
    out = np.zeros((L, V))
    np.add.at(out, (lattice.node_position[lattice.arc_source], lattice.arc_label), arc_marg)
    return out


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), V=st.integers(2, 3), n=st.integers(2, 3), L=st.integers(1, 5),
       extra=st.integers(0, 3), backoff=st.booleans())
def test_capped_rcms_is_exact_when_b_covers_all_ngram_contexts(seed, V, n, L, extra, backoff):
    fs, obs, theta = _model(seed, V, n, L, backoff)
    B = V ** (n - 1) + extra
    cl = build_context_lattice(obs, theta, fs, B, max_context=fs.window)
    dense, states = _tuple_state_lattice(fs, theta, obs)
    seqs = list(itertools.product(range(V), repeat=L))
    brute = oracle.log_partition([(y, _dense_score(fs, theta, obs, y)) for y in seqs])
    assert lt.log_partition(cl.lattice) == pytest.approx(brute, abs=1e-9)
    assert lt.log_partition(dense) == pytest.approx(brute, abs=1e-9)
    node, arc = lt.marginals(cl.lattice)
    dnode, darc = lt.marginals(dense)
    np.testing.assert_allclose(_label_marginals(cl.lattice, arc, L, V),
                               _label_marginals(dense, darc, L, V), atol=1e-10)
    # context marginals: each full RCMS context is one tuple state; 𝒴_{1:i} carries no mass
    for v in range(1, cl.lattice.num_nodes):
        i = int(cl.lattice.node_position[v])
        if cl.node_is_root[v]:
            assert node[v] == pytest.approx(0.0, abs=1e-12)
            continue
        key = (i, tuple(int(s) for s in cl.node_symbols[v]))
        assert node[v] == pytest.approx(dnode[states[key]], abs=1e-10)


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), V=st.integers(2, 3), n=st.integers(2, 3), L=st.integers(1, 4),
       backoff=st.booleans())
def test_uncapped_rcms_is_exact_when_b_covers_every_history(seed, V, n, L, backoff):
    fs, obs, theta = _model(seed, V, n, L, backoff)
    cl = build_context_lattice(obs, theta, fs, V ** L)
    scored = [(y, _dense_score(fs, theta, obs, y)) for y in itertools.product(range(V), repeat=L)]
    assert lt.log_partition(cl.lattice) == pytest.approx(oracle.log_partition(scored), abs=1e-9)
    assert (cl.context_lengths()[~cl.node_is_root] == cl.lattice.node_position[~cl.node_is_root]).all()


def test_uncapped_and_capped_selection_keep_different_contexts():
    """App. A selects among unmerged expansions; the cap merges first, so the kept sets differ."""
    differ = 0
    for seed in range(20):
        fs, obs, theta = _model(seed, 4, 2, 5)
        paper = build_context_lattice(obs, theta, fs, 3)
        capped = build_context_lattice(obs, theta, fs, 3, max_context=1)
        assert paper.context_lengths().max() > 1 >= capped.context_lengths().max()
        differ += not np.array_equal(paper.node_symbols[:, -1], capped.node_symbols[:, -1]) or \
            paper.lattice.num_nodes != capped.lattice.num_nodes
    assert differ >= 15


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), V=st.integers(2, 3), n=st.integers(2, 4), L=st.integers(1, 5),
       B=st.integers(1, 3))
def test_rcms_covers_every_output_and_beam_does_not(seed, V, n, L, B):
    fs, obs, theta = _model(seed, V, n, L)
    seqs = set(itertools.product(range(V), repeat=L))
    cl = build_context_lattice(obs, theta, fs, B)
    paths = oracle.lattice_paths(cl.lattice)
    finite = {tuple(cl.lattice.arc_label[list(p)]) for p, s in paths if s > -math.inf}
    assert finite == seqs
    assert len(paths) == len(seqs)  # one path per output: p(y) is a path probability
    beam = build_context_lattice(obs, theta, fs, B, mode="beam")
    beam_finite = {tuple(beam.lattice.arc_label[list(p)]) for p, s in oracle.lattice_paths(beam.lattice)
                   if s > -math.inf}
    assert len(beam_finite) == min(B, len(seqs))


def _context_set(cl, v, i, V):
    """The context of node v as an explicit set of histories y_{1:i}."""
    slots = [int(s) for s in cl.node_symbols[v]]
    fixed = min(int(cl.node_length[v]), len(slots))
    members = set()
    for y in itertools.product(range(V), repeat=i):
        padded = [V] * len(slots) + list(y)
        if all(padded[len(padded) - 1 - t] == slots[len(slots) - 1 - t] for t in range(fixed)):
            members.add(y)
    return frozenset(members)


def _lcs(a, b, V):
    """Longest common suffix of the specified (non-★) parts of two slot strings."""
    n = 0
    for s, t in zip(reversed(a), reversed(b)):
        if s != t or s == V + 1:
            break
        n += 1
    return n


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), V=st.integers(2, 3), n=st.integers(2, 3), L=st.integers(1, 4),
       B=st.integers(1, 4), mode=st.sampled_from(["rcms", "rcms-uncapped", "beam"]))
def test_context_sets_are_closed_sorted_and_merge_into_least_ancestor(seed, V, n, L, B, mode):
    fs, obs, theta = _model(seed, V, n, L)
    if mode == "beam":
        cl = build_context_lattice(obs, theta, fs, B, mode="beam", coverage_weight=-0.5)
    else:
        cl = build_context_lattice(obs, theta, fs, B, max_context=None if mode == "rcms-uncapped" else fs.window)
    lat = cl.lattice
    alpha, _ = lt.alphas(lat)
    # the forward scores that selected the contexts are the engine's forward values
    np.testing.assert_allclose(cl.node_forward, alpha, atol=1e-9)
    sets = {0: frozenset([()])}
    for i in range(1, L + 1):
        nodes = np.flatnonzero(lat.node_position == i)
        for v in nodes:
            sets[int(v)] = _context_set(cl, v, i, V)
        members = [sets[int(v)] for v in nodes]
        everything = frozenset(itertools.product(range(V), repeat=i))
        assert members[-1] == everything and cl.node_is_root[nodes[-1]]  # coverage, 𝒴_{1:i} last
        assert len(set(members)) == len(members)  # no context twice
        assert len(nodes) - 1 <= B
        for a, b in itertools.combinations(members, 2):  # closure
            assert (a & b) in set(members) | {frozenset()}
        keys = [tuple(reversed([int(s) for s in cl.node_symbols[v]])) for v in nodes]
        assert keys == sorted(keys)  # lexicographic, last symbol first, ★ largest
        for u, v in zip(nodes[:-1], nodes[1:]):
            assert cl.node_lcs[u] == _lcs(cl.node_symbols[u], cl.node_symbols[v], V)
        # each expansion c × {y} goes to the smallest context of 𝒞_i containing it
        arcs = np.flatnonzero(lat.node_position[lat.arc_source] == i - 1)
        for a in arcs:
            expansion = frozenset(h + (int(lat.arc_label[a]),) for h in sets[int(lat.arc_source[a])])
            ancestors = [v for v in nodes if expansion <= sets[int(v)]]
            least = min(ancestors, key=lambda v: len(sets[int(v)]))
            assert lat.arc_target[a] == least


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), V=st.integers(2, 3), n=st.integers(2, 3), L=st.integers(1, 4),
       B=st.integers(1, 4), capped=st.booleans())
def test_rcms_keeps_the_b_expansions_of_largest_forward_score(seed, V, n, L, B, capped):
    fs, obs, theta = _model(seed, V, n, L)
    cl = build_context_lattice(obs, theta, fs, B, max_context=fs.window if capped else None)
    cap = fs.window if capped else 10**9
    lat = cl.lattice
    alpha, _ = lt.alphas(lat)
    for i in range(1, L + 1):
        arcs = np.flatnonzero(lat.node_position[lat.arc_source] == i - 1)
        forward = {}
        for a in arcs:  # expansion identity (after capping at n − 1 symbols, with the cap)
            u = lat.arc_source[a]
            slots = tuple(int(s) for s in cl.node_symbols[u][1:]) + (int(lat.arc_label[a]),)
            length = min(int(cl.node_length[u]) + 1, cap)
            key = (slots, length)
            forward[key] = np.logaddexp(forward.get(key, -np.inf), alpha[u] + lat.arc_weight[a])
        finite = {k: f for k, f in forward.items() if f > -np.inf}
        top = sorted(finite, key=lambda k: -finite[k])[:B]
        nodes = np.flatnonzero((lat.node_position == i) & ~cl.node_is_root)
        kept = {(tuple(int(s) for s in cl.node_symbols[v]), min(int(cl.node_length[v]), cap)) for v in nodes}
        assert kept == set(top)


def _plain_beam_search(fs, theta, obs, B):
    """Beam search over label prefixes, written independently of the context machinery."""
    beam = [((), 0.0)]
    for i in range(obs.shape[0]):
        grown = []
        for prefix, score in beam:
            for y in range(fs.num_labels):
                full = prefix + (y,)
                grown.append((full, _dense_score(fs, theta, obs[:i + 1], full)))
        grown.sort(key=lambda item: -item[1])
        beam = grown[:B]
    return dict(beam)


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), V=st.integers(2, 4), n=st.integers(2, 4), L=st.integers(1, 5),
       B=st.integers(1, 6), backoff=st.booleans())
def test_degenerate_rcms_is_plain_beam_search(seed, V, n, L, B, backoff):
    fs, obs, theta = _model(seed, V, n, L, backoff)
    cl = build_context_lattice(obs, theta, fs, B, mode="beam")
    expected = _plain_beam_search(fs, theta, obs, B)
    got = {tuple(int(a) for a in cl.lattice.arc_label[list(p)]): s
           for p, s in oracle.lattice_paths(cl.lattice) if s > -math.inf}
    assert got.keys() == expected.keys()
    for y, s in expected.items():
        assert got[y] == pytest.approx(s, abs=1e-9)
    assert lt.log_partition(cl.lattice) == pytest.approx(oracle.log_partition(list(expected.items())), abs=1e-9)


def test_forced_labels_stay_on_the_beam():
    fs, obs, theta = _model(7, 4, 3, 6)
    plain = build_context_lattice(obs, theta, fs, 1, mode="beam")
    gold = lt.viterbi(plain.lattice)[0].copy()
    gold[0] = (gold[0] + 1) % fs.num_labels  # an output that falls off a beam of one
    assert plain.lattice.arc_weight[plain.path_arcs(gold)].sum() == -np.inf
    forced = build_context_lattice(obs, theta, fs, 1, mode="beam", force_labels=gold)
    arcs = forced.path_arcs(gold)
    assert np.isfinite(forced.lattice.arc_weight[arcs]).all()
    assert forced.lattice.arc_weight[arcs].sum() == pytest.approx(_dense_score(fs, theta, obs, gold))


def test_bad_arguments_are_rejected_by_name():
    fs, obs, theta = _model(0, 3, 3, 4)
    with pytest.raises(ValueError, match="observation_scores"):
        build_context_lattice(obs[:, :2], theta, fs, 2)
    with pytest.raises(ValueError, match="ngram_weights"):
        build_context_lattice(obs, theta[:-1], fs, 2)
    with pytest.raises(ValueError, match="num_contexts"):
        build_context_lattice(obs, theta, fs, 0)
    with pytest.raises(ValueError, match="mode"):
        build_context_lattice(obs, theta, fs, 2, mode="greedy")
    with pytest.raises(ValueError, match="max_context"):
        build_context_lattice(obs, theta, fs, 2, max_context=1)
    with pytest.raises(ValueError, match="force_labels"):
        build_context_lattice(obs, theta, fs, 2, force_labels=[0, 1])
