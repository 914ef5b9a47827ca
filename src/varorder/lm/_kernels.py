"""Numba kernels for n-gram tables: hashing, back-off scoring and the MAX-ARPA walk.

An n-gram of order m >= 2 is identified by the packed key ``prefix_index * V + word``:
``prefix_index`` is the row of its first m-1 words in the order m-1 table, ``V`` the
vocabulary size. A unigram's row is its word id. Keys are exact (no collisions), and an
open-addressing table per order maps a key to its row in one or two memory accesses.

All orders live in flat arrays addressed through per-order bases, so one compiled
function serves every order without typed lists:

* ``hash_rows[hash_base[m] : hash_base[m] + hash_cap[m]]`` holds the slots for order
  m + 2 (entry 0 of ``hash_base`` belongs to bigrams; unigrams need no table): each slot
  is three int64 words ``(key, row, log10 p and log10 bow as two float32)``; empty slots
  have key -1. ``hash_values`` is the float32 view of the same memory, so the scorer reads
  a slot's probability and back-off from the cache line the probe already brought in.
* ``values[value_base[m] + row]`` holds ``(log10 p, log10 backoff)`` of row ``row`` of
  order m + 1, as float32 like ARPA's seven significant digits.

Tables may come from a file that was only checked structurally on open
(:mod:`varorder.lm.binary`), so the lookups never trust what they read from a slot: a
probe visits at most the table's capacity (a table with no empty slot cannot loop), and
a row read from a slot is checked against its order's size before it indexes anything
(:data:`CORRUPT_ROW`, a ValueError the model re-raises naming the
file). A slot's row only ever serves as the next lookup's key in :func:`score_flat`,
where no check is needed.
"""

from __future__ import annotations

import sys

import numba
import numpy as np
from llvmlite import ir
from numba.core import cgutils, types
from numba.extending import intrinsic

import varorder._numba_start  # noqa: F401  (before any kernel's first call: see the module)

# What a lookup kernel raises when a hash slot names a row outside its order (a damaged
# binary file); the model adds the file's name (``NgramLM._corrupt``).
CORRUPT_ROW = "corrupt n-gram model: a hash slot names a row outside its order"

_EMPTY = -1
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


@numba.njit(cache=True, inline="always")
def _slot(key, capacity):
    # Fibonacci hashing, then Lemire's multiply-shift reduction to [0, capacity): the
    # capacity need not be a power of two, so tables stay close to their load factor.
    mixed = np.uint64(key) * _GOLDEN
    return np.int64(((mixed >> np.uint64(32)) * np.uint64(capacity)) >> np.uint64(32))


@numba.njit(cache=True)
def build_hash(keys, capacity):
    """Open-addressing (linear probing) table of ``keys`` -> row index; the third word of
    each slot is left for the caller to fill with the row's values."""
    table = np.empty((capacity, 3), dtype=np.int64)
    build_hash_into(keys, table)
    return table


@numba.njit(cache=True)
def build_hash_into(keys, table):
    """:func:`build_hash` into a preallocated ``(capacity, 3)`` table (overwritten)."""
    capacity = table.shape[0]
    table[:, :] = _EMPTY
    for row in range(keys.shape[0]):
        key = keys[row]
        slot = _slot(key, capacity)
        while table[slot, 0] != _EMPTY:
            slot += 1
            if slot == capacity:
                slot = 0
        table[slot, 0] = key
        table[slot, 1] = row


@numba.njit(cache=True, inline="always")
def find_slot(hash_rows, base, capacity, key):
    """Absolute slot of ``key`` in the table at ``hash_rows[base : base + capacity]``, or -1."""
    slot = _slot(key, capacity)
    for _ in range(capacity):  # a damaged table may have no empty slot left
        stored = hash_rows[base + slot, 0]
        if stored == key:
            return base + slot
        if stored == _EMPTY:
            return -1
        slot += 1
        if slot == capacity:
            slot = 0
    return -1


@numba.njit(cache=True, inline="always")
def find(hash_rows, base, capacity, key):
    """Row of ``key`` in the table at ``hash_rows[base : base + capacity]``, or -1."""
    slot = find_slot(hash_rows, base, capacity, key)
    if slot < 0:
        return -1
    return hash_rows[slot, 1]


@numba.njit(cache=True)
def fill_slot_values(table, table_float32, values):
    """Write each occupied slot's ``(log10 p, log10 bow)`` (row ``table[slot, 1]`` of
    ``values``) into its third word, seen as two float32; empty slots get 0 there."""
    for slot in range(table.shape[0]):
        if table[slot, 0] == _EMPTY:
            table[slot, 2] = 0
        else:
            row = table[slot, 1]
            table_float32[slot, 4] = values[row, 0]
            table_float32[slot, 5] = values[row, 1]


