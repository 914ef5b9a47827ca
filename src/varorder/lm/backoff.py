"""Back-off weights that make a back-off n-gram model normalise (Katz 1987; the
computation of SRILM's ``Ngram::computeBOW``, used after mixing and pruning).

Factorization: p(w | h) = f(h w) for stored h w, else bow(h) p(w | h') with h' = h minus
its first word (Carter, Dymetman & Bouchard 2012, eq. 7). The distribution after h sums
to 1 exactly when

    bow(h) = (1 - sum over stored h w of f(h w)) / (1 - sum over stored h w of p(w | h')),

and, the tables being closed under suffixes, every such h' w is stored, so both sums read
stored values only: one pass over each order's n-grams grouped by their prefix row.
"""

from __future__ import annotations

import numpy as np

from varorder.lm.tables import TableView, suffix_rows

__all__ = ["context_masses", "backoff_log10weights"]

# Below this, a context's back-off mass (numerator or denominator) is taken as none:
# the lower-order words it would reach are all stored after the context already.
_NO_MASS = 1e-12


def context_masses(view: TableView, suffixes=None) -> list[tuple[np.ndarray, np.ndarray] | None]:
    """Per order m (0-based, contexts of m + 1 words), for every stored context h of that
    order: (sum of f(h w) over stored h w, sum of p(w | h') over the same w), float64;
    None for the highest order (its n-grams are no context)."""
    suffixes = suffix_rows(view) if suffixes is None else suffixes
    out: list[tuple[np.ndarray, np.ndarray] | None] = []
    for m in range(view.order):
        if m == view.order - 1:
            out.append(None)
            continue
        n_contexts = len(view.keys[m])
        prefix = view.keys[m + 1] // view.vocab_size
        stored = 10.0 ** view.log10_probs[m + 1].astype(np.float64)
        lower = 10.0 ** view.log10_probs[m][suffixes[m + 1]].astype(np.float64)
        out.append((np.bincount(prefix, stored, n_contexts), np.bincount(prefix, lower, n_contexts)))
    return out


def backoff_log10weights(view: TableView, suffixes=None) -> tuple[np.ndarray, ...]:
    """log10 bow(h) of every stored n-gram, per order, that makes every context's
    distribution sum to 1 given the stored probabilities (0 for the highest order and
    for n-grams that extend to nothing). A context whose lower-order words are all
    stored after it already (no back-off mass left to share) gets bow 1, as SRILM gives."""
    weights = []
    for m, masses in enumerate(context_masses(view, suffixes)):
        if masses is None:
            weights.append(np.zeros(len(view.keys[m])))
            continue
        stored, lower = masses
        numerator = np.maximum(1.0 - stored, 0.0)
        denominator = 1.0 - lower
        no_mass = (denominator <= _NO_MASS) | (numerator <= _NO_MASS)
        with np.errstate(divide="ignore", invalid="ignore"):
            log10_weight = np.log10(numerator / denominator)
        weights.append(np.where(no_mass, 0.0, log10_weight))
    return tuple(weights)
