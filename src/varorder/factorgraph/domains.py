"""Factor graphs whose variables have their own candidate domains (Bouchard, GREC-NEG 2010, §2).

The generalisation of :mod:`varorder.factorgraph.kernels` from one shared label set to a
per-variable list of candidates, as named-entity generation needs (each slot chooses among its
entity's referring expressions). Variable t takes a value yₜ ∈ {0 … nₜ−1}, its candidate
c = cand_ptr[t] + yₜ; every candidate has a sparse feature row φ(c) and an attribute a(c)
(e.g. REG08 type × case) and a flag name(c). With θ one flat vector,

    s(y) = Σₜ φ(cₜ)·θ                                              unary factors
         + Σ_(i, j, e) ∈ pairs  θ_P[e, a(cᵢ), a(cⱼ)]                 binary factors (code e)
         + Σₜ θ_N[link(t, y), a(cₜ)]                                 label-dependent name links
         + Σₜ: name(cₜ), target  θ_R[link(t, y), rel(cₜ, c_target)]       … and how the two names relate

where link(t, y) codes the distance from slot t back to the *previous slot of the same entity
whose current value is a name* (0: none): which factor exists depends on the assignment, as
Bouchard's third factor kind ("activated only between mentions and the previous time the same
entity was referred to by a name"). Link codes are 1 + 2·bucket(sentence distance) + same
paragraph, the bucket from a lookup table; with ``link_between`` (an extension: the classic REG
cue of a competing referent) the bucket is doubled by whether another entity's slot lies between
the two. When slot t holds a name too, a second indicator of
the link relates the two names: rel = 0 the same string (equal ``cand_key``), 1 a shorter one
(fewer words, ``cand_len``), 2 otherwise — a binary potential over both slots' values, as
Bouchard's factor between a mention and the previous name is.

Changing yₜ changes its unary factor, its binary factors, its own link factor's attribute and
the links of the later slots of its entity up to and including the first one whose value is a
name (their link target may be t). The local score ℓₜ(k) sums exactly those factors, so
s(y with yₜ = k) − s(y with yₜ = k′) = ℓₜ(k) − ℓₜ(k′) (checked against :func:`full_score`).

The samplers, annealing and SampleRank epochs follow :mod:`varorder.factorgraph.kernels`
(Wick, Rohanimanesh, Culotta & McCallum 2009): Gibbs draws over the domain (the same draw
routine), Metropolis–Hastings proposes a uniform other candidate; SampleRank ranks the current
and proposed configurations (or the neighbourhood's model-best and objective-best) by the
truth objective o(y) = −Σₜ loss(cₜ) and applies a perceptron or MIRA step with lazy averaging.
"""

from __future__ import annotations

from dataclasses import dataclass

import numba as nb
import numpy as np
import scipy.sparse as sp

from varorder.errors import ParameterError
from varorder.factorgraph.kernels import _gibbs_draw, _record
import varorder._numba_start  # noqa: E402,F401,I001  (Numba's cache saves locked across processes)

N_RELATIONS = 3  # same name, shorter name, other

__all__ = ["DomainLayout", "DomainGraph", "full_score", "local_scores", "anneal", "samplerank_epoch",
           "sample_sweeps"]


@dataclass(frozen=True)
class DomainLayout:
    """θ's blocks: F unary weights, pair (n_pair_codes × A × A), link (n_link_codes × A), name relation
    (n_link_codes × 3)."""

    n_features: int
    n_attrs: int
    n_pair_codes: int = 0
    n_distance_buckets: int = 0  # 0: no name-link factors
    link_between: bool = False  # link codes also tell whether another entity's slot lies between (an extension)

    @property
    def n_link_codes(self) -> int:
        return 1 + 2 * self.n_distance_buckets * (2 if self.link_between else 1) if self.n_distance_buckets else 0

    @property
    def offsets(self) -> dict:
        A = self.n_attrs
        o_P = self.n_features if self.n_pair_codes else -1
        o_N = self.n_features + self.n_pair_codes * A * A if self.n_distance_buckets else -1
        o_R = o_N + self.n_link_codes * A if self.n_distance_buckets else -1
        return {"P": o_P, "N": o_N, "R": o_R}

    @property
    def n_params(self) -> int:
        A = self.n_attrs
        return self.n_features + self.n_pair_codes * A * A + self.n_link_codes * (A + N_RELATIONS)

    def kernel_layout(self) -> np.ndarray:
        o = self.offsets
        return np.array([self.n_attrs, o["P"], o["N"], o["R"], int(self.link_between)], dtype=np.int64)


