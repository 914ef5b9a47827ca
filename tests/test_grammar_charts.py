"""DMV, CCM and their product on the hypergraph engine against enumeration of all projective
trees / binary bracketings (sentences of length ≤ 5)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from varorder.grammar.ccm import CCM, split_prior
from varorder.grammar.dmv import DMV
from varorder.grammar.shard import TreeShard, bracket_estep, decode, lexicalized_estep
from varorder.testing import oracle

T = 3


def _random_dmv(rng):
    m = DMV(T)
    m.root_ = rng.dirichlet(np.ones(T))
    m.stop_ = rng.uniform(0.05, 0.95, size=(T, 2, 2))
    m.choose_ = rng.dirichlet(np.ones(T), size=(T, 2))
    return m


def _dmv_score(m, tags, heads):
    """log p(x, z) of the DMV written directly from its generative story (K&M 2004, §3)."""
    n = len(tags)
    s = 0.0
    for h in range(n):
        if heads[h] == -1:
            s += math.log(m.root_[tags[h]])
        for d, deps in ((0, sorted(a for a in range(n) if heads[a] == h and a > h)),
                        (1, sorted((a for a in range(n) if heads[a] == h and a < h), reverse=True))):
            adj = 1
            for a in deps:
                s += math.log(1 - m.stop_[tags[h], d, adj]) + math.log(m.choose_[tags[h], d, tags[a]])
                adj = 0
            s += math.log(m.stop_[tags[h], d, adj])
    return s


def _yield(heads, h):
    words = [h]
    for a in range(len(heads)):
        if heads[a] == h:
            words += _yield(heads, a)
    return words


def _bracketing_of_tree(heads):
    """Spans built by the derivation: right dependents innermost first, then left ones."""
    n = len(heads)
    spans = set()
    for h in range(n):
        spans.add((h, h + 1))
        end = h + 1
        for a in sorted(a for a in range(n) if heads[a] == h and a > h):
            end = max(_yield(heads, a)) + 1
            spans.add((h, end))
        start = h
        for a in sorted((a for a in range(n) if heads[a] == h and a < h), reverse=True):
            start = min(_yield(heads, a))
            spans.add((start, end))
    return frozenset(spans)


def _random_ccm(rng, shard):
    m = CCM(T, smoothing=(0.0, 0.0))
    m.build_vocabulary([shard])
    m.yield_probs_ = rng.dirichlet(np.ones(len(m.yields_)), size=2).T.copy()
    m.yield_probs_[0] = 0.0
    m.yield_probs_ /= m.yield_probs_.sum(axis=0)
    m.context_probs_ = rng.dirichlet(np.ones((T + 1) ** 2), size=2).T.copy()
    return m


def _ccm_score(m, tags, spans):
    """log p(x, B) of the CCM written directly (K&M 2002): prior × Π over every span
    (with ``m.empty_spans``, also the distituent context of every empty span [i, i))."""
    n = len(tags)
    s = -math.log(math.comb(2 * (n - 1), n - 1) / n)
    if m.empty_spans:
        padded = [T] + list(tags) + [T]
        s += sum(math.log(m.context_probs_[padded[i] * (T + 1) + padded[i + 1], 0]) for i in range(n + 1))
    for i in range(n):
        for j in range(i + 1, n + 1):
            label = int((i, j) in spans)
            y = m._yield_index[np.asarray(tags[i:j], dtype=np.int64).tobytes()]
            left = tags[i - 1] if i > 0 else T
            right = tags[j] if j < n else T
            s += math.log(m.yield_probs_[y, label]) + math.log(m.context_probs_[left * (T + 1) + right, label])
    return s


def _sentences(rng):
    return [rng.integers(0, T, size=n) for n in (1, 2, 3, 4, 5, 5)]


@pytest.mark.parametrize("seed", range(3))
def test_dmv_chart_matches_enumeration_of_projective_trees(seed):
    rng = np.random.default_rng(seed)
    m = _random_dmv(rng)
    sentences = _sentences(rng)
    shard = TreeShard(sentences, T)
    b = m.shared_log_potentials(shard)
    stats = lexicalized_estep(shard, b)
    heads_hat, spans_hat = decode(shard, b)
    logz = 0.0
    for k, tags in enumerate(sentences):
        trees = oracle.projective_trees(len(tags))
        assert len(set(_bracketing_of_tree(z) for z in trees)) <= len(trees)
        enum = [(z, _dmv_score(m, tags, z)) for z in trees]
        logz += oracle.log_partition(enum)
        assert tuple(heads_hat[k]) in oracle.argmax_paths(enum, tol=1e-9)
        assert spans_hat[k] == _bracketing_of_tree(tuple(heads_hat[k]))
        # span posteriors of the derivation's bracketing
        want = np.zeros(shard.span_offsets[k + 1] - shard.span_offsets[k])
        ids = {(int(i), int(j)): s for s, (i, j) in enumerate(zip(
            shard.span_start[shard.span_offsets[k]:shard.span_offsets[k + 1]],
            shard.span_end[shard.span_offsets[k]:shard.span_offsets[k + 1]]))}
        for z, p in oracle.probabilities(enum).items():
            for span in _bracketing_of_tree(z):
                want[ids[span]] += p
        _, _, mu_spans = shard.split(stats.shared)
        np.testing.assert_allclose(mu_spans[shard.span_offsets[k]:shard.span_offsets[k + 1]], want, atol=1e-9)
    assert stats.log_normalizer == pytest.approx(logz, rel=1e-10)


def test_dmv_expected_counts_match_enumeration():
    rng = np.random.default_rng(7)
    m = _random_dmv(rng)
    tags = np.array([0, 2, 1, 2])
    shard = TreeShard([tags], T)
    counts = m.counts(shard, m.expected_statistics(shard, m.shared_log_potentials(shard)).shared, None)["dmv"]
    enum = [(z, _dmv_score(m, tags, z)) for z in oracle.projective_trees(4)]
    want_choose = np.zeros((T, 2, T))
    want_root = np.zeros(T)
    for z, p in oracle.probabilities(enum).items():
        for a, h in enumerate(z):
            if h < 0:
                want_root[tags[a]] += p
            else:
                want_choose[tags[h], int(a < h), tags[a]] += p
    np.testing.assert_allclose(counts[:T], want_root, atol=1e-9)
    np.testing.assert_allclose(counts[9 * T:].reshape(T, 2, T), want_choose, atol=1e-9)
    # each word decides to stop exactly once per side
    stops = counts[T:9 * T].reshape(T, 2, 2, 2)[..., 0].sum(axis=2)
    np.testing.assert_allclose(stops, np.array([[np.sum(tags == t)] * 2 for t in range(T)]), atol=1e-9)


@pytest.mark.parametrize("seed,empty_spans", [(0, False), (1, False), (2, False), (3, True), (4, True)])
def test_ccm_chart_matches_enumeration_of_bracketings(seed, empty_spans):
    rng = np.random.default_rng(seed)
    sentences = _sentences(rng)
    shard = TreeShard(sentences, T)
    m = _random_ccm(rng, shard)
    m.empty_spans = empty_spans
    b = m.shared_log_potentials(shard)
    stats = bracket_estep(shard, b)
    _, spans_hat = decode(shard, b, chart="brackets")
    logz = 0.0
    _, _, mu = shard.split(stats.shared)
    for k, tags in enumerate(sentences):
        n = len(tags)
        enum = [(B, _ccm_score(m, list(tags), B)) for B in oracle.binary_bracketings(0, n)]
        logz += oracle.log_partition(enum)
        assert frozenset(spans_hat[k]) in oracle.argmax_paths(enum, tol=1e-9)
        lo = shard.span_offsets[k]
        for s in range(lo, shard.span_offsets[k + 1]):
            span = (int(shard.span_start[s]), int(shard.span_end[s]))
            want = sum(p for B, p in oracle.probabilities(enum).items() if span in B)
            assert mu[s] == pytest.approx(want, abs=1e-9)
    assert stats.log_normalizer == pytest.approx(logz, rel=1e-10)


@pytest.mark.parametrize("seed", range(3))
def test_product_chart_matches_enumeration_of_tree_pairs(seed):
    """Σ_z p_DMV(x, z) p_CCM(x, B(z)) over projective trees z, and the product's Viterbi tree."""
    rng = np.random.default_rng(seed)
    sentences = _sentences(rng)
    shard = TreeShard(sentences, T)
    dmv = _random_dmv(rng)
    ccm = _random_ccm(rng, shard)
    ccm.domain = "projective-trees"
    b = dmv.shared_log_potentials(shard) + ccm.shared_log_potentials(shard)
    stats = ccm.expected_statistics(shard, b)
    heads_hat, _ = decode(shard, b)
    logz = 0.0
    for k, tags in enumerate(sentences):
        enum = [(z, _dmv_score(dmv, tags, z) + _ccm_score(ccm, list(tags), _bracketing_of_tree(z)))
                for z in oracle.projective_trees(len(tags))]
        logz += oracle.log_partition(enum)
        assert tuple(heads_hat[k]) in oracle.argmax_paths(enum, tol=1e-9)
    assert stats.log_normalizer == pytest.approx(logz, rel=1e-10)


