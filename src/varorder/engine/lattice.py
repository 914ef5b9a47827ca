"""Exact inference on position-indexed acyclic lattices.

Factorization. A lattice has nodes 0 … N−1 with positions p(v) (node 0, the
root, is the only node at position 0) and arcs a = (source, target, label,
weight) with p(target) = p(source) + 1. A path is a sequence of arcs from the
root to a node v with a finite final weight; its label sequence has length
p(v) and its score is Σ weight(a) + final(v). p(path) = exp(score − log Z).

Every builder in varorder produces this structure: dense chains
(:meth:`varorder.lattice.Lattice.from_chain`), variable-order context sets
(RCMS, Steinhardt & Liang 2015), q-automata unrolled over positions (Carter,
Dymetman & Bouchard 2012), alignment lattices (Vogel et al. 1996).

Storage is flat arrays; arcs are indexed twice in CSR form (by target for the
forward pass, by source for the backward pass). Node ids must be in
topological (position) order, so each pass is one sweep over nodes.

Algorithms: one semiring-generic forward and backward (⊕, ⊗ from
:mod:`varorder.engine.semiring`, scalar or structured); every operation is it in a
chosen semiring: Viterbi as the MAX forward plus a re-maximising backtrack; k-best as the
KBEST forward plus the k-best backtrack (:mod:`varorder.engine.kbest`); sampling by
backward sampling over LOG forward values with externally drawn uniforms; entropy as the
EXPECTATION forward, log Z − E[score]. The list-Viterbi k-best kernel and the entropy
from marginals are registered specialisations (``SPECIALISED``), tested equal.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from varorder.engine.kbest import lattice_arcs
from varorder.engine.validate import as_rng
from varorder.engine.semiring import LOG, MAX, Semiring, cells, compiled
from varorder.engine.semiring import operation as choose
from varorder.engine.semiring_structured import EXPECTATION, KBEST, entropy_of
import varorder._numba_start  # noqa: E402,F401,I001  (Numba's cache saves locked across processes)

NEG_INF = -np.inf


def make_lattice_forward(semiring: Semiring):
    """alpha[v] = ⊕ over root→v arc paths of their weight; returns ⊕ᵥ alpha[v] ⊗ final[v].
    alpha is (N,) for a scalar semiring, (N, d) for a structured one."""
    c = cells(semiring)
    zero, one, plus, times_weight, put = c.zero, c.one, c.plus, c.times_weight, c.put

    # not cached (closure factory): see varorder.engine.semiring
    @nb.njit
    def forward(num_nodes, in_offsets, in_arcs, arc_source, arc_weight, final, alpha):
        tmp = np.empty_like(alpha[:1])[0]  # floats (unused) or rows of scratch
        total = np.empty_like(alpha[:1])[0]
        put(alpha, 0, one(alpha[0]))
        for v in range(1, num_nodes):
            acc = zero(alpha[v])
            for q in range(in_offsets[v], in_offsets[v + 1]):
                a = in_arcs[q]
                acc = plus(acc, acc, times_weight(tmp, alpha[arc_source[a]], arc_weight[a]))
            put(alpha, v, acc)
        total = zero(total)
        for v in range(num_nodes):
            total = plus(total, total, times_weight(tmp, alpha[v], final[v]))
        return total

    return forward


def make_lattice_backward(semiring: Semiring):
    """beta[v] = ⊕ over v→end continuations (final weight included)."""
    c = cells(semiring)
    plus, times_weight, lift, put = c.plus, c.times_weight, c.lift, c.put

    # not cached (closure factory): see varorder.engine.semiring
    @nb.njit
    def backward(num_nodes, out_offsets, out_arcs, arc_target, arc_weight, final, beta):
        tmp = np.empty_like(beta[:1])[0]
        for v in range(num_nodes - 1, -1, -1):
            acc = lift(beta[v], final[v])
            for q in range(out_offsets[v], out_offsets[v + 1]):
                a = out_arcs[q]
                acc = plus(acc, acc, times_weight(tmp, beta[arc_target[a]], arc_weight[a]))
            put(beta, v, acc)
        return beta[0]

    return backward


log_forward = compiled(make_lattice_forward, LOG)
max_forward = compiled(make_lattice_forward, MAX)
log_backward = compiled(make_lattice_backward, LOG)


def forward_kernel(semiring: Semiring):
    """The generic lattice forward in ``semiring`` (compiled once). The public operations
    run it with the semiring they need (:func:`kbest`, :func:`entropy`); fused kernels
    registered in ``SPECIALISED`` stand in for some (tested equal)."""
    return compiled(make_lattice_forward, semiring)


@nb.njit(cache=True)
def csr_index(keys, num_nodes):
    """(offsets, order): the arcs grouped by node ``keys[a]`` in CSR form, arcs of a node in
    increasing id — the stable argsort of ``keys`` by a counting sort (linear, no comparisons)."""
    offsets = np.zeros(num_nodes + 1, dtype=np.int64)
    for a in range(keys.shape[0]):
        offsets[keys[a] + 1] += 1
    for v in range(num_nodes):
        offsets[v + 1] += offsets[v]
    fill = offsets[:-1].copy()
    order = np.empty(keys.shape[0], dtype=np.int64)
    for a in range(keys.shape[0]):
        k = keys[a]
        order[fill[k]] = a
        fill[k] += 1
    return offsets, order


@nb.njit(cache=True)
def viterbi_kernel(num_nodes, in_offsets, in_arcs, arc_source, arc_weight, final, node_position):
    """Best path as an array of arc ids (root first) and its score."""
    alpha = np.empty(num_nodes)
    best = max_forward(num_nodes, in_offsets, in_arcs, arc_source, arc_weight, final, alpha)
    if best == NEG_INF:
        return np.empty(0, dtype=np.int64), best
    v = 0
    top = NEG_INF
    for u in range(num_nodes):
        s = alpha[u] + final[u]
        if s > top:
            top = s
            v = u
    arcs = np.empty(node_position[v], dtype=np.int64)
    while v != 0:
        top = NEG_INF
        arg = -1
        for q in range(in_offsets[v], in_offsets[v + 1]):
            a = in_arcs[q]
            s = alpha[arc_source[a]] + arc_weight[a]
            if s > top:
                top = s
                arg = a
        arcs[node_position[v] - 1] = arg
        v = arc_source[arg]
    return arcs, best


@nb.njit(cache=True)
def marginals_kernel(num_nodes, in_offsets, in_arcs, out_offsets, out_arcs, arc_source, arc_target,
                     arc_weight, final):
    """(log Z, node marginals, arc marginals, final marginals)."""
    alpha = np.empty(num_nodes)
    beta = np.empty(num_nodes)
    logz = log_forward(num_nodes, in_offsets, in_arcs, arc_source, arc_weight, final, alpha)
    num_arcs = arc_weight.shape[0]
    node = np.zeros(num_nodes)
    arc = np.zeros(num_arcs)
    fin = np.zeros(num_nodes)
    if logz == NEG_INF:
        return logz, node, arc, fin
    log_backward(num_nodes, out_offsets, out_arcs, arc_target, arc_weight, final, beta)
    for v in range(num_nodes):
        node[v] = np.exp(alpha[v] + beta[v] - logz)
        fin[v] = np.exp(alpha[v] + final[v] - logz)
    for a in range(num_arcs):
        arc[a] = np.exp(alpha[arc_source[a]] + arc_weight[a] + beta[arc_target[a]] - logz)
    return logz, node, arc, fin


@nb.njit(cache=True)
def _draw_log(logw, u):
    """Index drawn with probability ∝ exp(logw), by inverse CDF at u; −1 if all −inf."""
    m = NEG_INF
    for i in range(logw.shape[0]):
        if logw[i] > m:
            m = logw[i]
    if m == NEG_INF:
        return -1
    total = 0.0
    for i in range(logw.shape[0]):
        total += np.exp(logw[i] - m)
    target = u * total
    c = 0.0
    last = -1
    for i in range(logw.shape[0]):
        w = np.exp(logw[i] - m)
        if w > 0.0:
            last = i
            c += w
            if target < c:
                return i
    return last


@nb.njit(cache=True)
def _cumulative(logw, cum):
    """cum[i] = Σ_{j ≤ i} exp(logw[j] − max logw), summed in index order as :func:`_draw_log`
    sums them; returns False if every entry is −inf."""
    m = NEG_INF
    for i in range(logw.shape[0]):
        if logw[i] > m:
            m = logw[i]
    if m == NEG_INF:
        return False
    c = 0.0
    for i in range(logw.shape[0]):
        c += np.exp(logw[i] - m)
        cum[i] = c
    return True


@nb.njit(cache=True)
def _draw_cumulative(cum, lo, hi, u):
    """The index :func:`_draw_log` draws at u from the weights whose running sums are
    cum[lo:hi] (the first i with u · total < cum[i], by bisection), offset from lo."""
    target = u * cum[hi - 1]
    a, b = lo, hi
    while a < b:
        mid = (a + b) >> 1
        if target < cum[mid]:
            b = mid
        else:
            a = mid + 1
    if a == hi:  # u · total rounded up to total: the last entry of positive weight
        a = hi - 1
        while a > lo and cum[a] == cum[a - 1]:
            a -= 1
    return a - lo


@nb.njit(cache=True)
def sample_kernel(num_nodes, in_offsets, in_arcs, arc_source, arc_weight, final, node_position,
                  max_len, uniforms):
    """n sampled paths as arc ids (n, max_len), −1 padded; uniforms has shape (n, max_len + 1).

    Each draw is the inverse CDF of :func:`_draw_log` at its uniform; the running sums of a
    node's in-arc weights (and of the end weights) are computed once, on the node's first
    visit, so a sample costs O(length · log in-degree) after that, not O(length · in-degree
    + nodes)."""
    alpha = np.empty(num_nodes)
    logz = log_forward(num_nodes, in_offsets, in_arcs, arc_source, arc_weight, final, alpha)
    n = uniforms.shape[0]
    out = np.full((n, max_len), -1, dtype=np.int64)
    if logz == NEG_INF:
        return out, logz
    end_w = np.empty(num_nodes)
    for v in range(num_nodes):
        end_w[v] = alpha[v] + final[v]
    end_cum = np.empty(num_nodes)
    _cumulative(end_w, end_cum)
    arc_cum = np.empty(in_arcs.shape[0])
    ready = np.zeros(num_nodes, dtype=np.bool_)
    for s in range(n):
        v = _draw_cumulative(end_cum, 0, num_nodes, uniforms[s, max_len])
        while v != 0:
            lo = in_offsets[v]
            hi = in_offsets[v + 1]
            if not ready[v]:
                w = np.empty(hi - lo)
                for q in range(lo, hi):
                    a = in_arcs[q]
                    w[q - lo] = alpha[arc_source[a]] + arc_weight[a]
                _cumulative(w, arc_cum[lo:hi])
                ready[v] = True
            pos = node_position[v]
            a = in_arcs[lo + _draw_cumulative(arc_cum, lo, hi, uniforms[s, pos - 1])]
            out[s, pos - 1] = a
            v = arc_source[a]
    return out, logz


# ---------------------------------------------------------------------------
# Forward sampling over backward tables: a deterministic weighted automaton × a DFA,
# unrolled over positions 0 .. M without materialising the unrolled lattice
# ---------------------------------------------------------------------------
#
# The unrolled product is a position-indexed lattice whose node (t, s, q) is (position,
# automaton state, DFA state) and whose arc for column x goes to (t + 1, nxt[s, x],
# dq[q, x]) with weight prob[s, x] (probability domain); node (t, s, q) ends with weight
# end[s] when t >= min_len and q is accepting. ``product_backward`` is the lattice's LOG
# backward recursion over that implicit structure in the probability domain, one scale per
# position (tests check it equal to ``log_backward`` on the materialised lattice);
# ``product_sample`` draws each path forward from the backward values: at a node, column x
# with probability prob[s, x] β(t + 1, nxt, dq) / β(t, s, q) or the end with probability
# end[s] / β(t, s, q). The running sums of a node's weights (and a guide table of cut
# points over them, Chen & Asau 1974) are computed on the node's first visit, so a draw
# costs O(1) expected after that. Uniforms are counter-based (SplitMix64, Steele, Lea & Flood
# 2014, at a counter made of the sample index and the position), so sample i is the same
# whatever the batch it is drawn in.

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)
_TO_UNIT = 1.0 / 9007199254740992.0  # 2**-53


@nb.njit(cache=True)
def _mix64(z):
    """SplitMix64's finaliser (Steele, Lea & Flood 2014): a bijection of uint64."""
    z = (z ^ (z >> np.uint64(30))) * _MIX1
    z = (z ^ (z >> np.uint64(27))) * _MIX2
    return z ^ (z >> np.uint64(31))


