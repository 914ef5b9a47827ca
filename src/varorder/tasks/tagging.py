"""Tagging plain text end to end: lines of text → tokens (:mod:`varorder.io.text`) → a fitted tagger's
Viterbi tags (a CRF, MEMM or HMM of :mod:`varorder.models`: under a linear-chain factorization
p(y | x) ∝ ∏ᵢ ψ(yᵢ₋₁, yᵢ, x, i), the argmax run by the engine's max-product chain recursion; Lafferty,
McCallum & Pereira 2001), for ``varorder tag predict`` on text and for scripts.

Sentences are tagged in batches of ``batch`` lines as the input is read, so an input of any size is
tagged in bounded memory, with the batch's sequences sharing the engine's blocked recursions.
"""

from __future__ import annotations

from collections.abc import Iterator

from varorder.io.text import MAX_LINE_CHARS, read_sentences
from varorder.models.features import parse_templates, template_features
from varorder.models.hmm import HMM

__all__ = ["model_inputs", "tag_text"]


def model_inputs(model, sentences: list[list[str]]) -> list:
    """What ``model.predict`` reads for these word lists: the words themselves for an HMM and for a CRF or
    MEMM that extracts its own features (its ``features`` parameter, recorded in the model file); the 'pos'
    template features (:func:`varorder.models.features.pos_features`' templates) for one trained on feature
    dicts without templates."""
    if isinstance(model, HMM) or getattr(model, "features", None) is not None:
        return sentences
    templates = parse_templates("pos")
    return [template_features(words, templates) for words in sentences]


def tag_text(model, path, tokenize: bool = True, constraints=None, batch: int = 256,
             max_line_chars: int = MAX_LINE_CHARS) -> Iterator[tuple[list[str], list]]:
    """(tokens, tags) for each line of the text file ``path`` (``-``: standard input), in order; a blank
    line gives ``([], [])``. ``tokenize=False`` takes the line's space-separated tokens as they are.
    ``constraints`` (a tag scheme such as ``"BIO"``) forbids the transitions invalid in it, as
    ``model.predict(..., constraints=...)`` does. Raises FormatError for a line that is not plain text
    (see :func:`varorder.io.text.read_sentences`).

    >>> from varorder import HMM
    >>> tagger = HMM().fit([["the", "dog", "runs", "."], ["a", "cat", "eats", "."]],
    ...                    [["DET", "NOUN", "VERB", "PUNCT"], ["DET", "NOUN", "VERB", "PUNCT"]])
    >>> import pathlib, tempfile
    >>> text = pathlib.Path(tempfile.mkdtemp()) / "in.txt"
    >>> _ = text.write_text("the cat runs.\\n")
    >>> list(tag_text(tagger, text))
    [(['the', 'cat', 'runs', '.'], ['DET', 'NOUN', 'VERB', 'PUNCT'])]
    """
    pending: list[list[str]] = []

    def tagged():
        words = [tokens for tokens in pending if tokens]
        inputs = model_inputs(model, words)
        if not inputs:
            predicted = []
        elif constraints is None:
            predicted = model.predict(inputs)
        else:
            predicted = model.predict(inputs, constraints=constraints)
        answers = iter(predicted)
        out = [(tokens, list(next(answers)) if tokens else []) for tokens in pending]
        pending.clear()
        return out

    for _, tokens in read_sentences(path, tokenize, max_line_chars):
        pending.append(tokens)
        if len(pending) >= batch:
            yield from tagged()
    yield from tagged()
