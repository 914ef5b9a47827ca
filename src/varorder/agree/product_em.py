"""Product EM and its tractable approximations (Liang, Klein & Jordan, NIPS 2008).

Submodels p_m(x, z; θ_m), m = 1..M, share hidden variables z. Each is an
exponential family over its own domain Z_m whose log-potentials on z are
b_m = θ_mᵀ φ_m^X(x), split into a *shared* part (features of z every submodel
has, e.g. alignment edges) and a *private* part (e.g. one direction's jumps).
An E-step ``E(b', Z')`` returns the mean parameters µ = E_q φ^Z(z) of
q(z) ∝ exp(b'ᵀ φ^Z(z)) on Z' and the log-normalizer A_{Z'}(b'). The modes:

* ``independent`` — µ_m = E(b_m, Z_m); objective Σ_m log p_m(x) (paper eq. 1).
* ``exact`` — product EM, µ = E(Σ_m b_m, Z∩) shared by every M-step; objective
  O_agree = log Σ_z Π_m p_m(x, z) (eq. 2), never decreasing. Needs every
  submodel on the same domain and wholly shared potentials.
* ``domain`` — domain-approximate product EM (§4.1): µ_m = E(b, Z_m) with the
  shared potentials of all submodels summed and submodel m's own private ones;
  each M-step gets the average of the shared µ_m (§5.2: "use the product of
  translation probabilities … and the average of the edge posteriors").
  Objective (eq. 12 at the E-step optimum): (1/M) Σ_m A_{Z_m}(b).
* ``parameter`` — parameter-approximate product EM (§4.2): µ_m = E(M b_m, Z∩),
  M-steps on the average; objective (eq. 13 at the optimum): (1/M) Σ_m A_{Z∩}(M b_m).
  In eq. 13 θ_m meets only µ_m, so the paper's averaged M-step is not coordinate
  ascent on it and this objective may fluctuate (the others never decrease).
* ``product`` — Liang, Taskar & Klein (2006) "alignment by agreement": separate
  E-steps E(b_m, Z_m), M-steps on the element-wise product of the shared µ_m
  (no objective is known; the independent one is recorded). Private statistics
  (e.g. NULL posteriors) still come from each submodel's own E-step.

Directed submodels have A_m(θ_m) = 0 (footnote 2), so the tracked objective is
the sum or average of E-step log-normalizers. The private statistics of a
submodel always come from its own E-step.

E-steps run shard by shard: serially, on a ``concurrent.futures`` executor, or
on a ``dask.distributed`` client (anything with ``scatter``/``map``/``gather``);
per-shard counts are additive.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from contextlib import nullcontext
from dataclasses import dataclass, field

import numpy as np

from varorder._progress import Progress
from varorder.base import ParamsMixin, check_bool, check_choice, check_int
from varorder.engine.threads import map_in_order, threads_for
from varorder.errors import ParameterError
from varorder.parallel import as_executor, connect_dask, reduce_in_order

__all__ = ["MODES", "Statistics", "Submodel", "AgreementEM", "estep_shard", "own_estep", "add_counts",
           "connect_dask", "make_executor"]

MODES = ("independent", "exact", "domain", "parameter", "product")


@dataclass
class Statistics:
    """Result of one E-step on one shard.

    shared : µ on the shared features of the shard (a flat array laid out by the shard).
    private : the submodel's own expected statistics (name → array).
    log_normalizer : A_{Z'}(b') summed over the shard's data points.
    """

    shared: np.ndarray
    private: dict = field(default_factory=dict)
    log_normalizer: float = 0.0


class Submodel(ABC):
    """One tractable submodel of an agreement-trained family.

    ``domain`` names Z_m (equal names mean equal domains); ``has_private_features``
    says whether b_m has a part that is not shared; ``fresh_statistics`` that the arrays of
    :meth:`expected_statistics` are new ones, free for the E-step to reuse; ``adds_shared`` that
    :meth:`expected_statistics` takes ``add_shared_to=array`` and then adds its shared µ into that
    array (returning ``shared=None``) instead of allocating one, so that the averaging modes hold one
    shared array per shard instead of M. A submodel class may also define
    ``summed_shared_log_potentials(submodels, shard)`` returning Σ_m b_m on the shard's shared
    features (bit for bit the sum of :meth:`shared_log_potentials` in submodel order) or None;
    ``own_expected_statistics(shard)``, bit for bit ``expected_statistics(shard,
    shared_log_potentials(shard))`` computed without the array of potentials; and
    ``joint_independent_pass = True``: independent EM then runs every submodel on a shard before the
    next shard (one ``estep_scope`` per shard for all of them, every submodel's count total held at once)
    instead of one submodel over every shard after the other (there a submodel may define
    ``own_accumulated_counts(total, shard, workspace)`` → (total, log-normalizer), bit for bit
    ``accumulate_counts`` of its ``own_estep`` without the shared µ array); the submodels' E-steps on a shard then
    run concurrently on the engine's threads (:func:`varorder.engine.threads.map_in_order`), so their
    ``own_estep`` and ``accumulate_counts`` must touch only their own state and release the GIL.
    """

    domain: str = "shared"
    has_private_features: bool = False
    # expected_statistics returns arrays that nothing else holds (the E-step may then average in place)
    fresh_statistics: bool = False
    adds_shared: bool = False

    @abstractmethod
    def shared_log_potentials(self, shard) -> np.ndarray:
        """b_m restricted to the shared features of ``shard`` (flat float64 array)."""

    @abstractmethod
    def expected_statistics(self, shard, shared_log_potentials, private_scale: float = 1.0) -> Statistics:
        """E(b', Z_m) with b' = given shared potentials + private_scale · own private potentials."""

    @abstractmethod
    def counts(self, shard, shared_marginals, statistics: Statistics) -> dict:
        """Additive M-step counts of one shard from the (combined) shared µ and own private µ.

        In the averaging modes (``domain``, ``parameter``) ``statistics.shared`` has been released
        (None) by then: the average ``shared_marginals`` is what the M-step uses.
        """

    def accumulate_counts(self, total: dict | None, shard, shared_marginals, statistics: Statistics,
                          workspace: dict) -> dict:
        """``add_counts(total, self.counts(...))``; a submodel may override it to add a shard's counts
        without building them as a separate table first (e.g. sparse in a large table). ``workspace``
        is a dict the E-step task keeps across its shards and submodels for such buffers."""
        return add_counts(total, self.counts(shard, shared_marginals, statistics))

    @abstractmethod
    def maximize(self, counts: dict) -> None:
        """Closed-form M-step from counts summed over every shard."""

    def log_likelihood(self, shards) -> float:
        """Σ log p_m(x) over the shards (the independent E-step's log-normalizer)."""
        return float(sum(own_estep(self, s).log_normalizer for s in shards))


def own_estep(submodel: Submodel, shard) -> Statistics:
    """The submodel's own E-step E(b_m, Z_m) on one shard (what independent EM and the product mode use):
    its ``own_expected_statistics(shard)`` where it has one (see :class:`Submodel`)."""
    own = getattr(submodel, "own_expected_statistics", None)
    if own is not None:
        return own(shard)
    return submodel.expected_statistics(shard, submodel.shared_log_potentials(shard))


def add_counts(total: dict | None, part: dict) -> dict:
    """Key-wise sum of two count dictionaries (``total`` may be None)."""
    if total is None:
        return {k: np.array(v, dtype=np.float64, copy=True) for k, v in part.items()}
    for k, v in part.items():
        total[k] += v  # in place: totals are our own copies, and tables run to millions of entries
    return total


def _sum(arrays):
    """Element-wise sum of equally shaped arrays into a new array (no stacked M × n temporary)."""
    out = np.array(arrays[0], dtype=np.float64, copy=True)
    for a in arrays[1:]:
        out += a
    return out


def _summed_shared_potentials(submodels, shard):
    """Σ_m b_m on the shard's shared features, holding one submodel's b_m at a time (or the submodels'
    own ``summed_shared_log_potentials``, see :class:`Submodel`)."""
    summed = getattr(type(submodels[0]), "summed_shared_log_potentials", None)
    if summed is not None:
        total = summed(submodels, shard)
        if total is not None:
            return total
    total = np.array(submodels[0].shared_log_potentials(shard), dtype=np.float64, copy=True)
    for m in submodels[1:]:
        total += m.shared_log_potentials(shard)
    return total


def _mean_shared(submodels, stats):
    """Average of the submodels' shared µ; every ``stats[m].shared`` is released (the M-steps read
    the average; see :meth:`Submodel.counts`). Built in the first submodel's own array when every
    submodel says its statistics are its own (``fresh_statistics``)."""
    first = stats[0].shared
    if len(stats) > 1 and all(s.shared is None for s in stats[1:]):  # summed into the first: _domain_statistics
        mean = first
    elif (all(getattr(m, "fresh_statistics", False) for m in submodels) and isinstance(first, np.ndarray)
            and first.dtype == np.float64 and first.flags.writeable and not any(first is s.shared for s in stats[1:])):
        mean = first
        for s in stats[1:]:
            mean += s.shared
    else:
        mean = _sum([s.shared for s in stats])
    mean *= 1.0 / len(stats)
    for s in stats:
        s.shared = None
    return mean


def _domain_statistics(submodels, shard, total):
    """E(b, Z_m) for every submodel; where each submodel can add its shared µ into another's array
    (``adds_shared``), they all add into the first one's, whose ``shared`` is then Σ_m µ_m
    (the later ones' None): the same sums, in the same order, as :func:`_mean_shared` makes."""
    first = submodels[0].expected_statistics(shard, total)
    shared = first.shared
    if (len(submodels) > 1 and all(getattr(m, "adds_shared", False) and getattr(m, "fresh_statistics", False)
                                   for m in submodels)
            and isinstance(shared, np.ndarray) and shared.dtype == np.float64 and shared.flags.writeable):
        return [first] + [m.expected_statistics(shard, total, add_shared_to=shared) for m in submodels[1:]]
    return [first] + [m.expected_statistics(shard, total) for m in submodels[1:]]


def _shard_statistics(submodels, shard, mode: str):
    """(combined shared µ per submodel, each submodel's Statistics, objective term) of one shard."""
    M = len(submodels)
    if mode == "independent" or mode == "product":
        stats = [own_estep(m, shard) for m in submodels]
        objective = sum(s.log_normalizer for s in stats)
        if mode == "independent":
            combined = [s.shared for s in stats]
        else:
            prod = stats[0].shared.copy()
            for s in stats[1:]:
                prod *= s.shared
            combined = [prod] * M
    elif mode == "exact":
        joint = submodels[0].expected_statistics(shard, _summed_shared_potentials(submodels, shard))
        stats = [joint] * M
        combined = [joint.shared] * M
        objective = joint.log_normalizer
    elif mode == "domain":
        total = _summed_shared_potentials(submodels, shard)
        stats = _domain_statistics(submodels, shard, total)
        del total
        objective = float(np.mean([s.log_normalizer for s in stats]))
        combined = [_mean_shared(submodels, stats)] * M
    elif mode == "parameter":
        stats = [m.expected_statistics(shard, M * m.shared_log_potentials(shard), private_scale=float(M))
                 for m in submodels]
        objective = float(np.mean([s.log_normalizer for s in stats]))
        combined = [_mean_shared(submodels, stats)] * M
    else:
        raise ParameterError(f"mode must be one of {MODES}, got {mode!r}", name='mode', value=mode)
    return combined, stats, float(objective)


def estep_shard(submodels, shard, mode: str):
    """Every submodel's counts for one shard under ``mode``, and the shard's objective term.

    Arrays over the shard's shared features are dropped as soon as they are used (the shard's
    edges dominate an aligner's E-step memory).
    """
    combined, stats, objective = _shard_statistics(submodels, shard, mode)
    return [m.counts(shard, c, s) for m, c, s in zip(submodels, combined, stats)], objective


def _scope(shard):
    """The shard's ``estep_scope()`` if it has one: a context held open over its E-step, in which the
    shard may keep data derived for that E-step (e.g. a bitext shard's edge pair ids)."""
    scope = getattr(shard, "estep_scope", None)
    return scope() if scope is not None else nullcontext(shard)


def _estep_many(submodels, shards, mode):
    """E-step over a list of shards inside one task: counts summed, objective summed."""
    if mode == "independent":
        return _independent_estep(submodels, shards)
    totals = [None] * len(submodels)
    objective = 0.0
    workspace = {}
    for shard in shards:
        with _scope(shard):
            combined, stats, obj = _shard_statistics(submodels, shard, mode)
            totals = [m.accumulate_counts(t, shard, c, s, workspace)
                      for m, t, c, s in zip(submodels, totals, combined, stats)]
            del combined, stats
        objective += obj
    return totals, objective


def _independent_estep(submodels, shards, maximize: bool = False):
    """Independent EM's E-step over ``shards``, one submodel at a time (its own E-step on every shard,
    each shard's arrays dropped before the next), so that one submodel's counts and E-step state exist
    at once: (per-submodel count totals, objective summed shard by shard). With ``maximize`` each
    submodel's M-step runs as soon as its counts are complete (serial EM: the submodels share no
    parameters) and the totals are not kept (None). Submodels that all set ``joint_independent_pass``
    run shard by shard instead (see :class:`Submodel`): each total gets the same terms in the same
    order, so the same sums."""
    terms = [[0.0] * len(submodels) for _ in shards]
    if len(submodels) > 1 and all(getattr(m, "joint_independent_pass", False) for m in submodels):
        totals = _joint_independent_totals(submodels, shards, terms)
        if maximize:
            for k, m in enumerate(submodels):
                m.maximize(totals[k])
                totals[k] = None
    else:
        totals = []
        for k, m in enumerate(submodels):
            total, workspace = None, {}
            for i, shard in enumerate(shards):
                with _scope(shard):
                    total, terms[i][k] = _own_counts(m, total, shard, workspace, fused=False)
            if maximize:
                m.maximize(total)
                total = None
            totals.append(total)
            del workspace
    objective = 0.0
    for row in terms:
        objective += sum(row)
    return totals, objective


def _own_counts(submodel, total, shard, workspace, fused: bool = True):
    """(``total`` with the submodel's own E-step's counts on ``shard`` added, that E-step's
    log-normalizer); with ``fused``, by its ``own_accumulated_counts`` where it has one (see
    :class:`Submodel`: one thread, for the joint pass whose submodels run concurrently)."""
    accumulated = getattr(submodel, "own_accumulated_counts", None) if fused else None
    if accumulated is not None:
        return accumulated(total, shard, workspace)
    stats = own_estep(submodel, shard)
    return submodel.accumulate_counts(total, shard, stats.shared, stats, workspace), stats.log_normalizer


def _joint_independent_totals(submodels, shards, terms):
    """Every submodel's count total, with all their E-steps on a shard inside one ``estep_scope``
    and run concurrently on the engine's threads (each on its own total and workspace)."""
    totals = [None] * len(submodels)
    workspaces = [{} for _ in submodels]
    for i, shard in enumerate(shards):
        with _scope(shard):
            def one(k):
                totals[k], terms[i][k] = _own_counts(submodels[k], totals[k], shard, workspaces[k])

            map_in_order(one, range(len(submodels)), threads_for(getattr(shard, "n_sentences", 0)))
    return totals


def _estep_one(shard, submodels, mode):
    return _estep_many(submodels, [shard], mode)


def make_executor(workers: int = 1, dask_address: str | None = None, timeout: float = 10.0):
    """The ``executor`` argument of :class:`AgreementEM` (and of the estimators built on it)
    for a worker count or a Dask scheduler: a ``dask.distributed`` client when
    ``dask_address`` is given, a thread pool of ``workers`` threads when ``workers > 1``
    (the E-step kernels release the GIL), else None (serial)."""
    if dask_address is not None:
        return connect_dask(dask_address, timeout)
    if workers and workers > 1:
        from concurrent.futures import ThreadPoolExecutor

        return ThreadPoolExecutor(int(workers))
    return None


class AgreementEM(ParamsMixin):
    """Train submodels jointly (or independently) by EM in one of :data:`MODES`.

    Parameters
    ----------
    submodels : list of :class:`Submodel` (trained in place).
    mode : one of :data:`MODES`.
    n_iter : EM iterations.
    executor : None (serial), a ``concurrent.futures.Executor``, or a
        ``dask.distributed.Client``; shards are the unit of work.
    callback : optional ``callback(iteration, estimator)`` after each M-step.
    progress : report the iterations (a bar on a terminal, a summary line otherwise).

    Parameters are keyword-only and checked by :meth:`fit` (a ParameterError names the parameter
    and the value passed). Unlike a scikit-learn estimator, ``fit`` trains the submodels
    given in place (they are the model); ``submodels_`` is that same list.

    Attributes after ``fit``: ``submodels_`` and ``objectives_`` (objective of the
    parameters entering each iteration, measured by that iteration's E-step).
    """

    _requires_y = False  # fit takes the data alone (scikit-learn's target tag)

    def __init__(self, *, submodels, mode: str = "domain", n_iter: int = 10, executor=None, callback=None,
                 progress: bool = False):
        self.submodels = submodels
        self.mode = mode
        self.n_iter = n_iter
        self.executor = executor
        self.callback = callback
        self.progress = progress

    def _validate(self):
        check_choice(self, "mode", MODES)
        if isinstance(self.submodels, (str, bytes)) or not self.submodels:
            raise ParameterError(f"AgreementEM: parameter submodels={self.submodels!r:.80} is invalid: expected a "
                                 "non-empty list of Submodel instances", name='submodels', value=self.submodels)
        check_int(self, "n_iter", 0)
        check_bool(self, "progress")
        if self.mode == "exact":
            domains = {m.domain for m in self.submodels}
            if len(domains) != 1 or any(m.has_private_features for m in self.submodels):
                raise ParameterError("mode='exact' needs submodels on one domain with wholly shared potentials "
                                     f"(domains {sorted(domains)}); use mode='domain' or 'parameter'", name='mode', value=self.mode)

    def estep(self, shards):
        """One E-step over every shard: (list of per-submodel counts, objective)."""
        shards = list(shards)
        if self.executor is None:
            return _estep_many(self.submodels, shards, self.mode)
        results = self._map_estep(getattr(self, "_executor", None) or as_executor(self.executor), shards)

        def add(total, result):
            return [add_counts(t, c) for t, c in zip(total[0], result[0])], total[1] + result[1]

        return reduce_in_order(results, add, start=([None] * len(self.submodels), 0.0))

    def _map_estep(self, executor, shards) -> list:
        """Every shard's (counts, objective term), in shard order, computed on ``executor``."""
        return executor.map(_estep_one, shards, self.submodels, self.mode)

    def fit(self, shards):
        """Run ``n_iter`` EM iterations over ``shards`` (a list of data shards); returns self.

        On an executor, with ``progress``, each iteration writes a line: objective, workers busy, time."""
        self._validate()
        shards = list(shards)
        self._executor = None
        if self.executor is not None:
            self._executor = as_executor(self.executor)
            shards = self._executor.scatter(shards)
        self.submodels_ = self.submodels
        self.objectives_ = []
        iterations = Progress(range(int(self.n_iter)), enabled=self.progress, desc=f"EM ({self.mode})", unit="iter")
        for it in iterations:
            if self.mode == "independent" and self.executor is None:
                _, objective = _independent_estep(self.submodels, shards, maximize=True)
            else:
                counts, objective = self.estep(shards)
                for model, c in zip(self.submodels, counts):
                    model.maximize(c)
                del counts
            self.objectives_.append(objective)
            if self.progress and self._executor is not None:
                iterations.write(f"EM ({self.mode}) iteration {it + 1}: objective {objective:.6f}, "
                                 f"{self._executor.take_stats().describe(self._executor.n_workers)}")
            if self.callback is not None:
                self.callback(it, self)
        return self
