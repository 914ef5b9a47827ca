"""The semi-Markov structure (varorder.semimarkov, engine/semimarkov.py) against enumeration
over all labelled segmentations (varorder.testing.oracle), dense and factored forms, −inf
entries, ragged lengths and per-sequence transitions included; sampling by a fixed-seed
goodness-of-fit test."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from varorder import semimarkov
from varorder.engine.semiring import Semiring, log_plus
from varorder.testing import oracle
from varorder.testing.strategies import dense_segment_scores, segment_chains

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _close(a, b, tol=1e-9):
    a, b = np.asarray(a, float), np.asarray(b, float)
    same_special = (np.isneginf(a) & np.isneginf(b)) | (np.isnan(a) & np.isnan(b))
    return bool(np.all(same_special | np.isclose(a, b, rtol=tol, atol=tol)))


def _scores_arg(case):
    if case.emissions is not None:
        return semimarkov.from_emissions(case.emissions, case.durations)
    return case.scores


def _paths(case, b):
    return oracle.segmentation_paths(case.scores[b], case.transitions_of(b), case.start, case.end, case.lengths[b])


def _score_of(case, b, seg):
    return dict(_paths(case, b))[tuple(seg)]


@SETTINGS
@given(segment_chains())
def test_log_partition_and_forward_semirings_match_enumeration(case):
    arg = _scores_arg(case)
    logz = semimarkov.log_partition(arg, case.transitions, **case.kwargs)
    best = semimarkov.forward(arg, case.transitions, semiring="max", **case.kwargs)
    expectation = semimarkov.forward(arg, case.transitions, semiring="expectation", **case.kwargs)
    for b in range(len(case.lengths)):
        paths = _paths(case, b)
        z = oracle.log_partition(paths)
        assert _close(logz[b], z)
        assert _close(best[b], oracle.max_score(paths))
        assert _close(expectation[b, 0], z)
    # the dense expansion of a factored case gives the same numbers
    if case.emissions is not None:
        assert _close(semimarkov.log_partition(case.scores, case.transitions, **case.kwargs), logz, 1e-11)


@SETTINGS
@given(segment_chains())
def test_marginals_edges_and_statistics_match_enumeration(case):
    arg = _scores_arg(case)
    seg, edges = semimarkov.marginals(arg, case.transitions, edges=True, **case.kwargs)
    logz, occupancy, durations, edge2, first = semimarkov.segment_statistics(arg, case.transitions, **case.kwargs)
    B, L, D, K = case.scores.shape
    for b in range(B):
        paths = _paths(case, b)
        n = case.lengths[b]
        want = oracle.segment_marginals(paths, L, D, K)
        assert np.allclose(seg[b], want, atol=1e-10)
        assert np.allclose(edges[b], oracle.segment_edge_counts(paths, K), atol=1e-10)
        assert np.allclose(edge2[b], edges[b], atol=1e-12)
        assert np.allclose(durations[b], want.sum(axis=0).T, atol=1e-10)
        probs = oracle.probabilities(paths)
        occ = np.zeros((L, K))
        fst = np.zeros(K)
        for s, p in probs.items():
            fst[s[0][2]] += p
            for a, e, k in s:
                occ[a:e, k] += p
        assert np.allclose(occupancy[b], occ, atol=1e-10)
        assert np.allclose(first[b], fst, atol=1e-10)
        if probs:
            assert np.allclose(occupancy[b, :n].sum(axis=1), 1.0, atol=1e-10)
        assert _close(logz[b], oracle.log_partition(paths))


@SETTINGS
@given(segment_chains())
def test_viterbi_kbest_entropy_match_enumeration(case):
    arg = _scores_arg(case)
    segs, scores = semimarkov.viterbi(arg, case.transitions, **case.kwargs)
    k = 4
    lists, kscores = semimarkov.kbest(arg, case.transitions, k, **case.kwargs)
    ent = semimarkov.entropy(arg, case.transitions, **case.kwargs)
    for b in range(len(case.lengths)):
        paths = _paths(case, b)
        best = oracle.max_score(paths)
        assert _close(scores[b], best)
        if best == -math.inf:
            assert segs[b] == [] and lists[b] == []
        else:
            assert tuple(segs[b]) in oracle.argmax_paths(paths, tol=1e-9)
            assert _close(semimarkov.segmentation_score(case.scores, case.transitions, segs[b], b,
                                                        start=case.start, end=case.end), best)
        assert _close(kscores[b], oracle.kbest_scores(paths, k))
        assert len({tuple(s) for s in lists[b]}) == len(lists[b]) == int(np.isfinite(kscores[b]).sum())
        for s, v in zip(lists[b], kscores[b]):
            assert _close(_score_of(case, b, s), v)
        assert _close(ent[b], oracle.entropy(paths))


def test_samples_follow_the_posterior():
    rng = np.random.default_rng(3)
    B, L, D, K = 2, 4, 3, 2
    scores = rng.normal(size=(B, L, D, K))
    scores[0, 2, 1, 0] = -np.inf
    T = rng.normal(size=(K, K))
    lengths = np.array([4, 3])
    n = 4000
    draws = semimarkov.sample(scores, T, n, seed=11, lengths=lengths)
    for b in range(B):
        probs = oracle.probabilities(oracle.segmentation_paths(scores[b], T, length=lengths[b]))
        counts = {}
        for s in draws[b]:
            counts[tuple(s)] = counts.get(tuple(s), 0) + 1
        assert sum(counts.values()) == n
        assert oracle.chi_square_pvalue(counts, probs) > 1e-3
    # a seed fixes the samples; the factored form samples the same way as its dense expansion
    assert semimarkov.sample(scores, T, 50, seed=5, lengths=lengths) == \
        semimarkov.sample(scores, T, 50, seed=5, lengths=lengths)
    E = rng.normal(size=(1, 4, K))
    dur = rng.normal(size=(K, 3))
    assert semimarkov.sample(semimarkov.from_emissions(E, dur), T, 30, seed=2) == \
        semimarkov.sample(dense_segment_scores(E, dur), T, 30, seed=2)


def test_no_segmentation_gives_minus_inf_and_empty_results():
    scores = np.zeros((1, 3, 1, 2))
    scores[0, 1, 0, :] = -np.inf  # position 1 cannot be covered by a length-1 segment (the only length)
    T = np.zeros((2, 2))
    assert semimarkov.log_partition(scores, T)[0] == -np.inf
    segs, best = semimarkov.viterbi(scores, T)
    assert segs == [[]] and best[0] == -np.inf
    assert semimarkov.sample(scores, T, 3, seed=0) == [[]]
    assert np.isnan(semimarkov.entropy(scores, T)[0])
    assert not semimarkov.marginals(scores, T).any()


def test_unreadable_entries_are_not_read_or_validated():
    rng = np.random.default_rng(0)
    scores = rng.normal(size=(2, 4, 3, 2))
    T = rng.normal(size=(2, 2))
    lengths = np.array([4, 2])
    base = semimarkov.log_partition(scores, T, lengths=lengths)
    poisoned = scores.copy()
    poisoned[:, 0, 1:, :] = np.nan  # segments starting before position 0
    poisoned[1, 2:, :, :] = np.inf  # past the length of sequence 1
    assert np.array_equal(semimarkov.log_partition(poisoned, T, lengths=lengths), base)
    poisoned[0, 3, 2, 1] = np.nan  # a readable entry
    with pytest.raises(ValueError, match=r"segment_scores contains NaN at index \(0, 3, 2, 1\)"):
        semimarkov.log_partition(poisoned, T, lengths=lengths)


@pytest.mark.parametrize("bad, match", [
    (dict(segment_scores=np.zeros((2, 3, 2))), "4 dimensions"),
    (dict(transitions=np.zeros((3, 3))), "transitions must have shape"),
    (dict(lengths=[0, 3]), r"lengths\[0\] = 0"),
    (dict(lengths=[1, 4]), r"lengths\[1\] = 4"),
    (dict(start=np.zeros(3)), "start must have shape"),
    (dict(transitions=np.full((2, 2), np.nan)), r"transitions contains NaN at index \(0, 0\)"),
])
def test_bad_input_names_the_argument(bad, match):
    args = dict(segment_scores=np.zeros((2, 3, 2, 2)), transitions=np.zeros((2, 2)), lengths=None, start=None)
    args.update(bad)
    with pytest.raises(ValueError, match=match):
        semimarkov.log_partition(args["segment_scores"], args["transitions"], lengths=args["lengths"],
                                 start=args["start"])


def test_bad_factored_input_names_the_argument():
    with pytest.raises(ValueError, match="durations must have shape"):
        semimarkov.from_emissions(np.zeros((1, 3, 2)), np.zeros((3, 2)))
    with pytest.raises(ValueError, match=r"emissions contains NaN at index \(0, 1, 0\)"):
        E = np.zeros((1, 3, 2))
        E[0, 1, 0] = np.nan
        semimarkov.from_emissions(E, np.zeros((2, 2)))
    with pytest.raises(ValueError, match="k must be >= 1"):
        semimarkov.kbest(np.zeros((1, 2, 1, 1)), np.zeros((1, 1)), 0)


def test_a_semiring_defined_here_runs_on_the_structure():
    """Any registered-or-not scalar semiring goes through the generic recursion: log-sum
    written again (a different ⊕ object) gives log Z."""
    import numba as nb

    @nb.njit(inline="always")
    def again(a, b):
        return log_plus(a, b)

    mine = Semiring("log-again-semimarkov", again)
    rng = np.random.default_rng(1)
    scores = rng.normal(size=(2, 5, 3, 3))
    T = rng.normal(size=(3, 3))
    assert np.allclose(semimarkov.forward(scores, T, semiring=mine), semimarkov.log_partition(scores, T),
                       rtol=1e-13)


def test_one_long_factored_sequence_is_stable():
    """Sums of emissions over segments are read by a running sum (no prefix-sum differences):
    a long series with Gaussian-sized log-densities keeps its expected segment lengths
    summing to the length."""
    rng = np.random.default_rng(0)
    L, K, D = 3000, 3, 20
    E = rng.normal(scale=3.0, size=(1, L, K)) - 5.0
    dur = np.log(rng.dirichlet(np.ones(D), size=K))
    T = np.log(np.full((K, K), 0.5))
    np.fill_diagonal(T, -np.inf)
    logz, occ, durations, edges, first = semimarkov.segment_statistics(semimarkov.from_emissions(E, dur), T)
    assert np.isfinite(logz[0])
    assert np.allclose(occ[0].sum(axis=1), 1.0, atol=1e-9)
    expected_positions = (durations[0] * np.arange(1, D + 1)).sum()
    assert abs(expected_positions - L) < 1e-8 * L
    assert abs(edges[0].sum() - (durations[0].sum() - 1)) < 1e-8


@SETTINGS
@given(segment_chains(factored=True, max_len=7, max_duration=4))
def test_scaled_statistics_equal_the_generic_recursion(case):
    """The registered LOG specialisation of segment_statistics (exp space, per-position
    scaling) gives the generic recursion's numbers, −inf entries and fallbacks included."""
    from varorder.engine import semimarkov as engine

    si = semimarkov.prepare(_scores_arg(case), case.transitions, case.lengths, case.start, case.end)
    fast = engine.segment_statistics(si)
    slow = engine.segment_statistics(si, specialised=False)
    assert _close(fast[0], slow[0], 1e-12)
    for a, b in zip(fast[1:], slow[1:]):
        assert np.allclose(a, b, rtol=1e-12, atol=1e-12)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 2**32 - 1), st.integers(1, 9), st.integers(1, 4))