@dataclass
class DomainGraph:
    """Structure of a batch of documents: candidates, their features, pairs, entity chains, positions.

    ``cand_ptr`` (N+1): variable t's candidates are rows cand_ptr[t]..cand_ptr[t+1]−1 of
    ``X`` (C × F CSR) with attributes ``attr`` (C,) and name flags ``is_name`` (C,); ``cand_key``
    (equal for equal strings; default all distinct) and ``cand_len`` (words; default 1) relate names.
    ``pairs`` (M, 3): (i, j, code), i < j, joined by θ_P[code, a(cᵢ), a(cⱼ)]. ``entity_prev``
    (N,): previous variable of the same entity (−1 none; chains never cross documents).
    ``sentence``/``paragraph`` (N,) positions for link codes; ``distance_buckets`` (D,) maps a
    sentence distance (capped at D−1) to a bucket.
    """

    cand_ptr: np.ndarray
    X: sp.csr_matrix
    attr: np.ndarray
    is_name: np.ndarray
    pairs: np.ndarray
    entity_prev: np.ndarray
    sentence: np.ndarray
    paragraph: np.ndarray
    distance_buckets: np.ndarray
    cand_key: np.ndarray | None = None
    cand_len: np.ndarray | None = None

    def __post_init__(self):
        self.cand_ptr = np.asarray(self.cand_ptr, dtype=np.int64)
        N = self.cand_ptr.size - 1
        if N < 0 or self.cand_ptr[0] != 0 or (np.diff(self.cand_ptr) < 1).any():
            raise ParameterError("cand_ptr must start at 0 and give every variable at least one candidate", name='cand_ptr', value=self.cand_ptr)
        C = int(self.cand_ptr[-1])
        self.X = sp.csr_matrix(self.X, dtype=np.float64)
        self.X.sort_indices()
        if self.X.shape[0] != C:
            raise ParameterError(f"X has {self.X.shape[0]} rows for {C} candidates", name='X', value=self.X)
        self.attr = np.asarray(self.attr, dtype=np.int64)
        self.is_name = np.asarray(self.is_name, dtype=np.int64)
        self.cand_key = np.arange(C, dtype=np.int64) if self.cand_key is None else np.asarray(self.cand_key,
                                                                                                dtype=np.int64)
        self.cand_len = np.ones(C, dtype=np.int64) if self.cand_len is None else np.asarray(self.cand_len,
                                                                                             dtype=np.int64)
        if any(a.shape != (C,) for a in (self.attr, self.is_name, self.cand_key, self.cand_len)):
            raise ParameterError("attr, is_name, cand_key and cand_len need one entry per candidate", name='attr', value=self.attr)
        self.pairs = np.asarray(self.pairs, dtype=np.int64).reshape(-1, 3)
        if self.pairs.size and ((self.pairs[:, 0] >= self.pairs[:, 1]).any() or (self.pairs[:, :2] < 0).any()
                                or (self.pairs[:, :2] >= N).any() or (self.pairs[:, 2] < 0).any()):
            raise ParameterError("pairs must be (i, j, code) with 0 <= i < j < n_variables and code >= 0", name='pairs', value=self.pairs)
        self.entity_prev = np.asarray(self.entity_prev, dtype=np.int64)
        if self.entity_prev.shape != (N,) or (self.entity_prev >= np.arange(N)).any():
            raise ParameterError("entity_prev must point to an earlier variable (or be -1)", name='entity_prev', value=self.entity_prev)
        self.entity_next = np.full(N, -1, dtype=np.int64)
        has = np.flatnonzero(self.entity_prev >= 0)
        if np.unique(self.entity_prev[has]).size != has.size:
            raise ParameterError("entity_prev must form chains (no two variables share a predecessor)", name='entity_prev', value=self.entity_prev)
        self.entity_next[self.entity_prev[has]] = has
        self.chain_rank = np.zeros(N, dtype=np.int64)  # position in the entity's chain
        for t in has:
            self.chain_rank[t] = self.chain_rank[self.entity_prev[t]] + 1
        self.sentence = np.asarray(self.sentence, dtype=np.int64)
        self.paragraph = np.asarray(self.paragraph, dtype=np.int64)
        self.distance_buckets = np.asarray(self.distance_buckets, dtype=np.int64)
        if self.sentence.shape != (N,) or self.paragraph.shape != (N,) or self.distance_buckets.size < 1:
            raise ParameterError("sentence and paragraph need one entry per variable; distance_buckets at least one", name='sentence', value=self.sentence)
        ends = np.concatenate([self.pairs[:, 0], self.pairs[:, 1]])
        others = np.concatenate([self.pairs[:, 1], self.pairs[:, 0]])
        first = np.concatenate([np.ones(len(self.pairs), dtype=np.int64), np.zeros(len(self.pairs), dtype=np.int64)])
        codes = np.concatenate([self.pairs[:, 2], self.pairs[:, 2]])
        order = np.argsort(ends, kind="stable")
        self.pair_other, self.pair_first, self.pair_code = others[order], first[order], codes[order]
        self.pair_ptr = np.zeros(N + 1, dtype=np.int64)
        np.cumsum(np.bincount(ends, minlength=N), out=self.pair_ptr[1:])

    @property
    def n_variables(self) -> int:
        return self.cand_ptr.size - 1

    @property
    def domain_sizes(self) -> np.ndarray:
        return np.diff(self.cand_ptr)

    def check_layout(self, layout: DomainLayout) -> None:
        if self.X.shape[1] > layout.n_features:
            raise ParameterError(f"X has {self.X.shape[1]} feature columns, the layout {layout.n_features}", name='X', value=self.X)
        if self.attr.size and (self.attr.min() < 0 or self.attr.max() >= layout.n_attrs):
            raise ParameterError("candidate attributes outside the layout's range", name='layout', value=layout)
        if self.pairs.size and layout.n_pair_codes and self.pairs[:, 2].max() >= layout.n_pair_codes:
            raise ParameterError("pair codes outside the layout's range", name='layout', value=layout)
        if layout.n_distance_buckets and self.distance_buckets.max() >= layout.n_distance_buckets:
            raise ParameterError("distance buckets outside the layout's range", name='layout', value=layout)

    def kernel_arrays(self) -> tuple:
        X = self.X
        return (self.cand_ptr, X.indptr.astype(np.int64), X.indices.astype(np.int64), X.data.astype(np.float64),
                self.attr, self.is_name, self.pair_ptr, self.pair_other, self.pair_first, self.pair_code,
                self.entity_prev, self.entity_next, self.sentence, self.paragraph, self.distance_buckets,
                self.cand_key, self.cand_len, self.chain_rank)

    def scratch_size(self) -> int:
        longest, lengths = 0, {}
        for t in range(self.n_variables):
            p = self.entity_prev[t]
            lengths[t] = lengths[p] + 1 if p >= 0 else 1
            longest = max(longest, lengths[t])
        return 3 + int(np.diff(self.pair_ptr).max(initial=0)) + 2 * longest


