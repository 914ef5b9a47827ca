"""Training p(y, z | x) from (x, y) pairs with the alignment z unobserved
(Steinhardt & Liang, "Reified Context Models", ICML 2015, §6 and App. B).

Factorization: p(y, z | x) ∝ exp(θᵀφ(x, y, z)), φ summed over the steps of
:mod:`varorder.transduce.lattice` (output and alignment n-grams, edge unigrams). The
marginal-likelihood gradient (eq. 7) is E_{p(z|x,y)}[φ] − E_{p(y,z|x)}[φ]; each term is
the arc marginals of one lattice from :mod:`varorder.lattice` (the *target* and the
*model* lattice), and the approximate log-likelihood is log Z_target − log Z_model.
How the two lattices are chosen is the training ``method``:

* ``"rcms"``: model lattice = RCMS contexts selected by qⁱ(y, z | x), B per value of
  z_i; target lattice = RCMS contexts selected by qⁱ(z | x, y) (y clamped). Coverage:
  every alignment of the gold y has a path in both, for any B.
* ``"model"`` (select-by-model): one beam lattice selected by qⁱ(y, z | x); the target
  is the same beam's paths that spell y (re-weighting by p(y | z, x)). No path spells
  y → no signal, no update.
* ``"target"`` (select-by-target): target = beam selected by qⁱ(z | x, y) (y clamped);
  model = the ordinary model beam (our reading: the target selection decides only the
  target term; the model term needs a search over y, and the model beam is the one that
  prediction uses).
* ``"hybrid"``: one beam lattice whose every step keeps the union of the B best
  expansions under the model and the B best expansions that spell the gold prefix
  (App. B: the union at every step); the model term is that lattice, the target its
  paths that spell y.
* ``"forced"`` (forced decoding, Gorman et al. 2011 as in §6): a bigram model (order 2)
  with *exact* inference (:func:`impute_alignments`, trained by the same marginal
  likelihood with exact lattices) imputes z once as its Viterbi alignment given (x, y);
  then supervised training: the model beam with the gold (y, ẑ) forced on, the target
  its single gold path.

Updates: one AdaGrad step per example (η = 0.2, δ = 10⁻⁴ as in the paper;
:meth:`varorder.models.optim.AdaGrad.step_sparse`), weights start at zero, B = 20. That online
protocol is the default. An extension (``batch_size``, not in the paper) steps once per mini-batch of
``batch_size`` examples (the same permutation per pass, cut into consecutive batches) on the sum of
their gradients at the batch's starting weights; the batch is cut into ``n_shards`` consecutive
pieces whose gradients are computed on an executor (:mod:`varorder.parallel`: ``n_jobs`` /
``executor``, a Dask client included) and added in piece order, so a given ``n_shards`` trains the
bit-identical model on any executor and worker count (the serial run of the same mini-batch mode
included). Each batch ships θ (2^hash_bits floats) to the workers and gets back one sparse gradient
per piece.
Prediction: the Viterbi (y, z) of the model lattice (RCMS contexts for ``"rcms"``, the
beam otherwise); an input whose beam holds no complete path predicts the empty string.
Output length is bounded by ``ceil(length_ratio · |x|) + length_slack`` letters (and by
|y| in training).

Context length (Fig. 6): per training example, the qⁱ-mass-weighted number of labels
the model lattice's contexts fix at positions 1 … |y| − 1, averaged; the trace is the
cumulative average every ``track_every`` examples.
"""

from __future__ import annotations

import copy
import math
import os
import time
import warnings
from dataclasses import dataclass, fields

import numba as nb
import numpy as np

from varorder.engine.validate import as_rng
from varorder import lattice as lt
from varorder._progress import Progress
from varorder.base import (DEPRECATED, ParamsMixin, check_bool, check_int, check_is_fitted, flat_params, nested_params,
                           options_with_deprecated)
from varorder.errors import FormatError, ParameterError
from varorder.models.optim import AdaGrad
from varorder.models.persist import check_keys, check_labels, check_shapes, load_model, model_loader, save_model
from varorder.parallel import SerialExecutor, as_executor, check_n_jobs
from varorder.transduce.features import AlignmentFeatureSpace
from varorder.transduce.lattice import build_alignment_lattice, restrict_to_output
import varorder._numba_start  # noqa: E402,F401,I001  (Numba's cache saves locked across processes)

__all__ = ["AlignmentTransducer", "TransducerOptions", "impute_alignments", "bigram_viterbi_alignment",
           "truncate_gradient", "METHODS"]

METHODS = ("rcms", "model", "target", "hybrid", "forced")
_KIND = "AlignmentTransducer"
_STATE_KIND = "AlignmentTransducerTrainingState"
_UNK = "<unk>"


# the longest input predicted by default: far past any word (CMUdict's longest is 32 phonemes), and
# about 1 GB of lattice on the measured worst case (200 symbols: 0.8 GB; 500: 4.7 GB; 10,000: 20 GB)
MAX_INPUT_SYMBOLS = 200


def _check_length(x, max_input_symbols) -> None:
    if max_input_symbols is not None and len(x) > max_input_symbols:
        raise ParameterError(f"an input of {len(x)} symbols is longer than max_input_symbols={max_input_symbols} "
                             "(the lattice grows with the square of the input's length; no word is that long)",
                             name="max_input_symbols", value=len(x))


def _max_length(num_inputs: int, ratio: float, slack: int) -> int:
    return int(math.ceil(ratio * num_inputs)) + int(slack)


