"""The blocked scaled forward pass and the log Z kernel of dense chains (LOG semiring
fast path; a sequence whose products could underflow is redone in log space, rows shifted
to a largest entry of 0: ``chain_scaled._normalised_log_forward``). See :mod:`varorder.engine.chain`.
``_shared_scaling`` exponentiates a shared transition matrix and the end potentials for every
path (batch and small input, so both see the same bits); ``_logz_small`` is the small-input path:
checks and sums a batch of a few equal-length sequences in one compiled call, on the serial twin
of ``_logz_kernel``."""

from __future__ import annotations

import math

import numba as nb
import numpy as np

from varorder.engine.chain_generic import NEG_INF, _TINY
from varorder.engine.chain_scaled import _CHUNK, _LN2_HI, _LN2_LO, _MIN_SHIFTED, _block_bounds, _exp_chunk, _exp_matrix, _normalised_log_forward, _plane, _pow2_scale, _product_rows, _vec_mat_rows
from varorder.engine.potential_scan import checked_top
from varorder.engine.threads import serial_twin

__all__ = []  # kernels for engine.chain only


@nb.njit(cache=True)
def _block_forward(E, seqs, lengths, shared, expT, tshift, min_expT, dense, start, exp_end, min_exp_end,
                   end_shift, emission_low, store, a_buf, ev_buf, acc_buf, bits, logz, ok, amin, low):
    """Scaled forward of the sequences ``seqs`` (decreasing lengths) advancing together.

    expT (Tb, K, K) = exp(T − tshift), tshift (Tb,), min_expT (Tb,), dense (Tb,): row s uses index 0 when
    ``shared`` (one BLAS product per position) and s otherwise. With ``store`` a_buf holds
    every position ((L, nseq, K) flat, a[t] ∝ alpha[t]) and ev_buf every shifted
    exp-emission, sequence by sequence ((nseq, L, K) flat, L the block's longest length);
    otherwise a_buf holds two alternating planes and ev_buf _CHUNK positions per sequence. On return logz[s] is log Z;
    ok[s] False marks a sequence to redo in log space (a possible underflow).

    Underflow guard. With a dense matrix (no zero entry) every entry of a[t] (rows scaled
    to sum in [½, 1)) is ≥ min_expT·e^{lowest_t}/(4K), lowest_t the smallest shifted
    log-emission, so one scalar test per step bounds every product the forward *and* the
    backward will form; a matrix with hard zeros tracks the smallest product instead.
    """
    nseq = seqs.shape[0]
    K = E.shape[2]
    L = lengths[seqs[0]]
    acc_all = acc_buf[:nseq * K].reshape((nseq, K))
    Eflat = E.reshape(-1)
    Ebits = Eflat.view(np.int64)
    Lbuf = E.shape[1]
    w = np.zeros(_CHUNK * K)
    wbits = w.view(np.int64)
    # exp-emissions sequence by sequence: (nseq, L, K) with store, else (nseq, _CHUNK, K)
    ev_stride = (L if store else _CHUNK) * K
    ev_all = ev_buf[:nseq * ev_stride].reshape((nseq, L if store else _CHUNK, K))
    conv = np.empty(2, dtype=np.int64)
    convf = conv.view(np.float64)
    row_max = np.empty((_CHUNK, nseq))
    row_low = np.empty((_CHUNK, nseq))
    totals = np.empty(nseq)
    smalls = np.empty(nseq)
    alive = np.ones(nseq, dtype=np.bool_)
    log_4k = np.log(4.0 * K)
    # log Z = Σ_t m_t + (Σ_t e_t)·ln 2 + the end term: the powers of two are counted exactly
    # (an integer); the shifts m_t are summed per chunk of positions (a short plain sum) and
    # the chunk sums added with Kahan's compensation, so over 10⁴ steps log Z loses nothing
    # to rounding (one running sum drifted by ~1e-13 relative) at one add per step.
    exps = np.zeros(nseq, dtype=np.int64)
    part = np.zeros(nseq)
    comp = np.zeros(nseq)
    log_tiny = np.log(_TINY)
    log_end = np.log(min_exp_end)
    log_min_expT = np.log(min_expT[:1 if shared else nseq])
    for s in range(nseq):
        logz[s] = 0.0
        ok[s] = min_expT[0 if shared else s] > 0.0
        alive[s] = ok[s]
        amin[s] = 1.0
        low[s] = 0.0
    nact = nseq
    for t in range(L):
        while lengths[seqs[nact - 1]] <= t:
            nact -= 1
        p = t % _CHUNK
        if p == 0:  # the shifted exp-emissions of the next _CHUNK positions
            _exp_chunk(Eflat, Ebits, Lbuf, seqs, lengths, t, min(t + _CHUNK, L), start, tshift, not shared,
                       emission_low, w, wbits,
                       ev_buf, t * K if store else 0, ev_stride, bits, conv, convf, row_max, row_low)
        pa = t if store else t & 1
        a_t = _plane(a_buf, pa, nseq, nseq, K)
        if t == 0:
            acc_all[:, :] = 1.0
        else:
            a_prev = _plane(a_buf, t - 1 if store else (t - 1) & 1, nact, nseq, K)
            if shared:
                np.dot(a_prev, expT[0], acc_all[:nact])
            else:
                _vec_mat_rows(a_prev, expT, acc_all, nact, alive)
        _product_rows(acc_all, ev_all, t if store else p, a_t, nact, alive, shared, dense, totals, smalls)
        for s in range(nact):
            if not alive[s]:
                a_t[s, :] = 0.0
                continue
            b = seqs[s]
            ts = 0 if shared else s
            m = row_max[p, s]
            lowest = row_low[p, s]
            if m == NEG_INF:  # no label allowed here: a genuine log Z = −inf
                logz[s] = NEG_INF
                alive[s] = False
                a_t[s, :] = 0.0
                continue
            total = totals[s]
            small = smalls[s]
            lme = log_min_expT[ts]
            fail = lowest < _MIN_SHIFTED
            if t == 0:
                small = np.exp(lowest)
            elif dense[ts]:
                fail = fail or lowest + low[s] + 2.0 * lme - log_4k < log_tiny
            else:
                # every product a_i·expT_ij formed this step is ≥ amin · min_expT
                fail = fail or amin[s] * min_expT[ts] < _TINY
            fail = fail or small < _TINY or total == 0.0
            if not fail:
                f, e = _pow2_scale(total)
                for j in range(K):
                    a_t[s, j] *= f
                amin[s] = small * f
                low[s] = lowest
                exps[s] += e
                part[s] += m
                last = t == lengths[b] - 1
                if last or p == _CHUNK - 1:
                    y = part[s] - comp[s]
                    summed = logz[s] + y
                    comp[s] = (summed - logz[s]) - y
                    logz[s] = summed
                    part[s] = 0.0
                if last:
                    fin = 0.0
                    for j in range(K):
                        fin += a_t[s, j] * exp_end[j]
                    if dense[ts]:
                        fail = lowest + lme + log_end - log_4k < log_tiny
                    else:
                        fail = amin[s] * min_exp_end < _TINY
                    fail = fail or fin == 0.0
                    # exps·_LN2_HI is exact (ln 2's high part has 32 trailing zero bits)
                    logz[s] = (exps[s] * _LN2_HI + logz[s]) + (exps[s] * _LN2_LO - comp[s] + end_shift + np.log(fin))
            if fail:
                ok[s] = False
                alive[s] = False
                a_t[s, :] = 0.0


