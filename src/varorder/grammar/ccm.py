"""The constituent-context model (CCM; Klein & Manning 2002; 2004 §2) as a product-EM submodel.

Factorization. For a binary bracketing B of tags x₁ … xₙ (every span [i, j),
1 ≤ j − i ≤ n, labelled constituent c if in B and distituent d if not),

    p(x, B) = P(B) · Π_{[i,j)} P(α_ij | B_ij) · P(β_ij | B_ij)

with α_ij = x_{i+1} … x_j the span's yield, β_ij = (x_i, x_{j+1}) its context
(⋄ at the sentence boundary) and P(B) uniform over the Catalan(n − 1) binary
bracketings. Length-1 spans and the whole sentence are constituents in every
B; their factors and the distituent factors of every other span form a
per-sentence constant (the *bias* feature of :mod:`varorder.grammar.shard`),
and every other span carries the ratio

    φ_ij = log P(α|c) + log P(β|c) − log P(α|d) − log P(β|d)

on its "is a constituent" feature. The E-step is inside–outside on the
bracket chart (``domain="bracketings"``, the CCM alone) or, inside the product
with the DMV, on the lexicalized chart (``domain="projective-trees"``, where
P(B(z)) is the same constant for every tree z).

``empty_spans=True`` adds K&M 2002's empty spans [i, i), 0 ≤ i ≤ n, which are
distituents in every bracketing: each contributes P(ε|d) P(β_ii|d) with context
β_ii = (x_i, x_{i+1}). The ε factor is the same per-sentence constant under every
bracketing and only rescales every other P(α|d) by one constant, so it changes no
posterior and is left out; the contexts are what matter (their distituent counts
reshape P(β|d)). The default (False) is the span set of non-empty spans only — possibly a
deviation from K&M 2002, whose span table seems to include the empty spans (not verified:
the paper is not at hand; see docs/notes/benchmarks-notebook.md).

Yields are indexed by a vocabulary built from the training shards; id 0 is an
unseen yield, whose factor is dropped (φ = 0, no bias term). Smoothing adds
``smoothing[0]`` constituent and ``smoothing[1]`` distituent pseudo-counts to
every yield and context (K&M 2002 add 2 and 8); the initializer is the span
posterior of the uniform-split tree distribution (K&M 2002, §3).
"""

from __future__ import annotations

import math
import uuid
from functools import lru_cache

import numpy as np

from varorder.agree.product_em import Statistics, Submodel
from varorder.errors import ParameterError
from varorder.grammar.charts import span_table
from varorder.grammar.shard import TreeShard, bracket_estep, lexicalized_estep

__all__ = ["CCM", "split_prior"]

DOMAINS = ("bracketings", "projective-trees")


@lru_cache(maxsize=None)
def split_prior(n: int) -> np.ndarray:
    """P(span is a constituent) for every span of a length-n sentence (span-id order) under the
    uniform-split process: the whole sentence is split at a uniformly chosen point, recursively."""
    _, _, ids = span_table(n)
    p = np.zeros(len(ids))
    p[ids[(0, n)]] = 1.0
    for length in range(n, 1, -1):
        for i in range(0, n - length + 1):
            j = i + length
            share = p[ids[(i, j)]] / (length - 1)
            for k in range(i + 1, j):
                p[ids[(i, k)]] += share
                p[ids[(k, j)]] += share
    return p


def _log_catalan(m: int) -> float:
    return math.lgamma(2 * m + 1) - math.lgamma(m + 2) - math.lgamma(m + 1)


