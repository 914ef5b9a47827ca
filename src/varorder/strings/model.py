"""The phonology model of Cotterell, Peng & Eisner (2015), "Modeling word forms using
latent underlying morphs and phonology" (TACL), as used by Cotterell & Eisner (2015, §7).

Factorization (a Bayes net over strings):

    p(M, S) = Π_m  p_LM(M_m)  ·  Π_w  T(S_w | M_{w,1} · M_{w,2} · … · M_{w,k})

* each morpheme's underlying form M_m is a string with a character-bigram prior p_LM
  (an n-gram acceptor, :func:`varorder.strings.features.ngram_machine` with θ = log
  conditional probabilities);
* a word's underlying form is the concatenation of its morphemes (in order);
* the phonology T is a stochastic edit transducer (one state: insert b with probability
  ι_b, otherwise read the next underlying symbol a and write b or ε with P[a, b]), a
  conditional distribution over surface strings for every underlying string;
* surface forms S_w are observed (or held out).

Given a word's surface s, T ∘ s projected onto the underlying tape is a cyclic acceptor
A_s (deletions loop), the likelihood of every underlying string; each word is one factor
over its morphemes. This module builds the model, a seeded synthetic lexicon with gold
underlying forms, and a reader for the Hopkins phonology-framework files.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from varorder.engine.validate import as_rng
from varorder.errors import FormatError, ParameterError
from varorder.io import open_text
from varorder.strings.features import ngram_closed_form, ngram_machine
from varorder.wfsa import Wfsa, strings_acceptor

__all__ = ["EditTransducer", "PhonologyGraph", "Word", "bigram_prior", "read_hopkins", "synthetic_lexicon"]


@dataclass(frozen=True, eq=False)
class EditTransducer:
    """Stochastic edit transducer: ``substitute[a, b]`` (A, A + 1) is P(write b | read a),
    the last column writing ε (deletion); ``insert[b]`` the probability of inserting b
    before reading on (Σ insert < 1)."""

    alphabet: tuple
    substitute: np.ndarray
    insert: np.ndarray

    def __post_init__(self):
        A = len(self.alphabet)
        if self.substitute.shape != (A, A + 1) or self.insert.shape != (A,):
            raise ParameterError(f"edit transducer shapes must be ({A}, {A + 1}) and ({A},)")
        if (self.substitute < 0).any() or not np.allclose(self.substitute.sum(axis=1), 1.0):
            raise ParameterError("each substitution row must be a probability distribution")
        if (self.insert < 0).any() or self.insert.sum() >= 1.0:
            raise ParameterError("insertion probabilities must be non-negative and sum below 1")

    @classmethod
    def uniform(cls, alphabet, copy: float = 0.9, delete: float = 0.02, insert: float = 0.02) -> "EditTransducer":
        """Copy with ``copy``, delete with ``delete``, substitute uniformly otherwise."""
        A = len(alphabet)
        sub = np.full((A, A + 1), (1.0 - copy - delete) / max(A - 1, 1))
        np.fill_diagonal(sub[:, :A], copy)
        sub[:, A] = delete
        return cls(tuple(alphabet), sub, np.full(A, insert / A))

    @property
    def stop(self) -> float:
        return 1.0 - float(self.insert.sum())

    def wfsa(self) -> Wfsa:
        A = len(self.alphabet)
        keep = math.log(self.stop)
        arcs = [(0, 0, b + 1, math.log(self.insert[b]), 0) for b in range(A) if self.insert[b] > 0]
        for a in range(A):
            for b in range(A + 1):
                if self.substitute[a, b] > 0:
                    arcs.append((0, a + 1, b + 1 if b < A else 0, keep + math.log(self.substitute[a, b]), 0))
        return Wfsa.from_arcs(self.alphabet, 1, 0, arcs, {0: keep})

    @property
    def n_ops(self) -> int:
        """Edit operations: insert b (ids 0..A−1), read a and write b or ε (A + a·(A+1) + b)."""
        A = len(self.alphabet)
        return A + A * (A + 1)

    def surface_lattice(self, surface) -> tuple[Wfsa, np.ndarray]:
        """A_s, the acceptor over underlying strings u weighting each by T(s | u), with the
        edit operation of every arc (see :attr:`n_ops`). It is T ∘ s projected on the
        underlying tape (``trim(project(compose(self.wfsa(), linear_acceptor(s))))``,
        tested), built directly so that each arc keeps its operation: state j = surface
        position; insertion of s_j and substitution a → s_j move j → j + 1, deletion of a
        loops on j (the cycles of A_s)."""
        A = len(self.alphabet)
        index = {x: i for i, x in enumerate(self.alphabet)}
        try:
            written = [index[x] for x in surface]
        except KeyError as error:
            raise ParameterError(f"surface symbol {error.args[0]!r} is not in the edit transducer's alphabet", name='surface', value=surface) from None
        keep = math.log(self.stop)
        with np.errstate(divide="ignore"):
            log_insert, log_sub = np.log(self.insert), np.log(self.substitute) + keep
        src, ilabel, weight, dst, ops = [], [], [], [], []

        def arcs(j, labels, weights, to, op_ids):
            live = weights > -math.inf
            src.append(np.full(int(live.sum()), j))
            ilabel.append(labels[live])
            weight.append(weights[live])
            dst.append(np.full(int(live.sum()), to))
            ops.append(op_ids[live])

        read = np.arange(1, A + 1)
        read_ops = A + np.arange(A) * (A + 1)
        for j in range(len(written) + 1):
            arcs(j, read, log_sub[:, A], j, read_ops + A)  # deletions
            if j < len(written):
                b = written[j]
                arcs(j, np.zeros(1, dtype=np.int64), log_insert[b:b + 1], j + 1, np.array([b]))
                arcs(j, read, log_sub[:, b], j + 1, read_ops + b)
        final = np.full(len(written) + 1, -math.inf)
        final[-1] = keep
        labels = np.concatenate(ilabel).astype(np.int64)
        fsa = Wfsa(self.alphabet, 0, final, np.concatenate(src).astype(np.int64), labels, labels.copy(),
                   np.concatenate(weight), np.concatenate(dst).astype(np.int64))
        return fsa, np.concatenate(ops).astype(np.int64)

    def surface_acceptor(self, surface) -> Wfsa:
        """A_s: the acceptor over underlying strings u weighting each by T(s | u)."""
        return self.surface_lattice(surface)[0]

    def m_step(self, op_counts, n_strings: float, smoothing: float = 0.0) -> "EditTransducer":
        """The maximum-likelihood transducer from expected operation counts (``op_counts``
        indexed as :attr:`n_ops`; ``n_strings`` surface strings, each ending with one stop):
        ι_b ∝ C(insert b) against C(stop) = Σ C(read) + n_strings, and P[a, ·] ∝ C(read a, ·);
        ``smoothing`` adds a pseudo-count to every operation. A row with no count at all
        keeps its old values."""
        A = len(self.alphabet)
        counts = np.asarray(op_counts, dtype=np.float64)
        if counts.shape != (self.n_ops,) or not np.all(np.isfinite(counts)) or (counts < -1e-9).any():
            raise ParameterError(f"op_counts must be {self.n_ops} finite non-negative counts", name='op_counts', value=op_counts)
        counts = np.maximum(counts, 0.0)
        insert = counts[:A] + smoothing
        read = counts[A:].reshape(A, A + 1) + smoothing
        stop = read.sum() + float(n_strings)
        total = insert.sum() + stop
        if not total > 0:
            return self
        rows = read.sum(axis=1, keepdims=True)
        substitute = np.where(rows > 0, read / np.where(rows > 0, rows, 1.0), self.substitute)
        return EditTransducer(self.alphabet, substitute, insert / total)

    def sample(self, underlying, seed=None) -> tuple:
        rng = as_rng(seed)
        index = {s: i for i, s in enumerate(self.alphabet)}
        A = len(self.alphabet)
        ins_total = float(self.insert.sum())
        out = []
        pos = 0
        while True:
            if rng.random() < ins_total:
                out.append(self.alphabet[rng.choice(A, p=self.insert / ins_total)])
                continue
            if pos == len(underlying):
                return tuple(out)
            b = rng.choice(A + 1, p=self.substitute[index[underlying[pos]]])
            if b < A:
                out.append(self.alphabet[b])
            pos += 1


def bigram_prior(alphabet, strings=(), smoothing: float = 1.0, mean_length: float | None = None) -> np.ndarray:
    """θ of a character-bigram prior on :func:`ngram_machine`(alphabet, 2): add-``smoothing``
    relative frequencies over ``strings`` (or uniform). ``mean_length`` sets a uniform
    model's end probability to 1 / (mean_length + 1)."""
    machine = ngram_machine(alphabet, 2)
    S, A = machine.next_state.shape
    counts = np.full(machine.n_cells, float(smoothing))
    if mean_length is not None and not strings:
        end = 1.0 / (mean_length + 1.0)
        counts[: S * A] = (1.0 - end) / A
        counts[S * A:] = end
    index = {s: i for i, s in enumerate(alphabet)}
    for string in strings:
        state = machine.start
        for x in string:
            counts[state * A + index[x]] += 1
            state = machine.next_state[state, index[x]]
        counts[S * A + state] += 1
    return ngram_closed_form(machine, counts, floor=0.0)


