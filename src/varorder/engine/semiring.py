"""Semirings: the one weight contract every dynamic program in varorder obeys.

Factorization: every model in varorder scores a path as a *product* (⊗) of arc
weights and a set of paths as a *sum* (⊕) of path scores. All weights live in
the log domain, so ⊗ is ordinary addition (``log_times``) for every semiring here
and ⊕ varies; a :class:`Semiring` carries both, with their identities:

=========  ===================  ========  =======  ===========================
semiring   ⊕                    zero      one      what a forward pass yields
=========  ===================  ========  =======  ===========================
LOG        log(eᵃ + eᵇ)         −inf      0        log partition function
MAX        max(a, b)            −inf      0        best path score (Viterbi)
=========  ===================  ========  =======  ===========================

Each structure has one generic recursion written against a :class:`Semiring`
(``make_chain_forward`` in :mod:`varorder.engine.chain_generic`,
``make_lattice_forward`` in :mod:`varorder.engine.lattice`, ``make_inside`` in
:mod:`varorder.engine.hypergraph`), compiled once per semiring by :func:`compiled` (the
torch-struct idea, here with Numba closures). Faster kernels for one semiring — the
scaled exp-space LOG chain, the max-plus chain Viterbi, the gathered LOG hypergraph
inside — are *registered specialisations*: a structure's public operation uses the
specialisation when one is registered for the semiring asked for, the generic
recursion otherwise, and tests check each specialisation equal to the generic
recursion on random inputs. Sampling (forward filtering, backward sampling), k-best (a
top-k list per node) and expectations (entropy as log Z − E[score]) reuse the LOG/MAX
forward values and are implemented once per structure; they are documented there. The generic closures are
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


@nb.njit(cache=True, inline="always")
def log_times(a: float, b: float) -> float:
    """⊗ of every log-domain semiring here: the product of weights is the sum of logs."""
    return a + b


def _log_sum(values: np.ndarray) -> float:
    top = values.max()
    if top == NEG_INF:
        return NEG_INF
    return float(top + np.log(np.exp(values - top).sum()))


def _max_sum(values: np.ndarray) -> float:
    return float(values.max())


@dataclass(frozen=True)
class Semiring:
    """A log-domain semiring: ⊕ ``plus`` and ⊗ ``times`` (compiled, scalar → scalar),
    identities ``zero`` (of ⊕, a hard zero: −inf) and ``one`` (of ⊗); ``reduce`` is ⊕ over
    a non-empty NumPy array (oracles, small helpers).

    A structure's generic recursion is built once per semiring from these
    (:func:`compiled`); a new instance, registered with :func:`register`, runs on dense
    chains, lattices and hypergraphs at once (``varorder.chain.forward``,
    ``varorder.lattice.forward``, ``varorder.hypergraph.inside``)."""

    name: str
    plus: Callable[[float, float], float]
    times: Callable[[float, float], float] = log_times
    zero: float = NEG_INF
    one: float = 0.0
    reduce: Callable[[np.ndarray], float] = _log_sum

    def sum(self, values: np.ndarray) -> float:
        """⊕ over a 1-d array (pure NumPy)."""
        values = np.asarray(values, dtype=np.float64)
        if values.size == 0:
            return self.zero
        return self.reduce(values)


LOG = Semiring("log", log_plus, reduce=_log_sum)
MAX = Semiring("max", max_plus, reduce=_max_sum)
SEMIRINGS = {"log": LOG, "max": MAX}

_COMPILED: dict = {}


def register(semiring: Semiring) -> Semiring:
    """Make ``semiring`` known by name to every structure's public operations."""
    if not isinstance(semiring, Semiring):
        raise ValueError(f"expected a Semiring, got {type(semiring).__name__}")
    known = SEMIRINGS.get(semiring.name)
    if known is not None and known is not semiring:
        raise ValueError(f"a different semiring is already registered as {semiring.name!r}")
    SEMIRINGS[semiring.name] = semiring
    return semiring


def resolve(semiring) -> Semiring:
    """A registered semiring by name, or a Semiring itself; else a ValueError naming the known ones."""
    if isinstance(semiring, Semiring):
        return semiring
    found = SEMIRINGS.get(semiring) if isinstance(semiring, str) else None
    if found is None:
        raise ValueError(f"semiring must be one of {sorted(SEMIRINGS)} or a Semiring, got {semiring!r}")
    return found


def compiled(factory, semiring: Semiring):
    """``factory(semiring)`` — a structure's generic recursion specialised to the semiring —
    built once per process and semiring and kept (the closures are not cached on disk:
    see the module docstring)."""
    key = (factory, semiring)
    found = _COMPILED.get(key)
    if found is None:
        found = _COMPILED[key] = factory(semiring)
    return found
