"""KenLM's Python API over varorder's n-gram models: ``import varorder.lm.kenlm as kenlm``
and code written for KenLM's ``kenlm`` module runs unchanged.

Factorization: p(x_1 .. x_T) = prod_i p(x_i | x_{i-n+1} .. x_{i-1}) over ``<s> x_1 .. x_T
</s>``, each factor by ARPA's back-off recursion (Carter, Dymetman & Bouchard 2012,
eq. 7), in log10 as KenLM reports it (Heafield 2011, "KenLM: Faster and Smaller Language
Model Queries"). The stateful calls carry :class:`varorder.lm.state.State`, the LM's
minimal right state, in a mutable :class:`State` box as KenLM's out-parameters require.

Semantics kept from KenLM's ``python/kenlm.pyx``: ``score`` and ``full_scores`` split the
sentence on whitespace, start from ``<s>`` (``bos=True``) or the empty context and predict
``</s>`` (``eos=True``); an out-of-vocabulary word is scored as ``<unk>`` and flagged
``oov`` (as is ``<unk>`` itself, KenLM's word 0); ``word in model`` is false for unknown
words and ``<unk>``; ``perplexity`` counts the words and one ``</s>``. ``Model`` opens ARPA
files and varorder binary files of either format version (not KenLM's binary format).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import NamedTuple

import numpy as np

from varorder.errors import ParameterError
from varorder.lm.state import State as LMState

_NO_WORDS = np.empty(0, dtype=np.int64)
_new_state = tuple.__new__  # a State from a tuple of ints, without State()'s per-word conversion

__all__ = ["Config", "FullScoreReturn", "LanguageModel", "LoadMethod", "Model", "State"]


class LoadMethod:
    """KenLM's load methods, accepted for compatibility (varorder maps binary files
    copy-on-write whichever is asked for, and reads ARPA into memory)."""

    LAZY = 0
    POPULATE_OR_LAZY = 1
    POPULATE_OR_READ = 2
    READ = 3
    PARALLEL_READ = 4


class Config:
    """KenLM's loading options, accepted for compatibility; none changes a score."""

    def __init__(self):
        self.load_method = LoadMethod.LAZY
        self.show_progress = False
        self.arpa_complain = 0


class FullScoreReturn(NamedTuple):
    """What :meth:`Model.BaseFullScore` returns: log10 p, the length of the n-gram it came
    from, and whether the word was out of the vocabulary."""

    log_prob: float
    ngram_length: int
    oov: bool


class State:
    """A mutable holder of an LM state, KenLM's ``kenlm.State``: the stateful calls write
    into it. Two holders compare equal, hash alike and order by the state they hold (its
    length first, then its words, as KenLM's ``State.Compare``); ``copy.copy`` copies it.
    ``state.value`` is the immutable :class:`varorder.lm.state.State` inside."""

    __slots__ = ("value", "_ids")

    def __init__(self):
        self._set(LMState(), _NO_WORDS)

    def _set(self, value: LMState, ids: np.ndarray) -> None:
        # ``_ids``: the same words as an int64 array, for the compiled query.
        self.value = value
        self._ids = ids

    def _key(self) -> tuple[int, tuple[int, ...]]:
        return len(self.value), tuple(self.value)

    def __eq__(self, other):
        return self._key() == other._key() if isinstance(other, State) else NotImplemented

    def __lt__(self, other):
        return self._key() < other._key() if isinstance(other, State) else NotImplemented

    def __le__(self, other):
        return self._key() <= other._key() if isinstance(other, State) else NotImplemented

    def __gt__(self, other):
        return self._key() > other._key() if isinstance(other, State) else NotImplemented

    def __ge__(self, other):
        return self._key() >= other._key() if isinstance(other, State) else NotImplemented

    def __hash__(self):
        return hash(self.value)

    def __copy__(self):
        duplicate = State()
        duplicate._set(self.value, self._ids)
        return duplicate

    def __deepcopy__(self, memo):
        return self.__copy__()

    def __repr__(self) -> str:
        return f"kenlm.State({tuple(self.value)})"


