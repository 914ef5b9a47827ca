"""Dense-chain inference against the brute-force oracle (varorder.testing.oracle)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

from varorder import chain
from varorder.testing import oracle
from varorder.testing.strategies import chains

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.fixture(autouse=True)
def _quiet_no_path():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", chain.NoPathWarning)
        yield


def _enumerate(case, b):
    allowed = None if case.allowed is None else case.allowed[b]
    return oracle.chain_paths(case.emissions[b], case.transitions_of(b), case.start, case.end,
                              case.lengths[b], allowed)


def _close(a, b, tol=1e-9):
    a = np.asarray(a, dtype=float)
    b = np.asarray(b, dtype=float)
    both_inf = np.isneginf(a) & np.isneginf(b)
    return bool(np.all(both_inf | np.isclose(a, b, rtol=tol, atol=tol)))


@SETTINGS
@given(chains())
def test_log_partition_matches_enumeration(case):
    got = chain.log_partition(case.emissions, case.transitions, **case.kwargs)
    generic = chain.forward(case.emissions, case.transitions, **case.kwargs, semiring="log")
    want = [oracle.log_partition(_enumerate(case, b)) for b in range(len(got))]
    assert _close(got, want)
    assert _close(generic, want)
    assert not np.isnan(got).any()


@SETTINGS
@given(chains())
def test_viterbi_matches_enumeration(case):
    paths, scores = chain.viterbi(case.emissions, case.transitions, **case.kwargs)
    best = chain.forward(case.emissions, case.transitions, **case.kwargs, semiring="max")
    for b in range(len(scores)):
        enum = _enumerate(case, b)
        want = oracle.max_score(enum)
        assert _close(scores[b], want) and _close(best[b], want)
        n = case.lengths[b]
        assert (paths[b, n:] == -1).all()
        if want == -np.inf:
            assert (paths[b] == -1).all()
        else:
            assert tuple(paths[b, :n]) in oracle.argmax_paths(enum, tol=1e-9)


@SETTINGS
@given(chains())
def test_marginals_match_enumeration(case):
    node, edge = chain.marginals(case.emissions, case.transitions, **case.kwargs, edges=True)
    B, L, K = case.emissions.shape
    assert node.shape == (B, L, K) and edge.shape == (B, L - 1, K, K)
    for b in range(B):
        enum = _enumerate(case, b)
        n = case.lengths[b]
        np.testing.assert_allclose(node[b, :n], oracle.chain_node_marginals(enum, n, K), atol=1e-9)
        np.testing.assert_allclose(edge[b, : n - 1], oracle.chain_edge_marginals(enum, n, K), atol=1e-9)
        assert (node[b, n:] == 0).all() and (edge[b, n - 1:] == 0).all()
    node2, summed, logz = chain.marginals(case.emissions, case.transitions, **case.kwargs, edges="sum",
                                          return_log_z=True)
    np.testing.assert_allclose(node2, node, atol=1e-12)
    np.testing.assert_allclose(summed, edge.sum(axis=1), atol=1e-12)
    np.testing.assert_allclose(logz, chain.log_partition(case.emissions, case.transitions, **case.kwargs))


@SETTINGS
@given(chains())
def test_kbest_matches_enumeration(case):
    k = 5
    paths, scores = chain.kbest(case.emissions, case.transitions, **case.kwargs, k=k)
    for b in range(len(scores)):
        enum = _enumerate(case, b)
        assert _close(scores[b], oracle.kbest_scores(enum, k))
        score_of = dict(enum)
        n = case.lengths[b]
        seen = set()
        for r in range(k):
            if scores[b, r] == -np.inf:
                assert (paths[b, r] == -1).all()
                continue
            y = tuple(paths[b, r, :n])
            assert y not in seen, "k-best returned the same path twice"
            seen.add(y)
            assert _close(score_of[y], scores[b, r])
            assert (paths[b, r, n:] == -1).all()


@SETTINGS
@given(chains())
def test_entropy_matches_enumeration(case):
    got = chain.entropy(case.emissions, case.transitions, **case.kwargs)
    for b in range(len(got)):
        want = oracle.entropy(_enumerate(case, b))
        if np.isnan(want):
            assert np.isnan(got[b])
        else:
            assert abs(got[b] - want) < 1e-8


def test_marginals_are_gradient_of_log_partition():
    rng = np.random.default_rng(3)
    B, L, K = 2, 5, 3
    E = rng.normal(size=(B, L, K))
    T = rng.normal(size=(K, K))
    S = rng.normal(size=K)
    F = rng.normal(size=K)
    lengths = np.array([5, 3])
    node, edge = chain.marginals(E, T, S, F, lengths, edges=True)
    h = 1e-6

    def logz_sum(E_, T_):
        return chain.log_partition(E_, T_, S, F, lengths).sum()

    grad_E = np.zeros_like(E)
    for idx in np.ndindex(E.shape):
        d = np.zeros_like(E)
        d[idx] = h
        grad_E[idx] = (logz_sum(E + d, T) - logz_sum(E - d, T)) / (2 * h)
    np.testing.assert_allclose(grad_E, node, atol=1e-7)
    grad_T = np.zeros_like(T)
    for idx in np.ndindex(T.shape):
        d = np.zeros_like(T)
        d[idx] = h
        grad_T[idx] = (logz_sum(E, T + d) - logz_sum(E, T - d)) / (2 * h)
    np.testing.assert_allclose(grad_T, edge.sum(axis=(0, 1)), atol=1e-7)


@pytest.mark.parametrize("seed", [0, 1])
def test_sampling_goodness_of_fit(seed):
    rng = np.random.default_rng(100 + seed)
    K, L = 3, 4
    E = rng.normal(size=(1, L, K))
    T = rng.normal(size=(K, K))
    T[0, 1] = -np.inf
    S = rng.normal(size=K)
    draws = chain.sample(E, T, S, n=30_000, seed=seed)
    counts = {}
    for y in map(tuple, draws[0]):
        counts[y] = counts.get(y, 0) + 1
    probs = oracle.probabilities(oracle.chain_paths(E[0], T, S))
    assert oracle.chi_square_pvalue(counts, probs) > 1e-3


def test_sampling_respects_lengths_and_constraints():
    rng = np.random.default_rng(7)
    E = rng.normal(size=(2, 5, 3))
    allowed = np.ones((2, 5, 3), dtype=bool)
    allowed[0, 2, :2] = False  # position 2 of sequence 0 must be label 2
    draws = chain.sample(E, rng.normal(size=(3, 3)), lengths=[5, 2], allowed=allowed, n=200, seed=1)
    assert (draws[0, :, 2] == 2).all()
    assert (draws[1, :, 2:] == -1).all() and (draws[1, :, :2] >= 0).all()


def test_goodness_of_fit_test_can_fail():
    """The χ² check rejects samples from the wrong distribution (it is not vacuous)."""
    rng = np.random.default_rng(5)
    E = rng.normal(size=(1, 3, 3))
    T = rng.normal(size=(3, 3))
    wrong = chain.sample(E, T * 0.0, n=30_000, seed=0)
    counts = {}
    for y in map(tuple, wrong[0]):
        counts[y] = counts.get(y, 0) + 1
    probs = oracle.probabilities(oracle.chain_paths(E[0], T))
    assert oracle.chi_square_pvalue(counts, probs) < 1e-6


def test_no_path_gives_minus_inf_and_warning():
    E = np.zeros((2, 3, 2))
    allowed = np.ones((2, 3, 2), dtype=bool)
    allowed[1, 1, :] = False
    with pytest.warns(chain.NoPathWarning):
        logz = chain.log_partition(E, np.zeros((2, 2)), allowed=allowed)
    assert logz[1] == -np.inf and np.isclose(logz[0], 3 * np.log(2))
    with pytest.warns(chain.NoPathWarning):
        paths, scores = chain.viterbi(E, np.zeros((2, 2)), allowed=allowed)
    assert scores[1] == -np.inf and (paths[1] == -1).all()
    with pytest.warns(chain.NoPathWarning):
        node, _ = chain.marginals(E, np.zeros((2, 2)), allowed=allowed)
    assert not np.isnan(node).any() and (node[1] == 0).all()


def test_fast_path_agrees_with_log_space_kernel():
    """The scaled exp-space recursion and the generic log-space kernel agree on larger inputs."""
    rng = np.random.default_rng(11)
    for scale in (0.1, 1.0, 10.0, 200.0):
        E = rng.normal(scale=scale, size=(40, 30, 12))
        T = rng.normal(scale=scale, size=(12, 12))
        lengths = rng.integers(1, 31, size=40)
        fast = chain.log_partition(E, T, lengths=lengths)
        slow = chain.forward(E, T, lengths=lengths, semiring="log")
        np.testing.assert_allclose(fast, slow, rtol=1e-12, atol=1e-9)


def test_stability_long_sequence_large_potentials():
    rng = np.random.default_rng(0)
    L, K = 10_000, 100
    E = rng.normal(scale=1000.0, size=(1, L, K))
    T = rng.normal(scale=1000.0, size=(K, K))
    logz = chain.log_partition(E, T)
    assert np.isfinite(logz).all()
    node, _ = chain.marginals(E, T, edges=False)
    assert np.isfinite(node).all()
    np.testing.assert_allclose(node[0].sum(axis=1), 1.0, atol=1e-9)
    _, score = chain.viterbi(E, T)
    assert score[0] <= logz[0] + 1e-6 * abs(logz[0])


def test_stability_moderate_potentials_use_fast_path_correctly():
    rng = np.random.default_rng(1)
    L, K = 10_000, 100
    E = rng.normal(scale=3.0, size=(1, L, K))
    T = rng.normal(scale=3.0, size=(K, K))
    logz = chain.log_partition(E, T)
    np.testing.assert_allclose(logz, chain.forward(E, T, semiring="log"), rtol=1e-12)
    node, _ = chain.marginals(E, T, edges=False)
    np.testing.assert_allclose(node[0].sum(axis=1), 1.0, atol=1e-9)


def test_float32_input_accepted():
    rng = np.random.default_rng(2)
    E = rng.normal(size=(3, 4, 3)).astype(np.float32)
    T = rng.normal(size=(3, 3)).astype(np.float32)
    np.testing.assert_allclose(chain.log_partition(E, T), chain.log_partition(E.astype(float), T.astype(float)))


@pytest.mark.parametrize(
    "kwargs, name",
    [
        (dict(emissions=np.zeros((2, 3))), "emissions"),
        (dict(transitions=np.zeros((3, 2))), "transitions"),
        (dict(start=np.zeros(4)), "start"),
        (dict(end=np.zeros((2,))), "end"),
        (dict(lengths=np.array([1, 4])), "lengths"),
        (dict(lengths=np.array([0, 2])), "lengths"),
        (dict(lengths=np.array([1])), "lengths"),
        (dict(allowed=np.ones((2, 3, 3))), "allowed"),
        (dict(emissions=np.full((2, 3, 3), np.nan)), "emissions"),
        (dict(transitions=np.array([[0, np.inf, 0]] * 3)), "transitions"),
    ],
)
def test_bad_input_names_the_argument(kwargs, name):
    args = dict(emissions=np.zeros((2, 3, 3)), transitions=np.zeros((3, 3)))
    args.update(kwargs)
    with pytest.raises(ValueError, match=name):
        chain.log_partition(**args)


@pytest.mark.parametrize("k", [0, -1, 1.5])
def test_kbest_rejects_bad_k(k):
    with pytest.raises(ValueError, match="k"):
        chain.kbest(np.zeros((1, 2, 2)), np.zeros((2, 2)), k=k)


def test_sample_rejects_bad_n():
    with pytest.raises(ValueError, match="n"):
        chain.sample(np.zeros((1, 2, 2)), np.zeros((2, 2)), n=0)


def test_path_score_matches_oracle():
    rng = np.random.default_rng(4)
    E = rng.normal(size=(1, 4, 3))
    T = rng.normal(size=(3, 3))
    enum = dict(oracle.chain_paths(E[0], T))
    y = np.array([[2, 0, 1, 1]])
    assert np.isclose(chain.path_score(E, T, y)[0], enum[(2, 0, 1, 1)])


def test_per_sequence_transitions_equal_separate_calls():
    rng = np.random.default_rng(9)
    B, L, K = 4, 6, 5
    E = rng.normal(size=(B, L, K))
    T = rng.normal(size=(B, K, K))
    lengths = np.array([6, 2, 5, 1])
    together = chain.log_partition(E, T, lengths=lengths)
    node, edge = chain.marginals(E, T, lengths=lengths, edges=True)
    paths, _ = chain.viterbi(E, T, lengths=lengths)
    for b in range(B):
        one = dict(lengths=lengths[b:b + 1])
        assert np.isclose(together[b], chain.log_partition(E[b:b + 1], T[b], **one)[0])
        n1, e1 = chain.marginals(E[b:b + 1], T[b], **one, edges=True)
        np.testing.assert_allclose(node[b], n1[0])
        np.testing.assert_allclose(edge[b], e1[0])
        assert (paths[b] == chain.viterbi(E[b:b + 1], T[b], **one)[0][0]).all()
    with pytest.raises(ValueError, match="transitions"):
        chain.log_partition(E, T[:2])


def test_blocked_batch_equals_per_sequence_path():
    """Many sequences (several blocks, ragged, some extreme or impossible) give the same
    results through the shared-transition blocked kernels as through per-sequence ones."""
    rng = np.random.default_rng(21)
    B, L, K = 53, 12, 7
    E = rng.normal(size=(B, L, K))
    E[5] *= 400.0  # forces the log-space fallback inside a block
    E[9, 3, :] = -np.inf  # no path
    T = rng.normal(size=(K, K))
    T[0, 1] = -np.inf
    lengths = rng.integers(1, L + 1, size=B)
    per_seq = np.broadcast_to(T, (B, K, K)).copy()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", chain.NoPathWarning)
        z_block = chain.log_partition(E, T, lengths=lengths)
        z_each = chain.log_partition(E, per_seq, lengths=lengths)
        n_block, s_block = chain.marginals(E, T, lengths=lengths, edges="sum")
        n_each, s_each = chain.marginals(E, per_seq, lengths=lengths, edges="sum")
        n_full, e_full = chain.marginals(E, T, lengths=lengths, edges=True)
    np.testing.assert_allclose(z_block, z_each, rtol=1e-12)
    assert z_block[9] == -np.inf
    np.testing.assert_allclose(n_block, n_each, atol=1e-12)
    np.testing.assert_allclose(n_block, n_full, atol=1e-12)
    np.testing.assert_allclose(s_block, s_each, atol=1e-11)
    np.testing.assert_allclose(s_block, e_full.sum(axis=1), atol=1e-11)
