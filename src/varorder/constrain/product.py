"""Exact decoding, sampling and next-token distributions of an n-gram LM conditioned on a
DFA constraint: the product of the LM's automaton with the DFA, unrolled over positions
into one :class:`varorder.lattice.Lattice`.

Factorization: p(x | x ∈ L, m ≤ |x| ≤ M) = p(x) 1[x ∈ L] 1[m ≤ |x| ≤ M] / Z, with p(x) =
Π_t p(x_t | <s> x_<t) · p(</s> | <s> x) the back-off LM. The back-off LM is a deterministic
weighted automaton over its context states (Carter, Dymetman & Bouchard 2012, §3.2:
:class:`varorder.exact.full.FullWFSA`, each arc weighing exactly log p(x | state)); its
product with the DFA has states (context, DFA state), and unrolled over positions 0 .. M
it is an acyclic lattice whose paths are exactly the allowed sentences, each scored
log p(x) (arcs: words; final weights: log p(</s> | context) at accepting nodes of allowed
length). The product construction is that of Ctrl-G (Zhang et al. 2024, "Adaptable
Logical Control for Large Language Models") and GeLaTo (Zhang et al. 2023), with an
n-gram LM in place of their HMM, so nothing is approximated: log Z = log p(constraint),
the engine's Viterbi is the exact constrained argmax, its sampler draws exact samples,
and its backward values give the exact conditional next-token distribution

    p(x_t = w | x_<t, constraint) = exp(weight(v → v_w) + β(v_w) − β(v))

at the node v the prefix reaches (``</s>``: exp(final(v) − β(v))) — the quantity Ctrl-G's
``ConstraintLogitsProcessor`` approximates, exact here (:meth:`ConstrainedLM.next_logprobs`,
:meth:`ConstrainedLM.logits_processor`).

Sampling and log Z need none of the product's arcs: the engine's backward recursion runs
over the implicit product (node (t, context, DFA state), arcs read from the LM automaton's
(S, V) tables and the DFA's (Q, V) table, :func:`varorder.engine.lattice.product_backward`),
and the engine's forward sampler draws each sentence word by word from those backward
values, with each visited node's running sums and guide table built once
(:func:`varorder.engine.lattice.product_sample`; counter-based uniforms, so sample i
depends only on the seed and i). Decoding and the next-token distribution run on the
materialised lattice, built on first use: only nodes reachable from the start that can
still reach an accepting end (a forward expansion, then a backward sweep of live nodes),
so it holds at most (reachable context states × live DFA states) nodes a position, times V
arcs each: exact and practical for character-level or tag-level models and small
vocabularies; word-level models over large vocabularies need a coarser automaton (not
provided).
"""

from __future__ import annotations

import weakref

import numpy as np

from varorder import lattice as lattice_ops
from varorder.constrain.dfa import DFA
from varorder.engine.lattice import product_backward, product_sample, stream_seed
from varorder.engine.validate import check_int_at_least
from varorder.errors import ParameterError

__all__ = ["ConstrainedLM", "Product", "unroll_product"]


