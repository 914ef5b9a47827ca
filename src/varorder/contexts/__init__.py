"""Reified context models (Steinhardt & Liang, ICML 2015): RCMS context sets built as
engine lattices, beam search as their degenerate case, ★-extended n-gram features and
approximate-likelihood training.

Layer: algorithms. Imports :mod:`varorder.lattice`, :mod:`varorder.engine.semiring` and
:mod:`varorder.models.optim`; imported by :mod:`varorder.tasks`.
"""

from varorder.contexts.context_set import UNBOUNDED, ContextLattice, build_context_lattice
from varorder.contexts.features import NgramFeatureSpace

from varorder._lazy import attach

__getattr__, __dir__, __all__ = attach(
    __name__, dict.fromkeys(("ContextModelOptions", "ReifiedContextModel"), "varorder.contexts.model"),
    eager=("ContextLattice", "NgramFeatureSpace", "UNBOUNDED", "build_context_lattice"))
