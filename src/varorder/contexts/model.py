"""Training and prediction for reified context models (Steinhardt & Liang, ICML 2015, §4–5).

Model: p(y | x) ∝ exp(Σᵢ θ_ngramᵀφ(c_{i−1}, y_i) + w_{y_i}ᵀx_i + b_{y_i} + β·𝕀[c_i = 𝒴_{1:i}])
with ★-extended n-gram indicators φ (eq. 6, :mod:`varorder.contexts.features`),
observation features x_i × y_i (for OCR: pixel × letter, plus a per-letter bias) and
the coverage feature of §4.1 (β = 0 for RCMS, −∞ for plain beam search, or learned).
For each sequence the contexts c are selected by RCMS (or beam search) under the
current θ and the resulting lattice is handed to :mod:`varorder.lattice`.

Learning maximises the *approximate* log-likelihood of §5,

    ℓ(θ) = s_θ(y*) − log Z_θ,    both on the lattice of contexts selected under θ,

with AdaGrad (η = 0.2, δ = 10⁻⁴ as in the paper; :class:`varorder.models.optim.AdaGrad`).
The gradient treats the selected contexts as fixed (selection is piecewise constant in
θ): ∇ℓ = φ(gold path) − E_lattice[φ], the expectation from the engine's arc marginals.

*How the gold output is scored.* Every label sequence has exactly one path through the
selected contexts (c_i = f_i(c_{i−1}, y_i)); s_θ(y*) is the score of that path, i.e.
the gold n-grams are read through the contexts RCMS kept — a gold history that was
merged into a coarser context is scored with the coarser (★) features. Coverage
guarantees this path exists and has finite score.

*Beam search when the gold falls off the beam* — the paper does not say what it does.
With β = −∞ the gold path has score −∞ as soon as its prefix leaves the beam, and ℓ is
−∞. ``off_beam="force"`` (default) keeps the gold prefix as one extra entry of every
beam in training (the B best entries plus the gold one), so ℓ = s(y*) −
log Σ_{y ∈ final beam ∪ {y*}} exp s(y) and the gradient pushes the gold above the
competitors that crowded it out; ``off_beam="skip"`` makes no update for a word whose
gold left the beam; ``off_beam="early"`` is the early update of Collins & Roark (2004):
the likelihood of the gold *prefix* y*_{1:t} against the beam at the first position t
where the gold fell off (the same forced objective on x_{1:t}, since the beams up to t
depend on the prefix only); a gold that stays on the beam is scored as usual. At test time nothing is forced. With a learned β
(``coverage="learned"``) nothing needs forcing: the gold path can pass through 𝒴_{1:i}.

*Updates.* By default every example makes its own AdaGrad step (``batch_size=1``, as
the paper's per-example stochastic updates; the paper runs them Hogwild-parallel), with
the sparse n-gram block updated only where its gradient is non-zero
(:meth:`AdaGrad.step_sparse`, identical to the dense step). ``batch_size=k`` sums the
gradients of k examples per step instead (an option). Weights start at zero (the paper
does not give its initialisation).

*Context length (Fig. 6)* is, per position i, the average number of symbols the
contexts of 𝒞_i fix, weighted by their mass under the partial model qⁱ (their forward
scores, normalised within the position), averaged over positions 1…L−1;
``context_mass="posterior"`` weights by the full lattice's posterior node marginals
instead (an alternative, not the paper's).

*Contexts* fix suffixes of any length (App. A) unless ``max_context`` caps them (an
extension; see :mod:`varorder.contexts.context_set`).
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass

import numpy as np

from varorder import lattice as lt
from varorder._progress import Progress
from varorder.base import (DEPRECATED, ParamsMixin, check_bool, check_choice, check_int, check_is_fitted, check_real,
                           flat_params, nested_params, options_with_deprecated)
from varorder.contexts.context_set import ContextLattice, build_context_lattice
from varorder.contexts.features import NgramFeatureSpace
from varorder.errors import FormatError, ParameterError
from varorder.models.optim import AdaGrad
from varorder.models.persist import model_loader, check_shapes, load_model, save_model
from varorder.engine.validate import as_rng

__all__ = ["ContextModelOptions", "ReifiedContextModel", "SequenceGradient"]

FORMAT_VERSION = 2  # 2: max_context / off_beam / context_mass stored (version 1 files were capped at n − 1)
_KIND = "ReifiedContextModel"


@dataclass
class SequenceGradient:
    """Gradient of −ℓ for one sequence, by parameter block, with ℓ and the context-length statistic."""

    log_likelihood: float
    ngram_indices: np.ndarray  # sparse n-gram block: value ngram_values[k] at ngram_indices[k] (repeats add)
    ngram_values: np.ndarray
    ngram_size: int
    observation: np.ndarray
    coverage: float
    context_length: float

    @property
    def ngram(self) -> np.ndarray:
        """The n-gram block as a dense vector."""
        return np.bincount(self.ngram_indices, weights=self.ngram_values, minlength=self.ngram_size)


@dataclass(frozen=True)
class ContextModelOptions:
    """The rarely changed knobs of :class:`ReifiedContextModel` (its ``options`` parameter): the
    optimiser's, the extensions' and the statistics'; checked when the estimator fits.

    Attributes
    ----------
    step_size, delta : AdaGrad η and δ.
    track_every : record the cumulative context-length average every this many sequences.
    max_context : cap on the symbols an RCMS context fixes (an extension, ≥ n − 1);
        None (default): contexts of any length, as in App. A.
    off_beam : beam training when the gold leaves the beam: "force" it back on, "skip" the
        word, or "early" (update on the prefix up to where it fell off).
    context_mass : "partial" (qⁱ, the paper's Fig. 6) or "posterior" weights for the
        context-length statistic.
    """

    step_size: float = 0.2
    delta: float = 1e-4
    track_every: int = 50
    max_context: int | None = None
    off_beam: str = "force"
    context_mass: str = "partial"



class ReifiedContextModel(ParamsMixin):
    """A reified context model over label sequences with per-position observation vectors.

    Parameters
    ----------
    num_labels : V.
    order : n of the n-gram features (4 in the paper's OCR experiment).
    num_contexts : B, contexts per position besides 𝒴_{1:i} (the beam size for beam search).
    mode : "rcms" or "beam".
    coverage : "fixed" (β = 0 for RCMS, −∞ for beam) or "learned" (β trained, §4.1).
    backoff : also fire shorter ★-suffix n-gram indicators (an extension; off in the paper).
    epochs : passes over the training data.
    batch_size : sequences whose gradients are summed per AdaGrad step (1: per example).
    max_updates : stop after this many sequences in total (None: all epochs).
    options : :class:`ContextModelOptions` (AdaGrad's η and δ, the trace's spacing, the context
        cap, beam training off the beam, the context-length weights); None: its defaults. Its
        fields as keywords of this constructor still work for one release (a FutureWarning).
    seed : shuffling seed.
    progress : report training progress (a bar on a terminal, a summary line otherwise).

    Parameters are keyword-only (``num_labels`` is required) and checked by :meth:`fit` (a
    ParameterError names the parameter and the value passed); prediction before :meth:`fit`
    raises NotFittedError.
    """

    def __init__(self, *, num_labels: int, order: int = 4, num_contexts: int = 10, mode: str = "rcms",
                 coverage: str = "fixed", backoff: bool = False, epochs: int = 5, batch_size: int = 1,
                 max_updates: int | None = None, options: ContextModelOptions | None = None, seed: int = 0,
                 progress: bool = False, step_size=DEPRECATED, delta=DEPRECATED, track_every=DEPRECATED,
                 max_context=DEPRECATED, off_beam=DEPRECATED, context_mass=DEPRECATED):
        self.num_labels = num_labels
        self.order = order
        self.num_contexts = num_contexts
        self.mode = mode
        self.coverage = coverage
        self.backoff = backoff
        self.epochs = epochs
        self.batch_size = batch_size
        self.max_updates = max_updates
        self.options = options
        self.seed = seed
        self.progress = progress
        # the keywords that moved into ``options`` (kept for one release)
        self.step_size = step_size
        self.delta = delta
        self.track_every = track_every
        self.max_context = max_context
        self.off_beam = off_beam
        self.context_mass = context_mass

    # ------------------------------------------------------------------ set-up
    def _options(self, warn: bool = False) -> ContextModelOptions:
        """``options`` with the deprecated keywords passed put in (a FutureWarning when ``warn``)."""
        return options_with_deprecated(self, "options", ContextModelOptions, stacklevel=4, warn=warn)

    def _check_params(self, warn: bool = False) -> ContextModelOptions:
        """Check the parameters; returns the options in force."""
        options = self._options(warn)
        check_int(self, "num_labels", 1)
        check_int(self, "order", 2, 64)  # (V + 2)^(n − 1)·V weights: past 64 no table exists; a forged 2^63 hung
        check_choice(self, "mode", ("rcms", "beam"))
        check_choice(self, "coverage", ("fixed", "learned"))
        check_choice(options, "off_beam", ("force", "skip", "early"))
        check_choice(options, "context_mass", ("partial", "posterior"))
        max_context = options.max_context
        if max_context is not None and (self.mode == "beam" or isinstance(max_context, bool)
                                        or not isinstance(max_context, (int, np.integer))
                                        or max_context < self.order - 1):
            raise ParameterError(f"ReifiedContextModel: parameter max_context={max_context!r} is invalid: expected "
                                 f"None or an int >= order - 1 = {self.order - 1} (RCMS only)", name='max_context', value=max_context)
        for name in ("epochs", "batch_size", "num_contexts"):
            # compiled code takes these as int64: a float like 1e308 would overflow there
            check_int(self, name, 1, 2 ** 31 - 1)
        check_int(options, "track_every", 1, 2 ** 31 - 1)
        check_int(self, "max_updates", 1, allow_none=True)
        check_real(options, "step_size", 0, exclusive_minimum=True)
        check_real(options, "delta", 0)
        check_bool(self, "backoff")
        check_bool(self, "progress")
        return options

    def _init_state(self, num_inputs: int):
        self.features_ = NgramFeatureSpace(self.num_labels, self.order, self.backoff)
        self.num_inputs_ = int(num_inputs)
        self.ngram_weights_ = np.zeros(self.features_.size)
        self.observation_weights_ = np.zeros((self.num_labels, self.num_inputs_ + 1))  # last column: bias
        self.coverage_weight_ = (-np.inf if self.mode == "beam" else 0.0) if self.coverage == "fixed" else 0.0

    def _check_sequence(self, x, name="observations"):
        check_is_fitted(self, "num_inputs_")
        x = np.asarray(x, dtype=np.float64)
        if x.ndim != 2 or x.shape[0] < 1 or x.shape[1] != self.num_inputs_:
            raise ParameterError(f"{name} must have shape (L >= 1, {self.num_inputs_}), got {x.shape}", name=name, value=x)
        return x

    def observation_scores(self, x) -> np.ndarray:
        """(L, V) observation log-potentials w_yᵀx_i + b_y."""
        x = self._check_sequence(x)
        return x @ self.observation_weights_[:, :-1].T + self.observation_weights_[:, -1]

    def context_lattice(self, x, force_labels=None) -> ContextLattice:
        """Select contexts for one input under the current weights and return the lattice."""
        return self._lattice(x, force_labels, self._options())

    def _lattice(self, x, force_labels, options: ContextModelOptions) -> ContextLattice:
        return build_context_lattice(self.observation_scores(x), self.ngram_weights_, self.features_,
                                     self.num_contexts, mode=self.mode, coverage_weight=self.coverage_weight_,
                                     max_context=None if self.mode == "beam" else options.max_context,
                                     force_labels=force_labels)

    def log_probability(self, x, y) -> float:
        """log p(y | x) under the contexts selected for x (−∞ where y has no path mass, e.g. off the beam)."""
        y = self._check_labels(x, y)
        cl = self.context_lattice(x)
        return float(cl.lattice.arc_weight[cl.path_arcs(y)].sum() - lt.log_partition(cl.lattice))

    def _check_labels(self, x, y):
        y = np.asarray(y, dtype=np.int64)
        if y.shape != (np.shape(x)[0],) or (y < 0).any() or (y >= self.num_labels).any():
            raise ParameterError(f"labels must be {np.shape(x)[0]} ints in [0, {self.num_labels})", name='y', value=y)
        return y

    # ------------------------------------------------------------ gradient
    def sequence_gradient(self, x, y) -> SequenceGradient:
        """ℓ and ∇(−ℓ) = E[φ] − φ(gold) for one sequence under the current weights."""
        x = self._check_sequence(x)
        y = self._check_labels(x, y)
        plain_beam = self.mode == "beam" and self.coverage_weight_ == -np.inf
        options = self._options()  # once per sequence: the knobs of its lattice and gradient
        if plain_beam and options.off_beam == "early":
            cl = self._lattice(x, None, options)
            off = np.flatnonzero(cl.lattice.arc_weight[cl.path_arcs(y)] == -np.inf)
            if off.size:  # the gold prefix left the beam at position off[0] + 1: update on that prefix
                t = int(off[0]) + 1
                return self._gradient_on(x[:t], y[:t], y[:t], options)
        force = y if (plain_beam and options.off_beam == "force") else None
        return self._gradient_on(x, y, force, options)

    def _gradient_on(self, x, y, force, options: ContextModelOptions) -> SequenceGradient:
        """ℓ and ∇(−ℓ) on the lattice selected for x (keeping the prefixes of ``force`` on the beam)."""
        cl = self._lattice(x, force, options)
        lat = cl.lattice
        gold = cl.path_arcs(y)
        gold_score = float(lat.arc_weight[gold].sum())
        if gold_score == -np.inf:  # off_beam="skip": the gold left the beam, no update
            L, V = x.shape[0], self.num_labels
            return SequenceGradient(-np.inf, np.zeros(0, np.int64), np.zeros(0), self.features_.size,
                                    np.zeros((V, self.num_inputs_ + 1)), 0.0, self._context_length(cl, None))
        log_z, node, arc = lt.log_partition_and_marginals(lat)
        src_len = cl.node_length[lat.arc_source]
        weights = arc.copy()
        np.subtract.at(weights, gold, 1.0)
        idx = self.features_.active_indices(cl.arc_pattern, src_len)
        fired = idx >= 0
        ngram_idx = idx[fired]
        ngram_val = np.broadcast_to(weights[:, None], idx.shape)[fired]
        L, V = x.shape[0], self.num_labels
        label_marg = np.bincount((cl.arc_position - 1) * V + lat.arc_label, weights=weights,
                                 minlength=L * V).reshape(L, V)
        x1 = np.concatenate([x, np.ones((L, 1))], axis=1)
        grad_obs = label_marg.T @ x1
        grad_cov = float(weights[cl.arc_to_root].sum()) if self.coverage == "learned" else 0.0
        return SequenceGradient(gold_score - log_z, ngram_idx, ngram_val, self.features_.size, grad_obs, grad_cov,
                                self._context_length(cl, node if options.context_mass == "posterior" else None))

    @staticmethod
    def _context_length(cl: ContextLattice, node_marginals: np.ndarray | None = None) -> float:
        """Mass-weighted number of determined (non-★) symbols of c_1…c_{L−1}, averaged over positions.

        Weights: the partial-model mass qⁱ of each context of 𝒞_i (its forward score,
        normalised within position i; paper §4 and Fig. 6), or ``node_marginals``.
        """
        pos = cl.lattice.node_position
        if cl.length < 2:
            return float("nan")
        lengths = cl.context_lengths()
        if node_marginals is not None:
            inner = (pos >= 1) & (pos < cl.length)
            return float((node_marginals[inner] * lengths[inner]).sum() / (cl.length - 1))
        bounds = np.searchsorted(pos, np.arange(1, cl.length + 1))  # nodes are grouped by position
        total = 0.0
        for i in range(cl.length - 1):
            fwd = cl.node_forward[bounds[i]:bounds[i + 1]]
            top = fwd.max()
            if top == -np.inf:
                continue
            mass = np.exp(fwd - top)
            total += float(mass @ lengths[bounds[i]:bounds[i + 1]]) / mass.sum()
        return total / (cl.length - 1)

    # ------------------------------------------------------------ training
    def fit(self, observations, labels, callback=None):
        """Train on sequences ``observations`` [(L, D) arrays] with gold ``labels`` [(L,) ints].

        ``callback(model, epoch)`` runs after each epoch; a dict it returns is merged into
        that epoch's ``history_`` row (e.g. held-out accuracy). Returns self.
        """
        options = self._check_params(warn=True)
        if len(observations) != len(labels) or not observations:
            raise ParameterError("observations and labels must be non-empty lists of equal length", name='observations', value=observations)
        self._init_state(np.asarray(observations[0]).shape[1])
        obs = [self._check_sequence(x, f"observations[{k}]") for k, x in enumerate(observations)]
        gold = [np.asarray(y, dtype=np.int64) for y in labels]
        params = [self.ngram_weights_, self.observation_weights_]
        optimisers = [AdaGrad(options.step_size, options.delta), AdaGrad(options.step_size, options.delta)]
        if self.coverage == "learned":
            self._coverage_param = np.zeros(1)
            params.append(self._coverage_param)
            optimisers.append(AdaGrad(options.step_size, options.delta))
        rng = as_rng(self.seed)
        self.history_ = []
        self.context_length_trace_ = []  # (updates seen, cumulative average context length)
        ctx_sum, ctx_n, seen = 0.0, 0, 0
        budget = self.max_updates if self.max_updates is not None else self.epochs * len(obs)
        bar = Progress(total=budget, enabled=self.progress, desc=f"train {self.mode}({self.num_contexts})",
                       leave=False)
        for epoch in range(self.epochs):
            if seen >= budget:
                break
            start = time.perf_counter()
            order = rng.permutation(len(obs))
            total_ll, count, skipped = 0.0, 0, 0
            for first in range(0, len(order), self.batch_size):
                batch = order[first:first + self.batch_size][:budget - seen]
                if batch.size == 0:
                    break
                grads = [None] + [np.zeros_like(p) for p in params[1:]]
                ngram_idx, ngram_val = [], []
                for k in batch:
                    g = self.sequence_gradient(obs[k], gold[k])
                    ngram_idx.append(g.ngram_indices)
                    ngram_val.append(g.ngram_values)
                    grads[1] += g.observation
                    if self.coverage == "learned":
                        grads[2][0] += g.coverage
                    if np.isfinite(g.log_likelihood):
                        total_ll += g.log_likelihood
                        count += 1
                    else:
                        skipped += 1
                    seen += 1
                    if np.isfinite(g.context_length):
                        ctx_sum += g.context_length
                        ctx_n += 1
                    if seen % options.track_every == 0 and ctx_n:
                        self.context_length_trace_.append((seen, ctx_sum / ctx_n))
                optimisers[0].step_sparse(params[0], np.concatenate(ngram_idx), np.concatenate(ngram_val))
                for p, gr, opt in zip(params[1:], grads[1:], optimisers[1:]):
                    opt.step(p, gr)
                if self.coverage == "learned":
                    self.coverage_weight_ = float(self._coverage_param[0])
                bar.update(batch.size)
            row = {"epoch": epoch + 1, "updates": seen, "train_log_likelihood": total_ll / max(count, 1),
                   "skipped_off_beam": skipped,
                   "context_length": ctx_sum / ctx_n if ctx_n else float("nan"),
                   "seconds": time.perf_counter() - start}
            if callback is not None:
                row.update(callback(self, epoch + 1) or {})
            self.history_.append(row)
        bar.close()
        return self

    # ------------------------------------------------------------ prediction
    def predict_with_confidence(self, observations):
        """(predictions [(L,) ints], confidences (N,)): Viterbi output and its model probability."""
        check_is_fitted(self, "num_inputs_")
        preds, conf = [], np.empty(len(observations))
        for k, x in enumerate(observations):
            cl = self.context_lattice(x)
            labels, score = lt.viterbi(cl.lattice)
            preds.append(labels)
            conf[k] = np.exp(score - lt.log_partition(cl.lattice))
        return preds, conf

    def predict(self, observations):
        return self.predict_with_confidence(observations)[0]

    # ------------------------------------------------------------ persistence
    def save(self, path) -> None:
        """Write the fitted model as one .npz (weights + JSON metadata with a format version), atomically."""
        check_is_fitted(self, "num_inputs_")
        state = {"num_inputs": self.num_inputs_, "format_version": FORMAT_VERSION,
                 "coverage_weight": None if self.coverage_weight_ == -np.inf else self.coverage_weight_}
        save_model(path, _KIND, flat_params(self, "options", self._options()), state,
                   {"ngram": self.ngram_weights_, "observation": self.observation_weights_})

    @classmethod
    @model_loader
    def load(cls, path) -> "ReifiedContextModel":
        params, state, arrays = load_model(path, _KIND, ("ngram", "observation"))
        version = state.get("format_version")
        if version == 1:  # written before App. A contexts became the default: capped at n − 1
            params = params | {"max_context": params["order"] - 1 if params["mode"] == "rcms" else None}
        elif version != FORMAT_VERSION:
            raise FormatError(f"{os.fspath(path)}: unsupported {_KIND} version {version!r}", path=os.fspath(path))
        model = cls(**nested_params(params, "options", ContextModelOptions))
        model._check_params()  # before the tables are sized from the parameters
        if isinstance(state["num_inputs"], bool) or not isinstance(state["num_inputs"], int) \
                or not 1 <= state["num_inputs"] < 2 ** 31:
            raise FormatError(f"{os.fspath(path)}: field 'num_inputs' must be an integer in [1, 2^31), "
                              f"got {state['num_inputs']!r:.40}", path=os.fspath(path))
        model._init_state(state["num_inputs"])
        check_shapes(path, arrays, {"ngram": model.ngram_weights_.shape,
                                    "observation": model.observation_weights_.shape}, allow_neg_inf=False)
        model.ngram_weights_ = arrays["ngram"].copy()
        model.observation_weights_ = arrays["observation"].copy()
        cw = state["coverage_weight"]
        fixed = -np.inf if model.mode == "beam" else 0.0
        if cw is None:
            cw = -np.inf
        elif isinstance(cw, bool) or not isinstance(cw, (int, float)) or not math.isfinite(cw):
            raise FormatError(f"{os.fspath(path)}: field 'coverage_weight' must be a finite number or null, got {cw!r:.40}", path=os.fspath(path))
        if model.coverage == "fixed" and float(cw) != fixed:
            raise FormatError(f"{os.fspath(path)}: field 'coverage_weight' is {cw!r:.40}, but coverage 'fixed' in mode "
                              f"{model.mode!r} keeps it at {fixed}", path=os.fspath(path))
        if model.coverage == "learned" and cw == -np.inf:
            raise FormatError(f"{os.fspath(path)}: field 'coverage_weight' must be a number when coverage is learned", path=os.fspath(path))
        model.coverage_weight_ = float(cw)
        return model
