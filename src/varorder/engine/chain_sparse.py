"""Marginals of chains over states with sparse moves, the states emitting through a label map.

Factorization. S states, each with a label ``label[s]`` of K; a sequence of n positions
takes one state per position, and a state path scores

    s = start[s₁] + Σₜ E[t, label[sₜ]] + Σₜ₌₂ⁿ W[m(sₜ₋₁, sₜ)] + end[sₙ],

where the moves m = (src[m] → dst[m]) are the only allowed successions (every other one
scores −∞). This is the dense chain of :mod:`varorder.engine.chain` with an S × S
transition matrix of which only the M listed entries are finite, and with emissions
shared by the states of one label. Label-pair states of a second-order CRF (the move
(i, j) → (j, k)) are the case it is built for: M = S·K instead of S² products per
position, and no (n, S) emission array.

Recursion: the forward–backward of the dense chain (Rabiner 1989, §V.A's scaling), with
the sums over predecessors (successors) running over each state's listed moves only:

    α̂₀ ∝ exp(start) ⊙ ev₀,   α̂ₜ[d] ∝ evₜ[label d] · Σ_{m → d} α̂ₜ₋₁[src m] · w[m]   (Σ α̂ₜ = 1, cₜ the sum)
    β̂ₙ₋₁ ∝ exp(end),         β̂ₜ[s] = Σ_{m from s} w[m] · evₜ₊₁[label dst m] · β̂ₜ₊₁[dst m] / cₜ₊₁
    γₜ = α̂ₜ ⊙ β̂ₜ,            ξₜ(m) = α̂ₜ₋₁[src m] · w[m] · evₜ[label dst m] · β̂ₜ[dst m] / cₜ

with ev and w the exponentials of the emissions and move scores shifted by their maxima
(the shifts return in log Z). The exp-space path runs 32 sequences at a time, positions in
lockstep, the sequences innermost (vector arithmetic). Where a step's factors could
underflow (move scores or one position's emissions spread over more than ``_SPREAD``
nats, or a scale falls below the double range) the sequence takes the log-space path
instead, the same recursion with log-sum-exp over the listed moves, exact at any
magnitude. Both are tested against the dense engine (``tests/test_engine_chain_sparse.py``).

Outputs: log Z per sequence, node marginals summed over the states of each label (B, L, K),
and the expected count of every move summed over positions and sequences (M,).
"""

from __future__ import annotations

import numba as nb
import numpy as np

from varorder.engine.chain_scaled import _EXP_UNDERFLOW
from varorder.errors import ParameterError
import varorder._numba_start  # noqa: E402,F401,I001  (Numba's cache saves locked across processes)

__all__ = ["SparseMoves", "marginals"]

NEG_INF = -np.inf
# one step multiplies by w·ev ≥ e^(−_SPREAD) (shifted maxima are 1): two steps stay above 1e-295, within
# the doubles; a larger spread sends the sequence to the log-space path
_SPREAD = 340.0
_TINY = 1e-290
_BLOCK = 32


class SparseMoves:
    """The moves of a sparse chain: states' labels, and the moves listed by destination and by source."""

    def __init__(self, label, src, dst, n_labels: int):
        self.label = np.ascontiguousarray(label, dtype=np.int64)
        src = np.asarray(src, dtype=np.int64)
        dst = np.asarray(dst, dtype=np.int64)
        S = self.label.size
        if src.shape != dst.shape or src.ndim != 1:
            raise ParameterError(f"src and dst must be 1-d of one length, got {src.shape} and {dst.shape}",
                                 name="src", value=src.shape)
        if src.size and (min(src.min(), dst.min()) < 0 or max(src.max(), dst.max()) >= S):
            raise ParameterError(f"moves must join states 0 … {S - 1}", name="src", value=(src.min(), src.max()))
        if S and (self.label.min() < 0 or self.label.max() >= n_labels):
            raise ParameterError(f"state labels must lie in 0 … {n_labels - 1}", name="label", value=self.label)
        self.S, self.K, self.M = S, int(n_labels), src.size
        self.src, self.dst = src, dst
        self.by_dst = np.argsort(dst, kind="stable")  # moves grouped by destination (the forward's sums)
        self.dst_ptr = np.zeros(S + 1, dtype=np.int64)
        np.cumsum(np.bincount(dst, minlength=S), out=self.dst_ptr[1:])


