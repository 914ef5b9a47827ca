"""Linear-chain conditional random field (first order), trained by minimising sequence NLL.

Factorization (Lafferty, McCallum & Pereira, ICML 2001; CS287 "Sequence Models 4"):

    p(y | x) = exp(s(x, y)) / Z(x),
    s(x, y) = start[y₁] + Σₜ xₜ·W[:, yₜ] + Σₜ₌₂ⁿ T[yₜ₋₁, yₜ] + end[yₙ],

with xₜ the token's (sparse) feature vector, W (F, K) emission weights, T (K, K)
transitions. The training objective is CRFsuite's, so its c1/c2 mean the same here:

    J(θ) = Σ_sequences −log p(y | x) + c1‖θ‖₁ + c2‖θ‖²,

whose NLL gradient is "expected minus empirical feature counts": for W it is
Xᵀ(node marginals − gold one-hot), for T the summed edge marginals minus the gold
transition counts. Marginals and log Z come from the chain engine
(:mod:`varorder.engine.chain`), run over length-bucketed padded chunks of the whole
batch at once (Numba-parallel over sequences); the sparse products are Numba-parallel
over rows. Optimisers: L-BFGS (c1 = 0) / OWL-QN (c1 > 0) from :mod:`varorder.models.optim`,
or mini-batch AdaGrad / SGD with a proximal ℓ1 step.
"""

from __future__ import annotations

import os
import time
import warnings
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING

import numpy as np

from varorder import _numba_start
from varorder._progress import Progress
from varorder.base import (DEPRECATED, ParamsMixin, check_bool, check_choice, check_int, check_is_fitted, check_real,
                           options_with_deprecated)
from varorder.errors import FormatError, ParameterError
from varorder.models import optim, persist
from varorder.parallel import check_n_jobs
from varorder.models.features import (FeatureIndexer, Rows, _flatten, apply_templates, check_features,
                                      csr_times_dense, design_matrix, is_array_input, label_counts, n_items,
                                      rows_to_csr, transpose_rows)
from varorder.models.online import ONLINE_ALGORITHMS, train_online
from varorder.models.optim import SGD, AdaGrad, axpy, dot, lbfgs
from varorder.models.sequences import (ChainDecoding, ChunkPlan, LabelCodec, decode_viterbi, is_partial,
                                       iter_marginals, numba_threads, partial_mask, token_accuracy)

if TYPE_CHECKING:
    import scipy.sparse as sp

__all__ = ["CRF", "CRFSolverOptions", "ChainObjective", "PartialChainObjective", "featurised_shard", "shard_vocabulary"]

# the optimiser's cached kernels load without refreshing Numba's registries (varorder._numba_start)
_numba_start.load_without_refresh(optim)

_ALGORITHMS = ("lbfgs", "adagrad", "sgd") + ONLINE_ALGORITHMS
# CRFsuite's per-trainer parameters (sklearn-crfsuite's names), with CRFsuite's defaults
_ONLINE_PARAMS = ("epsilon", "pa_type", "c", "error_sensitive", "averaging", "variance", "gamma", "calibration_eta",
                  "calibration_rate", "calibration_samples", "calibration_candidates", "calibration_max_trials")


@dataclass(frozen=True)
class CRFSolverOptions:
    """The step knobs of :class:`CRF`'s own mini-batch algorithms (its ``solver`` parameter;
    sklearn-crfsuite has neither algorithm, so neither knob); checked when the CRF fits.

    Attributes
    ----------
    batch_size : int
        Sequences per mini-batch of ``algorithm="adagrad"`` and ``"sgd"``.
    step_size : float
        Base step of ``adagrad`` (η) and ``sgd`` (η, scaled by batch / corpus and decayed per
        mini-batch).
    """

    batch_size: int = 64
    step_size: float = 0.2


_SOLVER_KEYS = tuple(field.name for field in fields(CRFSolverOptions))


