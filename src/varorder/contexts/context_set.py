"""RCMS context selection (Steinhardt & Liang, "Reified Context Models", ICML 2015, App. A),
emitted as a lattice for the one DP engine.

Model (paper eq. 2): p(y_{1:L}, c_{1:L−1}) ∝ exp(Σᵢ θᵀφ(c_{i−1}, y_i)) · κ(y, c) where
each context c_i is a *suffix pattern* — it fixes y_{i−l+1:i} and leaves y_{1:i−l} free
(★) — drawn from a context set 𝒞_i that always holds the full set 𝒴_{1:i} (coverage)
and is closed under intersection (automatic for suffix patterns). κ forces
c_i = f_i(c_{i−1}, y_i), the smallest context of 𝒞_i containing c_{i−1} × {y_i}.
Hence, once the 𝒞_i are fixed, the model is a lattice: node (i, c) for c ∈ 𝒞_i, and
one arc c_{i−1} → f_i(c_{i−1}, y_i) labelled y_i with weight θᵀφ(c_{i−1}, y_i) (+ the
observation score of y_i). Every label sequence has exactly one path, so
p(y) = exp(path score − log Z) and all inference (log Z, marginals, Viterbi, sampling)
is done by :mod:`varorder.lattice`.

Selecting 𝒞_i (RCMS), during a forward pass, as in the paper's Appendix A:

1. expand 𝒞̃_i = 𝒞_{i−1} × 𝒴 in lexicographic order of the reversed strings (★ is the
   largest symbol), i.e. label-major then in the order of 𝒞_{i−1}; the list lcs̃ of
   longest common suffixes of neighbours is lcs_{i−1}[k] + 1 inside a label block and 0
   across blocks (no sorting needed);
2. mark the B expansions with the largest forward score active;
3. walk 𝒞̃_i backwards with a stack (a depth-first pass of the context tree) and merge
   every inactive expansion into its least active ancestor (or 𝒴_{1:i}), summing the
   forward scores; the actives, reversed, are 𝒞_i in order with its lcs list.

The loop (expand, group, keep best, merge, emit) is the engine's selection builder
(:mod:`varorder.engine.builder`); this module supplies its hooks: the state (suffix
patterns in lexicographic order, step 3's merge) and the scorer (θᵀφ of the n-gram
patterns). Cost per position: O(|𝒞_{i−1}|·|𝒴|) to
expand and merge plus O(B·|𝒴| log B) to select, i.e. O(L·B·|𝒴| log B) in all (n, the model order, is a
constant). The forward scores computed here only *select* contexts; inference on the
selected model is the engine's job.

By default contexts fix suffixes of any length, as in App. A: every expansion
c_{i−1} × {y_i} is its own candidate, and the B with the largest forward score are kept.

One extension (not in the paper) and one specification:

* ``max_context`` (an option; default: no cap) caps how many symbols a context fixes,
  e.g. at n − 1 for an n-gram model. Features cannot see further back, so two
  expansions that agree on their last n − 1 symbols have identical futures; with the
  cap they are merged (summing forward scores) *before* selection, which spends the
  budget B on contexts the model can tell apart, and with B ≥ |𝒴|^{n−1} the lattice is
  the exact n-gram model. The paper selects among the unmerged expansions, so with the
  same B the two rules generally keep different contexts.
* The start of the sequence is a specified boundary symbol (BOS), so a context that
  fixes the whole history also tells the features that the word starts there.

Beam search (paper §4.1) is the degenerate instance ``mode="beam"``: contexts are never
capped (a beam entry is a singleton {y_{1:i}}), only singletons are candidates, and the
arcs into 𝒴_{1:i} get the coverage weight (−∞ for plain beam search; finite values
give the "learned coverage feature" 𝕀[c_i = 𝒴_{1:i}] of §4.1).
"""

from __future__ import annotations

from dataclasses import dataclass

import numba as nb
import numpy as np

from varorder.contexts.features import NgramFeatureSpace
from varorder.engine.builder import FORCED, SelectionBuilder, root, selection_builder
from varorder.errors import ParameterError
from varorder.lattice import Lattice
import varorder._numba_start  # noqa: E402,F401,I001  (Numba's cache saves locked across processes)

__all__ = ["ContextLattice", "build_context_lattice", "UNBOUNDED"]

#: context length cap meaning "never cap" (beam search: singleton contexts)
UNBOUNDED = 1 << 40
_NEG_INF = -np.inf
# a context's state row: its ``slots`` stored symbols, then these columns
_LEN, _LCS, _ROOT = range(3)


