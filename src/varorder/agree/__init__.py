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

__all__ = ["MODES", "AgreementEM", "Statistics", "Submodel", "connect_dask", "make_executor", "WordAligner", "PhyloSlices", "tree_marginals"]

# imported on first use: the aligner's command line needs neither SciPy (phylo) nor, for
# product EM alone, Numba (the aligners)
_LAZY = {"WordAligner": "varorder.agree.aligner", "PhyloSlices": "varorder.agree.phylo",
         "tree_marginals": "varorder.agree.phylo"}


def __getattr__(name):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
