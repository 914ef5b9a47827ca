"""T9 and POS task builders and the ``varorder decode`` / ``varorder sample`` commands, on
generated data."""

from __future__ import annotations

import json
import math
import warnings

import numpy as np
import pytest
from click.testing import CliRunner

from varorder.cli.main import main
from varorder.exact import decode
from varorder.lm.arpa import write_arpa
from varorder.lm import ModifiedKneserNey
from varorder.tasks.pos_highorder import PosTask, TntEmissions
from varorder.tasks.t9 import T9Task, key_distance, num
from varorder.testing import oracle

from test_exact_qautomaton import enumerate_target, random_lm, random_target


def test_keypad_encoding_and_distance():
    assert num("dog") == num("fog") == "364"
    assert num("Wxyz's") == "999917"
    assert key_distance("1", "1") == 0.0
    assert key_distance("1", "9") == pytest.approx(math.sqrt(8))
    assert key_distance("2", "0") == pytest.approx(3.0)


def small_word_lm(order=3):
    sentences = ["the dog barked", "the fog lifted", "two dogs barked", "the dog ate", "a fog came",
                 "the dogs ate", "two dog barked", "a dog came"] * 3
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return ModifiedKneserNey(order=order).fit_sentences(sentences).model_


def test_t9_candidates_follow_the_noise_model():
    task = T9Task(small_word_lm(), k=64.0, max_candidates=None)
    ids, loglik = task.candidates("364")
    words = task.words(ids)
    assert set(words) == {"the", "dog", "fog", "two", "ate"}  # every 3-letter word
    for w, ll in zip(words, loglik):
        expected = -sum(math.log(64 * key_distance(o, d) + 1) for o, d in zip("364", num(w)))
        assert ll == pytest.approx(expected)
    capped = T9Task(task.lm, max_candidates=2).candidates("364")
    assert set(task.words(capped[0])) == {"dog", "fog"}
    with pytest.raises(ValueError, match="keypad"):
        task.candidates("36a")
    with pytest.raises(ValueError, match="length"):
        task.candidates("36463646")


def test_t9_decode_matches_brute_force():
    task = T9Task(small_word_lm(4), max_candidates=None)
    target = task.target(task.observe(["the", "dog", "barked"]))
    paths = enumerate_target(target)
    result = decode(target)
    assert result.log_p == pytest.approx(oracle.max_score(paths), abs=1e-9)
    assert task.words(result.sentence) == ["the", "dog", "barked"]


def test_tnt_emissions_known_and_unknown_words():
    train = [(["The", "dog", "runs"], ["DT", "NN", "VBZ"]), (["A", "cat", "runs"], ["DT", "NN", "VBZ"]),
             (["The", "runs"], ["DT", "NNS"]), (["walking", "dogs"], ["VBG", "NNS"])]
    emissions = TntEmissions().fit(train)
    known = emissions.log_likelihoods("runs")
    assert known == pytest.approx({"VBZ": math.log(2 / 2), "NNS": math.log(1 / 2)})
    unknown = emissions.log_likelihoods("talking")  # suffix "ing" was seen on VBG only among rare words
    assert max(unknown, key=unknown.get) == "VBG"
    assert all(np.isfinite(v) for v in unknown.values())


def test_pos_task_builds_targets_over_the_tag_lm():
    from varorder.io.tagged import TaggedSentence

    rng = np.random.default_rng(0)
    tags = ["DT", "NN", "VB", "JJ"]
    words = {"DT": ["the", "a"], "NN": ["dog", "cat", "run"], "VB": ["run", "eats"], "JJ": ["big", "red"]}
    train = []
    for _ in range(80):
        seq = ["DT"] + list(rng.choice(["JJ", "NN"], size=rng.integers(1, 3))) + ["VB"]
        train.append(TaggedSentence([str(rng.choice(words[t])) for t in seq], seq))
    task = PosTask.train(train, train[:5], order=4)
    target = task.target(["the", "big", "run", "zzzing"])
    result = decode(target)
    paths = enumerate_target(target)
    assert result.log_p == pytest.approx(oracle.max_score(paths), abs=1e-9)
    assert task.tags_of(result.sentence)[0] == "DT"
    # The three decoders are exact: same accuracy on the same sentences.
    from varorder.tasks.pos_highorder import evaluate_pos

    rows = {m: evaluate_pos(task, method=m) for m in ("adaptive", "full-wfsa", "full")}
    assert rows["adaptive"]["accuracy"] == rows["full-wfsa"]["accuracy"] == rows["full"]["accuracy"]
    assert all(r["sentences"] == 5 and r["finished"] for r in rows.values())
    assert rows["full-wfsa"]["wfsa_states"] > 0 and rows["full-wfsa"]["build_seconds"] > 0
    with pytest.raises(ValueError, match="method must be"):
        evaluate_pos(task, method="beam")


