"""High-order HMM POS tagging decoded exactly with q-automata (Carter, Dymetman & Bouchard
2012, §3.2).

Factorization: p(tags, words) = prod_i p_lm(t_i | t_{i-n+1} .. t_{i-1}) p(w_i | t_i)
x p_lm(</s> | tags), a tag n-gram LM (modified Kneser-Ney, :mod:`varorder.lm`) of order
3-9 times TnT-style emissions (Brants 2000, "TnT - a statistical part-of-speech tagger"):

* known words: p(w | t) = c(w, t) / c(t), candidates the tags seen with w;
* unknown words: the suffix model. For the rare training words (frequency <= 10),
  P(t | l_{m-i+1} .. l_m) is interpolated recursively over suffix lengths i = 1 .. 10,
  P(t | s_i) = (P^(t | s_i) + theta P(t | s_{i-1})) / (1 + theta), starting at the rare
  words' tag distribution P^(t), theta the standard deviation of the unconditional tag
  probabilities; capitalised and lower-case words get separate suffix statistics, as in
  TnT. Then p(w | t) is proportional to P(t | suffix) / P(t) (Bayes' rule without the
  constant p(w)). Candidate tags of an unknown word are those with P(t | suffix) at least
  ``unknown_min_ratio`` times the best (a fixed truncation of the emission model, shared
  by every decoder compared).

Splits: ptb-wsj-sample files wsj_0001-0159 train, 0160-0179 dev, 0180-0199 test; UD
English EWT XPOS train -> dev.
"""

from __future__ import annotations

import math
import re
import time
import warnings
from collections import Counter, defaultdict
from dataclasses import dataclass, field

import numpy as np

from varorder._progress import Progress
from varorder.base import ParamsMixin, check_int, check_is_fitted, check_real
from varorder.errors import FormatError, ParameterError
from varorder.exact import FullWFSA, HighOrderTarget, MaxBackoffWeights, decode, full_viterbi, wfsa_viterbi
from varorder.io.conllu import read_conllu
from varorder.io.tagged import TaggedSentence, read_tagged
from varorder.lm import ModifiedKneserNey, NgramLM

__all__ = ["TntEmissions", "PosTask", "split_ptb_sample", "evaluate_pos"]

_MAX_SUFFIX = 10
_RARE = 10
_FILE_NUMBER = re.compile(r"wsj_(\d+)")


