"""The engine's forward sampler over an automaton × DFA unrolled over positions
(``engine.lattice.product_backward`` / ``product_sample``) against enumeration: backward
values equal the lattice engine's LOG backward on the materialised product, the totals are
the nodes' weight sums, samples pass a fixed-seed χ² test against the enumerated path
probabilities along either draw (a node's table or a scan of its weights; and a wrong
distribution fails it), both draws give the same samples bit for bit, the guide-table draw
equals the bisection draw bit for bit, and sample i depends only on (seed, i)."""

from __future__ import annotations

import itertools
import math
from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from varorder import lattice as lattice_ops
from varorder.engine import lattice as kernels
from varorder.testing.oracle import chi_square_pvalue


def _random_product(seed, S=3, X=3, Q=3, zero_share=0.2):
    """A random deterministic weighted automaton (not normalised, some weights zero) and a
    random complete DFA over its X columns."""
    rng = np.random.default_rng(seed)
    prob = rng.random((S, X)) * 0.9
    prob[rng.random((S, X)) < zero_share] = 0.0
    nxt = rng.integers(0, S, size=(S, X)).astype(np.int32)
    end = rng.random(S)
    end[rng.random(S) < zero_share] = 0.0
    dq = rng.integers(0, Q, size=(Q, X)).astype(np.int32)
    accepting = rng.random(Q) < 0.5
    accepting[rng.integers(Q)] = True
    return prob, nxt, end, dq, accepting


def _live(dq, accepting):
    live = accepting.copy()
    while True:
        grown = live | live[dq].any(axis=1)
        if (grown == live).all():
            return live
        live = grown


def _backward(prob, nxt, end, dq, accepting, min_len, max_len):
    """product_backward, with probT = prob transposed for a first-order automaton."""
    prob_t = np.ascontiguousarray(prob.T) if (nxt == nxt[:1]).all() else np.empty((0, prob.shape[0]))
    return kernels.product_backward(prob, prob_t, nxt, end, dq, accepting, _live(dq, accepting), min_len, max_len)


def _enumerate(prob, nxt, end, dq, accepting, min_len, max_len, s0=0, q0=0):
    """{column tuple: path weight} over every path that ends."""
    X = prob.shape[1]
    out = {}
    for n in range(min_len, max_len + 1):
        for x in itertools.product(range(X), repeat=n):
            s, q, w = s0, q0, 1.0
            for c in x:
                w *= prob[s, c]
                s, q = nxt[s, c], dq[q, c]
            w *= end[s] * accepting[q]
            if w > 0:
                out[x] = w
    return out


def _materialise(prob, nxt, end, dq, accepting, min_len, max_len, s0=0, q0=0):
    """The unrolled product as a Lattice over every (t, s, q) node, and its node ids."""
    S, X = prob.shape
    Q = dq.shape[0]
    node = lambda t, s, q: 1 + ((t - 1) * S + s) * Q + q if t else 0  # noqa: E731
    num = 1 + max_len * S * Q
    pos = np.concatenate([[0], np.repeat(np.arange(1, max_len + 1), S * Q)])
    src, dst, lab, wts = [], [], [], []
    final = np.full(num, -np.inf)
    with np.errstate(divide="ignore"):
        for t in range(max_len + 1):
            pairs = [(s0, q0)] if t == 0 else itertools.product(range(S), range(Q))
            for s, q in pairs:
                v = node(t, s, q)
                if t >= min_len and accepting[q]:
                    final[v] = np.log(end[s])
                if t < max_len:
                    for x in range(X):
                        src.append(v)
                        dst.append(node(t + 1, nxt[s, x], dq[q, x]))
                        lab.append(x)
                        wts.append(np.log(prob[s, x]))
    return lattice_ops.Lattice(pos, src, dst, lab, wts, final), node


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 10**6), st.integers(0, 2), st.integers(0, 2))
def test_backward_equals_the_lattice_engine_and_enumeration(seed, min_len, extra):
    prob, nxt, end, dq, accepting = _random_product(seed)
    max_len = min_len + extra
    B, scale, totals, G = _backward(prob, nxt, end, dq, accepting, min_len, max_len)
    lat, node = _materialise(prob, nxt, end, dq, accepting, min_len, max_len)
    beta = lattice_ops.betas(lat)
    S, Q = prob.shape[0], dq.shape[0]
    for t in range(max_len + 1):
        for s, q in ([(0, 0)] if t == 0 else itertools.product(range(S), range(Q))):
            got = B[t, s, q] * math.exp(scale[t])
            assert math.isclose(got, math.exp(beta[node(t, s, q)]), rel_tol=1e-10, abs_tol=1e-300)
    paths = _enumerate(prob, nxt, end, dq, accepting, min_len, max_len)
    assert math.isclose(B[0, 0, 0] * math.exp(scale[0]), sum(paths.values()), rel_tol=1e-10, abs_tol=1e-300)


