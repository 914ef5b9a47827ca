"""Decipherment (Steinhardt & Liang 2015, §6): E-steps against brute-force enumeration,
RCMS/beam reaching the exact model, EM monotonicity, the cipher round trip, data I/O."""

from __future__ import annotations

import itertools
import json
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from varorder import lattice as lat
from varorder.decipher import (
    DecipherData,
    Decipherer,
    SubstitutionCipher,
    build_context_arrays,
    context_estep,
    fit_transitions,
    load,
    prepare,
    read_corpus_sentences,
    save,
)
from varorder.decipher.model import DecipherHMM, split_shards
from varorder.eval.metrics import mapping_accuracy
from varorder.lm import AbsoluteDiscounting, Vocabulary
from varorder.testing import oracle

WORDS = ["a", "b", "c", "d"]


def _corpus(seed=0, n=60):
    """Plaintext over 4 listed words and one unlisted word 'z' (an <unk> to the LM)."""
    rng = np.random.default_rng(seed)
    alphabet = WORDS + ["z"]
    probs = np.array([0.35, 0.25, 0.2, 0.12, 0.08])
    sentences = []
    for _ in range(n):
        length = int(rng.integers(1, 7))
        sentences.append([alphabet[i] for i in rng.choice(5, size=length, p=probs)])
    return sentences


def _reference(sentences, order, words=WORDS):
    """log p(w | history) straight from the LM, renormalised over the listed words and </s>."""
    vocab = Vocabulary(words)
    ids, lengths = vocab.encode_sentences(sentences)
    lm = AbsoluteDiscounting(order=order + 1, discount=0.25, smoothing=0.01).fit_ids(ids, lengths, vocab).model_
    K = len(words)
    lm_word = list(range(K)) + [vocab.eos_id]

    def log_transition(history, word):
        context = [vocab.bos_id] + list(history)
        raw = np.array([lm.logprob(context, w) for w in lm_word])
        return raw[word] - np.logaddexp.reduce(raw)

    return log_transition


def _emissions(L, seed):
    rng = np.random.default_rng(seed)
    return np.log(rng.dirichlet(np.ones(4), size=L))


@pytest.mark.parametrize("order", [1, 2])
def test_transition_tables_match_the_lm(order):
    sentences = _corpus()
    tables = fit_transitions(WORDS, sentences, order)
    reference = _reference(sentences, order)
    for history in itertools.chain([()], itertools.product(range(4), repeat=1), itertools.product(range(4), repeat=2)):
        for word in range(5):
            full = [4] + list(history)  # 4 = <s> as a context
            assert tables.logprob(full, word) == pytest.approx(reference(history, word), abs=1e-5)
        assert np.exp([tables.logprob([4] + list(history), w) for w in range(5)]).sum() == pytest.approx(1.0)


@pytest.mark.parametrize("order", [1, 2])
@pytest.mark.parametrize("L", [1, 2, 3, 5])
def test_rcms_with_every_context_is_the_exact_model(order, L):
    sentences = _corpus(seed=L)
    tables = fit_transitions(WORDS, sentences, order)
    emission = _emissions(L, seed=10 + L)
    log_z, node = oracle.ngram_hmm_posteriors(_reference(sentences, order), emission, 4)
    posterior, got_z, _ = context_estep(emission, tables, size=4 ** order, mode="rcms")
    assert got_z == pytest.approx(log_z, abs=1e-5)
    np.testing.assert_allclose(posterior, node, atol=1e-6)


@pytest.mark.parametrize("order", [1, 2])
def test_beam_keeping_every_prefix_is_the_exact_model(order):
    L = 4
    sentences = _corpus(seed=3)
    tables = fit_transitions(WORDS, sentences, order)
    emission = _emissions(L, seed=4)
    log_z, node = oracle.ngram_hmm_posteriors(_reference(sentences, order), emission, 4)
    posterior, got_z, _ = context_estep(emission, tables, size=4 ** L, mode="beam")
    assert got_z == pytest.approx(log_z, abs=1e-5)
    np.testing.assert_allclose(posterior, node, atol=1e-6)


