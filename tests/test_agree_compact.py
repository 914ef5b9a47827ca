"""The aligner's compact corpus (2-byte edge offsets, streamed encoding, counts accumulated without
per-shard tables, tables turned into their logs in place) gives exactly what the plain layout gives."""

from __future__ import annotations

import pickle
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from varorder.agree.align import IBM1
from varorder.agree.aligner import WordAligner
from varorder.agree.corpus import PairIndex, Vocabulary, encode_bitext, index_corpus, shard_bitext
from varorder.agree.product_em import _estep_many, add_counts, estep_shard
from varorder.io.bitext import iter_bitext, iter_joint, read_bitext, read_joint

from test_agree_aligner import _synthetic


def _random_pairs(seed, n, e_vocab=300, f_vocab=350):
    rng = np.random.default_rng(seed)
    return [([f"e{w}" for w in rng.integers(0, e_vocab, rng.integers(0, 9))],
             [f"f{w}" for w in rng.integers(0, f_vocab, rng.integers(0, 9))]) for _ in range(n)]


def test_row_offsets_equal_binary_search_ids_with_unknown_words():
    pairs = _random_pairs(1, 900)
    ev, fv = Vocabulary(), Vocabulary()
    shards = shard_bitext(pairs, ev, fv, 200)
    index = index_corpus(shards)
    reference = PairIndex(np.concatenate([s.edge_keys() for s in shards]))
    np.testing.assert_array_equal(index.keys, reference.keys)
    for shard in shards:
        assert shard._offsets is not None and shard._offsets.dtype == np.uint16
        got = shard.edge_pairs.copy()
        np.testing.assert_array_equal(got, shard.index_pairs(reference).edge_pairs)
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


def test_rows_too_long_for_two_bytes_keep_int32_ids():
    pairs = [(["e1"], [f"f{k}" for k in range(70000)]), (["e1", "e2"], ["f3", "f69999"])]
    ev, fv = Vocabulary(), Vocabulary()
    shards = shard_bitext(pairs, ev, fv, 1)
    index = index_corpus(shards)
    assert not index.compact_rows()
    for shard in shards:
        assert shard._offsets is None and shard.edge_pairs.dtype == np.int32
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


def test_serial_training_equals_threaded_training_bit_for_bit():
    """The serial path accumulates counts shard by shard without per-shard tables and takes each
    table's log in place; executors build per-shard count tables and keep the tables: same numbers."""
    pairs, _ = _synthetic(150, seed=6)
    serial = _fitted(pairs)
    with ThreadPoolExecutor(2) as ex:
        threaded = _fitted(pairs, executor=ex)
    _same_tables(serial, threaded)
    assert all(m.table_ is not None for m in serial.models_)


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
            for k in w:
                np.testing.assert_array_equal(g[k], w[k])
