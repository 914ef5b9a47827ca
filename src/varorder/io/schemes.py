"""Chunk tag schemes for named-entity and chunking data: IOB1, IOB2 (BIO), BIOES (IOBES) and BILOU.

A tag is ``O`` or ``PREFIX-TYPE`` (``B-PER``); a *span* is ``(type, start, end)`` with ``end``
exclusive. The schemes (Ramshaw & Marcus 1995; Tjong Kim Sang & Veenstra 1999; Ratinov & Roth
2009):

* **IOB2 / BIO** — every span opens with ``B-``, continues with ``I-``;
* **IOB1** — a span is ``I-`` throughout; ``B-`` opens a span only right after a span of the same
  type (the original CoNLL-2003 files);
* **BIOES / IOBES** — ``S-`` single-token span, otherwise ``B- I-* E-``;
* **BILOU** — BIOES with ``U`` for ``S`` and ``L`` for ``E``.

A sequence is *valid* in a scheme when every tag's prefix belongs to the scheme and every
adjacent pair (the sentence start and end included) is allowed: :func:`allowed_transitions`
gives those pairs as boolean matrices (AllenNLP's ``allowed_transitions``), which the taggers
turn into −∞ transition scores (``predict(X, constraints="BIO")``), so that constrained decoding
is exact search over valid sequences only.

Reading spans back (:func:`spans`) comes in two modes, those of seqeval (Nakayama 2018):
``scheme=None`` is conlleval's lenient rule (any prefix, a type change or ``B`` starts a
span; what CoNLL's ``conlleval`` script and seqeval's default mode count), and a scheme gives
seqeval's *strict* mode for it, in which a span counts only if it is well formed in that
scheme. :func:`convert` re-encodes a valid sequence from one scheme into another.
"""

from __future__ import annotations

import numpy as np

from varorder.errors import FormatError, ParameterError

__all__ = ["SCHEMES", "canonical_scheme", "split_tag", "spans", "encode", "convert", "validate", "is_valid",
           "allowed_transitions", "entity_types", "scheme_labels"]

# canonical name → (prefixes, begin, inside, end, single)
_SCHEME_PARTS = {
    "IOB1": ("IOB", "B", "I", "I", "I"),
    "IOB2": ("IOB", "B", "I", "I", "B"),
    "BIOES": ("IOBES", "B", "I", "E", "S"),
    "BILOU": ("IOBLU", "B", "I", "L", "U"),
}
_ALIASES = {"BIO": "IOB2", "IOB": "IOB2", "IOBES": "BIOES", "BIOUL": "BILOU", "IOBLU": "BILOU"}
SCHEMES = tuple(_SCHEME_PARTS)


def canonical_scheme(scheme: str) -> str:
    """The canonical name of a scheme (``"BIO"`` → ``"IOB2"``, ``"IOBES"`` → ``"BIOES"``)."""
    if not isinstance(scheme, str):
        raise ParameterError(f"scheme must be one of {_names()}, got {scheme!r}", name="scheme", value=scheme)
    name = scheme.upper()
    name = _ALIASES.get(name, name)
    if name not in _SCHEME_PARTS:
        raise ParameterError(f"scheme must be one of {_names()}, got {scheme!r}", name="scheme", value=scheme)
    return name


def _names() -> str:
    return ", ".join(list(_SCHEME_PARTS) + list(_ALIASES))


def split_tag(tag: str) -> tuple[str, str]:
    """(prefix, type) of a tag: ``"B-PER"`` → ``("B", "PER")``, ``"O"`` → ``("O", "")``; a bare prefix such as
    ``"B"`` has type ``"_"`` (seqeval's convention)."""
    if tag == "O":
        return "O", ""
    return tag[:1], tag[1:].split("-", 1)[-1] or "_"


# -- reading spans ------------------------------------------------------------------------------------------


def _lenient_spans(tags) -> list[tuple[str, int, int]]:
    """conlleval's chunk rule (seqeval's default mode, ``get_entities``)."""
    out = []
    prev_prefix, prev_type, begin = "O", "", 0
    for i, tag in enumerate(list(tags) + ["O"]):
        prefix, type_ = tag[:1], tag[1:].split("-", 1)[-1] or "_"  # seqeval's get_entities, O included
        if _lenient_end(prev_prefix, prefix, prev_type, type_):
            out.append((prev_type, begin, i))
        if _lenient_start(prev_prefix, prefix, prev_type, type_):
            begin = i
        prev_prefix, prev_type = prefix, type_
    return out


def _lenient_end(prev, cur, prev_type, type_) -> bool:
    if prev in ("E", "S"):
        return True
    if prev in ("B", "I") and cur in ("B", "S", "O"):
        return True
    return prev not in ("O", ".") and prev_type != type_


def _lenient_start(prev, cur, prev_type, type_) -> bool:
    if cur in ("B", "S"):
        return True
    if prev in ("E", "S", "O") and cur in ("E", "I"):
        return True
    return cur not in ("O", ".") and prev_type != type_


