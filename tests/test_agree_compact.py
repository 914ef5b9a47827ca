"""The aligner's compact corpus and E-step (edge pair ids searched per shard, streamed encoding, counts accumulated
without per-shard tables and shared by the directions, one summed log table, posteriors added into one
array, tables turned into their logs in place) give what the plain layout gives: exactly, or up to the
order of additions where counts are summed edge by edge."""

from __future__ import annotations

import copy
import pickle
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack

import numpy as np
import pytest

from varorder.agree.align import IBM1, HMMAligner
from varorder.agree.aligner import WordAligner
from varorder.agree.corpus import PairIndex, Vocabulary, encode, encode_bitext, index_corpus, shard_bitext
from varorder.agree.product_em import _estep_many, add_counts, estep_shard
from varorder.io.bitext import iter_bitext, iter_joint, read_bitext, read_joint
from varorder.testing.hostile import write_members

from test_agree_aligner import _synthetic


def _random_pairs(seed, n, e_vocab=300, f_vocab=350):
    rng = np.random.default_rng(seed)
    return [([f"e{w}" for w in rng.integers(0, e_vocab, rng.integers(0, 9))],
             [f"f{w}" for w in rng.integers(0, f_vocab, rng.integers(0, 9))]) for _ in range(n)]


def test_searched_row_ids_equal_key_lookup_ids_with_unknown_words():
    pairs = _random_pairs(1, 900)
    ev, fv = Vocabulary(), Vocabulary()
    shards = shard_bitext(pairs, ev, fv, 200)
    index = index_corpus(shards)
    reference = PairIndex(np.concatenate([s.edge_keys() for s in shards]))
    np.testing.assert_array_equal(index.keys, reference.keys)
    for shard in shards:
        # nothing is kept per edge: the shard's bytes are its token and offset arrays
        assert shard._stored is None and shard.nbytes() == sum(
            a.nbytes for a in (shard.e_ids, shard.e_offsets, shard.f_ids, shard.f_offsets, shard.edge_offsets))
        got = shard.edge_pairs.copy()
        np.testing.assert_array_equal(got, shard.index_pairs(reference).edge_pairs)
    # both lookups ran: some rows are direct maps, the others are searched
    direct_of, maps = index._direct_rows()
    assert 0 < maps.shape[0] < direct_of.size and (direct_of >= 0).sum() == maps.shape[0]
    # new text: unknown words (id -1) and known words that never met in training
    new = _random_pairs(2, 300, e_vocab=400, f_vocab=450)
    for shard in shard_bitext(new, ev, fv, 100, grow=False):
        want = shard.index_pairs(index).edge_pairs.copy()
        assert (want < 0).any() and (want >= 0).any()
        np.testing.assert_array_equal(shard.attach(index).edge_pairs, want)
        with shard.pair_scope():
            np.testing.assert_array_equal(shard.edge_pairs, want)
        # a shard sent to another process carries plain ids
        np.testing.assert_array_equal(pickle.loads(pickle.dumps(shard)).edge_pairs, want)


def test_french_words_past_the_direct_maps_are_absent():
    """A French word seen only beside an empty English side has an id but no pair: past every row's end
    and the direct maps' width, its edges get −1 under a frequent (direct) English word too."""
    pairs = [(["e1", "e2"], [f"f{k}" for k in range(40)]), (["e1"], ["f3"]), ([], ["lonely"])]
    ev, fv = Vocabulary(), Vocabulary()
    index = index_corpus(shard_bitext(pairs, ev, fv, 2))
    direct_of, maps = index._direct_rows()
    assert direct_of[ev.index["e1"]] >= 0 and maps.shape[1] <= fv.index["lonely"]
    shard = shard_bitext([(["e1", "e2", "e9"], ["lonely", "f3", "f39"])], ev, fv, 5, grow=False)[0]
    want = shard.index_pairs(index).edge_pairs.copy()
    np.testing.assert_array_equal(shard.attach(index).edge_pairs, want)
    assert (want == -1).sum() == 5


