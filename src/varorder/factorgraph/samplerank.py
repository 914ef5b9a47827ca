"""SampleRank training of factor-graph sequence labellers (Wick et al. 2009; Bouchard, GREC-NEG 2010).

Factorization: :mod:`varorder.factorgraph.graph` — unary factors on the CRF's own sparse
token features (:mod:`varorder.models.features`), neighbour pairwise factors, and optionally
skip factors between repeated keys in a document and second-order window factors.

Learning (SampleRank): no normaliser and no exact inference. A Markov chain over the
training labels moves by single-variable Gibbs (or Metropolis–Hastings) proposals; every
proposal y → y′ whose model ranking disagrees with the truth objective (token accuracy, i.e.
minus the Hamming loss) triggers a perceptron or MIRA step on φ(better) − φ(worse). The
weights returned are the average over all steps (``average=True``). See
:func:`varorder.factorgraph.kernels.samplerank_epoch` for the update rule.

Decoding: a graph with only unary and neighbour factors is a linear-chain CRF, decoded
exactly by the engine's Viterbi (:func:`varorder.models.sequences.decode_viterbi`);
with skip or second-order factors, simulated annealing (Gibbs sweeps on a decreasing
temperature schedule, then greedy sweeps) started from the Viterbi path of the chain part.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from varorder._progress import Progress
from varorder.base import (DEPRECATED, ParamsMixin, check_bool, check_choice, check_int, check_is_fitted, check_real,
                           flat_params, nested_params, options_with_deprecated)
from varorder.errors import FormatError, ParameterError
from varorder.factorgraph import kernels
from varorder.factorgraph.graph import FactorGraph, ParameterLayout, document_ids, repeated_key_pairs
from varorder.models import persist
from varorder.models.features import FeatureIndexer, design_matrix, is_array_input, n_items, pos_features
from varorder.models.sequences import ChunkPlan, LabelCodec, decode_viterbi, token_accuracy

__all__ = ["SampleRankOptions", "SampleRankTagger", "conllu_inputs"]

_RULES = {"perceptron": kernels.PERCEPTRON, "mira": kernels.MIRA}
_PROPOSALS = {"gibbs": kernels.GIBBS, "mh": kernels.METROPOLIS}
_PAIRS = {"proposal": 0, "neighbourhood": 1}
_INITS = ("random", "gold")
_DECODERS = ("auto", "viterbi", "anneal")
_PARAMS = ("skip_factors", "second_order", "rule", "proposal", "pairs", "n_epochs", "step_size", "C", "margin",
           "temperature", "average", "init", "decoder", "anneal_sweeps", "anneal_start", "anneal_end",
           "min_feature_count", "random_state")


@dataclass(frozen=True)
class SampleRankOptions:
    """The rarely changed knobs of SampleRank training and annealed decoding (the ``options``
    parameter of :class:`SampleRankTagger`; :class:`varorder.neg.NegOptions` extends it);
    checked when the estimator fits.

    Attributes
    ----------
    step_size : the perceptron rule's step.
    C : the MIRA rule's largest step.
    margin : a ranking disagrees when the better configuration does not outscore the worse by more than this.
    temperature : of the training chain's proposals.
    average : return averaged weights.
    init : starting labels of the training chain, "random" (uniform) or "gold" (the truth).
    anneal_sweeps, anneal_start, anneal_end : geometric temperature schedule of annealed decoding.
    """

    step_size: float = 1.0
    C: float = 1.0
    margin: float = 0.0
    temperature: float = 1.0
    average: bool = True
    init: str = "random"
    anneal_sweeps: int = 10
    anneal_start: float = 0.5
    anneal_end: float = 0.05



def check_samplerank_options(options: SampleRankOptions) -> None:
    """A ParameterError naming the field of ``options`` that is out of range."""
    check_choice(options, "init", _INITS)
    for name in ("step_size", "C", "temperature", "anneal_start", "anneal_end"):
        check_real(options, name, 0, exclusive_minimum=True)
    check_real(options, "margin", 0)
    check_bool(options, "average")


class SampleRankTagger(ParamsMixin):
    """Factor-graph sequence labeller trained by SampleRank (scikit-learn conventions).

    Parameters
    ----------
    skip_factors : add a pairwise factor S[yᵢ, yⱼ] between each token and the previous token
        with the same skip key in the same document (keys and documents passed to fit/predict).
    second_order : add window factors U[yₜ₋₂, yₜ₋₁, yₜ].
    rule : "perceptron" (step ``options.step_size``) or "mira" (step min(C, (Δloss − gap)/‖Δφ‖²), C
        ``options.C``).
    proposal : "gibbs" or "mh" (uniform other label, Metropolis–Hastings acceptance).
    pairs : which pair is ranked at each step: "proposal" (Wick et al. 2009: the current and the
        proposed configuration) or "neighbourhood" (extension, as FACTORIE's SampleRank trainer:
        the model's best against the objective's best among all values of the proposed variable).
    n_epochs : passes over the training tokens (one proposal per token per pass). On UD-EWT the
        default pairs need about 40 to come within 0.5 points of the exact CRF; neighbourhood pairs 10.
    decoder : "auto" (Viterbi for a linear chain, else annealing), "viterbi" (chain part only) or "anneal".
    options : :class:`SampleRankOptions` (step sizes, margin, temperature, averaging, the chain's
        start, the annealing schedule); None: its defaults. Its fields as keywords of this
        constructor still work for one release (a FutureWarning).
    min_feature_count : features seen fewer times in training are dropped.
    random_state : seed (an int fixes every result).
    verbose : report the running objective (training-chain token accuracy) per epoch: a bar on a
        terminal, a summary line otherwise.

    Parameters are keyword-only and checked by :meth:`fit` (a ParameterError names the parameter
    and the value passed); :meth:`predict` before :meth:`fit` raises NotFittedError.

    Learned attributes: ``classes_``, ``feature_names_``, ``n_features_in_``, ``layout_``
    (:class:`ParameterLayout`), ``theta_`` (flat parameters), ``history_``, ``training_time_``.
    """

    _MODEL_KIND = "SampleRankTagger"

    def __init__(self, *, skip_factors: bool = False, second_order: bool = False, rule: str = "perceptron",
                 proposal: str = "gibbs", pairs: str = "proposal", n_epochs: int = 40, decoder: str = "auto",
                 options: SampleRankOptions | None = None, min_feature_count: int = 1, random_state=0,
                 verbose: bool = False, step_size=DEPRECATED, C=DEPRECATED, margin=DEPRECATED,
                 temperature=DEPRECATED, average=DEPRECATED, init=DEPRECATED, anneal_sweeps=DEPRECATED,
                 anneal_start=DEPRECATED, anneal_end=DEPRECATED):
        self.skip_factors = skip_factors
        self.second_order = second_order
        self.rule = rule
        self.proposal = proposal
        self.pairs = pairs
        self.n_epochs = n_epochs
        self.decoder = decoder
        self.options = options
        self.min_feature_count = min_feature_count
        self.random_state = random_state
        self.verbose = verbose
        # the keywords that moved into ``options`` (kept for one release)
        self.step_size = step_size
        self.C = C
        self.margin = margin
        self.temperature = temperature
        self.average = average
        self.init = init
        self.anneal_sweeps = anneal_sweeps
        self.anneal_start = anneal_start
        self.anneal_end = anneal_end

    def _options(self, warn: bool = False) -> SampleRankOptions:
        """``options`` with the deprecated keywords passed put in (a FutureWarning when ``warn``)."""
        return options_with_deprecated(self, "options", SampleRankOptions, stacklevel=4, warn=warn)

    def _check_params(self, warn: bool = False) -> SampleRankOptions:
        """Check the parameters; returns the options in force."""
        options = self._options(warn)
        for name, allowed in (("rule", _RULES), ("proposal", _PROPOSALS), ("pairs", _PAIRS), ("decoder", _DECODERS)):
            check_choice(self, name, tuple(allowed))
        check_samplerank_options(options)
        check_int(self, "n_epochs", 1)
        check_int(options, "anneal_sweeps", 0)
        check_int(self, "min_feature_count", 1)
        for name in ("skip_factors", "second_order", "verbose"):
            check_bool(self, name)
        return options

    # -- graphs ---------------------------------------------------------------

    def _graph(self, X, skip_keys, documents, name):
        if self.feature_names_ is None:
            matrix, lengths = design_matrix(X, None, self.n_features_in_, name)
        else:
            matrix, lengths = self._indexer.transform(X, name)
        pairs = None
        if self.skip_factors:
            if skip_keys is None:
                raise ParameterError(f"skip_factors=True needs skip keys for {name} (e.g. the lower-cased words)", name='skip_factors', value=self.skip_factors)
            if len(skip_keys) != len(X):
                raise ParameterError(f"{name} has {len(X)} sequences but skip_keys has {len(skip_keys)}", name=name)
            for i, keys in enumerate(skip_keys):
                if len(keys) != lengths[i]:
                    raise ParameterError(f"{name}[{i}] has {lengths[i]} items but skip_keys[{i}] has {len(keys)}", name=name)
            pairs = repeated_key_pairs(skip_keys, documents)
        return FactorGraph(matrix, lengths, pairs if pairs is not None else np.zeros((0, 2), dtype=np.int64))

    # -- training ---------------------------------------------------------------

    def fit(self, X, y, skip_keys=None, documents=None, X_dev=None, y_dev=None, skip_keys_dev=None,
            documents_dev=None):
        """Train on sequences X (feature dicts, name lists or arrays, as for the CRF) with labels y.

        ``skip_keys``/``documents``: per sequence, one key per token and a document id (see
        :func:`~varorder.factorgraph.graph.repeated_key_pairs`); needed when ``skip_factors``.
        Optional dev data is tagged after each epoch (logged in ``history_``).
        """
        options = self._check_params(warn=True)
        if len(X) != len(y):
            raise ParameterError(f"X has {len(X)} sequences but y has {len(y)}", name='X', value=X)
        for i, (xs, ys) in enumerate(zip(X, y)):
            if n_items(xs) != len(ys):
                raise ParameterError(f"X[{i}] has {n_items(xs)} items but y[{i}] has {len(ys)} labels", name='X', value=X)
        began = time.perf_counter()
        codec = LabelCodec.fit(y)
        self.classes_ = codec.classes
        if is_array_input(X):
            self._indexer, self.feature_names_ = None, None
            self.n_features_in_ = design_matrix(X[:1], None, None, "X")[0].shape[1]
        else:
            self._indexer = FeatureIndexer(self.min_feature_count).fit(X)
            self.feature_names_ = self._indexer.names_
            self.n_features_in_ = self._indexer.n_features
        graph = self._graph(X, skip_keys, documents, "X")
        gold = codec.encode(y)
        K = len(self.classes_)
        self.layout_ = ParameterLayout(self.n_features_in_, K, skip=self.skip_factors, second_order=self.second_order)
        dev = None
        if X_dev is not None:
            dev = (self._graph(X_dev, skip_keys_dev, documents_dev, "X_dev"), y_dev)
        theta = np.zeros(self.layout_.n_params)
        accumulated = np.zeros_like(theta)
        rng = np.random.default_rng(self.random_state)
        state = rng.integers(0, K, size=gold.size) if options.init == "random" else gold.copy()
        loss = 1.0 - np.eye(K)
        G, L = graph.kernel_arrays(), self.layout_.kernel_layout()
        no_log = np.zeros((0, 6))
        steps = 0.0
        self.history_ = []
        progress = Progress(range(1, self.n_epochs + 1), enabled=self.verbose, desc="SampleRank", unit="epoch")
        for epoch in progress:
            order = _sentence_shuffled_tokens(graph.offsets, rng)
            steps, n_ranked, n_updates, n_moves, objective = kernels.samplerank_epoch(
                order, state, gold, loss, theta, accumulated, steps, G, L, _RULES[self.rule], float(options.step_size),
                float(options.C), float(options.margin), _PROPOSALS[self.proposal], float(options.temperature),
                _PAIRS[self.pairs], int(rng.integers(2 ** 31)), no_log)
            entry = {"epoch": epoch, "chain_accuracy": 1.0 + objective / gold.size, "ranked_pairs": n_ranked,
                     "updates": n_updates, "moves": n_moves, "time": time.perf_counter() - began}
            self.theta_ = theta - accumulated / steps if options.average else theta.copy()
            if dev is not None:
                entry["dev_accuracy"] = token_accuracy(self._predict_graph(dev[0]), dev[1])
            self.history_.append(entry)
            progress.set_postfix({k: round(v, 4) for k, v in entry.items() if k in ("chain_accuracy", "dev_accuracy")}
                                 | {"updates": n_updates})
        self.theta_ = theta - accumulated / steps if options.average else theta.copy()
        self.training_time_ = time.perf_counter() - began
        return self

    # -- prediction ---------------------------------------------------------------

    def _check_fitted(self):
        check_is_fitted(self, "theta_")

    def _decoder(self) -> str:
        if self.decoder != "auto":
            return self.decoder
        return "anneal" if (self.skip_factors or self.second_order) else "viterbi"

    def _predict_ids(self, graph: FactorGraph) -> np.ndarray:
        blocks = self.layout_.unpack(self.theta_)
        plan = ChunkPlan(graph.lengths)
        emissions = graph.X @ blocks["W"]
        ids = decode_viterbi(plan, np.ascontiguousarray(emissions), blocks["T"], blocks["start"], blocks["end"])
        if self._decoder() == "anneal":
            options = self._options()
            temperatures = np.geomspace(options.anneal_start, options.anneal_end, options.anneal_sweeps) \
                if options.anneal_sweeps else np.zeros(0)
            seed = 0 if self.random_state is None else int(self.random_state) % (2 ** 31)
            kernels.anneal(ids, self.theta_, graph.kernel_arrays(), self.layout_.kernel_layout(), temperatures,
                           _PROPOSALS[self.proposal], seed, 100)
        return ids

    def _predict_graph(self, graph: FactorGraph) -> list[list]:
        ids = self._predict_ids(graph)
        return [[self.classes_[i] for i in ids[graph.offsets[s]:graph.offsets[s + 1]]]
                for s in range(graph.lengths.size)]

    def predict(self, X, skip_keys=None, documents=None) -> list[list]:
        """MAP label sequence per input sequence (Viterbi, or annealing for a loopy / second-order graph)."""
        self._check_fitted()
        return self._predict_graph(self._graph(X, skip_keys, documents, "X"))

    def score(self, X, y, skip_keys=None, documents=None) -> float:
        """Token accuracy of :meth:`predict` against y."""
        return token_accuracy(self.predict(X, skip_keys, documents), y)

    # -- persistence --------------------------------------------------------------

    def save(self, path) -> None:
        """Write the fitted model as npz + JSON metadata (no pickle); atomic."""
        self._check_fitted()
        flat = flat_params(self, "options", self._options())
        params = {name: flat[name] for name in _PARAMS}
        persist.save_model(path, self._MODEL_KIND, params, {
            "classes": self.classes_, "feature_names": self.feature_names_, "n_features_in": self.n_features_in_,
            "input": "arrays" if self.feature_names_ is None else "feature dicts",
        }, {"theta": self.theta_})

    @classmethod
    @persist.model_loader
    def load(cls, path) -> "SampleRankTagger":
        """Read a model written by :meth:`save`; a corrupted or foreign file raises FormatError."""
        params, state, arrays = persist.load_model(path, cls._MODEL_KIND, ("theta",))
        unknown = set(params) - set(_PARAMS)
        if unknown:
            raise FormatError(f"{path}: unknown SampleRankTagger parameters {sorted(unknown)}", path=path)
        model = cls(**nested_params(params, "options", SampleRankOptions))
        try:
            model._check_params()
            model.classes_ = state["classes"]
            model.feature_names_ = state["feature_names"]
            model.n_features_in_ = state["n_features_in"]
            if not isinstance(model.classes_, list) or not model.classes_ or len(set(map(repr, model.classes_))) \
                    != len(model.classes_) or not all(isinstance(c, (str, int)) for c in model.classes_):
                raise FormatError(f"classes must be a non-empty list of distinct labels, got {model.classes_!r:.80}")
            if not isinstance(model.n_features_in_, int) or model.n_features_in_ < 0:
                raise FormatError(f"n_features_in must be a non-negative int, got {model.n_features_in_!r:.80}")
            if model.feature_names_ is not None and not (
                    isinstance(model.feature_names_, list) and all(isinstance(n, str) for n in model.feature_names_)):
                raise FormatError("feature_names must be a list of strings or null")
            # recorded apart from feature_names, so that a damaged name list cannot silently turn a
            # model of feature dicts into one of dense arrays
            want_input = "arrays" if model.feature_names_ is None else "feature dicts"
            if state["input"] != want_input:
                raise FormatError(f"input is {state['input']!r:.40} but the feature names say {want_input!r}")
        except (KeyError, TypeError, ValueError) as err:
            raise FormatError(f"{path}: invalid SampleRankTagger metadata ({type(err).__name__}: {err})", path=path) from None
        if model.feature_names_ is not None and len(model.feature_names_) != model.n_features_in_:
            raise FormatError(f"{path}: {len(model.feature_names_)} feature names for {model.n_features_in_} features", path=path)
        model._indexer = None if model.feature_names_ is None else FeatureIndexer.from_names(model.feature_names_)
        model.layout_ = ParameterLayout(model.n_features_in_, len(model.classes_), skip=bool(model.skip_factors),
                                        second_order=bool(model.second_order))
        persist.check_shapes(path, arrays, {"theta": (model.layout_.n_params,)})
        model.theta_ = np.asarray(arrays["theta"], dtype=np.float64)
        if not np.isfinite(model.theta_).all():
            raise FormatError(f"{path}: array 'theta' holds non-finite weights", path=path)
        return model


def _sentence_shuffled_tokens(offsets: np.ndarray, rng) -> np.ndarray:
    """Token ids of every sequence, sequences in a random order, tokens left to right within each."""
    sequences = rng.permutation(offsets.size - 1)
    lengths = np.diff(offsets)[sequences]
    starts = offsets[:-1][sequences]
    within = np.arange(lengths.sum()) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    return np.repeat(starts, lengths) + within


def conllu_inputs(sentences) -> tuple[list, list, list]:
    """(feature dicts, skip keys, document ids) of CoNLL-U sentences (objects with ``words`` and ``comments``).

    Features are the CRF's POS templates (:func:`~varorder.models.features.pos_features`);
    skip keys the lower-cased words; documents from the ``# newdoc`` comments.
    """
    return ([pos_features(s.words) for s in sentences], [[w.lower() for w in s.words] for s in sentences],
            document_ids([s.comments for s in sentences]))
