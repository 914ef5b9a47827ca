"""Exact sampling, joint decoding and conditional next-token distributions of a discrete HMM
conditioned on a DFA constraint — Ctrl-G's setting (Zhang et al. 2024, "Adaptable Logical
Control for Large Language Models", §3: HMM × DFA, the HMM distilled from an LLM) with
exact inference on the lattice engine.

Factorization: for lengths T in [m, M], p_T(x, z) = π[z₁] B[z₁, x₁] Π_{t≥2} A[z_{t−1}, z_t]
B[z_t, x_t]; the target is p(x, z | C) ∝ Σ_T 1[|x| = T] p_T(x, z) 1[x ∈ C] (the HMM has no
end event, so each allowed length enters with its own marginal mass, as in Ctrl-G's
fixed-length continuations). The product with the DFA has nodes (t, z, q). Words that the
DFA cannot tell apart (identical columns of its transition table) form one *symbol class*,
so an arc carries (z', class) and weighs log A[z, z'] + log Σ_{w ∈ class} B[z', w]: the lattice
has K·Q nodes a position and K·C arcs a node (C classes: the words the constraint names plus
one for all others), however large V is. Sampling draws the (z, class) path from the engine
and then each word within its class ∝ B[z', w] — exact, since the arc weight is that class's
total. Decoding is the joint argmax over (x, z) (arcs weighed by the class's best word); the
argmax over x alone, summing out z, is NP-hard in general (Casacuberta & de la Higuera 2000).
"""

from __future__ import annotations

import numpy as np

from varorder import lattice as lattice_ops
from varorder.constrain.dfa import DFA
from varorder.constrain.product import unroll_product
from varorder.engine.validate import as_rng
from varorder.errors import ParameterError

__all__ = ["ConstrainedHMM"]


def _logsumexp(a: np.ndarray, axis: int) -> np.ndarray:
    top = np.max(a, axis=axis, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)
    with np.errstate(divide="ignore"):
        return np.squeeze(top, axis) + np.log(np.sum(np.exp(a - top), axis=axis))


