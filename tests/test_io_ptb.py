"""PTB bracketed trees: reading, writing, errors with file and line; WSJ10 / UD10 preprocessing,
Collins head rules and parsing metrics."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from varorder.eval.parsing import attachment_scores, bracket_scores
from varorder.grammar.treebank import collins_heads, heads_to_spans, prune_tree, tree_spans, wsj_sentences
from varorder.io.ptb import format_tree, parse_trees, read_ptb, read_ptb_archive, write_ptb
from _shared_data import SHARED_DATA

SAMPLE = """( (S (NP-SBJ (DT The) (NN dog) )
    (VP (VBD chased)
      (NP (DT a) (JJ big) (NN cat) ))
    (. .) ))
( (S (NP-SBJ (-NONE- *) ) (VP (VB Go) ) (. !) ))
"""

WSJ = SHARED_DATA / "ptb-wsj-sample" / "wsj_sample.mrg.tar.gz"


def test_read_and_round_trip(tmp_path):
    trees = list(parse_trees(SAMPLE))
    assert len(trees) == 2
    assert trees[0].label == "S"
    assert trees[0].words() == ["The", "dog", "chased", "a", "big", "cat", "."]
    assert trees[0].tags() == ["DT", "NN", "VBD", "DT", "JJ", "NN", "."]
    path = tmp_path / "out.mrg"
    write_ptb(path, trees)
    back = read_ptb(path)
    assert [format_tree(t) for t in back] == [format_tree(t) for t in trees]
    tar_path = tmp_path / "a.tar.gz"
    with tarfile.open(tar_path, "w:gz") as tar:
        data = SAMPLE.encode()
        info = tarfile.TarInfo("combined/x.mrg")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    members = read_ptb_archive(tar_path)
    assert [name for name, _ in members] == ["combined/x.mrg"] * 2


@pytest.mark.parametrize("text, line, message", [
    ("(S (NP (DT a) (NN b))\n", 1, "never closed"),
    ("(S (NP (DT a)))\n)", 2, "unbalanced"),
    ("(S\n (DT a b))", 2, "unexpected atom"),
    ("(S (DT a) ())", 1, "empty node"),
    ("word (S (DT a))", 1, "outside any tree"),
    ("(S\n\n (NP))", 3, "no children"),
    ("(DT a (NN b))", 1, "subtree follows"),
])
def test_malformed_input_names_file_and_line(text, line, message, tmp_path):
    path = tmp_path / "bad.mrg"
    path.write_text(text)
    with pytest.raises(ValueError, match=message) as err:
        read_ptb(path)
    assert f"bad.mrg:{line}:" in str(err.value)


def test_wsj10_preprocessing_and_head_rules():
    trees = list(parse_trees(SAMPLE))
    pruned = prune_tree(trees[0])
    assert pruned.words() == ["The", "dog", "chased", "a", "big", "cat"]
    assert tree_spans(pruned) >= {(0, 2), (2, 6), (3, 6), (0, 6)}
    # S → VP head (chased); NP → last noun; VP → VBD
    assert collins_heads(pruned).tolist() == [1, 2, -1, 5, 5, 2]
    # the second sentence loses its empty subject and its punctuation
    gold = wsj_sentences(trees)
    assert [g.words for g in gold] == [["The", "dog", "chased", "a", "big", "cat"], ["Go"]]
    assert gold[1].heads.tolist() == [-1]
    assert wsj_sentences(trees, max_length=5) == [gold[1]]


def test_collins_np_and_pp_rules():
    (tree,) = parse_trees("(S (NP (NP (NNP John) (POS 's)) (NN dog)) (VP (VBZ sleeps) (PP (IN in) (NP (DT the) (NN yard)))))")
    assert collins_heads(tree).tolist() == [1, 2, 3, -1, 3, 6, 4]  # POS heads its NP; PP → IN


def test_heads_to_spans_and_metrics():
    heads = np.array([1, -1, 3, 1])
    assert heads_to_spans(heads) == {(0, 1), (0, 4), (2, 3), (2, 4)}
    d, u = attachment_scores([np.array([1, -1, 1, 2])], [heads])
    assert d == 0.5 and u == 0.75
    p, r, f = bracket_scores([{(0, 2), (2, 4), (0, 4)}], [{(0, 1), (2, 4), (0, 4)}], [4])
    assert (p, r, f) == (0.5, 1.0, pytest.approx(2 / 3))
    with pytest.raises(ValueError, match="predicted heads"):
        attachment_scores([np.array([1, -1])], [heads])


@pytest.mark.skipif(not WSJ.exists(), reason="WSJ sample not present (../shared/data/ptb-wsj-sample)")
def test_wsj_sample_wsj10():
    gold = wsj_sentences([t for _, t in read_ptb_archive(WSJ)])
    assert len(gold) == 537
    assert all(1 <= len(g.tags) <= 10 and (g.heads == -1).sum() == 1 for g in gold)
    assert not any(t in {",", ".", "-NONE-", "``"} for g in gold for t in g.tags)


def test_function_heads_rehead_ud_function_words_the_ptb_way():
    from varorder.grammar.treebank import function_heads

    # John will go to school : nsubj aux root case obl
    heads = [2, 2, -1, 4, 2]
    rels = ["nsubj", "aux", "root", "case", "obl"]
    # "will" heads the clause and takes the subject; "to" heads "school"
    assert function_heads(heads, rels) == [1, -1, 1, 2, 3]
    # he has been happy : nsubj aux cop root → has → been → happy, subject on "has"
    assert function_heads([3, 3, 3, -1], ["nsubj", "aux", "cop", "root"]) == [1, -1, 1, 2]
    # in the house : the determiner between the function word and the noun stays with the noun
    assert function_heads([2, 2, -1], ["case", "det", "root"]) == [-1, 2, 0]


def _is_tree(heads):
    if sum(h == -1 for h in heads) != 1:
        return False
    for v in range(len(heads)):
        seen, h = set(), v
        while h != -1:
            if h in seen:
                return False
            seen.add(h)
            h = heads[h]
    return True


@given(st.data())
def test_function_heads_keep_a_tree_and_put_the_nearest_function_word_above_its_head(data):
    from varorder.grammar.treebank import FUNCTION_RELATIONS, function_heads

    n = data.draw(st.integers(1, 9))
    order = data.draw(st.permutations(range(n)))
    heads = [-1] * n
    for k in range(1, n):
        heads[order[k]] = order[data.draw(st.integers(0, k - 1))]
    rels = data.draw(st.lists(st.sampled_from(["case", "mark", "aux", "aux:pass", "cop", "nsubj", "obj", "det"]),
                              min_size=n, max_size=n))
    new = function_heads(heads, rels)
    assert _is_tree(new)
    base = [r.split(":")[0] for r in rels]
    for c in range(n):
        funcs = [f for f in range(n) if heads[f] == c and base[f] in FUNCTION_RELATIONS]
        if base[c] in FUNCTION_RELATIONS or not funcs:
            continue
        nearest = min(funcs, key=lambda f: (abs(f - c), f))
        assert new[c] == nearest
    if not any(b in FUNCTION_RELATIONS for b in base):
        assert new == heads