@numba.njit(cache=True)
def find_many(table, capacity, keys, out):
    """``out[i]`` = row of ``keys[i]`` in one order's table, -1 if absent (or negative)."""
    for i in range(keys.shape[0]):
        out[i] = find(table, 0, capacity, keys[i]) if keys[i] >= 0 else -1


@numba.njit(cache=True, inline="always")
def checked_row(row, value_base, order):
    """``row``, a row of the ``order``-gram table read from a hash slot, once it is known
    to lie inside that table (negative: absent); a ValueError otherwise."""
    if row >= value_base[order] - value_base[order - 1]:
        raise ValueError(CORRUPT_ROW)
    return row


@numba.njit(cache=True)
def find_ngram(ngram, vocab_size, hash_rows, hash_base, hash_cap):
    """Row of the n-gram ``ngram`` (word ids) in its order's table, or -1 if absent."""
    row = np.int64(ngram[0])
    for position in range(1, ngram.shape[0]):
        order_slot = position - 1
        row = find(hash_rows, hash_base[order_slot], hash_cap[order_slot], row * vocab_size + ngram[position])
        if row < 0:
            return -1
    return row


@numba.njit(cache=True)
def backoff_log10prob(context, word, vocab_size, hash_rows, hash_base, hash_cap, values, value_base):
    """Equation 7 of Carter et al. (2012) for one query, written independently of the
    batched scorer: returns ``(log10 p(word | context), length of the n-gram used)``.

    ``context`` must already be cut to at most order - 1 words.
    """
    length = context.shape[0]
    ngram = np.empty(length + 1, dtype=np.int64)
    ngram[:length] = context
    ngram[length] = word
    backoff_sum = 0.0
    for start in range(length + 1):
        # Try the n-gram context[start:] + word; on a miss, pay the back-off of context[start:].
        order = length + 1 - start
        row = checked_row(find_ngram(ngram[start:], vocab_size, hash_rows, hash_base, hash_cap), value_base, order)
        if row >= 0:
            return values[value_base[order - 1] + row, 0] + backoff_sum, order
        context_row = checked_row(find_ngram(ngram[start:length], vocab_size, hash_rows, hash_base, hash_cap),
                                  value_base, order - 1)
        if context_row >= 0:
            backoff_sum += values[value_base[order - 2] + context_row, 1]
    return -np.inf, 0  # unreachable: every word has a unigram


@numba.njit(cache=True)
def max_backoff_log10prob(context, word, vocab_size, hash_rows, hash_base, hash_cap, values, value_base,
                          max_prob, max_backoff):
    """The max-backoff bound max_e log10 p(word | e context) of Carter et al. (2012), eq. 8,
    for one query: the stored n-gram's MAX-ARPA probability; else the back-off
    probability, raised by the context's MAX-ARPA back-off when the context is stored
    (some left extension of it may be stored and back off less); an absent context has no
    stored extension, and every extension backs off to it.

    ``context`` must already be cut to at most order - 1 words.
    """
    length = context.shape[0]
    ngram = np.empty(length + 1, np.int64)
    ngram[:length] = context
    ngram[length] = word
    row = checked_row(find_ngram(ngram, vocab_size, hash_rows, hash_base, hash_cap), value_base, length + 1)
    if row >= 0:
        return max_prob[value_base[length] + row]
    log10prob, _ = backoff_log10prob(context, word, vocab_size, hash_rows, hash_base, hash_cap, values, value_base)
    context_row = checked_row(find_ngram(context, vocab_size, hash_rows, hash_base, hash_cap), value_base,
                              length) if length else -1
    if context_row < 0:
        return log10prob
    return max_backoff[value_base[length - 1] + context_row] + log10prob


# Sentences scored at once by the scorer: their lookups are independent, so the
# processor overlaps one sentence's cache misses with another's work.
SCORE_LANES = 8