@dataclass(frozen=True)
class Word:
    """One word: its morphemes (names, concatenated in order) and its surface form
    (a tuple of symbols; None when held out)."""

    morphemes: tuple
    surface: tuple | None
    label: str = ""


@dataclass(eq=False)
class PhonologyGraph:
    """The factor graph: one variable per morpheme, a prior factor on each, one factor per
    observed word over its morphemes (held-out words have no factor)."""

    alphabet: tuple
    morphemes: list
    words: list
    edit: EditTransducer
    prior_theta: np.ndarray
    gold: dict = field(default_factory=dict)
    prior_strings: dict | None = None  # a finite-support prior {string: log p} (tests, small demos)
    held_out: dict = field(default_factory=dict)  # word index -> its hidden surface (for evaluation)

    def __post_init__(self):
        known = set(self.morphemes)
        symbols = set(self.alphabet)
        for w in self.words:
            if len(set(w.morphemes)) != len(w.morphemes):
                raise ParameterError(f"word {w.label!r} repeats a morpheme; repeated morphemes are not supported")
            for m in w.morphemes:
                if m not in known:
                    raise ParameterError(f"word {w.label!r} names unknown morpheme {m!r}")
            if w.surface is not None and not set(w.surface) <= symbols:
                raise ParameterError(f"word {w.label!r} has symbols outside the alphabet")

    @property
    def observed(self) -> list:
        return [w for w in self.words if w.surface is not None]

    def degree(self) -> dict:
        out = {m: 0 for m in self.morphemes}
        for w in self.observed:
            for m in w.morphemes:
                out[m] += 1
        return out

    def prior_wfsa(self) -> Wfsa:
        if self.prior_strings is not None:
            return strings_acceptor(self.alphabet, self.prior_strings)
        return ngram_machine(self.alphabet, 2).encode(self.prior_theta)


