"""EM decipherment of a 1:1 word substitution cipher with an n-gram plaintext HMM
(Steinhardt & Liang 2015, §6 and App. B; Ravi & Knight 2009; Nuhn et al. 2013).

Model: p(x_{1:L}) = Σ_y p(y_{1:L}) Π_i p(x_i | y_i), with p(y) the fixed n-th order
plaintext chain of :mod:`varorder.decipher.transitions` and the emission table
θ_{w,c} = p(c | w) learned by EM from cipher text alone. M-step with Laplace smoothing
α = 0.01: θ_{w,c} = (n(w, c) + α) / (n(w) + α C), n the expected counts of the E-step,
C the cipher alphabet size; this is MAP EM for the objective
Σ_sentences log p(x) + α Σ_{w,c} log θ_{w,c}, which exact E-steps never decrease.

E-steps (``inference``):

* ``"exact"``: forward–backward on the dense chain engine (:func:`varorder.chain.marginals`,
  per-sequence emissions, shared K × K transitions; 1st order only — 2nd order would need
  K² = 250,000 states);
* ``"rcms"`` / ``"beam"``: ``size`` contexts (or beam entries) per position
  (:mod:`varorder.decipher.context_sets`), inference on the engine's lattice kernel.

The hidden chain is the only sub-model, so EM runs as the ``independent`` mode of
:class:`varorder.agree.AgreementEM`, which also provides the parallel E-steps: shards of
sentences on a ``concurrent.futures`` executor or a ``dask.distributed`` client.
:class:`DecipherHMM` is the :class:`~varorder.agree.Submodel` (shared log-potentials =
the log emission table, µ = expected emission counts).

Initialisation: the uniform table (every p(c | w) = 1/C), optionally perturbed by seeded
multiplicative noise (``init_noise``). The mapping is read off by
:meth:`Decipherer.decode_symbols`: each cipher symbol c becomes
argmax_w p(c | w) p(w) with p(w) the plaintext unigram (ties: the lowest word id).
Mapping accuracy counts every distinct observed symbol except the ``<unk>`` word's symbol
of a lenient task (:attr:`DecipherData.unk_symbol`), which the history reports on its own
(``unk_symbol_correct``).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass

import numpy as np

from varorder.base import ParamsMixin, check_bool, check_int, check_is_fitted
from varorder.agree.product_em import AgreementEM, Statistics, Submodel
from varorder.decipher.context_sets import shard_estep
from varorder.decipher.data import DecipherData
from varorder.decipher.transitions import TransitionTables, fit_transitions
from varorder.errors import FormatError, ParameterError
from varorder.eval.metrics import mapping_accuracy
from varorder.models.persist import model_loader
from varorder.engine.validate import as_rng

__all__ = ["INFERENCE", "CipherShard", "DecipherHMM", "Decipherer", "split_shards", "mapping_from_table"]

INFERENCE = ("exact", "rcms", "beam")


@dataclass
class CipherShard:
    """Cipher sentences: ``symbols`` concatenated (int64) and their ``offsets`` (S + 1,)."""

    symbols: np.ndarray
    offsets: np.ndarray

    @property
    def lengths(self) -> np.ndarray:
        return np.diff(self.offsets)


def split_shards(symbols, offsets, n_shards: int) -> list[CipherShard]:
    """Contiguous shards of about equal token counts."""
    symbols = np.asarray(symbols, dtype=np.int64)
    offsets = np.asarray(offsets, dtype=np.int64)
    n_sent = len(offsets) - 1
    n_shards = max(1, min(int(n_shards), n_sent))
    cuts = np.searchsorted(offsets, np.linspace(0, offsets[-1], n_shards + 1)[1:-1])
    bounds = np.unique(np.concatenate([[0], np.clip(cuts, 1, n_sent - 1) if n_sent > 1 else [], [n_sent]]).astype(np.int64))
    shards = []
    for a, b in zip(bounds[:-1], bounds[1:]):
        shards.append(CipherShard(symbols[offsets[a]:offsets[b]].copy(), offsets[a:b + 1] - offsets[a]))
    return shards


class DecipherHMM(Submodel):
    """The plaintext-HMM sub-model: fixed transitions, learned emission table (K, C)."""

    domain = "plaintext-chain"
    has_private_features = False

    def __init__(self, tables: TransitionTables, num_symbols: int, inference: str = "rcms", size: int = 60,
                 laplace: float = 0.01):
        self.tables = tables
        self.num_symbols = num_symbols
        self.inference = inference
        self.size = size
        self.laplace = laplace

    def initialize(self, init_noise: float = 0.0, seed=None) -> "DecipherHMM":
        K, C = self.tables.num_words, self.num_symbols
        table = np.ones((K, C))
        if init_noise > 0:
            table *= np.exp(init_noise * as_rng(seed).standard_normal((K, C)))
        self.emission_ = table / table.sum(axis=1, keepdims=True)
        return self

    # -- Submodel contract ------------------------------------------------------------
    def shared_log_potentials(self, shard) -> np.ndarray:
        return np.log(self.emission_.T).ravel()  # (C, K): log p(c | w), symbol-major

    def expected_statistics(self, shard: CipherShard, shared_log_potentials, private_scale: float = 1.0) -> Statistics:
        K, C = self.tables.num_words, self.num_symbols
        log_emission_t = np.ascontiguousarray(np.asarray(shared_log_potentials).reshape(C, K))
        if self.inference == "exact":
            counts, logz = _exact_estep(shard, log_emission_t, self.tables)
            private = {"context_length": np.array(0.0), "context_positions": np.array(0.0),
                       "arcs": np.array(float(np.sum(shard.lengths) * K * K)), "failed": np.array(0.0)}
        else:
            counts, (logz, ctx, arcs, failed) = shard_estep(shard.symbols, shard.offsets, log_emission_t, self.tables,
                                                            self.size, self.inference)
            private = {"context_length": np.array(ctx), "context_positions": np.array(float(np.sum(shard.lengths - 1))),
                       "arcs": np.array(float(arcs)), "failed": np.array(float(failed))}
        return Statistics(shared=counts.ravel(), private=private, log_normalizer=float(logz))

    def counts(self, shard, shared_marginals, statistics: Statistics) -> dict:
        out = {"emission": np.asarray(shared_marginals).reshape(self.num_symbols, self.tables.num_words)}
        out.update(statistics.private)
        return out

    def maximize(self, counts: dict) -> None:
        n = counts["emission"].T + self.laplace  # (K, C)
        self.emission_ = n / n.sum(axis=1, keepdims=True)
        self.last_counts_ = counts

    def log_prior(self) -> float:
        """α Σ log θ: the Laplace (Dirichlet) penalty the M-step maximises with the likelihood."""
        return float(self.laplace * np.log(self.emission_).sum())


def _exact_estep(shard: CipherShard, log_emission_t, tables: TransitionTables, batch: int = 128):
    """Exact 1st-order E-step by dense-chain forward–backward, sentences batched by length."""
    from varorder import chain

    if tables.order != 1:
        raise ParameterError("exact inference is only available for the 1st-order chain (2nd order has K^2 states)", name='tables', value=tables)
    K = tables.num_words
    transitions = tables.log_bigram[:K, :K]
    start = tables.log_bigram[K, :K]
    end = tables.log_bigram[:K, K]
    lengths = shard.lengths
    order = np.argsort(lengths, kind="stable")
    counts = np.zeros((log_emission_t.shape[0], K))
    total = 0.0
    for a in range(0, len(order), batch):
        ids = order[a:a + batch]
        L = int(lengths[ids].max())
        sym = np.zeros((len(ids), L), dtype=np.int64)
        mask = np.zeros((len(ids), L), dtype=bool)
        for r, s in enumerate(ids):
            n = lengths[s]
            sym[r, :n] = shard.symbols[shard.offsets[s]:shard.offsets[s + 1]]
            mask[r, :n] = True
        emissions = log_emission_t[sym]
        node, _, logz = chain.marginals(emissions, transitions, start=start, end=end, lengths=lengths[ids],
                                        edges=False, return_log_z=True)
        total += float(logz.sum())
        np.add.at(counts, sym[mask], node[mask])
    return counts, total


def mapping_from_table(emission, log_prior_words) -> np.ndarray:
    """Decoded word of every cipher symbol: argmax_w p(c | w) p(w) (ties → lowest id)."""
    scores = np.log(emission) + np.asarray(log_prior_words)[:, None]
    return np.argmax(scores, axis=0)


class Decipherer(ParamsMixin):
    """Learn a substitution's emission table by EM (see the module docstring).

    Parameters are keyword-only and checked by :meth:`fit` (a ParameterError names the parameter
    and the value passed); what needs the learned table raises NotFittedError before :meth:`fit`.

    Parameters
    ----------
    order : 1 or 2 (plaintext chain order).
    inference : "exact" (order 1), "rcms" or "beam".
    size : contexts / beam entries per position (RCMS, beam).
    n_iter : EM iterations.
    laplace : α of the M-step (0.01 in App. B).
    discount, smoothing : the plaintext LM's absolute discounting (0.25, 0.01 in App. B).
    init_noise, seed : optional seeded perturbation of the uniform initial table.
    n_shards : E-step work units; executor : None, a ``concurrent.futures`` executor or a
        ``dask.distributed`` client (the :class:`~varorder.agree.AgreementEM` path).
    progress : report the EM iterations (a bar on a terminal, a summary line otherwise).

    Attributes after ``fit``: ``tables_``, ``model_`` (:class:`DecipherHMM`), ``emission_``
    (K, C), ``mapping_`` (decoded word per symbol), ``history_`` (one dict per iteration:
    log-likelihood and penalised objective of the parameters entering it, seconds, mean
    context length, arcs, failed sentences, and mapping accuracy when the key is known).
    """

    _requires_y = False  # fit takes the data alone (scikit-learn's target tag)

    def __init__(self, *, order: int = 2, inference: str = "rcms", size: int = 60, n_iter: int = 20,
                 laplace: float = 0.01, discount: float = 0.25, smoothing: float = 0.01, init_noise: float = 0.0,
                 seed: int = 0, n_shards: int = 1, executor=None, progress: bool = False, callback=None):
        self.order = order
        self.inference = inference
        self.size = size
        self.n_iter = n_iter
        self.laplace = laplace
        self.discount = discount
        self.smoothing = smoothing
        self.init_noise = init_noise
        self.seed = seed
        self.n_shards = n_shards
        self.executor = executor
        self.progress = progress
        self.callback = callback

    def _validate(self):
        if self.order not in (1, 2):
            raise ParameterError(f"order must be 1 or 2, got {self.order!r}", name='order', value=self.order)
        if self.inference not in INFERENCE:
            raise ParameterError(f"inference must be one of {INFERENCE}, got {self.inference!r}", name='inference', value=self.inference)
        if self.inference == "exact" and self.order != 1:
            raise ParameterError("inference='exact' needs order=1 (the 2nd-order chain has K^2 = 250,000 states)", name='inference', value=self.inference)
        if int(self.size) != self.size or self.size < 1:
            raise ParameterError(f"size must be a positive integer, got {self.size!r}", name='size', value=self.size)
        if not self.laplace > 0:
            raise ParameterError(f"laplace must be positive, got {self.laplace!r}", name='laplace', value=self.laplace)

    def _check_params(self):
        """Every constructor argument in its domain (a loaded model's too)."""
        self._validate()
        for name in ("n_iter", "size"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
                raise ParameterError(f"{name} must be a non-negative integer, got {value!r:.40}", name=name, value=value)
        for name in ("laplace", "discount", "smoothing", "init_noise"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not np.isfinite(value) or value < 0:
                raise ParameterError(f"{name} must be a finite number >= 0, got {value!r:.40}", name=name, value=value)
        as_rng(self.seed)
        check_int(self, "n_shards", 1)
        check_bool(self, "progress")

    def fit(self, data: DecipherData, num_cipher: int | None = None, tables: TransitionTables | None = None) -> "Decipherer":
        """EM on the first ``num_cipher`` cipher sentences of ``data`` (all by default).
        The key, when ``data`` has it, is used only to report accuracy per iteration."""
        self._check_params()
        self.tables_ = tables if tables is not None else fit_transitions(
            data.words, data.plaintext, self.order, self.discount, self.smoothing)
        if self.tables_.order != self.order:
            raise ParameterError(f"tables are of order {self.tables_.order}, the estimator of order {self.order}", name='tables', value=tables)
        symbols, offsets = data.cipher_flat(num_cipher)
        K = len(data.words)
        num_symbols = max(K, int(symbols.max()) + 1)
        observed = np.unique(symbols)
        scored = data.scored_symbols(symbols)
        unk_symbol = data.unk_symbol if data.unk_symbol is not None and data.unk_symbol in observed else None
        truth = data.cipher_key.inverse if data.cipher_key is not None else None
        log_prior_words = self.tables_.log_unigram[:K]
        self.model_ = DecipherHMM(self.tables_, num_symbols, self.inference, int(self.size), self.laplace)
        self.model_.initialize(self.init_noise, self.seed)
        shards = split_shards(symbols, offsets, self.n_shards)
        self.history_ = []
        clock = [time.perf_counter(), time.process_time()]

        def record(iteration, em):
            model = em.submodels_[0]
            counts = model.last_counts_
            now = [time.perf_counter(), time.process_time()]
            entry = {"iteration": iteration + 1, "log_likelihood": em.objectives_[-1],
                     "seconds": now[0] - clock[0], "cpu_seconds": now[1] - clock[1],
                     "context_length": float(counts["context_length"]) / max(float(counts["context_positions"]), 1.0),
                     "arcs": float(counts["arcs"]), "failed": int(counts["failed"])}
            entry["objective"] = entry["log_likelihood"] + getattr(self, "_prior_before", 0.0)
            self._prior_before = model.log_prior()
            if truth is not None:
                decoded = mapping_from_table(model.emission_, log_prior_words)
                entry["accuracy"] = mapping_accuracy(decoded, truth, scored)
                if unk_symbol is not None:
                    entry["unk_symbol_correct"] = bool(decoded[unk_symbol] == truth[unk_symbol])
            self.history_.append(entry)
            clock[:] = [time.perf_counter(), time.process_time()]
            if self.callback is not None:
                self.callback(entry, self)

        self._prior_before = self.model_.log_prior()
        em = AgreementEM(submodels=[self.model_], mode="independent", n_iter=int(self.n_iter), executor=self.executor,
                         callback=record, progress=self.progress)
        em.fit(shards)
        self.emission_ = self.model_.emission_
        self.mapping_ = mapping_from_table(self.emission_, log_prior_words)
        self.observed_symbols_ = observed
        return self

    def decode_symbols(self) -> np.ndarray:
        """Decoded plaintext word id of every cipher symbol (``mapping_``)."""
        check_is_fitted(self, "mapping_")
        return self.mapping_

    _PARAMS = ("order", "inference", "size", "n_iter", "laplace", "discount", "smoothing", "init_noise", "seed")

    def save(self, path, words) -> None:
        """npz + JSON model file (:mod:`varorder.models.persist`): the table, the mapping,
        the observed symbols, the word list and the per-iteration history."""
        from varorder.models.persist import save_model

        check_is_fitted(self, "emission_")
        save_model(path, "Decipherer", {name: getattr(self, name) for name in self._PARAMS},
                   {"words": list(words), "history": self.history_},
                   {"emission": self.emission_, "mapping": self.mapping_, "observed_symbols": self.observed_symbols_})

    @classmethod
    @model_loader
    def load(cls, path) -> "Decipherer":
        from varorder.models.persist import check_shapes, load_model

        from varorder.models.persist import check_keys

        params, state, arrays = load_model(path, "Decipherer", ("emission", "mapping", "observed_symbols"))
        check_keys(path, "params", params, cls._PARAMS)
        check_keys(path, "state", state, ("words", "history"))
        words = state.get("words")
        if not isinstance(words, list) or not words or not all(isinstance(w, str) for w in words) \
                or len(set(words)) != len(words):
            raise FormatError(f"{path}: the model's metadata lacks its word list (distinct strings)", path=path)
        if not isinstance(state.get("history", []), list):
            raise FormatError(f"{path}: the model's history must be a list", path=path)
        K = len(words)
        C = arrays["emission"].shape[1] if arrays["emission"].ndim == 2 else -1
        check_shapes(path, arrays, {"emission": (K, C), "mapping": (C,)})
        emission, mapping, observed = arrays["emission"], arrays["mapping"], arrays["observed_symbols"]
        if (emission < 0).any() or not np.allclose(emission.sum(axis=1), 1.0):
            raise FormatError(f"{path}: the emission table's rows must be probability distributions", path=path)
        if mapping.dtype.kind not in "iu" or (mapping < 0).any() or (mapping >= K).any():
            raise FormatError(f"{path}: 'mapping' must hold word ids in [0, {K})", path=path)
        if observed.ndim != 1 or observed.dtype.kind not in "iu" or (observed < 0).any() or (observed >= C).any():
            raise FormatError(f"{path}: 'observed_symbols' must be a 1-D array of symbols in [0, {C})", path=path)
        if observed.size == 0 or (np.diff(observed.astype(np.int64)) <= 0).any():
            raise FormatError(f"{path}: 'observed_symbols' must be non-empty, increasing and without repeats", path=path)
        model = cls(**{k: params[k] for k in cls._PARAMS if k in params})
        model.emission_ = arrays["emission"]
        model.mapping_ = arrays["mapping"].astype(np.int64)
        model.observed_symbols_ = arrays["observed_symbols"].astype(np.int64)
        model.words_ = words
        model.history_ = state.get("history", [])
        return model

    def write_table(self, path, words, top: int = 3) -> None:
        """The learned table as TSV: symbol, decoded word, its p(c | w), then the next
        ``top - 1`` candidates, for every observed symbol."""
        check_is_fitted(self, "tables_")
        from varorder.decipher.data import _write_atomic
        from pathlib import Path

        scores = np.log(self.emission_) + self.tables_.log_unigram[:len(words)][:, None]
        lines = ["symbol\t" + "\t".join(f"word{r + 1}\tp{r + 1}" for r in range(top))]
        for c in self.observed_symbols_:
            best = np.argsort(-scores[:, c], kind="stable")[:top]
            lines.append(f"{c}\t" + "\t".join(f"{words[w]}\t{self.emission_[w, c]:.6g}" for w in best))
        _write_atomic(Path(path), "\n".join(lines) + "\n")

    def history_json(self) -> str:
        return json.dumps(self.history_, indent=1)
