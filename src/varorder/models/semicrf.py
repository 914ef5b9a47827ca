"""Semi-Markov CRF for named entities: labelled segments scored as wholes, exact on the engine's semi-Markov
structure.

Factorization (Sarawagi & Cohen, "Semi-Markov conditional random fields for information extraction",
NIPS 2004): a sentence x of n words is cut into consecutive segments (sᵢ, eᵢ, yᵢ) — an entity of type yᵢ
over words sᵢ … eᵢ − 1, or ``O`` over one word — and

    p(segments | x) ∝ exp( start[y₁] + Σᵢ [ Σ_{t ∈ [sᵢ, eᵢ)} xₜ·W[:, c(yᵢ, t − sᵢ, eᵢ − sᵢ)] + g(x, sᵢ, eᵢ)·V[:, yᵢ] ]
                          + Σᵢ₌₂ᵐ T[yᵢ₋₁, yᵢ] + end[yₘ] ),

with xₜ the word's features (the CRF's, by ``features`` templates), c the weight column of a word by its
place in the segment (``token_positions``: ``"BILOU"`` — unit, first, inside, last —, ``"BIO"`` or one
column per label, ``"segment"``), g the segment's own features and W, V, T, start, end the weights. The
segment features (``segment_features``) are what a token-level model cannot express: the segment's length
per label, the word shape of the whole span (``Xx_Xx``), its case pattern (one class per word), its frame
(lower-case words kept, the others as their case class: ``X of X``), its lower-cased text, its first and
last word, the words just outside it, and membership of the span's text in a dictionary of training
entities per type. The dictionary is built jackknifed: a training sentence sees only the entities of the
other folds (contiguous blocks of sentences, so that a document's repeats mostly stay in one fold), so its
weight is learned from the reliability it has on unseen text; at prediction it holds every training entity.
Span-valued features are matched by 64-bit hashes of their words' strings (a collision between two
different spans has probability ≈ 2⁻⁶⁴ per pair). A feature gets a weight when a gold segment carries it.

``O`` segments have length one; entity segments 1 … ``max_segment_length`` (by default the longest training
entity). The segment scores (N, D, K) go to the engine's semi-Markov recursion (log Z, segment marginals
and expected transitions: :mod:`varorder.engine.semimarkov_flat`; Viterbi, k-best, marginals at prediction:
:mod:`varorder.semimarkov`); no segment dynamic programme lives here. Training minimises
Σ NLL + c1‖θ‖₁ + c2‖θ‖² (CRFsuite's convention) by L-BFGS / OWL-QN; the gradient is expected minus gold
counts, the token part through each word's expected place in a segment of each label.

Tags in and out are in a chunk scheme (``scheme``, BIO by default): every output is valid in it by
construction, so ``constraints`` only checks its name.
"""

from __future__ import annotations

import hashlib
import time

import numba as nb
import numpy as np
import scipy.sparse as sp

from varorder.base import ParamsMixin, check_int, check_is_fitted, check_real
from varorder.errors import ParameterError
from varorder.models.features import (FeatureIndexer, Rows, _shape, apply_templates, csr_times_dense, label_counts,
                                      transpose_rows)
from varorder.models.optim import axpy, dot, lbfgs
from varorder.models.sequences import ChunkPlan, token_accuracy, token_mask
import varorder._numba_start  # noqa: E402,F401,I001  (Numba's cache saves locked across processes)

__all__ = ["SemiMarkovCRF", "SegmentObjective", "SegmentFeaturizer", "SEGMENT_FEATURES"]

NEG_INF = -np.inf
SEGMENT_FEATURES = ("length", "shape", "case", "frame", "text", "edges", "context", "dictionary")
_FAMILIES = {"length": ("length",), "shape": ("shape",), "case": ("case",), "frame": ("frame",),
             "text": ("text",), "edges": ("first", "last"), "context": ("prev", "next"), "dictionary": ()}
_POSITIONS = ("BILOU", "BIO", "segment")
_MUL = np.uint64(0x100000001B3)


