"""The shared selection step of RCMS and beam builders (varorder.engine.selection) against
its definition: a stable sort by −forward score read from the top, per class."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from varorder.engine.selection import group_of_slot, keep_best


def reference(fwd, classes, n_classes, budget):
    keep = np.zeros(fwd.shape[0], bool)
    for k in range(n_classes):
        members = [g for g in range(fwd.shape[0]) if classes[g] == k and fwd[g] > -np.inf]
        order = sorted(members, key=lambda g: (-fwd[g], g))  # ties: the earlier candidate
        keep[order[:budget]] = True
    return keep


scores = st.one_of(st.sampled_from([-np.inf, 0.0, -1.0, 1.5]), st.floats(-5, 5, allow_nan=False))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(scores, st.integers(-1, 2)), max_size=40), st.integers(0, 6), st.integers(1, 3))
def test_keep_best_is_the_top_of_a_stable_sort_per_class(items, budget, n_classes):
    fwd = np.array([f for f, _ in items], dtype=np.float64)
    classes = np.array([min(c, n_classes - 1) for _, c in items], dtype=np.int64)
    active = np.zeros(len(items), np.bool_)
    keep_best(fwd, len(items), classes, n_classes, budget, active)
    np.testing.assert_array_equal(active, reference(fwd, classes, n_classes, budget))


def test_keep_best_adds_to_what_is_already_kept():
    fwd = np.array([3.0, 2.0, 1.0, 0.0])
    active = np.array([False, False, False, True])
    keep_best(fwd, 4, np.zeros(4, np.int64), 1, 1, active)
    assert active.tolist() == [True, False, False, True]


def test_group_of_slot_opens_once_and_log_adds():
    table = np.full(4, -1, np.int64)
    g_fwd = np.empty(4)
    g, n, new = group_of_slot(table, 2, np.log(0.25), 0, g_fwd)
    assert (g, n, new) == (0, 1, True)
    g, n, new = group_of_slot(table, 2, np.log(0.5), n, g_fwd)
    assert (g, n, new) == (0, 1, False) and np.isclose(np.exp(g_fwd[0]), 0.75)
    g, n, new = group_of_slot(table, 1, -np.inf, n, g_fwd)
    assert (g, n, new) == (1, 2, True) and g_fwd[1] == -np.inf
