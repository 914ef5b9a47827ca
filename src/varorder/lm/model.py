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
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from varorder.errors import FormatError, ParameterError
from varorder.lm.corpus import Vocabulary

def _kernels():
    """The Numba kernels, imported on first use: opening a binary model and scoring a few
    sentences (:meth:`NgramLM.token_log10probs` on small inputs) never load Numba, which
    keeps a one-sentence ``varorder lm score`` well under a second."""
    from varorder.lm import _kernels as kernels

    return kernels


LN10 = math.log(10.0)
# Hash tables are sized for this load factor: linear probing stays at about 1.5 probes
# for a hit and 2.5 for a miss, while the table costs 16 / 0.67 = 24 bytes per n-gram.
_LOAD_FACTOR = 0.67
# Inputs up to this many predicted tokens are scored in Python while Numba is not loaded.
_PYTHON_SCORING_LIMIT = 256
_GOLDEN = 0x9E3779B97F4A7C15
_MASK64 = (1 << 64) - 1


@dataclass(frozen=True)
class MaxBackoffTable:
    """The two MAX-ARPA columns of Carter et al. (2012), §2.3, per order (log10).

    ``max_log10prob[m][i]`` (mf) is the largest log10 p(x | e c) over every left extension
    e of the context of the i-th stored (m+1)-gram c x; ``max_log10backoff[m][i]`` (mbow)
    is the largest total log10 back-off paid on the way down from any left extension of
    that n-gram, used as a context, to the n-gram itself. Extensions range over every
    vocabulary word except ``</s>`` (which never precedes a word) and fill the context to
    order - 1 words.
    """

    max_log10prob: tuple[np.ndarray, ...]
    max_log10backoff: tuple[np.ndarray, ...]


class QueryTables(NamedTuple):
    """An LM's compiled tables in the argument order of the query kernels."""

    vocab_size: int
    hash_rows: np.ndarray
    hash_base: np.ndarray
    hash_cap: np.ndarray
    values: np.ndarray
    value_base: np.ndarray
    max_log10prob: np.ndarray
    max_log10backoff: np.ndarray


