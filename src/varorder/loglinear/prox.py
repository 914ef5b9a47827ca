"""Proximal operators of the penalties of Nelakanti et al. (EMNLP 2013), "Structured
Penalties for Log-linear Language Models" (§3-§4, Algorithms 2-4).

Each operator solves ``argmin_w ½‖w − v‖² + λ Ω(w)`` for one penalty Ω and returns a new
array. Tree penalties act on a *forest in depth-first preorder*: ``parent[i] < i`` (−1 for
a root) and every subtree is the contiguous range ``[i, i + size[i])``; one group per node,
the group of node j being its whole subtree (paper Definitions 1-2):

* ℓ2² (eq. 6):   Ω(w) = ½ Σ_i a_i w_i²                → w_i = v_i / (1 + λ a_i)
* ℓ1 (eq. 7):    Ω(w) = Σ_i a_i |w_i|                 → soft thresholding by λ a_i
* ℓT2 (Alg. 2):  Ω(w) = Σ_j a_j ‖w_{subtree(j)}‖₂      → one upward and one downward pass
* ℓT∞ (Alg. 3):  Ω(w) = Σ_j a_j ‖w_{subtree(j)}‖∞      → bottom-up residuals of ℓ1-ball
  projections, each threshold found by random pivoting (Bruckner 1984), on the trie or on
  the collapsed tree (nodes carry a count c: a constant-value chain of c trie nodes,
  Props. 1-2: one projection with λ·Σ a over the chain replaces c projections)
* ℓT∞ (Alg. 4):  the same by a k-best heap per subtree (pairing heaps merged on the way up;
  entries clipped to a common value are fused, so the heaps stay small)

``a`` is the per-node weight: 1 for the unweighted penalties and for the paper's weighted
forms, which scale the *features* by α^depth instead (see ``StructuredLogLinear.weighting``);
α^depth (:func:`depth_weights`) under the group-weight extension. The paper's best α: 0.5 wℓ2²,
0.7 wℓ1, 1.1 wℓT2, 0.85 wℓT∞ (§6). :func:`penalty_value` evaluates Ω itself.
:func:`project_nonnegative` is the positivity constraint (§2.5, Algorithm 1 step 2); for
every penalty here Ω(|w|) = Ω(w), so prox_{Ω + ι(w ≥ 0)}(v) = prox_Ω([v]₊).
"""

from __future__ import annotations

import numba as nb
import numpy as np
import varorder._numba_start  # noqa: E402,F401,I001  (Numba's cache saves locked across processes)

from varorder.errors import ParameterError

__all__ = [
    "PENALTIES",
    "collapse_chains",
    "depth_weights",
    "expand_collapsed",
    "penalty_value",
    "preorder_sizes",
    "project_nonnegative",
    "prox",
    "prox_l1",
    "prox_l2sq",
    "prox_tree_l2",
    "prox_tree_linf_collapsed",
    "prox_tree_linf_heap",
    "prox_tree_linf_pivot",
]

# name -> (operator kind, the paper's best α for the weighted form or 1.0)
PENALTIES = {
    "l2sq": ("l2sq", 1.0), "wl2sq": ("l2sq", 0.5),
    "l1": ("l1", 1.0), "wl1": ("l1", 0.7),
    "lt2": ("tree_l2", 1.0), "wlt2": ("tree_l2", 1.1),
    "ltinf": ("tree_linf", 1.0), "wltinf": ("tree_linf", 0.85),
}


def _as_float(values) -> np.ndarray:
    return np.array(values, dtype=np.float64, copy=True)


def _node_weights(weights, n: int) -> np.ndarray:
    if weights is None:
        return np.ones(n)
    weights = np.asarray(weights, dtype=np.float64)
    if weights.shape != (n,):
        raise ParameterError(f"weights must have shape ({n},), got {weights.shape}", name='weights', value=weights)
    if (weights < 0).any():
        raise ParameterError("weights must be non-negative", name='weights', value=weights)
    return weights