class _Codec:
    """Phoneme and letter ids; phoneme 0 is the unknown symbol."""

    def __init__(self, phonemes, letters):
        self.phonemes = list(phonemes)
        self.letters = list(letters)
        self.phoneme_id = {p: k for k, p in enumerate(self.phonemes)}
        self.letter_id = {c: k for k, c in enumerate(self.letters)}

    @classmethod
    def from_data(cls, inputs, outputs):
        phonemes = [_UNK] + sorted({p for x in inputs for p in x})
        letters = sorted({c for y in outputs for c in y})
        return cls(phonemes, letters)

    def encode_input(self, x) -> np.ndarray:
        return np.array([self.phoneme_id.get(p, 0) for p in x], dtype=np.int64)

    def encode_output(self, y):
        """Letter ids, or None when y holds a letter the model has never seen."""
        ids = [self.letter_id.get(c) for c in y]
        return None if any(i is None for i in ids) else np.array(ids, dtype=np.int64)

    def decode_output(self, ids) -> str:
        return "".join(self.letters[i] for i in ids)


def _data_fingerprint(inputs, outputs) -> str:
    """SHA-256 of the training pairs in order (a resumed fit must see the same data)."""
    import hashlib

    digest = hashlib.sha256()
    for x, y in zip(inputs, outputs):
        digest.update(("\x1f".join(map(str, x)) + "\x1e" + str(y) + "\x1d").encode("utf-8"))
    return digest.hexdigest()


def _check_pairs(inputs, outputs):
    if len(inputs) != len(outputs) or not inputs:
        raise ParameterError("inputs and outputs must be non-empty lists of equal length", name='inputs', value=inputs)
    for k, (x, y) in enumerate(zip(inputs, outputs)):
        if len(x) < 1 or len(y) < 1:
            raise ParameterError(f"pair {k}: input and output must be non-empty", name='inputs', value=inputs)


def truncate_gradient(values, threshold: float, rng) -> np.ndarray:
    """The paper's randomized truncation of small gradient coordinates (App. C), our reading.

    A coordinate with |g| ≥ ``threshold`` is kept; a smaller one becomes
    sign(g) · threshold with probability |g| / threshold and 0 otherwise, so the
    truncated gradient is unbiased and most small coordinates are exactly zero. Under
    AdaGrad this matters beyond memory: a coordinate's first step is ≈ η · sign(g)
    whatever |g|, so without truncation every feature a model lattice touches with
    marginal 10⁻⁶ moves as far as the gold path's; with it, such a coordinate moves
    with probability ∝ |g|. ``threshold`` 0 returns ``values`` unchanged.
    """
    values = np.asarray(values, dtype=np.float64)
    if threshold <= 0:
        return values
    small = np.abs(values) < threshold
    keep = rng.random(int(small.sum())) * threshold < np.abs(values[small])
    out = values.copy()
    out[small] = np.where(keep, np.sign(values[small]) * threshold, 0.0)
    return out


@nb.njit(cache=True)
def _add_arc_features(arc_features, arc_marginals, sign, dense, seen, touched, n_touched):
    """dense[φ(a)] += sign · p(a) for every arc a and fired slot, in arc-then-slot order;
    the first time an index is touched it is appended to ``touched``. Returns the new count."""
    for a in range(arc_features.shape[0]):
        value = sign * arc_marginals[a]
        for t in range(arc_features.shape[1]):
            idx = arc_features[a, t]
            if idx < 0:
                continue
            dense[idx] += value
            if not seen[idx]:
                seen[idx] = True
                touched[n_touched] = idx
                n_touched += 1
    return n_touched


class _GradientAccumulator:
    """Σ_a sign·p(a)·φ(a) over the arcs of one example's lattices, summed in a dense scratch table.

    The per-example gradient of eq. 7 fires ~10⁵–10⁶ (index, value) pairs with many repeats
    into a 2^hash_bits table. The sums are added in the same order as ``bincount`` over the
    concatenated pairs would (model arcs, then target arcs, each arc's slots in turn), so the
    step is bit for bit the one on the dense gradient; only the touched coordinates are read
    and reset, so an example costs its own pairs, not the table size.
    """

    def __init__(self, size: int):
        self.dense = np.zeros(size)
        self.seen = np.zeros(size, dtype=np.bool_)
        self.touched = np.empty(0, dtype=np.int64)
        self.count = 0

    def add(self, lattice, arc_marginals, sign: float) -> None:
        """Add sign · E[φ] of an :class:`AlignmentLattice` under ``arc_marginals``."""
        feats = lattice.arc_features
        need = self.count + feats.size
        if need > self.touched.size:
            grown = np.empty(max(need, 2 * self.touched.size), dtype=np.int64)
            grown[:self.count] = self.touched[:self.count]
            self.touched = grown
        self.count = _add_arc_features(feats, np.ascontiguousarray(arc_marginals, dtype=np.float64), float(sign),
                                       self.dense, self.seen, self.touched, self.count)

    def step(self, optimiser: AdaGrad, weights, truncation: float = 0.0, rng=None) -> None:
        """AdaGrad step on the summed coordinates (exact zeros dropped), then clear the scratch.

        ``truncation`` > 0 applies :func:`truncate_gradient` to the summed coordinates.
        """
        touched = self.touched[:self.count]
        if truncation > 0:  # the truncation draws follow the coordinates' order: sort them
            touched = np.sort(touched)
        sums = self.take(touched)
        _adagrad_step(optimiser, weights, touched, sums, truncation, rng)

    def take(self, touched) -> np.ndarray:
        """The sums at ``touched`` (the coordinates added to, in any order), and clear the scratch."""
        sums = self.dense[touched]
        self.dense[touched] = 0.0
        self.seen[touched] = False
        self.count = 0
        return sums

    def take_sorted(self) -> tuple[np.ndarray, np.ndarray]:
        """(coordinates added to, ascending; their sums), and clear the scratch: one shard's part
        of a mini-batch gradient."""
        touched = np.sort(self.touched[:self.count])
        return touched, self.take(touched)


