"""Entity-level and token-level NER metrics against seqeval and scikit-learn, and hand-computed cases."""

import random
import warnings
import zlib

import pytest

from varorder.eval import ner
from varorder.io import schemes

seqeval_metrics = pytest.importorskip("seqeval.metrics", reason="seqeval (test extra) is not installed")
import seqeval.scheme as seqeval_scheme  # noqa: E402

PREFIXES = {"IOB1": "IOB", "IOB2": "IOB", "BIOES": "IOBES", "BILOU": "IOBLU"}
SEQEVAL_SCHEME = {"IOB1": seqeval_scheme.IOB1, "IOB2": seqeval_scheme.IOB2, "BIOES": seqeval_scheme.IOBES,
                  "BILOU": seqeval_scheme.BILOU}


def random_tags(rng, prefixes, n_sentences=6):
    out = []
    for _ in range(n_sentences):
        n = rng.randint(1, 8)
        out.append(["O" if (p := rng.choice(prefixes)) == "O" else f"{p}-{rng.choice('XYZ')}" for _ in range(n)])
    return out


def seqeval_numbers(y_true, y_pred, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = {}
        for average in ("micro", "macro", "weighted"):
            out[average] = tuple(float(f(y_true, y_pred, average=average, zero_division=0, **kwargs)) for f in (
                seqeval_metrics.precision_score, seqeval_metrics.recall_score, seqeval_metrics.f1_score))
        report = seqeval_metrics.classification_report(y_true, y_pred, output_dict=True, zero_division=0, **kwargs)
        return out, report


def check_equal(y_true, y_pred, mode, scheme):
    kwargs = {} if mode == "default" else {"mode": "strict", "scheme": SEQEVAL_SCHEME[scheme]}
    expected, report = seqeval_numbers(y_true, y_pred, **kwargs)
    ours = ner.entity_report(y_true, y_pred, mode=mode, scheme=scheme if mode == "strict" else None)
    for average, numbers in expected.items():
        got = getattr(ours, average)
        assert (got.precision, got.recall, got.f1) == pytest.approx(numbers, abs=1e-12), (average, y_true, y_pred)
    types = {k for k in report if not k.endswith("avg")}
    assert types == set(ours.per_type)
    for name in types:
        s = ours.per_type[name]
        assert (s.precision, s.recall, s.f1, s.support) == pytest.approx(
            (report[name]["precision"], report[name]["recall"], report[name]["f1-score"], report[name]["support"]))


@pytest.mark.parametrize("scheme", list(PREFIXES))
@pytest.mark.parametrize("mode", ["default", "strict"])
def test_entity_scores_equal_seqeval_on_random_sequences(mode, scheme):
    # a seed fixed across processes (str hashes are salted per process)
    rng = random.Random(zlib.crc32(f"{mode}-{scheme}".encode()) % 1000)
    prefixes = PREFIXES[scheme]
    compared = 0
    for _ in range(150):
        y_true = random_tags(rng, prefixes)
        y_pred = [[t if rng.random() < 0.6 else ("O" if (p := rng.choice(prefixes)) == "O" else f"{p}-{rng.choice('XY')}")
                   for t in sentence] for sentence in y_true]
        if not any(schemes.spans(s) for s in y_true + y_pred):
            continue  # seqeval divides by zero types
        check_equal(y_true, y_pred, mode, scheme)
        compared += 1
    assert compared > 100


def test_spans_equal_seqeval_get_entities():
    from seqeval.metrics.sequence_labeling import get_entities

    rng = random.Random(3)
    for _ in range(300):
        tags = random_tags(rng, "IOBESLU", 1)[0]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            expected = [(t, s, e + 1) for t, s, e in get_entities(tags)]
        assert schemes.spans(tags) == expected, tags


def test_invalid_sequences_by_hand():
    # O I-PER: conlleval counts a PER span; strict BIO does not
    gold = [["B-PER", "I-PER", "O", "B-LOC"]]
    pred = [["O", "I-PER", "O", "B-LOC"]]
    lenient = ner.entity_report(gold, pred)
    assert lenient.per_type["LOC"].f1 == 1.0
    assert lenient.per_type["PER"].precision == 0.0  # (PER, 1, 2) is not (PER, 0, 2)
    pred = [["I-PER", "I-PER", "O", "B-LOC"]]
    assert ner.entity_report(gold, pred).micro.f1 == 1.0  # I-PER I-PER reads as one span in default mode
    strict = ner.entity_report(gold, pred, mode="strict", scheme="BIO")
    assert strict.micro.precision == 1.0 and strict.micro.recall == 0.5  # the I-I span is not well formed
    assert strict.micro.f1 == pytest.approx(2 / 3)
    # BIOES: B without E is no span in strict mode, one in default mode
    gold = [["B-ORG", "E-ORG", "S-PER"]]
    pred = [["B-ORG", "I-ORG", "S-PER"]]
    assert ner.entity_report(gold, pred, mode="strict", scheme="BIOES").micro.precision == 1.0
    assert ner.entity_report(gold, pred, mode="strict", scheme="BIOES").micro.recall == 0.5
    assert ner.entity_report(gold, pred).per_type["ORG"].f1 == 1.0
    # type change inside a span: B-PER I-LOC is two spans (PER, LOC) by conlleval
    assert schemes.spans(["B-PER", "I-LOC"]) == [("PER", 0, 1), ("LOC", 1, 2)]
    assert schemes.spans(["B-PER", "I-LOC"], "BIO") == [("PER", 0, 1)]
    with pytest.raises(ValueError, match="not a IOB2 tag"):
        ner.entity_report([["S-PER"]], [["S-PER"]], mode="strict", scheme="BIO")
    with pytest.raises(ValueError, match="needs a scheme"):
        ner.entity_report(gold, pred, mode="strict")


def test_macro_and_weighted_by_hand():
    gold = [["B-A", "O", "B-B", "I-B", "B-B"]]
    pred = [["B-A", "O", "B-B", "I-B", "O"]]
    report = ner.entity_report(gold, pred)
    assert report.per_type["A"] == ner.Scores(1.0, 1.0, 1.0, 1)
    assert report.per_type["B"] == ner.Scores(1.0, 0.5, pytest.approx(2 / 3), 2)
    assert report.micro.recall == pytest.approx(2 / 3) and report.micro.precision == 1.0
    assert report.macro.recall == pytest.approx(0.75)
    assert report.weighted.recall == pytest.approx((1 * 1 + 0.5 * 2) / 3)
    text = ner.classification_report(gold, pred)
    assert "micro avg" in text and "weighted avg" in text and text.splitlines()[2].split()[0] == "A"


def test_flat_metrics_equal_scikit_learn():
    metrics = pytest.importorskip("sklearn.metrics")
    rng = random.Random(5)
    for _ in range(40):
        y_true = random_tags(rng, "IOB")
        y_pred = [[t if rng.random() < 0.5 else rng.choice(["O", "B-X", "I-Y"]) for t in s] for s in y_true]
        flat_t = [t for s in y_true for t in s]
        flat_p = [t for s in y_pred for t in s]
        labels = sorted(set(flat_t) - {"O"})
        if not labels:
            continue
        assert ner.flat_accuracy_score(y_true, y_pred) == pytest.approx(metrics.accuracy_score(flat_t, flat_p))
        for average in ("micro", "macro", "weighted"):
            for ours, theirs in ((ner.flat_f1_score, metrics.f1_score), (ner.flat_precision_score,
                                                                         metrics.precision_score),
                                 (ner.flat_recall_score, metrics.recall_score)):
                assert ours(y_true, y_pred, labels=labels, average=average) == pytest.approx(
                    theirs(flat_t, flat_p, labels=labels, average=average, zero_division=0)), average
    report = ner.flat_classification_report(y_true, y_pred, labels=labels, digits=3)
    assert all(label in report for label in labels) and "macro avg" in report
    assert ner.sequence_accuracy_score([["O"], ["B-X"]], [["O"], ["O"]]) == 0.5
