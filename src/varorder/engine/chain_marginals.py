"""Node and edge marginals, the expected transition score and entropy of dense chains:
the blocked scaled backward pass and posteriors (LOG fast path), with the log-space
fallback per sequence. See :mod:`varorder.engine.chain`."""

from __future__ import annotations

import numba as nb
import numpy as np

from varorder.engine.chain_generic import NEG_INF, _TINY
from varorder.engine.chain_scaled import (_EXP_UNDERFLOW, _CHUNK, _FAST_REDUCE, _KEEP_BACKWARD, _block_bounds, _normalised_log_forward, _plane,
                                          _pow2_scale, _product_rows, _shifted_logsumexp_row, _vec_mat_rows)
from varorder.engine.chain_forward import _block_forward, _block_transitions, _chain_blocks
import varorder._numba_start  # noqa: E402,F401,I001  (Numba's cache saves locked across processes)

__all__ = []  # kernels for engine.chain only


@nb.njit(cache=True, fastmath=_FAST_REDUCE)
def _node_row(a, ta, bb, tb, s, node, b, t):
    """node[b, t] = a[ta, s] ⊙ bb[tb, s] normalised (a, bb: (positions, rows, K)); returns
    the normaliser."""
    K = a.shape[2]
    # the sum in a loop of its own that stores nothing: a reassociated sum in a loop that also stores
    # is compiled twice behind a run-time check on where the arrays lie (vector sum if ``node`` is far enough
    # from ``a`` and ``bb``, sequential sum if not), so its last bits depended on the heap's layout — with
    # worker threads allocating, on timing
    total = 0.0
    for j in range(K):
        total += a[ta, s, j] * bb[tb, s, j]
    inv = 1.0 / total
    for j in range(K):
        node[b, t, j] = (a[ta, s, j] * bb[tb, s, j]) * inv
    return total


@nb.njit(cache=True)
def _node_rows(a, bb, tb, rows, seqs, t, node, node_total, ok):
    """Position t's node marginals of the rows s < rows with ok[s]: a[t, s] ⊙ bb[tb, s]
    normalised into node[seqs[s], t], the normaliser into node_total[t, s]."""
    for s in range(rows):
        if ok[s]:
            node_total[t, s] = _node_row(a, t, bb, tb, s, node, seqs[s], t)


@nb.njit(cache=True)
def _node_sequences(a, bb, seqs, lengths, node, node_total, ok):
    """Every position's node marginals of each row s with ok[s], sequence by sequence (bb
    holds every position)."""
    for s in range(seqs.shape[0]):
        if ok[s]:
            for t in range(lengths[seqs[s]]):
                node_total[t, s] = _node_row(a, t, bb, t, s, node, seqs[s], t)


