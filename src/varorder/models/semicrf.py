"""Semi-Markov CRF for named entities: labelled segments scored as wholes, exact on the engine's semi-Markov
structure (:mod:`varorder.semimarkov`).

Factorization (Sarawagi & Cohen, "Semi-Markov conditional random fields for information extraction",
NIPS 2004): a sentence x of n words is cut into consecutive segments (sᵢ, eᵢ, yᵢ) — an entity of type yᵢ
over words sᵢ … eᵢ − 1, or ``O`` over one word — and

    p(segments | x) ∝ exp( start[y₁] + Σᵢ [ Σ_{t ∈ [sᵢ, eᵢ)} xₜ·W[:, yᵢ] + g(x, sᵢ, eᵢ)·V[:, yᵢ] ]
                          + Σᵢ₌₂ᵐ T[yᵢ₋₁, yᵢ] + end[yₘ] ),

with xₜ the word's features (the CRF's, by ``features`` templates), g the segment's own features — its
length, the word shape of the whole span (``Xx_Xx``), its lower-cased text — and W, V, T, start, end
the weights. ``O`` segments have length one; entity segments 1 … ``max_segment_length`` (by default the
longest training entity). The segment scores (B, L, D, K) go to the engine's one semi-Markov recursion
(log Z, segment marginals with expected transitions, Viterbi, k-best), shared with the hidden
semi-Markov model; no segment dynamic programme lives here. Training minimises Σ NLL + c1‖θ‖₁ + c2‖θ‖²
(CRFsuite's convention) by L-BFGS / OWL-QN; the gradient is expected minus gold counts, the token
part through each word's occupancy p(t lies in a segment of label k).

Tags in and out are in a chunk scheme (``scheme``, BIO by default): every output is valid in it by
construction, so ``constraints`` only checks its name.
"""

from __future__ import annotations

import time

import numpy as np

from varorder.base import ParamsMixin, check_int, check_is_fitted, check_real
from varorder.errors import ParameterError
from varorder.models.features import FeatureIndexer, _shape, apply_templates, csr_times_dense, rows_to_csr
from varorder.models.optim import axpy, dot, lbfgs
from varorder.models.sequences import ChunkPlan, token_accuracy, token_mask

__all__ = ["SemiMarkovCRF", "SegmentObjective"]

NEG_INF = -np.inf


def _segment_feature_names(words, t, d):
    span = words[t - d:t + 1]
    shape = "_".join(_shape(w) for w in span)
    return [f"len={d + 1}", f"shape={shape}", "lower=" + " ".join(w.lower() for w in span)]


def _segment_rows(word_lists, D):
    """Per flat token t (the segment's last word) and length d + 1, the names of the segment's features
    (rows t·D + d; none where the segment would start before its sentence)."""
    names = []
    for words in word_lists:
        for t in range(len(words)):
            for d in range(D):
                names.append(_segment_feature_names(words, t, d) if t - d >= 0 else [])
    return names


