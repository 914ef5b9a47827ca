"""Relative-entropy pruning of back-off n-gram models (Stolcke 1998, "Entropy-based
Pruning of Backoff Language Models"), as SRILM's ``ngram -prune θ`` implements it
(``Ngram::pruneProbs``); ``varorder lm prune``.

Factorization: p(w | h) = f(h w) for stored h w, else bow(h) p(w | h') (Carter, Dymetman &
Bouchard 2012, eq. 7). Removing one stored n-gram h w makes p'(w | h) = bow'(h) p(w | h'),
with bow'(h) = (N(h) + f(h w)) / (D(h) + p(w | h')), N(h) = 1 - sum of the stored f(h v)
and D(h) = 1 - sum of the matching p(v | h'), and changes nothing else after h. The
change in relative entropy of the model (Stolcke's eq. 9 in log10) is

    ΔH(h w) = -P(h) [ f(h w) (log p'(w | h) - log f(h w)) + N(h) (log bow'(h) - log bow(h)) ],

and the n-gram is pruned when the training-set perplexity would grow by a relative
10^ΔH - 1 < θ. As in SRILM:

* every ΔH is computed against the unpruned model: orders are visited from the highest
  down, and an n-gram's criterion reads only its own order's masses and lower orders,
  which nothing has pruned yet (SRILM recomputes the back-off weights once, at the end);
* P(h) is the chain rule over the context's words with the model's own probabilities,
  the marginal of a context starting with ``<s>`` taking p(``</s>``) for ``<s>``
  (SRILM's ``computeContextProb``);
* orders below ``min_order`` (SRILM's ``-minprune``, default 2) are never pruned, so the
  unigrams never are; an n-gram that is still the context of a kept longer n-gram is kept;
* afterwards every context's back-off weight is recomputed from the kept n-grams, lower
  orders first, with back-off through pruned lower-order n-grams (``recomputeBOWs``).
  SRILM's recomputation also spreads the unigram distribution's rounding leftover (1 -
  sum of p(w), about 1e-6 in a written ARPA file) over the words; varorder leaves the
  unigrams as they are, as Kaldi's and icefall's ``ngram_entropy_pruning.py`` do.

The kept set is the same for every θ at once: ΔH is computed once, and ``target_size``
finds by bisection the smallest θ whose model holds at most that many n-grams. Kept
n-grams whose suffix was pruned have it put back by :class:`NgramLM` (its tables are
closed under suffixes) with exactly the back-off probability, so scores are SRILM's.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from varorder.errors import ParameterError
from varorder.lm.backoff import context_masses
from varorder.lm.model import NgramLM
from varorder.lm.tables import suffix_rows

__all__ = ["EntropyPruning", "entropy_pruning", "prune_entropy", "prune_model_file"]


@dataclass
class EntropyPruning:
    """The pruning criterion of every n-gram of a model (computed once).

    ``perplexity_change[m]``: 10^ΔH - 1 of each stored (m + 1)-gram (NaN for orders that
    are never pruned); ``kept(θ)`` gives the kept sets, ``prune(θ)`` the pruned model.
    """

    model: NgramLM
    min_order: int
    perplexity_change: list[np.ndarray]
    delta_entropy: list[np.ndarray]
    context_log10prob: list[np.ndarray]

    def kept(self, threshold: float) -> list[np.ndarray]:
        """Per order, whether each stored n-gram survives threshold θ (SRILM's rule: θ <= 0
        prunes nothing; n-grams still used as contexts of kept longer ones stay)."""
        view = self.model.table_view()
        kept: list[np.ndarray] = [None] * view.order  # type: ignore[list-item]
        for m in range(view.order - 1, -1, -1):
            n = len(view.keys[m])
            if m + 1 < self.min_order or threshold <= 0:
                kept[m] = np.ones(n, dtype=bool)
                continue
            survive = ~(self.perplexity_change[m] < threshold)
            if m + 1 < view.order:
                survive |= np.bincount(view.keys[m + 1][kept[m + 1]] // view.vocab_size, minlength=n) > 0
            kept[m] = survive
        return kept

    def size(self, threshold: float) -> int:
        """Number of n-grams of :meth:`prune`'s model at θ (the kept n-grams and the
        suffixes put back to close the tables)."""
        return int(sum(k.sum() for k in _closed(self.model, self.kept(threshold))))

    def prune(self, threshold: float) -> NgramLM:
        """The model with the n-grams below θ removed and back-off weights recomputed."""
        return _pruned_model(self.model, self.kept(threshold))

    def threshold_for_size(self, target_size: int) -> float:
        """The smallest θ (over the n-grams' own criteria) whose model holds at most
        ``target_size`` n-grams; refuses a target below the unprunable part."""
        if self.size(0.0) <= target_size:
            return 0.0
        candidates = np.unique(np.concatenate([c[np.isfinite(c)] for c in self.perplexity_change]))
        # θ just above a criterion value prunes that n-gram: step to the next float.
        thresholds = np.nextafter(candidates, np.inf)
        if len(thresholds) == 0 or self.size(float(thresholds[-1])) > target_size:
            floor = self.size(float(thresholds[-1])) if len(thresholds) else self.size(0.0)
            raise ParameterError(f"target size {target_size} is below {floor}, the n-grams pruning cannot remove "
                                 f"(unigrams and orders below min_order)", name="target_size", value=target_size)
        low, high = 0, len(thresholds) - 1
        while low < high:
            middle = (low + high) // 2
            if self.size(float(thresholds[middle])) <= target_size:
                high = middle
            else:
                low = middle + 1
        return float(thresholds[low])


def entropy_pruning(model: NgramLM, *, min_order: int = 2) -> EntropyPruning:
    """Stolcke's criterion of every stored n-gram of ``model`` (see the module docstring)."""
    if not isinstance(min_order, int) or min_order < 2:
        raise ParameterError(f"min_order must be an integer >= 2 (unigrams are never pruned), got {min_order!r}",
                             name="min_order", value=min_order)
    view = model.table_view()
    vocab_size = view.vocab_size
    suffixes = suffix_rows(view)
    masses = context_masses(view, suffixes)
    probs = [p.astype(np.float64) for p in view.log10_probs]
    backoffs = [b.astype(np.float64) for b in view.log10_backoffs]

    # log10 P(h) of every stored n-gram h as a context: chain rule along prefixes, the
    # marginal of a leading <s> read as p(</s>).
    context_log10prob = [probs[0].copy()]
    context_log10prob[0][view.bos_id] = probs[0][view.eos_id]
    for m in range(1, view.order):
        context_log10prob.append(probs[m] + context_log10prob[m - 1][view.keys[m] // vocab_size])

    changes: list[np.ndarray] = [np.full(len(view.keys[0]), np.nan)]
    deltas: list[np.ndarray] = [np.full(len(view.keys[0]), np.nan)]
    for m in range(1, view.order):
        if m + 1 < min_order:
            changes.append(np.full(len(view.keys[m]), np.nan))
            deltas.append(np.full(len(view.keys[m]), np.nan))
            continue
        context = view.keys[m] // vocab_size
        numerator = 1.0 - masses[m - 1][0][context]
        denominator = 1.0 - masses[m - 1][1][context]
        log10prob = probs[m]
        lower = probs[m - 1][suffixes[m]]  # p(w | h'), stored: the tables are closed under suffixes
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            new_backoff = np.log10(numerator + 10.0 ** log10prob) - np.log10(denominator + 10.0 ** lower)
            own = np.where(np.isneginf(log10prob), 0.0, 10.0 ** log10prob * (lower + new_backoff - log10prob))
            delta = -(10.0 ** context_log10prob[m - 1][context]) * (
                own + numerator * (new_backoff - backoffs[m - 1][context]))
            delta = np.where(np.isneginf(context_log10prob[m - 1][context]), 0.0, delta)
            change = 10.0 ** delta - 1.0
        deltas.append(delta)
        changes.append(change)
    return EntropyPruning(model, min_order, changes, deltas, context_log10prob)


def _closed(model: NgramLM, kept: list[np.ndarray]) -> list[np.ndarray]:
    """The kept sets with every kept n-gram's prefixes and suffixes added (the rows
    :meth:`NgramLM.from_ngrams` will hold)."""
    view = model.table_view()
    suffixes = suffix_rows(view)
    closed = [k.copy() for k in kept]
    for m in range(view.order - 1, 0, -1):
        closed[m - 1][view.keys[m][closed[m]] // view.vocab_size] = True
        closed[m - 1][suffixes[m][closed[m]]] = True
    return closed


def _pruned_model(model: NgramLM, kept: list[np.ndarray]) -> NgramLM:
    """The kept n-grams with their probabilities and back-off weights recomputed lower
    orders first; a probability a pruned n-gram leaves is the pruned model's back-off."""
    view = model.table_view()
    vocab_size = view.vocab_size
    suffixes = suffix_rows(view)
    probs = [p.astype(np.float64) for p in view.log10_probs]
    # probability[m]: log10 p(w | h) in the pruned model of every n-gram h w stored in the original
    probability = [probs[0]]
    backoff = []
    for m in range(view.order):
        if m:
            context = view.keys[m] // vocab_size
            backed_off = np.where(kept[m - 1][context], backoff[m - 1][context], 0.0) + probability[m - 1][suffixes[m]]
            probability.append(np.where(kept[m], probs[m], backed_off))
        if m == view.order - 1:
            backoff.append(np.zeros(len(view.keys[m])))
            continue
        children = kept[m + 1]
        prefix = view.keys[m + 1][children] // vocab_size
        n_contexts = len(view.keys[m])
        stored = np.bincount(prefix, 10.0 ** probs[m + 1][children], n_contexts)
        lower = np.bincount(prefix, 10.0 ** probability[m][suffixes[m + 1][children]], n_contexts)
        numerator, denominator = 1.0 - stored, 1.0 - lower
        with np.errstate(divide="ignore", invalid="ignore"):
            weight = np.log10(np.maximum(numerator, 0.0)) - np.log10(denominator)
        no_mass = (numerator <= 1e-12) | (denominator <= 1e-12)
        backoff.append(np.where(no_mass, 0.0, weight))
    sections = []
    for m in range(view.order):
        rows, _, _ = model.ngrams(m + 1)
        sections.append((rows[kept[m]], probs[m][kept[m]], backoff[m][kept[m]]))
    return NgramLM.from_ngrams(model.vocabulary, sections)


def prune_entropy(model: NgramLM, threshold: float | None = None, *, target_size: int | None = None,
                  min_order: int = 2) -> tuple[NgramLM, float]:
    """``model`` pruned at relative perplexity change ``threshold`` (SRILM's ``-prune``),
    or at the smallest threshold that leaves at most ``target_size`` n-grams. Returns the
    pruned model and the threshold used."""
    if (threshold is None) == (target_size is None):
        raise ParameterError("give exactly one of threshold and target_size", name="threshold", value=threshold)
    if threshold is not None and not (np.isfinite(threshold) and threshold >= 0):
        raise ParameterError(f"threshold must be a finite number >= 0, got {threshold!r}", name="threshold",
                             value=threshold)
    if target_size is not None and (not isinstance(target_size, (int, np.integer)) or target_size < 1):
        raise ParameterError(f"target_size must be a positive integer, got {target_size!r}", name="target_size",
                             value=target_size)
    criteria = entropy_pruning(model, min_order=min_order)
    if threshold is None:
        threshold = criteria.threshold_for_size(int(target_size))
    return criteria.prune(float(threshold)), float(threshold)


def prune_model_file(model_path, output, *, threshold: float | None = None, target_size: int | None = None,
                     min_order: int = 2, binary: bool = False, evaluate=None) -> dict:
    """``varorder lm prune``: read, prune, write (ARPA, or binary); returns the counts
    before and after, the threshold, and perplexities on ``evaluate`` when given."""
    from varorder.lm.arpa import load_model, write_arpa
    from varorder.lm.corpus import iter_sentences

    model = load_model(model_path)
    pruned, used = prune_entropy(model, threshold, target_size=target_size, min_order=min_order)
    if binary:
        from varorder.lm.binary import write_binary

        write_binary(pruned, output)
    else:
        write_arpa(pruned, output)
    report = {"threshold": used, "before": model.ngram_counts, "after": pruned.ngram_counts}
    if evaluate is not None:
        sentences = [tokens for _, tokens in iter_sentences(evaluate)]
        report["perplexity_before"] = model.perplexity(sentences)
        report["perplexity_after"] = pruned.perplexity(sentences)
    return report