def marginals(moves: SparseMoves, emissions, move_scores, start, end, lengths):
    """(log Z (B,), label node marginals (B, L, K), expected move counts (M,) summed over the batch).

    ``emissions`` (B, L, K) label scores, padded past each sequence's length; ``move_scores`` (M,) finite;
    ``start`` / ``end`` (S,) (−inf: the state may not start / end). A sequence with no path has log Z = −inf,
    zero marginals and adds nothing to the counts.
    """
    E = np.ascontiguousarray(emissions, dtype=np.float64)
    W = np.ascontiguousarray(move_scores, dtype=np.float64)
    start = np.ascontiguousarray(start, dtype=np.float64)
    end = np.ascontiguousarray(end, dtype=np.float64)
    n = np.ascontiguousarray(lengths, dtype=np.int64)
    B, L, K = E.shape
    if K != moves.K or W.shape != (moves.M,) or start.shape != (moves.S,) or end.shape != (moves.S,):
        raise ParameterError(f"emissions (B, L, {moves.K}), move_scores ({moves.M},), start and end ({moves.S},) "
                             f"expected; got {E.shape}, {W.shape}, {start.shape}, {end.shape}", name="emissions",
                             value=E.shape)
    if n.shape != (B,) or (B and (n.min() < 1 or n.max() > L)):
        raise ParameterError(f"lengths must be ({B},) in 1 … {L}", name="lengths", value=n)
    if not np.isfinite(W).all():
        raise ParameterError("move_scores must be finite (a forbidden move is left out of the moves)",
                             name="move_scores", value=W)
    logz = np.empty(B)
    node = np.zeros((B, L, K))
    counts = np.zeros(moves.M)
    if B == 0:
        return logz, node, counts
    order = np.argsort(-n, kind="stable")
    w_spread = float(W.max() - W.min()) if W.size else 0.0
    finite_start, finite_end = start[np.isfinite(start)], end[np.isfinite(end)]
    edges_spread = max(np.ptp(finite_start) if finite_start.size else 0.0,
                       np.ptp(finite_end) if finite_end.size else 0.0)
    position = np.arange(L)[None, :] < n[:, None]
    e_spread = np.where(position, E.max(axis=2) - E.min(axis=2), 0.0).max(axis=1)
    scaled = (e_spread + w_spread <= _SPREAD) & (edges_spread <= _SPREAD) & np.isfinite(E.max(axis=(1, 2)))
    _sparse_kernel(E, n, order, scaled, moves.label, moves.src, moves.dst, moves.by_dst, moves.dst_ptr, W, start, end,
                   logz, node, counts)
    return logz, node, counts


