"""Sentences conditioned on automaton constraints: exact decoding, exact sampling and the
exact conditional next-token distribution of an n-gram LM given a DFA (keywords in order
or not, a token-level regular expression, a length range), by the product of the LM's
automaton with the DFA on the one lattice engine (Ctrl-G's construction, Zhang et al.
2024, made exact for n-gram models).

Factorization: p(x | C) = p(x) 1[x ∈ C] / p(C), p the back-off LM
(:mod:`varorder.constrain.product`) or a discrete HMM (:mod:`varorder.constrain.hmm`, with
words grouped into the DFA's symbol classes); the DFAs are in :mod:`varorder.constrain.dfa`.

Typical use::

    from varorder.constrain import ConstrainedLM, contains_dfa
    dfa = contains_dfa([["stock"], ["market"]], lm.vocabulary, ordered=True)
    model = ConstrainedLM(lm, dfa, min_length=3, max_length=12)
    model.decode(); model.sample(5, seed=0); model.next_logprobs(["the"])
"""

from varorder.constrain.dfa import DFA, contains_dfa, intersect, length_dfa, regex_dfa
from varorder.constrain.hmm import ConstrainedHMM
from varorder.constrain.product import ConstrainedLM

__all__ = ["DFA", "ConstrainedHMM", "ConstrainedLM", "contains_dfa", "intersect", "length_dfa", "regex_dfa"]
