"""Structured semirings: values that are rows of floats, for entropy and k-best.

EXPECTATION — the first-order expectation semiring of Li & Eisner (2009), in a log-space
form. Li & Eisner's value ⟨p, r⟩ (p a weight, r = Σ p(d)·f(d) over derivations d of an
additive function f) has ⟨p₁, r₁⟩ ⊕ ⟨p₂, r₂⟩ = ⟨p₁ + p₂, r₁ + r₂⟩ and
⟨p₁, r₁⟩ ⊗ ⟨p₂, r₂⟩ = ⟨p₁p₂, p₁r₂ + p₂r₁⟩. Here a value is the row (log p, r/p): the log
weight and the mean of f under it, so nothing overflows and ⊗ is elementwise +:

    (a₁, m₁) ⊗ (a₂, m₂) = (a₁ + a₂, m₁ + m₂)
    (a₁, m₁) ⊕ (a₂, m₂) = (log(eᵃ¹ + eᵃ²), (eᵃ¹ m₁ + eᵃ² m₂) / (eᵃ¹ + eᵃ²))

zero = (−inf, 0), one = (0, 0). An arc of log-weight w lifts to (w, w) (f = the score),
so a forward pass yields (log Z, E[score]) and the entropy is log Z − E[score]. The first
component is computed exactly as LOG's ⊕ computes it (``log_plus``), so it equals log Z
of the LOG recursion bit for bit.

KBEST — k-best max-plus lists (Huang & Chiang 2005; Goodman 1999's k-best semiring): a
value is a list of the k largest scores, best first, −inf padded (k chosen per call; the
semiring reads it from the row length). ⊕ merges two lists and keeps the first k; ⊗
keeps the k largest pairwise sums. Ties are broken by position, so every structure's
order is deterministic: ⊕ takes from its left operand first, ⊗ orders equal sums by the
left operand's rank, then the right's. zero = (−inf, …), one = (0, −inf, …); an arc of
log-weight w lifts to (w, −inf, …), so ⊗ by a lifted weight shifts a list. A forward pass
yields the k best path scores; the paths come from a backtrack
(:mod:`varorder.engine.kbest`).

Both follow the cell contract of :class:`varorder.engine.semiring.Semiring`: operations
write into a destination row, which may be an operand, and return it.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from varorder.engine.semiring import NEG_INF, Semiring, register
import varorder._numba_start  # noqa: E402,F401,I001  (Numba's cache saves locked across processes)

__all__ = ["EXPECTATION", "KBEST", "entropy_of", "merge_count", "top_sums"]


# ---------------------------------------------------------------------------
# expectation semiring: rows (log weight, mean of the additive function)
# ---------------------------------------------------------------------------


@nb.njit(cache=True, inline="always")
def _exp_zero(dst):
    dst[0] = NEG_INF
    dst[1] = 0.0
    return dst


@nb.njit(cache=True, inline="always")
def _exp_one(dst):
    dst[0] = 0.0
    dst[1] = 0.0
    return dst


@nb.njit(cache=True, inline="always")
def _exp_plus(dst, a, b):
    a0, a1, b0, b1 = a[0], a[1], b[0], b[1]
    if a0 == NEG_INF:
        dst[0] = b0
        dst[1] = b1
    elif b0 == NEG_INF:
        dst[0] = a0
        dst[1] = a1
    elif a0 > b0:
        e = np.exp(b0 - a0)
        dst[0] = a0 + np.log1p(e)  # log_plus's arithmetic: the first entry is LOG's value
        dst[1] = (a1 + e * b1) / (1.0 + e)
    else:
        e = np.exp(a0 - b0)
        dst[0] = b0 + np.log1p(e)
        dst[1] = (b1 + e * a1) / (1.0 + e)
    return dst


@nb.njit(cache=True, inline="always")
def _exp_product(dst, a0, a1, b0, b1):
    """dst = (a0, a1) ⊗ (b0, b1): log weights add, means add; zero if either is zero."""
    if a0 == NEG_INF or b0 == NEG_INF:
        dst[0] = NEG_INF
        dst[1] = 0.0
    else:
        dst[0] = a0 + b0
        dst[1] = a1 + b1
    return dst


@nb.njit(cache=True, inline="always")
def _exp_times(dst, a, b):
    return _exp_product(dst, a[0], a[1], b[0], b[1])


@nb.njit(cache=True, inline="always")
def _exp_times_weight(dst, a, w):
    return _exp_product(dst, a[0], a[1], w, w)  # the lift of w is (w, w)


EXPECTATION = register(Semiring("expectation", _exp_plus, _exp_times, _exp_zero, _exp_one, None, 2,
                                _exp_times_weight))


def entropy_of(values: np.ndarray) -> np.ndarray:
    """Entropy (nats) from EXPECTATION values (..., 2): log Z − E[score], clipped at 0 (it
    is ≥ 0; rounding may make it a hair negative), NaN where log Z = −inf."""
    values = np.asarray(values, dtype=np.float64)
    h = values[..., 0] - values[..., 1]
    return np.where(values[..., 0] == NEG_INF, np.nan, np.where(h > 0.0, h, 0.0))


# ---------------------------------------------------------------------------
# k-best semiring: rows of the k largest scores, best first
# ---------------------------------------------------------------------------


@nb.njit(cache=True, inline="always")
def _kb_zero(dst):
    for r in range(dst.shape[0]):
        dst[r] = NEG_INF
    return dst


@nb.njit(cache=True, inline="always")
def _kb_one(dst):
    _kb_zero(dst)
    dst[0] = 0.0
    return dst


@nb.njit(cache=True)
def merge_count(a, b, shift):
    """How many of the k first entries of the stable merge of ``a`` and ``b + shift`` (both
    descending) come from ``a`` (ties go to ``a``)."""
    k = a.shape[0]
    ia = 0
    ib = 0
    while ia + ib < k:
        if ib >= k or (ia < k and a[ia] >= b[ib] + shift):
            ia += 1
        else:
            ib += 1
    return ia


@nb.njit(cache=True)
def _merge_into(dst, a, b, shift):
    """dst = the k first entries of the stable merge of a and b + shift; dst may be a or b
    (filled from the back: position ia + ib + 1 is never one still to be read)."""
    k = a.shape[0]
    ia = merge_count(a, b, shift) - 1
    ib = k - ia - 2
    for r in range(k - 1, -1, -1):
        if ib < 0 or (ia >= 0 and a[ia] < b[ib] + shift):
            dst[r] = a[ia]
            ia -= 1
        else:
            dst[r] = b[ib] + shift
            ib -= 1
    return dst


@nb.njit(cache=True, inline="always")
def _kb_plus(dst, a, b):
    return _merge_into(dst, a, b, 0.0)


@nb.njit(cache=True, inline="always")
def _kb_times_weight(dst, a, w):
    for r in range(a.shape[0]):
        dst[r] = a[r] + w
    return dst


@nb.njit(cache=True)
def top_sums(a, b, out, from_a, from_b):
    """The k largest sums a[r] + b[s] (a, b descending) into ``out``, best first, equal sums
    in (r, s) order; −inf padded. When ``from_a`` has k slots the ranks r and s of each
    entry go to ``from_a`` and ``from_b`` (−1 for padding). ``out`` must not be a or b."""
    k = a.shape[0]
    rows = 0
    while rows < k and a[rows] > NEG_INF:
        rows += 1
    nxt = np.zeros(max(rows, 1), dtype=np.int64)  # next column of each row
    keep = from_a.shape[0] > 0
    for q in range(k):
        best = NEG_INF
        arg = -1
        for r in range(rows):
            s = nxt[r]
            if s < k:
                v = a[r] + b[s]
                if v > best:
                    best = v
                    arg = r
            if s == 0:
                break  # rows below have not started: their sums are no larger than this one's
        out[q] = best
        if keep:
            from_a[q] = arg
            from_b[q] = nxt[arg] if arg >= 0 else -1
        if arg < 0:
            for p in range(q + 1, k):
                out[p] = NEG_INF
                if keep:
                    from_a[p] = -1
                    from_b[p] = -1
            break
        nxt[arg] += 1
    return out


@nb.njit(cache=True, inline="always")
def _kb_times(dst, a, b):
    k = a.shape[0]
    if k == 1 or b[1] == NEG_INF:  # b is one score (or none): a shift
        return _kb_times_weight(dst, a, b[0])
    if a[1] == NEG_INF:
        return _kb_times_weight(dst, b, a[0])
    out = np.empty(k)
    none = np.empty(0, dtype=np.int64)
    top_sums(a, b, out, none, none)
    for r in range(k):
        dst[r] = out[r]
    return dst


KBEST = register(Semiring("kbest", _kb_plus, _kb_times, _kb_zero, _kb_one, None, -1, _kb_times_weight))
