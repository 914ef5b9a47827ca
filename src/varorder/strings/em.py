"""EM on the stochastic edit transducer's parameters from inferred beliefs, and the
prediction of held-out surface forms.

Cotterell, Peng & Eisner (2015, §5, "Modeling word forms using latent underlying morphs
and phonology"): the E step runs approximate inference (BP with pruning, EP or PEP;
:mod:`varorder.strings.inference`) with the phonology T fixed; for each observed word F
the tilted distribution

    p̂_F(x₁…x_k, path) ∝ T-path(s_F | x₁ ⋯ x_k) · Π_j m_{V_j→F}(x_j)

(the factor times its incoming messages, the factor's belief in EP / BP) gives expected
counts of every edit operation — arc posteriors of one machine, A_s ⊙ (m₁ · m₂ ⋯ m_k)
(:meth:`FactorMessages.word_machine`). The M step normalises them
(:meth:`EditTransducer.m_step`). On a tree whose beliefs are exact this is exact EM; in
loopy graphs with projected messages it is the usual approximate EM. The quantity
reported per iteration is Σ_F log E_{b̂}[T(s_F | ·)], each observed surface's
log-probability under the normalised beliefs of its morphemes (a proxy: the beliefs
already include F's own message; tests check EM against the exact likelihood by
enumeration instead).

Held-out prediction: a word whose surface is hidden has no factor; its surface's
probability under the inferred beliefs is Σ_x T(s | x₁⋯x_k) Π_j b̂_j(x_j) (one
:meth:`FactorMessages.word_log_weight` with normalised beliefs); the 1-best prediction is
the most probable, under that exact score, of a shortlist of candidates (T's best outputs
for the beliefs' top strings, ranked by their best single derivation); exact 1-best over
all surfaces is a harder search.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import time

import numpy as np

from varorder.base import ParamsMixin, check_choice, check_int, check_real
from varorder.errors import DivergenceError, ParameterError
from varorder.strings.inference import METHODS, FactorMessages, make_method
from varorder.strings.model import PhonologyGraph
from varorder.wfsa import compose, kbest_strings, linear_acceptor, project

__all__ = ["EditEM", "expected_edit_counts", "heldout_surface_scores", "predict_surface"]


def expected_edit_counts(estimator, graph: PhonologyGraph, factors: FactorMessages | None = None) -> dict:
    """The E step from a fitted inference ``estimator`` (``PrunedBP`` or ``StringEP``):
    ``{"counts": (n_ops,), "words": words counted, "skipped": words whose tilted
    distribution diverged, "log_likelihood": Σ_F log E_{b̂}[T(s_F | ·)]}`` — the last one
    under the normalised *beliefs* (a cavity m_{V→F} of EP need not be normalisable, a
    belief is), a proxy that also counts F's own evidence; None when a belief diverges."""
    factors = factors or FactorMessages(graph)
    counts = np.zeros(graph.edit.n_ops)
    words, skipped = 0, 0
    log_likelihood = 0.0
    beliefs: dict = {}
    for i, word in enumerate(graph.words):
        if word.surface is None:
            continue
        try:
            word_counts, _ = factors.word_expectations(word.surface, estimator.factor_dfas(i))
        except DivergenceError:
            skipped += 1  # a divergent tilted distribution (Z = ∞): the word gives no counts this step
        else:
            counts += word_counts
            words += 1
        if log_likelihood is not None:
            try:
                for m in word.morphemes:
                    if m not in beliefs:
                        beliefs[m] = estimator.belief_dfa(m)
                log_likelihood += factors.word_log_weight(word.surface, [beliefs[m] for m in word.morphemes])
            except DivergenceError:
                log_likelihood = None
    return {"counts": counts, "words": words, "skipped": skipped, "log_likelihood": log_likelihood}