class ConstrainedLM:
    """An n-gram LM conditioned on a DFA and a length range (see the module).

    Parameters
    ----------
    lm : varorder.lm.NgramLM (order >= 2)
    dfa : DFA over the LM's vocabulary ids
    min_length, max_length : the allowed sentence lengths in words (``</s>`` not counted)
    wfsa : an :class:`varorder.exact.full.FullWFSA` of ``lm`` to reuse (built when omitted)
    """

    def __init__(self, lm, dfa: DFA, *, min_length: int = 1, max_length: int = 10, wfsa=None):
        from varorder.exact.full import FullWFSA

        if not isinstance(dfa, DFA):
            raise ParameterError(f"dfa must be a varorder.constrain.DFA, got {type(dfa).__name__}", name="dfa",
                                 value=type(dfa).__name__)
        if dfa.vocab_size != lm.vocab_size:
            raise ParameterError(f"the DFA reads {dfa.vocab_size} symbols, the LM has {lm.vocab_size} words",
                                 name="dfa", value=dfa.vocab_size)
        if not (isinstance(min_length, int) and isinstance(max_length, int) and 0 <= min_length <= max_length):
            raise ParameterError(f"need 0 <= min_length <= max_length, got {min_length}, {max_length}",
                                 name="max_length", value=max_length)
        self.lm = lm
        self.dfa = dfa
        self._automaton = dfa.minimized()  # the same language, fewer product nodes
        self.min_length = min_length
        self.max_length = max_length
        self.wfsa = wfsa if wfsa is not None else FullWFSA(lm)
        if self.wfsa.lm is not lm:
            raise ParameterError("wfsa was built for another LM", name="wfsa", value=None)
        self._lattice = None
        self._beta_values = None
        self._build_tables()

    @classmethod
    def from_spec(cls, lm, *, contains=(), ordered: bool = False, regex: str | None = None, min_length: int = 1,
                  max_length: int = 10) -> "ConstrainedLM":
        """The model conditioned on: every phrase of ``contains`` (strings of words) appears
        (in that order when ``ordered``), the sentence matches ``regex`` (token level, see
        :func:`~varorder.constrain.dfa.regex_dfa`), its length is in [min_length, max_length]."""
        from varorder.constrain.dfa import contains_dfa, intersect, length_dfa, regex_dfa

        dfa = length_dfa(lm.vocab_size, 0, None)
        phrases = [p.split() if isinstance(p, str) else list(p) for p in contains]
        for phrase in phrases:
            for word in phrase:
                if word not in lm.vocabulary:
                    raise ParameterError(f"keyword {word!r} is not in the LM's vocabulary", name="contains", value=word)
        if phrases:
            dfa = contains_dfa(phrases, lm.vocabulary, ordered=ordered)
        if regex is not None:
            dfa = intersect(dfa, regex_dfa(regex, lm.vocabulary))
        return cls(lm, dfa, min_length=min_length, max_length=max_length)

    # --- the product: backward tables over the implicit unrolled product ---------------

    def _build_tables(self) -> None:
        """The product's backward values, computed over the LM automaton's and the DFA's
        own tables (no arc of the unrolled product is stored): log Z, and what the sampler
        draws from. The word columns are taken in decreasing order of their summed
        probability over the LM's states, so that a sampler's scan of a node's weights
        (see :func:`~varorder.engine.lattice.product_sample`) usually stops early."""
        wfsa, dfa = self.wfsa, self._automaton
        self._word_columns, self._eos_column, self._prob, self._end, self._next, prob_t = _ordered_tables(wfsa)
        word_ids = wfsa.symbols[self._word_columns]
        self._dq = np.ascontiguousarray(dfa.delta[:, word_ids])
        self._word_ids = np.ascontiguousarray(word_ids, dtype=np.int64)
        self._backward, self._scale, self._totals, self._gathered = product_backward(
            self._prob, prob_t, self._next, self._end, self._dq, dfa.accepting, dfa.live(), self.min_length,
            self.max_length)
        root = self._backward[0, wfsa.start, dfa.start]
        if not root > 0.0:
            raise ParameterError("no sentence satisfies the constraint within the length range (or the model gives "
                                 "every such sentence probability zero)", name="dfa", value=None)
        # scales below e^-700 would overflow the end weights' unit: the lattice's sampler then
        self._tables_ok = bool(self._scale.min() > -700.0)
        self.log_z = float(np.log(root) + self._scale[0])

    @property
    def lattice(self) -> "lattice_ops.Lattice":
        """The product unrolled into a :class:`varorder.lattice.Lattice` (built on first use:
        decoding and the next-token distribution run on it)."""
        if self._lattice is None:
            self._build()
        return self._lattice

    @property
    def _beta(self) -> np.ndarray:
        if self._beta_values is None:
            self._beta_values = lattice_ops.betas(self.lattice)
        return self._beta_values

    # --- the product lattice ------------------------------------------------------------

    def _build(self) -> None:
        wfsa, dfa = self.wfsa, self._automaton
        word_columns, eos_column, word_ids = self._word_columns, self._eos_column, self._word_ids
        live = dfa.live()

        def expand(s, q):
            next_s = wfsa.next_state[s][:, word_columns].astype(np.int64)
            next_q = dfa.delta[q][:, word_ids].astype(np.int64)
            weight = wfsa.weight[s][:, word_columns]
            source, column = np.nonzero(live[next_q] & np.isfinite(weight))
            return (source, next_s[source, column], next_q[source, column], word_ids[column],
                    weight[source, column][:, None])

        def final(s, q):
            f = np.full(s.size, -np.inf)
            ok = dfa.accepting[q]
            f[ok] = wfsa.weight[s[ok], eos_column]
            return f

        product = unroll_product(wfsa.start, dfa.start, dfa.num_states, expand, final, self.min_length,
                                 self.max_length)
        self._lattice = product.lattice(0)
        self._product = product

    @property
    def num_nodes(self) -> int:
        return self.lattice.num_nodes

    @property
    def num_arcs(self) -> int:
        return self.lattice.num_arcs

    # --- inference, all on the engine -------------------------------------------------------

    @property
    def log_probability(self) -> float:
        """log p(constraint and length range) under the LM (= log Z of the lattice)."""
        return float(self.log_z)

    def decode(self) -> tuple[list[str], float]:
        """The most probable allowed sentence (words) and its log p under the LM."""
        labels, score = lattice_ops.viterbi(self.lattice)
        labels = labels[labels >= 0]
        # the LM's own scorer, a separate kernel, must agree with the lattice's weights
        rescored = float(np.sum(self.lm.token_log10probs(labels.astype(np.int32))[0], dtype=np.float64)) * np.log(10)
        if not np.isclose(rescored, score, rtol=1e-6, atol=1e-4):
            raise RuntimeError(f"the product lattice scores its best sentence {score!r} but the LM scores it "
                               f"{rescored!r}: the LM automaton's weights are inconsistent with the LM")
        return self.lm.vocabulary.decode(labels), float(score)

    def sample_array(self, n: int = 1, seed=None) -> tuple[np.ndarray, np.ndarray]:
        """n exact samples from p(x | constraint) as (word ids (n, max_length), −1 padded — a
        view of a position-major int32 array —; lengths (n,)), drawn in one kernel call
        forward from the product's backward values. Sample i depends only on (seed, i): the
        first k of n samples are the k samples."""
        n = check_int_at_least("n", n, 1)
        if not self._tables_ok:
            rows = lattice_ops.sample(self.lattice, n, seed)
            return rows, (rows >= 0).sum(axis=1)
        labels, lengths, _ = product_sample(self._prob, self._next, self._end, self._dq, self._automaton.accepting,
                                            self.min_length, self.max_length, self._backward, self._totals,
                                            self._gathered, self._scale, self._word_ids, self.wfsa.start,
                                            self._automaton.start, n, stream_seed(seed), SCAN_GROUP)
        return labels.T, lengths

    def sample(self, n: int = 1, seed=None) -> list[list[str]]:
        """n exact samples from p(x | constraint) (words)."""
        labels, lengths = self.sample_array(n, seed)
        return [self.lm.vocabulary.decode(row[:k]) for row, k in zip(labels, lengths)]

    def sample_ids(self, n: int = 1, seed=None) -> list[tuple[int, ...]]:
        labels, lengths = self.sample_array(n, seed)
        return [tuple(int(x) for x in row[:k]) for row, k in zip(labels, lengths)]

    def _node_of(self, prefix_ids) -> int:
        lat = self.lattice
        node = 0
        for x in prefix_ids:
            out = lat.out_arcs[lat.out_offsets[node]:lat.out_offsets[node + 1]]
            hit = out[lat.arc_label[out] == int(x)]
            if hit.size == 0:
                return -1
            node = int(lat.arc_target[hit[0]])
        return node

    def next_logprobs(self, prefix) -> np.ndarray:
        """log p(x_t = w | x_<t = prefix, constraint) for every word id w (V,), ``</s>``'s
        entry the probability of ending here; −inf where the constraint can no longer be met.
        ``prefix``: words or ids. Raises ParameterError when the prefix itself rules the
        constraint out."""
        ids = [self.lm.vocabulary.id_of(w) if isinstance(w, str) else int(w) for w in prefix]
        node = self._node_of(ids)
        if node < 0:
            raise ParameterError("the prefix cannot be completed to a sentence that satisfies the constraint",
                                 name="prefix", value=list(prefix))
        lat = self.lattice
        out = lat.out_arcs[lat.out_offsets[node]:lat.out_offsets[node + 1]]
        logp = np.full(self.lm.vocab_size, -np.inf)
        logp[lat.arc_label[out]] = lat.arc_weight[out] + self._beta[lat.arc_target[out]] - self._beta[node]
        logp[self.lm.vocabulary.eos_id] = lat.final[node] - self._beta[node]
        return logp

    def logits_processor(self):
        """A callable ``(prefix ids, logits) -> logits`` for a token-by-token sampler: it
        ignores the sampler's own scores and returns the exact conditional log
        probabilities (Ctrl-G's ``ConstraintLogitsProcessor`` contract, exact), so
        sampling from it token by token draws from p(x | constraint)."""

        def process(prefix_ids, logits=None):
            return self.next_logprobs(list(prefix_ids))

        return process


