"""CRFsuite attribute files (the input of ``crfsuite learn`` / ``crfsuite tag``).

One item per line: ``LABEL<TAB>ATTR<TAB>ATTR...``; a blank line ends a sequence. An attribute
is ``NAME`` (value 1) or ``NAME:VALUE`` with a float VALUE; in names ``\\:`` is a literal colon
and ``\\\\`` a backslash (http://www.chokkan.org/software/crfsuite/manual.html, "Data format").
Labels of an unlabelled file (for tagging) may be any placeholder.
"""

from __future__ import annotations

from varorder.errors import FormatError
from varorder.io._text import atomic_write_text, open_text

__all__ = ["read_crfsuite", "write_labels"]


def _attribute(field: str, where: str) -> tuple[str, float]:
    name, value, k = [], None, 0
    while k < len(field):
        ch = field[k]
        if ch == "\\" and k + 1 < len(field) and field[k + 1] in ":\\":
            name.append(field[k + 1])
            k += 2
            continue
        if ch == ":":
            text = field[k + 1:]
            try:
                value = float(text)
            except ValueError:
                raise FormatError(f"{where}: attribute {field!r} has value {text!r}; expected a number "
                                  "(write a literal colon in a name as '\\:')") from None
            break
        name.append(ch)
        k += 1
    if not name:
        raise FormatError(f"{where}: empty attribute name in {field!r}")
    return "".join(name), 1.0 if value is None else value


def read_crfsuite(path) -> tuple[list[list[dict[str, float]]], list[list[str]]]:
    """(X, y): per sequence, one {attribute: value} dict and one label per item."""
    X, y = [], []
    items, labels = [], []
    with open_text(path) as fh:
        for no, line in enumerate(fh, 1):
            line = line.rstrip("\r\n")
            if not line.strip():
                if items:
                    X.append(items)
                    y.append(labels)
                    items, labels = [], []
                continue
            fields = line.split("\t")
            where = f"{path}, line {no}"
            if not fields[0]:
                raise FormatError(f"{where}: expected 'LABEL<TAB>ATTRIBUTE...', the label is empty", path=path, line=no)
            features: dict[str, float] = {}
            for field in fields[1:]:
                if field:
                    name, value = _attribute(field, where)
                    features[name] = features.get(name, 0.0) + value
            items.append(features)
            labels.append(fields[0])
    if items:
        X.append(items)
        y.append(labels)
    if not X:
        raise FormatError(f"{path}: no items (expected 'LABEL<TAB>ATTRIBUTE...' lines)", path=path)
    return X, y


def write_labels(path, labels) -> None:
    """``crfsuite tag`` output: one label per line, a blank line after each sequence (atomic)."""
    with atomic_write_text(path) as fh:
        for sequence in labels:
            fh.write("".join(f"{label}\n" for label in sequence) + "\n")
