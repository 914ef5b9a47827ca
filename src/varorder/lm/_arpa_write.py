"""The compiled path of :func:`varorder.lm.arpa.write_arpa`: ARPA n-gram lines formatted
by one Numba kernel straight into a byte buffer, float32 values written as NumPy writes
them (``str`` of a float32: the shortest decimal that reads back to the same float32,
positional notation, at least one digit after the point).

Shortest digits (Steele & White's free-format output; Burger & Dybvig 1996): for p = 1,
2, ... significant digits, the p-digit decimal closest to x is the candidate, and the
first that lies strictly inside x's rounding interval (half an ulp either side) is the
output — exactly what NumPy's Dragon4 in its unique mode prints, which keeps the bounds
exclusive and rounds the last digit to the closest. Everything is integer arithmetic on
x = m·2^e: for 0.01 <= |x| < 10^6 (every log10 probability and back-off an n-gram model
stores but a few near 0) no product exceeds 2^61. A value outside that range, a power of
two (whose rounding interval is lopsided), a candidate exactly halfway between two
p-digit decimals or exactly on the interval's edge, infinities and NaN are flagged and
formatted by NumPy itself (:func:`varorder.lm.arpa._value_strings`), so the output is
byte for byte NumPy's. (A block whose column holds both 0.0 and -0.0 goes to the NumPy
path whole: it writes both as whichever its sort puts first.)
"""

from __future__ import annotations

import sys

import numba
import numpy as np

import varorder._numba_start  # noqa: F401  (before any kernel's first call: see the module)

_POW10 = np.array([10 ** i for i in range(19)], dtype=np.int64)
FAST_WIDTH = 16  # longest text of a fast-path value: "-0.0" and 9 digits, or "-999999.94"


@numba.njit(cache=True, inline="always")
def _digits(bits, pow10):
    """``(D, p, k)``: |x| = D·10^(k-p+1) with p significant digits, shortest round-trip;
    ``p == 0`` for a zero, ``p < 0`` when NumPy must format the value (see the module)."""
    exponent = (bits >> 23) & 0xFF
    fraction = bits & 0x7FFFFF
    if exponent == 0:
        return 0, (0 if fraction == 0 else -1), 0
    if exponent == 255 or fraction == 0:  # inf, NaN, or a power of two
        return 0, -1, 0
    m = np.int64(fraction | 0x800000)
    shift = 150 - np.int64(exponent)  # |x| = m / 2^shift
    if shift < 1 or shift > 30 or 100 * m < (np.int64(1) << shift):  # outside [0.01, 2^23)
        return 0, -1, 0
    k = -2  # the decimal exponent: 10^k <= |x| < 10^(k + 1)
    while k < 6:
        nk = k + 1
        if nk >= 0:
            above = (pow10[nk] << shift) <= m
        else:
            above = (np.int64(1) << shift) <= m * pow10[-nk]
        if not above:
            break
        k = nk
    if k >= 6:  # NumPy writes a float32 of 1e6 or more in scientific notation
        return 0, -1, 0
    half = np.int64(1) << (shift - 1)
    for p in range(1, 10):
        s = p - 1 - k
        if s >= 0:
            n = m * pow10[s]  # x·10^s = n / 2^shift
            q = n >> shift
            r = n - (q << shift)
            if r == half:
                return 0, -1, 0
            if r > half:
                q += 1
            twice_gap = 2 * abs((q << shift) - n)  # |q·10^-s − x|, in units of 1 / (2^(shift+1)·10^s)
            if twice_gap == pow10[s]:
                return 0, -1, 0
            inside = twice_gap < pow10[s]
        else:
            den = pow10[-s] << shift  # x / 10^-s = m / den
            q = m // den
            r = m - q * den
            if 2 * r == den:
                return 0, -1, 0
            if 2 * r > den:
                q += 1
            inside = q * den == m  # the interval is narrower than 10^-s: only x itself
        if inside:
            if q == pow10[p]:  # rounded up to the next power of ten
                return 1, 1, k + 1
            return q, p, k
    return 0, -1, 0


@numba.njit(cache=True)
def needs_numpy(bits):
    """Which values the fast path leaves to NumPy (see :func:`_digits`)."""
    out = np.empty(bits.shape, dtype=np.bool_)
    flat_in, flat_out = bits.reshape(-1), out.reshape(-1)
    for i in range(flat_in.size):
        flat_out[i] = _digits(flat_in[i], _POW10)[1] < 0
    return out


@numba.njit(cache=True)
def mixed_zeros(bits):
    """Whether a column of ``bits`` (n, columns) holds both 0.0 and -0.0."""
    for c in range(bits.shape[1]):
        positive = negative = False
        for i in range(bits.shape[0]):
            positive |= bits[i, c] == 0
            negative |= bits[i, c] == 0x80000000
        if positive and negative:
            return True
    return False


@numba.njit(cache=True, inline="always")
def _put_value(out, at, bits, pow10, fallback, index):
    if index >= 0:  # NumPy's text, NUL-padded
        for b in range(fallback.shape[1]):
            c = fallback[index, b]
            if c == 0:
                break
            out[at] = c
            at += 1
        return at
    if bits >> 31:
        out[at] = 45  # '-'
        at += 1
    d, p, k = _digits(bits, pow10)
    if p == 0:
        out[at] = 48
        out[at + 1] = 46
        out[at + 2] = 48
        return at + 3
    if k < 0:
        out[at] = 48  # '0'
        out[at + 1] = 46  # '.'
        at += 2
        for _ in range(-k - 1):
            out[at] = 48
            at += 1
        for i in range(p):
            out[at + p - 1 - i] = 48 + d % 10
            d //= 10
        return at + p
    width = max(p, k + 1)  # digits before the point padded with zeros up to k + 1
    digits = d * pow10[width - p]
    first = at
    for i in range(width):
        out[first + width - 1 - i] = 48 + digits % 10
        digits //= 10
    # insert the point after k + 1 digits
    for i in range(width - 1, k, -1):
        out[first + i + 1] = out[first + i]
    out[first + k + 1] = 46
    if width == k + 1:
        out[first + k + 2] = 48
        return first + k + 3
    return first + width + 1


@numba.njit(cache=True)
def format_lines(rows, word_matrix, bits, fallback, fallback_index, out):
    """ARPA lines ``v0 TAB w1 SP .. wn [TAB v]* NL`` of word-id ``rows`` into ``out``
    (large enough); returns the bytes written. ``bits``: (n, columns) float32 bit
    patterns; ``fallback_index[i, c] >= 0``: write row ``fallback[...]`` (NumPy's text)."""
    n, order = rows.shape
    n_columns = bits.shape[1]
    width = word_matrix.shape[1]
    at = 0
    for i in range(n):
        at = _put_value(out, at, bits[i, 0], _POW10, fallback, fallback_index[i, 0])
        out[at] = 9
        at += 1
        for w in range(order):
            if w:
                out[at] = 32
                at += 1
            word = rows[i, w]
            for b in range(width):
                c = word_matrix[word, b]
                if c == 0:
                    break
                out[at] = c
                at += 1
        for c in range(1, n_columns):
            out[at] = 9
            at = _put_value(out, at + 1, bits[i, c], _POW10, fallback, fallback_index[i, c])
        out[at] = 10
        at += 1
    return at


varorder._numba_start.load_without_refresh(sys.modules[__name__])