@nb.njit(cache=True)
def _sparse_kernel(E, n, order, scaled, label, src, dst, by_dst, dst_ptr, W, start, end, logz, node, counts):
    B, L, K = E.shape
    S = label.size
    M = src.size
    ws = NEG_INF
    for m in range(M):
        ws = max(ws, W[m])
    w = np.empty(M)
    for m in range(M):
        w[m] = np.exp(W[m] - ws)
    ss = NEG_INF
    es_end = NEG_INF
    for s in range(S):
        ss = max(ss, start[s])
        es_end = max(es_end, end[s])
    st = np.empty(S)
    en = np.empty(S)
    for s in range(S):
        st[s] = np.exp(start[s] - ss) if start[s] > NEG_INF else 0.0
        en[s] = np.exp(end[s] - es_end) if end[s] > NEG_INF else 0.0
    # the exp-space sequences in blocks (longest first), the others one by one in log space
    fast = np.empty(B, dtype=np.int64)
    slow = np.empty(B, dtype=np.int64)
    nf = 0
    ns = 0
    for i in range(B):
        b = order[i]
        if scaled[b] and ss > NEG_INF and es_end > NEG_INF:
            fast[nf] = b
            nf += 1
        else:
            slow[ns] = b
            ns += 1
    failed = np.zeros(B, dtype=np.bool_)
    alpha = np.empty((L, S, _BLOCK))
    ev = np.empty((L, K, _BLOCK))
    c = np.empty((L, _BLOCK))
    beta = np.empty((2, S, _BLOCK))
    evb = np.empty((S, _BLOCK))
    lz = np.empty(_BLOCK)
    zend = np.empty(_BLOCK)
    bad = np.empty(_BLOCK, dtype=np.bool_)
    acc = np.empty(_BLOCK)
    block_counts = np.zeros(M)
    for lo in range(0, nf, _BLOCK):
        hi = min(lo + _BLOCK, nf)
        nb_ = hi - lo
        Lb = n[fast[lo]]
        for i in range(nb_):
            b = fast[lo + i]
            lz[i] = ss + es_end + (n[b] - 1) * ws
            bad[i] = False
            for t in range(n[b]):
                mx = NEG_INF
                for k in range(K):
                    mx = max(mx, E[b, t, k])
                lz[i] += mx
                for k in range(K):
                    ev[t, k, i] = np.exp(E[b, t, k] - mx)
        # forward
        for s in range(S):
            e = ev[0, label[s]]
            for i in range(nb_):
                alpha[0, s, i] = st[s] * e[i]
        nact = nb_
        for t in range(Lb):
            while nact > 0 and n[fast[lo + nact - 1]] <= t:
                nact -= 1
            if t > 0:
                for d in range(S):
                    for i in range(nact):
                        acc[i] = 0.0
                    for p in range(dst_ptr[d], dst_ptr[d + 1]):
                        m = by_dst[p]
                        a = alpha[t - 1, src[m]]
                        wm = w[m]
                        for i in range(nact):
                            acc[i] += a[i] * wm
                    e = ev[t, label[d]]
                    for i in range(nact):
                        alpha[t, d, i] = acc[i] * e[i]
            for i in range(nact):
                acc[i] = 0.0
            for s in range(S):
                for i in range(nact):
                    acc[i] += alpha[t, s, i]
            for i in range(nact):
                total = acc[i]
                if not (total > _TINY) or not np.isfinite(total):
                    bad[i] = True
                    total = 1.0
                c[t, i] = total
                lz[i] += np.log(total)
                inv = 1.0 / total
                for s in range(S):
                    alpha[t, s, i] *= inv
        # the end and the backward's first plane
        for i in range(nb_):
            b = fast[lo + i]
            last = n[b] - 1
            total = 0.0
            for s in range(S):
                total += alpha[last, s, i] * en[s]
            if not (total > _TINY) or not np.isfinite(total):
                bad[i] = True
                total = 1.0
            zend[i] = total
            lz[i] += np.log(total)
        # backward with node marginals and move counts: positions from the last down
        for t in range(Lb - 1, -1, -1):
            cur = t & 1
            nxt = 1 - cur
            nrec = 0  # sequences with a position t + 1 (a prefix)
            while nrec < nb_ and n[fast[lo + nrec]] > t + 1:
                nrec += 1
            nlive = nrec  # and those whose last position is t
            while nlive < nb_ and n[fast[lo + nlive]] > t:
                nlive += 1
            for s in range(S):
                for i in range(nrec):
                    beta[cur, s, i] = 0.0
                for i in range(nrec, nlive):
                    beta[cur, s, i] = en[s] / zend[i]
            if nrec > 0:
                for d in range(S):
                    e = ev[t + 1, label[d]]
                    bb = beta[nxt, d]
                    for i in range(nrec):
                        evb[d, i] = e[i] * bb[i] / c[t + 1, i]
                for m in range(M):
                    a = alpha[t, src[m]]
                    x = evb[dst[m]]
                    out = beta[cur, src[m]]
                    wm = w[m]
                    total = 0.0
                    for i in range(nrec):
                        v = wm * x[i]
                        out[i] += v
                        if not bad[i]:
                            total += a[i] * v
                    block_counts[m] += total
            for i in range(nlive):
                if bad[i]:
                    continue
                b = fast[lo + i]
                for s in range(S):
                    node[b, t, label[s]] += alpha[t, s, i] * beta[cur, s, i]
        for i in range(nb_):
            b = fast[lo + i]
            if bad[i]:
                failed[b] = True
                node[b, :, :] = 0.0
            else:
                logz[b] = lz[i]
    # a failed sequence's move counts were left out above; it is redone in log space
    for m in range(M):
        counts[m] += block_counts[m]
    for b in range(B):
        if failed[b]:
            slow[ns] = b
            ns += 1
    if ns:
        la = np.empty((L, S))
        lb = np.empty((L, S))
        row = np.empty(S)
        for j in range(ns):
            b = slow[j]
            logz[b] = _log_one(E[b], n[b], label, src, dst, by_dst, dst_ptr, W, start, end, la, lb, row,
                               node[b], counts)


