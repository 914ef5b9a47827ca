"""Symmetrizing two directional alignments (Och & Ney 2003; Koehn et al. 2003).

Links are (English i, French j). ``grow-diag-final-and`` starts from the
intersection, grows into union links adjacent (including diagonally) to
existing ones that cover a still-unaligned word, then adds union links whose
words are both unaligned.
"""

from __future__ import annotations

__all__ = ["SYMMETRIZATIONS", "symmetrize"]

SYMMETRIZATIONS = ("intersection", "union", "grow-diag-final-and")
_NEIGHBOURS = ((-1, 0), (0, -1), (1, 0), (0, 1), (-1, -1), (-1, 1), (1, -1), (1, 1))


def _grow_diag_final_and(e2f: set, f2e: set) -> set:
    union = e2f | f2e
    alignment = set(e2f & f2e)
    e_aligned = {i for i, _ in alignment}
    f_aligned = {j for _, j in alignment}
    grew = True
    while grew:
        grew = False
        for i, j in sorted(alignment):
            for di, dj in _NEIGHBOURS:
                link = (i + di, j + dj)
                if link in union and link not in alignment and (link[0] not in e_aligned or link[1] not in f_aligned):
                    alignment.add(link)
                    e_aligned.add(link[0])
                    f_aligned.add(link[1])
                    grew = True
    for direction in (e2f, f2e):
        for i, j in sorted(direction):
            if i not in e_aligned and j not in f_aligned:
                alignment.add((i, j))
                e_aligned.add(i)
                f_aligned.add(j)
    return alignment


def symmetrize(first: set, second: set, method: str) -> set:
    """Combine two directional link sets with one of :data:`SYMMETRIZATIONS`."""
    if method == "intersection":
        return set(first) & set(second)
    if method == "union":
        return set(first) | set(second)
    if method == "grow-diag-final-and":
        return _grow_diag_final_and(set(first), set(second))
    raise ValueError(f"method must be one of {SYMMETRIZATIONS}, got {method!r}")
