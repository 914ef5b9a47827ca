"""Numba kernels over raw UTF-8 bytes: a hash table from word bytes to vocabulary ids,
the token delimiting that the sentence encoder (:mod:`varorder.lm._encode`) and the fast
ARPA reader share, and the decimal scanner the reader uses.

They let text be encoded (and ARPA n-gram lines be read) without creating a Python
string per token. Tokens are split on ASCII whitespace, which is what ``str.split()``
does unless the text holds one of the other characters Python counts as whitespace
(U+001C..U+001F, U+0085, U+00A0, U+1680, U+2000..U+200A, U+2028, U+2029, U+202F,
U+205F, U+3000) or a lone carriage return (a line break for Python's text files): the
kernels report such text, and callers fall back to the Python path, so both paths always
split alike.
"""

from __future__ import annotations

import sys

import numba
import numpy as np
from numba.cpython.unsafe.numbers import trailing_zeros

import varorder._numba_start  # noqa: F401  (before any kernel's first call: see the module)

FNV_OFFSET = 14695981039346656037  # FNV-1a (64-bit) constants
FNV_PRIME = 1099511628211
_FNV_OFFSET = np.uint64(FNV_OFFSET)
_FNV_PRIME = np.uint64(FNV_PRIME)
UNUSUAL_TEXT = -2  # status: text the byte tokenizer must not split (see the docstring)


@numba.njit(cache=True, inline="always")
def _hash_bytes(buffer, start, end):
    value = _FNV_OFFSET
    for i in range(start, end):
        value = (value ^ np.uint64(buffer[i])) * _FNV_PRIME
    return value


def _table_capacity(n_words: int) -> int:
    """A power of two at least twice ``n_words`` (load <= 0.5), at least 16."""
    capacity = 16
    while capacity < 2 * n_words:
        capacity *= 2
    return capacity


def build_word_table(blob, starts, ends) -> np.ndarray:
    """Open-addressing table (power-of-two size, load <= 0.5) of the words
    ``blob[starts[i]:ends[i]]`` -> i. Allocated here, not in the kernel: a kernel that
    allocates makes Numba import its array support when it loads the cached code."""
    table = np.full(_table_capacity(starts.shape[0]), -1, dtype=np.int64)
    _fill_word_table(blob, starts, ends, table)
    return table


@numba.njit(cache=True)
def _fill_word_table(blob, starts, ends, table):
    capacity = table.shape[0]
    mask = np.uint64(capacity - 1)
    for word in range(starts.shape[0]):
        slot = np.int64(_hash_bytes(blob, starts[word], ends[word]) & mask)
        while table[slot] != -1:
            slot = (slot + 1) & (capacity - 1)
        table[slot] = word


@numba.njit(cache=True, inline="always")
def find_word(buffer, start, end, blob, starts, ends, table):
    """Id of the word ``buffer[start:end]``, or -1."""
    return find_hashed_word(buffer, start, end, _hash_bytes(buffer, start, end), blob, starts, ends, table)


@numba.njit(cache=True, inline="always")
def find_hashed_word(buffer, start, end, hashed, blob, starts, ends, table):
    """:func:`find_word` given the word's hash (computed while scanning for its end)."""
    capacity = table.shape[0]
    slot = np.int64(hashed & np.uint64(capacity - 1))
    length = end - start
    while True:
        word = table[slot]
        if word < 0:
            return -1
        word_start = starts[word]
        if ends[word] - word_start == length:
            same = True
            for i in range(length):
                if blob[word_start + i] != buffer[start + i]:
                    same = False
                    break
            if same:
                return word
        slot = (slot + 1) & (capacity - 1)


# Words of at most PACKED_BYTES ASCII bytes from 0x21 are also found by their bytes packed
# into two little-endian 64-bit words: the token is delimited eight bytes at a time (the
# first byte below 0x21 in a word-sized load) and looked up with one hash of the packed
# words, so no loop runs over its bytes. Anything else takes the byte-wise path.
PACKED_BYTES = 15
_HIGH_BITS = np.uint64(0x8080808080808080)
_BELOW_BLANK = np.uint64(0x2121212121212121)  # bytes below 0x21: blanks, line breaks, controls
_PACKED_MIX = np.uint64(0xC2B2AE3D27D4EB4F)
LITTLE_ENDIAN = sys.byteorder == "little"


