"""Maximum-entropy Markov model (locally normalised chain), decoded with the chain engine.

Factorization (McCallum, Freitag & Pereira, ICML 2000; Ratnaparkhi 1996; CS287 "Sequence
Models 4"): each position is a softmax over the label given the previous label and the
token's features,

    p(yₜ = j | yₜ₋₁ = i, xₜ) = exp(xₜ·W[:, j] + T[i, j]) / Zₜ(i),   Zₜ(i) = Σₖ exp(xₜ·W[:, k] + T[i, k]),

with T's role taken by ``start`` at t = 1. Training maximises Σ log p(yₜ | gold yₜ₋₁, xₜ)
— independent multiclass logistic regressions — so it needs no dynamic programming;
objective and c1/c2 follow CRFsuite's convention as in :class:`~varorder.models.crf.CRF`.

Decoding with the one engine. The local normaliser Zₜ(i) depends on (t, yₜ₋₁) only, so
it folds into the *previous* position's emission: with

    emission'[t, i] = xₜ·W[:, i] − log Zₜ₊₁(i)    (t < n),    emission'[n, i] = xₙ·W[:, i],
    start' = start − log Z₁,

the dense chain (emission', T, start') scores every path y with exactly log p_MEMM(y | x),
and its log-partition is 0. Viterbi on that chain is exact MEMM decoding, and the chain's
marginals are the MEMM's posterior marginals — no lattice or per-position transition
tensor is needed.

``conjoin_previous=True`` gives McCallum et al.'s original form, one maximum-entropy model
per previous state: every token feature is conjoined with the previous label (weights
W of shape ((K + 1)·F, K), block i used after label i, block K at the sentence start),
plus T. Then xₜ·W_{yₜ₋₁}[:, yₜ] is a genuinely per-position pairwise potential, which a
dense chain with shared transitions cannot express; decoding builds one
:class:`varorder.lattice.Lattice` per sentence (node = (position, label), arc weight =
local log-probability) and runs the engine's lattice Viterbi / marginals on it.

Label bias (Bottou 1991; Lafferty et al. 2001): in the conjoined form, a state whose
training successors were always the same gives them probability ≈ 1 whatever the
observation, so exact decoding still prefers a wrong path — a *modelling* problem, not a
search one. :func:`label_bias_corpus` reproduces it; the additive form, which shares the
letter weights across previous states, is much less prone to it on that example.
"""

from __future__ import annotations

import os
import time

import numpy as np

from varorder import lattice as _lattice
from varorder._progress import Progress
from varorder.base import ParamsMixin, check_bool, check_int, check_is_fitted, check_real
from varorder.errors import FormatError, ParameterError
from varorder.models import persist
from varorder.parallel import check_n_jobs
from varorder.models.features import (FeatureIndexer, apply_templates, check_features, csr_times_dense,
                                      design_matrix, is_array_input, n_items)
from varorder.models.optim import lbfgs
from varorder.models.sequences import ChunkPlan, LabelCodec, decode_viterbi, iter_marginals, token_accuracy


def logsumexp(a, axis=None):
    """scipy.special.logsumexp, imported on first use: the import costs ~0.15 CPU s that a ``tag`` command on
    a CRF or HMM model (which imports this module with the CLI) need not pay."""
    from scipy.special import logsumexp as scipy_logsumexp

    return scipy_logsumexp(a, axis=axis)


__all__ = ["MEMM", "label_bias_corpus"]

_BLOCK_ROWS = 8192