@nb.njit(cache=True)
def _pattern_weight(theta, slots, length, label, window, num_labels, base, star, backoff):
    """θᵀφ for one (context, label): the full window pattern, plus its starred suffixes."""
    code = 0
    for j in range(window):
        code = code * base + slots[j]
    full = code * num_labels + label
    if not backoff:
        return theta[full], full
    total = 0.0
    kept_max = min(length, window)
    for kept in range(kept_max + 1):
        head = 0
        for _ in range(window - kept):
            head = head * base + star
        tail = 0
        for j in range(window - kept, window):
            tail = tail * base + slots[j]
        total += theta[(head * base ** kept + tail) * num_labels + label]
    return total, full


@nb.njit(cache=True)
def _expand(ctx, i, node_pos, node_fwd, node_state, prev_first, pc, c_src, c_lab, c_w, c_fwd, c_key, c_class,
            c_flags, c_payload):
    """Step 1 of App. A: expansions label-major, each label block in the order of 𝒞_{i−1};
    lcs̃ (payload column 1) is lcs_{i−1} + 1 inside a block, 0 across. Duplicates (possible
    only with capped contexts) are adjacent with lcs̃ == cap: one run, one state key."""
    obs, theta, window, slots, cap, beam_mode, forced, backoff, gold = ctx
    V = obs.shape[1]
    tail = slots - window  # features read the last `window` of the stored `slots` symbols
    base = V + 2
    star = V + 1
    forcing = forced[0] >= 0
    for y in range(V):
        for k in range(pc):
            e = y * pc + k
            u = prev_first + k
            c_src[e] = u
            c_lab[e] = y
            w, pat = _pattern_weight(theta, node_state[u, tail:slots], node_state[u, slots + _LEN], y, window, V,
                                     base, star, backoff)
            w += obs[i - 1, y]
            c_w[e] = w
            c_payload[e, 0] = pat
            c_payload[e, 1] = min(node_state[u, slots + _LCS] + 1, cap) if k + 1 < pc else 0
            c_fwd[e] = node_fwd[u] + w
            c_key[e] = c_key[e - 1] if e > 0 and c_payload[e - 1, 1] >= cap else e
            # beam search keeps singletons only
            c_class[e] = -1 if beam_mode and node_state[u, slots + _ROOT] == 1 else 0
            c_flags[e] = FORCED if forcing and y == forced[i - 1] and k == gold[0] else 0
    return pc * V


@nb.njit(cache=True)
def _open_state(ctx, i, node_state, c, c_src, c_lab, c_payload, row):
    """The context c_{i−1} × {y_i}: the parent's symbols shifted by one, y_i last."""
    slots, cap = ctx[3], ctx[4]
    u = c_src[c]
    for j in range(slots - 1):
        row[j] = node_state[u, j + 1]
    row[slots - 1] = c_lab[c]
    row[slots + _LEN] = min(node_state[u, slots + _LEN] + 1, cap)
    row[slots + _LCS] = -1
    row[slots + _ROOT] = 0


@nb.njit(cache=True)
def _merge(ctx, i, node_state, first, slot_group, c_src, c_lab, c_key, c_group, c_payload, n_exp, g_rep, g_fwd,
           g_flags, active, g_node, n_groups, g_target, c_target):
    """Step 3 of App. A: walk the groups backwards with a stack (a depth-first pass of the
    context tree) and merge every one not kept into its least kept ancestor (or 𝒴_{1:i});
    a kept context's lcs with the next is set on the way."""
    slots, cap, gold = ctx[3], ctx[4], ctx[8]
    stack_node = np.empty(n_groups + 1, np.int64)
    stack_len = np.empty(n_groups + 1, np.int64)
    stack_node[0] = -1  # the root 𝒴_{1:i}, which fixes nothing
    stack_len[0] = 0
    top = 0
    big = cap + 1
    ell = big
    for g in range(n_groups - 1, -1, -1):
        last_member = g_rep[g + 1] - 1 if g + 1 < n_groups else n_exp - 1  # groups are runs
        ell = min(ell, c_payload[last_member, 1])
        while ell < stack_len[top]:  # the top of the stack is not an ancestor
            top -= 1
        if active[g]:
            v = g_node[g]
            node_state[v, slots + _LCS] = ell
            top += 1
            stack_node[top] = v
            stack_len[top] = node_state[v, slots + _LEN]
            ell = big
            if g_flags[g] & FORCED:
                gold[0] = v - first
        else:
            g_target[g] = root(0) if stack_node[top] < 0 else stack_node[top]


