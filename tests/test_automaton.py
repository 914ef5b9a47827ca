"""Automaton Viterbi (engine) against the lattice engine on the unrolled automaton and brute force."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from varorder import lattice
from varorder.engine.automaton import automaton_viterbi
from varorder.lattice import Lattice


def _unroll(next_state, weight, obs, start):
    """The automaton over T positions as a Lattice: node (t, state), arcs labelled by column."""
    S, X = next_state.shape
    T = obs.shape[0]
    pos, src, dst, lab, w = [0], [], [], [], []
    node_of = {(0, start): 0}
    for t in range(T):
        frontier = sorted(s for (tt, s) in node_of if tt == t)
        for s in frontier:
            for x in range(X):
                key = (t + 1, int(next_state[s, x]))
                if key not in node_of:
                    node_of[key] = len(pos)
                    pos.append(t + 1)
                src.append(node_of[(t, s)])
                dst.append(node_of[key])
                lab.append(x)
                w.append(weight[s, x] + obs[t, x])
    return Lattice(np.array(pos), np.array(src), np.array(dst), np.array(lab), np.array(w))


def _score(next_state, weight, obs, start, columns):
    s, total = start, 0.0
    for t, x in enumerate(columns):
        total += weight[s, x] + obs[t, x]
        s = next_state[s, x]
    return total


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 2**32 - 1), st.integers(1, 4), st.integers(1, 3), st.integers(1, 4))
def test_matches_lattice_and_enumeration(seed, S, X, T):
    rng = np.random.default_rng(seed)
    next_state = rng.integers(0, S, size=(S, X))
    weight = rng.normal(size=(S, X))
    obs = rng.normal(size=(T, X))
    obs[rng.random((T, X)) < 0.2] = -np.inf
    columns, score = automaton_viterbi(next_state, weight, obs, 0)
    best = max(_score(next_state, weight, obs, 0, c) for c in itertools.product(range(X), repeat=T))
    assert np.isclose(score, best) or (score == best == -np.inf)
    assert np.isclose(score, lattice.viterbi(_unroll(next_state, weight, obs, 0))[1]) or score == -np.inf
    if score > -np.inf:
        assert np.isclose(_score(next_state, weight, obs, 0, columns), score)


def test_final_column_is_forced():
    rng = np.random.default_rng(1)
    next_state = rng.integers(0, 3, size=(3, 2))
    weight = rng.normal(size=(3, 2))
    obs = rng.normal(size=(4, 2))
    columns, score = automaton_viterbi(next_state, weight, obs, 0, final_column=1)
    assert columns[-1] == 1
    best = max(_score(next_state, weight, obs, 0, c + (1,)) for c in itertools.product(range(2), repeat=3))
    assert np.isclose(score, best)


def test_bad_input():
    with pytest.raises(ValueError, match="start"):
        automaton_viterbi(np.zeros((2, 2), int), np.zeros((2, 2)), np.zeros((3, 2)), 5)
    with pytest.raises(ValueError, match="symbol_scores"):
        automaton_viterbi(np.zeros((2, 2), int), np.zeros((2, 2)), np.zeros((3, 3)), 0)
    with pytest.raises(ValueError, match="next_state"):
        automaton_viterbi(np.full((2, 2), 7), np.zeros((2, 2)), np.zeros((3, 2)), 0)


@pytest.mark.parametrize("seed", range(8))
def test_registered_automaton_viterbi_equals_the_generic_lattice_recursion(seed):
    from varorder.engine.automaton import SPECIALISED_FORWARD, forward_value
    from varorder.engine.semiring import MAX

    rng = np.random.default_rng(seed)
    S, X, T = int(rng.integers(1, 5)), int(rng.integers(1, 4)), int(rng.integers(1, 5))
    next_state = rng.integers(0, S, size=(S, X))
    weight = np.round(rng.normal(size=(S, X)), 1)
    obs = rng.normal(size=(T, X))
    obs[rng.random((T, X)) < 0.2] = -np.inf
    start = int(rng.integers(0, S))
    final_column = int(rng.integers(-1, X))
    assert MAX in SPECIALISED_FORWARD
    fast = forward_value(next_state, weight, obs, start, final_column)
    generic = forward_value(next_state, weight, obs, start, final_column, specialised=False)
    assert fast == pytest.approx(generic, rel=1e-11) or fast == generic == -np.inf
    # the generic recursion in another semiring: log Z of the unrolled automaton by enumeration
    paths = itertools.product(range(X), repeat=T)
    scores = []
    for cols in paths:
        if final_column >= 0 and cols[-1] != final_column:
            continue
        s, total = start, 0.0
        for t, x in enumerate(cols):
            total += weight[s, x] + obs[t, x]
            s = next_state[s, x]
        scores.append(total)
    expected = np.logaddexp.reduce(scores) if scores else -np.inf
    got = forward_value(next_state, weight, obs, start, final_column, semiring="log")
    assert got == pytest.approx(expected, rel=1e-11, abs=1e-12) or got == expected == -np.inf
