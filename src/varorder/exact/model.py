"""What exact decoding and sampling over q-automata need from a language model (Carter,
Dymetman & Bouchard 2012, §2): the exact factor, the max-backoff bound over left
extensions (eq. 2) and where refining a context stops mattering.

Factorization: p(x) = prod_i p(x_i | <s> x_1 .. x_{i-1}), each factor reading some suffix
of the history. A :class:`ContextModel` answers, for a context c (a suffix of the
history) and a word x:

* ``score(c, x)`` = (log p(x | c), r), c the history the model reads (the last n - 1
  symbols of an n-gram model; the whole history of an unbounded-order one) and r how many
  of its last symbols the value depends on (n - 1; for the unbounded model one more than
  the longest suffix that occurs), so that a factor is recomputed only when those change;
* ``bound(c, x)`` = w(x | c) >= max over left extensions e of p(x | e c): the weight of a
  q-automaton arc whose state knows only c;
* ``relevant(c)``: False when every left extension gives the same factors as c (the bound
  is exact, so refining past c cannot lower q);
* ``max_context``: the longest context the model reads (n - 1), or None (unbounded: the
  whole history, so a factor is at full order when its context starts with ``<s>``).

The q-automaton's compiled kernels call :func:`score`, :func:`bound` and :func:`relevant`
on the model's tables, one tuple (:meth:`ContextModel.kernels`); each is a Numba overload
that picks the model's implementation from the tuple's type at compile time (so the
kernels' on-disk cache holds, which passing the functions as arguments would defeat), and
``scale`` turns the kernels' units into natural log (log10 for the ARPA tables).

Two models implement it:

* :class:`NgramContext` — a back-off :class:`~varorder.lm.NgramLM`: exact back-off
  (eq. 7) and the MAX-ARPA bound (eq. 8), relevant when c is a stored n-gram.
* :class:`UnboundedContext` — interpolated Witten–Bell at unbounded order over a suffix
  array (:class:`~varorder.lm.unbounded.WittenBell`, no base): the bound is the maximum of
  the recursion over the left extensions of c that occur followed by x, read from the
  suffix array on demand (:func:`varorder.lm._suffix.witten_bell_max_query`; the MAX-ARPA
  idea with no order limit), and 1 when that walk would exceed ``budget`` extensions;
  relevant when c occurs in the corpus.
"""

from __future__ import annotations

from contextlib import contextmanager, nullcontext
from typing import NamedTuple

import numba
import numpy as np
from numba.extending import overload

from varorder.errors import FormatError, ParameterError
from varorder.lm import _kernels as lm_kernels
from varorder.lm import _suffix
from varorder.lm.model import LN10, NgramLM
from varorder.lm.unbounded import WittenBell
import varorder._numba_start  # noqa: E402,F401,I001  (Numba's cache saves locked across processes)

__all__ = ["ContextModel", "ModelKernels", "NgramContext", "UnboundedContext", "context_model",
           "DEFAULT_EXTENSION_BUDGET"]

#: Left extensions walked per unbounded-order bound before it falls back to 1.
DEFAULT_EXTENSION_BUDGET = 32


class ModelKernels(NamedTuple):
    """The tables :func:`score`, :func:`bound` and :func:`relevant` read, and the factor
    from kernel units to natural log."""

    tables: tuple
    scale: float


def score(tables, context, word):
    """(log p(word | context) in kernel units, symbols read): compiled code only."""
    raise NotImplementedError("varorder.exact.model.score is called from Numba code")


def bound(tables, context, word):
    """w(word | context) in kernel units: compiled code only."""
    raise NotImplementedError("varorder.exact.model.bound is called from Numba code")


def relevant(tables, context):
    """Whether a left extension of the context can change a factor: compiled code only."""
    raise NotImplementedError("varorder.exact.model.relevant is called from Numba code")


_NGRAM_TABLES = 8  # QueryTables
_UNBOUNDED_TABLES = 13


def _kind(tables) -> int:
    return len(getattr(tables, "types", ()))