# seqeval's strict-mode patterns (seqeval.scheme): (previous prefixes, current prefixes, type condition)
_ANY = "IOBESLU"
_STRICT = {
    "IOB1": ("IOB", [("O", "I", "any"), ("I", "I", "diff"), ("B", "I", "any"), ("I", "B", "same"),
                     ("B", "B", "same")],
             [("B", "I", "same"), ("I", "I", "same")],
             [("I", "I", "diff"), ("I", "O", "any"), ("I", "B", "any"), ("B", "O", "any"), ("B", "I", "diff"),
              ("B", "B", "same")]),
    "IOB2": ("IOB", [(_ANY, "B", "any")],
             [("B", "I", "same"), ("I", "I", "same")],
             [("I", "O", "any"), ("I", "I", "diff"), ("I", "B", "any"), ("B", "O", "any"), ("B", "I", "diff"),
              ("B", "B", "any")]),
    "BIOES": ("IOBES", [(_ANY, "B", "any"), (_ANY, "S", "any")],
              [("B", "I", "same"), ("B", "E", "same"), ("I", "I", "same"), ("I", "E", "same")],
              [("S", _ANY, "any"), ("E", _ANY, "any")]),
    "BILOU": ("IOBLU", [(_ANY, "B", "any"), (_ANY, "U", "any")],
              [("B", "I", "same"), ("B", "L", "same"), ("I", "I", "same"), ("I", "L", "same")],
              [("U", _ANY, "any"), ("L", _ANY, "any")]),
}


def _matches(patterns, prev, cur) -> bool:
    for before, now, condition in patterns:
        if prev[0] in before and cur[0] in now and (
                condition == "any" or (prev[1] == cur[1]) == (condition == "same")):
            return True
    return False


def _strict_spans(tags, scheme: str) -> list[tuple[str, int, int]]:
    allowed, starts, insides, ends = _STRICT[scheme]
    tokens = []
    for i, tag in enumerate(tags):
        prefix, type_ = split_tag(tag)
        if prefix not in allowed:
            raise FormatError(f"tag {tag!r} at position {i} is not a {scheme} tag (prefixes {', '.join(allowed)})",
                              expected=f"a {scheme} tag")
        tokens.append((prefix, type_))
    tokens.append(("O", "_"))
    out = []
    i, prev = 0, ("O", "_")
    while i < len(tokens):
        token = tokens[i]
        if _matches(starts, prev, token):
            j, inner = i + 1, token
            while j < len(tokens) and _matches(insides, inner, tokens[j]):
                inner = tokens[j]
                j += 1
            if _matches(ends, tokens[j - 1], tokens[j]):
                out.append((token[1], i, j))
            i = j
        else:
            i += 1
        prev = tokens[i - 1]
    return out


def spans(tags, scheme: str | None = None) -> list[tuple[str, int, int]]:
    """The spans ``(type, start, end)`` (end exclusive) of one tag sequence.

    ``scheme=None``: conlleval's lenient reading (seqeval's default mode), any tag sequence;
    a scheme: seqeval's strict mode, which counts only spans well formed in that scheme (a tag
    whose prefix the scheme lacks raises FormatError).
    """
    if scheme is None:
        return _lenient_spans(tags)
    return _strict_spans(tags, canonical_scheme(scheme))


# -- writing tags ---------------------------------------------------------------------------------------------


def encode(span_list, length: int, scheme: str = "IOB2") -> list[str]:
    """The tags of ``length`` tokens holding the given non-overlapping spans, in ``scheme``."""
    scheme = canonical_scheme(scheme)
    _, begin, inside, end, single = _SCHEME_PARTS[scheme]
    tags = ["O"] * length
    previous_end, previous_type = -1, None
    for type_, start, stop in sorted(span_list, key=lambda s: (s[1], s[2])):
        if not 0 <= start < stop <= length:
            raise ParameterError(f"span {(type_, start, stop)} is outside 0..{length} or empty", name="spans",
                                 value=(type_, start, stop))
        if start < previous_end:
            raise ParameterError(f"span {(type_, start, stop)} overlaps the span before it", name="spans",
                                 value=(type_, start, stop))
        if scheme == "IOB1":
            first = begin if (start == previous_end and type_ == previous_type) else inside
            tags[start] = f"{first}-{type_}"
            for t in range(start + 1, stop):
                tags[t] = f"{inside}-{type_}"
        elif stop - start == 1:
            tags[start] = f"{single}-{type_}"
        else:
            tags[start] = f"{begin}-{type_}"
            for t in range(start + 1, stop - 1):
                tags[t] = f"{inside}-{type_}"
            tags[stop - 1] = f"{end}-{type_}"
        previous_end, previous_type = stop, type_
    return tags


# -- validity -----------------------------------------------------------------------------------------------------