@nb.njit(cache=True)
def stream_base(seed):
    """The base of the uniforms drawn under ``seed`` (uint64-convertible)."""
    return _mix64(np.uint64(seed))


@nb.njit(cache=True)
def stream_uniform(base, index, step):
    """Uniform number ``step`` (< 2²⁰ − 1) of stream ``index`` (< 2⁴⁴), in [0, 1) on the
    2⁻⁵³ grid: SplitMix64's output at counter index · 2²⁰ + step + 1 from ``base``."""
    counter = np.uint64(index) * np.uint64(1048576) + np.uint64(step + 1)
    return np.float64(_mix64(np.uint64(base) + counter * _GOLDEN) >> np.uint64(11)) * _TO_UNIT


@nb.njit(cache=True)
def guide_fill(cum, lo, k, guide, glo):
    """guide[glo + g] = the first i < k with cum[lo + i] > total · g / k (k cut points over
    the running sums cum[lo:lo + k], total = cum[lo + k − 1] > 0; up to rounding, which
    :func:`guide_draw` corrects)."""
    unit = k / cum[lo + k - 1]
    g = 0
    for i in range(k):
        top = cum[lo + i] * unit
        while g < k and g < top:
            guide[glo + g] = i
            g += 1
    while g < k:
        guide[glo + g] = k - 1
        g += 1