def synthetic_lexicon(n_words: int, seed=None, alphabet_size: int = 8, n_suffixes: int | None = None,
                      suffixes_per_stem: tuple = (1, 3), stem_length: tuple = (2, 5),
                      suffix_length: tuple = (1, 2), copy: float = 0.92, delete: float = 0.02,
                      insert: float = 0.02) -> PhonologyGraph:
    """A seeded lexicon with gold underlying forms: stems and suffixes drawn from a random
    character-bigram prior (lengths in the given ranges, all distinct), each stem paired
    with a few suffixes (so suffix degrees grow with the lexicon), surfaces sampled from an
    edit transducer that copies with ``copy`` and substitutes within symbol pairs."""
    rng = as_rng(seed)
    if n_words < 2:
        raise ParameterError(f"n_words must be at least 2, got {n_words}", name='n_words', value=n_words)
    alphabet = tuple("abcdefghijklmnopqrstuvwxyz"[:alphabet_size])
    A = len(alphabet)
    # prior: random bigram rows, end probability ~ 0.25
    machine = ngram_machine(alphabet, 2)
    S = machine.n_states
    rows = rng.dirichlet(np.full(A, 0.7), size=S) * 0.75
    theta = np.log(np.concatenate([rows.ravel(), np.full(S, 0.25)]))
    n_suffixes = n_suffixes or max(3, n_words // 50)

    def draw(lo, hi, taken):
        for _ in range(10_000):
            length = int(rng.integers(lo, hi + 1))
            state, out = machine.start, []
            for _ in range(length):
                a = rng.choice(A, p=rows[state] / rows[state].sum())
                out.append(alphabet[a])
                state = machine.next_state[state, a]
            s = tuple(out)
            if s not in taken:
                taken.add(s)
                return s
        raise ParameterError("could not draw enough distinct morphemes: enlarge the alphabet or lengths")

    taken: set = set()
    suffixes = [draw(*suffix_length, taken) for _ in range(n_suffixes)]
    # a phonology: copy, else substitute by the "neighbouring" symbol, rare deletions
    sub = np.zeros((A, A + 1))
    for a in range(A):
        sub[a, a] = copy
        sub[a, (a + 1) % A] = 1.0 - copy - delete
        sub[a, A] = delete
    edit = EditTransducer(alphabet, sub, np.full(A, insert / A))
    words, gold, morphemes = [], {}, []
    for j, suf in enumerate(suffixes):
        gold[f"SUF{j}"] = suf
        morphemes.append(f"SUF{j}")
    stem_index = 0
    while len(words) < n_words:
        stem = draw(*stem_length, taken)
        name = f"STEM{stem_index}"
        stem_index += 1
        gold[name] = stem
        morphemes.append(name)
        k = int(rng.integers(suffixes_per_stem[0], suffixes_per_stem[1] + 1))
        for j in rng.choice(n_suffixes, size=min(k, n_suffixes), replace=False):
            if len(words) == n_words:
                break
            underlying = stem + suffixes[j]
            words.append(Word((name, f"SUF{j}"), edit.sample(underlying, rng), f"{name}+SUF{j}"))
    used = {m for w in words for m in w.morphemes}
    morphemes = [m for m in morphemes if m in used]
    return PhonologyGraph(alphabet, morphemes, words, edit, theta, {m: gold[m] for m in morphemes})


def read_hopkins(path, edit_copy: float = 0.9, edit_delete: float = 0.02, edit_insert: float = 0.02,
                 held_out=(), holdout_share: float = 0.0, seed=None) -> PhonologyGraph:
    """A file of the Hopkins phonology framework (``../shared/data/morphophonology/
    hopkins-phonology-framework``): ``surface<TAB>stem<TAB>suffix`` or
    ``surface<TAB>KEY=value,KEY=value`` per line (a token without ``=`` names a morpheme
    itself, e.g. ``PREFIX_REDUP``); PREFIX morphemes come first, SUFFIX last. Lines with a
    surface form only are skipped (unannotated). Each Unicode code point is a symbol
    (spaces inside a surface are dropped).

    Held-out words keep their morphemes but lose their surface (``graph.held_out`` maps
    their index to it): ``held_out`` lists indices among the annotated lines, and
    ``holdout_share`` > 0 adds a seeded share of the words, drawn only among words whose
    every morpheme stays in some observed word (a held-out form is predicted from the
    other forms of its morphemes). The prior is a bigram over the observed surfaces; the
    edit transducer is uniform (untrained, as in the paper's first E step)."""
    if not 0.0 <= holdout_share < 1.0:
        raise ParameterError(f"holdout_share must be in [0, 1), got {holdout_share}", name='holdout_share', value=holdout_share)
    records = []
    with open_text(path) as handle:
        for lineno, line in enumerate(handle, 1):
            fields = [f.strip() for f in line.rstrip("\n").split("\t")]
            while fields and not fields[-1]:
                fields.pop()
            if not fields or not fields[0]:
                if any(fields):
                    raise FormatError(f"{path}:{lineno}: an annotation without a surface form", path=path, line=lineno)
                continue
            surface = tuple(fields[0].replace(" ", ""))
            if len(fields) == 1:
                continue
            if len(fields) == 3:
                if not fields[1] or not fields[2]:
                    raise FormatError(f"{path}:{lineno}: expected surface<TAB>stem<TAB>suffix, got an empty field", path=path, line=lineno)
                morphemes = (f"STEM={fields[1]}", f"SUFFIX={fields[2]}")
            elif len(fields) == 2:
                parts = [p.strip() for p in fields[1].split(",") if p.strip()]
                if not parts:
                    raise FormatError(f"{path}:{lineno}: expected KEY=value morpheme annotations", path=path, line=lineno)
                # a word's annotation names at least one KEY=value morpheme (a bare token such as
                # PREFIX_REDUP only beside one): a two-column word list is not an annotated file
                if not any("=" in p for p in parts) or any(
                        "=" in p and not all(side.strip() for side in p.split("=", 1)) for p in parts):
                    raise FormatError(f"annotation {fields[1]!r:.60} names no KEY=value morpheme",
                                      path=path, line=lineno,
                                      expected="surface<TAB>stem<TAB>suffix or surface<TAB>KEY=value,KEY=value")
                prefixes = [p for p in parts if p.upper().startswith("PREFIX")]
                suffixes = [p for p in parts if p.upper().startswith("SUFFIX")]
                middle = [p for p in parts if p not in prefixes and p not in suffixes]
                morphemes = tuple(prefixes + middle + suffixes)
            else:
                raise FormatError(f"{path}:{lineno}: expected 2 or 3 tab-separated fields "
                                  f"(surface, then stem<TAB>suffix or KEY=value,...), got {len(fields)}", path=path, line=lineno)
            if len(set(morphemes)) != len(morphemes):
                raise FormatError(f"{path}:{lineno}: a morpheme is named twice ({', '.join(morphemes)})", path=path, line=lineno)
            records.append((surface, morphemes, lineno))
    if not records:
        raise FormatError(f"{path}: no annotated lines (expected surface<TAB>annotation)", path=path)
    held = set()
    for i in held_out:
        if not 0 <= int(i) < len(records):
            raise FormatError(f"{path}: held-out index {i} is not one of the {len(records)} annotated lines", path=path)
        held.add(int(i))
    if holdout_share > 0:
        held |= _holdout_share([m for _, m, _ in records], held, holdout_share, seed)
    alphabet = tuple(sorted({x for s, _, _ in records for x in s}))
    words = [Word(m, None if i in held else s, f"{path}:{lineno}") for i, (s, m, lineno) in enumerate(records)]
    morphemes = sorted({m for _, ms, _ in records for m in ms})
    edit = EditTransducer.uniform(alphabet, edit_copy, edit_delete, edit_insert)
    prior = bigram_prior(alphabet, [s for i, (s, _, _) in enumerate(records) if i not in held])
    return PhonologyGraph(alphabet, morphemes, words, edit, prior,
                          held_out={i: records[i][0] for i in sorted(held)})


def _holdout_share(word_morphemes: list, held: set, share: float, seed) -> set:
    """A seeded share of the words, each held out only if all its morphemes keep an
    observed word (so held-out words never leave a morpheme without evidence)."""
    rng = as_rng(seed)
    observed_uses: dict = {}
    for i, ms in enumerate(word_morphemes):
        if i not in held:
            for m in ms:
                observed_uses[m] = observed_uses.get(m, 0) + 1
    target = int(round(share * len(word_morphemes)))
    chosen = set()
    for i in rng.permutation(len(word_morphemes)).tolist():
        if len(chosen) >= target:
            break
        if i in held or any(observed_uses.get(m, 0) < 2 for m in word_morphemes[i]):
            continue
        chosen.add(i)
        for m in word_morphemes[i]:
            observed_uses[m] -= 1
    return chosen