def _check_lam(lam: float) -> float:
    lam = float(lam)
    if not lam >= 0.0:
        raise ParameterError(f"the threshold λ must be non-negative, got {lam}", name='lam', value=lam)
    return lam


def _check_forest(parent) -> np.ndarray:
    parent = np.ascontiguousarray(parent, dtype=np.int64)
    index = np.arange(len(parent))
    if ((parent >= index) | (parent < -1)).any():
        bad = int(np.flatnonzero((parent >= index) | (parent < -1))[0])
        raise ParameterError(f"parent[{bad}] = {parent[bad]}: a forest in preorder needs -1 <= parent[i] < i", name='parent', value=parent)
    return parent


def depth_weights(depth, alpha: float) -> np.ndarray:
    """α^depth per node: the paper's weighting of a feature at depth m of the suffix trie."""
    return np.power(float(alpha), np.asarray(depth, dtype=np.float64))


@nb.njit(cache=True)
def _tree_penalty_kernel(w, parent, weights, use_max):
    n = len(w)
    acc = np.zeros(n)
    for i in range(n):
        acc[i] = abs(w[i]) if use_max else w[i] * w[i]
    total = 0.0
    for i in range(n - 1, -1, -1):  # children have larger preorder indices: done before i
        total += weights[i] * (acc[i] if use_max else np.sqrt(acc[i]))
        p = parent[i]
        if p >= 0:
            acc[p] = max(acc[p], acc[i]) if use_max else acc[p] + acc[i]
    return total


def penalty_value(kind: str, values, *, parent=None, weights=None) -> float:
    """Ω(w) of an operator kind of :data:`PENALTIES` ("l2sq", "l1", "tree_l2", "tree_linf"),
    with per-node weights ``a`` (default 1): the penalty half of the objective (eq. 2)."""
    w = np.ascontiguousarray(values, dtype=np.float64)
    a = _node_weights(weights, len(w))
    if kind == "l2sq":
        return float(0.5 * np.sum(a * w * w))
    if kind == "l1":
        return float(np.sum(a * np.abs(w)))
    if kind in ("tree_l2", "tree_linf"):
        return float(_tree_penalty_kernel(w, _check_forest(parent), a, kind == "tree_linf"))
    raise ParameterError(f"unknown penalty kind {kind!r}; expected one of l2sq, l1, tree_l2, tree_linf", name='kind', value=kind)


def project_nonnegative(values) -> np.ndarray:
    """[v]₊: the projection onto the non-negative orthant (Algorithm 1, step 2)."""
    return np.maximum(np.asarray(values, dtype=np.float64), 0.0)


def prox_l2sq(values, lam: float, weights=None) -> np.ndarray:
    """Prox of λ·½Σ a_i w_i² (eq. 6): element-wise rescaling v_i / (1 + λ a_i)."""
    v = _as_float(values)
    return v / (1.0 + _check_lam(lam) * _node_weights(weights, len(v)))


def prox_l1(values, lam: float, weights=None) -> np.ndarray:
    """Prox of λ·Σ a_i |w_i| (eq. 7): soft thresholding sign(v)·max(|v| − λ a_i, 0)."""
    v = _as_float(values)
    return np.sign(v) * np.maximum(np.abs(v) - _check_lam(lam) * _node_weights(weights, len(v)), 0.0)


@nb.njit(cache=True)
def _preorder_sizes(parent):
    n = len(parent)
    size = np.ones(n, dtype=np.int64)
    for i in range(n - 1, -1, -1):
        if parent[i] >= 0:
            size[parent[i]] += size[i]
    return size


