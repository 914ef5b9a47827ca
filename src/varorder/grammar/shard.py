"""A shard of tagged sentences with its charts, the shared feature layout, and the chart E-steps.

Shared features of z (Liang, Klein & Jordan 2008, §2: b_m = θ_mᵀ φ_m(x, z) on
shared φ(z)). For a shard of B sentences the flat layout is

    [ bias (B) | lexicalized-chart edges (E) | spans (S) ]

* bias — one always-on feature per sentence (carries a submodel's constant
  terms, e.g. the CCM's distituent product and tree prior);
* lexicalized edges — an indicator per edge of the lexicalized chart
  (:mod:`varorder.grammar.charts`): the DMV's potentials live here;
* spans — an indicator per span [i, j) "is a constituent": the CCM's
  potentials live here.

A lexicalized derivation fires its edges and the spans they create, so the
summed potentials of the DMV and the CCM are again a lexicalized chart
(:func:`lexicalized_estep`): the exact product E-step of K&M 2004's combined
model. The CCM alone runs on the bracket chart (:func:`bracket_estep`), whose
derivations are the binary bracketings. Both return the mean parameters µ in
the same layout.
"""

from __future__ import annotations

import numpy as np

from varorder.agree.product_em import Statistics
from varorder.errors import ParameterError
from varorder.grammar import charts
from varorder.hypergraph import Hypergraph, marginals, viterbi

__all__ = ["TreeShard", "lexicalized_estep", "bracket_estep", "make_shards"]


def _concat_templates(templates):
    """Global arrays of a batch of chart templates: (Hypergraph with zero weights, edge offsets)."""
    node_counts = [t.num_nodes for t in templates]
    node_base = np.concatenate([[0], np.cumsum(node_counts)[:-1]]).astype(np.int64)
    edge_counts = np.array([t.num_edges for t in templates], dtype=np.int64)
    edge_offsets = np.zeros(len(templates) + 1, dtype=np.int64)
    np.cumsum(edge_counts, out=edge_offsets[1:])
    heads = np.concatenate([t.edge_head + b for t, b in zip(templates, node_base)])
    tails = np.concatenate([t.tails + b for t, b in zip(templates, node_base)])
    tail_counts = np.concatenate([np.diff(t.tail_offsets) for t in templates])
    tail_offsets = np.zeros(heads.shape[0] + 1, dtype=np.int64)
    np.cumsum(tail_counts, out=tail_offsets[1:])
    hg = Hypergraph(node_counts, heads, (tail_offsets, tails), np.zeros(heads.shape[0]), edge_offsets=edge_offsets)
    return hg, edge_offsets


class TreeShard:
    """B tag sequences (int arrays of tag ids < n_tags) with both charts built.

    Attributes: ``lengths`` (B,); ``span_offsets`` (B+1,) and ``span_sentence``,
    ``span_start``, ``span_end`` (S,) for the spans; ``lexicalized`` /
    ``brackets``: :class:`~varorder.hypergraph.Hypergraph` batches (zero weights)
    with ``lex_span`` / ``bracket_span`` (global span id each edge creates, −1
    none) and the per-edge ``lex_kind``, ``lex_word``, ``lex_arg``, ``lex_adjacent``
    (word ids are positions within the sentence).
    """

    def __init__(self, sentences, n_tags: int):
        self.sentences = [np.asarray(s, dtype=np.int64) for s in sentences]
        if not self.sentences:
            raise ParameterError("a shard needs at least one sentence", name='sentences', value=sentences)
        for b, s in enumerate(self.sentences):
            if s.ndim != 1 or s.size < 1:
                raise ParameterError(f"sentence {b} must be a non-empty 1-d array of tag ids", name='sentences', value=sentences)
            if (s < 0).any() or (s >= n_tags).any():
                raise ParameterError(f"sentence {b} has a tag id outside [0, {n_tags})", name='n_tags', value=n_tags)
        self.n_tags = int(n_tags)
        self.lengths = np.array([s.size for s in self.sentences], dtype=np.int64)
        B = len(self.sentences)
        tables = [charts.span_table(int(n)) for n in self.lengths]
        counts = np.array([t[0].shape[0] for t in tables], dtype=np.int64)
        self.span_offsets = np.zeros(B + 1, dtype=np.int64)
        np.cumsum(counts, out=self.span_offsets[1:])
        self.span_sentence = np.repeat(np.arange(B), counts)
        self.span_start = np.concatenate([t[0] for t in tables])
        self.span_end = np.concatenate([t[1] for t in tables])
        lex = [charts.lexicalized_template(int(n)) for n in self.lengths]
        self.lexicalized, self.lex_edge_offsets = _concat_templates(lex)
        self.lex_kind = np.concatenate([t.edge_kind for t in lex])
        self.lex_word = np.concatenate([t.edge_word for t in lex])
        self.lex_arg = np.concatenate([t.edge_arg for t in lex])
        self.lex_adjacent = np.concatenate([t.edge_adjacent for t in lex])
        self.lex_sentence = np.repeat(np.arange(B), np.diff(self.lex_edge_offsets))
        local = np.concatenate([t.edge_span for t in lex])
        self.lex_span = np.where(local >= 0, local + self.span_offsets[self.lex_sentence], -1)
        br = [charts.bracket_template(int(n)) for n in self.lengths]
        self.brackets, self.bracket_edge_offsets = _concat_templates(br)
        bracket_sentence = np.repeat(np.arange(B), np.diff(self.bracket_edge_offsets))
        self.bracket_span = np.concatenate([t.edge_span for t in br]) + self.span_offsets[bracket_sentence]
        self._cache = {}

    @property
    def num_sentences(self) -> int:
        return len(self.sentences)

    @property
    def num_lex_edges(self) -> int:
        return self.lexicalized.num_edges

    @property
    def num_spans(self) -> int:
        return int(self.span_offsets[-1])

    @property
    def layout_size(self) -> int:
        return self.num_sentences + self.num_lex_edges + self.num_spans

    def split(self, flat):
        """(bias (B,), lexicalized edges (E,), spans (S,)) views of a flat layout array."""
        B, E = self.num_sentences, self.num_lex_edges
        flat = np.asarray(flat)
        if flat.shape != (self.layout_size,):
            raise ParameterError(f"shared array must have shape ({self.layout_size},), got {flat.shape}", name='flat', value=flat)
        return flat[:B], flat[B:B + E], flat[B + E:]

    def join(self, bias, lex, spans):
        return np.concatenate([bias, lex, spans])

    def word_tags(self) -> np.ndarray:
        """Tag id of every word, sentences concatenated."""
        return np.concatenate(self.sentences)

    def cached(self, key, build):
        """A per-shard cache for arrays a submodel derives from the sentences (e.g. yield ids)."""
        if key not in self._cache:
            self._cache[key] = build()
        return self._cache[key]


