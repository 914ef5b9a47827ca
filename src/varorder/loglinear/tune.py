"""Choosing λ and α as Nelakanti et al. (2013, §6) do: λ by cross-validation on a smaller
training / validation split (their 30K / 10K words), α (the depth weighting α^m of the
weighted penalties) on a validation set.

Factorization: as :mod:`varorder.loglinear.model`; this module only fits that model on the
tuning split for each grid point and scores the validation sentences. Every grid point is
the optimum of eq. 2 for its (λ, α), reached by full-batch FISTA (``polish``) from zeros or
from the neighbouring λ's solution (a warm start along the λ path, which changes where the
optimiser starts, not what it converges to), and stopped when an iteration lowers the
objective by less than ``tol`` (1e-6) of its value: λ then selects a model of eq. 2, not an
amount of early stopping. The λ grid is logarithmic; when the lowest validation perplexity
falls on an edge the grid is extended past that edge (same ratio) until the minimum is
interior or ``max_extensions`` is spent — the result says which (``lam_interior``).
"""

from __future__ import annotations

import math
import time
import dataclasses
from dataclasses import asdict, dataclass, field

import numpy as np

from varorder.errors import ParameterError
from varorder.loglinear import prox as proxlib

__all__ = ["DEFAULT_LAMS", "TUNE_TOL", "TuneResult", "default_alphas", "fit_tuned", "split_for_tuning", "tune_loglinear"]

# λ against the summed log-loss (eq. 2): 1-3-10 per decade, extended at an edge
DEFAULT_LAMS = (0.1, 0.3, 1.0, 3.0, 10.0)
TUNE_TOL = 1e-6
TUNE_MAX_ITER = 20000
TUNE_TRAIN_WORDS, TUNE_VALID_WORDS = 30_000, 10_000


def default_alphas(penalty: str) -> tuple:
    """α grid of a weighted penalty around the paper's best value (1 alone for an unweighted one)."""
    if not penalty.startswith("w"):
        return (1.0,)
    best = proxlib.PENALTIES[penalty][1]
    return tuple(round(best * r, 4) for r in (0.8, 0.9, 1.0, 1.1, 1.25))


@dataclass
class TuneResult:
    """The chosen (λ, α), its validation perplexity and every grid point tried."""

    order: int
    penalty: str
    lam: float
    alpha: float
    perplexity: float
    lams: list
    alphas: list
    lam_interior: bool
    alpha_interior: bool
    grid: list = field(default_factory=list)

    def to_dict(self) -> dict:
        return asdict(self)


def split_for_tuning(ids, lengths, train_words: int = TUNE_TRAIN_WORDS, valid_words: int = TUNE_VALID_WORDS):
    """The first whole sentences reaching ``train_words`` words and the following ones reaching
    ``valid_words`` (§6: 30K / 10K). A corpus with fewer than ``train_words + valid_words`` words
    is split 3 : 1 by words instead. Returns ``((ids, lengths), (ids, lengths))``."""
    ids = np.asarray(ids, dtype=np.int64)
    lengths = np.asarray(lengths, dtype=np.int64)
    total = int(lengths.sum())
    if len(lengths) < 2:
        raise ParameterError("tuning needs at least two sentences (a training and a validation part)", name='lengths', value=lengths)
    if total < train_words + valid_words:
        train_words, valid_words = math.ceil(0.75 * total), total
    ends = np.cumsum(lengths)
    first = min(int(np.searchsorted(ends, train_words)) + 1, len(lengths) - 1)
    last = min(int(np.searchsorted(ends, ends[first - 1] + valid_words)) + 1, len(lengths))
    cut, stop = int(ends[first - 1]), int(ends[last - 1])
    return (ids[:cut], lengths[:first]), (ids[cut:stop], lengths[first:last])


def _fit(train, vocabulary, order, penalty, lam, alpha, tol, max_iter, init, settings):
    from varorder.loglinear.model import StructuredLogLinear

    estimator = StructuredLogLinear(order=order, penalty=penalty, lam=lam, alpha=alpha, epochs=0, polish=max_iter,
                                    **_with_polish_tol(settings, tol))
    return estimator.fit_ids(*train, vocabulary, init=init)


def _with_polish_tol(settings, tol) -> dict:
    """``settings`` (other StructuredLogLinear parameters) with the solver's ``polish_tol`` = tol."""
    from varorder.loglinear.model import SolverOptions

    settings = dict(settings or {})
    settings["solver"] = dataclasses.replace(settings.get("solver") or SolverOptions(), polish_tol=tol)
    return settings


