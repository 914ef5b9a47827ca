"""Factor graphs and SampleRank: incremental vs full scores, samplers against exact probabilities
(engine marginals and brute-force enumeration), annealed MAP against Viterbi / enumeration,
SampleRank's update rule against an independent ranking check, recovery of a planted model,
the estimator's persistence and input errors."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from varorder import chain
from varorder.factorgraph import FactorGraph, ParameterLayout, SampleRankTagger, document_ids, full_score
from varorder.factorgraph import kernels, repeated_key_pairs
from varorder.testing import oracle


def _random_graph(rng, n_seq=3, max_len=6, F=5, K=3, n_skip=4, skip=True, second_order=True):
    lengths = rng.integers(1, max_len + 1, size=n_seq)
    N = int(lengths.sum())
    X = sp.random(N, F, density=0.5, random_state=np.random.RandomState(int(rng.integers(1 << 30))),
                  data_rvs=lambda n: rng.normal(size=n), format="csr")
    pairs = set()
    for _ in range(n_skip if N > 1 else 0):
        i, j = sorted(rng.choice(N, size=2, replace=False))
        pairs.add((int(i), int(j)))
    graph = FactorGraph(X, lengths, np.array(sorted(pairs), dtype=np.int64).reshape(-1, 2))
    layout = ParameterLayout(F, K, skip=skip, second_order=second_order)
    return graph, layout


def _features(graph, layout, y):
    """φ(y) by evaluating the (linear) full score at each unit vector."""
    eye = np.eye(layout.n_params)
    return np.array([full_score(graph, layout, eye[i], y) for i in range(layout.n_params)])


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("skip,second_order", [(False, False), (True, False), (False, True), (True, True)])
def test_incremental_scores_equal_full_rescore(seed, skip, second_order):
    rng = np.random.default_rng(seed)
    graph, layout = _random_graph(rng, skip=skip, second_order=second_order)
    theta = rng.normal(size=layout.n_params)
    G, L = graph.kernel_arrays(), layout.kernel_layout()
    K = layout.n_labels
    y = rng.integers(0, K, size=graph.n_tokens)
    score = full_score(graph, layout, theta, y)
    for _ in range(40):
        t, k = int(rng.integers(graph.n_tokens)), int(rng.integers(K))
        local = kernels.local_scores(t, y, theta, G, L)
        delta = local[k] - local[y[t]]
        y[t] = k
        new_score = full_score(graph, layout, theta, y)
        assert new_score - score == pytest.approx(delta, abs=1e-9)
        score = new_score


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2 ** 31 - 1), n_seq=st.integers(1, 4), max_len=st.integers(1, 7), K=st.integers(2, 5),
       n_skip=st.integers(0, 8), skip=st.booleans(), second_order=st.booleans())
def test_incremental_scores_equal_full_rescore_on_generated_graphs(seed, n_seq, max_len, K, n_skip, skip, second_order):
    rng = np.random.default_rng(seed)
    graph, layout = _random_graph(rng, n_seq=n_seq, max_len=max_len, K=K, n_skip=n_skip, skip=skip,
                                  second_order=second_order)
    theta = rng.normal(size=layout.n_params)
    y = rng.integers(0, K, size=graph.n_tokens)
    for t in range(graph.n_tokens):
        local = kernels.local_scores(t, y, theta, graph.kernel_arrays(), layout.kernel_layout())
        for k in range(K):
            changed = y.copy()
            changed[t] = k
            assert full_score(graph, layout, theta, changed) - full_score(graph, layout, theta, y) == \
                pytest.approx(local[k] - local[y[t]], abs=1e-9)


def _tiny_chain(rng, n=4, K=3, scale=1.0):
    """One sequence whose token t has the single feature t: W's rows are the emissions."""
    graph = FactorGraph(sp.identity(n, format="csr"), np.array([n]))
    layout = ParameterLayout(n, K)
    theta = scale * rng.normal(size=layout.n_params)
    return graph, layout, theta


def _sample_counts(graph, layout, theta, kind, seed, n_samples=6000, thin=4):
    G, L = graph.kernel_arrays(), layout.kernel_layout()
    y = np.zeros(graph.n_tokens, dtype=np.int64)
    out = np.empty((n_samples, graph.n_tokens), dtype=np.int64)
    rows = kernels.sample_sweeps(y, theta, G, L, n_samples * thin + 50 * thin, thin, 1.0, kind, seed, out)
    assert rows == n_samples
    return out


