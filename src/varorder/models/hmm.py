"""Discrete hidden Markov model: supervised estimation with smoothing, Baum–Welch EM, decoding.

Factorization (Rabiner, "A Tutorial on Hidden Markov Models", Proc. IEEE 1989):

    p(x, y) = π[y₁] · Πₜ₌₂ⁿ A[yₜ₋₁, yₜ] · Πₜ B[yₜ, xₜ]

over states 0…K−1 and a symbol vocabulary learned from training (plus one slot for
unseen symbols). As a chain for the engine: emissions log B[:, xₜ], transitions log A,
start log π; its log-partition is log p(x) and its marginals are the E-step posteriors.

* Supervised ``fit(X, y)``: the MAP estimate under symmetric Dirichlet priors, i.e.
  add-α counts: π ∝ c(first = i) + α_start, A[i] ∝ c(i → j) + α_transition,
  B[i] ∝ c(i emits v) + α_emission (the unseen-symbol slot gets α_emission alone).
* Unsupervised ``fit(X)`` (Baum 1972; Dempster, Laird & Rubin 1977): EM from a seeded
  random start; the E-step runs the engine's chain marginals over all sequences at once,
  the M-step is the same add-α estimate with expected counts. (With α_emission = 0 an
  unseen symbol gets the same score, 0, in every state: uninformative, not impossible.) EM never decreases
  log p(X) + Σ α·log θ (the log-posterior, = log-likelihood when all α = 0); both are
  recorded per iteration in ``history_``.
* Decoding: Viterbi (best joint path) or posterior (per-position argmax of the marginals).
"""

from __future__ import annotations

import time

import numpy as np

from varorder.errors import ParameterError
from varorder.models import persist
from varorder.parallel import check_n_jobs
from varorder._progress import Progress
from varorder.base import ParamsMixin, check_bool, check_int, check_is_fitted, check_real
from varorder.models.sequences import ChunkPlan, LabelCodec, decode_viterbi, iter_marginals, token_accuracy

__all__ = ["HMM"]