def test_rows_longer_than_two_bytes_are_searched():
    pairs = [(["e1"], [f"f{k}" for k in range(70000)]), (["e1", "e2"], ["f3", "f69999"])]
    ev, fv = Vocabulary(), Vocabulary()
    shards = shard_bitext(pairs, ev, fv, 1)
    index = index_corpus(shards)
    assert int(np.diff(index.rows()).max()) > 1 << 16
    for shard in shards:
        assert shard.edge_pairs.dtype == np.int32
        got = shard.edge_pairs.copy()
        np.testing.assert_array_equal(got, shard.index_pairs(index).edge_pairs)


def test_streamed_readers_equal_list_readers(tmp_path):
    pairs = _random_pairs(3, 50)
    e, f, joint = tmp_path / "c.e", tmp_path / "c.f", tmp_path / "c.ef"
    e.write_text("".join(" ".join(a) + "\n" for a, _ in pairs))
    f.write_text("".join(" ".join(b) + "\n" for _, b in pairs))
    joint.write_text("".join(f"{' '.join(a)} ||| {' '.join(b)}\n" for a, b in pairs))
    assert list(iter_bitext(e, f)) == read_bitext(e, f) == pairs
    assert list(iter_joint(joint, limit=7)) == read_joint(joint, limit=7) == pairs[:7]


def _fitted(pairs, **kw):
    return WordAligner(ibm1_iterations=3, iterations=3, shard_size=40, **kw).fit(pairs)


def _same_tables(a, b):
    np.testing.assert_array_equal(a.pairs_.keys, b.pairs_.keys)
    for m, n in zip(a.models_, b.models_):
        for name in ("table_", "null_", "jumps_"):
            np.testing.assert_array_equal(getattr(m, name), getattr(n, name))


def test_encoded_bitext_trains_and_aligns_like_token_lists():
    pairs, _ = _synthetic(150, seed=4)
    plain = _fitted(pairs)
    corpus = encode_bitext(iter(pairs), Vocabulary(), Vocabulary(), 40)
    encoded = _fitted(corpus)
    _same_tables(plain, encoded)
    assert encoded.align(corpus) == plain.align(pairs)
    assert encoded.align(corpus, "grow-diag-final-and") == plain.align(pairs, "grow-diag-final-and")
    new = encode_bitext(_synthetic(20, seed=5)[0], encoded.e_vocab_, encoded.f_vocab_, 40, grow=False)
    assert encoded.align(new) == plain.align(_synthetic(20, seed=5)[0])


def _close_tables(a, b):
    np.testing.assert_array_equal(a.pairs_.keys, b.pairs_.keys)
    for m, n in zip(a.models_, b.models_):
        for name in ("table_", "null_", "jumps_"):
            np.testing.assert_allclose(getattr(m, name), getattr(n, name), rtol=1e-9, atol=1e-15)


def test_serial_training_equals_threaded_training():
    """The serial path adds counts edge by edge into one total (shared by the directions in agreement
    modes), sums the directions' logs into one table and runs independent EM one direction at a time;
    executors build per-shard count tables and keep the tables: the same numbers up to the order of
    the additions, and the same alignments."""
    pairs, _ = _synthetic(150, seed=6)
    for training in ("agreement", "independent", "product"):
        serial = _fitted(pairs, training=training)
        with ThreadPoolExecutor(2) as ex:
            threaded = _fitted(pairs, training=training, executor=ex)
        _close_tables(serial, threaded)
        assert all(m.table_ is not None for m in serial.models_)
        assert serial.align(pairs) == threaded.align(pairs)
        np.testing.assert_allclose([o for _, objs in serial.history_ for o in objs],
                                   [o for _, objs in threaded.history_ for o in objs], rtol=1e-12)


def test_accumulated_counts_equal_added_count_tables():
    pairs = _random_pairs(7, 400)
    ev, fv = Vocabulary(), Vocabulary()
    shards = shard_bitext(pairs, ev, fv, 90)
    index = index_corpus(shards)
    rng = np.random.default_rng(7)
    models = []
    for direction, n_target in (("f|e", len(fv)), ("e|f", len(ev))):
        m = IBM1(direction, index, n_target).initialize()
        m.table_ = rng.uniform(0.01, 1.0, len(index))
        models.append(m)
    for mode in ("independent", "domain"):
        want = [None, None]
        for shard in shards:
            counts, _ = estep_shard(models, shard, mode)
            want = [add_counts(t, c) for t, c in zip(want, counts)]
        got, _ = _estep_many(models, shards, mode)
        for g, w in zip(got, want):
            assert g.keys() == w.keys()
            for k in w:  # added edge by edge instead of shard table by shard table
                np.testing.assert_allclose(g[k], w[k], rtol=1e-12, atol=1e-300)
        # the agreement modes hand both directions the same posteriors: one count table serves both
        assert (got[0]["table"] is got[1]["table"]) == (mode == "domain")


