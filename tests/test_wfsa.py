"""varorder.wfsa against brute-force path enumeration (varorder.testing.oracle), closed
forms on cyclic machines, and pynini (OpenFst) when installed."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from varorder.testing import oracle
from varorder.wfsa import (Wfsa, arc_posteriors, compose, expected_ngram_counts, format_fst, intersect,
                           kbest_strings, linear_acceptor, log_total_weight, project, read_fst,
                           sample_strings, shortest_distance, string_weight, strings_acceptor,
                           universal_acceptor, write_fst)

ALPHABET = ("a", "b", "c")


def random_acyclic(rng, n_states=4, n_arcs=7, acceptor=False, eps=0.3, alphabet=ALPHABET):
    """Arcs only go forward (i → j > i), so path enumeration is finite and exact."""
    arcs = []
    for _ in range(n_arcs):
        i = int(rng.integers(0, n_states - 1))
        j = int(rng.integers(i + 1, n_states))
        il = 0 if rng.random() < eps else int(rng.integers(1, len(alphabet) + 1))
        ol = il if acceptor else (0 if rng.random() < eps else int(rng.integers(1, len(alphabet) + 1)))
        arcs.append((i, il, ol, float(rng.normal(-0.5, 1.0)), j))
    finals = {q: float(rng.normal()) for q in range(n_states) if rng.random() < 0.5}
    finals[n_states - 1] = 0.3
    return Wfsa.from_arcs(alphabet, n_states, 0, arcs, finals)


def random_cyclic_acceptor(rng, n_states=3, n_arcs=6, alphabet=ALPHABET, scale=-2.5):
    """Arcs in any direction with small weights (the closure converges fast)."""
    arcs = []
    for _ in range(n_arcs):
        i, j = (int(x) for x in rng.integers(0, n_states, size=2))
        lab = int(rng.integers(0, len(alphabet) + 1))
        arcs.append((i, lab, lab, float(scale + 0.3 * rng.normal()), j))
    arcs.append((0, 1, 1, scale, n_states - 1))
    finals = {n_states - 1: 0.0, 0: -1.0}
    return Wfsa.from_arcs(alphabet, n_states, 0, arcs, finals)


def _close(table_a: dict, table_b: dict, tol=1e-9):
    keys = {k for k, v in table_a.items() if v > -30} | {k for k, v in table_b.items() if v > -30}
    for k in keys:
        assert table_a.get(k, -math.inf) == pytest.approx(table_b.get(k, -math.inf), abs=tol), k


seeds = st.integers(0, 2**31 - 1)


@settings(max_examples=40, deadline=None)
@given(seeds, st.sampled_from(["log", "max"]))
def test_compose_equals_enumerated_relation_product(seed, semiring):
    rng = np.random.default_rng(seed)
    a, b = random_acyclic(rng), random_acyclic(rng)
    pa = oracle.wfsa_string_weights(oracle.wfsa_paths(a, 20), semiring)
    pb = oracle.wfsa_string_weights(oracle.wfsa_paths(b, 20), semiring)
    want: dict = {}
    for (x, y), wa in pa.items():
        for (y2, z), wb in pb.items():
            if y == y2:
                key = (x, z)
                prev = want.get(key, -math.inf)
                want[key] = np.logaddexp(prev, wa + wb) if semiring == "log" else max(prev, wa + wb)
    got = oracle.wfsa_string_weights(oracle.wfsa_paths(compose(a, b), 40), semiring)
    _close(got, want)


@settings(max_examples=30, deadline=None)
@given(seeds)
def test_intersect_and_project(seed):
    rng = np.random.default_rng(seed)
    a, b = random_acyclic(rng, acceptor=True), random_acyclic(rng, acceptor=True)
    pa = oracle.wfsa_string_weights(oracle.wfsa_paths(a, 20), tape="input")
    pb = oracle.wfsa_string_weights(oracle.wfsa_paths(b, 20), tape="input")
    want = {x: pa[x] + pb[x] for x in pa if x in pb}
    got = oracle.wfsa_string_weights(oracle.wfsa_paths(intersect(a, b), 40), tape="input")
    _close(got, want)
    t = random_acyclic(rng)
    for side in ("input", "output"):
        want = oracle.wfsa_string_weights(oracle.wfsa_paths(t, 20), tape=side)
        got = oracle.wfsa_string_weights(oracle.wfsa_paths(project(t, side), 20), tape="input")
        _close(got, want)


def test_shortest_distance_on_a_cycle_matches_the_geometric_series():
    # 0 -a/p-> 1 -b/r-> 0, final(0) = f: total = f / (1 - p r); from state 1: r f / (1 - p r)
    p, r, f = 0.6, 0.7, 0.9
    fsa = Wfsa.from_arcs(("a", "b"), 2, 0, [(0, 1, 1, math.log(p), 1), (1, 2, 2, math.log(r), 0)], {0: math.log(f)})
    beta = shortest_distance(fsa, "log", reverse=True)
    assert np.exp(beta) == pytest.approx([f / (1 - p * r), r * f / (1 - p * r)])
    alpha = shortest_distance(fsa, "log")
    assert np.exp(alpha) == pytest.approx([1 / (1 - p * r), p / (1 - p * r)])
    assert log_total_weight(fsa, "max") == pytest.approx(math.log(f))
    # a universal acceptor: Σ_n (|Σ| q)^n · f
    q = 0.2
    u = universal_acceptor(ALPHABET, math.log(q), math.log(f))
    assert math.exp(log_total_weight(u)) == pytest.approx(f / (1 - 3 * q))


def test_divergent_machine_raises():
    u = universal_acceptor(ALPHABET, math.log(0.5))
    with pytest.raises(ValueError, match="diverges"):
        log_total_weight(u)
    positive = universal_acceptor(ALPHABET, 0.1)
    with pytest.raises(ValueError, match="positive weight"):
        log_total_weight(positive, "max")


@settings(max_examples=30, deadline=None)
@given(seeds, st.sampled_from(["log", "max"]))
def test_shortest_distance_cyclic_against_truncated_enumeration(seed, semiring):
    rng = np.random.default_rng(seed)
    fsa = random_cyclic_acceptor(rng, scale=-4.0)
    paths = oracle.wfsa_paths(fsa, 9)  # the tail beyond 9 arcs weighs < 1e-8
    scores = [s for _, _, s in paths]
    want = oracle._logsumexp(scores) if semiring == "log" else max(scores)
    assert log_total_weight(fsa, semiring) == pytest.approx(want, abs=1e-6)


@settings(max_examples=25, deadline=None)
@given(seeds, st.integers(1, 3))
def test_expected_ngram_counts_against_enumeration(seed, order):
    rng = np.random.default_rng(seed)
    fsa = random_acyclic(rng, n_states=5, n_arcs=9, acceptor=True)
    weights = oracle.wfsa_string_weights(oracle.wfsa_paths(fsa, 20), tape="input")
    assume(weights)
    log_z = oracle._logsumexp(list(weights.values()))
    want: dict = {}
    for labels, w in weights.items():
        string = fsa.decode(labels)
        for gram, c in oracle.substring_counts(string, order).items():
            if len(gram) == order:
                want[gram] = want.get(gram, 0.0) + c * math.exp(w - log_z)
    got = expected_ngram_counts(fsa, order)
    assert set(k for k, v in got.items() if v > 1e-12) == set(k for k, v in want.items() if v > 1e-12)
    for k, v in want.items():
        assert got.get(k, 0.0) == pytest.approx(v, abs=1e-9)


def test_arc_posteriors_sum_to_expected_length():
    rng = np.random.default_rng(3)
    fsa = random_cyclic_acceptor(rng)
    arc, final, log_z = arc_posteriors(fsa)
    assert final.sum() == pytest.approx(1.0)
    paths = oracle.wfsa_paths(fsa, 11)
    z = sum(math.exp(s) for _, _, s in paths)
    length = sum(len([x for x in ins]) * math.exp(s) for ins, _, s in paths) / z
    non_eps = fsa.ilabel != 0
    assert arc[non_eps].sum() == pytest.approx(length, abs=1e-6)


@settings(max_examples=30, deadline=None)
@given(seeds, st.integers(1, 6))
def test_kbest_strings_against_enumeration(seed, k):
    rng = np.random.default_rng(seed)
    fsa = random_acyclic(rng, n_states=5, n_arcs=10, acceptor=True)
    best = oracle.wfsa_string_weights(oracle.wfsa_paths(fsa, 20), "max", tape="input")
    assume(best)
    want = sorted(best.values(), reverse=True)[:k]
    got = kbest_strings(fsa, k)
    assert [w for _, w in got] == pytest.approx(want)
    for string, w in got:
        assert best[tuple(fsa.encode(string))] == pytest.approx(w)
        assert string_weight(fsa, string, "max") == pytest.approx(w)


def test_string_weight_on_a_cyclic_transducer():
    rng = np.random.default_rng(5)
    fsa = random_cyclic_acceptor(rng)
    weights = oracle.wfsa_string_weights(oracle.wfsa_paths(fsa, 12), tape="input")
    for labels, w in list(weights.items())[:8]:
        if len(labels) <= 3:
            assert string_weight(fsa, fsa.decode(labels)) == pytest.approx(w, abs=1e-6)


def test_sampling_goodness_of_fit():
    weighted = {("a",): math.log(0.5), ("a", "b"): math.log(0.2), ("b", "c", "a"): math.log(0.25), (): math.log(0.05)}
    fsa = strings_acceptor(ALPHABET, weighted)
    draws = sample_strings(fsa, 4000, seed=11)
    counts: dict = {}
    for s in draws:
        counts[s] = counts.get(s, 0) + 1
    probs = {s: math.exp(w) for s, w in weighted.items()}
    assert oracle.chi_square_pvalue(counts, probs) > 1e-3
    cyclic = random_cyclic_acceptor(np.random.default_rng(2), scale=-1.5)
    exact = oracle.wfsa_string_weights(oracle.wfsa_paths(cyclic, 14), tape="input")
    z = log_total_weight(cyclic)
    draws = sample_strings(cyclic, 3000, seed=4)
    counts = {}
    for s in draws:
        key = tuple(cyclic.encode(s))
        counts[key] = counts.get(key, 0) + 1
    probs = {s: math.exp(w - z) for s, w in exact.items() if math.exp(w - z) > 0.02}
    rest = 1.0 - sum(probs.values())
    grouped = {k: v for k, v in counts.items() if k in probs}
    grouped["rest"] = sum(v for k, v in counts.items() if k not in probs)
    probs["rest"] = rest
    assert oracle.chi_square_pvalue(grouped, probs) > 1e-3


def test_openfst_text_round_trip(tmp_path):
    rng = np.random.default_rng(1)
    t = random_acyclic(rng)
    path = tmp_path / "t.fst.txt"
    write_fst(t, path)
    back = read_fst(path, alphabet=ALPHABET)
    want = oracle.wfsa_string_weights(oracle.wfsa_paths(t, 20))
    _close(oracle.wfsa_string_weights(oracle.wfsa_paths(back, 20)), want)
    acc = linear_acceptor(ALPHABET, "cab", -1.5)
    text = format_fst(acc)
    assert text.splitlines()[0].split("\t")[:3] == ["0", "1", "c"]
    path.write_text(text)
    back = read_fst(path)
    assert back.is_acceptor and back.alphabet == ("c", "a", "b")
    assert string_weight(back, "cab") == pytest.approx(-1.5)


def _by_symbols(fsa, table):
    return {tuple(fsa.alphabet[i - 1] for i in key): weight for key, weight in table.items()}


def test_acceptor_round_trip_keeps_an_acceptor(tmp_path):
    """An acceptor's arcs are written with their cost (four fields), which must not read
    back as a transducer arc whose output symbol is the cost."""
    rng = np.random.default_rng(3)
    acc = project(random_acyclic(rng), "input")
    path = tmp_path / "a.fst.txt"
    write_fst(acc, path)
    assert all(len(line.split()) in (2, 4) for line in path.read_text().splitlines())
    for alphabet in (ALPHABET, None):
        back = read_fst(path, alphabet=alphabet)
        assert back.is_acceptor
        assert set(back.alphabet) <= set(ALPHABET)
        want = _by_symbols(acc, oracle.wfsa_string_weights(oracle.wfsa_paths(acc, 20), tape="input"))
        got = _by_symbols(back, oracle.wfsa_string_weights(oracle.wfsa_paths(back, 20), tape="input"))
        _close(got, want)
    # a transducer without costs, in fstprint's four columns, stays a transducer
    path.write_text("0 1 a b\n1\n")
    back = read_fst(path, alphabet=ALPHABET)
    assert not back.is_acceptor and back.n_arcs == 1


@pytest.mark.parametrize("text,message", [
    ("0 1 a b x\n", "expected a cost"),
    ("0 1 a\n1 2 a b 0.5\n", "expected 3 or 4 fields"),
    ("0 -1 a b\n", "state number"),
    ("0 1 a b\n1\n1 0.2\n", "listed twice"),
    ("0 1 q b\n", "not in the alphabet"),
    ("", "empty machine"),
    ("0 1 a b NaN\n", "not a weight"),
])
def test_reader_is_strict(tmp_path, text, message):
    path = tmp_path / "bad.txt"
    path.write_text(text)
    with pytest.raises(ValueError, match=message) as info:
        read_fst(path, alphabet=ALPHABET)
    assert str(path) in str(info.value)


# ---------------------------------------------------------------------------
# cross-check against OpenFst through pynini (optional extra "wfst")
# ---------------------------------------------------------------------------


def _to_pynini(pynini, fsa: Wfsa):
    out = pynini.Fst(arc_type="log")
    for _ in range(fsa.n_states):
        out.add_state()
    out.set_start(fsa.start)
    for q in range(fsa.n_states):
        if fsa.final[q] > -math.inf:
            out.set_final(q, pynini.Weight("log", -fsa.final[q]))
    for e in range(fsa.n_arcs):
        out.add_arc(int(fsa.src[e]), pynini.Arc(int(fsa.ilabel[e]), int(fsa.olabel[e]),
                                                 pynini.Weight("log", -fsa.weight[e]), int(fsa.dst[e])))
    return out


@settings(max_examples=25, deadline=None)
@given(seeds)
def test_against_pynini(seed):
    pynini = pytest.importorskip("pynini")
    rng = np.random.default_rng(seed)
    a, b = random_acyclic(rng), random_acyclic(rng)
    cyc = random_cyclic_acceptor(rng)
    ours = log_total_weight(compose(a, b))
    theirs_fst = pynini.compose(_to_pynini(pynini, a).arcsort("olabel"), _to_pynini(pynini, b).arcsort("ilabel"))
    distances = pynini.shortestdistance(theirs_fst, reverse=True)
    theirs = -float(distances[theirs_fst.start()]) if theirs_fst.start() >= 0 and len(distances) else -math.inf
    if theirs == -math.inf or math.isnan(theirs):
        assert ours == -math.inf
    else:
        assert ours == pytest.approx(theirs, abs=1e-4)
    beta_theirs = [-float(w) for w in pynini.shortestdistance(_to_pynini(pynini, cyc), reverse=True)]
    beta_ours = shortest_distance(cyc, "log", reverse=True)
    for q in range(cyc.n_states):
        if beta_ours[q] > -30:
            assert beta_ours[q] == pytest.approx(beta_theirs[q], abs=1e-4)


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 12), st.integers(0, 40), st.integers(0, 2**32 - 1))
def test_reachable_states_match_a_plain_graph_search(n, m, seed):
    from varorder.wfsa.ops import connected_states, reachable_states
    rng = np.random.default_rng(seed)
    src, dst = rng.integers(0, n, m), rng.integers(0, n, m)
    seeds = rng.integers(0, n, rng.integers(0, 3))
    seen, todo = set(int(s) for s in seeds), [int(s) for s in seeds]
    while todo:
        u = todo.pop()
        for a in np.flatnonzero(src == u):
            if int(dst[a]) not in seen:
                seen.add(int(dst[a]))
                todo.append(int(dst[a]))
    expected = np.isin(np.arange(n), sorted(seen))
    assert np.array_equal(reachable_states(n, src, dst, seeds), expected)
    # connected = reachable from the start and co-reachable from a final state
    weight = np.where(rng.random(m) < 0.2, -np.inf, 0.0)
    final = np.where(rng.random(n) < 0.3, 0.0, -np.inf)
    fsa = Wfsa(("a",), 0, final, src, np.zeros(m, np.int64), np.zeros(m, np.int64), weight, dst)
    live = weight > -np.inf
    forward = reachable_states(n, src[live], dst[live], np.array([0]))
    backward = reachable_states(n, dst[live], src[live], np.flatnonzero(final > -np.inf))
    assert np.array_equal(connected_states(fsa), forward & backward)


def test_tropical_is_a_deprecated_alias_of_max():
    fsa = linear_acceptor(ALPHABET, "cab", -1.5)
    with pytest.warns(DeprecationWarning, match="max-plus"):
        old = log_total_weight(fsa, "tropical")
    assert old == log_total_weight(fsa, "max") == -1.5
