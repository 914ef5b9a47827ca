"""Grammar induction by agreement (Klein & Manning 2004; Liang, Klein & Jordan 2008, §5.1).

Layout: :mod:`~varorder.grammar.charts` (the lexicalized and bracket chart hypergraphs per
sentence length), :mod:`~varorder.grammar.shard` (batches of sentences, the shared feature
layout and the chart E-steps), :mod:`~varorder.grammar.dmv` (dependency model with valence),
:mod:`~varorder.grammar.ccm` (constituent-context model), :mod:`~varorder.grammar.induce`
(training DMV, CCM or their product with :class:`varorder.agree.AgreementEM`, parsing, saving),
:mod:`~varorder.grammar.treebank` (WSJ10 / UD preprocessing, Collins head rules, evaluation).
"""

from varorder._lazy import attach

_EXPORTS = {
    **dict.fromkeys(("GrammarInducer", "MODELS"), "varorder.grammar.induce"),
    **dict.fromkeys(("DMV",), "varorder.grammar.dmv"),
    **dict.fromkeys(("CCM",), "varorder.grammar.ccm"),
    **dict.fromkeys(("GoldSentence", "collins_heads", "function_heads", "heads_to_spans", "prune_tree", "tree_spans", "ud_sentences", "wsj_sentences"), "varorder.grammar.treebank"),
    **dict.fromkeys(("TreeShard", "make_shards"), "varorder.grammar.shard"),
}
__getattr__, __dir__, __all__ = attach(__name__, _EXPORTS)
