"""Targets of exact decoding and sampling: a back-off n-gram LM times per-position
observation likelihoods (Carter, Dymetman & Bouchard 2012, eq. 1).

Factorization, over a sentence x_1 .. x_L with candidate symbols per position:

    log p(x) = sum_{i=1..L} [ log p_lm(x_i | <s> x_1 .. x_{i-1}) + log p_obs(o_i | x_i) ]
               + log p_lm(</s> | <s> x_1 .. x_L)            (when ``eos``)

The LM factor uses at most the last n - 1 symbols of the history (ARPA back-off, eq. 7).
Internally the end marker is position L + 1 with the single candidate ``</s>`` and
observation log-likelihood 0, so every factor is "an LM factor times an observation
factor at some position" and the q-automaton needs no special final weights.

:class:`MaxBackoffWeights` caches the max-backoff bounds w(x | c) (eq. 2, computed by the
MAX-ARPA recursion of eq. 8 in :meth:`varorder.lm.NgramLM.max_logprob`) so that several
targets over the same LM share them.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from varorder.errors import ParameterError
from varorder.lm import NgramLM
from varorder.lm.model import LN10

__all__ = ["MaxBackoffWeights", "HighOrderTarget"]


class MaxBackoffWeights:
    """The natural-log unigram max-backoff bounds w(x | ()) of one LM, computed once and
    shared by every target over the LM (longer contexts are looked up by the q-automaton's
    compiled refinement).

    w(x | c) = max over left extensions e of p(x | e c) >= p(x | h) for every history h
    ending in c. When c is not a stored n-gram, no extension e c is stored either (the
    tables are closed under suffixes), every back-off weight on the way is 1, and
    w(x | c) = p(x | c) = p(x | h): the bound is already exact.
    """

    def __init__(self, lm: NgramLM):
        if not isinstance(lm, NgramLM):
            raise ParameterError(f"lm must be a varorder.lm.NgramLM, got {type(lm).__name__}", name='lm', value=lm)
        self.lm = lm
        self._unigram: np.ndarray | None = None

    def unigram_bounds(self) -> np.ndarray:
        """w(x | ()) for every word id x (V,), computed once in one batched call; equal to
        ``lm.max_logprob((), x)``."""
        if self._unigram is None:
            words = np.arange(self.lm.vocab_size)
            self._unigram = self.lm.max_logprobs([()] * len(words), words)
            self._unigram.flags.writeable = False
        return self._unigram


class HighOrderTarget:
    """p(x) = prod_i p_lm(x_i | history) p_obs(o_i | x_i) [ p_lm(</s> | x) ].

    Parameters
    ----------
    lm : NgramLM
        Any order (the history used is the last ``lm.order - 1`` symbols).
    candidates : sequence over positions of ``(symbols, log_likelihoods)``
        Word ids allowed at each position and their observation log-likelihoods
        log p_obs(o_i | x_i) (natural log, finite). ``<s>`` and ``</s>`` are not allowed.
    eos : bool
        Multiply by p_lm(</s> | x) (the sentence ends after position L).
    weights : MaxBackoffWeights, optional
        A shared cache of bounds for ``lm``.
    """

    def __init__(self, lm: NgramLM, candidates, *, eos: bool = True, weights: MaxBackoffWeights | None = None):
        self.lm = lm
        self.weights = weights if weights is not None else MaxBackoffWeights(lm)
        if self.weights.lm is not lm:
            raise ParameterError("weights were built for another LM", name='weights', value=weights)
        vocab = lm.vocabulary
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
            if ids.min() < 0 or ids.max() >= lm.vocab_size:
                raise ParameterError(f"candidates[{position - 1}]: symbol ids must lie in 0 .. {lm.vocab_size - 1}", name='candidates', value=candidates)
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
        return self.lm.order

    def full_context_length(self, position: int) -> int:
        """Length of the history the LM uses at ``position`` (1-based; <s> counts)."""
        return min(self.lm.order - 1, position)

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
        words = np.asarray(path[: self.length], dtype=np.int32)
        log10, _ = self.lm.token_log10probs(words, bos=True, eos=self.eos)
        return float(log10.sum() * LN10 + obs)

    def sentence(self, path: Sequence[int]) -> list[int]:
        """The L word ids of an automaton path (``</s>`` dropped)."""
        return [int(s) for s in path[: self.length]]