class Model:
    """A language model opened from ``path`` (ARPA, optionally gzipped, or a varorder binary
    file), with KenLM's ``kenlm.Model`` methods; ``model.model`` is the
    :class:`~varorder.lm.model.NgramLM` underneath.

    >>> import varorder.lm.kenlm as kenlm                       # doctest: +SKIP
    >>> model = kenlm.Model("test.arpa")                        # doctest: +SKIP
    >>> model.score("language modeling is fun .", bos=True, eos=True)   # doctest: +SKIP
    """

    def __init__(self, path, config: Config | None = None):
        from varorder.lm.arpa import load_model

        # ``-99`` read as the number -99, not as log10 0, as KenLM reads it (``<s>`` scores -99).
        self._bind(load_model(path, minus_99="literal"), os.path.abspath(os.fspath(path)))

    @classmethod
    def from_ngram_lm(cls, model) -> "Model":
        """The API over a model already in memory (an :class:`~varorder.lm.model.NgramLM`)."""
        self = cls.__new__(cls)
        self._bind(model, None)
        return self

    def _bind(self, model, path: str | None) -> None:
        self.path = path
        self.model = model
        self._index = model.vocabulary.index
        self._unk = model.vocabulary.unk_id
        self._begin = model.minimal_state([model.vocabulary.bos_id])
        self._begin_ids = np.asarray(self._begin, dtype=np.int64)
        self._tables = None  # the compiled query's tables, fetched (and Numba loaded) on the first stateful call

    @property
    def order(self) -> int:
        """The model's n-gram order."""
        return self.model.order

    def __repr__(self) -> str:
        return f"<Model from {os.path.basename(self.path)}>" if self.path else f"<Model of {self.model!r}>"

    def __contains__(self, word: str) -> bool:
        return self._index.get(word, self._unk) != self._unk

    def _id(self, word: str) -> int:
        if not isinstance(word, str):
            raise ParameterError(f"a word must be a str, got {type(word).__name__}", name="word", value=word)
        return self._index.get(word, self._unk)

    def score(self, sentence: str, bos: bool = True, eos: bool = True) -> float:
        """log10 p of the sentence's words (split on whitespace), from ``<s>`` when ``bos``,
        with ``</s>`` predicted when ``eos``."""
        return self.model.score_sentence(_words(sentence), bos=bos, eos=eos)

    def perplexity(self, sentence: str) -> float:
        """10^(-score / (number of words + 1)): the words and ``</s>`` count."""
        return 10.0 ** (-self.score(sentence) / (len(_words(sentence)) + 1))

    def full_scores(self, sentence: str, bos: bool = True, eos: bool = True) -> Iterator[tuple[float, int, bool]]:
        """``(log10 p, n-gram length, oov)`` of each word, then of ``</s>`` when ``eos``."""
        ids = self.model.vocabulary.encode(_words(sentence))
        log10probs, lengths = self.model.token_log10probs(ids, bos=bos, eos=eos)
        oov = [int(i) == self._unk for i in ids] + ([False] if eos else [])
        for log10prob, length, unknown in zip(log10probs.tolist(), lengths.tolist(), oov):
            yield log10prob, length, unknown

    def BeginSentenceWrite(self, state: State) -> None:
        """Write the state after ``<s>`` into ``state``."""
        _check_state(state, "state")._set(self._begin, self._begin_ids)

    def NullContextWrite(self, state: State) -> None:
        """Write the empty context (no ``<s>``) into ``state``."""
        _check_state(state, "state")._set(LMState(), _NO_WORDS)

    def BaseFullScore(self, in_state: State, word: str, out_state: State) -> FullScoreReturn:
        """log10 p(word | in_state), the n-gram length and oov; the state after ``word``
        is written into ``out_state`` (which may be ``in_state``)."""
        _check_state(in_state, "in_state")
        _check_state(out_state, "out_state")
        word_id = self._id(word)
        if self._tables is None:
            self._query, self._tables = self.model.state_query()
        with self.model.naming_damage():
            log10prob, length, keep = self._query(in_state._ids, word_id, *self._tables)
        if keep:
            words = in_state.value[len(in_state.value) + 1 - keep:] + (word_id,)
            ids = np.empty(keep, dtype=np.int64)
            ids[:-1] = in_state._ids[len(in_state._ids) + 1 - keep:]
            ids[-1] = word_id
            out_state._set(_new_state(LMState, words), ids)
        else:
            out_state._set(LMState(), _NO_WORDS)
        return FullScoreReturn(float(log10prob), int(length), word_id == self._unk)

    def BaseScore(self, in_state: State, word: str, out_state: State) -> float:
        """log10 p(word | in_state); the state after ``word`` is written into ``out_state``."""
        return self.BaseFullScore(in_state, word, out_state).log_prob


LanguageModel = Model


def _words(sentence) -> list[str]:
    if isinstance(sentence, bytes):
        sentence = sentence.decode("utf-8")
    if not isinstance(sentence, str):
        raise ParameterError(f"a sentence must be a str, got {type(sentence).__name__}", name="sentence",
                             value=sentence)
    return sentence.split()


def _check_state(state, name: str) -> State:
    if not isinstance(state, State):
        raise ParameterError(f"{name} must be a varorder.lm.kenlm.State, got {type(state).__name__}", name=name,
                             value=state)
    return state

