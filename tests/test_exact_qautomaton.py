"""q-automaton (Carter et al. 2012, Algorithm 2): q >= p after every refinement, q's mass
never increases, q = p once a path is fully refined; checked by enumerating every
candidate sequence of small random LMs."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

from varorder.exact import HighOrderTarget, QAutomaton
from varorder.lattice import log_partition
from varorder.lm import AbsoluteDiscounting, AdditiveSmoothing, ModifiedKneserNey
from varorder.testing import oracle

ESTIMATORS = {
    "kn": lambda order: ModifiedKneserNey(order=order),
    "absolute": lambda order: AbsoluteDiscounting(order=order, discount=0.4),
    "additive": lambda order: AdditiveSmoothing(order=order, alpha=0.5),
}


def random_lm(seed: int, order: int, estimator: str = "kn", n_words: int = 5, n_sentences: int = 40):
    rng = np.random.default_rng(seed)
    words = [f"w{k}" for k in range(n_words)]
    # Skewed word choice so that some n-grams are frequent and others unseen.
    weights = rng.dirichlet(np.full(n_words, 0.7))
    sentences = [" ".join(rng.choice(words, size=rng.integers(1, 7), p=weights)) for _ in range(n_sentences)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return ESTIMATORS[estimator](order).fit_sentences(sentences).model_


def random_target(lm, seed: int, length: int, n_candidates: int, eos: bool = True):
    rng = np.random.default_rng(seed + 1000)
    vocab = lm.vocabulary
    word_ids = np.asarray([i for i in range(len(vocab)) if i not in (vocab.bos_id, vocab.eos_id)])
    candidates = []
    for _ in range(length):
        chosen = rng.choice(word_ids, size=min(n_candidates, len(word_ids)), replace=False)
        candidates.append((chosen, rng.normal(scale=1.5, size=len(chosen))))
    return HighOrderTarget(lm, candidates, eos=eos)


def enumerate_target(target):
    """Every candidate sentence with its exact log p (the brute-force oracle)."""
    return oracle.product_paths([s for s in target.symbols[: target.length]],
                                lambda seq: target.log_p(target.with_end(seq)))


@pytest.mark.parametrize(
    "seed,order,estimator,eos",
    [(0, 3, "kn", True), (1, 4, "kn", True), (2, 5, "absolute", True), (3, 4, "additive", False), (4, 6, "kn", True)],
)
def test_q_bounds_p_and_loses_mass_after_every_refinement(seed, order, estimator, eos):
    lm = random_lm(seed, order, estimator)
    target = random_target(lm, seed, length=4, n_candidates=3, eos=eos)
    paths = enumerate_target(target)
    q = QAutomaton(target)
    rng = np.random.default_rng(seed)
    mass = log_partition(q.lattice())
    assert mass >= oracle.log_partition(paths) - 1e-9
    for step in range(60):
        for seq, log_p in paths:
            log_q = q.log_q(target.with_end(seq))
            assert log_q >= log_p - 1e-9, (step, seq)
        # The lattice is q: its path scores are the traced log q.
        lattice_paths = oracle.lattice_paths(q.lattice())
        assert sorted(s for _, s in lattice_paths) == pytest.approx(
            sorted(q.log_q(target.with_end(seq)) for seq, _ in paths), abs=1e-9)
        new_mass = log_partition(q.lattice())
        assert new_mass <= mass + 1e-12
        mass = new_mass
        seq = paths[rng.integers(len(paths))][0]
        q.refine(target.with_end(seq))
    assert mass < log_partition(QAutomaton(target).lattice())  # refinement did tighten q


@pytest.mark.parametrize("seed,order", [(5, 3), (6, 5), (7, 7)])
def test_fully_refined_paths_have_q_equal_p(seed, order):
    lm = random_lm(seed, order, n_words=4)
    target = random_target(lm, seed, length=order + 1, n_candidates=2)
    q = QAutomaton(target)
    paths = enumerate_target(target)
    for seq, _ in paths:
        for _ in range(order + 2):
            if q.refine(target.with_end(seq)) == 0:
                break
        assert q.refine(target.with_end(seq)) == 0
    for seq, log_p in paths:
        assert q.log_q(target.with_end(seq)) == pytest.approx(log_p, abs=1e-9)
    assert log_partition(q.lattice()) == pytest.approx(oracle.log_partition(paths), abs=1e-9)


def test_initial_q_is_the_unigram_bound():
    lm = random_lm(8, 4)
    target = random_target(lm, 8, length=3, n_candidates=3)
    q = QAutomaton(target)
    expected = 0.0
    for symbols, logliks in zip(target.symbols, target.logliks):
        expected += math.log(sum(math.exp(lm.max_logprob((), int(s)) + l) for s, l in zip(symbols, logliks)))
    assert log_partition(q.lattice()) == pytest.approx(expected, abs=1e-9)
    assert q.num_states == target.num_positions + 1
    assert q.ngram_counts() == {1: sum(len(s) for s in target.symbols)}


def test_refinement_raises_one_order_per_position():
    lm = random_lm(9, 5)
    target = random_target(lm, 9, length=5, n_candidates=2)
    q = QAutomaton(target)
    path = target.with_end([int(s[0]) for s in target.symbols[: target.length]])
    q.refine(path)
    counts = q.ngram_counts()
    assert set(counts) <= {1, 2}
    assert counts.get(2, 0) <= target.num_positions
    q.refine(path)
    assert max(q.ngram_counts()) <= 3


def test_target_rejects_bad_candidates():
    lm = random_lm(10, 3)
    bos = lm.vocabulary.bos_id
    with pytest.raises(ValueError, match="<s>"):
        HighOrderTarget(lm, [([bos], [0.0])])
    with pytest.raises(ValueError, match="non-empty"):
        HighOrderTarget(lm, [([], [])])
    with pytest.raises(ValueError, match="outside|lie in"):
        HighOrderTarget(lm, [([10_000], [0.0])])
    with pytest.raises(ValueError, match="at least one position"):
        HighOrderTarget(lm, [])


@pytest.mark.parametrize("seed,order,estimator", [(21, 3, "kn"), (22, 5, "absolute"), (23, 7, "kn")])
def test_batched_lm_queries_equal_the_scalar_ones(seed, order, estimator):
    lm = random_lm(seed, order, estimator)
    rng = np.random.default_rng(seed)
    vocab = lm.vocabulary
    words = [i for i in range(len(vocab)) if i != vocab.eos_id]
    contexts = [tuple(int(w) for w in rng.choice(words, size=rng.integers(0, order + 2))) for _ in range(200)]
    queries = [int(w) for w in rng.choice(words, size=len(contexts))]
    log10, lengths = lm.lookups(contexts, queries)
    bounds = lm.max_logprobs(contexts, queries)
    for k, (context, word) in enumerate(zip(contexts, queries)):
        assert (log10[k], lengths[k]) == lm.lookup(context, word)
        assert bounds[k] == lm.max_logprob(context, word)
    short = [c[len(c) - (order - 1):] if len(c) > order - 1 else c for c in contexts[:30]]
    offsets = np.concatenate([[0], np.cumsum([len(c) for c in short])])
    grid, grid_lengths = lm.lookup_grid(np.asarray([w for c in short for w in c], dtype=np.int64), offsets, words)
    for c, context in enumerate(short):
        for k, word in enumerate(words):
            assert (grid[c, k], grid_lengths[c, k]) == lm.lookup(context, word)
    with pytest.raises(ValueError, match="at most order - 1"):
        lm.lookup_grid(np.zeros(order, dtype=np.int64), [0, order], words)
    with pytest.raises(ValueError, match="outside the vocabulary"):
        lm.max_logprobs([(0,)], [len(vocab)])
    with pytest.raises(ValueError, match="contexts but"):
        lm.lookups([(0,), ()], [1])


@pytest.mark.parametrize("seed,order", [(31, 3), (32, 5)])
def test_best_path_and_arc_trace_agree_with_the_lattice_and_the_symbol_trace(seed, order):
    from varorder.lattice import path_labels, sample_arcs, viterbi_arcs

    lm = random_lm(seed, order)
    target = random_target(lm, seed, length=5, n_candidates=3)
    q = QAutomaton(target)
    rng = np.random.default_rng(seed)
    for _ in range(8):
        lat = q.lattice()
        arcs, score = q.best_path()
        expected_arcs, expected_score = viterbi_arcs(lat)
        assert score == pytest.approx(expected_score, abs=1e-12)
        assert path_labels(lat, arcs).tolist() == path_labels(lat, expected_arcs).tolist()
        drawn = sample_arcs(lat, 1, seed=rng)[0]
        for path_arcs in (arcs, drawn):
            by_arcs = q.trace_arcs(path_arcs)
            by_symbols = q.trace(by_arcs.symbols)
            assert by_arcs.sources == by_symbols.sources
            assert by_arcs.weight_states == by_symbols.weight_states
            assert by_arcs.bounds == by_symbols.bounds
            assert by_arcs.log_q == pytest.approx(by_symbols.log_q, abs=1e-9)
        q.refine_trace(q.trace_arcs(drawn))
    with pytest.raises(ValueError, match="arc ids"):
        q.trace_arcs(np.zeros(2, dtype=np.int64))


def test_automaton_sampling_draws_what_the_lattice_sampler_draws():
    from varorder.lattice import sample_arcs

    lm = random_lm(33, 4)
    target = random_target(lm, 33, length=5, n_candidates=3)
    q = QAutomaton(target)
    for step in range(5):
        ours = q.sample_arcs(50, np.random.default_rng(step))
        theirs = sample_arcs(q.lattice(), 50, seed=np.random.default_rng(step))
        assert (ours == theirs).all()
        q.refine(q.trace_arcs(ours[0]).symbols)
