"""The compiled sentence encoder behind :meth:`varorder.lm.corpus.Vocabulary.encode_lines`:
UTF-8 text, one sentence per line, to vocabulary ids in one pass over its bytes.

It reads tokens with the word-lookup primitives of :mod:`varorder.lm._words` (short ASCII
words eight bytes at a time and found by their packed bytes, others hashed byte by byte)
and checks, in the same pass, for the text those primitives must not split (characters
Python's ``str.split`` counts as whitespace beyond ASCII's, a lone carriage return; see
:mod:`varorder.lm._words`): only bytes outside the packed tokens can start such a
character, so the separate scan of the whole text is not needed. Scoring strings
(KenLM's ``Model.score``) spends a fifth of its time here.
"""

from __future__ import annotations

import sys

import numba
import numpy as np

import varorder._numba_start  # noqa: F401  (before any kernel's first call: see the module)
from varorder.lm._words import (
    _FNV_OFFSET,
    _FNV_PRIME,
    UNUSUAL_TEXT,
    find_hashed_word,
    find_packed_word,
    is_space,
    packed_token,
    unusual_at,
)


@numba.njit(cache=True)
def encode_sentence_lines(buffer, words8, blob, starts, ends, table, packed_slots, packed_keys, unk_id, out_ids,
                          out_lengths):
    """Encode text, one sentence per line (blank lines are sentences of length 0),
    tokens split on ASCII whitespace; unknown words become ``unk_id``. Returns
    ``(n_tokens, n_sentences)``, or ``(UNUSUAL_TEXT, 0)`` as soon as the text holds a
    character ``str.split`` would treat otherwise (the caller encodes it in Python).
    The outputs are sized by the caller (one id per token, one length per line);
    ``words8`` is the buffer seen as uint64 (:func:`varorder.lm._words.uint64_view`).
    """
    n = buffer.shape[0]
    n_tokens = 0
    n_sentences = 0
    in_line = 0
    i = 0
    while i < n:
        byte = buffer[i]
        if byte == 10:
            out_lengths[n_sentences] = in_line
            n_sentences += 1
            in_line = 0
            i += 1
            continue
        if is_space(byte):
            if byte == 13 and unusual_at(buffer, i):
                return UNUSUAL_TEXT, 0
            i += 1
            continue
        start = i
        end, low, high = packed_token(buffer, words8, start)
        if end >= 0:
            word = find_packed_word(low, high, packed_slots, packed_keys)
            # The packed path ends a token only at a tab, space or line feed; a single
            # space is stepped over here rather than by another turn of the loop.
            i = end + 1 if buffer[end] == 32 else end
        else:
            i = start
            hashed = _FNV_OFFSET
            while i < n and not is_space(buffer[i]):  # hashed while delimited: one pass
                byte = buffer[i]
                if (28 <= byte <= 31 or byte >= 0xC2) and unusual_at(buffer, i):
                    return UNUSUAL_TEXT, 0
                hashed = (hashed ^ np.uint64(byte)) * _FNV_PRIME
                i += 1
            word = find_hashed_word(buffer, start, i, hashed, blob, starts, ends, table)
        out_ids[n_tokens] = word if word >= 0 else unk_id
        n_tokens += 1
        in_line += 1
    if in_line > 0:
        out_lengths[n_sentences] = in_line
        n_sentences += 1
    return n_tokens, n_sentences


# cached kernels load without refreshing Numba's registries (see varorder._numba_start)
varorder._numba_start.load_without_refresh(sys.modules[__name__])
