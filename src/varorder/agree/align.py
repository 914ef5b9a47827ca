"""IBM Model 1 and the HMM alignment model, in either direction, as agreement submodels.

Direction ``"f|e"`` generates each French word f_j from one English word e_{a_j}
or from NULL (submodel p₁ of Liang, Klein & Jordan 2008, §5.2); ``"e|f"`` swaps
the roles (p₂). Call the conditioning side the *source* (S words) and the
generated side the *target* (T words).

* IBM Model 1 (Brown et al. 1993): p(t, a | s) = Π_j [1/(S+1)] τ(t_j | s_{a_j}),
  a_j ∈ {NULL, 1..S}. Posteriors factorize over target positions, so the E-step
  is a normalisation per target word (no dynamic programme).
* HMM (Vogel, Ney & Tillmann 1996, with the NULL states of Och & Ney 2003):
  hidden state = source position or "NULL after position i" (2S states);
  p(a_j = i' | a_{j−1} at position i) = (1 − p₀)·w(i' − i) / Σ_{i''} w(i'' − i) with
  w(d) = c(bucket d) / (number of positions i'' in that bucket from i),
  p(NULL_i | i) = p₀; jumps are bucketed to [−D, D]; the first word jumps from
  position −1. Emissions τ(t_j | s_i) and τ(t_j | NULL). The E-step is
  :func:`varorder.chain.marginals` on batches of sentences with one source
  length S, which share the (2S, 2S) transitions and the first-position
  potentials (the engine's ``start``).

Shared features (the agreement variables z) are the edges (English i, French j)
in the :mod:`varorder.agree.corpus` layout; b_m on an edge is log τ_m. NULL
emissions, the 1/(S+1) prior and jumps are private. M-steps are ratios of
expected counts; p₀ is fixed.
"""

from __future__ import annotations

import math
import threading
import weakref
from contextlib import contextmanager

import numba
import numpy as np

from varorder import chain
from varorder.engine.banded import banded_marginals, banded_viterbi
from varorder.engine.threads import map_in_order, parallel_kernel, sequence_threads, threads_for
from varorder.agree.corpus import BitextShard, PairIndex
from varorder.agree.product_em import Statistics, Submodel
from varorder.errors import ParameterError

__all__ = ["DIRECTIONS", "IBM1", "HMMAligner", "FLOOR"]

DIRECTIONS = ("f|e", "e|f")
FLOOR = 1e-12  # probability of word pairs never seen in training
_NO_PAIRS = np.zeros(0, dtype=np.int32)  # _ibm1_estep's potentials are per edge already
_NO_SCRATCH = np.zeros(0)  # _ibm1_estep_counts adds straight into its table
# floats in one batch's emissions + transitions, B·K·(L + K): 2 MB. The batch's arrays (emissions, node
# marginals, the engine's) are part of the E-step's peak; 8 MB batches held ~9 MB more at 100k pairs.
_CELL_BUDGET = 1 << 18
_MAX_BATCH = 2048


def _sides(shard: BitextShard, direction: str):
    if direction == "f|e":
        return shard.e_offsets, shard.f_ids, shard.f_offsets, False
    return shard.f_offsets, shard.e_ids, shard.e_offsets, True


@numba.njit(cache=True, inline="always")
def _edge(base, u, t, S, T, transposed):
    # English-major layout: f|e has source u = English, target t = French
    if transposed:
        return base + t * S + u
    return base + u * T + t


@numba.njit(cache=True)
def _null_emission(null_logp, w):
    if w < 0 or w >= null_logp.size:
        return math.log(1e-12)
    return null_logp[w]


@numba.njit(cache=True, inline="always")
def _ibm1_sentence(s, src_off, tgt_ids, tgt_off, edge_off, transposed, shared, pair_ids, lookup, floor_log, null_logp,
                   scale, mu, null_mu, add, row, per_sentence, mu_off):
    """One sentence pair of :func:`_ibm1_estep` (``row``: a buffer of at least S values); edge e's posterior
    goes to ``mu[e − mu_off]`` (``mu_off`` 0: a shard's array; the sentence's first edge: a buffer of its own)."""
    S = src_off[s + 1] - src_off[s]
    T = tgt_off[s + 1] - tgt_off[s]
    base = edge_off[s]
    prior = -math.log(S + 1.0)
    for t in range(T):
        w_null = scale * _null_emission(null_logp, tgt_ids[tgt_off[s] + t])
        m = w_null
        for u in range(S):
            e = _edge(base, u, t, S, T, transposed)
            if lookup:
                p = pair_ids[e]
                v = shared[p] if p >= 0 else floor_log
            else:
                v = shared[e]
            row[u] = v
            if v > m:
                m = v
        z = math.exp(w_null - m)
        for u in range(S):
            z += math.exp(row[u] - m)
        for u in range(S):
            e = _edge(base, u, t, S, T, transposed)
            if add:  # into another direction's posteriors (the agreement E-step's sum)
                mu[e - mu_off] += math.exp(row[u] - m) / z
            else:
                mu[e - mu_off] = math.exp(row[u] - m) / z
        null_mu[tgt_off[s] + t] = math.exp(w_null - m) / z
        per_sentence[s] += m + math.log(z) + scale * prior


