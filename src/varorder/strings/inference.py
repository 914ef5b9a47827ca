"""Message passing over string-valued variables: EP with fixed n-gram families, penalized
EP (PEP) with a variable-order family, and loopy BP with k-best pruned messages.

Cotterell & Eisner (2015), "Penalized Expectation Propagation for Graphical Models over
Strings" (§4, eqs. 4-7; §6.1, eq. 9; §7's schedule), on the factor graph of
:class:`varorder.strings.model.PhonologyGraph`.

Factor → variable messages μ_{F→V} are acceptors (eq. 5's left factor). For a word factor
over morphemes V₁…V_k with surface s, μ_{F→V_i}(x) = Σ A_s(x₁ … x_{i−1} x x_{i+1} … x_k) ·
Π_{j≠i} m_j(x_j), where m_j is V_j's message to F. It is A_s with an *initial* weight per
state (the forward sums through m_1…m_{i−1}) and a *final* weight per state (the backward
sums through m_k…m_{i+1}), each one sparse solve on the product of A_s with m_j's DFA.

Variable updates (EP, eqs. 4-7): θ_{V→F} = θ_V − θ_{F→V}; p̂ = μ_{F→V} ⊙ ENCODE(θ_{V→F});
θ_V ← argmin KL(p̂ ‖ q_θ) (closed form for the n-gram families; for PEP one proximal
gradient step on eq. 7 + λΩ(θ_{F→V}) (§4.3: the penalty on the message),
θ_V ← θ_{V→F} + prox_{ηλΩ}(θ_V + η (E_p̂[f] − E_{q_θV}[f]) − θ_{V→F}), with Ω the
tree-structured group lasso over substring prefixes, eq. 9, on the active set: the nonzero
substrings, their prefixes and their one-symbol extensions, Fig. 2, with the children of ^
always on the frontier since ^ itself fires on no cell; ``prox_penalty="belief"`` is the
option prox_{ηλΩ}(θ_V + η(…))); then θ_{F→V} = θ_V − θ_{V→F} (eq. 6). At λ = 0 a feature
that p̂ never fires gets the −∞ weight of footnote 1 (kept finite, :data:`LOG_ZERO`). PEP's
first pass is restricted to unigram features, as §7 does; PEP-prox takes its gradient steps
there too, from the uniform unigram model (θ = 0, the paper's start, is outside the family:
Z = ∞; the start is held as the prior's message so that eq. 4 holds) — the closed form
(``unigram_start="closed-form"``, deprecated) sets unseen unigrams to log 1e-12, from
which η = 0.05 steps cannot climb (suffixes stay stuck at ε). One
proximal step per update is the paper's (§7); ``prox_steps`` > 1 is an option.

Pruned BP (the baseline of Cotterell et al. 2015, §5 here): every variable's domain is
the union of the k-best strings of its incoming μ_{F→V}; messages are exact BP messages
restricted to that domain.

The schedule alternates forward and backward sweeps over the variables (§4.4); a visit
to V recomputes every incoming μ_{F→V} and updates V's approximation against each,
``inner_passes`` times on the first iteration and once afterwards (§7: K = 20, then 1).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np
from scipy.special import logsumexp

from varorder.base import (DEPRECATED, ParamsMixin, check_bool, check_choice, check_deprecated, check_int,
                           check_is_fitted, check_real, options_with_deprecated)
from varorder.errors import DivergenceError, ParameterError
from varorder.loglinear.prox import penalty_value, prox_tree_l2
from varorder.strings.features import (BOS, FeatureMachine, SubstringRegistry, ngram_closed_form,
                                       ngram_machine, substring_machine)
from varorder.strings.model import PhonologyGraph
from varorder.wfsa import (Wfsa, arc_posteriors, kbest_strings, log_total_weight, product_with_dfa, shortest_distance,
                           strings_acceptor)

__all__ = ["GREEDY_FLOOR", "METHODS", "PROX_PENALTIES", "UNIGRAM_STARTS", "Beliefs", "Dfa", "EPOptions",
           "FactorMessages", "PrunedBP", "StringEP", "belief_nll", "dfa_log_partition", "dfa_tables", "make_method", "project_acceptor",
           "prox_objective"]

METHODS = ("bp", "ep1", "ep2", "ep3", "pep", "pep-prox")
PROX_PENALTIES = ("message", "belief")  # what PEP-prox's group lasso penalises; the first is the paper's (eq. 7)
# PEP-prox's unigram first sweep: the paper's gradient steps, or the closed form (deprecated)
UNIGRAM_STARTS = ("gradient", "closed-form")


def make_method(name: str, *, k: int = 20, lam: float = 0.01, eta: float = 0.05, iterations: int = 4,
                inner_passes: int = 3, max_order: int | None = None, growth_rounds: int | None = None,
                greedy_floor: float | None = None, damping: bool = True, cavity_contexts: bool = True,
                prox_penalty: str = "message", prox_steps: int = 1, prox_tol: float = 1e-3,
                unigram_start: str = "gradient", passes_sweeps: int = 1, tol: float = 0.0, progress=None):
    """An inference method by name: ``bp`` (pruned BP, k-best), ``ep1``/``ep2``/``ep3``
    (EP with the unigram/bigram/trigram family), ``pep`` (penalized EP, closed form with
    greedy growing), ``pep-prox`` (penalized EP by proximal gradient, §6.1; ``prox_penalty``
    as in :class:`StringEP`: ``"message"``, the paper's, or ``"belief"``, an option)."""
    if name == "bp":
        return PrunedBP(k=k, iterations=iterations, progress=progress)
    if name in ("ep1", "ep2", "ep3"):
        return StringEP(family="ngram", order=int(name[-1]), iterations=iterations, inner_passes=inner_passes,
                        options=EPOptions(passes_sweeps=passes_sweeps, damping=damping), tol=tol, progress=progress)
    if name in ("pep", "pep-prox"):
        options = EPOptions(growth_rounds=growth_rounds, damping=damping, passes_sweeps=passes_sweeps,
                            cavity_contexts=cavity_contexts, prox_penalty=prox_penalty, prox_steps=prox_steps,
                            prox_tol=prox_tol, **({} if greedy_floor is None else {"greedy_floor": greedy_floor}))
        return StringEP(family="pep", optimizer="greedy" if name == "pep" else "prox", lam=lam, eta=eta,
                        iterations=iterations, inner_passes=inner_passes, max_order=max_order, options=options,
                        unigram_start=unigram_start, tol=tol, progress=progress)
    raise ParameterError(f"unknown method {name!r}; expected one of {', '.join(METHODS)}", name='name', value=name)

NEG_INF = -math.inf
GREEDY_FLOOR = 1e-6  # pseudo-count of an unseen n-gram in a greedy projection, per unit of its state's mass
DAMPING = (1.0, 0.5, 0.25, 0.125, 0.0625, 0.03125, 0.015625, 0.0)  # cavity fractions α tried in turn
# the −∞ weight of footnote 1, kept finite: exp(LOG_ZERO) is 0.0 in float64, yet sums and differences
# of messages stay exact (−∞ − (−∞) would be NaN in the cavities θ_V − θ_{F→V}; footnote 4)
LOG_ZERO = -1e4


def _visit_order(graph: PhonologyGraph, variables) -> list:
    """The forward order of Cotterell et al. (2015): words in file order, their morphemes in
    turn, then any variable no word mentions (sweeps alternate it with its reverse)."""
    order = dict.fromkeys(m for w in graph.words for m in w.morphemes)
    order.update(dict.fromkeys(variables))
    return list(order)


# ---------------------------------------------------------------------------
# factor messages
# ---------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class Dfa:
    """A complete deterministic weighted acceptor as tables (the shape every message to a
    factor takes: ENCODE(θ) of a feature machine, or a finite list made complete)."""

    next_state: np.ndarray
    start: int
    cell: np.ndarray
    end: np.ndarray


def dfa_tables(acceptor: Wfsa) -> Dfa:
    """A deterministic ε-free acceptor (e.g. :func:`varorder.wfsa.strings_acceptor`) made
    complete with a sink of weight zero (−inf)."""
    A = len(acceptor.alphabet)
    S = acceptor.n_states + 1
    sink = S - 1
    next_state = np.full((S, A), sink, dtype=np.int64)
    cell = np.full((S, A), NEG_INF)
    if (acceptor.ilabel == 0).any():
        raise ParameterError("dfa_tables needs an ε-free acceptor", name='acceptor', value=acceptor)
    next_state[acceptor.src, acceptor.ilabel - 1] = acceptor.dst
    cell[acceptor.src, acceptor.ilabel - 1] = acceptor.weight
    end = np.concatenate([acceptor.final, [NEG_INF]])
    return Dfa(next_state, acceptor.start, cell, end)


def dfa_log_partition(dfa: Dfa) -> float:
    """log Σ_x of the DFA's weight (DivergenceError when it diverges)."""
    S, A = dfa.next_state.shape
    live = dfa.cell > NEG_INF
    rows, cols = np.nonzero(live)
    labels = cols.astype(np.int64) + 1
    acceptor = Wfsa(tuple(range(A)), int(dfa.start), np.asarray(dfa.end, dtype=np.float64), rows.astype(np.int64),
                    labels, labels.copy(), dfa.cell[live].astype(np.float64), dfa.next_state[live].astype(np.int64))
    return log_total_weight(acceptor)


def machine_dfa(machine: FeatureMachine, theta) -> Dfa:
    cell, end = machine.weights(theta)
    return Dfa(machine.next_state, machine.start, cell, end)


class FactorMessages:
    """μ_{F→V} for word factors: A_s per word (cached) and the forward/backward sums.

    A path of A_s is cut into one piece per morpheme at canonical boundaries: a piece that
    is not the last ends right after its last symbol (insertions, ε on the underlying
    tape, belong to the following piece), so every path is counted once. To know where a
    piece may end, A_s is used *doubled*: state q (reached by ε or a boundary) and q + n
    (reached by a symbol) have the same outgoing arcs.
    """

    def __init__(self, graph: PhonologyGraph):
        self.graph = graph
        self._lattices: dict = {}

    def surface(self, word_index: int) -> Wfsa:
        return self.lattice(self.graph.words[word_index].surface)[0]

    def lattice(self, surface) -> tuple[Wfsa, np.ndarray]:
        """The doubled A_s of a surface string and the edit operation of each of its arcs."""
        surface = tuple(surface)
        cached = self._lattices.get(surface)
        if cached is None:
            acc, ops = self.graph.edit.surface_lattice(surface)
            cached = self._lattices[surface] = (self._doubled(acc), np.tile(ops, 2))
        return cached

    @staticmethod
    def _doubled(acc: Wfsa) -> Wfsa:
        n = acc.n_states
        to = np.where(acc.ilabel == 0, acc.dst, acc.dst + n)
        return Wfsa(acc.alphabet, acc.start, np.concatenate([acc.final, acc.final]),
                    np.concatenate([acc.src, acc.src + n]), np.tile(acc.ilabel, 2), np.tile(acc.olabel, 2),
                    np.tile(acc.weight, 2), np.tile(to, 2))

    def word_machine(self, surface, incoming: list) -> tuple[Wfsa, np.ndarray]:
        """The whole word as one machine: A_s ⊙ (m_1 · m_2 ⋯ m_k), the morphemes' DFAs
        ``incoming`` concatenated at the canonical piece boundaries of :meth:`message`
        (boundary states B_j(q) per A_s state q; a non-final piece leaves A_s's upper copy
        into B_{j+1}, an empty one skips from B_j to B_{j+1}). Its total weight is
        Σ_x T(s | x₁⋯x_k) Π_j m_j(x_j) and its arc posteriors are those of the edit
        operations under that tilted distribution. Returns the machine and the edit
        operation of each arc (−1 for the boundary ε arcs)."""
        acc, ops = self.lattice(surface)
        n = acc.n_states // 2
        k = len(incoming)
        parts = {"src": [], "label": [], "weight": [], "dst": [], "op": []}

        def add(src, dst, weight, op=None, label=None):
            parts["src"].append(np.asarray(src, dtype=np.int64))
            parts["dst"].append(np.asarray(dst, dtype=np.int64))
            parts["weight"].append(np.asarray(weight, dtype=np.float64))
            size = len(parts["src"][-1])
            parts["op"].append(np.full(size, -1, dtype=np.int64) if op is None else op)
            parts["label"].append(np.zeros(size, dtype=np.int64) if label is None else label)

        offset = k * n  # boundary blocks first, then the k piece products
        finals = [np.full(k * n, NEG_INF)]
        q = np.arange(n)
        for j, dfa in enumerate(incoming):
            S = dfa.next_state.shape[0]
            last = j == k - 1
            piece = acc.replace(final=acc.final if last else np.full(2 * n, NEG_INF))
            product, _, _ = product_with_dfa(piece, dfa.next_state, dfa.start, dfa.cell, dfa.end)
            add(product.src + offset, product.dst + offset, product.weight,
                ops[np.arange(product.n_arcs) // S], product.ilabel)
            add(j * n + q, offset + q * S + dfa.start, np.zeros(n))  # enter piece j
            if not last:
                add(j * n + q, (j + 1) * n + q, np.full(n, dfa.end[dfa.start]))  # piece j is empty
                upper = np.repeat(q, S)
                add(offset + (upper + n) * S + np.tile(np.arange(S), n), (j + 1) * n + upper,
                    np.tile(dfa.end, n))  # piece j ends after a symbol
            finals.append(product.final)
            offset += product.n_states
        src, label = np.concatenate(parts["src"]), np.concatenate(parts["label"])
        weight, op = np.concatenate(parts["weight"]), np.concatenate(parts["op"])
        machine = Wfsa(acc.alphabet, int(acc.start), np.concatenate(finals), src, label, label.copy(), weight,
                       np.concatenate(parts["dst"]))
        return machine, op

    def word_expectations(self, surface, incoming: list) -> tuple[np.ndarray, float]:
        """Expected edit-operation counts (``EditTransducer.n_ops``) under the tilted
        distribution of :meth:`word_machine` and the log of its total weight."""
        machine, op = self.word_machine(surface, incoming)
        arc_counts, _, log_z = arc_posteriors(machine)
        used = op >= 0
        counts = np.bincount(op[used], weights=arc_counts[used], minlength=self.graph.edit.n_ops)
        return counts, log_z

    def word_log_weight(self, surface, incoming: list) -> float:
        """log Σ_x T(s | x₁⋯x_k) Π_j m_j(x_j): with normalised beliefs as ``incoming``,
        the log-probability of the surface form s."""
        return log_total_weight(self.word_machine(surface, incoming)[0])

    @staticmethod
    def _forward(acc: Wfsa, initial: np.ndarray, dfa: Dfa) -> np.ndarray:
        """Boundary weights after one more (non-final) piece: sums over strings x of the
        DFA's weight of x times the paths from the boundary that read x, ending on a symbol."""
        n = acc.n_states // 2
        S = dfa.next_state.shape[0]
        open_ended = acc.replace(final=np.concatenate([np.full(n, NEG_INF), np.zeros(n)]))
        product, _, _ = product_with_dfa(open_ended, dfa.next_state, dfa.start, dfa.cell, dfa.end)
        init = np.full(product.n_states, NEG_INF)
        init[np.arange(n) * S + dfa.start] = initial
        alpha = shortest_distance(product, "log", initial=init).reshape(2 * n, S)
        after_symbol = logsumexp(alpha[n:] + dfa.end[None, :], axis=1)
        return np.logaddexp(after_symbol, initial + dfa.end[dfa.start])  # or the empty string

    @staticmethod
    def _backward(acc: Wfsa, final: np.ndarray, dfa: Dfa, last: bool) -> np.ndarray:
        n = acc.n_states // 2
        S = dfa.next_state.shape[0]
        ends = np.concatenate([final, final]) if last else np.concatenate([np.full(n, NEG_INF), final])
        product, _, _ = product_with_dfa(acc.replace(final=ends), dfa.next_state, dfa.start, dfa.cell, dfa.end)
        beta = shortest_distance(product, "log", reverse=True).reshape(2 * n, S)[:n, dfa.start]
        return beta if last else np.logaddexp(beta, final + dfa.end[dfa.start])

    def message(self, word_index: int, position: int, incoming: list) -> Wfsa:
        """μ_{F→V} for the morpheme at ``position`` of word ``word_index``; ``incoming[j]``
        is the :class:`Dfa` of V_j's message to F (ignored at ``position``)."""
        acc = self.surface(word_index)
        n = acc.n_states // 2
        k = len(incoming)
        initial = np.full(n, NEG_INF)
        initial[acc.start] = 0.0
        for j in range(position):
            initial = self._forward(acc, initial, incoming[j])
        final = acc.final[:n].copy()
        for j in range(k - 1, position, -1):
            final = self._backward(acc, final, incoming[j], last=(j == k - 1))
        # a fresh start state with ε arcs carries the initial weights; it is final for the
        # empty string when the piece is not the word's last
        if position == k - 1:
            ends = np.concatenate([final, final, [NEG_INF]])
        else:
            ends = np.concatenate([np.full(n, NEG_INF), final, [logsumexp(initial + final)]])
        live = np.flatnonzero(initial > NEG_INF)
        zeros = np.zeros(len(live), dtype=np.int64)
        return Wfsa(acc.alphabet, 2 * n, ends, np.concatenate([acc.src, np.full(len(live), 2 * n)]),
                    np.concatenate([acc.ilabel, zeros]), np.concatenate([acc.olabel, zeros]),
                    np.concatenate([acc.weight, initial[live]]), np.concatenate([acc.dst, live]))


# ---------------------------------------------------------------------------
# beliefs and their evaluation
# ---------------------------------------------------------------------------


@dataclass
class Beliefs:
    """Per-variable beliefs: ``score(v, string)`` is log b̂_V(string) (−inf outside a
    finite support); ``top(v, k)`` the k most probable strings with probabilities."""

    method: str
    scorers: dict
    toppers: dict
    seconds: float = 0.0
    stats: dict = field(default_factory=dict)

    def score(self, variable, string) -> float:
        return self.scorers[variable](tuple(string))

    def top(self, variable, k: int = 5) -> list:
        return self.toppers[variable](k)


def belief_nll(beliefs: Beliefs, gold: dict, cap: float = 50.0) -> dict:
    """Mean −log b̂_V(gold_V) over variables (each capped at ``cap`` nats: a pruned belief
    gives 0 to strings outside its support) and 1-best accuracy."""
    nll, correct, outside = [], 0, 0
    for v, g in gold.items():
        s = beliefs.score(v, g)
        if not s > -cap:
            outside += 1
        nll.append(min(-s, cap))
        top = beliefs.top(v, 1)
        correct += bool(top) and tuple(top[0][0]) == tuple(g)
    return {"nll": float(np.mean(nll)), "accuracy": correct / max(len(gold), 1), "capped": outside,
            "variables": len(gold)}


def _change(old, new) -> float:
    """‖new − old‖_∞ over the features not at footnote 1's −∞ (:data:`LOG_ZERO`) in ``new``:
    a feature set there is at its optimum (an update's residual, see :class:`StringEP`)."""
    if len(old) < len(new):
        old = np.concatenate([old, np.zeros(len(new) - len(old))])
    live = new > LOG_ZERO / 2
    return float(np.abs(new[live] - old[live]).max(initial=0.0))


def _string_score(machine: FeatureMachine, theta, string, log_z: float) -> float:
    cell, end = machine.weights(theta)
    index = {s: i for i, s in enumerate(machine.alphabet)}
    state, total = machine.start, 0.0
    for x in string:
        if x not in index:
            return NEG_INF
        a = index[x]
        total += cell[state, a]
        state = machine.next_state[state, a]
    return float(total + end[state] - log_z)


def prox_objective(registry: SubstringRegistry, machine: FeatureMachine, theta, counts_p, log_z: float, lam: float,
                   anchor=None) -> float:
    """PEP-prox's objective for one message update, eq. 7 + λΩ (eq. 9) up to the constant
    −H(p̂): log Z_θ − E_p̂[f]·θ + λ Σ_u ‖(θ − anchor)_{u·}‖₂ over ``machine``'s features
    (``counts_p`` = E_p̂[f] in its order, ``log_z`` = log Z_θ); ``anchor`` is the cavity
    θ_{V→F} when the message is penalised (the paper's), None when the belief is."""
    ids = np.concatenate([[0], machine.feature_ids])
    order, parent = registry.preorder(ids)
    x = theta[order] - (0.0 if anchor is None else anchor[order])
    x[0] = 0.0
    return float(log_z - counts_p @ theta[machine.feature_ids] + lam * penalty_value("tree_l2", x, parent=parent))


# ---------------------------------------------------------------------------
# EP and PEP
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class EPOptions:
    """The rarely changed knobs of :class:`StringEP` (its ``options`` parameter); checked when
    it fits.

    Attributes
    ----------
    growth_rounds : greedy growing rounds per update (None: until the context set stops growing).
    damping : retry a divergent product with the cavity moved toward the belief
        (:meth:`StringEP._damped`) instead of skipping the update.
    passes_sweeps : the first sweeps that run ``inner_passes`` passes (1 afterwards).
    greedy_floor : pseudo-count of an unseen n-gram in a greedy projection, per unit of its state's mass.
    cavity_contexts : greedy growing keeps the cavity's contexts whatever their gain.
    prox_penalty : what PEP-prox's group lasso penalises, ``"message"`` (the paper's) or ``"belief"``
        (see :class:`StringEP`).
    prox_steps : proximal steps per message update (1, the paper's; more is an extension).
    prox_tol : with ``prox_steps`` > 1, stop once the objective falls by less than this.
    """

    growth_rounds: int | None = None
    damping: bool = True
    passes_sweeps: int = 1
    greedy_floor: float = GREEDY_FLOOR
    cavity_contexts: bool = True
    prox_penalty: str = "message"
    prox_steps: int = 1
    prox_tol: float = 1e-3



class StringEP(ParamsMixin):
    """EP with a fixed n-gram family (``family="ngram"``, ``order`` 1-3, closed-form
    projections) or penalized EP (``family="pep"``: variable-order substrings, proximal
    gradient with step ``eta`` and penalty ``lam``, ``max_order`` an optional depth cap).

    The rarely changed knobs are grouped in ``options`` (:class:`EPOptions`; None: its defaults);
    their names as keywords of this constructor still work for one release (a FutureWarning).

    ``iterations`` counts sweeps (forward, backward, ...); ``inner_passes`` is K on the
    first ``options.passes_sweeps`` sweeps, 1 afterwards (§7: K = 20 "for the first few
    iterations"). ``options.damping`` retries a divergent product with the cavity moved toward the
    belief (:meth:`_damped`) instead of skipping the update. ``fit(graph)`` runs inference
    and returns self; ``beliefs_`` holds them.

    ``options.prox_penalty`` (``optimizer="prox"`` only) says what the group lasso of eq. 9
    penalises. ``"message"`` (the default) is the paper's: "our penalized EP simply adds
    λ·Ω(θ) into (7)" (§4.3), and the θ of eq. 7 is the message θ_{F→V} (the belief there
    is q_θ ⊙ μ_{V→F}), so the proximal operator acts on θ_V − θ_{V→F} and the cavity is
    added back. ``"belief"`` (an option) penalises θ_V itself.

    ``unigram_start`` (``optimizer="prox"``): ``"gradient"`` (the default) fits the unigram
    first sweep by the paper's gradient steps from the uniform unigram model; ``"closed-form"``
    (deprecated: a FutureWarning) sets it in closed form. ``options.prox_steps`` proximal steps per message update (1,
    the paper's; more is an extension, stopping once the objective falls by less than ``options.prox_tol``).

    ``tol`` > 0 (PEP-prox only) makes ``iterations`` a maximum: the sweeps stop after the first
    sweep (not the unigram one) whose fixed-point residual is below ``tol`` (0, the default:
    run every sweep). The residual of one PEP-prox update is ‖θ_V^new − θ_V‖_∞ / η over the
    features not at footnote 1's −∞, η that of its (first) step: the norm of the
    proximal-gradient mapping (θ − prox(θ − η∇))/η, in expected-count units — 0 exactly at a
    fixed point of the update, where E_p̂[f] = E_q[f] up to the penalty's subgradient. A
    sweep's residual is the largest over its updates (its first pass sees fresh μ_{F→V}). The
    paper gives no stopping rule ("we repeatedly visit variables and factors", §7): the rule
    is ours. ``history_`` lists every sweep's residual (for the closed-form methods ‖Δθ‖_∞,
    which stays large where a floored cell's log weight moves: not a stopping rule there), K
    and updates; ``sweeps_`` counts the sweeps run.

    Parameters are keyword-only and checked by :meth:`fit` (a ParameterError names the parameter
    and the value passed); ``progress`` is None or ``progress(done, total)`` called per sweep.
    """

    _requires_y = False  # fit takes the data alone (scikit-learn's target tag)

    _alpha = 1.0  # the cavity fraction of the product being computed (see _damped)
    trace_ = None  # set to a list to record (variable, factor, step, objective) of every proximal step

    def __init__(self, *, family: str = "ngram", order: int = 2, eta: float = 0.05, lam: float = 0.01,
                 iterations: int = 4, inner_passes: int = 3, max_order: int | None = None,
                 unigram_first: bool = True, optimizer: str = "prox", options: EPOptions | None = None,
                 unigram_start: str = "gradient", tol: float = 0.0, progress=None, growth_rounds=DEPRECATED,
                 damping=DEPRECATED, passes_sweeps=DEPRECATED, greedy_floor=DEPRECATED, cavity_contexts=DEPRECATED,
                 prox_penalty=DEPRECATED, prox_steps=DEPRECATED, prox_tol=DEPRECATED):
        self.family = family
        self.optimizer = optimizer
        self.order = order
        self.eta = eta
        self.lam = lam
        self.iterations = iterations
        self.inner_passes = inner_passes
        self.max_order = max_order
        self.unigram_first = unigram_first
        self.options = options
        self.unigram_start = unigram_start
        self.tol = tol
        self.progress = progress
        # the keywords that moved into ``options`` (kept for one release)
        self.growth_rounds = growth_rounds
        self.damping = damping
        self.passes_sweeps = passes_sweeps
        self.greedy_floor = greedy_floor
        self.cavity_contexts = cavity_contexts
        self.prox_penalty = prox_penalty
        self.prox_steps = prox_steps
        self.prox_tol = prox_tol

    def _options(self, warn: bool = False) -> EPOptions:
        """``options`` with the deprecated keywords passed put in (a FutureWarning when ``warn``)."""
        return options_with_deprecated(self, "options", EPOptions, stacklevel=4, warn=warn)

    # -- family-specific pieces ---------------------------------------------------------
    def _vec(self, v, x):
        if self.family == "pep":
            n = len(self.registry_[v])
            if len(x) < n:
                x = np.concatenate([x, np.zeros(n - len(x))])
        return x

    def _theta(self, v):
        self.theta_[v] = self._vec(v, self.theta_[v])
        return self.theta_[v]

    def _msg(self, f, v):
        key = (f, v)
        self.msgs_[key] = self._vec(v, self.msgs_.get(key, np.zeros(0 if self.family == "pep" else self.size_)))
        return self.msgs_[key]

    def _support_machine(self, v, vectors, frontier_of=None) -> FeatureMachine:
        registry = self.registry_[v]
        ids = {0}
        for x in vectors:
            ids.update(np.flatnonzero(x).tolist())
        # unigrams (children of the root) are always active
        ids.update(registry.extend(()))
        if frontier_of is not None and (self.max_order is None or self.max_order > 1):
            # so are the children of ^: reading ^ is not a cell (every string starts with it), so
            # θ_^ has no gradient, stays 0 and would never open ^a, ^b, … (the start-anchored
            # n-grams, which EP's n-gram family has from the start)
            ids.update(registry.extend((BOS,)))
        if frontier_of is not None:
            # a feature at the −∞ weight (footnote 1) rules out every string it fires in; so do
            # its extensions, which are never worth activating
            for i in np.flatnonzero((frontier_of != 0) & (frontier_of > LOG_ZERO / 2)).tolist():
                w = registry.strings[i]
                if self.max_order is None or len(w) < self.max_order:
                    ids.update(registry.extend(w))
        return substring_machine(registry, ids)

    def _cavity(self, v, f):
        """θ_{V→F} = θ_V − α θ_{F→V}: the cavity (α = 1) or, while :meth:`_damped` retries a
        divergent product, a point on the segment from it to the belief θ_V (α = 0)."""
        return self._theta(v) - self._alpha * self._msg(f, v)

    def _damped(self, compute):
        """``compute()`` with the cavities at α = 1; if a product through a cavity diverges
        (DivergenceError, Z = ∞), again with α = 1/2, 1/4, …, 2⁻⁶, then 0.

        A cavity θ_V − θ_{F→V} need not be normalisable (EP's messages are ratios), and
        with it the tilted product p̂ = μ_{F→V} ⊙ ENCODE(θ_V − θ_{F→V}), or the forward
        sums of a word factor through it, can diverge; skipping such an update leaves the
        old message stale (40 skips on the seed-0 300-word graph). The retry moves the
        cavity toward the belief, θ_V − α θ_{F→V}, which for α = 0 is normalisable (θ_V
        is a projection onto the family), so some α gives a finite product. For an update
        this is EP damping: the tilted distribution keeps the fraction 1 − α of the old
        message θ_{F→V}, pulling θ_V^new toward the current belief, while eq. 6 still
        uses the true cavity, so θ_V stays the sum of its messages. Where nothing
        diverges (α = 1) the update is the plain EP update. Returns (result, α)."""
        for alpha in DAMPING:
            self._alpha = alpha
            try:
                return compute(), alpha
            except DivergenceError:
                continue
            finally:
                self._alpha = 1.0
        raise DivergenceError("every damped cavity diverges")

    def _out_dfa(self, v, f) -> Dfa:
        """The DFA of θ_{V→F} = θ_V − θ_{F→V} (α-damped inside :meth:`_damped`)."""
        theta_out = self._cavity(v, f)
        if self.family == "pep":
            machine = self._support_machine(v, [theta_out])
            return machine_dfa(machine, self._cavity(v, f))  # re-padded: the registry grew
        return machine_dfa(self.machine_, theta_out)

    # -- messages ---------------------------------------------------------------------
    def _factor_message(self, f, v) -> Wfsa:
        if f[0] == "prior":
            return self.prior_wfsa_
        word_index = f[1]
        word = self.graph_.words[word_index]
        position = word.morphemes.index(v)
        incoming = [None if j == position else self._out_dfa(u, f) for j, u in enumerate(word.morphemes)]
        return self.factors_.message(word_index, position, incoming)

    def _update(self, v, f, unigram: bool, mu: Wfsa) -> None:
        """Project p̂ = μ_{F→V} ⊙ ENCODE(cavity) onto the family and set θ_V and θ_{F→V}
        (eq. 6, always with the true cavity θ_V − θ_{F→V}; the cavity in p̂ is α-damped
        inside :meth:`_damped`)."""
        self._unigram_pass = unigram
        theta_v = self._theta(v)
        theta_out = self._cavity(v, f)
        self._step_eta = None  # set by a proximal step: the residual is then the gradient mapping
        if self.family == "ngram":
            counts, _ = self.machine_.expected_counts(mu, theta_out)
            new = ngram_closed_form(self.machine_, counts)
            self.msgs_[(f, v)] = new - (theta_v - self._msg(f, v))
            self.theta_[v] = new
            self._residual = _change(theta_v, new)
            return
        if f[0] == "prior" and not unigram and self.graph_.prior_strings is None and self.optimizer == "greedy":
            # the bigram prior lies in the substring family: its message is passed exactly
            # (what an unpenalized projection would return), so θ_V − θ_{prior→V} never
            # carries a truncated prior's tail into a divergent product. Not for the
            # proximal optimizer: it steps from the current θ_V, and substituting the
            # prior's message can leave θ_V with Z = ∞, from which no step is accepted
            exact = self._prior_substring_theta(v)
            theta_out = self._theta(v) - self._msg(f, v)  # no product: never damped
            self.theta_[v] = theta_out + exact
            self.msgs_[(f, v)] = exact
            self._residual = _change(self._vec(v, theta_v), self.theta_[v])
            return
        if unigram and self.optimizer != "greedy" and self.unigram_start == "closed-form":
            machine = self._support_machine(v, [theta_out])
            counts, _ = machine.expected_counts(mu, self._cavity(v, f))
            new = self._unigram_closed_form(v, machine, counts)
        elif self.optimizer == "greedy":
            new = self._greedy_fit(v, mu, theta_out, exclude=f)
        else:
            new = self._prox_update(v, f, mu, unigram)
        new = self._vec(v, new)
        old = self._theta(v)  # re-padded: the registry grew
        self.msgs_[(f, v)] = new - (old - self._msg(f, v))
        self.theta_[v] = new
        if self._step_eta is None:
            self._residual = _change(old, new)

    def _uniform_unigram(self, v):
        registry = self.registry_[v]
        ids = [i for i in registry.extend(()) if registry.strings[i] != (BOS,)]
        start = np.zeros(len(registry))
        start[ids] = -math.log(len(ids))
        return start

    def _prox_update(self, v, f, mu, unigram: bool):
        """θ_V^new for one message update by proximal gradient: ``prox_steps`` steps (1, the
        paper's §7) on KL(p̂ ‖ q_θ) + λΩ, p̂ = μ_{F→V} ⊙ ENCODE(cavity) fixed, each from the
        last, the active set re-opened after each (Fig. 2); on the unigram pass (§7) the
        features stay the unigrams. With ``prox_steps`` > 1 (an option) a step accepted
        without backtracking doubles η for the next one, and the steps stop once the
        penalised objective falls by less than ``prox_tol``. Records every step's objective
        in ``trace_`` when ``trace_`` is a list."""
        options = self._options()
        cavity = self._cavity(v, f)  # α-damped inside _damped: what p̂ multiplies
        true_cavity = self._theta(v) - self._msg(f, v)  # what the penalised message is measured from (eq. 6)
        theta = self._theta(v).copy()
        eta, previous = self.eta, math.inf
        counts_p, counted = None, None
        for step in range(options.prox_steps):
            machine = self._support_machine(v, [theta, cavity], frontier_of=None if unigram else theta)
            theta, cavity, true_cavity = self._vec(v, theta), self._vec(v, cavity), self._vec(v, true_cavity)
            if counted is not machine:  # p̂'s counts depend on the active set only
                counts_p, _ = machine.expected_counts(mu, cavity)
                counted = machine
            counts_q, log_z = machine.expected_counts(None, theta)
            anchor = true_cavity if options.prox_penalty == "message" else None
            if self.trace_ is not None and step == 0:
                self.trace_.append((v, f, 0, prox_objective(self.registry_[v], machine, theta, counts_p, log_z,
                                                            self.lam, anchor)))
            before = theta
            theta, used, objective = self._prox_step(v, machine, theta, counts_p, counts_q, log_z, anchor, eta=eta)
            if step == 0:  # the gradient mapping of the first step (the only one at the paper's prox_steps = 1)
                self._step_eta = used or eta
                self._residual = _change(before, theta) / self._step_eta
            if self.trace_ is not None:
                self.trace_.append((v, f, step + 1, objective))
            if used is None or previous - objective < options.prox_tol:
                break
            previous = objective
            eta = 2 * used if used == eta else used
        return theta

    def _unigram_closed_form(self, v, machine, counts):
        registry = self.registry_[v]
        new = np.zeros(len(registry))
        unigram = [(li, gi) for li, gi in enumerate(machine.feature_ids) if len(registry.strings[gi]) == 1
                   and registry.strings[gi][0] != "^"]
        total = sum(counts[li] for li, _ in unigram) + 1e-12 * len(unigram)
        for li, gi in unigram:
            new[gi] = math.log((counts[li] + 1e-12) / total)
        return new

    def _prior_substring_theta(self, v):
        """The bigram prior θ in substring form: θ_{h·a} = log p(a|h) − u_a for the
        contexts h ∈ {^} ∪ Σ and θ_a = u_a (any u: every history has one of these
        contexts, so the sum fired on reading a telescopes to log p(a|h))."""
        registry = self.registry_[v]
        machine = ngram_machine(registry.alphabet, 2)
        S, A = machine.next_state.shape
        table = np.concatenate([self.graph_.prior_theta[: S * A].reshape(S, A),
                                self.graph_.prior_theta[S * A:, None]], axis=1)
        rows = [(registry.extension_ids(()), None)]
        rows += [(registry.extension_ids(tuple(label)), s) for s, label in enumerate(machine.labels)]
        new = np.zeros(len(registry))
        base = np.full(A + 1, -math.log(A + 1))
        for ids, s in rows:
            new[ids] = base if s is None else table[s] - base
        return self._vec(v, new)

    def _greedy_fit(self, v, mu, theta_out, exclude=None):
        """Our adaptation of the paper's closed form with greedy growing (§6.1): a one-shot
        gain threshold instead of its count-ordered priority queue checked against the objective,
        with the prior's message used exactly and unseen n-grams floored at ``greedy_floor``. The
        variable keeps a suffix-closed context set C; each update counts, in one product
        with p̂, the n-grams h·a of C and of its one-symbol left extensions x·h (the active
        set of Fig. 2), keeps every context whose estimated gain in E_p̂[log q] (expected
        counts × the KL between its next-symbol distribution and its parent h[1:]'s) is at
        least λ times the A + 1 arcs it costs (eq. 8's size) and whose parent is kept, and
        sets every state's row to its normalised expected counts — the exact KL projection
        onto the variable-order DFA of C (§6, closed form). θ is written in substring form
        θ_{h·a} = log p(a|h) − log p(a|h[1:]), which telescopes back to log p(a|h) when
        the substring automaton reads a (so messages stay differences of substring θ's).
        Rounds repeat from the kept set while it grows (each round one more product with
        p̂; ``growth_rounds`` caps them, None = until no context is added, at most the
        depth cap), so one projection may grow contexts several symbols deep, as the
        paper's growing enumerates n-grams of any length in one projection;
        ``growth_rounds=1`` grows one symbol per update (the earlier behaviour: on a
        separate 300-word graph it left the NLL 1.21× trigram EP's against 1.12×).

        The contexts of the cavity and of every other incoming message (``exclude`` is F)
        are kept whatever their gain (``cavity_contexts``): eq. 7 fits the belief as
        q_θ ⊙ μ_{V→F}, so its family contains the cavity's states, as a fixed n-gram family
        always does. Letting the gain drop such a context h made θ_{F→V} = θ_V − θ_{V→F}
        carry the negation of another message's weights at h, wherever p̂ had no mass to
        fit them; in the next cavity these became large positive weights on strings that
        no factor supports (STEM47 of the seed-0 300-word lexicon: 6.99 → 1.18 nats,
        trigram EP 1.18). The penalty then prices only the contexts an update adds."""
        previous = self.contexts_.get(v, [()])
        cap = self.max_order - 1 if self.max_order is not None else 8
        options = self._options()
        rounds = 1 if self._unigram_pass else (options.growth_rounds or cap + 1)  # None: until it stops growing
        required = frozenset()
        if options.cavity_contexts and not self._unigram_pass:
            required = self._cavity_contexts(v, theta_out, exclude)
            # by length, then the strings: a frozenset's order follows string hashing, which differs
            # per process (PYTHONHASHSEED), and the contexts' order sets the sums'
            previous = list(dict.fromkeys([*previous, *sorted(required, key=lambda c: (len(c), c))]))
        for _ in range(rounds):
            new, kept = self._greedy_round(v, mu, theta_out, previous, required)
            grown = not set(kept) <= set(previous)
            previous = kept
            if not grown:
                break
        self.contexts_[v] = kept
        return new

    def _cavity_contexts(self, v, theta_out, exclude=None) -> frozenset:
        """The contexts (every h with a nonzero θ_{h·a}, closed under suffixes) of the
        cavity θ_{V→F} and of each message θ_{G→V}, G ≠ ``exclude``, it sums: the states
        of μ_{V→F} = ENCODE(θ_{V→F}) in eq. 7, also where two messages cancel in the sum."""
        registry = self.registry_[v]
        used = np.abs(self._vec(v, theta_out)) > 1e-12
        for g in self.neighbours_.get(v, ()) if exclude is not None else ():
            if g != exclude and (g, v) in self.msgs_:
                used |= np.abs(self._msg(g, v)) > 1e-12
        contexts = {()}
        for i in np.flatnonzero(used).tolist():
            h = registry.strings[i][:-1]
            contexts.update(h[k:] for k in range(len(h)))
        return frozenset(contexts)

    def _greedy_round(self, v, mu, theta_out, previous, required=frozenset()):
        """One growing round of :meth:`_greedy_fit` from the context set ``previous``:
        returns (θ in substring form, the kept contexts). The contexts in ``required``
        (the cavity's) are kept whatever their gain."""
        registry = self.registry_[v]
        A1 = len(registry.alphabet) + 1
        cap = self.max_order - 1 if self.max_order is not None else 8
        known = list(previous)
        known_set = set(previous)
        if not self._unigram_pass:
            for h in previous:
                if len(h) >= cap or (h and h[0] == "^"):
                    continue
                for x in ("^",) + registry.alphabet:
                    c = (x,) + h
                    if c not in known_set:
                        known_set.add(c)
                        known.append(c)
        known.sort(key=len)
        position = {c: i for i, c in enumerate(known)}
        extension = np.stack([registry.extension_ids(u) for u in known])  # (n, A + 1)
        ids = set(np.flatnonzero(theta_out).tolist()) | {0} | set(extension.ravel().tolist())
        machine = substring_machine(registry, ids)
        local, _ = machine.expected_counts(mu, self._vec(v, theta_out))
        loc = np.full(len(registry), -1, dtype=np.int64)
        loc[machine.feature_ids] = np.arange(len(machine.feature_ids))
        rows = np.maximum(local[loc[extension]], 0.0)  # expected counts of u·a
        parent = np.array([position[c[1:]] if c else -1 for c in known], dtype=np.int64)
        lengths = np.array([len(c) for c in known])
        totals = rows.sum(axis=1)
        with np.errstate(divide="ignore", invalid="ignore"):
            cond = np.log(rows / totals[:, None])
            parent_cond = np.where(parent[:, None] >= 0, cond[np.maximum(parent, 0)], 0.0)
            terms = np.where(rows > 0, rows * (cond - parent_cond), 0.0)
        gain = terms.sum(axis=1)
        # the cavity's contexts stay (see _greedy_fit), then the empty context (unigram row)
        keep = np.fromiter((c in required for c in known), dtype=bool, count=len(known))
        keep[0] = True
        threshold = self.lam * A1
        for depth in range(1, lengths.max() + 1):
            at = lengths == depth
            keep[at] |= keep[parent[at]] & (totals[at] > 1e-9) & (gain[at] >= threshold)
        kept = [c for c, k in zip(known, keep) if k]
        # state rows: occurrences of h·a minus those whose longer context x·h is also kept
        state_rows = rows * keep[:, None]
        child = keep & (parent >= 0)
        np.subtract.at(state_rows, parent[child], rows[child])
        # a floor of 1e-6 (log ≈ −13.8), not 1e-12 (−27.6): a message holding −27.6 turns
        # into +27.6 in a later cavity θ_V − θ_{F→V}, whose product with μ_{F→V} then
        # diverges (on the seed-0 200-word lexicon one stem's NLL went 7.46 → 1.3 nats;
        # floor chosen on seed 1). It is relative to the row's mass: a rarely visited state
        # (a cavity context p̂ hardly reaches) keeps p̂'s next-symbol distribution instead
        # of a uniform one, whose flattening came back as a large positive message weight
        # where the cavity was low (STEM7 of the seed-0 100-word lexicon: 3.61
        # nats with an absolute floor and the cavity's contexts kept; trigram EP 0.003)
        state_rows = np.maximum(state_rows, 0.0)
        state_rows = state_rows + self._options().greedy_floor * state_rows.sum(axis=1, keepdims=True) + 1e-300
        logp = np.log(state_rows / state_rows.sum(axis=1, keepdims=True))
        new = np.zeros(len(registry))
        kept_index = np.flatnonzero(keep)
        base = np.where(parent[kept_index, None] >= 0, logp[np.maximum(parent[kept_index], 0)], 0.0)
        new[extension[kept_index].ravel()] = (logp[kept_index] - base).ravel()
        return self._vec(v, new), kept

    def _prox_step(self, v, machine, theta_v, counts_p, counts_q, log_z, anchor=None, eta=None):
        """One proximal-gradient step on f(θ) + ηλΩ(θ), f(θ) = log Z_θ − E_p̂[f]·θ (= KL up
        to a constant), with the standard sufficient-decrease backtracking (Parikh & Boyd
        2013, §4.2): halve η until f(θ⁺) ≤ f(θ) + ∇f·(θ⁺ − θ) + ‖θ⁺ − θ‖²/2η; a step that
        leaves the feasible set (Z = ∞) also halves η (§6). With ``anchor`` (the cavity
        θ_{V→F}) the penalty is on the message θ − anchor, as eq. 7 + λΩ(θ) reads
        (``prox_penalty="message"``, the paper's, the default); without it on θ_V itself
        (``"belief"``, an option). Starts at ``eta`` (default ``self.eta``); returns (θ⁺, the
        η accepted or None when no step was, the penalised objective at θ⁺ without its
        constant −H(p̂))."""
        registry = self.registry_[v]
        ids = np.concatenate([[0], machine.feature_ids])
        grad = np.concatenate([[0.0], counts_p - counts_q])  # −∇f (ascent direction)
        order, parent = registry.preorder(ids)
        position = {int(i): k for k, i in enumerate(ids)}
        take = np.array([position[int(i)] for i in order])
        current = theta_v[order]
        f_current = log_z - float(counts_p @ theta_v[machine.feature_ids])
        eta = self.eta if eta is None else eta
        for _ in range(30):
            values = current + eta * grad[take]
            values[0] = 0.0
            if anchor is None:
                values = prox_tree_l2(values, parent, eta * self.lam)
            else:
                values = anchor[order] + prox_tree_l2(values - anchor[order], parent, eta * self.lam)
            new = theta_v.copy()
            new[order] = values
            try:
                z = machine.log_partition(new)
            except DivergenceError:
                z = math.inf
            if math.isfinite(z):
                step = values - current
                f_new = z - float(counts_p @ new[machine.feature_ids])
                if f_new <= f_current - float(grad[take] @ step) + float(step @ step) / (2 * eta) + 1e-12:
                    new = self._footnote_zero(registry, machine, new, counts_p)
                    if self.lam == 0:  # footnote 1's −∞ lowers log Z: measure it where it is
                        z = machine.log_partition(new)
                        f_new = z - float(counts_p @ new[machine.feature_ids])
                    return new, eta, f_new + self.lam * penalty_value(
                        "tree_l2", values - (0.0 if anchor is None else anchor[order]), parent=parent)
            eta *= 0.5
            self.stats_["backtracks"] = self.stats_.get("backtracks", 0) + 1
        self.stats_["infeasible"] += 1
        return theta_v, None, math.inf

    def _footnote_zero(self, registry, machine, theta, counts_p):
        """Unpenalised (λ = 0), a feature that no string of p̂ fires has optimal weight −∞
        (footnote 1: "we allow −∞ since it is a feature's optimal weight if p(v) = 0 for all
        v with that feature"); gradient steps only approach it, the mass q_θ keeps outside
        p̂'s support decaying like 1/steps, and at λ = 0 the active set then grows by one
        level of every such feature per step without end. Such features are set to
        :data:`LOG_ZERO` (never raised: a lower weight is as good), which only lowers log Z
        (their p̂-count is 0). Under λ > 0 a −∞ weight has infinite penalty: not applied.
        The feature ^ fires on no cell (every string starts with it) and is left alone."""
        if self.lam != 0:
            return theta
        dead = machine.feature_ids[counts_p <= 0.0]
        dead = dead[dead != registry.ids[(BOS,)]]
        theta[dead] = np.minimum(theta[dead], LOG_ZERO)
        return theta

    # -- driver -----------------------------------------------------------------------
    def _check_params(self, warn: bool = False) -> EPOptions:
        """Check the parameters; returns the options in force."""
        options = self._options(warn)
        check_choice(self, "family", ("ngram", "pep"))
        check_choice(self, "optimizer", ("prox", "greedy"))
        check_choice(options, "prox_penalty", PROX_PENALTIES)
        check_choice(self, "unigram_start", UNIGRAM_STARTS)
        check_deprecated(self, "unigram_start", {"closed-form": "the paper's gradient start (the default) reaches "
                                                               "the unigrams the closed form leaves at log 1e-12"})
        check_int(options, "prox_steps", 1)
        check_real(options, "prox_tol", 0)
        check_real(self, "tol", 0)
        if self.tol > 0 and (self.family != "pep" or self.optimizer != "prox"):
            raise ParameterError(f"{type(self).__name__}: parameter tol={self.tol!r} is invalid: the stopping rule "
                                 "is PEP-prox's (family='pep', optimizer='prox'); use tol=0", name='tol', value=self.tol)
        check_int(self, "order", 1, 4)
        check_real(self, "eta", 0, exclusive_minimum=True)
        check_real(self, "lam", 0)
        check_int(self, "iterations", 0)
        check_int(self, "inner_passes", 1)
        check_int(self, "max_order", 1, allow_none=True)
        check_int(options, "growth_rounds", 0, allow_none=True)
        check_int(options, "passes_sweeps", 0)
        check_real(options, "greedy_floor", 0)
        check_bool(self, "unigram_first")
        for name in ("damping", "cavity_contexts"):
            check_bool(options, name)
        _check_progress(self)
        return options

    def fit(self, graph: PhonologyGraph) -> "StringEP":
        """Run inference on ``graph``; returns self (``beliefs_`` holds the result)."""
        options = self._check_params(warn=True)
        started = time.perf_counter()
        self.graph_ = graph
        self.factors_ = FactorMessages(graph)
        self.prior_wfsa_ = graph.prior_wfsa()
        self.stats_ = {"infeasible": 0, "skipped": 0, "updates": 0, "damped": 0, "backtracks": 0}
        self.damped_ = []  # (sweep, variable, factor, "message" | "update", α) of every damped product
        self.skipped_ = []  # (sweep, variable, factor, "message" | "update") of every skipped update
        variables = list(graph.morphemes)
        self.neighbours_ = {v: [("prior", v)] for v in variables}
        for i, w in enumerate(graph.words):
            if w.surface is not None:
                for m in w.morphemes:
                    self.neighbours_[m].append(("word", i))
        self.msgs_ = {}
        if self.family == "ngram":
            self.machine_ = ngram_machine(graph.alphabet, self.order)
            self.size_ = self.machine_.n_cells
            self.theta_ = {v: np.zeros(self.size_) for v in variables}
        else:
            self.registry_ = {v: SubstringRegistry(graph.alphabet) for v in variables}
            self.contexts_ = {}
            self.theta_ = {v: np.zeros(1) for v in variables}
            if self.optimizer == "prox" and self.unigram_start == "gradient":
                for v in variables:
                    # θ = 0 is outside the family (Z = ∞, footnote 1): start from the uniform
                    # unigram stopping model, Z = 1, held as the prior's message so that
                    # θ_V = Σ_F θ_{F→V} (eq. 4) holds and the prior's first update replaces it
                    start = self._uniform_unigram(v)
                    self.theta_[v], self.msgs_[(("prior", v), v)] = start, start.copy()
        order = _visit_order(graph, variables)
        self.history_ = []
        for it in range(self.iterations):
            sweep = order if it % 2 == 0 else order[::-1]
            passes = self.inner_passes if it < options.passes_sweeps else 1
            unigram = self.family == "pep" and self.unigram_first and it == 0
            self._sweep_residual = 0.0
            for v in sweep:
                # μ_{F→V} depends only on the other variables' messages, which a visit to V
                # leaves alone: computed once per visit, reused by its K passes (§4.4)
                mus = {}
                for f in self.neighbours_[v]:
                    try:
                        mus[f] = self._tracked(it, v, f, "message", lambda: self._factor_message(f, v))
                    except DivergenceError:
                        self.stats_["skipped"] += passes
                        self.skipped_.append((it, v, f, "message"))
                for _ in range(passes):
                    for f, mu in mus.items():
                        try:
                            self._tracked(it, v, f, "update", lambda: self._update(v, f, unigram, mu))
                            self.stats_["updates"] += 1
                            self._sweep_residual = max(self._sweep_residual, self._residual)
                        except DivergenceError:
                            self.stats_["skipped"] += 1  # every damped product diverged: keep the old message
                            self.skipped_.append((it, v, f, "update"))
            self.history_.append({"sweep": it + 1, "passes": passes, "unigram": unigram,
                                  "residual": self._sweep_residual, "updates": self.stats_["updates"]})
            if self.progress is not None:
                self.progress(it + 1, self.iterations)
            if self.tol > 0 and not unigram and self._sweep_residual < self.tol:
                break
        self.sweeps_ = len(self.history_)
        self.stats_["sweeps"] = self.sweeps_
        self.stats_["residual"] = self.history_[-1]["residual"] if self.history_ else 0.0
        self.seconds_ = time.perf_counter() - started
        self.beliefs_ = self._beliefs()
        return self

    def _tracked(self, it, v, f, kind, compute):
        if not self._options().damping:
            return compute()
        result, alpha = self._damped(compute)
        if alpha < 1.0:
            self.stats_["damped"] += 1
            self.damped_.append((it, v, f, kind, alpha))
        return result

    def belief_machine(self, v) -> FeatureMachine:
        check_is_fitted(self, "graph_")
        if self.family == "ngram":
            return self.machine_
        return self._support_machine(v, [self._theta(v)])

    def n_features(self, v) -> int:
        return int(np.count_nonzero(self._theta(v)))

    def belief_dfa(self, v) -> Dfa:
        """b̂_V as a normalised DFA (DivergenceError when its Z diverges)."""
        machine, theta = self.belief_machine(v), self._theta(v)
        dfa = machine_dfa(machine, theta)
        return Dfa(dfa.next_state, dfa.start, dfa.cell, dfa.end - machine.log_partition(theta))

    def factor_dfas(self, word_index: int) -> list:
        """The messages m_{V→F} = ENCODE(θ_V − θ_{F→V}) of an observed word's morphemes."""
        check_is_fitted(self, "graph_")
        f = ("word", word_index)
        return [self._out_dfa(v, f) for v in self.graph_.words[word_index].morphemes]

    def _beliefs(self) -> Beliefs:
        scorers, toppers = {}, {}
        sizes = []
        for v in self.graph_.morphemes:
            machine = self.belief_machine(v)
            theta = self._theta(v)
            try:
                log_z = machine.log_partition(theta)
            except DivergenceError:
                log_z = math.inf
            sizes.append(machine.n_states)

            def scorer(string, machine=machine, theta=theta, log_z=log_z):
                return _string_score(machine, theta, string, log_z)

            def topper(k, machine=machine, theta=theta, log_z=log_z):
                if not math.isfinite(log_z):
                    return []
                return [(s, math.exp(w - log_z)) for s, w in kbest_strings(machine.encode(theta), k)]

            scorers[v], toppers[v] = scorer, topper
        method = (f"EP-{self.order}gram" if self.family == "ngram"
                  else f"PEP-{self.optimizer}(λ={self.lam:g})")
        if self.family == "pep" and self.optimizer == "prox" and self._options().prox_penalty == "belief":
            method += " [belief penalty]"
        stats = dict(self.stats_, mean_states=float(np.mean(sizes)) if sizes else 0.0)
        return Beliefs(method, scorers, toppers, self.seconds_, stats)


def project_acceptor(acceptor: Wfsa, *, optimizer: str = "prox", steps: int = 100, eta: float = 0.05,
                     lam: float = 0.01, max_order: int | None = None):
    """Project one normalisable acceptor p onto the substring family (eq. 3): the unigram
    closed form, then ``steps`` proximal-gradient steps (``optimizer="prox"``) or greedy
    growing rounds (``"greedy"``). Returns ``(machine, θ)``; ``machine.encode(θ)`` is q."""
    ep = StringEP(family="pep", eta=eta, lam=lam, max_order=max_order, optimizer=optimizer)
    ep.registry_ = {0: SubstringRegistry(acceptor.alphabet)}
    ep.theta_, ep.msgs_, ep.contexts_ = {0: np.zeros(1)}, {}, {}
    ep.stats_ = {"infeasible": 0}
    ep._unigram_pass = True
    machine = ep._support_machine(0, [])
    counts, _ = machine.expected_counts(acceptor, ep._theta(0) * 0.0)
    ep.theta_[0] = ep._unigram_closed_form(0, machine, counts)
    ep._unigram_pass = False
    zero = np.zeros(1)
    for _ in range(steps):
        theta = ep._theta(0)
        if optimizer == "greedy":
            ep.theta_[0] = ep._greedy_fit(0, acceptor, ep._vec(0, zero))
            continue
        machine = ep._support_machine(0, [theta], frontier_of=theta)
        theta = ep._theta(0)
        counts_p, _ = machine.expected_counts(acceptor, np.zeros_like(theta))
        counts_q, log_z = machine.expected_counts(None, theta)
        ep.theta_[0] = ep._prox_step(0, machine, theta, counts_p, counts_q, log_z)[0]
    theta = ep._theta(0)
    return ep._support_machine(0, [theta]), theta


# ---------------------------------------------------------------------------
# loopy BP with k-best pruning (the baseline)
# ---------------------------------------------------------------------------


def _check_progress(owner) -> None:
    if owner.progress is not None and not callable(owner.progress):
        raise ParameterError(f"{type(owner).__name__}: parameter progress={owner.progress!r} is invalid: expected None "
                             "or a callable progress(done, total)", name='progress', value=owner.progress)


class PrunedBP(ParamsMixin):
    """Loopy BP whose beliefs live on the union of the ``k``-best strings of each incoming
    message (Cotterell et al. 2015; Dreyer & Eisner 2009). ``fit(graph)`` returns self.

    Parameters are keyword-only and checked by :meth:`fit` (a ParameterError names the parameter
    and the value passed)."""

    _requires_y = False  # fit takes the data alone (scikit-learn's target tag)

    def __init__(self, *, k: int = 20, iterations: int = 4, max_length: int = 30, progress=None):
        self.k = k
        self.iterations = iterations
        self.max_length = max_length
        self.progress = progress

    def _out_dfa(self, v, f) -> Dfa:
        if v not in self.domain_:  # not visited yet: its prior stands in for its message
            return self.prior_dfa_
        strings = self.domain_[v]
        incoming = self.incoming_[v].get(f, 0.0)
        with np.errstate(invalid="ignore"):
            logs = np.where(np.isneginf(self.belief_[v]), NEG_INF, self.belief_[v] - incoming)
        return dfa_tables(strings_acceptor(self.graph_.alphabet, dict(zip(strings, logs))))

    def belief_dfa(self, v) -> Dfa:
        """b̂_V as a normalised DFA (the prior for a variable never given a domain)."""
        check_is_fitted(self, "graph_")
        if v not in self.domain_:
            return self.prior_dfa_
        return dfa_tables(strings_acceptor(self.graph_.alphabet, dict(zip(self.domain_[v], self.belief_[v]))))

    def factor_dfas(self, word_index: int) -> list:
        """The messages m_{V→F} (belief ÷ μ_{F→V} on the domain) of an observed word's morphemes."""
        check_is_fitted(self, "graph_")
        f = ("word", word_index)
        return [self._out_dfa(v, f) for v in self.graph_.words[word_index].morphemes]

    def _mu(self, f, v) -> Wfsa:
        if f[0] == "prior":
            return self.prior_wfsa_
        word = self.graph_.words[f[1]]
        position = word.morphemes.index(v)
        incoming = [None if j == position else self._out_dfa(u, f) for j, u in enumerate(word.morphemes)]
        return self.factors_.message(f[1], position, incoming)

    def _on_domain(self, mu: Wfsa, strings: list) -> np.ndarray:
        """μ(x) for every x in ``strings`` at once: one forward solve on μ ⊙ trie."""
        trie = strings_acceptor(mu.alphabet, {s: 0.0 for s in strings})
        tables = dfa_tables(trie)
        S = tables.next_state.shape[0]
        open_ended = mu.replace(final=np.zeros(mu.n_states))
        product, _, _ = product_with_dfa(open_ended, tables.next_state, tables.start, tables.cell,
                                         np.zeros(S))
        alpha = shortest_distance(product, "log").reshape(mu.n_states, S)
        # the trie node of each string: walk it
        index = {s: i + 1 for i, s in enumerate(mu.alphabet)}
        nodes = []
        for s in strings:
            q = tables.start
            for x in s:
                q = tables.next_state[q, index[x] - 1]
            nodes.append(q)
        return logsumexp(alpha[:, nodes] + mu.final[:, None], axis=0)

    def _check_params(self):
        check_int(self, "k", 1)
        check_int(self, "iterations", 0)
        check_int(self, "max_length", 1)
        _check_progress(self)

    def fit(self, graph: PhonologyGraph) -> "PrunedBP":
        """Run loopy BP on ``graph``; returns self (``beliefs_`` holds the result)."""
        self._check_params()
        started = time.perf_counter()
        self.graph_ = graph
        self.factors_ = FactorMessages(graph)
        self.prior_wfsa_ = graph.prior_wfsa()
        if graph.prior_strings is not None:
            self.prior_dfa_ = dfa_tables(self.prior_wfsa_)
        else:
            self.prior_dfa_ = machine_dfa(ngram_machine(graph.alphabet, 2), graph.prior_theta)
        variables = list(graph.morphemes)
        neighbours = {v: [("prior", v)] for v in variables}
        for i, w in enumerate(graph.words):
            if w.surface is not None:
                for m in w.morphemes:
                    neighbours[m].append(("word", i))
        self.domain_, self.belief_, self.incoming_ = {}, {}, {}
        self.stats_ = {"skipped": 0}
        order = _visit_order(graph, variables)
        for it in range(self.iterations):
            for v in (order if it % 2 == 0 else order[::-1]):
                mus = {}
                domain = set()
                for f in neighbours[v]:
                    try:
                        mu = self._mu(f, v)
                        best = kbest_strings(mu, self.k)
                    except DivergenceError:
                        self.stats_["skipped"] += 1
                        continue
                    mus[f] = mu
                    domain.update(s for s, _ in best if len(s) <= self.max_length)
                if not domain:
                    continue
                strings = sorted(domain)
                incoming = {}
                for f, mu in mus.items():
                    incoming[f] = self._on_domain(mu, strings)
                total = np.sum(list(incoming.values()), axis=0)
                total -= logsumexp(total)
                self.domain_[v], self.belief_[v], self.incoming_[v] = strings, total, incoming
            if self.progress is not None:
                self.progress(it + 1, self.iterations)
        self.seconds_ = time.perf_counter() - started
        scorers, toppers = {}, {}
        for v in variables:
            table = dict(zip(self.domain_.get(v, []), self.belief_.get(v, [])))

            def scorer(string, table=table):
                return float(table.get(string, NEG_INF))

            def topper(k, table=table):
                ranked = sorted(table.items(), key=lambda kv: -kv[1])[:k]
                return [(s, math.exp(w)) for s, w in ranked]

            scorers[v], toppers[v] = scorer, topper
        sizes = [len(self.domain_.get(v, ())) for v in variables]
        self.beliefs_ = Beliefs(f"BP-prune(k={self.k})", scorers, toppers, self.seconds_,
                                dict(self.stats_, mean_domain=float(np.mean(sizes)) if sizes else 0.0))
        return self

