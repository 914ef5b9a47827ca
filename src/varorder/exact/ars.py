"""Algorithm 1 of Carter, Dymetman & Bouchard (2012): exact optimisation and adaptive
rejection sampling over a refined q-automaton.

Factorization: the target p(x) (:class:`~varorder.exact.target.HighOrderTarget`) is
bounded by q(x) >= p(x) (:class:`~varorder.exact.qautomaton.QAutomaton`).

* Optimisation: x* = argmax q (Viterbi on q's lattice); if p(x*) = q(x*) then for every x,
  p(x) <= q(x) <= q(x*) = p(x*), so x* is the exact argmax of p; otherwise refine q along
  x* (Algorithm 2 at every position) and repeat.
* Sampling: draw x ~ q / q(X) (forward filtering-backward sampling on the lattice) and
  accept it with probability p(x) / q(x): an accepted x is an exact draw from
  p / p(X), whatever q was, so refining q on rejections (adaptive rejection sampling,
  Gilks & Wild 1992) keeps every accepted sample exact. With batch updates, B trials
  share one q and the rejected ones refine it in one step (paper Table 3).

The history records every trial (log q, log p, accepted, the q version it came from) and,
after every refinement step, the number of states and the n-grams per order of q.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np

from varorder.errors import ParameterError
from varorder.exact.qautomaton import QAutomaton
from varorder.exact.target import HighOrderTarget
from varorder.lattice import log_partition
from varorder.engine.validate import as_rng

__all__ = ["RunHistory", "DecodeResult", "SampleResult", "decode", "sample", "acceptance_rate"]



@dataclass
class RunHistory:
    """Per-trial and per-refinement record of one run of Algorithm 1."""

    log_q: list[float] = field(default_factory=list)
    log_p: list[float] = field(default_factory=list)
    accepted: list[bool] = field(default_factory=list)
    q_version: list[int] = field(default_factory=list)
    _refinements: list[tuple[int, int, dict[int, int], float | None]] = field(default_factory=list, repr=False)
    # Refinement records of compiled decode steps, turned into tuples on first access:
    # (trial count of the first, states per refinement, n-grams per order per refinement, mass of the last)
    _pending: list = field(default_factory=list, repr=False)

    @property
    def refinements(self) -> list[tuple[int, int, dict[int, int], float | None]]:
        """After each refinement step: (trial count, states, n-grams per order, log q(X) or None)."""
        for first, states, ngrams, mass in self._pending:
            last = len(states) - 1
            for r, (n_states, counts) in enumerate(zip(states.tolist(), ngrams.tolist())):
                self._refinements.append((first + r, n_states, {k: c for k, c in enumerate(counts) if c},
                                          mass if r == last else None))
        self._pending.clear()
        return self._refinements

    @property
    def num_trials(self) -> int:
        return len(self.accepted)

    @property
    def num_accepted(self) -> int:
        return int(sum(self.accepted))

    @property
    def ratios(self) -> np.ndarray:
        """p(x) / q(x) per trial."""
        return np.exp(np.asarray(self.log_p) - np.asarray(self.log_q))

    def to_dict(self) -> dict:
        return {
            "log_q": self.log_q,
            "log_p": self.log_p,
            "accepted": self.accepted,
            "q_version": self.q_version,
            "refinements": [
                {"trial": t, "states": s, "ngrams": {str(k): v for k, v in c.items()}, "log_mass": m}
                for t, s, c, m in self.refinements
            ],
        }


def acceptance_rate(accepted, window: int | None = None) -> float:
    """Accepted fraction over all trials or the last ``window`` (AR-100 with 100)."""
    accepted = list(accepted)
    if window is not None:
        accepted = accepted[-window:]
    return float(np.mean(accepted)) if accepted else 0.0


@dataclass
class DecodeResult:
    path: list[int]          # automaton path (``</s>`` last with eos)
    sentence: list[int]      # the L word ids
    log_q: float
    log_p: float
    iterations: int
    num_states: int
    ngram_counts: dict[int, int]
    seconds: float
    history: RunHistory
    exact: bool              # False only when stopped by max_iterations / time_limit


@dataclass
class SampleResult:
    samples: list[list[int]]  # accepted sentences (word ids), in order of acceptance
    log_p: list[float]
    history: RunHistory
    num_states: int
    ngram_counts: dict[int, int]
    seconds: float
    stopped_by: str           # "samples", "target_ar", "max_trials" or "time_limit"

    @property
    def ar100(self) -> float:
        return acceptance_rate(self.history.accepted, 100)


def _check_target(target, automaton):
    if automaton is None:
        if not isinstance(target, HighOrderTarget):
            raise ParameterError(f"target must be a HighOrderTarget, got {type(target).__name__}", name='target', value=target)
        return QAutomaton(target)
    if automaton.target is not target:
        raise ParameterError("automaton was built for another target", name='automaton', value=automaton)
    return automaton


def decode(target: HighOrderTarget, *, max_iterations: int = 100_000, time_limit: float | None = None,
           automaton: QAutomaton | None = None, record_mass: bool = False) -> DecodeResult:
    """Exact argmax of p by Algorithm 1 in optimisation mode.

    Stops when the Viterbi path of q has p = q (``exact`` True), or after
    ``max_iterations`` Viterbi calls / ``time_limit`` seconds (``exact`` False; the path is
    then the last Viterbi path of q, whose log q bounds log p of the argmax from above).
    The iterations run in compiled code (:meth:`QAutomaton.decode_steps`), in chunks when
    a time limit is given, one at a time with ``record_mass`` (log q(X) after every
    refinement). ``seconds`` includes building the initial q.
    """
    if max_iterations < 1:
        raise ParameterError(f"max_iterations must be >= 1, got {max_iterations}", name='max_iterations', value=max_iterations)
    start = time.perf_counter()
    q = _check_target(target, automaton)
    history = RunHistory()
    chunk = 1 if record_mass else (max_iterations if time_limit is None else 16)
    iterations = 0
    while True:
        version = q.num_refinements
        steps = q.decode_steps(min(chunk, max_iterations - iterations))
        n = len(steps.log_q)
        exact = steps.status == "exact"
        history.log_q.extend(steps.log_q.tolist())
        history.log_p.extend(steps.log_p.tolist())
        history.accepted.extend([False] * (n - 1) + [exact])
        history.q_version.extend(range(version, version + n))
        if len(steps.refined_states):
            mass = log_partition(q.lattice()) if record_mass else None
            history._pending.append((iterations + 1, steps.refined_states, steps.refined_ngrams, mass))
        iterations += n
        if exact or iterations >= max_iterations or (time_limit is not None and time.perf_counter() - start > time_limit):
            break
    return DecodeResult(steps.path, target.sentence(steps.path), float(steps.log_q[-1]), float(steps.log_p[-1]),
                        iterations, steps.num_states, q.ngram_counts(), time.perf_counter() - start, history, exact)


def sample(target: HighOrderTarget, *, n_samples: int | None = None, target_ar: float | None = None,
           window: int = 100, batch: int = 1, max_trials: int = 100_000, time_limit: float | None = None,
           seed=None, automaton: QAutomaton | None = None, record_mass: bool = False) -> SampleResult:
    """Exact samples of p by Algorithm 1 in sampling mode (adaptive rejection sampling).

    Parameters
    ----------
    n_samples : stop once this many samples are accepted.
    target_ar : stop once the acceptance rate over the last ``window`` trials (AR-100 for
        window = 100) reaches this value (checked when at least ``window`` trials exist).
    batch : B trials drawn from the same q, then one refinement with all rejected ones.
    max_trials, time_limit : hard limits.
    seed : int or numpy Generator; the run is reproducible given it.
    """
    if n_samples is None and target_ar is None:
        raise ParameterError("give n_samples or target_ar (or both) as a stopping rule", name='n_samples', value=n_samples)
    if n_samples is not None and n_samples < 1:
        raise ParameterError(f"n_samples must be >= 1, got {n_samples}", name='n_samples', value=n_samples)
    if target_ar is not None and not 0.0 < target_ar <= 1.0:
        raise ParameterError(f"target_ar must be in (0, 1], got {target_ar}", name='target_ar', value=target_ar)
    if batch < 1:
        raise ParameterError(f"batch must be >= 1, got {batch}", name='batch', value=batch)
    if window < 1:
        raise ParameterError(f"window must be >= 1, got {window}", name='window', value=window)
    q = _check_target(target, automaton)
    rng = as_rng(seed)
    history = RunHistory()
    samples, sample_log_p = [], []
    start = time.perf_counter()
    stopped_by = None

    def done() -> str | None:
        if n_samples is not None and len(samples) >= n_samples:
            return "samples"
        if target_ar is not None and history.num_trials >= window and acceptance_rate(history.accepted, window) >= target_ar:
            return "target_ar"
        if history.num_trials >= max_trials:
            return "max_trials"
        if time_limit is not None and time.perf_counter() - start > time_limit:
            return "time_limit"
        return None

    while stopped_by is None:
        drawn = q.sample_arcs(batch, rng)
        if np.all(drawn < 0):
            raise ParameterError("the target gives probability zero to every candidate sequence")
        rejected = []
        for arcs in drawn:
            trace = q.trace_arcs(arcs)
            path = trace.symbols
            log_q = trace.log_q
            log_p = q.path_log_p(arcs)
            accept = math.log(1.0 - rng.random()) < log_p - log_q  # log U < log p/q, U uniform on (0, 1]
            history.log_q.append(log_q)
            history.log_p.append(log_p)
            history.accepted.append(bool(accept))
            history.q_version.append(q.num_refinements)
            if accept:
                samples.append(target.sentence(path))
                sample_log_p.append(log_p)
            else:
                rejected.append(path)
            stopped_by = done()
            if stopped_by is not None:
                break
        if stopped_by is None and rejected:
            for path in rejected:
                q.refine(path)
            history.refinements.append((history.num_trials, q.num_states, q.ngram_counts(),
                                        log_partition(q.lattice()) if record_mass else None))
    return SampleResult(samples, sample_log_p, history, q.num_states, q.ngram_counts(),
                        time.perf_counter() - start, stopped_by)
