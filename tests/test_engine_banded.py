"""Banded-transition chains equal the dense engine on the same (pruned) transitions, and enumeration."""

from __future__ import annotations

import numpy as np
import pytest

from varorder import chain
from varorder.engine.banded import band_of, banded_marginals, banded_viterbi, dense_of
from varorder.testing import oracle


def _instance(seed, B=3, L=6, K=7):
    rng = np.random.default_rng(seed)
    E = rng.normal(size=(B, L, K))
    T = rng.normal(size=(K, K))
    start = rng.normal(size=K)
    lengths = rng.integers(1, L + 1, size=B)
    return E, T, start, lengths


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("w", [1, 2, 6, 9])
def test_banded_equals_dense_engine_on_the_pruned_matrix(seed, w):
    E, T, start, lengths = _instance(seed)
    band = band_of(T, w)
    pruned = dense_of(band)
    if w >= T.shape[0] - 1:  # the band covers every transition: the full computation itself
        np.testing.assert_array_equal(pruned, T)
    node, edge_band, logz = banded_marginals(E, band, start=start, lengths=lengths)
    d_node, d_edge, d_logz = chain.marginals(E, pruned, start=start, lengths=lengths, edges="sum", return_log_z=True)
    np.testing.assert_allclose(logz, d_logz, rtol=1e-10)
    for b, n in enumerate(lengths):
        np.testing.assert_allclose(node[b, :n], d_node[b, :n], atol=1e-10)
        np.testing.assert_allclose(dense_of(np.where(edge_band[b] == 0, -np.inf, np.log(np.maximum(edge_band[b], 1e-300)))),
                                   np.where(d_edge[b] == 0, -np.inf, np.log(np.maximum(d_edge[b], 1e-300))), atol=1e-8)
    paths, scores = banded_viterbi(E, band, start=start, lengths=lengths)
    d_paths, d_scores = chain.viterbi(E, pruned, start=start, lengths=lengths)
    np.testing.assert_allclose(scores, d_scores, rtol=1e-12)
    np.testing.assert_array_equal(paths, d_paths)


def test_banded_log_partition_matches_enumeration():
    E, T, start, lengths = _instance(7, B=1, L=4, K=5)
    band = band_of(T, 1)
    _, _, logz = banded_marginals(E, band, start=start)
    paths = oracle.chain_paths(E[0], dense_of(band), start=start)
    assert logz[0] == pytest.approx(oracle.log_partition(paths), rel=1e-10)
    _, scores = banded_viterbi(E, band, start=start)
    assert scores[0] == pytest.approx(oracle.max_score(paths), rel=1e-12)


def test_no_finite_path_and_bad_band():
    E = np.zeros((1, 3, 4))
    band = np.full((4, 3), -np.inf)
    _, _, logz = banded_marginals(E, band)
    assert logz[0] == -np.inf
    paths, scores = banded_viterbi(E, band)
    assert scores[0] == -np.inf and (paths == -1).all()
    with pytest.raises(ValueError, match="band must have shape"):
        banded_marginals(E, np.zeros((4, 2)))


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("w", [1, 3, 9])
@pytest.mark.parametrize("semiring", ["log", "max"])
def test_registered_banded_kernels_equal_the_generic_chain_recursion(seed, w, semiring):
    from varorder.engine.banded import SPECIALISED_FORWARD, forward_values
    from varorder.engine.semiring import resolve

    E, T, start, lengths = _instance(seed)
    T[np.random.default_rng(seed + 50).random(T.shape) < 0.2] = -np.inf
    band = band_of(T, w)
    assert resolve(semiring) in SPECIALISED_FORWARD
    fast = forward_values(E, band, start, lengths, semiring)
    generic = forward_values(E, band, start, lengths, semiring, specialised=False)
    np.testing.assert_allclose(fast, generic, rtol=1e-11)
