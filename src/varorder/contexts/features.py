"""n-gram indicator features over the ★-extended alphabet (Steinhardt & Liang 2015, eq. 6).

A context c_{i−1} together with the next label y_i is identified with a string
σ(c_{i−1}, y_i) over 𝒴 ∪ {★}: the symbols the context fixes, ★ where it leaves the
history free. An n-gram model looks at the last n symbols of σ (n−1 context slots plus
y_i); positions before the start of the sequence are a specified boundary symbol
``BOS`` when the context fixes the whole history, ★ otherwise. The feature vector is
one indicator per window pattern (eq. 6):

    φ(c_{i−1}, y_i) = ( 𝕀[σ(c_{i−1}, y_i)_{i−n+1:i} = ŷ] )_{ŷ ∈ (𝒴 ∪ {BOS, ★})^{n−1} × 𝒴}

so there are (V + 2)^{n−1} · V n-gram weights for V labels. With ``backoff=True`` a
pattern also fires the indicators of its shorter suffixes (the same pattern with its
first slots replaced by ★, down to the unigram ★…★y), which share statistics between
a long context and the short contexts that contain it; this option is an addition to
the paper and is off by default.

Encoding: slot symbols are 0…V−1 (labels), ``V`` (BOS) and ``V + 1`` (★); a window
pattern with slots s_1…s_{n−1} and label y has index ((s_1·(V+2) + s_2)·(V+2) + …)·V + y.
"""

from __future__ import annotations

import numpy as np

from varorder.errors import ParameterError

__all__ = ["NgramFeatureSpace"]


class NgramFeatureSpace:
    """Index arithmetic for the ★-extended n-gram patterns of one label set.

    Parameters
    ----------
    num_labels : V, the size of 𝒴.
    order : n, the n of the n-gram (context window n − 1 ≥ 1).
    backoff : also fire the starred-prefix suffix patterns (see module docstring).
    """

    def __init__(self, num_labels: int, order: int, backoff: bool = False):
        if int(num_labels) < 1:
            raise ParameterError(f"num_labels must be >= 1, got {num_labels}", name='num_labels', value=num_labels)
        if int(order) < 2:
            raise ParameterError(f"order must be >= 2 (a context of at least one symbol), got {order}", name='order', value=order)
        self.num_labels = int(num_labels)
        self.order = int(order)
        self.backoff = bool(backoff)

    @property
    def window(self) -> int:
        """Number of context slots, n − 1."""
        return self.order - 1

    @property
    def bos(self) -> int:
        return self.num_labels

    @property
    def star(self) -> int:
        return self.num_labels + 1

    @property
    def base(self) -> int:
        return self.num_labels + 2

    @property
    def size(self) -> int:
        """Number of n-gram weights, (V + 2)^{n−1} · V."""
        return self.base ** self.window * self.num_labels

    def pattern_index(self, slots, label) -> int:
        """Index of the pattern with context slots ``slots`` (codes) and label ``label``."""
        code = 0
        for s in slots:
            code = code * self.base + int(s)
        return code * self.num_labels + int(label)

    def pattern_string(self, index: int, alphabet=None) -> str:
        """Human-readable pattern, e.g. ``★ab|c`` (``^`` is BOS)."""
        alphabet = alphabet or [chr(ord("a") + v) if v < 26 else f"<{v}>" for v in range(self.num_labels)]
        code, label = divmod(int(index), self.num_labels)
        slots = []
        for _ in range(self.window):
            code, s = divmod(code, self.base)
            slots.append("★" if s == self.star else "^" if s == self.bos else alphabet[s])
        return "".join(reversed(slots)) + "|" + alphabet[label]

    def active_indices(self, patterns: np.ndarray, context_lengths: np.ndarray) -> np.ndarray:
        """Feature indices fired by arcs with full window patterns ``patterns`` (A,).

        ``context_lengths`` (A,) is the number of specified slots of each arc's source
        context (BOS included). Returns (A, R) indices; R = 1 without backoff, else
        n with −1 where a starred suffix repeats a shorter one.
        """
        patterns = np.asarray(patterns, dtype=np.int64)
        if not self.backoff:
            return patterns[:, None]
        lengths = np.minimum(np.asarray(context_lengths, dtype=np.int64), self.window)
        label = patterns % self.num_labels
        code = patterns // self.num_labels
        out = np.full((patterns.shape[0], self.window + 1), -1, dtype=np.int64)
        for kept in range(self.window + 1):  # keep the last `kept` slots, star the rest
            tail = code % self.base ** kept
            head = 0
            for _ in range(self.window - kept):
                head = head * self.base + self.star
            starred = (head * self.base ** kept + tail) * self.num_labels + label
            out[:, kept] = np.where(kept <= lengths, starred, -1)
        return out
