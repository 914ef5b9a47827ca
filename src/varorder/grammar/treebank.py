"""Evaluation corpora for grammar induction: WSJ10 from PTB trees and UD10 from CoNLL-U.

Conventions (Klein & Manning 2002, 2004): sentences keep at most 10 words after
removing punctuation; the POS tags are the input. For PTB trees punctuation
means the tags ``, . : `` '' -LRB- -RRB-`` and empty elements are ``-NONE-``;
both are deleted with every constituent left empty. Gold brackets are the
spans of the remaining constituents (unlabeled, duplicates from unary chains
merged); gold dependencies come from Collins' (1999) head rules on the pruned
tree (the table of Stanford's ``CollinsHeadFinder``). For UD, punctuation is
UPOS ``PUNCT``; a removed token's dependents are re-attached to its nearest
kept ancestor; gold brackets are the contiguous yields of every word's subtree.
``head_style="function"`` first re-heads UD's function-word relations the PTB way
(:func:`function_heads`), so the UD gold can be compared with head-rule trees.

Each corpus is a list of :class:`GoldSentence`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from varorder.errors import FormatError, ParameterError
from varorder.io.ptb import Tree

__all__ = ["GoldSentence", "PTB_PUNCTUATION", "wsj_sentences", "ud_sentences", "collins_heads",
           "prune_tree", "tree_spans", "heads_to_spans", "function_heads", "FUNCTION_RELATIONS", "HEAD_STYLES"]

PTB_PUNCTUATION = frozenset({",", ".", ":", "``", "''", "-LRB-", "-RRB-"})
# UD relations whose dependent is a function word that Collins' head rules make the head:
# PP → IN, VP → MD / auxiliary verb, SBAR → IN (the complementizer), copular VP → the copula.
FUNCTION_RELATIONS = frozenset({"case", "mark", "aux", "cop"})
HEAD_STYLES = ("content", "function")


@dataclass
class GoldSentence:
    """Tags, gold heads (−1 = root), gold spans (i, j) of every length, and the words."""

    tags: list
    heads: np.ndarray
    spans: set
    words: list


def prune_tree(tree: Tree, drop_tags=PTB_PUNCTUATION | {"-NONE-"}) -> Tree | None:
    """A copy without preterminals whose tag is in ``drop_tags`` and without emptied constituents."""
    if tree.is_preterminal:
        return None if tree.label in drop_tags else Tree(tree.label, word=tree.word)
    kids = [k for k in (prune_tree(c, drop_tags) for c in tree.children) if k is not None]
    return Tree(tree.label, kids) if kids else None


def tree_spans(tree: Tree) -> set:
    """Spans (i, j) of every node (preterminals included) in word positions."""
    spans = set()

    def walk(node, start):
        if node.is_preterminal:
            spans.add((start, start + 1))
            return start + 1
        end = start
        for c in node.children:
            end = walk(c, end)
        spans.add((start, end))
        return end

    walk(tree, 0)
    return spans


# Stanford CollinsHeadFinder's table: (direction, categories); "left" scans children left to right
# for each category in turn, "right" right to left; no match → the first child in that direction.
_HEAD_RULES = {
    "ADJP": ("left", "NNS QP NN $ ADVP JJ VBN VBG ADJP JJR NP JJS DT FW RBR RBS SBAR RB"),
    "ADVP": ("right", "RB RBR RBS FW ADVP TO CD JJR JJ IN NP JJS NN"),
    "CONJP": ("right", "CC RB IN"),
    "FRAG": ("right", ""),
    "INTJ": ("left", ""),
    "LST": ("right", "LS :"),
    "NAC": ("left", "NN NNS NNP NNPS NP NAC EX $ CD QP PRP VBG JJ JJS JJR ADJP FW"),
    "PP": ("right", "IN TO VBG VBN RP FW"),
    "PRN": ("left", ""),
    "PRT": ("right", "RP"),
    "QP": ("left", "$ IN NNS NN JJ RB DT CD NCD QP JJR JJS"),
    "RRC": ("right", "VP NP ADVP ADJP PP"),
    "S": ("left", "TO IN VP S SBAR ADJP UCP NP"),
    "SBAR": ("left", "WHNP WHPP WHADVP WHADJP IN DT S SQ SINV SBAR FRAG"),
    "SBARQ": ("left", "SQ S SINV SBARQ FRAG"),
    "SINV": ("left", "VBZ VBD VBP VB MD VP S SINV ADJP NP"),
    "SQ": ("left", "VBZ VBD VBP VB MD VP SQ"),
    "UCP": ("right", ""),
    "VP": ("left", "TO VBD VBN MD VBZ VB VBG VBP VP ADJP NN NNS NP"),
    "WHADJP": ("left", "CC WRB JJ ADJP"),
    "WHADVP": ("right", "CC WRB"),
    "WHNP": ("left", "WDT WP WP$ WHADJP WHPP WHNP"),
    "WHPP": ("right", "IN TO FW"),
    "NX": ("left", ""),
    "X": ("right", ""),
}


def _category(label: str) -> str:
    """Function tags and indices removed: ``NP-SBJ-1`` → ``NP``, ``-NONE-`` kept."""
    if label.startswith("-"):
        return label
    return label.split("-")[0].split("=")[0] or label


def _head_child(node: Tree) -> int:
    cats = [_category(c.label) for c in node.children]
    n = len(cats)
    label = _category(node.label)
    if label == "NP":
        if cats[-1] == "POS":
            return n - 1
        for group, direction in (({"NN", "NNP", "NNPS", "NNS", "NX", "POS", "JJR"}, "right"), ({"NP"}, "left"),
                                 ({"$", "ADJP", "PRN"}, "right"), ({"CD"}, "right"),
                                 ({"JJ", "JJS", "RB", "QP"}, "right")):
            order = range(n) if direction == "left" else range(n - 1, -1, -1)
            for i in order:
                if cats[i] in group:
                    return i
        return n - 1
    direction, wanted = _HEAD_RULES.get(label, ("left", ""))
    order = list(range(n)) if direction == "left" else list(range(n - 1, -1, -1))
    for cat in wanted.split():
        for i in order:
            if cats[i] == cat:
                return i
    return order[0]


def collins_heads(tree: Tree) -> np.ndarray:
    """Head of every word (−1 = root) by Collins' head rules: a constituent's head word is its
    head child's; every other child's head word depends on it."""
    heads = np.full(len(tree.preterminals()), -2, dtype=np.int64)

    def walk(node, start):
        if node.is_preterminal:
            return start, start + 1
        results = []
        end = start
        for c in node.children:
            h, end = walk(c, end)
            results.append(h)
        head = results[_head_child(node)]
        for h in results:
            if h != head:
                heads[h] = head
        return head, end

    root, _ = walk(tree, 0)
    heads[root] = -1
    return heads


def heads_to_spans(heads) -> set:
    """Contiguous yields of every word's subtree (the brackets a dependency tree implies)."""
    n = len(heads)
    children = [[] for _ in range(n)]
    for a, h in enumerate(heads):
        if h >= 0:
            children[h].append(a)
    spans = set()

    def yield_of(v):
        words = [v]
        for c in children[v]:
            words += yield_of(c)
        return words

    for v in range(n):
        ys = yield_of(v)
        if max(ys) - min(ys) + 1 == len(ys):
            spans.add((min(ys), max(ys) + 1))
    return spans


