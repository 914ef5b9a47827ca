"""Weighted finite-state acceptors and transducers over a finite alphabet.

A machine is a set of arcs (source, input label, output label, weight, target), one start
state and a final weight per state (Mohri, Pereira & Riley 2002, "Weighted finite-state
transducers in speech recognition"). The weight of a path is the sum of its arc weights
plus the final weight of its last state; the weight of a string pair is the ⊕ over its
accepting paths: log-sum-exp in the log semiring, max in the max-plus semiring.

Weights are stored as natural-log scores (higher is better), so the Viterbi semiring is
max-plus here (OpenFst's tropical semiring is min-plus on costs, the negated values (:mod:`varorder.wfsa.textio`
converts). Label 0 is ε; label i ≥ 1 is ``alphabet[i - 1]``. An acceptor is a transducer
whose input and output labels agree on every arc.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from varorder.errors import ParameterError

__all__ = ["EPSILON", "Wfsa", "linear_acceptor", "strings_acceptor", "universal_acceptor"]

EPSILON = 0
NEG_INF = -math.inf


@dataclass(frozen=True, eq=False)
class Wfsa:
    """An immutable weighted machine (acceptor when ``ilabel == olabel`` everywhere).

    ``final[q]`` is −inf for a non-final state. Arrays are validated on construction;
    build machines with :meth:`from_arcs` or the helpers below.
    """

    alphabet: tuple
    start: int
    final: np.ndarray
    src: np.ndarray
    ilabel: np.ndarray
    olabel: np.ndarray
    weight: np.ndarray
    dst: np.ndarray

    def __post_init__(self):
        n = len(self.final)
        if n == 0:
            raise ParameterError("a machine needs at least one state")
        if not 0 <= self.start < n:
            raise ParameterError(f"start state {self.start} is not one of the {n} states", name='start', value=self.start)
        m = len(self.src)
        for name in ("ilabel", "olabel", "weight", "dst"):
            if len(getattr(self, name)) != m:
                raise ParameterError(f"arc array {name} has length {len(getattr(self, name))}, expected {m}")
        if m:
            if self.src.min() < 0 or self.src.max() >= n or self.dst.min() < 0 or self.dst.max() >= n:
                raise ParameterError("an arc names a state outside the machine")
            top = len(self.alphabet)
            for name in ("ilabel", "olabel"):
                labels = getattr(self, name)
                if labels.min() < 0 or labels.max() > top:
                    raise ParameterError(f"an arc's {name} is outside 0..{top} (0 = ε)")
            if np.isnan(self.weight).any() or (self.weight == np.inf).any():
                raise ParameterError("arc weights must be finite or −inf")
        if np.isnan(self.final).any() or (self.final == np.inf).any():
            raise ParameterError("final weights must be finite or −inf", name='final', value=self.final)

    # -- construction ------------------------------------------------------------------
    @classmethod
    def from_arcs(cls, alphabet, n_states: int, start: int, arcs, finals) -> "Wfsa":
        """``arcs``: iterable of (src, ilabel, olabel, weight, dst); ``finals``: {state: weight}."""
        arcs = list(arcs)
        final = np.full(int(n_states), NEG_INF)
        for state, w in dict(finals).items():
            final[int(state)] = float(w)
        if arcs:
            src, il, ol, w, dst = (np.asarray(col) for col in zip(*arcs))
        else:
            src = il = ol = dst = np.zeros(0, np.int64)
            w = np.zeros(0)
        return cls(tuple(alphabet), int(start), final, src.astype(np.int64), il.astype(np.int64),
                   ol.astype(np.int64), w.astype(np.float64), dst.astype(np.int64))

    def replace(self, **changes) -> "Wfsa":
        fields = {name: getattr(self, name) for name in
                  ("alphabet", "start", "final", "src", "ilabel", "olabel", "weight", "dst")}
        fields.update(changes)
        return Wfsa(**fields)

    # -- queries -----------------------------------------------------------------------
    @property
    def n_states(self) -> int:
        return len(self.final)

    @property
    def n_arcs(self) -> int:
        return len(self.src)

    @property
    def is_acceptor(self) -> bool:
        return bool(np.array_equal(self.ilabel, self.olabel))

    def label_of(self, symbol) -> int:
        try:
            return self.alphabet.index(symbol) + 1
        except ValueError:
            raise ParameterError(f"symbol {symbol!r} is not in the alphabet", name='symbol', value=symbol) from None

    def encode(self, string) -> list:
        """A string (any iterable of symbols) as labels."""
        index = {s: i + 1 for i, s in enumerate(self.alphabet)}
        try:
            return [index[s] for s in string]
        except KeyError as error:
            raise ParameterError(f"symbol {error.args[0]!r} is not in the alphabet", name='string', value=string) from None

    def decode(self, labels) -> tuple:
        return tuple(self.alphabet[i - 1] for i in labels if i != EPSILON)


def linear_acceptor(alphabet, string, weight: float = 0.0) -> Wfsa:
    """The acceptor of exactly one string, with ``weight`` on its final state."""
    alphabet = tuple(alphabet)
    index = {s: i + 1 for i, s in enumerate(alphabet)}
    try:
        labels = [index[s] for s in string]
    except KeyError as error:
        raise ParameterError(f"symbol {error.args[0]!r} is not in the alphabet", name='string', value=string) from None
    arcs = [(i, lab, lab, 0.0, i + 1) for i, lab in enumerate(labels)]
    return Wfsa.from_arcs(alphabet, len(labels) + 1, 0, arcs, {len(labels): weight})


def strings_acceptor(alphabet, weighted_strings) -> Wfsa:
    """A deterministic prefix-tree acceptor of finitely many strings: ``{string: log weight}``
    (a repeated string's weights are log-added)."""
    alphabet = tuple(alphabet)
    index = {s: i + 1 for i, s in enumerate(alphabet)}
    children: list[dict] = [{}]
    final: dict[int, float] = {}
    arcs = []
    for string, w in dict(weighted_strings).items():
        node = 0
        for s in string:
            if s not in index:
                raise ParameterError(f"symbol {s!r} is not in the alphabet", name='weighted_strings', value=weighted_strings)
            nxt = children[node].get(index[s])
            if nxt is None:
                nxt = len(children)
                children.append({})
                children[node][index[s]] = nxt
                arcs.append((node, index[s], index[s], 0.0, nxt))
            node = nxt
        final[node] = float(np.logaddexp(final.get(node, NEG_INF), float(w)))
    return Wfsa.from_arcs(alphabet, len(children), 0, arcs, final)


def universal_acceptor(alphabet, symbol_weight=0.0, final_weight: float = 0.0) -> Wfsa:
    """One state looping on every symbol (weight ``symbol_weight``, scalar or per symbol)."""
    alphabet = tuple(alphabet)
    w = np.broadcast_to(np.asarray(symbol_weight, dtype=np.float64), (len(alphabet),))
    arcs = [(0, i + 1, i + 1, float(w[i]), 0) for i in range(len(alphabet))]
    return Wfsa.from_arcs(alphabet, 1, 0, arcs, {0: final_weight})