@nb.njit(cache=True)
def _log_one(E, n, label, src, dst, by_dst, dst_ptr, W, start, end, la, lb, row, node, counts):
    """One sequence in log space, rows shifted to a largest entry of 0 (no under- or overflow): its log Z;
    node marginals into ``node`` (L, K), move counts added to ``counts``."""
    S = label.size
    M = src.size
    total = 0.0
    for s in range(S):
        la[0, s] = start[s] + E[0, label[s]]
    for t in range(n):
        if t > 0:
            for d in range(S):
                mx = NEG_INF
                for p in range(dst_ptr[d], dst_ptr[d + 1]):
                    m = by_dst[p]
                    mx = max(mx, la[t - 1, src[m]] + W[m])
                if mx == NEG_INF:
                    la[t, d] = NEG_INF
                    continue
                acc = 0.0
                for p in range(dst_ptr[d], dst_ptr[d + 1]):
                    m = by_dst[p]
                    x = la[t - 1, src[m]] + W[m] - mx
                    if x > _EXP_UNDERFLOW:
                        acc += np.exp(x)
                la[t, d] = mx + np.log(acc) + E[t, label[d]]
        mx = NEG_INF
        for s in range(S):
            mx = max(mx, la[t, s])
        if mx == NEG_INF:
            node[:, :] = 0.0
            return NEG_INF
        for s in range(S):
            la[t, s] -= mx
        total += mx
    mx = NEG_INF
    for s in range(S):
        mx = max(mx, la[n - 1, s] + end[s])
    if mx == NEG_INF:
        node[:, :] = 0.0
        return NEG_INF
    acc = 0.0
    for s in range(S):
        x = la[n - 1, s] + end[s] - mx
        if x > _EXP_UNDERFLOW:
            acc += np.exp(x)
    logz = total + mx + np.log(acc)
    # backward, rows shifted likewise
    for s in range(S):
        lb[n - 1, s] = end[s]
    for t in range(n - 2, -1, -1):
        for s in range(S):
            row[s] = NEG_INF
        for m in range(M):
            v = W[m] + E[t + 1, label[dst[m]]] + lb[t + 1, dst[m]]
            row[src[m]] = max(row[src[m]], v)
        for s in range(S):
            lb[t, s] = 0.0
        for m in range(M):
            if row[src[m]] == NEG_INF:
                continue
            x = W[m] + E[t + 1, label[dst[m]]] + lb[t + 1, dst[m]] - row[src[m]]
            if x > _EXP_UNDERFLOW:
                lb[t, src[m]] += np.exp(x)
        mx = NEG_INF
        for s in range(S):
            lb[t, s] = row[s] + np.log(lb[t, s]) if row[s] > NEG_INF and lb[t, s] > 0.0 else NEG_INF
            mx = max(mx, lb[t, s])
        if mx > NEG_INF:
            for s in range(S):
                lb[t, s] -= mx
    # node marginals and move counts, each position normalised on its own
    for t in range(n):
        mx = NEG_INF
        for s in range(S):
            mx = max(mx, la[t, s] + lb[t, s])
        acc = 0.0
        for s in range(S):
            x = la[t, s] + lb[t, s] - mx
            row[s] = np.exp(x) if x > _EXP_UNDERFLOW else 0.0
            acc += row[s]
        for s in range(S):
            node[t, label[s]] += row[s] / acc
        if t == 0:
            continue
        mx = NEG_INF
        for m in range(M):
            mx = max(mx, la[t - 1, src[m]] + W[m] + E[t, label[dst[m]]] + lb[t, dst[m]])
        acc = 0.0
        for m in range(M):
            x = la[t - 1, src[m]] + W[m] + E[t, label[dst[m]]] + lb[t, dst[m]] - mx
            if x > _EXP_UNDERFLOW:
                acc += np.exp(x)
        for m in range(M):
            x = la[t - 1, src[m]] + W[m] + E[t, label[dst[m]]] + lb[t, dst[m]] - mx
            if x > _EXP_UNDERFLOW:
                counts[m] += np.exp(x) / acc
    return logz
