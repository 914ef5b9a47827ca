"""Sequence-model estimators (CRF, MEMM, HMM), their feature indexing, optimisers and persistence.

Every estimator here delegates inference to the one DP engine (:mod:`varorder.chain`,
:mod:`varorder.lattice`); nothing in this package runs its own forward–backward.
"""

from varorder._lazy import attach

_EXPORTS = {
    **dict.fromkeys(("CRF", "CRFSolverOptions", "ChainObjective"), "varorder.models.crf"),
    **dict.fromkeys(("MEMM",), "varorder.models.memm"),
    **dict.fromkeys(("HMM",), "varorder.models.hmm"),
    **dict.fromkeys(("GaussianHMM",), "varorder.models.gaussian_hmm"),
    **dict.fromkeys(("GMMHMM",), "varorder.models.gmm_hmm"),
    **dict.fromkeys(("PoissonHMM", "CategoricalHMM"), "varorder.models.count_hmm"),
    **dict.fromkeys(("GaussianHSMM", "PoissonHSMM"), "varorder.models.hsmm"),
    **dict.fromkeys(("FeatureIndexer", "pos_features", "parse_templates", "format_templates", "template_features"), "varorder.models.features"),
    **dict.fromkeys(("LabelCodec", "token_accuracy"), "varorder.models.sequences"),
    **dict.fromkeys(("model_kind",), "varorder.models.persist"),
    **dict.fromkeys(("SGD", "AdaGrad", "lbfgs"), "varorder.models.optim"),
}
__getattr__, __dir__, __all__ = attach(__name__, _EXPORTS)