class SegmentObjective:
    """Σ NLL of the gold segmentations and its gradient in θ = (W (F, K), V (G, K), T (K, K), start, end)."""

    def __init__(self, X, segment_matrix, lengths, gold_segments, K, D, outside: int):
        from varorder.models.features import label_counts

        self.X = X
        self.XT = rows_to_csr(X).T.tocsr()
        self.S = segment_matrix  # (N·D, G) CSR
        self.ST = segment_matrix.T.tocsr()
        self.K, self.D, self.F, self.G = K, D, X.shape[1], segment_matrix.shape[1]
        self.outside = outside
        self.plan = ChunkPlan(lengths, max_cells=max(256, (1 << 20) // (D * K)))
        self.lengths = lengths
        offsets = self.plan.offsets
        token_label = np.empty(int(offsets[-1]), dtype=np.int64)
        seg_rows, seg_labels = [], []
        self.empirical_T = np.zeros((K, K))
        self.empirical_start = np.zeros(K)
        self.empirical_end = np.zeros(K)
        for s, segments in enumerate(gold_segments):
            base = int(offsets[s])
            for i, (start, end, k) in enumerate(segments):
                token_label[base + start:base + end] = k
                seg_rows.append((base + end - 1) * D + (end - start - 1))
                seg_labels.append(k)
                if i:
                    self.empirical_T[segments[i - 1][2], k] += 1.0
            self.empirical_start[segments[0][2]] += 1.0
            self.empirical_end[segments[-1][2]] += 1.0
        self.empirical_W = label_counts(_as_rows(X), token_label, K)
        onehot = np.zeros((len(seg_rows), K))
        onehot[np.arange(len(seg_rows)), seg_labels] = 1.0
        self.empirical_V = np.asarray(self.ST[:, seg_rows] @ onehot)
        self.gold_rows = np.array(seg_rows, dtype=np.int64)
        self.gold_labels = np.array(seg_labels, dtype=np.int64)
        self.gold_transitions = [(segments[i - 1][2], segments[i][2]) for segments in gold_segments
                                 for i in range(1, len(segments))]

    @property
    def n_params(self) -> int:
        return (self.F + self.G + self.K + 2) * self.K

    def unpack(self, theta):
        F, G, K = self.F, self.G, self.K
        W = theta[: F * K].reshape(F, K)
        V = theta[F * K:(F + G) * K].reshape(G, K)
        rest = (F + G) * K
        T = theta[rest:rest + K * K].reshape(K, K)
        return W, V, T, theta[rest + K * K:rest + K * K + K], theta[rest + K * K + K:]

    def scores(self, theta, mask=None):
        """Per chunk (seq_ids, lengths, flat_index, valid, segment scores (B, L, D, K)) of all sequences."""
        W, V, _, _, _ = self.unpack(theta)
        return segment_scores(self.plan, csr_times_dense(self.X, W), csr_times_dense(self.S, V), self.D, self.K,
                              self.outside, mask)

    def __call__(self, theta):
        from varorder import semimarkov

        W, V, T, start, end = self.unpack(theta)
        grad = np.zeros_like(theta)
        gW, gV, gT, g_start, g_end = self.unpack(grad)
        occupancy_flat = np.zeros((self.X.shape[0], self.K))
        segment_flat = np.zeros((self.X.shape[0] * self.D, self.K))
        log_z = 0.0
        gold_score = 0.0
        for seq_ids, lengths, flat_index, valid, P in self.scores(theta):
            logz = semimarkov.log_partition(P, T, lengths=lengths, start=start, end=end)
            seg, edges = semimarkov.marginals(P, T, lengths=lengths, start=start, end=end, edges=True)
            log_z += logz.sum()
            gT += edges.sum(axis=0)
            B, L, D, K = seg.shape
            occupancy = np.zeros((B, L, K))
            for d in range(D):  # a segment ending at t of length d + 1 covers t − d … t
                for j in range(d + 1):
                    occupancy[:, : L - j] += seg[:, j:, d]
            rows = flat_index[valid]
            occupancy_flat[rows] = occupancy[valid]
            segment_flat.reshape(-1, D, K)[rows] = seg[valid]
            for b in range(B):
                n = int(lengths[b])
                g_end += seg[b, n - 1].sum(axis=0)
                g_start += np.array([seg[b, d, d] for d in range(min(D, n))]).sum(axis=0)
        gW[:] = csr_times_dense(self.XT, occupancy_flat) - self.empirical_W
        gV[:] = csr_times_dense(self.ST, segment_flat) - self.empirical_V
        gT -= self.empirical_T
        g_start -= self.empirical_start
        g_end -= self.empirical_end
        token_scores = csr_times_dense(self.X, W)
        segment_part = csr_times_dense(self.S, V)
        offsets = self.plan.offsets
        gold_score = float((token_scores * _onehot_tokens(self, offsets)).sum()
                           + segment_part[self.gold_rows, self.gold_labels].sum()
                           + sum(T[a, b] for a, b in self.gold_transitions)
                           + (self.empirical_start * start).sum() + (self.empirical_end * end).sum())
        return float(log_z - gold_score), grad


def _onehot_tokens(objective, offsets):
    cache = getattr(objective, "_onehot", None)
    if cache is None:
        cache = np.zeros((int(offsets[-1]), objective.K))
        rows = objective.gold_rows // objective.D
        lengths = objective.gold_rows % objective.D + 1
        for r, n, k in zip(rows.tolist(), lengths.tolist(), objective.gold_labels.tolist()):
            cache[r - n + 1:r + 1, k] = 1.0
        objective._onehot = cache
    return cache


def _as_rows(matrix):
    from varorder.models.features import Rows

    if isinstance(matrix, Rows):
        return matrix
    csr = matrix.tocsr()
    return Rows(csr.indptr, csr.indices, csr.data, csr.shape)


def segment_scores(plan, token_scores, segment_part, D, K, outside, mask=None):
    """Per chunk of the plan: (seq_ids, lengths, flat_index, valid, (B, L, D, K) segment scores): the summed
    token scores over the span plus the segment features' scores; O only as one-word segments; ``mask``
    (N·D, K) booleans forbid segments."""
    seg_flat = segment_part.reshape(-1, D, K)
    for seq_ids, lengths, flat_index, valid in plan.chunks:
        tok = np.where(valid[:, :, None], token_scores[flat_index], 0.0)
        B, L, _ = tok.shape
        cum = np.concatenate([np.zeros((B, 1, K)), np.cumsum(tok, axis=1)], axis=1)
        P = np.full((B, L, D, K), NEG_INF)
        for d in range(D):
            if d >= L:
                break
            P[:, d:, d] = cum[:, d + 1:] - cum[:, : L - d]
        P += np.where(valid[:, :, None, None], seg_flat[flat_index], 0.0)
        if D > 1:
            P[:, :, 1:, outside] = NEG_INF
        if mask is not None:
            P = np.where(mask.reshape(-1, D, K)[flat_index], P, NEG_INF)
        yield seq_ids, lengths, flat_index, valid, P


class SemiMarkovCRF(ParamsMixin):
    """Semi-Markov CRF tagger (see the module doc) with the CRF's API: X holds sequences of words.

    Parameters: ``features`` (the token templates, default the NER preset), ``scheme`` (the tags' chunk
    scheme), ``max_segment_length`` (None: the longest training entity; given, the training sentences
    holding a longer entity are left out, with a warning, and counted in ``n_sentences_left_out_``), ``c1``, ``c2``,
    ``max_iterations``, ``delta``, ``period`` as for :class:`~varorder.models.crf.CRF`, ``verbose``.

    Learned: ``classes_`` (the tags, in ``scheme``), ``entity_types_``, ``labels_`` (segment labels:
    the types and ``O``), ``feature_names_``, ``segment_feature_names_``, ``token_weights_`` (F, K),
    ``segment_weights_`` (G, K), ``transition_weights_``, ``start_weights_``, ``end_weights_``,
    ``n_iter_``, ``training_time_``.
    """

    def __init__(self, *, features: str = "ner", scheme: str = "BIO", max_segment_length: int | None = None,
                 c1: float = 0.0, c2: float = 0.1, max_iterations: int = 100, delta: float = 1e-5,
                 period: int = 10, verbose: bool = False):
        self.features = features
        self.scheme = scheme
        self.max_segment_length = max_segment_length
        self.c1 = c1
        self.c2 = c2
        self.max_iterations = max_iterations
        self.delta = delta
        self.period = period
        self.verbose = verbose

    def _check_params(self):
        from varorder.io.schemes import canonical_scheme

        canonical_scheme(self.scheme)
        check_int(self, "max_segment_length", 1, allow_none=True)
        check_real(self, "c1", 0)
        check_real(self, "c2", 0)
        check_int(self, "max_iterations", 1)
        check_real(self, "delta", 0)
        check_int(self, "period", 1)

    def _words(self, X, name="X"):
        for i, words in enumerate(X):
            if isinstance(words, str) or not all(isinstance(w, str) for w in words) or not words:
                raise ParameterError(f"{name}[{i}] is not a non-empty sequence of words: the semi-Markov CRF reads "
                                 "words and extracts its own token and segment features")
        return [list(w) for w in X]

    def _design(self, words):
        token_X, lengths = self._indexer.transform(apply_templates(words, self.features), csr=False)
        names = _segment_rows(words, self.D_)
        counts = np.fromiter(map(len, names), dtype=np.int64, count=len(names))
        flat = [n for row in names for n in row]
        vocabulary = self._segment_vocabulary
        columns = np.fromiter((vocabulary.get(n, -1) for n in flat), dtype=np.int64, count=len(flat))
        import scipy.sparse as sp

        keep = columns >= 0
        row_of = np.repeat(np.arange(len(names)), counts)[keep]
        S = sp.csr_matrix((np.ones(int(keep.sum())), (row_of, columns[keep])),
                          shape=(len(names), len(self.segment_feature_names_)))
        return token_X, S, lengths

    def fit(self, X, y):
        """Train on sequences of words X with tag sequences y (in ``scheme``); returns self."""
        from varorder.io.schemes import canonical_scheme, entity_types, scheme_labels, spans

        self._check_params()
        began = time.perf_counter()
        words = self._words(X)
        if len(words) != len(y):
            raise ParameterError(f"X has {len(words)} sequences but y has {len(y)}")
        scheme = canonical_scheme(self.scheme)
        found = []
        for i, (w, tags) in enumerate(zip(words, y)):
            if len(w) != len(tags):
                raise ParameterError(f"X[{i}] has {len(w)} words but y[{i}] has {len(tags)} tags")
            from varorder.io.schemes import validate

            validate(list(tags), scheme, f"y[{i}]: ")
            found.append(spans(list(tags), scheme))
        self.entity_types_ = entity_types(t for tags in y for t in tags)
        self.labels_ = self.entity_types_ + ["O"]
        self.classes_ = scheme_labels(self.entity_types_, scheme)
        K = len(self.labels_)
        longest = max([e - s for spans_ in found for _, s, e in spans_] + [1])
        self.D_ = self.max_segment_length or longest
        # sentences holding an entity longer than a given max_segment_length cannot be segmented: left out
        keep = [all(e - s <= self.D_ for _, s, e in spans_) for spans_ in found]
        self.n_sentences_left_out_ = keep.count(False)
        if self.n_sentences_left_out_:
            import warnings

            warnings.warn(f"SemiMarkovCRF: {self.n_sentences_left_out_} training sentence(s) hold an entity longer "
                          f"than max_segment_length={self.D_} and are left out", RuntimeWarning, stacklevel=2)
            words = [w for w, k in zip(words, keep) if k]
            found = [f for f, k in zip(found, keep) if k]
        index = {t: k for k, t in enumerate(self.labels_)}
        gold = []
        for w, spans_ in zip(words, found):
            segments, pos = [], 0
            for type_, s, e in spans_:
                segments += [(t, t + 1, K - 1) for t in range(pos, s)]
                segments.append((s, e, index[type_]))
                pos = e
            segments += [(t, t + 1, K - 1) for t in range(pos, len(w))]
            gold.append(segments)
        self._indexer = FeatureIndexer().fit(apply_templates(words, self.features))
        self.feature_names_ = self._indexer.names_
        # segment features: those of the gold segments (what the data can give a weight)
        vocabulary: dict = {}
        for w, segments in zip(words, gold):
            for s, e, _ in segments:
                for name in _segment_feature_names(w, e - 1, e - s - 1):
                    vocabulary.setdefault(name, len(vocabulary))
        self._segment_vocabulary = vocabulary
        self.segment_feature_names_ = list(vocabulary)
        token_X, S, lengths = self._design(words)
        objective = SegmentObjective(token_X, S, lengths, gold, K, self.D_, K - 1)

        def regularised(theta):
            f, g = objective(theta)
            if self.c2 > 0:
                f += self.c2 * dot(theta, theta)
                axpy(theta, g, 2.0 * self.c2)
            return f, g

        self.history_ = []

        def record(iteration, params, value, grad_norm):
            self.history_.append({"iteration": iteration, "objective": value, "grad_norm": grad_norm,
                                  "time": time.perf_counter() - began})
            if self.verbose:
                print(f"iter {iteration:4d} objective={value:.6g} |grad|={grad_norm:.3g}")

        theta, info = lbfgs(regularised, np.zeros(objective.n_params), c1=self.c1,
                            max_iterations=self.max_iterations, delta=self.delta, period=self.period, callback=record)
        self.n_iter_ = info["iterations"]
        (self.token_weights_, self.segment_weights_, self.transition_weights_, self.start_weights_,
         self.end_weights_) = (a.copy() for a in objective.unpack(theta))
        self.training_time_ = time.perf_counter() - began
        return self

    # -- inference -----------------------------------------------------------------------------

    def _chunks(self, X, allowed=None):
        check_is_fitted(self, "token_weights_")
        words = self._words(X)
        token_X, S, lengths = self._design(words)
        plan = ChunkPlan(lengths, max_cells=max(256, (1 << 20) // (self.D_ * len(self.labels_))))
        mask = None if allowed is None else self._segment_mask(token_mask(self.classes_, allowed, lengths), plan)
        tok = csr_times_dense(token_X, self.token_weights_)
        seg = csr_times_dense(S, self.segment_weights_)
        return words, plan, segment_scores(plan, tok, seg, self.D_, len(self.labels_), len(self.labels_) - 1, mask)

    def _segment_mask(self, tag_mask, plan):
        """(N·D, K) booleans: a segment is allowed when every word's tag in it (by ``scheme``) is allowed."""
        from varorder.io.schemes import encode

        K, D = len(self.labels_), self.D_
        column = {c: i for i, c in enumerate(self.classes_)}
        N = tag_mask.shape[0]
        out = np.zeros((N, D, K), dtype=bool)
        for s in range(plan.lengths.size):
            base, n = int(plan.offsets[s]), int(plan.lengths[s])
            for t in range(n):
                for d in range(min(D, t + 1)):
                    for k, label in enumerate(self.labels_):
                        if label == "O":
                            if d == 0:
                                out[base + t, 0, k] = tag_mask[base + t, column["O"]]
                            continue
                        tags = encode([(label, 0, d + 1)], d + 1, self.scheme)
                        out[base + t, d, k] = all(tag_mask[base + t - d + j, column[tag]] for j, tag in
                                                  enumerate(tags))
        return out.reshape(N * D, K)

    def _tags(self, segmentation, n):
        from varorder.io.schemes import encode

        spans_ = [(self.labels_[k], s, e) for s, e, k in segmentation if self.labels_[k] != "O"]
        return encode(spans_, n, self.scheme)

    def _check_constraints(self, constraints):
        if constraints is not None:
            from varorder.io.schemes import canonical_scheme

            canonical_scheme(constraints)  # outputs are valid in ``scheme`` by construction

    def predict(self, X, allowed=None, constraints: str | None = None) -> list[list[str]]:
        """The best segmentation of each sentence, as tags in ``scheme`` (always valid there)."""
        from varorder import semimarkov

        self._check_constraints(constraints)
        words, plan, chunks = self._chunks(X, allowed)
        out = [None] * len(words)
        for seq_ids, lengths, _, _, P in chunks:
            segmentations, scores = semimarkov.viterbi(P, self.transition_weights_, lengths=lengths,
                                                       start=self.start_weights_, end=self.end_weights_)
            _check_paths(scores, seq_ids)
            for b, s in enumerate(seq_ids.tolist()):
                out[s] = self._tags(segmentations[b], int(lengths[b]))
        return out

    def predict_kbest(self, X, k: int = 5, allowed=None, constraints: str | None = None):
        """(taggings, log_probabilities): the k best segmentations of each sentence as tags, with their log p."""
        from varorder import semimarkov

        self._check_constraints(constraints)
        words, plan, chunks = self._chunks(X, allowed)
        taggings, log_p = [None] * len(words), [None] * len(words)
        free = None if allowed is None else {int(s): z for s, z in self._log_z(X)}
        for seq_ids, lengths, _, _, P in chunks:
            lists, scores = semimarkov.kbest(P, self.transition_weights_, k, lengths=lengths,
                                             start=self.start_weights_, end=self.end_weights_)
            _check_paths(scores[:, 0], seq_ids)
            logz = semimarkov.log_partition(P, self.transition_weights_, lengths=lengths, start=self.start_weights_,
                                            end=self.end_weights_)
            for b, s in enumerate(seq_ids.tolist()):
                finite = np.isfinite(scores[b])
                taggings[s] = [self._tags(seg, int(lengths[b])) for seg in lists[b][: int(finite.sum())]]
                log_p[s] = scores[b, finite] - (logz[b] if free is None else free[s])
        return taggings, log_p

    def _log_z(self, X):
        from varorder import semimarkov

        _, _, chunks = self._chunks(X)
        for seq_ids, lengths, _, _, P in chunks:
            logz = semimarkov.log_partition(P, self.transition_weights_, lengths=lengths, start=self.start_weights_,
                                            end=self.end_weights_)
            yield from zip(seq_ids.tolist(), logz.tolist())

    def predict_marginals(self, X, allowed=None, constraints: str | None = None) -> list[np.ndarray]:
        """Per sentence (n, len(``classes_``)): p(word t has tag c), from the segment marginals (BIO, BIOES, BILOU:
        the first word of a segment takes B (or S/U alone), the last E/L, the others I; IOB1 is refused)."""
        from varorder import semimarkov
        from varorder.io.schemes import canonical_scheme, encode

        self._check_constraints(constraints)
        if canonical_scheme(self.scheme) == "IOB1":
            raise ParameterError("SemiMarkovCRF.predict_marginals: IOB1 tags depend on the neighbouring segment; use BIO")
        words, plan, chunks = self._chunks(X, allowed)
        column = {c: i for i, c in enumerate(self.classes_)}
        out = [None] * len(words)
        for seq_ids, lengths, _, _, P in chunks:
            seg = semimarkov.marginals(P, self.transition_weights_, lengths=lengths, start=self.start_weights_,
                                       end=self.end_weights_)
            for b, s in enumerate(seq_ids.tolist()):
                n = int(lengths[b])
                table = np.zeros((n, len(self.classes_)))
                for t in range(n):
                    for d in range(min(self.D_, t + 1)):
                        for k, label in enumerate(self.labels_):
                            p = seg[b, t, d, k]
                            if p == 0.0:
                                continue
                            tags = ["O"] if label == "O" else encode([(label, 0, d + 1)], d + 1, self.scheme)
                            for j, tag in enumerate(tags):
                                table[t - d + j, column[tag]] += p
                out[s] = table
        return out

    def score(self, X, y) -> float:
        return token_accuracy(self.predict(X), y)


def _check_paths(scores, seq_ids):
    bad = np.flatnonzero(np.isneginf(scores))
    if bad.size:

        raise ParameterError(f"sequence {int(seq_ids[bad[0]])} has no segmentation that the allowed labels "
                             "permit", name="allowed", value=int(seq_ids[bad[0]]))
