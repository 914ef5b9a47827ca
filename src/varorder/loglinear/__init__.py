"""Log-linear language models with structured (tree) penalties.

Nelakanti, Archambeau, Mairal, Bach & Bouchard, "Structured Penalties for Log-linear
Language Models" (EMNLP 2013). Factorization: p(y | x) = softmax_v(Σ_{s ∈ suffixes(x), |s| < m}
w[s, v]) — one weight per (context suffix, next word) pair observed in training (the suffix
trie of :mod:`varorder.loglinear.trie`), fitted by accelerated stochastic proximal gradient
(Algorithm 1) under the penalties of :mod:`varorder.loglinear.prox`.
"""