@nb.njit(cache=True)
def _root_state(ctx, i, key, node_state, v, row):
    slots = ctx[3]
    star = ctx[0].shape[1] + 1
    for j in range(slots):
        row[j] = star
    row[slots + _LEN] = 0
    row[slots + _LCS] = -1
    row[slots + _ROOT] = 1


_LOOP = selection_builder(SelectionBuilder(_expand, _open_state, _merge, _root_state))


@nb.njit(cache=True)
def _build_kernel(obs, theta, window, slots, cap, num_contexts, beam_mode, coverage_weight, forced, backoff):
    L, V = obs.shape
    state0 = np.empty(slots + 3, np.int64)
    state0[:slots] = V  # position 0: the single context 𝒴_{1:0} = {()}, which fixes the (BOS-only) history
    state0[slots + _LEN] = cap
    state0[slots + _LCS] = -1
    state0[slots + _ROOT] = 0
    width = num_contexts + 2  # B actives + a forced gold context + the root
    gold = np.zeros(1, np.int64)  # index of the forced (gold) context in the previous context set
    ctx = (obs, theta, window, slots, cap, beam_mode, forced, backoff, gold)
    node_pos, node_fwd, state, src, dst, lab, w, apos, payload, _ = _LOOP(
        ctx, L, state0, 2, V, num_contexts, 1, -1 if beam_mode else 0, 1, True, coverage_weight, True,
        (1 + L * width, L * width * V, width * V))
    root = state[:, slots + _ROOT] == 1
    return (node_pos, state[:, :slots].copy(), state[:, slots + _LEN].copy(), state[:, slots + _LCS].copy(), root,
            node_fwd, src, dst, lab, w, payload[:, 0].copy(), apos, root[dst])


@dataclass
class ContextLattice:
    """The selected context sets of one sequence, as an engine lattice plus bookkeeping.

    ``lattice`` node v is context ``node_symbols[v]`` (its last n − 1 symbols, or the
    whole history when contexts are not capped at n − 1; codes of
    :class:`NgramFeatureSpace`: labels, BOS, ★) at position ``lattice.node_position[v]``,
    fixing ``node_length[v]`` symbols (BOS included, capped; ``UNBOUNDED`` for beam
    singletons). Within a position nodes are in lexicographic order with 𝒴_{1:i} last,
    and ``node_lcs[v]`` is the longest common suffix with the next node (−1 for the last).
    Arc a is the expansion (source context, label) merged into its target; it carries
    its n-gram pattern ``arc_pattern[a]``, position ``arc_position[a]`` (1-based) and
    whether it enters 𝒴_{1:i} (``arc_to_root[a]``, the coverage feature).
    """

    lattice: Lattice
    features: NgramFeatureSpace
    node_symbols: np.ndarray
    node_length: np.ndarray
    node_lcs: np.ndarray
    node_is_root: np.ndarray
    node_forward: np.ndarray
    arc_pattern: np.ndarray
    arc_position: np.ndarray
    arc_to_root: np.ndarray

    @property
    def length(self) -> int:
        return self.lattice.max_length

    def path_arcs(self, labels) -> np.ndarray:
        """Arc ids of the unique path spelling ``labels`` (the gold path under these contexts)."""
        labels = np.asarray(labels, dtype=np.int64)
        if labels.shape != (self.length,):
            raise ParameterError(f"labels must have shape ({self.length},), got {labels.shape}", name='labels', value=labels)
        lat = self.lattice
        node = 0
        arcs = np.empty(self.length, dtype=np.int64)
        for t, y in enumerate(labels):
            out = lat.out_arcs[lat.out_offsets[node]:lat.out_offsets[node + 1]]
            hit = out[lat.arc_label[out] == y]
            if hit.shape[0] != 1:
                raise ParameterError(f"labels[{t}] = {y} is not a label of this lattice", name='labels', value=labels)
            arcs[t] = hit[0]
            node = lat.arc_target[hit[0]]
        return arcs

    def context_lengths(self) -> np.ndarray:
        """Per node, the number of positions of y_{1:i} the context determines (non-★, BOS excluded)."""
        return np.minimum(self.node_length, self.lattice.node_position)

    def context_string(self, node: int, alphabet=None) -> str:
        """The node's context as a string of its stored slots, e.g. ``★ab`` (``^`` is BOS)."""
        V = self.features.num_labels
        alphabet = alphabet or [chr(ord("a") + v) if v < 26 else f"<{v}>" for v in range(V)]
        return "".join("★" if s == V + 1 else "^" if s == V else alphabet[s] for s in self.node_symbols[node])


