"""Integer-coded parallel text for the word aligners.

A :class:`Vocabulary` maps tokens to ids (id 0 is the NULL word). A
:class:`BitextShard` holds sentence pairs as flat id arrays with offsets, and
the *edges* (i, j) of every pair — English position i, French position j — laid
out English-major: edge (i, j) of pair s is ``edge_offsets[s] + i·J_s + j``.
Each edge has the index of its word pair (e, f) in a :class:`PairIndex`
(−1 when the pair is not in the index), so translation tables are flat arrays
over co-occurring word pairs, shared by both directions.

Memory: 4 bytes per token and nothing per edge: an edge's pair is found when an E-step needs it,
one shard at a time (:meth:`BitextShard.pair_scope`), by binary search for its French word in the
sorted row of its English word in the pair index (the rows are already kept as int32 French ids);
the pair index adds 4 bytes per distinct word pair, and its longest rows' direct maps at most half
that again (:meth:`PairIndex._direct_rows`). :func:`encode_bitext` encodes a stream of
pairs one pair at a time into flat id buffers, so no more than one pair's token lists is ever held.
"""

from __future__ import annotations

import warnings
from array import array
from contextlib import contextmanager
from dataclasses import dataclass

import numba
import numpy as np

from varorder.engine.threads import parallel_kernel
from varorder.errors import FormatError, ParameterError

__all__ = ["NULL", "Vocabulary", "PairIndex", "BitextShard", "EncodedBitext", "encode", "shard_bitext",
           "encode_bitext", "index_corpus"]

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
            raise FormatError(f"{where}: the first token must be {NULL!r}")
        self = cls.__new__(cls)
        self.tokens = [str(t) for t in tokens]
        self.index = {t: i for i, t in enumerate(self.tokens)}
        if len(self.index) != len(self.tokens):
            raise FormatError(f"{where}: {len(self.tokens) - len(self.index)} repeated tokens")
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


_EMPTY = np.int64(-1)
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


@numba.njit(cache=True, inline="always")
def _slot(key, mask):
    # Fibonacci hashing: the high bits of key · 2^64/φ spread consecutive e/f ids well
    h = np.uint64(key) * _GOLDEN
    return np.int64((h >> np.uint64(32)) ^ (h & np.uint64(0xFFFFFFFF))) & mask


_ABSENT = 0xFFFF  # a direct row's entry for a French word not paired with its English word


@parallel_kernel(lambda e_ids, e_off, *_: e_off.size - 1, cache=True)
def _search_pair_ids(e_ids, e_off, f_ids, f_off, edge_off, rows, f_words, direct_of, direct):
    """Rank of every edge's pair (e, f) among the pairs (−1: an edge touching an unknown word, or a pair not
    indexed): read from ``direct[direct_of[e], f]`` (f's offset in e's row) for the few longest rows,
    found by binary search for f in the sorted row of e for the others. No per-edge array outlives the call."""
    out = np.empty(edge_off[-1], dtype=np.int32)
    n_e = rows.size - 1
    n_direct_f = direct.shape[1]
    for s in numba.prange(e_off.size - 1):
        J = f_off[s + 1] - f_off[s]
        for i in range(e_off[s + 1] - e_off[s]):
            e = e_ids[e_off[s] + i]
            first = edge_off[s] + i * J
            if e < 0 or e >= n_e:
                out[first:first + J] = -1
                continue
            row_start, row_end = rows[e], rows[e + 1]
            d = direct_of[e]
            for j in range(J):
                f = f_ids[f_off[s] + j]
                if d >= 0:
                    at = direct[d, f] if 0 <= f < n_direct_f else _ABSENT
                    out[first + j] = -1 if at == _ABSENT else row_start + at
                    continue
                lo, hi = row_start, row_end
                while lo < hi:
                    mid = (lo + hi) >> 1
                    if f_words[mid] < f:
                        lo = mid + 1
                    else:
                        hi = mid
                out[first + j] = lo if lo < row_end and f_words[lo] == f else -1
    return out


@numba.njit(cache=True)
def _row_starts(keys):
    """rows[e] = position of English word e's first pair in the sorted keys (rows[e + 1] past its last)."""
    n_e = (keys[-1] >> 32) + 1 if keys.size else 0
    rows = np.zeros(n_e + 1, dtype=np.int64)
    for k in range(keys.size):
        rows[(keys[k] >> 32) + 1] += 1
    for e in range(n_e):
        rows[e + 1] += rows[e]
    return rows


