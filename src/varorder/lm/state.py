"""The state of a back-off n-gram model: the words of the history that can still change
a later probability (KenLM's right state, Heafield 2011, "KenLM: Faster and Smaller
Language Model Queries", §4.1; state minimization, Li & Khudanpur 2008).

Factorization: p(x_{i+1} .. | x_1 .. x_i) = p(x_{i+1} .. | s) for the state s =
:meth:`~varorder.lm.model.NgramLM.minimal_state` of x_1 .. x_i, the longest suffix of the
history that is stored and either extends to a longer stored n-gram or has a back-off
weight other than 1; two histories with one state have the same future.
"""

from __future__ import annotations

__all__ = ["State"]


class State(tuple):
    """An LM state: the word ids of the history's minimal suffix, oldest first.

    A small immutable value: equal states have equal futures, and states hash, compare
    and sort as the tuples of their word ids (so ``State((4, 7)) == (4, 7)``), which lets
    a decoder key hypotheses by state as it would by KenLM's ``State``. The empty state
    (no word matters) is false.

    >>> State((4, 7)), len(State((4, 7))), State(()) == State()
    (State(4, 7), 2, True)
    """

    __slots__ = ()

    def __new__(cls, words=()):
        return super().__new__(cls, (int(w) for w in words))

    @property
    def words(self) -> tuple[int, ...]:
        """The word ids, oldest first, as a plain tuple."""
        return tuple(self)

    def __repr__(self) -> str:
        return f"State({', '.join(str(w) for w in self)})"
