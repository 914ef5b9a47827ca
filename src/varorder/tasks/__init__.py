"""End-to-end experiments that combine readers, models and algorithms (one module per task)."""

from varorder._lazy import attach

_EXPORTS = {
    **dict.fromkeys(("OcrConfig", "run_ocr_experiment"), "varorder.tasks.ocr"),
    **dict.fromkeys(("PosTask", "TntEmissions", "evaluate_pos"), "varorder.tasks.pos_highorder"),
    **dict.fromkeys(("T9Task",), "varorder.tasks.t9"),
    **dict.fromkeys(("tag_text",), "varorder.tasks.tagging"),
}
__getattr__, __dir__, __all__ = attach(__name__, _EXPORTS)
