"""Numba kernels over a token suffix array: pattern ranges, next-token runs and the
interpolated Witten–Bell recursion over every suffix length of a context.

The suffix array ``sa`` lists the start positions of the suffixes of ``tokens`` in
lexicographic order of their token sequences (a suffix that is a prefix of another
sorts first). The suffixes that begin with a pattern form one contiguous range of
``sa`` (Manber & Myers 1993); inside it they are sorted by the token after the
pattern, so each next token's occurrences form a sub-range (infini-gram's next-token
distribution, Liu et al. 2024, §3). Every position read from ``sa`` is checked
against the token count, so a damaged file cannot make a kernel read outside the
arrays: the kernels return ``DAMAGED`` and the caller names the file.
"""

from __future__ import annotations

import numba
import numpy as np

import varorder._numba_start  # noqa: F401  (before any kernel's first call: see the module)

DAMAGED = -2


@numba.njit(cache=True, inline="always")
def _compare(tokens, n_tokens, start, pattern, length):
    """-1 if the suffix at ``start`` sorts before every sequence beginning with
    ``pattern[:length]``, 0 if it begins with it, +1 if it sorts after them all."""
    for j in range(length):
        p = start + j
        if p >= n_tokens:
            return -1  # the suffix ended: it is a proper prefix of the pattern
        a = np.int64(tokens[p])
        b = np.int64(pattern[j])
        if a < b:
            return -1
        if a > b:
            return 1
    return 0


@numba.njit(cache=True)
def pattern_range(tokens, sa, pattern, offset, length, lo, hi):
    """(first, end) of the ``sa`` rows in [lo, hi) whose suffixes begin with
    ``pattern[offset : offset + length]``; (DAMAGED, 0) on a position out of range.

    ``lo``/``hi`` may be any range known to contain every match (e.g. the range of a
    prefix of the pattern)."""
    n = tokens.shape[0]
    sub = pattern[offset:offset + length]
    a, b = lo, hi
    while a < b:  # first row whose suffix is not below the pattern
        m = (a + b) >> 1
        s = np.int64(sa[m])
        if s < 0 or s >= n:
            return DAMAGED, 0
        if _compare(tokens, n, s, sub, length) < 0:
            a = m + 1
        else:
            b = m
    first = a
    b = hi
    while a < b:  # first row whose suffix sorts after every match
        m = (a + b) >> 1
        s = np.int64(sa[m])
        if s < 0 or s >= n:
            return DAMAGED, 0
        if _compare(tokens, n, s, sub, length) <= 0:
            a = m + 1
        else:
            b = m
    return first, a


@numba.njit(cache=True)
def range_of(tokens, sa, pattern):
    """:func:`pattern_range` of the whole pattern over the whole array."""
    return pattern_range(tokens, sa, pattern, 0, pattern.shape[0], 0, sa.shape[0])


@numba.njit(cache=True)
def next_token_runs(tokens, sa, first, end, length, out_tokens, out_counts):
    """The next tokens after a pattern of ``length`` tokens whose rows are [first, end):
    each distinct next token (ascending) and its count, written to ``out_*``; returns
    how many (DAMAGED on a bad position). A run is found by galloping then bisecting,
    so the cost is O(distinct · log(count / distinct)), not O(count)."""
    n = tokens.shape[0]
    i = first
    k = 0
    while i < end:
        s = np.int64(sa[i])
        if s < 0 or s >= n:
            return DAMAGED
        if s + length >= n:  # the corpus ends right after the pattern: no next token
            i += 1
            continue
        t = tokens[s + length]
        # gallop: rows i .. i + step - 1 all have next token t
        step = 1
        lo_ok = i  # last row known to hold t
        while True:
            probe = i + step
            if probe >= end:
                hi_bad = end
                break
            q = np.int64(sa[probe])
            if q < 0 or q + length >= n:
                if q < 0 or q >= n:
                    return DAMAGED
                hi_bad = probe  # cannot happen inside a run but stays safe
                break
            if tokens[q + length] != t:
                hi_bad = probe
                break
            lo_ok = probe
            step *= 2
        a, b = lo_ok + 1, hi_bad
        while a < b:
            m = (a + b) >> 1
            q = np.int64(sa[m])
            if q < 0 or q >= n or q + length >= n:
                return DAMAGED
            if tokens[q + length] == t:
                a = m + 1
            else:
                b = m
        out_tokens[k] = t
        out_counts[k] = a - i
        k += 1
        i = a
    return k