@nb.njit(cache=True)
def _block_backward(seqs, lengths, shared, expT_t, min_expT, dense, exp_end, a_buf, ev_buf, bb_buf, tmp_buf, acc_buf,
                    ok, bscale, node, node_total, store_bb):
    """Scaled backward for a block (buffers as ``_block_forward`` with store); clears ok[s]
    on a possible underflow (only checked for matrices with zeros: the forward's guard
    covers dense ones). expT_t is (Tb, K, K) exp-transitions transposed, so each step is
    tmp @ expT_t. bscale[t, s] receives the power of two f with
    expT @ (ev[t]·bb[t]) = bb[t − 1] / f.

    With ``store_bb`` bb_buf keeps every position and node marginals are written after the
    backward, sequence by sequence in position order (one forward stream through node: in
    the backward's order — 32 sequences' rows, positions descending — writing them costs
    2.6× as much). Without it bb_buf holds two alternating planes and node marginals are
    written as soon as bb[t] exists, while the planes are in cache (long sequences, whose
    planes would not stay there). node_total[t, s] = a[t]·bb[t] either way."""
    nseq = seqs.shape[0]
    K = expT_t.shape[1]
    L = lengths[seqs[0]]
    tmp_all = tmp_buf[:nseq * K].reshape((nseq, K))
    acc_all = acc_buf[:nseq * K].reshape((nseq, K))
    ev_all = ev_buf[:nseq * L * K].reshape((nseq, L, K))
    a_all = a_buf[:L * nseq * K].reshape((L, nseq, K))
    bb_all = bb_buf[:(L if store_bb else 2) * nseq * K].reshape((L if store_bb else 2, nseq, K))
    totals = np.empty(nseq)
    smalls = np.empty(nseq)
    end_total = 0.0
    for j in range(K):
        end_total += exp_end[j]
    for s in range(nseq):
        if ok[s]:
            n = lengths[seqs[s]]
            last = _plane(bb_buf, n - 1 if store_bb else (n - 1) & 1, nseq, nseq, K)
            for j in range(K):
                last[s, j] = exp_end[j] / end_total
    nact = 0  # rows with a position t (a prefix that grows as t falls)
    for t in range(L - 1, 0, -1):
        first = nact
        while nact < nseq and lengths[seqs[nact]] > t:
            nact += 1
        if nact > first and not store_bb:  # rows whose last position is t: their node marginals there
            last_ok = ok.copy()
            last_ok[:first] = False
            _node_rows(a_all, bb_all, t & 1, nact, seqs, t, node, node_total, last_ok)
        bb_t = _plane(bb_buf, t if store_bb else t & 1, nseq, nseq, K)
        bb_prev = _plane(bb_buf, t - 1 if store_bb else (t - 1) & 1, nseq, nseq, K)
        _product_rows(bb_t, ev_all, t, tmp_all, nact, ok, shared, dense, totals, smalls)
        for s in range(nact):
            if ok[s] and (smalls[s] < _TINY or smalls[s] * min_expT[0 if shared else s] < _TINY):
                ok[s] = False
            if not ok[s]:
                tmp_all[s, :] = 0.0
        if shared:
            np.dot(tmp_all[:nact], expT_t[0], acc_all[:nact])
        else:
            _vec_mat_rows(tmp_all, expT_t, acc_all, nact, ok)
        for s in range(nact):
            if not ok[s]:
                continue
            total = 0.0
            for j in range(K):
                total += acc_all[s, j]
            if total == 0.0:
                ok[s] = False
                continue
            f, _ = _pow2_scale(total)
            for j in range(K):
                bb_prev[s, j] = acc_all[s, j] * f
            bscale[t, s] = f
        if not store_bb:
            _node_rows(a_all, bb_all, (t - 1) & 1, nact, seqs, t - 1, node, node_total, ok)
    if store_bb:
        _node_sequences(a_all, bb_all, seqs, lengths, node, node_total, ok)
    elif L == 1 or nact < nseq:  # sequences of length 1
        only = ok.copy()
        only[:nact] = False
        _node_rows(a_all, bb_all, 0, nseq, seqs, 0, node, node_total, only)


# ---------------------------------------------------------------------------
# marginals, expected transition score, entropy
# ---------------------------------------------------------------------------


@nb.njit(cache=True, fastmath=_FAST_REDUCE)
def _scaled_posteriors(a, ev, bb, bscale, s, n, expT, T, edge, edge_sum, want_edges, want_sum, want_texp,
                       node_total, U_buf, V_buf, outer):
    """Edge marginals per position / summed / E[Σ transition score] of row s of a block from
    its scaled forward (a, (L, nseq, K)), exp-emissions (ev, (nseq, L, K)), backward (bb) and
    node_total (a·bb).

    ξₜ(i, j) = a[t−1, i]·expT[i, j]·ev[t, j]·bb[t, j]·f / (a[t−1]·bb[t−1]) with f = bscale[t]:
    the backward's own product gives the normaliser. Returns E[Σₜ T[yₜ₋₁, yₜ]] (if want_texp).
    """
    K = expT.shape[0]
    texp = 0.0
    if n < 2 or not (want_edges or want_sum or want_texp):
        return texp
    U = U_buf[:(n - 1) * K].reshape((n - 1, K))
    V = V_buf[:(n - 1) * K].reshape((n - 1, K))
    for t in range(1, n):
        scale = bscale[t, s] / node_total[t - 1, s]
        for i in range(K):
            U[t - 1, i] = a[t - 1, s, i] * scale
        for j in range(K):
            V[t - 1, j] = ev[s, t, j] * bb[t, s, j]
    if want_edges:
        for t in range(n - 1):
            for i in range(K):
                u = U[t, i]
                for j in range(K):
                    edge[t, i, j] = u * expT[i, j] * V[t, j]
    if want_sum or want_texp:
        # Σₜ ξₜ = expT ⊙ (Uᵀ V): the sum over positions as one GEMM
        np.dot(U.T, V, outer)
        for i in range(K):
            for j in range(K):
                w = expT[i, j] * outer[i, j]
                if want_sum:
                    edge_sum[i, j] += w
                if want_texp and w > 0.0:
                    texp += w * T[i, j]
    return texp