def packed_word_table(blob, starts, ends) -> tuple[np.ndarray, np.ndarray]:
    """``(slots, keys)`` of the words ``blob[starts[i]:ends[i]]`` (id = i) that the packed
    path can read — 1 to :data:`PACKED_BYTES` bytes, each 0x21..0x7F — as ``keys[id]``,
    their bytes packed into two little-endian uint64 (zero-padded; (0, 0) for the other
    words), and an open-addressing table of their ids (int32, power-of-two size, load
    <= 0.5, -1 empty). Both are small enough for the core's own cache (about 300 KB for
    10k words): a lookup is two cache hits, where a table of full slots missed."""
    slots = np.full(_table_capacity(len(starts)), -1, dtype=np.int32)
    keys = np.zeros((len(starts), 2), dtype=np.uint64)
    _fill_packed(blob, starts, ends, slots, keys)
    return slots, keys


@numba.njit(cache=True, inline="always")
def _packed_slot(low, high, capacity):
    mixed = (low ^ (high * _PACKED_MIX)) * np.uint64(0x9E3779B97F4A7C15)
    return np.int64(mixed >> np.uint64(40)) & (capacity - 1)


@numba.njit(cache=True)
def _fill_packed(blob, starts, ends, slots, keys):
    capacity = slots.shape[0]
    for word in range(starts.shape[0]):
        length = ends[word] - starts[word]
        if length < 1 or length > PACKED_BYTES:
            continue
        low = np.uint64(0)
        high = np.uint64(0)
        readable = True
        for j in range(length):
            byte = blob[starts[word] + j]
            if byte < 0x21 or byte > 0x7F:
                readable = False
                break
            if j < 8:
                low |= np.uint64(byte) << np.uint64(8 * j)
            else:
                high |= np.uint64(byte) << np.uint64(8 * (j - 8))
        if not readable:
            continue
        keys[word, 0] = low
        keys[word, 1] = high
        slot = _packed_slot(low, high, capacity)
        while slots[slot] >= 0:
            slot = (slot + 1) & (capacity - 1)
        slots[slot] = word


@numba.njit(cache=True, inline="always")
def _load8(words8, i):
    """The 8 bytes of the buffer from byte ``i`` as a little-endian uint64, from two
    aligned loads of its uint64 view (no branch on the alignment)."""
    q = i >> 3
    shift = np.uint64((i & 7) * 8)
    return (words8[q] >> shift) | ((words8[q + 1] << np.uint64(1)) << (np.uint64(63) - shift))


@numba.njit(cache=True, inline="always")
def packed_token(buffer, words8, i):
    """``(end, low, high)`` of the token at ``i`` read by the packed path: ``end`` is
    where it stops (an ASCII tab, space or line feed), ``low``/``high`` its bytes packed
    as :func:`packed_word_table` packs them; ``end`` -1 when the packed path cannot read
    it (longer than :data:`PACKED_BYTES`, another byte below 0x21 or above 0x7F, too near
    the buffer's end): the caller reads it byte by byte. Needs ``words8`` = the buffer
    seen as uint64 (:func:`uint64_view`)."""
    zero = np.uint64(0)
    if i + 24 > words8.shape[0] * 8:
        return -1, zero, zero
    low = _load8(words8, i)
    found = (low - _BELOW_BLANK) & ~low & _HIGH_BITS
    high = zero
    if found:
        length = np.int64(trailing_zeros(found) >> 3)
        low &= (np.uint64(1) << np.uint64(8 * length)) - np.uint64(1)
    else:
        high = _load8(words8, i + 8)
        found = (high - _BELOW_BLANK) & ~high & _HIGH_BITS
        if not found:
            return -1, zero, zero
        length = np.int64(trailing_zeros(found) >> 3)
        high &= (np.uint64(1) << np.uint64(8 * length)) - np.uint64(1)
        length += 8
    end = i + length
    after = buffer[end]
    # Bytes above 0x7F (UTF-8), or a token cut by a byte that is no tab, space or line
    # feed: the byte-wise path decides.
    if length == 0 or (low | high) & _HIGH_BITS or not (after == 9 or after == 10 or after == 32):
        return -1, zero, zero
    return end, low, high