@numba.njit(cache=True)
def _continuation(tokens, sa, first, end, length, word, scratch_tokens, scratch_counts):
    """(count of the pattern followed by any token, distinct next tokens, count followed
    by ``word``) for the rows [first, end) of a pattern of ``length`` tokens."""
    k = next_token_runs(tokens, sa, first, end, length, scratch_tokens, scratch_counts)
    if k < 0:
        return -1, -1, -1
    total = 0
    hit = 0
    for j in range(k):
        total += scratch_counts[j]
        if scratch_tokens[j] == word:
            hit = scratch_counts[j]
    return total, k, hit


@numba.njit(cache=True)
def longest_suffix_ranges(tokens, sa, context, firsts, ends):
    """For m = 1, 2, ...: the rows of the context's last m tokens, while they occur
    (counts are non-increasing in m). Returns the largest such m (0: not even the last
    token occurs), or DAMAGED. ``firsts``/``ends`` (length >= len(context) + 1) get
    the rows, index m; index 0 is the whole array."""
    L = context.shape[0]
    firsts[0] = 0
    ends[0] = sa.shape[0]
    m = 0
    while m < L:
        a, b = pattern_range(tokens, sa, context, L - m - 1, m + 1, 0, sa.shape[0])
        if a == DAMAGED:
            return DAMAGED
        if b <= a:
            break
        m += 1
        firsts[m] = a
        ends[m] = b
    return m


@numba.njit(cache=True)
def witten_bell_query(tokens, sa, unigram_counts, unigram_total, unigram_types, n_predictable, base_p, base_order,
                      context, word, firsts, ends, scratch_tokens, scratch_counts):
    """Interpolated Witten–Bell p(word | context) over every suffix length of the context
    up to the longest one with a continuation (:mod:`varorder.lm.unbounded`), as
    ``(p, levels used, ∞-gram probability, sparse, m)``; m is the length of the longest
    suffix that occurs (``DAMAGED`` on a bad position). ``firsts``/``ends`` (length >=
    len(context) + 1) get the rows of each suffix length. With ``base_order`` n > 0 the
    recursion starts at ``base_p`` = p_n(word | last n - 1 tokens) and runs over the
    lengths n, n + 1, ... only."""
    m = longest_suffix_ranges(tokens, sa, context, firsts, ends)
    if m == DAMAGED:
        return np.nan, 0, np.nan, False, DAMAGED
    # the unigram level: corpus counts without <s>, over the uniform base
    c_w = unigram_counts[word] if word < unigram_counts.shape[0] else 0
    p = (c_w + unigram_types / n_predictable) / (unigram_total + unigram_types)
    infinigram = c_w / unigram_total
    sparse = unigram_types == 1
    used = 0
    first_level = 1
    if base_order > 0:
        p = base_p
        first_level = base_order
    for level in range(1, m + 1):
        total, distinct, hit = _continuation(tokens, sa, firsts[level], ends[level], level, word,
                                             scratch_tokens, scratch_counts)
        if total < 0:
            return np.nan, 0, np.nan, False, DAMAGED
        if total == 0:
            break
        if level >= first_level:
            p = (hit + distinct * p) / (total + distinct)
        infinigram = hit / total
        sparse = distinct == 1
        used = level
    return p, used, infinigram, sparse, m


@numba.njit(cache=True)
def unigram_totals(unigram_counts):
    """(c(•), N₁₊(•)): the predicted tokens and the distinct ones."""
    unigram_total = 0
    unigram_types = 0
    for w in range(unigram_counts.shape[0]):
        unigram_total += unigram_counts[w]
        if unigram_counts[w] > 0:
            unigram_types += 1
    return unigram_total, unigram_types


