"""Per-variable-domain factor graphs (named-entity generation): incremental local scores against full
rescoring with the label-dependent name link, Gibbs/MH against enumeration, annealing against
enumeration, and a SampleRank update on a hand-made two-slot document against a hand computation."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from varorder.factorgraph import domains
from varorder.factorgraph.kernels import GIBBS, METROPOLIS
from varorder.testing import oracle


def _random_graph(rng, n=6, F=4, A=3, n_entities=2, max_cands=3, pair_codes=2, buckets=2, link=True, pairs=True,
                  between=False):
    sizes = rng.integers(1, max_cands + 1, size=n)
    cand_ptr = np.concatenate([[0], np.cumsum(sizes)])
    C = int(cand_ptr[-1])
    X = sp.random(C, F, density=0.5, random_state=np.random.RandomState(int(rng.integers(1 << 30))),
                  data_rvs=lambda m: rng.normal(size=m), format="csr")
    attr = rng.integers(0, A, size=C)
    is_name = rng.integers(0, 2, size=C)
    entity = rng.integers(0, n_entities, size=n)
    prev = np.full(n, -1)
    last = {}
    for t in range(n):
        prev[t] = last.get(int(entity[t]), -1)
        last[int(entity[t])] = t
    pair_list = [(t - 1, t, int(rng.integers(pair_codes))) for t in range(1, n)] if pairs else []
    sentence = np.sort(rng.integers(0, 5, size=n))
    paragraph = sentence // 2
    graph = domains.DomainGraph(cand_ptr, X, attr, is_name, np.array(pair_list).reshape(-1, 3), prev, sentence,
                                paragraph, rng.integers(0, buckets, size=3), rng.integers(0, 2, size=C),
                                rng.integers(1, 3, size=C))
    layout = domains.DomainLayout(F, A, pair_codes if pairs else 0, buckets if link else 0, link and between)
    return graph, layout


def _configs(graph):
    return [np.array(c) for c in itertools.product(*[range(s) for s in graph.domain_sizes])]


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2 ** 31 - 1), n=st.integers(1, 7), entities=st.integers(1, 3), link=st.booleans(),
       pairs=st.booleans(), between=st.booleans())
def test_incremental_scores_equal_full_rescore(seed, n, entities, link, pairs, between):
    rng = np.random.default_rng(seed)
    graph, layout = _random_graph(rng, n=n, n_entities=entities, link=link, pairs=pairs, between=between)
    theta = rng.normal(size=layout.n_params)
    G, L = graph.kernel_arrays(), layout.kernel_layout()
    y = np.array([rng.integers(s) for s in graph.domain_sizes])
    for t in range(graph.n_variables):
        local = domains.local_scores(t, y, theta, G, L, graph.scratch_size())
        base = domains.full_score(graph, layout, theta, y)
        for k in range(graph.domain_sizes[t]):
            changed = y.copy()
            changed[t] = k
            assert domains.full_score(graph, layout, theta, changed) - base == pytest.approx(local[k] - local[y[t]],
                                                                                          abs=1e-9)


def test_name_link_moves_with_the_assignment():
    """A later pronoun's link factor reaches back to whichever earlier slot currently holds a name."""
    cand_ptr = np.array([0, 2, 4, 6])  # three slots of one entity; candidate 0 a name, 1 a pronoun
    X = sp.csr_matrix((6, 1))
    graph = domains.DomainGraph(cand_ptr, X, [0, 1] * 3, [1, 0] * 3, np.zeros((0, 3)), [-1, 0, 1], [0, 3, 4],
                                [0, 1, 1], [0, 1, 1, 1, 2])
    layout = domains.DomainLayout(1, 2, 0, 3)
    assert domains.link_targets(graph, np.array([0, 1, 1])).tolist() == [-1, 0, 0]
    assert domains.link_targets(graph, np.array([0, 0, 1])).tolist() == [-1, 0, 1]
    assert domains.link_targets(graph, np.array([1, 1, 1])).tolist() == [-1, -1, -1]
    theta = np.zeros(layout.n_params)
    o = layout.offsets["N"]
    # slot 2 (pronoun, attr 1): target slot 0 is 4 sentences back (bucket 2), other paragraph → code 1 + 4 + 0
    theta[o + (1 + 2 * 2 + 0) * 2 + 1] = 5.0
    assert domains.full_score(graph, layout, theta, np.array([0, 1, 1])) == 5.0
    assert domains.full_score(graph, layout, theta, np.array([0, 0, 1])) == 0.0  # now links to slot 1: 1 back, same paragraph