def preorder_sizes(parent) -> np.ndarray:
    """Subtree sizes of a forest in preorder; raises ParameterError when the subtrees are not
    the contiguous ranges ``[i, i + size[i])`` that preorder guarantees."""
    parent = _check_forest(parent)
    size = _preorder_sizes(parent)
    # preorder <=> each node's parent range contains it: parent[i] + size[parent[i]] > i
    has_parent = parent >= 0
    ends = parent[has_parent] + size[parent[has_parent]]
    if (ends <= np.flatnonzero(has_parent)).any():
        raise ParameterError("parent does not describe a forest in depth-first preorder (a subtree is not contiguous)", name='parent', value=parent)
    return size


@nb.njit(cache=True)
def _tree_l2_kernel(w, parent, thresholds):
    n = len(w)
    zeta = np.zeros(n)
    eta = np.ones(n)
    for i in range(n - 1, -1, -1):  # upward pass: children have larger preorder indices
        zeta[i] += w[i] * w[i]
        norm = np.sqrt(zeta[i])
        eta[i] = 1.0 - thresholds[i] / norm if norm > thresholds[i] else 0.0
        zeta[i] *= eta[i] * eta[i]
        if parent[i] >= 0:
            zeta[parent[i]] += zeta[i]
    for i in range(n):  # downward pass: scale factors multiply along the path from the root
        if parent[i] >= 0:
            eta[i] *= eta[parent[i]]
        w[i] *= eta[i]


def prox_tree_l2(values, parent, lam: float, weights=None) -> np.ndarray:
    """Prox of λ·Σ_j a_j ‖w_{subtree(j)}‖₂ by Algorithm 2 (Jenatton et al. 2011): an upward
    pass accumulates squared norms and the shrink factor η_j = [1 − λ a_j / ‖·‖]₊ of each
    group, a downward pass multiplies each weight by the product of η along its path."""
    v = _as_float(values)
    parent = _check_forest(parent)
    _tree_l2_kernel(v, parent, _check_lam(lam) * _node_weights(weights, len(v)))
    return v


@nb.njit(cache=True)
def _next_random(state):
    # xorshift64*: deterministic pivots whatever the thread count or NumPy's global seed
    state ^= state >> np.uint64(12)
    state ^= state << np.uint64(25)
    state ^= state >> np.uint64(27)
    return state, (state * np.uint64(2685821657736338717)) >> np.uint64(33)


@nb.njit(cache=True)
def _linf_threshold(mags, counts, lam, scratch, state):
    """The level r with Σ c_i (|v_i| − r)₊ = λ (Algorithm 3's random pivoting), or −1 when
    Σ c_i |v_i| <= λ (the group lies in the ℓ1 ball: its residual is zero)."""
    n = len(mags)
    total = 0.0
    for i in range(n):
        total += counts[i] * mags[i]
    if total <= lam:
        return -1.0, state
    if lam <= 0.0:
        return np.inf, state
    for i in range(n):
        scratch[i] = i
    lo, hi = 0, n  # candidate set I = scratch[lo:hi]
    s_acc = 0.0
    c_acc = 0.0
    while hi > lo:
        state, r = _next_random(state)
        k = lo + np.int64(r % np.uint64(hi - lo))
        pivot = mags[scratch[k]]
        # partition I into U = {>= pivot} at the front and L = {< pivot} at the back
        a, b = lo, hi - 1
        while a <= b:
            if mags[scratch[a]] >= pivot:
                a += 1
            else:
                scratch[a], scratch[b] = scratch[b], scratch[a]
                b -= 1
        ds = 0.0
        dc = 0.0
        for t in range(lo, a):
            ds += mags[scratch[t]] * counts[scratch[t]]
            dc += counts[scratch[t]]
        if (s_acc + ds) - (c_acc + dc) * pivot < lam:
            s_acc += ds
            c_acc += dc
            lo = a  # I := L
        else:
            # I := U \ {pivot}: drop one element equal to the pivot
            for t in range(lo, a):
                if mags[scratch[t]] == pivot:
                    scratch[t], scratch[a - 1] = scratch[a - 1], scratch[t]
                    break
            hi = a - 1
    return (s_acc - lam) / c_acc, state