TABLES, SCANS = 0, 10**9  # product_sample's ``few``: every node builds a table / every node scans


@pytest.mark.parametrize("few", [TABLES, SCANS, 3])
@pytest.mark.parametrize("seed,min_len,max_len", [(0, 0, 3), (1, 1, 3), (2, 2, 4), (3, 0, 2)])
def test_samples_pass_goodness_of_fit(seed, min_len, max_len, few):
    for attempt in range(20):  # a random instance with a path
        prob, nxt, end, dq, accepting = _random_product(100 * seed + attempt)
        paths = _enumerate(prob, nxt, end, dq, accepting, min_len, max_len)
        if len(paths) > 3:
            break
    B, scale, totals, G = _backward(prob, nxt, end, dq, accepting, min_len, max_len)
    symbol = np.arange(10, 10 + prob.shape[1], dtype=np.int64)  # labels ≠ columns
    labels, lengths, built = kernels.product_sample(prob, nxt, end, dq, accepting, min_len, max_len, B, totals, G,
                                                    scale, symbol, 0, 0, 20000, np.uint64(seed), few)
    labels = labels.T
    assert labels.shape == (20000, max_len) and built <= max_len * prob.shape[0] * dq.shape[0]
    assert (built == 0) == (few == SCANS)
    assert ((labels >= 0).sum(axis=1) == lengths).all()
    draws = Counter(tuple(int(c) - 10 for c in row[:k]) for row, k in zip(labels, lengths))
    total = sum(paths.values())
    probs = {x: w / total for x, w in paths.items()}
    assert chi_square_pvalue(draws, probs) > 1e-4
    uniform = {x: 1 / len(paths) for x in paths}
    assert chi_square_pvalue(draws, uniform) < 1e-6  # the test can fail


@pytest.mark.parametrize("few", [TABLES, SCANS, 3])
def test_first_order_automaton_backward_and_samples(few):
    """Every state's next state the same per column (a bigram LM's automaton): the
    backward's matrix-product path, against the lattice engine and enumeration."""
    prob, nxt, end, dq, accepting = _random_product(11, S=3, X=3)
    nxt = np.ascontiguousarray(np.repeat(nxt[:1], 3, axis=0))
    B, scale, totals, G = _backward(prob, nxt, end, dq, accepting, 1, 4)
    lat, node = _materialise(prob, nxt, end, dq, accepting, 1, 4)
    beta = lattice_ops.betas(lat)
    for t in range(1, 5):
        for s, q in itertools.product(range(3), range(3)):
            assert math.isclose(B[t, s, q] * math.exp(scale[t]), math.exp(beta[node(t, s, q)]), rel_tol=1e-10,
                                abs_tol=1e-300)
    paths = _enumerate(prob, nxt, end, dq, accepting, 1, 4)
    assert G.shape == (4, 3, 3)
    labels, lengths, _ = kernels.product_sample(prob, nxt, end, dq, accepting, 1, 4, B, totals, G, scale,
                                                np.arange(3, dtype=np.int64), 0, 0, 20000, np.uint64(1), few)
    draws = Counter(tuple(int(c) for c in row[:k]) for row, k in zip(labels.T, lengths))
    total = sum(paths.values())
    assert chi_square_pvalue(draws, {x: w / total for x, w in paths.items()}) > 1e-4


@pytest.mark.parametrize("first_order", [False, True])
def test_sample_i_depends_only_on_seed_and_i(first_order):
    prob, nxt, end, dq, accepting = _random_product(7, S=4, X=4)
    if first_order:
        nxt = np.ascontiguousarray(np.repeat(nxt[:1], 4, axis=0))
    args = (prob, nxt, end, dq, accepting, 1, 5)
    B, scale, totals, G = _backward(*args)
    assert (G.shape[0] > 0) == first_order
    symbol = np.arange(4, dtype=np.int64)
    tables = (B, totals, G, scale, symbol, 0, 0)
    many, lengths, _ = kernels.product_sample(*args, *tables, 300, np.uint64(5), 3)
    few, few_lengths, _ = kernels.product_sample(*args, *tables, 40, np.uint64(5), 3)
    assert (many[:, :40] == few).all() and (lengths[:40] == few_lengths).all()
    other, _, _ = kernels.product_sample(*args, *tables, 300, np.uint64(6), 3)
    assert (other != many).any()
    # a node's table and a scan of its weights draw the same entry at the same uniform
    for draw in (TABLES, SCANS, 1, 20):
        same, same_lengths, _ = kernels.product_sample(*args, *tables, 300, np.uint64(5), draw)
        assert (same == many).all() and (same_lengths == lengths).all()


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 10**6), st.booleans(), st.integers(0, 2), st.integers(0, 3))
def test_totals_are_the_nodes_weight_sums(seed, first_order, min_len, extra):
    """totals[t, s, q] = Σ_x prob[s, x] B[t + 1, nxt, dq] (+ the end weight), the total the
    sampler draws against, and G the first-order automaton's gathered continuations."""
    prob, nxt, end, dq, accepting = _random_product(seed, S=4, X=5)
    if first_order:
        nxt = np.ascontiguousarray(np.repeat(nxt[:1], 4, axis=0))
    max_len = min_len + extra
    live = _live(dq, accepting)
    B, scale, totals, G = _backward(prob, nxt, end, dq, accepting, min_len, max_len)
    S, Q = prob.shape[0], dq.shape[0]
    for t in range(max_len + 1):
        for s, q in itertools.product(range(S), range(Q)):
            if not live[q]:
                assert totals[t, s, q] == 0.0
                continue
            e = end[s] * math.exp(-scale[t + 1]) if t < max_len else end[s]
            want = e if t >= min_len and accepting[q] else 0.0
            if t < max_len:
                cont = B[t + 1][nxt[s], dq[q]]
                want += float((prob[s] * cont).sum())
                if first_order:
                    assert (G[t, q] == cont).all()
            assert math.isclose(totals[t, s, q], want, rel_tol=1e-12, abs_tol=1e-300)
            m = totals[t].max()
            if m > 0:
                assert math.isclose(B[t, s, q], totals[t, s, q] / m, rel_tol=1e-15, abs_tol=1e-300)