class NgramLM:
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

    # ------------------------------------------------------------------ construction

    @classmethod
    def from_ngrams(
        cls,
        vocabulary: Vocabulary,
        ngrams: Sequence[tuple[np.ndarray, np.ndarray, np.ndarray]],
        *,
        source: str | None = None,
        line_numbers: Sequence[np.ndarray] | None = None,
    ) -> "NgramLM":
        """Build a model from word-id rows.

        Parameters
        ----------
        vocabulary : Vocabulary
        ngrams : sequence of ``(rows, log10_probs, log10_backoffs)``
            ``ngrams[m]`` has ``rows`` of shape (n, m + 1); ``ngrams[0]`` must list every
            vocabulary word exactly once (any order).
        source, line_numbers : optional
            A file name and, per order, the line of each row, so that errors (a duplicate
            n-gram) name the file and line.

        N-grams whose prefix or suffix is missing get that prefix or suffix inserted with
        its back-off probability and a back-off weight of 1: scores change only by the
        float32 rounding of those values (about 1e-7), and
        lookups may stop at the first miss.
        """
        order = len(ngrams)
        vocab_size = len(vocabulary)

        def where(m: int, row: int) -> str:
            if source is None or line_numbers is None:
                return f"order {m + 1}, row {row}"
            return f"{source}:{int(line_numbers[m][row])}"

        unigram_rows, unigram_probs, unigram_backoffs = ngrams[0]
        unigram_ids = np.asarray(unigram_rows).reshape(-1)
        if len(unigram_ids) != vocab_size or not np.array_equal(np.sort(unigram_ids), np.arange(vocab_size)):
            seen = np.bincount(unigram_ids, minlength=vocab_size)
            duplicate = np.flatnonzero(seen > 1)
            if duplicate.size:
                row = int(np.flatnonzero(unigram_ids == duplicate[0])[1])
                raise FormatError(f"{where(0, row)}: duplicate unigram {vocabulary.words[duplicate[0]]!r}")
            raise FormatError("the unigram table must list every vocabulary word exactly once")
        log10_probs = [np.empty(vocab_size, np.float64)]
        log10_backoffs = [np.empty(vocab_size, np.float64)]
        log10_probs[0][unigram_ids] = unigram_probs
        log10_backoffs[0][unigram_ids] = unigram_backoffs

        rows = [unigram_ids.reshape(-1, 1).astype(np.int64)]
        for m in range(1, order):
            m_rows, m_probs, m_backoffs = ngrams[m]
            rows.append(np.asarray(m_rows, dtype=np.int64).reshape(-1, m + 1))
            log10_probs.append(np.asarray(m_probs, dtype=np.float64))
            log10_backoffs.append(np.asarray(m_backoffs, dtype=np.float64))
        closed = _keys_if_closed(rows, vocab_size)
        if closed is not None:
            # The common case (files from estimators): nothing to insert, keys found by
            # binary search instead of sorting every order's rows with their candidates.
            keys, permutations, hashes = closed
            return cls(vocabulary, keys, [log10_probs[0]] + [log10_probs[m][permutations[m]] for m in range(1, order)],
                       [log10_backoffs[0]] + [log10_backoffs[m][permutations[m]] for m in range(1, order)],
                       hashes=hashes)
        inserted = [np.zeros(len(r), dtype=bool) for r in rows]

        # Close under prefixes and suffixes, highest order first so that inserted rows
        # get their own prefixes and suffixes checked one order down.
        for m in range(order - 1, 0, -1):
            candidates = np.concatenate([rows[m][:, :-1], rows[m][:, 1:]])
            candidates = _unique_rows(candidates)
            if m == 1:
                continue  # unigrams are the whole vocabulary
            present = _row_set_contains(rows[m - 1], candidates)
            missing = candidates[~present]
            if len(missing):
                rows[m - 1] = np.concatenate([rows[m - 1], missing])
                log10_probs[m - 1] = np.concatenate([log10_probs[m - 1], np.full(len(missing), np.nan)])
                log10_backoffs[m - 1] = np.concatenate([log10_backoffs[m - 1], np.zeros(len(missing))])
                inserted[m - 1] = np.concatenate([inserted[m - 1], np.ones(len(missing), dtype=bool)])

        keys = [np.arange(vocab_size, dtype=np.int64)]
        sorted_probs = [log10_probs[0]]
        sorted_backoffs = [log10_backoffs[0]]
        for m in range(1, order):
            prefix_rows = _rows_to_indices(rows[m][:, :-1], keys, vocab_size)
            m_keys = prefix_rows * vocab_size + rows[m][:, -1]
            permutation = np.argsort(m_keys, kind="stable")
            m_keys = m_keys[permutation]
            duplicate = np.flatnonzero(m_keys[1:] == m_keys[:-1])
            if duplicate.size:
                original = permutation[duplicate[0] + 1]
                words = " ".join(vocabulary.decode(rows[m][original]))
                raise FormatError(f"{where(m, int(original))}: duplicate {m + 1}-gram {words!r}")
            keys.append(m_keys)
            probs = log10_probs[m][permutation]
            backoffs = log10_backoffs[m][permutation]
            filled = inserted[m][permutation]
            if filled.any():
                # p(x | h) of an inserted h x is what back-off gave before insertion:
                # bow(h) + log10 p(x | h minus its first word).
                lower = NgramLM(vocabulary, keys[:m], sorted_probs, sorted_backoffs)
                for index in np.flatnonzero(filled):
                    ngram = rows[m][permutation[index]]
                    context_row = lower._row_of(ngram[:-1])
                    backoff = float(lower._values[lower._value_base[m - 1] + context_row, 1]) if context_row >= 0 else 0.0
                    probs[index] = backoff + lower.log10prob(ngram[1:-1], int(ngram[-1]))
            sorted_probs.append(probs)
            sorted_backoffs.append(backoffs)
        return cls(vocabulary, keys, sorted_probs, sorted_backoffs)

    # ------------------------------------------------------------------ inspection

    @property
    def ngram_counts(self) -> tuple[int, ...]:
        """Number of stored n-grams of each order, unigrams first."""
        return tuple(len(k) for k in self._keys)

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
        try:
            log10prob, length = _kernels().backoff_log10prob(
                context, self._check_word(word), self.vocab_size, self._hash_rows, self._hash_base,
                self._hash_cap, self._values, self._value_base,
            )
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
        # A few tokens score faster in Python than Numba loads; the results are identical.
        small = n_out <= _PYTHON_SCORING_LIMIT and "varorder.lm._kernels" not in sys.modules
        score_flat = score_flat_python if small else _kernels().score_flat
        score_flat(
            ids, offsets, bos, eos, self.vocabulary.bos_id, self.vocabulary.eos_id, self.order, self.vocab_size,
            self._hash_rows, self._hash_values, self._hash_base, self._hash_cap, self._values, out_log10prob, out_length,
            out_sentence,
        )
        return out_log10prob, out_length, out_sentence

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

    def minimal_state(self, context: Sequence[int]) -> tuple[int, ...]:
        """The shortest suffix of ``context`` that determines every future score.

        That is the longest suffix s (at most order - 1 words) that is stored and either
        extends to a longer stored n-gram or has a back-off weight other than 1; the words
        before it can change no later probability (KenLM's right-state minimization,
        which the q-automaton uses to merge states). An entry that the reader inserted to
        close the tables carries its back-off value and still counts as an extension, so
        on such files a state can keep a word that changes nothing (as KenLM's does).
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
                return tuple(int(w) for w in suffix)
        return ()

    # ------------------------------------------------------------------ MAX-ARPA

    def max_backoff(self) -> MaxBackoffTable:
        """The MAX-ARPA columns (computed once, then cached)."""
        if self._max_backoff is None:
            from varorder.lm.maxarpa import compute_max_backoff

            self._ensure_keys()
            max_prob, max_backoff = compute_max_backoff(self)
            self._max_backoff = MaxBackoffTable(max_prob, max_backoff)
        return self._max_backoff

    def set_max_backoff(self, table: MaxBackoffTable) -> None:
        """Attach MAX-ARPA columns read from a file (shapes are checked)."""
        for m in range(self.order):
            n = len(self._keys[m])
            if len(table.max_log10prob[m]) != n or len(table.max_log10backoff[m]) != n:
                raise ParameterError(f"order {m + 1}: MAX-ARPA columns have the wrong length", name='table', value=table)
        self._max_backoff = table

    def max_log10prob(self, context: Sequence[int], word: int) -> float:
        """log10 of w(word | context) = max over left extensions e of p(word | e context)
        (Carter et al. 2012, eq. 2, computed by eq. 8), for any context, stored or not.

        Extensions fill the context up to order - 1 words with any word but ``</s>``.
        """
        context = self._context_array(context)
        word = self._check_word(word)
        table = self.max_backoff()
        ngram_row = self._row_of(np.append(context, word))
        if ngram_row >= 0:
            return float(table.max_log10prob[len(context)][ngram_row])
        log10prob = self.lookup(context, word)[0]
        context_row = self._row_of(context)
        if context_row < 0:
            # No stored left extension of an absent context: every one backs off to it.
            return log10prob
        return float(table.max_log10backoff[len(context) - 1][context_row]) + log10prob

    def max_logprob(self, context: Sequence[int], word: int) -> float:
        """Natural-log version of :meth:`max_log10prob`."""
        return self.max_log10prob(context, word) * LN10

    # ------------------------------------------------------------------ batched queries

    def _flat_queries(self, contexts, words) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(flat context ids, offsets, words) of a batch, contexts cut to order - 1 words."""
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
        M (context, word) queries in one compiled call."""
        flat, offsets, words = self._flat_queries(contexts, words)
        out = np.empty(len(words))
        lengths = np.empty(len(words), dtype=np.int64)
        try:
            _kernels().batched_lookup(flat, offsets, words, self.vocab_size, self._hash_rows, self._hash_base,
                                      self._hash_cap, self._values, self._value_base, out, lengths)
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
        try:
            _kernels().grid_lookup(flat, offsets, words, self.vocab_size, self._hash_rows, self._hash_base,
                                   self._hash_cap, self._values, self._value_base, out, lengths)
        except ValueError as error:
            raise self._corrupt(error) from None
        return out, lengths

    def query_tables(self) -> "QueryTables":
        """The compiled lookup tables, for Numba code that queries the LM in its own loops
        (:func:`varorder.lm._kernels.backoff_log10prob` and
        :func:`~varorder.lm._kernels.max_backoff_log10prob` take them in this order)."""
        table = self.max_backoff()
        if getattr(self, "_max_flat_of", None) is not table:
            # One flat column per MAX-ARPA field, addressed like ``_values`` by order base.
            self._max_flat = (np.concatenate(table.max_log10prob).astype(np.float64),
                              np.concatenate(table.max_log10backoff).astype(np.float64))
            self._max_flat_of = table
        return QueryTables(self.vocab_size, self._hash_rows, self._hash_base, self._hash_cap, self._values,
                           self._value_base, self._max_flat[0], self._max_flat[1])

    def max_log10probs(self, contexts: Sequence[Sequence[int]], words: Sequence[int]) -> np.ndarray:
        """Batched :meth:`max_log10prob` (M,) for M (context, word) queries in one compiled
        call (the same eq. 8 case analysis, per query)."""
        flat, offsets, words = self._flat_queries(contexts, words)
        out = np.empty(len(words))
        try:
            _kernels().batched_max_log10prob(flat, offsets, words, *self.query_tables(), out)
        except ValueError as error:
            raise self._corrupt(error) from None
        return out

    def max_logprobs(self, contexts: Sequence[Sequence[int]], words: Sequence[int]) -> np.ndarray:
        """Natural-log version of :meth:`max_log10probs`."""
        return self.max_log10probs(contexts, words) * LN10


def _lexicographic_groups(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sort the rows of a 2-D int array lexicographically; return the order and, for each
    sorted position, whether it starts a new distinct row. (``np.unique(axis=0)`` sorts
    opaque byte strings and is many times slower on millions of rows.)"""
    order = np.lexsort(rows.T[::-1])
    ordered = rows[order]
    starts = np.ones(len(rows), dtype=bool)
    if len(rows) > 1:
        starts[1:] = np.any(ordered[1:] != ordered[:-1], axis=1)
    return order, starts


