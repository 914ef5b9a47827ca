"""Graphical models over strings (Cotterell & Eisner 2015, "Penalized Expectation
Propagation for Graphical Models over Strings"; the phonology model of Cotterell, Peng &
Eisner 2015).

Factorization: p(M, S) = Π_m p_LM(M_m) · Π_w T(S_w | M_{w,1} ⋯ M_{w,k}) — morpheme strings
with a character-bigram prior, concatenated, then a stochastic edit transducer to the
observed surface form (:mod:`varorder.strings.model`). Inference by loopy BP with k-best
pruned messages, EP with n-gram families and penalized EP
(:mod:`varorder.strings.inference`), whose log-linear families and their automata live in
:mod:`varorder.strings.features`; every automaton operation is :mod:`varorder.wfsa`.
"""

from varorder._lazy import attach

_EXPORTS = {
    **dict.fromkeys(("EditTransducer", "PhonologyGraph", "Word", "bigram_prior", "read_hopkins", "synthetic_lexicon"), "varorder.strings.model"),
    **dict.fromkeys(("EPOptions", "StringEP", "PrunedBP", "make_method"), "varorder.strings.inference"),
    **dict.fromkeys(("EditEM", "expected_edit_counts", "heldout_surface_scores", "predict_surface"), "varorder.strings.em"),
    **dict.fromkeys(("FeatureMachine", "SubstringRegistry", "ngram_machine", "substring_machine"), "varorder.strings.features"),
}
__getattr__, __dir__, __all__ = attach(__name__, _EXPORTS)
