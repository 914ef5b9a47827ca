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

The loop (expand, group, keep best, merge, emit) is the engine's selection builder
(:mod:`varorder.engine.builder`); this module supplies its hooks: the state (alignment state
and fixed labels), the scorer (θᵀφ of the output and alignment n-grams, the feature indices
as each arc's payload), a ``select`` with the second budget over the gold prefix, a merge
candidate by candidate (in the exact bigram one context gathers expansions of different
parents, each merged through its own) and the end-symbol arcs of each position. Grouping
needs no hashing: expansions of a root or of the start (and, in the exact bigram, every
expansion) are keyed by state and label; merging walks the ancestor chain of the context an
expansion extends, then the roots of its state made at the previous position
(``_kept_ancestor``).
"""

from __future__ import annotations

from collections import namedtuple
from dataclasses import dataclass

import numba as nb
import numpy as np

from varorder.engine.builder import DROP, FORCED, SelectionBuilder, root, selection_builder
from varorder.engine.selection import keep_best
from varorder.engine.semiring import log_plus
from varorder.errors import ParameterError
from varorder.lattice import Lattice
from varorder.transduce.features import AlignmentFeatureSpace
import varorder._numba_start  # noqa: E402,F401,I001  (Numba's cache saves locked across processes)

__all__ = ["AlignmentLattice", "build_alignment_lattice", "restrict_to_output"]

_NEG_INF = -np.inf
# a context's state row: these columns, then the labels it fixes (the first ``_LEN`` of them)
_J, _F, _LEN, _ROOT, _GOLD, _FORCED, _ANC, _END, _SYM = range(9)
#: the candidate flag "spells the gold prefix" (beside the engine's FORCED)
_GOLD_PREFIX = 2


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
def _context_history(x, node_state, u, u_len, full, j, V, P, n, M, slots, window):
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
            s = node_state[u, _SYM + u_len - k] // NM
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
        lab = node_state[u, _SYM + k]
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


@nb.njit(cache=True, inline="always")
def _moved(j, m):
    """The alignment state (z, single-phoneme flag) after move m from z = j."""
    if m == 0:
        return j, 1
    return j + m, 1 if m == 1 else 0


@nb.njit(cache=True)
def _kept_ancestor(u, lab, node_state, root_node, root_pos, i, child, prev_first, NM):
    """The kept context at i for (u's proper ancestors at i − 1) + lab, longest first; −1: none.

    A kept context (state, s + lab) came from the context (state′, s) at i − 1, which is
    an ancestor of u (same z, its suffix a suffix of u's) — so walking u's ancestor chain
    and then the roots of u's z made at i − 1 finds the least active ancestor without any
    hashing.
    """
    if node_state[u, _ROOT] or u == 0:
        return -1
    t = node_state[u, _ANC]
    while t >= 0:
        v = child[t - prev_first, lab]
        if v >= 0:
            return v
        t = node_state[t, _ANC]
    j = node_state[u, _J]
    for f in range(1, -1, -1):
        if lab % NM == 0 and f == 0:
            continue  # a share needs a single-phoneme root
        key = j * 2 + f
        if root_pos[key] == i - 1:
            v = child[root_node[key] - prev_first, lab]
            if v >= 0:
                return v
    return -1


# the hooks' context, built once per lattice by _build_kernel: the inputs as named in _expand,
# the scorer's scratch (step_w … slot_buf), each root key's node and position (root_node,
# root_pos: _root_state), the end arcs _expand found (e_par, e_w, e_feat: _end_arcs) and
# counts = (end arcs, prev_first, prev_count). A namedtuple is a tuple to Numba: the names
# are resolved at compile time.
_Context = namedtuple("_Context", (
    "x", "theta", "V", "P", "n", "M", "hashed", "mask", "offsets", "unigrams", "backoff", "F", "beam", "bigram_exact",
    "Lmax", "clamp", "gold", "extra_k", "forced_moves", "step_w", "step_f", "y_feats", "y_wts", "y_letter",
    "ctx_window", "win_buf", "slot_buf", "root_node", "root_pos", "e_par", "e_w", "e_feat", "counts"))


@nb.njit(cache=True)
def _expand(ctx, i, node_pos, node_fwd, node_state, prev_first, prev_count, c_src, c_lab, c_w, c_fwd, c_key,
            c_class, c_flags, c_payload):
    """Every context of position i − 1 that something reaches by every (letter, move) the
    state allows, scored by θᵀφ (every letter's indices first, then θ in one sweep); its
    end-symbol arc, where z = |x|, is kept for ``_end_arcs``. Keys: the exact bigram's
    (state, letter), a root's or the start's (state, label) (the two roots of one z meet
    there), otherwise none (a longer context than its parent's is new at this position);
    class z_i (RCMS) or one (beam); flags gold prefix / forced."""
    (x, theta, V, P, n, M, hashed, mask, offsets, unigrams, backoff, F, beam, bigram_exact, Lmax, clamp, gold,
     extra_k, forced_moves, step_w, step_f, y_feats, y_wts, y_letter, ctx_window, win_buf, slot_buf, root_node,
     root_pos, e_par, e_w, e_feat, counts) = ctx
    Lp = x.shape[0]
    NM = M + 1
    NL = V * NM
    clamped = clamp.shape[0] > 0
    Lc = clamp.shape[0]
    n_gold = gold.shape[0]
    forcing = forced_moves.shape[0] > 0
    remaining = (Lc - i) if clamped else (Lmax - i)
    n_c = 0
    n_e = 0
    for u in range(prev_first, prev_first + prev_count):
        if node_fwd[u] == _NEG_INF:
            continue
        j = node_state[u, _J]
        f = node_state[u, _F]
        u_len = node_state[u, _LEN]
        start = node_state[u, _ROOT] == 1 or u == 0
        full = u_len == node_pos[u]
        prefix = _context_history(x, node_state, u, u_len, full, j, V, P, n, M, slot_buf, ctx_window)
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
        for y in range(V):
            if clamped and y != clamp[i - 1]:
                continue
            y_letter[y] = _step_features(x, prefix, slot_buf, ctx_window, j, y, V, P, n, M, hashed, mask,
                                         offsets, unigrams, backoff, y_feats[y], win_buf)
        for y in range(V):
            if clamped and y != clamp[i - 1]:
                continue
            _step_weights(theta, y_letter[y], y_feats[y], j, y, V, n, M, Lp, unigrams, backoff, y_wts[y])
        gold_parent = node_state[u, _GOLD] == 1 and i <= n_gold
        for y in range(V):
            if clamped and y != clamp[i - 1]:
                continue
            for m in range(NM):
                if m == 0 and (f == 0 or j == 0):
                    continue
                j2, f2 = _moved(j, m)
                if j2 > Lp:
                    break
                if Lp - j2 > M * remaining:
                    continue
                if clamped and remaining > 0 and j2 == Lp and f2 == 0:
                    continue
                lab = y * NM + m
                w = y_wts[y, m]
                c = n_c
                n_c += 1
                c_src[c] = u
                c_lab[c] = lab
                c_w[c] = w
                for t in range(F):
                    c_payload[c, t] = y_feats[y, m, t]
                c_fwd[c] = node_fwd[u] + w
                if bigram_exact:
                    c_key[c] = (j2 * 2 + f2) * V + y
                elif start:
                    c_key[c] = (j2 * 2 + f2) * NL + lab
                else:
                    c_key[c] = -1
                c_class[c] = 0 if beam else j2
                flags = 0
                if gold_parent and y == gold[i - 1]:
                    flags = _GOLD_PREFIX
                    if forcing and node_state[u, _FORCED] == 1 and m == forced_moves[i - 1]:
                        flags |= FORCED
                c_flags[c] = flags
    counts[0] = n_e
    counts[1] = prev_first
    counts[2] = prev_count
    return n_c


@nb.njit(cache=True)
def _open_state(ctx, i, node_state, c, c_src, c_lab, c_payload, row):
    """The context candidate c opens: its state, and its parent's labels + c's (one label
    only in the exact bigram or from a root or the start)."""
    NM = ctx.M + 1
    u = c_src[c]
    lab = c_lab[c]
    j2, f2 = _moved(node_state[u, _J], lab % NM)
    length = 1 if ctx.bigram_exact or node_state[u, _ROOT] == 1 or u == 0 else node_state[u, _LEN] + 1
    row[_J] = j2
    row[_F] = f2
    row[_LEN] = length
    row[_ROOT] = 0
    row[_GOLD] = 0
    row[_FORCED] = 0
    row[_ANC] = -1
    row[_END] = 0
    for k in range(length - 1):
        row[_SYM + k] = node_state[u, _SYM + k]
    row[_SYM + length - 1] = lab


@nb.njit(cache=True)
def _select(ctx, g_fwd, n_groups, g_class, g_flags, n_classes, budget, active):
    """The B best per z_i (RCMS) or overall (beam), the ``extra_gold`` best that spell the
    gold prefix, and the forced one; −∞ never (:func:`varorder.engine.selection.keep_best`,
    ties to the earlier)."""
    extra_k = ctx.extra_k
    keep_best(g_fwd, n_groups, g_class, n_classes, budget, active)
    if extra_k > 0:
        gold_class = np.empty(n_groups, np.int64)
        for g in range(n_groups):
            gold_class[g] = 0 if g_flags[g] & _GOLD_PREFIX else -1
        keep_best(g_fwd, n_groups, gold_class, 1, extra_k, active)
    for g in range(n_groups):
        if g_flags[g] & FORCED and g_fwd[g] > _NEG_INF:
            active[g] = True


@nb.njit(cache=True)
def _merge(ctx, i, node_state, first, slot_group, c_src, c_lab, c_key, c_group, c_payload, n, g_rep, g_fwd,
           g_flags, active, g_node, n_groups, g_target, c_target):
    """Every candidate not kept into its least active ancestor, through its own parent's
    ancestor chain, else its state's root (RCMS); dropped (beam). A kept context records
    its flags and its least active proper ancestor."""
    NM = ctx.M + 1
    NL = ctx.V * NM
    beam = ctx.beam
    root_node, root_pos, counts = ctx.root_node, ctx.root_pos, ctx.counts
    for g in range(n_groups):
        if active[g]:
            v = g_node[g]
            node_state[v, _GOLD] = 1 if g_flags[g] & _GOLD_PREFIX else 0
            node_state[v, _FORCED] = 1 if g_flags[g] & FORCED else 0
    if beam:
        for c in range(n):
            g = c_group[c]
            c_target[c] = g_node[g] if active[g] else DROP
        return
    prev_first = counts[1]
    child = np.full((counts[2], NL), -1, np.int64)  # (context at i−1, label) → kept context at i
    for c in range(n):
        g = c_group[c]
        if active[g]:
            child[c_src[c] - prev_first, c_lab[c]] = g_node[g]
            c_target[c] = g_node[g]
    for g in range(n_groups):
        if active[g]:
            c = g_rep[g]
            node_state[g_node[g], _ANC] = _kept_ancestor(c_src[c], c_lab[c], node_state, root_node, root_pos, i,
                                                         child, prev_first, NM)
    for c in range(n):
        if active[c_group[c]]:
            continue
        u = c_src[c]
        target = _kept_ancestor(u, c_lab[c], node_state, root_node, root_pos, i, child, prev_first, NM)
        if target < 0:
            j2, f2 = _moved(node_state[u, _J], c_lab[c] % NM)
            target = root(j2 * 2 + f2)
        c_target[c] = target


@nb.njit(cache=True)
def _root_state(ctx, i, key, node_state, v, row):
    """Root (z, f) = divmod(key, 2), "any y_{1:i} with this state"; recorded for the merge of
    position i + 1."""
    row[_J] = key // 2
    row[_F] = key % 2
    row[_LEN] = 0
    row[_ROOT] = 1
    row[_GOLD] = 0
    row[_FORCED] = 0
    row[_ANC] = -1
    row[_END] = 0
    ctx.root_node[key] = v
    ctx.root_pos[key] = i


@nb.njit(cache=True)
def _end_arcs(ctx, i, node_pos, node_fwd, node_state, n_nodes, a_src, a_dst, a_lab, a_w, a_pos, a_payload, n_arcs):
    """The end node of position i and the end-symbol arcs ``_expand`` found into it."""
    V, NM, F = ctx.V, ctx.M + 1, ctx.F
    e_par, e_w, e_feat, counts = ctx.e_par, ctx.e_w, ctx.e_feat, ctx.counts
    n_e = counts[0]
    if n_e == 0:
        return n_nodes, n_arcs
    v = n_nodes
    n_nodes += 1
    node_pos[v] = i
    node_fwd[v] = _NEG_INF
    for t in range(_SYM):
        node_state[v, t] = 0
    node_state[v, _ANC] = -1
    node_state[v, _END] = 1
    for e in range(n_e):
        a = n_arcs
        n_arcs += 1
        a_src[a] = e_par[e]
        a_dst[a] = v
        a_lab[a] = V * NM
        a_w[a] = e_w[e]
        a_pos[a] = i
        for t in range(F):
            a_payload[a, t] = e_feat[e, t]
        node_fwd[v] = log_plus(node_fwd[v], node_fwd[e_par[e]] + e_w[e])
    return n_nodes, n_arcs


_LOOP = selection_builder(SelectionBuilder(_expand, _open_state, _merge, _root_state, _select, _end_arcs,
                                           per_candidate=True))


@nb.njit(cache=True)
def _build_kernel(x, theta, V, P, n, M, hashed, mask, offsets, unigrams, backoff, F, B, beam, bigram_exact, Lmax,
                  clamp, gold, extra_k, forced_moves):
    Lp = x.shape[0]
    NM = M + 1
    width = (B if beam else B * (Lp + 1)) + extra_k + 2 + 2 * (Lp + 1) + 1  # nodes of one position, at most
    state0 = np.zeros(_SYM + Lmax + 1, np.int64)
    state0[_GOLD] = 1
    state0[_FORCED] = 1
    state0[_ANC] = -1
    n_keys = (Lp + 1) * 2
    ctx = _Context(x, theta, V, P, n, M, hashed, mask, offsets, unigrams, backoff, F, beam, bigram_exact, Lmax, clamp,
                   gold, extra_k, forced_moves, np.empty(NM), np.empty((NM, F), np.int64),
                   np.empty((V, NM, F), np.int64), np.empty((V, NM)), np.empty(V, np.int64), np.empty(n, np.int64),
                   np.empty(n, np.int64), np.empty(n, np.int64), np.full(n_keys, -1, np.int64),
                   np.full(n_keys, -1, np.int64), np.empty(width, np.int64), np.empty(width),
                   np.empty((width, F), np.int64), np.zeros(3, np.int64))
    n_slots = -1 if beam else n_keys * (V if bigram_exact else V * NM)
    # size hints: the bounds (capped), so that the tables rarely grow; pages never written
    # are never touched
    candidates = width * V * NM
    node_pos, node_fwd, state, src, dst, lab, w, apos, feat, _ = _LOOP(
        ctx, Lmax + 1, state0, F, V * NM, B, 1 if beam else Lp + 1, n_slots, n_keys, False, 0.0, False,
        (1 + (Lmax + 1) * width, min((Lmax + 1) * candidates, 1 << 20), candidates))
    return (node_pos, state[:, _J].copy(), state[:, _LEN].copy(), state[:, _ROOT] == 1, node_fwd, state[:, _END] == 1,
            src, dst, lab, w, apos, feat)


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