class TntEmissions(ParamsMixin):
    """TnT emission model p(word | tag) with a suffix model for unknown words.

    Parameters
    ----------
    max_suffix : longest suffix used for unknown words.
    rare_threshold : training words at most this frequent feed the suffix model.
    unknown_min_ratio : an unknown word's candidate tags are those with P(t | suffix) at
        least this fraction of the best one.

    Parameters are keyword-only and checked by :meth:`fit` (a ParameterError names the parameter
    and the value passed).

    Learned: ``tags_`` (sorted), ``lexicon_`` word -> {tag: log p(word | tag)},
    ``theta_``, and the suffix statistics.
    """

    _requires_y = False  # fit takes the data alone (scikit-learn's target tag)

    def __init__(self, *, max_suffix: int = _MAX_SUFFIX, rare_threshold: int = _RARE, unknown_min_ratio: float = 1e-3):
        self.max_suffix = max_suffix
        self.rare_threshold = rare_threshold
        self.unknown_min_ratio = unknown_min_ratio

    def fit(self, sentences: list[tuple[list[str], list[str]]]) -> "TntEmissions":
        check_int(self, "max_suffix", 0)
        check_int(self, "rare_threshold", 0)
        if check_real(self, "unknown_min_ratio", 0, 1) == 1.0:
            raise ParameterError(f"TntEmissions: parameter unknown_min_ratio={self.unknown_min_ratio!r} is invalid: "
                                 "expected a number in [0, 1)", name='unknown_min_ratio', value=self.unknown_min_ratio)
        if not sentences:
            raise ParameterError("no training sentences", name='sentences', value=sentences)
        word_tag = defaultdict(Counter)
        tag_count = Counter()
        for words, tags in sentences:
            for w, t in zip(words, tags, strict=True):
                word_tag[w][t] += 1
                tag_count[t] += 1
        self.tags_ = sorted(tag_count)
        self.lexicon_ = {
            w: {t: math.log(c / tag_count[t]) for t, c in counts.items()} for w, counts in word_tag.items()
        }
        # Suffix statistics from rare words, separately for capitalised and lower-case.
        self._suffix_counts = {True: defaultdict(Counter), False: defaultdict(Counter)}
        rare_tags = {True: Counter(), False: Counter()}
        for w, counts in word_tag.items():
            if sum(counts.values()) > self.rare_threshold:
                continue
            cap = w[:1].isupper()
            for t, c in counts.items():
                rare_tags[cap][t] += c
                for i in range(1, min(self.max_suffix, len(w)) + 1):
                    self._suffix_counts[cap][w[-i:]][t] += c
        all_total = sum(tag_count.values())
        self._prior = {}
        for cap in (True, False):
            # No rare word of this case (a tiny corpus): fall back to all tag counts.
            counts = rare_tags[cap] or rare_tags[not cap] or tag_count
            total = sum(counts.values())
            self._prior[cap] = {t: counts[t] / total for t in counts}
        probs = np.asarray([tag_count[t] / all_total for t in self.tags_])
        self.theta_ = float(np.std(probs, ddof=1)) if len(probs) > 1 else 1.0
        self._unknown_cache = {}
        return self

    def unknown_log_likelihoods(self, word: str) -> dict[str, float]:
        """log p(word | tag) up to a constant for an unknown word, candidate tags only."""
        cached = self._unknown_cache.get(word)
        if cached is not None:
            return cached
        cap = word[:1].isupper()
        prior = self._prior[cap]
        probs = dict(prior)
        for i in range(1, min(self.max_suffix, len(word)) + 1):
            counts = self._suffix_counts[cap].get(word[-i:])
            if not counts:
                break
            total = sum(counts.values())
            probs = {t: (counts.get(t, 0) / total + self.theta_ * p) / (1 + self.theta_) for t, p in probs.items()}
        best = max(probs.values())
        result = {t: math.log(p / prior[t]) for t, p in probs.items() if p > 0 and p >= self.unknown_min_ratio * best}
        self._unknown_cache[word] = result
        return result

    def log_likelihoods(self, word: str) -> dict[str, float]:
        """Candidate tags of ``word`` with log p(word | tag) (up to a per-word constant)."""
        check_is_fitted(self, "lexicon_")
        known = self.lexicon_.get(word)
        return known if known is not None else self.unknown_log_likelihoods(word)


def split_ptb_sample(path) -> dict[str, list[TaggedSentence]]:
    """ptb-wsj-sample split by source file: train 0001-0159, dev 0160-0179, test 0180-0199."""
    splits = {"train": [], "dev": [], "test": []}
    for sentence in read_tagged(path):
        match = _FILE_NUMBER.search(sentence.source or "")
        if match is None:
            raise FormatError(f"{path}: sentence without a '# file = wsj_NNNN' marker", path=path)
        number = int(match.group(1))
        splits["train" if number <= 159 else "dev" if number <= 179 else "test"].append(sentence)
    return splits


@dataclass
class PosTask:
    """A trained tag LM + emission model, and the evaluation sentences."""

    lm: NgramLM
    emissions: TntEmissions
    test: list[TaggedSentence]
    train_seconds: float = 0.0
    weights: MaxBackoffWeights = field(init=False)

    def __post_init__(self):
        self.weights = MaxBackoffWeights(self.lm)
        vocab = self.lm.vocabulary
        # Tags the LM never saw (an LM read from another corpus) cannot be candidates.
        self._tag_ids = {t: vocab.id_of(t) for t in self.emissions.tags_ if t in vocab}
        self._tag_of = {i: t for t, i in self._tag_ids.items()}

    @classmethod
    def train(cls, train: list[TaggedSentence], test: list[TaggedSentence], order: int, **emission_params) -> "PosTask":
        start = time.perf_counter()
        with warnings.catch_warnings():
            # Tag LMs have tiny vocabularies: KN discount fallbacks are expected.
            warnings.simplefilter("ignore", RuntimeWarning)
            lm = ModifiedKneserNey(order=order).fit_sentences([s.tags for s in train]).model_
        emissions = TntEmissions(**emission_params).fit([(s.words, s.tags) for s in train])
        return cls(lm, emissions, test, time.perf_counter() - start)

    @classmethod
    def from_ptb_sample(cls, path, order: int, split: str = "test", max_train_files: int | None = None, **kw) -> "PosTask":
        splits = split_ptb_sample(path)
        train = splits["train"]
        if max_train_files is not None:
            train = [s for s in train if int(_FILE_NUMBER.search(s.source).group(1)) <= max_train_files]
        return cls.train(train, splits[split], order, **kw)

    @classmethod
    def from_ud(cls, train_path, eval_path, order: int, tag_column: str = "xpos", **kw) -> "PosTask":
        def tagged(path):
            return [TaggedSentence(s.words, s.tags(tag_column)) for s in read_conllu(path)]

        return cls.train(tagged(train_path), tagged(eval_path), order, **kw)

    def target(self, words: list[str]) -> HighOrderTarget:
        candidates = []
        for w in words:
            scored = self.emissions.log_likelihoods(w)
            tags = [t for t in scored if t in self._tag_ids]
            candidates.append((np.asarray([self._tag_ids[t] for t in tags], dtype=np.int64),
                               np.asarray([scored[t] for t in tags])))
        return HighOrderTarget(self.lm, candidates, weights=self.weights)

    def tags_of(self, ids) -> list[str]:
        return [self._tag_of[int(i)] for i in ids]


