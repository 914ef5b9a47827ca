"""The sparse-move chain (engine/chain_sparse.py) against the dense chain engine and against enumeration."""

import itertools

import numpy as np
import pytest

from varorder.engine import chain as dense
from varorder.engine import chain_sparse
from varorder.errors import ParameterError


def random_chain(rng, S, K, density, B, L, scale=1.0):
    label = rng.integers(0, K, S)
    pairs = [(a, b) for a in range(S) for b in range(S) if rng.random() < density]
    src = np.array([p[0] for p in pairs], dtype=np.int64)
    dst = np.array([p[1] for p in pairs], dtype=np.int64)
    moves = chain_sparse.SparseMoves(label, src, dst, K)
    E = rng.normal(scale=scale, size=(B, L, K))
    W = rng.normal(scale=scale, size=src.size)
    start = np.where(rng.random(S) < 0.7, rng.normal(scale=scale, size=S), -np.inf)
    end = np.where(rng.random(S) < 0.7, rng.normal(scale=scale, size=S), -np.inf)
    lengths = rng.integers(1, L + 1, B)
    return moves, E, W, start, end, lengths


def dense_reference(moves, E, W, start, end, lengths):
    T = np.full((moves.S, moves.S), -np.inf)
    T[moves.src, moves.dst] = W
    ci = dense.prepare(E[:, :, moves.label], T, start, end, lengths)
    node, edge, logz = dense.marginals(ci, edges="sum")
    label_node = np.zeros(E.shape)
    for s in range(moves.S):
        label_node[:, :, moves.label[s]] += node[:, :, s]
    ok = np.isfinite(logz)
    counts = edge[ok].sum(axis=0)[moves.src, moves.dst]
    return logz, np.where(ok[:, None, None], label_node, 0.0), counts


@pytest.mark.parametrize("scale", [1.0, 400.0])  # 400: every sequence takes the log-space path
@pytest.mark.parametrize("seed", range(6))
def test_equals_the_dense_chain(seed, scale):
    rng = np.random.default_rng(seed)
    moves, E, W, start, end, lengths = random_chain(rng, S=int(rng.integers(2, 9)), K=int(rng.integers(1, 5)),
                                                    density=0.5, B=int(rng.integers(1, 40)), L=7, scale=scale)
    logz, node, counts = chain_sparse.marginals(moves, E, W, start, end, lengths)
    ref_logz, ref_node, ref_counts = dense_reference(moves, E, W, start, end, lengths)
    np.testing.assert_allclose(logz, ref_logz, rtol=1e-10, atol=1e-9)
    np.testing.assert_allclose(node, ref_node, atol=1e-9)
    np.testing.assert_allclose(counts, ref_counts, rtol=1e-8, atol=1e-8)


def test_mixed_paths_in_one_batch():
    """A batch where some sequences' emissions spread too far for exp space: each path is exact."""
    rng = np.random.default_rng(7)
    moves, E, W, start, end, lengths = random_chain(rng, S=6, K=3, density=0.6, B=50, L=9)
    E[::3] *= 500.0
    logz, node, counts = chain_sparse.marginals(moves, E, W, start, end, lengths)
    ref_logz, ref_node, ref_counts = dense_reference(moves, E, W, start, end, lengths)
    np.testing.assert_allclose(logz, ref_logz, rtol=1e-10, atol=1e-9)
    np.testing.assert_allclose(node, ref_node, atol=1e-9)
    np.testing.assert_allclose(counts, ref_counts, rtol=1e-8, atol=1e-8)


def test_against_enumeration():
    rng = np.random.default_rng(3)
    S, K, n = 4, 2, 4
    moves, E, W, start, end, _ = random_chain(rng, S, K, density=0.6, B=1, L=n)
    T = np.full((S, S), -np.inf)
    T[moves.src, moves.dst] = W
    scores = {}
    for path in itertools.product(range(S), repeat=n):
        s = start[path[0]] + end[path[-1]] + sum(E[0, t, moves.label[p]] for t, p in enumerate(path))
        s += sum(T[a, b] for a, b in zip(path, path[1:]))
        if np.isfinite(s):
            scores[path] = s
    logz, node, counts = chain_sparse.marginals(moves, E, W, start, end, np.array([n]))
    if not scores:
        assert logz[0] == -np.inf
        return
    values = np.array(list(scores.values()))
    ref = np.log(np.exp(values - values.max()).sum()) + values.max()
    np.testing.assert_allclose(logz[0], ref, rtol=1e-12)
    expected = np.zeros((n, K))
    move_index = {(a, b): m for m, (a, b) in enumerate(zip(moves.src.tolist(), moves.dst.tolist()))}
    expected_counts = np.zeros(moves.M)
    for path, s in scores.items():
        p = np.exp(s - ref)
        for t, state in enumerate(path):
            expected[t, moves.label[state]] += p
        for a, b in zip(path, path[1:]):
            expected_counts[move_index[(a, b)]] += p
    np.testing.assert_allclose(node[0], expected, atol=1e-12)
    np.testing.assert_allclose(counts, expected_counts, atol=1e-12)


def test_bad_arguments_raise_parameter_errors():
    moves = chain_sparse.SparseMoves([0, 1], [0, 1], [1, 0], 2)
    with pytest.raises(ParameterError):
        chain_sparse.SparseMoves([0, 1], [0, 2], [1, 0], 2)
    with pytest.raises(ParameterError):
        chain_sparse.marginals(moves, np.zeros((1, 3, 2)), np.array([0.0, np.inf]), np.zeros(2), np.zeros(2), [3])
    with pytest.raises(ParameterError):
        chain_sparse.marginals(moves, np.zeros((1, 3, 2)), np.zeros(2), np.zeros(2), np.zeros(2), [4])