@pytest.mark.parametrize("kind", [kernels.GIBBS, kernels.METROPOLIS])
def test_sampler_matches_engine_marginals_and_exact_joint_on_a_chain(kind):
    rng = np.random.default_rng(11)
    graph, layout, theta = _tiny_chain(rng)
    blocks = layout.unpack(theta)
    samples = _sample_counts(graph, layout, theta, kind, seed=3)
    n, K = graph.n_tokens, layout.n_labels
    # node marginals from the engine (the exact CRF marginals)
    node, _ = chain.marginals(blocks["W"][None], blocks["T"], blocks["start"], blocks["end"], edges=False)
    for t in range(n):
        counts = {(k,): int((samples[:, t] == k).sum()) for k in range(K)}
        probs = {(k,): float(node[0, t, k]) for k in range(K)}
        assert oracle.chi_square_pvalue(counts, probs) > 1e-3
    # the whole joint against brute-force enumeration
    probs = oracle.probabilities(oracle.chain_paths(blocks["W"], blocks["T"], blocks["start"], blocks["end"]))
    counts = {}
    for row in map(tuple, samples.tolist()):
        counts[row] = counts.get(row, 0) + 1
    assert oracle.chi_square_pvalue(counts, probs) > 1e-3


def test_sampler_fails_goodness_of_fit_against_wrong_probabilities():
    """The χ² check has power: the same samples reject a chain with perturbed transitions."""
    rng = np.random.default_rng(11)
    graph, layout, theta = _tiny_chain(rng)
    blocks = layout.unpack(theta)
    samples = _sample_counts(graph, layout, theta, kernels.GIBBS, seed=3)
    wrong = oracle.probabilities(oracle.chain_paths(blocks["W"], blocks["T"] + np.eye(3), blocks["start"],
                                                    blocks["end"]))
    counts = {}
    for row in map(tuple, samples.tolist()):
        counts[row] = counts.get(row, 0) + 1
    assert oracle.chi_square_pvalue(counts, wrong) < 1e-6


def _loopy_joint(graph, layout, theta):
    K = layout.n_labels
    configs = list(itertools.product(range(K), repeat=graph.n_tokens))
    scores = np.array([full_score(graph, layout, theta, np.array(c)) for c in configs])
    p = np.exp(scores - scores.max())
    p /= p.sum()
    return configs, scores, p


@pytest.mark.parametrize("kind", [kernels.GIBBS, kernels.METROPOLIS])
def test_sampler_matches_enumeration_on_a_loopy_graph_with_skip_and_window_factors(kind):
    rng = np.random.default_rng(5)
    graph = FactorGraph(sp.random(5, 3, density=0.7, random_state=np.random.RandomState(1), format="csr"),
                        np.array([3, 2]), np.array([[0, 2], [1, 3], [0, 4]]))
    layout = ParameterLayout(3, 2, skip=True, second_order=True)
    theta = rng.normal(size=layout.n_params)
    configs, _, p = _loopy_joint(graph, layout, theta)
    samples = _sample_counts(graph, layout, theta, kind, seed=7)
    counts = {}
    for row in map(tuple, samples.tolist()):
        counts[row] = counts.get(row, 0) + 1
    assert oracle.chi_square_pvalue(counts, dict(zip(configs, p))) > 1e-3


def _best_of_anneals(graph, layout, theta, kind, seed, restarts=5):
    """Annealing is a heuristic: a slow schedule can still freeze in a mode that is separated from the
    optimum by a high barrier (a few per cent of these random instances), so take the best of a few
    independent runs, as a user would."""
    rng = np.random.default_rng(seed)
    best_y, best_score = None, -np.inf
    for restart in range(restarts):
        y = rng.integers(0, layout.n_labels, size=graph.n_tokens)
        sweeps = kernels.anneal(y, theta, graph.kernel_arrays(), layout.kernel_layout(),
                                np.geomspace(5.0, 0.02, 1000), kind, seed * 100 + restart, 100)
        assert sweeps < 100
        # the result is a local optimum: no single-variable change improves it
        for t in range(graph.n_tokens):
            local = kernels.local_scores(t, y, theta, graph.kernel_arrays(), layout.kernel_layout())
            assert local[y[t]] == local.max()
        score = full_score(graph, layout, theta, y)
        if score > best_score:
            best_y, best_score = y, score
    return best_y, best_score