def _mix(h):
    """splitmix64's finaliser on uint64 arrays (wrapping arithmetic)."""
    h = h ^ (h >> np.uint64(30))
    h = h * np.uint64(0xBF58476D1CE4E5B9)
    h = h ^ (h >> np.uint64(27))
    h = h * np.uint64(0x94D049BB133111EB)
    return h ^ (h >> np.uint64(31))


def _hashes(strings) -> np.ndarray:
    """A stable 64-bit hash of each string (the same in every process)."""
    cache: dict = {}
    out = np.empty(len(strings), dtype=np.uint64)
    for i, s in enumerate(strings):
        h = cache.get(s)
        if h is None:
            h = cache[s] = int.from_bytes(hashlib.blake2b(s.encode("utf-8"), digest_size=8).digest(), "little")
        out[i] = h
    return out


def _case(word: str) -> str:
    if word.isdigit():
        return "D"
    if word.isupper():
        return "U"
    if word.istitle():
        return "T"
    if word.islower():
        return "L"
    return "M" if any(c.isalpha() for c in word) else "P"


def _frame(word: str) -> str:
    return word if word.islower() else "#" + _case(word)


_WORD_VIEWS = {"shape": _shape, "case": _case, "frame": _frame, "text": str.lower}


class SegmentFeaturizer:
    """The segment features of every readable segment (t, d) of flat sentences as a CSR matrix (N·D, G):
    row t·D + d is the segment of length d + 1 ending at flat word t. Fitted on the gold segments (the
    vocabulary), it maps new sentences to the same columns."""

    def __init__(self, families, D: int, entity_types, folds: int = 10):
        self.families = tuple(families)
        self.D = D
        self.entity_types = list(entity_types)
        self.folds = folds

    # -- keys -----------------------------------------------------------------------------------

    def _layout(self, words):
        flat = [w for sentence in words for w in sentence]
        lengths = np.fromiter(map(len, words), dtype=np.int64, count=len(words))
        offsets = np.concatenate([[0], np.cumsum(lengths)])
        sentence = np.repeat(np.arange(lengths.size), lengths)
        first = offsets[:-1][sentence]
        last = offsets[1:][sentence] - 1
        t = np.arange(len(flat))[:, None]
        d = np.arange(self.D)[None, :]
        readable = t - d >= first[:, None]
        return flat, offsets, sentence, first, last, readable

    def _span_hash(self, word_keys):
        N, D = word_keys.size, self.D
        H = np.zeros((N, D), dtype=np.uint64)
        with np.errstate(over="ignore"):
            H[:, 0] = _mix(word_keys)
            for d in range(1, D):
                H[d:, d] = _mix(H[d:, d - 1] * _MUL + word_keys[: N - d])
        return H

    def _keys(self, layout):
        """{family: (keys (N, D) uint64, applicable (N, D) bool)} for the token-free families."""
        flat, offsets, sentence, first, last, readable = layout
        N, D = len(flat), self.D
        out = {}
        views = {}
        for family in self.families:
            for name in _FAMILIES[family]:
                if name == "length":
                    out[name] = (np.broadcast_to(np.arange(D, dtype=np.uint64), (N, D)), readable)
                    continue
                view = "text" if name in ("first", "last", "prev", "next") else name
                if view not in views:
                    views[view] = _hashes([_WORD_VIEWS[view](w) for w in flat])
                keys = views[view]
                if name in _WORD_VIEWS:
                    out[name] = (self._span_hash(keys), readable)
                    continue
                long = readable & (np.arange(D) >= 1)[None, :]
                K = np.zeros((N, D), dtype=np.uint64)
                for d in range(D):
                    if name == "first":
                        K[d:, d] = keys[: N - d]
                    elif name == "last":
                        K[:, d] = keys
                    elif name == "prev":  # the word before the span, or the sentence start (hash 0)
                        src = np.arange(N) - d - 1
                        inside = src >= first
                        K[:, d] = np.where(inside, keys[np.maximum(src, 0)], np.uint64(0))
                    else:  # next
                        src = np.arange(N) + 1
                        inside = src <= last
                        K[:, d] = np.where(inside, keys[np.minimum(src, N - 1)], np.uint64(1))
                out[name] = (K, long if name in ("first", "last") else readable)
        if "dictionary" in self.families and "text" not in views:
            views["text"] = _hashes([w.lower() for w in flat])
        self._text_hash = self._span_hash(views["text"]) if "dictionary" in self.families else None
        return out

    @staticmethod
    def _name(name, words, s, e):
        span = words[s:e]
        if name == "length":
            return f"len={e - s}"
        if name in _WORD_VIEWS:
            return f"{name}=" + " ".join(_WORD_VIEWS[name](w) for w in span)
        if name == "first":
            return "first=" + span[0].lower()
        if name == "last":
            return "last=" + span[-1].lower()
        if name == "prev":
            return "prev=" + (words[s - 1].lower() if s > 0 else "<s>")
        return "next=" + (words[e].lower() if e < len(words) else "</s>")

    # -- fit / transform ------------------------------------------------------------------------

    def fit_transform(self, words, gold):
        """Fit the vocabulary on the gold segments [(start, end, label), …] per sentence (label indices, the
        last one ``O``) and return the training sentences' segment matrix (the dictionary jackknifed)."""
        layout = self._layout(words)
        flat, offsets = layout[0], layout[1]
        D = self.D
        rows, where = [], []
        for s, segments in enumerate(gold):
            base = int(offsets[s])
            for start, end, k in segments:
                rows.append((base + end - 1) * D + (end - start - 1))
                where.append((s, start, end, k))
        rows = np.array(rows, dtype=np.int64)
        keys = self._keys(layout)
        self.vocabulary_ = {}
        names = []
        for name, (K, applicable) in keys.items():
            gold_keys = K.reshape(-1)[rows]
            ok = applicable.reshape(-1)[rows]
            uniq, first_at = np.unique(gold_keys[ok], return_index=True)
            chosen = np.flatnonzero(ok)[first_at]
            self.vocabulary_[name] = (uniq, len(names))
            for i in chosen.tolist():
                s, start, end, _ = where[i]
                names.append(self._name(name, words[s], start, end))
        self.dictionary_offset_ = len(names)
        if "dictionary" in self.families:
            names += [f"dict={t}" for t in self.entity_types]
            self._fit_dictionary(layout, rows, where)
        self.names_ = names
        return self._matrix(layout, keys, train=True)

    def _fit_dictionary(self, layout, rows, where):
        n_types = len(self.entity_types)
        entity = np.array([k < n_types for (_, _, _, k) in where], dtype=bool)
        hashes = self._text_hash.reshape(-1)[rows][entity]
        types = np.array([k for (_, _, _, k) in where], dtype=np.int64)[entity]
        n_sentences = layout[1].size - 1
        folds = np.array([s * self.folds // max(n_sentences, 1) for (s, _, _, _) in where], dtype=np.int64)[entity]
        uniq, inverse = np.unique(hashes, return_inverse=True)
        counts = np.zeros((self.folds + 1, uniq.size, n_types))
        np.add.at(counts, (np.full(inverse.size, self.folds), inverse, types), 1.0)
        np.add.at(counts, (folds, inverse, types), 1.0)
        self.dictionary_keys_ = uniq
        self._fold_counts = counts
        self.dictionary_types_ = counts[self.folds] > 0

    def transform(self, words):
        layout = self._layout(words)
        return self._matrix(layout, self._keys(layout), train=False)

    def _matrix(self, layout, keys, train):
        flat, offsets, sentence = layout[0], layout[1], layout[2]
        N, D = len(flat), self.D
        rows_out, cols_out = [], []
        for name, (K, applicable) in keys.items():
            uniq, base = self.vocabulary_[name]
            idx = np.flatnonzero(applicable.reshape(-1))
            k = K.reshape(-1)[idx]
            pos = np.searchsorted(uniq, k)
            pos = np.minimum(pos, max(uniq.size - 1, 0))
            hit = (uniq[pos] == k) if uniq.size else np.zeros(k.size, dtype=bool)
            rows_out.append(idx[hit])
            cols_out.append(base + pos[hit])
        if "dictionary" in self.families and self.dictionary_keys_.size:
            idx = np.flatnonzero(layout[5].reshape(-1))
            k = self._text_hash.reshape(-1)[idx]
            uniq = self.dictionary_keys_
            pos = np.minimum(np.searchsorted(uniq, k), uniq.size - 1)
            hit = uniq[pos] == k
            idx, pos = idx[hit], pos[hit]
            if train:  # jackknifed: the counts of the other folds
                n_sentences = offsets.size - 1
                fold = sentence[idx // D] * self.folds // max(n_sentences, 1)
                present = (self._fold_counts[self.folds][pos] - self._fold_counts[fold, pos]) > 0
            else:
                present = self.dictionary_types_[pos]
            r, c = np.nonzero(present)
            rows_out.append(idx[r])
            cols_out.append(self.dictionary_offset_ + c)
        rows = np.concatenate(rows_out) if rows_out else np.zeros(0, dtype=np.int64)
        cols = np.concatenate(cols_out) if cols_out else np.zeros(0, dtype=np.int64)
        G = len(self.names_)
        S = sp.csr_matrix((np.ones(rows.size), (rows, cols)), shape=(N * D, G))
        S.sum_duplicates()
        return S


class _Roles:
    """The weight column of each label by a word's place in its segment: unit (a one-word segment), first,
    inside, last; ``O`` has one column."""

    def __init__(self, n_types: int, positions: str):
        K = n_types + 1
        if positions == "BILOU":
            roles = [[4 * k + r for k in range(n_types)] for r in range(4)]
            names = [f"{p}-{k}" for k in range(n_types) for p in "UBIL"]
        elif positions == "BIO":
            roles = [[2 * k for k in range(n_types)], [2 * k for k in range(n_types)],
                     [2 * k + 1 for k in range(n_types)], [2 * k + 1 for k in range(n_types)]]
            names = [f"{p}-{k}" for k in range(n_types) for p in "BI"]
        else:
            roles = [list(range(n_types))] * 4
            names = [str(k) for k in range(n_types)]
        O = len(names)
        self.unit, self.first, self.inside, self.last = (np.array(r + [O], dtype=np.int64) for r in roles)
        self.n_columns = O + 1
        self.K = K
        self.column_names = names + ["O"]


class SegmentObjective:
    """Σ NLL of the gold segmentations and its gradient in θ = (W (F, C), V (G, K), T (K, K), start, end).

    ``X`` (N, F) token features (CSR or :class:`~varorder.models.features.Rows`), ``S`` (N·D, G) segment
    features, ``lengths`` of the sentences, ``gold`` per sentence [(start, end, label)], ``K`` labels (the
    last is ``O``, one word only), ``D`` the longest segment, ``roles`` the token weight columns."""

    def __init__(self, X, S, lengths, gold, K, D, roles: _Roles):
        self.X = X if isinstance(X, Rows) else _as_rows(X)
        self.XT = transpose_rows(self.X)  # unknown features (column −1) dropped
        self.S = S.tocsr()
        self.ST = self.S.T.tocsr()
        self.roles = roles
        self.K, self.D, self.F, self.G, self.C = K, D, X.shape[1], S.shape[1], roles.n_columns
        self.lengths = np.asarray(lengths, dtype=np.int64)
        self.offsets = np.concatenate([[0], np.cumsum(self.lengths)])
        N = int(self.offsets[-1])
        self.begin = np.repeat(self.offsets[:-1], self.lengths)  # each word's sentence start
        column = np.empty(N, dtype=np.int64)
        seg_t, seg_d, seg_k = [], [], []
        self.empirical_T = np.zeros((K, K))
        self.empirical_start = np.zeros(K)
        self.empirical_end = np.zeros(K)
        for s, segments in enumerate(gold):
            base = int(self.offsets[s])
            for i, (a, b, k) in enumerate(segments):
                if b - a == 1:
                    column[base + a] = roles.unit[k]
                else:
                    column[base + a] = roles.first[k]
                    column[base + a + 1:base + b - 1] = roles.inside[k]
                    column[base + b - 1] = roles.last[k]
                seg_t.append(base + b - 1)
                seg_d.append(b - a - 1)
                seg_k.append(k)
                if i:
                    self.empirical_T[segments[i - 1][2], k] += 1.0
            self.empirical_start[segments[0][2]] += 1.0
            self.empirical_end[segments[-1][2]] += 1.0
        self.gold_column = column
        self.gold_t, self.gold_d, self.gold_k = (np.array(v, dtype=np.int64) for v in (seg_t, seg_d, seg_k))
        self.empirical_W = label_counts(self.X, column, self.C)
        onehot = sp.csr_matrix((np.ones(self.gold_t.size), (self.gold_t * D + self.gold_d, self.gold_k)),
                               shape=(N * D, K))
        self.empirical_V = np.asarray((self.ST @ onehot).todense())

    @property
    def n_params(self) -> int:
        return self.F * self.C + (self.G + self.K + 2) * self.K

    def unpack(self, theta):
        F, G, K, C = self.F, self.G, self.K, self.C
        W = theta[: F * C].reshape(F, C)
        V = theta[F * C:F * C + G * K].reshape(G, K)
        rest = F * C + G * K
        T = theta[rest:rest + K * K].reshape(K, K)
        return W, V, T, theta[rest + K * K:rest + K * K + K], theta[rest + K * K + K:]

    def segment_scores(self, W, V):
        """(N, D, K): the segment scores, −inf where a segment is unreadable (it would start before its
        sentence) or forbidden (``O`` longer than one word)."""
        return segment_scores(csr_times_dense(self.X, W), csr_times_dense(self.S, V), self.roles, self.D,
                              self.begin)

    def __call__(self, theta):
        from varorder.engine import semimarkov_flat

        W, V, T, start, end = self.unpack(theta)
        P = self.segment_scores(W, V)
        logz, m, edges = semimarkov_flat.marginals(P, self.offsets, T, start, end)
        grad = np.empty_like(theta)
        gW, gV, gT, g_start, g_end = self.unpack(grad)
        gZ = role_occupancy(m, self.roles)
        csr_times_dense(self.XT, gZ, out=gW)
        gW -= self.empirical_W
        gV[:] = csr_times_dense(self.ST, m.reshape(-1, self.K)) - self.empirical_V
        gT[:] = edges - self.empirical_T
        firsts = self.offsets[:-1]
        lasts = self.offsets[1:] - 1
        g_start[:] = -self.empirical_start
        for d in range(self.D):
            rows = firsts + d
            ok = rows <= lasts
            g_start += m[rows[ok], d].sum(axis=0)
        g_end[:] = m[lasts].sum(axis=(0, 1)) - self.empirical_end
        gold_score = float(P[self.gold_t, self.gold_d, self.gold_k].sum() + (self.empirical_T * T).sum()
                           + self.empirical_start @ start + self.empirical_end @ end)
        return float(logz.sum() - gold_score), grad


@nb.njit(cache=True)
def _segment_scores_kernel(Z, SV, unit, first, inside, last, begin, D, P):
    N = Z.shape[0]
    K = unit.shape[0]
    O = K - 1
    for t in range(N):
        for k in range(K):
            P[t, 0, k] = Z[t, unit[k]] + SV[t * D, k]
            inner = 0.0
            for d in range(1, D):
                if k == O or t - d < begin[t]:
                    P[t, d, k] = NEG_INF
                    continue
                P[t, d, k] = Z[t - d, first[k]] + inner + Z[t, last[k]] + SV[t * D + d, k]
                inner += Z[t - d, inside[k]]


@nb.njit(cache=True)
def _role_occupancy_kernel(m, unit, first, inside, last, out):
    N, D, K = m.shape
    for t in range(N):
        for k in range(K):
            out[t, unit[k]] += m[t, 0, k]
            for d in range(1, D):
                p = m[t, d, k]
                if p == 0.0:
                    continue
                out[t - d, first[k]] += p
                out[t, last[k]] += p
                for u in range(t - d + 1, t):
                    out[u, inside[k]] += p


def segment_scores(Z, SV, roles: _Roles, D: int, begin, forbid=None):
    """(N, D, K) segment scores from the token scores ``Z`` (N, C) by role and the segment features' scores
    ``SV`` (N·D, K): a segment of label k over s … t scores Z[s, first] + Σ Z[inside] + Z[t, last] (Z[t, unit]
    alone), plus its features' score; −inf where it would start before its sentence (``begin`` (N,): the
    flat index of each word's sentence start), for ``O`` longer than one word, and where ``forbid``."""
    N, K = Z.shape[0], roles.K
    P = np.empty((N, D, K))
    _segment_scores_kernel(np.ascontiguousarray(Z), np.ascontiguousarray(SV), roles.unit, roles.first, roles.inside,
                           roles.last, begin, D, P)
    if forbid is not None:
        np.copyto(P, NEG_INF, where=forbid)
    return P


def role_occupancy(m, roles: _Roles):
    """(N, C): the expected count of each token weight column at each word from the segment marginals
    ``m`` (N, D, K) (the adjoint of :func:`segment_scores`' token part)."""
    out = np.zeros((m.shape[0], roles.n_columns))
    _role_occupancy_kernel(m, roles.unit, roles.first, roles.inside, roles.last, out)
    return out


def _as_rows(matrix):
    if isinstance(matrix, Rows):
        return matrix
    csr = matrix.tocsr()
    return Rows(csr.indptr, csr.indices, csr.data, csr.shape)


class SemiMarkovCRF(ParamsMixin):
    """Semi-Markov CRF tagger (see the module doc) with the CRF's API: X holds sequences of words.

    Parameters: ``features`` (the token templates, default the NER preset), ``scheme`` (the tags' chunk
    scheme), ``max_segment_length`` (None: the longest training entity; given, the training sentences
    holding a longer entity are left out, with a warning, and counted in ``n_sentences_left_out_``),
    ``token_positions`` (``"BILOU"``, ``"BIO"`` or ``"segment"``: the token weight columns by a word's place
    in its segment), ``segment_features`` (a comma-separated subset of :data:`SEGMENT_FEATURES`, or
    ``"none"``), ``dictionary_folds`` (the jackknife's folds), ``all_possible_states`` (False: only the
    (feature, column) pairs of the gold tokens and the (segment feature, label) pairs of the gold segments
    get weights, as CRFsuite's sparse state features), ``c1``, ``c2``, ``max_iterations``, ``delta``,
    ``period`` as for :class:`~varorder.models.crf.CRF`, ``verbose``.

    Learned: ``classes_`` (the tags, in ``scheme``), ``entity_types_``, ``labels_`` (segment labels:
    the types and ``O``), ``feature_names_``, ``segment_feature_names_``, ``token_weights_`` (F, C),
    ``segment_weights_`` (G, K), ``transition_weights_``, ``start_weights_``, ``end_weights_``,
    ``n_iter_``, ``n_evaluations_``, ``stop_reason_``, ``history_``, ``training_time_``.
    """

    def __init__(self, *, features: str = "ner", scheme: str = "BIO", max_segment_length: int | None = None,
                 token_positions: str = "BILOU", segment_features: str = ",".join(SEGMENT_FEATURES),
                 dictionary_folds: int = 10, all_possible_states: bool = True, c1: float = 0.0, c2: float = 0.1,
                 max_iterations: int = 100, delta: float = 1e-5, period: int = 10, verbose: bool = False):
        self.features = features
        self.scheme = scheme
        self.max_segment_length = max_segment_length
        self.token_positions = token_positions
        self.segment_features = segment_features
        self.dictionary_folds = dictionary_folds
        self.all_possible_states = all_possible_states
        self.c1 = c1
        self.c2 = c2
        self.max_iterations = max_iterations
        self.delta = delta
        self.period = period
        self.verbose = verbose

    def _families(self):
        spec = self.segment_features.strip()
        if spec in ("", "none"):
            return ()
        out = tuple(f.strip() for f in spec.split(",") if f.strip())
        for f in out:
            if f not in SEGMENT_FEATURES:
                raise ParameterError(f"SemiMarkovCRF: segment_features has {f!r}; expected a comma-separated subset "
                                     f"of {', '.join(SEGMENT_FEATURES)} or 'none'", name="segment_features",
                                     value=self.segment_features)
        return out

    def _check_params(self):
        from varorder.io.schemes import canonical_scheme

        canonical_scheme(self.scheme)
        check_int(self, "max_segment_length", 1, allow_none=True)
        if self.token_positions not in _POSITIONS:
            raise ParameterError(f"SemiMarkovCRF: token_positions must be one of {', '.join(_POSITIONS)}, got "
                                 f"{self.token_positions!r}", name="token_positions", value=self.token_positions)
        self._families()
        check_int(self, "dictionary_folds", 2)
        check_real(self, "c1", 0)
        check_real(self, "c2", 0)
        check_int(self, "max_iterations", 1)
        check_real(self, "delta", 0)
        check_int(self, "period", 1)

    def _words(self, X, name="X"):
        for i, words in enumerate(X):
            if isinstance(words, str) or not all(isinstance(w, str) for w in words) or not words:
                raise ParameterError(f"{name}[{i}] is not a non-empty sequence of words: the semi-Markov CRF reads "
                                     "words and extracts its own token and segment features", name=name)
        return [list(w) for w in X]

    def _design(self, words):
        """(token features (N, F) Rows, segment features (N·D, G) CSR, lengths) of new sentences."""
        token_X, lengths = self._indexer.transform(apply_templates(words, self.features), csr=False)
        return token_X, self._segments.transform(words), lengths

    def _gold(self, words, found, K):
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
        return gold

    def fit(self, X, y):
        """Train on sequences of words X with tag sequences y (in ``scheme``); returns self."""
        from varorder.io.schemes import canonical_scheme, entity_types, scheme_labels, spans, validate

        self._check_params()
        began = time.perf_counter()
        words = self._words(X)
        if len(words) != len(y):
            raise ParameterError(f"X has {len(words)} sequences but y has {len(y)}", name="y")
        scheme = canonical_scheme(self.scheme)
        found = []
        for i, (w, tags) in enumerate(zip(words, y)):
            if len(w) != len(tags):
                raise ParameterError(f"X[{i}] has {len(w)} words but y[{i}] has {len(tags)} tags", name="y")
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
        gold = self._gold(words, found, K)
        self._roles = _Roles(len(self.entity_types_), self.token_positions)
        self._indexer = FeatureIndexer()
        token_X, lengths = self._indexer.fit_transform(apply_templates(words, self.features), csr=False)
        self.feature_names_ = self._indexer.names_
        self._segments = SegmentFeaturizer(self._families(), self.D_, self.entity_types_, self.dictionary_folds)
        S = self._segments.fit_transform(words, gold)
        self.segment_feature_names_ = self._segments.names_
        objective = SegmentObjective(token_X, S, lengths, gold, K, self.D_, self._roles)
        keep_theta = None if self.all_possible_states else self._sparse_mask(objective)

        def regularised(theta):
            f, g = objective(theta)
            if keep_theta is not None:
                g[~keep_theta] = 0.0
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
        self.n_evaluations_ = info["evaluations"]
        self.stop_reason_ = info["reason"]
        (self.token_weights_, self.segment_weights_, self.transition_weights_, self.start_weights_,
         self.end_weights_) = (a.copy() for a in objective.unpack(theta))
        self.training_time_ = time.perf_counter() - began
        return self

    @staticmethod
    def _sparse_mask(objective):
        """Trainable θ entries: (feature, column) pairs of the gold tokens, (segment feature, label) pairs of
        the gold segments (whatever the value), every transition, start and end weight."""
        X = objective.X
        seen = Rows(X.indptr, X.indices, np.ones_like(X.data), X.shape)
        states = label_counts(seen, objective.gold_column, objective.C) != 0
        segments = objective.empirical_V != 0
        K = objective.K
        return np.concatenate([states.ravel(), segments.ravel(), np.ones(K * K + 2 * K, dtype=bool)])

    # -- inference -----------------------------------------------------------------------------

    def _scores(self, X, allowed=None):
        """(lengths, flat (N, D, K) segment scores) of new sentences."""
        check_is_fitted(self, "token_weights_")
        words = self._words(X)
        token_X, S, lengths = self._design(words)
        offsets = np.concatenate([[0], np.cumsum(lengths)])
        N, D, K = int(offsets[-1]), self.D_, len(self.labels_)
        forbid = None
        if allowed is not None:
            forbid = ~self._segment_mask(token_mask(self.classes_, allowed, lengths), offsets).reshape(N, D, K)
        P = segment_scores(csr_times_dense(token_X, self.token_weights_),
                           csr_times_dense(S, self.segment_weights_), self._roles, D,
                           np.repeat(offsets[:-1], lengths), forbid)
        return lengths, P

    def _chunks(self, X, allowed=None):
        """Per chunk of sentences (seq_ids, lengths, padded segment scores (B, L, D, K)) for the facade."""
        lengths, P = self._scores(X, allowed)
        plan = ChunkPlan(lengths, max_cells=max(256, (1 << 20) // (self.D_ * len(self.labels_))))
        for seq_ids, chunk_lengths, flat_index, valid in plan.chunks:
            yield seq_ids, chunk_lengths, np.where(valid[:, :, None, None], P[flat_index], NEG_INF)

    def _segment_mask(self, tag_mask, offsets):
        """(N·D, K) booleans: a segment is allowed when every word's tag in it (by ``scheme``) is allowed."""
        from varorder.io.schemes import encode

        K, D = len(self.labels_), self.D_
        column = {c: i for i, c in enumerate(self.classes_)}
        N = tag_mask.shape[0]
        out = np.zeros((N, D, K), dtype=bool)
        for s in range(offsets.size - 1):
            base, n = int(offsets[s]), int(offsets[s + 1] - offsets[s])
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

    def _weights(self):
        return dict(start=self.start_weights_, end=self.end_weights_)

    def predict(self, X, allowed=None, constraints: str | None = None) -> list[list[str]]:
        """The best segmentation of each sentence, as tags in ``scheme`` (always valid there)."""
        from varorder import semimarkov

        self._check_constraints(constraints)
        out = [None] * len(X)
        for seq_ids, lengths, P in self._chunks(X, allowed):
            segmentations, scores = semimarkov.viterbi(P, self.transition_weights_, lengths=lengths,
                                                       **self._weights())
            _check_paths(scores, seq_ids)
            for b, s in enumerate(seq_ids.tolist()):
                out[s] = self._tags(segmentations[b], int(lengths[b]))
        return out

    def predict_kbest(self, X, k: int = 5, allowed=None, constraints: str | None = None):
        """(taggings, log_probabilities): the k best segmentations of each sentence as tags, with their log p."""
        from varorder import semimarkov

        self._check_constraints(constraints)
        taggings, log_p = [None] * len(X), [None] * len(X)
        free = None if allowed is None else dict(self._log_z(X))
        for seq_ids, lengths, P in self._chunks(X, allowed):
            lists, scores = semimarkov.kbest(P, self.transition_weights_, k, lengths=lengths, **self._weights())
            _check_paths(scores[:, 0], seq_ids)
            logz = semimarkov.log_partition(P, self.transition_weights_, lengths=lengths, **self._weights())
            for b, s in enumerate(seq_ids.tolist()):
                finite = np.isfinite(scores[b])
                taggings[s] = [self._tags(seg, int(lengths[b])) for seg in lists[b][: int(finite.sum())]]
                log_p[s] = scores[b, finite] - (logz[b] if free is None else free[s])
        return taggings, log_p

    def _log_z(self, X):
        from varorder import semimarkov

        for seq_ids, lengths, P in self._chunks(X):
            logz = semimarkov.log_partition(P, self.transition_weights_, lengths=lengths, **self._weights())
            yield from zip(seq_ids.tolist(), logz.tolist())

    def predict_marginals(self, X, allowed=None, constraints: str | None = None) -> list[np.ndarray]:
        """Per sentence (n, len(``classes_``)): p(word t has tag c), from the segment marginals (BIO, BIOES, BILOU:
        the first word of a segment takes B (or S/U alone), the last E/L, the others I; IOB1 is refused)."""
        from varorder import semimarkov
        from varorder.io.schemes import canonical_scheme, encode

        self._check_constraints(constraints)
        if canonical_scheme(self.scheme) == "IOB1":
            raise ParameterError("SemiMarkovCRF.predict_marginals: IOB1 tags depend on the neighbouring segment; "
                                 "use BIO", name="scheme", value=self.scheme)
        column = {c: i for i, c in enumerate(self.classes_)}
        out = [None] * len(X)
        for seq_ids, lengths, P in self._chunks(X, allowed):
            seg = semimarkov.marginals(P, self.transition_weights_, lengths=lengths, **self._weights())
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