class LocalObjective:
    """Σ over positions of −log p(yₜ | yₜ₋₁, xₜ) (a multiclass logistic regression per position) and
    its gradient in θ = (W, T, start), for the positions of some sentences (rows of ``matrix``)."""

    def __init__(self, matrix, is_first, prev_label, gold, F, K):
        self.matrix = matrix
        self.XT = matrix.T.tocsr()
        self.is_first = is_first
        self.prev_label = prev_label
        self.gold = gold
        self.rows = np.arange(gold.size)
        self.F, self.K = F, K

    def __call__(self, theta):
        F, K, rows, gold, is_first, prev_label = self.F, self.K, self.rows, self.gold, self.is_first, self.prev_label
        W, T, start = MEMM._unpack(theta, F, K)
        logits = csr_times_dense(self.matrix, W)
        logits += np.where(is_first[:, None], start[None, :], T[prev_label])
        log_norm = logsumexp(logits, axis=1)
        nll = float(log_norm.sum() - logits[rows, gold].sum())
        residual = np.exp(logits - log_norm[:, None])
        residual[rows, gold] -= 1.0
        grad = np.empty_like(theta)
        gW, gT, g_start = MEMM._unpack(grad, F, K)
        gW[:] = csr_times_dense(self.XT, residual)
        gT[:] = 0.0
        np.add.at(gT, prev_label[~is_first], residual[~is_first])
        g_start[:] = residual[is_first].sum(axis=0)
        return nll, grad


