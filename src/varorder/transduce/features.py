"""Feature space of the alignment model p(y, z | x) (Steinhardt & Liang 2015, §4.2).

An input x_{1:L′} (phonemes) is mapped to an output y_{1:L} (letters, then an end
symbol) through a monotone alignment z. Each output letter y_i takes one *move* m_i:

* m_i = 0 ("share"): y_i aligns to the phoneme y_{i−1} last aligned to;
* m_i = k ≥ 1 ("advance k"): y_i aligns to the next k phonemes.

A share is allowed only after a letter aligned to a single phoneme, so no edge joins a
letter of degree > 1 to a phoneme of degree > 1 (one phoneme to several letters, or one
letter to several phonemes, never both); the first letter advances; the end symbol is
allowed once every phoneme is covered. Such move sequences are exactly the non-crossing
bipartite graphs with every node of degree ≥ 1 of §4.2 (with at most ``max_advance``
phonemes per letter). An *edge* is a (phoneme, letter) pair.

Features φ(c_{i−1}, (y_i, m_i)) (all indicators):

* output n-gram over the ★-extended letters (paper eq. 6): the last n − 1 letters the
  context fixes (BOS before the start when it fixes the whole history, ★ where it does
  not), then y_i (or END);
* alignment n-gram: for every edge the step creates, the n − 1 previous edges (read
  through the context in the same ★/BOS way) and the new edge;
* optional edge unigrams (``edge_unigrams``, off by default; our extension): the (phoneme, letter)
  indicator of every new edge. This is the "simple observation feature" the issue
  allows: with contexts that grow to the whole history, an n-gram pattern is seen once
  per training word, and the unigram lets the phoneme → letter correspondence
  generalise across contexts. Off (the default) gives the paper's n-gram-only
  featurisation;
* optional backoff (``backoff``, off by default; our extension, not in the paper): the
  same output and alignment patterns at every lower order k = 1 … n − 1 (the last
  k − 1 slots of the same ★/BOS-extended history, then the new letter or edge), each
  order its own indicator block. A 5-gram pattern of an unseen word has no trained
  weight; its lower-order patterns do (the letter-unigram END and the short letter
  and edge patterns), so the model's length and spelling generalise past the
  training words.

Indexing: exact (kind offset + mixed-radix code) when the three blocks fit in
2^``hash_bits`` weights, otherwise the n-gram blocks are hashed into the buckets after
the (always exact) edge-unigram block (feature hashing; the 5-gram spaces of CMUdict
have ~10^15 patterns, very few of which ever fire).
"""

from __future__ import annotations

from varorder.errors import ParameterError

__all__ = ["AlignmentFeatureSpace"]


