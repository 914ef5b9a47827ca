"""Factor graphs over discrete label variables with long-range factors, learned by SampleRank.

Bouchard (GREC-NEG 2010) / Wick et al. (2009): unary, neighbour, skip and higher-order
factors (:mod:`.graph`), incremental local scores, Gibbs / Metropolis–Hastings proposals,
simulated annealing and SampleRank epochs (:mod:`.kernels`, Numba), and the estimator
:class:`SampleRankTagger` (:mod:`.samplerank`).
"""

from varorder.factorgraph.graph import FactorGraph, ParameterLayout, document_ids, full_score, repeated_key_pairs
from varorder.factorgraph.samplerank import SampleRankOptions, SampleRankTagger

__all__ = ["FactorGraph", "ParameterLayout", "SampleRankOptions", "SampleRankTagger", "document_ids", "full_score",
           "repeated_key_pairs"]