def test_link_code_tells_a_competitor_in_between():
    """With ``link_between`` the link's code doubles its distance bucket by whether another entity's slot lies
    between the slot and its entity's previous name; a full rescore and the kernel's local score agree."""
    # slots: 0 entity A (name), 1 entity B, 2 entity A (pronoun), 3 entity A (pronoun); one candidate pair each
    cand_ptr = np.array([0, 2, 4, 6, 8])
    X = sp.csr_matrix((8, 1))
    graph = domains.DomainGraph(cand_ptr, X, [0, 1] * 4, [1, 0] * 4, np.zeros((0, 3)), [-1, -1, 0, 2], [0, 0, 1, 1],
                                [0, 0, 0, 0], [0, 1])
    assert graph.chain_rank.tolist() == [0, 0, 1, 2]
    layout = domains.DomainLayout(1, 2, 0, 2, link_between=True)
    assert layout.n_link_codes == 1 + 2 * 2 * 2
    # slot 2 → slot 0: 1 sentence (bucket 1), slot 1 of B between → 1 + 2·(2·1 + 1) + 1 (same paragraph) = 8
    assert domains.link_code(graph, layout, 2, 0) == 8
    # slot 3 → slot 2 (when slot 2 is a name): no one between, same sentence → 1 + 2·0 + 1 = 2
    assert domains.link_code(graph, layout, 3, 2) == 2
    # slot 3 → slot 0: B's slot between → 1 + 2·3 + 1 = 8
    assert domains.link_code(graph, layout, 3, 0) == 8
    plain = domains.DomainLayout(1, 2, 0, 2)
    assert domains.link_code(graph, plain, 2, 0) == 1 + 2 * 1 + 1
    theta = np.zeros(layout.n_params)
    o = layout.offsets["N"]
    theta[o + 8 * 2 + 1] = 3.0  # a pronoun (attr 1) linked past a competitor
    theta[o + 2 * 2 + 1] = -1.0
    y = np.array([0, 0, 1, 1])  # slots 2 and 3 pronouns, both linked to slot 0 past B
    assert domains.full_score(graph, layout, theta, y) == 6.0
    assert domains.full_score(graph, layout, theta, np.array([0, 0, 0, 1])) == -1.0  # slot 3 now links to slot 2
    local = domains.local_scores(2, y, theta, graph.kernel_arrays(), layout.kernel_layout(), graph.scratch_size())
    assert local[1] - local[0] == pytest.approx(7.0)


def _counts(samples):
    counts = {}
    for row in map(tuple, samples.tolist()):
        counts[row] = counts.get(row, 0) + 1
    return counts


@pytest.mark.parametrize("kind", [GIBBS, METROPOLIS])
def test_sampler_matches_enumeration(kind):
    rng = np.random.default_rng(3)
    graph, layout = _random_graph(rng, n=4, n_entities=2)
    theta = rng.normal(size=layout.n_params)
    configs = _configs(graph)
    scores = np.array([domains.full_score(graph, layout, theta, c) for c in configs])
    p = np.exp(scores - scores.max())
    p /= p.sum()
    y = np.zeros(graph.n_variables, dtype=np.int64)
    samples = domains.sample_sweeps(graph, layout, theta, y, 6000 * 3, 3, 1.0, kind, 11)
    probs = {tuple(c.tolist()): float(q) for c, q in zip(configs, p)}
    assert oracle.chi_square_pvalue(_counts(samples), probs) > 1e-3
    wrong = {key: float(q) for key, q in zip(probs, np.roll(p, 1))}
    assert oracle.chi_square_pvalue(_counts(samples), wrong) < 1e-6


@pytest.mark.parametrize("seed", range(4))
def test_annealing_finds_the_enumerated_optimum(seed):
    rng = np.random.default_rng(seed)
    graph, layout = _random_graph(rng, n=5, n_entities=2)
    theta = 2.0 * rng.normal(size=layout.n_params)
    best = max(domains.full_score(graph, layout, theta, c) for c in _configs(graph))
    found = -np.inf
    for restart in range(4):
        y = np.array([rng.integers(s) for s in graph.domain_sizes])
        domains.anneal(graph, layout, theta, y, np.geomspace(5.0, 0.02, 400), METROPOLIS, 10 * seed + restart)
        found = max(found, domains.full_score(graph, layout, theta, y))
    assert found == pytest.approx(best)