def _two_directions(seed, model="hmm"):
    pairs = _random_pairs(seed, 300, e_vocab=40, f_vocab=45)
    ev, fv = Vocabulary(), Vocabulary()
    shards = shard_bitext(pairs, ev, fv, 70)
    index = index_corpus(shards)
    rng = np.random.default_rng(seed)
    models = []
    for direction, n_target in (("f|e", len(fv)), ("e|f", len(ev))):
        m = (HMMAligner(direction, index, n_target, band=4) if model == "hmm" else IBM1(direction, index, n_target))
        m.initialize()
        m.table_ = rng.uniform(0.0, 1.0, len(index)) * (rng.random(len(index)) < 0.9)  # zeros hit the floor
        m.null_ = rng.uniform(0.01, 1.0, n_target)
        models.append(m)
    return shards, models


@pytest.mark.parametrize("model", ["hmm", "ibm1"])
def test_summed_log_table_and_added_posteriors_equal_the_separate_sums_bit_for_bit(model):
    """The agreement E-step's one summed log table (float32) and the second direction adding its
    posteriors into the first one's array give exactly the per-direction logs added up and rounded to
    float32 (the summed floor exact), and the posteriors of those potentials added up."""
    shards, models = _two_directions(8, model)
    with ExitStack() as stack:
        for shard in shards:
            stack.enter_context(shard.pair_scope())
        reference = copy.deepcopy(models)
        sums = [reference[0].shared_log_potentials(s) + reference[1].shared_log_potentials(s) for s in shards]
        want_total = [np.where(s.edge_pairs >= 0, t.astype(np.float32), t) for s, t in zip(shards, sums)]
        assert any((t != u).any() for t, u in zip(want_total, sums))  # the rounding is visible
        want_mu = []
        for s, total in zip(shards, want_total):
            a, b = (m.expected_statistics(s, total) for m in reference)
            want_mu.append((a.shared + b.shared, a.log_normalizer, b.log_normalizer))
        kept = copy.deepcopy(models)  # tables not consumable (executors): the same sums, the tables kept
        for s, total in zip(shards, want_total):
            np.testing.assert_array_equal(type(kept[0]).summed_shared_log_potentials(kept, s), total)
        assert all(m.table_ is not None for m in kept)
        for m in models:
            stack.enter_context(m.consuming_tables())
        for s, total, (mu, z0, z1) in zip(shards, want_total, want_mu):
            got = type(models[0]).summed_shared_log_potentials(models, s)
            np.testing.assert_array_equal(got, total)
            first = models[0].expected_statistics(s, got)
            second = models[1].expected_statistics(s, got, add_shared_to=first.shared)
            assert second.shared is None and (first.log_normalizer, second.log_normalizer) == (z0, z1)
            np.testing.assert_array_equal(first.shared, mu)
        assert all(m.table_ is None for m in models)  # one summed log table is all the E-step holds
        with pytest.raises(RuntimeError, match="consumed"):
            models[1].shared_log_potentials(shards[0])
    with pytest.raises(ValueError, match="edges"):
        models[1].expected_statistics(shards[0], want_total[0], add_shared_to=np.zeros(3))


def test_keep_log_tables_only_decodes_the_same_and_refuses_to_save(tmp_path):
    pairs, _ = _synthetic(120, seed=9)
    aligner = _fitted(pairs)
    def decoded():
        return (aligner.align(pairs), aligner.align(pairs, "grow-diag-final-and"),
                aligner.posteriors(pairs[:5], joint=True), aligner.sentence_scores(pairs))

    want = decoded()
    aligner.keep_log_tables_only()
    assert all(m.table_ is None for m in aligner.models_)
    assert all(m._log_table().dtype == np.float32 for m in aligner.models_)  # half a float64 table each
    got = decoded()
    assert got[:2] == want[:2]
    for g, w in zip(got[2], want[2]):  # log-potentials rounded to float32: ≤ 2⁻²⁴ relative each
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)
    for g, w in zip(got[3], want[3]):
        np.testing.assert_allclose(g, w, rtol=1e-6)
    with pytest.raises(ValueError, match="keep_log_tables_only"):
        aligner.save(tmp_path / "m.npz")


