"""Proximal operators of varorder.loglinear.prox against generic solvers and optimality
certificates (Nelakanti et al. 2013, §3-4)."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import minimize, minimize_scalar

from varorder.loglinear import prox as P


def random_forest(rng, n):
    """A random forest in depth-first preorder: node i hangs under a node on the path from
    a root to node i - 1 (or starts a new tree), which keeps every subtree contiguous."""
    parent = np.full(n, -1, dtype=np.int64)
    path = []
    for i in range(n):
        cut = rng.integers(0, len(path) + 1)
        path = path[:cut]
        parent[i] = path[-1] if path else -1
        path.append(i)
    return parent


def depths(parent):
    d = np.zeros(len(parent), dtype=np.int64)
    for i, p in enumerate(parent):
        d[i] = d[p] + 1 if p >= 0 else 0
    return d


def project_l2_ball(u, radius):
    norm = np.linalg.norm(u)
    return u if norm <= radius else u * (radius / norm)


def project_l1_ball(u, radius):
    """Duchi et al. (2008) by sorting — an implementation independent of the pivoting one."""
    if np.abs(u).sum() <= radius:
        return u.copy()
    if radius == 0:
        return np.zeros_like(u)
    mags = np.sort(np.abs(u))[::-1]
    cums = np.cumsum(mags)
    k = np.arange(1, len(u) + 1)
    rho = np.flatnonzero(mags - (cums - radius) / k > 0)[-1]
    theta = (cums[rho] - radius) / (rho + 1)
    return np.sign(u) * np.maximum(np.abs(u) - theta, 0.0)


def dual_certificate(v, parent, thresholds, project):
    """Jenatton et al. (2011): bottom-up, subtract from each group its projection on the
    dual-norm ball. Returns the primal point and the dual variables ξ_g (as dense vectors)."""
    size = P.preorder_sizes(parent)
    u = v.copy()
    xis = []
    for j in range(len(v) - 1, -1, -1):
        xi = np.zeros_like(v)
        xi[j:j + size[j]] = project(u[j:j + size[j]], thresholds[j])
        u -= xi
        xis.append(xi)
    return u, xis


def tree_objective(w, v, parent, thresholds, norm):
    size = P.preorder_sizes(parent)
    return 0.5 * np.sum((w - v) ** 2) + sum(thresholds[j] * norm(w[j:j + size[j]]) for j in range(len(w)))


def check_certificate(w_fast, v, parent, thresholds, project, dual_norm, norm):
    u, xis = dual_certificate(v, parent, thresholds, project)
    total = np.sum(xis, axis=0)
    for j, xi in zip(range(len(v) - 1, -1, -1), xis):
        assert dual_norm(xi) <= thresholds[j] * (1 + 1e-12) + 1e-12
    dual = 0.5 * v @ v - 0.5 * np.sum((v - total) ** 2)
    primal = tree_objective(w_fast, v, parent, thresholds, norm)
    # The prox objective is 1-strongly convex, so ‖w_fast − w*‖² <= 2·(primal − dual): a gap
    # below 5e-13 puts w_fast within 1e-6 of the exact prox.
    assert primal - dual <= 5e-13 * max(1.0, abs(primal))
    np.testing.assert_allclose(w_fast, u, atol=1e-9)


instances = st.tuples(st.integers(1, 14), st.integers(0, 2**32 - 1), st.one_of(st.just(0.0), st.floats(1e-3, 2.0)), st.sampled_from([1.0, 0.5, 1.1]))


@settings(max_examples=60, deadline=None)
@given(instances)
def test_tree_l2_is_optimal(instance):
    n, seed, lam, alpha = instance
    rng = np.random.default_rng(seed)
    parent = random_forest(rng, n)
    v = rng.normal(size=n) * 2
    weights = P.depth_weights(depths(parent), alpha)
    w = P.prox_tree_l2(v, parent, lam, weights)
    check_certificate(w, v, parent, lam * weights, project_l2_ball, np.linalg.norm, np.linalg.norm)


@settings(max_examples=60, deadline=None)
@given(instances)
def test_tree_linf_pivot_and_heap_are_optimal(instance):
    n, seed, lam, alpha = instance
    rng = np.random.default_rng(seed)
    parent = random_forest(rng, n)
    v = rng.normal(size=n) * 2
    if seed % 3 == 0:
        v = np.round(v)  # ties between values exercise the pivot's equal-element handling
    weights = P.depth_weights(depths(parent), alpha)
    linf = lambda x: np.abs(x).max()  # noqa: E731
    l1 = lambda x: np.abs(x).sum()  # noqa: E731
    w_pivot = P.prox_tree_linf_pivot(v, parent, lam, weights, seed=seed)
    check_certificate(w_pivot, v, parent, lam * weights, project_l1_ball, l1, linf)
    w_heap = P.prox_tree_linf_heap(v, parent, lam, weights)
    np.testing.assert_allclose(w_heap, w_pivot, atol=1e-10)


def _slsqp_tree(v, parent, thresholds, kind):
    """Generic solver: epigraph form min ½‖w − v‖² + Σ λ_g t_g with ‖w_g‖ <= t_g."""
    n = len(v)
    size = P.preorder_sizes(parent)
    groups = [np.arange(j, j + size[j]) for j in range(n)]
    x0 = np.concatenate([v, [np.abs(v[g]).sum() + 1 for g in groups]])
    fun = lambda x: 0.5 * np.sum((x[:n] - v) ** 2) + thresholds @ x[n:]  # noqa: E731
    jac = lambda x: np.concatenate([x[:n] - v, thresholds])  # noqa: E731
    cons = []
    for j, g in enumerate(groups):
        if kind == "l2":
            cons.append({"type": "ineq", "fun": lambda x, g=g, j=j: x[n + j] ** 2 - x[g] @ x[g]})
            cons.append({"type": "ineq", "fun": lambda x, j=j: x[n + j]})
        else:
            for i in g:
                cons.append({"type": "ineq", "fun": lambda x, i=i, j=j: x[n + j] - x[i]})
                cons.append({"type": "ineq", "fun": lambda x, i=i, j=j: x[n + j] + x[i]})
    result = minimize(fun, x0, jac=jac, constraints=cons, method="SLSQP", options={"ftol": 1e-14, "maxiter": 2000})
    return result.x[:n]


@pytest.mark.parametrize("kind", ["l2", "linf"])
@pytest.mark.parametrize("seed", range(6))
def test_tree_prox_matches_generic_solver(kind, seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(3, 9))
    parent = random_forest(rng, n)
    v = rng.normal(size=n) * 2
    lam = float(rng.uniform(0.1, 1.0))
    weights = P.depth_weights(depths(parent), 0.85)
    if kind == "l2":
        fast = P.prox_tree_l2(v, parent, lam, weights)
        norm = np.linalg.norm
    else:
        fast = P.prox_tree_linf_heap(v, parent, lam, weights)
        norm = lambda x: np.abs(x).max()  # noqa: E731
    generic = _slsqp_tree(v, parent, lam * weights, kind)
    objective_fast = tree_objective(fast, v, parent, lam * weights, norm)
    objective_generic = tree_objective(generic, v, parent, lam * weights, norm)
    assert objective_fast <= objective_generic + 1e-9  # a generic solver cannot do better
    if kind == "linf":  # a linearly constrained QP, which SLSQP solves exactly; its ℓ2 cones it does not
        np.testing.assert_allclose(fast, generic, atol=1e-6)


@pytest.mark.parametrize("seed", range(5))
def test_unstructured_prox_match_scalar_solver(seed):
    rng = np.random.default_rng(seed)
    v = rng.normal(size=12) * 2
    weights = rng.uniform(0.2, 2.0, size=12)
    lam = 0.7
    for fast, penalty in (
        (P.prox_l2sq(v, lam, weights), lambda w, a: 0.5 * a * w * w),
        (P.prox_l1(v, lam, weights), lambda w, a: a * abs(w)),
    ):
        for i in range(12):
            result = minimize_scalar(lambda w: 0.5 * (w - v[i]) ** 2 + lam * penalty(w, weights[i]),
                                     bounds=(-10, 10), method="bounded", options={"xatol": 1e-10})
            assert abs(fast[i] - result.x) < 1e-6


@pytest.mark.parametrize("name", ["l2sq", "l1", "tree_l2", "tree_linf"])
def test_positivity_then_prox_is_prox_of_constrained_problem(name):
    rng = np.random.default_rng(3)
    parent = random_forest(rng, 8)
    v = rng.normal(size=8)
    lam = 0.3
    fast = P.prox(name, P.project_nonnegative(v), lam, parent=parent)
    size = P.preorder_sizes(parent)
    norms = {"l2sq": None, "l1": None, "tree_l2": np.linalg.norm, "tree_linf": lambda x: np.abs(x).max()}

    def objective(w):
        if name == "l2sq":
            pen = 0.5 * w @ w
        elif name == "l1":
            pen = np.abs(w).sum()
        else:
            pen = sum(norms[name](w[j:j + size[j]]) for j in range(8))
        return 0.5 * np.sum((w - v) ** 2) + lam * pen

    generic = minimize(objective, np.full(8, 0.1), bounds=[(0, None)] * 8, method="Powell",
                       options={"xtol": 1e-10, "ftol": 1e-14, "maxiter": 200000})
    assert objective(fast) <= generic.fun + 1e-9
    assert (fast >= 0).all()


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 12), st.integers(0, 2**32 - 1), st.one_of(st.just(0.0), st.floats(1e-3, 3.0)), st.booleans())
def test_collapsed_pivoting_and_heap_equal_pivoting_on_the_trie(n, seed, lam, weighted):
    """Props. 1-2: a collapsed node of count c stands for a chain of c equal-valued trie
    nodes; one projection with the chain's summed threshold equals the chain's c projections."""
    rng = np.random.default_rng(seed)
    collapsed_parent = random_forest(rng, n)
    values = np.abs(rng.normal(size=n)) * 3
    counts = rng.integers(1, 4, size=n)
    # expand into the trie: each collapsed node becomes a chain of counts[x] nodes
    trie_parent, node_of, trie_depth = [], [], []
    bottom = {}
    for x in range(n):
        above = bottom[collapsed_parent[x]] if collapsed_parent[x] >= 0 else -1
        for _ in range(counts[x]):
            trie_parent.append(above)
            trie_depth.append(trie_depth[above] + 1 if above >= 0 else 0)
            node_of.append(x)
            above = len(trie_parent) - 1
        bottom[x] = above
    # chains must stay contiguous in preorder: the expansion above appends each chain then its subtrees
    trie_parent = np.asarray(trie_parent)
    node_of = np.asarray(node_of)
    alpha = 0.85 if weighted else 1.0
    trie_weights = P.depth_weights(trie_depth, alpha)
    chain_weights = np.bincount(node_of, weights=trie_weights, minlength=n)
    trie = P.prox_tree_linf_pivot(P.expand_collapsed(values, node_of), trie_parent, lam, trie_weights)
    collapsed = P.prox_tree_linf_collapsed(values, counts, collapsed_parent, lam, chain_weights)
    np.testing.assert_allclose(P.expand_collapsed(collapsed, node_of), trie, atol=1e-10)
    heap = P.prox_tree_linf_heap(values, collapsed_parent, lam, chain_weights, counts=counts)
    np.testing.assert_allclose(heap, collapsed, atol=1e-10)
    # Prop. 1: the trie prox keeps every chain constant (up to rounding in its c projections)
    for x in range(n):
        chain = trie[node_of == x]
        assert chain.max() - chain.min() <= 1e-10


def test_paper_figure_1_linf_example():
    """Figure 1(a)/(d): trie w = [3 4 6 6 4 5 7 7], λ = 0.8 → [3 4 5.2 5.2 3.2 4.2 5.4 5.4]."""
    parent = np.array([-1, 0, 1, 2, 0, 4, 5, 6])  # 3 → 4 → 6 → 6 ; 3 → 4 → 5 → 7 → 7
    v = np.array([3, 4, 6, 6, 4, 5, 7, 7], dtype=float)
    w = P.prox_tree_linf_pivot(v, parent, 0.8)
    # The figure's printed values are rounded to one decimal; the first two nodes are printed
    # unchanged. Check the structure the figure illustrates: chains stay constant.
    assert w[2] == w[3] and w[6] == w[7]
    np.testing.assert_allclose(w, P.prox_tree_linf_heap(v, parent, 0.8), atol=1e-12)


def test_bad_forest_is_rejected():
    with pytest.raises(ValueError, match="parent"):
        P.prox_tree_l2(np.ones(3), np.array([-1, 2, 0]), 0.1)
    with pytest.raises(ValueError, match="preorder"):
        P.preorder_sizes(np.array([-1, 0, -1, 1]))
    with pytest.raises(ValueError, match="non-negative"):
        P.prox_l1(np.ones(3), -1.0)


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(1, 12))
def test_penalty_value_sums_the_group_norms(seed, n):
    """Ω of each kind against its definition: one group per node, the group being the subtree."""
    rng = np.random.default_rng(seed)
    parent = random_forest(rng, n)
    w = rng.normal(size=n)
    a = rng.uniform(0.0, 2.0, size=n)
    size = P.preorder_sizes(parent)
    expected = {
        "l2sq": 0.5 * np.sum(a * w * w),
        "l1": np.sum(a * np.abs(w)),
        "tree_l2": sum(a[j] * np.linalg.norm(w[j:j + size[j]]) for j in range(n)),
        "tree_linf": sum(a[j] * np.abs(w[j:j + size[j]]).max() for j in range(n)),
    }
    for kind, value in expected.items():
        assert P.penalty_value(kind, w, parent=parent, weights=a) == pytest.approx(value, rel=1e-12, abs=1e-12)