def _prefetch_intrinsic(write: int):
    """An intrinsic ``prefetch(table, row)`` asking for the cache line holding
    ``table[row, 0]`` (a 2-D array) to be brought into the cache, for reading or (``write``)
    for writing. A hint: it neither waits for the line nor faults, so it lets the processor
    go on to other work while the line arrives (a plain load of it would have to retire
    before anything after it could, stalling the core once its window fills); no effect on
    any result."""

    def prefetch(typingctx, table, row):
        if not (isinstance(table, types.Array) and table.ndim == 2 and isinstance(row, types.Integer)):
            return None
        signature = types.void(table, row)

        def codegen(context, builder, sig, args):
            array_type, row_type = sig.args
            array = context.make_array(array_type)(context, builder, args[0])
            index = [context.cast(builder, args[1], row_type, types.intp), context.get_constant(types.intp, 0)]
            pointer = cgutils.get_item_pointer(context, builder, array_type, array, index, wraparound=False)
            i32 = ir.IntType(32)
            # Declared the way Numba declares llvm.memcpy (an i8* argument, the name mangled by
            # llvmlite), which LLVM versions with typed and with opaque pointers both accept.
            function = builder.module.declare_intrinsic(
                "llvm.prefetch", [cgutils.voidptr_t],
                ir.FunctionType(ir.VoidType(), [cgutils.voidptr_t, i32, i32, i32]))
            # Arguments: the address; read or write; keep it in every cache level; data, not code.
            builder.call(function, [builder.bitcast(pointer, cgutils.voidptr_t), i32(write), i32(3), i32(1)])
            return context.get_dummy_value()

        return signature, codegen

    prefetch.__name__ = prefetch.__qualname__ = "_prefetch_row_for_write" if write else "_prefetch_row"
    return intrinsic(prefetch)


_prefetch_row = _prefetch_intrinsic(0)
_prefetch_row_for_write = _prefetch_intrinsic(1)


@numba.njit(cache=True, inline="always")
def _at(index):
    """A non-negative index as unsigned: Numba skips the negative-index wraparound."""
    return np.uint64(index)


@numba.njit(cache=True, inline="always")
def _prefetch_probes(lane, word, previous_row, n_previous, order, vocab_size, hash_rows, hash_base, hash_cap):
    # The slots every lookup of ``word`` after lane's state will start at: the lines
    # holding the slot, the next slot (which also covers a 24-byte slot straddling two
    # lines) and the slot three on, for the probes that go on (on the PTB valid set a hit
    # reads 1.4 slots on average, a miss 4.8).
    last_row = hash_rows.shape[0] - 1
    for length in range(2, min(order, n_previous[lane] + 1) + 1):
        slot = hash_base[length - 2] + _slot(previous_row[lane, length - 2] * vocab_size + word, hash_cap[length - 2])
        _prefetch_row(hash_rows, slot)
        _prefetch_row(hash_rows, min(slot + 1, last_row))
        _prefetch_row(hash_rows, min(slot + 3, last_row))


@numba.njit(cache=True, inline="always")
def start_lane_sentence(lane, next_sentence, offsets, add_eos, add_bos, order, lane_sentence, lane_index, lane_cursor,
                        lane_total, n_previous, out_sentence):
    """Give ``lane`` the first sentence from ``next_sentence`` on that predicts a token
    (scoring the others, empty without ``</s>``, as 0); returns the next sentence still
    unassigned and whether the lane got one. The lane's state is left empty, or holding
    one n-gram (``n_previous`` 1) that the caller fills with ``<s>``. Shared by the
    scorers of both binary formats."""
    n_sentences = offsets.shape[0] - 1
    eos_extra = 1 if add_eos else 0
    while next_sentence < n_sentences:
        sentence = next_sentence
        next_sentence += 1
        if offsets[sentence + 1] + eos_extra == offsets[sentence]:
            out_sentence[sentence] = 0.0
            continue
        lane_sentence[lane] = sentence
        lane_index[lane] = offsets[sentence]
        lane_cursor[lane] = offsets[sentence] + sentence * eos_extra
        lane_total[lane] = 0.0
        n_previous[lane] = 1 if add_bos and order > 1 else 0
        return next_sentence, True
    lane_sentence[lane] = -1
    return next_sentence, False


@numba.njit(cache=True, inline="always")
def _start_sentence(lane, next_sentence, offsets, add_eos, add_bos, bos_id, order, values, lane_sentence, lane_index,
                    lane_cursor, lane_total, previous_row, previous_backoff, n_previous, out_sentence):
    """:func:`start_lane_sentence`, with ``<s>``'s row and back-off as the state."""
    next_sentence, started = start_lane_sentence(lane, next_sentence, offsets, add_eos, add_bos, order, lane_sentence,
                                                 lane_index, lane_cursor, lane_total, n_previous, out_sentence)
    if started and n_previous[lane]:
        previous_row[lane, 0] = bos_id
        previous_backoff[lane, 0] = values[bos_id, 1]
    return next_sentence, started


