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

import time
from typing import TYPE_CHECKING

import numpy as np
from tqdm.auto import tqdm

from varorder.models import persist
from varorder.models.estimator import ParamsMixin
from varorder.models.features import FeatureIndexer, csr_times_dense, design_matrix, is_array_input, n_items
from varorder.models.optim import SGD, AdaGrad, axpy, dot, lbfgs
from varorder.models.sequences import (ChunkPlan, LabelCodec, decode_viterbi, iter_marginals, numba_threads,
                                       token_accuracy)

if TYPE_CHECKING:
    import scipy.sparse as sp

__all__ = ["CRF", "ChainObjective"]

_ALGORITHMS = ("lbfgs", "adagrad", "sgd")


class ChainObjective:
    """Σ NLL of gold label sequences under a linear-chain CRF, and its gradient.

    Built once per data set: the design matrix X (N, F) CSR and its transpose, the
    gold labels, the chunk plan and all empirical (gold) counts are fixed; each call
    only recomputes emissions X @ W, runs the engine, and forms the gradient.
    """

    def __init__(self, X: sp.csr_matrix, lengths: np.ndarray, gold: np.ndarray, n_labels: int,
                 max_cells: int | None = None):
        import scipy.sparse as sp  # training only: tagging never imports SciPy's sparse package

        K = n_labels
        self.X = X.tocsr()
        self.XT = self.X.T.tocsr()
        self.K = K
        self.F = X.shape[1]
        self.n_sequences = lengths.size
        # ≥ 4096 cells (~16 MB of edge marginals at K = 17) per engine call: few enough calls that the
        # parallel-launch overhead (large on a busy machine) is amortised, small enough to stay cache-friendly.
        cells = max_cells or max(4096, (1 << 21) // (K * K))
        self.plan = ChunkPlan(lengths, max_cells=cells)
        self.gold = gold
        onehot = sp.csr_matrix((np.ones(gold.size), (np.arange(gold.size), gold)), shape=(gold.size, K))
        self.empirical_W = np.asarray((self.XT @ onehot).todense())
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


class CRF(ParamsMixin):
    """Linear-chain CRF estimator (scikit-learn conventions).

    Parameters
    ----------
    algorithm : "lbfgs" (L-BFGS, or OWL-QN when c1 > 0), "adagrad" or "sgd" (mini-batch).
    c1, c2 : ℓ1 and ℓ2 coefficients on the *summed* NLL, as in CRFsuite:
        J = Σ NLL + c1‖θ‖₁ + c2‖θ‖².
    max_iterations : L-BFGS iterations, or epochs for the mini-batch algorithms.
    delta, period : stop when J improved by < delta (relative) over ``period`` iterations.
    batch_size, step_size : mini-batch size (sequences) and base step for adagrad/sgd.
    min_feature_count : features seen fewer times in training are dropped.
    random_state : seed for mini-batch shuffling.
    n_threads : Numba threads for training and inference (None: Numba's default, all cores).
    verbose : progress bar and a per-iteration log line (objective, gradient norm, dev accuracy).

    Learned attributes: ``classes_``, ``feature_names_`` (None for array input),
    ``n_features_in_``, ``emission_weights_`` (F, K), ``transition_weights_`` (K, K),
    ``start_weights_`` (K,), ``end_weights_`` (K,), ``history_`` (per-iteration dicts),
    ``n_iter_``, ``n_evaluations_`` (objective/gradient evaluations), ``stop_reason_``, ``training_time_``.
    """

    _MODEL_KIND = "CRF"

    def __init__(self, algorithm: str = "lbfgs", c1: float = 0.0, c2: float = 0.1, max_iterations: int = 100,
                 delta: float = 1e-5, period: int = 10, batch_size: int = 64, step_size: float = 0.2,
                 min_feature_count: int = 1, random_state=None, n_threads: int | None = None,
                 verbose: bool = False):
        self.n_threads = n_threads
        self.algorithm = algorithm
        self.c1 = c1
        self.c2 = c2
        self.max_iterations = max_iterations
        self.delta = delta
        self.period = period
        self.batch_size = batch_size
        self.step_size = step_size
        self.min_feature_count = min_feature_count
        self.random_state = random_state
        self.verbose = verbose

    # -- data ---------------------------------------------------------------

    def _design(self, X, name="X", csr=True):
        if self.feature_names_ is None:
            return design_matrix(X, None, self.n_features_in_, name)
        return self._indexer.transform(X, name, csr)

    def _check_params(self):
        if self.algorithm not in _ALGORITHMS:
            raise ValueError(f"algorithm must be one of {_ALGORITHMS}, got {self.algorithm!r}")
        for name in ("c1", "c2"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)}")
        if self.max_iterations < 1:
            raise ValueError(f"max_iterations must be >= 1, got {self.max_iterations}")
        if self.batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {self.batch_size}")
        if self.n_threads is not None and (isinstance(self.n_threads, bool) or not isinstance(self.n_threads, int)
                                           or self.n_threads < 1):
            raise ValueError(f"n_threads must be None or an int >= 1, got {self.n_threads!r}")

    # -- training -------------------------------------------------------------

    def fit(self, X, y, X_dev=None, y_dev=None):
        """Train on sequences X with label sequences y; optional dev data is scored each iteration."""
        self._check_params()
        with numba_threads(self.n_threads):
            return self._fit(X, y, X_dev, y_dev)

    def _fit(self, X, y, X_dev, y_dev):
        if len(X) != len(y):
            raise ValueError(f"X has {len(X)} sequences but y has {len(y)}")
        began = time.perf_counter()
        codec = LabelCodec.fit(y)
        self.classes_ = codec.classes
        if is_array_input(X):
            self._indexer = None
            self.feature_names_ = None
            matrix, lengths = design_matrix(X, None, None, "X")
            self.n_features_in_ = matrix.shape[1]
        else:
            self._indexer = FeatureIndexer(self.min_feature_count).fit(X)
            self.feature_names_ = self._indexer.names_
            self.n_features_in_ = self._indexer.n_features
            matrix, lengths = self._indexer.transform(X)
        for i, (xs, ys) in enumerate(zip(X, y)):
            if n_items(xs) != len(ys):
                raise ValueError(f"X[{i}] has {n_items(xs)} items but y[{i}] has {len(ys)} labels")
        gold = codec.encode(y)
        K = len(self.classes_)
        dev = None
        if X_dev is not None:
            dev_matrix, dev_lengths = self._design(X_dev, "X_dev")
            dev = (dev_matrix, ChunkPlan(dev_lengths), y_dev)
        self.history_ = []
        theta = np.zeros((self.n_features_in_ + K + 2) * K)
        progress = tqdm(total=self.max_iterations, disable=not self.verbose, desc=f"CRF {self.algorithm}",
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
                extra = f" dev_acc={entry['dev_accuracy']:.4f}" if dev is not None else ""
                progress.write(f"iter {iteration:4d} objective={objective:.6g} |grad|={grad_norm:.3g}{extra}")

        if self.algorithm == "lbfgs":
            objective = ChainObjective(matrix, lengths, gold, K)

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
        else:
            self._fit_minibatch(theta, matrix, lengths, gold, K, record)
        progress.close()
        self._set_params(theta, K)
        self.training_time_ = time.perf_counter() - began
        return self

    def _fit_minibatch(self, theta, matrix, lengths, gold, K, record):
        rng = np.random.default_rng(self.random_state)
        offsets = np.concatenate([[0], np.cumsum(lengths)])
        order = rng.permutation(lengths.size)
        batches = []
        for start in range(0, order.size, self.batch_size):
            seqs = np.sort(order[start:start + self.batch_size])
            rows = np.concatenate([np.arange(offsets[s], offsets[s + 1]) for s in seqs])
            batches.append((seqs.size, ChainObjective(matrix[rows], lengths[seqs], gold[rows], K)))
        n_total = lengths.size
        if self.algorithm == "adagrad":
            optimiser = AdaGrad(step_size=self.step_size)
        else:
            optimiser = SGD(step_size=self.step_size / n_total * self.batch_size, decay=1.0 / len(batches))
        for epoch in range(1, self.max_iterations + 1):
            total = 0.0
            for b in rng.permutation(len(batches)):
                n_batch, objective = batches[b]
                share = n_batch / n_total
                f, g = objective(theta)
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

    # -- prediction -------------------------------------------------------------

    def _check_fitted(self):
        if not hasattr(self, "emission_weights_"):
            raise ValueError("this CRF is not fitted yet: call fit() or load() first")

    def _predict_design(self, matrix, plan):
        scores = csr_times_dense(matrix, self.emission_weights_)
        ids = decode_viterbi(plan, scores, self.transition_weights_, self.start_weights_, self.end_weights_).tolist()
        classes, offsets = self.classes_, plan.offsets.tolist()
        return [[classes[i] for i in ids[offsets[s]:offsets[s + 1]]] for s in range(plan.lengths.size)]

    def predict(self, X) -> list[list]:
        """Viterbi label sequence for each input sequence."""
        self._check_fitted()
        matrix, lengths = self._design(X, csr=False)
        with numba_threads(self.n_threads):
            return self._predict_design(matrix, ChunkPlan(lengths))

    def predict_marginals(self, X) -> list[np.ndarray]:
        """Posterior p(yₜ = k | x) per sequence, arrays (n, K) with columns in ``classes_`` order."""
        self._check_fitted()
        matrix, lengths = self._design(X, csr=False)
        plan = ChunkPlan(lengths)
        scores = csr_times_dense(matrix, self.emission_weights_)
        node_flat = np.empty_like(scores)
        with numba_threads(self.n_threads):
            for _, _, flat_index, valid, node, _, _ in iter_marginals(
                    plan, scores, self.transition_weights_, self.start_weights_, self.end_weights_):
                node_flat[flat_index[valid]] = node[valid]
        return [node_flat[plan.offsets[s]:plan.offsets[s + 1]] for s in range(lengths.size)]

    def score(self, X, y) -> float:
        """Token accuracy of :meth:`predict` against y."""
        return token_accuracy(self.predict(X), y)

    # -- persistence --------------------------------------------------------------

    def save(self, path) -> None:
        """Write the fitted model as npz + JSON metadata (no pickle); atomic."""
        self._check_fitted()
        params = {k: getattr(self, k) for k in ("algorithm", "c1", "c2", "max_iterations", "delta", "period",
                                                 "batch_size", "step_size", "min_feature_count", "n_threads")}
        persist.save_model(path, self._MODEL_KIND, params, {
            "classes": self.classes_, "feature_names": self.feature_names_,
            # the templates that made feature dicts from words, when a caller (the CLI) recorded them
            "feature_template": getattr(self, "feature_template_", None), "n_features_in": self.n_features_in_,
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
        model = cls(**params)
        model.classes_ = persist.check_labels(path, "classes", state["classes"])
        model.feature_names_ = persist.check_labels(path, "feature_names", state["feature_names"], allow_none=True)
        model.n_features_in_ = int(state["n_features_in"])
        if state.get("feature_template") is not None:
            model.feature_template_ = str(state["feature_template"])
        model._indexer = None if model.feature_names_ is None else FeatureIndexer.from_names(model.feature_names_)
        K = len(model.classes_)
        F = model.n_features_in_
        persist.check_shapes(path, arrays, {"emission_weights": (F, K), "transition_weights": (K, K),
                                            "start_weights": (K,), "end_weights": (K,)})
        for name, value in arrays.items():
            setattr(model, name + "_", value)
        return model
