"""Log-linear language models with structured (tree) penalties.

Nelakanti, Archambeau, Mairal, Bach & Bouchard, "Structured Penalties for Log-linear
Language Models" (EMNLP 2013). Factorization: p(y | x) = softmax_v(Σ_{s ∈ suffixes(x), |s| < m}
w[s, v]) — one weight per (context suffix, next word) pair observed in training (the suffix
trie of :mod:`varorder.loglinear.trie`), fitted by accelerated stochastic proximal gradient
(Algorithm 1) under the penalties of :mod:`varorder.loglinear.prox`.
"""

from varorder._lazy import attach

_EXPORTS = {
    **dict.fromkeys(("StructuredLogLinear", "SolverOptions", "LogLinearLM", "is_loglinear_model"),
                    "varorder.loglinear.model"),
    **dict.fromkeys(("ContextTrie", "build_trie"), "varorder.loglinear.trie"),
    **dict.fromkeys(("penalty_value",), "varorder.loglinear.prox"),
    **dict.fromkeys(("tune_loglinear", "fit_tuned", "split_for_tuning", "TuneResult"), "varorder.loglinear.tune"),
}
__getattr__, __dir__, __all__ = attach(__name__, _EXPORTS)
