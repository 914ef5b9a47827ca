"""Named-entity and chunking metrics: entity-level precision / recall / F1 (seqeval's two modes), per-label
token scores and sklearn-crfsuite's ``flat_*`` metrics.

Entity level (Tjong Kim Sang & De Meulder, CoNLL-2003; Nakayama, seqeval, 2018): the spans of each
sentence are read from its tags (:func:`varorder.io.schemes.spans`), a predicted span is correct when
a gold span of the same sentence has the same type, start and end, and per type

    P = correct / predicted,  R = correct / gold,  F1 = 2PR / (P + R)  (0 where a denominator is 0).

``mode="default"`` reads spans with conlleval's lenient rule (the ``conlleval`` script's and seqeval's
default numbers); ``mode="strict"`` with a ``scheme`` counts only spans well formed in that scheme
(seqeval's ``mode="strict"``). Averages as seqeval's: micro (counts pooled), macro (unweighted mean of
the per-type P, R and F1), weighted (mean weighted by gold support).

Token level (sklearn-crfsuite's ``metrics`` module, which calls scikit-learn on the flattened tags):
per-label P / R / F1 of the tokens, :func:`flat_classification_report`, accuracies. Computed here
without scikit-learn, to the same definitions.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from varorder.errors import ParameterError
from varorder.io.schemes import canonical_scheme, spans

__all__ = ["Scores", "EntityReport", "entity_scores", "entity_report", "classification_report", "token_scores",
           "flat_accuracy_score", "flat_precision_score", "flat_recall_score", "flat_f1_score",
           "flat_classification_report", "sequence_accuracy_score"]


@dataclass(frozen=True)
class Scores:
    precision: float
    recall: float
    f1: float
    support: int


@dataclass
class EntityReport:
    """Per-type :class:`Scores` (sorted by type) and the micro, macro and weighted averages."""

    per_type: dict = field(default_factory=dict)
    micro: Scores | None = None
    macro: Scores | None = None
    weighted: Scores | None = None
    mode: str = "default"
    scheme: str | None = None

    def as_dict(self) -> dict:
        def one(s):
            return {"precision": s.precision, "recall": s.recall, "f1": s.f1, "support": s.support}

        return {"mode": self.mode, "scheme": self.scheme, "per_type": {k: one(v) for k, v in self.per_type.items()},
                "micro": one(self.micro), "macro": one(self.macro), "weighted": one(self.weighted)}


def _ratio(a, b) -> float:
    return a / b if b else 0.0


def _f1(p, r) -> float:
    return 2 * p * r / (p + r) if p + r else 0.0


def _check_lengths(y_true, y_pred):
    if len(y_true) != len(y_pred):
        raise ParameterError(f"y_true has {len(y_true)} sequences but y_pred has {len(y_pred)}")
    for i, (t, p) in enumerate(zip(y_true, y_pred)):
        if len(t) != len(p):
            raise ParameterError(f"y_true[{i}] has {len(t)} tags but y_pred[{i}] has {len(p)}")


def _report(counts_true: Counter, counts_pred: Counter, counts_hit: Counter, names) -> tuple[dict, Scores, Scores,
                                                                                            Scores]:
    per = {}
    for name in names:
        p = _ratio(counts_hit[name], counts_pred[name])
        r = _ratio(counts_hit[name], counts_true[name])
        per[name] = Scores(p, r, _f1(p, r), counts_true[name])
    hit, pred, true = sum(counts_hit[n] for n in names), sum(counts_pred[n] for n in names), sum(
        counts_true[n] for n in names)
    mp, mr = _ratio(hit, pred), _ratio(hit, true)
    micro = Scores(mp, mr, _f1(mp, mr), true)
    n = len(per)
    macro = Scores(*(sum(getattr(s, a) for s in per.values()) / n if n else 0.0
                     for a in ("precision", "recall", "f1")), true)
    weighted = Scores(*(_ratio(sum(getattr(s, a) * s.support for s in per.values()), true)
                        for a in ("precision", "recall", "f1")), true)
    return per, micro, macro, weighted


def entity_report(y_true, y_pred, mode: str = "default", scheme: str | None = None) -> EntityReport:
    """Entity-level scores of predicted tag sequences against gold ones (see the module doc).

    ``mode="strict"`` needs ``scheme`` (IOB1, IOB2/BIO, BIOES/IOBES, BILOU); in the default mode a
    ``scheme`` is only recorded.
    """
    if mode not in ("default", "strict"):
        raise ParameterError(f"mode must be 'default' or 'strict', got {mode!r}")
    if mode == "strict":
        if scheme is None:
            raise ParameterError("mode='strict' needs a scheme (IOB1, IOB2, BIOES, BILOU)")
        scheme = canonical_scheme(scheme)
    _check_lengths(y_true, y_pred)
    read = (lambda tags: spans(tags, scheme)) if mode == "strict" else spans
    counts_true, counts_pred, counts_hit = Counter(), Counter(), Counter()
    for gold, predicted in zip(y_true, y_pred):
        g, p = set(read(list(gold))), set(read(list(predicted)))
        counts_true.update(s[0] for s in g)
        counts_pred.update(s[0] for s in p)
        counts_hit.update(s[0] for s in g & p)
    names = sorted(set(counts_true) | set(counts_pred))
    per, micro, macro, weighted = _report(counts_true, counts_pred, counts_hit, names)
    return EntityReport(per, micro, macro, weighted, mode, scheme if mode == "strict" else (
        None if scheme is None else canonical_scheme(scheme)))


def entity_scores(y_true, y_pred, average: str = "micro", mode: str = "default", scheme: str | None = None) -> Scores:
    """One average (``"micro"``, ``"macro"`` or ``"weighted"``) of :func:`entity_report`."""
    if average not in ("micro", "macro", "weighted"):
        raise ParameterError(f"average must be 'micro', 'macro' or 'weighted', got {average!r}")
    return getattr(entity_report(y_true, y_pred, mode, scheme), average)


def _format(rows, digits: int, averages) -> str:
    names = [name for name, _ in rows] + [name for name, _ in averages]
    width = max([len(n) for n in names] + [len("weighted avg"), digits])
    head = " " * width + "".join(f"{h:>{max(9, digits + 3)}}" for h in ("precision", "recall", "f1-score")) + \
        f"{'support':>10}"
    lines = [head, ""]

    def line(name, s):
        return f"{name:>{width}}" + "".join(f"{v:>{max(9, digits + 3)}.{digits}f}"
                                            for v in (s.precision, s.recall, s.f1)) + f"{s.support:>10}"

    lines += [line(n, s) for n, s in rows]
    lines.append("")
    lines += [line(n, s) for n, s in averages]
    return "\n".join(lines) + "\n"


def classification_report(y_true, y_pred, mode: str = "default", scheme: str | None = None, digits: int = 2) -> str:
    """seqeval's ``classification_report``: a row per entity type, then micro, macro and weighted averages."""
    report = entity_report(y_true, y_pred, mode, scheme)
    return _format(list(report.per_type.items()), digits, [("micro avg", report.micro), ("macro avg", report.macro),
                                                           ("weighted avg", report.weighted)])