@numba.njit(cache=True, inline="always")
def find_packed_word(low, high, slots, keys):
    """Id of the word packed as ``(low, high)`` (:func:`packed_token`), or -1."""
    capacity = slots.shape[0]
    slot = _packed_slot(low, high, capacity)
    while True:
        word = np.int64(slots[slot])
        if word < 0 or (keys[word, 0] == low and keys[word, 1] == high):
            return word
        slot = (slot + 1) & (capacity - 1)


@numba.njit(cache=True, inline="always")
def is_space(byte):
    return byte == 32 or (9 <= byte <= 13)


@numba.njit(cache=True)
def unusual_at(buffer, i):
    """Whether position ``i`` starts a character that Python's ``str.split`` or text-file
    line reading would treat differently from this module's ASCII rules."""
    byte = buffer[i]
    n = buffer.shape[0]
    if 28 <= byte <= 31:
        return True
    if byte == 13:
        return not (i + 1 < n and buffer[i + 1] == 10)
    if byte == 0xC2 and i + 1 < n:
        return buffer[i + 1] == 0x85 or buffer[i + 1] == 0xA0
    if byte == 0xE1 and i + 2 < n:
        return buffer[i + 1] == 0x9A and buffer[i + 2] == 0x80
    if byte == 0xE2 and i + 2 < n:
        second, third = buffer[i + 1], buffer[i + 2]
        if second == 0x80:
            return third <= 0x8A or third == 0xA8 or third == 0xA9 or third == 0xAF
        return second == 0x81 and third == 0x9F
    if byte == 0xE3 and i + 2 < n:
        return buffer[i + 1] == 0x80 and buffer[i + 2] == 0x80
    return False


@numba.njit(cache=True)
def has_unusual_text(buffer):
    for i in range(buffer.shape[0]):
        byte = buffer[i]
        if (28 <= byte <= 31 or byte == 13 or byte >= 0xC2) and unusual_at(buffer, i):
            return True
    return False


POWERS_OF_TEN = np.asarray([10.0 ** k for k in range(23)])
_INT_POWERS_OF_TEN = np.asarray([10 ** k for k in range(9)], dtype=np.int64)
_LOW_7_BITS = np.uint64(0x7F7F7F7F7F7F7F7F)
_HIGH_NIBBLES = np.uint64(0xF0F0F0F0F0F0F0F0)
_ZEROS = np.uint64(0x3030303030303030)  # eight ASCII "0"
_SIXES = np.uint64(0x0606060606060606)


@numba.njit(cache=True, inline="always")
def _nonzero_bytes(x):
    """The high bit of each byte of ``x`` that is not zero (no carry between bytes)."""
    return (((x & _LOW_7_BITS) + _LOW_7_BITS) | x) & _HIGH_BITS


@numba.njit(cache=True, inline="always")
def _first_flagged(mask):
    return 8 if mask == 0 else np.int64(trailing_zeros(mask) >> 3)


@numba.njit(cache=True, inline="always")
def _eight_digits(chunk, k):
    """The integer written by the first ``k`` (1..8) ASCII digits of ``chunk`` (little-
    endian: the first digit in the lowest byte), by three multiplications."""
    value = (chunk << np.uint64(8 * (8 - k))) & np.uint64(0x0F0F0F0F0F0F0F0F)
    value = (value * np.uint64(2561)) >> np.uint64(8)
    value = ((value & np.uint64(0x00FF00FF00FF00FF)) * np.uint64(6553601)) >> np.uint64(16)
    return np.int64(((value & np.uint64(0x0000FFFF0000FFFF)) * np.uint64(42949672960001)) >> np.uint64(32))