@nb.njit(cache=True)
def guide_search(cum, lo, k, guide, glo, u, target):
    """The first i < k with target < cum[lo + i] (the last entry of positive weight when
    there is none), found from the cut point of u (target ≈ u · total) in O(1) expected
    steps; the walk corrects any hint, so the answer depends on target alone."""
    g = int(u * k)
    if g >= k:
        g = k - 1
    i = guide[glo + g]
    while i > 0 and cum[lo + i - 1] > target:
        i -= 1
    while i < k - 1 and cum[lo + i] <= target:
        i += 1
    if not target < cum[lo + i]:
        while i > 0 and cum[lo + i] == cum[lo + i - 1]:
            i -= 1
    return i


@nb.njit(cache=True)
def guide_draw(cum, lo, k, guide, glo, u):
    """The index :func:`_draw_cumulative` draws at u from the running sums cum[lo:lo + k]
    (the first i with u · total < cum[lo + i]; the last entry of positive weight when
    u · total rounds up to total), found from its cut point in O(1) expected steps."""
    return guide_search(cum, lo, k, guide, glo, u, u * cum[lo + k - 1])


def stream_seed(seed) -> np.uint64:
    """The uint64 seed of the counter-based streams: a non-negative integer as it is (mod
    2⁶⁴), None fresh entropy, a Generator or SeedSequence one draw from it."""
    rng = as_rng(seed)  # validates
    if seed is None or not isinstance(seed, (int, np.integer)):
        return np.uint64(rng.integers(0, 2**63))
    return np.uint64(int(seed) % 2**64)