def lexicalized_estep(shard: TreeShard, shared_log_potentials) -> Statistics:
    """E-step on the lexicalized chart: edge weight = its own potential + the potential of the span it creates."""
    bias, lex, spans = shard.split(shared_log_potentials)
    weight = lex + np.where(shard.lex_span >= 0, spans[np.maximum(shard.lex_span, 0)], 0.0)
    logz, edge, _ = marginals(shard.lexicalized.with_weights(weight))
    span_mu = np.bincount(shard.lex_span[shard.lex_span >= 0], weights=edge[shard.lex_span >= 0],
                          minlength=shard.num_spans)
    return _statistics(shard, logz, bias, edge, span_mu)


def bracket_estep(shard: TreeShard, shared_log_potentials) -> Statistics:
    """E-step on the bracket chart (binary bracketings; lexicalized-edge potentials must be zero)."""
    bias, _, spans = shard.split(shared_log_potentials)
    logz, edge, _ = marginals(shard.brackets.with_weights(spans[shard.bracket_span]))
    span_mu = np.bincount(shard.bracket_span, weights=edge, minlength=shard.num_spans)
    return _statistics(shard, logz, bias, np.zeros(shard.num_lex_edges), span_mu)


def _statistics(shard, logz, bias, edge_mu, span_mu) -> Statistics:
    finite = logz > -np.inf
    mu = shard.join(finite.astype(np.float64), edge_mu, span_mu)
    return Statistics(shared=mu, log_normalizer=float(np.sum(logz + bias)))


def decode(shard: TreeShard, shared_log_potentials, chart: str = "lexicalized"):
    """Best structure per sentence: (list of head arrays (−1 = root) or None, list of span sets).

    ``chart="lexicalized"`` decodes the DMV / product derivation (heads and its bracketing);
    ``chart="brackets"`` decodes a CCM bracketing (no heads). Span sets hold (i, j) of length ≥ 1.
    """
    bias, lex, spans = shard.split(shared_log_potentials)
    heads_out, spans_out = [], []
    if chart == "brackets":
        _, derivations = viterbi(shard.brackets.with_weights(spans[shard.bracket_span]))
        for b, d in enumerate(derivations):
            s = shard.bracket_span[d] - shard.span_offsets[b]
            heads_out.append(None)
            spans_out.append(_span_set(shard, b, s))
        return heads_out, spans_out
    if chart != "lexicalized":
        raise ParameterError(f"chart must be 'lexicalized' or 'brackets', got {chart!r}", name='chart', value=chart)
    weight = lex + np.where(shard.lex_span >= 0, spans[np.maximum(shard.lex_span, 0)], 0.0)
    _, derivations = viterbi(shard.lexicalized.with_weights(weight))
    for b, d in enumerate(derivations):
        heads = np.full(shard.lengths[b], -2, dtype=np.int64)
        kind = shard.lex_kind[d]
        attach = (kind == charts.RIGHT_ATTACH) | (kind == charts.LEFT_ATTACH)
        heads[shard.lex_arg[d[attach]]] = shard.lex_word[d[attach]]
        heads[shard.lex_word[d[kind == charts.ROOT]]] = -1
        created = shard.lex_span[d]
        heads_out.append(heads if d.size else None)
        spans_out.append(_span_set(shard, b, created[created >= 0] - shard.span_offsets[b]))
    return heads_out, spans_out


def _span_set(shard, b, local_ids):
    base = shard.span_offsets[b]
    return {(int(shard.span_start[base + s]), int(shard.span_end[base + s])) for s in local_ids}


def make_shards(sentences, n_tags: int, shard_size: int = 2000):
    """Split tag sequences into :class:`TreeShard` s of at most ``shard_size`` sentences."""
    if shard_size < 1:
        raise ParameterError(f"shard_size must be >= 1, got {shard_size}", name='shard_size', value=shard_size)
    sentences = list(sentences)
    return [TreeShard(sentences[i:i + shard_size], n_tags) for i in range(0, len(sentences), shard_size)]