def link_targets(graph: DomainGraph, y) -> np.ndarray:
    """For each variable, the previous variable of its entity whose candidate is a name (−1 none)."""
    out = np.full(graph.n_variables, -1, dtype=np.int64)
    for t in range(graph.n_variables):
        p = graph.entity_prev[t]
        while p >= 0 and not graph.is_name[graph.cand_ptr[p] + y[p]]:
            p = graph.entity_prev[p]
        out[t] = p
    return out


def full_score(graph: DomainGraph, layout: DomainLayout, theta: np.ndarray, y) -> float:
    """s(y) from scratch (plain NumPy/Python): the reference the incremental kernels are checked against."""
    y = np.asarray(y, dtype=np.int64)
    if y.shape != (graph.n_variables,) or (y < 0).any() or (y >= graph.domain_sizes).any():
        raise ParameterError("y must hold one in-domain value per variable", name='y', value=y)
    cands = graph.cand_ptr[:-1] + y
    A = layout.n_attrs
    F = graph.X.shape[1]
    total = float((graph.X[cands] @ theta[:F]).sum())
    o = layout.offsets
    if o["P"] >= 0:
        for i, j, e in graph.pairs:
            total += theta[o["P"] + (e * A + graph.attr[cands[i]]) * A + graph.attr[cands[j]]]
    if o["N"] >= 0:
        targets = link_targets(graph, y)
        for t in range(graph.n_variables):
            i = targets[t]
            code = link_code(graph, layout, t, i)
            total += theta[o["N"] + code * A + graph.attr[cands[t]]]
            if i >= 0 and graph.is_name[cands[t]]:
                total += theta[o["R"] + code * N_RELATIONS + name_relation(graph, cands[t], cands[i])]
    return total