def test_stream_uniforms_are_uniform_and_deterministic():
    base = kernels.stream_base(np.uint64(3))
    u = np.array([kernels.stream_uniform(base, i, j) for i in range(200) for j in range(100)])
    assert ((u >= 0) & (u < 1)).all() and np.unique(u).size == u.size
    assert kernels.stream_uniform(base, 0, 5) == u[5] and kernels.stream_uniform(base, 1, 0) == u[100]
    counts = np.histogram(u, bins=20, range=(0, 1))[0]
    expected = len(u) / 20
    from scipy.stats import chi2

    assert chi2.sf(((counts - expected) ** 2 / expected).sum(), 19) > 1e-4
    assert abs(np.corrcoef(u[:-1], u[1:])[0, 1]) < 0.03
    assert kernels.stream_base(np.uint64(4)) != base
    assert kernels.stream_seed(2**64 + 5) == np.uint64(5)


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 10**6), st.integers(1, 12))
def test_guide_draw_equals_bisection(seed, k):
    rng = np.random.default_rng(seed)
    w = rng.random(k)
    w[rng.random(k) < 0.3] = 0.0
    w[rng.integers(k)] += 0.5
    if rng.random() < 0.3:
        w[rng.integers(k)] = 1e-300  # a weight below the total's rounding
    cum = np.cumsum(w)
    guide = np.empty(k, dtype=np.int32)
    kernels.guide_fill(cum, 0, k, guide, 0)
    us = np.concatenate([rng.random(200), [0.0, 1.0 - 2.0**-53, 0.5]])
    us = np.concatenate([us, cum[:-1] / cum[-1], np.nextafter(cum[:-1] / cum[-1], 0)])  # on the cut points
    for u in us:
        u = min(float(u), 1.0 - 2.0**-53)
        got = kernels.guide_draw(cum, 0, k, guide, 0, u)
        assert got == kernels._draw_cumulative(cum, 0, k, u)
        assert w[got] > 0


def test_constrained_lm_falls_back_to_the_lattice_sampler():
    """Backward scales too small for the tables' end unit: the lattice's own sampler draws,
    from the same distribution."""
    from varorder.constrain import ConstrainedLM, contains_dfa
    from varorder.lm import AdditiveSmoothing

    lm = AdditiveSmoothing(order=2, alpha=0.5).fit_sentences(["a b c", "a a b", "c b"]).model_
    dfa = contains_dfa([["a"], ["c"]], lm.vocabulary)
    model = ConstrainedLM(lm, dfa, min_length=2, max_length=3)
    words = [w for w in range(lm.vocab_size) if w not in (lm.vocabulary.bos_id, lm.vocabulary.eos_id)]
    weights = {}
    for n in (2, 3):
        for x in itertools.product(words, repeat=n):
            if dfa.accepts(x):
                weights[x] = 10.0 ** float(np.sum(lm.token_log10probs(np.asarray(x, dtype=np.int32))[0]))
    total = sum(weights.values())
    assert math.isclose(math.log(total), model.log_probability, rel_tol=1e-9)
    probs = {x: w / total for x, w in weights.items()}
    assert chi_square_pvalue(Counter(model.sample_ids(5000, seed=1)), probs) > 1e-4
    model._tables_ok = False
    labels, lengths = model.sample_array(5000, seed=1)
    assert chi_square_pvalue(Counter(tuple(int(v) for v in r[:k]) for r, k in zip(labels, lengths)), probs) > 1e-4
