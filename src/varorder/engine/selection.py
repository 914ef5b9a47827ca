"""Forward pass with selection: the one implementation of the step that RCMS and beam
search share (Steinhardt & Liang 2015, "Reified Context Models", App. A and §4.1).

A builder grows a lattice position by position. At position i every kept context of
position i − 1 is expanded by every label; expansions that the state cannot tell apart
(same capped context, same root) are *grouped*, their forward scores ⊕-summed in the
LOG semiring (:func:`group_of_slot`); the B groups of largest forward score are kept
(:func:`keep_best`, optionally per class: B per alignment position z_i in the
transducer), ties going to the earlier group and groups nothing reaches (forward −∞)
never kept; every other group is merged into its least kept ancestor (RCMS) or dropped
(beam). What a context *is* (a suffix pattern, an n-gram state, an alignment state), how
an expansion is scored and which kept context is an expansion's least ancestor are the
builder's own (its state and scorer): :mod:`varorder.contexts.context_set`,
:mod:`varorder.decipher.context_sets`, :mod:`varorder.transduce.lattice`. The forward
scores only select; inference on the built lattice is the engine's
(:mod:`varorder.engine.lattice`).

``keep_best`` finds the same set as a stable sort by −score read from the top, with
bounded heaps (the worst kept candidate on top) in O(n log B) instead of O(n log n);
candidates arrive in increasing index order, so "earlier" is "smaller index", and a
candidate that does not beat the worst kept score is rejected with one comparison.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from varorder.engine.semiring import log_plus
import varorder._numba_start  # noqa: E402,F401,I001  (Numba's cache saves locked across processes)

__all__ = ["keep_best", "group_of_slot"]

_NEG_INF = -np.inf


@nb.njit(cache=True, nogil=True, inline="always")
def _worse(fwd, a, b):
    """Candidate a ranks below b: lower forward score, ties broken by the later index."""
    return fwd[a] < fwd[b] or (fwd[a] == fwd[b] and a > b)


@nb.njit(cache=True, nogil=True, inline="always")
def _heap_offer(fwd, heap, base, size, capacity, g):
    """Offer candidate g to the bounded min-heap ``heap[base : base + capacity]`` (worst on
    top) holding ``size`` entries; returns the new size."""
    if size < capacity:
        k = size
        heap[base + k] = g
        while k > 0:
            parent = (k - 1) // 2
            if not _worse(fwd, heap[base + k], heap[base + parent]):
                break
            heap[base + k], heap[base + parent] = heap[base + parent], heap[base + k]
            k = parent
        return size + 1
    if not _worse(fwd, heap[base], g):
        return size
    heap[base] = g
    k = 0
    while True:
        child = 2 * k + 1
        if child >= size:
            break
        if child + 1 < size and _worse(fwd, heap[base + child + 1], heap[base + child]):
            child += 1
        if not _worse(fwd, heap[base + child], heap[base + k]):
            break
        heap[base + k], heap[base + child] = heap[base + child], heap[base + k]
        k = child
    return size


@nb.njit(cache=True, nogil=True)
def keep_best(fwd, n, classes, n_classes, budget, active):
    """Set ``active[g]`` for the ``budget`` candidates g < n of largest ``fwd[g]`` within
    each class ``classes[g]`` (0 … n_classes − 1; a negative class is not a candidate),
    ties to the smaller g; candidates with fwd −∞ are never kept. Other entries of
    ``active`` are left as they are, so calls (and forced entries) combine by union."""
    if budget <= 0 or n_classes <= 0:
        return
    heap = np.empty(n_classes * budget, np.int64)
    size = np.zeros(n_classes, np.int64)
    # Per class the score a candidate must beat: −∞ while the heap has room, then the
    # worst kept score (candidates come in increasing g, so a tie loses to the kept one).
    bar = np.full(n_classes, _NEG_INF)
    for g in range(n):
        k = classes[g]
        if k < 0 or not fwd[g] > bar[k]:
            continue
        base = k * budget
        size[k] = _heap_offer(fwd, heap, base, size[k], budget, g)
        if size[k] == budget:
            bar[k] = fwd[heap[base]]
    for k in range(n_classes):
        for t in range(size[k]):
            active[heap[k * budget + t]] = True


@nb.njit(cache=True, nogil=True)
def group_of_slot(slot_group, slot, f, n_groups, g_fwd):
    """The group of an expansion whose state is keyed ``slot`` (``slot_group[slot]``, −1
    while none): an existing group ⊕-adds forward score f; otherwise group ``n_groups``
    is opened with score f. Returns (group, new group count, whether it is new); the
    builder records the new group's state and resets ``slot_group`` after the position."""
    g = slot_group[slot]
    if g >= 0:
        g_fwd[g] = log_plus(g_fwd[g], f)
        return g, n_groups, False
    slot_group[slot] = n_groups
    g_fwd[n_groups] = f
    return n_groups, n_groups + 1, True