@nb.njit(cache=True)
def _normalised_log_backward(E, T, end, n, bb, row):
    """The log-space backward with every row shifted to a largest entry of 0 (as
    ``_normalised_log_forward``; called only when log Z is finite, so every row has a
    finite entry). ``row`` is K scratch."""
    K = E.shape[1]
    m = NEG_INF
    for j in range(K):
        m = max(m, end[j])
    for j in range(K):
        bb[n - 1, j] = end[j] - m
    for t in range(n - 1, 0, -1):
        for i in range(K):
            for j in range(K):
                row[j] = T[i, j] + E[t, j] + bb[t, j]
            m, ls = _shifted_logsumexp_row(row)
            bb[t - 1, i] = m + ls if m != NEG_INF else NEG_INF
        m = NEG_INF
        for i in range(K):
            m = max(m, bb[t - 1, i])
        for i in range(K):
            bb[t - 1, i] -= m


@nb.njit(cache=True)
def _log_marginals_one(E, T, start, end, n, node, edge, edge_sum, want_edges, want_sum, want_texp, work):
    """The log-space path of one sequence (no scaling, no underflow): (log Z, E[Σ transition score]).

    ``work`` is (2, L, K) scratch. Outputs as in ``_scaled_posteriors``. Forward and
    backward rows are kept shifted to a largest entry of 0 (``_normalised_log_forward``),
    and marginals normalised per position, so that long chains lose nothing to the size
    of log alpha.
    """
    K = E.shape[1]
    a = work[0]
    bb = work[1]
    row = np.empty(K)
    texp = 0.0
    z = _normalised_log_forward(E, T, start, end, n, a, row)
    if z == NEG_INF:
        return z, texp
    _normalised_log_backward(E, T, end, n, bb, row)
    for t in range(n):
        m = NEG_INF
        for j in range(K):
            v = a[t, j] + bb[t, j]
            if v > m:
                m = v
        s = 0.0
        for j in range(K):
            d = a[t, j] + bb[t, j] - m
            v = np.exp(d) if d > _EXP_UNDERFLOW else 0.0
            node[t, j] = v
            s += v
        for j in range(K):
            node[t, j] /= s
    if want_edges or want_sum or want_texp:
        xi = np.empty((K, K))
        for t in range(1, n):
            m = NEG_INF
            for i in range(K):
                for j in range(K):
                    v = a[t - 1, i] + T[i, j] + E[t, j] + bb[t, j]
                    xi[i, j] = v
                    if v > m:
                        m = v
            s = 0.0
            for i in range(K):
                for j in range(K):
                    d = xi[i, j] - m
                    v = np.exp(d) if d > _EXP_UNDERFLOW else 0.0
                    xi[i, j] = v
                    s += v
            for i in range(K):
                for j in range(K):
                    v = xi[i, j] / s
                    if want_edges:
                        edge[t - 1, i, j] = v
                    if want_sum:
                        edge_sum[i, j] += v
                    if want_texp and v > 0.0:
                        texp += v * T[i, j]
    return z, texp