def _adagrad_step(optimiser: AdaGrad, weights, touched, sums, truncation: float = 0.0, rng=None) -> None:
    """AdaGrad step on distinct coordinates ``touched`` (ascending when ``truncation`` > 0) with
    gradient ``sums``, exact zeros dropped; ``truncation`` > 0 applies :func:`truncate_gradient`."""
    nonzero = sums != 0
    touched, grad = touched[nonzero], sums[nonzero]
    if truncation <= 0:
        # distinct coordinates, each updated on its own: order does not matter
        optimiser.step_distinct(weights, touched, grad)
        return
    grad = truncate_gradient(grad, truncation, rng)
    keep = grad != 0
    optimiser.step_sparse(weights, touched[keep], grad[keep])


def bigram_viterbi_alignment(x, y, weights, features: AlignmentFeatureSpace, max_length: int = 1):
    """argmax_z p(z | x, y) of an order-2 model, exactly (Viterbi on the exact target lattice), as moves.

    None when y has no alignment with at most M phonemes per letter.
    """
    target = build_alignment_lattice(x, weights, features, 1, max_length=max(max_length, len(y)), clamp=y,
                                     bigram_exact=True)
    arcs, score = lt.viterbi_arcs(target.lattice)
    return None if score == -np.inf else np.array(target.decode_arcs(arcs)[1], dtype=np.int64)


def impute_alignments(x_ids, y_ids, features: AlignmentFeatureSpace, epochs: int = 2, step_size: float = 0.2,
                      delta: float = 1e-4, length_ratio: float = 2.0, length_slack: int = 2, seed=0,
                      progress: bool = False):
    """Forced decoding's first stage: ẑ = argmax_z p(z | x, y) under an exactly-trained bigram model.

    ``features`` must have order 2. The bigram model is trained for ``epochs`` passes of
    per-example AdaGrad on the exact marginal likelihood (exact model and target
    lattices), then each pair's Viterbi alignment (as moves) is read off its exact target
    lattice; None where y has no alignment with ≤ M phonemes per letter.
    """
    if features.order != 2:
        raise ParameterError("the forced-decoding bigram model needs order 2 features", name='features', value=features)
    theta = np.zeros(features.size)
    opt = AdaGrad(step_size, delta)
    gradient = _GradientAccumulator(features.size)
    rng = as_rng(seed)
    bar = Progress(total=epochs * len(x_ids) + len(x_ids), enabled=progress, desc="bigram imputation", leave=False)
    for _ in range(epochs):
        for k in rng.permutation(len(x_ids)):
            x, y = x_ids[k], y_ids[k]
            bar.update(1)
            if y is None:
                continue
            Lmax = max(_max_length(len(x), length_ratio, length_slack), len(y))
            target = build_alignment_lattice(x, theta, features, 1, max_length=Lmax, clamp=y, bigram_exact=True)
            log_zt, _, arc_t = lt.log_partition_and_marginals(target.lattice)
            if log_zt == -np.inf:
                continue
            model = build_alignment_lattice(x, theta, features, 1, max_length=Lmax, bigram_exact=True)
            gradient.add(model, lt.marginals(model.lattice)[1], 1.0)
            gradient.add(target, arc_t, -1.0)
            gradient.step(opt, theta)
    moves = []
    for x, y in zip(x_ids, y_ids):
        bar.update(1)
        moves.append(None if y is None else bigram_viterbi_alignment(
            x, y, theta, features, _max_length(len(x), length_ratio, length_slack)))
    bar.close()
    return moves


class _Tally:
    """A pass's counts (examples seen, updates, examples without signal, log-likelihood) and the
    running context length with its trace, example by example in the permutation's order."""

    def __init__(self, ctx_sum, ctx_n, seen, track_every, trace):
        self.ctx_sum, self.ctx_n, self.seen = ctx_sum, ctx_n, seen
        self.track_every, self.trace = track_every, trace
        self.new_pass()

    def new_pass(self):
        self.total_ll, self.updates, self.no_signal, self.pass_start = 0.0, 0, 0, self.seen

    def skip(self) -> bool:
        """An example that cannot give a signal (no output, or no imputed alignment)."""
        self.seen += 1
        self.no_signal += 1
        return False

    def count(self, ll, ctx) -> bool:
        """An example's ℓ and context length; True when it gives an update (ℓ finite)."""
        self.seen += 1
        if np.isfinite(ctx):
            self.ctx_sum += ctx
            self.ctx_n += 1
        if self.seen % self.track_every == 0 and self.ctx_n:
            self.trace.append((self.seen, self.ctx_sum / self.ctx_n))
        if ll == -np.inf:
            self.no_signal += 1
            return False
        self.total_ll += ll
        self.updates += 1
        return True


