"""The one EM loop of the hmmlearn-compatible HMMs; emission models are small overrides.

Factorization (Rabiner 1989): for a sequence x₁ … xₙ with hidden states zₜ ∈ {0 … K−1},

    p(x, z) = π[z₁] · Πₜ₌₂ⁿ A[zₜ₋₁, zₜ] · Πₜ p(xₜ | zₜ; θ_{zₜ})

— a dense chain for the engine with emissions log p(xₜ | k), transitions log A and start
log π: its log-partition is log p(x), its node and summed edge marginals are the E-step's
posteriors and expected transitions (:func:`varorder.chain.statistics`, one call per
E-step: also the posterior-weighted sums of the emission model's features, e.g. [x, x²]).
There is no forward–backward here.

EM (Baum 1972; Dempster, Laird & Rubin 1977) as hmmlearn lays it out: ``_init`` (start,
transition and emission parameters named by the ``init_params`` letters), then per
iteration the E-step (``_compute_log_likelihood`` → engine statistics →
``_accumulate_feature_statistics`` or ``_accumulate_emission_statistics``) and the M-step (``_do_mstep``) for the parameters
named by ``params``. An emission model overrides those four methods, its parameter checks
(``_check``), its parameter count (``_get_n_fit_scalars_per_param``, for ``aic``/``bic``),
its log-prior (``_log_prior``, for the objective) and sampling from a state.

MAP-EM with Dirichlet priors on π and each row of A: π ∝ max(α − 1 + E[start counts], 0),
likewise A; an entry that is zero stays zero (left-right and other structured models; the
E-step never puts mass on it either). ``sample_weight`` weights each sequence's expected
counts and log-likelihood. The objective, log p(X) + log prior (up to constants), never
decreases; it is recorded per iteration in ``history_`` (``log_likelihood`` and
``log_posterior``) and the log-likelihood in ``monitor_`` (hmmlearn's convergence rule:
stop when it rises by less than ``tol``).
"""

from __future__ import annotations

import sys
import time

import numpy as np

from varorder.base import ParamsMixin, check_bool, check_choice, check_int, check_is_fitted, check_real
from varorder import chain
from varorder.engine import chain as _chain
from varorder.errors import FormatError, ParameterError
from varorder.models import persist
from varorder.models.sequences import ChunkPlan

__all__ = ["ConvergenceMonitor", "BaseHMM", "split_lengths", "as_observations", "store_chain_params"]

DECODER_ALGORITHMS = ("viterbi", "map")


class ConvergenceMonitor:
    """hmmlearn's monitor: ``history`` (log-likelihood per iteration), ``iter``, ``converged``
    (``n_iter`` reached, or the last gain below ``tol``)."""

    def __init__(self, tol: float, n_iter: int, verbose: bool):
        self.tol = tol
        self.n_iter = n_iter
        self.verbose = verbose
        self.history: list[float] = []
        self.iter = 0

    def _reset(self) -> None:
        self.iter = 0
        self.history = []

    def report(self, log_prob: float) -> None:
        if self.verbose:
            delta = log_prob - self.history[-1] if self.history else float("nan")
            print(f"{self.iter + 1:>10d} {log_prob:>16.8f} {delta:>+16.8f}", file=sys.stderr)
        self.history.append(float(log_prob))
        self.iter += 1

    @property
    def converged(self) -> bool:
        return self.iter == self.n_iter or (len(self.history) >= 2 and self.history[-1] - self.history[-2] < self.tol)