@nb.njit(cache=True)
def product_backward(prob, probT, nxt, end, dq, accepting, live, min_len, max_len):
    """Backward values of the unrolled automaton × DFA (see above): (B (M + 1, S, Q), log
    scales (M + 1,), totals (M + 1, S, Q), G) with β(t, s, q) = B[t, s, q] · exp(scale[t])
    and max B[t] = 1 (B[t] all 0 when no node of position t reaches an end).

    totals[t, s, q] is node (t, s, q)'s weight sum in the sampler's unit, summed in the
    sampler's entry order — the end weight end[s] · exp(−scale[t + 1]) (0 unless t ≥ min_len
    and q accepts) first, then the column weights prob[s, x] · B[t + 1, nxt, dq] in column
    order —, so it is the sampler's last running sum bit for bit and a node's draw needs no
    pass to find its total. G (M, Q, X) holds the gathered continuations B[t + 1, nxt[0, x],
    dq[q, x]] of a first-order automaton (the next state depends on the column only, as in a
    bigram LM) and has no rows otherwise. ``probT`` is prob transposed (X, S) when the
    automaton is first-order (every row of nxt the same: the caller's promise, kept once per
    automaton) and has no rows otherwise. DFA states that are not ``live`` are skipped (their
    β is 0)."""
    S, X = prob.shape
    Q = dq.shape[0]
    states = np.flatnonzero(live)
    L = states.shape[0]
    dq_live = np.empty((X, L), dtype=np.int64)  # column x's successor of each live state
    for x in range(X):
        for j in range(L):
            dq_live[x, j] = dq[states[j], x]
    B = np.zeros((max_len + 1, S, Q))
    totals = np.zeros((max_len + 1, S, Q))
    scale = np.zeros(max_len + 1)
    shared = probT.shape[0] > 0
    G = np.zeros((max_len if shared else 0, Q, X))
    # the first-order sums run with the states innermost, over the transposed weights: each
    # state's sum is still in entry order (the sampler's, bit for bit) while the loop runs
    # on vector lanes, every live DFA state in one sweep of the weights (they exceed L2)
    acc_s = np.empty((L if shared else 0, S))
    acc = np.empty(L)
    for t in range(max_len, -1, -1):
        cur = B[t]
        tot = totals[t]
        # the end weights are divided by β's scale at t + 1 (the continuations' unit)
        end_unit = 1.0 if t == max_len else np.exp(-scale[t + 1])
        ends = t >= min_len
        if t == max_len:
            for s in range(S):
                for j in range(L):
                    q = states[j]
                    tot[s, q] = end[s] * end_unit if ends and accepting[q] else 0.0
        elif shared:
            nb_ = B[t + 1]
            for j in range(L):
                q = states[j]
                for x in range(X):
                    G[t, q, x] = nb_[nxt[0, x], dq_live[x, j]]
                a = acc_s[j]
                if ends and accepting[q]:
                    for s in range(S):
                        a[s] = end[s] * end_unit
                else:
                    a[:] = 0.0
            for x in range(X):
                pt = probT[x]
                for j in range(L):
                    gx = G[t, states[j], x]
                    if gx == 0.0:  # adds +0 to every sum
                        continue
                    a = acc_s[j]
                    for s in range(S):
                        a[s] += pt[s] * gx
            for j in range(L):
                q = states[j]
                a = acc_s[j]
                for s in range(S):
                    tot[s, q] = a[s]
        else:
            nb_ = B[t + 1]
            for s in range(S):
                e = end[s] * end_unit
                for j in range(L):
                    acc[j] = e if ends and accepting[states[j]] else 0.0
                for x in range(X):
                    p = prob[s, x]
                    if p == 0.0:  # adds +0 to every sum
                        continue
                    row = nb_[nxt[s, x]]
                    for j in range(L):
                        acc[j] += p * row[dq_live[x, j]]
                for j in range(L):
                    tot[s, states[j]] = acc[j]
        m = 0.0
        for s in range(S):
            for q in range(Q):
                if tot[s, q] > m:
                    m = tot[s, q]
        base = 0.0 if t == max_len else scale[t + 1]
        if m > 0.0:
            inv = 1.0 / m
            for s in range(S):
                for q in range(Q):
                    cur[s, q] = tot[s, q] * inv
            scale[t] = base + np.log(m)
        else:
            scale[t] = base
    return B, scale, totals, G


