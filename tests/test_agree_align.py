"""IBM Model 1 and HMM aligner E-steps against brute-force enumeration of alignments."""

import math

import numpy as np
import pytest

from varorder.agree.align import HMMAligner, IBM1
from varorder.agree.corpus import PairIndex, Vocabulary, encode, index_corpus, shard_bitext
from varorder.agree.product_em import AgreementEM, estep_shard
from varorder.testing import oracle


def _corpus(seed, n=4, max_len=4, vocab=4):
    rng = np.random.default_rng(seed)
    pairs = []
    for _ in range(n):
        I, J = rng.integers(1, max_len + 1, size=2)
        pairs.append(([f"e{w}" for w in rng.integers(0, vocab, I)], [f"f{w}" for w in rng.integers(0, vocab, J)]))
    ev, fv = Vocabulary(), Vocabulary()
    shard = encode(pairs, ev, fv)
    index = PairIndex(shard.edge_keys())
    shard.index_pairs(index)
    return pairs, shard, index, ev, fv


def _models(kind, index, ev, fv, seed):
    rng = np.random.default_rng(seed)
    out = []
    for direction, n_target in (("f|e", len(fv)), ("e|f", len(ev))):
        m = (HMMAligner(direction, index, n_target, null_prob=0.3, max_jump=2) if kind == "hmm"
             else IBM1(direction, index, n_target)).initialize()
        m.table_ = rng.uniform(0.05, 1.0, len(index))
        m.null_ = rng.uniform(0.05, 1.0, n_target)
        if kind == "hmm":
            m.jumps_ = rng.dirichlet(np.ones(m.jumps_.size))
        out.append(m)
    return out


def _log_p(model, src_ids, tgt_ids, a, ev_index, scale=1.0, extra=None):
    """log p(target, a | source) written from the model definition (no chain)."""
    pairs = model.pairs
    S = len(src_ids)
    lp = 0.0
    for t, u in enumerate(a):
        w = tgt_ids[t]
        if u < 0:
            lp += scale * math.log(model.null_[w])
        else:
            e, f = (src_ids[u], w) if model.direction == "f|e" else (w, src_ids[u])
            p = pairs.lookup([(e << 32) | f])[0]
            lp += math.log(model.table_[p])
            if extra is not None:
                lp += math.log(extra.table_[p])
    if isinstance(model, HMMAligner):
        D, p0 = model.max_jump, model.null_prob
        bucket = lambda d: min(max(d, -D), D)  # noqa: E731

        def w(d, pos):  # bucket mass shared by the positions the bucket covers
            width = sum(bucket(v - pos) == bucket(d) for v in range(S))
            return model.jumps_[bucket(d) + D] / width

        pos = -1
        for t, u in enumerate(a):
            if u < 0:
                lp += scale * math.log(p0)
                pos = max(pos, 0)  # NULL first: remembered as position 0
            else:
                lp += scale * (math.log(1 - p0) + math.log(w(u - pos, pos))
                               - math.log(sum(w(v - pos, pos) for v in range(S))))
                pos = u
    else:
        lp += scale * T_prior(S, len(tgt_ids))
    return lp


def T_prior(S, T):
    return -T * math.log(S + 1)


def _check(shard, pairs, ev, fv, model, stats, scale=1.0, extra=None):
    total = 0.0
    for s, (e, f) in enumerate(pairs):
        e_ids, f_ids = [ev.index[w] for w in e], [fv.index[w] for w in f]
        src, tgt = (e_ids, f_ids) if model.direction == "f|e" else (f_ids, e_ids)
        logz, edge, null = oracle.alignment_posteriors(
            len(src), len(tgt), lambda a: _log_p(model, src, tgt, a, ev, scale, extra))
        block = stats.shared[shard.edge_offsets[s]:shard.edge_offsets[s + 1]].reshape(len(e), len(f))
        want = edge if model.direction == "f|e" else edge.T
        np.testing.assert_allclose(block, want, atol=1e-10)
        off = shard.f_offsets if model.direction == "f|e" else shard.e_offsets
        np.testing.assert_allclose(stats.private["null"][off[s]:off[s + 1]], null, atol=1e-10)
        total += logz
    assert stats.log_normalizer == pytest.approx(total, rel=1e-10)