class ChainObjective:
    """Σ NLL of gold label sequences under a linear-chain CRF, and its gradient.

    Built once per data set: the design matrix X (N, F) CSR and its transpose, the
    gold labels, the chunk plan and all empirical (gold) counts are fixed; each call
    only recomputes emissions X @ W, runs the engine, and forms the gradient.
    """

    def __init__(self, X: sp.csr_matrix | Rows, lengths: np.ndarray, gold: np.ndarray, n_labels: int,
                 max_cells: int | None = None):
        K = n_labels
        if isinstance(X, Rows):  # no scipy (its sparse package costs a short training run ~0.1-0.3 CPU s)
            self.X, self.XT = X, transpose_rows(X)
            self.empirical_W = label_counts(X, gold, K)
        else:
            import scipy.sparse as sp

            self.X = X.tocsr()
            self.XT = self.X.T.tocsr()
            onehot = sp.csr_matrix((np.ones(gold.size), (np.arange(gold.size), gold)), shape=(gold.size, K))
            self.empirical_W = np.asarray((self.XT @ onehot).todense())
        self.K = K
        self.F = X.shape[1]
        self.n_sequences = lengths.size
        # ≥ 4096 cells (~16 MB of edge marginals at K = 17) per engine call: few enough calls that the
        # parallel-launch overhead (large on a busy machine) is amortised, small enough to stay cache-friendly.
        cells = max_cells or max(4096, (1 << 21) // (K * K))
        self.plan = ChunkPlan(lengths, max_cells=cells)
        self.gold = gold
        prev, nxt = self.plan.next_pairs()
        self.gold_prev, self.gold_next = gold[prev], gold[nxt]
        self.empirical_T = np.zeros((K, K))
        np.add.at(self.empirical_T, (self.gold_prev, self.gold_next), 1.0)
        self.gold_first = gold[self.plan.first_tokens()]
        self.gold_last = gold[self.plan.last_tokens()]
        self.empirical_start = np.bincount(self.gold_first, minlength=K).astype(np.float64)
        self.empirical_end = np.bincount(self.gold_last, minlength=K).astype(np.float64)
        self._scores = self._node_flat = None

    @property
    def n_params(self) -> int:
        return (self.F + self.K + 2) * self.K

    def unpack(self, theta: np.ndarray):
        F, K = self.F, self.K
        W = theta[: F * K].reshape(F, K)
        T = theta[F * K: (F + K) * K].reshape(K, K)
        start = theta[(F + K) * K: (F + K + 1) * K]
        end = theta[(F + K + 1) * K:]
        return W, T, start, end

    def __call__(self, theta: np.ndarray) -> tuple[float, np.ndarray]:
        W, T, start, end = self.unpack(theta)
        if self._scores is None:  # per-token buffers reused across calls
            self._scores = np.empty((self.gold.size, self.K))
            self._node_flat = np.empty((self.gold.size, self.K))
        scores = csr_times_dense(self.X, W, out=self._scores)
        node_flat = self._node_flat
        grad = np.empty_like(theta)
        gW, gT, g_start, g_end = self.unpack(grad)
        gT[:] = 0.0
        log_z = 0.0
        for _, lengths, flat_index, valid, node, edge, logz in iter_marginals(
                self.plan, scores, T, start, end, edges="sum"):
            log_z += logz.sum()
            node_flat[flat_index[valid]] = node[valid]
            gT += edge.sum(axis=0)
        g_start[:] = node_flat[self.plan.first_tokens()].sum(axis=0) - self.empirical_start
        g_end[:] = node_flat[self.plan.last_tokens()].sum(axis=0) - self.empirical_end
        gT -= self.empirical_T
        csr_times_dense(self.XT, node_flat, out=gW)
        gW -= self.empirical_W
        gold_score = (scores[np.arange(self.gold.size), self.gold].sum() + T[self.gold_prev, self.gold_next].sum()
                      + start[self.gold_first].sum() + end[self.gold_last].sum())
        return float(log_z - gold_score), grad


class TrainingLog:
    """sklearn-crfsuite's training log: ``iterations`` (one dict per iteration) and ``last_iteration``."""

    def __init__(self, iterations):
        self.iterations = iterations

    @property
    def last_iteration(self) -> dict:
        return self.iterations[-1] if self.iterations else {}

    def __repr__(self):
        return f"TrainingLog({len(self.iterations)} iterations)"


class PartialChainObjective(ChainObjective):
    """Σ −log p(y ∈ A(x) | x) for partially labelled sequences: each token allows a set of labels (``allowed``
    (N, K) booleans), and the likelihood sums over every label path through the allowed sets
    (Tsuboi et al., COLING 2008, "Training CRFs using incomplete annotations"):

        −log Σ_{y ∈ A} p(y | x) = log Z(x) − log Z_A(x),

    whose gradient is the expected feature counts under p minus those under p restricted to A: two runs
    of the chain engine's marginals, one with its ``allowed=`` mask. With one label allowed per token it
    is :class:`ChainObjective`.
    """

    def __init__(self, X, lengths: np.ndarray, allowed: np.ndarray, n_labels: int, max_cells: int | None = None):
        super().__init__(X, lengths, allowed.argmax(axis=1), n_labels, max_cells)
        self.allowed = allowed

    def _expectations(self, scores, T, start, end, allowed):
        node_flat = np.empty_like(scores)
        edge_sum = np.zeros((self.K, self.K))
        log_z = 0.0
        for _, _, flat_index, valid, node, edge, logz in iter_marginals(self.plan, scores, T, start, end,
                                                                           edges="sum", allowed=allowed):
            log_z += logz.sum()
            node_flat[flat_index[valid]] = node[valid]
            edge_sum += edge.sum(axis=0)
        return log_z, node_flat, edge_sum

    def __call__(self, theta: np.ndarray) -> tuple[float, np.ndarray]:
        W, T, start, end = self.unpack(theta)
        scores = csr_times_dense(self.X, W)
        log_z, node_all, edge_all = self._expectations(scores, T, start, end, None)
        log_z_a, node_a, edge_a = self._expectations(scores, T, start, end, self.allowed)
        grad = np.empty_like(theta)
        gW, gT, g_start, g_end = self.unpack(grad)
        node_all -= node_a
        gT[:] = edge_all - edge_a
        g_start[:] = node_all[self.plan.first_tokens()].sum(axis=0)
        g_end[:] = node_all[self.plan.last_tokens()].sum(axis=0)
        csr_times_dense(self.XT, node_all, out=gW)
        return float(log_z - log_z_a), grad


class CRF(ChainDecoding, ParamsMixin):
    """Linear-chain CRF estimator (scikit-learn conventions).

    Parameters
    ----------
    algorithm : "lbfgs" (L-BFGS, or OWL-QN when c1 > 0), "adagrad" or "sgd" (mini-batch).
    c1, c2 : ℓ1 and ℓ2 coefficients on the *summed* NLL, as in CRFsuite:
        J = Σ NLL + c1‖θ‖₁ + c2‖θ‖².
    max_iterations : L-BFGS iterations, or epochs for the mini-batch algorithms.
    delta, period : stop when J improved by < delta (relative) over ``period`` iterations.
    solver : CRFSolverOptions, optional
        ``batch_size`` and ``step_size`` of the mini-batch algorithms adagrad / sgd (None:
        their defaults, 64 and 0.2). The two names as keywords of this constructor still work
        for one release (a FutureWarning).
    min_feature_count : features seen fewer times in training are dropped.
    features : None (default): X holds feature dicts or arrays, one per item. A template
        list (:func:`varorder.models.features.parse_templates`: the preset ``"pos"``, or e.g.
        ``"bias,w[0],w[-1]|w[0],suf3[0]"``): X holds sequences of words and the estimator
        extracts the features itself, in fit and predict alike (saved with the model).
    random_state : seed for mini-batch shuffling.
    n_threads : Numba threads for training and inference (None: Numba's default, all cores).
    n_shards, n_jobs, executor : L-BFGS evaluates the objective and gradient in ``n_shards``
        shards of about equal token counts (:mod:`varorder.models.sharded`) on the executor that
        :func:`varorder.parallel.as_executor` builds from ``executor`` (a Dask ``Client``, a
        ``concurrent.futures`` pool, a :class:`varorder.parallel.Executor`) or ``n_jobs`` (local
        joblib workers; an active ``joblib.parallel_config`` too). The shards depend on the data
        and ``n_shards`` only (default: 1 serially, 8 with an executor), so a given ``n_shards``
        trains the bit-identical model on any executor and worker count; against one shard the
        objective differs only in the order of additions (≈1e-15 relative).
    verbose : a per-iteration log line (objective, gradient norm, dev accuracy); a progress
        bar too when stderr is a terminal.
    all_possible_states, all_possible_transitions : False: only the (feature, label) pairs, or
        label bigrams, seen in training are weights (CRFsuite's ``feature.possible_states`` /
        ``feature.possible_transitions``; a feature counts as seen with a label whatever its value,
        as CRFsuite fires a False flag with the value 0); the others stay 0.
    boundary_weights : False (default, CRFsuite's model): no start / end label weights, so
        ``start_weights_`` and ``end_weights_`` stay 0 and the objective is CRFsuite's to the
        last digit on the same features. True adds them (the chain's first and last label
        scores, as torch-struct and pytorch-crf have).

    Every parameter is keyword-only and checked by :meth:`fit` (a ValueError names it and
    the value passed); :meth:`predict` before :meth:`fit` raises NotFittedError.

    Learned attributes: ``classes_``, ``feature_names_`` (None for array input),
    ``n_features_in_``, ``emission_weights_`` (F, K), ``transition_weights_`` (K, K),
    ``start_weights_`` (K,), ``end_weights_`` (K,), ``history_`` (per-iteration dicts),
    ``n_iter_``, ``n_evaluations_`` (objective/gradient evaluations), ``stop_reason_``, ``training_time_``.

    Examples
    --------
    Each token is a dict of features (string-valued features are indicators, numbers are
    weights); ``predict`` returns one label list per sequence:

    >>> from varorder.models.crf import CRF
    >>> X = [[{"w": "the"}, {"w": "dog"}, {"w": "barks"}], [{"w": "a"}, {"w": "cat"}, {"w": "sleeps"}]]
    >>> y = [["DET", "NOUN", "VERB"], ["DET", "NOUN", "VERB"]]
    >>> crf = CRF(c1=0.0, c2=0.1, max_iterations=50).fit(X, y)
    >>> crf.predict([[{"w": "a"}, {"w": "dog"}, {"w": "barks"}]])
    [['DET', 'NOUN', 'VERB']]
    >>> crf.score(X, y)                                  # token accuracy
    1.0
    """

    _MODEL_KIND = "CRF"

    def __init__(self, *, algorithm: str = "lbfgs", c1: float = 0.0, c2: float = 0.1, max_iterations: int = 100,
                 delta: float = 1e-5, period: int = 10, solver: CRFSolverOptions | None = None,
                 min_feature_count: int = 1, features: str | None = None, random_state=None,
                 n_threads: int | None = None, n_shards: int | None = None, n_jobs: int | None = None,
                 executor=None, verbose: bool = False, all_possible_states: bool = True,
                 all_possible_transitions: bool = True, boundary_weights: bool = False, epsilon: float = 0.0, pa_type: int = 1, c: float = 1.0,
                 error_sensitive: bool = True, averaging: bool = True, variance: float = 1.0, gamma: float = 1.0,
                 calibration_eta: float = 0.1, calibration_rate: float = 2.0, calibration_samples: int = 1000,
                 calibration_candidates: int = 10, calibration_max_trials: int = 20,
                 batch_size=DEPRECATED, step_size=DEPRECATED):
        self.all_possible_states = all_possible_states
        self.all_possible_transitions = all_possible_transitions
        self.boundary_weights = boundary_weights
        self.epsilon = epsilon
        self.pa_type = pa_type
        self.c = c
        self.error_sensitive = error_sensitive
        self.averaging = averaging
        self.variance = variance
        self.gamma = gamma
        self.calibration_eta = calibration_eta
        self.calibration_rate = calibration_rate
        self.calibration_samples = calibration_samples
        self.calibration_candidates = calibration_candidates
        self.calibration_max_trials = calibration_max_trials
        self.n_threads = n_threads
        self.n_shards = n_shards
        self.n_jobs = n_jobs
        self.executor = executor
        self.algorithm = algorithm
        self.c1 = c1
        self.c2 = c2
        self.max_iterations = max_iterations
        self.delta = delta
        self.period = period
        self.solver = solver
        self.min_feature_count = min_feature_count
        self.features = features
        self.random_state = random_state
        self.verbose = verbose
        # the keywords that moved into ``solver`` (kept for one release)
        self.batch_size = batch_size
        self.step_size = step_size

    def _solver(self, warn: bool = True) -> CRFSolverOptions:
        """``solver`` with the deprecated keywords passed put in (a FutureWarning unless ``warn`` is
        False: a second resolution within one fit, or at save)."""
        if not warn:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", FutureWarning)
                return self._solver()
        return options_with_deprecated(self, "solver", CRFSolverOptions, _SOLVER_KEYS, stacklevel=4)

    # -- data ---------------------------------------------------------------

    def _design(self, X, name="X", csr=True):
        X = apply_templates(X, self.features, name)
        if self.feature_names_ is None:
            return design_matrix(X, None, self.n_features_in_, name)
        return self._indexer.transform(X, name, csr)

    def _check_params(self):
        check_choice(self, "algorithm", _ALGORITHMS)
        check_real(self, "c1", 0)
        check_real(self, "c2", 0)
        check_int(self, "max_iterations", 1)
        check_real(self, "delta", 0)
        check_int(self, "period", 1)
        solver = self._solver()
        check_int(solver, "batch_size", 1)
        check_real(solver, "step_size", 0, exclusive_minimum=True)
        check_int(self, "min_feature_count", 1)
        check_features(self)
        check_int(self, "n_threads", 1, allow_none=True)
        check_int(self, "n_shards", 1, allow_none=True)
        check_n_jobs(self)
        if self.algorithm != "lbfgs" and (self.executor is not None or self.n_jobs not in (None, 1)
                                          or self.n_shards not in (None, 1)):
            raise ParameterError(f"CRF: n_shards / n_jobs / executor apply to algorithm='lbfgs', "
                                 f"not algorithm={self.algorithm!r}", name='algorithm', value=self.algorithm)
        check_bool(self, "verbose")
        check_bool(self, "all_possible_states")
        check_bool(self, "all_possible_transitions")
        check_bool(self, "boundary_weights")
        check_real(self, "epsilon", 0)
        check_int(self, "pa_type", 0, 2)
        check_real(self, "c", 0, exclusive_minimum=True)
        check_bool(self, "error_sensitive")
        check_bool(self, "averaging")
        check_real(self, "variance", 0, exclusive_minimum=True)
        check_real(self, "gamma", 0, exclusive_minimum=True)
        check_real(self, "calibration_eta", 0, exclusive_minimum=True)
        check_real(self, "calibration_rate", 1, exclusive_minimum=True)
        check_int(self, "calibration_samples", 1)
        check_int(self, "calibration_candidates", 1)
        check_int(self, "calibration_max_trials", 1)
        if self.algorithm in ONLINE_ALGORITHMS and self.c1 > 0:
            raise ParameterError(f"CRF: algorithm={self.algorithm!r} has no L1 term (CRFsuite's neither): use c1=0")

    # -- training -------------------------------------------------------------

    def fit(self, X, y, X_dev=None, y_dev=None):
        """Train on sequences X with label sequences y; optional dev data is scored each iteration."""
        self._check_params()
        with numba_threads(self.n_threads):
            return self._fit(X, y, X_dev, y_dev)

    def _fit(self, X, y, X_dev, y_dev):
        if len(X) != len(y):
            raise ParameterError(f"X has {len(X)} sequences but y has {len(y)}", name='X', value=X)
        began = time.perf_counter()
        X = apply_templates(X, self.features)
        partial = is_partial(y)
        if partial:
            if self.algorithm != "lbfgs" or self.n_shards not in (None, 1) or self.executor is not None or \
                    self.n_jobs not in (None, 1):
                raise ParameterError("CRF: partial labels (sets of candidates or None in y) train with "
                                 "algorithm='lbfgs' on one shard")
            codec, allowed = partial_mask(y)
        else:
            codec = LabelCodec.fit(y)
        self.classes_ = codec.classes
        if is_array_input(X):
            self._indexer = None
            self.feature_names_ = None
            matrix, lengths = design_matrix(X, None, None, "X")
            self.n_features_in_ = matrix.shape[1]
        else:
            self._indexer = FeatureIndexer(self.min_feature_count)
            matrix, lengths = self._indexer.fit_transform(X, csr=False)  # Rows: scipy only if shards need it
            self.feature_names_ = self._indexer.names_
            self.n_features_in_ = self._indexer.n_features
        for i, (xs, ys) in enumerate(zip(X, y)):
            if n_items(xs) != len(ys):
                raise ParameterError(f"X[{i}] has {n_items(xs)} items but y[{i}] has {len(ys)} labels", name='X', value=X)
        gold = None if partial else codec.encode(y)
        K = len(self.classes_)
        dev = None
        if X_dev is not None:
            dev_matrix, dev_lengths = self._design(X_dev, "X_dev", csr=False)
            dev = (dev_matrix, ChunkPlan(dev_lengths), y_dev)
        theta = np.zeros(self._n_params(K))
        keep = self._sparse_mask(matrix, lengths, gold if not partial else allowed, K, partial)
        if partial:
            objective = PartialChainObjective(matrix, lengths, allowed, K)
            progress, record = self._recorder(began, K, dev)
            theta = self._train_lbfgs(_masked(objective, keep), theta, record)
        elif self.algorithm == "lbfgs":
            objective = self._objective(matrix, lengths, gold, K)
            progress, record = self._recorder(began, K, dev, getattr(objective, "executor", None))
            theta = self._train_lbfgs(_masked(objective, keep), theta, record)
        elif self.algorithm in ONLINE_ALGORITHMS:
            progress, record = self._recorder(began, K, dev)
            F = self.n_features_in_
            theta, self.n_iter_, self.stop_reason_ = train_online(
                self.get_params(), rows_to_csr(matrix), lengths, gold, K, record,
                None if keep is None else keep[: F * K].reshape(F, K),
                None if keep is None else keep[F * K:(F + K) * K].reshape(K, K))
            self.n_evaluations_ = self.n_iter_
        else:
            progress, record = self._recorder(began, K, dev)
            self._fit_minibatch(theta, rows_to_csr(matrix), lengths, gold, K, record, keep)
        progress.close()
        self._set_params(theta, K)
        self.training_time_ = time.perf_counter() - began
        return self

    def fit_sources(self, sources, read):
        """Train on a corpus kept in pieces (e.g. files) that are read and featurised where the work
        runs: one shard per source, on the executor of ``n_jobs`` / ``executor``.

        Parameters
        ----------
        sources : sequence
            Picklable descriptions of the pieces (file paths, say), in corpus order.
        read : callable
            ``read(source) -> (X, y)``, run where the shard lives (picklable for process and Dask
            backends, e.g. :func:`varorder.io.conllu.read_tagged` with ``functools.partial``); X
            holds feature dicts, or words when ``features`` is set.

        Returns
        -------
        CRF
            ``self``. Here only the feature vocabulary (the model's own size), the labels and θ
            are ever held; each worker keeps its shards' design matrices. The features are
            numbered in first-seen order over the sources in order, as :meth:`fit` numbers them
            on the concatenated corpus, so the model equals ``fit`` on the concatenation up to
            the order of floating-point additions, and is bit-identical on any executor and
            number of workers (L-BFGS only; no dev scoring).
        """
        from collections import Counter

        from varorder.models.sharded import ShardedObjective
        from varorder.parallel import as_executor

        self._check_params()
        if self.algorithm != "lbfgs":
            raise ParameterError(f"CRF: fit_sources trains with algorithm='lbfgs', not algorithm={self.algorithm!r}", name='algorithm', value=self.algorithm)
        sources = list(sources)
        if not sources:
            raise ParameterError("CRF.fit_sources: sources is empty", name='sources', value=sources)
        began = time.perf_counter()
        executor = as_executor(self.executor, n_jobs=self.n_jobs)
        names: Counter = Counter()
        labels = set()
        for shard_names, shard_labels in executor.map(shard_vocabulary, sources, read, self.features):
            names.update(shard_names)  # insertion order: first seen over the sources in order
            labels |= shard_labels
        kept = [name for name, count in names.items() if count >= self.min_feature_count]
        self._indexer = FeatureIndexer.from_names(kept, self.min_feature_count)
        self.feature_names_ = self._indexer.names_
        self.n_features_in_ = self._indexer.n_features
        self.classes_ = LabelCodec.fit([labels]).classes
        K = len(self.classes_)
        with numba_threads(self.n_threads):
            handles = executor.map_remote(featurised_shard, sources, read, self.features, self._indexer,
                                          self.classes_)
            progress, record = self._recorder(began, K, None, executor)
            F = self.n_features_in_
            keep = None if self.boundary_weights else np.concatenate(
                [np.ones((F + K) * K, dtype=bool), np.zeros(2 * K, dtype=bool)])
            theta = self._train_lbfgs(_masked(ShardedObjective.placed(handles, executor), keep),
                                      np.zeros((F + K + 2) * K), record)
        progress.close()
        self._set_params(theta, K)
        self.training_time_ = time.perf_counter() - began
        return self

    def _recorder(self, began, K, dev, executor=None):
        """The progress display and the per-iteration ``record(iteration, θ, objective, |grad|)`` (on an
        executor, its line also says the workers busy and the time in the iteration's maps)."""
        from varorder.parallel import progress_note

        self.history_ = []
        progress = Progress(total=self.max_iterations, enabled=self.verbose, desc=f"CRF {self.algorithm}",
                            unit="it" if self.algorithm == "lbfgs" else "epoch")

        def record(iteration, params, objective, grad_norm):
            entry = {"iteration": iteration, "objective": objective, "grad_norm": grad_norm,
                     "time": time.perf_counter() - began}
            if dev is not None:
                self._set_params(params, K)
                entry["dev_accuracy"] = token_accuracy(self._predict_design(dev[0], dev[1]), dev[2])
            self.history_.append(entry)
            progress.update(1)
            if self.verbose:
                progress.set_postfix(objective=f"{objective:.6g}")
                extra = f" dev_acc={entry['dev_accuracy']:.4f}" if dev is not None else ""
                progress.write(f"iter {iteration:4d} objective={objective:.6g} |grad|={grad_norm:.3g}{extra}"
                               f"{progress_note(executor)}")

        return progress, record

    def _train_lbfgs(self, objective, theta, record):
        """L-BFGS (OWL-QN when c1 > 0) on the NLL ``objective`` plus c2‖θ‖²; returns θ."""

        def regularised(params):
            f, g = objective(params)
            if self.c2 > 0:
                f += self.c2 * dot(params, params)
                axpy(params, g, 2.0 * self.c2)
            return f, g

        theta, info = lbfgs(regularised, theta, c1=self.c1, max_iterations=self.max_iterations,
                            delta=self.delta, period=self.period,
                            callback=lambda it, p, f, gn: record(it, p, f, gn))
        self.n_iter_ = info["iterations"]
        self.n_evaluations_ = info["evaluations"]
        self.stop_reason_ = info["reason"]
        return theta

    def _objective(self, matrix, lengths, gold, K):
        """The NLL and its gradient: one :class:`ChainObjective`, or shards on an executor."""
        from varorder.models.sharded import ShardedObjective, shard_plan

        executor, shards = shard_plan(self, lengths)
        if shards is None:
            return ChainObjective(matrix, lengths, gold, K)
        matrix = rows_to_csr(matrix)
        return ShardedObjective([ChainObjective(matrix[tokens], lengths[seqs], gold[tokens], K)
                                 for seqs, tokens in shards], executor)

    def _n_params(self, K: int) -> int:
        """Length of θ: W (F, K), T (K, K), start, end."""
        return (self.n_features_in_ + K + 2) * K

    def _sparse_mask(self, matrix, lengths, gold, K, partial):
        """The flat mask of trainable θ entries, or None when every one is: with ``all_possible_states=False``
        only (feature, label) pairs seen in training (whatever the feature's value), with
        ``all_possible_transitions=False`` only label bigrams seen (CRFsuite's sparse feature set); start and
        end weights only with ``boundary_weights=True``."""
        if self.all_possible_states and self.all_possible_transitions and self.boundary_weights:
            return None
        F = matrix.shape[1]
        if self.all_possible_states and self.all_possible_transitions:
            return np.concatenate([np.ones((F + K) * K, dtype=bool), np.zeros(2 * K, dtype=bool)])
        if partial:  # a token with a candidate set supports each of its candidates
            states = np.asarray(rows_to_csr(matrix).T @ gold.astype(np.float64)) != 0
            allowed = gold
            prev, nxt = ChunkPlan(lengths).next_pairs()
            bigrams = (allowed[prev].astype(np.float64).T @ allowed[nxt].astype(np.float64)) != 0
        else:
            rows = matrix if isinstance(matrix, Rows) else None
            if rows is None:
                csr = matrix.tocsr()
                rows = Rows(csr.indptr, csr.indices, csr.data, csr.shape)
            # CRFsuite fires a state feature for every attribute an item carries, whatever its value (a
            # False flag is the value 0): the pairs are those seen, not those with a non-zero sum
            seen = Rows(rows.indptr, rows.indices, np.ones_like(rows.data), rows.shape)
            states = label_counts(seen, gold, K) != 0
            prev, nxt = ChunkPlan(lengths).next_pairs()
            bigrams = np.zeros((K, K), dtype=bool)
            bigrams[gold[prev], gold[nxt]] = True
        states = states if not self.all_possible_states else np.ones((F, K), dtype=bool)
        bigrams = bigrams if not self.all_possible_transitions else np.ones((K, K), dtype=bool)
        return np.concatenate([states.ravel(), bigrams.ravel(), np.full(2 * K, bool(self.boundary_weights))])

    def _fit_minibatch(self, theta, matrix, lengths, gold, K, record, keep=None):
        solver = self._solver(warn=False)  # told by _check_params
        rng = np.random.default_rng(self.random_state)
        offsets = np.concatenate([[0], np.cumsum(lengths)])
        order = rng.permutation(lengths.size)
        batches = []
        for start in range(0, order.size, solver.batch_size):
            seqs = np.sort(order[start:start + solver.batch_size])
            rows = np.concatenate([np.arange(offsets[s], offsets[s + 1]) for s in seqs])
            batches.append((seqs.size, ChainObjective(matrix[rows], lengths[seqs], gold[rows], K)))
        n_total = lengths.size
        if self.algorithm == "adagrad":
            optimiser = AdaGrad(step_size=solver.step_size)
        else:
            optimiser = SGD(step_size=solver.step_size / n_total * solver.batch_size, decay=1.0 / len(batches))
        for epoch in range(1, self.max_iterations + 1):
            total = 0.0
            for b in rng.permutation(len(batches)):
                n_batch, objective = batches[b]
                share = n_batch / n_total
                f, g = objective(theta)
                if keep is not None:
                    g[~keep] = 0.0
                if self.c2 > 0:
                    f += share * self.c2 * float(theta @ theta)
                    g += share * 2.0 * self.c2 * theta
                optimiser.l1 = share * self.c1
                optimiser.step(theta, g)
                total += f
            total += self.c1 * np.abs(theta).sum()
            # The logged objective sums the mini-batch objectives seen during the epoch (θ moving).
            record(epoch, theta, total, float("nan"))
        self.n_iter_ = self.max_iterations
        self.n_evaluations_ = self.max_iterations * len(batches)
        self.stop_reason_ = "max_iterations"

    def _set_params(self, theta, K):
        F = self.n_features_in_
        self.emission_weights_ = theta[: F * K].reshape(F, K).copy()
        self.transition_weights_ = theta[F * K: (F + K) * K].reshape(K, K).copy()
        self.start_weights_ = theta[(F + K) * K: (F + K + 1) * K].copy()
        self.end_weights_ = theta[(F + K + 1) * K:].copy()

    # -- sklearn-crfsuite's views of the model -------------------------------------------------------------

    @property
    def state_features_(self) -> dict:
        """{(feature name, label): weight} of every non-zero emission weight (sklearn-crfsuite's view; CRFsuite
        keeps only the non-zero features in its model file). Array input: the feature's column index."""
        self._check_fitted()
        names = self.feature_names_ or list(range(self.n_features_in_))
        rows, cols = np.nonzero(self.emission_weights_)
        return {(names[r], self.classes_[c]): float(self.emission_weights_[r, c])
                for r, c in zip(rows.tolist(), cols.tolist())}

    @property
    def transition_features_(self) -> dict:
        """{(label from, label to): weight} of every non-zero transition weight."""
        self._check_fitted()
        rows, cols = np.nonzero(self.transition_weights_)
        return {(self.classes_[r], self.classes_[c]): float(self.transition_weights_[r, c])
                for r, c in zip(rows.tolist(), cols.tolist())}

    @property
    def size_(self) -> int:
        """Bytes the model's non-zero weights take as CRFsuite stores them (a float64 each, plus the UTF-8 names
        of the features that have one); CRFsuite reports its model file's size here, so the two agree in kind,
        not to the byte."""
        self._check_fitted()
        weights = (np.count_nonzero(self.emission_weights_) + np.count_nonzero(self.transition_weights_)
                   + np.count_nonzero(self.start_weights_) + np.count_nonzero(self.end_weights_))
        active = np.flatnonzero(np.abs(self.emission_weights_).sum(axis=1))
        names = self.feature_names_ or []
        return int(8 * weights + sum(len(str(names[i]).encode()) for i in active.tolist() if i < len(names))
                   + sum(len(str(c).encode()) for c in self.classes_))

    @property
    def training_log_(self) -> "TrainingLog":
        """The per-iteration log as sklearn-crfsuite's ``training_log_`` shows it (``iterations``, a list of
        dicts with ``num``, ``loss``, ``error_norm`` (gradient norm; for ap/pa/arow the fraction of wrong
        labels), ``time``; ``last_iteration``)."""
        check_is_fitted(self, "history_")
        return TrainingLog([{"num": e["iteration"], "loss": e["objective"], "error_norm": e["grad_norm"],
                             "time": e["time"], **({"dev_accuracy": e["dev_accuracy"]} if "dev_accuracy" in e else {})}
                            for e in self.history_])

    # -- prediction -------------------------------------------------------------

    def _check_fitted(self):
        check_is_fitted(self, "emission_weights_")

    def _predict_design(self, matrix, plan):
        scores = csr_times_dense(matrix, self.emission_weights_)
        ids = decode_viterbi(plan, scores, self.transition_weights_, self.start_weights_, self.end_weights_).tolist()
        classes, offsets = self.classes_, plan.offsets.tolist()
        return [[classes[i] for i in ids[offsets[s]:offsets[s + 1]]] for s in range(plan.lengths.size)]

    def _chain_potentials(self, X):
        matrix, lengths = self._design(X, csr=False)
        plan = ChunkPlan(lengths)
        return (plan, csr_times_dense(matrix, self.emission_weights_), self.transition_weights_,
                self.start_weights_, self.end_weights_)

    def predict(self, X, allowed=None, constraints: str | None = None) -> list[list]:
        """Viterbi label sequence for each input sequence.

        ``allowed``: per sequence, per token None (any label), a label (fixed) or a set of candidate labels
        (see :func:`varorder.models.sequences.token_mask`); ``constraints``: a tag scheme (``"BIO"``,
        ``"IOB1"``, ``"BIOES"``, ``"BILOU"``) whose invalid transitions, first and last labels are forbidden
        (AllenNLP's ``allowed_transitions``), so every output is valid in it. Both are exact: the best
        sequence among those permitted.
        """
        self._check_fitted()
        with numba_threads(self.n_threads):
            if allowed is None and constraints is None:
                matrix, lengths = self._design(X, csr=False)
                return self._predict_design(matrix, ChunkPlan(lengths))
            return self._decode_constrained(X, allowed, constraints)

    def predict_kbest(self, X, k: int = 5, allowed=None, constraints: str | None = None):
        self._check_fitted()
        with numba_threads(self.n_threads):
            return super().predict_kbest(X, k, allowed, constraints)

    predict_kbest.__doc__ = ChainDecoding.predict_kbest.__doc__

    def predict_marginals(self, X, allowed=None, constraints: str | None = None) -> list[np.ndarray]:
        """Posterior p(yₜ = k | x) per sequence, arrays (n, K) with columns in ``classes_`` order; with
        ``allowed`` / ``constraints`` (as :meth:`predict` takes them), of the distribution restricted to the
        permitted sequences."""
        self._check_fitted()
        with numba_threads(self.n_threads):
            return self._constrained_marginals(X, allowed, constraints)

    def score(self, X, y) -> float:
        """Token accuracy of :meth:`predict` against y."""
        return token_accuracy(self.predict(X), y)

    # -- persistence --------------------------------------------------------------

    def save(self, path) -> None:
        """Write the fitted model as npz + JSON metadata (no pickle); atomic."""
        self._check_fitted()
        solver = self._solver(warn=False)
        # the solver's knobs under their own names, as model files have always held them
        params = {k: getattr(solver if k in _SOLVER_KEYS else self, k) for k in (
            "algorithm", "c1", "c2", "max_iterations", "delta", "period", "batch_size", "step_size",
            "min_feature_count", "features", "n_threads", "n_shards", "all_possible_states", "boundary_weights",
            "all_possible_transitions") + _ONLINE_PARAMS}
        persist.save_model(path, self._MODEL_KIND, params, {
            "classes": self.classes_, "feature_names": self.feature_names_, "n_features_in": self.n_features_in_,
        }, {
            "emission_weights": self.emission_weights_, "transition_weights": self.transition_weights_,
            "start_weights": self.start_weights_, "end_weights": self.end_weights_,
        })

    @classmethod
    @persist.model_loader
    def load(cls, path) -> "CRF":
        """Read a model written by :meth:`save`; a corrupted or foreign file raises ValueError."""
        params, state, arrays = persist.load_model(path, cls._MODEL_KIND, (
            "emission_weights", "transition_weights", "start_weights", "end_weights"))
        params = dict(persist.templates_as_parameter(path, params, state))
        moved = {k: params.pop(k) for k in _SOLVER_KEYS if k in params}
        model = cls(**params, solver=CRFSolverOptions(**moved))
        model.classes_ = persist.check_labels(path, "classes", state["classes"])
        model.feature_names_ = persist.check_labels(path, "feature_names", state["feature_names"], allow_none=True)
        model.n_features_in_ = int(state["n_features_in"])
        if model.feature_names_ is not None and len(model.feature_names_) != model.n_features_in_:
            # the names index the weight rows: fewer names would leave rows unreachable, silently
            raise FormatError(f"{os.fspath(path)}: field 'feature_names' lists {len(model.feature_names_)} names "
                              f"for n_features_in = {model.n_features_in_}", path=os.fspath(path))
        model._indexer = None if model.feature_names_ is None else FeatureIndexer.from_names(model.feature_names_)
        K = len(model.classes_)
        F = model.n_features_in_
        persist.check_shapes(path, arrays, {"emission_weights": (F, K), "transition_weights": (K, K),
                                            "start_weights": (K,), "end_weights": (K,)})
        for name, value in arrays.items():
            setattr(model, name + "_", value)
        return model


def _masked(objective, keep):
    """The objective with the gradient zeroed outside ``keep`` (θ starts at 0 there and stays: the entries are
    not in the model); the objective itself when every entry is trained."""
    if keep is None:
        return objective

    def masked(theta):
        f, g = objective(theta)
        g[~keep] = 0.0
        return f, g

    masked.executor = getattr(objective, "executor", None)
    return masked


def _read_items(source, read, features):
    X, y = read(source)
    if len(X) != len(y):
        raise FormatError(f"{source}: {len(X)} sequences but {len(y)} label sequences", path=source)
    X = apply_templates(X, features, f"{source}")
    if X and is_array_input(X):
        raise FormatError(f"{source}: sharded training reads feature dicts (or words with features=...), "
                          "not arrays", path=source)
    return X, y


def shard_vocabulary(source, read, features=None):
    """One shard's feature-name counts (in first-seen order) and label set, computed where the
    shard is read: what the driver needs to number the features and labels."""
    from collections import Counter
    from itertools import chain

    X, y = _read_items(source, read, features)
    names, _, _, _ = _flatten(X, f"{source}")
    return Counter(names), set(chain.from_iterable(y))


def featurised_shard(source, read, features, indexer, classes):
    """One shard read, featurised with the driver's feature numbering and turned into its
    :class:`~varorder.models.crf.ChainObjective` (kept where it was built)."""
    X, y = _read_items(source, read, features)
    for i, (xs, ys) in enumerate(zip(X, y)):
        if len(xs) != len(ys):
            raise FormatError(f"{source}: sequence {i} has {len(xs)} items but {len(ys)} labels", path=source)
    matrix, lengths = indexer.transform(X, f"{source}")
    return ChainObjective(matrix, lengths, LabelCodec(classes).encode(y, f"{source}"), len(classes))
