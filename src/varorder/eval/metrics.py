"""Sequence-labelling accuracy and confidence-ranked precision–recall.

Precision–recall as in Steinhardt & Liang (ICML 2015, §5): each example gets a
prediction and a confidence (the model probability of that prediction); examples are
answered in order of decreasing confidence, and answering the top k gives

    recall R = k / N,    precision P = (# correct among the top k) / k.

Examples with equal confidence cannot be told apart, so they are answered together:
the curve has one point per distinct confidence value. "Recall at precision P" is, by
default, the paper's definition: "the fraction R of examples we can answer before our
accuracy drops below P" — the recall of the last point before the *first* point whose
precision is below P (0 if the first point already is). ``rule="max"`` gives the largest
recall of any point with precision ≥ P (an alternative, ≥ the paper's figure: it may
skip over a dip below P).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from varorder.errors import ParameterError

__all__ = ["SequenceAccuracy", "sequence_accuracy", "precision_recall_curve", "recall_at_precision", "mapping_accuracy",
           "edit_distance", "character_error_rate", "exact_match"]


@dataclass(frozen=True)
class SequenceAccuracy:
    token: float
    sequence: float
    num_tokens: int
    num_sequences: int


def sequence_accuracy(predictions, golds) -> SequenceAccuracy:
    """Per-token and whole-sequence accuracy of predicted label sequences."""
    if len(predictions) != len(golds):
        raise ParameterError(f"predictions and golds must have the same length, got {len(predictions)} and {len(golds)}", name='predictions', value=predictions)
    right = tokens = whole = 0
    for k, (p, g) in enumerate(zip(predictions, golds)):
        p, g = np.asarray(p), np.asarray(g)
        if p.shape != g.shape:
            raise ParameterError(f"predictions[{k}] has shape {p.shape}, golds[{k}] has shape {g.shape}", name='predictions', value=predictions)
        hits = int((p == g).sum())
        right += hits
        tokens += g.size
        whole += hits == g.size
    n = len(golds)
    return SequenceAccuracy(right / tokens if tokens else float("nan"), whole / n if n else float("nan"), tokens, n)


def _check(confidence, correct):
    conf = np.asarray(confidence, dtype=np.float64)
    ok = np.asarray(correct, dtype=bool)
    if conf.ndim != 1 or conf.shape != ok.shape:
        raise ParameterError(f"confidence and correct must be 1-d of equal length, got {conf.shape} and {ok.shape}", name='confidence', value=confidence)
    if np.isnan(conf).any():
        raise ParameterError("confidence must not contain NaN", name='confidence', value=confidence)
    return conf, ok


def precision_recall_curve(confidence, correct):
    """(recall, precision, threshold): one point per distinct confidence, most confident first."""
    conf, ok = _check(confidence, correct)
    n = conf.shape[0]
    if n == 0:
        return np.zeros(0), np.zeros(0), np.zeros(0)
    order = np.argsort(-conf, kind="stable")
    conf, ok = conf[order], ok[order]
    hits = np.cumsum(ok)
    last_of_tie = np.flatnonzero(np.append(conf[1:] != conf[:-1], True))
    k = last_of_tie + 1
    return k / n, hits[last_of_tie] / k, conf[last_of_tie]


def recall_at_precision(confidence, correct, precision: float = 0.99, rule: str = "first_drop") -> float:
    """Recall answered before precision first drops below ``precision`` (``rule="first_drop"``,
    the paper's), or the largest recall at precision ≥ ``precision`` (``rule="max"``)."""
    if not 0 < precision <= 1:
        raise ParameterError(f"precision must be in (0, 1], got {precision}", name='precision', value=precision)
    if rule not in ("first_drop", "max"):
        raise ParameterError(f"rule must be 'first_drop' or 'max', got {rule!r}", name='rule', value=rule)
    recall, prec, _ = precision_recall_curve(confidence, correct)
    good = prec >= precision - 1e-12
    if rule == "max":
        return float(recall[good].max()) if good.any() else 0.0
    if good.all():
        return float(recall[-1]) if recall.size else 0.0
    first_bad = int(np.argmin(good))
    return float(recall[first_bad - 1]) if first_bad > 0 else 0.0


def mapping_accuracy(decoded, truth, symbols) -> float:
    """Fraction of the distinct cipher ``symbols`` whose decoded plaintext word is the true
    one (Nuhn, Schamper & Ney 2013; Steinhardt & Liang 2015, §6): ``decoded[s]`` and
    ``truth[s]`` are word ids of symbol s. Symbols absent from ``symbols`` do not count."""
    symbols = np.unique(np.asarray(symbols, dtype=np.int64))
    decoded, truth = np.asarray(decoded), np.asarray(truth)
    if symbols.size == 0:
        raise ParameterError("mapping_accuracy needs at least one cipher symbol", name='symbols', value=symbols)
    if symbols.min() < 0 or symbols.max() >= min(len(decoded), len(truth)):
        raise ParameterError(f"symbols must lie in [0, {min(len(decoded), len(truth))}), got {symbols.min()} .. {symbols.max()}", name='symbols', value=symbols)
    return float(np.mean(decoded[symbols] == truth[symbols]))


def edit_distance(a, b) -> int:
    """Levenshtein distance (unit insertions, deletions, substitutions) between two sequences."""
    previous = list(range(len(b) + 1))
    for i, x in enumerate(a, 1):
        current = [i] + [0] * len(b)
        for j, y in enumerate(b, 1):
            current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (x != y))
        previous = current
    return previous[-1]


def character_error_rate(predictions, references) -> float:
    """Σ edit distance / Σ reference length (Steinhardt & Liang 2015, Fig. 4: an empty output scores 1.0)."""
    if len(predictions) != len(references) or not references:
        raise ParameterError("predictions and references must be non-empty lists of equal length", name='predictions', value=predictions)
    total = sum(len(r) for r in references)
    if total == 0:
        raise ParameterError("references must not all be empty", name='references', value=references)
    return sum(edit_distance(p, r) for p, r in zip(predictions, references)) / total


def exact_match(predictions, references) -> float:
    """Fraction of predictions equal to their reference."""
    if len(predictions) != len(references) or not references:
        raise ParameterError("predictions and references must be non-empty lists of equal length", name='predictions', value=predictions)
    return sum(p == r for p, r in zip(predictions, references)) / len(references)