@pytest.mark.parametrize("seed", range(8))
def test_annealed_map_equals_engine_viterbi(seed):
    rng = np.random.default_rng(seed)
    graph, layout, theta = _tiny_chain(rng, n=7, K=3, scale=2.0)
    blocks = layout.unpack(theta)
    paths, best = chain.viterbi(blocks["W"][None], blocks["T"], blocks["start"], blocks["end"])
    y, score = _best_of_anneals(graph, layout, theta, kernels.GIBBS, seed)
    assert score == pytest.approx(float(best[0]))
    assert y.tolist() == paths[0].tolist()


@pytest.mark.parametrize("seed", range(4))
def test_annealed_map_equals_enumeration_on_a_loopy_graph(seed):
    rng = np.random.default_rng(seed)
    graph, layout = _random_graph(rng, n_seq=2, max_len=4, K=3, n_skip=3)
    if graph.n_tokens > 8:
        pytest.skip("enumeration too large")
    theta = 2.0 * rng.normal(size=layout.n_params)
    configs, scores, _ = _loopy_joint(graph, layout, theta)
    _, score = _best_of_anneals(graph, layout, theta, kernels.METROPOLIS, seed)
    assert score == pytest.approx(scores.max())


def _one_step(graph, layout, theta, y, gold, t, rule, pairs, margin, kind, seed):
    u = np.zeros_like(theta)
    log = np.zeros((1, 6))
    kernels.samplerank_epoch(np.array([t]), y, gold, 1.0 - np.eye(layout.n_labels), theta, u, 0.0,
                             graph.kernel_arrays(), layout.kernel_layout(), rule, 1.0, 1.0, margin, kind, 1.0,
                             pairs, seed, log)
    return log[0]


@pytest.mark.parametrize("kind", [kernels.GIBBS, kernels.METROPOLIS])
@pytest.mark.parametrize("rule", [kernels.PERCEPTRON, kernels.MIRA])
def test_samplerank_updates_exactly_on_ranking_disagreements(kind, rule):
    rng = np.random.default_rng(0)
    graph, layout = _random_graph(rng, n_seq=2, max_len=4, F=3, K=3, n_skip=2)
    gold = rng.integers(0, 3, size=graph.n_tokens)
    theta = rng.normal(size=layout.n_params)
    y = rng.integers(0, 3, size=graph.n_tokens)
    n_updates = n_agreements = 0
    for step in range(300):
        t = int(rng.integers(graph.n_tokens))
        if step % 5 == 0:  # fresh weights now and then, so that disagreements keep occurring
            theta = rng.normal(size=layout.n_params)
        before_theta, before_y = theta.copy(), y.copy()
        _, k, k_new, _, _, updated = _one_step(graph, layout, theta, y, gold, t, rule, 0, 0.0, kind, step)
        assert int(k) == before_y[t]
        proposed = before_y.copy()
        proposed[t] = int(k_new)
        # independent ranking: full scores and Hamming objective of the two configurations
        model_gap = full_score(graph, layout, before_theta, proposed) - full_score(graph, layout, before_theta, before_y)
        objective_gap = (proposed == gold).sum() - (before_y == gold).sum()
        disagree = objective_gap != 0 and np.sign(model_gap) != np.sign(objective_gap)
        assert bool(updated) == disagree
        if not disagree:
            assert np.array_equal(theta, before_theta)
            n_agreements += 1
            continue
        n_updates += 1
        better, worse = (proposed, before_y) if objective_gap > 0 else (before_y, proposed)
        direction = _features(graph, layout, better) - _features(graph, layout, worse)
        change = theta - before_theta
        if rule == kernels.PERCEPTRON:
            np.testing.assert_allclose(change, direction, atol=1e-12)
        else:  # MIRA: along the direction, reaching a gap of |Δo| unless capped at C = 1
            step_size = change @ direction / (direction @ direction)
            np.testing.assert_allclose(change, step_size * direction, atol=1e-12)
            new_gap = np.sign(objective_gap) * model_gap + step_size * (direction @ direction)
            assert step_size == pytest.approx(1.0) or new_gap == pytest.approx(abs(objective_gap))
    assert n_updates > 10 and n_agreements > 10