def link_code(graph: DomainGraph, layout: DomainLayout, t: int, i: int) -> int:
    """Code of slot t's link to the earlier slot i (−1: none → 0): 1 + 2·(bucket of the sentence
    distance [× 2 + another entity's slot in between, with ``layout.link_between``]) + same paragraph."""
    if i < 0:
        return 0
    bucket = int(graph.distance_buckets[min(graph.sentence[t] - graph.sentence[i], graph.distance_buckets.size - 1)])
    if layout.link_between:
        # the slots between i and t are the entity's own (chain ranks apart − 1) or another's
        bucket = 2 * bucket + int(t - i > graph.chain_rank[t] - graph.chain_rank[i])
    return 1 + 2 * bucket + int(graph.paragraph[t] == graph.paragraph[i])


def name_relation(graph: DomainGraph, c: int, target: int) -> int:
    """0: the same string, 1: a shorter name (fewer words), 2: otherwise."""
    if graph.cand_key[c] == graph.cand_key[target]:
        return 0
    return 1 if graph.cand_len[c] < graph.cand_len[target] else 2


@nb.njit(cache=True)
def _link_code(s, i, G, L):
    if i < 0:
        return 0
    sentence, paragraph, buckets, rank = G[12], G[13], G[14], G[17]
    d = sentence[s] - sentence[i]
    if d > buckets.size - 1:
        d = buckets.size - 1
    bucket = buckets[d]
    if L[4]:
        bucket = 2 * bucket + (1 if s - i > rank[s] - rank[i] else 0)
    return 1 + 2 * bucket + (1 if paragraph[s] == paragraph[i] else 0)


@nb.njit(cache=True)
def _relation(c, target_c, G):
    if G[15][c] == G[15][target_c]:
        return 0
    return 1 if G[16][c] < G[16][target_c] else 2


@nb.njit(cache=True)
def _link_terms(s, c, target, target_c, G, L, idx, n):
    """The link indicators of slot s holding candidate c whose previous name is ``target`` (its candidate target_c)."""
    A, o_N = L[0], L[2]
    code = _link_code(s, target, G, L)  # the relation block at L[3] follows the link block
    idx[n] = o_N + code * A + G[4][c]
    n += 1
    if target >= 0 and G[5][c]:
        idx[n] = L[3] + code * 3 + _relation(c, target_c, G)
        n += 1
    return n


