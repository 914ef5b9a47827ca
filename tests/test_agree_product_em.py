"""Product EM layer: exact product EM vs enumeration, monotone objectives, one submodel = EM."""

import itertools

import numpy as np
import pytest

from varorder.agree import AgreementEM
from varorder.agree.product_em import estep_shard
from varorder.agree.views import HMMView, MultiViewSequences


def _data(seed, n_views=2, B=3, L=4, V=3):
    rng = np.random.default_rng(seed)
    obs = [rng.integers(0, V, size=(B, L)) for _ in range(n_views)]
    lengths = rng.integers(1, L + 1, size=B)
    return MultiViewSequences(obs, lengths)


def _views(n_views, K=2, V=3, seed=0):
    return [HMMView(m, K, V).initialize(seed + 17 * m) for m in range(n_views)]


def _joint_prob(views, shard, b, z):
    """Π_m p_m(x_m, z) written directly from the HMM parameters."""
    p = 1.0
    for v in views:
        x = shard.observations[v.view][b]
        p *= v.start_[z[0]] * v.emissions_[z[0], x[0]]
        for t in range(1, len(z)):
            p *= v.transitions_[z[t - 1], z[t]] * v.emissions_[z[t], x[t]]
    return p


def _enumerate(views, shard):
    """Brute-force normalized product q(z) ∝ Π_m p_m: (log Σ_z Π_m p_m, start, node, trans expectations)."""
    K = views[0].n_states
    B, L = shard.observations[0].shape
    logz, start, node, trans = 0.0, np.zeros(K), np.zeros((B, L, K)), np.zeros((K, K))
    for b in range(B):
        n = shard.lengths[b]
        zs = list(itertools.product(range(K), repeat=n))
        w = np.array([_joint_prob(views, shard, b, z) for z in zs])
        logz += np.log(w.sum())
        w /= w.sum()
        for z, p in zip(zs, w):
            start[z[0]] += p
            node[b, np.arange(n), z] += p
            for t in range(1, n):
                trans[z[t - 1], z[t]] += p
    return logz, start, node, trans


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("n_views", [1, 2, 3])
def test_exact_product_estep_matches_enumeration(seed, n_views):
    shard = _data(seed, n_views)
    views = _views(n_views, seed=seed)
    counts, objective = estep_shard(views, shard, "exact")
    logz, start, node, trans = _enumerate(views, shard)
    assert objective == pytest.approx(logz, rel=1e-10)
    for c in counts:
        np.testing.assert_allclose(c["start"], start, atol=1e-10)
        np.testing.assert_allclose(c["transitions"], trans, atol=1e-10)
    stats = views[0].expected_statistics(shard, np.sum([v.shared_log_potentials(shard) for v in views], axis=0))
    _, mu_node, _ = HMMView._unpack(stats.shared, *shard.observations[0].shape, views[0].n_states)
    np.testing.assert_allclose(mu_node, node, atol=1e-10)


@pytest.mark.parametrize("mode", ["exact", "domain", "independent"])
@pytest.mark.parametrize("seed", range(3))
def test_objective_never_decreases(mode, seed):
    """Coordinate ascent on eqs. 2, 12 and 1. (The parameter mode's averaged M-step, as
    the paper states it, is not coordinate ascent on eq. 13, so it is not asserted.)"""
    shards = [_data(seed), _data(seed + 100)]
    est = AgreementEM(submodels=_views(2, seed=seed), mode=mode, n_iter=15).fit(shards)
    obj = np.array(est.objectives_)
    assert np.all(np.diff(obj) >= -1e-9 * np.abs(obj[1:])), obj


def test_exact_objective_is_log_sum_of_product():
    shards = [_data(5)]
    views = _views(2, seed=5)
    logz = _enumerate(views, shards[0])[0]
    est = AgreementEM(submodels=views, mode="exact", n_iter=1).fit(shards)
    assert est.objectives_[0] == pytest.approx(logz, rel=1e-10)


@pytest.mark.parametrize("seed", range(3))
def test_single_submodel_is_ordinary_em(seed):
    """One view: every mode is Baum–Welch; compare one step against enumeration-based EM."""
    shard = _data(seed, n_views=1)
    reference = _views(1, seed=seed)[0]
    logz, start, node, trans = _enumerate([reference], shard)
    K, V = reference.n_states, reference.n_symbols
    emit = np.zeros((K, V))
    for b in range(shard.lengths.size):
        for t in range(shard.lengths[b]):
            emit[:, shard.observations[0][b, t]] += node[b, t]
    expected = (start / start.sum(), trans / trans.sum(1, keepdims=True), emit / emit.sum(1, keepdims=True))
    for mode in ["exact", "independent", "domain", "parameter"]:
        view = _views(1, seed=seed)[0]
        est = AgreementEM(submodels=[view], mode=mode, n_iter=1).fit([shard])
        assert est.objectives_[0] == pytest.approx(logz, rel=1e-10)
        for got, want in zip((view.start_, view.transitions_, view.emissions_), expected):
            np.testing.assert_allclose(got, want, atol=1e-10)


def test_domain_mode_on_equal_domains_is_exact_product_em():
    shards = [_data(9)]
    a = AgreementEM(submodels=_views(2, seed=3), mode="exact", n_iter=5).fit(shards)
    b = AgreementEM(submodels=_views(2, seed=3), mode="domain", n_iter=5).fit(shards)
    np.testing.assert_allclose(a.objectives_, b.objectives_, rtol=1e-12)
    for va, vb in zip(a.submodels_, b.submodels_):
        np.testing.assert_allclose(va.emissions_, vb.emissions_, atol=1e-12)


def test_parameter_mode_estep_scales_each_submodel():
    """E(M·b_m, Z∩): node posteriors of the tempered single chain, checked by enumeration."""
    shard = _data(2)
    views = _views(2, seed=2)
    M = len(views)
    b0 = views[0].shared_log_potentials(shard)
    stats = views[0].expected_statistics(shard, M * b0, private_scale=M)
    B, L = shard.observations[0].shape
    _, mu_node, _ = HMMView._unpack(stats.shared, B, L, views[0].n_states)
    # p_0(x, z)^M = product of two identical copies of view 0
    twin = [views[0], views[0]]
    np.testing.assert_allclose(mu_node, _enumerate(twin, shard)[2], atol=1e-10)


def test_bad_arguments():
    with pytest.raises(ValueError, match="mode"):
        AgreementEM(submodels=_views(1), mode="nope").fit([_data(0, 1)])

    class Private(HMMView):
        has_private_features = True

    with pytest.raises(ValueError, match="exact"):
        AgreementEM(submodels=[Private(0, 2, 3).initialize(0)], mode="exact").fit([_data(0, 1)])


def test_make_executor_builds_the_estep_executor():
    from concurrent.futures import ThreadPoolExecutor

    from varorder.agree import make_executor

    assert make_executor(1) is None
    assert make_executor(0, None) is None
    pool = make_executor(3)
    try:
        assert isinstance(pool, ThreadPoolExecutor) and pool._max_workers == 3
    finally:
        pool.shutdown()


def test_connect_dask_reports_an_unreachable_scheduler():
    pytest.importorskip("distributed")
    from varorder.agree import make_executor

    with pytest.raises(ValueError, match="cannot reach the Dask scheduler"):
        make_executor(1, "tcp://127.0.0.1:1", timeout=0.5)
