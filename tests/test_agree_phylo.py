"""Tree message passing and the two-slice phylogenetic HMM against enumeration."""

import itertools
import math
from pathlib import Path

import numpy as np
import pytest

from varorder.agree.phylo import PhyloData, PhyloSlices, Tree, encode_nucleotides, parse_newick, tree_marginals
from varorder.agree.product_em import AgreementEM, estep_shard
from varorder.testing import oracle
from scipy.special import logsumexp as _logsumexp
from _shared_data import SHARED_DATA


def _random_tree(rng, N):
    parent = np.array([-1] + [int(rng.integers(0, v)) for v in range(1, N)])
    return parent


@pytest.mark.parametrize("seed", range(8))
def test_tree_marginals_match_enumeration(seed):
    rng = np.random.default_rng(seed)
    N, V = int(rng.integers(1, 6)), int(rng.integers(2, 4))
    parent = _random_tree(rng, N)
    node = rng.normal(size=(N, V))
    node[rng.random((N, V)) < 0.2] = -np.inf
    node[:, 0] = np.maximum(node[:, 0], 0.0)  # keep at least one finite assignment
    edge = rng.normal(size=(N, V, V))
    logz, mn, me = tree_marginals(parent, node[None], edge[None])
    want_z, want_n, want_e = oracle.tree_posteriors(parent, node, edge)
    assert logz[0] == pytest.approx(want_z, rel=1e-12)
    np.testing.assert_allclose(mn[0], want_n, atol=1e-12)
    np.testing.assert_allclose(me[0, 1:], want_e[1:], atol=1e-12)


# The NumPy recursion phylo.py ran before it built a hypergraph for the engine, kept
# here as a second reference on batches too large to enumerate.
def _numpy_tree_marginals(parent, node_log, edge_log, edges=True):
    """The NumPy message passing phylo.py ran before it built a hypergraph (scaled exp
    space; inputs as in tree_marginals, edges stored)."""
    C, N, V = node_log.shape
    shared = edge_log.ndim == 3
    # Messages are products with exp(ψ) in scaled exp space: x ↦ log(exp(x − max) · W) + max.
    # A batch-shared ψ makes each message one (C, V) @ (V, V) product.
    weights = _exp_rows(edge_log)

    def send(x, v, transpose):
        m = np.max(x, axis=1, keepdims=True)
        m = np.where(np.isfinite(m), m, 0.0)
        ex = np.exp(x - m)
        W = weights[v] if shared else weights[:, v]
        if transpose:  # Σ_b W[a, b] ex[b]  (towards the parent)
            prod = ex @ W.T if shared else np.einsum("cab,cb->ca", W, ex)
        else:  # Σ_a ex[a] W[a, b]  (towards the child)
            prod = ex @ W if shared else np.einsum("ca,cab->cb", ex, W)
        with np.errstate(divide="ignore"):
            return np.log(prod) + m

    inside = node_log.copy()  # φ_v + Σ up-messages from v's children
    up = np.zeros((C, N, V))  # up[v](x_parent)
    for v in range(N - 1, 0, -1):
        up[:, v] = send(inside[:, v], v, transpose=True)
        inside[:, parent[v]] += up[:, v]
    logz = _logsumexp(inside[:, 0], axis=1)
    outside = np.zeros((C, N, V))  # log Σ over everything outside v's subtree, as a function of x_v
    above = np.zeros((C, N, V))  # parent's belief without v's own message
    for v in range(1, N):
        p = parent[v]
        with np.errstate(invalid="ignore"):
            above[:, v] = outside[:, p] + inside[:, p] - up[:, v]
        above[:, v] = np.where(np.isnan(above[:, v]), -np.inf, above[:, v])
        outside[:, v] = send(above[:, v], v, transpose=False)
    with np.errstate(invalid="ignore"):
        node = np.nan_to_num(np.exp(inside + outside - logz[:, None, None]))
    edge = np.zeros((C, N, V, V)) if edges is True else None
    if edges is not False:
        for v in range(1, N):
            W = weights[v][None] if shared else weights[:, v]
            shift = np.max(inside[:, v], axis=1, keepdims=True)
            shift = np.where(np.isfinite(shift), shift, 0.0)
            with np.errstate(invalid="ignore", over="ignore"):
                a = np.nan_to_num(np.exp(above[:, v] - logz[:, None] + shift))
                b = np.exp(inside[:, v] - shift)
            ev = a[:, :, None] * W * b[:, None, :]
            if edge is not None:
                edge[:, v] = ev
            else:
                edges(v, ev)
    return logz, node, edge


def _exp_rows(edge_log):
    with np.errstate(under="ignore"):
        return np.exp(edge_log)