class CCM(Submodel):
    """Constituent-context model over ``n_tags`` tags.

    Parameters (after :meth:`initialize`): ``yields_`` (list of tag tuples; index 0 = unseen),
    ``yield_probs_`` (V, 2) and ``context_probs_`` ((T+1)², 2), columns (distituent,
    constituent), each column a distribution.
    """

    has_private_features = False

    def __init__(self, n_tags: int, smoothing=(2.0, 8.0), domain: str = "bracketings", empty_spans: bool = False):
        self.n_tags = n_tags
        self.smoothing = smoothing
        self.domain = domain
        self.empty_spans = empty_spans

    # ---- vocabulary and per-shard ids --------------------------------------------------------
    def _check_domain(self):
        if self.domain not in DOMAINS:
            raise ParameterError(f"domain must be one of {DOMAINS}, got {self.domain!r}", name='domain', value=self.domain)

    def build_vocabulary(self, shards):
        seen = {}
        for shard in shards:
            for tags in shard.sentences:
                for i in range(tags.size):
                    for j in range(i + 1, tags.size + 1):
                        seen.setdefault(tags[i:j].tobytes(), tuple(int(t) for t in tags[i:j]))
        self.yields_ = [()] + sorted(seen.values(), key=lambda y: (len(y), y))
        self._set_index()
        return self

    def _set_index(self):
        self._yield_index = {np.asarray(y, dtype=np.int64).tobytes(): i for i, y in enumerate(self.yields_) if y}
        self._token = uuid.uuid4().hex

    def span_ids(self, shard: TreeShard):
        """(yield ids (S,), context ids (S,), fixed (S,) bool: length 1 or whole sentence)."""

        def build():
            T = self.n_tags
            index = self._yield_index
            words = shard.word_tags()
            base = np.concatenate([[0], np.cumsum(shard.lengths)[:-1]])[shard.span_sentence]
            yield_ids = np.array([index.get(words[b + i:b + j].tobytes(), 0)
                                  for b, i, j in zip(base, shard.span_start, shard.span_end)], dtype=np.int64)
            n = shard.lengths[shard.span_sentence]
            left = np.where(shard.span_start > 0, words[base + np.maximum(shard.span_start - 1, 0)], T)
            right = np.where(shard.span_end < n, words[base + np.minimum(shard.span_end, n - 1)], T)
            fixed = (shard.span_end - shard.span_start == 1) | (shard.span_end - shard.span_start == n)
            return yield_ids, left * (T + 1) + right, fixed

        return shard.cached(("ccm-spans", self._token), build)

    def empty_span_contexts(self, shard: TreeShard):
        """(context ids, sentence of each) of the empty spans [i, i), 0 ≤ i ≤ n, of every sentence."""

        def build():
            T = self.n_tags
            ids, owner = [], []
            for b, tags in enumerate(shard.sentences):
                padded = np.concatenate([[T], tags, [T]])
                ids.append(padded[:-1] * (T + 1) + padded[1:])
                owner.append(np.full(tags.size + 1, b, dtype=np.int64))
            return np.concatenate(ids), np.concatenate(owner)

        return shard.cached(("ccm-empty", self.n_tags), build)

    # ---- submodel contract ---------------------------------------------------------------------
    def shared_log_potentials(self, shard: TreeShard) -> np.ndarray:
        yield_ids, context_ids, fixed = self.span_ids(shard)
        with np.errstate(divide="ignore"):
            ly = np.log(self.yield_probs_)
            lc = np.log(self.context_probs_)
        # A distituent probability of 0 (an unsmoothed yield whose constituent posterior rounded to 1)
        # would make the ratio +inf; floored at the smallest normal float it forces the span into all
        # but a 1e-308 share of the bracketings, which is the unsmoothed model up to rounding.
        floor = np.log(np.finfo(np.float64).tiny)
        ly[:, 0] = np.maximum(ly[:, 0], floor)
        lc[:, 0] = np.maximum(lc[:, 0], floor)
        ly[0] = 0.0  # an unseen yield's factor is dropped
        dist = ly[yield_ids, 0] + lc[context_ids, 0]
        const = ly[yield_ids, 1] + lc[context_ids, 1]
        ratio = np.where(fixed, 0.0, const - dist)
        per_span = np.where(fixed, const, dist)
        bias = np.bincount(shard.span_sentence, weights=per_span, minlength=shard.num_sentences)
        bias = bias - np.array([_log_catalan(int(n) - 1) for n in shard.lengths])
        if self.empty_spans:
            empty_ids, owner = self.empty_span_contexts(shard)
            bias = bias + np.bincount(owner, weights=lc[empty_ids, 0], minlength=shard.num_sentences)
        return shard.join(bias, np.zeros(shard.num_lex_edges), ratio)

    def expected_statistics(self, shard, shared_log_potentials, private_scale: float = 1.0) -> Statistics:
        self._check_domain()
        if self.domain == "bracketings":
            return bracket_estep(shard, shared_log_potentials)
        return lexicalized_estep(shard, shared_log_potentials)

    def counts(self, shard, shared_marginals, statistics) -> dict:
        _, _, spans = shard.split(shared_marginals)
        return self._counts_from_posteriors(shard, spans)

    def _counts_from_posteriors(self, shard, constituent):
        yield_ids, context_ids, _ = self.span_ids(shard)
        V, C = len(self.yields_), (self.n_tags + 1) ** 2
        constituent = np.clip(constituent, 0.0, 1.0)  # posteriors of always-present spans sum to 1 ± rounding
        y = np.stack([np.bincount(yield_ids, weights=1.0 - constituent, minlength=V),
                      np.bincount(yield_ids, weights=constituent, minlength=V)], axis=1)
        c = np.stack([np.bincount(context_ids, weights=1.0 - constituent, minlength=C),
                      np.bincount(context_ids, weights=constituent, minlength=C)], axis=1)
        if self.empty_spans:
            c[:, 0] += np.bincount(self.empty_span_contexts(shard)[0], minlength=C)
        return {"yields": y, "contexts": c}

    def maximize(self, counts: dict) -> None:
        s_const, s_dist = self.smoothing
        pseudo = np.array([s_dist, s_const], dtype=np.float64)
        y = counts["yields"] + pseudo
        y[0] = 0.0  # the unseen-yield row never carries mass
        self.yield_probs_ = _columns(y)
        self.context_probs_ = _columns(counts["contexts"] + pseudo)

    def initialize(self, shards):
        """Vocabulary from ``shards``, then an M-step on the uniform-split span posteriors."""
        self._check_domain()
        shards = list(shards)
        self.build_vocabulary(shards)
        total = None
        for shard in shards:
            prior = np.concatenate([split_prior(int(n)) for n in shard.lengths])
            part = self._counts_from_posteriors(shard, prior)
            total = part if total is None else {k: total[k] + part[k] for k in total}
        self.maximize(total)
        return self


def _columns(c):
    tot = c.sum(axis=0, keepdims=True)
    return np.divide(c, tot, out=np.zeros_like(c), where=tot > 0)