def test_scaled_statistics_equal_the_generic_recursion_on_sequences_longer_than_the_ring(seed, D, K):
    """Sequences many times max_duration long (the rings of D slots wrap around many times),
    ragged, with forbidden durations and transitions: the scaled kernel gives the generic
    recursion's log Z and statistics to 1e-12."""
    from varorder.engine import semimarkov as engine

    rng = np.random.default_rng(seed)
    B, L = 3, 40
    E = rng.normal(scale=2.0, size=(B, L, K))
    dur = rng.normal(size=(K, D))
    dur[rng.random((K, D)) < 0.2] = -np.inf
    dur[:, 0] = 0.0  # every label may take one position, so every length has a segmentation
    T = rng.normal(size=(K, K))
    T[rng.random((K, K)) < 0.2] = -np.inf
    np.fill_diagonal(T, 0.0)
    lengths = rng.integers(1, L + 1, B)
    si = semimarkov.prepare(semimarkov.from_emissions(E, dur), T, lengths, rng.normal(size=K), rng.normal(size=K))
    fast = engine.segment_statistics(si)
    slow = engine.segment_statistics(si, specialised=False)
    assert np.allclose(fast[0], slow[0], rtol=1e-12, atol=0)
    for a, b in zip(fast[1:], slow[1:]):
        assert np.allclose(a, b, rtol=1e-12, atol=1e-12)