@nb.njit(cache=True)
def _chain_blocks(lengths, block, order, num_chunks, c):
    """Blocks [k0, k1) handled by chunk c, and the number of blocks."""
    B = order.shape[0]
    num_blocks = (B + block - 1) // block
    return c * num_blocks // num_chunks, (c + 1) * num_blocks // num_chunks, num_blocks


@nb.njit(cache=True)
def _block_transitions(T, seqs, expT_s, tshift_s, min_expT_s, dense_s, want_t, expT_t_s):
    """Exp-transitions of each sequence of a block (per-sequence matrices)."""
    K = T.shape[1]
    w = np.empty(K * K)
    bits = np.empty(K * K, dtype=np.int64)
    conv = np.empty(1, dtype=np.int64)
    convf = conv.view(np.float64)
    for s in range(seqs.shape[0]):
        tshift_s[s], min_expT_s[s], dense_s[s] = _exp_matrix(T[seqs[s]], expT_s[s], w, bits, conv, convf)
        if want_t:
            for i in range(K):
                for j in range(K):
                    expT_t_s[s, j, i] = expT_s[s, i, j]


@nb.njit(cache=True, parallel=True)
def _logz_kernel(E, T, start, end, lengths, order, block, expT, tshift, min_expT, dense, exp_end, min_exp_end,
                 end_shift, emission_low, num_chunks):
    B, L, K = E.shape
    shared = T.shape[0] == 1
    out = np.empty(B)
    for c in nb.prange(num_chunks):
        k0, k1, num_blocks = _chain_blocks(lengths, block, order, num_chunks, c)
        a_buf = np.zeros(2 * block * K)
        ev_buf = np.zeros(_CHUNK * block * K)
        acc_buf = np.zeros(block * K)
        bits = np.empty(_CHUNK * K, dtype=np.int64)
        logz = np.empty(block)
        ok = np.empty(block, dtype=np.bool_)
        amin = np.empty(block)
        low = np.empty(block)
        tb = 1 if shared else block
        expT_s = np.empty((tb, K, K))
        tshift_s = np.empty(tb)
        min_expT_s = np.empty(tb)
        dense_s = np.empty(tb, dtype=np.bool_)
        fallback = np.empty((L, K))
        row = np.empty(K)
        for k in range(k0, k1):
            lo, hi = _block_bounds(k, num_blocks, B)
            seqs = order[lo:hi]
            if shared:
                _block_forward(E, seqs, lengths, True, expT, tshift, min_expT, dense, start, exp_end, min_exp_end,
                               end_shift, emission_low, False, a_buf, ev_buf, acc_buf, bits, logz, ok, amin, low)
            else:
                _block_transitions(T, seqs, expT_s, tshift_s, min_expT_s, dense_s, False, expT_s)
                _block_forward(E, seqs, lengths, False, expT_s, tshift_s, min_expT_s, dense_s, start, exp_end,
                               min_exp_end, end_shift, emission_low, False, a_buf, ev_buf, acc_buf, bits, logz, ok, amin, low)
            for s in range(hi - lo):
                b = seqs[s]
                if ok[s]:
                    out[b] = logz[s]
                else:
                    out[b] = _normalised_log_forward(E[b], T[0 if shared else b], start, end, lengths[b], fallback, row)
    return out