_BEAM_TABLES = {}


@settings(max_examples=40, deadline=None)
@given(order=st.sampled_from([1, 2]), L=st.integers(1, 5), size=st.integers(1, 6), seed=st.integers(0, 2**31 - 1))
def test_pruned_beam_matches_explicit_prefix_beam_search(order, L, size, seed):
    """The beam E-step with pruning is select-by-model beam search (§4.1): the B best
    prefixes of B_{i-1} x Y under q^i, no recombination, posterior renormalised over the
    final beam's complete paths (the paper's coverage weight -inf)."""
    if order not in _BEAM_TABLES:
        sentences = _corpus(seed=13)
        _BEAM_TABLES[order] = (fit_transitions(WORDS, sentences, order), _reference(sentences, order))
    tables, reference = _BEAM_TABLES[order]
    emission = _emissions(L, seed=seed)
    log_z, node = oracle.ngram_beam_posteriors(reference, emission, 4, size)
    posterior, got_z, _ = context_estep(emission, tables, size=size, mode="beam")
    assert got_z == pytest.approx(log_z, abs=1e-6)
    np.testing.assert_allclose(posterior, node, atol=1e-7)
    np.testing.assert_allclose(posterior.sum(axis=1), 1.0)


def _unk_corpus(seed=0, n=60):
    return [[w if w != "z" else "<unk>" for w in s] for s in _corpus(seed=seed, n=n)]


@pytest.mark.parametrize("order", [1, 2])
def test_unk_as_hidden_word_matches_the_lm(order):
    """Lenient tasks: <unk> as the last listed word is hidden word K - 1 with the LM's
    own <unk> estimates, every conditional renormalised over the K words and </s>."""
    words = WORDS + ["<unk>"]
    sentences = _unk_corpus()
    tables = fit_transitions(words, sentences, order)
    reference = _reference(sentences, order, words)
    for history in itertools.chain([()], itertools.product(range(5), repeat=1), itertools.product(range(5), repeat=2)):
        full = [5] + list(history)  # 5 = <s> as a context
        for word in range(6):
            assert tables.logprob(full, word) == pytest.approx(reference(history, word), abs=1e-5)
        assert np.exp([tables.logprob(full, w) for w in range(6)]).sum() == pytest.approx(1.0)
    with pytest.raises(ValueError, match="<unk> except as its last word"):
        fit_transitions(["<unk>"] + WORDS, sentences, order)


def test_lenient_prepare_enciphers_unk_as_one_symbol(tmp_path):
    sentences = _corpus(seed=9, n=200)
    a = prepare(sentences, num_words=4, num_cipher=40, seed=4, max_unk_tokens=1, max_unk_share=0.25)
    b = prepare(sentences, num_words=4, num_cipher=40, seed=4, max_unk_tokens=1, max_unk_share=0.25)
    assert [c.tolist() for c in a.cipher] == [c.tolist() for c in b.cipher]
    assert a.words[-1] == "<unk>" and len(a.words) == 5 and sorted(a.cipher_key.key.tolist()) == list(range(5))
    for symbols, gold in zip(a.cipher, a.cipher_gold):
        assert [a.words[w] for w in a.cipher_key.decipher(symbols)] == gold
        assert gold.count("<unk>") <= 1 and gold.count("<unk>") <= 0.25 * len(gold)
    assert a.meta["cipher_unk_tokens"] == sum(g.count("<unk>") for g in a.cipher_gold) > 0
    assert a.unk_symbol == int(a.cipher_key.key[4]) == a.meta["unk_symbol"]
    flat, _ = a.cipher_flat()
    assert a.unk_symbol not in a.scored_symbols(flat).tolist()
    assert len(a.scored_symbols(flat)) == len(np.unique(flat)) - 1
    # every qualifying sentence: at most one out-of-list token making at most a quarter of it
    qualifying = [s for s in sentences if sum(w == "z" for w in s) <= min(1, 0.25 * len(s))]
    assert a.meta["qualifying_sentences"] == len(qualifying)
    save(a, tmp_path / "d")
    back = load(tmp_path / "d")
    assert back.words == a.words and back.unk_symbol == a.unk_symbol
    strict = prepare(sentences, num_words=4, num_cipher=20, seed=4)
    assert strict.unk_symbol is None and "<unk>" not in strict.words
    with pytest.raises(ValueError, match="max_unk_share"):
        prepare(sentences, num_words=4, num_cipher=20, max_unk_tokens=1, max_unk_share=1.5)


