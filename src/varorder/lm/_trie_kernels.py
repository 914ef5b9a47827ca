"""Numba kernels of the sorted-trie binary format (:mod:`varorder.lm.trie`): bit-packed
columns, child search, ARPA's back-off scoring over the trie and its full check.

Factorization: the back-off recursion of ARPA models (Carter, Dymetman & Bouchard 2012,
eq. 7), over KenLM's ``trie`` layout (Heafield 2011, "KenLM: Faster and Smaller Language
Model Queries", §3.2): the n-grams of each order sorted by (prefix row, last word), so the
extensions of an n-gram are one contiguous range of the next order, found from the
n-gram's row by its pointer column and searched by word.

The tables are flat views of one mapped region (``bits`` as uint64, ``floats`` as float32)
and a ``layout`` (one row per order, the columns named below) saying where each column
starts and how wide it is. A bit-packed column of width w holds entry i in bits ``start +
i * w`` .. ``+ w - 1`` of ``bits`` (little-endian bit order); every packed column ends
with a spare 64-bit word, so a read of its last entry stays inside it. A value column of
width 0 is a plain float32 column starting at ``floats[start]``; of width q > 0 its entries
are q-bit codes into a codebook at ``floats[book]``.

Tables may come from a file that was only checked structurally on open, so every pointer
read from a file is checked (a child range must lie inside the next order) before it
indexes anything: a damaged file gives wrong scores or :data:`CORRUPT_POINTER` (a
ValueError the model re-raises naming the file), never a read outside the region. Word
ids read from a column are only compared, never used as indices; every other index is a
row the kernels produced themselves or a word id checked by the caller.
"""

from __future__ import annotations

import sys

import numba
import numpy as np
from llvmlite import ir
from numba.core import cgutils, types
from numba.extending import intrinsic

import varorder._numba_start  # noqa: F401  (before any kernel's first call: see the module)
from varorder.lm._kernels import _at, _prefetch_row, emit_token, start_lane_sentence

CORRUPT_POINTER = "corrupt n-gram model: a trie pointer names rows outside the next order"

# Columns of a layout row (one row per order, unigrams first).
COUNT, WORD_START, WORD_WIDTH, POINTER_START, POINTER_WIDTH = 0, 1, 2, 3, 4
PROB_START, PROB_WIDTH, PROB_BOOK, BACKOFF_START, BACKOFF_WIDTH, BACKOFF_BOOK = 5, 6, 7, 8, 9, 10
SAMPLE_START = 11
LAYOUT_COLUMNS = 12
NO_COLUMN = -1  # BACKOFF_WIDTH of the highest order (its back-offs are 0), POINTER_WIDTH too
# ``samples[layout[level, SAMPLE_START] + j]`` is the word of row j * SAMPLE_STRIDE of the
# (level + 1)-grams (computed on open, not stored): a long child range is narrowed to one
# stride by a search over these, dense and hot in the cache, before its packed words are read.
SAMPLE_STRIDE = 32
_LONG_RANGE = 2 * SAMPLE_STRIDE


@intrinsic
def _word_at_byte(typingctx, words, byte):
    """The 64 bits starting at byte ``byte`` of the uint64 array ``words`` (an unaligned
    little-endian load; the caller keeps the 8 bytes inside the array)."""
    if not (isinstance(words, types.Array) and words.dtype == types.uint64 and isinstance(byte, types.Integer)):
        return None
    signature = types.uint64(words, byte)

    def codegen(context, builder, sig, args):
        array = context.make_array(sig.args[0])(context, builder, args[0])
        offset = context.cast(builder, args[1], sig.args[1], types.intp)
        address = builder.gep(builder.bitcast(array.data, cgutils.voidptr_t), [offset])
        return builder.load(builder.bitcast(address, ir.IntType(64).as_pointer()), align=1)

    return signature, codegen


# A field is read by one unaligned 64-bit load at its first byte, so it may be at most
# 64 - 7 bits wide (KenLM's ReadInt57); opening refuses counts of 2**40 or more, so no
# file's field is wider than 40 bits (codes at most 24, word ids below the unigram count).
MAX_FIELD_WIDTH = 57