# -- token level (sklearn-crfsuite's flat_* metrics) ---------------------------------------------------------


def _flat(y_true, y_pred):
    _check_lengths(y_true, y_pred)
    return [t for s in y_true for t in s], [p for s in y_pred for p in s]


def token_scores(y_true, y_pred, labels=None) -> dict:
    """Per-label token :class:`Scores` over the flattened sequences (``labels``: which, in that order; default
    every label seen, sorted), as scikit-learn's ``precision_recall_fscore_support(average=None)``."""
    flat_true, flat_pred = _flat(y_true, y_pred)
    if labels is None:
        labels = sorted(set(flat_true) | set(flat_pred), key=lambda v: (str(type(v)), v))
    counts_true, counts_pred = Counter(flat_true), Counter(flat_pred)
    counts_hit = Counter(t for t, p in zip(flat_true, flat_pred) if t == p)
    per, _, _, _ = _report(counts_true, counts_pred, counts_hit, list(labels))
    return per


def _average(y_true, y_pred, labels, average, attribute) -> float:
    per = token_scores(y_true, y_pred, labels)
    if average in ("micro",):
        flat_true, flat_pred = _flat(y_true, y_pred)
        chosen = set(per)
        hit = sum(1 for t, p in zip(flat_true, flat_pred) if t == p and t in chosen)
        pred = sum(1 for p in flat_pred if p in chosen)
        true = sum(1 for t in flat_true if t in chosen)
        prec, rec = _ratio(hit, pred), _ratio(hit, true)
        return {"precision": prec, "recall": rec, "f1": _f1(prec, rec)}[attribute]
    if average == "macro":
        return sum(getattr(s, attribute) for s in per.values()) / len(per) if per else 0.0
    if average == "weighted":
        total = sum(s.support for s in per.values())
        return _ratio(sum(getattr(s, attribute) * s.support for s in per.values()), total)
    raise ParameterError(f"average must be 'micro', 'macro' or 'weighted', got {average!r}")


def flat_accuracy_score(y_true, y_pred) -> float:
    """Fraction of tokens tagged right (sklearn-crfsuite's ``flat_accuracy_score``)."""
    flat_true, flat_pred = _flat(y_true, y_pred)
    return _ratio(sum(t == p for t, p in zip(flat_true, flat_pred)), len(flat_true))


def flat_precision_score(y_true, y_pred, labels=None, average: str = "micro") -> float:
    return _average(y_true, y_pred, labels, average, "precision")


def flat_recall_score(y_true, y_pred, labels=None, average: str = "micro") -> float:
    return _average(y_true, y_pred, labels, average, "recall")


def flat_f1_score(y_true, y_pred, labels=None, average: str = "micro") -> float:
    """Token F1 over ``labels`` (sklearn-crfsuite's ``flat_f1_score``; leave ``O`` out of ``labels`` for the
    usual NER token F1)."""
    return _average(y_true, y_pred, labels, average, "f1")


def flat_classification_report(y_true, y_pred, labels=None, digits: int = 2) -> str:
    """Per-label token precision / recall / F1 / support, then micro, macro and weighted averages
    (sklearn-crfsuite's ``flat_classification_report``)."""
    per = token_scores(y_true, y_pred, labels)
    total = sum(s.support for s in per.values())
    averages = [(name, Scores(*(_average(y_true, y_pred, list(per), key, a) for a in ("precision", "recall", "f1")),
                              total)) for name, key in (("micro avg", "micro"), ("macro avg", "macro"),
                                                        ("weighted avg", "weighted"))]
    return _format([(str(k), v) for k, v in per.items()], digits, averages)


def sequence_accuracy_score(y_true, y_pred) -> float:
    """Fraction of sequences tagged right in full."""
    _check_lengths(y_true, y_pred)
    return _ratio(sum(list(t) == list(p) for t, p in zip(y_true, y_pred)), len(y_true))