@pytest.mark.parametrize("seed", range(6))
def test_tree_marginals_equal_the_former_numpy_recursion_on_batches(seed, monkeypatch):
    rng = np.random.default_rng(100 + seed)
    N, V, C = int(rng.integers(1, 9)), int(rng.integers(2, 6)), int(rng.integers(1, 40))
    parent = _random_tree(rng, N)
    node = rng.normal(size=(C, N, V)) * 3
    node[rng.random((C, N, V)) < 0.15] = -np.inf
    shared = seed % 2 == 0
    edge = rng.normal(size=(N, V, V) if shared else (C, N, V, V)) * 2
    if seed == 5:
        node[0] = -np.inf  # an instance without a finite assignment: zeros, log Z = −inf
    monkeypatch.setattr("varorder.agree.phylo._PIECE_EDGES", 1 + int(rng.integers(0, 5)) * V * V * N)
    logz, mn, me = tree_marginals(parent, node, edge)
    want_z, want_n, want_e = _numpy_tree_marginals(parent, node, edge)
    np.testing.assert_allclose(logz, want_z, rtol=1e-12)
    np.testing.assert_allclose(mn, want_n, atol=1e-12)
    np.testing.assert_allclose(me[:, 1:], want_e[:, 1:], atol=1e-12)
    seen = np.zeros((C, N, V, V))

    def keep(v, ev, rows):
        assert not seen[rows, v].any()
        seen[rows, v] = ev

    tree_marginals(parent, node, edge, edges=keep)
    np.testing.assert_array_equal(seen, me)


def test_hypergraph_repeat_equals_the_batch_built_from_scratch():
    from varorder.hypergraph import Hypergraph, marginals

    heads, tails, weights = [0, 1, 2, 2], [[], [], [0, 1], [1]], [0.5, -1.0, 0.25, 2.0]
    one = Hypergraph(3, heads, tails, weights)
    many = Hypergraph([3] * 4, [h + 3 * k for k in range(4) for h in heads],
                      [[t + 3 * k for t in ts] for k in range(4) for ts in tails], weights * 4)
    rep = one.repeat(4)
    for name in Hypergraph.__slots__:
        np.testing.assert_array_equal(getattr(rep, name), getattr(many, name), err_msg=name)
    for got, want in zip(marginals(rep), marginals(many)):
        np.testing.assert_array_equal(got, want)


def test_parse_newick_and_encode():
    t = parse_newick("(((hg16:0.0056,panTro1:0.0057):0.1043,(mm3:0.07,rn3:0.08):0.27):0.47,galGal2:0.47);")
    assert t.parent[0] == -1 and t.n_nodes == 9
    assert sorted(n for n in t.names if n) == ["galGal2", "hg16", "mm3", "panTro1", "rn3"]
    assert all(t.parent[v] < v for v in range(1, 9))
    with pytest.raises(ValueError, match="unbalanced"):
        parse_newick("((a,b);")
    np.testing.assert_array_equal(encode_nucleotides("ACgt-N"), [0, 1, 2, 3, -1, -1])


def _slice_log_p(model, d, j, scale):
    """log of the slice (j, j+1) factor of eq. 15 written out directly."""
    t = model.tree
    lp = math.log(model.root_[d[0, j]]) + math.log(model.root2_[d[0, j], d[0, j + 1]])
    for v in range(1, t.n_nodes):
        p = t.parent[v]
        lp += math.log(model.p1_[v, d[p, j], d[v, j]]) + math.log(model.p2_[v, d[v, j], d[p, j + 1], d[v, j + 1]])
    return scale * lp


def _features(d, starts, N):
    """Counts of one submodel's sufficient statistics over the slices starting at ``starts``."""
    root, root2 = np.zeros(4), np.zeros((4, 4))
    p1, p2 = np.zeros((N, 4, 4)), np.zeros((N, 4, 4, 4))
    for j in starts:
        root[d[0, j]] += 1
        root2[d[0, j], d[0, j + 1]] += 1
        for v in range(1, N):
            p = parent_of[v]
            p1[v, d[p, j], d[v, j]] += 1
            p2[v, d[v, j], d[p, j + 1], d[v, j + 1]] += 1
    return np.concatenate([root, root2.ravel(), p1.ravel(), p2.ravel()])