def _normalise_log(counts: np.ndarray) -> np.ndarray:
    totals = counts.sum(axis=-1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.log(counts) - np.log(totals)
    return np.where(totals > 0, out, -np.log(counts.shape[-1]))  # a never-seen state: uniform row


def _expected_counts(shard, log_start, log_transitions, log_emissions):
    """One shard's E-step: expected start, transition and emission counts and its log-likelihood."""
    ids, plan = shard
    K, V1 = log_emissions.shape
    start_counts = np.zeros(K)
    transition_counts = np.zeros((K, K))
    emission_counts = np.zeros((K, V1))
    log_likelihood = 0.0
    token_scores = log_emissions[:, ids].T
    for _, _, flat_index, valid, node, edge, logz in iter_marginals(
            plan, token_scores, log_transitions, log_start, edges="sum"):
        log_likelihood += logz.sum()
        start_counts += node[:, 0].sum(axis=0)
        transition_counts += edge.sum(axis=0)
        flat_node = node[valid]
        for k in range(K):
            emission_counts[k] += np.bincount(ids[flat_index[valid]], weights=flat_node[:, k], minlength=V1)
    return start_counts, transition_counts, emission_counts, log_likelihood


def _add_counts(total, part):
    return tuple(a + b for a, b in zip(total, part))


class HMM(ParamsMixin):
    """Discrete-emission HMM estimator (scikit-learn conventions).

    Parameters
    ----------
    n_states : number of hidden states, required for unsupervised fitting (ignored when y is given).
    alpha_start, alpha_transition, alpha_emission : add-α pseudo-counts (≥ 0). The default 0.1
        (1 before varorder 0.3.0) tags UD English EWT dev at 87.5% UPOS against 84.6% with
        add-one (supervised, word forms; docs/notes/31-api.md).
    max_iterations, tol : EM stops after max_iterations or when the log-posterior rises by < tol (relative).
    random_state : seed of the EM initialisation.
    verbose : per-iteration log-likelihood lines (and a progress bar when stderr is a terminal).

    Parameters are keyword-only and checked by :meth:`fit` (a ValueError names the
    parameter and the value passed); prediction before :meth:`fit` raises NotFittedError.

    Learned: ``classes_`` (state labels), ``symbols_`` (vocabulary; the last emission column
    is for unseen symbols), ``log_start_`` (K,), ``log_transitions_`` (K, K),
    ``log_emissions_`` (K, V + 1), ``history_``, ``n_iter_``.

    Examples
    --------
    Supervised (relative frequencies with add-α smoothing) when ``y`` is given; Baum–Welch
    on ``fit(X)`` alone:

    >>> from varorder.models.hmm import HMM
    >>> X = [["the", "dog", "barks"], ["a", "cat", "sleeps"]]
    >>> y = [["DET", "NOUN", "VERB"], ["DET", "NOUN", "VERB"]]
    >>> hmm = HMM(alpha_start=0.1, alpha_transition=0.1, alpha_emission=0.1).fit(X, y)
    >>> hmm.predict([["the", "cat", "sleeps"]])
    [['DET', 'NOUN', 'VERB']]
    """

    _MODEL_KIND = "HMM"
    _requires_y = False  # fit(X) alone runs Baum–Welch

    def __init__(self, *, n_states: int | None = None, alpha_start: float = 0.1, alpha_transition: float = 0.1,
                 alpha_emission: float = 0.1, max_iterations: int = 100, tol: float = 1e-6,
                 random_state=None, n_shards: int | None = None, n_jobs: int | None = None, executor=None,
                 verbose: bool = False):
        self.n_states = n_states
        self.n_shards = n_shards
        self.n_jobs = n_jobs
        self.executor = executor
        self.alpha_start = alpha_start
        self.alpha_transition = alpha_transition
        self.alpha_emission = alpha_emission
        self.max_iterations = max_iterations
        self.tol = tol
        self.random_state = random_state
        self.verbose = verbose

    # -- data ------------------------------------------------------------------

    def _encode_symbols(self, X, name="X"):
        unknown = len(self.symbols_)
        get = self._symbol_index.get
        lengths = np.array([len(seq) for seq in X], dtype=np.int64)
        if lengths.size == 0:
            raise ParameterError(f"{name} holds no sequences", name=name)
        if (lengths == 0).any():
            raise ParameterError(f"{name}[{int(np.flatnonzero(lengths == 0)[0])}] is an empty sequence", name=name)
        ids = np.fromiter((get(v, unknown) for seq in X for v in seq), dtype=np.int64, count=int(lengths.sum()))
        return ids, lengths

    def _check_params(self):
        check_int(self, "n_states", 1, allow_none=True)
        for name in ("alpha_start", "alpha_transition", "alpha_emission"):
            check_real(self, name, 0)
        check_int(self, "max_iterations", 1)
        check_real(self, "tol", 0)
        check_int(self, "n_shards", 1, allow_none=True)
        check_n_jobs(self)
        check_bool(self, "verbose")

    # -- estimation --------------------------------------------------------------

    def _m_step(self, start_counts, transition_counts, emission_counts):
        self.log_start_ = _normalise_log(start_counts + self.alpha_start)
        self.log_transitions_ = _normalise_log(transition_counts + self.alpha_transition)
        emission_counts = emission_counts.copy()
        emission_counts[:, :-1] += self.alpha_emission
        emission_counts[:, -1] += self.alpha_emission
        self.log_emissions_ = _normalise_log(emission_counts)
        if self.alpha_emission == 0:
            # No mass reserved for unseen symbols: make them uninformative (equal score in
            # every state) instead of impossible.
            self.log_emissions_[:, -1] = 0.0

    def _log_prior(self) -> float:
        total = 0.0
        for alpha, logp in ((self.alpha_start, self.log_start_), (self.alpha_transition, self.log_transitions_),
                            (self.alpha_emission, self.log_emissions_)):
            if alpha > 0:
                total += alpha * float(logp[np.isfinite(logp)].sum())
        return total

    def fit(self, X, y=None):
        """Supervised add-α estimation when y is given, else Baum–Welch EM with ``n_states`` states."""
        self._check_params()
        began = time.perf_counter()
        vocabulary = dict.fromkeys(v for seq in X for v in seq)
        self.symbols_ = list(vocabulary)
        self._symbol_index = {v: i for i, v in enumerate(self.symbols_)}
        ids, lengths = self._encode_symbols(X)
        V1 = len(self.symbols_) + 1
        plan = ChunkPlan(lengths)
        if y is not None:
            if len(X) != len(y):
                raise ParameterError(f"X has {len(X)} sequences but y has {len(y)}", name='X', value=X)
            for i, (xs, ys) in enumerate(zip(X, y)):
                if len(xs) != len(ys):
                    raise ParameterError(f"X[{i}] has {len(xs)} symbols but y[{i}] has {len(ys)} labels", name='X', value=X)
            codec = LabelCodec.fit(y)
            self.classes_ = codec.classes
            gold = codec.encode(y)
            K = len(self.classes_)
            prev, nxt = plan.next_pairs()
            transition_counts = np.zeros((K, K))
            np.add.at(transition_counts, (gold[prev], gold[nxt]), 1.0)
            emission_counts = np.zeros((K, V1))
            np.add.at(emission_counts, (gold, ids), 1.0)
            self._m_step(np.bincount(gold[plan.first_tokens()], minlength=K).astype(float), transition_counts,
                         emission_counts)
            self.history_ = []
            self.n_iter_ = 0
        else:
            if self.n_states is None or self.n_states < 1:
                raise ParameterError(f"n_states must be a positive integer for unsupervised fitting, got {self.n_states}", name='n_states', value=self.n_states)
            K = int(self.n_states)
            self.classes_ = list(range(K))
            rng = np.random.default_rng(self.random_state)
            self.log_start_ = np.log(rng.dirichlet(np.ones(K)))
            self.log_transitions_ = np.log(rng.dirichlet(np.ones(K), size=K))
            emissions = np.zeros((K, V1))
            emissions[:, :-1] = rng.dirichlet(np.ones(V1 - 1), size=K)
            with np.errstate(divide="ignore"):
                self.log_emissions_ = np.log(emissions)
            self.log_emissions_[:, -1] = 0.0 if self.alpha_emission == 0 else np.log(1e-300)
            self._baum_welch(ids, plan, K, V1)
        self.training_time_ = time.perf_counter() - began
        return self

    def _estep_shards(self, ids, plan):
        """The executor and the E-step's shards ``(ids, ChunkPlan)``: the whole corpus as one shard
        serially, else ``n_shards`` token-balanced ranges of sentences (8 by default), cut from the
        lengths alone so that any executor and worker count give the same sums."""
        from varorder.models.sharded import shard_plan

        executor, shards = shard_plan(self, plan.lengths)
        if shards is None:
            return executor, [(ids, plan)]
        return executor, executor.scatter([(ids[tokens], ChunkPlan(plan.lengths[seqs])) for seqs, tokens in shards])

    def _baum_welch(self, ids, plan, K, V1):
        from varorder.parallel import progress_note, reduce_in_order

        began = time.perf_counter()
        self.history_ = []
        previous = -np.inf
        progress = Progress(total=self.max_iterations, enabled=self.verbose, desc="Baum-Welch", unit="it")
        executor, shards = self._estep_shards(ids, plan)
        for iteration in range(1, self.max_iterations + 1):
            results = executor.map(_expected_counts, shards, self.log_start_, self.log_transitions_,
                                   self.log_emissions_)
            start_counts, transition_counts, emission_counts, log_likelihood = reduce_in_order(results, _add_counts)
            log_posterior = log_likelihood + self._log_prior()
            self.history_.append({"iteration": iteration, "log_likelihood": log_likelihood,
                                  "log_posterior": log_posterior})
            progress.update(1)
            if self.verbose:
                progress.write(f"iter {iteration:4d} log-likelihood={log_likelihood:.6f} "
                               f"log-posterior={log_posterior:.6f} shards={len(shards)} "
                               f"workers={executor.n_workers} time={time.perf_counter() - began:.2f}s"
                               f"{progress_note(executor)}")
            if iteration > 1 and log_posterior - previous < self.tol * abs(log_posterior):
                break
            previous = log_posterior
            self._m_step(start_counts, transition_counts, emission_counts)
        progress.close()
        self.n_iter_ = len(self.history_)

    # -- inference ---------------------------------------------------------------

    def _token_scores(self, X):
        check_is_fitted(self, "log_emissions_")
        ids, lengths = self._encode_symbols(X)
        return self.log_emissions_[:, ids].T, ChunkPlan(lengths)

    def _flat_marginals(self, scores, plan):
        node_flat = np.empty_like(scores)
        log_likelihood = np.empty(plan.lengths.size)
        for seq_ids, _, flat_index, valid, node, _, logz in iter_marginals(
                plan, scores, self.log_transitions_, self.log_start_):
            node_flat[flat_index[valid]] = node[valid]
            log_likelihood[seq_ids] = logz
        return node_flat, log_likelihood

    def predict(self, X, algorithm: str = "viterbi") -> list[list]:
        """State sequences: "viterbi" (best joint path) or "posterior" (per-position max marginal)."""
        scores, plan = self._token_scores(X)
        if algorithm == "viterbi":
            ids = decode_viterbi(plan, scores, self.log_transitions_, self.log_start_)
        elif algorithm == "posterior":
            ids = self._flat_marginals(scores, plan)[0].argmax(axis=1)
        else:
            raise ParameterError(f"algorithm must be 'viterbi' or 'posterior', got {algorithm!r}", name='algorithm', value=algorithm)
        return [[self.classes_[i] for i in ids[plan.offsets[s]:plan.offsets[s + 1]]] for s in range(plan.lengths.size)]

    def predict_marginals(self, X) -> list[np.ndarray]:
        scores, plan = self._token_scores(X)
        node_flat, _ = self._flat_marginals(scores, plan)
        return [node_flat[plan.offsets[s]:plan.offsets[s + 1]] for s in range(plan.lengths.size)]

    def log_likelihood(self, X) -> np.ndarray:
        """log p(x) of each sequence (the chain's log-partition)."""
        scores, plan = self._token_scores(X)
        return self._flat_marginals(scores, plan)[1]

    def score(self, X, y) -> float:
        return token_accuracy(self.predict(X), y)

    # -- persistence ----------------------------------------------------------------

    def save(self, path) -> None:
        check_is_fitted(self, "log_emissions_")
        params = {k: getattr(self, k) for k in ("n_states", "alpha_start", "alpha_transition", "alpha_emission",
                                                 "max_iterations", "tol")}
        persist.save_model(path, self._MODEL_KIND, params, {"classes": self.classes_, "symbols": self.symbols_},
                           {"log_start": self.log_start_, "log_transitions": self.log_transitions_,
                            "log_emissions": self.log_emissions_})

    @classmethod
    @persist.model_loader
    def load(cls, path) -> "HMM":
        params, state, arrays = persist.load_model(path, cls._MODEL_KIND,
                                                   ("log_start", "log_transitions", "log_emissions"))
        model = cls(**params)
        model.classes_ = persist.check_labels(path, "classes", state["classes"])
        model.symbols_ = persist.check_labels(path, "symbols", state["symbols"])
        model._symbol_index = {v: i for i, v in enumerate(model.symbols_)}
        K, V1 = len(model.classes_), len(model.symbols_) + 1
        persist.check_shapes(path, arrays, {"log_start": (K,), "log_transitions": (K, K), "log_emissions": (K, V1)})
        for name, value in arrays.items():
            setattr(model, name + "_", value)
        return model