class ContextModel:
    """The interface (see the module). Subclasses set ``lm``, ``vocabulary``,
    ``max_context`` and implement :meth:`kernels`, :meth:`logprob`, :meth:`max_logprob`
    and :meth:`unigram_bounds_of`."""

    lm: object
    max_context: int | None

    @property
    def vocabulary(self):
        return self.lm.vocabulary

    @property
    def vocab_size(self) -> int:
        return len(self.lm.vocabulary)

    def order_for(self, num_positions: int) -> int:
        """The n of the q-automaton's "full order" test min(n - 1, i) at positions
        1 .. num_positions: the model's order, or num_positions + 1 when unbounded."""
        return num_positions + 1 if self.max_context is None else self.max_context + 1

    def kernels(self) -> ModelKernels:
        raise NotImplementedError

    def logprob(self, context, word) -> float:
        """Natural-log p(word | context), context a history (<s> first)."""
        raise NotImplementedError

    def max_logprob(self, context, word) -> float:
        """Natural-log w(word | context)."""
        raise NotImplementedError

    def unigram_bounds_of(self, symbols: np.ndarray) -> np.ndarray:
        """w(x | ()) of each symbol (natural log)."""
        raise NotImplementedError

    def naming_damage(self):
        """Context that turns a kernel's damage report into an error naming the file."""
        return nullcontext()


# ------------------------------------------------------------------- n-gram (ARPA) model

@numba.njit(cache=True)
def ngram_score(tables, context, word):
    log10prob, _ = lm_kernels.backoff_log10prob(context, word, tables[0], tables[1], tables[2], tables[3],
                                                tables[4], tables[5])
    return log10prob, context.shape[0]


@numba.njit(cache=True)
def ngram_bound(tables, context, word):
    return lm_kernels.max_backoff_log10prob(context, word, tables[0], tables[1], tables[2], tables[3], tables[4],
                                            tables[5], tables[6], tables[7])


@numba.njit(cache=True)
def ngram_relevant(tables, context):
    return lm_kernels.find_ngram(context, tables[0], tables[1], tables[2], tables[3]) >= 0


class NgramContext(ContextModel):
    """A back-off n-gram LM: eq. 7 and the MAX-ARPA bound (log10 kernels)."""

    def __init__(self, lm: NgramLM):
        if not isinstance(lm, NgramLM):
            raise ParameterError(f"lm must be a varorder.lm.NgramLM, got {type(lm).__name__}", name="lm", value=lm)
        self.lm = lm
        self.max_context = lm.order - 1
        self._unigram: np.ndarray | None = None

    def kernels(self) -> ModelKernels:
        return ModelKernels(tuple(self.lm.query_tables()), LN10)

    def logprob(self, context, word) -> float:
        context = list(context)[-self.max_context:] if self.max_context else []
        return float(self.lm.lookup(np.asarray(context, np.int64), int(word))[0] * LN10)

    def max_logprob(self, context, word) -> float:
        context = list(context)[-self.max_context:] if self.max_context else []
        return self.lm.max_logprob(context, int(word))

    def unigram_bounds(self) -> np.ndarray:
        """w(x | ()) for every word id (V,), computed once in one batched call."""
        if self._unigram is None:
            words = np.arange(self.lm.vocab_size)
            self._unigram = self.lm.max_logprobs([()] * len(words), words)
            self._unigram.flags.writeable = False
        return self._unigram

    def unigram_bounds_of(self, symbols: np.ndarray) -> np.ndarray:
        return self.unigram_bounds()[symbols]

    def naming_damage(self):
        return self.lm.naming_damage()


# ------------------------------------------------------ unbounded-order Witten–Bell model

@numba.njit(cache=True)
def _scratch(tables, context):
    firsts, ends = tables[8], tables[9]
    if firsts.shape[0] < context.shape[0] + 1:
        firsts = np.empty(2 * (context.shape[0] + 1), np.int64)
        ends = np.empty(2 * (context.shape[0] + 1), np.int64)
    return firsts, ends


@numba.njit(cache=True)
def unbounded_score(tables, context, word):
    firsts, ends = _scratch(tables, context)
    p, _, _, _, m = _suffix.witten_bell_query(tables[0], tables[1], tables[2], tables[3], tables[4], tables[5],
                                              0.0, 0, context, word, firsts, ends, tables[10], tables[11])
    # p depends on the last m + 1 symbols: the longest suffix that occurs and the one
    # token before it, which makes the next longer suffix absent
    return np.log(p), min(m + 1, context.shape[0])


@numba.njit(cache=True)
def unbounded_bound(tables, context, word):
    firsts, ends = _scratch(tables, context)
    p, _ = _suffix.witten_bell_max_query(tables[0], tables[1], tables[2], tables[3], tables[4], tables[5],
                                         tables[6], context, word, tables[7], firsts, ends, tables[10], tables[11],
                                         tables[12])
    return np.log(p)


@numba.njit(cache=True)
def unbounded_relevant(tables, context):
    a, b = _suffix.range_of(tables[0], tables[1], context)
    return a == _suffix.DAMAGED or b > a


