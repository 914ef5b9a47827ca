"""Weighted finite-state acceptors and transducers in the log and max-plus semirings
(Mohri, Pereira & Riley 2002): construction, composition and intersection, projection,
shortest distance on cyclic machines by a sparse linear solve, arc posteriors and
expected n-gram counts, k-best strings, sampling, OpenFst text format.

Models floor: used by :mod:`varorder.strings` (graphical models over strings).
"""

from varorder.wfsa.fsa import EPSILON, Wfsa, linear_acceptor, strings_acceptor, universal_acceptor
from varorder.wfsa.ops import (arc_posteriors, compose, connected_states, expected_ngram_counts, intersect,
                               kbest_strings, log_total_weight, ngram_history_table, product_with_dfa, project,
                               reachable_states, sample_strings, shortest_distance, string_weight, trim)
from varorder.wfsa.textio import format_fst, read_fst, write_fst

__all__ = [
    "EPSILON", "Wfsa", "arc_posteriors", "compose", "connected_states", "expected_ngram_counts",
    "format_fst", "intersect", "kbest_strings", "linear_acceptor", "log_total_weight", "ngram_history_table",
    "product_with_dfa", "project", "reachable_states", "read_fst", "sample_strings", "shortest_distance", "string_weight", "strings_acceptor",
    "trim", "universal_acceptor", "write_fst",
]