@nb.njit(cache=True)
def _terms(t, k, y, G, L, idx):
    """θ indices of the non-unary factors whose value depends on yₜ, with yₜ = k; returns the count."""
    cand_ptr, attr, is_name = G[0], G[4], G[5]
    pair_ptr, pair_other, pair_first, pair_code = G[6], G[7], G[8], G[9]
    entity_prev, entity_next = G[10], G[11]
    A, o_P, o_N = L[0], L[1], L[2]
    c = cand_ptr[t] + k
    a = attr[c]
    n = 0
    if o_P >= 0:
        for m in range(pair_ptr[t], pair_ptr[t + 1]):
            other = cand_ptr[pair_other[m]] + y[pair_other[m]]
            if pair_first[m]:
                idx[n] = o_P + (pair_code[m] * A + a) * A + attr[other]
            else:
                idx[n] = o_P + (pair_code[m] * A + attr[other]) * A + a
            n += 1
    if o_N >= 0:
        target = entity_prev[t]
        while target >= 0 and is_name[cand_ptr[target] + y[target]] == 0:
            target = entity_prev[target]
        target_c = cand_ptr[target] + y[target] if target >= 0 else -1
        n = _link_terms(t, c, target, target_c, G, L, idx, n)
        later_target, later_c = (t, c) if is_name[c] else (target, target_c)
        s = entity_next[t]
        while s >= 0:
            cs = cand_ptr[s] + y[s]
            n = _link_terms(s, cs, later_target, later_c, G, L, idx, n)
            if is_name[cs]:
                break
            s = entity_next[s]
    return n


@nb.njit(cache=True)
def _unary(c, theta, G):
    indptr, indices, data = G[1], G[2], G[3]
    total = 0.0
    for p in range(indptr[c], indptr[c + 1]):
        total += data[p] * theta[indices[p]]
    return total


@nb.njit(cache=True)
def _local_one(t, k, y, theta, G, L, idx):
    total = _unary(G[0][t] + k, theta, G)
    n = _terms(t, k, y, G, L, idx)
    for i in range(n):
        total += theta[idx[i]]
    return total


@nb.njit(cache=True)
def _local_all(t, y, theta, G, L, out, idx):
    for k in range(G[0][t + 1] - G[0][t]):
        out[k] = _local_one(t, k, y, theta, G, L, idx)


@nb.njit(cache=True)
def local_scores(t, y, theta, G, L, scratch):
    """ℓₜ(k) for every candidate k of variable t."""
    out = np.empty(G[0][t + 1] - G[0][t])
    idx = np.empty(scratch, dtype=np.int64)
    _local_all(t, y, theta, G, L, out, idx)
    return out


@nb.njit(cache=True)
def _propose(t, y, theta, G, L, kind, temperature, scores, weights, idx):
    """(proposed value, Δℓ, MH acceptance) for variable t; a one-candidate variable proposes itself."""
    n = G[0][t + 1] - G[0][t]
    k = y[t]
    if n == 1:
        return k, 0.0, False
    if kind == 0:
        _local_all(t, y, theta, G, L, scores, idx)
        k_new = _gibbs_draw(scores, weights, temperature, n)
        return k_new, scores[k_new] - scores[k], True
    k_new = np.random.randint(0, n - 1)
    if k_new >= k:
        k_new += 1
    delta = _local_one(t, k_new, y, theta, G, L, idx) - _local_one(t, k, y, theta, G, L, idx)
    accept = delta >= 0.0 or np.random.random() < np.exp(delta / temperature)
    return k_new, delta, accept


def _buffers(graph: DomainGraph):
    width = int(graph.domain_sizes.max(initial=1))
    return np.empty(width), np.empty(width), np.empty(graph.scratch_size(), dtype=np.int64)


@nb.njit(cache=True)
def _sweeps(y, theta, G, L, temperatures, kind, seed, out, thin, scores, weights, idx):
    np.random.seed(seed)
    row = 0
    for sweep in range(temperatures.size):
        for t in range(y.size):
            k_new, _, accept = _propose(t, y, theta, G, L, kind, temperatures[sweep], scores, weights, idx)
            if accept:
                y[t] = k_new
        if thin > 0 and (sweep + 1) % thin == 0 and row < out.shape[0]:
            out[row, :] = y
            row += 1
    return row


