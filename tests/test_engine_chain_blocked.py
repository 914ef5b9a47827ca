"""The blocked scaled kernels of engine.chain against the oracle and the log-space kernel:
batches spanning several blocks (ragged, shared or per-sequence transitions), potentials
extreme enough that the power-of-two scaling must hand sequences to the log-space path,
thread-count independence, and the one-pass validation of large arrays."""

from __future__ import annotations

import warnings

import numba
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from varorder import chain, lattice
from varorder.engine import chain as engine_chain
from varorder.engine import threads
from varorder.testing import oracle

SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
SCALES = [0.01, 1.0, 30.0, 300.0, 1000.0]


@pytest.fixture(autouse=True)
def _quiet_no_path():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", chain.NoPathWarning)
        yield


@st.composite
def batches(draw, min_batch=65, max_batch=140, max_len=5, max_labels=3):
    """Batches larger than one block (64 rows at K ≤ 16), ragged, with −inf and mixed scales:
    each sequence draws its own potential scale, so one block mixes scaled and log-space rows."""
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    B = draw(st.integers(min_batch, max_batch))
    L = draw(st.integers(1, max_len))
    K = draw(st.integers(1, max_labels))
    per_sequence = draw(st.booleans())
    inf_rate = draw(st.sampled_from([0.0, 0.1, 0.3]))
    scale = rng.choice(SCALES, size=B)
    E = rng.normal(size=(B, L, K)) * scale[:, None, None]
    E[rng.random(E.shape) < inf_rate] = -np.inf
    t_scale = draw(st.sampled_from(SCALES))
    T = rng.normal(scale=t_scale, size=(B, K, K) if per_sequence else (K, K))
    T[rng.random(T.shape) < inf_rate] = -np.inf
    S = rng.normal(scale=t_scale, size=K)
    F = rng.normal(scale=t_scale, size=K)
    lengths = rng.integers(1, L + 1, size=B)
    return E, T, S, F, lengths


def _transitions_of(T, b):
    return T[b] if T.ndim == 3 else T


