"""Small-input paths give the batch paths' numbers (issue #32).

One sentence takes its own path through the models (one chunk, no sorting or masks, the serial twin of
the feature product, no scipy matrix, no BLAS pinning); a batch of many takes the chunked, parallel one.
Each model's one-sentence answers are checked against the same sentences' answers inside a big batch
(forced onto two threads, so the batch really runs the parallel kernels).
"""

from __future__ import annotations

import numba
import numpy as np
import pytest

from varorder.engine import threads
from varorder.models.crf import CRF
from varorder.models.hmm import HMM
from varorder.models.memm import MEMM

WORDS = [f"w{i}" for i in range(12)]


def _tagged(seed, n, max_len=12):
    rng = np.random.default_rng(seed)
    sentences, tags = [], []
    for _ in range(n):
        length = int(rng.integers(1, max_len + 1))
        ids = rng.integers(0, len(WORDS), length)
        sentences.append([WORDS[i] for i in ids])
        tags.append(["A" if i % 3 == 0 else "B" if i % 3 == 1 else "C" for i in (ids + rng.integers(0, 2, length))])
    return sentences, tags


def _features(sentence):
    return [{"bias": 1.0, "w=" + w: 1.0, "prev=" + (sentence[i - 1] if i else "<s>"): 1.0, "len": len(w) / 3.0}
            for i, w in enumerate(sentence)]


@pytest.fixture
def two_threads():
    before = threads.get_threads()
    threads.set_threads(2)
    yield
    threads.set_threads(before)


def _one_by_one_equals_batch(predict, marginals, X):
    batch_paths, batch_marginals = predict(X), marginals(X)
    for x, path, node in zip(X, batch_paths, batch_marginals):
        assert predict([x]) == [path]
        np.testing.assert_allclose(marginals([x])[0], node, rtol=1e-12, atol=1e-14)


@pytest.mark.skipif(numba.config.NUMBA_NUM_THREADS < 2, reason="needs NUMBA_NUM_THREADS >= 2")
def test_crf_one_sentence_equals_batch(two_threads):
    sentences, tags = _tagged(0, 80)
    X = [_features(s) for s in sentences]
    model = CRF(c2=0.1, max_iterations=8).fit(X, tags)
    test = [_features(s) for s in _tagged(1, 70)[0]]  # 70 sentences, ~450 rows: the parallel product
    _one_by_one_equals_batch(model.predict, model.predict_marginals, test)


def test_hmm_and_memm_one_sentence_equals_batch(two_threads):
    sentences, tags = _tagged(2, 60)
    test = _tagged(3, 50)[0] + [["w1", "unseen", "w2"]]
    hmm = HMM(alpha_emission=0.5).fit(sentences, tags)
    _one_by_one_equals_batch(hmm.predict, hmm.predict_marginals, test)
    memm = MEMM(c2=0.1, max_iterations=8).fit([_features(s) for s in sentences], tags)
    _one_by_one_equals_batch(memm.predict, memm.predict_marginals, [_features(s) for s in test])


def test_one_sentence_path_refuses_bad_input_like_the_batch_path():
    sentences, tags = _tagged(4, 20)
    model = CRF(max_iterations=3).fit([_features(s) for s in sentences], tags)
    for bad in ([[]], [[{"w=w1": float("nan")}]], [["w1"]]):
        with pytest.raises(ValueError):
            model.predict(bad)
        with pytest.raises(ValueError):
            model.predict(bad + [_features(sentences[0])])


def test_rows_skip_unknown_features_like_the_csr_matrix():
    from varorder.models.features import FeatureIndexer, csr_times_dense

    rng = np.random.default_rng(7)
    indexer = FeatureIndexer().fit([[{"a": 1.0, "b": 2.0}, {"c": 0.5}]])
    X = [[{"a": 1.5, "zz": 3.0}, {"yy": float("nan")}, {"c": -2.0, "b": 1.0, "a": 0.25}], [{"b": 4.0}]]
    W = rng.standard_normal((indexer.n_features, 4))
    matrix, lengths = indexer.transform(X)
    rows, rows_lengths = indexer.transform(X, csr=False)
    np.testing.assert_array_equal(lengths, rows_lengths)
    assert (rows.indices == -1).sum() == 2  # the unknown features stay, marked
    np.testing.assert_array_equal(csr_times_dense(rows, W), csr_times_dense(matrix, W))
    np.testing.assert_allclose(csr_times_dense(rows, W), matrix @ W, rtol=1e-15)