@numba.njit(cache=True)
def witten_bell_stream(tokens, sa, unigram_counts, n_predictable, eval_ids, sentence_starts, base_logprob,
                       base_order, out_logprob, out_match, out_infinigram, out_sparse):
    """Natural-log interpolated Witten–Bell probabilities of every token of ``eval_ids``
    (sentences ``<s> w1 .. wn </s>`` concatenated, sentence s starting at
    ``sentence_starts[s]``), each given its whole sentence prefix, over every suffix
    length up to the longest one with a continuation in the corpus; the ∞-gram
    probability (that longest suffix's relative frequency) and whether its next-token
    distribution has a single token (infini-gram's "sparse" estimate) beside
    (:func:`witten_bell_query` per token).

    With ``base_order`` n > 0 the levels below n are replaced by a fixed-order model: the
    recursion starts from ``exp(base_logprob[t])`` = p_n(x_t | last n - 1 tokens) and runs
    over the suffix lengths n, n + 1, ... only. Position 0 of each sentence (``<s>``) is
    not predicted (out_logprob = 0, match -1). Returns 0, or DAMAGED."""
    max_len = 1
    for s in range(sentence_starts.shape[0] - 1):
        max_len = max(max_len, sentence_starts[s + 1] - sentence_starts[s])
    firsts = np.empty(max_len + 1, np.int64)
    ends = np.empty(max_len + 1, np.int64)
    scratch_tokens = np.empty(unigram_counts.shape[0] + 1, np.int64)
    scratch_counts = np.empty(unigram_counts.shape[0] + 1, np.int64)
    unigram_total, unigram_types = unigram_totals(unigram_counts)
    for s in range(sentence_starts.shape[0] - 1):
        a0 = sentence_starts[s]
        b0 = sentence_starts[s + 1]
        out_logprob[a0] = 0.0
        out_match[a0] = -1
        out_infinigram[a0] = 0.0
        out_sparse[a0] = False
        for t in range(a0 + 1, b0):
            base_p = np.exp(base_logprob[t]) if base_order > 0 else 0.0
            p, used, infinigram, sparse, m = witten_bell_query(
                tokens, sa, unigram_counts, unigram_total, unigram_types, n_predictable, base_p, base_order,
                eval_ids[a0:t], eval_ids[t], firsts, ends, scratch_tokens, scratch_counts)
            if m == DAMAGED:
                return DAMAGED
            out_logprob[t] = np.log(p)
            out_match[t] = used
            out_infinigram[t] = infinigram
            out_sparse[t] = sparse
    return 0


@numba.njit(cache=True)
def witten_bell_max_query(tokens, sa, unigram_counts, unigram_total, unigram_types, n_predictable, bos, context,
                          word, budget, firsts, ends, scratch_tokens, scratch_counts, pattern):
    """An upper bound of p(word | h) over every history h = e·context that starts with
    ``bos`` and holds no other ``bos`` (interpolated Witten–Bell without a base), and
    whether the walk was complete.

    p(word | h) is the recursion over the suffixes of h up to the longest one that
    occurs, u; the levels up to |context| are the context's own. When the context does
    not occur, u is a suffix of it for every e: p(word | h) = p(word | context). Else each
    level above mixes the level below with the relative frequency f_v(word) = c(v word) /
    c(v •) of a left extension v of the context, p_v = (c(v word) + N₁₊(v •) p_parent) /
    (c(v •) + N₁₊(v •)); where c(v word) = 0 the level only lowers p, and so does every
    longer one (its counts are a subset), so the maximum over every h is the maximum of
    p_v over the context and its left extensions v that are followed by ``word`` somewhere
    in the corpus. These are walked depth-first from the occurrences of context·word,
    grouped by their next token to the left; a v that occurs once continues, one token
    at a time up to its sentence's ``<s>``, with counts 1, so p rises to
    1 - (1 - p_v) / 2^L after L more tokens. Returns ``(p, complete)``: ``complete`` when
    the walk covered every extension (p is then the maximum of p_v over them, attained by
    the histories whose longest occurring suffix is the maximising v); when it would visit
    more than ``budget`` extensions it stops and returns (1, False), 1 bounding every
    probability. p is NaN on a damaged index.
    """
    k = context.shape[0]
    p, _, _, _, m = witten_bell_query(tokens, sa, unigram_counts, unigram_total, unigram_types, n_predictable,
                                      0.0, 0, context, word, firsts, ends, scratch_tokens, scratch_counts)
    if m == DAMAGED:
        return np.nan, False
    if m < k or (k > 0 and context[0] == bos):
        return p, True  # no left extension occurs, or none is a history
    # rows of context·word inside the context's rows
    if pattern.shape[0] < k + 1:
        pattern = np.empty(2 * (k + 1), np.int64)
    pattern[:k] = context
    pattern[k] = word
    a, b = pattern_range(tokens, sa, pattern, 0, k + 1, firsts[k], ends[k])
    if a == DAMAGED:
        return np.nan, False
    if b <= a:
        return p, True
    if b - a > budget:
        return 1.0, False
    n = tokens.shape[0]
    starts = np.empty(b - a, np.int64)  # where each occurrence of the context starts
    for r in range(a, b):
        s = np.int64(sa[r])
        if s < 0 or s >= n:
            return np.nan, False
        starts[r - a] = s
    best = p
    # A stack of groups: starts[lo:hi] share the left extension of depth `depth` (the node
    # v = tokens[s - depth : s + k]) whose level value is `value`.
    stack_lo = np.empty(b - a + 1, np.int64)
    stack_hi = np.empty(b - a + 1, np.int64)
    stack_depth = np.empty(b - a + 1, np.int64)
    stack_value = np.empty(b - a + 1, np.float64)
    top = 0
    stack_lo[0], stack_hi[0], stack_depth[0], stack_value[0] = 0, b - a, 0, p
    top = 1
    visited = 0
    keys = np.empty(b - a, np.int64)
    while top > 0:
        top -= 1
        lo, hi, depth, value = stack_lo[top], stack_hi[top], stack_depth[top], stack_value[top]
        # group this node's occurrences by the token one further to the left
        for i in range(lo, hi):
            s = starts[i] - depth - 1
            keys[i] = np.int64(tokens[s]) if s >= 0 else -1
        order = np.argsort(keys[lo:hi], kind="mergesort")
        starts[lo:hi] = starts[lo:hi][order]
        keys[lo:hi] = keys[lo:hi][order]
        i = lo
        while i < hi:
            j = i + 1
            while j < hi and keys[j] == keys[i]:
                j += 1
            left = keys[i]
            if left >= 0:  # -1: the corpus starts (cannot happen inside a framed sentence)
                visited += 1
                if visited > budget:
                    return 1.0, False
                s0 = starts[i] - depth - 1
                length = depth + 1 + k
                if pattern.shape[0] < length:
                    pattern = np.empty(2 * length, np.int64)
                for t in range(length):
                    pattern[t] = tokens[s0 + t]
                va, vb = pattern_range(tokens, sa, pattern, 0, length, 0, sa.shape[0])
                if va == DAMAGED:
                    return np.nan, False
                total, distinct, hit = _continuation(tokens, sa, va, vb, length, word, scratch_tokens,
                                                     scratch_counts)
                if total < 0:
                    return np.nan, False
                child = (hit + distinct * value) / (total + distinct)
                if child > best:
                    best = child
                if left != bos:
                    if total == 1:
                        # Unique from here on: one more level of counts 1 per token up to
                        # the sentence's <s>, each (1 + p) / 2 (iterated, not the closed form
                        # 1 - (1 - p) / 2^L, so that rounding matches the scorer's).
                        t = s0 - 1
                        chain = child
                        while t >= 0:
                            chain = (1 + 1 * chain) / (1 + 1)
                            if tokens[t] == bos:
                                break
                            t -= 1
                        if chain > best:
                            best = chain
                    else:
                        stack_lo[top], stack_hi[top], stack_depth[top], stack_value[top] = i, j, depth + 1, child
                        top += 1
            i = j
    return best, True