@pytest.fixture
def arpa_file(tmp_path):
    lm = random_lm(3, 4)
    path = tmp_path / "lm.arpa"
    write_arpa(lm, path)
    return lm, path


def _candidate_line(lm, target):
    words = lm.vocabulary.words
    return json.dumps([{words[int(s)]: float(l) for s, l in zip(sym, ll)}
                       for sym, ll in zip(target.symbols[: target.length], target.logliks[: target.length])])


def test_cli_decode_candidates_json(arpa_file, tmp_path):
    lm, path = arpa_file
    from varorder.lm.arpa import read_arpa

    lm = read_arpa(path)
    target = random_target(lm, 3, length=4, n_candidates=3)
    paths = enumerate_target(target)
    observations = tmp_path / "obs.jsonl"
    observations.write_text(_candidate_line(lm, target) + "\n")
    result = CliRunner().invoke(main, ["decode", str(path), "--task", "candidates", "--input", str(observations), "--json"])
    assert result.exit_code == 0, result.output
    record = json.loads(result.output.strip().splitlines()[-1])
    assert record["exact"] and record["log_p"] == pytest.approx(record["log_q"])
    assert record["log_p"] == pytest.approx(oracle.max_score(paths), abs=1e-6)


def test_cli_sample_and_errors(arpa_file, tmp_path):
    lm, path = arpa_file
    from varorder.lm.arpa import read_arpa

    lm = read_arpa(path)
    target = random_target(lm, 4, length=3, n_candidates=2)
    line = _candidate_line(lm, target)
    result = CliRunner().invoke(main, ["sample", str(path), "--task", "candidates", "--text", line,
                                       "--samples", "200", "--batch", "10", "--seed", "3", "--json"])
    assert result.exit_code == 0, result.output
    stats = json.loads(result.output.strip().splitlines()[-1])
    assert stats["accepted"] == 200 and stats["stopped_by"] == "samples"
    assert sum(s["count"] for s in stats["samples"]) <= 200
    text = CliRunner().invoke(main, ["sample", str(path), "--task", "candidates", "--text", line, "--samples", "20"])
    assert text.exit_code == 0 and "AR-100" in text.output
    bad = CliRunner().invoke(main, ["decode", str(path), "--task", "candidates", "--text", '[{"nosuchword": 0.0}]'])
    assert bad.exit_code != 0 and "not in the LM vocabulary" in bad.output
    missing = CliRunner().invoke(main, ["decode", str(path), "--task", "pos", "--text", "a b"])
    assert missing.exit_code != 0 and "--train" in missing.output


def test_cli_decode_and_sample_on_the_t9_and_pos_tasks(tmp_path):
    """Both shipped tasks from the command line, on generated data: the decoded line is the
    brute-force argmax of the task's own target."""
    lm = small_word_lm(4)
    lm_path = tmp_path / "words.arpa"
    write_arpa(lm, lm_path)
    from varorder.lm.arpa import read_arpa

    task = T9Task(read_arpa(lm_path), max_candidates=100)
    digits = " ".join(task.observe(["the", "dog", "barked"]))
    target = task.target(digits.split())
    best = max(enumerate_target(target), key=lambda item: item[1])
    out = CliRunner().invoke(main, ["decode", str(lm_path), "--task", "t9", "--text", digits, "--json"])
    assert out.exit_code == 0, out.output
    record = json.loads(out.output.strip().splitlines()[-1])
    assert record["exact"] and record["log_p"] == pytest.approx(best[1], abs=1e-6)
    sampled = CliRunner().invoke(main, ["sample", str(lm_path), "--task", "t9", "--text", digits, "--samples", "30",
                                        "--batch", "5", "--seed", "1", "--json"])
    assert sampled.exit_code == 0, sampled.output
    assert json.loads(sampled.output.strip().splitlines()[-1])["accepted"] == 30

    rng = np.random.default_rng(1)
    words = {"DT": ["the", "a"], "NN": ["dog", "cat", "run"], "VB": ["run", "eats"], "JJ": ["big", "red"]}
    lines, tag_lines = [], []
    for _ in range(60):
        seq = ["DT"] + list(rng.choice(["JJ", "NN"], size=rng.integers(1, 3))) + ["VB"]
        lines.extend(f"{rng.choice(words[t])}\t{t}" for t in seq)
        lines.append("")
        tag_lines.append(" ".join(seq))
    train = tmp_path / "train.tsv"
    train.write_text("\n".join(lines) + "\n")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        tag_lm = ModifiedKneserNey(order=3).fit_sentences(tag_lines).model_
    tag_path = tmp_path / "tags.arpa"
    write_arpa(tag_lm, tag_path)
    from varorder.io.tagged import read_tagged

    emissions = TntEmissions().fit([(s.words, s.tags) for s in read_tagged(train)])
    pos_task = PosTask(read_arpa(tag_path), emissions, [])
    pos_target = pos_task.target(["the", "big", "dog", "eats"])
    pos_best = max(enumerate_target(pos_target), key=lambda item: item[1])
    out = CliRunner().invoke(main, ["decode", str(tag_path), "--task", "pos", "--train", str(train),
                                    "--text", "the big dog eats", "--json"])
    assert out.exit_code == 0, out.output
    record = json.loads(out.output.strip().splitlines()[-1])
    assert record["exact"] and record["log_p"] == pytest.approx(pos_best[1], abs=1e-6)
    sampled = CliRunner().invoke(main, ["sample", str(tag_path), "--task", "pos", "--train", str(train),
                                        "--text", "the big dog eats", "--target-ar", "0.5", "--seed", "2"])
    assert sampled.exit_code == 0 and "AR-100" in sampled.output


