"""The compiled sentence encoder of ``Vocabulary.encode_lines`` (varorder.lm._encode)
against Python's ``str.split`` encoding: packed and byte-wise tokens, every ASCII blank,
single and repeated separators, at every alignment of the text; text holding a character
``str.split`` treats as whitespace beyond ASCII's (or a lone carriage return) must be
reported, not split."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from varorder.lm import _encode, _words
from varorder.lm.corpus import Vocabulary

# Words the packed path reads (1-15 ASCII bytes), and ones it leaves to the byte-wise
# path: 16+ bytes, UTF-8, control and DEL bytes.
_WORDS = ["a", "ab", "abcdefg", "abcdefgh", "abcdefgh1", "abcdefgh2", "x" * 15, "y" * 16, "z" * 17, "del\x7f", "ctl\x01x", "é",
          "naïve", "a" * 40, "ab" * 4 + "é"]
_TOKENS = _WORDS + ["oov", "abcdefg1", "abcdefgh12", "y" * 15, "ctl", "ünknown", "q" * 30]
_BLANKS = [" ", "\t", "  ", "\x0b", "\x0c", " \t", " \t  \x0b"]
# What str.split splits on besides ASCII blanks, and a carriage return not before a line feed.
_UNUSUAL = ["\x1c", "\x1f", "\x85", "\xa0", "\u1680", "\u2003", "\u2028", "\u202f", "\u3000", "\r"]


def _encode_at(vocabulary, text: str, shift: int):
    data = np.frombuffer(b"\n" * shift + text.encode("utf-8", errors="surrogateescape"), dtype=np.uint8)[shift:]
    ids = np.full(len(data) + 1, -7, dtype=np.int32)
    lengths = np.full(len(data) + 1, -7, dtype=np.int64)
    n_tokens, n_lines = _encode.encode_sentence_lines(data, _words.uint64_view(data), *vocabulary.byte_table(),
                                                      vocabulary.unk_id, ids, lengths)
    return n_tokens, ids[:max(n_tokens, 0)], lengths[:n_lines]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(st.sampled_from(_TOKENS), max_size=8), max_size=12),
       st.lists(st.sampled_from(_BLANKS), min_size=1, max_size=4), st.integers(0, 7))
def test_encoder_equals_python_split(sentences, blanks, shift):
    vocabulary = Vocabulary(_WORDS)
    lines = [blanks[i % len(blanks)].join(tokens) + blanks[-1] * (i % 2) for i, tokens in enumerate(sentences)]
    expected_ids, expected_lengths = vocabulary.encode_sentences(line.split() for line in lines)
    n_tokens, ids, lengths = _encode_at(vocabulary, "".join(line + "\n" for line in lines), shift)
    assert n_tokens == len(expected_ids)
    np.testing.assert_array_equal(ids, expected_ids)
    np.testing.assert_array_equal(lengths, expected_lengths)
    np.testing.assert_array_equal(vocabulary.encode_lines(lines)[0], expected_ids)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.sampled_from(_TOKENS), min_size=1, max_size=6), st.sampled_from(_UNUSUAL),
       st.integers(0, 6), st.booleans(), st.integers(0, 7))
def test_unusual_whitespace_is_reported_and_encode_lines_still_splits_like_python(tokens, unusual, at, glued, shift):
    vocabulary = Vocabulary(_WORDS)
    at = min(at, len(tokens))
    # The character alone between tokens, or glued to a token's end.
    middle = unusual if glued else " " + unusual + " "
    line = " ".join(tokens[:at]) + middle + " ".join(tokens[at:]) + " ab"  # "\r" before "\n" is a line break
    n_tokens, _, _ = _encode_at(vocabulary, line + "\n", shift)
    assert n_tokens == _words.UNUSUAL_TEXT
    lines = ["a ab", line, "abcdefgh"]
    ids, lengths = vocabulary.encode_lines(lines)
    expected_ids, expected_lengths = vocabulary.encode_sentences(s.split() for s in lines)
    np.testing.assert_array_equal(ids, expected_ids)
    np.testing.assert_array_equal(lengths, expected_lengths)


@pytest.mark.parametrize("lines", [[], [""], ["", ""], ["a\nab"], ["a", "\n"], ["a\r\nab"]])
def test_edge_inputs_equal_python(lines):
    vocabulary = Vocabulary(_WORDS)
    ids, lengths = vocabulary.encode_lines(lines)
    expected_ids, expected_lengths = vocabulary.encode_sentences(s.split() for s in lines)
    np.testing.assert_array_equal(ids, expected_ids)
    np.testing.assert_array_equal(lengths, expected_lengths)
