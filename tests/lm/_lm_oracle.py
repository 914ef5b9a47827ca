"""Brute-force references for the n-gram LM tests: dict-of-tuples models, equation 7 by
recursion, interpolated estimators written from their textbook definitions, and
enumeration of left extensions. Slow on purpose; only small models go through here."""

from __future__ import annotations

import itertools
import math
from collections import Counter
from pathlib import Path

import numpy as np

from varorder.lm import Vocabulary
from varorder.lm.model import NgramLM
from _shared_data import SHARED_DATA



def shared_data(*parts: str) -> Path:
    """A path under ../shared/data, skipping the test when it is absent."""
    import pytest

    path = SHARED_DATA.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"shared data {path} is absent on this machine")
    return path


def table_of(model: NgramLM) -> dict[tuple[int, ...], tuple[float, float]]:
    """The model's stored n-grams as {ids: (log10 p, log10 bow)}."""
    table = {}
    for order in range(1, model.order + 1):
        rows, probs, backoffs = model.ngrams(order)
        for row, p, b in zip(rows.tolist(), probs, backoffs):
            table[tuple(row)] = (float(p), float(b))
    return table


def backoff_log10prob(table, order: int, context, word: int) -> float:
    """Equation 7 of Carter et al. (2012) by its recursion, on a dict."""
    context = tuple(context)[max(0, len(context) - (order - 1)):] if order > 1 else ()
    paid = 0.0
    for start in range(len(context) + 1):
        history = context[start:]
        if history + (word,) in table:
            return table[history + (word,)][0] + paid
        if history in table:
            paid += table[history][1]
    raise AssertionError(f"word {word} has no unigram")


def brute_force_max_log10prob(table, order: int, context, word: int, extension_words) -> float:
    """max over every left extension e filling the context to order - 1 words of
    log10 p(word | e context)."""
    context = tuple(context)
    missing = order - 1 - len(context)
    return max(
        backoff_log10prob(table, order, extension + context, word)
        for extension in itertools.product(extension_words, repeat=missing)
    )


def random_model(
    rng: np.random.Generator, n_words: int, order: int, density: float = 0.35, closed: bool = False, max_backoff: float = 0.6
):
    """A random ARPA-style model over ``n_words`` plain words plus <unk>, <s>, </s>:
    random n-grams (not closed under prefixes or suffixes unless ``closed``), random
    log-probabilities and back-offs, some positive, as hand-edited or pruned files have.
    Returns (model, table)."""
    vocabulary = Vocabulary([f"w{i}" for i in range(n_words)])
    size = len(vocabulary)
    table: dict[tuple[int, ...], tuple[float, float]] = {}
    for word in range(size):
        table[(word,)] = (float(rng.uniform(-3, -0.1)), float(rng.uniform(-1.0, max_backoff)))
    table[(vocabulary.bos_id,)] = (-math.inf, table[(vocabulary.bos_id,)][1])
    predictable = [w for w in range(size) if w != vocabulary.bos_id]
    context_words = [w for w in range(size) if w != vocabulary.eos_id]
    for m in range(2, order + 1):
        for context in itertools.product(context_words, repeat=m - 1):
            if vocabulary.bos_id in context[1:]:
                continue
            for word in predictable:
                if rng.random() < density ** (m - 1):
                    backoff = float(rng.uniform(-1.0, max_backoff)) if m < order else 0.0
                    table[context + (word,)] = (float(rng.uniform(-3, -0.05)), backoff)
    if closed:
        # Add missing prefixes and suffixes with random values of their own, so that the
        # model inserts nothing (inserted entries would carry back-off values).
        for m in range(order, 1, -1):
            for gram in [g for g in table if len(g) == m]:
                for part in (gram[:-1], gram[1:]):
                    if part not in table:
                        table[part] = (float(rng.uniform(-3, -0.05)), float(rng.uniform(-1.0, max_backoff)))
    ngrams = []
    for m in range(1, order + 1):
        items = [(k, v) for k, v in table.items() if len(k) == m]
        rows = np.asarray([k for k, _ in items], dtype=np.int64).reshape(-1, m)
        ngrams.append((rows, np.asarray([v[0] for _, v in items]), np.asarray([v[1] for _, v in items])))
    model = NgramLM.from_ngrams(vocabulary, ngrams)
    # The dict keeps float32-rounded values so both sides add the same numbers.
    table = {k: (float(np.float32(p)), float(np.float32(b))) for k, (p, b) in table.items()}
    return model, table


