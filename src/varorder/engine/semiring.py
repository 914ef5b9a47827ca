"""Semirings: the one weight contract every dynamic program in varorder obeys.

Factorization: every model in varorder scores a path as a *product* (⊗) of arc
weights and a set of paths as a *sum* (⊕) of path scores. All weights live in
the log domain, so ⊗ is ordinary addition for every semiring here and only ⊕
changes:

=========  ===================  ========  =======  ===========================
semiring   ⊕                    zero      one      what a forward pass yields
=========  ===================  ========  =======  ===========================
LOG        log(eᵃ + eᵇ)         −inf      0        log partition function
MAX        max(a, b)            −inf      0        best path score (Viterbi)
=========  ===================  ========  =======  ===========================

Sampling (forward filtering, backward sampling), k-best (a top-k list per
node) and expectations (entropy as log Z − E[score]) reuse the LOG/MAX forward
values and are implemented once per structure in :mod:`varorder.engine.chain`
and :mod:`varorder.engine.lattice`; they are documented there.

Kernels are written once and *specialised* per semiring by passing the ⊕
function to a factory (the torch-struct idea, here with Numba closures): see
``make_chain_forward`` and ``make_lattice_forward``. The specialised closures are
compiled per process, not cached on disk: Numba keys a closure's cache entry by its
pickled closure cells, which carry a per-process UUID, so such an entry is never found
again, and every process would append another entry and data file to one shared index
(also from worker processes, at the same time). The top-level kernels that call them
are cached, with the closure's code inside. Weight contract:

* weights are float64 log-potentials; −inf is a legal hard zero, +inf and NaN
  are not (inputs are validated before they reach a kernel);
* ⊕ is commutative, associative, has −inf as identity; ⊗ = + distributes.

Reference: Goodman (1999) "Semiring Parsing"; Rush (2020) "Torch-Struct".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numba as nb
import numpy as np

NEG_INF = -np.inf


@nb.njit(cache=True, inline="always")
def log_plus(a: float, b: float) -> float:
    """⊕ of the log semiring: log(exp(a) + exp(b)) without overflow."""
    if a == NEG_INF:
        return b
    if b == NEG_INF:
        return a
    if a > b:
        return a + np.log1p(np.exp(b - a))
    return b + np.log1p(np.exp(a - b))


@nb.njit(cache=True, inline="always")
def max_plus(a: float, b: float) -> float:
    """⊕ of the max (tropical) semiring."""
    return a if a >= b else b


@dataclass(frozen=True)
class Semiring:
    """A log-domain semiring: ⊗ is +, ⊕ is ``plus``; ``zero`` is −inf, ``one`` is 0."""

    name: str
    plus: Callable[[float, float], float]
    zero: float = NEG_INF
    one: float = 0.0

    def sum(self, values: np.ndarray) -> float:
        """⊕ over a 1-d array (pure NumPy; used by oracles and small helpers)."""
        values = np.asarray(values, dtype=np.float64)
        if values.size == 0:
            return self.zero
        if self.name == "max":
            return float(values.max())
        top = values.max()
        if top == NEG_INF:
            return NEG_INF
        return float(top + np.log(np.exp(values - top).sum()))


LOG = Semiring("log", log_plus)
MAX = Semiring("max", max_plus)
SEMIRINGS = {"log": LOG, "max": MAX}