def test_tagging_feature_dicts_imports_no_scipy_sparse(tmp_path):
    """A process that loads a CRF and tags feature dicts never imports SciPy's sparse package (issue #32:
    each command's start imports what it needs; scipy.sparse costs ~0.3 CPU s)."""
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    import varorder

    sentences, tags = _tagged(5, 20)
    path = tmp_path / "crf.npz"
    model = CRF(max_iterations=3).fit([_features(s) for s in sentences], tags)
    model.save(path)
    code = ("import json, sys; from varorder.models.crf import CRF; "
            f"print(json.dumps(CRF.load({str(path)!r}).predict(json.loads(sys.argv[1])))); "
            "print('scipy.sparse' in sys.modules)")
    env = dict(os.environ, PYTHONPATH=str(Path(varorder.__file__).parents[1]))
    out = subprocess.run([sys.executable, "-c", code, json.dumps([_features(sentences[0])])], env=env,
                         capture_output=True, text=True, check=True).stdout.splitlines()
    assert json.loads(out[0]) == model.predict([_features(sentences[0])])
    assert out[1] == "False"


# (a nested dict is a group of features, as python-crfsuite reads it: tests/test_models_crfsuite_compat.py)
@pytest.mark.parametrize("value", [[1], [1, 2], None, 1 + 2j])
def test_feature_values_that_are_not_numbers_or_strings_are_refused_by_item(value):
    from varorder.models.features import FeatureIndexer

    indexer = FeatureIndexer().fit([[{"a": 1.0}]])
    with pytest.raises(ValueError, match=r"X\[1\]\[0\]: feature 'b' has value"):
        indexer.transform([[{"a": 1.0}], [{"a": 2.0, "b": value}]], csr=False)


def test_numeric_and_string_feature_values_mix():
    from varorder.models.features import FeatureIndexer, csr_times_dense

    X = [[{"a": 1, "b": True, "c": 2.5}, {"w": "dog", "a": np.float32(0.5)}]]
    indexer = FeatureIndexer().fit(X)
    assert indexer.names_ == ["a", "b", "c", "w:dog"]
    rows, _ = indexer.transform(X, csr=False)
    np.testing.assert_array_equal(csr_times_dense(rows, np.eye(4)), [[1, 1, 2.5, 0], [0.5, 0, 0, 1]])


# -- the chain's small-input paths (one compiled call) and serial routes against the parallel kernels --------


def _chain_case(seed, B, L=7, K=5, ends=True):
    rng = np.random.default_rng(seed)
    E = rng.normal(size=(B, L, K)) * 3.0
    T = rng.normal(size=(K, K))
    T[1, 2] = -np.inf  # a hard zero
    S, F = (rng.normal(size=K), rng.normal(size=K)) if ends else (None, None)
    return E, T, S, F


@pytest.mark.skipif(numba.config.NUMBA_NUM_THREADS < 2, reason="needs NUMBA_NUM_THREADS >= 2")
@pytest.mark.parametrize("B", [1, 5])
@pytest.mark.parametrize("ends", [False, True])
def test_chain_small_paths_equal_the_parallel_kernels(B, ends, monkeypatch):
    """chain.viterbi / log_partition of a few plain sequences take one compiled call (the kernels' serial twins),
    marginals the serial route; each gives the parallel kernels' numbers (two threads) bit for bit."""
    from varorder import chain
    from varorder.engine import chain as engine

    E, T, S, F = _chain_case(B, B, ends=ends)
    before = threads.get_threads()
    try:
        threads.set_threads("auto")
        assert engine.small_viterbi(E, T, S, F) is not None and engine.small_log_partition(E, T, S, F) is not None
        small = chain.viterbi(E, T, S, F), chain.log_partition(E, T, S, F), chain.marginals(E, T, S, F, edges="sum")
        threads.set_threads(2)
        # every engine call on the parallel kernels
        monkeypatch.setattr(engine, "runs_serial", lambda n, work=None: False)
        lengths = np.full(B, E.shape[1])  # lengths given: the checked path
        batch = (chain.viterbi(E, T, S, F, lengths=lengths), chain.log_partition(E, T, S, F, lengths=lengths),
                 chain.marginals(E, T, S, F, lengths=lengths, edges="sum"))
    finally:
        threads.set_threads(before)
    for a, b in zip(small[0] + small[2], batch[0] + batch[2]):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(small[1], batch[1])
    np.testing.assert_allclose(np.exp(small[1]), np.exp(chain.forward(E, T, S, F, semiring="log", )), rtol=1e-12)


