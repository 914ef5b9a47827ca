"""Two-direction word aligner trained independently or by agreement, with decoding and save/load.

Pipeline (Liang, Klein & Jordan 2008, §5.2; Liang, Taskar & Klein 2006):
IBM Model 1 in both directions trained independently, then (``model="hmm"``) the
two HMM aligners initialised from those tables and trained in ``training`` mode:

* ``"independent"`` — ordinary EM in each direction;
* ``"agreement"`` — domain-approximate product EM: each direction's E-step uses
  τ₁(f|e)·τ₂(e|f) on the edges, the M-steps share the averaged edge posteriors;
* ``"product"`` — the 2006 variant: separate E-steps, element-wise product of
  the edge posteriors in the M-steps.

Decoding: posterior decoding keeps (i, j) with ½(µ₁ᵢⱼ + µ₂ᵢⱼ) ≥ δ, where µ_m are
each direction's edge posteriors E(b_m, Z_m); or Viterbi per direction combined
by a symmetrization (intersection, union, grow-diag, grow-diag-final, grow-diag-final-and).
Each direction's Viterbi links and sentence log-likelihoods log p_m(target | source) are
available on their own (:meth:`WordAligner.directional`, :meth:`WordAligner.sentence_scores`).

Saved models are one ``.npz`` (tables, pair keys, vocabularies) with a JSON
header (``format_version``, the text normalisation the model was trained with); no pickle.
Loading trusts no file: pair keys must be sorted and unique (checked in one pass instead of
re-sorting them), table sizes must match.
"""

from __future__ import annotations

import os
from contextlib import ExitStack

import numba
import numpy as np

from varorder.agree.align import HMMAligner, IBM1
from varorder.agree.corpus import EncodedBitext, LongPairWarning, PairIndex, Vocabulary, encode_bitext, index_corpus
from varorder.agree.product_em import AgreementEM
from varorder.agree.symmetrize import SYMMETRIZATIONS, symmetrize
from varorder.base import ParamsMixin, check_bool, check_choice, check_int, check_is_fitted, check_real
from varorder.errors import FormatError, ParameterError
from varorder.models.persist import check_shapes, load_model, model_loader, save_model
import varorder._numba_start  # noqa: E402,F401,I001  (Numba's cache saves locked across processes)

__all__ = ["WordAligner", "TRAINING", "DECODINGS", "FORMAT_VERSION", "LongPairWarning"]

TRAINING = {"independent": "independent", "agreement": "domain", "product": "product"}
DECODINGS = ("posterior",) + SYMMETRIZATIONS
FORMAT_VERSION = 1  # v1 files written before the normalisation was recorded read as "none"
_KIND = "WordAligner"
def _grouped(items, origin):
    """Consecutive pieces of one pair together: (pair index, [(item, English offset, French offset)])."""
    index, e_offset, f_offset = origin
    current, group = None, []
    for k, item in enumerate(items):
        if group and index[k] != current:
            yield current, group
            group = []
        current = index[k]
        group.append((item, e_offset[k], f_offset[k]))
    if group:
        yield current, group


def _merged_links(links, origin):
    """Per pair, the union of its pieces' links shifted to the pair's positions."""
    if origin is None:
        yield from links
        return
    for _, group in _grouped(links, origin):
        yield {(i + i0, j + j0) for piece, i0, j0 in group for i, j in piece}


@numba.njit(cache=True, inline="always")
def _digits(n):
    d = 1
    while n >= 10:
        n //= 10
        d += 1
    return d


@numba.njit(cache=True, inline="always")
def _put_number(out, at, n, width):
    for k in range(width - 1, -1, -1):
        out[at + k] = 48 + n % 10
        n //= 10
    return at + width