@SETTINGS
@given(batches())
def test_blocked_log_partition_matches_log_space_and_oracle(batch):
    E, T, S, F, lengths = batch
    got = chain.log_partition(E, T, S, F, lengths)
    want = chain.forward(E, T, S, F, lengths, semiring="log")
    assert not np.isnan(got).any()
    assert np.array_equal(np.isneginf(got), np.isneginf(want))
    fin = np.isfinite(want)
    np.testing.assert_allclose(got[fin], want[fin], rtol=1e-11, atol=1e-9)
    for b in (0, len(E) // 2, len(E) - 1):
        z = oracle.log_partition(oracle.chain_paths(E[b], _transitions_of(T, b), S, F, lengths[b]))
        assert (z == -np.inf and got[b] == -np.inf) or np.isclose(got[b], z, rtol=1e-9, atol=1e-9)


def _assert_marginals_equal_enumeration(node, summed, enum, n, K):
    """One sequence's node marginals (L, K) and summed edge marginals (K, K) against the
    enumeration ``enum`` of its paths."""
    np.testing.assert_allclose(node[:n], oracle.chain_node_marginals(enum, n, K), atol=1e-9)
    edges = oracle.chain_edge_marginals(enum, n, K)
    np.testing.assert_allclose(summed, edges.sum(axis=0) if n > 1 else 0.0, atol=1e-9)


@SETTINGS
@given(batches())
def test_blocked_marginals_match_oracle(batch):
    E, T, S, F, lengths = batch
    B, L, K = E.shape
    node, summed, logz = chain.marginals(E, T, S, F, lengths, edges="sum", return_log_z=True)
    node_only, _ = chain.marginals(E, T, S, F, lengths)
    assert not np.isnan(node).any() and not np.isnan(summed).any()
    np.testing.assert_allclose(node_only, node, atol=1e-12)
    np.testing.assert_allclose(logz, chain.log_partition(E, T, S, F, lengths), rtol=1e-12, atol=1e-12)
    for b in (0, 1, B // 2, B - 2, B - 1):
        n = lengths[b]
        enum = oracle.chain_paths(E[b], _transitions_of(T, b), S, F, n)
        if oracle.log_partition(enum) == -np.inf:
            assert (node[b] == 0).all() and (summed[b] == 0).all()
            continue
        _assert_marginals_equal_enumeration(node[b], summed[b], enum, n, K)
        assert (node[b, n:] == 0).all()


@SETTINGS
@given(batches(max_labels=3))
def test_blocked_entropy_and_edges_match_oracle(batch):
    E, T, S, F, lengths = batch
    K = E.shape[2]
    h = chain.entropy(E, T, S, F, lengths)
    _, edge = chain.marginals(E, T, S, F, lengths, edges=True)
    for b in (0, len(E) - 1):
        n = lengths[b]
        enum = oracle.chain_paths(E[b], _transitions_of(T, b), S, F, n)
        want = oracle.entropy(enum)
        assert (np.isnan(want) and np.isnan(h[b])) or abs(h[b] - want) < 1e-7
        if not np.isnan(want):
            np.testing.assert_allclose(edge[b, :n - 1], oracle.chain_edge_marginals(enum, n, K), atol=1e-9)


def test_results_bit_identical_on_any_thread_count_large_batches():
    rng = np.random.default_rng(3)
    B, L, K = 300, 17, 7
    E = rng.normal(size=(B, L, K)) * rng.choice(SCALES, size=B)[:, None, None]
    E[rng.random(E.shape) < 0.05] = -np.inf
    lengths = rng.integers(1, L + 1, size=B)
    before = threads.get_threads()
    try:
        for T in (rng.normal(size=(K, K)), rng.normal(size=(B, K, K))):
            outputs = []
            for n in sorted({1, numba.config.NUMBA_NUM_THREADS}):
                threads.set_threads(n)
                node, summed, logz = chain.marginals(E, T, lengths=lengths, edges="sum", return_log_z=True)
                outputs.append((logz, node, summed, chain.log_partition(E, T, lengths=lengths),
                                chain.viterbi(E, T, lengths=lengths)[0], chain.entropy(E, T, lengths=lengths)))
            for other in outputs[1:]:
                for a, b in zip(outputs[0], other):
                    np.testing.assert_array_equal(a, b)
    finally:
        threads.set_threads(before)


def test_long_sequences_with_extreme_stretches():
    """Long sequences whose potentials jump by hundreds of nats part-way: the scaled path
    must either be exact or hand over to log space, never underflow silently."""
    rng = np.random.default_rng(8)
    B, L, K = 40, 400, 6
    E = rng.normal(size=(B, L, K))
    E[::3, 150:160] *= 500.0
    E[1::3, 200:] -= 800.0 * (rng.random((B // 3 + 1, 1, K))[: len(E[1::3])] > 0.5)
    T = rng.normal(scale=5.0, size=(K, K))
    lengths = rng.integers(L // 2, L + 1, size=B)
    got = chain.log_partition(E, T, lengths=lengths)
    np.testing.assert_allclose(got, chain.forward(E, T, lengths=lengths, semiring="log"), rtol=1e-11)
    node, _ = chain.marginals(E, T, lengths=lengths)
    for b in range(B):
        np.testing.assert_allclose(node[b, :lengths[b]].sum(axis=1), 1.0, atol=1e-9)


@pytest.mark.parametrize("bad, message", [(np.nan, "NaN"), (np.inf, r"\+inf"), (1e305, "magnitude")])
def test_large_potentials_are_validated_in_one_pass(bad, message):
    E = np.zeros((50, 20, 20))  # 20,000 entries: above the compiled scan's threshold
    E[31, 7, 3] = bad
    with pytest.raises(ValueError, match=f"emissions.*{message}|{message}.*emissions|emissions has"):
        chain.log_partition(E, np.zeros((20, 20)))
    E[31, 7, 3] = -np.inf  # a hard zero is fine
    assert np.isfinite(chain.log_partition(E, np.zeros((20, 20)))).all()


@st.composite
def small_potential_batches(draw):
    """Multi-block batches whose potentials are small enough that the kernels exponentiate
    emissions without shifting them (``engine.chain._emission_low``), with −inf entries
    (rows where every label is forbidden included) and ragged lengths; long enough to span
    several 32-position exp chunks."""
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    B = draw(st.integers(65, 100))
    L = draw(st.sampled_from([1, 3, 33, 70]))
    K = draw(st.integers(1, 3))
    scale = draw(st.sampled_from([0.01, 1.0, 8.0]))
    per_sequence = draw(st.booleans())
    inf_rate = draw(st.sampled_from([0.0, 0.2, 0.5]))
    E = rng.normal(scale=scale, size=(B, L, K))
    E[rng.random(E.shape) < inf_rate] = -np.inf
    T = rng.normal(scale=scale, size=(B, K, K) if per_sequence else (K, K))
    T[rng.random(T.shape) < inf_rate / 2] = -np.inf
    S = rng.normal(scale=scale, size=K)
    return E, T, S, rng.normal(size=K), rng.integers(1, L + 1, size=B)


def test_small_potentials_take_the_unshifted_path():
    rng = np.random.default_rng(0)
    ci = engine_chain.prepare(rng.normal(size=(4, 5, 3)), rng.normal(size=(3, 3)))
    assert engine_chain._scaling(ci)[-1] <= 0.0  # unshifted
    ci = engine_chain.prepare(rng.normal(size=(4, 5, 3)) * 300.0, rng.normal(size=(3, 3)))
    assert engine_chain._scaling(ci)[-1] > 0.0  # shifted per chunk


@SETTINGS
@given(small_potential_batches())
def test_unshifted_exp_emissions_match_log_space_and_oracle(batch):
    E, T, S, F, lengths = batch
    B, L, K = E.shape
    node, summed, logz = chain.marginals(E, T, S, F, lengths, edges="sum", return_log_z=True)
    want = chain.forward(E, T, S, F, lengths, semiring="log")
    np.testing.assert_array_equal(np.isneginf(logz), np.isneginf(want))
    fin = np.isfinite(want)
    np.testing.assert_allclose(logz[fin], want[fin], rtol=1e-11, atol=1e-9)
    np.testing.assert_allclose(chain.log_partition(E, T, S, F, lengths), logz, rtol=1e-12, atol=1e-12)
    for b in range(B):
        n = lengths[b]
        assert (node[b, n:] == 0).all()
        if fin[b]:
            np.testing.assert_allclose(node[b, :n].sum(axis=1), 1.0, atol=1e-9)
        else:
            assert (node[b] == 0).all()
    for b in (0, B // 2, B - 1):
        n = lengths[b]
        if not fin[b]:
            continue
        if n <= 8:
            enum = oracle.chain_paths(E[b], _transitions_of(T, b), S, F, n)
            _assert_marginals_equal_enumeration(node[b], summed[b], enum, n, K)
        else:  # beyond enumeration: the lattice engine's log-space DP (itself checked against the oracle)
            lat_node, _ = lattice.marginals(lattice.Lattice.from_chain(E[b, :n], _transitions_of(T, b), S, F))
            np.testing.assert_allclose(node[b, :n], lat_node[1:].reshape(n, K), atol=1e-9)  # node 1 + t·K + j