@numba.njit(cache=True)
def _unbounded_unigram_bounds(tables, symbols, out):
    empty = np.empty(0, np.int64)
    for i in range(symbols.shape[0]):
        out[i] = unbounded_bound(tables, empty, symbols[i])


class UnboundedContext(ContextModel):
    """Interpolated Witten–Bell over every suffix length (natural-log kernels); bounds
    over left extensions read from the suffix array, at most ``budget`` extensions each."""

    def __init__(self, lm: WittenBell, *, budget: int = DEFAULT_EXTENSION_BUDGET):
        if not isinstance(lm, WittenBell):
            raise ParameterError(f"lm must be a varorder.lm.unbounded.WittenBell, got {type(lm).__name__}",
                                 name="lm", value=lm)
        if lm.base is not None:
            raise ParameterError("exact decoding under WittenBell(base=...) is not supported: the base's levels "
                                 "would need their own bounds over left extensions", name="lm", value="base")
        if int(budget) < 1:
            raise ParameterError(f"budget must be >= 1, got {budget}", name="budget", value=budget)
        self.lm = lm
        self.max_context = None
        self.budget = int(budget)
        index = lm.index
        counts = index.unigram_counts()
        total, types = _suffix.unigram_totals(counts)
        V = len(lm.vocabulary)
        longest = int(np.diff(index.docs).max()) if index.num_documents else 1
        self._tables = (index.tokens, index.sa, counts, total, types, float(V - 1), lm.vocabulary.bos_id,
                        self.budget, np.empty(longest + 2, np.int64), np.empty(longest + 2, np.int64),
                        np.empty(V + 1, np.int64), np.empty(V + 1, np.int64), np.empty(2 * longest + 2, np.int64))
        self._unigram = np.full(V, np.nan)

    def kernels(self) -> ModelKernels:
        return ModelKernels(self._tables, 1.0)

    def _ids(self, context) -> np.ndarray:
        return np.asarray(self.lm.index.encode(list(context), unknown="unk"), dtype=np.int64)

    def _checked(self, value: float) -> float:
        if np.isnan(value):
            raise FormatError("damaged suffix index: a position outside the corpus", path=self.lm.index.folder / "sa.bin")
        return float(value)

    def logprob(self, context, word) -> float:
        return self._checked(unbounded_score(self._tables, self._ids(context), int(word))[0])

    def max_logprob(self, context, word) -> float:
        return self._checked(unbounded_bound(self._tables, self._ids(context), int(word)))

    def unigram_bounds_of(self, symbols: np.ndarray) -> np.ndarray:
        symbols = np.asarray(symbols, dtype=np.int64)
        missing = np.unique(symbols[np.isnan(self._unigram[symbols])])
        if missing.size:
            out = np.empty(missing.size)
            _unbounded_unigram_bounds(self._tables, missing, out)
            self._checked(out.sum())
            self._unigram[missing] = out
        return self._unigram[symbols].copy()


@overload(score)
def _score_overload(tables, context, word):
    if _kind(tables) == _NGRAM_TABLES:
        return lambda tables, context, word: ngram_score(tables, context, word)
    if _kind(tables) == _UNBOUNDED_TABLES:
        return lambda tables, context, word: unbounded_score(tables, context, word)
    return None


@overload(bound)
def _bound_overload(tables, context, word):
    if _kind(tables) == _NGRAM_TABLES:
        return lambda tables, context, word: ngram_bound(tables, context, word)
    if _kind(tables) == _UNBOUNDED_TABLES:
        return lambda tables, context, word: unbounded_bound(tables, context, word)
    return None


@overload(relevant)
def _relevant_overload(tables, context):
    if _kind(tables) == _NGRAM_TABLES:
        return lambda tables, context: ngram_relevant(tables, context)
    if _kind(tables) == _UNBOUNDED_TABLES:
        return lambda tables, context: unbounded_relevant(tables, context)
    return None


def context_model(lm, **kw) -> ContextModel:
    """The :class:`ContextModel` of ``lm`` (an NgramLM, a base-less WittenBell, or a
    ContextModel itself)."""
    if isinstance(lm, ContextModel):
        return lm
    if isinstance(lm, NgramLM):
        return NgramContext(lm)
    if isinstance(lm, WittenBell):
        return UnboundedContext(lm, **kw)
    raise ParameterError(f"lm must be a varorder.lm.NgramLM or a varorder.lm.unbounded.WittenBell, got "
                         f"{type(lm).__name__}", name="lm", value=type(lm).__name__)
