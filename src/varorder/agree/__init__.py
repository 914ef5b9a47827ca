"""Agreement-based learning (Liang, Klein & Jordan, NIPS 2008): product EM and its
approximations, word aligners trained to agree, and a phylogenetic HMM.

Layout: :mod:`~varorder.agree.product_em` (the submodel contract and the training
modes), :mod:`~varorder.agree.views` (HMMs sharing one hidden chain: the exact
product-EM example), :mod:`~varorder.agree.corpus` (integer-coded bitexts),
:mod:`~varorder.agree.align` (IBM Model 1 and the HMM aligner in either direction),
:mod:`~varorder.agree.aligner` (the two-direction estimator with decoding and save/load),
:mod:`~varorder.agree.symmetrize` (intersection, union, grow-diag-final-and),
:mod:`~varorder.agree.phylo` (tree message passing and the two-slice phylogenetic HMM).
"""

from varorder.agree.product_em import MODES, AgreementEM, Statistics, Submodel, connect_dask, make_executor

from varorder._lazy import attach

# imported on first use: the aligner's command line needs neither SciPy (phylo) nor, for
# product EM alone, Numba (the aligners)
_EXPORTS = {
    **dict.fromkeys(("WordAligner",), "varorder.agree.aligner"),
    **dict.fromkeys(("IBM1", "HMMAligner"), "varorder.agree.align"),
    **dict.fromkeys(("HMMView", "MultiViewSequences"), "varorder.agree.views"),
    **dict.fromkeys(("PhyloData", "PhyloSlices", "encode_nucleotides", "parse_newick", "tree_marginals"),
                    "varorder.agree.phylo"),
}
_EAGER = ("MODES", "AgreementEM", "Statistics", "Submodel", "connect_dask", "make_executor")
__getattr__, __dir__, __all__ = attach(__name__, _EXPORTS, eager=_EAGER)