class MEMM(ParamsMixin):
    """Locally normalised chain tagger with the CRF's input conventions (feature dicts or arrays).

    Parameters (keyword-only, checked by :meth:`fit`): ``c1``, ``c2``, ``max_iterations``,
    ``delta``, ``period``, ``min_feature_count`` and ``features`` as for
    :class:`varorder.models.crf.CRF`; ``conjoin_previous`` gives each previous label its own
    copy of the emission weights (the per-state MEMM of McCallum et al. 2000); ``verbose``
    logs each L-BFGS iteration.

    Learned attributes: ``classes_``, ``feature_names_``, ``n_features_in_``,
    ``emission_weights_`` (F, K), ``transition_weights_`` (K, K: previous → current),
    ``start_weights_`` (K,), ``n_iter_``, ``training_time_``.
    """

    _MODEL_KIND = "MEMM"

    def __init__(self, *, c1: float = 0.0, c2: float = 0.1, max_iterations: int = 100, delta: float = 1e-5,
                 period: int = 10, min_feature_count: int = 1, features: str | None = None,
                 conjoin_previous: bool = False, n_shards: int | None = None, n_jobs: int | None = None,
                 executor=None, verbose: bool = False):
        self.conjoin_previous = conjoin_previous
        self.n_shards = n_shards
        self.n_jobs = n_jobs
        self.executor = executor
        self.c1 = c1
        self.c2 = c2
        self.max_iterations = max_iterations
        self.delta = delta
        self.period = period
        self.min_feature_count = min_feature_count
        self.features = features
        self.verbose = verbose

    def _check_params(self):
        check_real(self, "c1", 0)
        check_real(self, "c2", 0)
        check_int(self, "max_iterations", 1)
        check_real(self, "delta", 0)
        check_int(self, "period", 1)
        check_int(self, "min_feature_count", 1)
        check_features(self)
        check_bool(self, "conjoin_previous")
        check_int(self, "n_shards", 1, allow_none=True)
        check_n_jobs(self)
        check_bool(self, "verbose")

    def fit(self, X, y):
        """Train on sequences X with label sequences y; returns self."""
        self._check_params()
        if len(X) != len(y):
            raise ParameterError(f"X has {len(X)} sequences but y has {len(y)}", name='X', value=X)
        began = time.perf_counter()
        X = apply_templates(X, self.features)
        codec = LabelCodec.fit(y)
        self.classes_ = codec.classes
        if is_array_input(X):
            self._indexer, self.feature_names_ = None, None
            matrix, lengths = design_matrix(X, None, None, "X")
        else:
            self._indexer = FeatureIndexer(self.min_feature_count).fit(X)
            self.feature_names_ = self._indexer.names_
            matrix, lengths = self._indexer.transform(X)
        self.n_features_in_ = matrix.shape[1]
        for i, (xs, ys) in enumerate(zip(X, y)):
            if n_items(xs) != len(ys):
                raise ParameterError(f"X[{i}] has {n_items(xs)} items but y[{i}] has {len(ys)} labels", name='X', value=X)
        gold = codec.encode(y)
        K, F = len(self.classes_), self.n_features_in_
        plan = ChunkPlan(lengths)
        is_first = np.zeros(gold.size, dtype=bool)
        is_first[plan.first_tokens()] = True
        prev_label = np.where(is_first, 0, np.roll(gold, 1))
        if self.conjoin_previous:
            matrix = self._conjoin(matrix, np.where(is_first, K, prev_label), K)
        F = matrix.shape[1]
        nll_and_grad = self._objective(matrix, lengths, is_first, prev_label, gold, F, K)

        def objective(theta):
            nll, grad = nll_and_grad(theta)
            if self.c2 > 0:
                nll += self.c2 * float(theta @ theta)
                grad += 2.0 * self.c2 * theta
            return nll, grad

        progress = Progress(total=self.max_iterations, enabled=self.verbose, desc="MEMM lbfgs")

        def record(iteration, params, objective_value, grad_norm):
            from varorder.parallel import progress_note

            progress.update(1)
            progress.write(f"iter {iteration:4d} objective={objective_value:.6g} |grad|={grad_norm:.3g}"
                           f"{progress_note(getattr(nll_and_grad, 'executor', None))}")

        with progress:
            theta, info = lbfgs(objective, np.zeros((F + K + 1) * K), c1=self.c1,
                                max_iterations=self.max_iterations, delta=self.delta, period=self.period,
                                callback=record if self.verbose else None)
        self.n_iter_ = info["iterations"]
        self.emission_weights_, self.transition_weights_, self.start_weights_ = (
            a.copy() for a in self._unpack(theta, F, K))
        self.training_time_ = time.perf_counter() - began
        return self

    def _objective(self, matrix, lengths, is_first, prev_label, gold, F, K):
        """Σ of the per-position NLLs and its gradient: one :class:`LocalObjective`, or token-balanced
        shards of sentences on an executor (``n_shards``; 8 by default with an executor), whose sums
        come back in shard order — the same model on any executor and worker count."""
        from varorder.models.sharded import ShardedObjective, shard_plan

        executor, shards = shard_plan(self, lengths)
        if shards is None:
            return LocalObjective(matrix, is_first, prev_label, gold, F, K)
        return ShardedObjective([LocalObjective(matrix[tokens], is_first[tokens], prev_label[tokens], gold[tokens],
                                                F, K) for _, tokens in shards], executor)

    @staticmethod
    def _conjoin(matrix, previous, K):
        """Shift each row's columns into the block of its previous label (K = sentence start)."""
        import scipy.sparse as sp

        matrix = matrix.tocsr()
        F = matrix.shape[1]
        row_of_entry = np.repeat(np.arange(matrix.shape[0]), np.diff(matrix.indptr))
        columns = matrix.indices + previous[row_of_entry] * F
        return sp.csr_matrix((matrix.data, columns, matrix.indptr), shape=(matrix.shape[0], (K + 1) * F))

    @staticmethod
    def _unpack(theta, F, K):
        return theta[: F * K].reshape(F, K), theta[F * K:(F + K) * K].reshape(K, K), theta[(F + K) * K:]

    # -- the MEMM as a dense chain ----------------------------------------------

    def _design(self, X):
        check_is_fitted(self, "emission_weights_")
        X = apply_templates(X, self.features)
        if self.feature_names_ is None:
            return design_matrix(X, None, self.n_features_in_, "X")
        return self._indexer.transform(X, "X")

    def folded_chain(self, matrix, plan: ChunkPlan):
        """(token emissions (N, K), transitions, start') of the equivalent dense chain (see module doc)."""
        if self.conjoin_previous:
            raise ParameterError("a conjoin_previous MEMM has per-position pairwise potentials: it is not a dense chain")
        scores = csr_times_dense(matrix, self.emission_weights_)
        T = self.transition_weights_
        folded = scores.copy()
        prev_rows, next_rows = plan.next_pairs()
        for lo in range(0, prev_rows.size, _BLOCK_ROWS):
            block = slice(lo, lo + _BLOCK_ROWS)
            # log Z_{t+1}(i) = logsumexp_j(score[t+1, j] + T[i, j]) for every previous label i
            folded[prev_rows[block]] -= logsumexp(scores[next_rows[block]][:, None, :] + T[None], axis=2)
        first = plan.first_tokens()
        # start' = start − log Z₁ differs per sequence, so the shift goes into the first emission.
        folded[first] -= logsumexp(scores[first] + self.start_weights_, axis=1)[:, None]
        return folded, T, self.start_weights_

    def _conjoined_lattices(self, matrix, plan: ChunkPlan):
        """Per sentence: a Lattice over (position, label) nodes whose arcs carry local log-probabilities."""
        K = len(self.classes_)
        F = self.n_features_in_
        local = np.empty((K + 1, plan.n_tokens, K))
        for i in range(K + 1):
            local[i] = csr_times_dense(matrix, self.emission_weights_[i * F:(i + 1) * F])
            local[i] += self.transition_weights_[i] if i < K else self.start_weights_
            local[i] -= logsumexp(local[i], axis=1)[:, None]
        for s in range(plan.lengths.size):
            lo, n = plan.offsets[s], plan.lengths[s]
            node_position = np.concatenate([[0], np.repeat(np.arange(1, n + 1), K)])
            first_src = np.zeros(K, dtype=np.int64)
            first_dst = 1 + np.arange(K)
            src = [first_src] + [np.repeat(1 + (t - 1) * K + np.arange(K), K) for t in range(1, n)]
            dst = [first_dst] + [np.tile(1 + t * K + np.arange(K), K) for t in range(1, n)]
            weight = [local[K, lo]] + [local[:K, lo + t].ravel() for t in range(1, n)]
            labels = np.tile(np.arange(K), n)
            yield s, _lattice.Lattice(node_position, np.concatenate(src), np.concatenate(dst),
                                      np.concatenate([labels[:K]] + [np.tile(np.arange(K), K)] * (n - 1)),
                                      np.concatenate(weight))

    def predict(self, X) -> list[list]:
        matrix, lengths = self._design(X)
        plan = ChunkPlan(lengths)
        if self.conjoin_previous:
            out = [None] * lengths.size
            for s, lat in self._conjoined_lattices(matrix, plan):
                labels, _ = _lattice.viterbi(lat)
                out[s] = [self.classes_[i] for i in labels]
            return out
        emissions, T, start = self.folded_chain(matrix, plan)
        ids = decode_viterbi(plan, emissions, T, start)
        return [[self.classes_[i] for i in ids[plan.offsets[s]:plan.offsets[s + 1]]] for s in range(lengths.size)]

    def predict_marginals(self, X) -> list[np.ndarray]:
        matrix, lengths = self._design(X)
        plan = ChunkPlan(lengths)
        if self.conjoin_previous:
            K = len(self.classes_)
            out = [None] * lengths.size
            for s, lat in self._conjoined_lattices(matrix, plan):
                node, _ = _lattice.marginals(lat)
                out[s] = node[1:].reshape(-1, K)
            return out
        emissions, T, start = self.folded_chain(matrix, plan)
        out = np.empty_like(emissions)
        for _, _, flat_index, valid, node, _, _ in iter_marginals(plan, emissions, T, start):
            out[flat_index[valid]] = node[valid]
        return [out[plan.offsets[s]:plan.offsets[s + 1]] for s in range(lengths.size)]

    def sequence_log_probability(self, X, y) -> np.ndarray:
        """log p_MEMM(y | x) of given label sequences, via the folded chain's path score."""
        from varorder.chain import path_score

        matrix, lengths = self._design(X)
        plan = ChunkPlan(lengths)
        gold = LabelCodec(self.classes_).encode(y)
        if self.conjoin_previous:
            out = np.empty(lengths.size)
            for s, lat in self._conjoined_lattices(matrix, plan):
                labels = gold[plan.offsets[s]:plan.offsets[s + 1]]
                K = len(self.classes_)
                arc = [labels[0]] + [K + (t - 1) * K * K + labels[t - 1] * K + labels[t] for t in range(1, len(labels))]
                out[s] = lat.arc_weight[np.asarray(arc)].sum()
            return out
        emissions, T, start = self.folded_chain(matrix, plan)
        gold = LabelCodec(self.classes_).encode(y)
        out = np.empty(lengths.size)
        for seq_ids, chunk_lengths, flat_index, valid in plan.chunks:
            paths = np.where(valid, gold[flat_index], 0)
            out[seq_ids] = path_score(emissions[flat_index], T, paths, start, None, chunk_lengths)
        return out

    def score(self, X, y) -> float:
        return token_accuracy(self.predict(X), y)

    # -- persistence ------------------------------------------------------------

    def save(self, path) -> None:
        check_is_fitted(self, "emission_weights_")
        params = {k: getattr(self, k) for k in ("c1", "c2", "max_iterations", "delta", "period", "min_feature_count",
                                                 "features", "conjoin_previous")}
        persist.save_model(path, self._MODEL_KIND, params,
                           {"classes": self.classes_, "feature_names": self.feature_names_,
                            "n_features_in": self.n_features_in_},
                           {"emission_weights": self.emission_weights_, "transition_weights": self.transition_weights_,
                            "start_weights": self.start_weights_})

    @classmethod
    @persist.model_loader
    def load(cls, path) -> "MEMM":
        params, state, arrays = persist.load_model(path, cls._MODEL_KIND,
                                                   ("emission_weights", "transition_weights", "start_weights"))
        model = cls(**persist.templates_as_parameter(path, params, state))
        model.classes_ = persist.check_labels(path, "classes", state["classes"])
        model.feature_names_ = persist.check_labels(path, "feature_names", state["feature_names"], allow_none=True)
        model.n_features_in_ = int(state["n_features_in"])
        if model.feature_names_ is not None and len(model.feature_names_) != model.n_features_in_:
            # the names index the weight rows: fewer names would leave rows unreachable, silently
            raise FormatError(f"{os.fspath(path)}: field 'feature_names' lists {len(model.feature_names_)} names "
                              f"for n_features_in = {model.n_features_in_}", path=os.fspath(path))
        model._indexer = None if model.feature_names_ is None else FeatureIndexer.from_names(model.feature_names_)
        K, F = len(model.classes_), model.n_features_in_
        rows = (K + 1) * F if model.conjoin_previous else F
        persist.check_shapes(path, arrays, {"emission_weights": (rows, K), "transition_weights": (K, K),
                                            "start_weights": (K,)})
        for name, value in arrays.items():
            setattr(model, name + "_", value)
        return model


def label_bias_corpus(n_rib: int = 3, n_rob: int = 2):
    """The "rib"/"rob" example of label bias (Lafferty et al. 2001, §2; CS287 notes' "Label Bias").

    Words are letter sequences tagged with the states of a little automaton: ``rib`` →
    (r1, i, b1), ``rob`` → (r2, o, b2); each token's only feature is its letter. ``rib`` is
    more frequent, so on the first letter a per-state MEMM (``conjoin_previous=True``)
    already prefers r1 with probability ≈ n_rib / (n_rib + n_rob). The model for state r1
    has only ever seen ``i`` follow, and being locally normalised it passes (almost) all of
    r1's mass on to ``i`` whatever the letter; so on the input "rob" exact decoding keeps
    r1-i-b1, ignoring the ``o``. The globally normalised CRF, whose per-state scores need
    not sum to one, tags it r2-o-b2. Returns (X, y): feature dicts and label lists.
    """
    words = ["rib"] * n_rib + ["rob"] * n_rob
    tags = {"rib": ["r1", "i", "b1"], "rob": ["r2", "o", "b2"]}
    X = [[{"letter:" + ch: 1.0} for ch in word] for word in words]
    y = [tags[word] for word in words]
    return X, y
