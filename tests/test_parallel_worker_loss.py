"""Issue #35: a worker process killed between two EM iterations of the word aligner (its corpus read
and kept on the workers, :meth:`varorder.agree.WordAligner.fit_sources`) on a LocalCluster of two
worker processes (loopback only). The run must finish, not hang, and write the model of the
undisturbed run bit for bit: the shared arguments of every map are tasks of the graph (the scheduler
can recompute them), and a piece lost with its worker is recomputed from its source (read again
where it runs). The same with the pairs in memory (``fit``): the shards sent from here are tasks
whose pickles the scheduler keeps.

The disturbed run is a child process (its own session) killed with its cluster after a guard
(no progress for minutes: tests/local_clusters.py), so a hang fails the test instead of blocking CI (a hung Dask client also hangs its cluster's
teardown, so a thread with a timeout is not enough)."""

from __future__ import annotations

import functools
import json
import os
import signal
import uuid

import numpy as np
import pytest

from local_clusters import local_cluster, run_in_guarded_child
from test_parallel_learners import _ALIGNER, _aligner_arrays, _bitext_files, _same_arrays

_GUARD_SECONDS = 600  # without progress (scaled: tests/local_clusters.py)


def _counted_read(log_dir, source):
    """``iter_joint(source)``, leaving one file in ``log_dir`` per read (wherever the read runs)."""
    from varorder.io.bitext import iter_joint

    with open(os.path.join(log_dir, f"{os.path.basename(source)}-{uuid.uuid4().hex}"), "w"):
        pass
    return iter_joint(source)


def _reads(log_dir) -> dict:
    """How many times each source was read so far."""
    counts = {}
    for name in os.listdir(log_dir):
        source = name.rsplit("-", 1)[0]
        counts[source] = counts.get(source, 0) + 1
    return counts


def _train_killing_workers(workdir: str, paths: list[str], victims: str, data: str = "sources") -> None:
    """The child's run: ``fit_sources`` (``data`` "sources") or ``fit`` on the pairs in memory
    (``data`` "memory": shards scattered from here) on a fresh 2-process LocalCluster, ``victims``
    ("one" or "both") worker processes SIGKILLed after IBM Model 1's second iteration; writes the
    model (``dask.npz``) and what it saw (``seen.json``) into ``workdir``."""
    from varorder.agree.aligner import WordAligner
    from varorder.io.bitext import iter_joint

    log_dir = os.path.join(workdir, "reads")
    os.mkdir(log_dir)
    seen = {}
    with local_cluster(processes=True) as (cluster, client):

        def kill_between_iterations(phase, iteration, aligner):
            # the third iteration's maps begin with the loss unseen
            if phase == "ibm1" and iteration == 1 and "before" not in seen:
                seen["before"] = _reads(log_dir)  # fit_sources: every piece read twice (vocabulary, then shards)
                pids = sorted(client.run(os.getpid).items())
                for _, pid in pids[:1] if victims == "one" else pids:
                    os.kill(pid, signal.SIGKILL)

        aligner = WordAligner(executor=client, callback=kill_between_iterations, **_ALIGNER)
        if data == "sources":
            aligner.fit_sources(paths, functools.partial(_counted_read, log_dir))
        else:
            aligner.fit([pair for path in paths for pair in iter_joint(path)])
        aligner.save(os.path.join(workdir, "dask.npz"))
    seen["after"] = _reads(log_dir)
    with open(os.path.join(workdir, "seen.json"), "w") as handle:
        json.dump(seen, handle)


def _run_guarded(workdir, paths, victims, data="sources"):
    """:func:`_train_killing_workers` in a child process; a test failure when it is not done within the guard."""
    run_in_guarded_child(f"from test_parallel_worker_loss import _train_killing_workers; "
                         f"_train_killing_workers({str(workdir)!r}, {list(paths)!r}, {victims!r}, {data!r})",
                         _GUARD_SECONDS, "training did not finish after a worker was killed (a hang)", progress=str(workdir))


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::varorder.agree.corpus.LongPairWarning")
@pytest.mark.parametrize("data", ["sources", "memory"])
@pytest.mark.parametrize("victims", ["one", "both"])
def test_aligner_survives_workers_killed_between_em_iterations(tmp_path, data, victims):
    pytest.importorskip("distributed")
    from varorder.agree.aligner import WordAligner
    from varorder.io.bitext import iter_joint
    from varorder.parallel import SerialExecutor

    paths, _ = _bitext_files(tmp_path, seed=5)
    if data == "sources":
        undisturbed = WordAligner(**_ALIGNER).fit_sources(paths, iter_joint)
    else:  # one task per shard, as on Dask (executor=None adds the shards' counts in another grouping)
        undisturbed = WordAligner(executor=SerialExecutor(), **_ALIGNER).fit(
            [pair for path in paths for pair in iter_joint(path)])
    expected = _aligner_arrays(undisturbed, tmp_path / "local.npz")
    workdir = tmp_path / "run"
    workdir.mkdir()
    _run_guarded(workdir, paths, victims, data)
    seen = json.loads((workdir / "seen.json").read_text())
    with np.load(workdir / "dask.npz") as model:
        _same_arrays(expected, {name: model[name] for name in model.files}, (data, victims))
    if data == "memory":  # the shards sent from here: read nowhere else
        assert seen["before"] == seen["after"] == {}
        return
    names = sorted(os.path.basename(path) for path in paths)
    assert seen["before"] == {name: 2 for name in names}  # vocabulary, then shards
    # both workers lost: every piece read again, once; one lost: the pieces it held (a piece on the
    # other worker is not read again)
    assert sorted(seen["after"]) == names
    if victims == "both":
        assert seen["after"] == {name: 3 for name in names}
    else:
        assert set(seen["after"].values()) <= {2, 3}