def test_streamed_encoding_equals_per_pair_vocabulary_codes():
    pairs = _random_pairs(10, 230)
    ev, fv = Vocabulary(), Vocabulary()
    trained = shard_bitext(pairs, ev, fv, 100)
    assert [s.n_sentences for s in trained] == [100, 100, 30]
    new = _random_pairs(11, 50, e_vocab=400, f_vocab=450)
    for shards, data, grow in ((trained, pairs, True), (shard_bitext(new, ev, fv, 100, grow=False), new, False)):
        e_ids = np.concatenate([s.e_ids for s in shards])
        f_ids = np.concatenate([s.f_ids for s in shards])
        np.testing.assert_array_equal(e_ids, np.concatenate([ev.encode(e, grow=False) for e, _ in data]))
        np.testing.assert_array_equal(f_ids, np.concatenate([fv.encode(f, grow=False) for _, f in data]))
        assert e_ids.dtype == f_ids.dtype == np.int32
        for s, chunk in zip(shards, [data[k:k + 100] for k in range(0, len(data), 100)]):
            np.testing.assert_array_equal(s.e_lengths, [len(e) for e, _ in chunk])
            np.testing.assert_array_equal(np.diff(s.edge_offsets), [len(e) * len(f) for e, f in chunk])
    assert (np.concatenate([s.e_ids for s in shards]) < 0).any()
    assert encode([], ev, fv).n_sentences == 0 and shard_bitext([], ev, fv, 10) == []


@pytest.mark.skipif(__import__("numba").config.NUMBA_NUM_THREADS < 2, reason="needs NUMBA_NUM_THREADS >= 2")
def test_one_and_two_threads_train_bit_identical_models():
    """Same data, same numbers on any thread count: every parallel kernel of the aligner (IBM 1 E-step,
    gathers, id widening, the chain engine's marginals over enough sequences to split) writes per
    sentence or per edge and reduces in a fixed order."""
    from varorder.engine.threads import get_threads, set_threads

    pairs, _ = _synthetic(400, seed=11)
    policy = get_threads()
    fitted = {}
    try:
        for threads in (1, 2):
            set_threads(threads)
            fitted[threads] = WordAligner(ibm1_iterations=2, iterations=3, shard_size=200).fit(pairs)
    finally:
        set_threads(policy)
    _same_tables(fitted[1], fitted[2])
    assert fitted[1].history_ == fitted[2].history_


@pytest.mark.parametrize("seed", range(4))
def test_pair_rows_hold_the_sorted_keys(seed):
    """The row form (French ids + English row starts) gives back np.unique of the keys, their
    words, and the rank of every key by hashing and by binary search."""
    rng = np.random.default_rng(seed)
    e = rng.integers(0, 40, 300)
    f = rng.integers(0, 2**31 - 1 if seed == 3 else 60, 300)
    keys = (e.astype(np.int64) << 32) | f
    index = PairIndex(keys)
    want = np.unique(keys)
    np.testing.assert_array_equal(index.keys, want)
    np.testing.assert_array_equal(index.e_ids, want >> 32)
    np.testing.assert_array_equal(index.f_ids, want & 0xFFFFFFFF)
    probe = np.concatenate([keys, keys + 1, [(np.int64(41) << 32) | 3]])
    ranks = index.lookup(probe)
    hit = ranks >= 0
    np.testing.assert_array_equal(want[ranks[hit]], probe[hit])
    assert not np.isin(probe[~hit], want).any()
    assert len(PairIndex(np.zeros(0, np.int64))) == 0 and PairIndex(np.zeros(0, np.int64)).keys.size == 0
    with pytest.raises(ValueError, match="32-bit"):
        PairIndex([np.int64(2**31)])