parent_of = np.array([-1, 0, 0])


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("scale", [1.0, 2.0])
def test_slice_estep_matches_enumeration_over_hidden_nucleotides(seed, scale):
    rng = np.random.default_rng(seed)
    tree = Tree(parent_of.copy(), ["", "a", "b"])
    L = 5
    observed = rng.integers(0, 4, size=(2, L))
    observed[0, 1] = -1
    observed[1, 3] = -1
    data = PhyloData(tree, np.array([1, 2]), observed)
    for parity in (0, 1):
        own = list(range(parity, L - 1, 2))
        covered = sorted({j for s in own for j in (s, s + 1)})
        # the other parity's slices that straddle two of this parity's slices
        straddling = [s + 1 for s in own if s + 2 in own]
        starts = (own, straddling) if parity == 0 else (straddling, own)
        hidden = [(0, j) for j in covered] + [c for c in [(1, 1), (2, 3)] if c[1] in covered]
        model = PhyloSlices(parity, tree).initialize(seed, noise=0.8)
        stats = model.expected_statistics(data, scale * model.shared_log_potentials(data), private_scale=scale)
        # brute force over every hidden nucleotide
        d = np.zeros((3, L), dtype=int)
        d[1], d[2] = np.maximum(observed[0], 0), np.maximum(observed[1], 0)
        logw, feats, cols = [], [], []
        for values in itertools.product(range(4), repeat=len(hidden)):
            for (v, j), x in zip(hidden, values):
                d[v, j] = x
            logw.append(sum(_slice_log_p(model, d, j, scale) for j in range(parity, L - 1, 2)))
            feats.append(np.concatenate([_features(d, starts[0], 3), _features(d, starts[1], 3)]))
            cols.append(d.copy())
        logw = np.array(logw)
        logz = np.logaddexp.reduce(logw)
        w = np.exp(logw - logz)
        assert stats.log_normalizer == pytest.approx(logz, rel=1e-10)
        np.testing.assert_allclose(stats.shared, w @ np.array(feats), atol=1e-10)
        _, columns, _, _ = model.posteriors(data, scale * model.shared_log_potentials(data))
        for j in covered:
            for v in range(3):
                want = np.bincount([c[v, j] for c in cols], weights=w, minlength=4)
                np.testing.assert_allclose(columns[j, v], want, atol=1e-10)


def _synthetic_alignment(seed, L=400):
    rng = np.random.default_rng(seed)
    tree = parse_newick("((a,b),(c,d));")
    model = PhyloSlices(0, tree).initialize(seed, noise=0.5, identity_bias=3.0)
    d = np.zeros((tree.n_nodes, L), dtype=int)
    for j in range(L):
        for v in range(tree.n_nodes):
            if v == 0:
                probs = model.root_ if j == 0 else model.root2_[d[0, j - 1]]
            else:
                p = tree.parent[v]
                probs = model.p1_[v, d[p, j]] if j == 0 else model.p2_[v, d[v, j - 1], d[p, j]]
            d[v, j] = rng.choice(4, p=probs)
    leaves = np.array(tree.leaves)
    return PhyloData(tree, leaves, d[leaves])


@pytest.mark.parametrize("mode", ["independent", "parameter"])
def test_phylo_training_runs_and_independent_likelihood_increases(mode):
    data = _synthetic_alignment(0)
    models = [PhyloSlices(m, data.tree).initialize(1 + m) for m in (0, 1)]
    est = AgreementEM(submodels=models, mode=mode, n_iter=6).fit([data])
    if mode == "independent":
        assert np.all(np.diff(est.objectives_) >= -1e-8)
    counts, _ = estep_shard(models, data, mode)
    assert all(np.isfinite(c["p2"]).all() for c in counts)


def test_real_data_tree_and_alignment_load():
    root = SHARED_DATA / "phylo"
    if not root.exists():
        pytest.skip("../shared/data/phylo not present")
    from varorder.io.fasta import read_alignment

    names, seqs = read_alignment(root / "hpmrc.fa.gz")
    assert len(names) == 5 and len(seqs[0]) == 20608


@pytest.mark.parametrize("mode", ["independent", "parameter"])
def test_phylo_training_on_executors_gives_the_serial_model(mode):
    # issue #35: the phylogenetic HMM's E-steps run through varorder.parallel like every AgreementEM learner
    from varorder.parallel import JoblibExecutor, ThreadExecutor

    shards = [_synthetic_alignment(0), _synthetic_alignment(1), _synthetic_alignment(2)]

    def fitted(executor):
        models = [PhyloSlices(m, shards[0].tree).initialize(1 + m) for m in (0, 1)]
        est = AgreementEM(submodels=models, mode=mode, n_iter=3, executor=executor).fit(shards)
        return est.objectives_, [(m.root_, m.p1_, m.p2_) for m in models]

    serial = fitted(None)
    for executor in (ThreadExecutor(2), JoblibExecutor(2)):
        objectives, tables = fitted(executor)
        assert objectives == serial[0]
        for a, b in zip(tables, serial[1]):
            assert all(np.array_equal(x, y) for x, y in zip(a, b))