@nb.njit(cache=True)
def _tree_linf_pivot_kernel(w, size, counts, thresholds, seed):
    n = len(w)
    mags = np.abs(w)
    scratch = np.empty(n, dtype=np.int64)
    state = np.uint64(seed) * np.uint64(0x9E3779B97F4A7C15) | np.uint64(1)
    for j in range(n - 1, -1, -1):  # postorder: every subtree of j is already projected
        end = j + size[j]
        r, state = _linf_threshold(mags[j:end], counts[j:end], thresholds[j], scratch, state)
        if r < 0.0:
            for i in range(j, end):
                mags[i] = 0.0
        else:
            for i in range(j, end):
                if mags[i] > r:
                    mags[i] = r
    for i in range(n):
        w[i] = mags[i] if w[i] >= 0.0 else -mags[i]


def prox_tree_linf_pivot(values, parent, lam: float, weights=None, *, seed: int = 0) -> np.ndarray:
    """Prox of λ·Σ_j a_j ‖w_{subtree(j)}‖∞ on the trie by Algorithm 3: for each node in
    postorder its subtree is replaced by the residual of its projection on the ℓ1 ball of
    radius λ a_j, i.e. clipped at the level r found by random pivoting. O(|S|·depth)."""
    v = _as_float(values)
    size = preorder_sizes(parent)
    _tree_linf_pivot_kernel(v, size, np.ones(len(v)), _check_lam(lam) * _node_weights(weights, len(v)), seed)
    return v


def prox_tree_linf_collapsed(values, counts, parent, lam: float, chain_weights=None, *, seed: int = 0) -> np.ndarray:
    """Algorithm 3 on the collapsed suffix tree: node x stands for a constant-value chain of
    ``counts[x]`` trie nodes, and (Prop. 2) the chain's ``counts[x]`` successive projections
    are one projection with threshold λ·chain_weights[x] (the sum of a over the chain; the
    count itself when unweighted). Returns one value per collapsed node."""
    v = _as_float(values)
    counts = np.asarray(counts, dtype=np.float64)
    if counts.shape != v.shape or (counts < 1).any():
        raise ParameterError("counts must hold one count >= 1 per node", name='counts', value=counts)
    chain = counts if chain_weights is None else _node_weights(chain_weights, len(v))
    size = preorder_sizes(parent)
    _tree_linf_pivot_kernel(v, size, counts, _check_lam(lam) * chain, seed)
    return v


# --- Algorithm 4: k-best heaps ------------------------------------------------------------
# A max pairing heap over entries (value, count) in flat arrays: merge is O(1), popping the
# maximum is amortised O(log size). An entry fused from others records it in ``fused_into``
# so every original node can read its final value at the end.


@nb.njit(cache=True)
def _heap_meld(a, b, value, child, sibling):
    if a < 0:
        return b
    if b < 0:
        return a
    if value[b] > value[a]:
        a, b = b, a
    sibling[b] = child[a]
    child[a] = b
    return a


@nb.njit(cache=True)
def _heap_pop(root, value, child, sibling):
    """Remove the root; return the new root (two-pass pairing of its children)."""
    first = child[root]
    child[root] = -1
    if first < 0:
        return -1
    # pass 1: meld pairs left to right, pushing results on a stack kept in ``sibling``
    stack = -1
    while first >= 0:
        a = first
        b = sibling[a]
        if b >= 0:
            first = sibling[b]
            sibling[a] = -1
            sibling[b] = -1
            m = _heap_meld(a, b, value, child, sibling)
        else:
            first = -1
            sibling[a] = -1
            m = a
        sibling[m] = stack
        stack = m
    # pass 2: meld right to left
    result = -1
    while stack >= 0:
        nxt = sibling[stack]
        sibling[stack] = -1
        result = _heap_meld(result, stack, value, child, sibling)
        stack = nxt
    return result