def test_neighbourhood_pairs_update_model_best_towards_gold():
    rng = np.random.default_rng(1)
    graph, layout = _random_graph(rng, n_seq=2, max_len=4, F=3, K=3, n_skip=2)
    gold = rng.integers(0, 3, size=graph.n_tokens)
    theta = rng.normal(size=layout.n_params)
    y = rng.integers(0, 3, size=graph.n_tokens)
    G, L = graph.kernel_arrays(), layout.kernel_layout()
    for step in range(100):
        t = int(rng.integers(graph.n_tokens))
        local = kernels.local_scores(t, y, theta, G, L)
        model_best = int(np.argmax(local))
        before_theta, before_y = theta.copy(), y.copy()
        _, _, _, _, _, updated = _one_step(graph, layout, theta, y, gold, t, kernels.PERCEPTRON, 1, 0.0,
                                           kernels.GIBBS, step)
        assert bool(updated) == (model_best != gold[t] and local[gold[t]] <= local[model_best])
        if updated:
            better, worse = before_y.copy(), before_y.copy()
            better[t], worse[t] = gold[t], model_best
            direction = _features(graph, layout, better) - _features(graph, layout, worse)
            np.testing.assert_allclose(theta - before_theta, direction, atol=1e-12)


def _planted_data(rng, n_seq=300, F=6, K=3):
    """Sequences of dense Gaussian features with labels sampled from a planted chain CRF."""
    W = 2.0 * rng.normal(size=(F, K))
    T = 1.5 * rng.normal(size=(K, K))
    X, y = [], []
    for n in rng.integers(3, 9, size=n_seq):
        x = rng.normal(size=(n, F))
        labels = chain.sample((x @ W)[None], T, n=1, seed=int(rng.integers(1 << 30)))[0, 0]
        X.append(x)
        y.append(labels.tolist())
    return X, y, W, T


def _centred(W, T):
    return np.concatenate([(W - W.mean(axis=1, keepdims=True)).ravel(), (T - T.mean()).ravel()])


@pytest.mark.parametrize("rule,pairs", [("perceptron", "proposal"), ("mira", "proposal"),
                                        ("perceptron", "neighbourhood")])
def test_samplerank_moves_towards_a_planted_model(rule, pairs):
    rng = np.random.default_rng(0)
    X, y, W, T = _planted_data(rng)
    planted = _centred(W, T)
    cosines = []
    for epochs in (1, 15):
        model = SampleRankTagger(rule=rule, pairs=pairs, n_epochs=epochs, random_state=0).fit(X, y)
        blocks = model.layout_.unpack(model.theta_)
        learned = _centred(blocks["W"], blocks["T"])
        cosines.append(learned @ planted / np.linalg.norm(learned) / np.linalg.norm(planted))
    assert cosines[1] > 0.8
    assert cosines[1] > cosines[0]
    # and it tags about as well as the planted model's own Viterbi paths
    X_test, y_test, _, _ = _planted_data(np.random.default_rng(1))
    planted_paths = [chain.viterbi((x @ W)[None], T)[0][0].tolist() for x in X_test]
    from varorder.models.sequences import token_accuracy
    assert model.score(X_test, y_test) > token_accuracy(planted_paths, y_test) - 0.05