def build_context_lattice(observation_scores, ngram_weights, features: NgramFeatureSpace, num_contexts: int,
                          *, mode: str = "rcms", coverage_weight: float | None = None,
                          max_context: int | None = None, force_labels=None) -> ContextLattice:
    """Select context sets for one sequence by RCMS (or beam search) and emit the lattice.

    Parameters
    ----------
    observation_scores : (L, V) log-potentials of each label at each position (the
        observation part of θᵀφ, e.g. pixel × letter weights applied to an image).
    ngram_weights : (features.size,) weights of the ★-extended n-gram indicators.
    features : the :class:`NgramFeatureSpace` (V, n, backoff).
    num_contexts : B, contexts kept per position besides 𝒴_{1:i} (beam size for beam).
    mode : "rcms" or "beam" (the degenerate case of §4.1).
    coverage_weight : weight added to every arc entering 𝒴_{1:i}; default 0 for RCMS,
        −∞ for beam (plain beam search).
    max_context : optional cap (≥ n − 1) on the symbols a context fixes, merging
        expansions that agree on that many symbols before selection (an extension);
        default None: contexts of any length, as in the paper's App. A. Beam search
        never caps (its contexts are singletons).
    force_labels : optional (L,) labels whose prefix is kept active at every position in
        addition to the B selected (used to keep the gold output on the beam in training).
    """
    obs = np.ascontiguousarray(observation_scores, dtype=np.float64)
    if obs.ndim != 2 or obs.shape[0] < 1 or obs.shape[1] != features.num_labels:
        raise ParameterError(f"observation_scores must have shape (L >= 1, {features.num_labels}), got {obs.shape}", name='observation_scores', value=observation_scores)
    if np.isnan(obs).any() or (obs == np.inf).any():
        raise ParameterError("observation_scores must not contain NaN or +inf", name='observation_scores', value=observation_scores)
    theta = np.ascontiguousarray(ngram_weights, dtype=np.float64)
    if theta.shape != (features.size,):
        raise ParameterError(f"ngram_weights must have shape ({features.size},), got {theta.shape}", name='ngram_weights', value=ngram_weights)
    B = int(num_contexts)
    if B < 1:
        raise ParameterError(f"num_contexts must be >= 1, got {num_contexts}", name='num_contexts', value=num_contexts)
    if mode not in ("rcms", "beam"):
        raise ParameterError(f"mode must be 'rcms' or 'beam', got {mode!r}", name='mode', value=mode)
    beam = mode == "beam"
    if coverage_weight is None:
        coverage_weight = -np.inf if beam else 0.0
    coverage_weight = float(coverage_weight)
    if np.isnan(coverage_weight) or coverage_weight == np.inf:
        raise ParameterError(f"coverage_weight must be finite or -inf, got {coverage_weight}", name='coverage_weight', value=coverage_weight)
    if beam:
        if max_context is not None:
            raise ParameterError("max_context does not apply to beam search (its contexts are singletons)", name='max_context', value=max_context)
        cap = UNBOUNDED
    else:
        cap = UNBOUNDED if max_context is None else int(max_context)
        if cap < features.window:
            raise ParameterError(f"max_context must be >= n - 1 = {features.window}, got {max_context}", name='max_context', value=max_context)
    L = obs.shape[0]
    if force_labels is None:
        forced = np.full(L, -1, dtype=np.int64)
    else:
        forced = np.asarray(force_labels, dtype=np.int64)
        if forced.shape != (L,) or (forced < 0).any() or (forced >= features.num_labels).any():
            raise ParameterError(f"force_labels must be {L} labels in [0, {features.num_labels})", name='force_labels', value=force_labels)
    # store whole histories when contexts may fix more than the feature window
    slots = features.window if cap == features.window else max(features.window, min(cap, L))
    (pos, sym, length, lcs, root, fwd, src, dst, lab, w, pat, apos, aroot) = _build_kernel(
        obs, theta, features.window, slots, cap, B, beam, coverage_weight, forced, features.backoff)
    lattice = Lattice(pos, src, dst, lab, w)
    return ContextLattice(lattice, features, sym, length, lcs, root, fwd, pat, apos, aroot)