@nb.njit(cache=True)
def _tree_linf_heap_kernel(w, parent, counts, thresholds):
    n = len(w)
    capacity = 2 * n + 1
    value = np.empty(capacity)
    count = np.empty(capacity)
    child = np.full(capacity, -1, dtype=np.int64)
    sibling = np.full(capacity, -1, dtype=np.int64)
    fused_into = np.full(capacity, -1, dtype=np.int64)
    heap_of = np.full(n, -1, dtype=np.int64)  # root entry of the heap of node j's subtree
    l1 = np.zeros(n)  # ℓ1 norm (Σ c |v|) of the subtree of j, kept current
    popped = np.empty(n, dtype=np.int64)
    entries = n
    for i in range(n):
        value[i] = abs(w[i])
        count[i] = counts[i]
    for j in range(n - 1, -1, -1):
        l1[j] += value[j] * count[j]
        root = _heap_meld(heap_of[j], j, value, child, sibling)
        lam = thresholds[j]
        if lam <= 0.0:
            pass  # a zero threshold leaves the subtree as it is
        elif l1[j] <= lam:
            # the whole subtree is inside the ℓ1 ball: its residual is zero. Everything in
            # this heap becomes one zero entry.
            fused = entries
            entries += 1
            value[fused] = 0.0
            count[fused] = 0.0
            child[fused] = -1
            sibling[fused] = -1
            while root >= 0:
                top = root
                root = _heap_pop(root, value, child, sibling)
                fused_into[top] = fused
                count[fused] += count[top]
            root = fused
            l1[j] = 0.0
        else:
            # pop the k largest while they stay above the running threshold (S − λ) / C
            s_acc = 0.0
            c_acc = 0.0
            k = 0
            while root >= 0:
                v_top = value[root]
                if v_top * (c_acc + count[root]) > s_acc + v_top * count[root] - lam:
                    s_acc += v_top * count[root]
                    c_acc += count[root]
                    popped[k] = root
                    k += 1
                    root = _heap_pop(root, value, child, sibling)
                else:
                    break
            r = (s_acc - lam) / c_acc
            fused = entries
            entries += 1
            value[fused] = r
            count[fused] = c_acc
            child[fused] = -1
            sibling[fused] = -1
            for t in range(k):
                fused_into[popped[t]] = fused
            root = _heap_meld(root, fused, value, child, sibling)
            l1[j] -= s_acc - r * c_acc
        heap_of[j] = root
        if parent[j] >= 0:
            p = parent[j]
            heap_of[p] = _heap_meld(heap_of[p], root, value, child, sibling)
            l1[p] += l1[j]
    for i in range(n):
        e = i
        while fused_into[e] >= 0:
            e = fused_into[e]
        mag = value[e]
        w[i] = mag if w[i] >= 0.0 else -mag


def prox_tree_linf_heap(values, parent, lam: float, weights=None, *, counts=None) -> np.ndarray:
    """Prox of λ·Σ_j a_j ‖w_{subtree(j)}‖∞ by Algorithm 4: a max-heap of each subtree's
    entries, built bottom-up by melding the children's heaps; the clipping level comes from
    the k largest entries only, and those k are fused into one entry (Prop. 1: they now
    share a value). With ``counts`` the input is a collapsed tree and ``weights`` the
    per-node chain weights Σ a over each chain (default: the counts). O(|T| k log |T|)."""
    v = _as_float(values)
    parent = _check_forest(parent)
    preorder_sizes(parent)
    if counts is None:
        counts = np.ones(len(v))
        chain = _node_weights(weights, len(v))
    else:
        counts = np.asarray(counts, dtype=np.float64)
        if counts.shape != v.shape or (counts < 1).any():
            raise ParameterError("counts must hold one count >= 1 per node", name='counts', value=counts)
        chain = counts if weights is None else _node_weights(weights, len(v))
    _tree_linf_heap_kernel(v, parent, counts, _check_lam(lam) * chain)
    return v


