"""The dependency model with valence (DMV; Klein & Manning 2004, §3) as a product-EM submodel.

Factorization. For a projective dependency tree z over tags x₁ … xₙ,

    p(x, z) = P_root(x_r) · Π_h Π_{dir ∈ {←, →}} [ Π_{a ∈ deps(h, dir)} (1 − P_stop(x_h, dir, adj)) P_choose(x_a | x_h, dir) ]
                                                · P_stop(x_h, dir, adj_final)

where adj says whether h has taken no dependent on that side yet (the
dependent generated first is the innermost). The factors are the edge
weights of the lexicalized chart of :mod:`varorder.grammar.charts`, so the
E-step is one batched inside–outside on the hypergraph engine, and the
expected counts are sums of edge marginals.

Parameters (probabilities): ``root_`` (T,), ``stop_`` (T, 2, 2) = P_stop(t, dir, adj)
with dir 0 = right (→), 1 = left (←) and adj 0/1, ``choose_`` (T, 2, T).
The harmonic initializer (K&M 2004, §3: "an initial E-step ... in which the
attachment of a to h has weight proportional to the inverse of their distance")
is :meth:`DMV.initialize`.
"""

from __future__ import annotations

import numpy as np

from varorder.agree.product_em import Statistics, Submodel
from varorder.errors import ParameterError
from varorder.grammar import charts
from varorder.grammar.shard import TreeShard, lexicalized_estep
from varorder.engine.validate import as_rng

__all__ = ["DMV"]


def _normalize(c):
    tot = c.sum(axis=-1, keepdims=True)
    return np.divide(c, tot, out=np.full_like(c, 1.0 / c.shape[-1]), where=tot > 0)


class DMV(Submodel):
    """Dependency model with valence over ``n_tags`` tags; ``smoothing`` is an additive pseudo-count."""

    domain = "projective-trees"
    has_private_features = False

    def __init__(self, n_tags: int, smoothing: float = 0.0):
        self.n_tags = n_tags
        self.smoothing = smoothing

    # feature ids: root t | stop/continue (t, dir, adj, outcome 0 = stop, 1 = continue) | choose (t, dir, a)
    @property
    def num_features(self) -> int:
        T = self.n_tags
        return T + 8 * T + 2 * T * T

    def edge_features(self, shard: TreeShard) -> np.ndarray:
        """(E, 2) feature ids fired by each lexicalized-chart edge of ``shard`` (−1 = none)."""

        def build():
            T = self.n_tags
            base = np.concatenate([[0], np.cumsum(shard.lengths)[:-1]])[shard.lex_sentence]
            tags = shard.word_tags()
            head = tags[base + shard.lex_word]
            arg = tags[base + np.maximum(shard.lex_arg, 0)]
            kind = shard.lex_kind
            direction = np.where((kind == charts.LEFT_ATTACH) | (kind == charts.LEFT_STOP), charts.LEFT, charts.RIGHT)
            attach = (kind == charts.RIGHT_ATTACH) | (kind == charts.LEFT_ATTACH)
            stop = (kind == charts.RIGHT_STOP) | (kind == charts.LEFT_STOP)
            valence = T + (((head * 2 + direction) * 2 + shard.lex_adjacent) * 2 + attach.astype(np.int64))
            first = np.where(attach | stop, valence, np.where(kind == charts.ROOT, head, -1))
            second = np.where(attach, 9 * T + (head * 2 + direction) * T + arg, -1)
            return np.stack([first, second], axis=1)

        return shard.cached(("dmv-features", self.n_tags), build)

    def log_parameters(self) -> np.ndarray:
        """log θ laid out by feature id."""
        stop_outcomes = np.stack([self.stop_, 1.0 - self.stop_], axis=-1)
        with np.errstate(divide="ignore"):
            return np.log(np.concatenate([self.root_, stop_outcomes.ravel(), self.choose_.ravel()]))

    def shared_log_potentials(self, shard: TreeShard) -> np.ndarray:
        feats = self.edge_features(shard)
        logt = np.concatenate([self.log_parameters(), [0.0]])  # index −1 → 0
        lex = logt[feats[:, 0]] + logt[feats[:, 1]]
        return shard.join(np.zeros(shard.num_sentences), lex, np.zeros(shard.num_spans))

    def expected_statistics(self, shard, shared_log_potentials, private_scale: float = 1.0) -> Statistics:
        return lexicalized_estep(shard, shared_log_potentials)

    def counts(self, shard, shared_marginals, statistics) -> dict:
        _, lex, _ = shard.split(shared_marginals)
        feats = self.edge_features(shard)
        total = np.zeros(self.num_features)
        for column in range(2):
            use = feats[:, column] >= 0
            total += np.bincount(feats[use, column], weights=lex[use], minlength=self.num_features)
        return {"dmv": total}

    def maximize(self, counts: dict) -> None:
        T, s = self.n_tags, self.smoothing
        c = counts["dmv"] + s
        self.root_ = _normalize(c[:T])
        outcomes = _normalize(c[T:9 * T].reshape(T, 2, 2, 2))
        self.stop_ = outcomes[..., 0]
        self.choose_ = _normalize(c[9 * T:].reshape(T, 2, T))

    def harmonic_counts(self, shards) -> dict:
        """Pseudo-counts of K&M's harmonic initializer.

        Every word is the root with weight 1/n; word a attaches to h ≠ a with weight
        ∝ 1/|h − a| (normalised over h, scaled by the non-root mass (n − 1)/n); with D
        the expected number of dependents of h on one side, the adjacent decision
        continues with weight min(D, 1) and stops with 1 − min(D, 1), the non-adjacent
        one continues max(D − 1, 0) and stops min(D, 1).
        """
        T = self.n_tags
        c = np.zeros(self.num_features)
        for shard in shards:
            for tags in shard.sentences:
                n = tags.size
                np.add.at(c, tags, 1.0 / n)
                if n == 1:
                    np.add.at(c, T + ((tags * 2 + np.arange(2)[:, None]) * 2 + 1) * 2, 1.0)
                    continue
                pos = np.arange(n)
                dist = np.abs(pos[:, None] - pos[None, :]).astype(np.float64)  # [h, a]
                with np.errstate(divide="ignore"):
                    w = np.where(dist > 0, 1.0 / dist, 0.0)
                w = w / w.sum(axis=0, keepdims=True) * (n - 1) / n
                direction = np.where(pos[None, :] > pos[:, None], charts.RIGHT, charts.LEFT)
                np.add.at(c, 9 * T + (tags[:, None] * 2 + direction) * T + tags[None, :], w)
                for d in (charts.RIGHT, charts.LEFT):
                    D = (w * (direction == d)).sum(axis=1)
                    first = np.minimum(D, 1.0)
                    side = (tags * 2 + d) * 2  # then (side + adj) * 2 + outcome, outcome 1 = continue
                    np.add.at(c, T + (side + 1) * 2 + 1, first)
                    np.add.at(c, T + (side + 1) * 2, 1.0 - first)
                    np.add.at(c, T + side * 2 + 1, np.maximum(D - 1.0, 0.0))
                    np.add.at(c, T + side * 2, first)
        return {"dmv": c}

    def initialize(self, shards, method: str = "harmonic", seed=None):
        """Set parameters by the harmonic initializer (default) or uniformly at random (``method="random"``)."""
        if method == "harmonic":
            self.maximize(self.harmonic_counts(shards))
        elif method == "random":
            rng = as_rng(seed)
            self.maximize({"dmv": rng.random(self.num_features)})
        else:
            raise ParameterError(f"method must be 'harmonic' or 'random', got {method!r}", name='method', value=method)
        return self