@numba.njit(cache=True)
def _pharaoh_bytes(mu, edge_off, f_len, threshold):
    """ASCII Pharaoh lines of every pair of a shard: the links (i, j) with ``mu[edge] >= threshold``,
    ``i-j`` in increasing (i, j) order (the English-major edge order), one '\n'-terminated line per pair."""
    size = 0
    for s in range(f_len.size):
        J = f_len[s]
        n = 0
        for k in range(edge_off[s], edge_off[s + 1]):
            if mu[k] >= threshold:
                r = k - edge_off[s]
                size += _digits(r // J) + 1 + _digits(r % J)
                n += 1
        size += max(n - 1, 0) + 1
    out = np.empty(size, dtype=np.uint8)
    at = 0
    for s in range(f_len.size):
        J = f_len[s]
        first = True
        for k in range(edge_off[s], edge_off[s + 1]):
            if mu[k] >= threshold:
                r = k - edge_off[s]
                if not first:
                    out[at] = 32  # ' '
                    at += 1
                first = False
                i, j = r // J, r % J
                at = _put_number(out, at, i, _digits(i))
                out[at] = 45  # '-'
                at = _put_number(out, at + 1, j, _digits(j))
        out[at] = 10  # '\n'
        at += 1
    return out


_SAVED_PARAMS = ("model", "training", "ibm1_iterations", "iterations", "null_prob", "max_jump", "threshold",
                 "shard_size", "normalization", "band", "max_length")


class WordAligner(ParamsMixin):
    """English–French word aligner (IBM Model 1 or HMM in both directions).

    Parameters are keyword-only and checked by :meth:`fit` (a ParameterError names the parameter
    and the value passed); decoding before :meth:`fit` raises NotFittedError.

    Parameters
    ----------
    model : "hmm" or "ibm1".
    training : one of :data:`TRAINING` (for the final model; IBM 1 initialisation
        of an HMM is always independent).
    ibm1_iterations, iterations : EM iterations of IBM 1 and of the final model.
    null_prob, max_jump : HMM p₀ and jump bucket range D. p₀ = 0.05 was chosen on the 37-sentence
        Hansards trial gold (it beat 0.1–0.3 there at 10k and was no worse at 100k and 300k pairs;
        see docs/notes/benchmarks-notebook.md); EM's own estimate of p₀ is about 0.2 but decodes worse.
    band : jump band B of long sentences: a pair whose source side has more than B words prunes jumps
        longer than B words (O(T·S·B) instead of O(T·S²); None: never). The default 100 leaves every
        Hansards sentence (≤ 80 words) to the full computation. An extension (not in Liang et al. 2008).
    max_length : length guard: a pair with more than this many words on a side is cut into
        ⌈longest side / max_length⌉ consecutive pieces at proportional positions (the diagonal),
        each aligned on its own, with a warning — links never cross a cut, and the piece scores
        add up; None: never cut. The HMM's cost is quadratic in a pair's length: unguarded, a
        1,000-word pair took minutes and 5,000 words ran out of memory; cut at 200 (no Hansards
        sentence comes near it) they take seconds. An extension (not in Liang et al. 2008).
    threshold : δ of posterior decoding. 0.6 was chosen on the trial gold too: with it both
        agreement variants beat eflomal and independent training at 10k, 100k and 300k pairs
        (at 0.5, ½(µ₁ + µ₂) ≥ δ keeps every link that one direction alone is sure of).
    shard_size : sentence pairs per E-step task. An agreement E-step holds two float64 arrays over a
        shard's edges (|e|·|f| per pair: the summed potentials, and the posteriors both directions add
        into) and its int32 pair ids: 5k Hansards pairs ≈ 15 MB (10k held 15 MB more at the peak
        of the 100k job and saved no time); counts go straight into the totals
        (one total shared by both directions in the agreement modes).
    executor : None, a ``concurrent.futures`` executor, a ``dask.distributed.Client`` or a
        :class:`varorder.parallel.Executor` (:meth:`fit_sources` reads the corpus on its workers).
    progress : report training (bars on a terminal, a summary line per stage otherwise).
    normalization : the text normalisation the training text went through, as a dict
        (:class:`varorder.io.bitext.Normalization`); recorded in the model so that ``apply`` repeats it.

    Fitted attributes: ``e_vocab_``, ``f_vocab_``, ``pairs_`` (:class:`PairIndex`),
    ``models_`` ([f|e model, e|f model]), ``history_`` (list of (phase, objectives)).
    """

    _requires_y = False  # fit takes the data alone (scikit-learn's target tag)

    def __init__(self, *, model: str = "hmm", training: str = "agreement", ibm1_iterations: int = 5,
                 iterations: int = 5, null_prob: float = 0.05, max_jump: int = 7, threshold: float = 0.6,
                 shard_size: int = 5000, executor=None, progress: bool = False, callback=None,
                 normalization: dict | None = None, band: int | None = 100, max_length: int | None = 200):
        self.model = model
        self.training = training
        self.ibm1_iterations = ibm1_iterations
        self.iterations = iterations
        self.null_prob = null_prob
        self.max_jump = max_jump
        self.threshold = threshold
        self.shard_size = shard_size
        self.executor = executor
        self.progress = progress
        self.callback = callback
        self.normalization = normalization
        self.band = band
        self.max_length = max_length

    # -- training ----------------------------------------------------------
    def _check_params(self):
        check_choice(self, "model", ("hmm", "ibm1"))
        check_choice(self, "training", sorted(TRAINING))
        check_int(self, "ibm1_iterations", 0)
        check_int(self, "iterations", 0)
        check_int(self, "shard_size", 1)
        check_real(self, "null_prob", 0, 1)
        check_int(self, "max_jump", 1)
        check_int(self, "band", 1, allow_none=True)
        check_real(self, "threshold", 0, 1)
        check_int(self, "max_length", 1, allow_none=True)
        check_bool(self, "progress")

    def _encoded(self, pairs) -> EncodedBitext:
        """``pairs`` over this aligner's vocabularies: an :class:`~varorder.agree.corpus.EncodedBitext` as
        it is, the training encoding kept for the list :meth:`fit` was given with ``keep_encoding``, or
        the list encoded now. Pairs longer than ``max_length`` are cut by
        :func:`~varorder.agree.corpus.encode_bitext` (the one length guard); the result's ``origin``
        puts the pieces back together."""
        check_is_fitted(self, "models_")
        if isinstance(pairs, EncodedBitext):
            if pairs.e_vocab is not self.e_vocab_ or pairs.f_vocab is not self.f_vocab_:
                raise ParameterError("the EncodedBitext was encoded with other vocabularies than this aligner's; "
                                     "encode it with aligner.e_vocab_ and aligner.f_vocab_ (grow=False)", name='pairs', value=pairs)
            return pairs
        kept = getattr(self, "_kept_encoding", None)
        if kept is not None and kept[0] is pairs:
            return kept[1]
        return encode_bitext(pairs, self.e_vocab_, self.f_vocab_, self.shard_size, grow=False,
                             max_length=self.max_length)

    def encode(self, pairs):
        """Shards of sentence pairs (a list of token pairs or an EncodedBitext, see :meth:`_encoded`; pairs
        longer than ``max_length`` cut into pieces) attached to the fitted pair table."""
        shards = self._encoded(pairs).shards
        for s in shards:
            if s.attached_to is not self.pairs_:
                s.attach(self.pairs_)
        return shards

    def fit(self, pairs, keep_encoding: bool = False):
        """Train on a list of (English tokens, French tokens), or on an
        :class:`~varorder.agree.corpus.EncodedBitext` (its vocabularies become the aligner's); returns self.

        ``keep_encoding``: keep the training shards so that aligning the same list afterwards
        skips re-encoding it (the command line's ``train -a``); :meth:`release_encoding` frees them.
        An EncodedBitext is its own encoding.
        """
        self._check_params()
        self._kept_encoding = None
        encoded = pairs if isinstance(pairs, EncodedBitext) else encode_bitext(
            pairs, Vocabulary(), Vocabulary(), self.shard_size, grow=True, max_length=self.max_length)
        self.e_vocab_, self.f_vocab_ = encoded.e_vocab, encoded.f_vocab
        shards = encoded.shards
        if not shards:
            raise ParameterError("pairs must hold at least one sentence pair", name='pairs', value=pairs)
        self.pairs_ = index_corpus(shards)
        if keep_encoding and encoded is not pairs:
            self._kept_encoding = (pairs, encoded)
        self.history_ = []
        ibm1 = [IBM1("f|e", self.pairs_, len(self.f_vocab_)).initialize(),
                IBM1("e|f", self.pairs_, len(self.e_vocab_)).initialize()]
        if self.model == "ibm1":
            self.models_ = ibm1
            self._train(shards, TRAINING[self.training], self.ibm1_iterations, "ibm1")
            return self
        self.models_ = ibm1
        self._train(shards, "independent", self.ibm1_iterations, "ibm1")
        self.models_ = [HMMAligner(m.direction, self.pairs_, m.n_target_words, self.null_prob,
                                   self.max_jump, self.band).initialize().copy_tables_from(m) for m in ibm1]
        del ibm1
        self._train(shards, TRAINING[self.training], self.iterations, "hmm")
        return self

    def fit_sources(self, sources, read):
        """Train on a corpus in pieces, each read, encoded and kept where it runs (the workers of
        ``executor``; here without one): ``read(source)`` yields the (English tokens, French tokens)
        pairs of one source, e.g. :func:`varorder.io.bitext.iter_joint` over file names (picklable for
        process and Dask workers). The driver never holds the corpus; the model equals a local run's
        bit for bit on any executor (see :mod:`varorder.agree.sources`). Returns self."""
        from varorder.agree.sources import fit_sources

        self._check_params()
        return fit_sources(self, sources, read, TRAINING[self.training])

    def _train(self, shards, mode, n_iter, phase):
        callback = None
        if self.callback is not None:
            def callback(it, est):
                self.callback(phase, it, self)
        em = AgreementEM(submodels=self.models_, mode=mode, n_iter=n_iter, executor=self.executor,
                         progress=self.progress, callback=callback)
        with ExitStack() as stack:
            if self.executor is None:  # E-steps in this thread: each may take its table's log in place
                for m in self.models_:
                    stack.enter_context(m.consuming_tables())
            em.fit(shards)
        self.history_.append((f"{phase}/{mode}", list(em.objectives_)))

    # -- decoding ----------------------------------------------------------
    def _shard_posteriors(self, shard, joint: bool) -> np.ndarray:
        """½(µ₁ + µ₂) over the shard's edges (see :meth:`posteriors`)."""
        first, second = self.models_
        with shard.pair_scope():  # the second direction adds its posteriors into the first's array
            if joint:
                total = first.shared_log_potentials(shard)
                total += second.shared_log_potentials(shard)
                mu = first.expected_statistics(shard, total).shared
                second.expected_statistics(shard, total, add_shared_to=mu)
            else:
                mu = first.posteriors(shard)
                second.expected_statistics(shard, second.shared_log_potentials(shard), add_shared_to=mu)
        mu *= 0.5
        return mu

    def iter_posteriors(self, pairs, joint: bool = False):
        """:meth:`posteriors`, one pair at a time (one shard's edges in memory at a time)."""
        encoded = self._encoded(pairs)
        origin = encoded.origin
        if origin is None:
            yield from self._iter_piece_posteriors(encoded, joint)
            return
        for _, group in _grouped(self._iter_piece_posteriors(encoded, joint), origin):
            last, e_last, f_last = group[-1]
            merged = np.zeros((e_last + last.shape[0], f_last + last.shape[1]))
            for block, i0, j0 in group:
                merged[i0:i0 + block.shape[0], j0:j0 + block.shape[1]] = block
            yield merged

    def _iter_piece_posteriors(self, encoded, joint: bool):
        for shard in self.encode(encoded):
            mu = self._shard_posteriors(shard, joint)
            I, J = shard.e_lengths, shard.f_lengths
            for s in range(shard.n_sentences):
                yield mu[shard.edge_offsets[s]:shard.edge_offsets[s + 1]].reshape(I[s], J[s])

    def posteriors(self, pairs, joint: bool = False) -> list:
        """Per pair, the (|e|, |f|) matrix ½(µ₁ + µ₂) of edge posteriors.

        µ_m = E(b_m, Z_m), each direction on its own; with ``joint`` µ_m = E(b₁ + b₂, Z_m),
        the agreement E-step's posteriors. A pair cut by ``max_length`` gets its pieces' blocks
        (zero between them).
        """
        return list(self.iter_posteriors(pairs, joint))

    def iter_align(self, pairs, method: str = "posterior", threshold: float | None = None, joint: bool = False,
                   with_posteriors: bool = False):
        """:meth:`align`, one pair at a time (one shard's edges in memory at a time).

        ``with_posteriors``: yield (links, the pair's ½(µ₁ + µ₂) matrix of :meth:`posteriors`) instead,
        each computed once (posterior decoding reads its links off that matrix)."""
        if method not in DECODINGS:
            raise ParameterError(f"method must be one of {DECODINGS}, got {method!r}", name='method', value=method)
        if method == "posterior":
            delta = self.threshold if threshold is None else threshold
            for m in self.iter_posteriors(pairs, joint=joint):
                links = {(int(i), int(j)) for i, j in zip(*np.nonzero(m >= delta))}
                yield (links, m) if with_posteriors else links
            return
        encoded = self._encoded(pairs)

        def piece_links():
            for shard in self.encode(encoded):
                with shard.pair_scope():
                    first, second = (m.viterbi(shard) for m in self.models_)
                yield from (symmetrize(a, b, method) for a, b in zip(first, second))

        links = _merged_links(piece_links(), encoded.origin)
        yield from zip(links, self.iter_posteriors(encoded, joint=joint)) if with_posteriors else links

    def iter_pharaoh_text(self, pairs, threshold: float | None = None):
        """Posterior decoding (:meth:`iter_align`'s default) as Pharaoh text, one shard's lines at a time: the
        same lines as ``format_line`` on its links, '\n'-terminated, built in compiled code rather than
        as a set and a string per link (the Python formatting took ~1.5 CPU s of the 100k-pair job)."""
        delta = self.threshold if threshold is None else threshold
        encoded = self._encoded(pairs)
        if encoded.origin is not None:  # pieces of cut pairs are put back together by iter_align
            from varorder.io.pharaoh import format_line

            for links in self.iter_align(encoded, threshold=delta):
                yield format_line(links) + "\n"
            return
        for shard in self.encode(encoded):
            mu = self._shard_posteriors(shard, joint=False)
            yield _pharaoh_bytes(mu, shard.edge_offsets, shard.f_lengths, float(delta)).tobytes().decode("ascii")

    def align(self, pairs, method: str = "posterior", threshold: float | None = None, joint: bool = False) -> list:
        """Alignments (sets of (English i, French j), 0-based) of a list of token pairs or an
        :class:`~varorder.agree.corpus.EncodedBitext` (``joint``: posterior decoding with the agreement
        E-step, see :meth:`posteriors`)."""
        return list(self.iter_align(pairs, method, threshold, joint))

    def keep_log_tables_only(self) -> "WordAligner":
        """Replace each direction's translation table by its log rounded to float32: every decoding reads
        only the log, so half a table-sized array per direction is held instead of two. The aligner still
        aligns, scores and decodes (its log-potentials within 2⁻²⁴ relative of the float64 ones: the 100k
        job's alignments were byte-identical) but can no longer be saved; returns self."""
        check_is_fitted(self, "models_")
        for m in self.models_:
            m.keep_log_table_only()
        return self

    def release_encoding(self) -> None:
        """Drop the training shards kept by ``fit(keep_encoding=True)``."""
        self._kept_encoding = None

    def directional(self, pairs) -> tuple[list, list]:
        """Viterbi links of each direction alone, (f|e alignments, e|f alignments), as (English i, French j)."""
        encoded = self._encoded(pairs)
        forward, reverse = [], []
        for shard in self.encode(encoded):
            with shard.pair_scope():
                forward.extend(self.models_[0].viterbi(shard))
                reverse.extend(self.models_[1].viterbi(shard))
        return list(_merged_links(forward, encoded.origin)), list(_merged_links(reverse, encoded.origin))

    def sentence_scores(self, pairs) -> tuple[np.ndarray, np.ndarray]:
        """Per pair, log p(french | english) under the f|e model and log p(english | french) under e|f."""
        encoded = self._encoded(pairs)
        origin = encoded.origin
        forward, reverse = [], []
        for shard in self.encode(encoded):
            with shard.pair_scope():
                forward.append(self.models_[0].sentence_log_likelihoods(shard))
                reverse.append(self.models_[1].sentence_log_likelihoods(shard))
        cat = lambda parts: np.concatenate(parts) if parts else np.zeros(0)  # noqa: E731
        forward, reverse = cat(forward), cat(reverse)
        if origin is None:
            return forward, reverse
        index = np.asarray(origin[0], dtype=np.int64)
        return (np.bincount(index, weights=forward, minlength=len(encoded)),
                np.bincount(index, weights=reverse, minlength=len(encoded)))

    def unknown_share(self, pairs) -> tuple[float, float]:
        """Share of English and of French tokens that the model never saw in training."""
        check_is_fitted(self, "models_")
        if isinstance(pairs, EncodedBitext):
            e_len, f_len = pairs.lengths()
            unknown = pairs.unknown_tokens()
            return tuple(float(u / n) if n else 0.0 for u, n in zip(unknown, (e_len.sum(), f_len.sum())))
        counts = np.zeros((2, 2))
        for e, f in pairs:
            for side, (tokens, vocab) in enumerate(((e, self.e_vocab_), (f, self.f_vocab_))):
                counts[side, 0] += sum(t not in vocab.index for t in tokens)
                counts[side, 1] += len(tokens)
        return tuple(float(u / n) if n else 0.0 for u, n in counts)

    # -- persistence -------------------------------------------------------
    def save(self, path) -> None:
        """Write the fitted aligner to ``path`` (.npz with JSON metadata, see :mod:`varorder.models.persist`)."""
        check_is_fitted(self, "models_")
        if any(m.table_ is None for m in self.models_):
            raise ParameterError("this aligner keeps only the logs of its tables (keep_log_tables_only); save it before")
        params = {k: getattr(self, k) for k in _SAVED_PARAMS}
        arrays = {"pair_keys": self.pairs_.keys,
                  "e_vocab": np.array(self.e_vocab_.tokens), "f_vocab": np.array(self.f_vocab_.tokens)}
        for k, m in enumerate(self.models_):
            arrays[f"table{k}"] = m.table_
            arrays[f"null{k}"] = m.null_
            arrays[f"jumps{k}"] = m.jumps_ if isinstance(m, HMMAligner) else np.zeros(0)
        # uncompressed: inflating the tables of a 100k-pair model took longer than everything else in load()
        save_model(path, _KIND, params, {"format_version": FORMAT_VERSION, "history": self.history_}, arrays,
                   compress=False)

    @classmethod
    @model_loader
    def load(cls, path) -> "WordAligner":
        """Read a model written by :meth:`save`. Every array's dtype, shape and value range is
        checked against the metadata (vocabulary sizes, pair count, jump width), so that a
        damaged file is a FormatError naming it — never an out-of-bounds read in compiled code."""
        where = os.fspath(path)
        params, state, data = load_model(path, _KIND, ("pair_keys", "e_vocab", "f_vocab", "table0", "null0",
                                                       "jumps0", "table1", "null1", "jumps1"))
        if state.get("format_version") != FORMAT_VERSION:
            raise FormatError(f"{where}: unsupported {_KIND} format v{state.get('format_version')!r} "
                              f"(expected v{FORMAT_VERSION})", path=where)
        unknown = set(params) - set(_SAVED_PARAMS)
        if unknown:
            raise FormatError(f"{where}: unknown {_KIND} parameters {sorted(unknown)}", path=where)
        self = cls(**params)
        self._check_params()
        if not (isinstance(self.null_prob, (int, float)) and 0.0 <= self.null_prob < 1.0):
            raise FormatError(f"{where}: null_prob must be in [0, 1), got {self.null_prob!r:.40}", path=where)
        if isinstance(self.max_jump, bool) or not isinstance(self.max_jump, int) or not 1 <= self.max_jump <= 10_000:
            raise FormatError(f"{where}: max_jump must be an integer in [1, 10000], got {self.max_jump!r:.40}", path=where)
        if self.normalization is not None:
            from varorder.io.bitext import Normalization

            Normalization.from_dict(self.normalization, f"{where}: normalization")
        history = state.get("history", [])
        if not isinstance(history, list) or not all(isinstance(h, list) for h in history):
            raise FormatError(f"{where}: metadata 'history' must be a list of lists", path=where)
        self.history_ = [tuple(h) for h in history]
        for side in ("e_vocab", "f_vocab"):
            if data[side].dtype.kind != "U" or data[side].ndim != 1:
                raise FormatError(f"{where}: {side} must be a 1-d array of strings, got {data[side].dtype} "
                                  f"{data[side].shape}", path=where)
        self.e_vocab_ = Vocabulary.from_tokens(data["e_vocab"].tolist(), f"{where}: e_vocab")
        self.f_vocab_ = Vocabulary.from_tokens(data["f_vocab"].tolist(), f"{where}: f_vocab")
        n_e, n_f = len(self.e_vocab_), len(self.f_vocab_)
        keys = np.asarray(data["pair_keys"])
        if keys.dtype != np.int64 or keys.ndim != 1 or (keys.size > 1 and not (keys[1:] > keys[:-1]).all()):
            raise FormatError(f"{where}: pair_keys must be a sorted 1-d int64 array without repeats", path=where)
        # sorted keys: the first holds the smallest English id, the last the largest
        if keys.size and (keys[0] < 0 or (keys[-1] >> 32) >= n_e or int((keys & 0xFFFFFFFF).max()) >= n_f):
            raise FormatError(f"{where}: pair_keys name words outside the vocabularies ({n_e} English, {n_f} French)", path=where)
        self.pairs_ = PairIndex.from_sorted_unique(keys)
        width = 2 * self.max_jump + 1 if self.model == "hmm" else 0
        shapes = {"table0": (keys.size,), "table1": (keys.size,), "null0": (n_f,), "null1": (n_e,),
                  "jumps0": (width,), "jumps1": (width,)}
        check_shapes(path, data, shapes)
        for name in shapes:
            values = data[name]
            if values.dtype.kind != "f" or (values.size and (values.min() < 0 or values.max() > 1)):
                raise FormatError(f"{where}: array {name!r} must hold probabilities in [0, 1]", path=where)
        self.models_ = []
        for k, (direction, n_target) in enumerate((("f|e", n_f), ("e|f", n_e))):
            if self.model == "hmm":
                m = HMMAligner(direction, self.pairs_, n_target, self.null_prob, self.max_jump, self.band)
                m.jumps_ = np.ascontiguousarray(data[f"jumps{k}"], dtype=np.float64)
            else:
                m = IBM1(direction, self.pairs_, n_target)
            m.table_ = np.ascontiguousarray(data[f"table{k}"], dtype=np.float64)
            m.null_ = np.ascontiguousarray(data[f"null{k}"], dtype=np.float64)
            self.models_.append(m)
        return self