def test_samplerank_update_on_a_two_slot_document_matches_hand_computation():
    """Slots 0 and 1 of one entity, each with candidates [name (attr 0), pronoun (attr 1)]; one pair factor
    (code 0) and the name link. Unary features: candidate rows [1, 0], [0, 1] → feature 0 'name', 1 'pron'.
    Gold: slot 0 name, slot 1 pronoun. Start y = (0, 0), θ = 0; propose slot 1: 0 → 1 (MH, the only other)."""
    X = sp.csr_matrix(np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 0.0], [0.0, 1.0]]))
    graph = domains.DomainGraph([0, 2, 4], X, [0, 1, 0, 1], [1, 0, 1, 0], [[0, 1, 0]], [-1, 0], [0, 1], [0, 0],
                                [0, 1])
    layout = domains.DomainLayout(2, 2, 1, 2)  # θ: 2 unary, 1·2·2 pair, 5·2 link, 5·3 name relation = 31
    assert layout.n_params == 31
    theta = np.zeros(31)
    u = np.zeros(31)
    y = np.array([0, 0])
    loss = np.array([0.0, 2.0, 2.0, 0.0])  # gold candidates cost 0
    log = np.zeros((1, 6))
    c, ranked, updates, moves, objective = domains.samplerank_epoch(
        graph, layout, [1], y, loss, theta, u, 0.0, 0, 1.0, 1.0, 0.0, METROPOLIS, 1.0, 0, 5, log)
    # the proposal (0, 1) is better by Δo = 2; the model scores both 0 (gap 0 ≤ margin 0) → perceptron step 1:
    # θ += φ(0, 1) − φ(0, 0). φ(0, 1): unary 'pron' of slot 1, pair P[0, a=0, a=1], link of slot 1 with target
    # slot 0 (1 sentence back → bucket 1, same paragraph → code 1 + 2 + 1 = 4) and attr 1; φ(0, 0) the same with
    # 'name', P[0, 0, 0], link code 4 with attr 0, and — slot 1 holding a name linked to a name — the name
    # relation R[4, rel]: different strings (keys default to distinct), equal lengths → rel 2.
    # Slot 0's own link (code 0, attr 0; no target, so no relation) is in both and cancels.
    expected = np.zeros(31)
    expected[1] += 1
    expected[0] -= 1
    o_P, o_N = 2, 6
    expected[o_P + (0 * 2 + 0) * 2 + 1] += 1
    expected[o_P + (0 * 2 + 0) * 2 + 0] -= 1
    expected[o_N + 4 * 2 + 1] += 1
    expected[o_N + 4 * 2 + 0] -= 1
    o_R = o_N + 5 * 2
    expected[o_R + 4 * 3 + 2] -= 1
    assert theta.tolist() == expected.tolist()
    assert u.tolist() == expected.tolist()  # u += c·step·Δφ with c = 1 at the first step
    assert (c, ranked, updates) == (1.0, 1, 1)
    assert log[0].tolist() == [1, 0, 1, 0.0, 2.0, 1.0]
    # the move was accepted (Δs = 0 → MH accepts), so y is the gold configuration, objective 0
    assert y.tolist() == [0, 1] and moves == 1 and objective == 0.0
    assert domains.full_score(graph, layout, theta, np.array([0, 1])) - \
        domains.full_score(graph, layout, theta, np.array([0, 0])) == pytest.approx(7.0)


def test_samplerank_with_the_unary_weights_held():
    """unary_scale 0 moves only the pair and link weights; unary_scale ½ halves the unary part of the step,
    and MIRA's ‖Δφ‖² counts the unary part at that weight (the step that closes the margin)."""
    X = sp.csr_matrix(np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 0.0], [0.0, 1.0]]))
    graph = domains.DomainGraph([0, 2, 4], X, [0, 1, 0, 1], [1, 0, 1, 0], [[0, 1, 0]], [-1, 0], [0, 1], [0, 0],
                                [0, 1])
    layout = domains.DomainLayout(2, 2, 1, 2)
    loss = np.array([0.0, 2.0, 2.0, 0.0])

    def step(rule, unary_scale, C=10.0):
        theta, u, y = np.zeros(31), np.zeros(31), np.array([0, 0])
        domains.samplerank_epoch(graph, layout, [1], y, loss, theta, u, 0.0, rule, 1.0, C, 0.0, METROPOLIS, 1.0, 0,
                                 5, unary_scale=unary_scale)
        return theta

    full = step(0, 1.0)
    held = step(0, 0.0)
    assert held[:2].tolist() == [0.0, 0.0] and held[2:].tolist() == full[2:].tolist()
    half = step(0, 0.5)
    assert half[:2].tolist() == [-0.5, 0.5] and half[2:].tolist() == full[2:].tolist()
    # MIRA: Δφ has 2 unary entries (±1) and 5 others (±1: pair ×2, link ×2, relation) → ‖Δφ‖² = 2·s + 5;
    # the step τ = (Δo − gap) / ‖Δφ‖² = 2 / (2s + 5) makes the new gap s·2τ + 5τ = 2 = Δo
    for s in (1.0, 0.5, 0.0):
        theta = step(1, s)
        tau = 2.0 / (2.0 * s + 5.0)
        assert theta[1] == pytest.approx(s * tau) and theta[2 + 1] == pytest.approx(tau)
        gap = domains.full_score(graph, layout, theta, np.array([0, 1])) - \
            domains.full_score(graph, layout, theta, np.array([0, 0]))
        assert gap == pytest.approx(2.0)
