"""Learning with indirect supervision over latent alignments (Steinhardt & Liang 2015, §4.2, §6).

p(y, z | x): an output string y (letters, then an end symbol) aligned to an input x by
an unobserved monotone alignment z; contexts remember z_i and are chosen by RCMS (B per
value of z_i) or by beam search, and each selection is a :class:`varorder.lattice.Lattice`.
"""

from varorder.transduce.features import AlignmentFeatureSpace
from varorder.transduce.lattice import AlignmentLattice, build_alignment_lattice, restrict_to_output

from varorder._lazy import attach

__getattr__, __dir__, __all__ = attach(
    __name__, dict.fromkeys(("AlignmentTransducer", "TransducerOptions"), "varorder.transduce.model"),
    eager=("AlignmentFeatureSpace", "AlignmentLattice", "build_alignment_lattice", "restrict_to_output"))