@pytest.mark.parametrize("where, value, message", [
    ("E", np.nan, "emissions contains NaN"), ("T", np.inf, r"transitions contains \+inf"),
    ("S", 1e305, "start has a finite potential of magnitude"), ("F", np.nan, "end contains NaN")])
def test_chain_small_paths_refuse_bad_input_like_the_checked_path(where, value, message):
    from varorder import chain

    E, T, S, F = _chain_case(0, 1)
    {"E": E[0, 3], "T": T[2], "S": S, "F": F}[where][1] = value
    for function in (chain.viterbi, chain.log_partition):
        with pytest.raises(ValueError, match=message):
            function(E, T, S, F)
        with pytest.raises(ValueError, match=message):
            function(E, T, S, F, lengths=[E.shape[1]])


def test_chain_small_paths_warn_of_no_path_and_leave_other_inputs_to_the_checked_path():
    from varorder import chain
    from varorder.engine import chain as engine

    E, T, S, F = _chain_case(1, 2)
    E[1, 4] = -np.inf  # sequence 1 has no path
    with pytest.warns(chain.NoPathWarning):
        paths, scores = chain.viterbi(E, T, S, F)
    assert scores[1] == -np.inf and (paths[1] == -1).all() and np.isfinite(scores[0])
    with pytest.warns(chain.NoPathWarning):
        assert chain.log_partition(E, T, S, F)[1] == -np.inf
    # not for the compiled paths: other dtypes, non-contiguous arrays, per-sequence matrices
    E, T, S, F = _chain_case(2, 2)
    for args in ((E.astype(np.float32), T), (E[:, ::2], T), (E, np.asfortranarray(T)), (E, np.stack([T, T])),
                 (E, T, [0.0] * 5)):
        assert engine.small_viterbi(*args) is None and engine.small_log_partition(*args) is None
    paths, scores = chain.viterbi(E.astype(np.float32), T)
    np.testing.assert_array_equal(paths, chain.viterbi(E.astype(np.float32).astype(np.float64), T)[0])


def test_training_on_rows_equals_training_on_the_scipy_matrix():
    """A serial CRF fit builds its design matrix as Rows (no scipy): transpose, empirical counts, objective and
    gradient equal the scipy matrix's bit for bit, with an unknown feature (as min_count drops them)."""
    import scipy.sparse as sp

    from varorder.models.crf import ChainObjective
    from varorder.models.features import FeatureIndexer, label_counts, rows_to_csr, transpose_rows
    from varorder.models.sequences import LabelCodec

    sentences, tags = _tagged(6, 40)
    X = [_features(s) for s in sentences]
    indexer = FeatureIndexer().fit(X)
    X[3] = X[3][:-1] + [{"unseen": 1.0, **X[3][-1]}]  # as after a min_count cut: a feature the vocabulary lacks
    rows, lengths = indexer.transform(X, csr=False)
    matrix, _ = indexer.transform(X)
    assert (rows.indices < 0).sum() == 1
    assert (rows_to_csr(rows) != matrix).nnz == 0
    t = transpose_rows(rows)
    mt = matrix.T.tocsr()
    for a, b in ((t.indptr, mt.indptr), (t.indices, mt.indices), (t.data, mt.data)):
        np.testing.assert_array_equal(a, b)
    codec = LabelCodec.fit(tags)
    gold = codec.encode(tags)
    K = len(codec.classes)
    onehot = sp.csr_matrix((np.ones(gold.size), (np.arange(gold.size), gold)), shape=(gold.size, K))
    np.testing.assert_array_equal(label_counts(rows, gold, K), (mt @ onehot).toarray())
    theta = np.random.default_rng(0).normal(size=(indexer.n_features + K + 2) * K) * 0.3
    f_rows, g_rows = ChainObjective(rows, lengths, gold, K)(theta)
    f_csr, g_csr = ChainObjective(matrix, lengths, gold, K)(theta)
    assert f_rows == f_csr
    np.testing.assert_array_equal(g_rows, g_csr)
