"""MEMM: folded-chain equivalence, conjoined lattice decoding vs brute force, MLE, label bias."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy.special import logsumexp

from varorder import chain
from varorder.models.crf import CRF
from varorder.models.memm import MEMM, label_bias_corpus
from varorder.models.sequences import ChunkPlan


def _random_memm(rng, K, F, conjoin):
    model = MEMM(conjoin_previous=conjoin)
    model.classes_ = list(range(K))
    model.feature_names_ = None
    model.n_features_in_ = F
    model._indexer = None
    model.emission_weights_ = rng.normal(size=((K + 1) * F if conjoin else F, K))
    model.transition_weights_ = rng.normal(size=(K, K))
    model.start_weights_ = rng.normal(size=K)
    return model


def _brute_log_prob(model, x, labels):
    """Σₜ log p(yₜ | yₜ₋₁, xₜ) straight from the definition."""
    K, F = len(model.classes_), model.n_features_in_
    total, prev = 0.0, K
    for t, j in enumerate(labels):
        block = model.emission_weights_[prev * F:(prev + 1) * F] if model.conjoin_previous else model.emission_weights_
        logits = x[t] @ block + (model.start_weights_ if prev == K else model.transition_weights_[prev])
        total += logits[j] - logsumexp(logits)
        prev = j
    return total


@pytest.mark.parametrize("conjoin", [False, True])
@pytest.mark.parametrize("seed", [0, 1])
def test_sequence_probabilities_viterbi_and_marginals_match_brute_force(conjoin, seed):
    rng = np.random.default_rng(seed)
    K, F = 3, 4
    model = _random_memm(rng, K, F, conjoin)
    X = [rng.normal(size=(n, F)) for n in (1, 3, 4)]
    predicted = model.predict(X)
    marginals = model.predict_marginals(X)
    for x, best, node in zip(X, predicted, marginals):
        paths = list(itertools.product(range(K), repeat=len(x)))
        log_probs = np.array([_brute_log_prob(model, x, p) for p in paths])
        assert logsumexp(log_probs) == pytest.approx(0.0, abs=1e-10)  # locally normalised
        got = model.sequence_log_probability([x] * len(paths), [list(p) for p in paths])
        np.testing.assert_allclose(got, log_probs, atol=1e-10)
        assert tuple(best) == paths[int(np.argmax(log_probs))]
        expected_node = np.zeros((len(x), K))
        for p, lp in zip(paths, log_probs):
            expected_node[np.arange(len(x)), p] += np.exp(lp)
        np.testing.assert_allclose(node, expected_node, atol=1e-10)


def test_folded_chain_has_zero_log_partition():
    rng = np.random.default_rng(3)
    model = _random_memm(rng, 4, 5, conjoin=False)
    X = [rng.normal(size=(n, 5)) for n in rng.integers(1, 9, size=12)]
    import scipy.sparse as sp

    matrix = sp.csr_matrix(np.vstack(X))
    plan = ChunkPlan([len(x) for x in X])
    emissions, T, start = model.folded_chain(matrix, plan)
    for seq_ids, lengths, flat_index, _ in plan.chunks:
        np.testing.assert_allclose(chain.log_partition(emissions[flat_index], T, start, None, lengths), 0.0,
                                   atol=1e-10)


def test_conjoined_training_recovers_empirical_conditionals():
    # One-hot letter features conjoined with the previous label make each local model a
    # saturated multinomial: the (nearly) unregularised MLE is the empirical conditional.
    X, y = label_bias_corpus(n_rib=3, n_rob=2)
    model = MEMM(c2=1e-6, max_iterations=500, conjoin_previous=True).fit(X, y)
    (marginals,) = model.predict_marginals([X[0]])
    r1, r2 = model.classes_.index("r1"), model.classes_.index("r2")
    assert marginals[0, r1] == pytest.approx(0.6, abs=1e-3)
    assert marginals[0, r2] == pytest.approx(0.4, abs=1e-3)


def test_label_bias_memm_prefers_wrong_path_crf_right_one():
    X, y = label_bias_corpus(n_rib=3, n_rob=2)
    rob, rob_tags, rib_tags = X[-1], y[-1], y[0]
    memm = MEMM(c2=0.01, max_iterations=500, conjoin_previous=True).fit(X, y)
    crf = CRF(c2=0.01, max_iterations=500).fit(X, y)
    assert memm.predict([rob]) == [rib_tags]  # ignores the 'o'
    assert crf.predict([rob]) == [rob_tags]
    wrong, right = memm.sequence_log_probability([rob, rob], [rib_tags, rob_tags])
    assert wrong > right
    assert memm.score(X, y) < 1.0 and crf.score(X, y) == 1.0


def test_save_load_round_trip(tmp_path):
    X, y = label_bias_corpus()
    for conjoin in (False, True):
        model = MEMM(c2=0.1, conjoin_previous=conjoin).fit(X, y)
        model.save(tmp_path / "memm.npz")
        loaded = MEMM.load(tmp_path / "memm.npz")
        assert loaded.predict(X) == model.predict(X)
        assert loaded.conjoin_previous == conjoin
    with pytest.raises(ValueError, match="holds a 'MEMM' model, not a 'CRF'"):
        CRF.load(tmp_path / "memm.npz")
