"""Noisy-channel spelling correction decoded exactly with q-automata (Kernighan, Church &
Gale 1990, "A spelling correction program based on a noisy channel model"; decoding as in
Carter, Dymetman & Bouchard 2012, §3).

Factorization: p(x | o) proportional to prod_i p_lm(x_i | history) p(o_i | x_i)
p_lm(</s> | x), the LM an n-gram or an unbounded-order model, and the channel

    p(o | w) proportional to exp(-cost * d(o, w)),   d(o, w) <= max_distance,

d the number of single-character edits (deletion, insertion, substitution, transposition
of adjacent letters: the Damerau–Levenshtein distance, reached by composing Norvig's edits1)
that turn w into o. The candidates of an observed token are the vocabulary words within
``max_distance`` edits (the token itself when it is a word); a token with none keeps
``<unk>``. The channel is used unnormalised,
as the keypad channel of :mod:`varorder.tasks.t9` is.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from varorder.errors import ParameterError
from varorder.exact import HighOrderTarget, MaxBackoffWeights

__all__ = ["SpellingTask", "edits1", "edit_distances"]

LETTERS = "abcdefghijklmnopqrstuvwxyz"


def edits1(word: str, letters: str = LETTERS) -> set[str]:
    """Every string one deletion, transposition, substitution or insertion away."""
    splits = [(word[:i], word[i:]) for i in range(len(word) + 1)]
    deletes = {a + b[1:] for a, b in splits if b}
    transposes = {a + b[1] + b[0] + b[2:] for a, b in splits if len(b) > 1}
    replaces = {a + c + b[1:] for a, b in splits if b for c in letters}
    inserts = {a + c + b for a, b in splits for c in letters}
    return deletes | transposes | replaces | inserts


def edit_distances(token: str, words, max_distance: int = 2) -> dict[str, int]:
    """{word: d} for the ``words`` within ``max_distance`` edits of ``token`` (d the
    fewest edits of :func:`edits1` that reach it)."""
    words = words if isinstance(words, (set, frozenset, dict)) else set(words)
    found = {token: 0} if token in words else {}
    frontier = {token}
    seen = {token}
    for d in range(1, max_distance + 1):
        frontier = {e for f in frontier for e in edits1(f)} - seen
        seen |= frontier
        for e in frontier:
            if e in words and e not in found:
                found[e] = d
    return found


@dataclass
class SpellingTask:
    """An LM (an NgramLM or an unbounded-order WittenBell) and its word list for noisy-channel
    correction; ``cost``: nats per edit; ``max_distance``: edits considered."""

    lm: object
    cost: float = 4.0
    max_distance: int = 2
    weights: MaxBackoffWeights = field(init=False)

    def __post_init__(self):
        if not self.cost > 0:
            raise ParameterError(f"cost must be > 0, got {self.cost}", name="cost", value=self.cost)
        if self.max_distance not in (0, 1, 2, 3):
            raise ParameterError(f"max_distance must be 0 .. 3, got {self.max_distance}", name="max_distance",
                                 value=self.max_distance)
        self.weights = MaxBackoffWeights(self.lm)
        vocab = self.weights.model.vocabulary
        special = {vocab.bos_id, vocab.eos_id, vocab.unk_id}
        self._words = {w: i for i, w in enumerate(vocab.words) if i not in special}
        self._unk = vocab.unk_id

    def candidates(self, token: str) -> tuple[np.ndarray, np.ndarray]:
        """(word ids, -cost * d(token, word)) of the words within ``max_distance`` edits."""
        found = edit_distances(token, self._words, self.max_distance)
        if not found:
            return np.asarray([self._unk], np.int64), np.zeros(1)
        words = sorted(found, key=lambda w: (found[w], w))
        return (np.asarray([self._words[w] for w in words], np.int64),
                np.asarray([-self.cost * found[w] for w in words], np.float64))

    def target(self, tokens: list[str]) -> HighOrderTarget:
        return HighOrderTarget(self.lm, [self.candidates(t) for t in tokens], weights=self.weights)

    def corrupt(self, words: list[str], rng: np.random.Generator, rate: float = 0.3) -> list[str]:
        """Each word of four letters or more replaced, with probability ``rate``, by a
        random string one edit away (drawn uniformly from :func:`edits1`)."""
        out = []
        for w in words:
            if len(w) >= 4 and w.isalpha() and rng.random() < rate:
                options = sorted(edits1(w) - {w})
                out.append(options[int(rng.integers(len(options)))])
            else:
                out.append(w)
        return out

    def words(self, ids) -> list[str]:
        return self.weights.model.vocabulary.decode(ids)
