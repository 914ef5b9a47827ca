"""Counting and estimation of interpolated n-gram language models.

Every estimator here produces an *interpolated* model, which ARPA's back-off form stores
exactly (Chen & Goodman 1999, §2.8): for an n-gram h w of order m,

    p(w | h) = num(h w) / den(h) + gamma(h) * p(w | h'),      h' = h minus its first word,

with the unigram level interpolated with the uniform distribution over every word but
``<s>`` (which is never predicted). The stored log10 probability of h w is the whole sum;
the back-off weight of h is gamma(h), so unseen words get gamma(h) p(w | h') as back-off
gives them, and every conditional distribution sums to one.

* :class:`ModifiedKneserNey` — Chen & Goodman's interpolated modified Kneser–Ney as
  KenLM's ``lmplz`` estimates it: raw counts at the highest order, continuation counts
  N1+(. g) below it (raw counts for n-grams starting with ``<s>``), three discounts per
  order from the counts-of-counts n1..n4.
* :class:`AbsoluteDiscounting` — one discount D for every order on raw counts, and an
  additive term alpha on the unigram counts (the decipherment setting: D = 0.25,
  alpha = 0.01).
* :class:`AdditiveSmoothing` — alpha pseudo-counts for each word in every context; at the
  unigram level that is Laplace smoothing, above it the pseudo-counts are spread by the
  next-lower-order distribution (a Dirichlet prior centred on it).

Counting packs each n-gram as ``prefix_row * V + word`` (see :mod:`varorder.lm._kernels`),
one ``np.unique`` per order over the whole corpus, so the count tables are already the
sorted key arrays the model stores.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from varorder.base import ParamsMixin, check_int, check_real
from varorder.errors import ParameterError
from varorder.lm.corpus import PathLike, Vocabulary, read_corpus
from varorder.lm.model import NgramLM

MAX_ORDER = 10

# KenLM's --discount_fallback defaults, used when an order's counts-of-counts cannot give
# valid modified Kneser-Ney discounts (tiny or artificial corpora).
FALLBACK_DISCOUNTS = (0.5, 1.0, 1.5)


@dataclass
class NgramCounts:
    """Raw n-gram counts of a corpus, one sorted table per order.

    ``keys[m]`` are the packed keys of order m + 1 (``keys[0]`` is every word id),
    ``counts[m]`` their raw counts, ``suffix_rows[m]`` (m >= 1) the row one order down of
    each n-gram's suffix (its last m words). ``<s>`` is counted as a unigram once per
    sentence, since it is every sentence's first context.
    """

    vocabulary: Vocabulary
    keys: list[np.ndarray]
    counts: list[np.ndarray]
    suffix_rows: list[np.ndarray | None]
    n_sentences: int

    @property
    def order(self) -> int:
        return len(self.keys)

    def merge(self, *others: "NgramCounts") -> "NgramCounts":
        """The counts of the concatenated corpora: this one's and ``others``' (shards counted
        apart, e.g. on different workers), equal — tables, row order, suffix rows and integer
        widths — to one :func:`count_ngrams` pass over the whole corpus. Every part must use the
        same vocabulary (word for word, in id order) and the same order."""
        return merge_counts([self, *others])

    def first_words(self) -> list[np.ndarray]:
        """Per order, the first word of every n-gram."""
        vocab_size = len(self.vocabulary)
        first = [np.arange(vocab_size, dtype=np.int64)]
        for m in range(1, self.order):
            first.append(first[-1][self.keys[m] // vocab_size])
        return first


def count_ngrams(ids: np.ndarray, lengths: np.ndarray, order: int, vocabulary: Vocabulary) -> NgramCounts:
    """Count every n-gram of orders 1 .. ``order`` in sentences padded with ``<s>``/``</s>``.

    ``ids`` concatenates the sentences (no markers) and ``lengths`` gives their lengths.
    """
    if not 1 <= order <= MAX_ORDER:
        raise ParameterError(f"order must be between 1 and {MAX_ORDER}, got {order}", name='order', value=order)
    vocab_size = len(vocabulary)
    lengths = np.asarray(lengths, dtype=np.int64)
    padded_lengths = lengths + 2
    total = int(padded_lengths.sum())
    starts = np.zeros(len(lengths), dtype=np.int64)
    np.cumsum(padded_lengths[:-1], out=starts[1:])
    position_in_sentence = np.arange(total, dtype=np.int64) - np.repeat(starts, padded_lengths)
    padded = np.empty(total, dtype=np.int64)
    padded[starts] = vocabulary.bos_id
    padded[starts + padded_lengths - 1] = vocabulary.eos_id
    inner = (position_in_sentence > 0) & (position_in_sentence < np.repeat(padded_lengths, padded_lengths) - 1)
    padded[inner] = ids

    # Counts and rows below 2^31 (every corpus of fewer tokens) are held as int32.
    narrow = np.int32 if total < 2**31 else np.int64
    keys = [np.arange(vocab_size, dtype=np.int64)]
    counts = [np.bincount(padded, minlength=vocab_size).astype(np.int64)]
    suffix_rows: list[np.ndarray | None] = [None]
    rows_ending_here = padded  # row of the (m-1)-gram ending at each position
    for m in range(2, order + 1):
        ends = np.flatnonzero(position_in_sentence >= m - 1)
        unique_keys, inverse, unique_counts = _unique_packed(rows_ending_here[ends - 1], padded[ends],
                                                             len(keys[-1]), vocab_size)
        suffix = np.empty(len(unique_keys), dtype=narrow)
        suffix[inverse] = rows_ending_here[ends]
        keys.append(unique_keys)
        counts.append(unique_counts.astype(narrow))
        suffix_rows.append(suffix)
        next_rows = np.full(total, -1, dtype=np.int64)
        next_rows[ends] = inverse
        rows_ending_here = next_rows
    return NgramCounts(vocabulary, keys, counts, suffix_rows, len(lengths))


def _unique_packed(prefix: np.ndarray, words: np.ndarray, n_prefixes: int, vocab_size: int):
    """``np.unique(prefix * V + words, return_inverse=True, return_counts=True)``, by a
    compiled radix sort (both digits are small ranges)."""
    from varorder.lm._count_kernels import unique_packed

    keys = np.empty(len(prefix), dtype=np.int64)
    counts = np.empty(len(prefix), dtype=np.int64)
    inverse = np.empty(len(prefix), dtype=np.int64)
    n = unique_packed(prefix, words, n_prefixes, vocab_size, keys, counts, inverse)
    return keys[:n].copy(), inverse, counts[:n]


def merge_counts(parts: Sequence[NgramCounts]) -> NgramCounts:
    """Add up the n-gram counts of corpus shards (see :meth:`NgramCounts.merge`).

    A key packs ``prefix_row * V + word``, where the prefix row indexes the table one order
    down, so the tables are merged order by order: each part's rows of order m - 1 are first
    mapped to their rows in the merged table, which re-packs its order-m keys in the merged
    numbering; one ``np.unique`` over the re-packed keys then sums the counts and gives every
    part's rows their merged positions for the next order.
    """
    parts = list(parts)
    if not parts:
        raise ParameterError("merge_counts needs at least one NgramCounts", name='parts', value=parts)
    first = parts[0]
    for k, part in enumerate(parts[1:], 1):
        if part.order != first.order:
            raise ParameterError(f"cannot merge counts of order {part.order} (part {k}) with order {first.order} (part 0)", name='parts', value=parts)
        if part.vocabulary.words != first.vocabulary.words:
            raise ParameterError(f"cannot merge counts over different vocabularies (part {k} differs from part 0); "
                                 "count every shard with the one vocabulary of the whole corpus", name='parts', value=parts)
    if len(parts) == 1:
        return first
    vocab_size = len(first.vocabulary)
    unigram_counts = np.sum([p.counts[0] for p in parts], axis=0, dtype=np.int64)
    # the one-pass width rule: int32 below 2^31 padded tokens, and the unigram counts sum to them
    narrow = np.int32 if int(unigram_counts.sum()) < 2**31 else np.int64
    keys = [np.arange(vocab_size, dtype=np.int64)]
    counts = [unigram_counts]
    suffix_rows: list[np.ndarray | None] = [None]
    row_maps = [np.arange(vocab_size, dtype=np.int64) for _ in parts]  # each part's rows -> merged rows
    for m in range(1, first.order):
        repacked = [row_maps[k][p.keys[m] // vocab_size] * vocab_size + p.keys[m] % vocab_size
                    for k, p in enumerate(parts)]
        merged_keys, inverse = np.unique(np.concatenate(repacked), return_inverse=True)
        merged_counts = np.zeros(len(merged_keys), dtype=np.int64)
        np.add.at(merged_counts, inverse, np.concatenate([p.counts[m] for p in parts]).astype(np.int64))
        suffix = np.empty(len(merged_keys), dtype=narrow)
        suffix[inverse] = np.concatenate([row_maps[k][p.suffix_rows[m]] for k, p in enumerate(parts)])
        bounds = np.cumsum([0] + [len(r) for r in repacked])
        row_maps = [inverse[bounds[k]:bounds[k + 1]].astype(np.int64) for k in range(len(parts))]
        keys.append(merged_keys)
        counts.append(merged_counts.astype(narrow))
        suffix_rows.append(suffix)
    return NgramCounts(first.vocabulary, keys, counts, suffix_rows, sum(p.n_sentences for p in parts))


class _InterpolatedEstimator(ParamsMixin):
    """Shared fitting: counting, the interpolation recursion, and the back-off form.

    Subclasses define :meth:`_terms`, which gives for one order the numerator of every
    n-gram and the denominator and interpolation weight of every context. Their parameters
    are keyword-only and checked when fitting starts (a ParameterError names the parameter and
    the value passed).
    """

    _requires_y = False  # fit takes the data alone (scikit-learn's target tag)

    order: int
    min_count: int

    def fit(self, paths: PathLike | Sequence[PathLike]) -> "_InterpolatedEstimator":
        """Estimate from text files (one sentence per line, ``.gz`` transparently)."""
        self._validate()
        vocabulary, ids, lengths = read_corpus(paths, min_count=self.min_count)
        return self.fit_ids(ids, lengths, vocabulary)

    def fit_sentences(self, sentences: Iterable[str | Sequence[str]]) -> "_InterpolatedEstimator":
        """Estimate from in-memory sentences (strings or token lists), with the same
        vocabulary rules as :meth:`fit`."""
        import tempfile

        # Reuse the file path so both entry points share one vocabulary builder.
        with tempfile.TemporaryDirectory() as folder:
            path = os.path.join(folder, "corpus.txt")
            with open(path, "w", encoding="utf-8", errors="surrogateescape") as handle:
                for sentence in sentences:
                    handle.write((sentence if isinstance(sentence, str) else " ".join(sentence)) + "\n")
            return self.fit(path)

    def fit_ids(self, ids: np.ndarray, lengths: np.ndarray, vocabulary: Vocabulary) -> "_InterpolatedEstimator":
        """Estimate from already-encoded sentences over ``vocabulary``."""
        self._validate()
        return self.fit_counts(count_ngrams(np.asarray(ids), lengths, self.order, vocabulary))

    def fit_counts(self, counts: NgramCounts) -> "_InterpolatedEstimator":
        """Estimate from n-gram counts made elsewhere (:func:`count_ngrams`, the on-disk
        counter :func:`varorder.lm.external.count_ngrams_on_disk` or the Dask-sharded one);
        ``counts.order`` must equal ``self.order``."""
        self._validate()
        if counts.order != self.order:
            raise ParameterError(f"the counts are of order {counts.order}, the estimator's order is {self.order}", name='counts', value=counts)
        self.model_ = self._estimate(counts)
        self.vocabulary_ = self.model_.vocabulary
        self.ngram_counts_ = self.model_.ngram_counts
        return self

    def _validate(self) -> None:
        check_int(self, "order", 1, MAX_ORDER)
        check_int(self, "min_count", 1)
        self._prune_thresholds()

    def _prune_thresholds(self) -> list[int]:
        """Per order (unigrams first), the raw count at or below which n-grams are pruned."""
        prune = getattr(self, "prune", None)
        if prune is None or len(prune) == 0:
            return [0] * self.order
        thresholds = [int(t) for t in prune]
        if thresholds[0] != 0 or any(t < 0 for t in thresholds) or any(b < a for a, b in zip(thresholds, thresholds[1:])):
            raise ParameterError(f"prune thresholds must start with 0 (unigrams are never pruned) and not decrease, got {list(prune)}", name='prune', value=self.prune)
        if len(thresholds) > self.order:
            raise ParameterError(f"{len(thresholds)} prune thresholds for an order-{self.order} model", name='prune', value=self.prune)
        return thresholds + [thresholds[-1]] * (self.order - len(thresholds))

    def _removed(self, counts: NgramCounts) -> list[np.ndarray | None]:
        """Per order, which n-grams pruning and the vocabulary limit remove (None: none).

        Pruning compares raw counts with non-decreasing thresholds, so the prefix and the
        suffix of a kept n-gram (seen at least as often, with a threshold no higher) are
        kept too and the tables stay closed without exceptions.
        """
        thresholds = self._prune_thresholds()
        removed: list[np.ndarray | None] = [None] * counts.order
        allowed = self._allowed_words(counts.vocabulary)
        if allowed is not None:
            if not allowed.all():
                removed[0] = ~allowed
                for m, first in enumerate(counts.first_words()[1:], start=1):
                    # An n-gram holds a disallowed word iff its first word is disallowed or
                    # its suffix (one order down) is removed.
                    suffix_removed = removed[m - 1][counts.suffix_rows[m]] if m > 1 \
                        else ~allowed[counts.keys[m] % len(counts.vocabulary)]
                    removed[m] = ~allowed[first] | suffix_removed
        for m in range(1, counts.order):
            if thresholds[m] > 0:
                low = counts.counts[m] <= thresholds[m]
                removed[m] = low if removed[m] is None else removed[m] | low
        return removed

    def _allowed_words(self, vocabulary: Vocabulary) -> np.ndarray | None:
        """The limited vocabulary as a mask over word ids (the markers and ``<unk>``
        always allowed), or None without a limit."""
        limit = getattr(self, "limit_vocab", None)
        if limit is None:
            return None
        allowed = np.zeros(len(vocabulary), dtype=bool)
        allowed[[vocabulary.index[w] for w in set(limit) if w in vocabulary.index]] = True
        allowed[[vocabulary.bos_id, vocabulary.eos_id, vocabulary.unk_id]] = True
        return allowed

    # Whether the estimate uses Kneser-Ney continuation counts below the highest order
    # (set by ModifiedKneserNey); the streaming estimator reads it.
    uses_continuation_counts = False

    def _choose_discounts(self, counts_of_counts: list[list[int]]) -> None:
        """Per order, from its counts-of-counts n1..n4 (only estimators with discounts)."""

    def _prepare(self, counts: NgramCounts) -> list[np.ndarray]:
        """The counts each order's estimate uses (raw by default)."""
        return counts.counts

    def _terms(self, m: int, order_counts: np.ndarray, contexts: np.ndarray, n_contexts: int, n_predictable: int):
        """``(numerators per n-gram, denominators per context, gamma per context)`` of order
        ``m``; ``n_predictable`` is the number of words that can be predicted (all but <s>)."""
        raise NotImplementedError

    def _order_probabilities(self, m: int, used_counts: np.ndarray, contexts: np.ndarray, n_contexts: int,
                             lower: np.ndarray, gone: np.ndarray | None, vocabulary: Vocabulary):
        """Order m's interpolated probabilities ``(of each n-gram, denominators and gamma of
        each context)``, from the counts the estimate uses, each n-gram's context index,
        the next-lower-order probability of its suffix, and which n-grams are removed
        (pruning, limited vocabulary). Every context's n-grams must be present together:
        the in-memory path passes a whole order, the streaming one
        (:mod:`varorder.lm.streaming`) a range of contexts, and gets the same numbers."""
        # Every word but <s> can be predicted.
        numerators, denominators, gamma = self._terms(m, used_counts, contexts, n_contexts, len(vocabulary) - 1)
        del used_counts
        if gone is not None and m > 1:
            # A removed n-gram's discounted mass moves to its context's back-off weight,
            # so every conditional distribution still sums to one.
            with np.errstate(divide="ignore", invalid="ignore"):
                freed = _group_sum(np.where(gone, numerators, 0.0), contexts, n_contexts) / denominators
            gamma = gamma + np.where(denominators > 0, freed, 0.0)
        with np.errstate(divide="ignore", invalid="ignore"):
            probabilities = np.where(denominators[contexts] > 0, numerators / denominators[contexts], 0.0)
        del numerators
        probabilities += gamma[contexts] * lower
        if gone is not None and m == 1:
            # Words outside the limited vocabulary are read as <unk>: it takes their mass.
            probabilities[vocabulary.unk_id] += probabilities[gone].sum()
        return probabilities, denominators, gamma

    def _estimate(self, counts: NgramCounts) -> NgramLM:
        vocabulary = counts.vocabulary
        vocab_size = len(vocabulary)
        prepared = self._prepare(counts)
        uniform = np.full(vocab_size, 1.0 / (vocab_size - 1))
        uniform[vocabulary.bos_id] = 0.0

        removed = self._removed(counts)
        # The model's (log10 p, log10 bow) table, filled order by order: an order's
        # probabilities are kept in float64 only until the order above has used them.
        value_base = np.concatenate([[0], np.cumsum([len(k) for k in counts.keys])]).astype(np.int64)
        values = np.empty((int(value_base[-1]), 2), dtype=np.float32)
        values[value_base[-2]:, 1] = 0.0  # the highest order has no back-off weights
        lower_probabilities = uniform
        for m in range(1, counts.order + 1):
            used_counts = prepared[m - 1].astype(np.float64)
            prepared[m - 1] = None  # not needed again: keep the peak down
            if m == 1:
                # <s> is a context only: it gets no probability mass.
                used_counts[vocabulary.bos_id] = 0.0
                contexts = np.zeros(vocab_size, dtype=np.int64)
                n_contexts = 1
                lower = uniform
            else:
                contexts = counts.keys[m - 1] // vocab_size
                n_contexts = len(counts.keys[m - 2])
                lower = lower_probabilities[counts.suffix_rows[m - 1]]
            gone = removed[m - 1]
            probabilities, denominators, gamma = self._order_probabilities(
                m, used_counts, contexts, n_contexts, lower, gone, vocabulary)
            del used_counts, lower
            if m > 1:
                # Contexts never followed by anything keep back-off weight 1.
                values[value_base[m - 2]:value_base[m - 1], 1] = backoff_log10(denominators, gamma)
                store_log10(values[value_base[m - 2]:value_base[m - 1], 0], lower_probabilities)
            lower_probabilities = probabilities
        store_log10(values[value_base[-2]:, 0], lower_probabilities)
        if all(r is None for r in removed):
            return NgramLM(vocabulary, counts.keys, None, None, values=values)
        columns = [values[value_base[m]:value_base[m + 1]].astype(np.float64) for m in range(counts.order)]
        return _without(vocabulary, counts.keys, [c[:, 0] for c in columns], [c[:, 1] for c in columns], removed)


