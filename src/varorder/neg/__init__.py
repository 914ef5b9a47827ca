"""Named-entity generation (GREC-NEG'10; Bouchard 2010): choose each person reference's expression.

:mod:`.task` builds the task from CorefUD-annotated CoNLL-U (GUM): slots, gold REs, REG08 types,
candidate lists, regeneration and scoring; :mod:`.model` holds :class:`~varorder.neg.model.NegGenerator`
(Bouchard's factor graph learned by SampleRank, and the first-mention, exact unary and exact chain
baselines).
"""

from varorder._lazy import attach

_EXPORTS = {
    **dict.fromkeys(("NegGenerator", "NegOptions", "METHODS"), "varorder.neg.model"),
    **dict.fromkeys(("Candidate", "NegDocument", "Slot", "build_documents", "load_task", "save_task"),
                    "varorder.neg.task"),
}
__getattr__, __dir__, __all__ = attach(__name__, _EXPORTS)
