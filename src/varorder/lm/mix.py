"""Linear interpolation of n-gram models: the dynamic mixture, SRILM's static mixture
written as one back-off model, and mixture weights by EM on held-out text (``varorder
lm mix``; SRILM's ``ngram -lm A -mix-lm B -lambda λ [-write-lm]`` and
``compute-best-mix``).

Factorization: p(w | h) = sum_i λ_i p_i(w | h), sum_i λ_i = 1, each p_i a back-off model
(Carter, Dymetman & Bouchard 2012, eq. 7) over the union vocabulary: a word outside model
i's vocabulary gets p_i = 0 (its mass stays on model i's ``<unk>``), so the mixture sums
to 1 after every history when each component does.

Static mixture (Stolcke 2002, "SRILM — an extensible language modeling toolkit", §3;
SRILM's ``Ngram::mixProbs``): the n-grams of the result are the union of the components'
n-grams; each gets the exact mixture probability sum_i λ_i p_i(w | h), every p_i computed
with its own back-off; then every context's back-off weight is recomputed so that its
distribution sums to 1 (:mod:`varorder.lm.backoff`). This is SRILM's approximation, and
varorder makes the same one: for an n-gram in no component, the dynamic mixture gives
sum_i λ_i bow_i(h) p_i(w | h') while the static model gives bow(h) sum_i λ_i p_i(w | h')
— one back-off weight per context instead of one per component — so the two agree on
the union and differ (slightly, usually) off it.

Weights (Dempster, Laird & Rubin 1977): λ_i ← mean over held-out tokens t of
λ_i p_i(t) / sum_j λ_j p_j(t), which never decreases the held-out likelihood. Tokens are
every word and each ``</s>`` as :meth:`NgramLM.perplexity` counts them (OOV words scored
as ``<unk>``, KenLM's convention; SRILM's ``ppl`` leaves OOVs out).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from varorder.errors import ParameterError
from varorder.lm.backoff import backoff_log10weights
from varorder.lm.construction import unique_rows
from varorder.lm.corpus import Vocabulary, iter_sentences
from varorder.lm.model import NgramLM

LN10 = math.log(10.0)

__all__ = ["MixResult", "MixtureLM", "mix_models", "static_mixture", "tune_weights"]


def _checked_weights(weights, n_models: int) -> np.ndarray:
    if n_models < 2:
        raise ParameterError(f"mixing needs at least two models, got {n_models}", name="models", value=n_models)
    if weights is None:
        return np.full(n_models, 1.0 / n_models)
    weights = np.asarray(weights, dtype=np.float64).reshape(-1)
    if len(weights) == n_models - 1:  # SRILM's -lambda: the first model's weight, the rest to the others
        weights = np.append(weights, 1.0 - weights.sum())
    if len(weights) != n_models or not np.all(np.isfinite(weights)) or np.any(weights < 0) \
            or not math.isclose(float(weights.sum()), 1.0, abs_tol=1e-9):
        raise ParameterError(f"mixture weights must be {n_models} non-negative numbers summing to 1 "
                             f"(or {n_models - 1}, the last taking the rest), got {weights.tolist()}",
                             name="weights", value=weights.tolist())
    return weights / weights.sum()


def _union_vocabulary(models: Sequence[NgramLM]) -> tuple[Vocabulary, list[np.ndarray], list[np.ndarray]]:
    """The union vocabulary (the first model's words in order, then each later model's new
    words), and per model the maps union id → model id (-1 when absent) and model id →
    union id."""
    words = list(models[0].vocabulary.words)
    seen = set(words)
    for model in models[1:]:
        for word in model.vocabulary.words:
            if word not in seen:
                seen.add(word)
                words.append(word)
    union = Vocabulary(words)
    to_model, to_union = [], []
    for model in models:
        forward = np.full(len(union), -1, dtype=np.int64)
        backward = np.fromiter((union.index[w] for w in model.vocabulary.words), dtype=np.int64,
                               count=len(model.vocabulary))
        forward[backward] = np.arange(len(backward))
        to_model.append(forward)
        to_union.append(backward)
    return union, to_model, to_union


def _log10_mix(component_log10probs: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """log10 sum_i λ_i 10^x_i over axis 0, exact for -inf entries."""
    with np.errstate(divide="ignore"):
        log_weights = np.log(weights).reshape((-1,) + (1,) * (component_log10probs.ndim - 1))
    return np.logaddexp.reduce(component_log10probs * LN10 + log_weights, axis=0) / LN10


class MixtureLM:
    """The dynamic mixture sum_i λ_i p_i(w | h) of back-off models, over their union
    vocabulary (see the module's docstring for words a component lacks).

    Parameters
    ----------
    models : sequence of NgramLM
    weights : sequence of float, optional
        λ, non-negative, summing to 1 (K - 1 values: the last takes the rest); equal
        weights when omitted.
    """

    def __init__(self, models: Sequence[NgramLM], weights=None):
        self.models = list(models)
        self.weights = _checked_weights(weights, len(self.models))
        self.vocabulary, self._to_model, self._to_union = _union_vocabulary(self.models)
        self.order = max(model.order for model in self.models)

    def component_log10probs(self, sentences: Iterable[str | Sequence[str]], *, bos: bool = True,
                             eos: bool = True) -> np.ndarray:
        """log10 p_i of every token (each sentence's words, then ``</s>`` when ``eos``), one
        row per component: shape (K, tokens); -inf where a component lacks the word."""
        sentences = [s.split() if isinstance(s, str) else list(s) for s in sentences]
        union_ids, lengths = self.vocabulary.encode_sentences(sentences)
        tokens = union_ids.astype(np.int64)
        if eos:
            ends = np.cumsum(lengths)
            tokens = np.insert(tokens, ends, self.vocabulary.eos_id)
        rows = []
        for model, to_model in zip(self.models, self._to_model):
            ids, model_lengths = model.vocabulary.encode_sentences(sentences)
            log10probs, _ = model.token_log10probs(ids, model_lengths, bos=bos, eos=eos)
            lacks = (to_model[tokens] < 0) & (tokens != self.vocabulary.unk_id)
            rows.append(np.where(lacks, -np.inf, log10probs))
        return np.vstack(rows) if rows else np.empty((0, 0))

    def token_log10probs(self, sentences, *, bos: bool = True, eos: bool = True) -> np.ndarray:
        """log10 of the mixture's probability of every token (see :meth:`component_log10probs`)."""
        return _log10_mix(self.component_log10probs(sentences, bos=bos, eos=eos), self.weights)

    def perplexity(self, sentences) -> float:
        """10^(-sum log10 p / N) over every word and ``</s>``, as :meth:`NgramLM.perplexity`."""
        scores = self.token_log10probs(sentences)
        if len(scores) == 0:
            raise ParameterError("perplexity of an empty set of sentences", name="sentences", value=0)
        return float(10.0 ** (-scores.sum() / len(scores)))

    def next_word_log10probs(self, context: str | Sequence[str], *, bos: bool = True) -> np.ndarray:
        """log10 p(w | context) for every word id w of the union vocabulary."""
        words = context.split() if isinstance(context, str) else list(context)
        rows = np.full((len(self.models), len(self.vocabulary)), -np.inf)
        for row, model, to_union in zip(rows, self.models, self._to_union):
            row[to_union] = model.next_word_log10probs(words, bos=bos)
        return _log10_mix(rows, self.weights)

    def log10prob(self, context: Sequence[str], word: str, *, bos: bool = True) -> float:
        """log10 p(word | context) (words as strings; an unknown word reads as ``<unk>``)."""
        return float(self.next_word_log10probs(context, bos=bos)[self.vocabulary.id_of(word)])


def static_mixture(models: Sequence[NgramLM], weights=None) -> NgramLM:
    """One back-off model approximating the mixture as SRILM's ``-mix-lm -write-lm`` does:
    the union of the n-grams, each with its exact mixture probability, and back-off
    weights recomputed so every context normalises (see the module's docstring for the
    approximation off the union)."""
    mixture = MixtureLM(models, weights)
    union = mixture.vocabulary
    sections = []
    for order in range(1, mixture.order + 1):
        rows = [to_union[model.ngrams(order)[0]] for model, to_union in zip(mixture.models, mixture._to_union)
                if model.order >= order]
        rows = unique_rows(np.concatenate(rows))
        components = np.empty((len(mixture.models), len(rows)))
        for k, (model, to_model) in enumerate(zip(mixture.models, mixture._to_model)):
            mapped = to_model[rows]
            # A context word the model lacks is its <unk>; a predicted word it lacks has p = 0.
            contexts = np.where(mapped[:, :-1] < 0, model.vocabulary.unk_id, mapped[:, :-1])
            words = mapped[:, -1]
            lacks = (words < 0) & (rows[:, -1] != union.unk_id)
            components[k] = model.lookups(contexts, np.where(words < 0, model.vocabulary.unk_id, words))[0]
            components[k, lacks] = -np.inf
        sections.append((rows, _log10_mix(components, mixture.weights), np.zeros(len(rows))))
    merged = NgramLM.from_ngrams(union, sections)
    view = merged.table_view()
    return NgramLM(union, view.keys, view.log10_probs, backoff_log10weights(view))


def tune_weights(models: Sequence[NgramLM], sentences, weights=None, *, tolerance: float = 1e-7,
                 max_iterations: int = 500) -> tuple[np.ndarray, list[float]]:
    """Mixture weights maximising the likelihood of held-out ``sentences`` by EM, from
    ``weights`` (equal when omitted). Returns the weights and the held-out log10
    likelihood before the first and after every iteration (never decreasing); stops when
    an iteration gains less than ``tolerance`` times the likelihood's magnitude."""
    mixture = MixtureLM(models, weights)
    components = mixture.component_log10probs(sentences) * LN10
    finite = np.isfinite(components).any(axis=0)
    components = components[:, finite]
    if components.shape[1] == 0:
        raise ParameterError("no held-out token any model gives a probability to", name="sentences", value=0)
    lam = mixture.weights.copy()
    history = []
    for _ in range(max_iterations + 1):
        with np.errstate(divide="ignore"):
            joint = components + np.log(lam)[:, None]
        total = np.logaddexp.reduce(joint, axis=0)
        history.append(float(total.sum() / LN10))
        if len(history) > 1 and history[-1] - history[-2] <= tolerance * abs(history[-1]):
            break
        lam = np.exp(joint - total).mean(axis=1)
        lam /= lam.sum()
    return lam, history


@dataclass
class MixResult:
    """What :func:`mix_models` did: the weights, the EM history (empty without tuning),
    and the perplexity of the dynamic and the static mixture on the evaluation text
    (None without one)."""

    weights: np.ndarray
    history: list[float] = field(default_factory=list)
    dynamic_perplexity: float | None = None
    static_perplexity: float | None = None
    component_perplexities: list[float] = field(default_factory=list)
    model: NgramLM | None = None


def _read_sentences(path) -> list[list[str]]:
    return [tokens for _, tokens in iter_sentences(path)]


def mix_models(model_paths: Sequence, *, weights=None, tune=None, evaluate=None, output=None,
               binary: bool = False) -> MixResult:
    """``varorder lm mix``: read the models, choose λ (given, or by EM on the ``tune``
    text), build the static mixture, write it to ``output`` (ARPA, or binary), and
    report the perplexities of both mixtures and of each model on ``evaluate`` (the
    tuning text when not given)."""
    from varorder.lm.arpa import load_model, write_arpa

    models = [load_model(path) for path in model_paths]
    result = MixResult(weights=_checked_weights(weights, len(models)))
    if tune is not None:
        result.weights, result.history = tune_weights(models, _read_sentences(tune), result.weights)
    static = static_mixture(models, result.weights)
    result.model = static
    evaluate = evaluate if evaluate is not None else tune
    if evaluate is not None:
        sentences = _read_sentences(evaluate)
        result.dynamic_perplexity = MixtureLM(models, result.weights).perplexity(sentences)
        result.static_perplexity = static.perplexity(sentences)
        result.component_perplexities = [model.perplexity(sentences) for model in models]
    if output is not None:
        if binary:
            from varorder.lm.binary import write_binary

            write_binary(static, output)
        else:
            write_arpa(static, output)
    return result
