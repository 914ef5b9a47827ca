"""Penn Treebank bracketed trees (``.mrg``): reader and writer.

Format: a tree is ``(LABEL child …)``; a preterminal is ``(TAG word)``; files wrap
each sentence in an outer pair of parentheses with an empty label, ``( (S …) )``,
and trees may span many lines. The reader is a strict tokenizer over ``(``, ``)``
and whitespace-free atoms: an unbalanced parenthesis, a node without a label or a
stray atom is a FormatError naming the file and line. ``.gz`` files are read
transparently; :func:`read_ptb_archive` reads every ``.mrg`` member of a tar archive
(e.g. the NLTK WSJ sample ``wsj_sample.mrg.tar.gz``) in name order.
"""

from __future__ import annotations

import os
import re
import tarfile
from dataclasses import dataclass, field

from varorder.errors import FormatError
from varorder.io._text import atomic_write_text, open_text

__all__ = ["Tree", "parse_trees", "read_ptb", "read_ptb_archive", "format_tree", "write_ptb"]

_TOKEN = re.compile(r"\(|\)|[^\s()]+")


@dataclass
class Tree:
    """A node: ``label`` and ``children``; a preterminal has ``word`` set and no children."""

    label: str
    children: list["Tree"] = field(default_factory=list)
    word: str | None = None

    @property
    def is_preterminal(self) -> bool:
        return self.word is not None

    def preterminals(self) -> list["Tree"]:
        if self.is_preterminal:
            return [self]
        return [p for c in self.children for p in c.preterminals()]

    def words(self) -> list[str]:
        return [p.word for p in self.preterminals()]

    def tags(self) -> list[str]:
        return [p.label for p in self.preterminals()]


def parse_trees(text: str, source: str = "<string>"):
    """Yield every top-level tree of ``text`` (the empty-label wrapper removed when it has one child)."""
    stack: list[tuple[Tree | None, int]] = []  # (node, line it opened on)
    pending_open = False
    line = 1
    pos = 0
    for match in _TOKEN.finditer(text):
        line += text.count("\n", pos, match.start())
        pos = match.start()
        tok = match.group()
        if tok == "(":
            if pending_open:  # "((": the previous node has no label (the file wrapper)
                stack[-1] = (Tree(""), stack[-1][1])
            stack.append((None, line))
            pending_open = True
        elif tok == ")":
            if not stack:
                raise FormatError(f"{source}:{line}: unbalanced ')'", path=source, line=line)
            node, opened = stack.pop()
            if node is None:
                if pending_open:
                    raise FormatError(f"{source}:{line}: empty node '()'", path=source, line=line)
                raise FormatError(f"{source}:{opened}: node without a label", path=source, line=opened)
            pending_open = False
            if not node.is_preterminal and not node.children:
                raise FormatError(f"{source}:{opened}: node {node.label!r} has no children and no word", path=source, line=opened)
            if stack:
                parent = stack[-1][0]
                if parent is None or parent.is_preterminal:
                    raise FormatError(f"{source}:{line}: a subtree follows the word of a preterminal", path=source, line=line)
                parent.children.append(node)
            else:
                if node.label == "" and len(node.children) == 1:
                    node = node.children[0]
                yield node
        else:
            if not stack:
                raise FormatError(f"{source}:{line}: text {tok!r} outside any tree", path=source, line=line)
            node, opened = stack[-1]
            if pending_open:
                stack[-1] = (Tree(tok), opened)
                pending_open = False
            elif node is not None and not node.children and node.word is None:
                node.word = tok
            else:
                raise FormatError(f"{source}:{line}: unexpected atom {tok!r} (a node holds one word or subtrees)", path=source, line=line)
    line += text.count("\n", pos)
    if stack:
        raise FormatError(f"{source}:{stack[-1][1]}: tree opened here is never closed (end of input at line {line})", path=source, line=stack[-1][1])


def read_ptb(path) -> list[Tree]:
    """Every tree of a bracketed file (.gz transparent)."""
    path = os.fspath(path)
    with open_text(path) as f:
        return list(parse_trees(f.read(), source=path))


def read_ptb_archive(path, suffix: str = ".mrg") -> list[tuple[str, Tree]]:
    """(member name, tree) for every tree of every ``suffix`` member of a tar archive, members in name order."""
    path = os.fspath(path)
    try:
        archive = tarfile.open(path)
    except tarfile.TarError as err:
        raise FormatError(f"{path}: not a readable tar archive ({err})", path=path) from None
    out = []
    with archive:
        members = sorted((m for m in archive.getmembers() if m.isfile() and m.name.endswith(suffix)),
                         key=lambda m: m.name)
        for m in members:
            data = archive.extractfile(m).read()
            try:
                text = data.decode("utf-8")
            except UnicodeDecodeError:
                text = data.decode("latin-1")
            out += [(m.name, t) for t in parse_trees(text, source=f"{path}:{m.name}")]
    return out


def format_tree(tree: Tree) -> str:
    """One-line bracketed form, ``(S (NP (DT the) (NN dog)) (VP (VBZ barks)))``."""
    if tree.is_preterminal:
        return f"({tree.label} {tree.word})"
    return "(" + tree.label + " " + " ".join(format_tree(c) for c in tree.children) + ")"


def write_ptb(path, trees) -> None:
    """One tree per line, atomically."""
    with atomic_write_text(path) as f:
        for t in trees:
            f.write(format_tree(t) + "\n")