# A node holding at most this many of a batch's paths at a position draws them by one scan
# of its weights instead of building a table (product_sample): tuned on the PTB bigram
# benchmark (benchmarks/papers/constrained_sampling.py); any value draws the same samples.
SCAN_GROUP = 32

_ORDERED: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def _ordered_tables(wfsa) -> tuple:
    """``wfsa.word_tables()`` with the word columns in decreasing order of their summed
    probability over the automaton's states, and the weights transposed (X, S) when the
    automaton is first-order (the next state depends on the word only: a bigram LM; no rows
    otherwise), as :func:`~varorder.engine.lattice.product_backward` takes them (computed
    once per automaton)."""
    tables = _ORDERED.get(wfsa)
    if tables is None:
        columns, eos_column, prob, end, nxt = wfsa.word_tables()
        order = np.argsort(-prob.sum(axis=0), kind="stable")
        prob = np.ascontiguousarray(prob[:, order])
        nxt = np.ascontiguousarray(nxt[:, order])
        first_order = bool((nxt == nxt[:1]).all())
        prob_t = np.ascontiguousarray(prob.T) if first_order else np.empty((0, prob.shape[0]))
        tables = (columns[order], eos_column, prob, end, nxt, prob_t)
        _ORDERED[wfsa] = tables
    return tables


