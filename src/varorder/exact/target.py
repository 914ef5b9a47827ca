"""Targets of exact decoding and sampling: a language model times per-position
observation likelihoods (Carter, Dymetman & Bouchard 2012, eq. 1).

Factorization, over a sentence x_1 .. x_L with candidate symbols per position:

    log p(x) = sum_{i=1..L} [ log p_lm(x_i | <s> x_1 .. x_{i-1}) + log p_obs(o_i | x_i) ]
               + log p_lm(</s> | <s> x_1 .. x_L)            (when ``eos``)

The LM factor uses at most the last n - 1 symbols of the history (ARPA back-off, eq. 7),
or the whole history for an unbounded-order model (:class:`~varorder.lm.unbounded.WittenBell`);
what the q-automaton asks of the model is :mod:`varorder.exact.model`.
Internally the end marker is position L + 1 with the single candidate ``</s>`` and
observation log-likelihood 0, so every factor is "an LM factor times an observation
factor at some position" and the q-automaton needs no special final weights.

:class:`MaxBackoffWeights` caches the max-backoff bounds w(x | ()) (eq. 2; MAX-ARPA's eq. 8
for an n-gram LM, :meth:`varorder.lm.NgramLM.max_logprob`) so that several targets over the
same LM share them.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from varorder.errors import ParameterError
from varorder.exact.model import ContextModel, NgramContext, context_model
from varorder.lm.model import LN10

__all__ = ["MaxBackoffWeights", "HighOrderTarget"]


class MaxBackoffWeights:
    """The natural-log unigram max-backoff bounds w(x | ()) of one LM, computed once and
    shared by every target over the LM (longer contexts are looked up by the q-automaton's
    compiled refinement).

    w(x | c) = max over left extensions e of p(x | e c) >= p(x | h) for every history h
    ending in c. When c is not a stored n-gram, no extension e c is stored either (the
    tables are closed under suffixes), every back-off weight on the way is 1, and
    w(x | c) = p(x | c) = p(x | h): the bound is already exact. ``lm``: an NgramLM, a
    base-less :class:`~varorder.lm.unbounded.WittenBell` (its bounds are computed per
    symbol on first use) or a :class:`~varorder.exact.model.ContextModel`.
    """

    def __init__(self, lm):
        self.model: ContextModel = context_model(lm)
        self.lm = self.model.lm

    def unigram_bounds(self) -> np.ndarray:
        """w(x | ()) for every word id x (V,) of an n-gram LM, computed once in one batched
        call; equal to ``lm.max_logprob((), x)``."""
        if not isinstance(self.model, NgramContext):
            return self.unigram_bounds_of(np.arange(self.model.vocab_size))
        return self.model.unigram_bounds()

    def unigram_bounds_of(self, symbols) -> np.ndarray:
        """w(x | ()) of each of ``symbols``."""
        return self.model.unigram_bounds_of(np.asarray(symbols, dtype=np.int64))


class HighOrderTarget:
    """p(x) = prod_i p_lm(x_i | history) p_obs(o_i | x_i) [ p_lm(</s> | x) ].

    Parameters
    ----------
    lm : NgramLM, WittenBell or ContextModel
        An n-gram LM of any order (the history used is the last ``lm.order - 1``
        symbols) or an unbounded-order model (the whole history).
    candidates : sequence over positions of ``(symbols, log_likelihoods)``
        Word ids allowed at each position and their observation log-likelihoods
        log p_obs(o_i | x_i) (natural log, finite). ``<s>`` and ``</s>`` are not allowed.
    eos : bool
        Multiply by p_lm(</s> | x) (the sentence ends after position L).
    weights : MaxBackoffWeights, optional
        A shared cache of bounds for ``lm``.
    """

    def __init__(self, lm, candidates, *, eos: bool = True, weights: MaxBackoffWeights | None = None):
        self.weights = weights if weights is not None else MaxBackoffWeights(lm)
        if self.weights.lm is not lm and self.weights.model is not lm:
            raise ParameterError("weights were built for another LM", name='weights', value=weights)
        #: the q-automaton's view of the LM (:mod:`varorder.exact.model`)
        self.model: ContextModel = self.weights.model
        self.lm = self.model.lm
        vocab = self.model.vocabulary
        self.bos = vocab.bos_id
        self.eos_id = vocab.eos_id
        self.eos = bool(eos)
        symbols, logliks = [], []
        for position, entry in enumerate(candidates, start=1):
            try:
                ids, ll = entry
            except (TypeError, ValueError):
                raise ParameterError(f"candidates[{position - 1}] must be a (symbols, log_likelihoods) pair", name='candidates', value=candidates) from None
            ids = np.asarray(ids, dtype=np.int64).reshape(-1)
            ll = np.asarray(ll, dtype=np.float64).reshape(-1)
            if len(ids) == 0 or len(ids) != len(ll):
                raise ParameterError(f"candidates[{position - 1}]: need a non-empty list of symbols with one log-likelihood each", name='candidates', value=candidates)
            if ids.min() < 0 or ids.max() >= self.model.vocab_size:
                raise ParameterError(f"candidates[{position - 1}]: symbol ids must lie in 0 .. {self.model.vocab_size - 1}", name='candidates', value=candidates)
            if np.any(ids == self.bos) or np.any(ids == self.eos_id):
                raise ParameterError(f"candidates[{position - 1}]: <s> and </s> cannot be candidates", name='candidates', value=candidates)
            if len(np.unique(ids)) != len(ids):
                raise ParameterError(f"candidates[{position - 1}]: a symbol is listed twice", name='candidates', value=candidates)
            if np.any(np.isnan(ll)) or np.any(ll == np.inf):
                raise ParameterError(f"candidates[{position - 1}]: log-likelihoods must be finite or -inf", name='candidates', value=candidates)
            symbols.append(ids)
            logliks.append(ll)
        if not symbols:
            raise ParameterError("candidates must cover at least one position", name='candidates', value=candidates)
        self.length = len(symbols)
        if self.eos:
            symbols.append(np.asarray([self.eos_id], dtype=np.int64))
            logliks.append(np.zeros(1))
        #: per automaton position 1..T (T = L + 1 with eos): candidate ids and log-likelihoods
        self.symbols: list[np.ndarray] = symbols
        self.logliks: list[np.ndarray] = logliks
        self._loglik_of = [dict(zip(s.tolist(), l.tolist())) for s, l in zip(symbols, logliks)]

    @property
    def num_positions(self) -> int:
        """Automaton positions T: L, plus one for ``</s>``."""
        return len(self.symbols)

    @property
    def order(self) -> int:
        """The LM's order; for an unbounded-order model T + 1 (at position i <= T the
        whole history, i symbols with <s>, is read)."""
        return self.model.order_for(self.num_positions)

    def full_context_length(self, position: int) -> int:
        """Length of the history the LM uses at ``position`` (1-based; <s> counts)."""
        return min(self.order - 1, position)

    def with_end(self, sentence: Sequence[int]) -> list[int]:
        """A sentence of L word ids as an automaton path (``</s>`` appended with eos)."""
        path = [int(s) for s in sentence]
        return path + [self.eos_id] if self.eos else path

    def log_p(self, path: Sequence[int]) -> float:
        """log p of an automaton path (T symbols, ``</s>`` last when eos); -inf if a
        symbol is not a candidate at its position."""
        path = [int(s) for s in path]
        if len(path) != self.num_positions:
            raise ParameterError(f"path must have {self.num_positions} symbols, got {len(path)}", name='path', value=path)
        obs = 0.0
        for i, s in enumerate(path):
            ll = self._loglik_of[i].get(s)
            if ll is None:
                return -np.inf
            obs += ll
        if not isinstance(self.model, NgramContext):
            history = [self.bos] + path
            return float(sum(self.model.lm.logprob(history[:i], history[i]) for i in range(1, len(history))) + obs)
        words = np.asarray(path[: self.length], dtype=np.int32)
        log10, _ = self.lm.token_log10probs(words, bos=True, eos=self.eos)
        return float(log10.sum() * LN10 + obs)

    def sentence(self, path: Sequence[int]) -> list[int]:
        """The L word ids of an automaton path (``</s>`` dropped)."""
        return [int(s) for s in path[: self.length]]