def as_observations(X, *, allow_nan: bool = False, integer: bool = False, name: str = "X") -> np.ndarray:
    """``X`` as a 2-D float64 array (N, D) (a 1-D array is one feature), or a ParameterError
    naming the first bad entry."""
    arr = np.asarray(X)
    if arr.dtype == object or not (np.issubdtype(arr.dtype, np.number) or arr.dtype == np.bool_):
        raise ParameterError(f"{name} must be a numeric array, got dtype {arr.dtype}", name=name, value=arr.dtype)
    if arr.ndim == 1:
        arr = arr[:, None]
    if arr.ndim != 2:
        raise ParameterError(f"{name} must have shape (n_samples, n_features), got shape {arr.shape}", name=name,
                             value=arr.shape)
    if arr.shape[0] == 0 or arr.shape[1] == 0:
        raise ParameterError(f"{name} is empty (shape {arr.shape})", name=name, value=arr.shape)
    arr = np.ascontiguousarray(arr, dtype=np.float64)
    bad = np.isinf(arr) if allow_nan else ~np.isfinite(arr)
    if bad.any():
        i, j = (int(v) for v in np.argwhere(bad)[0])
        what = "NaN" if np.isnan(arr[i, j]) else "an infinite value"
        raise ParameterError(f"{name}[{i}, {j}] is {what}" + ("" if allow_nan else
                             " (only the Gaussian and Gaussian-mixture models marginalise NaN entries)"), name=name,
                             value=float(arr[i, j]))
    if integer:
        bad = (arr < 0) | (arr != np.round(arr))
        if bad.any():
            i, j = (int(v) for v in np.argwhere(bad)[0])
            raise ParameterError(f"{name}[{i}, {j}] = {float(arr[i, j])!r} is not a non-negative integer", name=name,
                                 value=float(arr[i, j]))
    return arr


def split_lengths(lengths, n_samples: int, name: str = "lengths") -> np.ndarray:
    """``lengths`` (None: one sequence) as int64, every entry ≥ 1, summing to ``n_samples``."""
    if lengths is None:
        return np.array([n_samples], dtype=np.int64)
    arr = np.asarray(lengths)
    if arr.ndim != 1 or arr.size == 0:
        raise ParameterError(f"{name} must be a non-empty 1-D array of ints, got shape {arr.shape}", name=name,
                             value=arr.shape)
    if arr.dtype == np.bool_ or not np.issubdtype(arr.dtype, np.integer):
        if np.issubdtype(arr.dtype, np.floating) and np.all(arr == np.round(arr)):
            arr = arr.astype(np.int64)
        else:
            raise ParameterError(f"{name} must hold integers, got dtype {arr.dtype}", name=name, value=arr.dtype)
    arr = arr.astype(np.int64)
    bad = np.flatnonzero(arr < 1)
    if bad.size:
        i = int(bad[0])
        raise ParameterError(f"{name}[{i}] = {int(arr[i])}: every sequence needs at least one sample", name=name,
                             value=int(arr[i]))
    if int(arr.sum()) != n_samples:
        raise ParameterError(f"{name} sum to {int(arr.sum())} but X has {n_samples} samples", name=name,
                             value=int(arr.sum()))
    return arr


def store_chain_params(self, n_components, startprob_prior, transmat_prior, algorithm, random_state, n_iter, tol, verbose,
            params, init_params, implementation):
    """What every HMM's ``__init__`` stores for the chain and the EM loop (only stores)."""
    self.n_components = n_components
    self.startprob_prior = startprob_prior
    self.transmat_prior = transmat_prior
    self.algorithm = algorithm
    self.random_state = random_state
    self.n_iter = n_iter
    self.tol = tol
    self.verbose = verbose
    self.params = params
    self.init_params = init_params
    self.implementation = implementation


