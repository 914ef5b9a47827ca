"""Grammar induction experiments: load WSJ10 / UD10 (or plain tag files), train DMV / CCM /
their product (Klein & Manning 2004; Liang, Klein & Jordan 2008, §5.1), parse, score, write.

Factorization: see :mod:`varorder.grammar.induce`; this module only moves data between
files, :mod:`varorder.grammar.treebank` and the metrics of :mod:`varorder.eval.parsing`.

Input formats (``fmt="auto"`` picks by file name): ``conllu`` (``.conllu[.gz]``; UPOS tags,
gold heads), ``ptb`` (``.mrg[.gz]``, or a tar archive of ``.mrg`` files; PTB tags, gold
brackets and head-rule heads), ``tags`` (anything else: one sentence per line, tags
separated by spaces; no gold). Sentences longer than ``max_length`` words after removing
punctuation are dropped (the WSJ10 convention); ``max_length=None`` keeps all.
"""

from __future__ import annotations

import os

import numpy as np

from varorder.errors import FormatError, ParameterError
from varorder.eval.parsing import attachment_scores, bracket_scores
from varorder.grammar.treebank import GoldSentence, ud_sentences, wsj_sentences
from varorder.io import atomic_write_text, open_text
from varorder.io.conllu import read_conllu
from varorder.io.ptb import Tree, format_tree, read_ptb, read_ptb_archive

__all__ = ["FORMATS", "load_sentences", "evaluate", "spans_to_tree", "tree_lines", "write_conllu_heads",
           "write_trees"]

FORMATS = ("auto", "conllu", "ptb", "tags")
_NO_LIMIT = 10**9


def _guess(path: str) -> str:
    name = os.path.basename(path).lower()
    if name.endswith((".conllu", ".conllu.gz")):
        return "conllu"
    if name.endswith((".mrg", ".mrg.gz", ".tar", ".tar.gz", ".tgz")):
        return "ptb"
    return "tags"


def load_sentences(path, fmt: str = "auto", max_length: int | None = 10, head_style: str = "content",
                   tag_column: str = "upos") -> list[GoldSentence]:
    """Sentences of one file; gold heads/spans are None for the ``tags`` format. ``head_style`` and
    ``tag_column`` apply to CoNLL-U (see :func:`varorder.grammar.treebank.ud_sentences`)."""
    path = os.fspath(path)
    if fmt not in FORMATS:
        raise ParameterError(f"format must be one of {FORMATS}, got {fmt!r}", name='format', value=fmt)
    fmt = _guess(path) if fmt == "auto" else fmt
    limit = _NO_LIMIT if max_length is None else max_length
    if fmt == "conllu":
        sentences = read_conllu(path)
        try:  # the treebank's checks (a HEAD that is no word ID) know the sentence, not the file
            return ud_sentences(sentences, max_length=limit, head_style=head_style, tag_column=tag_column)
        except FormatError as err:
            raise FormatError(f"{path}: {err}", path=path) from None
    if fmt == "ptb":
        if path.lower().endswith((".tar", ".tar.gz", ".tgz")):
            trees = [t for _, t in read_ptb_archive(path)]
        else:
            trees = read_ptb(path)
        try:
            return wsj_sentences(trees, max_length=limit)
        except FormatError as err:
            raise FormatError(f"{path}: {err}", path=path) from None
    out = []
    with open_text(path) as f:
        for lineno, line in enumerate(f, 1):
            tags = line.split()
            if not tags:
                continue
            if len(tags) <= limit:
                out.append(GoldSentence(tags, None, None, list(tags)))
    if not out:
        raise FormatError(f"{path}: no sentence of 1 … {limit} tags", path=path)
    return out


def evaluate(heads, spans, gold) -> dict:
    """Directed / undirected attachment accuracy (when heads were predicted) and bracket P/R/F1."""
    if any(g.heads is None for g in gold):
        raise ParameterError("the gold file has no trees (format 'tags'); give a CoNLL-U or PTB file", name='gold', value=gold)
    scores = {"sentences": len(gold), "words": int(sum(len(g.tags) for g in gold))}
    if heads and heads[0] is not None:
        scores["directed"], scores["undirected"] = attachment_scores(heads, [g.heads for g in gold])
    scores["precision"], scores["recall"], scores["f1"] = bracket_scores(
        spans, [g.spans for g in gold], [len(g.tags) for g in gold])
    return scores


def spans_to_tree(spans, tags, words, label: str = "X") -> Tree:
    """The binary tree of a full bracketing (every length-1 span and the sentence included)."""
    n = len(tags)
    split = {}
    for i, j in spans:
        if j - i > 1:
            inner = [k for k in range(i + 1, j) if (i, k) in spans and (k, j) in spans]
            if len(inner) != 1:
                raise ParameterError(f"span ({i}, {j}) is not split by the bracketing into two spans", name='spans', value=spans)
            split[(i, j)] = inner[0]

    def build(i, j):
        if j - i == 1:
            return Tree(tags[i], word=words[i])
        k = split[(i, j)]
        return Tree(label, [build(i, k), build(k, j)])

    if (0, n) not in spans and n > 1:
        raise ParameterError("the bracketing lacks the whole-sentence span", name='spans', value=spans)
    return build(0, n)


def tree_lines(sentences, spans):
    """One bracketed tree per sentence (labels X, preterminals ``(TAG word)``)."""
    return [format_tree(spans_to_tree(s, g.tags, g.words)) for g, s in zip(sentences, spans)]


def write_trees(path, sentences, spans) -> None:
    """:func:`tree_lines`, one per line, written atomically."""
    with atomic_write_text(path) as f:
        for line in tree_lines(sentences, spans):
            f.write(line + "\n")


def write_conllu_heads(path, sentences, heads) -> None:
    """CoNLL-U with the predicted HEAD (DEPREL ``root`` or ``dep``) of every kept word, atomically."""
    with atomic_write_text(path) as f:
        for k, (g, h) in enumerate(zip(sentences, heads)):
            f.write(f"# sent_id = {k + 1}\n# text = {' '.join(g.words)}\n")
            for a, (word, tag, head) in enumerate(zip(g.words, g.tags, np.asarray(h).tolist())):
                rel = "root" if head < 0 else "dep"
                f.write(f"{a + 1}\t{word}\t_\t{tag}\t_\t_\t{head + 1}\t{rel}\t_\t_\n")
            f.write("\n")
