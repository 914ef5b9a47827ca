"""Semirings: the one weight contract every dynamic program in varorder obeys.

Factorization: every model in varorder scores a path as a *product* (⊗) of arc
weights and a set of paths as a *sum* (⊕) of path scores. All weights live in
the log domain, so ⊗ is ordinary addition (``log_times``) for every semiring here
and ⊕ varies; a :class:`Semiring` carries both, with their identities:

===========  ========================  ============  =========  ==========================
semiring     ⊕                         zero          one        what a forward pass yields
===========  ========================  ============  =========  ==========================
LOG          log(eᵃ + eᵇ)              −inf          0          log partition function
MAX          max(a, b)                 −inf          0          best path score (Viterbi)
EXPECTATION  (log Z, mean) pairs       (−inf, 0)     (0, 0)     log Z and E[score]: entropy
KBEST        top-k merge of two lists  (−inf, …)     (0, −inf…) the k best path scores
===========  ========================  ============  =========  ==========================

LOG and MAX are *scalar*: a value is one float and ``plus``/``times`` map two floats to
one. EXPECTATION and KBEST (:mod:`varorder.engine.semiring_structured`) are
*structured*: a value is a row of ``width`` floats (2 for EXPECTATION; k for KBEST, chosen
per call) and their compiled operations write into a destination row. :func:`cells`
gives every semiring the same compiled cell operations, so each structure's generic
recursion is written once for both kinds.

Each structure has one generic recursion written against a :class:`Semiring`
(``make_chain_forward`` in :mod:`varorder.engine.chain_generic`,
``make_lattice_forward`` in :mod:`varorder.engine.lattice`, ``make_inside`` in
:mod:`varorder.engine.hypergraph`), compiled once per semiring by :func:`compiled` (the
torch-struct idea, here with Numba closures). Faster kernels for one semiring — the
scaled exp-space LOG chain, the max-plus chain Viterbi, the gathered LOG hypergraph
inside — are *registered specialisations*: a structure's public operation uses the
specialisation when one is registered for the semiring asked for, the generic
recursion otherwise, and tests check each specialisation equal to the generic
recursion on random inputs. Every public operation is the generic recursion in a chosen
semiring plus a finishing step: log Z (LOG), Viterbi (MAX, re-maximising backtrack),
k-best (KBEST, k-best backtrack), sampling (LOG, backward sampling), entropy
(EXPECTATION, log Z − E[score]); fused kernels for them are registered specialisations as
well. The generic closures are
compiled per process, not cached on disk: Numba keys a closure's cache entry by its
pickled closure cells, which carry a per-process UUID, so such an entry is never found
again, and every process would append another entry and data file to one shared index
(also from worker processes, at the same time). The top-level kernels that call them
are cached, with the closure's code inside. Weight contract:

* weights are float64 log-potentials; −inf is a legal hard zero, +inf and NaN
  are not (inputs are validated before they reach a kernel);
* ⊕ is commutative, associative, has zero as identity; ⊗ distributes over it; weights
  enter a structured semiring through its ``times_weight`` (x ⊗ lift(w)), a lift being a
  homomorphism from (log-weights, +) to (values, ⊗); a structured value is zero exactly
  when its first entry is −inf.

Reference: Goodman (1999) "Semiring Parsing"; Li & Eisner (2009) "First- and
Second-Order Expectation Semirings"; Huang & Chiang (2005) "Better k-best Parsing";
Rush (2020) "Torch-Struct".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, NamedTuple

import numba as nb
import numpy as np
import varorder._numba_start  # noqa: E402,F401,I001  (Numba's cache saves locked across processes)

from varorder.errors import ParameterError

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
    """A log-domain semiring.

    Scalar (``width`` 0): ⊕ ``plus`` and ⊗ ``times`` are compiled functions of two floats,
    ``zero`` (of ⊕, a hard zero: −inf) and ``one`` (of ⊗) floats; ``reduce`` is ⊕ over a
    non-empty NumPy array (oracles, small helpers).

    Structured (``width`` d > 0, or −1 when each call chooses it, as k-best's k): a value is
    a row of d floats; ``plus(dst, a, b)``, ``times(dst, a, b)``, ``zero(dst)``,
    ``one(dst)`` and ``times_weight(dst, a, w)`` (a ⊗ the value of a log-weight w) are
    compiled functions that write the result into ``dst`` (which may be ``a`` or ``b``) and
    return it; a value is zero exactly when its first entry is −inf.

    A structure's generic recursion is built once per semiring from these
    (:func:`compiled`, through :func:`cells`); a new instance, registered with
    :func:`register`, runs on dense chains, lattices and hypergraphs at once
    (``varorder.chain.forward``, ``varorder.lattice.forward``, ``varorder.hypergraph.inside``)."""

    name: str
    plus: Callable
    times: Callable = log_times
    zero: float | Callable = NEG_INF
    one: float | Callable = 0.0
    reduce: Callable | None = _log_sum
    width: int = 0
    times_weight: Callable | None = None

    def __post_init__(self):
        if self.width != 0 and self.times_weight is None:
            raise ParameterError(f"structured semiring {self.name!r} needs times_weight")

    @property
    def structured(self) -> bool:
        return self.width != 0

    def value_shape(self, width: int | None = None) -> tuple:
        """The shape of one value: () for a scalar semiring, (d,) for a structured one
        (``width`` chooses d where the semiring leaves it to the call)."""
        if self.width == 0:
            return ()
        if self.width > 0:
            return (self.width,)
        if width is None or width < 1:
            raise ParameterError(f"semiring {self.name!r} needs a value width (e.g. k) for this call", name='width', value=width)
        return (int(width),)

    def sum(self, values: np.ndarray) -> float:
        """⊕ over a 1-d array (pure NumPy; scalar semirings)."""
        if self.reduce is None:
            raise ParameterError(f"semiring {self.name!r} has no NumPy reduction")
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
        raise ParameterError(f"expected a Semiring, got {type(semiring).__name__}", name='semiring', value=semiring)
    known = SEMIRINGS.get(semiring.name)
    if known is not None and known is not semiring:
        raise ParameterError(f"a different semiring is already registered as {semiring.name!r}", name='semiring', value=semiring)
    SEMIRINGS[semiring.name] = semiring
    return semiring


def resolve(semiring) -> Semiring:
    """A registered semiring by name, or a Semiring itself; else a ParameterError naming the known ones."""
    if isinstance(semiring, Semiring):
        return semiring
    found = SEMIRINGS.get(semiring) if isinstance(semiring, str) else None
    if found is None:
        raise ParameterError(f"semiring must be one of {sorted(SEMIRINGS)} or a Semiring, got {semiring!r}", name='semiring', value=semiring)
    return found


def operation(name: str, generic: dict, specialised: dict, use_specialised: bool = True):
    """A structure's function for operation ``name``: the fused kernel registered in
    ``specialised`` (name → (semiring, function)) when there is one and ``use_specialised``,
    else the generic recursion in the operation's semiring (``generic``: name → function)."""
    if use_specialised and name in specialised:
        return specialised[name][1]
    return generic[name]


def compiled(factory, semiring: Semiring):
    """``factory(semiring)`` — a structure's generic recursion specialised to the semiring —
    built once per process and semiring and kept (the closures are not cached on disk:
    see the module docstring)."""
    key = (factory, semiring)
    found = _COMPILED.get(key)
    if found is None:
        found = _COMPILED[key] = factory(semiring)
    return found


def _make_cells(semiring: Semiring):
    """The compiled cell operations of ``semiring`` (see :func:`cells`)."""
    if semiring.structured:
        return _structured_cells(semiring)
    plus, times, zero, one = semiring.plus, semiring.times, semiring.zero, semiring.one

    # not cached (closure factory): see the module docstring. ``dst`` is ignored: scalar
    # values are returned, so the recursions keep them in registers.
    @nb.njit(inline="always")
    def c_zero(dst):
        return zero

    @nb.njit(inline="always")
    def c_one(dst):
        return one

    @nb.njit(inline="always")
    def c_plus(dst, a, b):
        return plus(a, b)

    @nb.njit(inline="always")
    def c_times(dst, a, b):
        return times(a, b)

    @nb.njit(inline="always")
    def c_times_weight(dst, a, w):
        return times(a, w)

    @nb.njit(inline="always")
    def c_lift(dst, w):
        return w

    @nb.njit(inline="always")
    def c_weight_times(v, w):
        return times(v, w)

    @nb.njit(inline="always")
    def c_is_zero(a):
        return a == zero

    @nb.njit(inline="always")
    def c_put(store, i, value):
        store[i] = value

    return Cells(c_zero, c_one, c_plus, c_times, c_times_weight, c_lift, c_weight_times, c_is_zero, c_put)


def _structured_cells(semiring: Semiring):
    zero, one, times_weight = semiring.zero, semiring.one, semiring.times_weight

    @nb.njit(inline="always")
    def c_lift(dst, w):
        return times_weight(dst, one(dst), w)

    @nb.njit(inline="always")
    def c_weight_times(v, w):
        return v + w  # log-weights multiply by adding; a lift is a homomorphism

    @nb.njit(inline="always")
    def c_is_zero(a):
        return a[0] == NEG_INF

    @nb.njit(inline="always")
    def c_put(store, i, value):
        row = store[i]
        for r in range(row.shape[0]):  # element by element: value may be row itself
            row[r] = value[r]

    return Cells(zero, one, semiring.plus, semiring.times, times_weight, c_lift, c_weight_times, c_is_zero, c_put)


class Cells(NamedTuple):
    """The compiled operations every generic recursion is written with, the same for scalar
    and structured semirings. Values are read as ``store[i]`` (a float, or a row view) and
    written back with ``put(store, i, value)``; every operation takes a destination first
    (ignored by scalar semirings, written by structured ones) and returns the result:
    ``zero(dst)``, ``one(dst)``, ``plus(dst, a, b)`` = a ⊕ b, ``times(dst, a, b)`` = a ⊗ b,
    ``times_weight(dst, a, w)`` = a ⊗ lift(w), ``lift(dst, w)``, ``weight_times(v, w)``
    (two log-weights), ``is_zero(a)``."""

    zero: Callable
    one: Callable
    plus: Callable
    times: Callable
    times_weight: Callable
    lift: Callable
    weight_times: Callable
    is_zero: Callable
    put: Callable


def cells(semiring: Semiring) -> Cells:
    """The cell operations of ``semiring``, compiled once per process."""
    return compiled(_make_cells, semiring)