@nb.njit(cache=True)
def _product_weight(prob, nxt, dq, nb_, G, first_order, t, s, q, x):
    """Column x's weight at node (t, s, q) in the sampler's unit (what the backward summed)."""
    if first_order:
        return prob[s, x] * G[t, q, x]
    return prob[s, x] * nb_[nxt[s, x], dq[q, x]]


@nb.njit(cache=True)
def _advance(i, y, t, s, q, Q, symbol, nxt, dq, out, lengths, ids, node, alive):
    """Path i takes entry y at (t, s, q): the end (y = 0) or column y − 1; returns the count
    of paths that move on."""
    if y == 0:
        lengths[i] = t
        return alive
    x = y - 1
    out[t, i] = symbol[x]
    ids[alive] = i
    node[alive] = nxt[s, x] * Q + dq[q, x]
    return alive + 1


@nb.njit(cache=True)
def _scan(p, g, nxt_s, dq_q, nb_, first_order, run, target, su, sy, a, c, total):
    """The scan of a node's columns (weights p[x] · g[x] for a first-order automaton, else
    p[x] · nb_[nxt_s[x], dq_q[x]]) from running sum run, giving entry 1 + x to every sorted
    target below it; returns (paths drawn, the last entry of positive weight)."""
    last = 0
    for x in range(p.shape[0]):
        if first_order:  # loop-invariant: compiled as two loops
            grown = run + p[x] * g[x]
        else:
            grown = run + p[x] * nb_[nxt_s[x], dq_q[x]]
        if grown != run:
            last = x + 1
        run = grown
        while target < run:
            sy[a] = x + 1
            a += 1
            if a == c:
                return a, last
            target = su[a] * total
    return a, last


