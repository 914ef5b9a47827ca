"""Unsupervised parsing metrics (Klein & Manning 2002, 2004).

* Directed attachment accuracy: the share of words whose predicted head (−1 = root)
  is the gold head. Undirected: the share of words whose predicted arc {a, h(a)}
  is a gold arc in either direction (the root arc counts as {a, ROOT}).
* Unlabeled bracketing precision / recall / F1 (WSJ10 conventions): spans of
  length 1 and the whole-sentence span are left out of both sides, duplicate
  spans count once, and counts are summed over the corpus before dividing.
"""

from __future__ import annotations

from varorder.errors import ParameterError

__all__ = ["attachment_scores", "bracket_scores", "evaluable_spans"]


def attachment_scores(predicted, gold) -> tuple[float, float]:
    """(directed, undirected) accuracy over all words of paired head sequences."""
    directed = undirected = total = 0
    for k, (p, g) in enumerate(zip(predicted, gold, strict=True)):
        if len(p) != len(g):
            raise ParameterError(f"sentence {k}: {len(p)} predicted heads for {len(g)} gold heads", name='predicted', value=predicted)
        gold_arcs = {frozenset((a, int(h))) for a, h in enumerate(g)}
        for a, h in enumerate(p):
            total += 1
            directed += int(h == g[a])
            undirected += int(frozenset((a, int(h))) in gold_arcs)
    if total == 0:
        raise ParameterError("no words to score", name='predicted', value=predicted)
    return directed / total, undirected / total


def evaluable_spans(spans, n: int) -> set:
    return {(i, j) for i, j in spans if 1 < j - i < n}


def bracket_scores(predicted, gold, lengths) -> tuple[float, float, float]:
    """(precision, recall, F1) of unlabeled brackets, corpus-level; 1.0 where a side has no brackets."""
    match = n_pred = n_gold = 0
    for p, g, n in zip(predicted, gold, lengths, strict=True):
        p = evaluable_spans(p, n)
        g = evaluable_spans(g, n)
        match += len(p & g)
        n_pred += len(p)
        n_gold += len(g)
    precision = match / n_pred if n_pred else 1.0
    recall = match / n_gold if n_gold else 1.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return precision, recall, f1