# the same loops without a parallel region (engine.chain decides with threads.runs_serial)
_logz_serial = serial_twin(_logz_kernel, cache=True)


@nb.njit(cache=True)
def _end_scaling(end):
    """(exp(end − c), its smallest nonzero entry (1 if none), c): c the largest finite entry of end (0 if none).
    Scalar loops and ``math.exp`` (no array expressions: the cached code loads in a few ms)."""
    K = end.shape[0]
    c = NEG_INF
    for j in range(K):
        c = max(c, end[j])
    if not np.isfinite(c):
        c = 0.0
    exp_end = np.empty(K)
    smallest = np.inf
    for j in range(K):
        e = math.exp(end[j] - c)
        exp_end[j] = e
        if e > 0.0:
            smallest = min(smallest, e)
    return exp_end, smallest if smallest < np.inf else 1.0, c


@nb.njit(cache=True)
def _shared_scaling(T, end):
    """exp(T − c) of one shared (K, K) matrix, c its largest finite entry (0 if none), as (1, K, K); c (1,); the
    smallest nonzero entry (1,) — 1 if none, 0 when a finite entry lies more than 600 nats below c (never the
    scaled path); whether no entry is zero (1,); then :func:`_end_scaling` of end."""
    K = T.shape[0]
    top = NEG_INF
    for i in range(K):
        for j in range(K):
            top = max(top, T[i, j])
    if not np.isfinite(top):
        top = 0.0
    expT = np.empty((1, K, K))
    smallest = np.inf
    too_small = False
    dense = True
    for i in range(K):
        for j in range(K):
            shifted = T[i, j] - top
            e = math.exp(shifted)
            expT[0, i, j] = e
            if e > 0.0:
                smallest = min(smallest, e)
            else:
                dense = False
            too_small = too_small or (shifted < _MIN_SHIFTED and shifted != NEG_INF)
    if too_small:
        smallest = 0.0
    elif smallest == np.inf:
        smallest = 1.0
    exp_end, min_exp_end, end_shift = _end_scaling(end)
    tshift, min_expT, dense_out = np.empty(1), np.empty(1), np.empty(1, dtype=np.bool_)
    tshift[0], min_expT[0], dense_out[0] = top, smallest, dense
    return expT, tshift, min_expT, dense_out, exp_end, min_exp_end, end_shift


# Unshifted exp-emissions are used while this bound on the underflow guard's exponent
# (see ``emission_low_of``) stays this far above log(_TINY) ≈ −645: the guard never fires.
_DIRECT_LIMIT = 400.0


@nb.njit(cache=True)
def emission_low_of(emission_bound, transition_range, K):
    """A lower bound (≤ 0) on every row's smallest log-emission minus its largest when the kernels may
    exponentiate emissions without shifting them, +1 when they must shift (see ``engine.chain._emission_low``);
    ``transition_range`` bounds the log-range of the exp-transitions (inf: unbounded)."""
    if 4.0 * emission_bound + 2.0 * transition_range + math.log(4.0 * K) <= _DIRECT_LIMIT:
        return -2.0 * emission_bound
    return 1.0


@nb.njit(cache=True)
def _logz_small(E, T, start, end, block, limit):
    """log Z of B sequences of the full length L under one shared (K, K) matrix, the checks of
    ``engine.chain.prepare`` included (NaN, +inf, a finite magnitude ≥ ``limit``), by the blocked kernel's
    serial twin with ``block`` sequences a block (``engine.chain._block_size``): the numbers of the checked
    path, in one compiled call. Returns (accepted, log Z, number of sequences with log Z = −inf); not
    accepted (an empty array): the caller takes the checked path, which names the entry."""
    B, L, K = E.shape
    e_top, s_top = checked_top(E, limit), checked_top(start, limit)
    if min(e_top, s_top, checked_top(T, limit), checked_top(end, limit)) < 0.0:
        return False, np.empty(0), 0
    expT, tshift, min_expT, dense, exp_end, min_exp_end, end_shift = _shared_scaling(T, end)
    t_range = -math.log(min_expT[0]) if min_expT[0] > 0.0 else np.inf
    low = emission_low_of(e_top + s_top, t_range, K)
    lengths = np.full(B, L, dtype=np.int64)
    order = np.arange(B)
    logz = _logz_serial(E, T.reshape((1, K, K)), start, end, lengths, order, block, expT, tshift, min_expT, dense,
                        exp_end, min_exp_end, end_shift, low, 1)
    impossible = 0
    for b in range(B):
        impossible += logz[b] == NEG_INF
    return True, logz, impossible
