"""Train the DMV, the CCM or their product by EM, parse with them, and save them (K&M 2004; LKJ 2008 §5.1).

Factorization. ``model="dmv"`` and ``model="ccm"`` are single submodels trained
by ordinary EM (``AgreementEM`` in its ``independent`` mode with one
submodel); ``model="product"`` is K&M 2004's combined model

    p(x, z) ∝ p_DMV(x, z) · p_CCM(x, B(z))

over projective dependency trees z with their derivation bracketing B(z),
trained by *exact product EM* (``AgreementEM(mode="exact")``, Liang, Klein &
Jordan 2008, §2.1): one E-step on the product chart, each M-step on its
posteriors, objective Σ log Σ_z p_DMV p_CCM never decreasing. Decoding is
Viterbi on the same chart: the lexicalized chart for the DMV and the product
(heads and brackets), the bracket chart for the CCM (brackets only).
"""

from __future__ import annotations

import numpy as np

from varorder.agree.product_em import AgreementEM
from varorder.base import ParamsMixin, check_bool, check_is_fitted
from varorder.errors import FormatError, ParameterError
from varorder.grammar.ccm import CCM
from varorder.grammar.dmv import DMV
from varorder.grammar.shard import TreeShard, decode, make_shards
from varorder.models.persist import check_keys, check_labels, check_shapes, load_model, model_loader, save_model

__all__ = ["GrammarInducer", "MODELS"]

MODELS = ("dmv", "ccm", "product")