def _unique_rows(rows: np.ndarray) -> np.ndarray:
    order, starts = _lexicographic_groups(rows)
    return rows[order[starts]]


def _row_set_contains(table_rows: np.ndarray, queries: np.ndarray) -> np.ndarray:
    """For each row of ``queries``, whether it occurs among ``table_rows`` (same width)."""
    if len(table_rows) == 0 or len(queries) == 0:
        return np.zeros(len(queries), dtype=bool)
    combined = np.concatenate([table_rows, queries])
    order, starts = _lexicographic_groups(combined)
    group = np.cumsum(starts) - 1
    from_table = order < len(table_rows)
    group_has_table_row = np.zeros(group[-1] + 1, dtype=bool)
    group_has_table_row[group[from_table]] = True
    contains = np.empty(len(combined), dtype=bool)
    contains[order] = group_has_table_row[group]
    return contains[len(table_rows) :]


def _rows_to_indices(rows: np.ndarray, keys: Sequence[np.ndarray], vocab_size: int) -> np.ndarray:
    """Row indices of word-id rows (all of one order, present in ``keys``), by walking
    prefixes through the sorted key arrays."""
    index = rows[:, 0].astype(np.int64)
    for position in range(1, rows.shape[1]):
        wanted = index * vocab_size + rows[:, position]
        index = np.searchsorted(keys[position], wanted)
    return index