def test_t9_noisy_typing_follows_the_noise_model():
    """Typos drawn by observe(rng=...) have the frequencies of eq. 9 (fixed-seed chi-square)."""
    task = T9Task(small_word_lm(), k=4.0)
    rng = np.random.default_rng(11)
    typed = "".join(task.observe(["dog"] * 4000, rng=rng))[::3]  # the first key of "dog": 3
    keys = "1234567890*#"
    weights = {o: 1.0 / (4.0 * key_distance(o, "3") + 1.0) for o in keys}
    total = sum(weights.values())
    counts = {o: typed.count(o) for o in keys}
    assert oracle.chi_square_pvalue(counts, {o: w / total for o, w in weights.items()}) > 1e-3
    assert task.observe(["dog"]) == ["364"]  # clean without a generator
    assert all(len(o) == 3 for o in task.observe(["dog", "fog"], rng=rng))


def _edit_distance(a: str, b: str) -> int:
    """Damerau–Levenshtein distance (insertions, deletions, substitutions, transpositions of
    adjacent letters, any edit sequence; Lowrance & Wagner 1975's dynamic programme): the
    brute-force oracle of edit_distances."""
    inf = len(a) + len(b)
    d = [[0] * (len(b) + 2) for _ in range(len(a) + 2)]
    d[0][0] = inf
    for i in range(len(a) + 1):
        d[i + 1][0], d[i + 1][1] = inf, i
    for j in range(len(b) + 1):
        d[0][j + 1], d[1][j + 1] = inf, j
    last_row = {}
    for i in range(1, len(a) + 1):
        last_col = 0
        for j in range(1, len(b) + 1):
            i1, j1 = last_row.get(b[j - 1], 0), last_col
            cost = 0 if a[i - 1] == b[j - 1] else 1
            if cost == 0:
                last_col = j
            d[i + 1][j + 1] = min(d[i][j] + cost, d[i + 1][j] + 1, d[i][j + 1] + 1,
                                  d[i1][j1] + (i - i1 - 1) + 1 + (j - j1 - 1))
        last_row[a[i - 1]] = i
    return d[len(a) + 1][len(b) + 1]


def test_spelling_candidates_are_the_words_within_two_edits():
    from varorder.tasks.spelling import edit_distances

    rng = np.random.default_rng(0)
    letters = "abcd"
    words = {"".join(rng.choice(list(letters), size=rng.integers(1, 6))) for _ in range(300)}
    for _ in range(40):
        token = "".join(rng.choice(list(letters), size=rng.integers(1, 6)))
        found = edit_distances(token, words, 2)
        expected = {w: _edit_distance(token, w) for w in words if _edit_distance(token, w) <= 2}
        assert found == expected


def test_spelling_decode_matches_brute_force():
    from varorder.tasks.spelling import SpellingTask

    sentences = ["the cat sat", "the cat ran", "a cat sat on the mat", "the rat sat", "a bat ran on the mat"] * 4
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        lm = ModifiedKneserNey(order=3).fit_sentences(sentences).model_
    task = SpellingTask(lm, cost=1.5)
    ids, logliks = task.candidates("cst")
    assert set(task.words(ids)) >= {"cat"} and logliks.max() == -1.5
    assert task.words(task.candidates("zzzzzz")[0]) == ["<unk>"]
    target = task.target("teh cat sta".split())
    paths = enumerate_target(target)
    result = decode(target)
    assert result.exact and result.log_p == pytest.approx(oracle.max_score(paths), abs=1e-9)
    assert task.words(result.sentence) == ["the", "cat", "sat"]
    words = task.corrupt(["sentence", "of", "words"] * 20, np.random.default_rng(1))
    assert any(w not in ("sentence", "of", "words") for w in words) and words[1] == "of"
