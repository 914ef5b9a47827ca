"""The GREC-NEG'10 evaluation (Belz, Kow, Viethen & Gatt 2010) as its scorer prints it.

Over the slots: REG08-Type accuracy (the chosen RE's type — name / common / pronoun — equals the
original's), string accuracy (the chosen RE equals the original, compared with
:func:`varorder.neg.task.normal_key`), mean word-level edit distance between chosen and original
RE (Levenshtein over words) and its length-normalised form (each distance divided by the longer
RE's word count). Over the regenerated text: corpus BLEU-n (Papineni, Roukos, Ward & Zhu 2002),
n = 1…4, of the regenerated sentences against the original ones (one reference; cumulative:
geometric mean of the clipped n-gram precisions of orders 1…n, times the brevity penalty
exp(min(0, 1 − r/c))).
"""

from __future__ import annotations

import math
from collections import Counter

from varorder.errors import ParameterError
from varorder.eval.metrics import edit_distance

__all__ = ["bleu", "word_edit_distance", "neg_scores", "format_scores"]


def word_edit_distance(a: str, b: str) -> int:
    """Levenshtein distance between two strings' whitespace-separated words."""
    return edit_distance(a.split(), b.split())


def bleu(hypotheses, references, max_order: int = 4) -> list[float]:
    """Corpus BLEU-1 … BLEU-``max_order`` of token lists against one reference each."""
    if len(hypotheses) != len(references):
        raise ParameterError(f"{len(hypotheses)} hypotheses for {len(references)} references", name='hypotheses', value=hypotheses)
    matches, totals = [0] * max_order, [0] * max_order
    hyp_length = ref_length = 0
    for hyp, ref in zip(hypotheses, references):
        hyp_length += len(hyp)
        ref_length += len(ref)
        for n in range(1, max_order + 1):
            h = Counter(tuple(hyp[i:i + n]) for i in range(len(hyp) - n + 1))
            r = Counter(tuple(ref[i:i + n]) for i in range(len(ref) - n + 1))
            matches[n - 1] += sum(min(count, r[g]) for g, count in h.items())
            totals[n - 1] += max(len(hyp) - n + 1, 0)
    if hyp_length == 0:
        return [0.0] * max_order
    penalty = math.exp(min(0.0, 1.0 - ref_length / hyp_length))
    out, log_sum = [], 0.0
    for n in range(max_order):
        if matches[n] == 0 or totals[n] == 0:
            out.extend([0.0] * (max_order - n))
            break
        log_sum += math.log(matches[n] / totals[n])
        out.append(penalty * math.exp(log_sum / (n + 1)))
    return out


def neg_scores(slots, hypotheses, references, key=None) -> dict:
    """The challenge's figures.

    ``slots``: one (chosen RE, chosen type, original RE, original type) per slot; ``key`` maps an
    RE to its comparison form (default: as is). ``hypotheses``/``references``: the regenerated and
    original sentences as token lists (BLEU).
    """
    key = key or (lambda text: text)
    total = type_matches = string_matches = 0
    distance = normalised = 0.0
    for chosen, chosen_type, gold, gold_type in slots:
        total += 1
        type_matches += chosen_type == gold_type
        string_matches += key(chosen) == key(gold)
        d = word_edit_distance(key(chosen), key(gold))
        distance += d
        normalised += d / max(len(chosen.split()), len(gold.split()), 1)
    scores = {"total slots": total, "reg08 type matches": type_matches,
              "reg08 type accuracy": type_matches / total if total else 0.0, "string matches": string_matches,
              "string accuracy": string_matches / total if total else 0.0,
              "mean edit distance": distance / total if total else 0.0,
              "mean normalised edit distance": normalised / total if total else 0.0}
    for n, value in enumerate(bleu(hypotheses, references), start=1):
        scores[f"BLEU {n} score"] = value
    return scores


def format_scores(scores: dict) -> str:
    """One ``name : value`` line per figure, as the GREC-NEG scorer prints them."""
    lines = []
    for name, value in scores.items():
        lines.append(f"{name} : {value}" if isinstance(value, int) else f"{name} : {value:.6f}")
    return "\n".join(lines)