# --- building in bounded memory: shards sorted by their whole continuation, then merged ---


@numba.njit(cache=True, inline="always")
def _suffix_less(tokens, n, p, q):
    """Whether the suffix of ``tokens`` at ``p`` sorts before the one at ``q`` (p != q):
    the first differing token decides; a suffix that ends first (a proper prefix of the
    other) sorts first. Reads up to the corpus's end, past any shard."""
    k = 0
    while True:
        if p + k >= n:
            return True
        if q + k >= n:
            return False
        a = tokens[p + k]
        b = tokens[q + k]
        if a != b:
            return a < b
        k += 1


@numba.njit(cache=True)
def order_breaks(tokens, positions):
    """How many adjacent pairs of ``positions`` are out of suffix order (0: sorted)."""
    n = tokens.shape[0]
    breaks = 0
    for i in range(1, positions.shape[0]):
        if not _suffix_less(tokens, n, positions[i - 1], positions[i]):
            breaks += 1
    return breaks


@numba.njit(cache=True)
def sort_suffixes(tokens, positions):
    """Sort distinct ``positions`` in place by the suffixes of the whole of ``tokens``
    that start there: a natural merge sort (the ascending runs found first, merged in
    pairs through one buffer), so an array already in order costs one pass of
    comparisons and an almost sorted one a few merges. Returns the number of runs less
    one (0: it was sorted)."""
    m = positions.shape[0]
    breaks = order_breaks(tokens, positions)
    if breaks == 0:
        return 0
    n = tokens.shape[0]
    starts = np.empty(breaks + 2, np.int64)
    starts[0] = 0
    runs = 1
    for i in range(1, m):
        if not _suffix_less(tokens, n, positions[i - 1], positions[i]):
            starts[runs] = i
            runs += 1
    starts[runs] = m
    buffer = np.empty_like(positions)
    src = positions
    dst = buffer
    in_buffer = False
    while runs > 1:
        merged = 0
        for j in range(0, runs, 2):
            lo = starts[j]
            mid = starts[j + 1]
            hi = starts[j + 2] if j + 2 <= runs else mid
            a, b, w = lo, mid, lo
            while a < mid and b < hi:
                if _suffix_less(tokens, n, src[b], src[a]):
                    dst[w] = src[b]
                    b += 1
                else:
                    dst[w] = src[a]
                    a += 1
                w += 1
            while a < mid:
                dst[w] = src[a]
                a += 1
                w += 1
            while b < hi:
                dst[w] = src[b]
                b += 1
                w += 1
            starts[merged] = lo
            merged += 1
        starts[merged] = m
        runs = merged
        src, dst = dst, src
        in_buffer = not in_buffer
    if in_buffer:
        positions[:] = buffer
    return breaks