def tune_loglinear(train, valid, vocabulary, *, order: int, penalty: str = "wlt2", lams=DEFAULT_LAMS, alphas=None,
                   tol: float = TUNE_TOL, max_iter: int = TUNE_MAX_ITER, max_extensions: int = 4, settings=None,
                   report=None, stop_past_minimum: bool = False) -> TuneResult:
    """λ (and α for a weighted penalty) of the lowest validation perplexity.

    Parameters
    ----------
    train, valid : (ids, lengths)
        Encoded sentences (one vocabulary): the tuning split's training and validation parts
        (:func:`split_for_tuning`).
    lams : sequence of float
        The λ grid (positive; logarithmic spacing is assumed when extending it).
    alphas : sequence of float, optional
        α grid; default :func:`default_alphas` (1 alone for an unweighted penalty, whose α is
        fixed by definition).
    tol, max_iter : convergence of each grid point (relative objective decrease, iteration cap).
    settings : dict, optional
        Other :class:`StructuredLogLinear` parameters (``weighting``, ``penalize_root``, ...).
    report : callable, optional
        Called with each grid point's row (a dict) as it is measured.
    stop_past_minimum : bool
        Walk the grid from the largest λ down and stop once a smaller λ is worse than the best
        so far (the minimum is then bracketed); saves the smallest, slowest-to-converge λ's
        when validation perplexity is unimodal in λ. ``lams`` of the result lists only the
        λ's measured.
    """
    if penalty not in proxlib.PENALTIES:
        raise ParameterError(f"unknown penalty {penalty!r}; expected one of {', '.join(proxlib.PENALTIES)}", name='penalty', value=penalty)
    lams = sorted(float(x) for x in lams)
    if not lams or lams[0] <= 0:
        raise ParameterError("the λ grid must hold positive values", name='lams', value=lams)
    alphas = sorted(float(a) for a in (default_alphas(penalty) if alphas is None else alphas))
    if not alphas or alphas[0] <= 0:
        raise ParameterError("the α grid must hold positive values", name='alphas', value=alphas)
    settings = dict(settings or {})
    grid = []

    def measure(lam, alpha, init):
        start = time.process_time()
        fit = _fit(train, vocabulary, order, penalty, lam, alpha, tol, max_iter, init, settings)
        row = {"alpha": alpha, "lam": lam, "perplexity": fit.model_.perplexity(valid),
               "iterations": len(fit.polish_history_) - 1, "converged": fit.polish_converged_,
               "objective": fit.objective_, "residual": fit.polish_residual_,
               "cpu_seconds": time.process_time() - start}
        grid.append(row)
        if report is not None:
            report(row)
        return row, fit.theta_

    def lam_path(alpha):
        rows, thetas = {}, {}
        theta = None
        grid_lams = []
        for lam in reversed(lams):  # large λ first: sparse, quick; each warm-starts the next
            rows[lam], thetas[lam] = measure(lam, alpha, theta)
            theta = thetas[lam]
            grid_lams.insert(0, lam)
            best = min(grid_lams, key=lambda x: rows[x]["perplexity"])
            if stop_past_minimum and grid_lams[0] < best < grid_lams[-1]:
                break  # bracketed: the smaller (slowest to converge) λ's are left out
        extensions = 0
        while extensions < max_extensions:
            best = min(grid_lams, key=lambda x: rows[x]["perplexity"])
            if best == grid_lams[0] and len(grid_lams) > 1:
                new = grid_lams[0] ** 2 / grid_lams[1]
                grid_lams.insert(0, new)
            elif best == grid_lams[-1]:
                new = grid_lams[-1] ** 2 / grid_lams[-2] if len(grid_lams) > 1 else grid_lams[-1] * 3.0
                grid_lams.append(new)
            else:
                break
            rows[new], thetas[new] = measure(new, alpha, thetas[best])
            extensions += 1
        best = min(grid_lams, key=lambda x: rows[x]["perplexity"])
        interior = grid_lams[0] < best < grid_lams[-1]
        return best, rows[best]["perplexity"], interior, grid_lams

    results = {}
    for alpha in alphas:
        results[alpha] = lam_path(alpha)
    grid_alphas = list(alphas)
    extensions = 0
    while len(grid_alphas) > 1 and extensions < max_extensions:
        best_alpha = min(grid_alphas, key=lambda a: results[a][1])
        if best_alpha == grid_alphas[0]:
            new = round(grid_alphas[0] ** 2 / grid_alphas[1], 4)
            grid_alphas.insert(0, new)
        elif best_alpha == grid_alphas[-1]:
            new = round(grid_alphas[-1] ** 2 / grid_alphas[-2], 4)
            grid_alphas.append(new)
        else:
            break
        results[new] = lam_path(new)
        extensions += 1
    best_alpha = min(grid_alphas, key=lambda a: results[a][1])
    lam, perplexity, lam_interior, grid_lams = results[best_alpha]
    return TuneResult(order=order, penalty=penalty, lam=lam, alpha=best_alpha, perplexity=perplexity, lams=grid_lams,
                      alphas=grid_alphas, lam_interior=lam_interior,
                      alpha_interior=len(grid_alphas) == 1 or grid_alphas[0] < best_alpha < grid_alphas[-1], grid=grid)


def fit_tuned(ids, lengths, vocabulary, *, order: int, penalty: str = "wlt2", lams=DEFAULT_LAMS, alphas=None,
              tol: float = TUNE_TOL, max_iter: int = TUNE_MAX_ITER, settings=None, report=None,
              train_words: int = TUNE_TRAIN_WORDS, valid_words: int = TUNE_VALID_WORDS):
    """§6 end to end (what ``varorder lm train --model loglinear --tune`` runs): λ and α by
    :func:`tune_loglinear` on the first ``train_words`` / next ``valid_words`` words of the
    training sentences, then the model of eq. 2 with them on all the sentences, converged the
    same way. Returns ``(estimator, TuneResult)``."""
    from varorder.loglinear.model import StructuredLogLinear

    train, valid = split_for_tuning(ids, lengths, train_words, valid_words)
    result = tune_loglinear(train, valid, vocabulary, order=order, penalty=penalty, lams=lams, alphas=alphas, tol=tol,
                            max_iter=max_iter, settings=settings, report=report)
    estimator = StructuredLogLinear(order=order, penalty=penalty, lam=result.lam, alpha=result.alpha, epochs=0,
                                    polish=max_iter, **_with_polish_tol(settings, tol))
    return estimator.fit_ids(ids, lengths, vocabulary), result