def function_heads(heads, relations, function_relations=FUNCTION_RELATIONS) -> list:
    """UD content heads → PTB-style function heads (heads: −1 = root; relations: UD DEPREL).

    For a content word c with function-word dependents f₁ … f_k (relation in
    ``function_relations``, subtypes ignored), ordered from the nearest to c outwards:
    f₁ heads c, f_{i+1} heads f_i, and f_k takes c's head. Every other dependent d of c
    that lies on the same side of c as some f_i and beyond it moves to the outermost such
    f_i (the subject of "John will go" to "will", as the S → VP → MD head path does);
    dependents between c and its function words stay with c ("the" in "in the house").
    A function word's own function-word dependents are left alone (that keeps the result a tree).
    """
    n = len(heads)
    base = [r.split(":")[0] for r in relations]
    new = list(heads)
    for c in range(n):
        if base[c] in function_relations:
            continue
        funcs = sorted((f for f in range(n) if heads[f] == c and base[f] in function_relations),
                       key=lambda f: (abs(f - c), f))
        if not funcs:
            continue
        below = c
        for f in funcs:
            new[below] = f
            below = f
        new[funcs[-1]] = heads[c]
        for d in range(n):
            if heads[d] != c or d in funcs:
                continue
            beyond = [f for f in funcs if (f - c) * (d - c) > 0 and abs(d - c) > abs(f - c)]
            if beyond:
                new[d] = beyond[-1]
    return new