@nb.njit(cache=True)
def product_sample(prob, nxt, end, dq, accepting, min_len, max_len, B, totals, G, scale, symbol, start_s, start_q,
                   n, seed, few):
    """n paths of the unrolled automaton × DFA drawn forward from its backward values
    (``product_backward``'s four arrays): (labels (M, n) int32 = symbol[column], −1 padded,
    position-major; lengths (n,); number of node tables built). Every path is drawn from the
    exact distribution ∝ its weight; the root must reach an end (B[0, start] > 0).

    The paths advance together, one position at a time; at each position the unfinished
    ones are grouped by node (a counting sort) and each node is visited once for all its
    paths. A node's entries are the end, then the columns (in the caller's order: most
    probable first makes scans short). A node with more than ``few`` paths builds its
    running sums and a guide table and draws each path in O(1) expected; a node with at
    most ``few`` sorts their uniforms and finds every draw in one scan of its running sums,
    stopping at the last one (no table: most nodes of a position hold one or two paths).
    Both find the first entry whose running sum exceeds u · total (the total from the
    backward tables), so a path's draw is the same whichever way its node is visited — path
    i's uniform at position t is ``stream_uniform(stream_base(seed), i, t)``, and sample i
    depends only on (seed, i)."""
    S, X = prob.shape
    Q = dq.shape[0]
    K = X + 1  # the end, then the columns
    first_order = G.shape[0] > 0
    out = np.full((max_len, n), -1, dtype=np.int32)
    lengths = np.full(n, max_len, dtype=np.int64)
    cum = np.empty(K)
    guide = np.empty(K, dtype=np.int32)
    width = min(max(few, 0), n) + 1
    su = np.empty(width)
    si = np.empty(width, dtype=np.int32)
    sy = np.empty(width, dtype=np.int64)
    ids = np.arange(n).astype(np.int32)
    node = np.full(n, start_s * Q + start_q, dtype=np.int32)
    ids2 = np.empty(n, dtype=np.int32)
    offsets = np.zeros(S * Q + 2, dtype=np.int64)
    base = stream_base(seed)
    tables = 0
    m = n
    for t in range(max_len):
        if m == 0:
            break
        # group the unfinished paths by node (stable counting sort): node v's paths are
        # ids2[offsets[v] : offsets[v + 1]]
        offsets[:] = 0
        for j in range(m):
            offsets[node[j] + 2] += 1
        for v in range(S * Q):
            offsets[v + 2] += offsets[v + 1]
        for j in range(m):
            v = node[j] + 1
            p = offsets[v]
            offsets[v] = p + 1
            ids2[p] = ids[j]
        nb_ = B[t + 1]
        end_unit = np.exp(-scale[t + 1])
        alive = 0
        for v in range(S * Q):
            j = offsets[v]
            j1 = offsets[v + 1]
            c = j1 - j
            if c == 0:
                continue
            s = v // Q
            q = v - s * Q
            total = totals[t, s, q]
            e = end[s] * end_unit if t >= min_len and accepting[q] else 0.0
            if c > few:
                tables += 1
                run = e
                cum[0] = run
                for x in range(X):
                    run += _product_weight(prob, nxt, dq, nb_, G, first_order, t, s, q, x)
                    cum[x + 1] = run
                guide_fill(cum, 0, K, guide, 0)
                for a in range(j, j1):
                    i = ids2[a]
                    u = stream_uniform(base, i, t)
                    y = guide_search(cum, 0, K, guide, 0, u, u * total)
                    alive = _advance(i, y, t, s, q, Q, symbol, nxt, dq, out, lengths, ids, node, alive)
                continue
            for a in range(c):  # insertion sort of the group's uniforms
                i = ids2[j + a]
                u = stream_uniform(base, i, t)
                b = a
                while b > 0 and su[b - 1] > u:
                    su[b] = su[b - 1]
                    si[b] = si[b - 1]
                    b -= 1
                su[b] = u
                si[b] = i
            # the end entry (running sum e = 0.0 + e), then the columns
            a = 0
            target = su[0] * total
            run = e
            last = 0  # the last entry of positive weight, for u · total ≥ every running sum
            while a < c and target < run:
                sy[a] = 0
                a += 1
                if a < c:
                    target = su[a] * total
            if a < c:
                g = G[t, q] if first_order else cum  # cum: unused, of the same type
                a, last = _scan(prob[s], g, nxt[s], dq[q], nb_, first_order, run, target, su, sy, a, c, total)
            for b in range(a, c):
                sy[b] = last
            for b in range(c):
                alive = _advance(si[b], sy[b], t, s, q, Q, symbol, nxt, dq, out, lengths, ids, node, alive)
        m = alive
    return out, lengths, tables


