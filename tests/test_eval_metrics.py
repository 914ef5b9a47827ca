"""Precision–recall and accuracy metrics against direct enumeration; PNG plots."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from varorder.eval.metrics import precision_recall_curve, recall_at_precision, sequence_accuracy


def _brute_first_drop(conf, correct, p):
    """The paper's wording: lower the threshold step by step; stop before accuracy first drops below p."""
    n = len(conf)
    answered_before = 0.0
    for t in sorted(set(conf), reverse=True):
        answered = [ok for c, ok in zip(conf, correct) if c >= t]
        if sum(answered) / len(answered) < p - 1e-12:
            return answered_before
        answered_before = len(answered) / n
    return answered_before


def _brute_recall_at_precision(conf, correct, p):
    """Try every confidence threshold: answer all examples with confidence ≥ t."""
    n = len(conf)
    best = 0.0
    for t in set(conf):
        answered = [c for c, ok in zip(conf, correct) if c >= t]
        hits = sum(ok for c, ok in zip(conf, correct) if c >= t)
        if hits / len(answered) >= p - 1e-12:
            best = max(best, len(answered) / n)
    return best


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([0.1, 0.5, 0.9, 0.99, 1.0]) | st.floats(0, 1), st.booleans()),
                min_size=1, max_size=30),
       st.sampled_from([0.5, 0.8, 0.99, 1.0]))
def test_recall_at_precision_matches_threshold_enumeration(items, p):
    conf = [c for c, _ in items]
    correct = [ok for _, ok in items]
    assert recall_at_precision(conf, correct, p) == pytest.approx(_brute_first_drop(conf, correct, p))
    assert recall_at_precision(conf, correct, p, rule="max") == pytest.approx(
        _brute_recall_at_precision(conf, correct, p))
    recall, precision, threshold = precision_recall_curve(conf, correct)
    for r, q, t in zip(recall, precision, threshold):  # every point is a threshold
        answered = np.array(conf) >= t
        assert r == pytest.approx(answered.mean())
        assert q == pytest.approx(np.array(correct)[answered].mean())
    assert recall[-1] == 1.0 and precision[-1] == pytest.approx(np.mean(correct))


def test_first_drop_stops_at_the_first_dip_where_max_skips_it():
    # precision 1, 1, 0.67 (dip), then 0.75, 0.8 — at P = 0.75 the paper stops at 2/5
    conf, correct = [0.9, 0.8, 0.7, 0.6, 0.5], [True, True, False, True, True]
    assert recall_at_precision(conf, correct, 0.75) == pytest.approx(0.4)
    assert recall_at_precision(conf, correct, 0.75, rule="max") == pytest.approx(1.0)
    with pytest.raises(ValueError, match="rule"):
        recall_at_precision(conf, correct, 0.75, rule="last")


def test_ties_are_answered_together():
    # two examples share the top confidence, one right and one wrong: no point has precision 1
    recall, precision, _ = precision_recall_curve([1.0, 1.0, 0.5], [True, False, True])
    assert recall.tolist() == pytest.approx([2 / 3, 1.0])
    assert precision.tolist() == pytest.approx([0.5, 2 / 3])
    assert recall_at_precision([1.0, 1.0, 0.5], [True, False, True], 0.99) == 0.0


def test_sequence_accuracy_counts_tokens_and_whole_sequences():
    acc = sequence_accuracy([[0, 1, 2], [1, 1]], [[0, 1, 1], [1, 1]])
    assert acc.token == pytest.approx(4 / 5) and acc.sequence == pytest.approx(0.5)
    with pytest.raises(ValueError, match=r"predictions\[0\]"):
        sequence_accuracy([[0, 1]], [[0, 1, 2]])
    with pytest.raises(ValueError, match="confidence"):
        precision_recall_curve([0.1, 0.2], [True])
    with pytest.raises(ValueError, match="precision"):
        recall_at_precision([0.1], [True], 0.0)


def test_plots_write_png(tmp_path):
    pytest.importorskip("matplotlib")
    from varorder.eval.plots import plot_curves, plot_precision_recall

    r, p, _ = precision_recall_curve([0.9, 0.8, 0.3], [True, True, False])
    plot_precision_recall({"model": (r, p)}, tmp_path / "pr.png")
    plot_curves({"a": ([1, 2], [0.5, 0.7])}, tmp_path / "sub" / "c.png", "x", "y")
    for name in ("pr.png", "sub/c.png"):
        assert (tmp_path / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
