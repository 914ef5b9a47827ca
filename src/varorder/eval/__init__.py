"""Evaluation metrics."""

from varorder._lazy import attach

_EXPORTS = {
    **dict.fromkeys(("AlignmentScores", "alignment_error_rate"), "varorder.eval.aer"),
    **dict.fromkeys(("SequenceAccuracy", "character_error_rate", "edit_distance", "exact_match", "mapping_accuracy",
                     "precision_recall_curve", "recall_at_precision", "sequence_accuracy"), "varorder.eval.metrics"),
    **dict.fromkeys(("attachment_scores", "bracket_scores"), "varorder.eval.parsing"),
    **dict.fromkeys(("plot_curve_panels", "plot_curves", "plot_precision_recall"), "varorder.eval.plots"),
}
__getattr__, __dir__, __all__ = attach(__name__, _EXPORTS)
