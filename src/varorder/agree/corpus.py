"""Integer-coded parallel text for the word aligners.

A :class:`Vocabulary` maps tokens to ids (id 0 is the NULL word). A
:class:`BitextShard` holds sentence pairs as flat id arrays with offsets, and
the *edges* (i, j) of every pair — English position i, French position j — laid
out English-major: edge (i, j) of pair s is ``edge_offsets[s] + i·J_s + j``.
Each edge carries the index of its word pair (e, f) in a :class:`PairIndex`
(−1 when the pair is not in the index), so translation tables are flat arrays
over co-occurring word pairs, shared by both directions.

Memory: 4 + 4 bytes per token and 8 bytes per edge (the pair index), plus the
tables: a pair with |e| = |f| = 15 costs about 2 KB.
"""

from __future__ import annotations

from dataclasses import dataclass

import numba
import numpy as np

__all__ = ["NULL", "Vocabulary", "PairIndex", "BitextShard", "encode", "shard_bitext"]

NULL = "<null>"


class Vocabulary:
    """Token ↔ id map; id 0 is :data:`NULL`."""

    def __init__(self, tokens=()):
        self.index = {NULL: 0}
        self.tokens = [NULL]
        for t in tokens:
            self.add(t)

    def add(self, token: str) -> int:
        i = self.index.get(token)
        if i is None:
            i = self.index[token] = len(self.tokens)
            self.tokens.append(token)
        return i

    def encode(self, tokens, grow: bool = True) -> np.ndarray:
        if grow:
            return np.fromiter((self.add(t) for t in tokens), dtype=np.int32, count=len(tokens))
        # unknown words get id −1: no word pair contains them, so they fall back to the table floor
        return np.fromiter((self.index.get(t, -1) for t in tokens), dtype=np.int32, count=len(tokens))

    def __len__(self):
        return len(self.tokens)


def pair_keys(e_ids, f_ids):
    """int64 key of word pairs (e, f): e in the high 32 bits."""
    return (np.asarray(e_ids, dtype=np.int64) << 32) | np.asarray(f_ids, dtype=np.int64)


class PairIndex:
    """Sorted unique (e, f) word-pair keys; position in ``keys`` is the pair's index."""

    def __init__(self, keys):
        self.keys = np.unique(np.asarray(keys, dtype=np.int64))

    def __len__(self):
        return self.keys.size

    @property
    def e_ids(self):
        return (self.keys >> 32).astype(np.int64)

    @property
    def f_ids(self):
        return (self.keys & 0xFFFFFFFF).astype(np.int64)

    def lookup(self, keys) -> np.ndarray:
        keys = np.asarray(keys, dtype=np.int64)
        pos = np.searchsorted(self.keys, keys)
        pos = np.minimum(pos, max(self.keys.size - 1, 0))
        hit = (self.keys.size > 0) & (self.keys[pos] == keys) if self.keys.size else np.zeros(keys.shape, bool)
        return np.where(hit, pos, -1).astype(np.int64)


@numba.njit(cache=True)
def _edge_keys(e_ids, e_off, f_ids, f_off, edge_off):
    out = np.empty(edge_off[-1], dtype=np.int64)
    for s in range(e_off.size - 1):
        I = e_off[s + 1] - e_off[s]
        J = f_off[s + 1] - f_off[s]
        base = edge_off[s]
        for i in range(I):
            e = e_ids[e_off[s] + i]
            for j in range(J):
                f = f_ids[f_off[s] + j]
                if e < 0 or f < 0:
                    out[base + i * J + j] = -1
                else:
                    out[base + i * J + j] = (np.int64(e) << 32) | np.int64(f)
    return out


@dataclass
class BitextShard:
    """Sentence pairs as flat arrays; see the module docstring for the edge layout."""

    e_ids: np.ndarray
    e_offsets: np.ndarray
    f_ids: np.ndarray
    f_offsets: np.ndarray
    edge_offsets: np.ndarray
    edge_pairs: np.ndarray | None = None

    @property
    def n_sentences(self) -> int:
        return self.e_offsets.size - 1

    @property
    def e_lengths(self):
        return np.diff(self.e_offsets)

    @property
    def f_lengths(self):
        return np.diff(self.f_offsets)

    def edge_keys(self) -> np.ndarray:
        return _edge_keys(self.e_ids, self.e_offsets, self.f_ids, self.f_offsets, self.edge_offsets)

    def index_pairs(self, pairs: PairIndex) -> "BitextShard":
        keys = self.edge_keys()
        self.edge_pairs = np.where(keys >= 0, pairs.lookup(keys), -1).astype(np.int32)
        return self

    def nbytes(self) -> int:
        arrays = [self.e_ids, self.e_offsets, self.f_ids, self.f_offsets, self.edge_offsets]
        if self.edge_pairs is not None:
            arrays.append(self.edge_pairs)
        return int(sum(a.nbytes for a in arrays))


def encode(pairs, e_vocab: Vocabulary, f_vocab: Vocabulary, grow: bool = True) -> BitextShard:
    """Encode a list of (english tokens, french tokens) pairs into one shard."""
    e_parts, f_parts = [], []
    for e, f in pairs:
        e_parts.append(e_vocab.encode(e, grow))
        f_parts.append(f_vocab.encode(f, grow))
    e_len = np.array([p.size for p in e_parts], dtype=np.int64)
    f_len = np.array([p.size for p in f_parts], dtype=np.int64)
    cat = lambda parts: np.concatenate(parts).astype(np.int32) if parts else np.zeros(0, np.int32)  # noqa: E731
    return BitextShard(
        e_ids=cat(e_parts),
        e_offsets=np.concatenate([[0], np.cumsum(e_len)]).astype(np.int64),
        f_ids=cat(f_parts),
        f_offsets=np.concatenate([[0], np.cumsum(f_len)]).astype(np.int64),
        edge_offsets=np.concatenate([[0], np.cumsum(e_len * f_len)]).astype(np.int64),
    )


def shard_bitext(pairs, e_vocab: Vocabulary, f_vocab: Vocabulary, shard_size: int = 20000, grow: bool = True):
    """Encode pairs into shards of at most ``shard_size`` sentence pairs."""
    pairs = list(pairs)
    if shard_size < 1:
        raise ValueError(f"shard_size must be >= 1, got {shard_size}")
    return [encode(pairs[k:k + shard_size], e_vocab, f_vocab, grow) for k in range(0, len(pairs), shard_size)]