def _batch_piece(examples, worker, theta):
    """One piece of a mini-batch, where it runs: per example (ℓ, or None for no signal to look for;
    context length) and the piece's summed gradient of −ℓ as (ascending coordinates, sums)."""
    model = copy.copy(worker)
    model.weights_ = theta
    gradient = _GradientAccumulator(theta.size)
    outcomes = []
    for x, y, moves in examples:
        if y is None or (model.method == "forced" and moves is None):
            outcomes.append((None, float("nan")))
            continue
        ll, ctx, terms = model._example_terms(x, y, moves)
        outcomes.append((ll, ctx))
        for lattice, marginals, sign in terms:
            gradient.add(lattice, marginals, sign)
    index, sums = gradient.take_sorted()
    return outcomes, index, sums


@dataclass(frozen=True)
class TransducerOptions:
    """The rarely changed knobs of :class:`AlignmentTransducer` (its ``options`` parameter): the
    optimiser's, the output length bound's and the trace's; checked when the estimator fits.

    Attributes
    ----------
    step_size, delta : AdaGrad η, δ.
    truncation : threshold of the randomized truncation of small gradient coordinates
        (App. C; :func:`truncate_gradient`); 0 (the default) steps on the exact gradient.
        The paper does not give its threshold. Not applied to forced decoding's bigram
        imputation (a small exact model).
    length_ratio, length_slack : output length bound ceil(ratio·|x|) + slack.
    bigram_epochs : passes of the forced-decoding bigram model.
    track_every : examples between points of the context-length trace.
    """

    step_size: float = 0.2
    delta: float = 1e-4
    truncation: float = 0.0
    length_ratio: float = 2.0
    length_slack: int = 2
    bigram_epochs: int = 2
    track_every: int = 100


_OPTION_KEYS = tuple(field.name for field in fields(TransducerOptions))


