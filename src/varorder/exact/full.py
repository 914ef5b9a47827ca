"""Full n-th-order Viterbi baselines for :class:`~varorder.exact.target.HighOrderTarget`
(Carter, Dymetman & Bouchard 2012, §3.2, Fig. 4b).

Two baselines:

* :class:`FullWFSA` / :func:`wfsa_viterbi` — the paper's "F": "the full model ... a WFSA
  with all context states and weights representing the true language model log
  probabilities", with Viterbi run over the full WFSA. States are all the LM's context
  states (every stored n-gram of length 1 .. n - 1 that can be a history, i.e. not ending
  in ``</s>``); reading x from state s leads to the longest stored suffix of s x of at
  most n - 1 words and weighs the exact back-off log p_lm(x | s). This is exact because a
  back-off LM's p(x | h) depends only on the longest stored suffix of h (tables closed
  under suffixes). The WFSA is built once per LM (independent of the sentence); decoding
  a sentence relaxes every (state, symbol) arc of every state some path reaches at that
  position, the observation log-likelihood being -inf off the candidate list: states no
  path reaches (score -inf) are skipped, as any Viterbi implementation would, but nothing
  is pruned by the emission dictionary, so F stays exponential in n until the training
  data caps the number of stored contexts. (Reading "all context states" as all
  V^(n-1) tag tuples would be larger still: 45^4 = 4.1 million states at n = 5.)
* :func:`full_lattice` / :func:`full_viterbi` — a stronger baseline than the paper's: the
  explicit (n - 1)-tuple lattice restricted to each position's candidates.

Factorization: the same p(x) as :class:`~varorder.exact.target.HighOrderTarget`. In the
pruned lattice the state at position j is the tuple of the last min(n - 1, j) candidates,
so every arc (state, x) carries the exact factor log p_lm(x | <s> history) +
log p_obs(o_j | x). The state space at position j has prod of the candidate counts over
the last n - 1 positions states: exponential in n, which is what the q-automaton avoids.
The lattice is built with vectorised NumPy and scored with the LM's batched kernel;
Viterbi is the engine's.

F is decoded by the engine's automaton Viterbi (:mod:`varorder.engine.automaton`), which
relaxes the (state × symbol) table position by position: the full WFSA unrolled over a
sentence has S V T arcs (36 million at n = 5 on the PTB sample), and materialising them as
a :class:`~varorder.lattice.Lattice` would measure memory traffic rather than the DP.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from varorder.engine.automaton import automaton_viterbi
from varorder.errors import ParameterError
from varorder.exact.target import HighOrderTarget
from varorder.lattice import Lattice, path_labels, viterbi_arcs
from varorder.lm import NgramLM
from varorder.lm.model import LN10

__all__ = ["FullViterbiResult", "FullWFSA", "full_lattice", "full_viterbi", "wfsa_viterbi"]


@dataclass
class FullViterbiResult:
    path: list[int] | None     # None when a limit stopped the construction
    log_p: float
    num_states: int
    num_arcs: int
    seconds: float
    finished: bool


def full_lattice(target: HighOrderTarget, *, max_arcs: int = 20_000_000, time_limit: float | None = None) -> Lattice:
    """The explicit n-th-order lattice of ``target`` (arc score = exact log factor).

    Raises ``RuntimeError`` when it would exceed ``max_arcs`` arcs or ``time_limit`` seconds.
    """
    start = time.perf_counter()
    lm = target.lm
    window = lm.order - 1
    T = target.num_positions
    sizes = [len(s) for s in target.symbols]  # candidates at positions 1..T
    # State j: digits of the candidates at positions max(1, j - window + 1) .. j.
    state_symbols = [np.zeros((1, 0), dtype=np.int64)]
    counts = [1]
    positions, sources, targets, labels, weights = [np.zeros(1, dtype=np.int64)], [], [], [], []
    offset = 1
    prev_offset = 0
    for j in range(1, T + 1):
        k = sizes[j - 1]
        n_src = counts[-1]
        n_arcs = n_src * k
        if n_arcs + sum(len(a) for a in sources) > max_arcs:
            raise RuntimeError(f"full lattice exceeds {max_arcs} arcs at position {j}")
        if time_limit is not None and time.perf_counter() - start > time_limit:
            raise RuntimeError(f"full lattice exceeds the time limit of {time_limit} s at position {j}")
        symbols = target.symbols[j - 1]
        src = np.repeat(np.arange(n_src, dtype=np.int64), k)
        cand = np.tile(np.arange(k, dtype=np.int64), n_src)
        context = state_symbols[-1][src]
        drop = window > 0 and context.shape[1] >= window
        # History the LM sees: at most window symbols, <s> included while j <= window.
        sequences = np.concatenate([context, symbols[cand][:, None]], axis=1)
        bos = j <= window
        width = sequences.shape[1]
        log10, _ = lm.token_log10probs(sequences.reshape(-1).astype(np.int32),
                                       np.full(n_arcs, width, dtype=np.int64), bos=bos, eos=False)
        lm_score = log10.reshape(n_arcs, width)[:, -1] * LN10
        if window == 0:
            new_state = np.zeros(n_arcs, dtype=np.int64)
            n_dst = 1
            new_symbols = np.zeros((1, 0), dtype=np.int64)
        else:
            kept = context[:, 1:] if drop else context
            new_symbols_all = np.concatenate([kept, symbols[cand][:, None]], axis=1)
            if drop:
                radix = n_src // sizes[j - 1 - window]  # states sharing the dropped digit
                new_state = (src % radix) * k + cand
                n_dst = radix * k
            else:
                new_state = src * k + cand
                n_dst = n_src * k
            new_symbols = np.empty((n_dst, new_symbols_all.shape[1]), dtype=np.int64)
            new_symbols[new_state] = new_symbols_all
        sources.append(prev_offset + src)
        targets.append(offset + new_state)
        labels.append(symbols[cand])
        weights.append(lm_score + target.logliks[j - 1][cand])
        positions.append(np.full(n_dst, j, dtype=np.int64))
        state_symbols.append(new_symbols)
        counts.append(n_dst)
        prev_offset = offset
        offset += n_dst
    final = np.full(offset, -np.inf)
    final[prev_offset:] = 0.0
    return Lattice(np.concatenate(positions), np.concatenate(sources), np.concatenate(targets),
                   np.concatenate(labels), np.concatenate(weights), final)


def full_viterbi(target: HighOrderTarget, *, max_arcs: int = 20_000_000, time_limit: float | None = None) -> FullViterbiResult:
    """Viterbi over :func:`full_lattice`; a result with ``finished`` False when a limit hit."""
    start = time.perf_counter()
    try:
        lat = full_lattice(target, max_arcs=max_arcs, time_limit=time_limit)
    except RuntimeError:
        return FullViterbiResult(None, float("nan"), 0, 0, time.perf_counter() - start, False)
    arcs, score = viterbi_arcs(lat)
    return FullViterbiResult(path_labels(lat, arcs).tolist(), float(score), lat.num_nodes, lat.num_arcs,
                             time.perf_counter() - start, True)


class FullWFSA:
    """The back-off LM as a WFSA over all its context states (the paper's full model F).

    Attributes: ``states`` (list of context tuples; ``start`` is ``(<s>,)``), ``symbols``
    (every word id but ``<s>``), ``next_state`` (S, X) int32 and ``weight`` (S, X) natural
    log p_lm(symbol | state), ``build_seconds``. Raises ``RuntimeError`` when S X would
    exceed ``max_arcs``.
    """

    def __init__(self, lm: NgramLM, *, max_arcs: int = 100_000_000):
        if not isinstance(lm, NgramLM):
            raise ParameterError(f"lm must be a varorder.lm.NgramLM, got {type(lm).__name__}", name='lm', value=lm)
        start = time.perf_counter()
        self.lm = lm
        vocab = lm.vocabulary
        V = lm.vocab_size
        base = V + 1  # digit w + 1 per word, so that contexts of different lengths differ
        if lm.order < 2:
            raise ParameterError("a full WFSA needs an LM of order >= 2", name='lm', value=lm)
        window = lm.order - 1
        if base ** (window + 1) >= 2**62:
            raise ParameterError(f"vocabulary of {V} words too large to key {window + 1}-word contexts", name='lm', value=lm)
        rows_per_length = []
        for m in range(1, window + 1):
            rows = lm.ngrams(m)[0]
            rows_per_length.append(rows[rows[:, -1] != vocab.eos_id])
        self.symbols = np.asarray([w for w in range(V) if w != vocab.bos_id], dtype=np.int64)
        n_states = sum(len(r) for r in rows_per_length)
        X = len(self.symbols)
        if n_states * X > max_arcs:
            raise RuntimeError(f"full WFSA has {n_states} states x {X} symbols > {max_arcs} arcs")
        keys = np.concatenate([((r + 1) * base ** np.arange(r.shape[1] - 1, -1, -1)).sum(axis=1)
                               for r in rows_per_length])
        order_of = np.argsort(keys)
        self._keys = keys[order_of]
        flat_rows = np.concatenate([r.reshape(-1) for r in rows_per_length])
        lengths = np.concatenate([np.full(len(r), r.shape[1], np.int64) for r in rows_per_length])
        offsets = np.zeros(n_states + 1, np.int64)
        np.cumsum(lengths, out=offsets[1:])
        log10, used = lm.lookup_grid(flat_rows, offsets, self.symbols)
        # Next state: the longest stored suffix of (s x) within the window. The n-gram used
        # for p(x | s) is the longest stored suffix of s x; its own last window words are stored too.
        keep = np.minimum(used, window)
        extended = keys[:, None] * base + (self.symbols[None, :] + 1)
        suffix_keys = extended % (base ** keep)
        ends = self.symbols == vocab.eos_id  # </s> ends the sentence: no next state
        position = np.searchsorted(self._keys, suffix_keys[:, ~ends])
        if np.any(position >= len(self._keys)) or np.any(self._keys[np.minimum(position, len(self._keys) - 1)] != suffix_keys[:, ~ends]):
            raise AssertionError("an LM table is not closed under suffixes")
        next_sorted = np.zeros((n_states, X), np.int64)
        next_sorted[:, ~ends] = position
        # States are numbered in key order.
        self.next_state = np.ascontiguousarray(next_sorted[order_of], dtype=np.int32)
        self.weight = np.ascontiguousarray((log10 * LN10)[order_of])
        self.start = int(np.searchsorted(self._keys, vocab.bos_id + 1))
        self.num_states = n_states
        self._column = np.full(V, -1, np.int64)
        self._column[self.symbols] = np.arange(X)
        self.build_seconds = time.perf_counter() - start

    @property
    def num_arcs(self) -> int:
        return int(self.next_state.size)

    def word_tables(self):
        """(word columns, ``</s>``'s column, p(word | state) (S, W), p(</s> | state) (S,),
        next state (S, W)) over the columns of every symbol but ``</s>``, in the probability
        domain (computed once, then kept)."""
        if getattr(self, "_word_tables", None) is None:
            eos = self.lm.vocabulary.eos_id
            columns = np.flatnonzero(self.symbols != eos)
            eos_column = int(np.flatnonzero(self.symbols == eos)[0])
            self._word_tables = (columns, eos_column, np.ascontiguousarray(np.exp(self.weight[:, columns])),
                                 np.ascontiguousarray(np.exp(self.weight[:, eos_column])),
                                 np.ascontiguousarray(self.next_state[:, columns]))
        return self._word_tables


def wfsa_viterbi(target: HighOrderTarget, wfsa: FullWFSA) -> FullViterbiResult:
    """Viterbi of ``target`` over the full WFSA ``wfsa`` (built for ``target.lm``): every
    arc of every reached state at every position. ``num_states``/``num_arcs`` count the
    unrolled WFSA (S per position, S X per position)."""
    if wfsa.lm is not target.lm:
        raise ParameterError("the WFSA was built for another LM", name='wfsa', value=wfsa)
    start = time.perf_counter()
    T = target.num_positions
    obs = np.full((T, len(wfsa.symbols)), -np.inf)
    for j in range(T):
        obs[j, wfsa._column[target.symbols[j]]] = target.logliks[j]
    final_symbol = target.eos_id if target.eos else -1
    columns, score = automaton_viterbi(wfsa.next_state, wfsa.weight, obs, wfsa.start,
                                       wfsa._column[final_symbol] if final_symbol >= 0 else -1)
    path = wfsa.symbols[columns].tolist() if score > -np.inf else None
    return FullViterbiResult(path, float(score), wfsa.num_states * T, wfsa.num_arcs * T,
                             time.perf_counter() - start, path is not None)
