"""Objectives that sum over examples, evaluated shard by shard on a :mod:`varorder.parallel` executor.

A conditional log-likelihood is a sum over sequences, J(θ) = Σ_s J_s(θ), and so is its gradient:
each shard (a contiguous range of sequences) keeps its own design matrix, gold counts and buffers
where the work runs (a worker process, a Dask worker, or here), and an evaluation sends θ out once
and gets back one (value, gradient) pair per shard, added in shard order
(:func:`varorder.parallel.reduce_in_order`). The shards are cut from the sequence lengths alone
(:func:`shard_bounds`), never from the worker count, so the same data and ``n_shards`` give
bit-identical objectives, hence bit-identical L-BFGS paths and models, on any executor and any
number of workers. Against the unsharded objective the sums differ only in the order of
floating-point additions (about 1e-15 relative).

Used by :class:`varorder.models.CRF` (``n_jobs`` / ``executor``); any per-shard objective with
``__call__(theta) -> (value, gradient)`` works (the CRF's is :class:`varorder.models.crf.ChainObjective`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from varorder.errors import ParameterError
from varorder.parallel import Executor, SerialExecutor, as_executor, reduce_in_order

__all__ = ["DEFAULT_SHARDS", "ShardedObjective", "shard_bounds", "shard_plan"]

#: shards of an estimator given an executor but no ``n_shards``: a constant, never the worker
#: count, so the model does not depend on how many workers there are
DEFAULT_SHARDS = 8


def shard_bounds(lengths: np.ndarray, n_shards: int) -> list[tuple[int, int]]:
    """Cut sequences ``0..S-1`` (with token counts ``lengths``) into at most ``n_shards`` contiguous,
    non-empty ranges of about equal token counts: ``[(first, stop), ...]``."""
    lengths = np.asarray(lengths, dtype=np.int64)
    if isinstance(n_shards, bool) or not isinstance(n_shards, (int, np.integer)) or n_shards < 1:
        raise ParameterError(f"n_shards must be a positive integer, got {n_shards!r}", name='n_shards', value=n_shards)
    n = lengths.size
    if n == 0:
        return []
    ends = np.cumsum(lengths)
    targets = ends[-1] * np.arange(1, n_shards) / n_shards
    cuts = np.unique(np.clip(np.searchsorted(ends, targets, side="left") + 1, 1, n))
    edges = [0, *[int(c) for c in cuts if 0 < c < n], n]
    return [(a, b) for a, b in zip(edges[:-1], edges[1:]) if b > a]


def shard_plan(owner, lengths: np.ndarray) -> tuple[Executor, list[tuple[slice, slice]] | None]:
    """The executor of an estimator's ``executor`` / ``n_jobs`` and its shards as (sequence slice,
    token slice) pairs, from ``owner.n_shards`` (1 serially, :data:`DEFAULT_SHARDS` with an
    executor, when not set); the shards are None when the fit runs serially in one piece."""
    executor = as_executor(owner.executor, n_jobs=owner.n_jobs)
    serial = isinstance(executor, SerialExecutor)
    n_shards = owner.n_shards or (1 if serial else DEFAULT_SHARDS)
    if n_shards == 1 and serial:
        return executor, None
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    return executor, [(slice(a, b), slice(int(offsets[a]), int(offsets[b])))
                      for a, b in shard_bounds(lengths, n_shards)]


def _evaluate(objective, theta):
    return objective(theta)


def _add(total, part):
    value, grad = total
    grad += part[1]
    return value + part[0], grad


class ShardedObjective:
    """Σ over shard objectives of (value, gradient), evaluated on ``executor``.

    Parameters
    ----------
    shards : sequence of callables ``theta -> (float, ndarray)``
        One objective per shard; sent to the executor's workers once, here.
    executor : anything :func:`varorder.parallel.as_executor` accepts (None: serial).
    """

    def __init__(self, shards: Sequence, executor=None):
        if not shards:
            raise ParameterError("a sharded objective needs at least one shard", name='shards', value=shards)
        self.executor: Executor = as_executor(executor)
        self.n_shards = len(shards)
        self._handles = self.executor.scatter(list(shards))

    @classmethod
    def placed(cls, handles: Sequence, executor: Executor) -> "ShardedObjective":
        """Shard objectives already where the work runs (``executor.map_remote``'s handles)."""
        objective = cls.__new__(cls)
        objective.executor, objective.n_shards, objective._handles = executor, len(handles), list(handles)
        if not handles:
            raise ParameterError("a sharded objective needs at least one shard", name='handles', value=handles)
        return objective

    def __call__(self, theta: np.ndarray) -> tuple[float, np.ndarray]:
        results = self.executor.map(_evaluate, self._handles, theta)
        value, grad = reduce_in_order(results, _add, start=(0.0, np.zeros_like(theta)))
        return float(value), grad

