"""Symmetrizing two directional alignments (Och & Ney 2003; Koehn, Och & Marcu 2003).

Links are (English i, French j). ``grow-diag`` starts from the intersection and repeatedly adds
union links adjacent (including diagonally) to existing ones that cover a still-unaligned word;
``grow-diag-final`` then adds union links of which *either* word is unaligned, and
``grow-diag-final-and`` those of which *both* words are unaligned (each direction in turn, as in
Moses' ``symal``).
"""

from __future__ import annotations

from varorder.errors import ParameterError

__all__ = ["SYMMETRIZATIONS", "symmetrize"]

SYMMETRIZATIONS = ("intersection", "union", "grow-diag", "grow-diag-final", "grow-diag-final-and")
_NEIGHBOURS = ((-1, 0), (0, -1), (1, 0), (0, 1), (-1, -1), (-1, 1), (1, -1), (1, 1))


def _grow_diag(e2f: set, f2e: set) -> tuple[set, set, set]:
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
    return alignment, e_aligned, f_aligned


def _final(e2f: set, f2e: set, both_unaligned: bool) -> set:
    alignment, e_aligned, f_aligned = _grow_diag(e2f, f2e)
    for direction in (e2f, f2e):
        for i, j in sorted(direction):
            free_e, free_f = i not in e_aligned, j not in f_aligned
            if (free_e and free_f) if both_unaligned else (free_e or free_f):
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
    if method == "grow-diag":
        return _grow_diag(set(first), set(second))[0]
    if method == "grow-diag-final":
        return _final(set(first), set(second), both_unaligned=False)
    if method == "grow-diag-final-and":
        return _final(set(first), set(second), both_unaligned=True)
    raise ParameterError(f"method must be one of {SYMMETRIZATIONS}, got {method!r}", name='method', value=method)