@nb.njit(cache=True)
def kbest_kernel(num_nodes, in_offsets, in_arcs, arc_source, arc_weight, final, node_position, k):
    """k best paths as arc ids (k, max_len) −1 padded, with scores (k,) best first."""
    sc = np.full((num_nodes, k), NEG_INF)
    bp_arc = np.full((num_nodes, k), -1, dtype=np.int64)
    bp_rank = np.full((num_nodes, k), -1, dtype=np.int64)
    sc[0, 0] = 0.0
    for v in range(1, num_nodes):
        lo = in_offsets[v]
        hi = in_offsets[v + 1]
        m = (hi - lo) * k
        if m == 0:
            continue
        cand = np.empty(m)
        for q in range(lo, hi):
            a = in_arcs[q]
            u = arc_source[a]
            for r in range(k):
                cand[(q - lo) * k + r] = sc[u, r] + arc_weight[a]
        order = np.argsort(-cand, kind="mergesort")
        for r in range(min(k, m)):
            idx = order[r]
            if cand[idx] == NEG_INF:
                break
            sc[v, r] = cand[idx]
            bp_arc[v, r] = in_arcs[lo + idx // k]
            bp_rank[v, r] = idx % k
    cand = np.empty(num_nodes * k)
    for v in range(num_nodes):
        for r in range(k):
            cand[v * k + r] = sc[v, r] + final[v]
    order = np.argsort(-cand, kind="mergesort")
    max_len = 0
    for v in range(num_nodes):
        if node_position[v] > max_len:
            max_len = node_position[v]
    paths = np.full((k, max_len), -1, dtype=np.int64)
    scores = np.full(k, NEG_INF)
    for r in range(min(k, cand.shape[0])):
        idx = order[r]
        if cand[idx] == NEG_INF:
            break
        scores[r] = cand[idx]
        v = idx // k
        rank = idx % k
        while v != 0:
            a = bp_arc[v, rank]
            paths[r, node_position[v] - 1] = a
            rank = bp_rank[v, rank]
            v = arc_source[a]
    return paths, scores


# ---------------------------------------------------------------------------
# operations = the generic forward in a semiring, a finishing step; specialisations
# ---------------------------------------------------------------------------


def _forward_args(lat):
    return lat.num_nodes, lat.in_offsets, lat.in_arcs, lat.arc_source, lat.arc_weight, lat.final


def generic_kbest(lat, k: int):
    """The KBEST forward (k-best score lists per node) and the k-best backtrack: (arc ids
    (k, max_len), scores (k,)), as ``kbest_kernel``. ``lat`` is a validated
    :class:`varorder.lattice.Lattice` (its flat arrays are read)."""
    alphas = np.empty((lat.num_nodes, k))
    forward_kernel(KBEST)(*_forward_args(lat), alphas)
    return lattice_arcs(*_forward_args(lat), lat.node_position, alphas)


def generic_entropy(lat) -> float:
    """The EXPECTATION forward: (log Z, E[score]) → entropy (NaN without a path)."""
    alphas = np.empty((lat.num_nodes, 2))
    return float(entropy_of(forward_kernel(EXPECTATION)(*_forward_args(lat), alphas)))


def _kbest_fused(lat, k: int):
    """List Viterbi in one kernel (back-pointers kept during the forward pass)."""
    return kbest_kernel(*_forward_args(lat), lat.node_position, k)


def _entropy_fused(lat) -> float:
    """log Z − E[score] with E[score] from the LOG forward–backward marginals."""
    logz, _, arc, fin = marginals_kernel(lat.num_nodes, lat.in_offsets, lat.in_arcs, lat.out_offsets, lat.out_arcs,
                                         lat.arc_source, lat.arc_target, lat.arc_weight, lat.final)
    if logz == NEG_INF:
        return float("nan")
    used = arc > 0
    ends = fin > 0
    expected = float((arc[used] * lat.arc_weight[used]).sum() + (fin[ends] * lat.final[ends]).sum())
    return max(float(logz) - expected, 0.0)


# Registered specialisations of the operations: name → (semiring, fused kernel with the
# generic operation's signature and results; tests/test_engine_semiring_structured.py).
SPECIALISED = {"kbest": (KBEST, _kbest_fused), "entropy": (EXPECTATION, _entropy_fused)}
GENERIC = {"kbest": generic_kbest, "entropy": generic_entropy}


def operation(name: str, specialised: bool = True):
    """The function computing operation ``name`` (see :func:`varorder.engine.semiring.operation`)."""
    return choose(name, GENERIC, SPECIALISED, specialised)