def _pair_allowed(scheme: str, prev: tuple[str, str] | None, cur: tuple[str, str] | None) -> bool:
    """Whether tag ``cur`` may follow tag ``prev`` (None: the sentence start / end)."""
    if scheme in ("IOB2", "IOB1"):
        if cur is None:
            return True
        if scheme == "IOB2":
            if cur[0] != "I":
                return True
            return prev is not None and prev[0] in "BI" and prev[1] == cur[1]
        if cur[0] != "B":
            return True
        return prev is not None and prev[0] in "BI" and prev[1] == cur[1]
    _, begin, inside, end, single = _SCHEME_PARTS[scheme]
    open_prev = prev is not None and prev[0] in (begin, inside)
    if cur is None:
        return not open_prev
    if open_prev:
        return cur[0] in (inside, end) and cur[1] == prev[1]
    return cur[0] in ("O", begin, single)


def _check_prefix(scheme, tag, where):
    prefix, _ = split_tag(tag)
    if tag != "O" and (prefix not in _SCHEME_PARTS[scheme][0] or prefix == "O" or len(tag) < 3 or tag[1] != "-"):
        raise FormatError(f"{where}tag {tag!r} is not a {scheme} tag", expected=f"O or {'/'.join(p for p in _SCHEME_PARTS[scheme][0] if p != 'O')}-TYPE")


def validate(tags, scheme: str, where: str = "") -> None:
    """Raise FormatError at the first tag that breaks ``scheme`` (a foreign prefix, or a transition the scheme
    forbids, e.g. ``O`` → ``I-PER`` in BIO); ``where`` prefixes the message (a file and sentence)."""
    scheme = canonical_scheme(scheme)
    prev = None
    for i, tag in enumerate(tags):
        _check_prefix(scheme, tag, where)
        cur = split_tag(tag)
        if not _pair_allowed(scheme, prev, cur):
            before = "the sentence start" if prev is None else repr(tags[i - 1])
            raise FormatError(f"{where}tag {tag!r} at position {i} cannot follow {before} in {scheme}",
                              expected=f"a valid {scheme} sequence")
        prev = cur
    if tags and not _pair_allowed(scheme, prev, None):
        raise FormatError(f"{where}tag {tags[-1]!r} at position {len(tags) - 1} cannot end a sentence in {scheme}",
                          expected=f"a valid {scheme} sequence")


def is_valid(tags, scheme: str) -> bool:
    """Whether :func:`validate` accepts ``tags``."""
    try:
        validate(tags, scheme)
    except FormatError:
        return False
    return True


def convert(tags, source: str, target: str, repair: bool = False) -> list[str]:
    """Re-encode a tag sequence from scheme ``source`` into ``target`` (e.g. CoNLL-2003's IOB1 into BIOES).

    The sequence must be valid in ``source`` (FormatError otherwise) unless ``repair=True``, which reads its
    spans with conlleval's lenient rule (so ``O I-PER`` becomes ``B-PER`` in BIO)."""
    source = canonical_scheme(source)
    if repair:
        found = _lenient_spans(tags)
    else:
        validate(tags, source)
        found = _strict_spans(tags, source)
    return encode(found, len(tags), target)


# -- labels and transitions -------------------------------------------------------------------------------------


def entity_types(labels) -> list[str]:
    """The sorted entity types of a label set (``["B-LOC", "I-LOC", "O"]`` → ``["LOC"]``)."""
    return sorted({split_tag(label)[1] for label in labels if label != "O"})


def scheme_labels(types, scheme: str = "IOB2") -> list[str]:
    """Every tag of ``scheme`` over the entity ``types``, sorted (``O`` included)."""
    scheme = canonical_scheme(scheme)
    prefixes = sorted(set(_SCHEME_PARTS[scheme][0]) - {"O"})
    return sorted(["O"] + [f"{p}-{t}" for t in types for p in prefixes])


def allowed_transitions(labels, scheme: str):
    """Boolean masks of what ``scheme`` allows over ``labels`` (e.g. a tagger's ``classes_``):
    ``(transitions (K, K), start (K,), end (K,))``, transitions[i, j] true when label j may follow
    label i. A label that is not a tag of the scheme (a foreign prefix) is never allowed."""
    scheme = canonical_scheme(scheme)
    labels = list(labels)
    parsed = []
    for label in labels:
        try:
            _check_prefix(scheme, str(label), "")
            parsed.append(split_tag(str(label)))
        except FormatError:
            parsed.append(None)
    K = len(labels)
    transitions = np.zeros((K, K), dtype=bool)
    start = np.zeros(K, dtype=bool)
    end = np.zeros(K, dtype=bool)
    for j, cur in enumerate(parsed):
        if cur is None:
            continue
        start[j] = _pair_allowed(scheme, None, cur)
        end[j] = _pair_allowed(scheme, cur, None)
        for i, prev in enumerate(parsed):
            transitions[i, j] = prev is not None and _pair_allowed(scheme, prev, cur)
    return transitions, start, end