@pytest.mark.parametrize("kind", ["ibm1", "hmm"])
@pytest.mark.parametrize("seed", range(3))
def test_each_direction_matches_enumeration(kind, seed):
    pairs, shard, index, ev, fv = _corpus(seed)
    for model in _models(kind, index, ev, fv, seed):
        stats = model.expected_statistics(shard, model.shared_log_potentials(shard))
        _check(shard, pairs, ev, fv, model, stats)


@pytest.mark.parametrize("kind", ["ibm1", "hmm"])
@pytest.mark.parametrize("seed", range(3))
def test_domain_estep_is_normalized_product_on_own_domain(kind, seed):
    """E(b₁ + b₂, Z_m): q_m(a) ∝ p_m(a) · Π_{links} τ_other, enumerated over Z_m."""
    pairs, shard, index, ev, fv = _corpus(seed + 10)
    models = _models(kind, index, ev, fv, seed)
    total = models[0].shared_log_potentials(shard) + models[1].shared_log_potentials(shard)
    for m, other in ((models[0], models[1]), (models[1], models[0])):
        _check(shard, pairs, ev, fv, m, m.expected_statistics(shard, total), extra=other)


@pytest.mark.parametrize("seed", range(3))
def test_parameter_scaled_estep_matches_enumeration(seed):
    pairs, shard, index, ev, fv = _corpus(seed + 20)
    m = _models("hmm", index, ev, fv, seed)[0]
    stats = m.expected_statistics(shard, 2 * m.shared_log_potentials(shard), private_scale=2.0)
    twin = HMMAligner(m.direction, index, m.n_target_words, m.null_prob, m.max_jump).initialize()
    twin.table_, twin.null_, twin.jumps_ = m.table_, m.null_, m.jumps_
    _check(shard, pairs, ev, fv, m, stats, scale=2.0, extra=twin)


def test_hmm_viterbi_matches_enumeration():
    pairs, shard, index, ev, fv = _corpus(3, n=5)
    for model in _models("hmm", index, ev, fv, 3):
        got = model.viterbi(shard)
        for s, (e, f) in enumerate(pairs):
            e_ids, f_ids = [ev.index[w] for w in e], [fv.index[w] for w in f]
            src, tgt = (e_ids, f_ids) if model.direction == "f|e" else (f_ids, e_ids)
            import itertools
            best = max(itertools.product(range(-1, len(src)), repeat=len(tgt)),
                       key=lambda a: _log_p(model, src, tgt, a, ev))
            want = {((u, t) if model.direction == "f|e" else (t, u)) for t, u in enumerate(best) if u >= 0}
            assert got[s] == want


@pytest.mark.parametrize("mode", ["independent", "domain", "product"])
def test_training_runs_and_independent_ibm1_likelihood_increases(mode):
    pairs, shard, index, ev, fv = _corpus(1, n=30, max_len=5, vocab=6)
    models = [IBM1("f|e", index, len(fv)).initialize(), IBM1("e|f", index, len(ev)).initialize()]
    est = AgreementEM(submodels=models, mode=mode, n_iter=5).fit([shard])
    assert len(est.objectives_) == 5
    if mode in ("independent", "domain"):
        assert np.all(np.diff(est.objectives_) >= -1e-9)
    for m in models:
        assert np.isfinite(m.table_).all()


def test_domain_counts_are_averaged_edge_posteriors():
    pairs, shard, index, ev, fv = _corpus(4)
    models = _models("hmm", index, ev, fv, 4)
    counts, _ = estep_shard(models, shard, "domain")
    total = models[0].shared_log_potentials(shard) + models[1].shared_log_potentials(shard)
    mean = 0.5 * (models[0].expected_statistics(shard, total).shared + models[1].expected_statistics(shard, total).shared)
    want = np.bincount(shard.edge_pairs, weights=mean, minlength=len(index))
    for c in counts:
        np.testing.assert_allclose(c["table"], want, atol=1e-12)


