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
  :func:`varorder.chain.marginals` on per-sentence (B, K, K) transitions,
  sentences batched by length with padded states forbidden.

Shared features (the agreement variables z) are the edges (English i, French j)
in the :mod:`varorder.agree.corpus` layout; b_m on an edge is log τ_m. NULL
emissions, the 1/(S+1) prior and jumps are private. M-steps are ratios of
expected counts; p₀ is fixed.
"""

from __future__ import annotations

import math

import numba
import numpy as np

from varorder import chain
from varorder.agree.corpus import BitextShard, PairIndex
from varorder.agree.product_em import Statistics, Submodel

__all__ = ["DIRECTIONS", "IBM1", "HMMAligner", "FLOOR"]

DIRECTIONS = ("f|e", "e|f")
FLOOR = 1e-12  # probability of word pairs never seen in training
_CELL_BUDGET = 1 << 22  # floats in one batch's emissions + transitions, B·K·(L + K) (32 MB)
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


@numba.njit(cache=True)
def _ibm1_estep(src_off, tgt_ids, tgt_off, edge_off, transposed, shared, null_logp, scale, mu, null_mu):
    total = 0.0
    for s in range(src_off.size - 1):
        S = src_off[s + 1] - src_off[s]
        T = tgt_off[s + 1] - tgt_off[s]
        base = edge_off[s]
        prior = -math.log(S + 1.0)
        for t in range(T):
            w_null = scale * _null_emission(null_logp, tgt_ids[tgt_off[s] + t])
            m = w_null
            for u in range(S):
                v = shared[_edge(base, u, t, S, T, transposed)]
                if v > m:
                    m = v
            z = math.exp(w_null - m)
            for u in range(S):
                z += math.exp(shared[_edge(base, u, t, S, T, transposed)] - m)
            for u in range(S):
                e = _edge(base, u, t, S, T, transposed)
                mu[e] = math.exp(shared[e] - m) / z
            null_mu[tgt_off[s] + t] = math.exp(w_null - m) / z
            total += m + math.log(z) + scale * prior
    return total


class IBM1(Submodel):
    """IBM Model 1 in one direction over a fixed :class:`PairIndex`.

    Learned state: ``table_`` (τ(target | source) per word pair), ``null_``
    (τ(target | NULL) per target word id).
    """

    has_private_features = True

    def __init__(self, direction: str, pairs: PairIndex, n_target_words: int):
        if direction not in DIRECTIONS:
            raise ValueError(f"direction must be one of {DIRECTIONS}, got {direction!r}")
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

    # -- shared part -------------------------------------------------------
    def shared_log_potentials(self, shard: BitextShard) -> np.ndarray:
        logt = np.log(np.maximum(self.table_, FLOOR))
        pairs = shard.edge_pairs
        return np.where(pairs >= 0, logt[np.maximum(pairs, 0)], math.log(FLOOR))

    def _null_logp(self):
        return np.log(np.maximum(self.null_, FLOOR))

    def expected_statistics(self, shard, shared_log_potentials, private_scale: float = 1.0) -> Statistics:
        src_off, tgt_ids, tgt_off, transposed = _sides(shard, self.direction)
        mu = np.zeros(shard.edge_offsets[-1])
        null_mu = np.zeros(tgt_ids.size)
        total = _ibm1_estep(src_off, tgt_ids, tgt_off, shard.edge_offsets, transposed,
                            np.ascontiguousarray(shared_log_potentials, dtype=np.float64), self._null_logp(),
                            float(private_scale), mu, null_mu)
        return Statistics(shared=mu, private={"null": null_mu}, log_normalizer=float(total))

    def _source_of_pair(self):
        return self.pairs.e_ids if self.direction == "f|e" else self.pairs.f_ids

    def counts(self, shard, shared_marginals, statistics) -> dict:
        _, tgt_ids, _, _ = _sides(shard, self.direction)
        ok = shard.edge_pairs >= 0
        table = np.bincount(shard.edge_pairs[ok], weights=shared_marginals[ok], minlength=len(self.pairs))
        known = (tgt_ids >= 0) & (tgt_ids < self.n_target_words)
        null = np.bincount(tgt_ids[known], weights=statistics.private["null"][known], minlength=self.n_target_words)
        return {"table": table, "null": null}

    def maximize(self, counts: dict) -> None:
        table = counts["table"]
        src = self._source_of_pair()
        totals = np.bincount(src, weights=table, minlength=int(src.max()) + 1 if src.size else 0)
        denom = totals[src] if src.size else totals
        self.table_ = np.divide(table, denom, out=np.zeros_like(table), where=denom > 0)
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


@numba.njit(cache=True)
def _fill_batch(sents, src_off, tgt_ids, tgt_off, edge_off, transposed, shared, null_logp, scale,
                log_jump, log_p0, log_stay, D, E, Tr, lengths):
    """Emissions (B, L, K) and per-sentence transitions (B, K, K) of one batch."""
    B, L, K = E.shape
    for b in range(B):
        s = sents[b]
        S = src_off[s + 1] - src_off[s]
        T = tgt_off[s + 1] - tgt_off[s]
        lengths[b] = T
        base = edge_off[s]
        for t in range(L):
            for k in range(K):
                E[b, t, k] = -np.inf
        for t in range(T):
            w = scale * _null_emission(null_logp, tgt_ids[tgt_off[s] + t])
            for u in range(S):
                E[b, t, u] = shared[_edge(base, u, t, S, T, transposed)]
                E[b, t, S + u] = w
        # transitions; padded states keep 0 (unreachable: their emissions are −inf)
        for k in range(K):
            for k2 in range(K):
                Tr[b, k, k2] = 0.0
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
                if T > 0:
                    for u in range(S):
                        b_ = _bucket(u + 1, D)
                        E[b, 0, u] += scale * (log_stay + log_jump[b_] - math.log(width[b_]) - norm)
                    for u in range(1, S):
                        E[b, 0, S + u] = -np.inf
                    E[b, 0, S] += scale * log_p0
                continue
            for from_state in (p, S + p):
                for u in range(S):
                    b_ = _bucket(u - p, D)
                    Tr[b, from_state, u] = scale * (log_stay + log_jump[b_] - math.log(width[b_]) - norm)
                    Tr[b, from_state, S + u] = -np.inf
                Tr[b, from_state, S + p] = scale * log_p0


@numba.njit(cache=True)
def _scatter_batch(sents, src_off, tgt_off, edge_off, transposed, node, edge_sum, D, mu, null_mu, jumps):
    B, L, K = node.shape
    for b in range(B):
        s = sents[b]
        S = src_off[s + 1] - src_off[s]
        T = tgt_off[s + 1] - tgt_off[s]
        base = edge_off[s]
        for t in range(T):
            z = 0.0
            for u in range(S):
                mu[_edge(base, u, t, S, T, transposed)] = node[b, t, u]
                z += node[b, t, S + u]
            null_mu[tgt_off[s] + t] = z
        if T > 0:
            for u in range(S):
                jumps[_bucket(u + 1, D)] += node[b, 0, u]
        for p in range(S):
            for from_state in (p, S + p):
                for u in range(S):
                    jumps[_bucket(u - p, D)] += edge_sum[b, from_state, u]


def _batches(src_len, tgt_len):
    """Sentence batches of one source length and similar target lengths within the cell budget.

    One source length per batch makes every sentence's transition matrix the same
    (it depends only on S and the jump table), so the engine runs its shared-
    transition kernels (several sequences per BLAS product).
    """
    order = np.lexsort((tgt_len, src_len))
    order = order[(src_len[order] > 0) & (tgt_len[order] > 0)]
    batches, start = [], 0
    while start < order.size:
        end = start + 1
        while end < order.size and end - start < _MAX_BATCH and src_len[order[end]] == src_len[order[start]]:
            K = 2 * src_len[order[end]]
            L = int(tgt_len[order[start:end + 1]].max())
            if (end - start + 1) * K * (L + K) > _CELL_BUDGET:
                break
            end += 1
        batches.append(order[start:end])
        start = end
    return batches


class HMMAligner(IBM1):
    """The HMM alignment model in one direction (see the module docstring).

    Parameters: ``null_prob`` p₀ (fixed), ``max_jump`` D. Learned state adds
    ``jumps_`` (c over the 2D+1 buckets, d = −D..D).
    """

    def __init__(self, direction: str, pairs: PairIndex, n_target_words: int, null_prob: float = 0.2,
                 max_jump: int = 7):
        super().__init__(direction, pairs, n_target_words)
        if not 0.0 < null_prob < 1.0:
            raise ValueError(f"null_prob must be in (0, 1), got {null_prob}")
        if int(max_jump) < 1:
            raise ValueError(f"max_jump must be >= 1, got {max_jump}")
        self.null_prob = null_prob
        self.max_jump = int(max_jump)

    def initialize(self):
        super().initialize()
        self.jumps_ = np.full(2 * self.max_jump + 1, 1.0 / (2 * self.max_jump + 1))
        return self

    def copy_tables_from(self, other: IBM1):
        super().copy_tables_from(other)
        if not hasattr(self, "jumps_"):
            self.jumps_ = np.full(2 * self.max_jump + 1, 1.0 / (2 * self.max_jump + 1))
        return self

    def _chains(self, shard, shared, scale):
        """Yield (sentence ids, emissions, transitions, lengths) per batch."""
        src_off, tgt_ids, tgt_off, transposed = _sides(shard, self.direction)
        shared = np.ascontiguousarray(shared, dtype=np.float64)
        null_logp = self._null_logp()
        log_jump = np.log(np.maximum(self.jumps_, FLOOR))
        D = self.max_jump
        for sents in _batches(np.diff(src_off), np.diff(tgt_off)):
            S = int(np.diff(src_off)[sents].max())
            L = int(np.diff(tgt_off)[sents].max())
            K = 2 * S
            E = np.empty((sents.size, L, K))
            Tr = np.empty((sents.size, K, K))
            lengths = np.empty(sents.size, dtype=np.int64)
            _fill_batch(sents, src_off, tgt_ids, tgt_off, shard.edge_offsets, transposed, shared, null_logp,
                        float(scale), log_jump, math.log(self.null_prob), math.log1p(-self.null_prob), D,
                        E, Tr, lengths)
            yield sents, E, Tr, lengths

    def expected_statistics(self, shard, shared_log_potentials, private_scale: float = 1.0) -> Statistics:
        src_off, tgt_ids, tgt_off, transposed = _sides(shard, self.direction)
        mu = np.zeros(shard.edge_offsets[-1])
        null_mu = np.zeros(tgt_ids.size)
        jumps = np.zeros(2 * self.max_jump + 1)
        total = 0.0
        for sents, E, Tr, lengths in self._chains(shard, shared_log_potentials, private_scale):
            # expected transition counts summed over positions: the jump M-step needs no more
            # a batch has one source length, so all its transition matrices are equal
            node, edge_sum, logz = chain.marginals(E, Tr[0], lengths=lengths, edges="sum", return_log_z=True)
            total += float(logz.sum())
            _scatter_batch(sents, src_off, tgt_off, shard.edge_offsets, transposed, node, edge_sum,
                           self.max_jump, mu, null_mu, jumps)
        # a target word facing an empty source sentence can only be NULL-generated
        empty = np.flatnonzero(np.diff(src_off) == 0)
        null_logp = self._null_logp()
        for s in empty:
            null_mu[tgt_off[s]:tgt_off[s + 1]] = 1.0
            words = tgt_ids[tgt_off[s]:tgt_off[s + 1]]
            known = (words >= 0) & (words < null_logp.size)
            total += private_scale * float(np.where(known, null_logp[np.where(known, words, 0)], math.log(FLOOR)).sum())
        return Statistics(shared=mu, private={"null": null_mu, "jumps": jumps}, log_normalizer=total)

    def counts(self, shard, shared_marginals, statistics) -> dict:
        out = super().counts(shard, shared_marginals, statistics)
        out["jumps"] = statistics.private["jumps"]
        return out

    def maximize(self, counts: dict) -> None:
        super().maximize(counts)
        j = counts["jumps"]
        self.jumps_ = j / j.sum() if j.sum() > 0 else np.full(j.size, 1.0 / j.size)

    def viterbi(self, shard) -> list:
        src_off, _, tgt_off, transposed = _sides(shard, self.direction)
        out = [set() for _ in range(shard.n_sentences)]
        for sents, E, Tr, lengths in self._chains(shard, self.shared_log_potentials(shard), 1.0):
            paths, _ = chain.viterbi(E, Tr, lengths=lengths)
            for b, s in enumerate(sents):
                S = src_off[s + 1] - src_off[s]
                for t in range(lengths[b]):
                    u = int(paths[b, t])
                    if 0 <= u < S:
                        out[s].add((t, u) if transposed else (u, t))
        return out