class ConstrainedHMM:
    """A discrete HMM conditioned on a DFA over its symbols and a length range (see the module).

    Parameters
    ----------
    log_start (K,), log_transitions (K, K), log_emissions (K, V) : natural-log parameters
    dfa : DFA over the V symbols
    words : the V symbols' names (for printing and building DFAs); default "0", "1", ...
    """

    def __init__(self, log_start, log_transitions, log_emissions, dfa: DFA, *, min_length: int = 1,
                 max_length: int = 10, words=None):
        self.log_start = np.asarray(log_start, dtype=np.float64)
        self.log_transitions = np.asarray(log_transitions, dtype=np.float64)
        self.log_emissions = np.asarray(log_emissions, dtype=np.float64)
        K, V = self.log_emissions.shape
        if self.log_start.shape != (K,) or self.log_transitions.shape != (K, K):
            raise ParameterError(f"need log_start (K,), log_transitions (K, K) for log_emissions {self.log_emissions.shape}",
                                 name="log_transitions", value=self.log_transitions.shape)
        if not isinstance(dfa, DFA) or dfa.vocab_size != V:
            raise ParameterError(f"dfa must be a DFA over the {V} symbols", name="dfa", value=getattr(dfa, "vocab_size", None))
        if not (isinstance(min_length, int) and isinstance(max_length, int) and 0 <= min_length <= max_length):
            raise ParameterError(f"need 0 <= min_length <= max_length, got {min_length}, {max_length}",
                                 name="max_length", value=max_length)
        self.dfa, self.min_length, self.max_length = dfa, min_length, max_length
        self.words = list(words) if words is not None else [str(i) for i in range(V)]
        # symbol classes: words with identical DFA columns
        columns, self.word_class = np.unique(dfa.delta.T, axis=0, return_inverse=True)
        self.word_class = self.word_class.reshape(-1)
        self.class_delta = np.ascontiguousarray(columns.T)  # (Q, C)
        C = columns.shape[0]
        members = [np.flatnonzero(self.word_class == c) for c in range(C)]
        self._members = members
        self.class_logsum = np.stack([_logsumexp(self.log_emissions[:, m], axis=1) for m in members], axis=1)
        self.class_logmax = np.stack([self.log_emissions[:, m].max(axis=1) for m in members], axis=1)
        self._build()

    @classmethod
    def from_hmm(cls, hmm, dfa: DFA, **options) -> "ConstrainedHMM":
        """From a fitted :class:`varorder.models.HMM` (its unseen-symbol column left out:
        a generated sentence uses the training symbols)."""
        return cls(hmm.log_start_, hmm.log_transitions_, hmm.log_emissions_[:, :-1], dfa, words=list(hmm.symbols_),
                   **options)

    def _build(self) -> None:
        K = self.log_emissions.shape[0]
        C = self.class_delta.shape[1]
        live = self.dfa.live()
        from_state = np.vstack([self.log_transitions, self.log_start[None, :]])  # row K: the start
        z_next = np.repeat(np.arange(K), C)
        c_next = np.tile(np.arange(C), K)

        def expand(s, q):
            next_q = self.class_delta[q][:, c_next].astype(np.int64)  # (n, K·C)
            base = from_state[s][:, z_next]
            w_sum = base + self.class_logsum[z_next, c_next][None, :]
            w_max = base + self.class_logmax[z_next, c_next][None, :]
            source, column = np.nonzero(live[next_q] & np.isfinite(w_sum))
            weights = np.stack([w_sum[source, column], w_max[source, column]], axis=1)
            return source, z_next[column].astype(np.int64), next_q[source, column], column.astype(np.int64), weights

        def final(s, q):
            return np.where(self.dfa.accepting[q], 0.0, -np.inf)

        self._product = unroll_product(K, self.dfa.start, self.dfa.num_states, expand, final, self.min_length,
                                       self.max_length)
        self.lattice = self._product.lattice(0)
        self._max_lattice = self._product.lattice(1)
        self.log_z = lattice_ops.log_partition(self.lattice)
        self._beta = lattice_ops.betas(self.lattice)
        self._num_classes = C

    @property
    def log_probability(self) -> float:
        """log Σ_T p_T(x ∈ C) over the allowed lengths (the lattice's log Z)."""
        return float(self.log_z)

    def _split(self, label: np.ndarray):
        return label // self._num_classes, label % self._num_classes

    def decode(self) -> tuple[list[int], list[int], float]:
        """(symbols, hidden states, log p(x, z)) of the best allowed (x, z)."""
        labels, score = lattice_ops.viterbi(self._max_lattice)
        z, c = self._split(labels[labels >= 0])
        x = [int(self._members[ci][np.argmax(self.log_emissions[zi, self._members[ci]])]) for zi, ci in zip(z, c)]
        return x, [int(v) for v in z], float(score)

    def sample(self, n: int = 1, seed=None) -> list[tuple[int, ...]]:
        """n exact samples of x from p(x | C) (symbol ids)."""
        rng = as_rng(seed)
        rows = lattice_ops.sample(self.lattice, n, rng)
        out = []
        for row in rows:
            z, c = self._split(row[row >= 0])
            words = []
            for zi, ci in zip(z, c):
                members = self._members[ci]
                logits = self.log_emissions[zi, members]
                p = np.exp(logits - logits.max())
                words.append(int(members[rng.choice(members.size, p=p / p.sum())]))
            out.append(tuple(words))
        return out

    def next_logprobs(self, prefix) -> np.ndarray:
        """log p(x_t = w | x_<t = prefix, C) for every symbol (V + 1,): the last entry is
        the probability that the sentence ends here."""
        prefix = [int(w) for w in prefix]
        K, V = self.log_emissions.shape
        t = len(prefix)
        if t > self.max_length:
            raise ParameterError("the prefix is longer than max_length", name="prefix", value=prefix)
        # forward over the prefix: alpha[z] = log p(x_<t, z_t = z) (row K: still at the start)
        if t == 0:
            alpha, from_rows = np.zeros(1), np.vstack([self.log_start[None, :]])
        else:
            alpha = self.log_start + self.log_emissions[:, prefix[0]]
            for w in prefix[1:]:
                alpha = _logsumexp(alpha[:, None] + self.log_transitions, axis=0) + self.log_emissions[:, w]
            from_rows = self.log_transitions
        q = self.dfa.run(prefix)
        mixed = _logsumexp(alpha[:, None] + from_rows, axis=0)  # (K,): log p(x_<t, z_{t+1} = z')
        next_q = self.class_delta[q, self.word_class]  # (V,)
        beta = np.full((K, V), -np.inf)
        nodes = self._product.node(t + 1, np.repeat(np.arange(K), V), np.tile(next_q, K)).reshape(K, V)
        beta[nodes >= 0] = self._beta[nodes[nodes >= 0]]
        scores = np.empty(V + 1)
        scores[:V] = _logsumexp(mixed[:, None] + self.log_emissions + beta, axis=0)
        ends = self.dfa.accepting[q] and self.min_length <= t
        scores[V] = _logsumexp(alpha, axis=0) if ends else -np.inf
        total = _logsumexp(scores, axis=0)
        if not np.isfinite(total):
            raise ParameterError("the prefix cannot be completed to a sentence that satisfies the constraint",
                                 name="prefix", value=prefix)
        return scores - total