def test_load_rejects_pair_keys_outside_the_vocabularies(tmp_path):
    pairs, _ = _synthetic(60, seed=3)
    model = WordAligner(ibm1_iterations=1, iterations=1).fit(pairs)
    model.save(tmp_path / "m.npz")
    arrays = dict(np.load(tmp_path / "m.npz"))
    n_e, n_f = arrays["e_vocab"].size, arrays["f_vocab"].size
    for bad in ((np.int64(n_e - 1) << 32) | n_f, np.int64(n_e) << 32):
        keys = arrays["pair_keys"].copy()
        keys[-1] = bad
        write_members(tmp_path / "bad.npz", {**arrays, "pair_keys": keys})
        with pytest.raises(ValueError, match="bad.npz.*outside the vocabularies"):
            WordAligner.load(tmp_path / "bad.npz")


def test_own_ibm1_estep_reads_the_log_table_through_pair_ids_bit_for_bit():
    """IBM 1's own E-step reads log τ through the edges' pair ids (no array of gathered potentials):
    exactly the E-step on the gathered potentials; the HMM has no such shortcut."""
    from varorder.agree.product_em import own_estep

    shards, models = _two_directions(12, "ibm1")
    assert HMMAligner.own_expected_statistics is None
    for m in models:
        for s in shards:
            with s.pair_scope():
                want = m.expected_statistics(s, m.shared_log_potentials(s))
                got = own_estep(m, s)
            np.testing.assert_array_equal(got.shared, want.shared)
            for name in ("null", "per_sentence"):
                np.testing.assert_array_equal(got.private[name], want.private[name])
            assert got.log_normalizer == want.log_normalizer


@pytest.mark.parametrize("model", ["ibm1", "hmm"])
def test_both_ibm1_directions_per_shard_train_what_one_after_the_other_trains(model, monkeypatch):
    """Independent IBM 1 runs both directions on a shard inside one pair scope (one search of its pair
    ids): each direction's counts get the same terms in the same order as when one direction ran over
    every shard before the other, so the tables and objectives are bit-identical."""
    pairs, _ = _synthetic(300, seed=13)
    searches = []
    original = PairIndex.edge_pair_ids

    def counted(self, shard):
        searches.append(shard)
        return original(self, shard)

    monkeypatch.setattr(PairIndex, "edge_pair_ids", counted)
    kw = dict(model=model, training="independent", ibm1_iterations=3, iterations=2, shard_size=70)
    joint = WordAligner(**kw).fit(pairs)
    joint_searches = len(searches)
    monkeypatch.setattr(IBM1, "joint_independent_pass", False)
    searches.clear()
    apart = WordAligner(**kw).fit(pairs)
    n_shards = len(joint.encode(pairs))
    assert len(searches) - joint_searches == 3 * n_shards  # one search per shard and IBM 1 iteration saved
    for m, n in zip(joint.models_, apart.models_):
        for name in ("table_", "null_", "jumps_"):
            np.testing.assert_array_equal(getattr(m, name, None), getattr(n, name, None))
    assert joint.history_ == apart.history_
    assert apart.align(pairs) == joint.align(pairs)


@pytest.mark.parametrize("max_length", [None, 9])
def test_pharaoh_text_equals_the_formatted_posterior_links(max_length):
    """The compiled Pharaoh lines of posterior decoding are ``format_line`` of iter_align's links, with
    multi-digit positions, empty pairs (empty lines) and pairs cut by the length guard."""
    from varorder.io.pharaoh import format_line

    rng = np.random.default_rng(14)
    pairs, _ = _synthetic(200, seed=14)
    long_pairs = []
    for k in range(0, 60, 3):  # 11-18 words a side: positions past 9
        e = [w for p in pairs[k:k + 3] for w in p[0]]
        f = [w for p in pairs[k:k + 3] for w in p[1]]
        long_pairs.append((e, f))
    corpus = pairs + long_pairs + [([], ["f1"]), (["e1"], []), ([], [])]
    order = rng.permutation(len(corpus))
    corpus = [corpus[k] for k in order]
    aligner = WordAligner(ibm1_iterations=2, iterations=2, shard_size=50, max_length=max_length).fit(corpus)
    for threshold in (None, 0.0, 0.3, 0.9):
        want = "".join(format_line(links) + "\n" for links in aligner.iter_align(corpus, threshold=threshold))
        assert "".join(aligner.iter_pharaoh_text(corpus, threshold=threshold)) == want
    assert any(len(line.split()) > 10 for line in want.splitlines()) and "\n\n" in want