@numba.njit(cache=True, inline="always")
def bits_at(bits, position, mask):
    """The ``mask``-wide field starting at bit ``position`` of ``bits``."""
    # One load, no branch on whether the entry straddles two words; the column's spare
    # last word keeps the 8 bytes read inside it.
    return np.int64((_word_at_byte(bits, position >> 3) >> np.uint64(position & 7)) & mask)


@numba.njit(cache=True, inline="always")
def _mask(width):
    return (np.uint64(1) << np.uint64(width)) - np.uint64(1)


@numba.njit(cache=True, inline="always")
def field(bits, start, width, index):
    """Entry ``index`` of the ``width``-bit column starting at bit ``start`` of ``bits``."""
    return bits_at(bits, start + index * width, _mask(width))


@numba.njit(cache=True)
def unpack(bits, start, width, out):
    for index in range(out.shape[0]):
        out[index] = field(bits, start, width, index)


@numba.njit(cache=True, inline="always")
def log10prob_of(bits, floats, layout, level, row):
    """log10 p of row ``row`` of the (level + 1)-grams."""
    width = layout[level, PROB_WIDTH]
    if width == 0:
        return floats[_at(layout[level, PROB_START] + row)]
    return floats[_at(layout[level, PROB_BOOK] + field(bits, layout[level, PROB_START], width, row))]


@numba.njit(cache=True, inline="always")
def log10backoff_of(bits, floats, layout, level, row):
    """log10 bow of row ``row`` of the (level + 1)-grams (0 for the highest order)."""
    width = layout[level, BACKOFF_WIDTH]
    if width == NO_COLUMN:
        return np.float32(0.0)
    if width == 0:
        return floats[_at(layout[level, BACKOFF_START] + row)]
    return floats[_at(layout[level, BACKOFF_BOOK] + field(bits, layout[level, BACKOFF_START], width, row))]


@numba.njit(cache=True, inline="always")
def children(bits, layout, level, row):
    """``(first, end)``: the rows of the (level + 2)-grams extending row ``row`` of the
    (level + 1)-grams, checked to lie inside that order."""
    start, width = layout[level, POINTER_START], layout[level, POINTER_WIDTH]
    first = field(bits, start, width, row)
    end = field(bits, start, width, row + 1)
    if end > layout[level + 1, COUNT] or first > end:
        raise ValueError(CORRUPT_POINTER)
    return first, end


@numba.njit(cache=True, inline="always")
def narrow(layout, samples, level, first, end, word):
    """``(low, high)`` within the child range ``first .. end - 1`` of the (level + 1)-grams
    such that ``word``, if there, is at ``low .. high - 1`` (at most one stride, for a
    long range with samples; the whole range otherwise)."""
    base = layout[level, SAMPLE_START]
    if end - first <= _LONG_RANGE or base < 0:
        return first, end
    inside = (first + SAMPLE_STRIDE - 1) // SAMPLE_STRIDE  # the first sample inside the range
    # The number of samples inside the range that are <= word, by a branchless search
    # (the comparisons go either way at random: a branch on them mispredicts half the time).
    at, n = inside, (end - 1) // SAMPLE_STRIDE + 1 - inside
    while n > 1:
        half = n >> 1
        at = at + half if samples[_at(base + at + half - 1)] <= word else at
        n -= half
    last = at + (1 if samples[_at(base + at)] <= word else 0)  # one past the last sample <= word
    if last == inside:
        return first, inside * SAMPLE_STRIDE
    return (last - 1) * SAMPLE_STRIDE, min(end, last * SAMPLE_STRIDE)


