"""Chart templates for grammar induction: the hypergraphs of the DMV (lexicalized) and the CCM (bracketing).

Both charts depend only on the sentence length n, so their structure is built
once per length (cached) and a batch of sentences is a concatenation of
templates; the tags only choose which parameters each edge fires.

**Lexicalized chart** (Klein & Manning 2004, §4: the DMV and its product with
the CCM). A head h first takes its right dependents, innermost first, stops on
the right, then takes its left dependents, innermost first, and stops on the
left; every projective dependency tree has exactly one such derivation, and
the spans it builds are a binary bracketing. Items over spans [i, j):

* ``R(h; h, j)`` — h with its right dependents so far; ``L(h; i, j)`` — right
  side sealed, left dependents so far; ``S(h; i, j)`` — sealed.
* leaf ``R(h; h, h+1) ← ()``; right attach ``R(h; h, j) ← R(h; h, k) S(a; k, j)``
  fires continue(h, →, adj = [k = h+1]) and choose(a | h, →); right stop
  ``L(h; h, j) ← R(h; h, j)`` fires stop(h, →, adj = [j = h+1]); left attach
  ``L(h; i, j) ← S(a; i, k) L(h; k, j)`` fires continue(h, ←, adj = [k = h]) and
  choose(a | h, ←); left stop ``S(h; i, j) ← L(h; i, j)`` fires
  stop(h, ←, adj = [i = h]); root ``GOAL ← S(h; 0, n)`` fires root(h).

Adjacency ("has h taken a dependent on this side yet") is read off the span
boundary, so no valence state is needed. Leaves and attach edges each *create*
one span of the bracketing (``edge_span``); stop and root edges create none.
O(n⁵) edges, as in K&M's combined model.

**Bracket chart** (Klein & Manning 2002, the CCM): nodes are the spans [i, j)
ordered by length (so span id = node id and the whole sentence is the goal);
leaf ``(i, i+1) ← ()`` and binary ``(i, j) ← (i, k) (k, j)``; each edge creates
its head span. Derivations are exactly the binary bracketings.

Span ids of a length-n sentence run over spans ordered by length, then start.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from varorder.errors import ParameterError

__all__ = ["LexicalizedTemplate", "BracketTemplate", "lexicalized_template", "bracket_template",
           "span_table", "LEAF", "RIGHT_ATTACH", "RIGHT_STOP", "LEFT_ATTACH", "LEFT_STOP", "ROOT",
           "RIGHT", "LEFT"]

LEAF, RIGHT_ATTACH, RIGHT_STOP, LEFT_ATTACH, LEFT_STOP, ROOT = range(6)
RIGHT, LEFT = 0, 1


@lru_cache(maxsize=None)
def span_table(n: int):
    """(span_start (S,), span_end (S,), id_of dict (i, j) → span id) for spans of length 1 … n."""
    starts, ends = [], []
    for length in range(1, n + 1):
        for i in range(0, n - length + 1):
            starts.append(i)
            ends.append(i + length)
    ids = {(i, j): s for s, (i, j) in enumerate(zip(starts, ends))}
    return np.array(starts, dtype=np.int64), np.array(ends, dtype=np.int64), ids


@dataclass(frozen=True)
class LexicalizedTemplate:
    """The lexicalized chart of one sentence length, local ids; see the module docstring."""

    n: int
    num_nodes: int
    edge_head: np.ndarray
    tail_offsets: np.ndarray
    tails: np.ndarray
    edge_kind: np.ndarray
    edge_word: np.ndarray      # the head word h of the edge
    edge_arg: np.ndarray       # the dependent a (attach edges), else −1
    edge_adjacent: np.ndarray  # 1 if h has no dependent yet on the edge's side
    edge_span: np.ndarray      # span id created by the edge, −1 for stop/root edges

    @property
    def num_edges(self) -> int:
        return int(self.edge_head.shape[0])


@dataclass(frozen=True)
class BracketTemplate:
    """The bracket chart of one sentence length; node id = span id, every edge creates its head span."""

    n: int
    num_nodes: int
    edge_head: np.ndarray
    tail_offsets: np.ndarray
    tails: np.ndarray

    @property
    def edge_span(self) -> np.ndarray:
        return self.edge_head

    @property
    def num_edges(self) -> int:
        return int(self.edge_head.shape[0])


def _pack(heads, tails_lists):
    tail_offsets = np.zeros(len(heads) + 1, dtype=np.int64)
    np.cumsum([len(t) for t in tails_lists], out=tail_offsets[1:])
    tails = np.array([t for ts in tails_lists for t in ts], dtype=np.int64)
    return np.array(heads, dtype=np.int64), tail_offsets, tails


@lru_cache(maxsize=None)
def lexicalized_template(n: int) -> LexicalizedTemplate:
    if n < 1:
        raise ParameterError(f"sentence length must be >= 1, got {n}", name='n', value=n)
    _, _, span_id = span_table(n)
    node = {}
    for length in range(1, n + 1):
        for i in range(0, n - length + 1):
            j = i + length
            node[("R", i, i, j)] = len(node)
            for h in range(i, j):
                node[("L", h, i, j)] = len(node)
            for h in range(i, j):
                node[("S", h, i, j)] = len(node)
    goal = len(node)
    heads, tails, kind, word, arg, adjacent, span = [], [], [], [], [], [], []

    def add(head, tail, k, h, a, adj, s):
        heads.append(head)
        tails.append(tail)
        kind.append(k)
        word.append(h)
        arg.append(a)
        adjacent.append(adj)
        span.append(s)

    for length in range(1, n + 1):
        for i in range(0, n - length + 1):
            j = i + length
            h = i
            r = node[("R", h, h, j)]
            if length == 1:
                add(r, [], LEAF, h, -1, 1, span_id[(h, j)])
            for k in range(h + 1, j):
                for a in range(k, j):
                    add(r, [node[("R", h, h, k)], node[("S", a, k, j)]], RIGHT_ATTACH, h, a, int(k == h + 1),
                        span_id[(h, j)])
            add(node[("L", h, h, j)], [r], RIGHT_STOP, h, -1, int(j == h + 1), -1)
            for hh in range(i, j):
                lnode = node[("L", hh, i, j)]
                for k in range(i + 1, hh + 1):
                    for a in range(i, k):
                        add(lnode, [node[("S", a, i, k)], node[("L", hh, k, j)]], LEFT_ATTACH, hh, a,
                            int(k == hh), span_id[(i, j)])
            for hh in range(i, j):
                add(node[("S", hh, i, j)], [node[("L", hh, i, j)]], LEFT_STOP, hh, -1, int(i == hh), -1)
    for h in range(n):
        add(goal, [node[("S", h, 0, n)]], ROOT, h, -1, 0, -1)
    edge_head, tail_offsets, tail_arr = _pack(heads, tails)
    as_int = lambda x: np.array(x, dtype=np.int64)  # noqa: E731
    return LexicalizedTemplate(n, goal + 1, edge_head, tail_offsets, tail_arr, as_int(kind), as_int(word),
                               as_int(arg), as_int(adjacent), as_int(span))


@lru_cache(maxsize=None)
def bracket_template(n: int) -> BracketTemplate:
    if n < 1:
        raise ParameterError(f"sentence length must be >= 1, got {n}", name='n', value=n)
    starts, ends, span_id = span_table(n)
    heads, tails = [], []
    for s, (i, j) in enumerate(zip(starts.tolist(), ends.tolist())):
        if j - i == 1:
            heads.append(s)
            tails.append([])
        for k in range(i + 1, j):
            heads.append(s)
            tails.append([span_id[(i, k)], span_id[(k, j)]])
    edge_head, tail_offsets, tail_arr = _pack(heads, tails)
    return BracketTemplate(n, len(starts), edge_head, tail_offsets, tail_arr)