def key_tables_problem(keys: Sequence[np.ndarray], vocab_size: int) -> str | None:
    """What is wrong with per-order packed key arrays (``keys[0]`` the unigram ids), or
    None: each order's keys must increase strictly and name prefix rows of the order below."""
    for m in range(1, len(keys)):
        k = keys[m]
        if len(k) and (k[0] < 0 or k[-1] >= len(keys[m - 1]) * vocab_size or bool(np.any(k[1:] <= k[:-1]))):
            return f"the {m + 1}-gram keys are not strictly increasing packed keys"
    return None


def _python_find_slot(hash_rows, base: int, capacity: int, key: int) -> int:
    """:func:`varorder.lm._kernels.find_slot` in Python (same hash, same probing)."""
    slot = ((((key * _GOLDEN) & _MASK64) >> 32) * capacity) >> 32
    for _ in range(capacity):
        stored = int(hash_rows[base + slot, 0])
        if stored == key:
            return base + slot
        if stored == -1:
            return -1
        slot += 1
        if slot == capacity:
            slot = 0
    return -1


def score_flat_python(ids, offsets, add_bos, add_eos, bos_id, eos_id, order, vocab_size,
                      hash_rows, hash_values, hash_base, hash_cap, values, out_log10prob, out_length,
                      out_sentence) -> None:
    """:func:`varorder.lm._kernels.score_flat` in Python, one sentence at a time, for inputs
    too small to repay loading Numba; float32 values are summed in float64 in the same
    order, so the scores are bit-identical."""
    cursor = 0
    for sentence in range(len(offsets) - 1):
        total = 0.0
        begin, end = int(offsets[sentence]), int(offsets[sentence + 1])
        previous_row: list[int] = []
        previous_backoff: list[float] = []
        if add_bos and order > 1:
            previous_row, previous_backoff = [bos_id], [float(values[bos_id, 1])]
        n_predicted = end - begin + (1 if add_eos else 0)
        for position in range(n_predicted):
            word = int(ids[begin + position]) if begin + position < end else eos_id
            current_row, current_backoff = [word], [float(values[word, 1])]
            log10prob = float(values[word, 0])
            for length in range(2, min(order, len(previous_row) + 1) + 1):
                slot = _python_find_slot(hash_rows, int(hash_base[length - 2]), int(hash_cap[length - 2]),
                                         previous_row[length - 2] * vocab_size + word)
                if slot < 0:
                    break
                current_row.append(int(hash_rows[slot, 1]))
                current_backoff.append(float(hash_values[slot, 5]))
                log10prob = float(hash_values[slot, 4])
            for context_length in range(len(current_row), len(previous_row) + 1):
                log10prob += previous_backoff[context_length - 1]
            out_log10prob[cursor] = log10prob
            out_length[cursor] = len(current_row)
            total += log10prob
            cursor += 1
            keep = min(len(current_row), order - 1)
            previous_row, previous_backoff = current_row[:keep], current_backoff[:keep]
        out_sentence[sentence] = total


