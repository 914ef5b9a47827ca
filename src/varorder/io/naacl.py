"""NAACL 2003 word-alignment gold format (Mihalcea & Pedersen 2003).

Each line is ``sentence e_position f_position [S|P] [confidence]`` with 1-based
sentence ids and positions, English first; position 0 is NULL (such links are
dropped). A link without a label is sure. Returned positions are 0-based;
possible links include the sure ones (S ⊆ P).
"""

from __future__ import annotations

from varorder.errors import FormatError
from varorder.io._text import open_text

__all__ = ["read_naacl"]


# Without n_sentences the list is padded up to the largest id: bound it, so a corrupt id
# (say 10^8) is an error rather than gigabytes of empty link sets.
MAX_IMPLICIT_SENTENCES = 1_000_000


def read_naacl(path, n_sentences: int | None = None):
    """List of (sure, possible) link sets indexed by sentence id − 1.

    ``n_sentences`` pads the list to that many sentences (gold files omit
    sentences without links) and rejects ids beyond it.
    """
    gold: dict[int, tuple[set, set]] = {}
    with open_text(path) as fh:
        for no, line in enumerate(fh, 1):
            fields = line.split()
            if not fields:
                continue
            where = f"{path}, line {no}"
            if len(fields) not in (3, 4, 5):
                raise FormatError(f"{where}: expected 'sentence e_pos f_pos [S|P] [confidence]', got {line.strip()!r}", path=path, line=no)
            try:
                sent, e, f = (int(x) for x in fields[:3])
            except ValueError:
                raise FormatError(f"{where}: sentence and positions must be integers, got {line.strip()!r}", path=path, line=no) from None
            if sent < 1 or e < 0 or f < 0:
                raise FormatError(f"{where}: sentence ids are 1-based and positions non-negative, got {line.strip()!r}", path=path, line=no)
            if n_sentences is None and sent > MAX_IMPLICIT_SENTENCES:
                raise FormatError(f"{where}: sentence id {sent} is implausibly large (> {MAX_IMPLICIT_SENTENCES:,}); "
                                  f"give n_sentences to read a gold file this large", path=path, line=no)
            if n_sentences is not None and sent > n_sentences:
                raise FormatError(f"{where}: sentence {sent} is beyond the {n_sentences} sentences given", path=path, line=no)
            label = fields[3].upper() if len(fields) >= 4 else "S"
            if label not in ("S", "P"):
                raise FormatError(f"{where}: label must be S or P, got {fields[3]!r}", path=path, line=no)
            if len(fields) == 5:
                try:
                    float(fields[4])
                except ValueError:
                    raise FormatError(f"{where}: confidence must be a number, got {fields[4]!r}", path=path, line=no) from None
            sure, possible = gold.setdefault(sent, (set(), set()))
            if e == 0 or f == 0:
                continue
            link = (e - 1, f - 1)
            possible.add(link)
            if label == "S":
                sure.add(link)
    n = n_sentences if n_sentences is not None else max(gold, default=0)
    return [gold.get(s, (set(), set())) for s in range(1, n + 1)]
