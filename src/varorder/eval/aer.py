"""Alignment error rate (Och & Ney 2003) with sure (S) and possible (P ⊇ S) links.

Over a corpus: precision = |A∩P| / |A|, recall = |A∩S| / |S|,
AER = 1 − (|A∩S| + |A∩P|) / (|A| + |S|).
"""

from __future__ import annotations

from dataclasses import dataclass

from varorder.errors import ParameterError

__all__ = ["AlignmentScores", "alignment_error_rate"]


@dataclass(frozen=True)
class AlignmentScores:
    precision: float
    recall: float
    aer: float
    n_predicted: int
    n_sure: int


def alignment_error_rate(predicted, sure, possible) -> AlignmentScores:
    """Corpus-level scores; each argument is a list (one per sentence) of sets of (i, j).

    ``possible`` need not repeat the sure links (they are added).
    """
    if not (len(predicted) == len(sure) == len(possible)):
        raise ParameterError(f"predicted, sure and possible must have one entry per sentence, "
                             f"got {len(predicted)}, {len(sure)}, {len(possible)}", name='predicted', value=predicted)
    a_total = s_total = a_s = a_p = 0
    for a, s, p in zip(predicted, sure, possible):
        a, s = set(a), set(s)
        p = set(p) | s
        a_total += len(a)
        s_total += len(s)
        a_s += len(a & s)
        a_p += len(a & p)
    precision = a_p / a_total if a_total else 0.0
    recall = a_s / s_total if s_total else 0.0
    denom = a_total + s_total
    aer = 1.0 - (a_s + a_p) / denom if denom else 0.0
    return AlignmentScores(precision, recall, aer, a_total, s_total)