@numba.njit(cache=True, inline="always")
def search(bits, layout, level, low, high, word):
    """Row of ``word`` among the sorted words ``low .. high - 1`` of the (level + 1)-grams, or -1."""
    if high <= low:
        return -1
    start, width = layout[level, WORD_START], layout[level, WORD_WIDTH]
    mask = _mask(width)
    at, n = low, high - low
    # Branchless, as in narrow: ``at`` ends at the first word >= ``word`` or before it. The
    # probe's bit position is carried along (``position`` is that of ``at``), so the chain
    # of dependent steps holds no multiplication: each probe waits on one load, one
    # comparison and one add.
    position = start + low * width
    while n > 1:
        half = n >> 1
        probe = position + (half - 1) * width
        less = bits_at(bits, probe, mask) < word
        at = at + half if less else at
        position = probe + width if less else position
        n -= half
    found = bits_at(bits, position, mask)
    if found < word:
        at += 1
        if at == high:
            return -1
        found = bits_at(bits, position + width, mask)
    return at if found == word else -1


@numba.njit(cache=True, inline="always")
def find_child(bits, layout, samples, level, row, word):
    """Row of the (level + 2)-gram (row ``row`` of the (level + 1)-grams) + ``word``, or -1."""
    first, end = children(bits, layout, level, row)
    low, high = narrow(layout, samples, level + 1, first, end, word)
    return search(bits, layout, level + 1, low, high, word)