def test_empty_sides():
    """A word facing an empty sentence is NULL-generated with probability 1 in both models."""
    pairs = [([], ["f1", "f2"]), (["e1"], []), (["e1", "e2"], ["f1"])]
    ev, fv = Vocabulary(), Vocabulary()
    shard = encode(pairs, ev, fv)
    index = PairIndex(shard.edge_keys())
    shard.index_pairs(index)
    for direction, n_target in (("f|e", len(fv)), ("e|f", len(ev))):
        ibm1 = IBM1(direction, index, n_target).initialize()
        hmm = HMMAligner(direction, index, n_target).initialize().copy_tables_from(ibm1)
        empty = encode(pairs[:2], ev, fv)
        empty.index_pairs(index)
        a = ibm1.expected_statistics(empty, ibm1.shared_log_potentials(empty))
        b = hmm.expected_statistics(empty, hmm.shared_log_potentials(empty))
        assert a.log_normalizer == pytest.approx(b.log_normalizer, rel=1e-12)
        np.testing.assert_allclose(a.private["null"], 1.0)
        np.testing.assert_allclose(b.private["null"], 1.0)


def test_hmm_batches_hold_one_source_length():
    """E-step batches hold one source length S (K = 2S states), so one (K, K) matrix serves them all."""
    pairs, shard, index, ev, fv = _corpus(7, n=40, max_len=6)
    for model in _models("hmm", index, ev, fv, 7):
        src_len = np.diff(shard.e_offsets if model.direction == "f|e" else shard.f_offsets)
        shared = model.shared_log_potentials(shard)
        batches = list(model._chains(shard, shared, 1.0))
        assert sorted(np.concatenate([s for s, *_ in batches])) == list(range(len(pairs)))
        for sents, E, trans, start, lengths in batches:
            assert np.unique(src_len[sents]).size == 1
            assert E.shape[2] == trans.shape[0] == trans.shape[1] == start.size == 2 * src_len[sents[0]]


@pytest.mark.parametrize("kind", ["ibm1", "hmm"])
def test_batched_estep_equals_one_sentence_at_a_time(kind):
    """Many sentences per batch (padding, shared transitions) give each sentence's own E-step result."""
    pairs, shard, index, ev, fv = _corpus(11, n=60, max_len=6, vocab=5)
    for model in _models(kind, index, ev, fv, 11):
        total = model.shared_log_potentials(shard) + 0.5
        batched = model.expected_statistics(shard, total, private_scale=1.5)
        logz = 0.0
        for s in range(len(pairs)):
            one = encode(pairs[s:s + 1], ev, fv, grow=False).index_pairs(index)
            lo, hi = shard.edge_offsets[s], shard.edge_offsets[s + 1]
            alone = model.expected_statistics(one, total[lo:hi], private_scale=1.5)
            np.testing.assert_allclose(batched.shared[lo:hi], alone.shared, atol=1e-12)
            off = shard.f_offsets if model.direction == "f|e" else shard.e_offsets
            np.testing.assert_allclose(batched.private["null"][off[s]:off[s + 1]], alone.private["null"], atol=1e-12)
            if kind == "hmm":
                alone_jumps = alone.private["jumps"]
                logz += alone.log_normalizer
                jumps = alone_jumps if s == 0 else jumps + alone_jumps
        if kind == "hmm":
            np.testing.assert_allclose(batched.private["jumps"], jumps, atol=1e-10)
            assert batched.log_normalizer == pytest.approx(logz, rel=1e-12)


def test_index_corpus_matches_sorting_and_lookup():
    """The hashed one-pass indexing equals PairIndex(sorted keys) + binary-search lookup, across
    shards and through several table growths (far more than 2^15 distinct pairs)."""
    rng = np.random.default_rng(5)
    pairs = [([f"e{w}" for w in rng.integers(0, 600, rng.integers(0, 10))],
              [f"f{w}" for w in rng.integers(0, 700, rng.integers(0, 10))]) for _ in range(5000)]
    ev, fv = Vocabulary(), Vocabulary()
    shards = shard_bitext(pairs, ev, fv, 700)
    index = index_corpus(shards)
    reference = PairIndex(np.concatenate([s.edge_keys() for s in shards]))
    assert len(reference) > 1 << 16
    np.testing.assert_array_equal(index.keys, reference.keys)
    for shard in shards:
        hashed = shard.edge_pairs.copy()
        np.testing.assert_array_equal(hashed, shard.index_pairs(reference).edge_pairs)