# --- collapsed trees ------------------------------------------------------------------------


def collapse_chains(values, parent, weights=None):
    """Collapse constant-value non-branching paths (paper Definition 3) of a preorder forest.

    A node is merged into its parent when it is the parent's only child and has the
    parent's value. Returns ``(values, counts, parent, chain_weights, node_of)``: the
    collapsed forest (in preorder), the number of trie nodes each collapsed node stands
    for, the sum of the weights over each chain, and for every trie node its collapsed node.
    """
    v = np.asarray(values, dtype=np.float64)
    parent = _check_forest(parent)
    a = _node_weights(weights, len(v))
    n_children = np.bincount(parent[parent >= 0], minlength=len(v))
    has_parent = parent >= 0
    merged = np.zeros(len(v), dtype=bool)
    merged[has_parent] = (n_children[parent[has_parent]] == 1) & (v[has_parent] == v[parent[has_parent]])
    node_of = np.empty(len(v), dtype=np.int64)
    new_index = np.cumsum(~merged) - 1
    for i in range(len(v)):  # parents precede children: the parent's collapsed node is known
        node_of[i] = node_of[parent[i]] if merged[i] else new_index[i]
    kept = np.flatnonzero(~merged)
    collapsed_parent = np.where(parent[kept] >= 0, node_of[np.maximum(parent[kept], 0)], -1)
    counts = np.bincount(node_of, minlength=len(kept)).astype(np.float64)
    chain_weights = np.bincount(node_of, weights=a, minlength=len(kept))
    return v[kept].copy(), counts, collapsed_parent, chain_weights, node_of


def expand_collapsed(collapsed_values, node_of) -> np.ndarray:
    """Trie-structured values from collapsed ones (each trie node reads its chain's value)."""
    return np.asarray(collapsed_values, dtype=np.float64)[np.asarray(node_of)]


def prox(kind: str, values, lam: float, *, parent=None, weights=None) -> np.ndarray:
    """Dispatch on the operator kind of :data:`PENALTIES` ("l2sq", "l1", "tree_l2",
    "tree_linf" — the last by the heap, which equals random pivoting)."""
    if kind == "l2sq":
        return prox_l2sq(values, lam, weights)
    if kind == "l1":
        return prox_l1(values, lam, weights)
    if kind == "tree_l2":
        return prox_tree_l2(values, parent, lam, weights)
    if kind == "tree_linf":
        return prox_tree_linf_heap(values, parent, lam, weights)
    raise ParameterError(f"unknown penalty kind {kind!r}; expected one of l2sq, l1, tree_l2, tree_linf", name='kind', value=kind)


def prox_inplace(kind: str, values: np.ndarray, parent: np.ndarray, thresholds: np.ndarray, *,
                 method: str = "heap", sizes: np.ndarray | None = None) -> None:
    """In place, without re-validating the forest: the training loop's path. ``thresholds``
    holds λ·a per node (already scaled by the step). ``method`` picks Algorithm 4 ("heap")
    or 3 ("pivot", needs ``sizes`` from :func:`preorder_sizes`) for ℓT∞."""
    if kind == "l2sq":
        values /= 1.0 + thresholds
    elif kind == "l1":
        np.copyto(values, np.sign(values) * np.maximum(np.abs(values) - thresholds, 0.0))
    elif kind == "tree_l2":
        _tree_l2_kernel(values, parent, thresholds)
    elif kind == "tree_linf" and method == "pivot":
        _tree_linf_pivot_kernel(values, sizes, np.ones(len(values)), thresholds, 0)
    elif kind == "tree_linf":
        _tree_linf_heap_kernel(values, parent, np.ones(len(values)), thresholds)
    else:
        raise ParameterError(f"unknown penalty kind {kind!r}", name='kind', value=kind)
