"""The queryable back-off n-gram model (:class:`NgramLM`) shared by every estimator and
by the ARPA reader.

Factorization: p(x_1 .. x_T) = prod_i p(x_i | x_{i-n+1} .. x_{i-1}), each factor given by
the back-off recursion of ARPA models (Carter, Dymetman & Bouchard 2012, eq. 7):
p(x | h) = f(h x) when h x is stored, else bow(h) * p(x | h minus its first word), with
bow(h) = 1 when h is not stored.

Storage: for each order, the sorted packed keys ``prefix_row * V + word`` (int64), the
``(log10 p, log10 bow)`` pairs (float32, ARPA's precision) and an open-addressing hash of
the keys (see :mod:`varorder.lm._kernels`). Tables are closed under prefixes and suffixes
(what KenLM also enforces): entries a file lacks are inserted with their back-off value,
which changes no score beyond float32 rounding of the inserted values.

Logarithms: values are stored in log10, as ARPA files hold them. Methods name their base:
``log10prob``/``max_log10prob`` return log10, ``logprob``/``max_logprob`` the natural log
that varorder's DP engine uses.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Iterable, Sequence
from contextlib import contextmanager

import numpy as np

from varorder.errors import FormatError, ParameterError
from varorder.lm._score_python import score_flat_python
from varorder.lm.bounds import MaxBackoffBounds, MaxBackoffTable
from varorder.lm.construction import from_ngrams
from varorder.lm.corpus import Vocabulary
from varorder.lm.state import State
from varorder.lm.tables import QueryTables, TableView, _find_rows, _hash_capacity, key_tables_problem
from varorder.lm.tables import kernels as _kernels

# Names other modules import from here (the model's tables moved to their own modules).
__all__ = ["LN10", "MaxBackoffTable", "NgramLM", "QueryTables", "State", "TableView", "_find_rows", "_hash_capacity",
           "key_tables_problem", "score_flat_python", "use_compiled_scoring"]

LN10 = math.log(10.0)
# Inputs up to this many predicted tokens are scored in Python while Numba is not loaded.
_PYTHON_SCORING_LIMIT = 256


class NgramLM(MaxBackoffBounds):
    """A back-off n-gram language model over integer word ids.

    Build one with an estimator (:mod:`varorder.lm.estimate`), with
    :func:`varorder.lm.arpa.read_arpa`, or with :meth:`from_ngrams`.

    Parameters
    ----------
    vocabulary : Vocabulary
        Word strings; unigram row i is word id i.
    keys : sequence of int64 arrays
        ``keys[m]`` lists the packed keys of order m + 1 in increasing order;
        ``keys[0]`` must be ``arange(len(vocabulary))``.
    log10_probs, log10_backoffs : sequences of float arrays
        Per order, aligned with ``keys``. The highest order's back-offs must be 0.

    Use :meth:`from_ngrams` to build from word-id rows: it packs keys, checks for
    duplicates and closes the tables. ``hashes`` (internal): per order, the hash table
    :func:`varorder.lm._kernels.build_hash_into` already made of ``keys[m]``, as slices of
    one array laid out as the model keeps them.

    Examples
    --------
    >>> from varorder.lm import AbsoluteDiscounting
    >>> lm = AbsoluteDiscounting(order=2).fit_sentences(["the cat sat", "the dog sat", "a cat ran"]).model_
    >>> lm.order, len(lm.vocabulary)
    (2, 9)
    >>> lm.score_sentences(["the cat sat", "a dog ran"]).round(3)         # log10 p, with </s>
    array([-1.019, -4.057])
    >>> round(lm.perplexity(["the cat sat"]), 3)
    1.798
    """

    # Set by :func:`varorder.lm.binary.open_binary`: the file the tables are mapped from,
    # named by errors, and whether its key arrays were checked (see :meth:`_ensure_keys`).
    _source: str | None = None
    _keys_checked = True

    def __init__(self, vocabulary: Vocabulary, keys, log10_probs, log10_backoffs, *, hashes=None, values=None):
        order = len(keys)
        if order < 1:
            raise ParameterError("a model needs at least the unigram order", name='keys', value=keys)
        if values is not None:
            # (internal) every order's (log10 p, log10 bow) already in one float32 table, in
            # the model's layout: taken as it is, without a copy.
            log10_probs = log10_backoffs = [None] * order
        if not (len(log10_probs) == len(log10_backoffs) == order):
            raise ParameterError("keys, log10_probs and log10_backoffs must have one array per order", name='keys', value=keys)
        vocab_size = len(vocabulary)
        if not np.array_equal(keys[0], np.arange(vocab_size)):
            raise ParameterError("unigram keys must be the word ids 0 .. V-1 in order", name='keys', value=keys)
        self.vocabulary = vocabulary
        self.order = order
        self.vocab_size = vocab_size
        self._keys = tuple(np.ascontiguousarray(k, dtype=np.int64) for k in keys)
        sizes = [len(k) for k in self._keys]
        value_base = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        # One allocation per table, filled order by order (no per-order copies to join).
        if values is not None and values.shape != (int(value_base[-1]), 2):
            raise ParameterError(f"values must have shape ({int(value_base[-1])}, 2), got {values.shape}", name='values', value=values)
        all_values = np.empty((int(value_base[-1]), 2), dtype=np.float32) if values is None else values
        for m in range(order):
            if m and sizes[m] and np.any(self._keys[m][1:] <= self._keys[m][:-1]):
                raise ParameterError(f"order {m + 1}: keys must be strictly increasing", name='keys', value=keys)
            if values is not None:
                continue
            if not (sizes[m] == len(log10_probs[m]) == len(log10_backoffs[m])):
                raise ParameterError(f"order {m + 1}: keys, log10_probs and log10_backoffs differ in length", name='keys', value=keys)
            all_values[value_base[m]:value_base[m + 1], 0] = log10_probs[m]
            all_values[value_base[m]:value_base[m + 1], 1] = log10_backoffs[m]
        capacities = [_hash_capacity(sizes[m]) for m in range(1, order)]
        hash_base = np.concatenate([[0], np.cumsum(capacities)]).astype(np.int64)
        # ``hashes``: the tables from_ngrams already built from these keys, as slices of one
        # array in this layout (used as they are); otherwise built on the first query, so
        # that estimating a model and writing it as ARPA never holds them (nor loads Numba).
        prebuilt = hashes is not None and order > 1 and hashes[1].base is not None \
            and hashes[1].base.shape == (int(hash_base[-1]), 3)
        hash_rows = hashes[1].base if prebuilt else None
        if prebuilt:
            self._fill_hash_values(hash_rows, hash_base, all_values, value_base)
        # extends[m][i]: some (m+2)-gram has row i of order m+1 as its prefix. A state
        # ending in an n-gram that never extends and has no back-off can forget its first word.
        extends = np.zeros(int(value_base[-1]), dtype=bool)
        for m in range(1, order):
            extends[value_base[m - 1] + self._keys[m] // vocab_size] = True
        self._attach(
            values=all_values,
            value_base=value_base,
            hash_rows=hash_rows,
            hash_base=hash_base,
            hash_cap=np.asarray(capacities + [0], dtype=np.int64),
            extends=extends,
        )

    def _fill_hash_values(self, hash_rows, hash_base, values, value_base) -> None:
        # Each slot's third word holds the row's (log10 p, log10 bow) as two float32.
        for m in range(1, self.order):
            table = hash_rows[hash_base[m - 1]:hash_base[m]]
            _kernels().fill_slot_values(table, table.view(np.float32), values[value_base[m]:value_base[m + 1]])

    @property
    def _hash_rows(self) -> np.ndarray:
        """Every order's hash table (see :mod:`varorder.lm._kernels`), built on first use."""
        if self._hash_table is None:
            table = np.empty((int(self._hash_base[-1]), 3), dtype=np.int64)
            for m in range(1, self.order):
                _kernels().build_hash_into(self._keys[m], table[self._hash_base[m - 1]:self._hash_base[m]])
            self._fill_hash_values(table, self._hash_base, self._values, self._value_base)
            self._hash_table = table
        return self._hash_table

    @property
    def _hash_values(self) -> np.ndarray:
        return self._hash_rows.view(np.float32)

    def _attach(self, *, values, value_base, hash_rows, hash_base, hash_cap, extends) -> None:
        """Install the query tables (built by ``__init__`` or mapped from a binary file);
        ``hash_rows`` None: built from the keys on first use."""
        self._values = values
        self._value_base = value_base
        self._hash_table = hash_rows
        self._hash_base = hash_base
        self._hash_cap = hash_cap
        self._extends_flat = extends
        self._extends = [extends[value_base[m]:value_base[m + 1]] for m in range(self.order)]
        self._max_backoff: MaxBackoffTable | None = None

    @classmethod
    def _from_tables(cls, vocabulary: Vocabulary, keys, *, values, value_base, hash_rows, hash_base, hash_cap,
                     extends) -> "NgramLM":
        """A model over prebuilt tables, without sorting or hashing (the binary format's
        loader validates them first; see :mod:`varorder.lm.binary`)."""
        model = cls.__new__(cls)
        model.vocabulary = vocabulary
        model.order = len(keys)
        model.vocab_size = len(vocabulary)
        model._keys = tuple(keys)
        model._attach(values=values, value_base=value_base, hash_rows=hash_rows, hash_base=hash_base,
                      hash_cap=hash_cap, extends=extends)
        return model
    @classmethod
    def from_ngrams(cls, vocabulary: Vocabulary, ngrams: Sequence[tuple[np.ndarray, np.ndarray, np.ndarray]], *,
                    source: str | None = None, line_numbers: Sequence[np.ndarray] | None = None) -> "NgramLM":
        """Build a model from word-id rows (see :func:`varorder.lm.construction.from_ngrams`).

        ``ngrams[m]`` is ``(rows of shape (n, m + 1), log10_probs, log10_backoffs)``;
        ``ngrams[0]`` must list every vocabulary word exactly once (any order). ``source``
        and, per order, ``line_numbers`` let errors (a duplicate n-gram) name the file
        and line. Missing prefixes and suffixes are inserted with their back-off values.
        """
        return from_ngrams(cls, vocabulary, ngrams, source=source, line_numbers=line_numbers)

    # ------------------------------------------------------------------ inspection

    @property
    def ngram_counts(self) -> tuple[int, ...]:
        """Number of stored n-grams of each order, unigrams first."""
        return tuple(len(k) for k in self._keys)

    def table_view(self) -> TableView:
        """The model's tables, read-only by contract and without copies (see
        :class:`varorder.lm.tables.TableView`): what MAX-ARPA, pruning and mixing read."""
        values = [self._order_values(m + 1) for m in range(self.order)]
        return TableView(self.order, self.vocab_size, self.vocabulary.bos_id, self.vocabulary.eos_id, self._keys,
                         tuple(v[:, 0] for v in values), tuple(v[:, 1] for v in values), self._hash_rows,
                         self._hash_base, self._hash_cap)

    def state_tables(self) -> tuple:
        """The tables of a stateful query, without copies, in the argument order of
        :func:`varorder.lm._kenlm_kernels.base_full_score` after its context and word:
        ``(order, vocab_size, hash_rows, hash_base, hash_cap, values, value_base, extends)``,
        ``extends`` flagging (flat, addressed like ``values``) each stored n-gram that a
        longer one extends. A kernel reading them runs inside :meth:`naming_damage`."""
        return (self.order, self.vocab_size, self._hash_rows, self._hash_base, self._hash_cap, self._values,
                self._value_base, self._extends_flat)

    def state_query(self) -> tuple:
        """``(kernel, tables)`` of one stateful query of :mod:`varorder.lm.kenlm`:
        ``kernel(context, word, *tables)`` returns ``(log10 p, n-gram length, words to keep
        as the next state)`` (:func:`varorder.lm._kenlm_kernels.base_full_score` over
        :meth:`state_tables`). Run it inside :meth:`naming_damage`."""
        from varorder.lm._kenlm_kernels import base_full_score

        return base_full_score, self.state_tables()

    @property
    def nbytes(self) -> int:
        """Bytes held by the tables (keys, values, hashes once built, extension flags)."""
        return int(
            sum(k.nbytes for k in self._keys)
            + self._values.nbytes
            + (self._hash_table.nbytes if self._hash_table is not None else 0)
            + self._extends_flat.nbytes
        )

    @property
    def bytes_per_ngram(self) -> float:
        return self.nbytes / max(1, sum(self.ngram_counts))

    def __repr__(self) -> str:
        return f"NgramLM(order={self.order}, vocab={self.vocab_size}, ngrams={self.ngram_counts})"

    def ngrams(self, order: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The stored n-grams of ``order`` as ``(rows, log10_probs, log10_backoffs)``;
        ``rows`` has shape (n, order) of word ids, sorted by packed key."""
        self._check_order(order)
        self._ensure_keys()
        rows = np.arange(self.vocab_size, dtype=np.int64).reshape(-1, 1)
        for m in range(1, order):
            keys = self._keys[m]
            rows = np.concatenate([rows[keys // self.vocab_size], (keys % self.vocab_size).reshape(-1, 1)], axis=1)
        values = self._order_values(order)
        return rows, values[:, 0].astype(np.float64), values[:, 1].astype(np.float64)

    def _word_rows(self, order: int, start: int, stop: int) -> np.ndarray:
        """Rows ``start:stop`` of ``ngrams(order)[0]`` (word ids), without the others."""
        self._ensure_keys()
        positions = np.arange(start, stop, dtype=np.int64)
        columns = []
        for m in range(order - 1, 0, -1):
            keys = self._keys[m][positions]
            columns.append(keys % self.vocab_size)
            positions = keys // self.vocab_size
        columns.append(positions)
        return np.stack(columns[::-1], axis=1)

    def _ensure_keys(self) -> None:
        """Check the key arrays once before an operation that indexes with them (listing
        n-grams, writing ARPA, MAX-ARPA) when they come from a file opened structurally:
        strictly increasing packed keys whose prefix rows lie in the order below."""
        if self._keys_checked:
            return
        problem = key_tables_problem(self._keys, self.vocab_size)
        if problem is not None:
            raise FormatError(f"{self._source}: corrupt model file: {problem}", path=self._source)
        self._keys_checked = True

    def _corrupt(self, error: ValueError) -> ValueError:
        """``error`` naming the model's file when it is a kernel's bounds-check failure."""
        # Only an error path reaches here, so importing the kernels (which own the message) is cheap enough.
        if self._source is not None and str(error) == _kernels().CORRUPT_ROW:
            return FormatError(f"{self._source}: {error} (run `varorder lm verify` on it)", path=self._source)
        return error

    @contextmanager
    def naming_damage(self):
        """Context for Numba code that queries :meth:`query_tables` in its own loops: a
        lookup kernel's bounds-check failure (a damaged table in a model opened
        structurally) leaves it as a ValueError naming the model's file, as the model's
        own lookups raise it."""
        try:
            yield
        except ValueError as error:
            raise self._corrupt(error) from None

    def _check_order(self, order: int) -> None:
        if not 1 <= order <= self.order:
            raise ParameterError(f"order must be between 1 and {self.order}, got {order}", name='order', value=order)

    def _order_values(self, order: int) -> np.ndarray:
        return self._values[self._value_base[order - 1] : self._value_base[order]]

    def _row_of(self, ngram: np.ndarray) -> int:
        """Row of ``ngram`` (word ids) in its order's table, or -1; the empty n-gram is -1."""
        if len(ngram) == 0 or len(ngram) > self.order:
            return -1
        row = int(_kernels().find_ngram(np.asarray(ngram, dtype=np.int64), self.vocab_size, self._hash_rows,
                                        self._hash_base, self._hash_cap))
        if row >= self.ngram_counts[len(ngram) - 1]:
            raise self._corrupt(ValueError(_kernels().CORRUPT_ROW))
        return max(row, -1)

    def _query_kernels(self) -> tuple:
        """``(kernel module, tables)``: the module's ``backoff_log10prob``,
        ``batched_lookup`` and ``grid_lookup`` take the tables after their queries (a
        model over other tables, :class:`varorder.lm.trie.TrieLM`, gives its own)."""
        return _kernels(), (self.vocab_size, self._hash_rows, self._hash_base, self._hash_cap, self._values,
                            self._value_base)

    def _context_array(self, context: Iterable[int]) -> np.ndarray:
        context = np.asarray(list(context) if not isinstance(context, np.ndarray) else context, dtype=np.int64)
        if context.ndim != 1:
            raise ParameterError("context must be a one-dimensional sequence of word ids", name='context', value=context)
        self._check_ids(context)
        return context[max(0, len(context) - (self.order - 1)) :] if self.order > 1 else context[:0]

    def _check_ids(self, ids: np.ndarray) -> None:
        if ids.size and (ids.min() < 0 or ids.max() >= self.vocab_size):
            bad = int(np.flatnonzero((ids < 0) | (ids >= self.vocab_size))[0])
            raise ParameterError(f"word id {int(ids[bad])} at position {bad} is outside the vocabulary (0 .. {self.vocab_size - 1})", name='ids', value=ids)

    def _check_word(self, word: int) -> int:
        word = int(word)
        if not 0 <= word < self.vocab_size:
            raise ParameterError(f"word id {word} is outside the vocabulary (0 .. {self.vocab_size - 1})", name='word', value=word)
        return word

    # ------------------------------------------------------------------ queries

    def lookup(self, context: Sequence[int], word: int) -> tuple[float, int]:
        """``(log10 p(word | context), length of the stored n-gram used)`` by back-off.

        Only the last order - 1 words of ``context`` matter; pass ``bos_id`` first for a
        sentence start.
        """
        context = self._context_array(context)
        word = self._check_word(word)
        kernels, tables = self._query_kernels()
        try:
            log10prob, length = kernels.backoff_log10prob(context, word, *tables)
        except ValueError as error:
            raise self._corrupt(error) from None
        return float(log10prob), int(length)

    def log10prob(self, context: Sequence[int], word: int) -> float:
        """log10 p(word | context) with back-off."""
        return self.lookup(context, word)[0]

    def logprob(self, context: Sequence[int], word: int) -> float:
        """Natural-log p(word | context) with back-off."""
        return self.lookup(context, word)[0] * LN10

    def token_log10probs(
        self, ids: np.ndarray, lengths: np.ndarray | None = None, *, bos: bool = True, eos: bool = True
    ) -> tuple[np.ndarray, np.ndarray]:
        """Batched scoring without a Python loop per word.

        Parameters
        ----------
        ids : int array
            Concatenated sentences (no markers), e.g. from ``Vocabulary.encode_sentences``.
        lengths : int array, optional
            Each sentence's length; one sentence when omitted.
        bos, eos : bool
            Start each sentence in the ``<s>`` context; predict ``</s>`` after each.

        Returns
        -------
        log10probs : float64 array
            One per predicted token: each sentence's words, then its ``</s>`` if ``eos``.
        ngram_lengths : int8 array
            The length of the stored n-gram each probability came from.
        """
        return self._score_ids(ids, lengths, bos, eos)[:2]

    def _score_ids(self, ids, lengths, bos: bool, eos: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(log10 p per token, n-gram length per token, log10 p per sentence summed in
        token order)`` of encoded sentences."""
        ids = np.ascontiguousarray(ids, dtype=np.int32)
        self._check_ids(ids)
        if lengths is None:
            lengths = np.asarray([len(ids)], dtype=np.int64)
        lengths = np.asarray(lengths, dtype=np.int64)
        if lengths.size and lengths.min() < 0 or int(lengths.sum()) != len(ids):
            raise ParameterError(f"lengths must be non-negative and sum to len(ids) = {len(ids)}, got sum {int(lengths.sum())}", name='lengths', value=lengths)
        offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        n_out = len(ids) + (len(lengths) if eos else 0)
        out_log10prob = np.empty(n_out, dtype=np.float64)
        out_length = np.empty(n_out, dtype=np.int8)
        out_sentence = np.empty(len(lengths), dtype=np.float64)
        self._run_scorer(ids, offsets, bos, eos, out_log10prob, out_length, out_sentence)
        return out_log10prob, out_length, out_sentence

    def _run_scorer(self, ids, offsets, bos: bool, eos: bool, out_log10prob, out_length, out_sentence) -> None:
        """Fill the outputs of :meth:`_score_ids` (see :func:`varorder.lm._kernels.score_flat`)."""
        n_out = len(out_log10prob)
        # A few tokens score faster in Python than Numba loads; the results are identical.
        small = n_out <= _PYTHON_SCORING_LIMIT and "varorder.lm._kernels" not in sys.modules
        score_flat = score_flat_python if small else _kernels().score_flat
        score_flat(
            ids, offsets, bos, eos, self.vocabulary.bos_id, self.vocabulary.eos_id, self.order, self.vocab_size,
            self._hash_rows, self._hash_values, self._hash_base, self._hash_cap, self._values, out_log10prob, out_length,
            out_sentence,
        )

    def sentence_log10probs(
        self, ids: np.ndarray, lengths: np.ndarray | None = None, *, bos: bool = True, eos: bool = True
    ) -> np.ndarray:
        """log10 probability of each sentence, its tokens' log10 p summed in order (batched;
        see :meth:`token_log10probs`)."""
        return self._score_ids(ids, lengths, bos, eos)[2]

    def score_sentences(self, sentences: Sequence[str], *, bos: bool = True, eos: bool = True) -> np.ndarray:
        """log10 probability of each sentence string (KenLM's ``Model.score`` over a list),
        equal to :meth:`score_sentence` of each: the strings are encoded by a compiled
        kernel over their UTF-8 bytes (:meth:`Vocabulary.encode_lines`) and scored in one
        batched call."""
        ids, lengths = self.vocabulary.encode_lines(sentences)
        return self.sentence_log10probs(ids, lengths, bos=bos, eos=eos)

    def score_sentence(self, sentence: str | Sequence[str], *, bos: bool = True, eos: bool = True) -> float:
        """log10 probability of one sentence given as a string or a list of words (its
        tokens' log10 p summed in order)."""
        words = sentence.split() if isinstance(sentence, str) else list(sentence)
        return float(self.sentence_log10probs(self.vocabulary.encode(words), bos=bos, eos=eos)[0])

    def next_word_log10probs(self, context: str | Sequence[str], *, bos: bool = True) -> np.ndarray:
        """log10 p(w | context) for every word id w (shape (V,)): the next-word distribution
        after ``context`` (a string or words; unknown words read as ``<unk>``), started at
        ``<s>`` when ``bos``. ``<s>`` itself, never predicted, gets its stored unigram value."""
        words = context.split() if isinstance(context, str) else list(context)
        ids = self.vocabulary.encode(words).astype(np.int64)
        if bos:
            ids = np.concatenate([[self.vocabulary.bos_id], ids])
        ids = ids[max(0, len(ids) - (self.order - 1)):] if self.order > 1 else ids[:0]
        log10probs, _ = self.lookup_grid(ids, [0, len(ids)], np.arange(self.vocab_size))
        return log10probs[0]

    def perplexity(self, sentences: Iterable[str | Sequence[str]] | tuple[np.ndarray, np.ndarray]) -> float:
        """Perplexity 10^(-sum log10 p / N) over sentences, N counting every word and each
        ``</s>`` (not ``<s>``); out-of-vocabulary words are scored as ``<unk>``, as KenLM does.

        ``sentences`` is an iterable of strings or token lists, or an ``(ids, lengths)``
        pair as :meth:`Vocabulary.encode_sentences` returns.
        """
        if isinstance(sentences, tuple) and len(sentences) == 2 and isinstance(sentences[0], np.ndarray):
            ids, lengths = sentences
        else:
            ids, lengths = self.vocabulary.encode_sentences(
                s.split() if isinstance(s, str) else s for s in sentences
            )
        scores, _ = self.token_log10probs(ids, lengths)
        if len(scores) == 0:
            raise ParameterError("perplexity of an empty set of sentences", name='sentences', value=sentences)
        return float(10.0 ** (-scores.sum() / len(scores)))

    # ------------------------------------------------------------------ states

    def minimal_state(self, context: Sequence[int]) -> State:
        """The shortest suffix of ``context`` that determines every future score.

        That is the longest suffix s (at most order - 1 words) that is stored and either
        extends to a longer stored n-gram or has a back-off weight other than 1; the words
        before it can change no later probability (KenLM's right-state minimization,
        which the q-automaton uses to merge states). An entry that the reader inserted to
        close the tables carries its back-off value and still counts as an extension, so
        on such files a state can keep a word that changes nothing (as KenLM's does).
        The :class:`~varorder.lm.state.State` compares equal to the tuple of its words.
        """
        context = self._context_array(context)
        for start in range(len(context)):
            suffix = context[start:]
            row = self._row_of(suffix)
            if row < 0:
                continue
            length = len(suffix)
            backoff = self._values[self._value_base[length - 1] + row, 1]
            if self._extends[length - 1][row] or backoff != 0.0:
                return State(suffix)
        return State()
    # ------------------------------------------------------------------ batched queries

    def _flat_queries(self, contexts, words) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(flat context ids, offsets, words) of a batch, contexts cut to order - 1 words;
        ``contexts`` a sequence of id sequences or an (M, k) array of M contexts of k words."""
        if isinstance(contexts, np.ndarray) and contexts.ndim == 2:
            contexts = contexts[:, max(0, contexts.shape[1] - (self.order - 1)):] if self.order > 1 else contexts[:, :0]
            words = np.asarray(words, dtype=np.int64).reshape(-1)
            if len(words) != len(contexts):
                raise ParameterError(f"got {len(contexts)} contexts but {len(words)} words", name='words', value=words)
            flat = np.ascontiguousarray(contexts, dtype=np.int64).reshape(-1)
            offsets = np.arange(len(contexts) + 1, dtype=np.int64) * contexts.shape[1]
            self._check_ids(flat)
            self._check_ids(words)
            return flat, offsets, words
        contexts = [np.asarray(c, dtype=np.int64).reshape(-1) for c in contexts]
        words = np.asarray(words, dtype=np.int64).reshape(-1)
        if len(words) != len(contexts):
            raise ParameterError(f"got {len(contexts)} contexts but {len(words)} words", name='words', value=words)
        keep = self.order - 1
        contexts = [c[len(c) - keep:] if len(c) > keep else c for c in contexts]
        lengths = np.fromiter((len(c) for c in contexts), dtype=np.int64, count=len(contexts))
        offsets = np.zeros(len(contexts) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        flat = np.concatenate(contexts) if contexts else np.empty(0, np.int64)
        self._check_ids(flat)
        self._check_ids(words)
        return flat, offsets, words

    def lookups(self, contexts: Sequence[Sequence[int]], words: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
        """Batched :meth:`lookup`: ``(log10 p (M,), lengths of the n-grams used (M,))`` for
        M (context, word) queries in one compiled call; ``contexts`` may be an (M, k) array
        (M contexts of k words each)."""
        flat, offsets, words = self._flat_queries(contexts, words)
        out = np.empty(len(words))
        lengths = np.empty(len(words), dtype=np.int64)
        kernels, tables = self._query_kernels()
        try:
            kernels.batched_lookup(flat, offsets, words, *tables, out, lengths)
        except ValueError as error:
            raise self._corrupt(error) from None
        return out, lengths

    def lookup_grid(self, context_ids, context_offsets, words) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`lookup` of every (context, word) pair of C contexts times W words, in one
        compiled call: ``(log10 p (C, W), lengths of the n-grams used (C, W))``.

        Contexts are given flat: context c is ``context_ids[context_offsets[c] :
        context_offsets[c + 1]]``; each must hold at most order - 1 words.
        """
        flat = np.ascontiguousarray(context_ids, dtype=np.int64).reshape(-1)
        offsets = np.ascontiguousarray(context_offsets, dtype=np.int64).reshape(-1)
        words = np.ascontiguousarray(words, dtype=np.int64).reshape(-1)
        if len(offsets) < 1 or offsets[0] != 0 or offsets[-1] != len(flat) or np.any(np.diff(offsets) < 0):
            raise ParameterError("context_offsets must start at 0, be non-decreasing and end at len(context_ids)", name='context_offsets', value=context_offsets)
        if len(offsets) > 1 and np.diff(offsets).max() > self.order - 1:
            raise ParameterError(f"contexts must hold at most order - 1 = {self.order - 1} words", name='context_ids', value=context_ids)
        self._check_ids(flat)
        self._check_ids(words)
        out = np.empty((len(offsets) - 1, len(words)))
        lengths = np.empty((len(offsets) - 1, len(words)), dtype=np.int64)
        kernels, tables = self._query_kernels()
        try:
            kernels.grid_lookup(flat, offsets, words, *tables, out, lengths)
        except ValueError as error:
            raise self._corrupt(error) from None
        return out, lengths


def use_compiled_scoring() -> None:
    """Load the compiled scoring kernels now (~0.3 s once per process): every later
    :meth:`NgramLM.score_sentences` call uses them, however small its input. Short runs skip this
    and score small inputs in Python, sparing Numba's start; a long stream pays it once."""
    import varorder.lm._kernels  # noqa: F401  (NgramLM checks whether they are loaded)