@numba.njit(cache=True, inline="always")
def _head_less(tokens, n, buffers, pos, s, t):
    return _suffix_less(tokens, n, np.int64(buffers[s, pos[s]]), np.int64(buffers[t, pos[t]]))


@numba.njit(cache=True)
def _sift_down(tokens, n, buffers, pos, heap, size, i):
    while True:
        child = 2 * i + 1
        if child >= size:
            return
        if child + 1 < size and _head_less(tokens, n, buffers, pos, heap[child + 1], heap[child]):
            child += 1
        if _head_less(tokens, n, buffers, pos, heap[child], heap[i]):
            heap[i], heap[child] = heap[child], heap[i]
            i = child
        else:
            return


@numba.njit(cache=True)
def heapify_shards(tokens, buffers, pos, heap, size):
    """Order ``heap[:size]`` (shard numbers) as a binary min-heap of their head suffixes."""
    n = tokens.shape[0]
    for i in range(size // 2 - 1, -1, -1):
        _sift_down(tokens, n, buffers, pos, heap, size, i)


@numba.njit(cache=True)
def merge_shards(tokens, buffers, pos, lens, done, heap, state, out):
    """k-way merge of sorted shard suffix arrays (each a window ``buffers[s, pos[s]:lens[s]]``
    of the shard's sorted positions) into ``out``, comparing suffixes of the whole corpus.

    ``heap[:state[0]]`` is a min-heap of shards by head suffix; ``state[1]`` = 1 when the
    top's head changed since it was last sifted. Returns ``(written, code)``: code >= 0 is a
    shard whose window ran dry (refill it, set ``pos``/``lens`` or ``done``, call again),
    -1 ``out`` is full, -2 every shard is merged."""
    n = tokens.shape[0]
    w = 0
    size = state[0]
    while True:
        if state[1] == 1:
            s = heap[0]
            if pos[s] >= lens[s]:
                if not done[s]:
                    state[0] = size
                    return w, s
                size -= 1
                heap[0] = heap[size]
            if size > 0:
                _sift_down(tokens, n, buffers, pos, heap, size, 0)
            state[1] = 0
        if size == 0:
            break
        if w == out.shape[0]:
            state[0] = size
            return w, -1
        s = heap[0]
        out[w] = buffers[s, pos[s]]
        w += 1
        pos[s] += 1
        state[1] = 1
    state[0] = 0
    return w, -2


@numba.njit(cache=True)
def mark_positions(seen_bits, positions, n):
    """Set bit p of ``seen_bits`` (uint8, ceil(n / 8)) for every position p; returns
    0, or -1 if a position lies outside [0, n) or is repeated (then not a permutation)."""
    for i in range(positions.shape[0]):
        p = np.int64(positions[i])
        if p < 0 or p >= n:
            return -1
        byte = p >> 3
        bit = np.uint8(1 << (p & 7))
        if seen_bits[byte] & bit:
            return -1
        seen_bits[byte] |= bit
    return 0


@numba.njit(cache=True)
def big_endian_bytes(tokens, width, out):
    """Write each token as ``width`` big-endian bytes into ``out`` (uint8, width · n)."""
    for i in range(tokens.shape[0]):
        v = np.uint64(tokens[i])
        for j in range(width - 1, -1, -1):
            out[i * width + j] = np.uint8(v & np.uint64(255))
            v = v >> np.uint64(8)


@numba.njit(cache=True)
def aligned_positions(byte_sa, width, keep, out):
    """The token positions p < ``keep`` of the byte positions ``width · p`` of a byte-level
    suffix array, in its order, written to ``out``; returns how many."""
    k = 0
    for i in range(byte_sa.shape[0]):
        b = np.int64(byte_sa[i])
        if b % width == 0:
            p = b // width
            if p < keep:
                if k < out.shape[0]:
                    out[k] = p
                k += 1
    return k
