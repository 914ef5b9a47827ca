"""Readers and writers for the data formats varorder consumes and produces."""

from varorder._lazy import attach

_EXPORTS = {
    **dict.fromkeys(("ConlluSentence", "read_conllu", "write_conllu"), "varorder.io.conllu"),
    **dict.fromkeys(("read_crfsuite", "write_labels"), "varorder.io.crfsuite"),
    **dict.fromkeys(("read_pharaoh", "write_pharaoh"), "varorder.io.pharaoh"),
    **dict.fromkeys(("Tree", "parse_trees", "read_ptb", "write_ptb"), "varorder.io.ptb"),
    **dict.fromkeys(("read_bitext", "iter_bitext"), "varorder.io.bitext"),
    **dict.fromkeys(("read_fasta", "read_alignment"), "varorder.io.fasta"),
    **dict.fromkeys(("read_cmudict", "read_transduction_pairs"), "varorder.io.cmudict"),
    **dict.fromkeys(("read_naacl",), "varorder.io.naacl"),
    **dict.fromkeys(("OcrWord", "read_ocr_letters"), "varorder.io.ocr"),
    **dict.fromkeys(("TaggedSentence", "read_tagged"), "varorder.io.tagged"),
    **dict.fromkeys(("tokenize", "read_sentences", "format_tagged"), "varorder.io.text"),
    # the text-file helpers every writer uses: atomic, umask-respecting, gzip by suffix
    **dict.fromkeys(("atomic_write_text", "input_limit", "InputTooLargeError", "naming_path", "open_stdin", "open_text",
                      "umask_mode"), "varorder.io._text"),
}
__getattr__, __dir__, __all__ = attach(__name__, _EXPORTS)
