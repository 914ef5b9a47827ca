"""The aligner's numbers do not depend on how its E-steps are run (#33 item 5): serial EM, a thread pool of
any size and the ``align train --workers`` option give bit-identical models.

Before, a serial E-step added every edge's posterior straight into the running count total across its
shards, while an executor adds per-shard count tables in shard order: the same sums associated
differently, so ``align train --workers 1`` and ``--workers 2`` wrote tables that differed in the last
bits (see docs/notes/33-determinism.md). These tests fail on that code."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from click.testing import CliRunner

from varorder.agree.align import _add_at, _add_shard_at
from varorder.agree.aligner import WordAligner
from varorder.parallel import ThreadExecutor


def _pairs(n=45, seed=0, vocab=12):
    rng = np.random.default_rng(seed)
    pairs = []
    for _ in range(n):
        e = [f"e{w}" for w in rng.integers(0, vocab, int(rng.integers(2, 8)))]
        f = [w.replace("e", "f") for w in e][::-1 if rng.random() < 0.3 else 1]
        if rng.random() < 0.3:
            f.insert(0, "fnull")
        pairs.append((e, f))
    return pairs


def _state(aligner):
    arrays = [(name, getattr(m, name)) for m in aligner.models_ for name in ("table_", "null_", "jumps_")
              if hasattr(m, name)]
    return arrays, aligner.history_


def _assert_same(a, b):
    (arrays_a, history_a), (arrays_b, history_b) = a, b
    assert history_a == history_b  # objectives too, exactly
    for (name, x), (_, y) in zip(arrays_a, arrays_b):
        assert x.dtype == y.dtype and x.tobytes() == y.tobytes(), (name, np.abs(x - y).max())


@pytest.mark.parametrize("model,training", [("hmm", "agreement"), ("hmm", "independent"), ("hmm", "product"),
                                            ("ibm1", "agreement"), ("ibm1", "independent")])
def test_serial_em_equals_every_thread_executor_bit_for_bit(model, training):
    pairs = _pairs()
    params = dict(model=model, training=training, ibm1_iterations=2, iterations=2, shard_size=7)
    serial = _state(WordAligner(**params).fit(pairs))
    with ThreadPoolExecutor(2) as pool:
        _assert_same(serial, _state(WordAligner(executor=pool, **params).fit(pairs)))
    with ThreadExecutor(3) as pool:
        _assert_same(serial, _state(WordAligner(executor=pool, **params).fit(pairs)))


def test_add_shard_at_adds_the_shards_own_table():
    """A shard's counts are summed per pair first, then added: what adding its count table gives, bit for bit,
    and the scratch is left zero. The crafted pair shows why: 1 + 2⁻⁵³ + 2⁻⁵³ edge by edge rounds to 1 twice,
    1 + (2⁻⁵³ + 2⁻⁵³) is 1 + 2⁻⁵²."""
    tiny = 2.0 ** -53
    index = np.array([0, 0, 1, -1, 1], dtype=np.int32)
    weights = np.array([tiny, tiny, 0.5, 9.0, 0.25])
    out = np.array([1.0, 1.0, 3.0])
    edge_by_edge = out.copy()
    _add_at(index, weights, edge_by_edge)
    assert edge_by_edge[0] == 1.0  # the old running total
    table = np.zeros(3)
    _add_at(index, weights, table)
    scratch = np.zeros(3)
    _add_shard_at(index, weights, out, scratch)
    assert out.tobytes() == (np.array([1.0, 1.0, 3.0]) + table).tobytes() and out[0] == 1.0 + 2.0 ** -52
    assert not scratch.any()
    rng = np.random.default_rng(1)
    for _ in range(20):
        n = int(rng.integers(1, 50))
        index = rng.integers(-1, n, int(rng.integers(0, 400))).astype(np.int32)
        weights = rng.random(index.size) * 10.0 ** rng.integers(-20, 3, index.size)
        total, table, scratch = rng.random(n) * 1e3, np.zeros(n), np.zeros(n)
        expected = total.copy()
        _add_at(index, weights, table)
        expected += table
        _add_shard_at(index, weights, total, scratch)
        assert total.tobytes() == expected.tobytes() and not scratch.any()


def test_cli_train_same_model_file_with_one_or_two_workers(tmp_path):
    from varorder.cli.align import COMMAND

    pairs = _pairs(40, seed=3)
    (tmp_path / "c.e").write_text("".join(" ".join(e) + "\n" for e, _ in pairs))
    (tmp_path / "c.f").write_text("".join(" ".join(f) + "\n" for _, f in pairs))
    files = []
    for workers in (1, 2):
        out = tmp_path / f"w{workers}.npz"
        result = CliRunner().invoke(COMMAND, ["train", str(tmp_path / "c.e"), str(tmp_path / "c.f"), "-o", str(out),
                                              "--iterations", "2", "--ibm1-iterations", "2", "--shard-size", "7",
                                              "--workers", str(workers), "-q"])
        assert result.exit_code == 0, result.output
        files.append(out.read_bytes())
    assert files[0] == files[1]