@nb.njit(cache=True, parallel=True)
def _marginals_kernel(E, T, start, end, lengths, order, block, expT, tshift, min_expT, dense, exp_end, min_exp_end,
                      end_shift, emission_low, node, edge, edge_sum, texp, want_edges, want_sum, want_texp, num_chunks):
    """log Z, node marginals and, as asked, edge marginals per position, summed over
    positions, or the expected transition score (texp) of every sequence."""
    B, L, K = E.shape
    shared = T.shape[0] == 1
    out = np.empty(B)
    dummy = np.zeros((0, K, K))
    for c in nb.prange(num_chunks):
        k0, k1, num_blocks = _chain_blocks(lengths, block, order, num_chunks, c)
        a_buf = np.zeros(L * block * K)
        ev_buf = np.zeros(L * block * K)
        want_extra = want_edges or want_sum or want_texp
        keep_bb = want_extra or L * block * K <= _KEEP_BACKWARD  # bb per position: node marginals afterwards
        bb_buf = np.zeros((L if keep_bb else 2) * block * K)
        acc_buf = np.zeros(block * K)
        tmp_buf = np.zeros(block * K)
        bits = np.empty(_CHUNK * K, dtype=np.int64)
        logz = np.empty(block)
        ok = np.empty(block, dtype=np.bool_)
        amin = np.empty(block)
        low = np.empty(block)
        bscale = np.empty((L, block))
        tb = 1 if shared else block
        expT_s = np.empty((tb, K, K))
        expT_t_s = np.empty((tb, K, K))
        tshift_s = np.empty(tb)
        min_expT_s = np.empty(tb)
        dense_s = np.empty(tb, dtype=np.bool_)
        expT_t = np.empty((1, K, K))
        if shared:
            expT_t[0] = expT[0].T
        work = np.empty((2, L, K))
        node_total = np.empty((L, block))
        U = np.empty(max(L - 1, 1) * K)
        V = np.empty(max(L - 1, 1) * K)
        outer = np.empty((K, K))
        for k in range(k0, k1):
            lo, hi = _block_bounds(k, num_blocks, B)
            seqs = order[lo:hi]
            nseq = hi - lo
            if shared:
                ex, ex_t, cm, mins, dn = expT, expT_t, tshift, min_expT, dense
            else:
                _block_transitions(T, seqs, expT_s, tshift_s, min_expT_s, dense_s, True, expT_t_s)
                ex, ex_t, cm, mins, dn = expT_s, expT_t_s, tshift_s, min_expT_s, dense_s
            _block_forward(E, seqs, lengths, shared, ex, cm, mins, dn, start, exp_end, min_exp_end, end_shift,
                           emission_low, True,
                           a_buf, ev_buf, acc_buf, bits, logz, ok, amin, low)
            impossible = np.zeros(nseq, dtype=np.bool_)
            for s in range(nseq):
                if ok[s] and logz[s] == NEG_INF:  # nothing to propagate backwards
                    ok[s] = False
                    impossible[s] = True
            _block_backward(seqs, lengths, shared, ex_t, mins, dn, exp_end, a_buf, ev_buf, bb_buf, tmp_buf, acc_buf,
                            ok, bscale, node, node_total, keep_bb)
            La = lengths[seqs[0]]
            a = a_buf[:La * nseq * K].reshape((La, nseq, K))
            ev = ev_buf[:nseq * La * K].reshape((nseq, La, K))
            Lb = La if want_extra else 1  # bb is only read back for edges / sums
            bb = bb_buf[:Lb * nseq * K].reshape((Lb, nseq, K))
            for s in range(nseq):
                b = seqs[s]
                n = lengths[b]
                Tb = T[0 if shared else b]
                eb = edge[b] if want_edges else dummy
                sb = edge_sum[b] if want_sum else dummy[0]
                if impossible[s]:
                    out[b] = NEG_INF
                elif ok[s]:
                    out[b] = logz[s]
                    if want_extra:
                        texp[b] = _scaled_posteriors(a, ev, bb, bscale, s, n, ex[0 if shared else s], Tb, eb, sb,
                                                     want_edges, want_sum, want_texp, node_total, U, V, outer)
                else:
                    out[b], texp[b] = _log_marginals_one(E[b], Tb, start, end, n, node[b], eb, sb, want_edges,
                                                         want_sum, want_texp, work)
                # node arrives uninitialised (no calloc of B·L·K): clear what no path wrote
                node[b, 0 if out[b] == NEG_INF else n:, :] = 0.0
    return out


@nb.njit(cache=True)
def _entropy_finish(E, start, end, lengths, node, logz, texp):
    """H = log Z − E[s(y)] from node marginals and the expected transition score."""
    B, L, K = E.shape
    out = np.empty(B)
    for b in range(B):
        n = lengths[b]
        if logz[b] == NEG_INF:
            out[b] = np.nan
            continue
        escore = texp[b]
        for t in range(n):
            for j in range(K):
                p = node[b, t, j]
                if p > 0.0:
                    escore += p * E[b, t, j]
                    if t == 0:
                        escore += p * start[j]
                    if t == n - 1:
                        escore += p * end[j]
        h = logz[b] - escore
        out[b] = h if h > 0.0 else 0.0
    return out