def _log(p: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore"):
        return np.log(p)


def _normalise_rows(counts: np.ndarray, previous: np.ndarray) -> np.ndarray:
    """Rows of ``counts`` scaled to sum to 1; a row without mass keeps ``previous``'s row."""
    totals = counts.sum(axis=-1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        out = counts / totals
    return np.where(totals > 0, out, previous)


class BaseHMM(ParamsMixin):
    """Shared machinery of :class:`~varorder.models.gaussian_hmm.GaussianHMM` and the other
    emission models (hmmlearn's ``BaseHMM`` interface; see the module docstring)."""

    _requires_y = False
    _allow_nan = False  # the Gaussian and Gaussian-mixture models marginalise NaN entries
    _integer_X = False
    _emission_letters = ""

    # -- emission model: overridden ------------------------------------------------

    def _init_emissions(self, X, lengths, rng):
        raise NotImplementedError

    def _check_emissions(self):
        raise NotImplementedError

    def _compute_log_likelihood(self, X) -> np.ndarray:
        """(N, K) log p(xₜ | zₜ = k)."""
        raise NotImplementedError

    def _initialize_emission_statistics(self) -> dict:
        return {}

    def _accumulate_emission_statistics(self, stats, X, posteriors) -> None:
        """Add the (weighted) posteriors' sufficient statistics of X to ``stats``."""

    def _emission_features(self, X):
        """(N, P) per-sample features whose posterior-weighted sums are the emission model's statistics
        (:meth:`_accumulate_feature_statistics`), summed by the engine in its E-step pass; None: the model
        accumulates from the posteriors (:meth:`_accumulate_emission_statistics`)."""
        return None

    def _accumulate_feature_statistics(self, stats, occupancy, feature_sums) -> None:
        """Add the E-step's Σₜ γₜ (K,) and Σₜ γₜ ⊗ features (K, P) (weighted) to ``stats``."""
        raise NotImplementedError

    def _do_emission_mstep(self, stats) -> None:
        raise NotImplementedError

    def _emission_log_prior(self) -> float:
        return 0.0

    def _emission_scalars(self) -> dict:
        return {}

    def _sample_emissions(self, states: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        raise NotImplementedError

    # -- parameters ------------------------------------------------------------------

    def _check_common(self):
        check_int(self, "n_components", 1)
        check_int(self, "n_iter", 1)
        check_real(self, "tol", 0)
        check_bool(self, "verbose")
        check_choice(self, "algorithm", DECODER_ALGORITHMS)
        check_choice(self, "implementation", ("log", "scaling"))
        for name in ("params", "init_params"):
            value = getattr(self, name)
            if not isinstance(value, str):
                raise ParameterError(f"{type(self).__name__}: {name} must be a string of letters, got {value!r}",
                                     name=name, value=value)
        self._check_prior("startprob_prior", (self.n_components,))
        self._check_prior("transmat_prior", (self.n_components, self.n_components))

    def _check_prior(self, name, shape=None, minimum: float | None = 0.0):
        """``self.<name>`` as a float array (broadcast to ``shape``), finite and ≥ ``minimum``."""
        raw = getattr(self, name)
        expected = f"a finite number{'' if minimum is None else f' >= {minimum}'} or an array of them"
        try:
            value = np.asarray(raw, dtype=np.float64)
            if shape is not None:
                value = np.broadcast_to(value, shape)
        except (TypeError, ValueError):
            value = None
        if value is None or not np.isfinite(value).all() or (minimum is not None and (value < minimum).any()):
            raise ParameterError(f"{type(self).__name__}: parameter {name}={raw!r} is invalid: expected {expected}"
                                 + ("" if shape is None else f" of shape {shape}"), name=name, value=raw)
        return value

    def _check(self):
        """Validate the learned (or user-set) parameters before any inference."""
        K = self.n_components
        start = np.asarray(self.startprob_, dtype=np.float64)
        trans = np.asarray(self.transmat_, dtype=np.float64)
        if start.shape != (K,):
            raise ParameterError(f"startprob_ must have shape ({K},), got {start.shape}", name="startprob_",
                                 value=start.shape)
        if trans.shape != (K, K):
            raise ParameterError(f"transmat_ must have shape ({K}, {K}), got {trans.shape}", name="transmat_",
                                 value=trans.shape)
        for name, value in (("startprob_", start), ("transmat_", trans)):
            bad = ~np.isfinite(value) | (value < 0)
            if bad.any():
                idx = tuple(int(i) for i in np.argwhere(bad)[0])
                raise ParameterError(f"{name}{list(idx)} = {float(value[idx])!r} is not a probability", name=name,
                                     value=float(value[idx]))
            sums = value.sum(axis=-1)
            off = np.flatnonzero(np.abs(np.atleast_1d(sums) - 1.0) > 1e-8)
            if off.size:
                where = "" if value.ndim == 1 else f" row {int(off[0])}"
                raise ParameterError(f"{name}{where} sums to {float(np.atleast_1d(sums)[off[0]])!r}, not 1", name=name,
                                     value=float(np.atleast_1d(sums)[off[0]]))
        self.startprob_, self.transmat_ = start, trans
        self._check_emissions()

    def _needs_init(self, code: str, name: str) -> bool:
        return code in self.init_params or getattr(self, name, None) is None

    def _rng(self, random_state=None) -> np.random.Generator:
        seed = self.random_state if random_state is None else random_state
        if isinstance(seed, np.random.Generator):
            return seed
        if isinstance(seed, np.random.RandomState):
            return np.random.default_rng(seed.randint(0, 2**31 - 1))
        return np.random.default_rng(seed)

    def _observations(self, X, lengths, name="X"):
        X = as_observations(X, allow_nan=self._allow_nan, integer=self._integer_X, name=name)
        return X, split_lengths(lengths, X.shape[0])

    def _init(self, X, lengths):
        K = self.n_components
        rng = self._rng()
        if self._needs_init("s", "startprob_"):
            self.startprob_ = rng.dirichlet(np.full(K, 1.0 / K))
        if self._needs_init("t", "transmat_"):
            self.transmat_ = rng.dirichlet(np.full(K, 1.0 / K), size=K)
        self._init_emissions(X, lengths, rng)

    # -- the E-step: engine marginals --------------------------------------------------

    def _chain_arrays(self):
        return _log(self.transmat_), _log(self.startprob_)

    def _posteriors(self, frames: np.ndarray, lengths: np.ndarray):
        """(posteriors (N, K), log p per sequence (S,)) from the engine's chain statistics over emissions
        ``frames``."""
        log_T, log_pi = self._chain_arrays()
        result = chain.statistics(frames, lengths, log_T, log_pi, node=True)
        return result.node, result.log_z

    def _do_estep(self, X, lengths, weights, workspace=None):
        """(statistics, Σ weighted log p): the engine's chain statistics (one call: log Z, expected start and
        transition counts, and either the emission model's feature sums or the posteriors it accumulates)."""
        frames = self._compute_log_likelihood(X)
        features = self._emission_features(X)
        log_T, log_pi = self._chain_arrays()
        result = chain.statistics(frames, lengths, log_T, log_pi, weights=weights, features=features,
                                   node=features is None, workspace=workspace)
        logp = result.log_z
        if not np.isfinite(logp).all():
            bad = int(np.flatnonzero(~np.isfinite(logp))[0])
            raise ParameterError(f"sequence {bad} of X has probability zero under the current parameters "
                                 f"(a forbidden start/transition or an emission of zero density)", name="X",
                                 value=bad)
        stats = {"start": result.start, "trans": result.transitions}
        stats.update(self._initialize_emission_statistics())
        if features is not None:
            self._accumulate_feature_statistics(stats, result.occupancy, result.features)
        else:
            post = result.node
            if (weights != 1.0).any():
                post *= np.repeat(weights, lengths)[:, None]
            self._accumulate_emission_statistics(stats, X, post)
        return stats, float(weights @ logp)

    def _do_mstep(self, stats):
        if "s" in self.params:
            prior = self._check_prior("startprob_prior", (self.n_components,))
            new = np.maximum(prior - 1.0 + stats["start"], 0.0)
            new = np.where(self.startprob_ == 0, 0.0, new)
            self.startprob_ = _normalise_rows(new, self.startprob_)
        if "t" in self.params:
            prior = self._check_prior("transmat_prior", (self.n_components, self.n_components))
            new = np.maximum(prior - 1.0 + stats["trans"], 0.0)
            new = np.where(self.transmat_ == 0, 0.0, new)
            self.transmat_ = _normalise_rows(new, self.transmat_)
        self._do_emission_mstep(stats)

    def _log_prior(self) -> float:
        """log p(θ) up to a constant: the Dirichlet terms Σ (α − 1) log p over the entries the
        priors act on, and the emission model's own."""
        total = 0.0
        K = self.n_components
        for letter, name, value in (("s", "startprob_prior", self.startprob_), ("t", "transmat_prior", self.transmat_)):
            if letter not in self.params:
                continue
            alpha = self._check_prior(name, (K,) if letter == "s" else (K, K))
            used = (value > 0) & (alpha != 1.0)
            total += float(((alpha - 1.0)[used] * np.log(value[used])).sum())
        return total + self._emission_log_prior()

    # -- fitting ------------------------------------------------------------------------

    def fit(self, X, lengths=None, sample_weight=None):
        """EM from the parameters named by ``init_params`` (others kept); ``sample_weight``
        (n_sequences,) ≥ 0 weights each sequence. Returns self."""
        self._check_common()
        X, lengths = self._observations(X, lengths)
        weights = self._sample_weights(sample_weight, lengths.size)
        began = time.perf_counter()
        self._init(X, lengths)
        self._check()
        self.monitor_ = ConvergenceMonitor(self.tol, self.n_iter, self.verbose)
        self.history_ = []
        workspace = chain.Workspace()  # the E-step kernel's scratch, kept across iterations
        for iteration in range(1, self.n_iter + 1):
            stats, log_likelihood = self._do_estep(X, lengths, weights, workspace)
            log_posterior = log_likelihood + self._log_prior()
            self.history_.append({"iteration": iteration, "log_likelihood": log_likelihood,
                                  "log_posterior": log_posterior})
            self._do_mstep(stats)
            self.monitor_.report(log_likelihood)
            if self.monitor_.converged:
                break
        self.n_iter_ = len(self.history_)
        self.training_time_ = time.perf_counter() - began
        return self

    @staticmethod
    def _sample_weights(sample_weight, n_sequences: int) -> np.ndarray:
        if sample_weight is None:
            return np.ones(n_sequences)
        w = np.asarray(sample_weight, dtype=np.float64)
        if w.shape != (n_sequences,):
            raise ParameterError(f"sample_weight must have one entry per sequence ({n_sequences}), got shape "
                                 f"{w.shape}", name="sample_weight", value=w.shape)
        bad = np.flatnonzero(~np.isfinite(w) | (w < 0))
        if bad.size:
            i = int(bad[0])
            raise ParameterError(f"sample_weight[{i}] = {float(w[i])!r} must be finite and >= 0", name="sample_weight",
                                 value=float(w[i]))
        return w

    # -- inference ------------------------------------------------------------------------

    def _frames(self, X, lengths):
        check_is_fitted(self, "startprob_")
        self._check()
        X, lengths = self._observations(X, lengths)
        return X, lengths, self._compute_log_likelihood(X)

    def score_samples(self, X, lengths=None):
        """(log p(X), posteriors (n_samples, n_components)): the smoothed p(zₜ | x₁..ₙ)."""
        _, lengths, frames = self._frames(X, lengths)
        post, logp = self._posteriors(frames, lengths)[:2]
        return float(logp.sum()), post

    def score(self, X, lengths=None) -> float:
        """log p(X), summed over the sequences."""
        _, lengths, frames = self._frames(X, lengths)
        log_T, log_pi = self._chain_arrays()
        return float(chain.flat_log_partition(frames, lengths, log_T, log_pi).sum())

    def predict_proba(self, X, lengths=None, filtered: bool = False, lag: int | None = None) -> np.ndarray:
        """State posteriors (n_samples, n_components): smoothed p(zₜ | x₁..ₙ); with
        ``filtered=True`` the causal p(zₜ | x₁..ₜ) from a forward-only pass; with ``lag=h``
        the fixed-lag smoother p(zₜ | x₁..ₜ₊ₕ) (the sequence's end where t + h passes it)."""
        if not filtered and lag is None:
            return self.score_samples(X, lengths)[1]
        if lag is not None and (isinstance(lag, bool) or not isinstance(lag, (int, np.integer)) or lag < 0):
            raise ParameterError(f"lag must be a non-negative integer, got {lag!r}", name="lag", value=lag)
        _, lengths, frames = self._frames(X, lengths)
        post = self._filtered(frames, lengths)
        return post if lag is None or lag == 0 else self._fixed_lag(frames, lengths, post, int(lag))

    def _filtered(self, frames, lengths) -> np.ndarray:
        """p(zₜ | x₁..ₜ): the chain's filtered posteriors (its forward values normalised per position)."""
        log_T, log_pi = self._chain_arrays()
        return chain.filtered(frames, lengths, log_T, log_pi)

    def _fixed_lag(self, frames, lengths, filtered, lag: int, windows: int = 4096) -> np.ndarray:
        """p(zₜ | x₁..ₜ₊ₕ) for every t: a chain per window t … t + h whose first emission is
        log p(zₜ | x₁..ₜ) (the filtered posterior carries everything before it), its first
        node marginal from the engine; windows in batches."""
        log_T, _ = self._chain_arrays()
        with np.errstate(divide="ignore"):
            log_filtered = np.log(filtered)
        N, K = frames.shape
        ends = np.repeat(np.cumsum(lengths), lengths)  # one past each row's sequence end
        out = np.empty_like(frames)
        steps = np.arange(lag + 1)
        for lo in range(0, N, windows):
            rows = np.arange(lo, min(lo + windows, N))
            span = np.minimum(lag + 1, ends[rows] - rows)
            index = np.minimum(rows[:, None] + steps[None, :], N - 1)
            E = frames[index]
            E[:, 0] = log_filtered[rows]
            E[steps[None, :] >= span[:, None]] = 0.0
            ci = _chain.prepare(E, log_T, None, None, span)
            out[rows] = _chain.marginals(ci, edges=False)[0][:, 0]
        return out

    def decode(self, X, lengths=None, algorithm=None):
        """(log-probability, states (n_samples,)): "viterbi" — the best joint path and its
        log p(x, z); "map" — per-sample argmax of the posteriors and the sum of their maxima
        (hmmlearn's value)."""
        algorithm = self.algorithm if algorithm is None else algorithm
        if algorithm not in DECODER_ALGORITHMS:
            raise ParameterError(f"algorithm must be one of {DECODER_ALGORITHMS}, got {algorithm!r}",
                                 name="algorithm", value=algorithm)
        if algorithm == "map":
            _, post = self.score_samples(X, lengths)
            return float(post.max(axis=1).sum()), post.argmax(axis=1)
        _, lengths, frames = self._frames(X, lengths)
        plan = ChunkPlan(lengths)
        log_T, log_pi = self._chain_arrays()
        states = np.empty(frames.shape[0], dtype=np.int64)
        total = 0.0
        for _, chunk_lengths, flat_index, valid in plan.chunks:
            ci = _chain.prepare(frames[flat_index], log_T, log_pi, None, chunk_lengths)
            paths, scores = _chain.viterbi(ci)
            states[flat_index[valid]] = paths[valid]
            total += float(scores.sum())
        return total, states

    def predict(self, X, lengths=None) -> np.ndarray:
        return self.decode(X, lengths)[1]

    def kbest_paths(self, X, lengths=None, k: int = 2):
        """The k most probable state paths of each sequence (exact, from the engine's k-best):
        a list per sequence of (paths (k, n) int64, log p(x, z) (k,)), −1 / −inf padded."""
        return self._per_sequence(X, lengths, lambda ci: _chain.kbest(ci, k))

    def sample_paths(self, X, lengths=None, n: int = 1, random_state=None):
        """``n`` exact posterior samples of each sequence's state path: a list per sequence of
        (n, length) int64 arrays (forward filtering, backward sampling in the engine)."""
        seed = self._rng(random_state).integers(0, 2**63 - 1)
        return self._per_sequence(X, lengths, lambda ci: (_chain.sample(ci, n, seed),))

    def _per_sequence(self, X, lengths, operation):
        _, lengths, frames = self._frames(X, lengths)
        log_T, log_pi = self._chain_arrays()
        offsets = np.concatenate([[0], np.cumsum(lengths)])
        out = []
        for s in range(lengths.size):
            ci = _chain.prepare(frames[offsets[s]:offsets[s + 1]][None], log_T, log_pi, None, lengths[s:s + 1])
            result = operation(ci)
            out.append(tuple(r[0] for r in result) if len(result) > 1 else result[0][0])
        return out

    def sample(self, n_samples: int = 1, random_state=None, currstate=None):
        """(X (n_samples, n_features), states (n_samples,)) drawn from the model."""
        rng, state = self._sampling_start(n_samples, random_state, currstate)
        K = self.n_components
        states = np.empty(n_samples, dtype=np.int64)
        uniforms = rng.random(n_samples)
        cdf_trans = np.cumsum(self.transmat_, axis=1)
        states[0] = state
        for t in range(1, n_samples):
            row = cdf_trans[state]
            state = min(int(np.searchsorted(row, uniforms[t] * row[-1], side="right")), K - 1)
            states[t] = state
        return self._sample_emissions(states, rng), states

    def _sampling_start(self, n_samples, random_state, currstate):
        """(generator, first state) for :meth:`sample`, the arguments checked."""
        check_is_fitted(self, "startprob_")
        self._check()
        if isinstance(n_samples, bool) or not isinstance(n_samples, (int, np.integer)) or n_samples < 1:
            raise ParameterError(f"n_samples must be a positive integer, got {n_samples!r}", name="n_samples",
                                 value=n_samples)
        rng = self._rng(random_state)
        K = self.n_components
        cdf_start = np.cumsum(self.startprob_)
        state = int(np.searchsorted(cdf_start, rng.random() * cdf_start[-1], side="right")) if currstate is None \
            else int(currstate)
        if not 0 <= state < K:
            raise ParameterError(f"currstate must be in 0..{K - 1}, got {currstate!r}", name="currstate",
                                 value=currstate)
        return rng, min(state, K - 1)

    # -- model files (npz + JSON, validated in full on load) ---------------------------

    _LEARNED: tuple = ("startprob_", "transmat_")

    def _learned_names(self) -> tuple:
        return tuple(n for n in self._LEARNED if getattr(self, n, None) is not None)

    def save(self, path) -> None:
        """Write the model (constructor parameters as JSON, learned arrays) atomically."""
        check_is_fitted(self, "startprob_")
        self._check()
        params = {}
        for key, value in self.get_params().items():
            if isinstance(value, np.ndarray):
                value = value.tolist()
            elif isinstance(value, (np.random.Generator, np.random.RandomState)):
                value = None  # a generator's state is not a parameter a file can carry
            params[key] = value
        arrays = {name.strip("_"): np.asarray(getattr(self, name)) for name in self._learned_names()}
        persist.save_model(path, type(self).__name__, params, {"learned": sorted(arrays)}, arrays)

    @classmethod
    @persist.model_loader
    def load(cls, path):
        """Read a model written by :meth:`save`; every field and array is checked (shapes,
        probabilities summing to 1, positive definite covariances): a ValueError naming the file."""
        params, state, _ = persist.load_model(path, cls.__name__, ())
        persist.check_keys(path, "params", params, cls._get_param_names())
        learned = state.get("learned")
        allowed = {n.strip("_") for n in cls._LEARNED}
        if not isinstance(learned, list) or not set(learned) <= allowed or not {"startprob", "transmat"} <= set(learned):
            raise FormatError(f"state field 'learned' must list the model's arrays (from {sorted(allowed)}), got "
                              f"{learned!r:.80}", path=path, expected="a varorder model file written by save()")
        _, _, arrays = persist.load_model(path, cls.__name__, learned)
        persist.check_shapes(path, arrays, {name: arrays[name].shape for name in learned})
        model = cls(**params)
        model._check_common()
        for name in learned:
            attribute = next(n for n in cls._LEARNED if n.strip("_") == name)
            setattr(model, attribute, np.asarray(arrays[name], dtype=np.float64))
        model._check()
        return model

    # -- model selection ----------------------------------------------------------------

    def _get_n_fit_scalars_per_param(self) -> dict:
        K = self.n_components
        return {"s": K - 1, "t": K * (K - 1), **self._emission_scalars()}

    def aic(self, X, lengths=None) -> float:
        n_params = sum(self._get_n_fit_scalars_per_param().values())
        return -2.0 * self.score(X, lengths) + 2.0 * n_params

    def bic(self, X, lengths=None) -> float:
        n_params = sum(self._get_n_fit_scalars_per_param().values())
        n = as_observations(X, allow_nan=self._allow_nan).shape[0]
        return -2.0 * self.score(X, lengths) + n_params * np.log(n)
