"""Deterministic finite automata over token ids: the constraints a sentence is conditioned on.

Factorization: none — a DFA is a 0/1 factor 1[x₁ … x_T ∈ L] on the whole sentence; the
product with a model (:mod:`varorder.constrain.product`) turns it into per-arc factors
by carrying the automaton state (the construction of Ctrl-G, Zhang et al. 2024, and
GeLaTo, Zhang et al. 2023, here with exact inference on the one lattice engine).

A :class:`DFA` is complete over ``vocab_size`` symbols: ``delta`` (Q, V) int32, ``start``,
``accepting`` (Q,) bool; :meth:`DFA.live` marks the states from which an accepting state
can still be reached. Builders:

* :func:`regex_dfa` — a token-level regular expression (Thompson's construction, then
  subset construction over symbol classes: the words the expression names, plus one class
  for every other word, so the cost does not grow with V);
* :func:`contains_dfa` — the sentence contains the phrases, in the given order or in any
  order (the intersection of one "contains" automaton per phrase);
* :func:`length_dfa` — a length range (the product builder takes one directly too);
* :func:`intersect` — the product automaton (both constraints).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from varorder.errors import ParameterError

__all__ = ["DFA", "regex_dfa", "contains_dfa", "length_dfa", "intersect"]


@dataclass
class DFA:
    """A complete DFA over symbols 0 .. V − 1 (see the module)."""

    delta: np.ndarray
    start: int
    accepting: np.ndarray

    def __post_init__(self):
        self.delta = np.ascontiguousarray(self.delta, dtype=np.int32)
        self.accepting = np.ascontiguousarray(self.accepting, dtype=bool)
        if self.delta.ndim != 2 or self.accepting.shape != (self.delta.shape[0],):
            raise ParameterError("delta must be (Q, V) and accepting (Q,)", name="delta", value=self.delta.shape)
        Q = self.delta.shape[0]
        if Q == 0 or not 0 <= self.start < Q or self.delta.min() < 0 or self.delta.max() >= Q:
            raise ParameterError("delta and start must name states in [0, Q)", name="delta", value=Q)

    @property
    def num_states(self) -> int:
        return int(self.delta.shape[0])

    @property
    def vocab_size(self) -> int:
        return int(self.delta.shape[1])

    def run(self, symbols) -> int:
        """The state after reading ``symbols`` from the start."""
        q = self.start
        for x in symbols:
            q = int(self.delta[q, int(x)])
        return q

    def accepts(self, symbols) -> bool:
        return bool(self.accepting[self.run(symbols)])

    def live(self) -> np.ndarray:
        """(Q,) bool: an accepting state is reachable from the state (by a backward
        closure over the transition graph)."""
        live = self.accepting.copy()
        while True:
            grown = live | live[self.delta].any(axis=1)
            if (grown == live).all():
                return live
            live = grown

    def minimized(self) -> "DFA":
        """The minimal complete DFA of the same language: the states reachable from the start,
        merged by Moore's partition refinement (states are equivalent when they agree on
        acceptance and their successors are equivalent on every symbol); state 0 is the
        start."""
        reach = np.zeros(self.num_states, bool)
        reach[self.start] = True
        frontier = np.asarray([self.start])
        while frontier.size:
            nxt = np.unique(self.delta[frontier])
            frontier = nxt[~reach[nxt]]
            reach[frontier] = True
        states = np.flatnonzero(reach)
        index = np.full(self.num_states, -1, np.int64)
        index[states] = np.arange(states.size)
        delta = index[self.delta[states]]
        accepting = self.accepting[states]
        block = (accepting != accepting[0]).astype(np.int64)  # blocks numbered 0 .. count − 1
        count = int(block.max()) + 1
        while True:
            signature = np.concatenate([block[:, None], block[delta]], axis=1)
            labels: dict[bytes, int] = {}
            refined = np.asarray([labels.setdefault(row.tobytes(), len(labels)) for row in signature], np.int64)
            if len(labels) == count:
                break
            block, count = refined, len(labels)
        # one state per block: the start's block first, the others by their first state
        firsts = np.full(count, states.size, np.int64)
        np.minimum.at(firsts, block, np.arange(states.size))
        start_block = block[index[self.start]]
        order = [int(start_block)] + [int(b) for b in np.argsort(firsts, kind="stable") if b != start_block]
        rank = np.empty(count, np.int64)
        rank[order] = np.arange(count)
        representative = firsts[order]
        representative[0] = index[self.start]
        return DFA(rank[block[delta[representative]]], 0, accepting[representative])


def intersect(a: DFA, b: DFA) -> DFA:
    """The product DFA accepting what both accept (reachable pairs only)."""
    if a.vocab_size != b.vocab_size:
        raise ParameterError(f"the DFAs read {a.vocab_size} and {b.vocab_size} symbols", name="b", value=b.vocab_size)
    index = {(a.start, b.start): 0}
    pairs = [(a.start, b.start)]
    rows = []
    i = 0
    while i < len(pairs):
        qa, qb = pairs[i]
        keys = a.delta[qa].astype(np.int64) * b.num_states + b.delta[qb]
        unique, inverse = np.unique(keys, return_inverse=True)
        ids = np.empty(len(unique), np.int32)
        for j, key in enumerate(unique.tolist()):
            pair = (key // b.num_states, key % b.num_states)
            if pair not in index:
                index[pair] = len(pairs)
                pairs.append(pair)
            ids[j] = index[pair]
        rows.append(ids[inverse.reshape(-1)])
        i += 1
    accepting = np.asarray([a.accepting[p] and b.accepting[q] for p, q in pairs])
    return DFA(np.stack(rows), 0, accepting)


def length_dfa(vocab_size: int, min_length: int = 0, max_length: int | None = None) -> DFA:
    """Sentences of min_length .. max_length tokens (max None: no upper bound)."""
    if min_length < 0 or (max_length is not None and max_length < min_length):
        raise ParameterError(f"need 0 <= min_length <= max_length, got {min_length}, {max_length}",
                             name="max_length", value=max_length)
    # states count the tokens read; the last one loops: "at least min_length" or "too long"
    top = (max_length + 1) if max_length is not None else min_length
    Q = top + 1
    delta = np.repeat(np.minimum(np.arange(1, Q + 1), top).astype(np.int32)[:, None], vocab_size, axis=1)
    accepting = np.zeros(Q, bool)
    if max_length is None:
        accepting[min_length:] = True
    else:
        accepting[min_length:max_length + 1] = True
    return DFA(delta, 0, accepting)


# --- token-level regular expressions ------------------------------------------------------


def _lex(pattern: str) -> list[tuple[str, str | None]]:
    """Items of the pattern: ('word', w), ('any', None) and the operators ( ) | * + ?.
    Words are separated by spaces; ( ) | * + ? . are operators wherever they stand unless
    escaped with a backslash."""
    items: list[tuple[str, str | None]] = []
    word: list[str] = []

    def flush():
        if word:
            items.append(("word", "".join(word)))
            word.clear()

    i = 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\" and i + 1 < len(pattern):
            word.append(pattern[i + 1])
            i += 2
            continue
        if ch.isspace():
            flush()
        elif ch in "()|*+?":
            flush()
            items.append((ch, None))
        elif ch == "." and not word and (i + 1 == len(pattern) or pattern[i + 1].isspace() or pattern[i + 1] in "()|*+?"):
            items.append(("any", None))
        else:
            word.append(ch)
        i += 1
    flush()
    return items


class _Nfa:
    def __init__(self):
        self.edges: list[list[tuple[object, int]]] = []  # label: None (epsilon), "any" or a symbol id

    def state(self) -> int:
        self.edges.append([])
        return len(self.edges) - 1


def _parse(items, nfa: _Nfa, vocabulary_index, pattern: str):
    """Recursive descent: alternation of concatenations of (possibly repeated) atoms.
    Returns (start, end) of the fragment."""
    position = 0

    def fail(message):
        raise ParameterError(f"regular expression {pattern!r}: {message}", name="pattern", value=pattern)

    def alternation():
        nonlocal position
        branches = [concatenation()]
        while position < len(items) and items[position][0] == "|":
            position += 1
            branches.append(concatenation())
        if len(branches) == 1:
            return branches[0]
        s, e = nfa.state(), nfa.state()
        for bs, be in branches:
            nfa.edges[s].append((None, bs))
            nfa.edges[be].append((None, e))
        return s, e

    def concatenation():
        nonlocal position
        s = e = nfa.state()
        while position < len(items) and items[position][0] not in ("|", ")"):
            fs, fe = repeat()
            nfa.edges[e].append((None, fs))
            e = fe
        return s, e

    def repeat():
        nonlocal position
        fs, fe = atom()
        while position < len(items) and items[position][0] in "*+?":
            op = items[position][0]
            position += 1
            s, e = nfa.state(), nfa.state()
            nfa.edges[s].append((None, fs))
            nfa.edges[fe].append((None, e))
            if op in "*?":
                nfa.edges[s].append((None, e))
            if op in "*+":
                nfa.edges[fe].append((None, fs))
            fs, fe = s, e
        return fs, fe

    def atom():
        nonlocal position
        if position >= len(items):
            fail("ends where a word, '.' or '(' was expected")
        kind, value = items[position]
        position += 1
        if kind == "(":
            fragment = alternation()
            if position >= len(items) or items[position][0] != ")":
                fail("unbalanced '('")
            position += 1
            return fragment
        if kind in ("word", "any"):
            s, e = nfa.state(), nfa.state()
            if kind == "any":
                label = "any"
            else:
                if value not in vocabulary_index:
                    fail(f"word {value!r} is not in the vocabulary")
                label = vocabulary_index[value]
            nfa.edges[s].append((label, e))
            return s, e
        fail(f"unexpected {kind!r}")

    fragment = alternation()
    if position != len(items):
        fail(f"unexpected {items[position][0]!r}")
    return fragment


def regex_dfa(pattern: str, vocabulary, *, any_excludes: Sequence[str] = ("<s>", "</s>")) -> DFA:
    """The DFA of a token-level regular expression over ``vocabulary`` (a
    :class:`varorder.lm.Vocabulary` or a list of words): words separated by spaces,
    ``.`` any word (but ``any_excludes``), ``( )``, ``|``, postfix ``* + ?``; a
    backslash makes the next character literal. The whole sentence must match."""
    words = list(getattr(vocabulary, "words", vocabulary))
    index = {w: i for i, w in enumerate(words)}
    V = len(words)
    nfa = _Nfa()
    start, end = _parse(_lex(pattern), nfa, index, pattern)
    named = sorted({label for edges in nfa.edges for label, _ in edges if isinstance(label, int)})
    excluded = sorted(index[w] for w in any_excludes if w in index)
    # symbol classes: each named word, each excluded word, and every other word together
    class_symbols = named + [w for w in excluded if w not in named]
    other = [w for w in range(V) if w not in set(class_symbols)]
    representatives = class_symbols + ([other[0]] if other else [])
    excluded_set = set(excluded)

    def closure(states):
        stack, seen = list(states), set(states)
        while stack:
            s = stack.pop()
            for label, t in nfa.edges[s]:
                if label is None and t not in seen:
                    seen.add(t)
                    stack.append(t)
        return frozenset(seen)

    def step(states, symbol):
        moved = {t for s in states for label, t in nfa.edges[s]
                 if label == symbol or (label == "any" and symbol not in excluded_set)}
        return closure(moved)

    first = closure({start})
    subsets = {first: 0}
    order = [first]
    table = []
    i = 0
    while i < len(order):
        row = []
        for symbol in representatives:
            target = step(order[i], symbol)
            if target not in subsets:
                subsets[target] = len(order)
                order.append(target)
            row.append(subsets[target])
        table.append(row)
        i += 1
    table = np.asarray(table, dtype=np.int32).reshape(len(order), len(representatives))
    delta = np.empty((len(order), V), np.int32)
    for j, symbol in enumerate(class_symbols):
        delta[:, symbol] = table[:, j]
    if other:
        delta[:, other] = table[:, len(class_symbols)][:, None]
    accepting = np.asarray([end in subset for subset in order])
    return DFA(delta, 0, accepting)


def contains_dfa(phrases: Sequence[Sequence[str]], vocabulary, *, ordered: bool = False) -> DFA:
    """Sentences containing every phrase (a list of words each): in the given order
    (non-overlapping occurrences, left to right) or in any order."""
    if not phrases:
        raise ParameterError("give at least one phrase", name="phrases", value=phrases)

    def quoted(phrase):
        return " ".join("".join("\\" + ch if ch in "()|*+?.\\" else ch for ch in word) for word in phrase)

    for phrase in phrases:
        if len(phrase) == 0:
            raise ParameterError("a phrase must hold at least one word", name="phrases", value=phrases)
    if ordered:
        return regex_dfa(".* " + " .* ".join(quoted(p) for p in phrases) + " .*", vocabulary)
    dfa = regex_dfa(f".* {quoted(phrases[0])} .*", vocabulary)
    for phrase in phrases[1:]:
        dfa = intersect(dfa, regex_dfa(f".* {quoted(phrase)} .*", vocabulary))
    return dfa