def test_ccm_empty_spans_add_distituent_context_counts():
    """Expected context counts with empty spans = without them + one distituent count per empty span."""
    rng = np.random.default_rng(11)
    sentences = _sentences(rng)
    shard = TreeShard(sentences, T)
    m = _random_ccm(rng, shard)
    counts = {}
    for flag in (False, True):
        m.empty_spans = flag
        b = m.shared_log_potentials(shard)
        counts[flag] = m.counts(shard, bracket_estep(shard, b).shared, None)
    want = counts[False]["contexts"].copy()
    for tags in sentences:
        padded = [T] + list(tags) + [T]
        for i in range(len(tags) + 1):
            want[padded[i] * (T + 1) + padded[i + 1], 0] += 1
    np.testing.assert_allclose(counts[True]["contexts"], want, atol=1e-9)
    np.testing.assert_allclose(counts[True]["yields"], counts[False]["yields"], atol=1e-9)


def test_split_prior_is_the_uniform_split_distribution():
    for n in range(1, 6):
        p = split_prior(n)
        # every binary tree has n − 1 internal spans + n leaves: expected constituents = 2n − 1
        assert p.sum() == pytest.approx(2 * n - 1)
    # n = 3: both trees have probability 1/2
    assert split_prior(3).tolist() == pytest.approx([1, 1, 1, 0.5, 0.5, 1])


def test_shard_rejects_bad_tags():
    with pytest.raises(ValueError, match="outside"):
        TreeShard([np.array([0, 5])], 3)
    with pytest.raises(ValueError, match="non-empty"):
        TreeShard([np.array([], dtype=int)], 3)
