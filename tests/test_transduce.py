"""Alignment transducer (issue #11): lattices against brute-force enumeration, coverage,
gradients, the hybrid's per-step union, forced decoding's imputation, readers, CLI."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from varorder import lattice as lt
from varorder.eval.metrics import character_error_rate, edit_distance, exact_match
from varorder.testing.hostile import write_members
from varorder.testing.oracle import monotone_alignments
from varorder.transduce import AlignmentFeatureSpace, build_alignment_lattice, restrict_to_output
from varorder.transduce.model import AlignmentTransducer, bigram_viterbi_alignment, truncate_gradient
from _shared_data import SHARED_DATA

SHARED = SHARED_DATA / "cmudict"


# ---------------------------------------------------------------- independent reference model
def edges_to_moves(edges):
    """Moves (0 share, k advance k) of an alignment given as (output, input) edges."""
    by_output = {}
    for i, j in edges:
        by_output.setdefault(i, []).append(j)
    moves, last = [], 0
    for i in sorted(by_output):
        inputs = sorted(by_output[i])
        if inputs[0] == last:
            assert len(inputs) == 1
            moves.append(0)
        else:
            assert inputs[0] == last + 1 and inputs == list(range(inputs[0], inputs[-1] + 1))
            moves.append(len(inputs))
        last = inputs[-1]
    return tuple(moves)


def reference_letter_features(fs: AlignmentFeatureSpace, history, y):
    """Indices fired by letter (or END) y after the BOS-padded ``history``: the n-gram, then (backoff) orders 1 … n − 1."""
    w = fs.order - 1
    fired = [fs.exact_index(0, fs.letter_code(history[len(history) - w:], y))]
    if fs.backoff:
        fired += [fs.exact_index(fs.backoff_kind(False, k), fs.letter_code(history[len(history) - k + 1:], y))
                  for k in range(1, fs.order)]
    return fired


def reference_edge_features(fs: AlignmentFeatureSpace, window, e):
    """Indices fired by edge e after the BOS-padded edge ``window``."""
    w = fs.order - 1
    fired = [fs.exact_index(1, fs.edge_code(window[len(window) - w:], e))]
    if fs.edge_unigrams:
        fired.append(fs.exact_index(2, e))
    if fs.backoff:
        fired += [fs.exact_index(fs.backoff_kind(True, k), fs.edge_code(window[len(window) - k + 1:], e))
                  for k in range(1, fs.order)]
    return fired


def reference_features(fs: AlignmentFeatureSpace, x, letters, moves):
    """Weight indices fired by (y, z) with whole-history features, written from the definitions."""
    V, E, w = fs.num_letters, fs.num_phonemes * fs.num_letters, fs.order - 1
    fired = []
    history = [V] * w  # BOS
    for y in list(letters) + [V]:
        fired += reference_letter_features(fs, history, y)
        history.append(y)
    edges, j = [], 0
    for y, m in zip(letters, moves):
        if m == 0:
            edges.append(fs.edge_symbol(x[j - 1], y))
        else:
            for p in range(j + 1, j + m + 1):
                edges.append(fs.edge_symbol(x[p - 1], y))
            j += m
    assert j == len(x)
    window = [E] * w
    for e in edges:
        fired += reference_edge_features(fs, window, e)
        window.append(e)
    return fired


def brute_force(fs, x, theta, max_length, letters=None):
    """{(letters, moves): score} over every output of length ≤ max_length (or the given one) and alignment."""
    out = {}
    lengths = [len(letters)] if letters is not None else range(1, max_length + 1)
    for L in lengths:
        alignments = [edges_to_moves(a) for a in monotone_alignments(L, len(x), fs.max_advance)]
        outputs = [tuple(letters)] if letters is not None else itertools.product(range(fs.num_letters), repeat=L)
        for y in outputs:
            for moves in alignments:
                out[(tuple(y), moves)] = float(sum(theta[k] for k in reference_features(fs, x, y, moves)))
    return out


def log_sum(values):
    values = np.array(list(values))
    top = values.max()
    return float(top + np.log(np.exp(values - top).sum()))


def expected_reference(fs, x, scored):
    log_z = log_sum(scored.values())
    expected = np.zeros(fs.size)
    for (y, moves), s in scored.items():
        np.add.at(expected, reference_features(fs, x, y, moves), np.exp(s - log_z))
    return log_z, expected


def expected_lattice(al, lattice=None):
    lattice = al.lattice if lattice is None else lattice
    idx, val = al.expected_features(lt.marginals(lattice)[1])
    return np.bincount(idx, weights=val, minlength=al.features.size)


def lattice_paths(lattice_obj, al):
    """(letters, moves) of every finite path (via k-best with k above the path count)."""
    arcs, scores = lt.kbest_arcs(lattice_obj, 4000)
    assert scores[-1] == -np.inf, "k too small to list every path"
    paths = set()
    for row, s in zip(arcs, scores):
        if s > -np.inf:
            y, m = al.decode_arcs(row)
            paths.add((tuple(y), tuple(m)))
    return paths


# (V, L′, order, M, seed); the seed's low bits also pick the optional feature blocks
small = st.tuples(st.integers(1, 2), st.integers(1, 3), st.integers(2, 3), st.integers(1, 2), st.integers(0, 10**6))


def space_and_input(V, Lp, order, M, seed):
    fs = AlignmentFeatureSpace(V, 2, order=order, max_advance=M, hash_bits=18, edge_unigrams=bool(seed & 1),
                               backoff=bool(seed & 2))
    assert not fs.hashed
    rng = np.random.default_rng(seed)
    return fs, rng.integers(0, 2, size=Lp), rng.normal(size=fs.size)


# ---------------------------------------------------------------- alignments
def test_enumerated_alignments_satisfy_the_definition_and_match_move_sequences():
    for L, Lp in itertools.product(range(1, 5), range(1, 5)):
        found = monotone_alignments(L, Lp)
        for edges in found:
            assert {i for i, _ in edges} == set(range(1, L + 1)) and {j for _, j in edges} == set(range(1, Lp + 1))
            assert not any(a < c and b > d for a, b in edges for c, d in edges)
        # move sequences are a bijection onto these alignments
        moves = {edges_to_moves(e) for e in found}
        assert len(moves) == len(found)
    assert len(monotone_alignments(2, 2)) == 1 and len(monotone_alignments(2, 3)) == 2


@settings(max_examples=12, deadline=None)
@given(small)
def test_target_lattice_lists_every_alignment_of_the_gold_once(params):
    V, Lp, order, M, seed = params
    fs, x, theta = space_and_input(V, Lp, order, M, seed)
    rng = np.random.default_rng(seed + 1)
    for L in range(1, 5):
        y = rng.integers(0, V, size=L)
        al = build_alignment_lattice(x, theta, fs, 10_000, max_length=L, clamp=y)
        expected = {(tuple(y), edges_to_moves(a)) for a in monotone_alignments(L, Lp, M)}
        if not expected:
            assert lt.log_partition(al.lattice) == -np.inf
            continue
        assert lattice_paths(al.lattice, al) == expected


# ---------------------------------------------------------------- exactness with B large
@settings(max_examples=10, deadline=None)
@given(small, st.sampled_from(["rcms", "beam"]))
def test_model_and_target_lattices_equal_brute_force_when_b_holds_everything(params, selection):
    V, Lp, order, M, seed = params
    fs, x, theta = space_and_input(V, Lp, order, M, seed)
    Lmax = 3
    model = build_alignment_lattice(x, theta, fs, 10_000, selection=selection, max_length=Lmax)
    scored = brute_force(fs, x, theta, Lmax)
    log_z, expected = expected_reference(fs, x, scored)
    assert lt.log_partition(model.lattice) == pytest.approx(log_z, abs=1e-9)
    np.testing.assert_allclose(expected_lattice(model), expected, atol=1e-9)
    y = np.random.default_rng(seed).integers(0, V, size=2)
    if not monotone_alignments(2, Lp, M):
        return
    target = build_alignment_lattice(x, theta, fs, 10_000, selection=selection, max_length=Lmax, clamp=y)
    log_zt, expected_t = expected_reference(fs, x, brute_force(fs, x, theta, Lmax, letters=y))
    assert lt.log_partition(target.lattice) == pytest.approx(log_zt, abs=1e-9)
    np.testing.assert_allclose(expected_lattice(target), expected_t, atol=1e-9)
    # the restriction of the model lattice to y is the same target distribution
    restricted = restrict_to_output(model, y)
    assert lt.log_partition(restricted) == pytest.approx(log_zt, abs=1e-9)
    np.testing.assert_allclose(expected_lattice(model, restricted), expected_t, atol=1e-9)


@pytest.mark.parametrize("selection", ["rcms", "beam"])
@pytest.mark.parametrize("unigrams", [False, True])
def test_backoff_lattices_equal_brute_force(selection, unigrams):
    fs = AlignmentFeatureSpace(2, 2, order=3, max_advance=2, hash_bits=18, edge_unigrams=unigrams, backoff=True)
    assert not fs.hashed and fs.arc_features == 1 + 2 * 2 + 3 * 2
    rng = np.random.default_rng(11)
    x, theta, y = np.array([0, 1, 1]), rng.normal(size=fs.size), np.array([1, 0])
    model = build_alignment_lattice(x, theta, fs, 10_000, selection=selection, max_length=3)
    log_z, expected = expected_reference(fs, x, brute_force(fs, x, theta, 3))
    assert lt.log_partition(model.lattice) == pytest.approx(log_z, abs=1e-9)
    np.testing.assert_allclose(expected_lattice(model), expected, atol=1e-9)
    target = build_alignment_lattice(x, theta, fs, 10_000, selection=selection, max_length=3, clamp=y)
    log_zt, expected_t = expected_reference(fs, x, brute_force(fs, x, theta, 3, letters=y))
    assert lt.log_partition(target.lattice) == pytest.approx(log_zt, abs=1e-9)
    np.testing.assert_allclose(expected_lattice(target), expected_t, atol=1e-9)


def test_bigram_exact_lattice_equals_brute_force():
    fs = AlignmentFeatureSpace(2, 2, order=2, max_advance=2, hash_bits=12)
    rng = np.random.default_rng(3)
    x, theta = np.array([0, 1, 1]), rng.normal(size=fs.size)
    model = build_alignment_lattice(x, theta, fs, 1, max_length=3, bigram_exact=True)
    log_z, expected = expected_reference(fs, x, brute_force(fs, x, theta, 3))
    assert lt.log_partition(model.lattice) == pytest.approx(log_z, abs=1e-9)
    np.testing.assert_allclose(expected_lattice(model), expected, atol=1e-9)


# ---------------------------------------------------------------- coverage
@settings(max_examples=12, deadline=None)
@given(small, st.integers(1, 3))
def test_rcms_keeps_every_alignment_of_the_gold_for_any_b(params, B):
    V, Lp, order, M, seed = params
    fs, x, theta = space_and_input(V, Lp, order, M, seed)
    rng = np.random.default_rng(seed + 7)
    L = int(rng.integers(1, 5))
    y = rng.integers(0, V, size=L)
    alignments = [edges_to_moves(a) for a in monotone_alignments(L, Lp, M)]
    model = build_alignment_lattice(x, theta, fs, B, max_length=L)
    target = build_alignment_lattice(x, theta, fs, B, max_length=L, clamp=y)
    assert lattice_paths(target.lattice, target) == {(tuple(y), m) for m in alignments}
    for moves in alignments:
        assert lt.log_partition(restrict_to_output(model, y, moves)) > -np.inf


def test_beam_loses_alignments_that_rcms_keeps():
    fs = AlignmentFeatureSpace(2, 2, order=3, max_advance=2, hash_bits=16)
    rng = np.random.default_rng(0)
    x, theta, y = np.array([0, 1, 0, 1]), rng.normal(size=fs.size), np.array([1, 0, 1, 1])
    beam = build_alignment_lattice(x, theta, fs, 1, selection="beam", max_length=4, clamp=y)
    rcms = build_alignment_lattice(x, theta, fs, 1, max_length=4, clamp=y)
    assert len(lattice_paths(beam.lattice, beam)) < len(lattice_paths(rcms.lattice, rcms))


# ---------------------------------------------------------------- gradient
@pytest.mark.parametrize("method, unigrams, backoff, hash_bits", [
    ("rcms", False, False, 16), ("hybrid", False, False, 16), ("target", False, False, 16),
    ("forced", False, False, 16), ("rcms", True, False, 16), ("rcms", True, True, 16), ("hybrid", True, True, 10)])
def test_gradient_matches_finite_differences(method, unigrams, backoff, hash_bits):
    inputs = [["a", "b", "b"], ["b", "a"], ["a"]]
    outputs = ["xyz", "yx", "xx"]
    model = AlignmentTransducer(method=method, num_contexts=2, order=3, max_advance=2, hash_bits=hash_bits, epochs=0,
                                bigram_epochs=0, edge_unigrams=unigrams, backoff=backoff).fit(inputs, outputs)
    assert model.features_.hashed == (hash_bits == 10)
    rng = np.random.default_rng(1)
    model.weights_ = rng.normal(size=model.weights_.size) * 0.5
    x, y = model.codec_.encode_input(inputs[0]), model.codec_.encode_output(outputs[0])
    moves = np.array([1, 1, 1]) if method == "forced" else None
    ll, idx, val, _ = model.example_gradient(x, y, moves)
    gradient = np.bincount(idx, weights=val, minlength=model.weights_.size)
    direction = np.zeros_like(gradient)
    touched = np.flatnonzero(gradient)
    direction[touched] = rng.normal(size=touched.size)
    base = model.weights_.copy()
    eps = 1e-6
    values = []
    for sign in (1, -1):
        model.weights_ = base + sign * eps * direction
        values.append(model.example_gradient(x, y, moves)[0])
    model.weights_ = base
    numeric = (values[0] - values[1]) / (2 * eps)
    assert np.isfinite(ll)
    assert -gradient @ direction == pytest.approx(numeric, rel=1e-5, abs=1e-6)


# ---------------------------------------------------------------- hybrid and forced decoding
def reference_score(fs, x, theta, letters, moves):
    """Score of a (partial) path with whole-history features, without the end symbol."""
    V, E, w = fs.num_letters, fs.num_phonemes * fs.num_letters, fs.order - 1
    total, history, window, j = 0.0, [V] * w, [E] * w, 0
    for y, m in zip(letters, moves):
        total += sum(theta[k] for k in reference_letter_features(fs, history, y))
        history.append(y)
        phonemes = [j] if m == 0 else list(range(j + 1, j + m + 1))
        j = phonemes[-1]
        for p in phonemes:
            e = fs.edge_symbol(x[p - 1], y)
            total += sum(theta[k] for k in reference_edge_features(fs, window, e))
            window.append(e)
    return total, j


def test_hybrid_keeps_the_union_of_model_and_target_beams_at_every_step():
    fs = AlignmentFeatureSpace(2, 4, order=3, max_advance=2, hash_bits=20)
    rng = np.random.default_rng(5)
    # distinct phonemes: no two prefixes tie (ties would be broken in an order the test does not model)
    x, theta, gold = np.array([0, 1, 2, 3]), rng.normal(size=fs.size), np.array([1, 1, 0, 1, 0])
    B, Lmax = 3, 5
    al = build_alignment_lattice(x, theta, fs, B, selection="beam", max_length=Lmax, gold_letters=gold, extra_gold=B)
    lat = al.lattice
    # the prefix of every beam node (one incoming arc each)
    prefix = {0: ((), ())}
    for v in range(1, lat.num_nodes):
        if al.node_is_end[v]:
            continue
        ins = lat.in_arcs[lat.in_offsets[v]:lat.in_offsets[v + 1]]
        assert ins.size == 1
        a = ins[0]
        y, m = prefix[lat.arc_source[a]]
        lab = lat.arc_label[a]
        prefix[v] = (y + (lab // fs.num_moves,), m + (lab % fs.num_moves,))
    beam, grew = [((), ())], False
    for i in range(1, Lmax + 1):
        cands = []
        for y, m in beam:
            _, j = reference_score(fs, x, theta, y, m)
            single = not m or m[-1] <= 1
            for letter in range(fs.num_letters):
                for move in range(fs.num_moves):
                    if move == 0 and (j == 0 or not single):
                        continue
                    j2 = j if move == 0 else j + move
                    if j2 > len(x) or len(x) - j2 > fs.max_advance * (Lmax - i):
                        continue
                    cand = (y + (letter,), m + (move,))
                    cands.append((reference_score(fs, x, theta, *cand)[0], cand))
        cands.sort(key=lambda t: -t[0])
        model_top = [c for _, c in cands[:B]]
        gold_top = [c for _, c in cands if list(c[0]) == list(gold[:i])][:B]
        beam = list(dict.fromkeys(model_top + gold_top))
        grew |= len(beam) > B
        kept = {prefix[v] for v in prefix if v and lat.node_position[v] == i}
        assert kept == set(beam), f"position {i}"
    assert grew, "the gold beam never added anything: the test would not see a missing union"


def test_forced_decoding_imputes_the_exact_bigram_viterbi_alignment():
    fs = AlignmentFeatureSpace(2, 3, order=2, max_advance=2, hash_bits=14)
    rng = np.random.default_rng(11)
    for _ in range(8):
        theta = rng.normal(size=fs.size)
        x = rng.integers(0, 3, size=int(rng.integers(1, 5)))
        y = rng.integers(0, 2, size=int(rng.integers(1, 5)))
        scored = brute_force(fs, x, theta, len(y), letters=y)
        imputed = bigram_viterbi_alignment(x, y, theta, fs)
        if not scored:
            assert imputed is None
            continue
        # exact: the imputed alignment scores the maximum (ties between alignments may go either way)
        assert scored[(tuple(y), tuple(imputed))] == pytest.approx(max(scored.values()), abs=1e-9)


# ---------------------------------------------------------------- training, prediction, files
def test_training_learns_a_toy_transduction_and_round_trips(tmp_path):
    table = {"a": "x", "b": "yy", "c": "z"}
    rng = np.random.default_rng(0)
    inputs = [list(rng.choice(list(table), size=int(rng.integers(1, 4)))) for _ in range(30)]
    outputs = ["".join(table[p] for p in x) for x in inputs]
    model = AlignmentTransducer(method="rcms", num_contexts=3, order=3, max_advance=2, hash_bits=16, epochs=6)
    model.fit(inputs, outputs)
    predictions = model.predict(inputs)
    assert exact_match(predictions, outputs) > 0.6  # untrained weights get none right
    assert model.history_[-1]["train_log_likelihood"] > model.history_[0]["train_log_likelihood"]
    assert model.context_length_trace_ == [] or all(np.isfinite(v) for _, v in model.context_length_trace_)
    path = tmp_path / "m.npz"
    model.save(path)
    again = AlignmentTransducer.load(path)
    np.testing.assert_array_equal(again.weights_, model.weights_)
    assert again.predict(inputs) == predictions
    stored = dict(np.load(path))
    assert stored["weight_index"].size == np.count_nonzero(model.weights_) < model.weights_.size
    size = model.weights_.size
    for name, damage in (("weight_value", lambda a: a[:-1]), ("weight_index", lambda a: a[::-1].copy()),
                         ("weight_index", lambda a: a + size), ("weight_value", lambda a: a * np.nan),
                         ("weight_index", lambda a: a.astype(np.float64))):
        broken = dict(stored)
        broken[name] = damage(broken[name])
        write_members(tmp_path / "bad.npz", broken)
        with pytest.raises(ValueError, match="bad.npz"):
            AlignmentTransducer.load(tmp_path / "bad.npz")
    # a file of the earlier dense layout still loads
    meta = json.loads(stored["__meta__"].tobytes())
    del meta["state"]["weights"]
    dense = {"__meta__": np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8), "weights": model.weights_}
    write_members(tmp_path / "dense.npz", dense)
    assert AlignmentTransducer.load(tmp_path / "dense.npz").predict(inputs) == predictions


def test_select_by_model_gets_no_signal_without_the_gold_on_its_beam():
    inputs, outputs = [["a", "b"]] * 3, ["qrst"] * 3
    model = AlignmentTransducer(method="model", num_contexts=1, order=2, max_advance=2, hash_bits=12, epochs=1)
    model.fit(inputs + [["b"]], outputs + ["z"])
    assert model.history_[0]["no_signal"] >= 3


def test_metrics():
    assert edit_distance("kitten", "sitting") == 3
    assert character_error_rate(["", "ab"], ["abc", "ab"]) == pytest.approx(3 / 5)
    assert character_error_rate([""], ["abc"]) == 1.0
    assert exact_match(["a", "b"], ["a", "c"]) == 0.5


def test_readers(tmp_path):
    from varorder.io.cmudict import read_cmudict, read_transduction_pairs

    d = tmp_path / "dict"
    d.write_text(";;; comment\nread R IY1 D\nread(2) R EH1 D # past\n\nO'Neil OW0 N IY1 L\n")
    inputs, outputs = read_cmudict(d)
    assert outputs == ["read", "read", "o'neil"] and inputs[1] == ["R", "EH", "D"]
    assert read_transduction_pairs(d)[1] == outputs
    p = tmp_path / "pairs.tsv"
    p.write_text("a b\txy\n")
    assert read_transduction_pairs(p) == ([["a", "b"]], ["xy"])
    (tmp_path / "bad").write_text("a b\txy\nonly\n")
    with pytest.raises(ValueError, match="bad:2"):
        read_transduction_pairs(tmp_path / "bad", "pairs")
    (tmp_path / "bad2").write_text("word\n")
    with pytest.raises(ValueError, match="bad2:1"):
        read_cmudict(tmp_path / "bad2")


def test_cli_train_apply_eval(tmp_path):
    from click.testing import CliRunner

    from varorder.cli.transduce import COMMAND

    data = tmp_path / "train.tsv"
    data.write_text("".join(f"{x}\t{y}\n" for x, y in [("a b", "xyy"), ("b a", "yyx"), ("a", "x"), ("b", "yy")] * 3))
    runner = CliRunner()
    model = tmp_path / "m.npz"
    result = runner.invoke(COMMAND, ["train", str(data), "-o", str(model), "--size", "3", "--order", "3",
                                     "--epochs", "3", "--hash-bits", "14", "--backoff", "--unigrams",
                                     "--truncation", "0.3"])
    assert result.exit_code == 0, result.output
    from varorder.transduce.model import AlignmentTransducer

    loaded = AlignmentTransducer.load(model)
    assert loaded.backoff and loaded.edge_unigrams and loaded.options.truncation == 0.3
    out = tmp_path / "out.tsv"
    result = runner.invoke(COMMAND, ["apply", str(model), str(data), "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert len(out.read_text().splitlines()) == 12
    result = runner.invoke(COMMAND, ["eval", str(model), str(data)])
    assert result.exit_code == 0, result.output
    scores = json.loads(result.output.strip().splitlines()[-1])
    assert 0 <= scores["exact_match"] <= 1 and scores["words"] == 12
    result = runner.invoke(COMMAND, ["train", str(data), "-o", str(model), "--size", "0"])
    assert result.exit_code != 0


@pytest.mark.shared_data
def test_cmudict_files_parse():
    if not SHARED.exists():
        pytest.skip("../shared/data/cmudict is absent")
    from varorder.io.cmudict import read_cmudict

    inputs, outputs = read_cmudict(SHARED / "cmudict.dev.dict.gz")
    assert len(inputs) == len(outputs) > 1000
    assert all(not any(ch.isdigit() for p in x for ch in p) for x in inputs[:2000])


def test_randomized_truncation_is_unbiased_and_zeroes_most_small_coordinates():
    values = np.array([0.3, -0.05, 0.002, -2.0, 1e-6, 0.1])
    threshold = 0.1
    np.testing.assert_array_equal(truncate_gradient(values, 0.0, None), values)
    rng = np.random.default_rng(0)
    draws = np.array([truncate_gradient(values, threshold, rng) for _ in range(20000)])
    large = np.abs(values) >= threshold
    assert np.all(draws[:, large] == values[large])
    small = draws[:, ~large]
    assert np.all(np.isin(np.abs(small), [0.0, threshold]))
    assert np.all(np.sign(small) * np.sign(values[~large]) >= 0)
    # each small coordinate survives with probability |g| / threshold: the mean equals g
    p = np.abs(values[~large]) / threshold
    standard_error = threshold * np.sqrt(p * (1 - p) / draws.shape[0])
    assert np.all(np.abs(small.mean(0) - values[~large]) <= 4 * standard_error + 1e-12)
    assert (small == 0).mean() > 0.5


def test_truncation_touches_fewer_weights_and_round_trips(tmp_path):
    inputs = [["a", "b"], ["b", "c"], ["c", "a", "b"], ["a"]]
    outputs = ["ab", "bcc", "cab", "a"]
    kwargs = dict(method="rcms", num_contexts=2, order=3, max_advance=2, hash_bits=16, epochs=2, seed=3)
    exact = AlignmentTransducer(**kwargs).fit(inputs, outputs)
    truncated = AlignmentTransducer(truncation=0.5, **kwargs).fit(inputs, outputs)
    assert np.count_nonzero(truncated.weights_) < np.count_nonzero(exact.weights_)
    truncated.save(tmp_path / "t.npz")
    assert AlignmentTransducer.load(tmp_path / "t.npz").options.truncation == 0.5
    with pytest.raises(ValueError, match="truncation"):
        AlignmentTransducer(truncation=-1.0, **kwargs).fit(inputs, outputs)


# ---------------------------------------------------------------- fast paths equal their plain definitions
@settings(max_examples=60, deadline=None)
@given(st.data())
def test_heap_selection_equals_the_stable_sort_scan(data):
    from varorder.transduce.lattice import _select

    n = data.draw(st.integers(0, 40))
    groups = data.draw(st.integers(1, 4))
    beam = data.draw(st.booleans())
    B = data.draw(st.integers(1, 5))
    extra_k = data.draw(st.integers(0, 4))
    # few distinct scores, so ties (broken by index) are common
    fwd = np.array(data.draw(st.lists(st.sampled_from([-np.inf, -2.0, -1.0, 0.0, 0.5]), min_size=n, max_size=n)))
    g_j = np.array(data.draw(st.lists(st.integers(0, groups - 1), min_size=n, max_size=n)), dtype=np.int64)
    gold = np.array(data.draw(st.lists(st.booleans(), min_size=n, max_size=n)), dtype=np.bool_)
    forced = np.array(data.draw(st.lists(st.booleans(), min_size=n, max_size=n)), dtype=np.bool_)
    expected = np.zeros(n, dtype=np.bool_)
    taken, per_group, extra = 0, np.zeros(groups, int), 0
    for g in np.argsort(-fwd, kind="mergesort"):  # the plain definition: scan a stable sort from the top
        if fwd[g] == -np.inf:
            break
        if beam and taken < B:
            expected[g], taken = True, taken + 1
        elif not beam and per_group[g_j[g]] < B:
            expected[g], per_group[g_j[g]] = True, per_group[g_j[g]] + 1
        if gold[g] and extra < extra_k:
            expected[g], extra = True, extra + 1
        if forced[g]:
            expected[g] = True
    # the selection hook of the engine's loop: classes z_i (one class for beam), flags gold / forced
    from varorder.engine.builder import FORCED
    from varorder.transduce.lattice import _GOLD_PREFIX, _Context
    ctx = _Context(*(0,) * len(_Context._fields))._replace(extra_k=extra_k)  # the hook reads ctx.extra_k only
    flags = np.where(gold, _GOLD_PREFIX, 0) | np.where(forced, FORCED, 0)
    got = np.zeros(n, dtype=np.bool_)
    _select(ctx, fwd.astype(np.float64), n, np.zeros(n, np.int64) if beam else g_j, flags.astype(np.int64),
            1 if beam else groups, B, got)
    np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("method, truncation", [("rcms", 0.0), ("hybrid", 0.0), ("forced", 0.0), ("rcms", 0.05)])
def test_accumulated_step_equals_the_step_on_the_dense_gradient(method, truncation):
    from varorder.models.optim import AdaGrad
    from varorder.transduce.model import _GradientAccumulator

    inputs, outputs = [["a", "b", "b"], ["b", "a"], ["a"]], ["xyz", "yx", "xx"]
    model = AlignmentTransducer(method=method, num_contexts=2, order=3, max_advance=2, hash_bits=10, epochs=0,
                                bigram_epochs=0).fit(inputs, outputs)
    rng = np.random.default_rng(3)
    model.weights_ = rng.normal(size=model.weights_.size) * 0.5
    moves = np.array([1, 1, 1]) if method == "forced" else None
    accumulate, dense = AdaGrad(0.2, 1e-4), AdaGrad(0.2, 1e-4)
    fast, slow = model.weights_.copy(), model.weights_.copy()
    gradient = _GradientAccumulator(fast.size)
    for step in range(3):  # the scratch table is cleared between examples
        x, y = model.codec_.encode_input(inputs[step]), model.codec_.encode_output(outputs[step])
        model.weights_ = fast
        _, _, terms = model._example_terms(x, y, moves if step == 0 else None)
        for lattice, marginals, sign in terms:
            gradient.add(lattice, marginals, sign)
        gradient.step(accumulate, fast, truncation, np.random.default_rng(step))
        model.weights_ = slow
        _, idx, val, _ = model.example_gradient(x, y, moves if step == 0 else None)
        summed = np.bincount(idx, weights=val, minlength=slow.size)
        touched = np.flatnonzero(summed)
        grad = truncate_gradient(summed[touched], truncation, np.random.default_rng(step))
        full = np.zeros(slow.size)
        full[touched] = grad
        dense.step(slow, full)
        np.testing.assert_array_equal(fast, slow)
        assert not gradient.dense.any() and not gradient.seen.any() and gradient.count == 0


def test_checkpoints_run_inside_passes_only():
    inputs, outputs = [["a", "b"], ["b"], ["a"], ["b", "b"], ["a", "a"]], ["xy", "y", "x", "yy", "xx"]
    seen = []
    model = AlignmentTransducer(method="rcms", num_contexts=2, order=2, max_advance=1, hash_bits=10, epochs=2)
    model.fit(inputs, outputs, checkpoint=lambda m, k: seen.append(k), checkpoint_every=2)
    assert seen == [2, 4, 6, 8]  # not 10: the end of a pass is the per-pass callback's


@pytest.mark.parametrize("method, truncation", [("rcms", 0.0), ("rcms", 0.3), ("forced", 0.0)])
def test_resumed_training_equals_one_uninterrupted_run(tmp_path, method, truncation):
    table = {"a": "x", "b": "yy", "c": "z"}
    rng = np.random.default_rng(1)
    inputs = [list(rng.choice(list(table), size=int(rng.integers(1, 4)))) for _ in range(12)]
    outputs = ["".join(table[p] for p in x) for x in inputs]
    params = dict(method=method, num_contexts=2, order=3, max_advance=2, hash_bits=12, truncation=truncation,
                  bigram_epochs=1, track_every=5, seed=4)
    straight = AlignmentTransducer(epochs=3, **params).fit(inputs, outputs)
    state = tmp_path / "state.npz"
    seen = []
    AlignmentTransducer(epochs=1, **params).fit(inputs, outputs, state_path=state)
    resumed = AlignmentTransducer(epochs=3, **params).fit(
        inputs, outputs, state_path=state, resume=True, checkpoint=lambda m, k: seen.append(k), checkpoint_every=5)
    np.testing.assert_array_equal(resumed.weights_, straight.weights_)
    assert [r["train_log_likelihood"] for r in resumed.history_] == [r["train_log_likelihood"] for r in straight.history_]
    assert resumed.context_length_trace_ == straight.context_length_trace_
    assert seen == [15, 20, 25, 30, 35]  # passes 2 and 3 only, the examples seen counted from the start
    # the state after pass 3 now sits in the file: resuming a finished run trains nothing more
    done = AlignmentTransducer(epochs=3, **params).fit(inputs, outputs, state_path=state, resume=True)
    np.testing.assert_array_equal(done.weights_, straight.weights_)
    with pytest.raises(ValueError, match="other training data"):
        AlignmentTransducer(epochs=3, **params).fit(inputs[:-1], outputs[:-1], state_path=state, resume=True)
    with pytest.raises(ValueError, match="other parameters"):
        AlignmentTransducer(epochs=3, **{**params, "seed": 5}).fit(inputs, outputs, state_path=state, resume=True)
    with pytest.raises(ValueError, match="passes done"):
        AlignmentTransducer(epochs=2, **params).fit(inputs, outputs, state_path=state, resume=True)
