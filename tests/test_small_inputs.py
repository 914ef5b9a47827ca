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


@pytest.mark.parametrize("value", [[1], [1, 2], None, 1 + 2j, {"x": 1}])
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