@pytest.mark.parametrize("inference,order", [("exact", 1), ("beam", 2)])
def test_lenient_accuracy_leaves_the_unk_symbol_out(inference, order):
    data = prepare(_corpus(seed=9, n=200), num_words=4, num_cipher=40, seed=4, max_unk_tokens=1)
    model = Decipherer(order=order, inference=inference, size=6, n_iter=3, init_noise=0.2, seed=0).fit(data)
    flat, _ = data.cipher_flat()
    scored = data.scored_symbols(flat)
    truth = data.cipher_key.inverse
    last = model.history_[-1]
    assert last["accuracy"] == pytest.approx(np.mean(model.mapping_[scored] == truth[scored]))
    assert last["unk_symbol_correct"] == bool(model.mapping_[data.unk_symbol] == 4)


def test_exact_estep_matches_brute_force():
    sentences = _corpus(seed=5)
    tables = fit_transitions(WORDS, sentences, 1)
    reference = _reference(sentences, 1)
    rng = np.random.default_rng(0)
    table = rng.dirichlet(np.ones(6), size=4)  # (K, C): 6 cipher symbols
    cipher = [rng.integers(0, 6, size=L) for L in (1, 3, 5, 2)]
    offsets = np.concatenate([[0], np.cumsum([len(c) for c in cipher])])
    model = DecipherHMM(tables, 6, inference="exact")
    model.emission_ = table
    shard = split_shards(np.concatenate(cipher), offsets, 1)[0]
    stats = model.expected_statistics(shard, model.shared_log_potentials(shard))
    counts = np.zeros((6, 4))
    total = 0.0
    for c in cipher:
        log_z, node = oracle.ngram_hmm_posteriors(reference, np.log(table[:, c].T), 4)
        total += log_z
        np.add.at(counts, c, node)
    assert stats.log_normalizer == pytest.approx(total, abs=1e-5)
    np.testing.assert_allclose(stats.shared.reshape(6, 4), counts, atol=1e-6)
    # the RCMS E-step with every context kept gives the same counts
    rcms = DecipherHMM(tables, 6, inference="rcms", size=4)
    rcms.emission_ = table
    again = rcms.expected_statistics(shard, rcms.shared_log_potentials(shard))
    np.testing.assert_allclose(again.shared, stats.shared, atol=1e-8)


@pytest.mark.parametrize("mode,order", [("rcms", 1), ("rcms", 2), ("beam", 2)])
def test_small_context_sets_are_consistent_lattices(mode, order):
    """With B < K^n every word sequence still has exactly one path (RCMS; beam drops some),
    the selection's forward scores are the engine's alphas, and the fused E-step equals
    the engine's lattice marginals."""
    L = 4
    sentences = _corpus(seed=7)
    tables = fit_transitions(WORDS, sentences, order)
    emission = _emissions(L, seed=8)
    built = build_context_arrays(emission, tables, size=2, mode=mode)
    paths = oracle.lattice_paths(built.lattice)
    labels = [tuple(built.lattice.arc_label[list(p)]) for p, _ in paths]
    assert len(set(labels)) == len(labels)
    if mode == "rcms":
        assert len(labels) == 4 ** L
    else:
        assert len(labels) <= 2 * 4
    np.testing.assert_allclose(built.forward, lat.alphas(built.lattice)[0], atol=1e-9)
    _, arc = lat.marginals(built.lattice)
    expected = np.zeros((L, 4))
    np.add.at(expected, (built.lattice.node_position[built.lattice.arc_target] - 1, built.lattice.arc_label), arc)
    posterior, log_z, _ = context_estep(emission, tables, size=2, mode=mode)
    np.testing.assert_allclose(posterior, expected, atol=1e-9)
    assert log_z == pytest.approx(lat.log_partition(built.lattice))