def evaluate_pos(task: PosTask, *, method: str = "adaptive", time_cap: float | None = None,
                 max_sentences: int | None = None, progress: bool = False) -> dict:
    """Decode ``task.test`` with ``method`` ("adaptive": Algorithm 1; "full-wfsa": the
    paper's baseline F, Viterbi over the LM's full WFSA (:class:`~varorder.exact.FullWFSA`,
    built once per task; its build time is reported apart, as ``build_seconds``); "full":
    explicit n-th-order Viterbi pruned to the candidate tags). The full methods give up on
    the remaining sentences once ``time_cap`` seconds are spent (the WFSA build counts).

    Returns accuracy over the decoded sentences, seconds per sentence, average states
    (q states, or unrolled full-WFSA / full-lattice states), iterations, and how many
    sentences were decoded.
    """
    sentences = task.test[:max_sentences] if max_sentences else task.test
    correct = total = 0
    seconds = states = iterations = 0.0
    if method not in ("adaptive", "full-wfsa", "full"):
        raise ParameterError(f"method must be 'adaptive', 'full-wfsa' or 'full', got {method!r}", name='method', value=method)
    decoded = 0
    per_sentence = []
    build_seconds = 0.0
    start = time.perf_counter()
    wfsa = None
    if method == "full-wfsa":
        try:
            wfsa = FullWFSA(task.lm)
            build_seconds = wfsa.build_seconds
        except RuntimeError:
            sentences = []  # too large to build: nothing decoded
    for sentence in Progress(sentences, enabled=progress, desc=f"pos {method} n={task.lm.order}", unit="sentence"):
        if time_cap is not None and time.perf_counter() - start > time_cap:
            break
        target = task.target(sentence.words)
        if method == "adaptive":
            result = decode(target)
            path, n_states, n_iter, secs = result.sentence, result.num_states, result.iterations, result.seconds
        elif method == "full":
            remaining = None if time_cap is None else max(0.0, time_cap - (time.perf_counter() - start))
            result = full_viterbi(target, time_limit=remaining)
            if not result.finished:
                break
            path, n_states, n_iter, secs = target.sentence(result.path), result.num_states, 1, result.seconds
        elif method == "full-wfsa":
            result = wfsa_viterbi(target, wfsa)
            path, n_states, n_iter, secs = target.sentence(result.path), result.num_states, 1, result.seconds
        else:
            raise ParameterError(f"method must be 'adaptive', 'full-wfsa' or 'full', got {method!r}", name='method', value=method)
        predicted = task.tags_of(path)
        correct += sum(p == g for p, g in zip(predicted, sentence.tags))
        total += len(sentence.tags)
        seconds += secs
        per_sentence.append(secs)
        states += n_states
        iterations += n_iter
        decoded += 1
    n = max(decoded, 1)
    return {
        "method": method,
        "order": task.lm.order,
        "sentences": decoded,
        "of": len(task.test[:max_sentences] if max_sentences else task.test),
        "tokens": total,
        "accuracy": correct / total if total else float("nan"),
        "seconds_per_sentence": seconds / n,
        "per_sentence_seconds": per_sentence,
        "avg_states": states / n,
        "avg_iterations": iterations / n,
        "finished": decoded == len(sentences) and (method != "full-wfsa" or wfsa is not None),
        "build_seconds": build_seconds,
        "wfsa_states": wfsa.num_states if wfsa is not None else None,
    }
