"""FASTA reading (multiple sequence alignments), ``.gz`` accepted.

``>name`` lines start records; sequence lines are concatenated. Returns names
and sequences in file order; errors name the file and line.
"""

from __future__ import annotations

from varorder.errors import FormatError
from varorder.io._text import open_text

__all__ = ["read_fasta", "read_alignment"]


def read_fasta(path) -> list[tuple[str, str]]:
    """(name, sequence) records; a header without a sequence line is refused at its line (a file
    of headers only is not that many sequences of length 0)."""
    records: list[tuple[str, list[str], int]] = []
    with open_text(path) as fh:
        for no, line in enumerate(fh, 1):
            line = line.strip()
            if not line:
                continue
            if line.startswith(">"):
                name = line[1:].strip()
                if not name:
                    raise FormatError(f"{path}, line {no}: record header has no name", path=path, line=no)
                _check_sequence(path, records)
                records.append((name, [], no))
            elif not records:
                raise FormatError(f"{path}, line {no}: sequence data before the first '>' header", path=path, line=no)
            else:
                records[-1][1].append(line)
    _check_sequence(path, records)
    return [(name, "".join(parts)) for name, parts, _ in records]


def _check_sequence(path, records) -> None:
    if records and not records[-1][1]:
        name, _, no = records[-1]
        raise FormatError(f"{path}, line {no}: record {name!r} has no sequence (a header with no sequence lines)", path=path, line=no)


def read_alignment(path) -> tuple[list[str], list[str]]:
    """(names, sequences) of an alignment; all sequences must have one length."""
    records = read_fasta(path)
    if not records:
        raise FormatError(f"{path}: no FASTA records", path=path)
    lengths = {len(s) for _, s in records}
    if len(lengths) != 1:
        raise FormatError(f"{path}: aligned sequences differ in length: "
                          + ", ".join(f"{n}={len(s)}" for n, s in records), path=path)
    return [n for n, _ in records], [s for _, s in records]