def backoff_log10(denominators: np.ndarray, gamma: np.ndarray) -> np.ndarray:
    """log10 back-off weights of contexts; contexts never followed by anything keep 1."""
    with np.errstate(divide="ignore"):
        return np.log10(np.where(denominators > 0, gamma, 1.0))


def store_log10(out: np.ndarray, probabilities: np.ndarray) -> None:
    """``out[:] = log10 probabilities``, at most 0: rounding can push a certain event a
    hair above 1, which ARPA readers reject."""
    with np.errstate(divide="ignore"):
        np.log10(probabilities, out=probabilities)
    np.minimum(probabilities, 0.0, out=probabilities)
    out[:] = probabilities


def _without(vocabulary: Vocabulary, keys, log10_probs, log10_backoffs, removed) -> NgramLM:
    """The model with the ``removed`` rows dropped; ids and rows are renumbered in order,
    so the packed keys stay sorted."""
    vocab_size = len(vocabulary)
    kept = [np.ones(len(k), dtype=bool) if r is None else ~r for k, r in zip(keys, removed)]
    new_row = [np.cumsum(k) - 1 for k in kept]
    new_vocabulary = Vocabulary([w for w, keep in zip(vocabulary.words, kept[0]) if keep])
    new_keys = [np.arange(len(new_vocabulary), dtype=np.int64)]
    for m in range(1, len(keys)):
        k = keys[m][kept[m]]
        new_keys.append(new_row[m - 1][k // vocab_size] * len(new_vocabulary) + new_row[0][k % vocab_size])
    return NgramLM(new_vocabulary, new_keys, [p[k] for p, k in zip(log10_probs, kept)],
                   [b[k] for b, k in zip(log10_backoffs, kept)])


def _group_sum(values: np.ndarray, groups: np.ndarray, n_groups: int) -> np.ndarray:
    return np.bincount(groups, weights=values, minlength=n_groups)


class ModifiedKneserNey(_InterpolatedEstimator):
    """Interpolated modified Kneser–Ney (Chen & Goodman 1999), as KenLM's ``lmplz``.

    Parameters
    ----------
    order : int
        1 to 10.
    min_count : int
        Words seen fewer times become ``<unk>``.
    discount_fallback : tuple of three floats, or None
        (D1, D2, D3+) used for an order whose counts-of-counts n1..n4 give no valid
        discounts (some n_k is 0, or a discount falls outside (0, k)), which happens on
        tiny or artificial corpora; a warning names the order. KenLM's defaults. None
        refuses such corpora with a ValueError, as lmplz does without
        ``--discount_fallback`` (the command line's default).
    prune : sequence of int, optional
        Per-order raw-count thresholds, unigrams first (lmplz's ``--prune``): n-grams of
        order m seen at most ``prune[m-1]`` times are dropped after estimation and their
        discounted mass moves to the back-off weight of their context, so every
        distribution still sums to one. Must start with 0 and not decrease; the last
        value repeats for the remaining orders. Discounts come from the unpruned counts.
    limit_vocab : iterable of str, optional
        A closed vocabulary (lmplz's ``--limit_vocab_file``): the model is estimated on
        the whole corpus, then every n-gram holding a word outside this set (and
        ``<s>``, ``</s>``, ``<unk>``) is dropped like a pruned one, and those words'
        unigram mass goes to ``<unk>``, which stands for them from then on.

    Attributes
    ----------
    model_ : NgramLM
    vocabulary_ : Vocabulary
    ngram_counts_ : tuple of int
    discounts_ : list of (D1, D2, D3+) per order, unigrams first
    fallback_orders_ : list of int
        Orders (1-based) that used ``discount_fallback``.
    """

    uses_continuation_counts = True

    def __init__(self, *, order: int = 3, min_count: int = 1,
                 discount_fallback: tuple[float, float, float] | None = FALLBACK_DISCOUNTS,
                 prune: Sequence[int] | None = None, limit_vocab: Iterable[str] | None = None):
        self.order = order
        self.min_count = min_count
        self.discount_fallback = discount_fallback
        self.prune = prune
        self.limit_vocab = limit_vocab

    def _validate(self) -> None:
        super()._validate()
        if self.discount_fallback is None:
            return
        fallback = tuple(self.discount_fallback)
        if len(fallback) != 3 or not all(0 < d < k for k, d in enumerate(fallback, start=1)):
            raise ParameterError(f"discount_fallback must be three discounts with 0 < D_k < k, got {self.discount_fallback!r}", name='discount_fallback', value=self.discount_fallback)

    def _prepare(self, counts: NgramCounts) -> list[np.ndarray]:
        first_words = counts.first_words()
        adjusted = []
        bos = counts.vocabulary.bos_id
        for m in range(counts.order):
            if m == counts.order - 1:
                adjusted.append(counts.counts[m])
                continue
            continuation = np.bincount(counts.suffix_rows[m + 1], minlength=len(counts.keys[m])).astype(np.int64)
            # Nothing precedes <s>: n-grams starting with it keep their raw counts.
            starts_with_bos = first_words[m] == bos
            adjusted.append(np.where(starts_with_bos, counts.counts[m], continuation))
        self._choose_discounts([counts_of_counts(order_counts if m > 1 else np.delete(order_counts, bos))
                                for m, order_counts in enumerate(adjusted, start=1)])
        return adjusted

    def _choose_discounts(self, counts_of_counts: list[list[int]]) -> None:
        self.discounts_, self.fallback_orders_ = [], []
        for m, n in enumerate(counts_of_counts, start=1):
            discounts = _kneser_ney_discounts(n)
            if discounts is None and self.discount_fallback is None:
                raise ParameterError(
                    f"modified Kneser-Ney: order {m} counts-of-counts n1..n4 = {n} give no valid discounts "
                    f"(the corpus is too small or artificial); to use fixed discounts instead, pass "
                    f"discount_fallback (command line: --discount-fallback, default {FALLBACK_DISCOUNTS})", name='discount_fallback', value=self.discount_fallback
                )
            if discounts is None:
                discounts = tuple(float(d) for d in self.discount_fallback)
                self.fallback_orders_.append(m)
                warnings.warn(
                    f"modified Kneser-Ney: order {m} counts-of-counts n1..n4 = {n} give no valid "
                    f"discounts; using the fallback {discounts}",
                    RuntimeWarning,
                    stacklevel=5,
                )
            self.discounts_.append(discounts)

    def _terms(self, m, order_counts, contexts, n_contexts, n_predictable):
        d1, d2, d3 = self.discounts_[m - 1]
        discount = np.select([order_counts == 0, order_counts == 1, order_counts == 2], [0.0, d1, d2], d3)
        denominators = _group_sum(order_counts, contexts, n_contexts)
        with np.errstate(divide="ignore", invalid="ignore"):
            gamma = _group_sum(discount, contexts, n_contexts) / denominators
        return order_counts - discount, denominators, np.nan_to_num(gamma, nan=1.0)


def counts_of_counts(order_counts: np.ndarray) -> list[int]:
    """n1..n4: how many of ``order_counts`` equal 1, 2, 3, 4."""
    return [int(np.count_nonzero(order_counts == k)) for k in (1, 2, 3, 4)]


def _kneser_ney_discounts(n: list[int]) -> tuple[float, float, float] | None:
    """Chen & Goodman's estimates D_k = k - (k+1) Y n_{k+1} / n_k, Y = n1 / (n1 + 2 n2);
    None when some n_k is zero or a discount is outside (0, k)."""
    n1, n2, n3, n4 = n
    if min(n) == 0:
        return None
    y = n1 / (n1 + 2 * n2)
    discounts = (1 - 2 * y * n2 / n1, 2 - 3 * y * n3 / n2, 3 - 4 * y * n4 / n3)
    if not all(0 < d < k for k, d in enumerate(discounts, start=1)):
        return None
    return discounts


class AbsoluteDiscounting(_InterpolatedEstimator):
    """Interpolated absolute discounting with an additive term on the unigram counts.

    p(w | h) = max(c(h w) - D, 0) / c(h) + gamma(h) p(w | h'), where gamma(h) =
    sum_w min(c(h w), D) / c(h); the unigram level is
    (max(c(w) - D, 0) + alpha) / (N + alpha V') + gamma / V', V' = vocabulary size
    without ``<s>``.

    Parameters
    ----------
    order : int
    discount : float
        D >= 0 (0.25 in the decipherment setting).
    smoothing : float
        alpha >= 0 (0.01 in the decipherment setting); with D = alpha = 0 unseen words
        get probability 0.
    min_count : int
    """

    def __init__(self, *, order: int = 3, discount: float = 0.25, smoothing: float = 0.01, min_count: int = 1):
        self.order = order
        self.discount = discount
        self.smoothing = smoothing
        self.min_count = min_count

    def _validate(self) -> None:
        super()._validate()
        check_real(self, "discount", 0)
        check_real(self, "smoothing", 0)

    def _terms(self, m, order_counts, contexts, n_contexts, n_predictable):
        kept = np.maximum(order_counts - self.discount, 0.0)
        denominators = _group_sum(order_counts, contexts, n_contexts)
        freed = _group_sum(np.minimum(order_counts, self.discount), contexts, n_contexts)
        if m == 1:
            pseudo_counts = self.smoothing * n_predictable
            denominators = denominators + pseudo_counts
            freed = freed + pseudo_counts
            if denominators[0] == 0:
                raise ParameterError("absolute discounting with smoothing 0 needs a non-empty corpus")
        with np.errstate(divide="ignore", invalid="ignore"):
            gamma = np.nan_to_num(freed / denominators, nan=1.0)
        return kept, denominators, gamma


class AdditiveSmoothing(_InterpolatedEstimator):
    """Additive smoothing: p(w | h) = (c(h w) + alpha V' p(w | h')) / (c(h) + alpha V').

    At the unigram level p(w | h') is uniform, which is Laplace smoothing
    (c(w) + alpha) / (N + alpha V'); above it, alpha pseudo-counts per word are spread by
    the next-lower-order distribution, which ARPA's back-off form can store.

    Parameters
    ----------
    order : int
    alpha : float
        Pseudo-count per word, > 0 (1 is Laplace).
    min_count : int
    """

    def __init__(self, *, order: int = 3, alpha: float = 1.0, min_count: int = 1):
        self.order = order
        self.alpha = alpha
        self.min_count = min_count

    def _validate(self) -> None:
        super()._validate()
        check_real(self, "alpha", 0, exclusive_minimum=True)

    def _terms(self, m, order_counts, contexts, n_contexts, n_predictable):
        pseudo_counts = self.alpha * n_predictable
        denominators = _group_sum(order_counts, contexts, n_contexts) + pseudo_counts
        return order_counts, denominators, pseudo_counts / denominators


ESTIMATORS = {
    "kneser-ney": ModifiedKneserNey,
    "absolute": AbsoluteDiscounting,
    "additive": AdditiveSmoothing,
}
