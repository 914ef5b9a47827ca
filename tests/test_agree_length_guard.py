"""The aligner's length guard: a pair longer than ``max_length`` is cut at proportional
positions into pieces aligned on their own, with a warning (issue #18)."""

from __future__ import annotations

import numpy as np
import pytest

from varorder.agree.aligner import LongPairWarning, WordAligner

PAIRS = [(["the", "house"], ["das", "haus"]), (["the", "book"], ["das", "buch"]),
         (["a", "book"], ["ein", "buch"]), (["a", "small", "house"], ["ein", "kleines", "haus"])]


@pytest.fixture(scope="module")
def aligner():
    return WordAligner(iterations=2, ibm1_iterations=2, max_length=3).fit(PAIRS)


def test_a_long_pair_is_the_block_diagonal_of_its_pieces(aligner):
    first, second = PAIRS[0], PAIRS[3]
    long_pair = (first[0] + second[0], first[1] + second[1])  # 5 words a side: two pieces
    with pytest.warns(LongPairWarning, match="1 sentence pair"):
        merged = aligner.posteriors([long_pair])[0]
    e, f = long_pair
    i_cut, j_cut = round(len(e) / 2), round(len(f) / 2)
    pieces = aligner.posteriors([(e[:i_cut], f[:j_cut]), (e[i_cut:], f[j_cut:])])
    np.testing.assert_allclose(merged[:i_cut, :j_cut], pieces[0])
    np.testing.assert_allclose(merged[i_cut:, j_cut:], pieces[1])
    assert not merged[:i_cut, j_cut:].any() and not merged[i_cut:, :j_cut].any()
    with pytest.warns(LongPairWarning):
        forward, reverse = aligner.directional([long_pair])
    whole = aligner.directional([(e[:i_cut], f[:j_cut]), (e[i_cut:], f[j_cut:])])
    shifted = whole[0][0] | {(i + i_cut, j + j_cut) for i, j in whole[0][1]}
    assert forward[0] == shifted
    with pytest.warns(LongPairWarning):
        scores = aligner.sentence_scores([long_pair, PAIRS[1]])
    piece_scores = aligner.sentence_scores([(e[:i_cut], f[:j_cut]), (e[i_cut:], f[j_cut:]), PAIRS[1]])
    np.testing.assert_allclose(scores[0], [piece_scores[0][:2].sum(), piece_scores[0][2]])


def test_short_pairs_are_untouched_and_the_cap_is_saved(aligner, tmp_path):
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error", LongPairWarning)
        aligner.align(PAIRS)
    aligner.save(tmp_path / "m.npz")
    assert WordAligner.load(tmp_path / "m.npz").max_length == 3
    with pytest.raises(ValueError, match="max_length"):
        WordAligner(max_length=0).fit(PAIRS)


@pytest.mark.parametrize("method", ["posterior", "grow-diag-final-and", "intersection"])
def test_the_streamed_encoding_cuts_like_the_list_path(aligner, method):
    """The CLI encodes streams (encode_bitext with max_length): same pieces, same merged output."""
    from varorder.agree.corpus import encode_bitext

    first, second = PAIRS[0], PAIRS[3]
    pairs = [PAIRS[1], (first[0] + second[0], first[1] + second[1]), PAIRS[2]]
    with pytest.warns(LongPairWarning):
        want = aligner.align(pairs, method=method)
    with pytest.warns(LongPairWarning, match="1 sentence pair"):
        encoded = encode_bitext(iter(pairs), aligner.e_vocab_, aligner.f_vocab_, grow=False,
                                max_length=aligner.max_length)
    assert len(encoded) == 3
    assert aligner.align(encoded, method=method) == want
    with pytest.warns(LongPairWarning):
        want_scores = aligner.sentence_scores(pairs)
    np.testing.assert_allclose(aligner.sentence_scores(encoded), want_scores)
