"""varorder: structured sequence models with adaptive context and exact inference.

One dynamic-programming engine (:mod:`varorder.engine`) serves dense chains
(:mod:`varorder.chain`), general position-indexed lattices (:mod:`varorder.lattice`),
hypergraphs (:mod:`varorder.hypergraph`) and every algorithm built on them.

The classes a user needs are importable from here (``from varorder import CRF``) and
from their package (``from varorder.models import CRF``). They are imported on first
use, so ``import varorder`` itself loads nothing heavy. Every estimator follows
:mod:`varorder.base`'s convention (keyword-only parameters, ``fit`` returns ``self``,
learned state ends in ``_``, :class:`NotFittedError` before ``fit``).
"""

from varorder._lazy import attach

__version__ = "0.3.0"

_EXPORTS = {
    # the estimator convention
    **dict.fromkeys(("NotFittedError",), "varorder.base"),
    # taggers
    **dict.fromkeys(("CRF", "HMM", "MEMM", "GaussianHMM", "GMMHMM", "PoissonHMM", "CategoricalHMM", "GaussianHSMM",
                     "PoissonHSMM"), "varorder.models"),
    **dict.fromkeys(("SampleRankTagger",), "varorder.factorgraph"),
    # n-gram and log-linear language models
    **dict.fromkeys(("AbsoluteDiscounting", "AdditiveSmoothing", "ModifiedKneserNey", "NgramLM", "Vocabulary"),
                    "varorder.lm"),
    **dict.fromkeys(("read_arpa", "write_arpa"), "varorder.lm"),
    **dict.fromkeys(("LogLinearLM", "StructuredLogLinear"), "varorder.loglinear"),
    # structures run by the engine
    **dict.fromkeys(("Lattice",), "varorder.lattice"),
    **dict.fromkeys(("Hypergraph",), "varorder.hypergraph"),
    **dict.fromkeys(("Wfsa",), "varorder.wfsa"),
    # the research systems
    **dict.fromkeys(("HighOrderTarget",), "varorder.exact"),
    **dict.fromkeys(("AgreementEM", "PhyloSlices", "WordAligner"), "varorder.agree"),
    **dict.fromkeys(("GrammarInducer",), "varorder.grammar"),
    **dict.fromkeys(("ReifiedContextModel",), "varorder.contexts"),
    **dict.fromkeys(("Decipherer",), "varorder.decipher"),
    **dict.fromkeys(("AlignmentTransducer",), "varorder.transduce"),
    **dict.fromkeys(("NegGenerator",), "varorder.neg"),
    **dict.fromkeys(("EditEM", "PhonologyGraph", "PrunedBP", "StringEP"), "varorder.strings"),
}
_SUBMODULES = ("agree", "base", "chain", "cli", "contexts", "decipher", "engine", "eval", "exact", "factorgraph",
               "grammar", "hypergraph", "io", "lattice", "lm", "loglinear", "models", "neg", "parallel", "semimarkov", "strings", "tasks",
               "testing", "transduce", "wfsa")
__getattr__, __dir__, __all__ = attach(__name__, _EXPORTS, eager=("__version__",), submodules=_SUBMODULES)