@numba.njit(cache=True)
def _keys_of_rows(rows, f_words):
    keys = np.empty(f_words.size, dtype=np.int64)
    for e in range(rows.size - 1):
        for r in range(rows[e], rows[e + 1]):
            keys[r] = (np.int64(e) << 32) | np.int64(f_words[r])
    return keys


class PairIndex:
    """Sorted unique (e, f) word pairs; a pair's rank in that order is its index.

    Kept as compressed rows rather than 64-bit keys (e in the high 32 bits, f in the low): the
    French words ``f_words`` (int32, ascending within each row) and the start of each English
    word's row, ``rows()`` — half the bytes of the keys, which :attr:`keys` rebuilds on demand
    (saving, binary search). :meth:`edge_pair_ids` finds the pair ids of a shard's edges from its
    token ids by binary search in the rows; the longest rows (the frequent English words, ~60% of
    a corpus's edges) are also kept as direct maps French word → offset in the row (2 bytes per
    French word each, at most half the bytes of ``f_words`` in all: 4.6 MB at 100k pairs), which
    more than halves the search time.
    """

    def __init__(self, keys):
        self._set_keys(np.unique(np.asarray(keys, dtype=np.int64)))

    @classmethod
    def from_sorted_unique(cls, keys) -> "PairIndex":
        """Wrap keys already sorted and unique (skips the np.unique of the constructor)."""
        self = cls.__new__(cls)
        self._set_keys(np.asarray(keys, dtype=np.int64))
        return self

    def _set_keys(self, keys):
        if keys.size and (keys[0] < 0 or int((keys & 0xFFFFFFFF).max()) > np.iinfo(np.int32).max):
            raise ParameterError("word-pair keys must hold non-negative 32-bit word ids", name='keys', value=keys)
        self._rows = _row_starts(keys)
        self.f_words = (keys & 0xFFFFFFFF).astype(np.int32)

    def __len__(self):
        return self.f_words.size

    @property
    def keys(self) -> np.ndarray:
        """int64 key of every pair, e in the high 32 bits (a new array on each access)."""
        return _keys_of_rows(self._rows, self.f_words)

    @property
    def e_ids(self):
        return np.repeat(np.arange(self._rows.size - 1, dtype=np.int64), np.diff(self._rows))

    @property
    def f_ids(self):
        return self.f_words.astype(np.int64)

    def lookup(self, keys) -> np.ndarray:
        """Index of each key by binary search (−1 when absent)."""
        keys = np.asarray(keys, dtype=np.int64)
        mine = self.keys
        pos = np.searchsorted(mine, keys)
        pos = np.minimum(pos, max(mine.size - 1, 0))
        hit = (mine.size > 0) & (mine[pos] == keys) if mine.size else np.zeros(keys.shape, bool)
        return np.where(hit, pos, -1).astype(np.int64)

    def __getstate__(self):
        # workers rebuild the direct rows rather than receive them
        state = dict(self.__dict__)
        state.pop("_direct", None)
        return state

    def _direct_rows(self):
        """(row → direct map or −1, direct maps): the rows of at least 1/16 of the French words, longest first,
        while the maps stay within half the bytes of ``f_words``; none past 65,535 French words (2-byte maps)."""
        direct = getattr(self, "_direct", None)
        if direct is None:
            lengths = np.diff(self._rows)
            n_f = int(self.f_words.max()) + 1 if self.f_words.size else 0
            budget = min(self.f_words.nbytes // 2 // max(2 * n_f, 1), lengths.size) if n_f < _ABSENT else 0
            longest = np.argsort(-lengths, kind="stable")[:budget]
            longest = longest[lengths[longest] >= max(n_f // 16, 1)]
            direct_of = np.full(lengths.size, -1, dtype=np.int32)
            maps = np.full((longest.size, n_f if longest.size else 0), _ABSENT, dtype=np.uint16)
            for d, e in enumerate(longest):
                direct_of[e] = d
                maps[d, self.f_words[self._rows[e]:self._rows[e + 1]]] = np.arange(lengths[e], dtype=np.uint16)
            direct = self._direct = (direct_of, maps)
        return direct

    def rows(self) -> np.ndarray:
        """Start of each English word's row of pairs (see :func:`_row_starts`)."""
        return self._rows

    def edge_pair_ids(self, shard: "BitextShard") -> np.ndarray:
        """int32 pair id of every edge of ``shard`` (−1 for pairs not in the index)."""
        return _search_pair_ids(shard.e_ids, shard.e_offsets, shard.f_ids, shard.f_offsets, shard.edge_offsets,
                                self._rows, self.f_words, *self._direct_rows())


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
    """Sentence pairs as flat arrays; see the module docstring for the edge layout.

    ``edge_pairs`` (int32 pair id per edge) is either stored as such (:meth:`index_pairs`, or
    assigned) or, once the shard is attached to a :class:`PairIndex` (:func:`index_corpus`,
    :meth:`attach`), not kept at all: found by binary search in the index on each access — once
    per E-step inside :meth:`pair_scope`.
    """

    e_ids: np.ndarray
    e_offsets: np.ndarray
    f_ids: np.ndarray
    f_offsets: np.ndarray
    edge_offsets: np.ndarray

    def __post_init__(self):
        self._stored = None  # int32 edge pair ids kept with the shard
        self._index = None  # or: the PairIndex the ids are searched in on each access
        self._scoped = None  # ids searched for the current pair_scope

    @property
    def n_sentences(self) -> int:
        return self.e_offsets.size - 1

    @property
    def e_lengths(self):
        return np.diff(self.e_offsets)

    @property
    def f_lengths(self):
        return np.diff(self.f_offsets)

    @property
    def edge_pairs(self) -> np.ndarray | None:
        if self._stored is not None:
            return self._stored
        if self._scoped is not None:
            return self._scoped
        if self._index is not None:
            return self._index.edge_pair_ids(self)
        return None

    @edge_pairs.setter
    def edge_pairs(self, value):
        self._stored, self._index = value, None

    @contextmanager
    def pair_scope(self):
        """Search the edges' pair ids once for the block (an E-step reads them several times)."""
        if self._index is None or self._scoped is not None:
            yield self
            return
        self._scoped = self.edge_pairs
        try:
            yield self
        finally:
            self._scoped = None

    estep_scope = pair_scope  # the hook :mod:`varorder.agree.product_em` opens around a shard's E-step

    def attach(self, pairs: PairIndex) -> "BitextShard":
        """Read every edge's pair id from ``pairs`` from now on (searched on each access, nothing stored)."""
        self._stored, self._index = None, pairs
        return self

    @property
    def attached_to(self):
        """The :class:`PairIndex` the shard was attached to (None: ids assigned or none)."""
        return self._index

    def edge_keys(self) -> np.ndarray:
        return _edge_keys(self.e_ids, self.e_offsets, self.f_ids, self.f_offsets, self.edge_offsets)

    def index_pairs(self, pairs: PairIndex) -> "BitextShard":
        """Store every edge's pair id, found by binary search in ``pairs``."""
        keys = self.edge_keys()
        self.edge_pairs = np.where(keys >= 0, pairs.lookup(keys), -1).astype(np.int32)
        return self

    def __getstate__(self):
        # a shard sent to another process carries its pair ids, not the whole index
        state = dict(self.__dict__)
        if state["_index"] is not None:
            state["_stored"] = self.edge_pairs
        state["_index"] = state["_scoped"] = None
        return state

    def nbytes(self) -> int:
        arrays = [self.e_ids, self.e_offsets, self.f_ids, self.f_offsets, self.edge_offsets]
        arrays += [self._stored] if self._stored is not None else []
        return int(sum(a.nbytes for a in arrays))


@numba.njit(cache=True)
def _grow_set(table, capacity):
    grown = np.full(capacity, _EMPTY, dtype=np.int64)
    mask = capacity - 1
    for k in range(table.size):
        key = table[k]
        if key == _EMPTY:
            continue
        h = _slot(key, mask)
        while grown[h] != _EMPTY:
            h = (h + 1) & mask
        grown[h] = key
    return grown


@numba.njit(cache=True)
def _add_pairs(e_ids, e_off, f_ids, f_off, table, n):
    """Insert every (e, f) key of the shard's sentence pairs into the open-addressing set ``table``
    (load kept ≤ ½, growing as needed); returns the table and its new count."""
    mask = table.size - 1
    for s in range(e_off.size - 1):
        for i in range(e_off[s], e_off[s + 1]):
            e = e_ids[i]
            if e < 0:
                continue
            for j in range(f_off[s], f_off[s + 1]):
                f = f_ids[j]
                if f < 0:
                    continue
                key = (np.int64(e) << 32) | np.int64(f)
                h = _slot(key, mask)
                while table[h] != _EMPTY and table[h] != key:
                    h = (h + 1) & mask
                if table[h] == key:
                    continue
                table[h] = key
                n += 1
                if 2 * n > table.size:
                    table = _grow_set(table, 2 * table.size)
                    mask = table.size - 1
    return table, n


def index_corpus(shards) -> "PairIndex":
    """The :class:`PairIndex` of every word pair co-occurring in ``shards``; attaches it to each shard.

    Same keys as ``PairIndex(all edge keys)``, from one hashing pass over the token ids (no
    per-edge array of keys); the shards then search their edges' pairs in it (:meth:`BitextShard.attach`).
    """
    table = np.full(1 << 16, _EMPTY, dtype=np.int64)
    n = 0
    for shard in shards:
        table, n = _add_pairs(shard.e_ids, shard.e_offsets, shard.f_ids, shard.f_offsets, table, n)
    keys = table[table != _EMPTY]
    del table
    keys.sort()
    index = PairIndex.from_sorted_unique(keys)
    del keys  # the index keeps half of them (rows of French ids)
    for shard in shards:
        shard.attach(index)
    return index


def _shard_from_buffers(e_ids: array, e_len: array, f_ids: array, f_len: array) -> BitextShard:
    e_len_np = np.frombuffer(e_len, dtype=np.int64) if len(e_len) else np.zeros(0, np.int64)
    f_len_np = np.frombuffer(f_len, dtype=np.int64) if len(f_len) else np.zeros(0, np.int64)
    ids = lambda buf: np.frombuffer(buf, dtype=np.int32).copy() if len(buf) else np.zeros(0, np.int32)  # noqa: E731
    offsets = lambda lengths: np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)  # noqa: E731
    return BitextShard(e_ids=ids(e_ids), e_offsets=offsets(e_len_np), f_ids=ids(f_ids), f_offsets=offsets(f_len_np),
                       edge_offsets=offsets(e_len_np * f_len_np))


def _coder(vocab: Vocabulary, grow: bool):
    """tokens → list of ids: known tokens looked up by ``dict.get`` over the whole list (no Python call per
    token); the rare others then added (``grow``) or given id −1 — no word pair contains them, so they
    fall back to the table floor."""
    get, add = vocab.index.get, vocab.add

    def code(tokens):
        ids = list(map(get, tokens))
        if None in ids:
            for k, i in enumerate(ids):
                if i is None:
                    ids[k] = add(tokens[k]) if grow else -1
        return ids

    return code


def _iter_shards(pairs, e_vocab: Vocabulary, f_vocab: Vocabulary, shard_size: int | None, grow: bool):
    """Shards of at most ``shard_size`` pairs (None: one shard), each pair encoded as it is read.

    Token ids go straight into flat buffers: no pair's token lists outlive it, so a streamed corpus
    never holds more than one pair as Python strings (holding a shard's worth of token lists at once
    left ~30 MB of half-empty allocator arenas behind at 100k pairs)."""
    e_code, f_code = _coder(e_vocab, grow), _coder(f_vocab, grow)
    buffers = array("i"), array("q"), array("i"), array("q")
    for e, f in pairs:
        e_ids, e_len, f_ids, f_len = buffers
        e_ids.extend(e_code(e))
        f_ids.extend(f_code(f))
        e_len.append(len(e))
        f_len.append(len(f))
        if shard_size is not None and len(e_len) == shard_size:
            yield _shard_from_buffers(*buffers)
            buffers = array("i"), array("q"), array("i"), array("q")
    if len(buffers[1]):
        yield _shard_from_buffers(*buffers)


def encode(pairs, e_vocab: Vocabulary, f_vocab: Vocabulary, grow: bool = True) -> BitextShard:
    """Encode a list of (english tokens, french tokens) pairs into one shard."""
    for shard in _iter_shards(pairs, e_vocab, f_vocab, None, grow):
        return shard
    return _shard_from_buffers(array("i"), array("q"), array("i"), array("q"))


def shard_bitext(pairs, e_vocab: Vocabulary, f_vocab: Vocabulary, shard_size: int = 20000, grow: bool = True):
    """Encode pairs (any iterable, read once, one pair at a time) into shards of at most ``shard_size`` pairs."""
    if shard_size < 1:
        raise ParameterError(f"shard_size must be >= 1, got {shard_size}", name='shard_size', value=shard_size)
    return list(_iter_shards(pairs, e_vocab, f_vocab, shard_size, grow))


class EncodedBitext:
    """A bitext encoded into shards against two vocabularies (:func:`encode_bitext`).

    Stands in for the list of token pairs wherever :class:`~varorder.agree.aligner.WordAligner`
    takes one, without the Python token lists (4 bytes per token instead of ~40).
    """

    def __init__(self, shards, e_vocab: Vocabulary, f_vocab: Vocabulary, origin=None):
        self.shards = list(shards)
        self.e_vocab = e_vocab
        self.f_vocab = f_vocab
        # None, or (pair index, English offset, French offset) per encoded piece when a length
        # guard cut long pairs (:func:`cut_long_pairs`)
        self.origin = origin

    def __len__(self):
        if self.origin is not None:
            return int(self.origin[0][-1]) + 1 if len(self.origin[0]) else 0
        return sum(s.n_sentences for s in self.shards)

    def lengths(self) -> tuple[np.ndarray, np.ndarray]:
        """Tokens per pair: (English lengths, French lengths)."""
        cat = lambda parts: np.concatenate(parts) if parts else np.zeros(0, np.int64)  # noqa: E731
        return cat([s.e_lengths for s in self.shards]), cat([s.f_lengths for s in self.shards])

    def token_counts(self) -> tuple[np.ndarray, np.ndarray]:
        """Occurrences of every vocabulary id (English, French); unknown tokens (id −1) are not counted."""
        out = []
        for side, vocab in (("e_ids", self.e_vocab), ("f_ids", self.f_vocab)):
            counts = np.zeros(len(vocab), dtype=np.int64)
            for s in self.shards:
                ids = getattr(s, side)
                counts += np.bincount(ids[ids >= 0], minlength=len(vocab))
            out.append(counts)
        return out[0], out[1]

    def unknown_tokens(self) -> tuple[int, int]:
        """Tokens with id −1 (not in the vocabulary): (English, French)."""
        return (int(sum((s.e_ids < 0).sum() for s in self.shards)),
                int(sum((s.f_ids < 0).sum() for s in self.shards)))


class LongPairWarning(UserWarning):
    """A sentence pair was cut into pieces by a ``max_length`` guard."""


def cut_long_pairs(pairs, max_length: int, origin: tuple):
    """Yield the pairs with every pair longer than ``max_length`` words on a side cut into
    ⌈longest side / max_length⌉ consecutive pieces at proportional positions (the diagonal).

    Appends, per yielded piece, its pair index and English / French offsets to the three
    ``array('q')`` of ``origin``, so that results on pieces can be put back together.
    """
    index_of, e_offset, f_offset = origin
    for index, (e, f) in enumerate(pairs):
        if len(e) <= max_length and len(f) <= max_length:  # one piece: the pair itself
            index_of.append(index)
            e_offset.append(0)
            f_offset.append(0)
            yield e, f
            continue
        k = -(-max(len(e), len(f), 1) // max_length)
        e_cut = [round(q * len(e) / k) for q in range(k + 1)]
        f_cut = [round(q * len(f) / k) for q in range(k + 1)]
        for q in range(k):
            index_of.append(index)
            e_offset.append(e_cut[q])
            f_offset.append(f_cut[q])
            yield e[e_cut[q]:e_cut[q + 1]], f[f_cut[q]:f_cut[q + 1]]


def new_origin() -> tuple:
    return array("q"), array("q"), array("q")


def warn_cut(origin: tuple, max_length: int, stacklevel: int = 3) -> bool:
    """Warn (LongPairWarning) and return True when ``origin`` records any cut pair."""
    index = np.frombuffer(origin[0], dtype=np.int64) if len(origin[0]) else np.zeros(0, np.int64)
    if index.size == 0 or index[-1] + 1 == index.size:
        return False
    long_pairs = int(np.count_nonzero(np.bincount(index) > 1))
    warnings.warn(f"{long_pairs} sentence pair(s) longer than max_length={max_length} words were cut into pieces of "
                  f"at most {max_length} words, aligned separately (links never cross a cut)", LongPairWarning,
                  stacklevel=stacklevel)
    return True


def encode_bitext(pairs, e_vocab: Vocabulary, f_vocab: Vocabulary, shard_size: int = 10000,
                  grow: bool = True, max_length: int | None = None) -> EncodedBitext:
    """Encode an iterable of (English tokens, French tokens) — e.g. a streaming reader — shard by shard
    (pairs longer than ``max_length`` cut into pieces, see :func:`cut_long_pairs`)."""
    if max_length is None:
        return EncodedBitext(shard_bitext(pairs, e_vocab, f_vocab, shard_size, grow), e_vocab, f_vocab)
    origin = new_origin()
    shards = shard_bitext(cut_long_pairs(pairs, max_length, origin), e_vocab, f_vocab, shard_size, grow)
    return EncodedBitext(shards, e_vocab, f_vocab, origin if warn_cut(origin, max_length) else None)
