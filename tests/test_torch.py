"""varorder.torch (issue #43): gradients by finite differences (gradcheck, float64) for every
Function, gradients = the engine's marginals, modules against brute-force enumeration and
pytorch-crf, the torch-native path against the engine to 1e-10, training under a seed."""

from __future__ import annotations

import itertools
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="varorder.torch needs torch (the test extra installs it)")

from varorder import chain, hypergraph, lattice  # noqa: E402
from varorder.errors import ParameterError  # noqa: E402
from varorder.hypergraph import Hypergraph  # noqa: E402
from varorder.lattice import Lattice  # noqa: E402
from varorder.testing import oracle  # noqa: E402
from varorder.torch import (CRF, allowed_transitions, chain_log_partition, hypergraph_log_partition,  # noqa: E402
                            lattice_log_partition)
from varorder.torch import dependency, native  # noqa: E402

SRC = Path(__file__).resolve().parents[1] / "src"
F64 = torch.float64


def _rand(*shape, seed=0, dtype=F64, grad=True):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g, dtype=dtype).requires_grad_(grad)


def _np(t):
    return None if t is None else t.detach().numpy()


@pytest.fixture(autouse=True)
def one_torch_thread():
    """The tensors here are tiny: one intra-op thread is faster, and on a busy machine two spin."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def test_core_package_never_imports_torch():
    code = ("import sys, varorder, varorder.chain, varorder.lattice, varorder.hypergraph, varorder.engine.chain, "
            "varorder.engine.lattice, varorder.engine.hypergraph, varorder.models; "
            "print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={"PYTHONPATH": str(SRC)})
    assert out.stdout.strip() == "False"


# -- chains: gradcheck, gradients = marginals, oracle ------------------------------------------

CHAIN_CASES = [
    dict(shared=True, lengths=None, allowed=False),
    dict(shared=True, lengths=[5, 3, 1], allowed=False),
    dict(shared=False, lengths=[2, 5, 4], allowed=False),
    dict(shared=True, lengths=[5, 4, 2], allowed=True),
]


def _chain_inputs(case, B=3, L=5, K=3, seed=0):
    E = _rand(B, L, K, seed=seed)
    T = _rand(*((K, K) if case["shared"] else (B, K, K)), seed=seed + 1)
    S, F = _rand(K, seed=seed + 2), _rand(K, seed=seed + 3)
    allowed = None
    if case["allowed"]:
        allowed = np.random.default_rng(seed).random((B, L, K)) < 0.7
        allowed[:, :, 0] = True  # keep a path
    return E, T, S, F, case["lengths"], allowed


@pytest.mark.parametrize("backend", ["engine", "native"])
@pytest.mark.parametrize("case", CHAIN_CASES)
def test_chain_gradcheck(case, backend):
    E, T, S, F, n, allowed = _chain_inputs(case)
    assert torch.autograd.gradcheck(
        lambda e, t, s, f: chain_log_partition(e, t, s, f, lengths=n, allowed=allowed, backend=backend),
        (E, T, S, F))


@pytest.mark.parametrize("case", CHAIN_CASES)
def test_chain_gradients_are_the_engines_marginals_and_log_z_the_oracles(case):
    E, T, S, F, n, allowed = _chain_inputs(case, seed=4)
    logz = chain_log_partition(E, T, S, F, lengths=n, allowed=allowed)
    grad_e, grad_t = torch.autograd.grad(logz.sum(), (E, T))
    node, edge = chain.marginals(_np(E), _np(T), _np(S), _np(F), lengths=n, allowed=allowed, edges="sum")
    np.testing.assert_allclose(grad_e.numpy(), node, rtol=0, atol=1e-12)
    np.testing.assert_allclose(grad_t.numpy(), edge.sum(0) if case["shared"] else edge, rtol=0, atol=1e-12)
    B, L, K = E.shape
    for b in range(B):
        length = L if n is None else n[b]
        Tb = _np(T) if case["shared"] else _np(T)[b]
        paths = oracle.chain_paths(_np(E)[b], Tb, _np(S), _np(F), length=length,
                                   allowed=None if allowed is None else allowed[b])
        assert float(logz[b]) == pytest.approx(oracle.log_partition(paths), abs=1e-12)
        np.testing.assert_allclose(node[b, :length], oracle.chain_node_marginals(paths, length, K), atol=1e-12)


@pytest.mark.parametrize("case", CHAIN_CASES)
def test_native_path_equals_the_engine_to_1e_10(case):
    B, L, K = 4, 9, 4
    E, T, S, F, n, allowed = _chain_inputs(case, B=4, L=9, K=4, seed=7)
    n = None if n is None else [9, 6, 1, 4][:B]
    E = E.detach().clone()
    E[0, 2, 1] = -math.inf  # a hard zero
    E.requires_grad_(True)
    args = (_np(E), _np(T), _np(S), _np(F))
    z_native = chain_log_partition(E, T, S, F, lengths=n, allowed=allowed, backend="native")
    z_engine = chain.log_partition(*args, lengths=n, allowed=allowed)
    np.testing.assert_allclose(z_native.detach().numpy(), z_engine, rtol=1e-10, atol=1e-10)
    grads = torch.autograd.grad(z_native.sum(), (E, T, S))
    node, edge = chain.marginals(*args, lengths=n, allowed=allowed, edges="sum")
    np.testing.assert_allclose(grads[0].numpy(), node, atol=1e-10)
    np.testing.assert_allclose(grads[1].numpy(), edge.sum(0) if case["shared"] else edge, atol=1e-10)
    np.testing.assert_allclose(grads[2].numpy(), node[:, 0].sum(0), atol=1e-10)
    paths, scores = native.chain_viterbi(E, T, S, F, lengths=n, allowed=allowed)
    ref_paths, ref_scores = chain.viterbi(*args, lengths=n, allowed=allowed)
    np.testing.assert_array_equal(paths.numpy(), ref_paths)
    np.testing.assert_allclose(scores.numpy(), ref_scores, rtol=1e-10)
    node_native, _, _ = native.chain_marginals(E, T, S, F, lengths=n, allowed=allowed)
    np.testing.assert_allclose(node_native.numpy(), node, atol=1e-10)


def test_impossible_sequence_gives_minus_inf_and_zero_gradients_on_both_paths():
    E = _rand(2, 3, 2, seed=1)
    allowed = np.ones((2, 3, 2), dtype=bool)
    allowed[1, 1] = False
    T = _rand(2, 2, seed=2)
    for backend in ("engine", "native"):
        with pytest.warns(chain.NoPathWarning) if backend == "engine" else _no_warning():
            z = chain_log_partition(E, T, allowed=allowed, backend=backend)
        assert z[1] == -math.inf and math.isfinite(float(z[0]))
        grad_e, = torch.autograd.grad(z[1], (E,))
        assert torch.all(grad_e == 0) and not torch.isnan(grad_e).any()


class _no_warning:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def test_float32_results_and_gradients_stay_float32_and_match_float64():
    E64, T64 = _rand(3, 6, 4, seed=3), _rand(4, 4, seed=4)
    E32, T32 = (x.detach().float().requires_grad_(True) for x in (E64, T64))
    for backend in ("engine", "native"):
        z32 = chain_log_partition(E32, T32, lengths=[6, 2, 5], backend=backend)
        z64 = chain_log_partition(E64, T64, lengths=[6, 2, 5], backend=backend)
        assert z32.dtype == torch.float32
        g32, = torch.autograd.grad(z32.sum(), (E32,))
        g64, = torch.autograd.grad(z64.sum(), (E64,))
        assert g32.dtype == torch.float32
        np.testing.assert_allclose(z32.detach().numpy(), z64.detach().numpy(), rtol=1e-5)
        np.testing.assert_allclose(g32.numpy(), g64.numpy(), atol=1e-5)


def test_bad_arguments_raise_parameter_errors():
    E, T = _rand(2, 3, 2), _rand(2, 2)
    with pytest.raises(ParameterError, match="lengths"):
        chain_log_partition(E, T, lengths=[4, 1])
    with pytest.raises(ParameterError, match="backend"):
        chain_log_partition(E, T, backend="gpu")
    with pytest.raises(ParameterError, match="float32 or float64"):
        chain_log_partition(E.detach().long(), T)
    bad = E.detach().clone()
    bad[0, 0, 0] = math.nan
    with pytest.raises(ParameterError, match="NaN"):
        chain_log_partition(bad, T, backend="native")
    with pytest.raises(ValueError, match="NaN|nan"):
        chain_log_partition(bad, T, backend="engine")


# -- lattices and hypergraphs ------------------------------------------------------------------

def _small_lattice(seed=0):
    rng = np.random.default_rng(seed)
    # positions 0 | 1: nodes 1, 2 | 2: nodes 3, 4 | 3: node 5; final at 4 and 5
    src = [0, 0, 1, 1, 2, 2, 3, 4]
    dst = [1, 2, 3, 4, 3, 4, 5, 5]
    lab = [0, 1, 0, 1, 1, 0, 0, 1]
    final = np.array([-np.inf, -np.inf, -np.inf, -np.inf, 0.3, -0.2])
    return Lattice([0, 1, 1, 2, 2, 3], src, dst, lab, rng.normal(size=8), final)


def test_lattice_gradcheck_and_gradients_are_the_oracles_marginals():
    lat = _small_lattice()
    w = torch.tensor(lat.arc_weight, dtype=F64, requires_grad=True)
    fin = torch.tensor(lat.final, dtype=F64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda a: lattice_log_partition(lat, a), (w,))
    finite = torch.isfinite(fin)

    def with_final(a, f):  # -inf entries stay hard zeros; differentiate the finite ones
        return lattice_log_partition(lat, a, torch.where(finite, f, fin.detach()))

    assert torch.autograd.gradcheck(with_final, (w, fin))
    z = lattice_log_partition(lat, w, fin)
    grad_w, grad_f = torch.autograd.grad(z, (w, fin))
    paths = oracle.lattice_paths(lat)
    _, arc, final = oracle.lattice_marginals(lat, paths)
    assert float(z) == pytest.approx(oracle.log_partition(paths), abs=1e-12)
    np.testing.assert_allclose(grad_w.numpy(), arc, atol=1e-12)
    np.testing.assert_allclose(grad_f.numpy(), final, atol=1e-12)


def _small_hypergraph_batch():
    # graph 0: leaves 0, 1; node 2 from [0, 1] or [0]; goal 3 from [2] or [1, 2]
    # graph 1 (nodes 4..6): leaves 4, 5; goal 6 from [4, 5] or [5]
    heads = [0, 1, 2, 2, 3, 3, 4, 5, 6, 6]
    tails = [[], [], [0, 1], [0], [2], [1, 2], [], [], [4, 5], [5]]
    weights = np.random.default_rng(3).normal(size=len(heads))
    return Hypergraph([4, 3], heads, tails, weights)


def test_hypergraph_gradcheck_and_gradients_are_the_oracles_marginals():
    hg = _small_hypergraph_batch()
    w = torch.tensor(hg.edge_weight, dtype=F64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda a: hypergraph_log_partition(hg, a), (w,))
    z = hypergraph_log_partition(hg, w)
    grad, = torch.autograd.grad(z.sum(), (w,))
    _, edge, _ = hypergraph.marginals(hg)
    np.testing.assert_allclose(grad.numpy(), edge, atol=1e-12)
    for g in range(2):
        derivations = oracle.hypergraph_derivations(hg, g)
        assert float(z[g]) == pytest.approx(oracle.log_partition(derivations), abs=1e-12)
        probs = oracle.probabilities(derivations)
        expected = np.zeros(hg.num_edges)
        for edges, p in probs.items():
            for e in edges:
                expected[e] += p
        lo, hi = hg.edge_offsets[g], hg.edge_offsets[g + 1]
        np.testing.assert_allclose(grad.numpy()[lo:hi], expected[lo:hi], atol=1e-12)


# -- dependency trees (Eisner on the hypergraph engine) ----------------------------------------

def _tree_scores(S, heads):
    return sum(float(S[0 if h < 0 else h + 1, m + 1]) for m, h in enumerate(heads))


def test_tree_log_partition_marginals_argmax_against_enumeration_and_gradcheck():
    S = _rand(2, 5, 5, seed=5)
    lengths = [4, 3]
    z = dependency.tree_log_partition(S, lengths)
    grad, = torch.autograd.grad(z.sum(), (S,))
    heads, best = dependency.tree_argmax(S, lengths)
    kbest_heads, kbest_scores = dependency.tree_kbest(S, 3, lengths)
    for b, n in enumerate(lengths):
        trees = oracle.projective_trees(n)
        scored = [(t, _tree_scores(S[b].detach(), t)) for t in trees]
        assert float(z[b]) == pytest.approx(oracle.log_partition(scored), abs=1e-12)
        expected = np.zeros((5, 5))
        for t, p in oracle.probabilities(scored).items():
            for m, h in enumerate(t):
                expected[0 if h < 0 else h + 1, m + 1] += p
        np.testing.assert_allclose(grad[b].numpy(), expected, atol=1e-12)
        top = max(scored, key=lambda ts: ts[1])
        assert tuple(int(h) - 1 for h in heads[b]) == top[0]
        assert float(best[b]) == pytest.approx(top[1], abs=1e-12)
        np.testing.assert_allclose(kbest_scores[b].numpy(), oracle.kbest_scores(scored, 3), atol=1e-12)
    np.testing.assert_allclose(dependency.tree_marginals(S, lengths).numpy(), grad.numpy(), atol=1e-12)
    assert torch.autograd.gradcheck(lambda s: dependency.tree_log_partition(s, lengths), (S,))


def test_tree_samples_follow_the_tree_distribution():
    S = _rand(1, 4, 4, seed=6, grad=False)
    draws = dependency.tree_sample(S, 3000, seed=0)[0]
    counts = {}
    for heads in draws:
        key = tuple(int(h) - 1 for h in heads)
        counts[key] = counts.get(key, 0) + 1
    scored = [(t, _tree_scores(S[0], t)) for t in oracle.projective_trees(3)]
    assert oracle.chi_square_pvalue(counts, oracle.probabilities(scored)) > 1e-3


# -- the CRF module ----------------------------------------------------------------------------

def _crf(K, seed=0, **kw):
    torch.manual_seed(seed)
    crf = CRF(K, batch_first=True, **kw).double()
    with torch.no_grad():
        for p in crf.parameters():
            p.normal_()
    return crf


def _crf_paths(crf, emissions_b, length, allowed_b=None):
    T, S, F = (p.detach().numpy() for p in crf.potentials())
    return oracle.chain_paths(emissions_b, T, S, F, length=length, allowed=allowed_b)


def test_crf_log_likelihood_decode_kbest_entropy_marginals_against_enumeration():
    K, crf = 3, _crf(3)
    E = _rand(3, 4, K, seed=8)
    mask = torch.tensor([[1, 1, 1, 1], [1, 1, 0, 0], [1, 0, 0, 0]], dtype=torch.bool)
    lengths = [4, 2, 1]
    tags = torch.randint(0, K, (3, 4), generator=torch.Generator().manual_seed(1))
    llh = crf(E, tags, mask, reduction="none")
    decoded = crf.decode(E, mask)
    found, scores = crf.kbest(E, 4, mask)
    entropy = crf.entropy(E, mask)
    node = crf.marginals(E, mask)
    for b, n in enumerate(lengths):
        paths = _crf_paths(crf, _np(E)[b], n)
        score = dict(paths)[tuple(tags[b, :n].tolist())]
        assert float(llh[b]) == pytest.approx(score - oracle.log_partition(paths), abs=1e-12)
        assert tuple(decoded[b]) in oracle.argmax_paths(paths)
        np.testing.assert_allclose(scores[b].numpy(), oracle.kbest_scores(paths, 4), atol=1e-12)
        assert [dict(paths)[tuple(p)] for p in found[b]] == pytest.approx(scores[b].numpy()[:len(found[b])])
        assert float(entropy[b]) == pytest.approx(oracle.entropy(paths), abs=1e-12)
        np.testing.assert_allclose(node[b, :n].numpy(), oracle.chain_node_marginals(paths, n, K), atol=1e-12)
        assert torch.all(node[b, n:] == 0)
    for reduction, value in (("sum", llh.sum()), ("mean", llh.mean()), ("token_mean", llh.sum() / 7)):
        assert float(crf(E, tags, mask, reduction=reduction)) == pytest.approx(float(value), abs=1e-12)


def test_crf_sample_follows_the_path_distribution():
    crf = _crf(2, seed=2)
    E = _rand(1, 3, 2, seed=9, grad=False)
    draws = crf.sample(E, 4000, seed=0)[0]
    counts = {}
    for y in draws:
        counts[tuple(y)] = counts.get(tuple(y), 0) + 1
    paths = _crf_paths(crf, _np(E)[0], 3)
    assert oracle.chi_square_pvalue(counts, oracle.probabilities(paths)) > 1e-3
    assert crf.sample(E, 5, seed=3) == crf.sample(E, 5, seed=3)


def test_crf_matches_pytorch_crf_values_gradients_and_decodes():
    torchcrf = pytest.importorskip("torchcrf", reason="pytorch-crf is the peer (test extra)")
    for batch_first in (False, True):
        torch.manual_seed(3)
        ref = torchcrf.CRF(5, batch_first=batch_first).double()
        mine = CRF(5, batch_first=batch_first).double()
        mine.load_state_dict(ref.state_dict())
        shape = (6, 4) if batch_first else (4, 6)
        E = torch.randn(*shape, 5, dtype=F64, requires_grad=True)
        tags = torch.randint(0, 5, shape)
        mask = torch.ones(shape, dtype=torch.bool)
        if batch_first:
            mask[2:, 3:] = False
            mask[4:, 1:] = False
        else:
            mask[3:, 2:] = False
            mask[1:, 4:] = False
        for reduction in ("none", "sum", "mean", "token_mean"):
            a, b = ref(E, tags, mask, reduction=reduction), mine(E, tags, mask, reduction=reduction)
            np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), atol=1e-12)
        grads_ref = torch.autograd.grad(ref(E, tags, mask), [E, *ref.parameters()])
        grads = torch.autograd.grad(mine(E, tags, mask), [E, *mine.parameters()])
        for a, b in zip(grads_ref, grads):
            np.testing.assert_allclose(a.numpy(), b.numpy(), atol=1e-12)
        assert mine.decode(E, mask) == ref.decode(E, mask)
        assert mine.decode(E) == ref.decode(E)


def test_crf_gradcheck_of_the_log_likelihood_with_a_mask():
    crf = _crf(3, seed=4)
    E = _rand(2, 4, 3, seed=10)
    tags = torch.tensor([[0, 2, 1, 1], [1, 1, 0, 0]])
    mask = torch.tensor([[1, 1, 1, 1], [1, 1, 1, 0]], dtype=torch.bool)
    assert torch.autograd.gradcheck(lambda e: crf(e, tags, mask), (E,))


def test_allowed_transitions_bio_as_allennlp():
    labels = ["O", "B-X", "I-X", "B-Y", "I-Y"]
    pairs = set(allowed_transitions("BIO", labels))
    start, end = 5, 6
    assert (start, 2) not in pairs and (start, 1) in pairs and (start, 0) in pairs
    assert (0, 2) not in pairs and (1, 2) in pairs and (2, 2) in pairs and (3, 2) not in pairs
    assert (1, 4) not in pairs and (3, 4) in pairs and all((i, end) in pairs for i in range(5))
    assert not any(j == start for _, j in pairs) and not any(i == end for i, _ in pairs)
    bioul = set(allowed_transitions("BIOUL", ["O", "B-X", "I-X", "L-X", "U-X"]))
    assert (1, end) not in bioul and (3, end) in bioul and (1, 0) not in bioul and (1, 3) in bioul
    with pytest.raises(ParameterError, match="constraints"):
        allowed_transitions("XYZ", labels)


def test_bio_constrained_crf_decodes_and_samples_only_valid_sequences():
    labels = ["O", "B-X", "I-X", "B-Y", "I-Y"]
    crf = _crf(5, seed=5, constraints="BIO", labels=labels)
    E = _rand(8, 6, 5, seed=11, grad=False)
    E[:, :, 2] += 3.0  # the unconstrained decoder would start with I-X
    pairs = set(allowed_transitions("BIO", labels))

    def valid(y):
        return (5, y[0]) in pairs and all((a, b) in pairs for a, b in zip(y, y[1:])) and (y[-1], 6) in pairs

    assert all(valid(y) for y in crf.decode(E))
    assert all(valid(y) for seqs in crf.sample(E, 20, seed=0) for y in seqs)
    paths = _crf_paths(crf, _np(E)[0], 6)
    assert tuple(crf.decode(E)[0]) in oracle.argmax_paths(paths)
    bad = torch.tensor([[2, 2, 2, 2, 2, 2]])
    assert float(crf(E[:1], bad)) == -math.inf


def test_partial_labels_give_the_marginal_likelihood_of_the_consistent_paths():
    K, crf = 3, _crf(3, seed=6)
    E = _rand(2, 4, K, seed=12)
    tags = torch.tensor([[0, -1, 2, -1], [-1, -1, 1, 0]])
    sets = torch.zeros(2, 4, K, dtype=torch.bool)
    for b, t in itertools.product(range(2), range(4)):
        if tags[b, t] < 0:
            sets[b, t] = True
        else:
            sets[b, t, tags[b, t]] = True
    sets[1, 0, 2] = False  # a set of two tags
    tags_llh = crf.partial_log_likelihood(E, tags, reduction="none")
    sets_llh = crf.partial_log_likelihood(E, sets, reduction="none")
    for b in range(2):
        paths = _crf_paths(crf, _np(E)[b], 4)
        for value, allowed in ((tags_llh[b], None), (sets_llh[b], sets[b].numpy())):
            if allowed is None:
                allowed = np.array([[tags[b, t] < 0 or tags[b, t] == k for k in range(K)] for t in range(4)])
            consistent = [(y, s) for y, s in paths if all(allowed[t][y[t]] for t in range(4))]
            expected = oracle.log_partition(consistent) - oracle.log_partition(paths)
            assert float(value) == pytest.approx(expected, abs=1e-12)
    full = torch.tensor([[0, 1, 2, 1]])
    assert float(crf.partial_log_likelihood(E[:1], full)) == pytest.approx(float(crf(E[:1], full)), abs=1e-12)
    grad, = torch.autograd.grad(sets_llh.sum(), (E,))
    assert torch.isfinite(grad).all()


def test_sub_word_mask_tags_the_selected_tokens_as_one_chain():
    crf = _crf(3, seed=7)
    E = _rand(2, 6, 3, seed=13)
    first = torch.tensor([[1, 0, 1, 1, 0, 0], [0, 1, 0, 0, 1, 0]], dtype=torch.bool)  # first sub-tokens
    tags = torch.tensor([[2, 0, 1, 0, 0, 0], [0, 1, 0, 0, 2, 0]])
    llh = crf(E, tags, first, reduction="none")
    for b in range(2):
        keep = first[b].nonzero().squeeze(1)
        compact = E[b:b + 1, keep]
        assert float(llh[b]) == pytest.approx(float(crf(compact, tags[b:b + 1, keep])), abs=1e-12)
        assert crf.decode(E, first)[b] == crf.decode(compact)[0]
    node = crf.marginals(E, first)
    assert torch.all(node[~first] == 0)
    np.testing.assert_allclose(node[first].sum(-1).numpy(), 1.0, atol=1e-12)
    grad, = torch.autograd.grad(llh.sum(), (E,))
    assert torch.all(grad[~first] == 0)


def test_training_a_tiny_tagger_lowers_the_loss_deterministically():
    def train():
        torch.manual_seed(0)
        g = torch.Generator().manual_seed(1)
        words = torch.randint(0, 20, (16, 7), generator=g)
        gold = words % 4
        embed = torch.nn.Embedding(20, 8)
        head = torch.nn.Linear(8, 4)
        crf = CRF(4, batch_first=True)
        params = [*embed.parameters(), *head.parameters(), *crf.parameters()]
        opt = torch.optim.Adam(params, lr=0.1)
        losses = []
        for _ in range(15):
            opt.zero_grad()
            loss = -crf(head(embed(words)), gold, reduction="mean")
            loss.backward()
            opt.step()
            losses.append(float(loss))
        return losses, crf.decode(head(embed(words)))

    losses, decoded = train()
    again, _ = train()
    assert losses == again
    assert losses[-1] < 0.5 * losses[0]
    assert float(np.mean([y == list(t) for y, t in zip(decoded, (torch.randint(0, 20, (16, 7),
                 generator=torch.Generator().manual_seed(1)) % 4).tolist())])) > 0.5


def test_crf_rejects_bad_arguments():
    with pytest.raises(ParameterError, match="num_tags"):
        CRF(0)
    with pytest.raises(ParameterError, match="labels"):
        CRF(3, constraints="BIO")
    crf = CRF(3, batch_first=True)
    with pytest.raises(ParameterError, match="last dimension"):
        crf(torch.randn(2, 3, 4), torch.zeros(2, 3, dtype=torch.long))
    with pytest.raises(ParameterError, match="reduction"):
        crf(torch.randn(2, 3, 3), torch.zeros(2, 3, dtype=torch.long), reduction="avg")
    with pytest.raises(ParameterError, match="tags"):
        crf(torch.randn(2, 3, 3), torch.full((2, 3), 3))


# -- distribution objects ----------------------------------------------------------------------

def test_chain_distribution_against_enumeration():
    from varorder.torch import ChainCRF

    E, T, S, F = _rand(2, 4, 3, seed=14), _rand(3, 3, seed=15), _rand(3, seed=16), _rand(3, seed=17)
    lengths = [4, 3]
    dist = ChainCRF(E, T, S, F, lengths=lengths)
    paths_k, scores_k = dist.topk(3)
    draws = dist.sample(2000, seed=1)
    for b, n in enumerate(lengths):
        paths = oracle.chain_paths(_np(E)[b], _np(T), _np(S), _np(F), length=n)
        assert float(dist.partition[b]) == pytest.approx(oracle.log_partition(paths), abs=1e-12)
        np.testing.assert_allclose(dist.marginals[b, :n].numpy(), oracle.chain_node_marginals(paths, n, 3), atol=1e-12)
        np.testing.assert_allclose(dist.edge_marginals[b, :n - 1].numpy(), oracle.chain_edge_marginals(paths, n, 3),
                                   atol=1e-12)
        assert tuple(dist.argmax[b, :n].tolist()) in oracle.argmax_paths(paths)
        assert float(dist.max[b]) == pytest.approx(oracle.max_score(paths), abs=1e-12)
        assert float(dist.entropy[b]) == pytest.approx(oracle.entropy(paths), abs=1e-12)
        np.testing.assert_allclose(scores_k[b].numpy(), oracle.kbest_scores(paths, 3), atol=1e-12)
        y = tuple(paths_k[b, 1, :n].tolist())
        assert float(dist.log_prob(paths_k[:, 1])[b]) == pytest.approx(dict(paths)[y] - oracle.log_partition(paths),
                                                                       abs=1e-12)
        counts = {}
        for s in range(draws.shape[0]):
            key = tuple(draws[s, b, :n].tolist())
            counts[key] = counts.get(key, 0) + 1
        assert oracle.chi_square_pvalue(counts, oracle.probabilities(paths)) > 1e-3
    grad, = torch.autograd.grad(dist.partition.sum(), (E,))
    np.testing.assert_allclose(grad.numpy(), dist.marginals.numpy(), atol=1e-12)


def test_dependency_distribution_against_enumeration():
    from varorder.torch import DependencyCRF

    S = _rand(2, 4, 4, seed=18)
    dist = DependencyCRF(S, lengths=[3, 2])
    heads_k, scores_k = dist.topk(2)
    for b, n in enumerate([3, 2]):
        scored = [(t, _tree_scores(S[b].detach(), t)) for t in oracle.projective_trees(n)]
        assert float(dist.partition[b]) == pytest.approx(oracle.log_partition(scored), abs=1e-12)
        assert float(dist.entropy[b]) == pytest.approx(oracle.entropy(scored), abs=1e-12)
        top = max(scored, key=lambda ts: ts[1])[0]
        assert tuple(int(h) - 1 for h in dist.argmax[b, :n]) == top
        np.testing.assert_allclose(scores_k[b].numpy(), oracle.kbest_scores(scored, 2), atol=1e-12)
        tree = tuple(int(h) - 1 for h in heads_k[b, 1, :n])
        expected = dict(scored)[tree] - oracle.log_partition(scored)
        assert float(dist.log_prob(heads_k[:, 1])[b]) == pytest.approx(expected, abs=1e-12)
    assert dist.sample(3, seed=0).shape == (3, 2, 3)
    assert torch.all(dist.sample(3, seed=0)[:, 1, 2] == -1)


def test_engine_calls_leave_torchs_thread_count_alone():
    """torch's intra-op count is the OpenMP runtime's, which Numba's OpenMP layer sets when it starts; the engine
    starts the layer itself and puts the runtime's settings back (``engine.threads.start_numba_threads``). In a
    fresh process, so that the layer's first start happens here."""
    code = ("import torch; torch.set_num_threads(1)\n"
            "from varorder.torch import CRF\n"
            "torch.manual_seed(0); crf = CRF(3, batch_first=True).double()\n"
            "E = torch.randn(40, 5, 3, dtype=torch.float64, requires_grad=True)\n"
            "crf(E, torch.zeros(40, 5, dtype=torch.long)).backward(); crf.decode(E); crf.marginals(E)\n"
            "import numba; print(numba.threading_layer(), torch.get_num_threads())\n")
    # two engine threads by policy: the first call starts Numba's layer (under "auto" a short job stays serial)
    env = {"PYTHONPATH": str(SRC), "VARORDER_THREADS": "2", "NUMBA_NUM_THREADS": "2"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stderr
    layer, count = out.stdout.split()
    assert count == "1", layer


# -- semi-Markov chains ------------------------------------------------------------------------

def _semimarkov_inputs(shared=True, B=3, L=6, D=3, K=2, seed=20):
    P = _rand(B, L, D, K, seed=seed)
    T = _rand(*((K, K) if shared else (B, K, K)), seed=seed + 1)
    return P, T, _rand(K, seed=seed + 2), _rand(K, seed=seed + 3)


@pytest.mark.parametrize("backend", ["engine", "native"])
@pytest.mark.parametrize("shared", [True, False])
def test_semimarkov_gradcheck_and_gradients_are_the_oracles_marginals(shared, backend):
    from varorder.torch import semimarkov_log_partition

    P, T, S, F = _semimarkov_inputs(shared)
    lengths = [6, 4, 1]
    assert torch.autograd.gradcheck(
        lambda p, t, s, f: semimarkov_log_partition(p, t, s, f, lengths=lengths, backend=backend), (P, T, S, F))
    z = semimarkov_log_partition(P, T, S, F, lengths=lengths, backend=backend)
    grad_p, grad_t = torch.autograd.grad(z.sum(), (P, T))
    for b, n in enumerate(lengths):
        Tb = _np(T) if shared else _np(T)[b]
        paths = oracle.segmentation_paths(_np(P)[b], Tb, _np(S), _np(F), length=n)
        assert float(z[b]) == pytest.approx(oracle.log_partition(paths), abs=1e-12)
        expected_p = np.zeros(P.shape[1:])
        expected_t = np.zeros(Tb.shape)
        for segments, p in oracle.probabilities(paths).items():
            for s, e, k in segments:
                expected_p[e - 1, e - s - 1, k] += p
            for (_, _, i), (_, _, j) in zip(segments, segments[1:]):
                expected_t[i, j] += p
        np.testing.assert_allclose(grad_p[b].numpy(), expected_p, atol=1e-12)
        if not shared:
            np.testing.assert_allclose(grad_t[b].numpy(), expected_t, atol=1e-12)


def test_native_semimarkov_equals_the_engine_to_1e_10():
    from varorder import semimarkov

    P, T, S, F = _semimarkov_inputs(False, B=4, L=12, D=4, K=3, seed=21)
    P = P.detach().clone()
    P[1, 5, 2, 0] = -math.inf
    lengths = [12, 7, 1, 9]
    args = (_np(P), _np(T))
    kw = dict(lengths=lengths, start=_np(S), end=_np(F))
    seg_native, edge_native, z_native = native.semimarkov_marginals(P, T, S, F, lengths=lengths)
    seg, edge = semimarkov.marginals(*args, edges=True, **kw)
    np.testing.assert_allclose(z_native.numpy(), semimarkov.log_partition(*args, **kw), rtol=1e-10)
    np.testing.assert_allclose(seg_native.numpy(), seg, atol=1e-10)
    np.testing.assert_allclose(edge_native.numpy(), edge, atol=1e-10)


def test_semimarkov_crf_module_against_enumeration_and_training():
    from varorder.torch import SemiMarkovCRF
    from varorder.torch.semimarkov import segment_scores_from_emissions

    torch.manual_seed(0)
    crf = SemiMarkovCRF(2, 3).double()
    E = _rand(2, 5, 2, seed=22)
    gold = [[(0, 2, 1), (2, 3, 0), (3, 5, 1)], [(0, 1, 0), (1, 4, 1)]]
    llh = crf(E, gold, reduction="none")
    P = segment_scores_from_emissions(E, crf.durations).detach()
    T, S, F = (p.detach().numpy() for p in (crf.transitions, crf.start_transitions, crf.end_transitions))
    decoded = crf.decode(E, lengths=[5, 4])
    _, kscores = crf.kbest(E, 3, lengths=[5, 4])
    entropy = crf.entropy(E, lengths=[5, 4])
    for b, n in enumerate([5, 4]):
        paths = oracle.segmentation_paths(P[b].numpy(), T, S, F, length=n)
        scores = dict(paths)
        key = tuple(tuple(s) for s in gold[b])
        assert float(llh[b]) == pytest.approx(scores[key] - oracle.log_partition(paths), abs=1e-12)
        assert tuple(tuple(s) for s in decoded[b]) in oracle.argmax_paths(paths)
        np.testing.assert_allclose(kscores[b].numpy(), oracle.kbest_scores(paths, 3), atol=1e-12)
        assert float(entropy[b]) == pytest.approx(oracle.entropy(paths), abs=1e-12)
        # the factored scores equal the sums of the emissions over each segment
        assert float(P[b, 3, 1, 0]) == pytest.approx(float(E[b, 2:4, 0].sum() + crf.durations[0, 1]), abs=1e-12)
    opt = torch.optim.Adam(crf.parameters(), lr=0.2)
    losses = []
    for _ in range(10):
        opt.zero_grad()
        loss = -crf(E.detach(), gold)
        loss.backward()
        opt.step()
        losses.append(float(loss))
    assert losses[-1] < losses[0]


def _tagging_example():
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks" / "papers"))
    import torch_tagging

    return torch_tagging


def _train_example(data, vocab, tagset, head, case=False, steps=8):
    """(losses, model): ``steps`` Adam steps of the example's model on ``data`` as one batch, seed 0."""
    torch_tagging = _tagging_example()
    torch.manual_seed(0)
    model = torch_tagging.build_model(len(vocab) + 2, len(tagset), head, dim=16, case=case)
    opt = torch.optim.Adam(model.parameters(), lr=0.05)
    batch = torch_tagging.tensors(data, vocab, tagset, case)
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        loss = model.loss(*batch)
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
    return losses, model


def test_the_tagging_examples_heads_lower_their_loss_deterministically():
    torch_tagging = _tagging_example()

    words = ["the", "dog", "runs", "a", "cat", "sleeps", "big", "dogs", "run"]
    tags = {"the": "DET", "a": "DET", "dog": "NOUN", "cat": "NOUN", "dogs": "NOUN", "runs": "VERB",
            "sleeps": "VERB", "run": "VERB", "big": "ADJ"}
    rng = np.random.default_rng(0)
    data = []
    for _ in range(24):
        sentence = [str(w) for w in rng.choice(words, size=int(rng.integers(2, 7)))]
        data.append((sentence, [tags[w] for w in sentence]))
    vocab = {w: i + 2 for i, w in enumerate(words)}
    tagset = {t: i for i, t in enumerate(sorted(set(tags.values())))}

    def train(head):
        losses, model = _train_example(data, vocab, tagset, head)
        return losses, torch_tagging.evaluate(model, data, vocab, tagset, head)

    for head in ("softmax", "memm", "crf"):
        losses, accuracy = train(head)
        assert losses == train(head)[0], head
        assert losses[-1] < 0.6 * losses[0], (head, losses)
        assert all(0 <= a <= 100 for a in accuracy.values())


def test_the_tagging_examples_ner_path_lowers_its_loss_deterministically():
    """The GUM NER half of the example on a tiny synthetic BIO set: every head (the word-shape encoder too)
    lowers its loss under a seed, twice identically; the BIO-constrained decoders never emit an invalid
    sequence, and the entity scores are those of varorder.eval.ner."""
    torch_tagging = _tagging_example()

    from varorder.io.schemes import is_valid

    names = {"Ann": "person", "Bob": "person", "Paris": "place", "Rome": "place", "Acme": "organization"}
    others = ["saw", "the", "visited", "in", "and", "works", "at"]
    rng = np.random.default_rng(1)
    data = []
    for _ in range(24):
        words, tags = [], []
        for _ in range(int(rng.integers(2, 7))):
            if rng.random() < 0.4:
                name = str(rng.choice(list(names)))
                span = [name] + (["City"] if names[name] == "place" and rng.random() < 0.5 else [])
                words += span
                tags += [f"B-{names[name]}"] + [f"I-{names[name]}"] * (len(span) - 1)
            else:
                words.append(str(rng.choice(others)))
                tags.append("O")
        data.append((words, tags))
    vocab = {w.lower(): i + 2 for i, w in enumerate(list(names) + others + ["City"])}
    tagset = {t: i for i, t in enumerate(sorted({t for _, ts in data for t in ts}))}
    for tag in [f"{p}-{t[2:]}" for t in list(tagset) if t != "O" for p in "BI"]:
        tagset.setdefault(tag, len(tagset))

    def train(head, case):
        return _train_example(data, vocab, tagset, head, case)

    labels = sorted(tagset, key=tagset.get)
    for head, case in (("crf", False), ("crf", True), ("softmax", False), ("memm", False)):
        losses, model = train(head, case)
        assert losses == train(head, case)[0], head
        assert losses[-1] < 0.6 * losses[0], (head, losses)
        gold, predicted = torch_tagging.predict(model, data, vocab, tagset, head, scheme=True, case=case)
        assert "viterbi+BIO" in predicted
        tags = [[labels[i] for i in p] for p in predicted["viterbi+BIO"]]
        assert all(is_valid(t, "BIO") for t in tags)
        scores = torch_tagging.evaluate_entities(model, data, vocab, tagset, head, case)
        assert scores["viterbi+BIO"]["invalid_sentences"] == 0
        assert 0.0 <= scores["viterbi+BIO"]["f1"] <= 1.0
    # a model whose scores prefer the invalid O → I-person: the constrained decoder still emits valid BIO,
    # the unconstrained one does not (the check above can fail)
    _, model = train("crf", False)
    with torch.no_grad():
        model.crf.transitions[tagset["O"], tagset["I-person"]] = 50.0
        model.crf.start_transitions[tagset["I-person"]] = 50.0
    scores = torch_tagging.evaluate_entities(model, data, vocab, tagset, "crf")
    assert scores["viterbi"]["invalid_sentences"] > 0
    assert scores["viterbi+BIO"]["invalid_sentences"] == 0
