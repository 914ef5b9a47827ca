"""The flat dense semi-Markov marginals (engine/semimarkov_flat.py): the exp-space specialisation against the
generic recursion and both against enumeration over segmentations."""

import numpy as np
import pytest

from varorder.engine import semimarkov_flat
from varorder.testing import oracle


def random_flat(rng, B, L, D, K, scale=1.0, holes=0.0):
    lengths = rng.integers(1, L + 1, B)
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    P = rng.normal(scale=scale, size=(int(offsets[-1]), D, K))
    if holes:
        P[rng.random(P.shape) < holes] = -np.inf
    T = rng.normal(scale=scale, size=(K, K))
    if holes:
        T[rng.random(T.shape) < holes] = -np.inf
    start = rng.normal(scale=scale, size=K)
    end = rng.normal(scale=scale, size=K)
    return P, offsets, T, start, end


def enumerated(P, offsets, T, start, end):
    B = offsets.size - 1
    D, K = P.shape[1:]
    logz = np.empty(B)
    seg = np.zeros(P.shape)
    edges = np.zeros((K, K))
    for b in range(B):
        lo, hi = int(offsets[b]), int(offsets[b + 1])
        paths = oracle.segmentation_paths(P[lo:hi], T, start, end)
        logz[b] = oracle.log_partition(paths)
        if np.isfinite(logz[b]):
            seg[lo:hi] = oracle.segment_marginals(paths, hi - lo, D, K)
            edges += oracle.segment_edge_counts(paths, K)
    return logz, seg, edges


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("holes", [0.0, 0.3])
def test_specialised_and_generic_equal_enumeration(seed, holes):
    rng = np.random.default_rng(seed)
    args = random_flat(rng, B=4, L=5, D=3, K=3, holes=holes)
    expected = enumerated(*args)
    for specialised in (True, False):
        logz, seg, edges = semimarkov_flat.marginals(*args, specialised=specialised)
        np.testing.assert_allclose(logz, expected[0], rtol=1e-11)
        np.testing.assert_allclose(seg, expected[1], atol=1e-12)
        np.testing.assert_allclose(edges, expected[2], atol=1e-11)


@pytest.mark.parametrize("scale", [1.0, 30.0, 500.0])  # 500: factors spread far beyond the double range
def test_specialised_equals_generic_on_long_sequences(scale):
    rng = np.random.default_rng(7)
    args = random_flat(rng, B=20, L=60, D=6, K=5, scale=scale, holes=0.1)
    P, offsets, T, start, end = args
    if scale == 30.0:  # a sequence with no segmentation at all
        P[offsets[3]:offsets[4], :, :] = -np.inf
    fast = semimarkov_flat.marginals(*args)
    slow = semimarkov_flat.marginals(*args, specialised=False)
    np.testing.assert_allclose(fast[0], slow[0], rtol=1e-11)
    np.testing.assert_allclose(fast[1], slow[1], rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(fast[2], slow[2], rtol=1e-9, atol=1e-10)
    if scale == 30.0:
        assert fast[0][3] == -np.inf and not fast[1][offsets[3]:offsets[4]].any()


def test_the_exp_space_path_runs_and_gives_up_where_it_should():
    rng = np.random.default_rng(3)
    P, offsets, T, start, end = random_flat(rng, B=6, L=20, D=4, K=3)
    done = np.zeros(6, dtype=np.bool_)
    seg = np.zeros(P.shape)
    semimarkov_flat._scaled(P, offsets, T, start, end, seg, np.empty(6), np.zeros((3, 3)), done)
    assert done.all()
    P[offsets[2] + 1, 0, 0] += 900.0  # one position's factors spread over 900 nats
    done[:] = False
    semimarkov_flat._scaled(P, offsets, T, start, end, np.zeros(P.shape), np.empty(6), np.zeros((3, 3)), done)
    assert not done[2] and done[[0, 1, 3, 4, 5]].all()
    fast = semimarkov_flat.marginals(P, offsets, T, start, end)
    slow = semimarkov_flat.marginals(P, offsets, T, start, end, specialised=False)
    np.testing.assert_allclose(fast[0], slow[0], rtol=1e-12)
    np.testing.assert_allclose(fast[1], slow[1], atol=1e-12)