@nb.njit(cache=True)
def _greedy(y, theta, G, L, max_sweeps, scores, idx):
    sweeps = 0
    changed = True
    while changed and sweeps < max_sweeps:
        changed = False
        sweeps += 1
        for t in range(y.size):
            _local_all(t, y, theta, G, L, scores, idx)
            best = y[t]
            for k in range(G[0][t + 1] - G[0][t]):
                # a better value, or an exact tie at a lower index: ties (candidates the features cannot
                # tell apart) end at the first in the list's order, not wherever the sampler left them
                if scores[k] > scores[best] or (k < best and scores[k] == scores[best]):
                    best = k
            if best != y[t]:
                y[t] = best
                changed = True
    return sweeps


def sample_sweeps(graph: DomainGraph, layout: DomainLayout, theta, y, n_sweeps: int, thin: int, temperature: float,
                  kind: int, seed: int) -> np.ndarray:
    """Samples of y (updated in place) every ``thin`` sweeps at a fixed temperature: (n_sweeps // thin, N)."""
    scores, weights, idx = _buffers(graph)
    out = np.empty((n_sweeps // thin, graph.n_variables), dtype=np.int64)
    rows = _sweeps(y, theta, graph.kernel_arrays(), layout.kernel_layout(), np.full(n_sweeps, float(temperature)),
                   kind, seed, out, thin, scores, weights, idx)
    return out[:rows]


def anneal(graph: DomainGraph, layout: DomainLayout, theta, y, temperatures, kind: int, seed: int,
           max_greedy_sweeps: int = 100) -> int:
    """Simulated annealing from y (in place), one sweep per temperature, then greedy sweeps; returns those.

    The greedy sweeps move each variable to its best value, exact ties to the lowest index, so a
    configuration among equal-scoring ones is chosen by the candidate lists' order, as an argmax does.
    """
    scores, weights, idx = _buffers(graph)
    G, L = graph.kernel_arrays(), layout.kernel_layout()
    _sweeps(y, theta, G, L, np.asarray(temperatures, dtype=np.float64), kind, seed,
            np.empty((0, graph.n_variables), dtype=np.int64), 0, scores, weights, idx)
    return int(_greedy(y, theta, G, L, max_greedy_sweeps, scores, idx))


@nb.njit(cache=True)
def _update(t, better, worse, y, G, L, theta, u, step, c, idx, unary_scale):
    """θ += step·(φ(yₜ = better) − φ(yₜ = worse)) and u += c·step·(same); the unary block's step is
    scaled by ``unary_scale`` (1: the plain update; 0: unary weights held)."""
    indptr, indices, data = G[1], G[2], G[3]
    for j in range(2):
        sign = 1.0 if j == 0 else -1.0
        k = better if j == 0 else worse
        row = G[0][t] + k
        if unary_scale != 0.0:
            for p in range(indptr[row], indptr[row + 1]):
                theta[indices[p]] += sign * step * unary_scale * data[p]
                u[indices[p]] += sign * c * step * unary_scale * data[p]
        n = _terms(t, k, y, G, L, idx)
        for i in range(n):
            theta[idx[i]] += sign * step
            u[idx[i]] += sign * c * step


@nb.njit(cache=True)
def _difference_norm2(t, better, worse, y, G, L, idx, unary_scale):
    """‖φ(yₜ = better) − φ(yₜ = worse)‖² of the updated blocks (shared features cancel; the unary
    block weighted by ``unary_scale``, as :func:`_update` moves it)."""
    indptr, indices, data = G[1], G[2], G[3]
    keys = []
    values = []
    for j in range(2):
        sign = 1.0 if j == 0 else -1.0
        k = better if j == 0 else worse
        row = G[0][t] + k
        for p in range(indptr[row], indptr[row + 1]):
            keys.append(indices[p])
            values.append(sign * data[p] * np.sqrt(unary_scale))
        n = _terms(t, k, y, G, L, idx)
        for i in range(n):
            keys.append(idx[i])
            values.append(sign)
    key_array = np.array(keys)
    value_array = np.array(values)
    order = np.argsort(key_array)
    total = 0.0
    running = 0.0
    for j in range(order.size):
        running += value_array[order[j]]
        if j + 1 == order.size or key_array[order[j + 1]] != key_array[order[j]]:
            total += running * running
            running = 0.0
    return total


@nb.njit(cache=True)
def _samplerank(order, y, loss, theta, u, c, G, L, rule, step_size, C, margin, kind, temperature, pairs, seed, log,
                scores, weights, idx, unary_scale):
    np.random.seed(seed)
    cand_ptr = G[0]
    n_ranked = 0
    n_updates = 0
    n_moves = 0
    for i in range(order.size):
        t = order[i]
        c += 1.0
        k = y[t]
        base = cand_ptr[t]
        n_t = cand_ptr[t + 1] - base
        k_new, delta_model, accept = _propose(t, y, theta, G, L, kind, temperature, scores, weights, idx)
        updated = False
        if pairs == 0:
            delta_objective = loss[base + k] - loss[base + k_new]
            ranked = k_new != k and delta_objective != 0.0
            if delta_objective > 0.0:
                better, worse, gap = k_new, k, delta_model
            else:
                better, worse, gap = k, k_new, -delta_model
        else:
            if kind != 0 or n_t == 1:
                _local_all(t, y, theta, G, L, scores, idx)
            model_best = 0
            objective_best = 0
            for j in range(1, n_t):
                if scores[j] > scores[model_best]:
                    model_best = j
                if loss[base + j] < loss[base + objective_best] or (
                        loss[base + j] == loss[base + objective_best] and scores[j] > scores[objective_best]):
                    objective_best = j
            delta_objective = loss[base + model_best] - loss[base + objective_best]
            ranked = delta_objective != 0.0
            better, worse, gap = objective_best, model_best, scores[objective_best] - scores[model_best]
            delta_model = -gap
        if ranked:
            n_ranked += 1
            if gap <= margin:
                if rule == 0:
                    step = step_size
                else:
                    norm2 = _difference_norm2(t, better, worse, y, G, L, idx, unary_scale)
                    step = min(C, (abs(delta_objective) - gap) / norm2) if norm2 > 0.0 else 0.0
                if step > 0.0:
                    _update(t, better, worse, y, G, L, theta, u, step, c, idx, unary_scale)
                    updated = True
                    n_updates += 1
        _record(log, i, t, k, k_new, delta_model, delta_objective, updated)
        if accept and k_new != k:
            y[t] = k_new
            n_moves += 1
    objective = 0.0
    for t in range(y.size):
        objective -= loss[cand_ptr[t] + y[t]]
    return c, n_ranked, n_updates, n_moves, objective


def samplerank_epoch(graph: DomainGraph, layout: DomainLayout, order, y, loss, theta, u, c: float, rule: int,
                     step_size: float, C: float, margin: float, kind: int, temperature: float, pairs: int, seed: int,
                     log=None, unary_scale: float = 1.0):
    """One SampleRank pass, one proposal per entry of ``order`` (y, θ, u updated in place).

    ``loss`` (C,) is each candidate's loss (the objective is −Σ loss); ``pairs`` 0 ranks the
    current and proposed configurations (Wick et al. 2009), 1 the model-best and objective-best
    values of the proposed variable (FACTORIE's neighbourhood rule, an extension). ``rule`` 0
    perceptron, 1 MIRA. ``unary_scale`` scales the step of the unary weights (1: Wick et al.'s
    update of every factor; 0: the unary weights are held, e.g. at an exact fit's, and only the
    pair and link weights learn; an extension). Returns (c, ranked, updates, moves, objective);
    ``log`` rows as in :func:`varorder.factorgraph.kernels.samplerank_epoch`.
    """
    scores, weights, idx = _buffers(graph)
    log = np.zeros((0, 6)) if log is None else log
    return _samplerank(np.asarray(order, dtype=np.int64), y, np.asarray(loss, dtype=np.float64), theta, u, float(c),
                       graph.kernel_arrays(), layout.kernel_layout(), rule, float(step_size), float(C), float(margin),
                       kind, float(temperature), pairs, seed, log, scores, weights, idx, float(unary_scale))