class AlignmentFeatureSpace:
    """Sizes and index mode of the alignment model's features.

    Parameters
    ----------
    num_letters : V, output letters (the end symbol is label V).
    num_phonemes : P, input symbols.
    order : n of the output and alignment n-grams (≥ 2).
    max_advance : M, the most phonemes one letter may align to.
    hash_bits : weights are a table of 2^hash_bits entries.
    edge_unigrams : also fire the (phoneme, letter) indicator of every new edge.
    backoff : also fire the output and alignment patterns of every order 1 … n − 1.

    Feature kinds (blocks): 0 output n-gram, 1 alignment n-gram, 2 edge unigram, and
    with backoff 3 + 2(k − 1) output k-gram, 4 + 2(k − 1) alignment k-gram, k < n.
    """

    def __init__(self, num_letters: int, num_phonemes: int, order: int = 5, max_advance: int = 3,
                 hash_bits: int = 22, edge_unigrams: bool = False, backoff: bool = False):
        if int(num_letters) < 1 or int(num_phonemes) < 1:
            raise ParameterError(f"num_letters and num_phonemes must be >= 1, got {num_letters}, {num_phonemes}", name='num_letters', value=num_letters)
        if int(order) < 2:
            raise ParameterError(f"order must be >= 2, got {order}", name='order', value=order)
        if int(max_advance) < 1:
            raise ParameterError(f"max_advance must be >= 1, got {max_advance}", name='max_advance', value=max_advance)
        if not 4 <= int(hash_bits) <= 30:
            raise ParameterError(f"hash_bits must be in [4, 30], got {hash_bits}", name='hash_bits', value=hash_bits)
        self.num_letters = int(num_letters)
        self.num_phonemes = int(num_phonemes)
        self.order = int(order)
        self.max_advance = int(max_advance)
        self.hash_bits = int(hash_bits)
        self.edge_unigrams = bool(edge_unigrams)
        self.backoff = bool(backoff)

    @property
    def size(self) -> int:
        return 1 << self.hash_bits

    @property
    def num_moves(self) -> int:
        """Moves 0 (share) … M (advance M)."""
        return self.max_advance + 1

    @property
    def end_label(self) -> int:
        """Arc label of the end symbol; letter y with move m is label y·(M + 1) + m."""
        return self.num_letters * self.num_moves

    @property
    def arc_features(self) -> int:
        """Feature slots per arc: one output n-gram, M alignment n-grams, M edge unigrams,
        then (backoff) n − 1 lower-order output patterns and M·(n − 1) alignment ones."""
        M, lower = self.max_advance, self.order - 1
        return 1 + 2 * M + ((1 + M) * lower if self.backoff else 0)

    def block_sizes(self) -> tuple[int, ...]:
        """Exact size of every feature kind's block (see the class docstring for the kinds)."""
        V, E, w = self.num_letters, self.num_phonemes * self.num_letters, self.order - 1
        sizes = [(V + 2) ** w * (V + 1), (E + 2) ** w * E, E if self.edge_unigrams else 0]
        for k in range(1, self.order):
            on = self.backoff
            sizes += [(V + 2) ** (k - 1) * (V + 1) if on else 0, (E + 2) ** (k - 1) * E if on else 0]
        return tuple(sizes)

    @property
    def hashed(self) -> bool:
        return sum(self.block_sizes()) > self.size

    def letter_code(self, history, label) -> int:
        """Output n-gram (or k-gram) code: ``history`` n − 1 (k − 1) slot codes (letters, V = BOS, V + 1 = ★), then the label."""
        code = 0
        for s in history:
            code = code * (self.num_letters + 2) + int(s)
        return code * (self.num_letters + 1) + int(label)

    def edge_symbol(self, phoneme, letter) -> int:
        return int(phoneme) * self.num_letters + int(letter)

    def edge_code(self, history, edge) -> int:
        """Alignment n-gram (or k-gram) code: n − 1 (k − 1) edge slot codes (edges, E = BOS, E + 1 = ★), then the new edge."""
        E = self.num_phonemes * self.num_letters
        code = 0
        for s in history:
            code = code * (E + 2) + int(s)
        return code * E + int(edge)

    def offsets(self):
        """Start of each kind's block in the weights.

        Exact: the blocks one after the other. Hashed: the (small) edge-unigram block
        stays exact at the front and every other kind hashes into the rest.
        """
        import numpy as np

        sizes = self.block_sizes()
        if self.hashed:
            out = np.full(len(sizes), sizes[2], dtype=np.int64)
            out[2] = 0
            return out
        return np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)

    def backoff_kind(self, alignment: bool, k: int) -> int:
        """Kind of the order-k (1 ≤ k < n) output (``alignment`` False) or alignment pattern."""
        if not 1 <= int(k) < self.order:
            raise ParameterError(f"backoff order must be in [1, {self.order}), got {k}", name='k', value=k)
        return 3 + 2 * (int(k) - 1) + int(bool(alignment))

    def exact_index(self, kind: int, code: int) -> int:
        """Weight index of an exact (unhashed) feature of ``kind`` (0 output, 1 alignment, 2 edge unigram,
        :meth:`backoff_kind` for the lower orders)."""
        if self.hashed:
            raise ParameterError("this feature space is hashed; exact indices do not exist")
        return int(self.offsets()[kind]) + int(code)

    def params(self) -> dict:
        return {"num_letters": self.num_letters, "num_phonemes": self.num_phonemes, "order": self.order,
                "max_advance": self.max_advance, "hash_bits": self.hash_bits, "edge_unigrams": self.edge_unigrams,
                "backoff": self.backoff}
