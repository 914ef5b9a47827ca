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

__all__ = ["NULL", "Vocabulary", "PairIndex", "BitextShard", "encode", "shard_bitext", "index_corpus"]

NULL = "<null>"


class Vocabulary:
    """Token ↔ id map; id 0 is :data:`NULL`."""

    def __init__(self, tokens=()):
        self.index = {NULL: 0}
        self.tokens = [NULL]
        for t in tokens:
            self.add(t)

    @classmethod
    def from_tokens(cls, tokens: list, where: str = "vocabulary") -> "Vocabulary":
        """The vocabulary whose ids are the positions in ``tokens`` (``tokens[0]`` must be NULL, none repeated)."""
        if not tokens or tokens[0] != NULL:
            raise ValueError(f"{where}: the first token must be {NULL!r}")
        self = cls.__new__(cls)
        self.tokens = [str(t) for t in tokens]
        self.index = {t: i for i, t in enumerate(self.tokens)}
        if len(self.index) != len(self.tokens):
            raise ValueError(f"{where}: {len(self.tokens) - len(self.index)} repeated tokens")
        return self

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

    @classmethod
    def from_sorted_unique(cls, keys) -> "PairIndex":
        """Wrap keys already sorted and unique (skips the np.unique of the constructor)."""
        self = cls.__new__(cls)
        self.keys = np.asarray(keys, dtype=np.int64)
        return self

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


_EMPTY = np.int64(-1)
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


@numba.njit(cache=True, inline="always")
def _slot(key, mask):
    # Fibonacci hashing: the high bits of key · 2^64/φ spread consecutive e/f ids well
    h = np.uint64(key) * _GOLDEN
    return np.int64((h >> np.uint64(32)) ^ (h & np.uint64(0xFFFFFFFF))) & mask


@numba.njit(cache=True)
def _rehash(slots_key, slots_id, capacity):
    new_key = np.full(capacity, _EMPTY, dtype=np.int64)
    new_id = np.empty(capacity, dtype=np.int64)
    mask = capacity - 1
    for k in range(slots_key.size):
        key = slots_key[k]
        if key == _EMPTY:
            continue
        h = _slot(key, mask)
        while new_key[h] != _EMPTY:
            h = (h + 1) & mask
        new_key[h] = key
        new_id[h] = slots_id[k]
    return new_key, new_id


@numba.njit(cache=True)
def _first_seen_ids(keys, slots_key, slots_id, seen, n_seen, out):
    """Number word-pair keys in order of first occurrence (open addressing, linear probing).

    ``seen[:n_seen]`` holds the keys numbered so far; the table grows to keep its load ≤ 1/2.
    Returns the (possibly reallocated) table, ``seen`` and the new count; ``out`` gets the
    numbers (−1 for the key −1: an edge touching an unknown word).
    """
    mask = slots_key.size - 1
    for k in range(keys.size):
        key = keys[k]
        if key < 0:
            out[k] = -1
            continue
        h = _slot(key, mask)
        while slots_key[h] != _EMPTY and slots_key[h] != key:
            h = (h + 1) & mask
        if slots_key[h] == key:
            out[k] = slots_id[h]
            continue
        slots_key[h] = key
        slots_id[h] = n_seen
        if n_seen == seen.size:
            grown = np.empty(2 * seen.size, dtype=np.int64)
            grown[:n_seen] = seen[:n_seen]
            seen = grown
        seen[n_seen] = key
        out[k] = n_seen
        n_seen += 1
        if 2 * n_seen > slots_key.size:
            slots_key, slots_id = _rehash(slots_key, slots_id, 2 * slots_key.size)
            mask = slots_key.size - 1
    return slots_key, slots_id, seen, n_seen


@numba.njit(cache=True, parallel=True)
def _renumber(first_seen, rank, out):
    for k in numba.prange(first_seen.size):
        v = first_seen[k]
        out[k] = rank[v] if v >= 0 else -1


def index_corpus(shards) -> "PairIndex":
    """The :class:`PairIndex` of every word pair co-occurring in ``shards``; sets each shard's ``edge_pairs``.

    Same result as ``PairIndex(all edge keys)`` followed by :meth:`BitextShard.index_pairs`,
    but one hashing pass over the edges instead of sorting them and binary-searching
    each one (the difference is seconds per million sentence pairs).
    """
    capacity = 1 << 16
    slots_key = np.full(capacity, _EMPTY, dtype=np.int64)
    slots_id = np.empty(capacity, dtype=np.int64)
    seen = np.empty(capacity, dtype=np.int64)
    n_seen = 0
    first_seen = []
    for shard in shards:
        ids = np.empty(int(shard.edge_offsets[-1]), dtype=np.int32)
        slots_key, slots_id, seen, n_seen = _first_seen_ids(shard.edge_keys(), slots_key, slots_id, seen, n_seen,
                                                            ids)
        first_seen.append(ids)
    keys = seen[:n_seen]
    order = np.argsort(keys, kind="stable")
    rank = np.empty(n_seen, dtype=np.int32)
    rank[order] = np.arange(n_seen, dtype=np.int32)
    for shard, ids in zip(shards, first_seen):
        _renumber(ids, rank, ids)  # in place: each entry is read before it is overwritten
        shard.edge_pairs = ids
    return PairIndex.from_sorted_unique(keys[order])


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