def test_scaled_statistics_hand_an_underflowing_sequence_to_the_generic_recursion():
    """State 0 alone can start and never leaves, so one segment of it covers the sequence;
    at position 20 its emission is e^-800 below state 1's: the scaled product underflows
    there and the sequence is recomputed in log space (its statistics exact)."""
    from varorder.engine import semimarkov as engine

    rng = np.random.default_rng(4)
    n = 40
    E = rng.normal(size=(2, n, 2))
    E[0, 20] = [-800.0, 0.0]
    dur = np.log(np.full((2, n), 1.0 / n))
    T = np.full((2, 2), -np.inf)
    start = np.array([0.0, -np.inf])
    si = semimarkov.prepare(semimarkov.from_emissions(E, dur), T, start=start)
    done = np.zeros(2, dtype=bool)
    engine._scaled_factored_statistics(si.P, si.Q, si.transitions, si.start, si.end, si.lengths,
                                       np.zeros((2, n, 2)), np.zeros((2, 2, n)), np.zeros((2, 2, 2)),
                                       np.zeros((2, 2)), np.zeros(2), done)
    assert done.tolist() == [False, True]
    fast, slow = engine.segment_statistics(si), engine.segment_statistics(si, specialised=False)
    assert np.isclose(fast[0][0], E[0, :, 0].sum() + dur[0, n - 1], rtol=1e-13)
    assert _close(fast[0], slow[0], 1e-12)
    for a, b in zip(fast[1:], slow[1:]):
        assert np.allclose(a, b, rtol=1e-10, atol=1e-12)
    assert fast[2][0, 0, n - 1] == 1.0