@numba.njit(cache=True)
def fill_samples(bits, layout, samples):
    """``samples`` (see :data:`SAMPLE_STRIDE`) for every order >= 2 whose SAMPLE_START is set."""
    for level in range(1, layout.shape[0]):
        base = layout[level, SAMPLE_START]
        if base < 0:
            continue
        start, width = layout[level, WORD_START], layout[level, WORD_WIDTH]
        for j in range(-(-layout[level, COUNT] // SAMPLE_STRIDE)):
            samples[base + j] = field(bits, start, width, j * SAMPLE_STRIDE)


@numba.njit(cache=True)
def find_ngram(ngram, bits, layout, samples):
    """Row of the n-gram ``ngram`` (word ids, checked by the caller) in its order, or -1."""
    row = np.int64(ngram[0])
    for position in range(1, ngram.shape[0]):
        row = find_child(bits, layout, samples, position - 1, row, ngram[position])
        if row < 0:
            return -1
    return row


@numba.njit(cache=True)
def backoff_log10prob(context, word, bits, floats, layout, samples):
    """Equation 7 of Carter et al. (2012) for one query over the trie: ``(log10 p(word |
    context), length of the n-gram used)``; ``context`` already cut to order - 1 words.

    For each start, longest first, one walk finds the context ``context[start:]`` and then
    the n-gram with ``word`` among its children; on a miss the context's back-off is paid
    (a context not stored has none) and the next shorter start is tried."""
    length = context.shape[0]
    backoff_sum = 0.0
    for start in range(length):
        order = length + 1 - start
        row = np.int64(context[start])
        for position in range(start + 1, length):
            row = find_child(bits, layout, samples, position - start - 1, row, context[position])
            if row < 0:
                break
        if row < 0:
            continue
        found = find_child(bits, layout, samples, order - 2, row, word)
        if found >= 0:
            return log10prob_of(bits, floats, layout, order - 1, found) + backoff_sum, order
        backoff_sum += log10backoff_of(bits, floats, layout, order - 2, row)
    return log10prob_of(bits, floats, layout, 0, word) + backoff_sum, 1


@numba.njit(cache=True)
def batched_lookup(flat, offsets, words, bits, floats, layout, samples, out, lengths):
    for q in range(words.shape[0]):
        log10prob, length = backoff_log10prob(flat[offsets[q]:offsets[q + 1]], words[q], bits, floats, layout, samples)
        out[q] = log10prob
        lengths[q] = length


@numba.njit(cache=True)
def grid_lookup(flat, offsets, words, bits, floats, layout, samples, out, lengths):
    for c in range(offsets.shape[0] - 1):
        context = flat[offsets[c]:offsets[c + 1]]
        for w in range(words.shape[0]):
            log10prob, length = backoff_log10prob(context, words[w], bits, floats, layout, samples)
            out[c, w] = log10prob
            lengths[c, w] = length


@numba.njit(cache=True)
def state_length(ngram, order, bits, floats, layout, samples):
    """Length of the minimal state after ``ngram`` (its longest suffix of at most order - 1
    words that is stored and extends to a longer n-gram or has a back-off other than 1;
    KenLM's right state), 0 for the empty state."""
    n = ngram.shape[0]
    for start in range(max(0, n - (order - 1)), n):
        size = n - start
        row = find_ngram(ngram[start:], bits, layout, samples)
        if row < 0:
            continue
        first, end = children(bits, layout, size - 1, row) if size < order else (0, 0)
        if end > first or log10backoff_of(bits, floats, layout, size - 1, row) != 0.0:
            return size
    return 0


@numba.njit(cache=True)
def base_full_score(context, word, order, bits, floats, layout, samples):
    """``(log10 p(word | context), n-gram length, words of context + word to keep as the
    next state)`` for :mod:`varorder.lm.kenlm`; ``context`` holds at most order - 1 words."""
    log10prob, length = backoff_log10prob(context, word, bits, floats, layout, samples)
    n = context.shape[0] + 1
    extended = np.empty(n, dtype=np.int64)
    extended[:n - 1] = context
    extended[n - 1] = word
    return log10prob, length, state_length(extended, order, bits, floats, layout, samples)


# The two steps of one lane's token in :func:`score_flat`: each ends by prefetching what the
# next one reads, and the lane then waits for the other lanes' steps.
_SEARCH, _FINISH = 1, 2
TRIE_LANES = 16


@numba.njit(cache=True, inline="always")
def _prefetch_entry(bits2d, layout, level, start_column, width_column, index):
    _prefetch_row(bits2d, (layout[level, start_column] + index * layout[level, width_column]) >> 6)


@numba.njit(cache=True, inline="always")
def _prefetch_found(bits2d, floats2d, layout, level, row):
    # A found row's values and (below the highest order) its pointer pair.
    for start_column, width_column in ((PROB_START, PROB_WIDTH), (BACKOFF_START, BACKOFF_WIDTH)):
        width = layout[level, width_column]
        if width == 0:
            _prefetch_row(floats2d, layout[level, start_column] + row)
        elif width > 0:
            _prefetch_row(bits2d, (layout[level, start_column] + row * width) >> 6)
    if layout[level, POINTER_WIDTH] > 0:
        _prefetch_entry(bits2d, layout, level, POINTER_START, POINTER_WIDTH, row)


@numba.njit(cache=True, inline="always")
def _start_sentence(lane, next_sentence, offsets, add_eos, add_bos, order, bos_backoff, bos_first, bos_end,
                    lane_sentence, lane_index, lane_cursor, lane_total, previous_backoff, previous_first,
                    previous_end, n_previous, out_sentence):
    """:func:`~varorder.lm._kernels.start_lane_sentence`, with ``<s>``'s back-off and child
    range as the state."""
    next_sentence, started = start_lane_sentence(lane, next_sentence, offsets, add_eos, add_bos, order, lane_sentence,
                                                 lane_index, lane_cursor, lane_total, n_previous, out_sentence)
    if started and n_previous[lane]:
        previous_backoff[lane, 0] = bos_backoff
        previous_first[lane, 0] = bos_first
        previous_end[lane, 0] = bos_end
    return next_sentence, started


@numba.njit(cache=True, inline="always")
def _narrow_all(lane, word, order, layout, samples, bits2d, floats2d, n_previous, previous_first, previous_end,
                lane_word, lane_limit, lane_row, lane_low, lane_high, lane_step):
    """Begin the lane's token ``word``: narrow the child range of every n-gram of the state
    to the stride that may hold ``word`` and prefetch those strides' words (and the
    unigram's values and pointers)."""
    limit = min(order, n_previous[_at(lane)] + 1)
    lane_limit[_at(lane)] = limit
    lane_word[_at(lane)] = word
    lane_row[_at(lane), 0] = word
    for length in range(2, limit + 1):
        low, high = narrow(layout, samples, length - 1, previous_first[_at(lane), _at(length - 2)],
                           previous_end[_at(lane), _at(length - 2)], word)
        lane_low[_at(lane), _at(length - 1)] = low
        lane_high[_at(lane), _at(length - 1)] = high
        if high > low:
            _prefetch_entry(bits2d, layout, length - 1, WORD_START, WORD_WIDTH, low)
            _prefetch_entry(bits2d, layout, length - 1, WORD_START, WORD_WIDTH, high - 1)
    _prefetch_found(bits2d, floats2d, layout, 0, word)
    lane_step[_at(lane)] = _SEARCH


@numba.njit(cache=True)
def score_flat(ids, offsets, add_bos, add_eos, bos_id, eos_id, order, bits, floats, layout, samples, out_log10prob,
               out_length, out_sentence):
    """Score every token of many sentences with back-off, carrying KenLM-style state: the
    trie counterpart of :func:`varorder.lm._kernels.score_flat`, with the same outputs and
    the same arithmetic (so the same scores from the same values).

    The state after a word is the back-offs and child ranges of the n-grams ending at it,
    of lengths 1 .. k; the next word is searched among the children of each of them.
    Those searches are independent of one another (each range is in the state), so they
    run side by side, not one length after the other: the found lengths are a prefix
    (the tables are closed under suffixes), the longest gives the probability. A token is
    two steps: narrow every range by the hot samples and prefetch the strides' words;
    then search them and prefetch the found rows' values and pointer pairs, which the
    next step reads (with the next token's narrowing). :data:`TRIE_LANES` sentences
    advance in turn, one step each (asynchronous memory access chaining), so one lane's
    prefetched lines arrive while the other lanes take their steps.
    """
    lanes = TRIE_LANES
    previous_backoff = np.empty((lanes, order), dtype=np.float64)
    previous_first = np.empty((lanes, order), dtype=np.int64)
    previous_end = np.empty((lanes, order), dtype=np.int64)
    lane_row = np.empty((lanes, order), dtype=np.int64)
    lane_low = np.zeros((lanes, order), dtype=np.int64)
    lane_high = np.zeros((lanes, order), dtype=np.int64)
    n_previous = np.zeros(lanes, dtype=np.int64)
    lane_sentence = np.full(lanes, -1, dtype=np.int64)
    lane_index = np.zeros(lanes, dtype=np.int64)
    lane_cursor = np.zeros(lanes, dtype=np.int64)
    lane_total = np.zeros(lanes, dtype=np.float64)
    lane_step = np.zeros(lanes, dtype=np.int64)
    lane_word = np.zeros(lanes, dtype=np.int64)
    lane_matched = np.zeros(lanes, dtype=np.int64)
    lane_limit = np.zeros(lanes, dtype=np.int64)
    bits2d = bits.reshape(-1, 1)
    floats2d = floats.reshape(-1, 1)
    bos_backoff = log10backoff_of(bits, floats, layout, 0, bos_id)
    bos_first, bos_end = children(bits, layout, 0, bos_id) if order > 1 else (0, 0)
    eos_extra = 1 if add_eos else 0
    next_sentence = 0
    active = 0
    for lane in range(lanes):
        next_sentence, started = _start_sentence(
            lane, next_sentence, offsets, add_eos, add_bos, order, bos_backoff, bos_first, bos_end, lane_sentence,
            lane_index, lane_cursor, lane_total, previous_backoff, previous_first, previous_end, n_previous,
            out_sentence)
        if started:
            active += 1
            index = lane_index[lane]
            word = np.int64(ids[index]) if index < offsets[lane_sentence[lane] + 1] else np.int64(eos_id)
            _narrow_all(lane, word, order, layout, samples, bits2d, floats2d, n_previous, previous_first,
                        previous_end, lane_word, lane_limit, lane_row, lane_low, lane_high, lane_step)
    while active > 0:
        for lane in range(lanes):
            if lane_sentence[_at(lane)] < 0:
                continue
            if lane_step[_at(lane)] == _SEARCH:
                limit = lane_limit[_at(lane)]
                word = lane_word[_at(lane)]
                for length in range(2, limit + 1):
                    lane_row[_at(lane), _at(length - 1)] = search(
                        bits, layout, length - 1, lane_low[_at(lane), _at(length - 1)],
                        lane_high[_at(lane), _at(length - 1)], word)
                matched = 1
                while matched < limit and lane_row[_at(lane), _at(matched)] >= 0:
                    matched += 1
                lane_matched[_at(lane)] = matched
                for k in range(1, matched):
                    _prefetch_found(bits2d, floats2d, layout, k, lane_row[_at(lane), _at(k)])
                lane_step[_at(lane)] = _FINISH
                continue
            # _FINISH: back off through every longer stored context, keep the found
            # n-grams as the state, and begin the lane's next token.
            n_current = lane_matched[_at(lane)]
            log10prob = np.float64(log10prob_of(bits, floats, layout, n_current - 1,
                                                lane_row[_at(lane), _at(n_current - 1)]))
            total = emit_token(lane, log10prob, n_current, n_previous[_at(lane)], previous_backoff, lane_total,
                               lane_cursor, out_log10prob, out_length)
            sentence = lane_sentence[_at(lane)]
            index = lane_index[_at(lane)] + 1
            if index < offsets[_at(sentence + 1)] + eos_extra:
                lane_total[_at(lane)] = total
                kept = min(n_current, order - 1)
                n_previous[_at(lane)] = kept
                for k in range(kept):
                    row = lane_row[_at(lane), _at(k)]
                    previous_backoff[_at(lane), _at(k)] = log10backoff_of(bits, floats, layout, k, row)
                    first, end = children(bits, layout, k, row)
                    previous_first[_at(lane), _at(k)] = first
                    previous_end[_at(lane), _at(k)] = end
                lane_index[_at(lane)] = index
            else:
                out_sentence[sentence] = total
                next_sentence, started = _start_sentence(
                    lane, next_sentence, offsets, add_eos, add_bos, order, bos_backoff, bos_first, bos_end,
                    lane_sentence, lane_index, lane_cursor, lane_total, previous_backoff, previous_first,
                    previous_end, n_previous, out_sentence)
                if not started:
                    active -= 1
                    continue
                sentence = lane_sentence[_at(lane)]
                index = lane_index[_at(lane)]
            word = np.int64(ids[_at(index)]) if index < offsets[_at(sentence + 1)] else np.int64(eos_id)
            _narrow_all(lane, word, order, layout, samples, bits2d, floats2d, n_previous, previous_first,
                        previous_end, lane_word, lane_limit, lane_row, lane_low, lane_high, lane_step)


@numba.njit(cache=True)
def check_trie(bits, layout, vocab_size):
    """The invariants the lookups rely on, over the whole trie: each pointer column starts
    at 0, never decreases and ends at the next order's count; each order's words are
    below ``vocab_size`` and strictly increasing among the children of one row. Returns
    0, or the order (>= 1) of the first column that breaks them."""
    n_orders = layout.shape[0]
    for level in range(n_orders - 1):
        start, width = layout[level, POINTER_START], layout[level, POINTER_WIDTH]
        count = layout[level, COUNT]
        previous = field(bits, start, width, 0)
        if previous != 0:
            return level + 1
        for row in range(1, count + 1):
            pointer = field(bits, start, width, row)
            if pointer < previous:
                return level + 1
            previous = pointer
        if previous != layout[level + 1, COUNT]:
            return level + 1
        word_start, word_width = layout[level + 1, WORD_START], layout[level + 1, WORD_WIDTH]
        first = 0
        for row in range(count):
            end = field(bits, start, width, row + 1)
            last = -1
            for child in range(first, end):
                word = field(bits, word_start, word_width, child)
                if word <= last or word >= vocab_size:
                    return level + 2
                last = word
            first = end
    return 0


# cached kernels load without refreshing Numba's registries (see varorder._numba_start)
varorder._numba_start.load_without_refresh(sys.modules[__name__])