@numba.njit(cache=True, inline="always")
def scan_decimal(buffer, words8, i, n):
    """``(end, ok, value)`` of the decimal number ``[-+]digits[.digits][(e|E)[-+]digits]``
    starting at ``i``, scanned and converted in one pass; ``end`` is where the number
    stops. ``ok`` when it ends the token (at ``n`` or an ASCII blank or line break) and is
    exactly representable by Clinger's fast path: at most 15 significant digits and a
    power of ten up to 1e22, so one correctly rounded multiplication or division gives
    the same double as Python's ``float``. The one decimal parser of the compiled ARPA
    reader: a number it declines is left for ``float``. Where ``words8`` (the buffer
    seen as uint64, :func:`uint64_view`; may be empty) covers them, the digits after the
    point are read eight at a time (the fraction is most of an ARPA number); the result
    is the same."""
    negative = False
    if i < n and (buffer[i] == 45 or buffer[i] == 43):
        negative = buffer[i] == 45
        i += 1
    mantissa = np.int64(0)
    digits = 0
    exponent = 0
    any_digit = False
    while i < n and 48 <= buffer[i] <= 57:
        if mantissa or buffer[i] != 48:
            digits += 1
        if digits <= 18:
            mantissa = mantissa * 10 + (buffer[i] - 48)
        any_digit = True
        i += 1
    if i < n and buffer[i] == 46:
        i += 1
        while i + 16 <= words8.shape[0] * 8:
            chunk = _load8(words8, i)
            k = _first_flagged(_nonzero_bytes(((chunk & _HIGH_NIBBLES) ^ _ZEROS)
                                              | (((chunk + _SIXES) & _HIGH_NIBBLES) ^ _ZEROS)))
            if k == 0:
                break
            significant = k
            if mantissa == 0:  # leading zeros are not significant
                significant = k - min(k, _first_flagged(_nonzero_bytes(chunk ^ _ZEROS)))
            if digits + significant > 18:
                break  # the digit-by-digit loop below drops what does not fit
            mantissa = mantissa * _INT_POWERS_OF_TEN[k] + _eight_digits(chunk, k)
            digits += significant
            exponent -= k
            any_digit = True
            i += k
            if k < 8:
                break
        while i < n and 48 <= buffer[i] <= 57:
            if mantissa or buffer[i] != 48:
                digits += 1
            if digits <= 18:
                mantissa = mantissa * 10 + (buffer[i] - 48)
                exponent -= 1
            any_digit = True
            i += 1
    if not any_digit:
        return i, False, 0.0
    if i < n and (buffer[i] == 101 or buffer[i] == 69):
        i += 1
        sign = 1
        if i < n and (buffer[i] == 45 or buffer[i] == 43):
            sign = -1 if buffer[i] == 45 else 1
            i += 1
        value = 0
        seen = False
        while i < n and 48 <= buffer[i] <= 57:
            if value < 10000:
                value = value * 10 + (buffer[i] - 48)
            seen = True
            i += 1
        if not seen:
            return i, False, 0.0
        exponent += sign * value
    if (i < n and not is_space(buffer[i])) or digits > 15 or exponent < -22 or exponent > 22:
        return i, False, 0.0
    result = float(mantissa)
    result = result / POWERS_OF_TEN[-exponent] if exponent < 0 else result * POWERS_OF_TEN[exponent]
    return i, True, -result if negative else result


def uint64_view(buffer: np.ndarray) -> np.ndarray:
    """``buffer`` (uint8) seen as uint64 for :func:`packed_token` (its whole words; empty
    where the machine is not little-endian, which turns the packed path off)."""
    if not LITTLE_ENDIAN:
        return np.zeros(0, dtype=np.uint64)
    return buffer[:buffer.shape[0] - buffer.shape[0] % 8].view(np.uint64)


def word_table(words) -> tuple[np.ndarray, ...]:
    """``(blob, starts, ends, table, packed slots, packed keys)``: the byte-level hash of
    ``words`` (id = position), as :func:`find_hashed_word` takes it, and the packed table
    of :func:`find_packed_word` (:func:`packed_word_table`)."""
    encoded = [w.encode("utf-8", errors="surrogateescape") for w in words]
    lengths = np.fromiter(map(len, encoded), dtype=np.int64, count=len(encoded))
    starts = np.zeros(len(encoded), dtype=np.int64)
    if len(encoded) > 1:
        np.cumsum(lengths[:-1], out=starts[1:])
    blob = np.frombuffer(b"".join(encoded), dtype=np.uint8) if encoded else np.zeros(0, np.uint8)
    ends = starts + lengths
    slots, keys = packed_word_table(blob, starts, ends)
    return blob, starts, ends, build_word_table(blob, starts, ends), slots, keys


# cached kernels load without refreshing Numba's registries (see varorder._numba_start)
varorder._numba_start.load_without_refresh(sys.modules[__name__])