class Product:
    """An automaton product unrolled over positions (what :func:`unroll_product` returns):
    live nodes numbered layer by layer, arcs with one or more weight columns."""

    def __init__(self, position, source, target, label, weights, final, node_state, node_q, layer_keys, layer_ids,
                 num_q):
        self.position, self.source, self.target, self.label = position, source, target, label
        self.weights, self.final = weights, final
        self.node_state, self.node_q = node_state, node_q
        self._layer_keys, self._layer_ids, self._num_q = layer_keys, layer_ids, num_q

    def lattice(self, column: int) -> "lattice_ops.Lattice":
        """The lattice weighed by weight column ``column``."""
        return lattice_ops.Lattice(self.position, self.source, self.target, self.label,
                                   np.ascontiguousarray(self.weights[:, column]), self.final)

    def node(self, t: int, states: np.ndarray, qs: np.ndarray) -> np.ndarray:
        """Node ids of (state, DFA state) pairs at position t (−1: not a live node)."""
        keys = np.asarray(states, np.int64) * self._num_q + np.asarray(qs, np.int64)
        if t >= len(self._layer_keys) or self._layer_keys[t].size == 0:
            return np.full(keys.shape, -1, np.int64)
        table, ids = self._layer_keys[t], self._layer_ids[t]
        at = np.minimum(np.searchsorted(table, keys), table.size - 1)
        return np.where(table[at] == keys, ids[at], -1)


