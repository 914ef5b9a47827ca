"""Unsupervised decipherment of a 1:1 word substitution cipher by EM with exact, beam-search
and RCMS E-steps (Steinhardt & Liang, "Reified Context Models", ICML 2015, §2, §6, App. B).

Layout: :mod:`~varorder.decipher.data` (corpus preparation, the substitution cipher, the
prepared-folder format), :mod:`~varorder.decipher.transitions` (the plaintext chain from
absolute discounting), :mod:`~varorder.decipher.context_sets` (RCMS and beam context
sets as engine lattices, fused E-step kernel), :mod:`~varorder.decipher.model` (EM as a
:class:`varorder.agree.Submodel`, the :class:`Decipherer` estimator).

Layer: algorithms (imports :mod:`varorder.lm`, :mod:`varorder.chain`, the engine's lattice
kernel and :mod:`varorder.agree.product_em`).
"""

from varorder.decipher.context_sets import build_context_arrays, context_estep
from varorder.decipher.data import DecipherData, SubstitutionCipher, load, prepare, read_corpus_sentences, save
from varorder.decipher.model import INFERENCE, DecipherHMM, Decipherer, mapping_from_table
from varorder.decipher.transitions import TransitionTables, fit_transitions

__all__ = ["DecipherData", "DecipherHMM", "Decipherer", "INFERENCE", "SubstitutionCipher", "TransitionTables",
           "build_context_arrays", "context_estep", "fit_transitions", "load", "mapping_from_table", "prepare",
           "read_corpus_sentences", "save"]