@numba.njit(cache=True, inline="always")
def emit_token(lane, log10prob, n_current, n_previous, previous_backoff, lane_total, lane_cursor, out_log10prob,
               out_length):
    """Finish a lane's token whose longest stored n-gram (``n_current`` words) gave
    ``log10prob``: back off through every stored context longer than it (up to the
    state's ``n_previous`` words), write the token's outputs; returns the sentence's
    running total. Shared by the scorers of both binary formats, so that their
    arithmetic is the same."""
    for context_length in range(n_current, n_previous + 1):
        log10prob += previous_backoff[_at(lane), _at(context_length - 1)]
    total = lane_total[_at(lane)] + log10prob
    cursor = lane_cursor[_at(lane)]
    out_log10prob[_at(cursor)] = log10prob
    out_length[_at(cursor)] = n_current
    lane_cursor[_at(lane)] = cursor + 1
    return total


@numba.njit(cache=True)
def score_flat(
    ids, offsets, add_bos, add_eos, bos_id, eos_id, order, vocab_size,
    hash_rows, hash_values, hash_base, hash_cap, values, out_log10prob, out_length, out_sentence,
):
    """Score every token of many sentences with back-off, carrying KenLM-style state.

    ``ids[offsets[s] : offsets[s + 1]]`` is sentence s (no markers). Writes one log10
    probability and matched n-gram length per predicted token (``</s>`` included when
    ``add_eos``) into the outputs, sentence after sentence, and each sentence's log10
    probability, summed in token order, to ``out_sentence``. ``values`` is the unigram
    ``(log10 p, log10 bow)`` table.

    The state after a word is the rows (and back-offs) of the n-grams ending at it, of
    lengths 1 .. k (k <= order - 1); the next word extends those rows one lookup each and
    stops at the first miss, since a table closed under suffixes cannot hold a longer
    match. Each lookup touches one slot: key, row and values share it. The probes of
    one token wait on the token before, so :data:`SCORE_LANES` sentences advance in
    turn, a token each, software-pipelined: as soon as a lane has scored its word, the
    slots its next word's lookups start at are known and prefetched, and the lane uses
    them only after every other lane has scored a word, so the cache misses of all
    lanes are in flight together and hidden behind the other lanes' work. Each token's
    arithmetic is the same as one sentence at a time, so the scores are too.
    """
    lanes = SCORE_LANES
    previous_row = np.empty((lanes, order), dtype=np.int64)
    previous_backoff = np.empty((lanes, order), dtype=np.float64)
    current_row = np.empty(order, dtype=np.int64)
    current_backoff = np.empty(order, dtype=np.float64)
    n_previous = np.zeros(lanes, dtype=np.int64)
    lane_sentence = np.full(lanes, -1, dtype=np.int64)
    lane_index = np.zeros(lanes, dtype=np.int64)  # position in ids of the next word
    lane_cursor = np.zeros(lanes, dtype=np.int64)
    lane_total = np.zeros(lanes, dtype=np.float64)
    eos_extra = 1 if add_eos else 0
    next_sentence = 0
    active = 0
    for lane in range(lanes):
        next_sentence, started = _start_sentence(
            lane, next_sentence, offsets, add_eos, add_bos, bos_id, order, values, lane_sentence, lane_index,
            lane_cursor, lane_total, previous_row, previous_backoff, n_previous, out_sentence)
        if started:
            active += 1
            index = lane_index[lane]
            word = ids[index] if index < offsets[lane_sentence[lane] + 1] else eos_id
            _prefetch_probes(lane, word, previous_row, n_previous, order, vocab_size, hash_rows, hash_base, hash_cap)
    # The hot loop reads the tables through flat views and indexes with unsigned integers
    # (:func:`_at`): every index here is non-negative by construction, and Numba then
    # emits neither a stride multiplication nor the negative-index wraparound per access.
    slots = hash_rows.reshape(-1)
    slot_values = hash_values.reshape(-1)
    unigram_values = values.reshape(-1)
    while active > 0:
        for lane in range(lanes):
            sentence = lane_sentence[_at(lane)]
            if sentence < 0:
                continue
            index = lane_index[_at(lane)]
            words_end = offsets[_at(sentence + 1)]
            word = np.int64(ids[_at(index)]) if index < words_end else np.int64(eos_id)
            current_row[0] = word
            current_backoff[0] = unigram_values[_at(2 * word + 1)]
            log10prob = np.float64(unigram_values[_at(2 * word)])
            n_current = 1
            lane_previous = n_previous[_at(lane)]
            for length in range(2, min(order, lane_previous + 1) + 1):
                # find_slot on the flat view: slot s holds key, row, (log10 p, log10 bow)
                # at words 3s, 3s + 1 and float32 6s + 4, 6s + 5.
                base = hash_base[_at(length - 2)]
                capacity = hash_cap[_at(length - 2)]
                key = previous_row[_at(lane), _at(length - 2)] * vocab_size + word
                slot = _slot(key, capacity)
                found = -1
                for _ in range(capacity):  # a damaged table may have no empty slot left
                    stored = slots[_at(3 * (base + slot))]
                    if stored == key:
                        found = base + slot
                        break
                    if stored == _EMPTY:
                        break
                    slot += 1
                    if slot == capacity:
                        slot = 0
                if found < 0:
                    break
                current_row[_at(length - 1)] = slots[_at(3 * found + 1)]
                current_backoff[_at(length - 1)] = slot_values[_at(6 * found + 5)]
                log10prob = slot_values[_at(6 * found + 4)]
                n_current = length
            total = emit_token(lane, log10prob, n_current, lane_previous, previous_backoff, lane_total, lane_cursor,
                               out_log10prob, out_length)
            index += 1
            if index < words_end + eos_extra:
                lane_total[_at(lane)] = total
                kept = min(n_current, order - 1)
                n_previous[_at(lane)] = kept
                for length in range(kept):
                    previous_row[_at(lane), _at(length)] = current_row[_at(length)]
                    previous_backoff[_at(lane), _at(length)] = current_backoff[_at(length)]
                lane_index[_at(lane)] = index
                word = ids[_at(index)] if index < words_end else eos_id
            else:
                out_sentence[sentence] = total
                next_sentence, started = _start_sentence(
                    lane, next_sentence, offsets, add_eos, add_bos, bos_id, order, values, lane_sentence, lane_index,
                    lane_cursor, lane_total, previous_row, previous_backoff, n_previous, out_sentence)
                if not started:
                    active -= 1
                    continue
                index = lane_index[lane]
                word = ids[index] if index < offsets[lane_sentence[lane] + 1] else eos_id
            _prefetch_probes(lane, word, previous_row, n_previous, order, vocab_size, hash_rows, hash_base, hash_cap)


