"""Exact decoding (Algorithm 1, optimisation mode) against the brute-force argmax and the
explicit n-th-order Viterbi lattice."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from varorder.exact import HighOrderTarget, decode, full_viterbi
from varorder.testing import oracle

from test_exact_qautomaton import enumerate_target, random_lm, random_target
from _shared_data import SHARED_DATA


@pytest.mark.parametrize(
    "seed,order,estimator,length,n_candidates",
    [(0, 3, "kn", 4, 3), (1, 4, "kn", 5, 3), (2, 5, "absolute", 5, 3), (3, 6, "additive", 6, 2),
     (4, 4, "kn", 3, 5), (5, 9, "kn", 6, 2)],
)
def test_decode_equals_brute_force_argmax(seed, order, estimator, length, n_candidates):
    lm = random_lm(seed, order, estimator)
    target = random_target(lm, seed, length, n_candidates)
    paths = enumerate_target(target)
    result = decode(target)
    assert result.exact
    assert result.log_q == pytest.approx(result.log_p, abs=1e-9)
    assert result.log_p == pytest.approx(oracle.max_score(paths), abs=1e-9)
    assert tuple(result.sentence) in oracle.argmax_paths(paths, tol=1e-9)
    assert result.history.num_trials == result.iterations
    assert result.history.accepted[-1] and not any(result.history.accepted[:-1])


@pytest.mark.parametrize("seed,order,length", [(11, 3, 4), (12, 5, 5), (13, 4, 6)])
def test_full_viterbi_equals_brute_force(seed, order, length):
    lm = random_lm(seed, order)
    target = random_target(lm, seed, length, 3)
    paths = enumerate_target(target)
    full = full_viterbi(target)
    assert full.finished
    assert full.log_p == pytest.approx(oracle.max_score(paths), abs=1e-6)
    assert full.log_p == pytest.approx(target.log_p(full.path), abs=1e-6)


@pytest.mark.parametrize("seed,order", [(21, 5), (22, 6)])
def test_decode_equals_full_viterbi_on_longer_sentences(seed, order):
    lm = random_lm(seed, order, n_words=8, n_sentences=200)
    target = random_target(lm, seed, length=12, n_candidates=3)
    result = decode(target)
    full = full_viterbi(target)
    assert result.exact and full.finished
    assert result.log_p == pytest.approx(full.log_p, abs=1e-6)
    assert target.log_p(result.path) == pytest.approx(target.log_p(full.path), abs=1e-6)
    assert result.num_states < full.num_states


def test_decode_on_real_pos_data_equals_full_viterbi():
    data = SHARED_DATA / "ptb-wsj-sample" / "wsj_sample.pos.tsv.gz"
    if not data.exists():
        pytest.skip(f"{data} is absent (real-data test)")
    from varorder.tasks.pos_highorder import PosTask

    task = PosTask.from_ptb_sample(data, order=4, max_train_files=60)
    for sentence in task.test[:6]:
        target = task.target(sentence.words)
        result = decode(target)
        full = full_viterbi(target, time_limit=20)
        assert result.exact
        if full.finished:
            assert result.log_p == pytest.approx(full.log_p, abs=1e-6)


def test_decode_stops_at_iteration_limit_without_claiming_exactness():
    lm = random_lm(30, 5)
    target = random_target(lm, 30, length=6, n_candidates=3)
    result = decode(target, max_iterations=1)
    best = decode(target)
    assert result.iterations == 1 and best.iterations > 1
    assert not result.exact and result.log_q > result.log_p + 1e-6
    assert result.log_q >= best.log_p - 1e-9  # the first Viterbi score of q bounds max p


@pytest.mark.parametrize("seed,order,estimator,eos", [(41, 2, "kn", True), (42, 3, "kn", True), (43, 5, "absolute", True),
                                                      (44, 4, "additive", False), (45, 7, "kn", True)])
def test_full_wfsa_viterbi_equals_brute_force(seed, order, estimator, eos):
    from varorder.exact import FullWFSA, wfsa_viterbi

    lm = random_lm(seed, order, estimator)
    wfsa = FullWFSA(lm)
    vocab = lm.vocabulary
    # Every stored context (not ending in </s>) is a state; no other state exists.
    stored = sum(int((lm.ngrams(m)[0][:, -1] != vocab.eos_id).sum()) for m in range(1, order))
    assert wfsa.num_states == stored
    target = random_target(lm, seed, length=5, n_candidates=3, eos=eos)
    paths = enumerate_target(target)
    result = wfsa_viterbi(target, wfsa)
    assert result.finished
    assert result.log_p == pytest.approx(oracle.max_score(paths), abs=1e-9)
    assert tuple(target.sentence(result.path)) in oracle.argmax_paths(paths, tol=1e-9)
    assert target.log_p(result.path) == pytest.approx(result.log_p, abs=1e-9)
    assert result.num_states == wfsa.num_states * target.num_positions
    with pytest.raises(ValueError, match="another LM"):
        wfsa_viterbi(random_target(random_lm(seed + 1, order), seed, 3, 2), wfsa)


@pytest.mark.parametrize("seed,order,length,n_candidates", [(51, 4, 6, 3), (52, 6, 8, 3), (54, 6, 10, 6)])
def test_compiled_decode_loop_equals_algorithm_1_on_the_public_api(seed, order, length, n_candidates):
    """decode_steps (the whole loop in compiled code) against the loop written out with
    best_path / trace_arcs / target.log_p / refine; chunked and mass-recording runs agree."""
    from varorder.exact import QAutomaton
    from varorder.lattice import log_partition

    lm = random_lm(seed, order, n_words=7, n_sentences=120)
    target = random_target(lm, seed, length=length, n_candidates=n_candidates)
    q = QAutomaton(target)
    log_q, log_p, states, masses = [], [], [], []
    while True:
        arcs, score = q.best_path()
        trace = q.trace_arcs(arcs)
        assert trace.log_q == pytest.approx(score, abs=1e-9)
        assert q.path_log_p(arcs) == pytest.approx(target.log_p(trace.symbols), abs=1e-9)
        log_q.append(score)
        log_p.append(target.log_p(trace.symbols))
        if score - log_p[-1] <= 1e-9 * max(1.0, abs(log_p[-1])):
            break
        assert q.refine_trace(trace) > 0
        states.append(q.num_states)
        masses.append(log_partition(q.lattice()))
    assert all(np.diff(masses) <= 1e-12)  # q never gains mass
    # (seed 54 takes more iterations than the compiled loop's initial record capacity.)
    for kwargs in ({}, {"record_mass": True}, {"time_limit": 1e9}):
        result = decode(target, **kwargs)
        assert result.exact and result.path == trace.symbols
        assert result.history.log_q == pytest.approx(log_q, abs=1e-9)
        assert result.history.log_p == pytest.approx(log_p, abs=1e-9)
        assert [s for _, s, _, _ in result.history.refinements] == states
        assert result.history.q_version == list(range(len(log_q)))
        if kwargs.get("record_mass"):
            assert [m for *_, m in result.history.refinements] == pytest.approx(masses, abs=1e-9)
    # Resuming: a budget of one iteration at a time reaches the same argmax.
    q = QAutomaton(target)
    for _ in range(len(log_q) - 1):
        assert q.decode_steps(1).status == "running"
    final = q.decode_steps(5)
    assert final.status == "exact" and final.path == trace.symbols and len(final.log_q) == 1