class AlignmentTransducer(ParamsMixin):
    """Phonemes → spelling (any symbol sequence → string) through a latent monotone alignment.

    Parameters
    ----------
    method : one of :data:`METHODS` (see the module docstring).
    num_contexts : B — contexts per value of z_i (RCMS) or beam size.
    order : n of the output and alignment n-grams (paper: 5).
    max_advance : the most phonemes one letter aligns to.
    hash_bits : weight table size 2^hash_bits.
    edge_unigrams : add (phoneme, letter) indicators (our extension, off by default: the paper
        has n-gram features only; see :mod:`varorder.transduce.features`).
    backoff : add the lower-order (1 … n − 1) output and alignment patterns (our
        extension, off by default).
    epochs : passes over the training data.
    options : :class:`TransducerOptions` (AdaGrad's η and δ, the gradient truncation, the output
        length bound, the bigram model's passes, the trace's spacing); None: its defaults. Its
        fields as keywords of this constructor still work for one release (a FutureWarning).
    seed : order of the examples (a permutation per pass).
    progress : progress on stderr (bars on a terminal, a summary line per stage otherwise); in the
        mini-batch mode on an executor, a line per pass (log-likelihood, workers busy, time).
    batch_size : None (the default, the paper's protocol): one AdaGrad step per example. An integer:
        the mini-batch mode (extension), one step per ``batch_size`` examples on their summed
        gradient, computed in ``n_shards`` pieces on an executor (see the module docstring). Forced
        decoding's bigram imputation stays online and serial.
    n_shards, n_jobs, executor : the mini-batch mode's pieces per batch (default: 1 serially, 8 with an
        executor; the model depends on it, never on the executor or the worker count) and the
        executor :func:`varorder.parallel.as_executor` builds from ``executor`` (a Dask ``Client``, a
        ``concurrent.futures`` pool, a :class:`varorder.parallel.Executor`) or ``n_jobs`` (local
        joblib workers). They apply to the mini-batch mode only (a ParameterError otherwise).

    Parameters are keyword-only and checked by :meth:`fit` (a ParameterError names the parameter
    and the value passed); prediction before :meth:`fit` raises NotFittedError.
    """

    def __init__(self, *, method: str = "rcms", num_contexts: int = 20, order: int = 5, max_advance: int = 3,
                 hash_bits: int = 22, edge_unigrams: bool = False, backoff: bool = False, epochs: int = 5,
                 options: TransducerOptions | None = None, seed: int = 0, progress: bool = False,
                 batch_size: int | None = None, n_shards: int | None = None, n_jobs: int | None = None, executor=None,
                 step_size=DEPRECATED, delta=DEPRECATED, truncation=DEPRECATED, length_ratio=DEPRECATED,
                 length_slack=DEPRECATED, bigram_epochs=DEPRECATED, track_every=DEPRECATED):
        self.method = method
        self.num_contexts = num_contexts
        self.order = order
        self.max_advance = max_advance
        self.hash_bits = hash_bits
        self.edge_unigrams = edge_unigrams
        self.backoff = backoff
        self.epochs = epochs
        self.options = options
        self.seed = seed
        self.progress = progress
        self.batch_size = batch_size
        self.n_shards = n_shards
        self.n_jobs = n_jobs
        self.executor = executor
        # the keywords that moved into ``options`` (kept for one release)
        self.step_size = step_size
        self.delta = delta
        self.truncation = truncation
        self.length_ratio = length_ratio
        self.length_slack = length_slack
        self.bigram_epochs = bigram_epochs
        self.track_every = track_every

    def _options(self, warn: bool = False) -> TransducerOptions:
        """``options`` with the deprecated keywords passed put in (a FutureWarning when ``warn``)."""
        return options_with_deprecated(self, "options", TransducerOptions, _OPTION_KEYS, stacklevel=4, warn=warn)

    def _check_params(self, warn: bool = False) -> TransducerOptions:
        """Check the parameters; returns the options in force."""
        options = self._options(warn)
        if self.method not in METHODS:
            raise ParameterError(f"method must be one of {METHODS}, got {self.method!r}", name='method', value=self.method)
        for name, low in (("num_contexts", 1), ("order", 2), ("max_advance", 1), ("epochs", 0), ("track_every", 1),
                          ("length_slack", 0), ("bigram_epochs", 0)):
            value = getattr(options if name in _OPTION_KEYS else self, name)
            # below 2^31: compiled code takes these as int64 (2^63 overflowed at predict) and each
            # costs time in proportion (a forged order of 2^63 never finished)
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or not low <= value < 2 ** 31:
                raise ParameterError(f"{name} must be an integer in [{low}, 2^31), got {value!r:.40}", name=name, value=value)
        if self.order > 64:
            raise ParameterError(f"order must be at most 64, got {self.order}", name='order', value=self.order)
        for name in ("step_size", "length_ratio"):
            value = getattr(options, name)
            if not isinstance(value, (int, float)) or not value > 0 or not math.isfinite(value):
                raise ParameterError(f"{name} must be a finite number > 0, got {value!r}", name=name, value=value)
        for name in ("delta", "truncation"):
            value = getattr(options, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0 or not math.isfinite(value):
                raise ParameterError(f"{name} must be a finite number >= 0, got {value!r}", name=name, value=value)
        check_int(self, "hash_bits", 4, 30)
        for name in ("edge_unigrams", "backoff", "progress"):
            check_bool(self, name)
        check_int(self, "batch_size", 1, 2 ** 31 - 1, allow_none=True)
        check_int(self, "n_shards", 1, 2 ** 31 - 1, allow_none=True)
        check_n_jobs(self)
        if self.batch_size is None and (self.executor is not None or self.n_jobs not in (None, 1)
                                        or self.n_shards not in (None, 1)):
            raise ParameterError("AlignmentTransducer: n_shards / n_jobs / executor apply to the mini-batch mode "
                                 "(batch_size=...); the default online training steps once per example, in order", name='batch_size', value=self.batch_size)
        return options

    def _saved_params(self) -> dict:
        """The parameters a model or training-state file records (not where it was trained), the
        options' fields among them."""
        params = flat_params(self, "options", self._options())
        return {k: v for k, v in params.items() if k not in ("n_jobs", "executor")}

    def _worker_copy(self) -> "AlignmentTransducer":
        """What a worker needs to compute an example's gradient: parameters, codec, feature space
        (no weights, no executor)."""
        params = {k: v for k, v in self._saved_params().items() if k != "progress"}
        copy = type(self)(**nested_params(params, "options", TransducerOptions))
        copy.codec_, copy.features_ = self.codec_, self.features_
        return copy

    def _space(self, order=None) -> AlignmentFeatureSpace:
        return AlignmentFeatureSpace(len(self.codec_.letters), len(self.codec_.phonemes),
                                     self.order if order is None else order, self.max_advance, self.hash_bits,
                                     self.edge_unigrams, self.backoff)

    # ------------------------------------------------------------ lattices
    def _lattices(self, x, y, moves=None):
        """(model AlignmentLattice, target AlignmentLattice, target Lattice) for one pair."""
        B, fs, theta = self.num_contexts, self.features_, self.weights_
        options = self._options()
        Lmax = max(_max_length(len(x), options.length_ratio, options.length_slack), len(y))
        method = self.method
        if method == "rcms":
            model = build_alignment_lattice(x, theta, fs, B, max_length=Lmax)
            target = build_alignment_lattice(x, theta, fs, B, max_length=Lmax, clamp=y)
            return model, target, target.lattice
        if method == "target":
            model = build_alignment_lattice(x, theta, fs, B, selection="beam", max_length=Lmax)
            target = build_alignment_lattice(x, theta, fs, B, selection="beam", max_length=Lmax, clamp=y)
            return model, target, target.lattice
        if method == "model":
            model = build_alignment_lattice(x, theta, fs, B, selection="beam", max_length=Lmax)
            return model, model, restrict_to_output(model, y)
        if method == "hybrid":
            model = build_alignment_lattice(x, theta, fs, B, selection="beam", max_length=Lmax, gold_letters=y,
                                            extra_gold=B)
            return model, model, restrict_to_output(model, y)
        model = build_alignment_lattice(x, theta, fs, B, selection="beam", max_length=Lmax, gold_letters=y,
                                        forced_moves=moves)
        return model, model, restrict_to_output(model, y, moves)

    def _example_terms(self, x, y, moves=None):
        """(ℓ, context length, [(lattice, arc marginals, sign), …]) of one encoded pair: the
        gradient of −ℓ is Σ sign · E[φ] over the terms (model +1, then target −1); no terms
        and ℓ = −inf when the target lattice has no path."""
        model, target, target_lattice = self._lattices(x, y, moves)
        log_zt, _, arc_t = lt.log_partition_and_marginals(target_lattice)
        ctx = model.context_length(upto=len(y))
        if log_zt == -np.inf:
            return -np.inf, ctx, []
        log_zm, _, arc_m = lt.log_partition_and_marginals(model.lattice)
        return log_zt - log_zm, ctx, [(model, arc_m, 1.0), (target, arc_t, -1.0)]

    def example_gradient(self, x, y, moves=None):
        """(approximate log-likelihood, indices, values of ∇(−ℓ), context length) for one encoded pair.

        ℓ = log Z_target − log Z_model; −inf with an empty gradient when the target
        lattice has no path (no training signal).
        """
        ll, ctx, terms = self._example_terms(x, y, moves)
        pairs = [lattice.expected_features(marginals) for lattice, marginals, _ in terms]
        signs = [sign for _, _, sign in terms]
        idx = np.concatenate([np.zeros(0, np.int64)] + [i for i, _ in pairs])
        val = np.concatenate([np.zeros(0)] + [sign * v for (_, v), sign in zip(pairs, signs)])
        return ll, idx, val, ctx

    # ------------------------------------------------------------ training
    def impute_alignments(self, inputs, outputs) -> list:
        """Forced decoding's imputed alignments (moves per pair, None if none) for these pairs.

        The same as ``fit`` computes for ``method="forced"``; pass the result to ``fit``'s
        ``alignments`` to reuse it across runs that differ only in the order of examples.
        """
        options = self._check_params(warn=True)
        _check_pairs(inputs, outputs)
        self.codec_ = _Codec.from_data(inputs, outputs)
        xs = [self.codec_.encode_input(x) for x in inputs]
        ys = [self.codec_.encode_output(y) for y in outputs]
        moves = impute_alignments(xs, ys, self._space(order=2), options.bigram_epochs, options.step_size,
                                  options.delta, options.length_ratio, options.length_slack, self.seed, self.progress)
        return [None if m is None else m.tolist() for m in moves]

    def fit(self, inputs, outputs, callback=None, alignments=None, checkpoint=None, checkpoint_every: int = 0,
            state_path=None, resume: bool = False):
        """Train on ``inputs`` (symbol sequences) and ``outputs`` (strings); returns self.

        ``callback(model, epoch)`` runs after each pass and may return a dict merged into
        that pass's ``history_`` row. ``alignments`` (forced decoding only): precomputed
        moves from :func:`impute_alignments` (else computed here). ``checkpoint(model,
        examples)`` runs inside a pass after every ``checkpoint_every`` examples (not at the
        end of a pass, where ``callback`` runs): learning curves within a long pass.

        ``state_path``: after every pass the whole training state (weights, AdaGrad's
        accumulator, both random streams, counters, history) is written there (npz + JSON);
        with ``resume`` and that file present, training continues after its last pass and
        ends with the same weights, bit for bit, as one uninterrupted run of ``epochs``
        passes — the same data and parameters are required (checked).
        """
        options = self._check_params(warn=True)
        _check_pairs(inputs, outputs)
        self.codec_ = _Codec.from_data(inputs, outputs)
        self.features_ = self._space()
        self.weights_ = np.zeros(self.features_.size)
        xs = [self.codec_.encode_input(x) for x in inputs]
        ys = [self.codec_.encode_output(y) for y in outputs]
        moves = [None] * len(xs)
        self.imputation_seconds_ = 0.0
        if self.method == "forced":
            start = time.perf_counter()
            if alignments is None:
                with warnings.catch_warnings():  # a deprecated keyword was told once, above
                    warnings.filterwarnings("ignore", ".*deprecated and will be removed", FutureWarning)
                    alignments = self.impute_alignments(inputs, outputs)
            elif len(alignments) != len(xs):
                raise ParameterError("alignments must give one entry per training pair", name='alignments', value=alignments)
            moves = [None if m is None else np.asarray(m, dtype=np.int64) for m in alignments]
            self.imputation_seconds_ = time.perf_counter() - start
        optimiser = AdaGrad(options.step_size, options.delta)
        gradient = _GradientAccumulator(self.features_.size)
        rng = as_rng(self.seed)
        # its own child stream: the example order is the seed's with or without truncation
        truncation_rng = as_rng(rng.bit_generator.seed_seq.spawn(1)[0])
        self.history_ = []
        self.context_length_trace_ = []
        ctx_sum, ctx_n, seen = 0.0, 0, 0
        first_epoch = 0
        fingerprint = _data_fingerprint(inputs, outputs)
        if resume and state_path is not None and os.path.exists(state_path):
            first_epoch, ctx_sum, ctx_n, seen = self._restore_training_state(state_path, fingerprint, optimiser, rng,
                                                                             truncation_rng)
        bar = Progress(total=self.epochs * len(xs), initial=first_epoch * len(xs), enabled=self.progress,
                       desc=f"train {self.method}", leave=False)
        tally = _Tally(ctx_sum, ctx_n, seen, options.track_every, self.context_length_trace_)
        batches = None if self.batch_size is None else self._batch_plan()
        for epoch in range(first_epoch, self.epochs):
            start = time.perf_counter()
            tally.new_pass()
            order = rng.permutation(len(xs))
            if batches is not None:
                self._batched_pass(order, xs, ys, moves, batches, optimiser, options.truncation, truncation_rng, tally,
                                   bar, checkpoint, checkpoint_every)
            else:
                self._online_pass(order, xs, ys, moves, gradient, optimiser, options.truncation, truncation_rng, tally,
                                  bar, checkpoint, checkpoint_every)
            row = {"epoch": epoch + 1, "examples": tally.seen, "updates": tally.updates, "no_signal": tally.no_signal,
                   "train_log_likelihood": tally.total_ll / max(tally.updates, 1),
                   "context_length": tally.ctx_sum / tally.ctx_n if tally.ctx_n else float("nan"),
                   "seconds": time.perf_counter() - start,
                   "nonzero_weights": int(np.count_nonzero(self.weights_))}
            if batches is not None and not isinstance(batches[0], SerialExecutor):
                bar.write(f"pass {epoch + 1}: log-likelihood {row['train_log_likelihood']:.6g}, "
                          f"{batches[0].take_stats().describe(batches[0].n_workers)}")
            if callback is not None:
                row.update(callback(self, epoch + 1) or {})
            self.history_.append(row)
            if state_path is not None:
                self._save_training_state(state_path, fingerprint, epoch + 1, optimiser, rng, truncation_rng,
                                          (tally.ctx_sum, tally.ctx_n, tally.seen))
        bar.close()
        return self

    def _online_pass(self, order, xs, ys, moves, gradient, optimiser, truncation, truncation_rng, tally, bar,
                     checkpoint, checkpoint_every):
        """One pass of the paper's protocol: an AdaGrad step after each example, in ``order``."""
        for k in order:
            if (checkpoint is not None and checkpoint_every > 0 and tally.seen > tally.pass_start
                    and tally.seen % checkpoint_every == 0):
                checkpoint(self, tally.seen)
            bar.update(1)
            x, y = xs[k], ys[k]
            if y is None or (self.method == "forced" and moves[k] is None):
                tally.skip()
                continue
            ll, ctx, terms = self._example_terms(x, y, moves[k])
            if not tally.count(ll, ctx):
                continue
            for lattice, marginals, sign in terms:
                gradient.add(lattice, marginals, sign)
            gradient.step(optimiser, self.weights_, truncation, truncation_rng)

    def _batch_plan(self):
        """(executor, pieces per batch, the workers' copy of the model) of the mini-batch mode."""
        from varorder.models.sharded import DEFAULT_SHARDS

        executor = as_executor(self.executor, n_jobs=self.n_jobs)
        pieces = self.n_shards or (1 if isinstance(executor, SerialExecutor) else DEFAULT_SHARDS)
        return executor, pieces, self._worker_copy()

    def _batched_pass(self, order, xs, ys, moves, batches, optimiser, truncation, truncation_rng, tally, bar,
                      checkpoint, checkpoint_every):
        """One pass of the mini-batch mode: per batch, the pieces' gradients at the same θ computed on
        the executor, added in piece order, one AdaGrad step on the sum."""
        executor, n_pieces, worker = batches
        scratch = np.zeros(self.weights_.size)
        for first in range(0, order.size, self.batch_size):
            if (checkpoint is not None and checkpoint_every > 0 and tally.seen > tally.pass_start
                    and first and tally.seen // checkpoint_every > (tally.seen - self.batch_size) // checkpoint_every):
                checkpoint(self, tally.seen)
            batch = order[first:first + self.batch_size]
            pieces = [[(xs[k], ys[k], moves[k]) for k in piece] for piece in np.array_split(batch, n_pieces) if piece.size]
            signal = False
            touched = []
            for outcomes, index, sums in executor.map(_batch_piece, pieces, worker, self.weights_):
                for ll, ctx in outcomes:
                    bar.update(1)
                    signal = (tally.skip() if ll is None else tally.count(ll, ctx)) or signal
                scratch[index] += sums  # distinct coordinates within a piece: exact, in piece order
                touched.append(index)
            if not signal:
                continue
            touched = np.unique(np.concatenate(touched))  # ascending, as the truncation draws need
            sums = scratch[touched]
            scratch[touched] = 0.0
            _adagrad_step(optimiser, self.weights_, touched, sums, truncation, truncation_rng)

    def _save_training_state(self, path, fingerprint, epochs_done, optimiser, rng, truncation_rng, counters):
        """Everything :meth:`fit` needs to go on after pass ``epochs_done`` (sparse weights and accumulator)."""
        squared = optimiser.sum_squared_grad
        touched = np.flatnonzero(squared) if squared is not None else np.zeros(0, np.int64)
        ctx_sum, ctx_n, seen = counters
        state = {"data": fingerprint, "epochs_done": epochs_done, "ctx_sum": ctx_sum, "ctx_n": ctx_n, "seen": seen,
                 "steps_taken": optimiser.steps_taken, "history": self.history_,
                 "context_length_trace": [list(p) for p in self.context_length_trace_],
                 "imputation_seconds": self.imputation_seconds_,
                 "rng": rng.bit_generator.state, "truncation_rng": truncation_rng.bit_generator.state}
        save_model(path, _STATE_KIND, self._saved_params(), state,
                   {"index": touched.astype(np.int64), "weight": self.weights_[touched],
                    "sum_squared_grad": squared[touched] if touched.size else np.zeros(0)})

    def _restore_training_state(self, path, fingerprint, optimiser, rng, truncation_rng):
        """Load a :meth:`_save_training_state` file into this fit; returns (first epoch, ctx_sum, ctx_n, seen)."""
        where = os.fspath(path)
        params, state, arrays = load_model(path, _STATE_KIND, ("index", "weight", "sum_squared_grad"))
        mine = {k: v for k, v in self._saved_params().items() if k not in ("epochs", "progress")}
        theirs = {k: v for k, v in params.items() if k not in ("epochs", "progress")}
        if theirs != mine:
            raise FormatError(f"{where}: training state of other parameters {theirs}, not {mine}", path=where)
        if state.get("data") != fingerprint:
            raise FormatError(f"{where}: training state of other training data", path=where)
        done = int(state["epochs_done"])
        if not 0 < done <= self.epochs:
            raise FormatError(f"{where}: {done} passes done, but epochs = {self.epochs}", path=where)
        index = np.asarray(arrays["index"], dtype=np.int64)
        check_shapes(path, arrays, {"weight": index.shape, "sum_squared_grad": index.shape}, allow_neg_inf=False)
        if index.size and (index[0] < 0 or index[-1] >= self.weights_.size or np.any(np.diff(index) <= 0)):
            raise FormatError(f"{where}: index must be strictly increasing indices in [0, {self.weights_.size})", path=where)
        self.weights_[index] = arrays["weight"]
        optimiser.sum_squared_grad = np.zeros(self.weights_.size)
        optimiser.sum_squared_grad[index] = arrays["sum_squared_grad"]
        optimiser.steps_taken = int(state["steps_taken"])
        rng.bit_generator.state = state["rng"]
        truncation_rng.bit_generator.state = state["truncation_rng"]
        self.history_ = list(state["history"])
        self.context_length_trace_ = [tuple(p) for p in state["context_length_trace"]]
        return done, float(state["ctx_sum"]), int(state["ctx_n"]), int(state["seen"])

    # ------------------------------------------------------------ prediction
    def _check_fitted(self):
        check_is_fitted(self, "weights_")

    def predict_one(self, x, max_input_symbols: int | None = MAX_INPUT_SYMBOLS) -> str:
        """The spelling of one input (a symbol sequence); ``max_input_symbols``: see :meth:`predict`."""
        self._check_fitted()
        if len(x) < 1:
            raise ParameterError("inputs must be non-empty symbol sequences", name='x', value=x)
        _check_length(x, max_input_symbols)
        ids = self.codec_.encode_input(x)
        options = self._options()
        Lmax = _max_length(len(ids), options.length_ratio, options.length_slack)
        selection = "rcms" if self.method == "rcms" else "beam"
        model = build_alignment_lattice(ids, self.weights_, self.features_, self.num_contexts, selection=selection,
                                        max_length=Lmax)
        arcs, score = lt.viterbi_arcs(model.lattice)
        if score == -np.inf:
            return ""
        return self.codec_.decode_output(model.decode_arcs(arcs)[0])

    def predict(self, inputs, max_input_symbols: int | None = MAX_INPUT_SYMBOLS) -> list[str]:
        """The spelling of each input. An input longer than ``max_input_symbols`` (None: no limit) is
        refused, every input checked before any is predicted: the lattice grows with the square of the input's
        length (10,000 phonemes held 20 GB), and no word is that long."""
        inputs = list(inputs)
        for x in inputs:
            _check_length(x, max_input_symbols)
        return [self.predict_one(x, max_input_symbols)
                for x in Progress(inputs, enabled=self.progress, desc="predict", leave=False)]

    # ------------------------------------------------------------ persistence
    def save(self, path) -> None:
        """One .npz: the non-zero weights (sorted int32 indices, float64 values) plus JSON metadata
        (params, phoneme and letter lists). Most of the 2^hash_bits table is zero, so the
        sparse pair is a fraction of the dense table's size and loads back bit for bit."""
        self._check_fitted()
        touched = np.flatnonzero(self.weights_)
        state = {"phonemes": self.codec_.phonemes, "letters": self.codec_.letters, "weights": "sparse"}
        save_model(path, _KIND, self._saved_params(), state,
                   {"weight_index": touched.astype(np.int32 if touched.size and touched[-1] < 2**31 else np.int64),
                    "weight_value": self.weights_[touched]})

    @classmethod
    @model_loader
    def load(cls, path) -> "AlignmentTransducer":
        """Read a model written by :meth:`save` (or an older file holding the dense ``weights`` table)."""
        where = os.fspath(path)
        sparse = load_model(path, _KIND, ())[1].get("weights") == "sparse"
        names = ("weight_index", "weight_value") if sparse else ("weights",)
        params, state, arrays = load_model(path, _KIND, names)
        model = cls(**nested_params(params, "options", TransducerOptions))
        model._check_params()
        phonemes = check_labels(path, "phonemes", state["phonemes"])
        letters = check_labels(path, "letters", state["letters"])
        if not phonemes or phonemes[0] != _UNK or not letters:
            raise FormatError(f"{where}: phoneme list must start with {_UNK!r} and letters be non-empty", path=where)
        if not all(isinstance(p, str) for p in phonemes) or not all(isinstance(c, str) and len(c) == 1 for c in letters):
            # outputs are spelled letter by letter: a longer "letter" would change every prediction's length
            raise FormatError(f"{where}: field 'letters' must be single characters and 'phonemes' strings", path=where)
        check_keys(path, "state", state, ("phonemes", "letters", "weights"))
        model.codec_ = _Codec(phonemes, letters)
        model.features_ = model._space()
        size = model.features_.size
        if not sparse:
            check_shapes(path, arrays, {"weights": (size,)}, allow_neg_inf=False)
            model.weights_ = np.array(arrays["weights"], dtype=np.float64)
            return model
        index, value = arrays["weight_index"], arrays["weight_value"]
        if index.ndim != 1 or index.dtype.kind not in "iu":
            raise FormatError(f"{where}: weight_index must be a 1-D integer array, got {index.dtype} {index.shape}", path=where)
        check_shapes(path, arrays, {"weight_value": index.shape}, allow_neg_inf=False)
        index = index.astype(np.int64)
        if index.size and (index[0] < 0 or index[-1] >= size or np.any(np.diff(index) <= 0)):
            raise FormatError(f"{where}: weight_index must be strictly increasing indices in [0, {size})", path=where)
        model.weights_ = np.zeros(size)
        model.weights_[index] = value
        return model