@numba.njit(cache=True)
def best_unexcluded_extension(
    ngram_contexts, ngram_words, group_offsets, group_members, member_score, member_is_eos,
    next_hash_rows, next_capacity, vocab_size, out_best,
):
    """For each n-gram c x of an order, the best score among the n-grams y c of the same
    order (y ranging over the left extensions of c, sorted best first within each group)
    such that y c x is not in the next order's table; -inf when there is none.

    ``ngram_contexts[g]`` is the group (the row of c one order down) of n-gram g,
    ``ngram_words[g]`` its last word x. The walk over a sorted group stops at the first
    member not excluded, so the total work is at most the number of rows of both orders.
    """
    for ngram in range(ngram_contexts.shape[0]):
        group = ngram_contexts[ngram]
        word = ngram_words[ngram]
        best = -np.inf
        for position in range(group_offsets[group], group_offsets[group + 1]):
            member = group_members[position]
            if member_is_eos[member]:
                continue
            if next_capacity > 0 and find(next_hash_rows, 0, next_capacity, member * vocab_size + word) >= 0:
                continue
            best = member_score[member]
            break
        out_best[ngram] = best


@numba.njit(cache=True)
def batched_lookup(flat, offsets, words, vocab_size, hash_rows, hash_base, hash_cap, values, value_base,
                    out, lengths):
    for q in range(words.shape[0]):
        log10prob, length = backoff_log10prob(flat[offsets[q]:offsets[q + 1]], words[q], vocab_size,
                                                       hash_rows, hash_base, hash_cap, values, value_base)
        out[q] = log10prob
        lengths[q] = length


@numba.njit(cache=True)
def grid_lookup(flat, offsets, words, vocab_size, hash_rows, hash_base, hash_cap, values, value_base,
                 out, lengths):
    for c in range(offsets.shape[0] - 1):
        context = flat[offsets[c]:offsets[c + 1]]
        for w in range(words.shape[0]):
            log10prob, length = backoff_log10prob(context, words[w], vocab_size, hash_rows, hash_base,
                                                           hash_cap, values, value_base)
            out[c, w] = log10prob
            lengths[c, w] = length


@numba.njit(cache=True)
def batched_max_log10prob(flat, offsets, words, vocab_size, hash_rows, hash_base, hash_cap, values,
                           value_base, max_prob, max_backoff, out):
    for q in range(words.shape[0]):
        out[q] = max_backoff_log10prob(flat[offsets[q]:offsets[q + 1]], words[q], vocab_size, hash_rows,
                                                hash_base, hash_cap, values, value_base, max_prob, max_backoff)


# cached kernels load without refreshing Numba's registries (see varorder._numba_start)
varorder._numba_start.load_without_refresh(sys.modules[__name__])