def _tiny_data(seed=0, n_cipher=25):
    sentences = _corpus(seed=seed, n=120)
    in_list = [s for s in sentences if "z" not in s]
    rng = np.random.default_rng(seed)
    key = SubstitutionCipher.random(4, rng)
    index = {w: i for i, w in enumerate(WORDS)}
    gold = in_list[:n_cipher]
    cipher = [key.encipher([index[w] for w in s]) for s in gold]
    plain = in_list[n_cipher:] + [s for s in sentences if "z" in s]
    plain = [[w if w in index else "<unk>" for w in s] for s in plain]
    return DecipherData(WORDS, plain, cipher, gold, key)


@pytest.mark.parametrize("inference,order,size", [("exact", 1, 1), ("rcms", 2, 16)])
def test_exact_em_never_decreases_the_penalised_likelihood(inference, order, size):
    data = _tiny_data()
    model = Decipherer(order=order, inference=inference, size=size, n_iter=8, init_noise=0.5, seed=1).fit(data)
    objectives = [h["objective"] for h in model.history_]
    assert np.all(np.diff(objectives) >= -1e-7 * np.abs(objectives[:-1])), objectives
    assert objectives[-1] > objectives[0]


def test_parallel_estep_equals_serial():
    data = _tiny_data(seed=2)
    serial = Decipherer(order=2, inference="rcms", size=3, n_iter=2, init_noise=0.3).fit(data)
    with ThreadPoolExecutor(2) as pool:
        parallel = Decipherer(order=2, inference="rcms", size=3, n_iter=2, init_noise=0.3, n_shards=3,
                              executor=pool).fit(data)
    np.testing.assert_allclose(parallel.emission_, serial.emission_, rtol=1e-10)
    assert [h["log_likelihood"] for h in parallel.history_] == pytest.approx([h["log_likelihood"] for h in serial.history_])


def test_cipher_round_trip_and_prepare_is_seeded():
    key = SubstitutionCipher.random(50, seed=3)
    words = np.random.default_rng(0).integers(0, 50, size=200)
    np.testing.assert_array_equal(key.decipher(key.encipher(words)), words)
    assert sorted(key.key.tolist()) == list(range(50))
    sentences = [s for s in _corpus(seed=9, n=200)]
    a = prepare(sentences, num_words=4, num_cipher=20, seed=4)
    b = prepare(sentences, num_words=4, num_cipher=20, seed=4)
    assert [c.tolist() for c in a.cipher] == [c.tolist() for c in b.cipher]
    for symbols, gold in zip(a.cipher, a.cipher_gold):
        assert [a.words[w] for w in a.cipher_key.decipher(symbols)] == gold
    assert a.meta["cipher_sentences"] == 20 and a.meta["plaintext_sentences"] == len(a.plaintext)
    assert all(w in a.words or w == "<unk>" for s in a.plaintext for w in s)