class EditEM(ParamsMixin):
    """EM on the edit transducer: ``iterations`` rounds of (inference with ``method``,
    expected edit counts, M step with ``smoothing`` pseudo-counts), then inference once
    more under the final parameters. ``method_params`` go to
    :func:`varorder.strings.inference.make_method`.

    After ``fit(graph)``: ``edit_`` (the trained transducer), ``graph_`` (the graph with
    it), ``estimator_`` (inference under it, holding ``beliefs_``), ``history_`` (one
    dict per E step: iteration, log_likelihood, words, skipped, seconds).

    Parameters are keyword-only and checked by :meth:`fit` (a ParameterError names the parameter
    and the value passed).
    """

    _requires_y = False  # fit takes the data alone (scikit-learn's target tag)

    def __init__(self, *, method: str = "ep2", iterations: int = 3, smoothing: float = 0.1,
                 method_params: dict | None = None, progress=None):
        self.method = method
        self.iterations = iterations
        self.smoothing = smoothing
        self.method_params = method_params
        self.progress = progress

    def _infer(self, graph):
        return make_method(self.method, **(self.method_params or {})).fit(graph)

    def _check_params(self):
        check_choice(self, "method", METHODS)
        check_int(self, "iterations", 0)
        check_real(self, "smoothing", 0)
        if self.method_params is not None and not isinstance(self.method_params, dict):
            raise ParameterError(f"EditEM: parameter method_params={self.method_params!r} is invalid: expected None or "
                                 "a dict of make_method's keyword arguments", name='method_params', value=self.method_params)
        if self.progress is not None and not callable(self.progress):
            raise ParameterError(f"EditEM: parameter progress={self.progress!r} is invalid: expected None or a callable "
                                 "progress(done, total)", name='progress', value=self.progress)

    def fit(self, graph: PhonologyGraph) -> "EditEM":
        """EM on ``graph``'s observed words; returns self."""
        self._check_params()
        self.history_ = []
        current = graph
        for it in range(self.iterations):
            started = time.perf_counter()
            estimator = self._infer(current)
            step = expected_edit_counts(estimator, current)
            if step["words"] == 0:
                raise DivergenceError("no observed word gave expected counts (every tilted distribution diverged)")
            edit = current.edit.m_step(step["counts"], step["words"], self.smoothing)
            self.history_.append({"iteration": it + 1, "log_likelihood": step["log_likelihood"],
                                  "words": step["words"], "skipped": step["skipped"],
                                  "seconds": time.perf_counter() - started})
            current = dataclasses.replace(current, edit=edit)
            if self.progress is not None:
                self.progress(it + 1, self.iterations)
        self.graph_ = current
        self.edit_ = current.edit
        self.estimator_ = self._infer(current)
        return self


def predict_surface(estimator, graph: PhonologyGraph, morphemes, factors: FactorMessages | None = None,
                    n_underlying: int = 3, n_surface: int = 2, max_scored: int = 8, beliefs=None) -> list:
    """Candidate surfaces of a word with these ``morphemes`` and their exact log-probability
    under the beliefs, best first: the ``n_surface`` best outputs of T for each
    concatenation of the morphemes' ``n_underlying`` best strings, ranked by their best
    single derivation (belief × T path), the ``max_scored`` first scored exactly.
    ``beliefs``: the morphemes' belief DFAs when the caller has them already."""
    factors = factors or FactorMessages(graph)
    tops = [estimator.beliefs_.top(m, n_underlying) or [((), 1.0)] for m in morphemes]
    transducer = graph.edit.wfsa()
    viterbi: dict = {}
    for combo in itertools.product(*tops):
        underlying = sum((tuple(s) for s, _ in combo), ())
        prior = sum(math.log(max(p, 1e-300)) for _, p in combo)
        outputs = project(compose(linear_acceptor(graph.alphabet, underlying), transducer), "output")
        for surface, weight in kbest_strings(outputs, n_surface):
            surface = tuple(surface)
            viterbi[surface] = max(viterbi.get(surface, -math.inf), prior + weight)
    shortlist = sorted(viterbi, key=lambda s: -viterbi[s])[:max_scored]
    if beliefs is None:
        beliefs = [estimator.belief_dfa(m) for m in morphemes]
    scored = [(surface, factors.word_log_weight(surface, beliefs)) for surface in shortlist]
    return sorted(scored, key=lambda kv: -kv[1])


def heldout_surface_scores(estimator, graph: PhonologyGraph, cap: float = 50.0, **candidates) -> dict:
    """For every held-out word of ``graph`` (``graph.held_out``): −log p(surface) under the
    beliefs (capped at ``cap`` nats: pruned beliefs give 0 to strings outside their
    support) and whether :func:`predict_surface`'s best candidate is the surface. Returns
    ``{"nll", "accuracy", "capped", "words", "predictions": [(gold, predicted, nll)]}``."""
    if not graph.held_out:
        raise ParameterError("the graph has no held-out words (read_hopkins(..., holdout_share=...))", name='graph', value=graph)
    factors = FactorMessages(graph)
    belief_of: dict = {}  # morphemes are shared between words: one DFA each

    def belief(m):
        if m not in belief_of:
            belief_of[m] = estimator.belief_dfa(m)
        return belief_of[m]

    nll, correct, capped, rows = [], 0, 0, []
    for i, gold in graph.held_out.items():
        morphemes = graph.words[i].morphemes
        beliefs = None
        try:
            beliefs = [belief(m) for m in morphemes]
            score = factors.word_log_weight(gold, beliefs)
        except DivergenceError:
            score = -math.inf
        if not score > -cap:
            capped += 1
        nll.append(min(-score, cap))
        try:
            ranked = predict_surface(estimator, graph, morphemes, factors, beliefs=beliefs, **candidates)
        except DivergenceError:
            ranked = []
        best = ranked[0][0] if ranked else None
        correct += best == tuple(gold)
        rows.append(("".join(gold), "".join(best) if best is not None else None, nll[-1]))
    return {"nll": float(np.mean(nll)), "accuracy": correct / len(nll), "capped": capped, "words": len(nll),
            "predictions": rows}