def wsj_sentences(trees, max_length: int = 10) -> list[GoldSentence]:
    """WSJ10: pruned trees of 1 … max_length words with gold spans and head-rule dependencies."""
    out = []
    for tree in trees:
        pruned = prune_tree(tree)
        if pruned is None or len(pruned.preterminals()) > max_length:
            continue
        out.append(GoldSentence(pruned.tags(), collins_heads(pruned), tree_spans(pruned), pruned.words()))
    return out


def ud_sentences(sentences, max_length: int = 10, drop_upos=frozenset({"PUNCT"}),
                 head_style: str = "content", tag_column: str = "upos") -> list[GoldSentence]:
    """UD10 from :class:`varorder.io.conllu.ConlluSentence` s: UPOS tags (or ``tag_column="xpos"``),
    heads without punctuation (``head_style="function"``: after :func:`function_heads`); punctuation
    is always chosen by UPOS."""
    if head_style not in HEAD_STYLES:
        raise ParameterError(f"head_style must be one of {HEAD_STYLES}, got {head_style!r}", name='head_style', value=head_style)
    column = {"upos": 3, "xpos": 4}.get(tag_column)
    if column is None:
        raise ParameterError(f"tag_column must be 'upos' or 'xpos', got {tag_column!r}", name='tag_column', value=tag_column)
    out = []
    for s in sentences:
        rows = [s.rows[i] for i in s.word_rows]
        ids = [r[0] for r in rows]
        position = {i: k for k, i in enumerate(ids)}
        try:
            raw_heads = [-1 if r[6] == "0" else position[r[6]] for r in rows]
        except KeyError as err:
            raise FormatError(f"sentence {' '.join(s.comments[:1])}: HEAD {err.args[0]} is not a word ID") from None
        if head_style == "function":
            raw_heads = function_heads(raw_heads, [r[7] for r in rows])
        keep = [r[3] not in drop_upos for r in rows]
        if not any(keep):
            continue
        new_index = np.cumsum(keep) - 1
        heads = []
        for k in range(len(rows)):
            if not keep[k]:
                continue
            h = raw_heads[k]
            steps = 0
            while h >= 0 and not keep[h]:
                h = raw_heads[h]
                steps += 1
                if steps > len(rows):
                    raise FormatError("HEAD column has a cycle")
            heads.append(-1 if h < 0 else int(new_index[h]))
        if len(heads) > max_length:
            continue
        roots = [k for k, h in enumerate(heads) if h == -1]
        if len(roots) != 1:  # a removed root's dependents became roots: attach them to the first
            for k in roots[1:]:
                heads[k] = roots[0]
        tags = [r[column] for r, k in zip(rows, keep) if k]
        words = [r[1] for r, k in zip(rows, keep) if k]
        heads = np.array(heads, dtype=np.int64)
        out.append(GoldSentence(tags, heads, heads_to_spans(heads), words))
    return out