def test_save_load_round_trip_and_errors(tmp_path):
    data = prepare(_corpus(seed=9, n=200), num_words=4, num_cipher=20, seed=4)
    save(data, tmp_path / "d")
    back = load(tmp_path / "d")
    assert back.words == data.words and back.plaintext == data.plaintext
    assert [c.tolist() for c in back.cipher] == [c.tolist() for c in data.cipher]
    np.testing.assert_array_equal(back.cipher_key.key, data.cipher_key.key)
    (tmp_path / "d" / "cipher.txt").write_text("1 2\n3 x\n")
    with pytest.raises(ValueError, match=r"cipher.txt:2"):
        load(tmp_path / "d")
    with pytest.raises(ValueError, match="fewer than num_cipher"):
        prepare(_corpus(seed=9, n=20), num_words=4, num_cipher=500)


def test_mapping_accuracy_counts_distinct_symbols():
    truth = np.array([2, 0, 1, 3])
    decoded = np.array([2, 1, 1, 0])
    assert mapping_accuracy(decoded, truth, [0, 0, 0, 1, 2]) == pytest.approx(2 / 3)
    with pytest.raises(ValueError):
        mapping_accuracy(decoded, truth, [7])


def test_em_learns_a_tiny_cipher():
    """Plaintext from an asymmetric, nearly deterministic chain: its bigrams give the key away."""
    rng = np.random.default_rng(0)
    start = np.array([0.7, 0.1, 0.1, 0.1])
    transition = np.array([[0.05, 0.9, 0.03, 0.02], [0.6, 0.05, 0.3, 0.05], [0.1, 0.1, 0.1, 0.7],
                           [0.7, 0.1, 0.1, 0.1]])
    sentences = []
    for _ in range(200):
        state = rng.choice(4, p=start)
        sentence = []
        for _ in range(int(rng.integers(3, 8))):
            sentence.append(WORDS[state])
            state = rng.choice(4, p=transition[state])
        sentences.append(sentence)
    key = SubstitutionCipher.random(4, seed=1)
    index = {w: i for i, w in enumerate(WORDS)}
    cipher = [key.encipher([index[w] for w in s]) for s in sentences[:40]]
    data = DecipherData(WORDS, sentences[40:], cipher, sentences[:40], key)
    model = Decipherer(order=2, inference="rcms", size=4, n_iter=10, init_noise=0.1, seed=0).fit(data)
    accuracy = [h["accuracy"] for h in model.history_]
    assert accuracy[-1] == 1.0 and accuracy[0] < 1.0, accuracy


def _brown_tarball(path, lines):
    import io
    import tarfile

    with tarfile.open(path, "w:gz") as archive:
        for name, text in (("brown/README", "not a corpus file"), ("brown/ca01", lines)):
            payload = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(payload)
            archive.addfile(info, io.BytesIO(payload))


def test_brown_reader_drops_tags_and_reports_bad_tokens(tmp_path):
    _brown_tarball(tmp_path / "b.tar.gz", "\n\n\tThe/at Fulton/np-tl County/nn-tl said/vbd ./.\n\n\tIt/pps ran/vbd\n")
    assert read_corpus_sentences(tmp_path / "b.tar.gz") == [["the", "fulton", "county", "said", "."], ["it", "ran"]]
    _brown_tarball(tmp_path / "bad.tar.gz", "The/at Fulton\n")
    with pytest.raises(ValueError, match=r"brown/ca01:1: expected word/tag"):
        read_corpus_sentences(tmp_path / "bad.tar.gz")


def test_plain_text_reader_splits_sentences(tmp_path):
    path = tmp_path / "t.txt"
    path.write_text("\u201cWhat\u2019s the use of\ntalking?\u201d said Prince Andrew. Then,\n\nNew paragraph!\n")
    # a closing quote after ? keeps its attribution in the sentence; paragraphs always split
    assert read_corpus_sentences(path) == [['"', "what's", "the", "use", "of", "talking", "?", '"', "said", "prince",
                                            "andrew", "."], ["then", ","], ["new", "paragraph", "!"]]


