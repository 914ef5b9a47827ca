"""Exact sampling (Algorithm 1, adaptive rejection sampling): accepted samples follow the
normalised p (fixed-seed chi-square goodness of fit against the enumerated p), with and
without batch updates; stopping rules and history."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from varorder.exact import QAutomaton, acceptance_rate, sample
from varorder.testing import oracle

from test_exact_qautomaton import enumerate_target, random_lm, random_target


@pytest.mark.parametrize("seed,order,batch", [(0, 4, 1), (1, 5, 10), (2, 3, 50)])
def test_accepted_samples_follow_p(seed, order, batch):
    lm = random_lm(seed, order)
    target = random_target(lm, seed, length=3, n_candidates=3)
    paths = enumerate_target(target)
    result = sample(target, n_samples=3000, batch=batch, seed=seed)
    assert result.stopped_by == "samples"
    assert len(result.samples) == 3000
    history = result.history
    assert history.num_accepted == 3000
    assert not all(history.accepted)  # q started loose: some trials were rejected
    counts = Counter(tuple(s) for s in result.samples)
    assert oracle.chi_square_pvalue(counts, oracle.probabilities(paths)) > 1e-3
    # Every recorded ratio is a probability and accepted log p are the exact values.
    assert np.all(history.ratios <= 1 + 1e-9)
    exact = dict(paths)
    for s, log_p in zip(result.samples[:50], result.log_p[:50]):
        assert log_p == pytest.approx(exact[tuple(s)], abs=1e-9)


def test_sampling_from_a_loose_q_without_refinement_is_still_exact():
    # A sampler that never refines (n_samples reached inside the first huge batch) is
    # plain rejection sampling from the unigram bound.
    lm = random_lm(3, 4)
    target = random_target(lm, 3, length=3, n_candidates=3)
    paths = enumerate_target(target)
    result = sample(target, n_samples=1500, batch=200_000, seed=3)
    assert result.history.refinements == []
    counts = Counter(tuple(s) for s in result.samples)
    assert oracle.chi_square_pvalue(counts, oracle.probabilities(paths)) > 1e-3


def test_a_biased_sampler_fails_the_same_test():
    # The goodness-of-fit check can fail: samples from q itself (all accepted) are not p.
    lm = random_lm(4, 5)
    target = random_target(lm, 4, length=3, n_candidates=3)
    paths = enumerate_target(target)
    from varorder.lattice import sample as lattice_sample

    drawn = lattice_sample(QAutomaton(target).lattice(), n=3000, seed=4)
    counts = Counter(tuple(int(v) for v in row[: target.length]) for row in drawn)
    assert oracle.chi_square_pvalue(counts, oracle.probabilities(paths)) < 1e-3


def test_target_acceptance_rate_stops_the_run_and_refines_q():
    lm = random_lm(5, 5)
    target = random_target(lm, 5, length=5, n_candidates=3)
    result = sample(target, target_ar=0.5, batch=10, seed=5, record_mass=True)
    assert result.stopped_by == "target_ar"
    assert acceptance_rate(result.history.accepted, 100) >= 0.5
    assert result.history.num_trials >= 100
    masses = [m for *_, m in result.history.refinements]
    assert masses and all(b <= a + 1e-12 for a, b in zip(masses, masses[1:]))
    states = [s for _, s, _, _ in result.history.refinements]
    assert states[-1] >= states[0]


def test_same_seed_same_run():
    lm = random_lm(6, 4)
    target = random_target(lm, 6, length=4, n_candidates=3)
    a = sample(target, n_samples=50, batch=5, seed=11)
    b = sample(target, n_samples=50, batch=5, seed=11)
    assert a.samples == b.samples and a.history.accepted == b.history.accepted


def test_sample_argument_checks():
    lm = random_lm(7, 3)
    target = random_target(lm, 7, length=2, n_candidates=2)
    with pytest.raises(ValueError, match="stopping rule"):
        sample(target)
    with pytest.raises(ValueError, match="batch"):
        sample(target, n_samples=1, batch=0)
    with pytest.raises(ValueError, match="target_ar"):
        sample(target, target_ar=1.5)