@parallel_kernel(lambda src_off, *_: src_off.size - 1, cache=True, nogil=True)
def _ibm1_estep(src_off, tgt_ids, tgt_off, edge_off, transposed, shared, pair_ids, floor_log, null_logp, scale, mu,
                null_mu, add):
    """IBM 1's E-step on a shard: ``shared`` holds the edges' log-potentials, or (when ``pair_ids`` is not
    empty) a log table over word pairs read through the edges' pair ids (``floor_log`` for −1), so that
    an E-step on a direction's own table needs no per-edge array of potentials. Each target word's
    potentials are read once into a row of S values."""
    lookup = pair_ids.size > 0
    n = src_off.size - 1
    per_sentence = np.zeros(n)
    longest = 0
    for s in range(n):
        longest = max(longest, src_off[s + 1] - src_off[s])
    n_chunks = min(n, 64)  # one row buffer per chunk of sentences, not one allocation per sentence
    for c in numba.prange(n_chunks):
        row = np.empty(longest)
        for s in range(c * n // n_chunks, (c + 1) * n // n_chunks):
            _ibm1_sentence(s, src_off, tgt_ids, tgt_off, edge_off, transposed, shared, pair_ids, lookup, floor_log,
                           null_logp, scale, mu, null_mu, add, row, per_sentence, 0)
    return per_sentence


@numba.njit(cache=True, nogil=True)
def _ibm1_estep_counts(src_off, tgt_ids, tgt_off, edge_off, transposed, log_table, pair_ids, floor_log, null_logp,
                       null_mu, table, scratch):
    """:func:`_ibm1_estep` on a direction's own log table read through the edges' pair ids, with its edge
    posteriors added to the count ``table`` as each sentence is done, in edge order — the sums of
    ``_add_shard_at(pair_ids, µ, table, scratch)`` after the E-step, bit for bit — so that no array of the
    shard's posteriors exists. With an empty ``scratch`` they go straight into ``table`` (a table of zeros:
    the shard's own counts); else into ``scratch`` (table-sized, zero), whose shard sums are then added to
    ``table`` once per pair and cleared (see :func:`_add_shard_at`). One thread (the additions' order is the
    edges'); the two directions of IBM 1 run it concurrently, each into its own table and scratch."""
    n = src_off.size - 1
    per_sentence = np.zeros(n)
    longest, most_edges = 0, 0
    for s in range(n):
        longest = max(longest, src_off[s + 1] - src_off[s])
        most_edges = max(most_edges, edge_off[s + 1] - edge_off[s])
    row = np.empty(longest)
    mu = np.empty(most_edges)
    into = scratch if scratch.size else table
    for s in range(n):
        base = edge_off[s]
        _ibm1_sentence(s, src_off, tgt_ids, tgt_off, edge_off, transposed, log_table, pair_ids, True, floor_log,
                       null_logp, 1.0, mu, null_mu, False, row, per_sentence, base)
        for e in range(base, edge_off[s + 1]):
            p = pair_ids[e]
            if p >= 0:
                into[p] += mu[e - base]
    if scratch.size:
        _flush_shard(pair_ids, table, scratch)
    return per_sentence


# a sentence pair has a few hundred edges: 256 of them count as one sequence for the thread policy
@parallel_kernel(lambda log_table, edge_pairs, *_: edge_pairs.size // 256, cache=True)
def _gather_log_table(log_table, edge_pairs, floor_log):
    out = np.empty(edge_pairs.size)
    for k in numba.prange(edge_pairs.size):
        p = edge_pairs[k]
        out[k] = log_table[p] if p >= 0 else floor_log
    return out


@numba.njit(cache=True)
def _conditional(rows, f_words, table, source_high):
    """table / (its sum over the pairs with the same source word), 0 where that sum is 0; the pairs
    are the rows of :class:`PairIndex` (English word e owns ranks rows[e] .. rows[e + 1] − 1, French
    word ``f_words[k]``), the source word the English (``source_high``) or French one. The same
    sums in the same order as np.bincount over the source ids, without the per-pair id and
    denominator arrays."""
    n_pairs = f_words.size
    if source_high:
        n_source = rows.size - 1
    else:
        n_source = 0
        for k in range(n_pairs):
            if f_words[k] + 1 > n_source:
                n_source = f_words[k] + 1
    totals = np.zeros(n_source)
    for e in range(rows.size - 1):
        for k in range(rows[e], rows[e + 1]):
            totals[e if source_high else f_words[k]] += table[k]
    out = np.zeros(n_pairs)
    for e in range(rows.size - 1):
        for k in range(rows[e], rows[e + 1]):
            total = totals[e if source_high else f_words[k]]
            if total > 0:
                out[k] = table[k] / total
    return out


@numba.njit(cache=True, nogil=True)
def _add_at(index, weights, out):
    """out[index[k]] += weights[k] where index[k] ≥ 0 (np.add.at without the masked copies)."""
    for k in range(index.size):
        p = index[k]
        if p >= 0:
            out[p] += weights[k]


@numba.njit(cache=True, nogil=True)
def _flush_shard(index, out, scratch):
    """out[p] += scratch[p] and scratch[p] = 0 for every pair p in ``index`` (once each: a pair is cleared when
    first met; a shard sum of exactly 0 adds nothing, as adding it would not)."""
    for k in range(index.size):
        p = index[k]
        if p >= 0:
            v = scratch[p]
            if v != 0.0:
                out[p] += v
                scratch[p] = 0.0


@numba.njit(cache=True, nogil=True)
def _add_shard_at(index, weights, out, scratch):
    """``out[p] += Σ_{k: index[k] = p} weights[k]`` with each pair's sum over the shard made first, in k order
    (in ``scratch``, a table-sized array of zeros, left zero), then added to ``out`` once: what adding the
    shard's own count table to ``out`` gives, bit for bit — which is how an executor adds its tasks' shards
    (:func:`varorder.parallel.reduce_in_order`), so a running total over shards equals theirs whatever the
    executor (``_add_at`` straight into a running total would associate the sums edge by edge instead)."""
    for k in range(index.size):
        p = index[k]
        if p >= 0:
            scratch[p] += weights[k]
    _flush_shard(index, out, scratch)


def _shard_scratch(workspace: dict, n: int) -> np.ndarray:
    """The workspace's table-sized array of zeros for :func:`_add_shard_at` (made on first use; kept zero)."""
    scratch = workspace.get("shard_scratch")
    if scratch is None or scratch.size != n:
        scratch = workspace["shard_scratch"] = np.zeros(n)
    return scratch


class IBM1(Submodel):
    """IBM Model 1 in one direction over a fixed :class:`PairIndex`.

    Learned state: ``table_`` (τ(target | source) per word pair), ``null_``
    (τ(target | NULL) per target word id).
    """

    has_private_features = True
    fresh_statistics = True
    adds_shared = True
    # both directions' independent E-steps on a shard read its edge pair ids: searched once for the two
    # (−2.2 CPU s of search at 100k pairs) at the price of both count totals at once (+16 MB there, less
    # the 5.5 MB of gathered potentials that own_expected_statistics does without)
    joint_independent_pass = True

    def __init__(self, direction: str, pairs: PairIndex, n_target_words: int):
        if direction not in DIRECTIONS:
            raise ParameterError(f"direction must be one of {DIRECTIONS}, got {direction!r}", name='direction', value=direction)
        self.direction = direction
        self.pairs = pairs
        self.n_target_words = int(n_target_words)

    @property
    def domain(self):
        return f"alignment {self.direction}"

    def initialize(self):
        """Uniform tables over co-occurring words (the usual IBM 1 start); returns self."""
        IBM1.maximize(self, {"table": np.ones(len(self.pairs)), "null": np.ones(self.n_target_words)})
        return self

    def copy_tables_from(self, other: "IBM1"):
        self.table_ = other.table_.copy()
        self.null_ = other.null_.copy()
        return self

    def __getstate__(self):
        # executors ship submodels to workers: the log table is rebuilt there, not sent
        state = dict(self.__dict__)
        state.pop("_log_table_cache", None)
        state.pop("_summed_log_cache", None)
        return state

    # -- shared part -------------------------------------------------------
    def _log_table(self) -> np.ndarray:
        """log τ per word pair, computed once per table (every shard of an E-step reuses it).

        M-steps and loading replace ``table_`` rather than writing into it, which is what
        the identity test relies on. Inside :meth:`consuming_tables` (serial EM) the log is taken
        in ``table_``'s own array and ``table_`` becomes None until the M-step makes the next one:
        an E-step needs only the log, and one table-sized array per direction is saved.
        """
        cache = getattr(self, "_log_table_cache", None)
        if cache is not None and (cache[0] is self.table_ or self.table_ is None):
            return cache[1]  # holding table_ keeps the identity test sound
        self._log_table_cache = None  # the old log table goes before the new one is made
        if self.table_ is None:
            raise RuntimeError(f"the {self.direction} table was consumed by a summed E-step; "
                               "its log exists only summed with the other directions' until the next M-step")
        if getattr(self, "_consume_table", False):
            log_table, self.table_ = self.table_, None
            np.maximum(log_table, FLOOR, out=log_table)
        else:
            log_table = np.maximum(self.table_, FLOOR)
        np.log(log_table, out=log_table)
        self._log_table_cache = (self.table_, log_table)
        return log_table

    @contextmanager
    def consuming_tables(self):
        """Let E-steps turn ``table_`` into its log in place (see :meth:`_log_table`); for serial EM,
        whose every E-step is followed by an M-step."""
        self._consume_table = True
        try:
            yield self
        finally:
            self._consume_table = False

    def keep_log_table_only(self):
        """Replace ``table_`` by its log rounded to float32 (``table_`` becomes None): what decoding reads,
        in half a float64 table (error ≤ 2⁻²⁴ relative on each log-potential); returns self."""
        if self.table_ is not None:
            self._log_table_cache = None  # a log made beside the table goes: the table's own array becomes it
            with self.consuming_tables():
                log_table = self._log_table()
            self._log_table_cache = None
            self._log_table_cache = (None, log_table.astype(np.float32))
        return self

    def shared_log_potentials(self, shard: BitextShard) -> np.ndarray:
        return _gather_log_table(self._log_table(), shard.edge_pairs, math.log(FLOOR))

    @staticmethod
    def summed_shared_log_potentials(submodels, shard: BitextShard) -> np.ndarray | None:
        """Σ_m log τ_m on the shard's edges from one summed table (see ``Submodel``), for the
        agreement E-step of IBM 1 / HMM directions over one pair index; None otherwise.

        The sum Σ_m log τ_m per word pair is made once per E-step and kept as float32 (half a
        float64 table: the agreement E-step's largest array after the count total). In serial EM
        (:meth:`consuming_tables`) each direction's log is taken in its table's array, added into
        the first, and dropped, so one float32 table is held over the E-step instead of a float64
        one per direction; executors sum copies of the logs into the same table. The per-edge
        values are the float64 sums of the directions' gathered logs rounded to float32 (error
        ≤ 2⁻²⁴ relative: ≤ 4·10⁻⁶ on a potential; pairs outside the index get the summed floor
        exactly). With the rounding the 100k-pair job's alignments and trial AER were unchanged.
        """
        first = submodels[0]
        if len(submodels) < 2 or not all(isinstance(m, IBM1) and m.pairs is first.pairs for m in submodels):
            return None
        cache = getattr(first, "_summed_log_cache", None)
        if cache is None or len(cache[0]) != len(submodels) or not all(
                a is b and getattr(b, "_summed_log_cache", None) is cache for a, b in zip(cache[0], submodels)):
            for m in submodels:
                m._summed_log_cache = None
            consuming = all(getattr(m, "_consume_table", False) for m in submodels)
            summed = first._log_table() if consuming else first._log_table().copy()
            for m in submodels[1:]:
                summed += m._log_table()
                if consuming:
                    m._log_table_cache = None  # its log now lives only in the sum
            if consuming:
                first._log_table_cache = None  # its array became the sum
            summed32 = summed.astype(np.float32)
            del summed
            cache = (tuple(submodels), summed32)
            for m in submodels:
                m._summed_log_cache = cache
        floor = math.log(FLOOR)
        summed_floor = floor
        for _ in submodels[1:]:
            summed_floor += floor
        return _gather_log_table(cache[1], shard.edge_pairs, summed_floor)

    def _null_logp(self):
        return np.log(np.maximum(self.null_, FLOOR))

    def _shared_out(self, shard, add_shared_to):
        """(array the edge posteriors go to, whether they are added into it): see ``Submodel.adds_shared``."""
        if add_shared_to is None:
            return np.zeros(shard.edge_offsets[-1]), False
        if add_shared_to.shape != (shard.edge_offsets[-1],) or add_shared_to.dtype != np.float64:
            raise ParameterError(f"add_shared_to must be a float64 array over the shard's {shard.edge_offsets[-1]} edges", name='add_shared_to', value=add_shared_to)
        return add_shared_to, True

    def expected_statistics(self, shard, shared_log_potentials, private_scale: float = 1.0,
                            add_shared_to: np.ndarray | None = None) -> Statistics:
        return self._estep(shard, np.ascontiguousarray(shared_log_potentials, dtype=np.float64), _NO_PAIRS,
                           private_scale, add_shared_to)

    def own_expected_statistics(self, shard) -> Statistics:
        """``expected_statistics(shard, shared_log_potentials(shard))`` (the independent E-step) reading the
        log table through the shard's pair ids: the same numbers without the shard's array of gathered
        potentials (8 bytes per edge) or the pass that fills it."""
        return self._estep(shard, self._log_table(), shard.edge_pairs, 1.0, None)

    def own_accumulated_counts(self, total, shard, workspace):
        """``accumulate_counts(total, shard, µ, own_estep(shard))`` without the shard's array µ (the E-step
        adds each sentence's posteriors to the count table as it goes: :func:`_ibm1_estep_counts`);
        returns (total, the E-step's log-normalizer). Same numbers, bit for bit; one thread."""
        src_off, tgt_ids, tgt_off, transposed = _sides(shard, self.direction)
        # the first shard's counts go straight into a new total; later ones are summed per shard first
        scratch = _NO_SCRATCH if total is None else _shard_scratch(workspace, len(self.pairs))
        if total is None:
            total = {"table": np.zeros(len(self.pairs)), "null": np.zeros(self.n_target_words)}
        null_mu = np.zeros(tgt_ids.size)
        per_sentence = _ibm1_estep_counts(src_off, tgt_ids, tgt_off, shard.edge_offsets, transposed, self._log_table(),
                                          shard.edge_pairs, math.log(FLOOR), self._null_logp(), null_mu,
                                          total["table"], scratch)
        for k, v in self._private_counts(shard, Statistics(shared=None, private={"null": null_mu})).items():
            total[k] += v
        return total, float(per_sentence.sum())

    def _estep(self, shard, shared, pair_ids, private_scale, add_shared_to) -> Statistics:
        src_off, tgt_ids, tgt_off, transposed = _sides(shard, self.direction)
        mu, add = self._shared_out(shard, add_shared_to)
        null_mu = np.zeros(tgt_ids.size)
        per_sentence = _ibm1_estep(src_off, tgt_ids, tgt_off, shard.edge_offsets, transposed, shared, pair_ids,
                                   math.log(FLOOR), self._null_logp(), float(private_scale), mu, null_mu, add)
        return Statistics(shared=None if add else mu, private={"null": null_mu, "per_sentence": per_sentence},
                          log_normalizer=float(per_sentence.sum()))

    def sentence_log_likelihoods(self, shard) -> np.ndarray:
        """log p(target sentence | source sentence) of every pair in the shard (this direction's model)."""
        return self.expected_statistics(shard, self.shared_log_potentials(shard)).private["per_sentence"]

    def counts(self, shard, shared_marginals, statistics) -> dict:
        table = np.zeros(len(self.pairs))
        _add_at(shard.edge_pairs, np.ascontiguousarray(shared_marginals, dtype=np.float64), table)
        return {"table": table, **self._private_counts(shard, statistics)}

    def _private_counts(self, shard, statistics) -> dict:
        _, tgt_ids, _, _ = _sides(shard, self.direction)
        known = (tgt_ids >= 0) & (tgt_ids < self.n_target_words)
        return {"null": np.bincount(tgt_ids[known], weights=statistics.private["null"][known],
                                    minlength=self.n_target_words)}

    def accumulate_counts(self, total, shard, shared_marginals, statistics, workspace) -> dict:
        """:meth:`counts` added to ``total`` without a table-sized array per shard: the first shard's edges go
        straight into a new total, a later shard's are summed per pair in the workspace's one scratch table
        and then added (:func:`_add_shard_at`), so the total is bit for bit the per-shard tables added in
        shard order — an executor's sum — and a serial E-step equals one on any executor (adding
        edge by edge into the running total would give ``align train --workers 1`` and ``--workers 2``
        tables that differ in the last bits).

        Directions handed the same µ over the same pairs (every agreement mode) have equal table
        counts: the later ones share the first one's total instead of summing the same numbers again.
        """
        n = len(self.pairs)
        private = self._private_counts(shard, statistics)
        last = workspace.get("pair_counts")  # (weak reference to the µ last added, its pairs, the total)
        same = (last is not None and last[0]() is shared_marginals and last[1] is self.pairs
                and isinstance(shared_marginals, np.ndarray))
        fresh = total is None and not same  # a new total of zeros: the shard's counts go straight in
        if total is None:
            table = last[2] if same else np.zeros(n)
            total = {"table": table, **{k: np.zeros_like(v, dtype=np.float64) for k, v in private.items()}}
        if not (same and last[2] is total["table"]):
            mu = np.ascontiguousarray(shared_marginals, dtype=np.float64)
            if fresh:
                _add_at(shard.edge_pairs, mu, total["table"])
            else:
                _add_shard_at(shard.edge_pairs, mu, total["table"], _shard_scratch(workspace, n))
            if isinstance(shared_marginals, np.ndarray):
                workspace["pair_counts"] = (weakref.ref(shared_marginals), self.pairs, total["table"])
        for k, v in private.items():
            total[k] += v
        return total

    def maximize(self, counts: dict) -> None:
        self._log_table_cache = self._summed_log_cache = None  # the logs of the table being replaced
        self.table_ = _conditional(self.pairs.rows(), self.pairs.f_words,
                                   np.ascontiguousarray(counts["table"], dtype=np.float64), self.direction == "f|e")
        ntot = counts["null"].sum()
        self.null_ = counts["null"] / ntot if ntot > 0 else np.full(self.n_target_words, 1.0 / self.n_target_words)

    # -- decoding ----------------------------------------------------------
    def posteriors(self, shard) -> np.ndarray:
        """Edge posteriors E(b_m, Z_m) in the English-major layout."""
        return self.expected_statistics(shard, self.shared_log_potentials(shard)).shared

    def viterbi(self, shard) -> list:
        """Best alignment per pair as a list of sets of (english i, french j)."""
        mu_stats = self.expected_statistics(shard, self.shared_log_potentials(shard))
        return _best_links(shard, self.direction, mu_stats.shared, mu_stats.private["null"])


def _best_links(shard, direction, mu, null_mu):
    """Argmax per target word of a factorized posterior (IBM 1)."""
    src_off, _, tgt_off, transposed = _sides(shard, direction)
    out = []
    for s in range(shard.n_sentences):
        S, T = src_off[s + 1] - src_off[s], tgt_off[s + 1] - tgt_off[s]
        links = set()
        if S and T:
            block = mu[shard.edge_offsets[s]:shard.edge_offsets[s + 1]].reshape(
                (T, S) if transposed else (S, T))
            if transposed:
                block = block.T  # (S, T) source-major
            nm = null_mu[tgt_off[s]:tgt_off[s + 1]]
            best = block.argmax(axis=0)
            for t in range(T):
                if block[best[t], t] > nm[t]:
                    links.add((t, int(best[t])) if transposed else (int(best[t]), t))
        out.append(links)
    return out


# ---------------------------------------------------------------------------
# HMM
# ---------------------------------------------------------------------------


@numba.njit(cache=True, inline="always")
def _bucket(d, D):
    if d < -D:
        d = -D
    elif d > D:
        d = D
    return d + D


@numba.njit(cache=True, nogil=True)
def _jump_potentials(S, log_jump, log_p0, log_stay, D, scale):
    """Transitions (2S, 2S) and first-position potentials (2S,) of every sentence with S source words.

    They depend only on S and the jump table, which is why a batch of one source
    length shares them (and the engine runs its blocked kernels on it).
    """
    K = 2 * S
    trans = np.full((K, K), -np.inf)
    start = np.full(K, -np.inf)
    width = np.zeros(2 * D + 1)
    for p in range(-1, S):
        # a clipped bucket spreads its mass over the positions it covers
        width[:] = 0.0
        for u in range(S):
            width[_bucket(u - p, D)] += 1.0
        norm = -np.inf
        for u in range(S):
            b_ = _bucket(u - p, D)
            v = log_jump[b_] - math.log(width[b_])
            norm = max(norm, v) + math.log1p(math.exp(-abs(norm - v))) if norm > -np.inf else v
        if p < 0:  # the first word jumps from position −1 (or goes to NULL, kept at position 0)
            for u in range(S):
                b_ = _bucket(u + 1, D)
                start[u] = scale * (log_stay + log_jump[b_] - math.log(width[b_]) - norm)
            start[S] = scale * log_p0
            continue
        for from_state in (p, S + p):
            for u in range(S):
                b_ = _bucket(u - p, D)
                trans[from_state, u] = scale * (log_stay + log_jump[b_] - math.log(width[b_]) - norm)
            trans[from_state, S + p] = scale * log_p0
    return trans, start


@parallel_kernel(lambda sents, *_: sents.size, cache=True, nogil=True)
def _fill_emissions(sents, src_off, tgt_ids, tgt_off, edge_off, transposed, shared, null_logp, scale, E, lengths):
    """Emissions (B, L, K = 2S) of a batch of sentences with S source words: state u < S emits
    through the edge (u, t), state S + u (NULL remembering u) through τ(t | NULL)."""
    B, L, K = E.shape
    S = K // 2
    for b in numba.prange(B):
        s = sents[b]
        T = tgt_off[s + 1] - tgt_off[s]
        lengths[b] = T
        base = edge_off[s]
        for t in range(T):
            w = scale * _null_emission(null_logp, tgt_ids[tgt_off[s] + t])
            for u in range(S):
                E[b, t, u] = shared[_edge(base, u, t, S, T, transposed)]
                E[b, t, S + u] = w
        for t in range(T, L):  # padding past the sentence: never read by the engine
            for k in range(K):
                E[b, t, k] = 0.0


@parallel_kernel(lambda sents, *_: sents.size, cache=True, nogil=True)
def _scatter_posteriors(sents, src_off, tgt_off, edge_off, transposed, node, mu, null_mu, add):
    # a batch's sentences are distinct: each b writes its own edges and target words
    B, L, K = node.shape
    S = K // 2
    for b in numba.prange(B):
        s = sents[b]
        T = tgt_off[s + 1] - tgt_off[s]
        base = edge_off[s]
        for t in range(T):
            z = 0.0
            for u in range(S):
                if add:  # into another direction's posteriors (the agreement E-step's sum)
                    mu[_edge(base, u, t, S, T, transposed)] += node[b, t, u]
                else:
                    mu[_edge(base, u, t, S, T, transposed)] = node[b, t, u]
                z += node[b, t, S + u]
            null_mu[tgt_off[s] + t] = z


@numba.njit(cache=True, nogil=True)
def _jump_moves(node, edge_sum):
    """A batch's expected first positions (S,) and transitions into word states (K, S), summed over its
    sentences: what :func:`_add_jump_moves` turns into jump counts."""
    B, L, K = node.shape
    S = K // 2
    first = np.zeros(S)
    moves = np.zeros((K, S))
    for b in range(B):
        for u in range(S):
            first[u] += node[b, 0, u]
        for i in range(K):
            for u in range(S):
                moves[i, u] += edge_sum[b, i, u]
    return first, moves


@numba.njit(cache=True)
def _add_jump_moves(first, moves, D, jumps):
    """Add a batch's :func:`_jump_moves` to ``jumps`` (first position from −1, then every transition)."""
    S = first.size
    for u in range(S):
        jumps[_bucket(u + 1, D)] += first[u]
    for p in range(S):
        for u in range(S):
            jumps[_bucket(u - p, D)] += moves[p, u] + moves[S + p, u]


@numba.njit(cache=True)
def _banded_jump_potentials(S, log_jump, log_p0, log_stay, D, scale, B):
    """:func:`_jump_potentials` with jumps longer than B words pruned (renormalised within the band), as
    band storage (2S, 2w + 1), w = 2B + 1, over the *interleaved* states: word u → 2u, NULL after u → 2u + 1.

    With B ≥ S every jump is inside the band and the potentials are :func:`_jump_potentials`' own.
    """
    w = 2 * B + 1
    K = 2 * S
    band = np.full((K, 2 * w + 1), -np.inf)
    start = np.full(K, -np.inf)
    width = np.zeros(2 * D + 1)
    for p in range(-1, S):
        lo, hi = max(0, p - B), min(S - 1, p + B)
        width[:] = 0.0
        for u in range(lo, hi + 1):
            width[_bucket(u - p, D)] += 1.0
        norm = -np.inf
        for u in range(lo, hi + 1):
            b_ = _bucket(u - p, D)
            v = log_jump[b_] - math.log(width[b_])
            norm = max(norm, v) + math.log1p(math.exp(-abs(norm - v))) if norm > -np.inf else v
        if p < 0:
            for u in range(lo, hi + 1):
                b_ = _bucket(u + 1, D)
                start[2 * u] = scale * (log_stay + log_jump[b_] - math.log(width[b_]) - norm)
            start[1] = scale * log_p0
            continue
        for i in (2 * p, 2 * p + 1):
            for u in range(lo, hi + 1):
                b_ = _bucket(u - p, D)
                band[i, 2 * u - i + w] = scale * (log_stay + log_jump[b_] - math.log(width[b_]) - norm)
            band[i, 2 * p + 1 - i + w] = scale * log_p0
    return band, start


@numba.njit(cache=True)
def _banded_jump_counts(node, edge_band, D, jumps):
    """:func:`_jump_moves` + :func:`_add_jump_moves` from interleaved node marginals and band-stored summed edge marginals."""
    B, L, K = node.shape
    width = edge_band.shape[2]
    w = width // 2
    for b in range(B):
        for u in range(K // 2):
            jumps[_bucket(u + 1, D)] += node[b, 0, 2 * u]
        for i in range(K):
            p = i // 2
            for d in range(width):
                j = i + d - w
                if 0 <= j < K and j % 2 == 0:
                    jumps[_bucket(j // 2 - p, D)] += edge_band[b, i, d]


def _interleaving(S):
    """State order of the banded chains: word u at 2u, NULL-after-u at 2u + 1 (from u and S + u)."""
    perm = np.empty(2 * S, dtype=np.int64)
    perm[0::2] = np.arange(S)
    perm[1::2] = S + np.arange(S)
    return perm


@numba.njit(cache=True)
def _batch_bounds(order, src_len, tgt_len, budget, max_batch):
    """Split ``order`` (sorted by source, then target length) into runs of one source length
    within the cell budget; returns the run boundaries."""
    bounds = np.empty(order.size + 1, dtype=np.int64)
    n_bounds = 0
    start = 0
    while start < order.size:
        bounds[n_bounds] = start
        n_bounds += 1
        S = src_len[order[start]]
        K = 2 * S
        end = start + 1
        while end < order.size and end - start < max_batch and src_len[order[end]] == S:
            # sorted by target length within a source length: the newcomer is the longest
            if (end - start + 1) * K * (tgt_len[order[end]] + K) > budget:
                break
            end += 1
        start = end
    bounds[n_bounds] = order.size
    return bounds[:n_bounds + 1]


def _batches(src_len, tgt_len):
    """Sentence batches of one source length and similar target lengths within the cell budget, in
    increasing source length.

    One source length per batch makes every sentence's transition matrix the same
    (it depends only on S and the jump table), so the engine runs its shared-
    transition kernels (several sequences per BLAS product).
    """
    order = np.lexsort((tgt_len, src_len))
    order = order[(src_len[order] > 0) & (tgt_len[order] > 0)]
    bounds = _batch_bounds(order, np.ascontiguousarray(src_len, dtype=np.int64),
                           np.ascontiguousarray(tgt_len, dtype=np.int64), _CELL_BUDGET, _MAX_BATCH)
    return [order[bounds[k]:bounds[k + 1]] for k in range(bounds.size - 1)]


class _BatchPlan:
    """A shard's arrays and one direction's parameters, as every chain batch of its E-step reads them."""

    def __init__(self, src_off, tgt_ids, tgt_off, transposed, edge_offsets, shared, null_logp, log_jump, log_p0,
                 log_stay, max_jump, scale, band, banded):
        self.banded = banded  # S -> whether sentences with S source words run on the banded engine
        self.src_off, self.tgt_ids, self.tgt_off, self.transposed = src_off, tgt_ids, tgt_off, transposed
        self.edge_offsets, self.shared, self.null_logp = edge_offsets, shared, null_logp
        self.log_jump, self.log_p0, self.log_stay = log_jump, log_p0, log_stay
        self.max_jump, self.scale, self.band = max_jump, scale, band
        self.src_len, self.tgt_len = np.diff(src_off), np.diff(tgt_off)

    def chain(self, sents, potentials: dict):
        """(emissions (B, L, 2S), transitions, start, lengths) of one batch; ``potentials`` keeps the last
        source length's jump potentials (one length at a time: batches come in increasing S)."""
        S = int(self.src_len[sents[0]])
        if S not in potentials:
            potentials.clear()
            if self.banded(S):  # band storage over interleaved states: see there
                potentials[S] = _banded_jump_potentials(S, self.log_jump, self.log_p0, self.log_stay, self.max_jump,
                                                        self.scale, self.band)
            else:
                potentials[S] = _jump_potentials(S, self.log_jump, self.log_p0, self.log_stay, self.max_jump,
                                                 self.scale)
        E = np.empty((sents.size, int(self.tgt_len[sents[-1]]), 2 * S))
        lengths = np.empty(sents.size, dtype=np.int64)
        with sequence_threads(sents.size):
            _fill_emissions(sents, self.src_off, self.tgt_ids, self.tgt_off, self.edge_offsets, self.transposed,
                            self.shared, self.null_logp, self.scale, E, lengths)
        return (E, *potentials[S], lengths)

    def posteriors(self, sents, potentials, mu, null_mu, add):
        """One batch of the full computation: its posteriors written to (or added into) ``mu`` and
        ``null_mu``; returns its (first positions, transitions) for :func:`_add_jump_moves` and Σ log Z."""
        E, trans, start, lengths = self.chain(sents, potentials)
        # expected transition counts summed over positions: the jump M-step needs no more
        node, edge_sum, logz = chain.marginals(E, trans, start=start, lengths=lengths, edges="sum",
                                               return_log_z=True)
        del E
        first, moves = _jump_moves(node, edge_sum)
        with sequence_threads(sents.size):
            _scatter_posteriors(sents, self.src_off, self.tgt_off, self.edge_offsets, self.transposed, node, mu,
                                null_mu, add)
        return first, moves, float(logz.sum())


def _map_batches(task, batches, *args):
    """``task(sents, potentials, *args)`` for every batch, results in batch order, on :func:`threads_for`
    worker threads (:func:`varorder.engine.threads.map_in_order`; the costliest batches — the last, the
    longest source sentences — handed out first). Each thread keeps its own jump potentials, for this call
    only (they depend on the E-step's parameters)."""
    workers = threads_for(sum(int(b.size) for b in batches)) if len(batches) > 1 else 1
    caches = {}

    def run(sents):
        return task(sents, caches.setdefault(threading.get_ident(), {}), *args)

    return map_in_order(run, batches, workers, costliest_first=True)


class HMMAligner(IBM1):
    """The HMM alignment model in one direction (see the module docstring).

    Parameters: ``null_prob`` p₀ (fixed), ``max_jump`` D, ``band`` B (None: no limit). A sentence
    with more than B source words runs on the banded engine (:mod:`varorder.engine.banded`) with
    jumps longer than B words pruned and the rest renormalised: O(T·S·B) instead of O(T·S²) per
    direction, so a 1,000-word pair takes seconds; with S ≤ B nothing is pruned and the result is
    the full computation's. Learned state adds ``jumps_`` (c over the 2D+1 buckets, d = −D..D).
    """

    # the HMM E-step is a chain per sentence, not IBM 1's normalisation (own_estep falls back to
    # expected_statistics); one direction at a time in independent EM, whose E-steps hold the job's peak
    own_expected_statistics = None
    own_accumulated_counts = None
    joint_independent_pass = False

    def __init__(self, direction: str, pairs: PairIndex, n_target_words: int, null_prob: float = 0.05,
                 max_jump: int = 7, band: int | None = None):
        super().__init__(direction, pairs, n_target_words)
        if not 0.0 < null_prob < 1.0:
            raise ParameterError(f"null_prob must be in (0, 1), got {null_prob}", name='null_prob', value=null_prob)
        if int(max_jump) < 1:
            raise ParameterError(f"max_jump must be >= 1, got {max_jump}", name='max_jump', value=max_jump)
        if band is not None and int(band) < 1:
            raise ParameterError(f"band must be a positive number of words or None, got {band}", name='band', value=band)
        self.null_prob = null_prob
        self.max_jump = int(max_jump)
        self.band = None if band is None else int(band)

    def _banded(self, S) -> bool:
        return self.band is not None and S > self.band

    def initialize(self):
        super().initialize()
        self.jumps_ = np.full(2 * self.max_jump + 1, 1.0 / (2 * self.max_jump + 1))
        return self

    def copy_tables_from(self, other: IBM1):
        super().copy_tables_from(other)
        if not hasattr(self, "jumps_"):
            self.jumps_ = np.full(2 * self.max_jump + 1, 1.0 / (2 * self.max_jump + 1))
        return self

    def _batch_plan(self, shard, shared, scale):
        """What every batch of a shard's chains reads (:class:`_BatchPlan`) and the batches (sentence ids
        of one source length S each, in increasing S: see :func:`_batches`)."""
        src_off, tgt_ids, tgt_off, transposed = _sides(shard, self.direction)
        plan = _BatchPlan(src_off, tgt_ids, tgt_off, transposed, shard.edge_offsets,
                          np.ascontiguousarray(shared, dtype=np.float64), self._null_logp(),
                          np.log(np.maximum(self.jumps_, FLOOR)), math.log(self.null_prob),
                          math.log1p(-self.null_prob), self.max_jump, float(scale), self.band, self._banded)
        return plan, _batches(np.diff(src_off), np.diff(tgt_off))

    def _chains(self, shard, shared, scale):
        """Yield (sentence ids, emissions (B, L, K), transitions (K, K), start (K,), lengths) per batch;
        a batch has one source length S (K = 2S), so transitions and start are shared."""
        plan, batches = self._batch_plan(shard, shared, scale)
        # batches come in increasing source length, so one length's potentials are held at a time (all of
        # a shard's lengths at once, (2S)² floats each, held ~10 MB at 100k pairs)
        potentials = {}
        for sents in batches:
            yield (sents, *plan.chain(sents, potentials))

    def expected_statistics(self, shard, shared_log_potentials, private_scale: float = 1.0,
                            add_shared_to: np.ndarray | None = None) -> Statistics:
        """The E-step on a shard. Batches of the full computation run on up to :func:`threads_for` worker
        threads, one batch per thread at a time (each batch's kernels on one thread): a shard's ~35
        batches per direction are coarse work units that keep two cores busy where the kernels' own
        parallel regions, ~1 ms each with serial Python between them, kept ~1.3 busy. Each batch
        writes its own sentences' posteriors; its jump counts and log-normalizer are added in batch
        order, so the numbers are the serial ones on any thread count."""
        src_off, tgt_ids, tgt_off, transposed = _sides(shard, self.direction)
        mu, add = self._shared_out(shard, add_shared_to)
        null_mu = np.zeros(tgt_ids.size)
        jumps = np.zeros(2 * self.max_jump + 1)
        total = 0.0
        plan, batches = self._batch_plan(shard, shared_log_potentials, private_scale)
        full = [sents for sents in batches if not self._banded(int(plan.src_len[sents[0]]))]
        for first, moves, logz in _map_batches(plan.posteriors, full, mu, null_mu, add):
            _add_jump_moves(first, moves, self.max_jump, jumps)
            total += logz
        potentials = {}
        for sents in batches[len(full):]:  # banded: the longest source sentences, after every full one
            E, trans, start, lengths = plan.chain(sents, potentials)
            S = E.shape[2] // 2
            perm = _interleaving(S)
            node_i, edge_band, logz = banded_marginals(E[:, :, perm], trans, start=start, lengths=lengths)
            _banded_jump_counts(node_i, edge_band, self.max_jump, jumps)
            node = np.empty_like(node_i)
            node[:, :, perm] = node_i
            total += float(logz.sum())
            with sequence_threads(sents.size):
                _scatter_posteriors(sents, src_off, tgt_off, shard.edge_offsets, transposed, node, mu, null_mu, add)
        # a target word facing an empty source sentence can only be NULL-generated
        empty = np.flatnonzero(np.diff(src_off) == 0)
        null_logp = self._null_logp()
        for s in empty:
            null_mu[tgt_off[s]:tgt_off[s + 1]] = 1.0
            words = tgt_ids[tgt_off[s]:tgt_off[s + 1]]
            known = (words >= 0) & (words < null_logp.size)
            total += private_scale * float(np.where(known, null_logp[np.where(known, words, 0)], math.log(FLOOR)).sum())
        return Statistics(shared=None if add else mu, private={"null": null_mu, "jumps": jumps},
                          log_normalizer=total)

    def _private_counts(self, shard, statistics) -> dict:
        return {**super()._private_counts(shard, statistics), "jumps": statistics.private["jumps"]}

    def maximize(self, counts: dict) -> None:
        super().maximize(counts)
        j = counts["jumps"]
        self.jumps_ = j / j.sum() if j.sum() > 0 else np.full(j.size, 1.0 / j.size)

    def sentence_log_likelihoods(self, shard) -> np.ndarray:
        """log p(target sentence | source sentence) of every pair in the shard (the chain's log-partition)."""
        src_off, tgt_ids, tgt_off, _ = _sides(shard, self.direction)
        out = np.zeros(shard.n_sentences)
        for sents, E, trans, start, lengths in self._chains(shard, self.shared_log_potentials(shard), 1.0):
            S = E.shape[2] // 2
            if self._banded(S):
                out[sents] = banded_marginals(E[:, :, _interleaving(S)], trans, start=start, lengths=lengths)[2]
            else:
                out[sents] = chain.log_partition(E, trans, start=start, lengths=lengths)
        null_logp = self._null_logp()
        for s in np.flatnonzero(np.diff(src_off) == 0):  # only NULL can generate these targets
            words = tgt_ids[tgt_off[s]:tgt_off[s + 1]]
            known = (words >= 0) & (words < null_logp.size)
            out[s] = float(np.where(known, null_logp[np.where(known, words, 0)], math.log(FLOOR)).sum())
        return out

    def viterbi(self, shard) -> list:
        src_off, _, tgt_off, transposed = _sides(shard, self.direction)
        out = [set() for _ in range(shard.n_sentences)]
        for sents, E, trans, start, lengths in self._chains(shard, self.shared_log_potentials(shard), 1.0):
            S = E.shape[2] // 2
            if self._banded(S):
                paths, _ = banded_viterbi(E[:, :, _interleaving(S)], trans, start=start, lengths=lengths)
                paths = np.where(paths < 0, -1, np.where(paths % 2 == 0, paths // 2, S + paths // 2))
            else:
                paths, _ = chain.viterbi(E, trans, start=start, lengths=lengths)
            for b, s in enumerate(sents):
                S = src_off[s + 1] - src_off[s]
                for t in range(lengths[b]):
                    u = int(paths[b, t])
                    if 0 <= u < S:
                        out[s].add((t, u) if transposed else (u, t))
        return out