def test_cli_prepare_train_eval(tmp_path):
    from click.testing import CliRunner

    from varorder.cli.main import main

    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n\n".join(" ".join(s) + "." for s in _corpus(seed=11, n=300)) + "\n")
    runner = CliRunner()
    result = runner.invoke(main, ["decipher", "prepare", str(corpus), "-o", str(tmp_path / "task"), "--num-words", "5",
                                  "--num-cipher", "30", "--seed", "1"])
    assert result.exit_code == 0, result.output
    assert json_meta(tmp_path / "task")["cipher_sentences"] == 30
    result = runner.invoke(main, ["decipher", "train", str(tmp_path / "task"), "-o", str(tmp_path / "run"),
                                  "--order", "2", "--inference", "rcms", "--size", "5", "--iterations", "2",
                                  "--workers", "2"])
    assert result.exit_code == 0, result.output
    table = (tmp_path / "run" / "table.tsv").read_text().splitlines()
    assert table[0].startswith("symbol\tword1\tp1") and len(table) > 1
    result = runner.invoke(main, ["decipher", "eval", str(tmp_path / "task"), str(tmp_path / "run" / "model.npz"),
                                  "--decoded", str(tmp_path / "decoded.txt")])
    assert result.exit_code == 0, result.output
    scores = json.loads(result.output)
    history = json.loads((tmp_path / "run" / "history.json").read_text())
    assert scores["mapping_accuracy"] == pytest.approx(history[-1]["accuracy"])
    assert len((tmp_path / "decoded.txt").read_text().splitlines()) == 30
    result = runner.invoke(main, ["decipher", "train", str(tmp_path / "task"), "-o", str(tmp_path / "bad"),
                                  "--order", "2", "--inference", "exact"])
    assert result.exit_code != 0 and "order=1" in result.output


def test_cli_lenient_prepare_and_eval_report_the_unk_symbol(tmp_path):
    from click.testing import CliRunner

    from varorder.cli.main import main

    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n\n".join(" ".join(s) + "." for s in _corpus(seed=11, n=300)) + "\n")
    runner = CliRunner()
    result = runner.invoke(main, ["decipher", "prepare", str(corpus), "-o", str(tmp_path / "task"), "--num-words", "4",
                                  "--num-cipher", "30", "--max-unk-tokens", "1", "--max-unk-share", "0.3"])
    assert result.exit_code == 0, result.output
    meta = json_meta(tmp_path / "task")
    assert meta["max_unk_tokens"] == 1 and meta["cipher_unk_tokens"] > 0
    result = runner.invoke(main, ["decipher", "train", str(tmp_path / "task"), "-o", str(tmp_path / "run"),
                                  "--order", "1", "--inference", "exact", "--iterations", "2"])
    assert result.exit_code == 0, result.output
    result = runner.invoke(main, ["decipher", "eval", str(tmp_path / "task"), str(tmp_path / "run" / "model.npz")])
    assert result.exit_code == 0, result.output
    scores = json.loads(result.output)
    history = json.loads((tmp_path / "run" / "history.json").read_text())
    assert scores["mapping_accuracy"] == pytest.approx(history[-1]["accuracy"])
    assert scores["unk_symbol"] == meta["unk_symbol"] and scores["unk_tokens"] == meta["cipher_unk_tokens"]
    assert scores["unk_symbol_correct"] == history[-1]["unk_symbol_correct"]
    result = runner.invoke(main, ["decipher", "prepare", str(corpus), "-o", str(tmp_path / "bad"),
                                  "--max-unk-share", "2"])
    assert result.exit_code != 0 and "max-unk-share" in result.output


def json_meta(folder):
    return json.loads((folder / "meta.json").read_text())


def test_cli_reports_a_missing_task_file(tmp_path):
    from click.testing import CliRunner

    from varorder.cli.main import main

    (tmp_path / "task").mkdir()
    result = CliRunner().invoke(main, ["decipher", "train", str(tmp_path / "task"), "-o", str(tmp_path / "run")])
    assert result.exit_code != 0 and "words.txt: missing" in result.output
