"""T9 / SMS retrieval with a high-order LM, decoded and sampled exactly (Carter,
Dymetman & Bouchard 2012, §3.1).

Factorization: p(x | o) proportional to prod_i p_lm(x_i | x_{i-n+1} .. x_{i-1})
p(o_i | x_i) p_lm(</s> | x). Each word is typed on a phone keypad (2 = abc, 3 = def, ...,
9 = wxyz; other characters on 1, digits on their own key); the observed digit string o_i
is a noisy version of num(x_i) with

    p(o_i | x_i) proportional to prod_t 1 / (k d(o_it, num(x_it)) + 1)     (eq. 9)

d the Euclidean distance between keys on the 3 x 4 keypad and k = 64. The candidates of
o_i are all vocabulary words of the same length (default: exact decoding of the full
model, as in the paper's decoding experiments), or with ``max_candidates`` = m the m most
likely under eq. 9 (the paper caps latent tokens at 100 *for sampling*; a cap for
decoding makes the result exact only for the truncated model); eq. 9 is used
unnormalised, as in the paper.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field

import numpy as np

from varorder.errors import ParameterError
from varorder.exact import HighOrderTarget, MaxBackoffWeights
from varorder.lm import ModifiedKneserNey, NgramLM, open_text
from varorder.engine.validate import as_rng

__all__ = ["KEYPAD", "num", "key_distance", "T9Task", "read_test_sentences"]

_LETTERS = {"2": "abc", "3": "def", "4": "ghi", "5": "jkl", "6": "mno", "7": "pqrs", "8": "tuv", "9": "wxyz"}
#: key -> (row, column) on the 3 x 4 keypad
KEYPAD = {k: divmod(i, 3) for i, k in enumerate("123456789*0#")}
_KEY_OF = {c: k for k, letters in _LETTERS.items() for c in letters}
_KEY_OF.update({d: d for d in "0123456789"})
DEFAULT_K = 64.0


def num(word: str) -> str:
    """The digit string typed for ``word`` (letters on 2-9, digits on themselves, the rest on 1)."""
    return "".join(_KEY_OF.get(c, "1") for c in word.lower())


def key_distance(a: str, b: str) -> float:
    (ra, ca), (rb, cb) = KEYPAD[a], KEYPAD[b]
    return float(np.hypot(ra - rb, ca - cb))


_KEYS = "1234567890*#"
_DISTANCE = np.asarray([[key_distance(a, b) for b in _KEYS] for a in _KEYS])
_KEY_INDEX = {k: i for i, k in enumerate(_KEYS)}


@dataclass
class T9Task:
    """An LM (an NgramLM, or an unbounded-order :class:`~varorder.lm.unbounded.WittenBell`)
    and its vocabulary indexed by word length for keypad decoding."""

    lm: NgramLM
    k: float = DEFAULT_K
    max_candidates: int | None = None
    weights: MaxBackoffWeights = field(init=False)

    def __post_init__(self):
        if self.k < 0:
            raise ParameterError(f"k must be >= 0, got {self.k}", name='k', value=self.k)
        if self.max_candidates is not None and self.max_candidates < 1:
            raise ParameterError(f"max_candidates must be >= 1, got {self.max_candidates}", name='max_candidates', value=self.max_candidates)
        self.weights = MaxBackoffWeights(self.lm)
        vocab = self.lm.vocabulary
        excluded = {vocab.bos_id, vocab.eos_id, vocab.unk_id}
        by_length: dict[int, list[int]] = {}
        for i, w in enumerate(vocab.words):
            if i not in excluded:
                by_length.setdefault(len(w), []).append(i)
        self._ids = {m: np.asarray(ids, dtype=np.int64) for m, ids in by_length.items()}
        self._keys = {m: np.asarray([[_KEY_INDEX[d] for d in num(vocab.words[i])] for i in ids], dtype=np.int64)
                      for m, ids in by_length.items()}

    @classmethod
    def train(cls, corpus, order: int, **kw) -> "T9Task":
        """Fit a modified Kneser-Ney LM of ``order`` on a text file (one sentence a line)."""
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            lm = ModifiedKneserNey(order=order).fit(corpus).model_
        return cls(lm, **kw)

    def candidates(self, digits: str) -> tuple[np.ndarray, np.ndarray]:
        """(word ids, log p(digits | word) up to a constant) of the same-length words."""
        if not digits or any(d not in _KEY_INDEX for d in digits):
            raise ParameterError(f"observation {digits!r} must be a non-empty string of keypad keys {_KEYS}", name='digits', value=digits)
        ids = self._ids.get(len(digits))
        if ids is None:
            raise ParameterError(f"no vocabulary word has length {len(digits)} (observation {digits!r})", name='digits', value=digits)
        observed = np.asarray([_KEY_INDEX[d] for d in digits])
        distances = _DISTANCE[self._keys[len(digits)], observed[None, :]]
        loglik = -np.log(self.k * distances + 1.0).sum(axis=1)
        if self.max_candidates is not None and len(ids) > self.max_candidates:
            # Best by likelihood; ties broken by the unigram bound, then by id (stable).
            unigram = self.weights.unigram_bounds_of(ids)
            order = np.lexsort((ids, -unigram, -loglik))[: self.max_candidates]
            ids, loglik = ids[order], loglik[order]
        return ids, loglik

    def target(self, observation: list[str]) -> HighOrderTarget:
        """The target for a sequence of digit strings (one per word)."""
        return HighOrderTarget(self.lm, [self.candidates(o) for o in observation], weights=self.weights)

    def observe(self, words: list[str], rng: np.random.Generator | None = None) -> list[str]:
        """The keypad observation of a sentence: clean (``rng`` None), or typed with errors
        drawn from the noise model itself, each key o of num(w) replaced by key o' with
        probability proportional to 1 / (k d(o', o) + 1) over the 12 keys (eq. 9)."""
        clean = [num(w) for w in words]
        if rng is None:
            return clean
        noisy = []
        for digits in clean:
            keys = [_KEY_INDEX[d] for d in digits]
            u = rng.random(len(keys))
            cdf = self._typo_cdf
            typed = [min(int(np.searchsorted(cdf[key], v, side="right")), len(_KEYS) - 1) for key, v in zip(keys, u)]
            noisy.append("".join(_KEYS[i] for i in typed))
        return noisy

    @property
    def _typo_cdf(self) -> np.ndarray:
        """Row o: cumulative p(o' | o) of eq. 9 over the 12 keys."""
        weights = 1.0 / (self.k * _DISTANCE + 1.0)
        return np.cumsum(weights / weights.sum(axis=1, keepdims=True), axis=1)

    def words(self, ids) -> list[str]:
        return self.lm.vocabulary.decode(ids)


def read_test_sentences(path, vocabulary, lengths=range(1, 11), per_length: int = 10, seed: int = 0) -> dict[int, list[list[str]]]:
    """Up to ``per_length`` random sentences of each length from ``path`` whose words are
    all in ``vocabulary``, excluding <unk> and number tokens (the paper drops numbers)."""
    pools: dict[int, list[list[str]]] = {m: [] for m in lengths}
    with open_text(path) as handle:
        for line in handle:
            words = line.split()
            if len(words) in pools and all(w in vocabulary and w not in ("<unk>", "N") and not any(c.isdigit() for c in w)
                                           for w in words):
                pools[len(words)].append(words)
    rng = as_rng(seed)
    chosen = {}
    for m, pool in pools.items():
        picks = rng.permutation(len(pool))[:per_length]
        chosen[m] = [pool[i] for i in sorted(picks)]
    return chosen