def unroll_product(start_state: int, start_q: int, num_q: int, expand, final, min_length: int,
                   max_length: int) -> Product:
    """Unroll the product of a deterministic weighted automaton (the model) with a DFA over
    positions 0 .. max_length, keeping only the nodes reachable from the start that reach a
    final node. ``expand(states, qs)`` gives the arcs leaving the pairs of one layer:
    (source index into the layer, next state, next DFA state, label, weights (A, W)), only
    arcs into live DFA states with finite weight; ``final(states, qs)`` their final
    log-weights (−inf: not final), used from position ``min_length`` on."""
    layer_keys = [np.asarray([start_state * num_q + start_q], np.int64)]
    arcs = []
    for t in range(max_length):
        keys = layer_keys[-1]
        if keys.size == 0:
            arcs.append(None)
            layer_keys.append(keys)
            continue
        source, next_s, next_q, label, weights = expand(keys // num_q, keys % num_q)
        unique, target = np.unique(next_s * num_q + next_q, return_inverse=True)
        arcs.append((source, target.reshape(-1), label, weights))
        layer_keys.append(unique)
    finals = []
    for t, keys in enumerate(layer_keys):
        f = np.full(keys.size, -np.inf)
        if t >= min_length and keys.size:
            f = final(keys // num_q, keys % num_q)
        finals.append(f)
    alive = [np.isfinite(f) for f in finals]
    for t in range(max_length - 1, -1, -1):
        if arcs[t] is None:
            continue
        source, target = arcs[t][0], arcs[t][1]
        reach = np.zeros(layer_keys[t].size, bool)
        reach[source[alive[t + 1][target]]] = True
        alive[t] |= reach
    if not alive[0].any():
        raise ParameterError("no sentence satisfies the constraint within the length range (or the model gives "
                             "every such sentence probability zero)", name="dfa", value=None)
    new_id, count = [], 0
    for a in alive:
        ids = np.full(a.size, -1, np.int64)
        ids[a] = count + np.arange(int(a.sum()))
        new_id.append(ids)
        count += int(a.sum())
    position = np.concatenate([np.full(int(a.sum()), t, np.int64) for t, a in enumerate(alive)])
    src, dst, lab, wts = [], [], [], []
    width = next((a[3].shape[1] for a in arcs if a is not None), 1)
    for t, layer in enumerate(arcs):
        if layer is None:
            continue
        source, target, label, weights = layer
        ok = (new_id[t][source] >= 0) & (new_id[t + 1][target] >= 0)
        src.append(new_id[t][source[ok]])
        dst.append(new_id[t + 1][target[ok]])
        lab.append(label[ok])
        wts.append(weights[ok])
    empty = np.empty(0, np.int64)
    live_keys = [k[a] for k, a in zip(layer_keys, alive)]
    node_keys = np.concatenate(live_keys)
    return Product(position, np.concatenate(src) if src else empty, np.concatenate(dst) if dst else empty,
                   np.concatenate(lab) if lab else empty,
                   np.concatenate(wts) if wts else np.empty((0, width)),
                   np.concatenate([f[a] for f, a in zip(finals, alive)]), node_keys // num_q, node_keys % num_q,
                   live_keys, [i[a] for i, a in zip(new_id, alive)], num_q)
