"""Issue #35 for the log-linear LM: the full-batch objective of ``polish`` summed over shards of
sentences on a varorder.parallel executor equals the one-piece objective (to rounding), and a
given ``n_shards`` trains the bit-identical model on every backend."""

from __future__ import annotations

import numpy as np
import pytest

from local_clusters import local_cluster
from varorder.lm import Vocabulary
from varorder.loglinear.model import StructuredLogLinear, _FullBatchLoss, _root_params
from varorder.loglinear.trie import build_trie
from varorder.models.sharded import shard_bounds
from varorder.parallel import JoblibExecutor, SerialExecutor

WORDS = [f"w{i}" for i in range(7)]


def corpus(seed=0, n=60):
    rng = np.random.default_rng(seed)
    vocab = Vocabulary(WORDS)
    lengths = rng.integers(0, 9, size=n)
    ids = np.asarray([vocab.index[WORDS[k]] for k in rng.integers(0, len(WORDS), size=lengths.sum())], dtype=np.int64)
    return vocab, ids, lengths


@pytest.mark.parametrize("order,weighted", [(1, False), (3, False), (4, True)])
def test_sharded_objective_equals_the_whole(order, weighted):
    vocab, ids, lengths = corpus(order)
    trie, positions, targets = build_trie(ids, lengths, order, len(vocab), vocab.bos_id, vocab.eos_id)
    features = 1.2 ** trie.param_depth.astype(float) if weighted else None
    root = _root_params(trie)
    whole = _FullBatchLoss(positions, targets, trie, root, vocab.bos_id, features)
    offsets = np.concatenate([[0], np.cumsum(lengths + 1)])
    shards = [slice(int(offsets[a]), int(offsets[b])) for a, b in shard_bounds(lengths + 1, 5)]
    assert len(shards) > 1
    sharded = _FullBatchLoss(positions, targets, trie, root, vocab.bos_id, features, shards=shards,
                             executor=SerialExecutor())
    theta = np.random.default_rng(1).exponential(size=trie.n_params)
    value, grad = whole.value_and_grad(theta)
    value_s, grad_s = sharded.value_and_grad(theta)
    assert value_s == pytest.approx(value, rel=1e-12)
    np.testing.assert_allclose(grad_s, grad, rtol=1e-12, atol=1e-15)
    if order > 1:  # a shard evaluates only its part of the trie
        from varorder.loglinear.model import _CountsShard

        part = _CountsShard(positions[shards[0]], targets[shards[0]], trie, root, vocab.bos_id, features)
        assert len(part.param_sel) < trie.n_params and len(part.ctx_sel) < trie.n_contexts


def _fit(**extra):
    vocab, ids, lengths = corpus(5, n=80)
    return StructuredLogLinear(order=3, penalty="wlt2", lam=0.5, epochs=0, polish=60, polish_tol=0.0,
                               **extra).fit_ids(ids, lengths, vocab)


def test_joblib_shards_train_the_serial_sharded_model_bit_for_bit_and_the_one_piece_model_to_rounding():
    one_piece = _fit()
    serial = _fit(n_shards=4)
    on_joblib = _fit(n_shards=4, n_jobs=2)
    np.testing.assert_array_equal(on_joblib.model_.weights, serial.model_.weights)
    assert on_joblib.polish_history_ == serial.polish_history_
    np.testing.assert_allclose(serial.polish_history_, one_piece.polish_history_, rtol=1e-12)
    np.testing.assert_allclose(serial.model_.weights, one_piece.model_.weights, rtol=1e-10, atol=1e-13)


def test_executor_object_and_bad_settings():
    serial = _fit(n_shards=3)
    again = _fit(n_shards=3, executor=JoblibExecutor(n_jobs=2))
    np.testing.assert_array_equal(again.model_.weights, serial.model_.weights)
    with pytest.raises(ValueError, match="n_shards"):
        _fit(n_shards=0)


def test_dask_local_cluster_trains_the_same_model():
    pytest.importorskip("distributed")
    serial = _fit(n_shards=4)
    with local_cluster(processes=False) as (cluster, client):
        parallel = _fit(n_shards=4, executor=client)
    np.testing.assert_array_equal(parallel.model_.weights, serial.model_.weights)
