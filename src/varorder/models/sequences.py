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
from varorder.engine import threads as _threads
from varorder.errors import ParameterError
from varorder.eval.metrics import sequence_accuracy
import varorder._numba_start  # noqa: E402,F401,I001  (Numba's cache saves locked across processes)

__all__ = ["numba_threads", "LabelCodec", "ChunkPlan", "decode_viterbi", "decode_kbest", "iter_marginals", "log_partitions",
           "token_accuracy", "token_mask", "ChainDecoding", "constrained_potentials", "is_partial", "partial_mask", "NEG_INF"]

NEG_INF = -np.inf


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
    previous = _threads.numba_thread_count()
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


def _no_path(scores, seq_ids):
    bad = np.flatnonzero(np.isneginf(scores))
    if bad.size:
        from varorder.errors import ParameterError

        raise ParameterError(f"sequence {int(seq_ids[bad[0]])} has no tagging that the allowed labels and "
                             "constraints permit", name="allowed", value=int(seq_ids[bad[0]]))


def decode_viterbi(plan: ChunkPlan, token_scores: np.ndarray, transitions, start=None, end=None,
                   allowed: np.ndarray | None = None, constrained: bool = False) -> np.ndarray:
    """Best label per flat token row under the chain (token_scores (N, K) as emissions); ``allowed`` (N, K)
    booleans restrict each token's labels (the engine's ``allowed=`` mask). With a mask, or ``constrained``
    (the potentials carry −∞ constraints), a sequence left with no finite-score path raises ParameterError."""
    if allowed is not None or constrained:
        out = np.empty(plan.n_tokens, dtype=np.int64)
        for seq_ids, lengths, flat_index, valid in plan.chunks:
            ci = _engine.prepare(token_scores[flat_index], transitions, start, end, lengths,
                                 None if allowed is None else allowed[flat_index] & valid[:, :, None])
            paths, scores = _engine.viterbi(ci)
            _no_path(scores, seq_ids)
            out[flat_index[valid]] = paths[valid]
        return out
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


def decode_kbest(plan: ChunkPlan, token_scores: np.ndarray, transitions, start=None, end=None,
                 allowed: np.ndarray | None = None, k: int = 1):
    """The k best label paths of every sequence: (list per sequence of up to k label-id arrays, list per sequence
    of their path scores), best first (the engine's k-best; paths of −∞ score left out)."""
    paths_out: list = [None] * plan.lengths.size
    scores_out: list = [None] * plan.lengths.size
    for seq_ids, lengths, flat_index, valid in plan.chunks:
        ci = _engine.prepare(token_scores[flat_index], transitions, start, end, lengths,
                             None if allowed is None else allowed[flat_index] & valid[:, :, None])
        paths, scores = _engine.kbest(ci, k)
        _no_path(scores[:, 0], seq_ids)
        for b, s in enumerate(seq_ids.tolist()):
            finite = np.isfinite(scores[b])
            n = int(lengths[b])
            paths_out[s] = [paths[b, r, :n].copy() for r in np.flatnonzero(finite)]
            scores_out[s] = scores[b, finite].copy()
    return paths_out, scores_out


def log_partitions(plan: ChunkPlan, token_scores: np.ndarray, transitions, start=None, end=None,
                   allowed: np.ndarray | None = None) -> np.ndarray:
    """log Z of every sequence (S,), in the plan's sequence order."""
    out = np.empty(plan.lengths.size)
    for seq_ids, lengths, flat_index, valid in plan.chunks:
        ci = _engine.prepare(token_scores[flat_index], transitions, start, end, lengths,
                             None if allowed is None else allowed[flat_index] & valid[:, :, None])
        out[seq_ids] = _engine.log_partition(ci)
    return out


def iter_marginals(plan: ChunkPlan, token_scores: np.ndarray, transitions, start=None, end=None,
                   edges=False, allowed: np.ndarray | None = None) -> Iterator[tuple]:
    """Per chunk: (seq_ids, lengths, flat_index, valid, node (B,L,K), edge, log Z (B,)).

    ``edges`` as in :func:`varorder.engine.chain.marginals`: True (B,L−1,K,K),
    "sum" (B,K,K) summed over positions, False None. ``allowed`` (N, K) booleans: the marginals of
    the distribution conditioned on each token's allowed labels (log Z of the allowed paths).
    """
    for seq_ids, lengths, flat_index, valid in plan.chunks:
        ci = _engine.prepare(token_scores[flat_index], transitions, start, end, lengths,
                             None if allowed is None else allowed[flat_index] & valid[:, :, None])
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


# -- decoding constraints and partial labels ----------------------------------------------------------------