class GrammarInducer(ParamsMixin):
    """Unsupervised parser over POS-tag sequences.

    Parameters are keyword-only and checked by :meth:`fit` (a ParameterError names the parameter
    and the value passed); parsing before :meth:`fit` raises NotFittedError.

    Parameters
    ----------
    model : "dmv", "ccm" or "product".
    n_iter : EM iterations (50, the documented WSJ10 / UD10 figures'; 20 before varorder 0.3.0).
    dmv_smoothing : additive pseudo-count of the DMV's multinomials.
    ccm_smoothing : (constituent, distituent) pseudo-counts of the CCM (K&M 2002: (2, 8)).
    ccm_empty_spans : give the CCM the empty spans as always-distituents (see :class:`CCM`).
    dmv_init : "harmonic" (K&M 2004) or "random".
    shard_size : sentences per E-step shard.
    executor : passed to :class:`~varorder.agree.AgreementEM` (None = serial).
    callback : ``callback(iteration, inducer)`` after each M-step.
    progress : report the EM iterations (a bar on a terminal, a summary line otherwise).

    Learned: ``tags_`` (tag names), ``submodels_``, ``objectives_`` (EM objective per iteration).
    """

    _requires_y = False  # fit takes the data alone (scikit-learn's target tag)

    def __init__(self, *, model: str = "product", n_iter: int = 50, dmv_smoothing: float = 0.0,
                 ccm_smoothing=(2.0, 8.0), dmv_init: str = "harmonic", shard_size: int = 2000, executor=None,
                 callback=None, progress: bool = False, seed=None, ccm_empty_spans: bool = False):
        self.model = model
        self.n_iter = n_iter
        self.dmv_smoothing = dmv_smoothing
        self.ccm_smoothing = ccm_smoothing
        self.ccm_empty_spans = ccm_empty_spans
        self.dmv_init = dmv_init
        self.shard_size = shard_size
        self.executor = executor
        self.callback = callback
        self.progress = progress
        self.seed = seed

    # ---- data ----------------------------------------------------------------------------------
    def encode(self, sentences):
        """Tag-name sequences → tag-id arrays (a tag outside ``tags_`` is a ParameterError naming it)."""
        check_is_fitted(self, "tags_")
        index = {t: i for i, t in enumerate(self.tags_)}
        out = []
        for k, sentence in enumerate(sentences):
            try:
                out.append(np.array([index[t] for t in sentence], dtype=np.int64))
            except KeyError as err:
                raise ParameterError(f"sentence {k}: tag {err.args[0]!r} was not seen in training "
                                     f"(known: {' '.join(self.tags_)})", name='sentences', value=sentences) from None
            if not sentence:
                raise ParameterError(f"sentence {k} is empty", name='sentences', value=sentences)
        return out

    def shards(self, sentences):
        return make_shards(self.encode(sentences), len(self.tags_), self.shard_size)

    # ---- training ------------------------------------------------------------------------------
    def _submodels(self):
        if self.model not in MODELS:
            raise ParameterError(f"model must be one of {MODELS}, got {self.model!r}", name='model', value=self.model)
        T = len(self.tags_)
        models = []
        if self.model in ("dmv", "product"):
            models.append(DMV(T, smoothing=self.dmv_smoothing))
        if self.model in ("ccm", "product"):
            models.append(CCM(T, smoothing=tuple(self.ccm_smoothing),
                              domain="projective-trees" if self.model == "product" else "bracketings",
                              empty_spans=bool(self.ccm_empty_spans)))
        return models

    def fit(self, sentences):
        """Train on tag-name sequences; returns self."""
        self._check_params()
        sentences = [list(s) for s in sentences]
        if not sentences:
            raise ParameterError("fit needs at least one sentence", name='sentences', value=sentences)
        self.tags_ = sorted({t for s in sentences for t in s})
        shards = self.shards(sentences)
        self.submodels_ = self._submodels()
        for m in self.submodels_:
            if isinstance(m, DMV):
                m.initialize(shards, method=self.dmv_init, seed=self.seed)
            else:
                m.initialize(shards)
        em = AgreementEM(submodels=self.submodels_, mode="exact" if self.model == "product" else "independent",
                         n_iter=self.n_iter, executor=self.executor, progress=self.progress,
                         callback=None if self.callback is None else (lambda it, _: self.callback(it, self)))
        em.fit(shards)
        self.objectives_ = list(em.objectives_)
        return self

    # ---- decoding ------------------------------------------------------------------------------
    def potentials(self, shard):
        check_is_fitted(self, "submodels_")
        return sum(m.shared_log_potentials(shard) for m in self.submodels_)

    def parse_shards(self, shards):
        """(heads per sentence (−1 = root; None for the CCM), bracket sets per sentence).

        A sentence with probability zero under the model (the unsmoothed DMV has never seen one of
        its tag pairs in a direction it needs) has no derivation; it is decoded again with every
        log-probability floored at log(tiny float), i.e. the tree with the fewest impossible events,
        the most probable among those. Sentences with a derivation are never affected.
        """
        chart = "brackets" if self.model == "ccm" else "lexicalized"
        floor = np.log(np.finfo(np.float64).tiny)
        heads, spans = [], []
        for shard in shards:
            h, s = decode(shard, self.potentials(shard), chart=chart)
            failed = [b for b, sb in enumerate(s) if not sb]
            if failed:
                retry = TreeShard([shard.sentences[b] for b in failed], shard.n_tags)
                h2, s2 = decode(retry, np.maximum(self.potentials(retry), floor), chart=chart)
                for b, hb, sb in zip(failed, h2, s2):
                    h[b], s[b] = hb, sb
            heads += h
            spans += s
        return heads, spans

    def parse(self, sentences):
        return self.parse_shards(self.shards([list(s) for s in sentences]))

    def log_likelihood(self, sentences) -> float:
        """Σ log p(x) under the model (for the product: log Σ_z p_DMV p_CCM, the agreement objective)."""
        total = 0.0
        for shard in self.shards([list(s) for s in sentences]):
            total += self.submodels_[0].expected_statistics(shard, self.potentials(shard)).log_normalizer
        return total

    # ---- persistence ---------------------------------------------------------------------------
    _PARAMS = ("model", "n_iter", "dmv_smoothing", "ccm_smoothing", "dmv_init", "shard_size")

    def save(self, path) -> None:
        check_is_fitted(self, "submodels_")
        arrays, state = {}, {"tags": self.tags_, "objectives": self.objectives_}
        for m in self.submodels_:
            if isinstance(m, DMV):
                arrays.update(dmv_root=m.root_, dmv_stop=m.stop_, dmv_choose=m.choose_)
            else:
                arrays.update(ccm_yields=m.yield_probs_, ccm_contexts=m.context_probs_)
                state["yields"] = [list(y) for y in m.yields_]
        params = {k: getattr(self, k) for k in self._PARAMS}
        params["ccm_smoothing"] = list(self.ccm_smoothing)
        params["ccm_empty_spans"] = bool(self.ccm_empty_spans)
        save_model(path, "GrammarInducer", params, state, arrays)

    @classmethod
    @model_loader
    def load(cls, path) -> "GrammarInducer":
        params, state, _ = load_model(path, "GrammarInducer", [])
        if params.get("model") not in MODELS:
            raise FormatError(f"{path}: model must be one of {MODELS}, got {params.get('model')!r}", path=path)
        names = {"dmv": ["dmv_root", "dmv_stop", "dmv_choose"], "ccm": ["ccm_yields", "ccm_contexts"]}
        wanted = (names["dmv"] if params["model"] != "ccm" else []) + (names["ccm"] if params["model"] != "dmv" else [])
        params, state, arrays = load_model(path, "GrammarInducer", wanted)
        missing = [k for k in cls._PARAMS if k not in params]
        if missing:
            raise FormatError(f"{path}: model parameters lack {missing}", path=path)
        check_keys(path, "params", params, cls._PARAMS + ("ccm_empty_spans",))
        check_keys(path, "state", state, ("tags", "objectives", "yields"))
        empty_spans = params.get("ccm_empty_spans", False)  # absent in files written before the option
        if not isinstance(empty_spans, bool):
            raise FormatError(f"{path}: ccm_empty_spans must be true or false, got {empty_spans!r:.40}", path=path)
        self = cls(**{k: params[k] for k in cls._PARAMS}, ccm_empty_spans=empty_spans)
        tags = state.get("tags")
        if not isinstance(tags, list) or not tags or not all(isinstance(t, str) for t in tags):
            raise FormatError(f"{path}: state.tags must be a non-empty list of tag names", path=path)
        check_labels(path, "tags", tags)
        if any(not t or any(c.isspace() for c in t) for t in tags):  # tags are read as whitespace-separated words
            raise FormatError(f"{path}: field 'tags' holds an empty tag or one with whitespace", path=path)
        self.tags_ = tags
        self.objectives_ = list(state.get("objectives", []))
        T = len(tags)
        shapes = {"dmv_root": (T,), "dmv_stop": (T, 2, 2), "dmv_choose": (T, 2, T)}
        if self.model != "dmv":
            yields = state.get("yields")
            if not isinstance(yields, list) or not yields or yields[0] != [] or \
                    not all(isinstance(y, list) and all(isinstance(t, int) and 0 <= t < T for t in y) for y in yields):
                raise FormatError(f"{path}: state.yields must be a list of tag-id lists, the first empty", path=path)
            if len({tuple(y) for y in yields}) != len(yields):
                # the yield index keeps one row per yield: a repeat would leave a row unreachable
                raise FormatError(f"{path}: state.yields lists a yield twice", path=path)
            shapes.update(ccm_yields=(len(yields), 2), ccm_contexts=((T + 1) ** 2, 2))
        check_shapes(path, arrays, {k: v for k, v in shapes.items() if k in arrays})
        self.submodels_ = self._submodels()
        for m in self.submodels_:
            if isinstance(m, DMV):
                m.root_, m.stop_, m.choose_ = arrays["dmv_root"], arrays["dmv_stop"], arrays["dmv_choose"]
            else:
                m.yields_ = [tuple(y) for y in yields]
                m._set_index()
                m.yield_probs_, m.context_probs_ = arrays["ccm_yields"], arrays["ccm_contexts"]
        for name, arr in arrays.items():
            if arr.dtype.kind != "f" or not np.isfinite(arr).all() or (arr < 0).any() or (arr > 1).any():
                raise FormatError(f"{path}: {name} must hold probabilities in [0, 1]", path=path)
        # each table is a set of distributions (a CCM column may be all zero: a yield never seen)
        sums = {"dmv_root": (arrays.get("dmv_root"), 0, False), "dmv_choose": (arrays.get("dmv_choose"), -1, False),
                "dmv_stop": (arrays.get("dmv_stop"), None, False),
                "ccm_yields": (arrays.get("ccm_yields"), 0, True), "ccm_contexts": (arrays.get("ccm_contexts"), 0, True)}
        for name, (arr, axis, zero_ok) in sums.items():
            if arr is None or axis is None:
                continue
            total = arr.sum(axis=axis)
            if not (np.isclose(total, 1.0, atol=1e-6) | (zero_ok & (total == 0))).all():
                raise FormatError(f"{path}: {name} does not hold probability distributions (sums {total.ravel()[:4]})", path=path)
        return self

    def _check_params(self):
        if self.model not in MODELS:
            raise ParameterError(f"model must be one of {MODELS}, got {self.model!r}", name='model', value=self.model)
        for name, low in (("n_iter", 0), ("shard_size", 1)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
                raise ParameterError(f"{name} must be an integer >= {low}, got {value!r:.40}", name=name, value=value)
        smoothing = [self.dmv_smoothing, *self.ccm_smoothing]
        if len(smoothing) != 3 or not all(isinstance(v, (int, float)) and not isinstance(v, bool)
                                          and np.isfinite(v) and v >= 0 for v in smoothing):
            raise ParameterError(f"dmv_smoothing and the two ccm_smoothing values must be finite and >= 0, "
                                 f"got {self.dmv_smoothing!r:.20}, {self.ccm_smoothing!r:.40}", name='dmv_smoothing', value=self.dmv_smoothing)
        if self.dmv_init not in ("harmonic", "random"):
            raise ParameterError(f"dmv_init must be 'harmonic' or 'random', got {self.dmv_init!r:.40}", name='dmv_init', value=self.dmv_init)
        check_bool(self, "progress")
        check_bool(self, "ccm_empty_spans")
