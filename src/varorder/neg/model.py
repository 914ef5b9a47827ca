"""Referring-expression choice for named-entity generation: Bouchard's (GREC-NEG 2010) factor graph
learned by SampleRank, and the baselines in the same harness.

For a document with slots t = 1…N (:mod:`varorder.neg.task`), each choosing a candidate cₜ of its
entity's list, the model scores (Bouchard §2; :mod:`varorder.factorgraph.domains`)

    s(c) = Σₜ θ·φ(xₜ, cₜ)                                  unary: slot context × candidate attribute
         + Σ_(i, j) chain  θ_P[e_ij, a(cᵢ), a(cⱼ)]          contiguous mentions of one entity (distance code)
         + Σ_(t−1, t) other θ_P[e′, a(cₜ₋₁), a(cₜ)]          contiguous slots of different entities
         + Σₜ θ_N[link(t, c), a(cₜ)] (+ θ_R[link, rel])       link to the entity's previous *name* (label-dependent)

with a(c) the candidate's type × case attribute and rel, when slot t holds a name too, whether it
repeats the previous name, shortens it or neither. φ conjoins every slot feature (relation, case
from the syntax, previous/next POS and word, position in the sentence, first mention in the
document / paragraph, sentence distance to the entity's previous mention and whether another
person was mentioned in between, genre, ...) with a(c) and with its REG08 type, plus
candidate-specific features (length, rank among the entity's names, determiner of a common NP,
pronoun case agreement) conjoined with the first-mention context.

Methods (``method``):

* ``first-mention`` (baseline a): a name at an entity's first mention in a paragraph (the
  longest name at its first mention in the document, the shortest name later), a 3rd-person
  pronoun of the slot's case after.
* ``unary`` (b): unary factors only, an independent log-linear model per slot trained by exact
  maximum likelihood (L2, L-BFGS) and decoded by argmax.
* ``chain`` (c): unary + contiguous factors over each entity's mentions, a linear chain per entity
  trained by exact maximum likelihood and decoded by Viterbi with :mod:`varorder.chain`. The
  pair factor's edge code varies along the chain, so a chain state is (candidate, code of the
  outgoing edge), the codes fixed by ``allowed``; entities are batched by domain size.
* ``samplerank`` (d): the full graph trained by SampleRank (Wick et al. 2009) and decoded by
  annealed Metropolis–Hastings from the unary argmax, then greedy sweeps.
  ``warm_start="chain"`` (e) first fits (c) and starts SampleRank from its weights.

Training objective of SampleRank: o(c) = −Σₜ [type(cₜ) ≠ gold type] + [string(cₜ) ≠ gold string].

Extensions (options, off by default; the error analysis behind them is in docs/notes/29-neg.md):
``link_between`` (the name link's code also tells whether another entity's slot lies between),
``warm_start="unary"`` with ``unary_step`` (start from the exact unary fit, its weights held or
moved by a scaled step), ``cues`` (unary person cues: 1st/2nd person words in the slot's sentence
outside every slot, inside quotes), ``chain_pairs=False`` (with ``other_pairs=False`` and
``link_factors=False``: SampleRank over unary factors only, an ablation of the structure).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import scipy.optimize
import scipy.sparse as sp

from varorder import chain
from varorder._progress import Progress
from varorder.base import (DEPRECATED, ParamsMixin, check_bool, check_choice, check_int, check_is_fitted, check_real,
                           flat_params, nested_params, options_with_deprecated)
from varorder.engine.threads import single_threaded_blas
from varorder.errors import FormatError, ParameterError
from varorder.factorgraph import domains
from varorder.factorgraph.kernels import GIBBS, METROPOLIS
from varorder.factorgraph.samplerank import SampleRankOptions, check_samplerank_options
from varorder.models import persist
from varorder.models.features import FeatureIndexer
from varorder.neg.task import ATTR_INDEX, ATTRS, normal_key

__all__ = ["NegGenerator", "NegOptions", "METHODS"]

METHODS = ("first-mention", "unary", "chain", "samplerank")
_PROPOSALS = {"gibbs": GIBBS, "mh": METROPOLIS}
_RULES = {"perceptron": 0, "mira": 1}
_PAIRS = {"proposal": 0, "neighbourhood": 1}
_WARM = (None, "chain", "unary")
_CHAIN_DISTANCE = (0, 1, 3)  # sentence distance buckets of chain edges: 0, 1, 2-3, 4+
_N_CHAIN_CODES = 2 * (len(_CHAIN_DISTANCE) + 1)
_N_OTHER_CODES = 3  # contiguous slots of different entities: same sentence, next, farther
_LINK_BUCKETS = np.array([0, 1, 2, 2, 3, 3, 3, 3, 4], dtype=np.int64)  # sentence distance → link bucket
_N_LINK_BUCKETS = int(_LINK_BUCKETS.max()) + 1
_PARAMS = ("method", "link_factors", "link_between", "chain_pairs", "other_pairs", "warm_start", "n_epochs", "rule",
           "proposal", "pairs",
           "step_size", "C", "margin", "temperature", "average", "init", "anneal_sweeps", "anneal_start",
           "anneal_end", "l2", "max_iter", "unary_step", "cues", "random_state", "verbose")


def _bucket(value, edges) -> int:
    for i, edge in enumerate(edges):
        if value <= edge:
            return i
    return len(edges)


_FIRST_PERSON = frozenset("i me my mine myself we us our ours ourselves".split())
_SECOND_PERSON = frozenset("you your yours yourself yourselves".split())
_QUOTES = frozenset(('"', "“", "”", "``", "''"))


def _person(text: str) -> str:
    first = text.split(" ", 1)[0].lower()
    return "1" if first in _FIRST_PERSON else "2" if first in _SECOND_PERSON else "3"


def _slot_cues(document, slot, holes) -> list:
    """Person cues of a slot's surroundings (the ``cues`` extension): whether its sentence holds a 1st or
    2nd person word outside every slot (the other holes' words are not known at generation time), and
    whether it stands inside double quotes (an odd number of quote marks since its paragraph began)."""
    starts = document.sentence_starts
    sentence_start = starts[slot.sentence]
    sentence_end = starts[slot.sentence + 1] if slot.sentence + 1 < len(starts) else len(document.words)
    words = [document.words[p].lower() for p in range(sentence_start, sentence_end) if p not in holes]
    paragraph_start = starts[document.paragraph_of_sentence.index(slot.paragraph)]
    quotes = sum(1 for p in range(paragraph_start, slot.start) if p not in holes and document.words[p] in _QUOTES)
    return [f"ctx1={any(w in _FIRST_PERSON for w in words)}", f"ctx2={any(w in _SECOND_PERSON for w in words)}",
            f"quoted={quotes % 2 == 1}"]


def _candidate_features(document, slot, candidates, index, cues=None) -> list:
    """Feature names of candidate ``index`` at ``slot`` (slot features conjoined with its attribute and type;
    ``cues`` (:func:`_slot_cues`) conjoined with the candidate's grammatical person)."""
    c = candidates[index]
    attr, reg08 = c.attr, c.reg08
    feats = slot.features
    out = [f"bias|{attr}", f"bias|T={reg08}"]
    out += [f"{f}|{attr}" for f in feats]
    out += [f"{f}|T={reg08}" for f in feats]
    context = "first_in_doc" if "first_in_doc" in feats else "first_in_paragraph" if "first_in_paragraph" in feats \
        else "later"
    words = c.text.split()
    out.append(f"clen={_bucket(len(words), (1, 2, 3, 6))}|{reg08}|{context}")
    if reg08 == "name":
        names = sorted({len(x.text.split()) for x in candidates if x.is_name}, reverse=True)
        rank = min(names.index(len(words)), 2)
        out.append(f"namerank={rank}|{context}")
        out.append(f"namerank={rank}|{attr}|{slot.case}")
        # how the name relates to the entity's longest one: the same, its last word (surname), its first
        # word (given name), or another form
        longest = max((x.text.split() for x in candidates if x.is_name), key=len)
        core = [w for w in words if w not in ("'s", "’s", "'")]
        part = "full" if core == longest else "last" if core == longest[-1:] else "first" if core == longest[:1] \
            else "other"
        out.append(f"namepart={part}|{context}")
        out.append(f"namepart={part}|{feats[0]}")
    elif reg08 == "common":
        out.append(f"det={words[0].lower()}|{context}")
    else:
        subtype, case = attr.split("-")
        out.append(f"casematch={case == slot.case}|{subtype}")
        out.append(f"casematch={case == slot.case}|{subtype}|{feats[0]}")
    if cues is not None:
        person = _person(c.text) if attr.startswith("pron-") else "3"
        out += [f"cue:{cue}|p={person}" for cue in cues]
        genre = next((f for f in feats if f.startswith("genre=")), "genre=?")
        out += [f"cue:{cue}|p={person}|{genre}" for cue in cues]
    return out


_DESIGNS: dict = {}


def _design(documents, indexer, fit: bool, cues: bool = False) -> "_Design":
    """The design of a document list, reused while the same list (and feature indexer) is in use:
    a benchmark fits and scores several models on one list, and building the features is the
    slow part of a small model's fit."""
    # the list's identity and each document's slot list: a list changed in place builds anew. The entry
    # keeps the objects whose ids make its key, and a hit must be those very objects: an id can be reused
    # by a new object once the old one is freed
    slots = [d.slots for d in documents]
    key = (id(documents), tuple((id(s), len(s)) for s in slots), fit, None if fit else id(indexer), cues)
    hit = _DESIGNS.get(key)
    if hit is not None and hit[0] is documents and (fit or hit[1] is indexer) \
            and all(a is b for a, b in zip(hit[2], slots)):
        return hit[3]
    design = _Design(documents, indexer, fit, cues)
    if len(_DESIGNS) >= 8:
        _DESIGNS.pop(next(iter(_DESIGNS)))
    _DESIGNS[key] = (documents, indexer, slots, design)
    return design


class _Design:
    """Everything the models read about a list of documents, built once."""

    def __init__(self, documents, indexer: FeatureIndexer | None, fit: bool, cues: bool = False):
        self.documents = documents
        items, cand_ptr, attr, is_name, loss, gold, cand_key, cand_len = [], [0], [], [], [], [], [], []
        pairs, entity_prev, sentence, paragraph, doc_of = [], [], [], [], []
        self.entity_chains = []  # (candidate count, [global slot ids]) per entity per document
        self.slot_cases = []
        offset = 0
        sentence_base = paragraph_base = 0
        for d, document in enumerate(documents):
            last: dict[str, int] = {}
            chains: dict[str, list] = {}
            holes = {p for slot in document.slots for p in range(slot.start, slot.end + 1)} if cues else set()
            for j, slot in enumerate(document.slots):
                t = offset + j
                candidates = document.candidates[slot.entity]
                gold_index = document.gold_index(slot)
                gold_key, gold_type = normal_key(slot.gold), slot.gold_type
                slot_cues = _slot_cues(document, slot, holes) if cues else None
                for k, c in enumerate(candidates):
                    items.append(_candidate_features(document, slot, candidates, k, slot_cues))
                    attr.append(ATTR_INDEX[c.attr])
                    is_name.append(1 if c.is_name else 0)
                    cand_key.append(k)  # an entity's slots share its list: same index, same string
                    cand_len.append(len(c.text.split()))
                    loss.append(float(c.reg08 != gold_type) + float(normal_key(c.text) != gold_key))
                cand_ptr.append(cand_ptr[-1] + len(candidates))
                gold.append(gold_index)
                previous = last.get(slot.entity, -1)
                entity_prev.append(previous)
                if previous >= 0:
                    prev_slot = document.slots[previous - offset]
                    distance = _bucket(slot.sentence - prev_slot.sentence, _CHAIN_DISTANCE)
                    between = any(s.entity != slot.entity for s in document.slots[previous - offset + 1:j])
                    pairs.append((previous, t, 2 * distance + int(between)))
                if j > 0 and document.slots[j - 1].entity != slot.entity:
                    gap = min(slot.sentence - document.slots[j - 1].sentence, 2)
                    pairs.append((t - 1, t, _N_CHAIN_CODES + gap))
                last[slot.entity] = t
                chains.setdefault(slot.entity, []).append(t)
                sentence.append(sentence_base + slot.sentence)
                paragraph.append(paragraph_base + slot.paragraph)
                doc_of.append(d)
                self.slot_cases.append(slot.case)
            for entity, slots in chains.items():
                self.entity_chains.append((len(document.candidates[entity]), slots))
            offset += len(document.slots)
            sentence_base += len(document.sentence_starts) + 10  # documents never share a sentence
            paragraph_base += max(document.paragraph_of_sentence, default=0) + 1
        if fit:
            indexer = FeatureIndexer().fit([items] if items else [], "candidates")
        self.indexer = indexer
        X = indexer.transform([items], "candidates")[0] if items else sp.csr_matrix((0, indexer.n_features))
        self.cand_ptr = np.array(cand_ptr, dtype=np.int64)
        self.attr = np.array(attr, dtype=np.int64)
        self.is_name = np.array(is_name, dtype=np.int64)
        self.cand_key = np.array(cand_key, dtype=np.int64)
        self.cand_len = np.array(cand_len, dtype=np.int64)
        self.loss = np.array(loss)
        self.gold = np.array(gold, dtype=np.int64)
        self.X = X
        self.pairs = np.array(pairs, dtype=np.int64).reshape(-1, 3)
        self.entity_prev = np.array(entity_prev, dtype=np.int64)
        self.sentence = np.array(sentence, dtype=np.int64)
        self.paragraph = np.array(paragraph, dtype=np.int64)
        self.doc_of = np.array(doc_of, dtype=np.int64)

    @property
    def n_slots(self) -> int:
        return self.cand_ptr.size - 1

    def graph(self, other_pairs: bool = True, chain_pairs: bool = True) -> domains.DomainGraph:
        chain = self.pairs[:, 2] < _N_CHAIN_CODES
        pairs = self.pairs[(chain & chain_pairs) | (~chain & other_pairs)]
        return domains.DomainGraph(self.cand_ptr, self.X, self.attr, self.is_name, pairs, self.entity_prev,
                                   self.sentence, self.paragraph, _LINK_BUCKETS, self.cand_key, self.cand_len)


@dataclass(frozen=True)
class NegOptions(SampleRankOptions):
    """The rarely changed knobs of :class:`NegGenerator` (its ``options`` parameter): SampleRank's
    and annealed decoding's (:class:`varorder.factorgraph.SampleRankOptions`, with this task's
    defaults for ``margin`` and the schedule), the exact models' solver and the unary step;
    checked when the estimator fits.

    Attributes
    ----------
    step_size, C, margin, temperature, average, init, anneal_sweeps, anneal_start, anneal_end :
        as :class:`~varorder.factorgraph.SampleRankOptions`' (here margin 1 and 30 annealing sweeps
        from temperature 1 by default).
    l2, max_iter : L2 weight and L-BFGS iterations of the exact models (unary, chain).
    unary_step : (samplerank) scale of the unary weights' SampleRank step (1: every factor's weights
        take the same step, Wick et al.; 0: the unary weights stay at their start, e.g. the exact
        fit's with ``warm_start``; an extension).
    """

    margin: float = 1.0
    anneal_sweeps: int = 30
    anneal_start: float = 1.0
    l2: float = 1.0
    max_iter: int = 150
    unary_step: float = 1.0



class NegGenerator(ParamsMixin):
    """Chooses each slot's referring expression (scikit-learn conventions; see the module docstring).

    Parameters
    ----------
    method : "first-mention", "unary", "chain" or "samplerank".
    link_factors : (samplerank) the label-dependent link to the entity's previous name.
    link_between : (samplerank, an extension) the link's code also tells whether another entity's slot
        lies between the slot and that previous name (a competing referent).
    chain_pairs : (samplerank) pair factors between contiguous slots of one entity (off: an ablation).
    other_pairs : (samplerank) pair factors between contiguous slots of different entities.
    warm_start : None, "chain" (samplerank from the exactly trained chain's weights, baseline e) or
        "unary" (from the exact unary model's weights; an extension).
    n_epochs, rule, proposal, pairs : SampleRank (as :class:`varorder.factorgraph.SampleRankTagger`).
    options : :class:`NegOptions` (SampleRank's steps, margin, temperature, averaging and start, the
        annealing schedule of decoding, the exact models' L2 weight and iterations, the unary step);
        None: its defaults. Its fields as keywords of this constructor still work for one release
        (a FutureWarning).
    cues : (every method but first-mention; an extension) unary person cues: whether the slot's sentence
        holds a 1st / 2nd person word outside the slots and whether the slot is inside quotes, conjoined
        with the candidate's grammatical person (and the genre).
    random_state : seed; verbose : progress bar over epochs.

    Learned: ``feature_names_``, ``layout_`` (:class:`~varorder.factorgraph.domains.DomainLayout`),
    ``theta_``, ``history_``, ``training_time_``.
    """

    _MODEL_KIND = "NegGenerator"
    _requires_y = False  # the gold REs travel inside the documents

    def __init__(self, *, method: str = "samplerank", link_factors: bool = True, link_between: bool = False,
                 chain_pairs: bool = True, other_pairs: bool = True,
                 warm_start=None, n_epochs: int = 30, rule: str = "perceptron", proposal: str = "gibbs",
                 pairs: str = "proposal", options: NegOptions | None = None, cues: bool = False, random_state=0,
                 verbose: bool = False, step_size=DEPRECATED, C=DEPRECATED, margin=DEPRECATED,
                 temperature=DEPRECATED, average=DEPRECATED, init=DEPRECATED, anneal_sweeps=DEPRECATED,
                 anneal_start=DEPRECATED, anneal_end=DEPRECATED, l2=DEPRECATED, max_iter=DEPRECATED,
                 unary_step=DEPRECATED):
        self.method = method
        self.link_factors = link_factors
        self.link_between = link_between
        self.chain_pairs = chain_pairs
        self.other_pairs = other_pairs
        self.warm_start = warm_start
        self.n_epochs = n_epochs
        self.rule = rule
        self.proposal = proposal
        self.pairs = pairs
        self.options = options
        self.cues = cues
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
        self.l2 = l2
        self.max_iter = max_iter
        self.unary_step = unary_step

    def _options(self, warn: bool = False) -> NegOptions:
        """``options`` with the deprecated keywords passed put in (a FutureWarning when ``warn``)."""
        return options_with_deprecated(self, "options", NegOptions, stacklevel=4, warn=warn)

    def _check_params(self, warn: bool = False) -> NegOptions:
        """Check the parameters; returns the options in force."""
        options = self._options(warn)
        for name, allowed in (("method", METHODS), ("rule", _RULES), ("proposal", _PROPOSALS), ("pairs", _PAIRS),
                              ("warm_start", _WARM)):
            check_choice(self, name, tuple(allowed))
        check_samplerank_options(options)
        check_real(options, "unary_step", 0)
        check_real(options, "l2", 0)
        # bounded so that a schedule or an iteration count always fits an array (2^63 sweeps did not)
        check_int(self, "n_epochs", 1, 10**6)
        check_int(options, "max_iter", 1, 10**6)
        check_int(options, "anneal_sweeps", 0, 10**6)
        check_int(self, "random_state", 0, allow_none=True)  # a seed of numpy's default_rng
        for name in ("link_factors", "link_between", "cues", "chain_pairs", "other_pairs", "verbose"):
            check_bool(self, name)
        return options

    def _layout(self, n_features: int) -> domains.DomainLayout:
        A = len(ATTRS)
        if self.method == "unary":
            return domains.DomainLayout(n_features, A)
        if self.method == "chain":
            return domains.DomainLayout(n_features, A, _N_CHAIN_CODES)
        return domains.DomainLayout(n_features, A, _N_CHAIN_CODES + (_N_OTHER_CODES if self.other_pairs else 0),
                                    _N_LINK_BUCKETS if self.link_factors else 0,
                                    self.link_factors and self.link_between)

    # -- training ------------------------------------------------------------------

    def fit(self, documents) -> "NegGenerator":
        """Learn from prepared documents (:class:`~varorder.neg.task.NegDocument`, gold REs known)."""
        options = self._check_params(warn=True)
        documents = list(documents)
        if not any(document.slots for document in documents):
            raise ParameterError(f"nothing to train on: {len(documents)} documents with 0 slots",
                                 name="documents", value=len(documents))
        began = time.perf_counter()
        design = _design(documents, None, fit=True, cues=self.cues)
        self.feature_names_ = design.indexer.names_
        self._indexer = design.indexer
        self.layout_ = self._layout(len(self.feature_names_))
        self.history_ = []
        # L-BFGS-B's small vector operations on a many-threaded BLAS cost ~20x more than the objective
        # on a busy machine: one thread
        with single_threaded_blas():
            if self.method == "first-mention":
                self.theta_ = np.zeros(self.layout_.n_params)
            elif self.method == "unary":
                self.theta_ = _fit_unary(design, options.l2, options.max_iter)
            elif self.method == "chain":
                self.theta_ = _fit_chain(design, self.layout_, options.l2, options.max_iter)
            else:
                self.theta_ = self._fit_samplerank(design, options)
        self.training_time_ = time.perf_counter() - began
        return self

    def _fit_samplerank(self, design, options: NegOptions) -> np.ndarray:
        layout = self.layout_
        graph = design.graph(self.other_pairs, self.chain_pairs)
        graph.check_layout(layout)
        theta = np.zeros(layout.n_params)
        if self.warm_start == "chain":
            chain_layout = domains.DomainLayout(layout.n_features, layout.n_attrs, _N_CHAIN_CODES)
            start = _fit_chain(design, chain_layout, options.l2, options.max_iter)
            theta[:start.size] = start  # unary, then the chain codes' pair block: the same offsets
        elif self.warm_start == "unary":
            theta[:layout.n_features] = _fit_unary(design, options.l2, options.max_iter)
        accumulated = np.zeros_like(theta)
        rng = np.random.default_rng(self.random_state)
        sizes = graph.domain_sizes
        y = (rng.random(sizes.size) * sizes).astype(np.int64) if options.init == "random" else design.gold.copy()
        steps = 0.0
        documents = np.unique(design.doc_of)
        starts = np.searchsorted(design.doc_of, documents)
        ends = np.searchsorted(design.doc_of, documents, side="right")
        began = time.perf_counter()
        progress = Progress(range(1, self.n_epochs + 1), enabled=self.verbose, desc="SampleRank", unit="epoch")
        for epoch in progress:
            # documents in a random order, slots left to right within each (as the tagger's sentences)
            order = np.concatenate([np.arange(starts[i], ends[i]) for i in rng.permutation(documents.size)]) \
                if documents.size else np.zeros(0, dtype=np.int64)
            steps, n_ranked, n_updates, n_moves, objective = domains.samplerank_epoch(
                graph, layout, order, y, design.loss, theta, accumulated, steps, _RULES[self.rule],
                options.step_size, options.C, options.margin, _PROPOSALS[self.proposal], options.temperature,
                _PAIRS[self.pairs], int(rng.integers(2 ** 31)), unary_scale=options.unary_step)
            entry = {"epoch": epoch, "chain_loss": -objective / max(design.n_slots, 1), "ranked": n_ranked,
                     "updates": n_updates, "moves": n_moves, "time": time.perf_counter() - began}
            self.history_.append(entry)
            progress.set_postfix({"loss": round(entry["chain_loss"], 3), "updates": n_updates})
        if options.average and steps > 0:
            return theta - accumulated / steps
        return theta

    # -- prediction --------------------------------------------------------------------

    def _check_fitted(self):
        check_is_fitted(self, "theta_")

    def predict_indices(self, documents) -> list[list[int]]:
        """Chosen candidate index per slot, per document."""
        self._check_fitted()
        design = _design(documents, self._indexer, fit=False, cues=self.cues)
        if self.method == "first-mention":
            flat = _first_mention(documents)
        elif self.method == "unary":
            flat = _argmax_unary(design, self.theta_[:self.layout_.n_features])
        elif self.method == "chain":
            flat = _viterbi_chains(design, self.layout_, self.theta_)
        else:
            graph = design.graph(self.other_pairs, self.chain_pairs)
            graph.check_layout(self.layout_)
            flat = _argmax_unary(design, self.theta_[:self.layout_.n_features])
            options = self._options()
            temperatures = np.geomspace(options.anneal_start, options.anneal_end, options.anneal_sweeps) \
                if options.anneal_sweeps else np.zeros(0)
            seed = 0 if self.random_state is None else int(self.random_state) % (2 ** 31)
            if flat.size:
                domains.anneal(graph, self.layout_, self.theta_, flat, temperatures, METROPOLIS, seed)
        out, offset = [], 0
        for document in documents:
            out.append([int(k) for k in flat[offset:offset + len(document.slots)]])
            offset += len(document.slots)
        return out

    def predict(self, documents) -> list[list[str]]:
        """Chosen RE string per slot, per document."""
        return [[document.candidates[slot.entity][k].text for slot, k in zip(document.slots, chosen)]
                for document, chosen in zip(documents, self.predict_indices(documents))]

    def score_configuration(self, documents, indices) -> float:
        """Model score s(c) of a full assignment (the SampleRank graph's; for checks and diagnostics)."""
        design = _design(documents, self._indexer, fit=False, cues=self.cues)
        flat = np.array([k for chosen in indices for k in chosen], dtype=np.int64)
        return domains.full_score(design.graph(self.other_pairs, self.chain_pairs), self.layout_, self.theta_, flat)

    # -- persistence ---------------------------------------------------------------------

    def save(self, path) -> None:
        """npz + JSON metadata (no pickle), atomic."""
        self._check_fitted()
        layout = self.layout_
        persist.save_model(path, self._MODEL_KIND, flat_params(self, "options", self._options()) | {"verbose": False}, {
            "feature_names": self.feature_names_, "attrs": list(ATTRS),
            "layout": [layout.n_features, layout.n_attrs, layout.n_pair_codes, layout.n_distance_buckets],
            "training_time": float(getattr(self, "training_time_", 0.0))}, {"theta": self.theta_})

    @classmethod
    @persist.model_loader
    def load(cls, path) -> "NegGenerator":
        """Read a model written by :meth:`save`; anything damaged or foreign raises FormatError naming the file."""
        params, state, arrays = persist.load_model(path, cls._MODEL_KIND, ("theta",))
        if not set(params) <= set(_PARAMS):
            raise FormatError(f"{path}: unknown NegGenerator parameters {sorted(set(params) - set(_PARAMS))}", path=path)
        model = cls(**nested_params(params, "options", NegOptions))  # model_loader checks the values on return
        names = state["feature_names"]
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names) or len(set(names)) != len(names):
            raise FormatError(f"{path}: feature_names must be a list of distinct strings", path=path)
        if state["attrs"] != list(ATTRS):
            raise FormatError(f"{path}: the model's candidate attributes {state['attrs']!r:.80} differ from this "
                              f"varorder's {list(ATTRS)}", path=path)
        layout = model._layout(len(names))
        if state["layout"] != [layout.n_features, layout.n_attrs, layout.n_pair_codes, layout.n_distance_buckets]:
            raise FormatError(f"{path}: layout {state['layout']!r:.80} does not match the parameters and features", path=path)
        persist.check_shapes(path, arrays, {"theta": (layout.n_params,)}, allow_neg_inf=False)
        model.feature_names_ = names
        model._indexer = FeatureIndexer.from_names(names)
        model.layout_ = layout
        model.theta_ = np.asarray(arrays["theta"], dtype=np.float64)
        model.training_time_ = float(state["training_time"])
        model.history_ = []
        return model


# -- baseline (a) ------------------------------------------------------------------------------

def _first_mention(documents) -> np.ndarray:
    out = []
    for document in documents:
        for slot in document.slots:
            candidates = document.candidates[slot.entity]
            names = [i for i, c in enumerate(candidates) if c.is_name]
            if names and ("first_in_paragraph" in slot.features or "first_in_doc" in slot.features):
                wanted = "name-gen" if slot.case == "gen" else "name-plain"
                pool = [i for i in names if candidates[i].attr == wanted] or names
                length = [len(candidates[i].text.split()) for i in pool]
                pick = max if "first_in_doc" in slot.features else min
                out.append(pool[length.index(pick(length))])
                continue
            wanted = f"pron3-{slot.case}"
            choice = next((i for i, c in enumerate(candidates) if c.attr == wanted), None)
            if choice is None:
                choice = names[0] if names else 0
            out.append(choice)
    return np.array(out, dtype=np.int64)


# -- baseline (b): independent log-linear, exact ----------------------------------------------

def _segment_logsumexp(scores, cand_ptr):
    starts = cand_ptr[:-1]
    top = np.maximum.reduceat(scores, starts)
    sizes = np.diff(cand_ptr)
    shifted = np.exp(scores - np.repeat(top, sizes))
    return top + np.log(np.add.reduceat(shifted, starts)), shifted / np.repeat(np.add.reduceat(shifted, starts), sizes)


def _fit_unary(design, l2, max_iter) -> np.ndarray:
    X, cand_ptr = design.X, design.cand_ptr
    gold_rows = cand_ptr[:-1] + design.gold
    gold_counts = np.asarray(X[gold_rows].sum(axis=0)).ravel()

    def objective(w):
        scores = X @ w
        logz, p = _segment_logsumexp(scores, cand_ptr)
        value = logz.sum() - scores[gold_rows].sum() + 0.5 * l2 * w @ w
        return value, X.T @ p - gold_counts + l2 * w

    w0 = np.zeros(X.shape[1])
    if design.n_slots == 0:
        return w0
    result = scipy.optimize.minimize(objective, w0, jac=True, method="L-BFGS-B", options={"maxiter": max_iter})
    return result.x


def _argmax_unary(design, w) -> np.ndarray:
    if design.n_slots == 0:
        return np.zeros(0, dtype=np.int64)
    scores = design.X @ w
    out = np.empty(design.n_slots, dtype=np.int64)
    for t in range(design.n_slots):
        out[t] = int(np.argmax(scores[design.cand_ptr[t]:design.cand_ptr[t + 1]]))
    return out


# -- baseline (c): a chain per entity, exact ----------------------------------------------------

def _chain_batches(design):
    """Entity chains grouped by domain size: (K, slot ids (B, L) padded with −1, lengths (B,), chain codes).

    Every slot of an entity has the entity's candidate list, so a group shares K and needs no
    candidate padding; positions past a chain's length are padding (``lengths``)."""
    code_of = {(int(i), int(j)): int(e) for i, j, e in design.pairs if e < _N_CHAIN_CODES}
    groups: dict[tuple, list] = {}
    for K, slots in design.entity_chains:
        # by domain size, and by length within a factor of two (padding costs forward-backward time)
        groups.setdefault((K, int(np.log2(len(slots)))), []).append(slots)
    for (K, _), chains in sorted(groups.items()):
        L = max(len(s) for s in chains)
        ids = np.full((len(chains), L), -1, dtype=np.int64)
        codes = np.zeros((len(chains), L), dtype=np.int64)  # code of the edge leaving each position
        for b, slots in enumerate(chains):
            ids[b, :len(slots)] = slots
            for p in range(len(slots) - 1):
                codes[b, p] = code_of[(slots[p], slots[p + 1])]
        yield K, ids, np.array([len(s) for s in chains]), codes


def _chain_potentials(design, theta, K, ids, lengths, codes, E, A):
    """Expanded-state emissions (B, L, K·E), per-chain transitions (B, K·E, K·E) and ``allowed``.

    State (k, e): candidate k, and e the code of the edge to the next mention; e is forced by ``allowed``.
    """
    B, L = ids.shape
    unary = design.X @ theta[:design.X.shape[1]]
    valid = ids >= 0
    rows = np.minimum(np.where(valid, design.cand_ptr[np.maximum(ids, 0)], 0)[:, :, None] + np.arange(K),
                      unary.size - 1)  # padded positions read any row; their scores are then zeroed
    emissions = np.repeat(unary[rows], E, axis=2).reshape(B, L, K * E)  # index k·E + e
    emissions[~valid] = 0.0
    allowed = np.zeros((B, L, K, E), dtype=bool)
    b_idx, p_idx = np.nonzero(valid)
    allowed[b_idx, p_idx, :, codes[b_idx, p_idx]] = True
    allowed[~valid] = True
    first_slots = ids[:, 0]
    attrs = design.attr[design.cand_ptr[first_slots][:, None] + np.arange(K)]  # (B, K): one list per entity
    P = theta[design.X.shape[1]:design.X.shape[1] + E * A * A].reshape(E, A, A)
    # T[b, (k', e'), (k, e)] = P[e', a_b(k'), a_b(k)], the same for every e
    pair = P[:, attrs[:, :, None], attrs[:, None, :]]  # (E, B, K, K)
    transitions = np.repeat(pair.transpose(1, 2, 0, 3)[..., None], E, axis=4).reshape(B, K * E, K * E)
    return emissions, transitions, allowed.reshape(B, L, K * E), attrs


def _chain_objective(design, layout, l2):
    """θ ↦ (negative log-likelihood of the gold chains + ½·l2·‖θ‖², gradient) for the chain model."""
    F, A, E = layout.n_features, layout.n_attrs, _N_CHAIN_CODES
    batches = list(_chain_batches(design))
    gold_rows = design.cand_ptr[:-1] + design.gold
    gold = np.zeros(layout.n_params)
    gold[:F] = np.asarray(design.X[gold_rows].sum(axis=0)).ravel()
    for i, j, e in design.pairs:
        if e < E:
            gold[F + (e * A + design.attr[gold_rows[i]]) * A + design.attr[gold_rows[j]]] += 1.0

    def objective(theta):
        value = 0.5 * l2 * theta @ theta - theta @ gold
        grad = l2 * theta - gold
        expected_rows = np.zeros(design.X.shape[0])
        for K, ids, lengths, codes in batches:
            emissions, transitions, allowed, attrs = _chain_potentials(design, theta, K, ids, lengths, codes, E, A)
            node, edge_sum, logz = chain.marginals(emissions, transitions, lengths=lengths, allowed=allowed,
                                                   edges="sum", return_log_z=True)
            value += logz.sum()
            B, L = ids.shape
            p = node.reshape(B, L, K, E).sum(axis=3)
            valid = ids >= 0
            rows = design.cand_ptr[ids[valid]][:, None] + np.arange(K)
            np.add.at(expected_rows, rows.ravel(), p[valid].ravel())
            counts = edge_sum.reshape(B, K, E, K, E).sum(axis=4)  # (B, k', e', k)
            index = (np.arange(E)[None, None, :, None] * A + attrs[:, :, None, None]) * A + attrs[:, None, None, :]
            np.add.at(grad, F + index.ravel(), counts.ravel())
        grad[:F] += design.X.T @ expected_rows
        return value, grad

    return objective


_CHAIN_FITS: dict = {}


def _fit_chain(design, layout, l2, max_iter) -> np.ndarray:
    """The chain's exact fit; deterministic, so kept per design (a warm start after (c) reuses it)."""
    key = (id(design), layout, l2, max_iter)
    hit = _CHAIN_FITS.get(key)
    if hit is not None and hit[0] is design:
        return hit[1].copy()
    theta0 = np.zeros(layout.n_params)
    if design.n_slots == 0:
        return theta0
    result = scipy.optimize.minimize(_chain_objective(design, layout, l2), theta0, jac=True, method="L-BFGS-B",
                                     options={"maxiter": max_iter})
    if len(_CHAIN_FITS) >= 4:
        _CHAIN_FITS.pop(next(iter(_CHAIN_FITS)))
    _CHAIN_FITS[key] = (design, result.x)
    return result.x.copy()


def _viterbi_chains(design, layout, theta) -> np.ndarray:
    E, A = _N_CHAIN_CODES, layout.n_attrs
    out = np.zeros(design.n_slots, dtype=np.int64)
    for K, ids, lengths, codes in _chain_batches(design):
        emissions, transitions, allowed, _ = _chain_potentials(design, theta, K, ids, lengths, codes, E, A)
        paths, _ = chain.viterbi(emissions, transitions, lengths=lengths, allowed=allowed)
        valid = ids >= 0
        out[ids[valid]] = paths[valid] // E
    return out