def _word_data():
    lexicon = {"the": "DET", "a": "DET", "dog": "NOUN", "cat": "NOUN", "runs": "VERB", "sleeps": "VERB",
               "big": "ADJ", "park": "NOUN", "in": "ADP", ".": "PUNCT"}
    rng = np.random.default_rng(3)
    sentences = []
    for _ in range(80):
        words = [str(rng.choice(["the", "a"]))] + (["big"] if rng.random() < 0.5 else [])
        words += [str(rng.choice(["dog", "cat"])), str(rng.choice(["runs", "sleeps"]))]
        if rng.random() < 0.5:
            words += ["in", "the", "park"]
        sentences.append(words + ["."])
    from varorder.models.features import pos_features
    X = [pos_features(w) for w in sentences]
    y = [[lexicon[w] for w in s] for s in sentences]
    keys = [[w.lower() for w in s] for s in sentences]
    documents = [i // 5 for i in range(len(sentences))]
    return X, y, keys, documents


@pytest.mark.parametrize("options", [{}, {"rule": "mira", "proposal": "mh", "init": "gold"},
                                     {"skip_factors": True, "second_order": True, "pairs": "neighbourhood"}])
def test_tagger_fits_predicts_and_round_trips(tmp_path, options):
    X, y, keys, documents = _word_data()
    model = SampleRankTagger(n_epochs=8, random_state=1, **options)
    model.fit(X, y, skip_keys=keys, documents=documents, X_dev=X[:10], y_dev=y[:10], skip_keys_dev=keys[:10],
              documents_dev=documents[:10])
    assert model.score(X, y, keys, documents) > 0.95
    assert len(model.history_) == 8 and "dev_accuracy" in model.history_[-1]
    path = tmp_path / "model.npz"
    model.save(path)
    loaded = SampleRankTagger.load(path)
    np.testing.assert_array_equal(loaded.theta_, model.theta_)
    assert loaded.predict(X, keys, documents) == model.predict(X, keys, documents)
    again = SampleRankTagger(n_epochs=8, random_state=1, **options).fit(X, y, skip_keys=keys, documents=documents)
    np.testing.assert_array_equal(again.theta_, model.theta_)  # a seed fixes the result


def test_tagger_errors(tmp_path):
    X, y, keys, documents = _word_data()
    with pytest.raises(ValueError, match="skip keys"):
        SampleRankTagger(skip_factors=True).fit(X, y)
    with pytest.raises(ValueError, match="rule"):
        SampleRankTagger(rule="adam").fit(X, y)
    with pytest.raises(ValueError, match="labels"):
        SampleRankTagger().fit(X, [labels[:-1] for labels in y])
    with pytest.raises(ValueError, match="not fitted"):
        SampleRankTagger().predict(X)
    model = SampleRankTagger(n_epochs=1).fit(X, y)
    path = tmp_path / "model.npz"
    model.save(path)
    data = path.read_bytes()
    (tmp_path / "cut.npz").write_bytes(data[: len(data) // 2])
    with pytest.raises(ValueError, match="cut.npz"):
        SampleRankTagger.load(tmp_path / "cut.npz")
    from varorder.models import persist
    persist.save_model(tmp_path / "bad.npz", "SampleRankTagger", {"n_epochs": 1}, {
        "classes": model.classes_, "feature_names": model.feature_names_, "n_features_in": model.n_features_in_,
        "input": "feature dicts",
    }, {"theta": model.theta_[:-1]})
    with pytest.raises(ValueError, match="shape"):
        SampleRankTagger.load(tmp_path / "bad.npz")
    for params, state, theta, message in (
            ({"rule": "adam"}, {}, model.theta_, "rule"),
            ({"n_epochs": "ten"}, {}, model.theta_, "metadata"),
            ({"colour": 1}, {}, model.theta_, "unknown"),
            ({}, {"classes": "ADJ"}, model.theta_, "classes"),
            ({}, {"classes": None}, model.theta_, "classes"),
            ({}, {"n_features_in": -1}, model.theta_, "n_features_in"),
            ({}, {"feature_names": None}, model.theta_, "input"),  # a lost name list is not a dense model
            ({}, {}, np.full_like(model.theta_, np.inf), "theta")):
        good_state = {"classes": model.classes_, "feature_names": model.feature_names_,
                      "n_features_in": model.n_features_in_, "input": "feature dicts"}
        persist.save_model(tmp_path / "bad.npz", "SampleRankTagger", params, good_state | state, {"theta": theta})
        with pytest.raises(ValueError, match=message):
            SampleRankTagger.load(tmp_path / "bad.npz")


def test_repeated_key_pairs_and_document_ids():
    keys = [["a", "b", "a"], ["b", None, "a"], ["a"]]
    assert repeated_key_pairs(keys, [0, 0, 1]).tolist() == [[0, 2], [1, 3], [2, 5]]
    assert repeated_key_pairs(keys).tolist() == [[0, 2]]
    comments = [["# newdoc id = d1", "# sent_id = 1"], ["# sent_id = 2"], ["# newdoc id = d2"], []]
    assert document_ids(comments) == [0, 0, 1, 1]
    assert document_ids([[], []]) == [0, 1]
    with pytest.raises(ValueError, match="skip_pairs"):
        FactorGraph(sp.identity(3, format="csr"), np.array([3]), np.array([[2, 1]]))
