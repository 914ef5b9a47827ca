"""Context lattices of the alignment model p(y, z | x) (Steinhardt & Liang 2015, §4.2, §6, App. A).

Factorization: p(y, z, c | x) ∝ exp(Σᵢ θᵀφ(c_{i−1}, (y_i, m_i))) · κ(y, z, c), where
(y_i, m_i) is the i-th output letter with its alignment move (see
:mod:`varorder.transduce.features`), the last step emits the end symbol, and each
context c_i is a pair (alignment state, fixed suffix): the state s_i = (z_i, f_i) —
the input position y_i last aligned to, and whether y_i aligned to a single phoneme
(needed to forbid a share after a many-phoneme letter) — is *always* remembered, so
monotonicity and the degree rule are enforced exactly; the suffix fixes the last ℓ
(letter, move) labels and leaves the rest free (★). κ forces c_i = f_i(c_{i−1}, y_i, m_i),
the smallest selected context holding the extension. Once the contexts are chosen the
model is a :class:`varorder.lattice.Lattice` (node = context at a position, arc =
expansion (y_i, m_i) into its merge target, one end node per position entered by the
end-symbol arcs); log Z, marginals, Viterbi all come from the engine.

Context selection during the forward pass (App. A adapted as in §4.2):

* ``selection="rcms"``: every expansion (state, suffix + label) is a candidate; the B
  candidates with the largest forward score are kept *separately for each value of
  z_i* (§4.2), and every other candidate merges into its least active ancestor (the
  longest kept suffix with the same state, else the state's root — the coarsest context
  "any y_{1:i} with this z_i, f_i"). Coverage: every (y, z) keeps a path.
* ``selection="beam"``: beam search as the degenerate case (§4.1): contexts are
  singletons (whole histories), the B best overall are kept, the rest get weight −∞
  (their arcs are dropped).
* ``gold_letters`` + ``extra_gold`` = K: also keep, at every step, the K best
  candidates whose letters agree with the gold output (the hybrid's per-step union
  of model and target beams, App. B); ``forced_moves``: also keep the gold (letters,
  moves) prefix (supervised training with the gold forced onto the beam).
* ``clamp``: only the given letters are expanded and the end symbol comes right after
  them — the target lattice p(z | x, y) of eq. 7, selected by qⁱ(z | x, y).
* ``bigram_exact=True`` (order 2 only): contexts keep only the last letter (with the
  state), all of them — exact inference in the bigram model used by forced decoding.

Merging needs no hashing: roots (and, in the exact bigram, every context) are found in dense
tables indexed by state and letter, other contexts through the ancestor chain of the context
they extend (``_kept_ancestor``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numba as nb
import numpy as np

from varorder.engine.builder import grown1, grown2
from varorder.engine.selection import group_of_slot, keep_best
from varorder.engine.semiring import log_plus
from varorder.errors import ParameterError
from varorder.lattice import Lattice
from varorder.transduce.features import AlignmentFeatureSpace
import varorder._numba_start  # noqa: E402,F401,I001  (Numba's cache saves locked across processes)

__all__ = ["AlignmentLattice", "build_alignment_lattice", "restrict_to_output"]

_NEG_INF = -np.inf


@nb.njit(cache=True)
def _mix(h):
    h ^= h >> np.uint64(30)
    h *= np.uint64(0xBF58476D1CE4E5B9)
    h ^= h >> np.uint64(27)
    h *= np.uint64(0x94D049BB133111EB)
    h ^= h >> np.uint64(31)
    return h


@nb.njit(cache=True)
def _feature_index(code, kind, hashed, mask, offset):
    """Exact: offset + code. Hashed: n-grams go to [offset, mask] (offset = the exact unigram block)."""
    if not hashed or kind == 2:
        return offset + code
    if kind < 3:
        h = _mix(np.uint64(code) * np.uint64(4) + np.uint64(kind) + np.uint64(0x9E3779B97F4A7C15))
    else:  # backoff kinds: residue 3 (unused by kinds 0–2), then the kind mixed in
        h = _mix(_mix(np.uint64(code) * np.uint64(4) + np.uint64(3) + np.uint64(0x9E3779B97F4A7C15))
                 + np.uint64(kind))
    return offset + np.int64(h % np.uint64(mask + 1 - offset))


@nb.njit(cache=True)
def _backoff_features(history, symbol, w, alphabet, first_kind, hashed, mask, offsets, feats, row, column):
    """Fire the k-grams, k = 1 … w, of ``history`` (w slot codes in [0, alphabet + 2), oldest
    first) then ``symbol`` (in [0, alphabet)), the order-k one of kind first_kind + 2(k − 1),
    into ``feats[row, column + k − 1]``. Output patterns: alphabet = V + 1 letters and END
    (slots V BOS, V + 1 ★); alignment patterns: alphabet = E edges."""
    radix = alphabet + 1 if first_kind == 3 else alphabet + 2
    for k in range(1, w + 1):
        code = 0
        for t in range(w - k + 1, w):
            code = code * radix + history[t]
        kind = first_kind + 2 * (k - 1)
        feats[row, column + k - 1] = _feature_index(code * alphabet + symbol, kind, hashed, mask, offsets[kind])


@nb.njit(cache=True)
def _context_history(x, node_sym, u, u_len, full, j, V, P, n, M, slots, window):
    """What the features of every expansion of context u (state z = j) read from u, once per u.

    ``slots``: the n − 1 output slot codes (oldest first: letters, V = BOS, V + 1 = ★);
    ``window``: the n − 1 previous edges (oldest first; E = BOS, E + 1 = ★), read through the
    context. Returns the output n-gram prefix code (the slots in radix V + 2).
    """
    NM = M + 1
    w = n - 1
    E = P * V
    code = 0
    for t in range(w):  # oldest slot first
        k = w - t
        if k <= u_len:
            s = node_sym[u, u_len - k] // NM
        elif full:
            s = V  # BOS
        else:
            s = V + 1  # ★
        code = code * (V + 2) + s
        slots[t] = s
    # the n − 1 previous edges, most recent first, written from the end of the window
    got = 0
    jpos = j
    k = u_len - 1
    while got < w and k >= 0:
        lab = node_sym[u, k]
        yk = lab // NM
        mk = lab % NM
        if mk == 0:
            window[w - 1 - got] = x[jpos - 1] * V + yk
            got += 1
        else:
            p = jpos
            while p > jpos - mk and got < w:
                window[w - 1 - got] = x[p - 1] * V + yk
                got += 1
                p -= 1
        jpos -= mk
        k -= 1
    pad = E if full else E + 1  # BOS or ★
    while got < w:
        window[w - 1 - got] = pad
        got += 1
    return code


@nb.njit(cache=True)
def _step_features(x, prefix, slots, context_window, j, y, V, P, n, M, hashed, mask, offsets, unigrams, backoff,
                   feats, window):
    """Weight indices of expanding a context (state z = j; its ``prefix``, ``slots`` and
    ``context_window`` from :func:`_context_history`) by letter y, for every move.

    Returns the output n-gram's index. Row m of ``feats`` (−1 padded): move m (0 share, k advance k); for the end symbol
    (y = V) row 0 only. Moves share the output n-gram and the leading edges. Columns: 0
    output n-gram, 1 … M alignment n-grams of the move's edges, M + 1 … 2M their edge
    unigrams; with ``backoff`` then the n − 1 lower output orders and, per edge t, its
    n − 1 lower alignment orders. The weights come from :func:`_step_weights`: the indices
    of all letters of a context are computed first and θ read afterwards in one sweep
    (independent reads from the large table overlap instead of waiting behind the hashing).
    """
    NM = M + 1
    w = n - 1
    E = P * V
    Lp = x.shape[0]
    for m in range(NM):
        for t in range(feats.shape[1]):
            feats[m, t] = -1
    letter = _feature_index(prefix * (V + 1) + y, 0, hashed, mask, offsets[0])
    letter_col = 2 * M + 1
    edge_col = letter_col + w
    if backoff:
        _backoff_features(slots, y, w, V + 1, 3, hashed, mask, offsets, feats, 0, letter_col)
    if y == V:
        feats[0, 0] = letter
        return letter
    for t in range(w):
        window[t] = context_window[t]
    if j >= 1:  # share: one edge to phoneme j
        edge = x[j - 1] * V + y
        code = 0
        for t in range(w):
            code = code * (E + 2) + window[t]
        feats[0, 0] = letter
        feats[0, 1] = _feature_index(code * E + edge, 1, hashed, mask, offsets[1])
        if unigrams:
            feats[0, M + 1] = _feature_index(edge, 2, hashed, mask, offsets[2])
        if backoff:
            _backoff_features(window, edge, w, E, 4, hashed, mask, offsets, feats, 0, edge_col)
    for m in range(1, NM):  # advance m: the edges of advance m − 1, then phoneme j + m
        if j + m > Lp:
            break
        edge = x[j + m - 1] * V + y
        code = 0
        for t in range(w):
            code = code * (E + 2) + window[t]
        feats[m, 0] = letter
        for t in range(1, m):
            feats[m, t] = feats[m - 1, t]
            feats[m, M + t] = feats[m - 1, M + t]
        if backoff:
            for t in range(letter_col, edge_col + (m - 1) * w):
                feats[m, t] = feats[m - 1 if m > 1 else 0, t]
            _backoff_features(window, edge, w, E, 4, hashed, mask, offsets, feats, m, edge_col + (m - 1) * w)
        feats[m, m] = _feature_index(code * E + edge, 1, hashed, mask, offsets[1])
        if unigrams:
            feats[m, M + m] = _feature_index(edge, 2, hashed, mask, offsets[2])
        for t in range(w - 1):
            window[t] = window[t + 1]
        if w > 0:
            window[w - 1] = edge
    return letter


@nb.njit(cache=True)
def _step_weights(theta, letter, feats, j, y, V, n, M, Lp, unigrams, backoff, wts):
    """θᵀφ of every move of :func:`_step_features`' rows (−∞ where a move is impossible).

    Summed in a fixed order (output n-gram, its lower orders; then per edge its n-gram,
    its lower orders, its unigram — the share adds its unigram before its lower orders),
    advance m extending advance m − 1's running sum, so a weight is the same float
    whichever way the indices were produced.
    """
    NM = M + 1
    w = n - 1
    letter_col = 2 * M + 1
    edge_col = letter_col + w
    for m in range(NM):
        wts[m] = _NEG_INF
    base = theta[letter]
    if backoff:
        total = 0.0
        for k in range(w):
            total += theta[feats[0, letter_col + k]]
        base += total
    if y == V:
        wts[0] = base
        return
    if j >= 1:
        share = base + theta[feats[0, 1]]
        if unigrams:
            share += theta[feats[0, M + 1]]
        if backoff:
            total = 0.0
            for k in range(w):
                total += theta[feats[0, edge_col + k]]
            share += total
        wts[0] = share
    total = base
    for m in range(1, NM):
        if j + m > Lp:
            break
        total += theta[feats[m, m]]
        if backoff:
            extra = 0.0
            for k in range(w):
                extra += theta[feats[m, edge_col + (m - 1) * w + k]]
            total += extra
        if unigrams:
            total += theta[feats[m, M + m]]
        wts[m] = total


@nb.njit(cache=True)
def _kept_ancestor(u, lab, node_anc, node_root, node_j, prev_roots, child, prev_first, NM):
    """The kept context at i for (u's proper ancestors at i − 1) + lab, longest first; −1: none.

    A kept context (state, s + lab) came from the context (state′, s) at i − 1, which is
    an ancestor of u (same z, its suffix a suffix of u's) — so walking u's ancestor chain
    and then the roots of u's z finds the least active ancestor without any hashing.
    """
    if node_root[u] or u == 0:
        return -1
    t = node_anc[u]
    while t >= 0:
        v = child[t - prev_first, lab]
        if v >= 0:
            return v
        t = node_anc[t]
    j = node_j[u]
    for f in range(1, -1, -1):
        if lab % NM == 0 and f == 0:
            continue  # a share needs a single-phoneme root
        r = prev_roots[j * 2 + f]
        if r >= 0:
            v = child[r - prev_first, lab]
            if v >= 0:
                return v
    return -1


@nb.njit(cache=True)
def _select(g_fwd, g_j, g_gold, g_forced, n_g, groups, B, beam, extra_k):
    """Kept candidates: the B best per z_i (RCMS; ``groups`` = L′ + 1) or overall (beam), the
    ``extra_k`` best that spell the gold prefix, and the forced one; −∞ candidates never
    (:func:`varorder.engine.selection.keep_best`, ties to the earlier candidate)."""
    active = np.zeros(n_g, np.bool_)
    keep_best(g_fwd, n_g, np.zeros(n_g, np.int64) if beam else g_j, groups, B, active)
    if extra_k > 0:
        keep_best(g_fwd, n_g, np.where(g_gold[:n_g], 0, -1), 1, extra_k, active)
    for g in range(n_g):
        if g_forced[g] and g_fwd[g] > _NEG_INF:
            active[g] = True
    return active


@nb.njit(cache=True)
def _build_kernel(x, theta, V, P, n, M, hashed, mask, offsets, unigrams, backoff, F, B, beam, bigram_exact, Lmax,
                  clamp, gold, extra_k, forced_moves):
    Lp = x.shape[0]
    NM = M + 1
    clamped = clamp.shape[0] > 0
    Lc = clamp.shape[0]
    n_gold = gold.shape[0]
    forcing = forced_moves.shape[0] > 0
    width = (B if beam else B * (Lp + 1)) + extra_k + 2 + 2 * (Lp + 1) + 1
    max_nodes = 1 + (Lmax + 1) * width
    slots = Lmax + 1
    node_pos = np.zeros(max_nodes, np.int64)
    node_j = np.zeros(max_nodes, np.int64)
    node_f = np.zeros(max_nodes, np.int64)
    node_len = np.zeros(max_nodes, np.int64)
    node_sym = np.empty((max_nodes, slots), np.int64)  # row v: its first node_len[v] entries only
    node_fwd = np.full(max_nodes, _NEG_INF)
    node_root = np.zeros(max_nodes, np.bool_)
    node_gold = np.zeros(max_nodes, np.bool_)
    node_forced = np.zeros(max_nodes, np.bool_)
    node_end = np.zeros(max_nodes, np.bool_)
    cap_a = 4096
    a_src = np.empty(cap_a, np.int64)
    a_dst = np.empty(cap_a, np.int64)
    a_lab = np.empty(cap_a, np.int64)
    a_w = np.empty(cap_a)
    a_pos = np.empty(cap_a, np.int64)
    a_feat = np.empty((cap_a, F), np.int64)
    node_fwd[0] = 0.0
    node_gold[0] = True
    node_forced[0] = True
    n_nodes = 1
    n_arcs = 0
    prev_first = 0
    prev_count = 1
    step_w = np.empty(NM)
    step_f = np.empty((NM, F), np.int64)
    y_feats = np.empty((V, NM, F), np.int64)
    y_wts = np.empty((V, NM))
    y_letter = np.empty(V, np.int64)
    ctx_window = np.empty(n, np.int64)
    win_buf = np.empty(n, np.int64)
    slot_buf = np.empty(n, np.int64)
    prev_roots = np.full((Lp + 1) * 2, -1, np.int64)
    node_anc = np.full(max_nodes, -1, np.int64)  # least active proper ancestor, same state, same position
    NL = V * NM
    for i in range(1, Lmax + 2):
        if prev_count == 0:
            break
        max_c = prev_count * V * NM
        # candidate c is written straight into arc slot n_arcs + c (source, label, weight,
        # features); after selection the kept ones are compacted in order (beam) or all kept (RCMS)
        need = n_arcs + max_c + prev_count
        if need > a_src.shape[0]:
            a_src = grown1(a_src, n_arcs, need)
            a_dst = grown1(a_dst, n_arcs, need)
            a_lab = grown1(a_lab, n_arcs, need)
            a_w = grown1(a_w, n_arcs, need)
            a_pos = grown1(a_pos, n_arcs, need)
            a_feat = grown2(a_feat, n_arcs, need)
        c_fwd = np.empty(max_c)
        c_group = np.empty(max_c, np.int64)
        e_par = np.empty(prev_count, np.int64)
        e_w = np.empty(prev_count)
        e_feat = np.empty((prev_count, F), np.int64)
        n_c = 0
        n_e = 0
        # duplicates arise only from the two roots of one z (advance labels), or, in the
        # exact bigram, from any two contexts sharing (state, last letter): dense tables
        root_table = np.full((Lp + 1) * 2 * NL, -1, np.int64)
        bigram_table = np.full((Lp + 1) * 2 * V if bigram_exact else 1, -1, np.int64)
        g_rep = np.empty(max_c, np.int64)
        g_fwd = np.empty(max_c)
        g_j = np.empty(max_c, np.int64)
        g_f = np.empty(max_c, np.int64)
        g_len = np.empty(max_c, np.int64)
        g_gold = np.zeros(max_c, np.bool_)
        g_forced = np.zeros(max_c, np.bool_)
        n_g = 0
        remaining = (Lc - i) if clamped else (Lmax - i)
        for u in range(prev_first, prev_first + prev_count):
            if node_fwd[u] == _NEG_INF:
                continue
            j = node_j[u]
            f = node_f[u]
            u_len = node_len[u]
            full = u_len == node_pos[u]
            prefix = _context_history(x, node_sym, u, u_len, full, j, V, P, n, M, slot_buf, ctx_window)
            if j == Lp and i >= 2 and (not clamped or i == Lc + 1):
                letter = _step_features(x, prefix, slot_buf, ctx_window, j, V, V, P, n, M, hashed, mask, offsets,
                                        unigrams, backoff, step_f, win_buf)
                _step_weights(theta, letter, step_f, j, V, V, n, M, Lp, unigrams, backoff, step_w)
                e_w[n_e] = step_w[0]
                for t in range(F):
                    e_feat[n_e, t] = step_f[0, t]
                e_par[n_e] = u
                n_e += 1
            if clamped and i > Lc:
                continue
            if i > Lmax:
                continue
            # every letter's indices first, then θ in one sweep, then the candidates
            for y in range(V):
                if clamped and y != clamp[i - 1]:
                    continue
                y_letter[y] = _step_features(x, prefix, slot_buf, ctx_window, j, y, V, P, n, M, hashed, mask,
                                             offsets, unigrams, backoff, y_feats[y], win_buf)
            for y in range(V):
                if clamped and y != clamp[i - 1]:
                    continue
                _step_weights(theta, y_letter[y], y_feats[y], j, y, V, n, M, Lp, unigrams, backoff, y_wts[y])
            for y in range(V):
                if clamped and y != clamp[i - 1]:
                    continue
                for m in range(NM):
                    if m == 0:
                        if f == 0 or j == 0:
                            continue
                        j2 = j
                        f2 = 1
                    else:
                        j2 = j + m
                        if j2 > Lp:
                            break
                        f2 = 1 if m == 1 else 0
                    if Lp - j2 > M * remaining:
                        continue
                    if clamped and remaining > 0 and j2 == Lp and f2 == 0:
                        continue
                    lab = y * NM + m
                    w = y_wts[y, m]
                    c = n_c
                    n_c += 1
                    a = n_arcs + c
                    a_src[a] = u
                    a_lab[a] = lab
                    a_w[a] = w
                    for t in range(F):
                        a_feat[a, t] = y_feats[y, m, t]
                    c_fwd[c] = node_fwd[u] + w
                    if bigram_exact:
                        g, n_g, new = group_of_slot(bigram_table, (j2 * 2 + f2) * V + y, c_fwd[c], n_g, g_fwd)
                        new_len = 1
                    elif node_root[u] or u == 0:
                        g, n_g, new = group_of_slot(root_table, (j2 * 2 + f2) * NL + lab, c_fwd[c], n_g, g_fwd)
                        new_len = 1
                    else:  # a longer context than its parent's is new at this position
                        g = n_g
                        n_g += 1
                        g_fwd[g] = c_fwd[c]
                        new = True
                        new_len = u_len + 1
                    if new:
                        g_rep[g] = c
                        g_j[g] = j2
                        g_f[g] = f2
                        g_len[g] = new_len
                    c_group[c] = g
                    if node_gold[u] and i <= n_gold and y == gold[i - 1]:
                        g_gold[g] = True
                        if forcing and node_forced[u] and m == forced_moves[i - 1]:
                            g_forced[g] = True
        # selection: B best per z_i (RCMS) or overall (beam), plus gold extras and the forced entry
        active = _select(g_fwd, g_j, g_gold, g_forced, n_g, 1 if beam else Lp + 1, B, beam, extra_k)
        first = n_nodes
        g_node = np.full(n_g, -1, np.int64)
        child = np.full((prev_count, NL), -1, np.int64)  # (context at i−1, label) → kept context at i
        for g in range(n_g):
            if not active[g]:
                continue
            v = n_nodes
            n_nodes += 1
            g_node[g] = v
            c = n_arcs + g_rep[g]
            u = a_src[c]
            node_pos[v] = i
            node_j[v] = g_j[g]
            node_f[v] = g_f[g]
            node_len[v] = g_len[g]
            if g_len[g] == 1:
                node_sym[v, 0] = a_lab[c]
            else:
                for k in range(g_len[g] - 1):
                    node_sym[v, k] = node_sym[u, k]
                node_sym[v, g_len[g] - 1] = a_lab[c]
            node_gold[v] = g_gold[g]
            node_forced[v] = g_forced[g]
        for c in range(n_c):
            g = c_group[c]
            if active[g]:
                child[a_src[n_arcs + c] - prev_first, a_lab[n_arcs + c]] = g_node[g]
        for g in range(n_g):
            if active[g] and not beam:
                c = n_arcs + g_rep[g]
                node_anc[g_node[g]] = _kept_ancestor(a_src[c], a_lab[c], node_anc, node_root, node_j,
                                                     prev_roots, child, prev_first, NM)
        # merge every other candidate into its least active ancestor (RCMS) or drop it (beam)
        roots = np.full((Lp + 1) * 2, -1, np.int64)
        c_dst = np.full(n_c, -1, np.int64)
        for c in range(n_c):
            g = c_group[c]
            if active[g]:
                c_dst[c] = g_node[g]
                continue
            if beam:
                continue
            target = _kept_ancestor(a_src[n_arcs + c], a_lab[n_arcs + c], node_anc, node_root, node_j, prev_roots, child,
                                    prev_first, NM)
            if target < 0:
                rk = g_j[g] * 2 + g_f[g]
                target = roots[rk]
                if target < 0:
                    target = n_nodes
                    n_nodes += 1
                    node_pos[target] = i
                    node_j[target] = g_j[g]
                    node_f[target] = g_f[g]
                    node_len[target] = 0
                    node_root[target] = True
                    roots[rk] = target
            c_dst[c] = target
        prev_roots = roots
        n_regular = n_nodes - first
        end_node = -1
        if n_e > 0:
            end_node = n_nodes
            n_nodes += 1
            node_pos[end_node] = i
            node_end[end_node] = True
        base = n_arcs
        for c in range(n_c):
            v = c_dst[c]
            if v < 0:
                continue
            a = base + c
            if a != n_arcs:  # dropped beam candidates before it: move this arc down, order kept
                a_src[n_arcs] = a_src[a]
                a_lab[n_arcs] = a_lab[a]
                a_w[n_arcs] = a_w[a]
                for t in range(F):
                    a_feat[n_arcs, t] = a_feat[a, t]
            a_dst[n_arcs] = v
            a_pos[n_arcs] = i
            node_fwd[v] = log_plus(node_fwd[v], c_fwd[c])
            n_arcs += 1
        for e in range(n_e):
            a_src[n_arcs] = e_par[e]
            a_dst[n_arcs] = end_node
            a_lab[n_arcs] = V * NM
            a_w[n_arcs] = e_w[e]
            a_pos[n_arcs] = i
            for t in range(F):
                a_feat[n_arcs, t] = e_feat[e, t]
            node_fwd[end_node] = log_plus(node_fwd[end_node], node_fwd[e_par[e]] + e_w[e])
            n_arcs += 1
        prev_first = first
        prev_count = n_regular
    return (node_pos[:n_nodes], node_j[:n_nodes], node_len[:n_nodes], node_root[:n_nodes], node_fwd[:n_nodes],
            node_end[:n_nodes], a_src[:n_arcs], a_dst[:n_arcs], a_lab[:n_arcs], a_w[:n_arcs], a_pos[:n_arcs],
            a_feat[:n_arcs])


@dataclass
class AlignmentLattice:
    """One input's selected contexts as an engine lattice, plus what learning needs.

    Arc a emits ``letter = arc_label // (M + 1)`` (``num_letters`` = end) with move
    ``arc_label % (M + 1)`` at output position ``arc_position[a]`` and fires the weight
    indices ``arc_features[a]`` (−1 padded). Node v is a context at position
    ``lattice.node_position[v]`` remembering z = ``node_alignment[v]`` and fixing
    ``node_length[v]`` labels; ``node_forward`` are the forward scores used for
    selection (qⁱ masses); ``node_is_end`` marks the end nodes (final weight 0).
    """

    lattice: Lattice
    features: AlignmentFeatureSpace
    node_alignment: np.ndarray
    node_length: np.ndarray
    node_is_root: np.ndarray
    node_forward: np.ndarray
    node_is_end: np.ndarray
    arc_position: np.ndarray
    arc_features: np.ndarray

    def arc_letters(self) -> np.ndarray:
        return self.lattice.arc_label // self.features.num_moves

    def arc_moves(self) -> np.ndarray:
        return self.lattice.arc_label % self.features.num_moves

    def decode_arcs(self, arcs) -> tuple[list[int], list[int]]:
        """(letters, moves) along a path given as arc ids (end symbol dropped)."""
        arcs = np.asarray(arcs, dtype=np.int64)
        arcs = arcs[arcs >= 0]
        labels = self.lattice.arc_label[arcs]
        keep = labels != self.features.end_label
        labels = labels[keep]
        return (labels // self.features.num_moves).tolist(), (labels % self.features.num_moves).tolist()

    def expected_features(self, arc_marginals) -> tuple[np.ndarray, np.ndarray]:
        """(indices, values): Σ_a p(a) φ(a), sparse with repeats."""
        fired = self.arc_features >= 0
        values = np.broadcast_to(np.asarray(arc_marginals)[:, None], self.arc_features.shape)[fired]
        return self.arc_features[fired], values

    def context_length(self, upto: int | None = None) -> float:
        """qⁱ-mass-weighted number of labels fixed by the contexts of positions 1 … upto − 1 (Fig. 6)."""
        pos = self.lattice.node_position
        last = int(pos.max()) if upto is None else int(upto)
        total, count = 0.0, 0
        for i in range(1, last):
            sel = (pos == i) & ~self.node_is_end
            fwd = self.node_forward[sel]
            if fwd.size == 0 or fwd.max() == -np.inf:
                continue
            mass = np.exp(fwd - fwd.max())
            total += float(mass @ self.node_length[sel]) / float(mass.sum())
            count += 1
        return total / count if count else float("nan")


def build_alignment_lattice(phonemes, weights, features: AlignmentFeatureSpace, num_contexts: int, *,
                            selection: str = "rcms", max_length: int, clamp=None, gold_letters=None,
                            extra_gold: int = 0, forced_moves=None, bigram_exact: bool = False) -> AlignmentLattice:
    """Select contexts for input ``phonemes`` (ids) under ``weights`` and emit the lattice.

    ``max_length`` bounds the number of output letters. See the module docstring for
    ``selection``, ``clamp``, ``gold_letters``/``extra_gold``, ``forced_moves``,
    ``bigram_exact``.
    """
    x = np.ascontiguousarray(phonemes, dtype=np.int64)
    if x.ndim != 1 or x.shape[0] < 1:
        raise ParameterError(f"phonemes must be a non-empty 1-D id array, got shape {x.shape}", name='phonemes', value=phonemes)
    if x.min() < 0 or x.max() >= features.num_phonemes:
        raise ParameterError(f"phoneme ids must lie in [0, {features.num_phonemes})", name='features', value=features)
    theta = np.ascontiguousarray(weights, dtype=np.float64)
    if theta.shape != (features.size,):
        raise ParameterError(f"weights must have shape ({features.size},), got {theta.shape}", name='weights', value=weights)
    if selection not in ("rcms", "beam"):
        raise ParameterError(f"selection must be 'rcms' or 'beam', got {selection!r}", name='selection', value=selection)
    B = int(num_contexts)
    if B < 1:
        raise ParameterError(f"num_contexts must be >= 1, got {num_contexts}", name='num_contexts', value=num_contexts)
    if bigram_exact:
        if features.order != 2 or selection != "rcms":
            raise ParameterError("bigram_exact needs order 2 and selection 'rcms'", name='bigram_exact', value=bigram_exact)
        B = features.num_letters * features.num_moves * 2
    empty = np.zeros(0, np.int64)

    def letters(name, value):
        if value is None:
            return empty
        arr = np.ascontiguousarray(value, dtype=np.int64)
        if arr.ndim != 1 or arr.size < 1 or arr.min() < 0 or arr.max() >= features.num_letters:
            raise ParameterError(f"{name} must be a non-empty list of letter ids in [0, {features.num_letters})", name=name, value=value)
        return arr

    clamp_arr = letters("clamp", clamp)
    gold_arr = letters("gold_letters", gold_letters)
    moves = empty
    if forced_moves is not None:
        moves = np.ascontiguousarray(forced_moves, dtype=np.int64)
        if moves.shape != gold_arr.shape or moves.min() < 0 or moves.max() > features.max_advance:
            raise ParameterError("forced_moves must give one move in [0, max_advance] per gold letter", name='forced_moves', value=forced_moves)
    Lmax = int(max_length)
    if clamp_arr.size:
        Lmax = max(Lmax, clamp_arr.size)
    if gold_arr.size:
        Lmax = max(Lmax, gold_arr.size)
    if Lmax < 1:
        raise ParameterError(f"max_length must be >= 1, got {max_length}", name='max_length', value=max_length)
    (pos, zj, length, root, fwd, end, src, dst, lab, w, apos, afeat) = _build_kernel(
        x, theta, features.num_letters, features.num_phonemes, features.order, features.max_advance,
        features.hashed, features.size - 1, features.offsets(), features.edge_unigrams, features.backoff,
        features.arc_features, B,
        selection == "beam", bool(bigram_exact), Lmax, clamp_arr, gold_arr, int(extra_gold), moves)
    final = np.where(end, 0.0, -np.inf)
    lattice = Lattice(pos, src, dst, lab, w, final)
    return AlignmentLattice(lattice, features, zj, length, root, fwd, end, apos, afeat)


def restrict_to_output(al: AlignmentLattice, letters, moves=None) -> Lattice:
    """The lattice's paths that spell ``letters`` (and take ``moves``), others weighted −∞.

    Select-by-model's and the hybrid's target: the beam's paths reweighted by p(y | z, x).
    """
    letters = np.asarray(letters, dtype=np.int64)
    L = letters.shape[0]
    lat = al.lattice
    pos = al.arc_position
    NM = al.features.num_moves
    is_end = lat.arc_label == al.features.end_label
    inside = (pos >= 1) & (pos <= L)
    ok = np.where(is_end, pos == L + 1, False)
    gold_at = letters[np.clip(pos - 1, 0, L - 1)]
    match = inside & ~is_end & (lat.arc_label // NM == gold_at)
    if moves is not None:
        moves = np.asarray(moves, dtype=np.int64)
        match &= lat.arc_label % NM == moves[np.clip(pos - 1, 0, L - 1)]
    ok |= match
    weights = np.where(ok, lat.arc_weight, -np.inf)
    return Lattice(lat.node_position, lat.arc_source, lat.arc_target, lat.arc_label, weights, lat.final)
