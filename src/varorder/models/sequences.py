"""Ragged token batches for the chain engine: label encoding, length-bucketed padding, batched decoding.

Models keep per-token quantities flat — one row per token, sequences concatenated —
because that is the shape of a sparse design matrix. The engine wants padded (B, L, K)
arrays. :class:`ChunkPlan` converts between the two: it sorts sequences by length and
packs them into chunks whose padded size stays small (so padding waste is a few per
cent, and edge-marginal arrays, B·L·K² floats, stay within a memory budget).

All inference goes through :mod:`varorder.engine.chain` (the one DP engine).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import numba
import numpy as np

from varorder.engine import chain as _engine
from varorder.errors import ParameterError
from varorder.eval.metrics import sequence_accuracy
import varorder._numba_start  # noqa: E402,F401,I001  (Numba's cache saves locked across processes)

__all__ = ["numba_threads", "LabelCodec", "ChunkPlan", "decode_viterbi", "iter_marginals", "token_accuracy"]


@contextmanager
def numba_threads(n_threads: int | None):
    """Run the enclosed Numba-parallel kernels on at most ``n_threads`` threads (None: leave as is).

    On an oversubscribed machine one thread can beat several, because a parallel region
    waits for its slowest (descheduled) thread. The count is an upper bound: a model
    trained with 8 threads still predicts where Numba has fewer (NUMBA_NUM_THREADS).
    """
    if n_threads is None:
        yield
        return
    if isinstance(n_threads, bool) or not isinstance(n_threads, int) or n_threads < 1:
        raise ParameterError(f"n_threads must be an int >= 1, got {n_threads!r}", name='n_threads', value=n_threads)
    previous = numba.get_num_threads()
    numba.set_num_threads(min(n_threads, numba.config.NUMBA_NUM_THREADS))
    try:
        yield
    finally:
        numba.set_num_threads(previous)


class LabelCodec:
    """Bijection between label values (any hashable, sorted) and ints 0…K−1."""

    def __init__(self, classes: Sequence):
        self.classes = list(classes)
        self.index = {c: i for i, c in enumerate(self.classes)}
        if len(self.index) != len(self.classes):
            raise ParameterError("classes must be distinct", name='classes', value=classes)

    @classmethod
    def fit(cls, label_sequences) -> "LabelCodec":
        seen = set()
        for seq in label_sequences:
            seen.update(seq)
        if not seen:
            raise ParameterError("y holds no labels", name='label_sequences', value=label_sequences)
        return cls(sorted(seen, key=lambda v: (str(type(v)), v)))

    def encode(self, label_sequences, name: str = "y") -> np.ndarray:
        """Concatenated label ids of all sequences (int64); unknown label → ParameterError."""
        out = []
        for i, seq in enumerate(label_sequences):
            try:
                out.extend(self.index[v] for v in seq)
            except KeyError as err:
                raise ParameterError(f"{name}[{i}] holds label {err.args[0]!r} not seen in training", name=name) from None
        return np.asarray(out, dtype=np.int64)

    def decode(self, ids: np.ndarray, lengths: np.ndarray) -> list[list]:
        labels = [self.classes[i] for i in ids.tolist()]
        out, pos = [], 0
        for n in lengths.tolist():
            out.append(labels[pos:pos + n])
            pos += n
        return out


class ChunkPlan:
    """Length-sorted chunks of a ragged batch, with flat ↔ padded token index maps.

    ``lengths`` (S,) are the sequence lengths in their original order; tokens are laid
    out flat in that order. Each chunk covers some sequences (``seq_ids``) padded to the
    chunk's longest; ``flat_index`` (B, L) gives each padded cell's flat token row
    (clipped to a valid row in padding, masked by ``valid``).
    """

    def __init__(self, lengths, max_cells: int = 1 << 16):
        lengths = np.asarray(lengths, dtype=np.int64)
        if lengths.ndim != 1 or (lengths < 1).any():
            raise ParameterError("every sequence must have at least one item", name='lengths', value=lengths)
        self.lengths = lengths
        if lengths.size == 1:  # one sequence (a tagger's one sentence): one chunk, no sorting or masks
            n = int(lengths[0])
            self.offsets = np.array([0, n], dtype=np.int64)
            self.chunks = [(np.zeros(1, dtype=np.int64), lengths, np.arange(n)[None], np.ones((1, n), dtype=bool))]
            return
        self.offsets = np.concatenate([[0], np.cumsum(lengths)])
        order = np.argsort(lengths, kind="stable")
        self.chunks: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []
        start = 0
        while start < order.size:
            # Sequences are sorted by length, so the last one in a chunk sets its padded length.
            stop = start + 1
            while stop < order.size and (stop + 1 - start) * lengths[order[stop]] <= max_cells:
                stop += 1
            seq_ids = order[start:stop]
            chunk_lengths = lengths[seq_ids]
            L = int(chunk_lengths.max())
            steps = np.arange(L)
            valid = steps[None, :] < chunk_lengths[:, None]
            flat_index = np.where(valid, self.offsets[seq_ids][:, None] + steps[None, :], 0)
            self.chunks.append((seq_ids, chunk_lengths, flat_index, valid))
            start = stop

    @property
    def n_tokens(self) -> int:
        return int(self.offsets[-1])

    def first_tokens(self) -> np.ndarray:
        return self.offsets[:-1]

    def last_tokens(self) -> np.ndarray:
        return self.offsets[1:] - 1

    def next_pairs(self) -> tuple[np.ndarray, np.ndarray]:
        """Flat rows (t, t+1) of every within-sequence adjacent token pair."""
        is_last = np.zeros(self.n_tokens, dtype=bool)
        is_last[self.last_tokens()] = True
        prev = np.flatnonzero(~is_last)
        return prev, prev + 1


def decode_viterbi(plan: ChunkPlan, token_scores: np.ndarray, transitions, start=None, end=None) -> np.ndarray:
    """Best label per flat token row under the chain (token_scores (N, K) as emissions)."""
    if plan.lengths.size == 1:  # one sequence: its scores are the padded batch as they are
        small = _engine.small_viterbi(token_scores[None], transitions, start, end)  # one compiled call
        if small is not None:
            return small[0][0]
        ci = _engine.prepare(token_scores[None], transitions, start, end, plan.lengths)
        return _engine.viterbi(ci)[0][0]
    out = np.empty(plan.n_tokens, dtype=np.int64)
    for seq_ids, lengths, flat_index, valid in plan.chunks:
        ci = _engine.prepare(token_scores[flat_index], transitions, start, end, lengths)
        paths, _ = _engine.viterbi(ci)
        out[flat_index[valid]] = paths[valid]
    return out


def iter_marginals(plan: ChunkPlan, token_scores: np.ndarray, transitions, start=None, end=None,
                   edges=False) -> Iterator[tuple]:
    """Per chunk: (seq_ids, lengths, flat_index, valid, node (B,L,K), edge, log Z (B,)).

    ``edges`` as in :func:`varorder.engine.chain.marginals`: True (B,L−1,K,K),
    "sum" (B,K,K) summed over positions, False None.
    """
    for seq_ids, lengths, flat_index, valid in plan.chunks:
        ci = _engine.prepare(token_scores[flat_index], transitions, start, end, lengths)
        node, edge, logz = _engine.marginals(ci, edges=edges)
        yield seq_ids, lengths, flat_index, valid, node, edge, logz


def token_accuracy(predicted: Sequence[Sequence], gold: Sequence[Sequence]) -> float:
    """Fraction of tokens whose predicted label equals the gold one (lengths must match).

    The counting is :func:`varorder.eval.metrics.sequence_accuracy`'s; an empty
    gold set is an error here rather than NaN, since a training log needs a number.
    """
    result = sequence_accuracy(predicted, gold)
    if result.num_tokens == 0:
        raise ParameterError("no tokens to score", name='gold', value=gold)
    return result.token