def token_mask(classes, allowed, lengths, name: str = "allowed") -> np.ndarray | None:
    """The (N, K) boolean mask of per-token candidate labels, flat in token order.

    ``allowed``: None (no restriction), or one entry per sequence, each None or one entry per token:
    None (any label), a label (fixed), or a collection of labels (the candidates); an (n, K) boolean
    array stands for a whole sequence. An unknown label or a wrong length raises ParameterError.
    """
    from varorder.errors import ParameterError

    if allowed is None:
        return None
    lengths = np.asarray(lengths)
    if len(allowed) != lengths.size:
        raise ParameterError(f"{name} has {len(allowed)} sequences for {lengths.size} inputs", name=name,
                             value=len(allowed))
    index = {c: i for i, c in enumerate(classes)}
    K = len(classes)
    mask = np.ones((int(lengths.sum()), K), dtype=bool)
    row = 0
    for s, (entry, n) in enumerate(zip(allowed, lengths.tolist())):
        if entry is None:
            row += n
            continue
        if isinstance(entry, np.ndarray):
            if entry.shape != (n, K) or entry.dtype != np.bool_:
                raise ParameterError(f"{name}[{s}] is an array of shape {entry.shape} and dtype {entry.dtype}; "
                                     f"expected booleans of shape ({n}, {K})", name=name, value=entry.shape)
            mask[row:row + n] = entry
            row += n
            continue
        if len(entry) != n:
            raise ParameterError(f"{name}[{s}] has {len(entry)} entries for {n} tokens", name=name, value=len(entry))
        for t, labels in enumerate(entry):
            if labels is None:
                continue
            if isinstance(labels, (set, frozenset, list)):
                candidates = labels
            else:
                candidates = (labels,)
            mask[row + t] = False
            for label in candidates:
                if label not in index:
                    raise ParameterError(f"{name}[{s}][{t}] names label {label!r}, not one of the model's classes_",
                                         name=name, value=label)
                mask[row + t, index[label]] = True
        row += n
    return mask


def constrained_potentials(classes, transitions, start, end, constraints):
    """(transitions, start, end) with −∞ wherever the tag scheme ``constraints`` (e.g. ``"BIO"``) forbids the
    transition, the first or the last label (:func:`varorder.io.schemes.allowed_transitions`); None: as given."""
    if constraints is None:
        return transitions, start, end
    from varorder.io.schemes import allowed_transitions

    ok_t, ok_start, ok_end = allowed_transitions([str(c) for c in classes], constraints)
    K = len(classes)
    start = np.zeros(K) if start is None else start
    end = np.zeros(K) if end is None else end
    return (np.where(ok_t, transitions, NEG_INF), np.where(ok_start, start, NEG_INF),
            np.where(ok_end, end, NEG_INF))


def is_partial(label_sequences) -> bool:
    """Whether some token's label is a set of candidates (a set / frozenset) or None (unknown): partial labels."""
    return any(v is None or isinstance(v, (set, frozenset)) for seq in label_sequences for v in seq)


def partial_mask(label_sequences):
    """(codec over every label named, (N, K) mask of each token's candidate labels) of partially labelled
    sequences: a label, a set of candidates, or None (any label)."""
    seen = set()
    for seq in label_sequences:
        for v in seq:
            if isinstance(v, (set, frozenset)):
                seen.update(v)
            elif v is not None:
                seen.add(v)
    if not seen:
        raise ParameterError("y holds no labels")
    codec = LabelCodec(sorted(seen, key=lambda v: (str(type(v)), v)))
    K = len(codec.classes)
    rows = []
    for i, seq in enumerate(label_sequences):
        for t, v in enumerate(seq):
            row = np.zeros(K, dtype=bool)
            if v is None:
                row[:] = True
            else:
                for label in (v if isinstance(v, (set, frozenset)) else (v,)):
                    row[codec.index[label]] = True
                if not row.any():
                    raise ParameterError(f"y[{i}][{t}] is an empty set of candidate labels")
            rows.append(row)
    return codec, np.array(rows, dtype=bool).reshape(len(rows), K)


class ChainDecoding:
    """Constrained decoding for a tagger that is a dense chain: :meth:`_chain_potentials` gives
    ``(plan, token scores (N, K), transitions, start, end)`` of X, and the engine does the rest (Viterbi,
    k-best, marginals, each with the ``allowed=`` mask and −∞ scheme transitions)."""

    def _chain_potentials(self, X):  # pragma: no cover - each model defines it
        raise NotImplementedError

    def _constrained_chain(self, X, allowed, constraints):
        plan, scores, T, start, end = self._chain_potentials(X)
        Tc, start_c, end_c = constrained_potentials(self.classes_, T, start, end, constraints)
        return plan, scores, (T, start, end), (Tc, start_c, end_c), token_mask(self.classes_, allowed, plan.lengths)

    def _labels(self, ids, plan):
        classes, ids, offsets = self.classes_, ids.tolist(), plan.offsets.tolist()
        return [[classes[i] for i in ids[offsets[s]:offsets[s + 1]]] for s in range(plan.lengths.size)]

    def _decode_constrained(self, X, allowed, constraints) -> list[list]:
        plan, scores, _, chain, mask = self._constrained_chain(X, allowed, constraints)
        return self._labels(decode_viterbi(plan, scores, *chain, mask, constrained=True), plan)

    def predict_kbest(self, X, k: int = 5, allowed=None, constraints: str | None = None):
        """The k most probable label sequences of each input, best first: (taggings, log_probabilities), a list
        per sequence of up to k label lists and an array of their log p(y | x) under the model (before
        ``allowed`` / ``constraints``, as :meth:`predict` takes them, restrict the candidates)."""
        plan, scores, free, chain, mask = self._constrained_chain(X, allowed, constraints)
        paths, path_scores = decode_kbest(plan, scores, *chain, mask, k)
        log_z = log_partitions(plan, scores, *free)
        classes = self.classes_
        return ([[[classes[i] for i in p.tolist()] for p in seq] for seq in paths],
                [s - z for s, z in zip(path_scores, log_z)])

    def _constrained_marginals(self, X, allowed, constraints) -> list[np.ndarray]:
        plan, scores, _, chain, mask = self._constrained_chain(X, allowed, constraints)
        node_flat = np.empty_like(scores)
        for _, _, flat_index, valid, node, _, _ in iter_marginals(plan, scores, *chain, allowed=mask):
            node_flat[flat_index[valid]] = node[valid]
        return [node_flat[plan.offsets[s]:plan.offsets[s + 1]] for s in range(plan.lengths.size)]