def random_corpus(rng: np.random.Generator, n_sentences: int, n_words: int, max_length: int = 7) -> list[str]:
    """Sentences over a Zipf-ish small vocabulary, so counts of every size occur."""
    weights = 1.0 / np.arange(1, n_words + 1)
    weights /= weights.sum()
    sentences = []
    for _ in range(n_sentences):
        length = int(rng.integers(0, max_length + 1))
        sentences.append(" ".join(f"t{int(i)}" for i in rng.choice(n_words, size=length, p=weights)))
    return [s for s in sentences if s] or ["t0"]


class InterpolatedReference:
    """Textbook interpolated estimators on dicts of tuples (strings), for comparison.

    method: 'kneser-ney' (Chen & Goodman's modified KN with KenLM's count adjustment),
    'absolute' (discount, smoothing on unigrams) or 'additive' (alpha, lower order prior).
    """

    def __init__(self, sentences, order, method, discount=0.25, smoothing=0.01, alpha=1.0, fallback=(0.5, 1.0, 1.5)):
        self.order, self.method = order, method
        self.discount, self.smoothing, self.alpha = discount, smoothing, alpha
        padded = [["<s>"] + s.split() + ["</s>"] for s in sentences]
        self.words = sorted({w for s in padded for w in s} | {"<unk>"})
        self.predictable = [w for w in self.words if w != "<s>"]
        raw = Counter()
        for s in padded:
            for m in range(1, order + 1):
                for end in range(m - 1 if m > 1 else 1, len(s)):
                    raw[tuple(s[end - m + 1:end + 1])] += 1
        self.raw = raw
        if method == "kneser-ney":
            left = Counter()
            for gram in raw:
                if len(gram) >= 2:
                    left[gram[1:]] += 1
            self.counts = Counter()
            for gram, count in raw.items():
                if len(gram) == order or gram[0] == "<s>":
                    self.counts[gram] = count
                else:
                    self.counts[gram] = left[gram]
            self.discounts = {}
            for m in range(1, order + 1):
                values = [c for g, c in self.counts.items() if len(g) == m and g != ("<s>",)]
                n = [sum(1 for c in values if c == k) for k in (1, 2, 3, 4)]
                d = None
                if min(n) > 0:
                    y = n[0] / (n[0] + 2 * n[1])
                    d = (1 - 2 * y * n[1] / n[0], 2 - 3 * y * n[2] / n[1], 3 - 4 * y * n[3] / n[2])
                    if not all(0 < dk < k for k, dk in enumerate(d, 1)):
                        d = None
                self.discounts[m] = d or fallback
        else:
            self.counts = Counter({g: c for g, c in raw.items() if g != ("<s>",)})
        self.counts.pop(("<s>",), None)
        self.followers = {}
        for gram, count in self.counts.items():
            self.followers.setdefault(gram[:-1], {})[gram[-1]] = count

    def prob(self, history: tuple[str, ...], word: str) -> float:
        history = history[max(0, len(history) - (self.order - 1)):] if self.order > 1 else ()
        if word == "<s>":
            return 0.0
        if history:
            lower = self.prob(history[1:], word)
        else:
            lower = 1.0 / len(self.predictable)
        followers = self.followers.get(history, {})
        total = sum(followers.values())
        count = followers.get(word, 0)
        m = len(history) + 1
        if self.method == "additive":
            pseudo = self.alpha * len(self.predictable)
            return (count + pseudo * lower) / (total + pseudo)
        if self.method == "absolute":
            if m == 1:
                pseudo = self.smoothing * len(self.predictable)
                freed = sum(min(c, self.discount) for c in followers.values())
                return (max(count - self.discount, 0) + self.smoothing) / (total + pseudo) + freed / (total + pseudo) * lower
            if total == 0:
                return lower
            freed = sum(min(c, self.discount) for c in followers.values())
            return max(count - self.discount, 0) / total + freed / total * lower
        if total == 0:
            return lower
        d = self.discounts[m]

        def discount(c):
            return 0.0 if c == 0 else d[min(c, 3) - 1]

        gamma = sum(discount(c) for c in followers.values()) / total
        return (count - discount(count)) / total + gamma * lower
