"""Named-entity recognition end to end: read CoNLL column files or GUM (CorefUD) into words and tags, tag
them with any varorder tagger under the scheme's constraints, write the tags back in the input's format,
and score them as CoNLL and seqeval do.

Data (:func:`read_ner_file`): ``"conll"`` — CoNLL-2002/2003 columns (:mod:`varorder.io.conll`), the tags
in one column (the last by default), kept as written; ``"gum"`` — CoNLL-U with CorefUD ``Entity=``
annotation, tags derived from the named mentions (:func:`varorder.io.coref.named_entity_spans`: PROPN
head, GUM's entity types, outermost spans) in the requested scheme. Writing (:func:`write_ner_file`):
the CoNLL tag column replaced, or for GUM each word's MISC ``NER=`` item (the entity annotation kept).

Scores (:func:`evaluate_ner`): entity P/R/F1 per type and micro/macro in conlleval's (seqeval's default)
mode and seqeval's strict mode for the scheme, and the token accuracy.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from varorder.errors import ParameterError
from varorder.eval.ner import classification_report, entity_report, flat_accuracy_score
from varorder.io import schemes
from varorder.io import atomic_write_text
from varorder.io.conll import read_conll, write_conll

__all__ = ["NerData", "read_ner_file", "write_ner_file", "evaluate_ner", "format_ner_scores", "NER_FORMATS"]

NER_FORMATS = ("conll", "gum")


@dataclass
class NerData:
    """Sentences as read (:class:`~varorder.io.conll.ConllSentence` or CoNLL-U), their words and tags."""

    sentences: list
    words: list
    tags: list
    input_format: str
    column: int = -1
    scheme: str = "IOB2"


def read_ner_file(path, input_format: str = "conll", column: int = -1, scheme: str = "BIO",
                  named: str = "propn", nesting: str = "outermost", validate: bool = False) -> NerData:
    """Words and NER tags of a file (see the module doc). ``validate``: every tag sequence must be valid in
    ``scheme`` (FormatError naming the file and sentence otherwise)."""
    scheme = schemes.canonical_scheme(scheme)
    if input_format == "conll":
        sentences = read_conll(path, column)
        tags = [s.tags(column) for s in sentences]
        if validate:
            for s, t in zip(sentences, tags):
                schemes.validate(t, scheme, f"{path}:{s.line}: ")
    elif input_format == "gum":
        from varorder.io.coref import read_ner

        sentences, tags = read_ner(path, scheme, named, nesting)
    else:
        raise ParameterError(f"input_format must be one of {NER_FORMATS}, got {input_format!r}")
    if not sentences:
        raise ParameterError(f"{path}: no sentences")
    return NerData(sentences, [s.words for s in sentences], tags, input_format, column, scheme)


def _with_ner(misc: str, tag: str) -> str:
    items = [item for item in misc.split("|") if item and item != "_" and not item.startswith("NER=")]
    items.append(f"NER={tag}")
    return "|".join(sorted(items, key=lambda item: item.split("=", 1)[0].lower()))


def write_ner_file(path, data: NerData, tags) -> None:
    """Write ``tags`` in the input's format (atomically): the CoNLL column, or a CoNLL-U ``NER=`` MISC item."""
    if data.input_format == "conll":
        write_conll(path, data.sentences, tags, data.column)
        return
    if len(tags) != len(data.sentences):
        raise ParameterError(f"tags has {len(tags)} sequences for {len(data.sentences)} sentences")
    with atomic_write_text(path) as handle:
        for sentence, sentence_tags in zip(data.sentences, tags):
            rows = [list(r) for r in sentence.rows]
            for row, tag in zip(sentence.word_rows, sentence_tags):
                rows[row][9] = _with_ner(rows[row][9], tag)
            for comment in sentence.comments:
                handle.write(comment + "\n")
            for row in rows:
                handle.write("\t".join(row) + "\n")
            handle.write("\n")


def evaluate_ner(gold, predicted, scheme: str = "BIO", seconds: float | None = None) -> dict:
    """Entity scores in both modes, the per-type table of each and the token accuracy, as a JSON-ready dict."""
    scheme = schemes.canonical_scheme(scheme)
    default = entity_report(gold, predicted)
    strict = entity_report(gold, predicted, mode="strict", scheme=scheme)
    n_tokens = sum(map(len, gold))
    out = {"scheme": scheme, "default": default.as_dict(), "strict": strict.as_dict(),
           "token_accuracy": flat_accuracy_score(gold, predicted), "tokens": n_tokens, "sentences": len(gold),
           "report_default": classification_report(gold, predicted, digits=4),
           "report_strict": classification_report(gold, predicted, mode="strict", scheme=scheme, digits=4)}
    if seconds is not None:
        out["seconds"] = seconds
        out["tokens_per_second"] = n_tokens / seconds if seconds > 0 else float("inf")
    return out


def format_ner_scores(result: dict) -> str:
    """The text ``varorder tag eval --task ner`` prints."""
    d, s = result["default"]["micro"], result["strict"]["micro"]
    lines = [f"entity F1 {d['f1']:.4f} (P {d['precision']:.4f}, R {d['recall']:.4f}; conlleval / seqeval default "
             f"mode), strict {result['scheme']} {s['f1']:.4f}; macro F1 {result['default']['macro']['f1']:.4f}; "
             f"token accuracy {result['token_accuracy']:.4f} on {result['tokens']} tokens "
             f"({result['sentences']} sentences)", "", result["report_default"]]
    if "tokens_per_second" in result:
        lines.append(f"{result['tokens_per_second']:,.0f} tokens/s including feature extraction")
    return "\n".join(lines)


def timed_predict(model, words, constraints):
    """(tags, seconds) of ``model.predict`` on words under the scheme ``constraints`` (HMM: Viterbi)."""
    began = time.perf_counter()
    tags = model.predict(words, constraints=constraints)
    return tags, time.perf_counter() - began
