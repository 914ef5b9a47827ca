"""The compiled sentence scorer (:func:`varorder.lm._kernels.score_flat`) in Python, for
inputs too small to repay loading Numba.

Factorization: p(x_1 .. x_T) = prod_i p(x_i | x_{i-n+1} .. x_{i-1}) over ``<s> x .. </s>``,
each factor by ARPA's back-off recursion (Carter, Dymetman & Bouchard 2012, eq. 7).
"""

from __future__ import annotations

_GOLDEN = 0x9E3779B97F4A7C15
_MASK64 = (1 << 64) - 1


def _python_find_slot(hash_rows, base: int, capacity: int, key: int) -> int:
    """:func:`varorder.lm._kernels.find_slot` in Python (same hash, same probing)."""
    slot = ((((key * _GOLDEN) & _MASK64) >> 32) * capacity) >> 32
    for _ in range(capacity):
        stored = int(hash_rows[base + slot, 0])
        if stored == key:
            return base + slot
        if stored == -1:
            return -1
        slot += 1
        if slot == capacity:
            slot = 0
    return -1


def score_flat_python(ids, offsets, add_bos, add_eos, bos_id, eos_id, order, vocab_size,
                      hash_rows, hash_values, hash_base, hash_cap, values, out_log10prob, out_length,
                      out_sentence) -> None:
    """:func:`varorder.lm._kernels.score_flat` in Python, one sentence at a time, for inputs
    too small to repay loading Numba; float32 values are summed in float64 in the same
    order, so the scores are bit-identical."""
    cursor = 0
    for sentence in range(len(offsets) - 1):
        total = 0.0
        begin, end = int(offsets[sentence]), int(offsets[sentence + 1])
        previous_row: list[int] = []
        previous_backoff: list[float] = []
        if add_bos and order > 1:
            previous_row, previous_backoff = [bos_id], [float(values[bos_id, 1])]
        n_predicted = end - begin + (1 if add_eos else 0)
        for position in range(n_predicted):
            word = int(ids[begin + position]) if begin + position < end else eos_id
            current_row, current_backoff = [word], [float(values[word, 1])]
            log10prob = float(values[word, 0])
            for length in range(2, min(order, len(previous_row) + 1) + 1):
                slot = _python_find_slot(hash_rows, int(hash_base[length - 2]), int(hash_cap[length - 2]),
                                         previous_row[length - 2] * vocab_size + word)
                if slot < 0:
                    break
                current_row.append(int(hash_rows[slot, 1]))
                current_backoff.append(float(hash_values[slot, 5]))
                log10prob = float(hash_values[slot, 4])
            for context_length in range(len(current_row), len(previous_row) + 1):
                log10prob += previous_backoff[context_length - 1]
            out_log10prob[cursor] = log10prob
            out_length[cursor] = len(current_row)
            total += log10prob
            cursor += 1
            keep = min(len(current_row), order - 1)
            previous_row, previous_backoff = current_row[:keep], current_backoff[:keep]
        out_sentence[sentence] = total