def _find_rows(rows: np.ndarray, keys: Sequence[np.ndarray], vocab_size: int, hashes=None) -> np.ndarray:
    """Row indices of word-id rows in the sorted ``keys`` tables, -1 where absent; by
    hash lookups when ``hashes[m]`` (the :func:`build_hash` table of ``keys[m]``) is
    given, else by binary search."""
    index = rows[:, 0].astype(np.int64)
    for position in range(1, rows.shape[1]):
        table = keys[position]
        if len(table) == 0:
            return np.full(len(rows), -1, dtype=np.int64)
        wanted = index * vocab_size + rows[:, position]  # negative once absent: never found
        if hashes is not None:
            _kernels().find_many(hashes[position], len(hashes[position]), wanted, index)
            continue
        found_at = np.minimum(np.searchsorted(table, wanted), len(table) - 1)
        index = np.where(table[found_at] == wanted, found_at, -1)
    return index


def _hash_capacity(n_keys: int) -> int:
    return max(8, int(n_keys / _LOAD_FACTOR) + 1)


def _keys_if_closed(rows: Sequence[np.ndarray], vocab_size: int):
    """``(sorted keys, sorting permutation, hash table)`` per order when every n-gram's
    prefix and suffix are themselves listed; None otherwise (the caller inserts them).
    Each order's hash is built as soon as its keys are sorted and serves the lookups of
    the next order's prefixes and suffixes (and then the model itself)."""
    keys = [np.arange(vocab_size, dtype=np.int64)]
    permutations: list[np.ndarray | None] = [None]
    hashes: list[np.ndarray | None] = [None]
    # Every order's table in one array, laid out as NgramLM keeps them (no copy later).
    capacities = [_hash_capacity(len(r)) for r in rows[1:]]
    hash_base = np.concatenate([[0], np.cumsum(capacities)]).astype(np.int64)
    all_hashes = np.empty((int(hash_base[-1]), 3), dtype=np.int64)
    for m in range(1, len(rows)):
        prefix = _find_rows(rows[m][:, :-1], keys, vocab_size, hashes)
        if m > 1 and (prefix < 0).any():
            return None
        if m > 1 and (_find_rows(rows[m][:, 1:], keys, vocab_size, hashes) < 0).any():
            return None
        m_keys = prefix * vocab_size + rows[m][:, -1]
        permutation = np.argsort(m_keys, kind="stable")
        keys.append(m_keys[permutation])
        permutations.append(permutation)
        if len(keys[m]) > 1 and np.any(keys[m][1:] == keys[m][:-1]):
            return None  # duplicates: the general path reports them with their lines
        table = all_hashes[hash_base[m - 1]:hash_base[m]]
        _kernels().build_hash_into(keys[m], table)
        hashes.append(table)
    return keys, permutations, hashes


def use_compiled_scoring() -> None:
    """Load the compiled scoring kernels now (~0.3 s once per process): every later
    :meth:`NgramLM.score_sentences` call uses them, however small its input. Short runs skip this
    and score small inputs in Python, sparing Numba's start; a long stream pays it once."""
    import varorder.lm._kernels  # noqa: F401  (NgramLM checks whether they are loaded)

