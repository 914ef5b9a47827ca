"""The suffix-array index (varorder.lm.suffix_index) against naive scanning of the corpus;
its on-disk format round-trips and refuses damaged files; the unbounded-order models of
varorder.lm.unbounded against brute-force counting."""

from __future__ import annotations

import json
import math
import tempfile
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from varorder.errors import FormatError
from varorder.lm import Vocabulary
from varorder.lm.suffix_index import build_index, build_index_from_ids, open_index, suffix_array
from varorder.lm.unbounded import InfiniGram, WittenBell

WORDS = ["a", "b", "c", "d"]


def _vocabulary(size: int) -> Vocabulary:
    return Vocabulary(WORDS[:size])  # ids: a b c d..., then <unk> <s> </s>


sentences_strategy = st.integers(1, 4).flatmap(
    lambda size: st.tuples(st.just(size), st.lists(st.lists(st.integers(0, size - 1), max_size=8), min_size=1,
                                                   max_size=6)))


def _stream(vocabulary: Vocabulary, sentences) -> list[int]:
    out = []
    for sentence in sentences:
        out += [vocabulary.bos_id] + list(sentence) + [vocabulary.eos_id]
    return out


def _build(folder, size, sentences, method="auto"):
    vocabulary = _vocabulary(size)
    ids = np.asarray([w for s in sentences for w in s], dtype=np.int64)
    lengths = np.asarray([len(s) for s in sentences], dtype=np.int64)
    return build_index_from_ids(vocabulary, ids, lengths, folder, method=method)


def _naive_count(stream, ngram) -> int:
    k = len(ngram)
    if k == 0:
        return len(stream)
    return sum(1 for i in range(len(stream) - k + 1) if stream[i:i + k] == list(ngram))


def _naive_next(stream, context) -> Counter:
    k = len(context)
    return Counter(stream[i + k] for i in range(len(stream) - k) if stream[i:i + k] == list(context))


@settings(max_examples=60, deadline=None)
@given(sentences_strategy, st.data())
def test_counts_and_next_tokens_equal_naive_scanning(case, data):
    size, sentences = case
    with tempfile.TemporaryDirectory() as folder:
        index = _build(folder, size, sentences)
        stream = _stream(index.vocabulary, sentences)
        V = len(index.vocabulary)
        assert index.num_tokens == len(stream)
        for _ in range(8):
            ngram = data.draw(st.lists(st.integers(0, V - 1), max_size=4))
            assert index.count(ngram) == _naive_count(stream, ngram)
            tokens, counts = index.ntd(ngram)
            assert dict(zip(tokens.tolist(), counts.tolist())) == _naive_next(stream, ngram)
            assert list(tokens) == sorted(tokens)
            m, count = index.longest_suffix(ngram)
            expected = max(k for k in range(len(ngram) + 1) if _naive_count(stream, ngram[len(ngram) - k:]) > 0)
            assert m == expected
            assert count == _naive_count(stream, ngram[len(ngram) - m:])
            places = index.locate(ngram, limit=None)
            assert len(places) == index.count(ngram)
            for place in places:
                assert stream[place.position:place.position + len(ngram)] == list(ngram)
                words = [index.vocabulary.bos_id] + list(sentences[place.document]) + [index.vocabulary.eos_id]
                inside = words[place.offset + 1:place.offset + 1 + len(ngram)]
                assert inside == list(ngram)[:len(inside)]  # a match may run on into the next document


@settings(max_examples=80, deadline=None)
@given(st.lists(st.integers(0, 300), max_size=60))
def test_divsufsort_equals_prefix_doubling_and_definition(values):
    tokens = np.asarray(values, dtype=np.uint16)
    expected = sorted(range(len(values)), key=lambda i: values[i:])
    assert suffix_array(tokens, method="numpy").tolist() == expected
    assert suffix_array(tokens).tolist() == expected


def test_words_round_trip_through_a_text_corpus(tmp_path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("the cat sat\nthe cat ran\n\na dog sat\n", encoding="utf-8")
    built = build_index(corpus, tmp_path / "idx")
    index = open_index(tmp_path / "idx")
    assert index.vocabulary.words == built.vocabulary.words
    assert np.array_equal(index.sa, built.sa) and np.array_equal(index.tokens, built.tokens)
    assert index.count("the cat".split()) == 2
    assert index.count(["<s>", "</s>"]) == 0  # read_corpus skips the empty line
    assert index.count(["zebra"]) == 0
    assert [index.document(d) for d in range(3)] == [["the", "cat", "sat"], ["the", "cat", "ran"], ["a", "dog", "sat"]]
    tokens, counts = index.ntd("the cat".split())
    assert sorted(index.vocabulary.decode(tokens)) == ["ran", "sat"] and counts.tolist() == [1, 1]
    assert index.longest_suffix("a big dog sat".split()) == (2, 1)
    occurrence = index.locate(["sat"], limit=None)
    assert sorted((o.document, o.offset) for o in occurrence) == [(0, 2), (2, 2)]


def test_locate_names_documents_and_offsets(tmp_path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("x y\ny z y\n", encoding="utf-8")
    index = build_index(corpus, tmp_path / "idx")
    assert sorted((o.document, o.offset) for o in index.locate(["y"], limit=None)) == [(0, 1), (1, 0), (1, 2)]
    assert len(index.locate(["y"], limit=2)) == 2


@pytest.fixture
def index_folder(tmp_path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("".join(f"w{i % 7} w{i % 3} w{i % 5}\n" for i in range(50)), encoding="utf-8")
    build_index(corpus, tmp_path / "idx")
    return tmp_path / "idx"


def _flip(path: Path, offset: int) -> None:
    data = bytearray(path.read_bytes())
    data[offset] ^= 0x5A
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("name", ["tokens.bin", "sa.bin", "docs.bin", "vocab.txt"])
def test_a_changed_byte_is_refused_naming_the_file(index_folder, name):
    _flip(index_folder / name, 3)
    with pytest.raises(FormatError, match=name):
        open_index(index_folder)


@pytest.mark.parametrize("name", ["tokens.bin", "sa.bin", "docs.bin", "vocab.txt"])
def test_truncated_or_missing_files_are_refused(index_folder, name):
    path = index_folder / name
    path.write_bytes(path.read_bytes()[:-2])
    with pytest.raises(FormatError, match=name):
        open_index(index_folder, verify=False)
    path.unlink()
    with pytest.raises(FormatError, match=name):
        open_index(index_folder, verify=False)


@pytest.mark.parametrize("edit", [
    lambda h: h.update(version=2), lambda h: h.update(format="other"), lambda h: h.pop("sa_dtype"),
    lambda h: h.update(num_tokens=h["num_tokens"] + 1), lambda h: h.update(token_dtype="float32"),
    lambda h: h["files"].pop("docs.bin")])
def test_edited_headers_are_refused(index_folder, edit):
    header_path = index_folder / "index.json"
    header = json.loads(header_path.read_text())
    edit(header)
    header_path.write_text(json.dumps(header))
    with pytest.raises(FormatError, match="index.json"):
        open_index(index_folder)


def test_garbage_header_and_missing_directory_are_refused(index_folder, tmp_path):
    (index_folder / "index.json").write_bytes(b"\xff\x00 not json")
    with pytest.raises(FormatError, match="index.json"):
        open_index(index_folder)
    (index_folder / "index.json").unlink()
    with pytest.raises(FormatError, match="no index.json"):
        open_index(index_folder)
    with pytest.raises(FormatError):
        open_index(tmp_path / "nowhere")


def test_damaged_positions_opened_unverified_give_a_format_error_not_a_crash(index_folder):
    sa_path = index_folder / "sa.bin"
    header = json.loads((index_folder / "index.json").read_text())
    sa = np.fromfile(sa_path, dtype=header["sa_dtype"])
    sa[len(sa) // 2:] = 10**8  # positions far outside the corpus
    sa.tofile(sa_path)
    with pytest.raises(FormatError, match="sa.bin"):
        open_index(index_folder)  # the CRC
    index = open_index(index_folder, verify=False)
    with pytest.raises(FormatError, match="sa.bin"):
        for word in ["w0", "w1", "w2", "w3", "w4", "w5", "w6", "</s>"]:
            index.count([word])
            index.ntd([word])


def test_a_permuted_suffix_array_with_its_crc_updated_is_refused(index_folder):
    header_path = index_folder / "index.json"
    header = json.loads(header_path.read_text())
    sa = np.fromfile(index_folder / "sa.bin", dtype=header["sa_dtype"])
    sa[0] = sa[1]
    sa.tofile(index_folder / "sa.bin")
    import zlib

    header["files"]["sa.bin"]["crc32"] = zlib.crc32((index_folder / "sa.bin").read_bytes())
    header_path.write_text(json.dumps(header))
    with pytest.raises(FormatError, match="permutation"):
        open_index(index_folder)


# --- unbounded-order models against brute force -------------------------------------------------


def _brute_witten_bell(stream, vocabulary, context, word) -> float:
    """Interpolated Witten–Bell over every suffix length, by counting in the stream."""
    V = len(vocabulary)
    unigram = Counter(t for t in stream if t != vocabulary.bos_id)
    types = len(unigram)
    total = sum(unigram.values())
    p = (unigram[word] + types / (V - 1)) / (total + types)
    for k in range(1, len(context) + 1):
        following = _naive_next(stream, context[len(context) - k:])
        if not following:
            break
        c = sum(following.values())
        p = (following[word] + len(following) * p) / (c + len(following))
    return p


@settings(max_examples=40, deadline=None)
@given(sentences_strategy, st.data())
def test_witten_bell_sums_to_one_and_equals_brute_force(case, data):
    size, sentences = case
    with tempfile.TemporaryDirectory() as folder:
        index = _build(folder, size, sentences)
        vocab = index.vocabulary
        stream = _stream(vocab, sentences)
        model = WittenBell(index)
        infinigram = InfiniGram(index)
        V = len(vocab)
        for _ in range(5):
            context = [vocab.bos_id] + data.draw(st.lists(st.sampled_from(
                [w for w in range(V) if w not in (vocab.bos_id, vocab.eos_id)]), max_size=5))
            p = model.distribution(context)
            assert p[vocab.bos_id] == 0.0
            assert math.isclose(p.sum(), 1.0, rel_tol=1e-12)
            for word in range(V):
                if word != vocab.bos_id:
                    assert math.isclose(p[word], _brute_witten_bell(stream, vocab, context, word), rel_tol=1e-12)
            q, effective_n = infinigram.distribution(context)
            m = effective_n - 1
            following = _naive_next(stream, context[len(context) - m:]) if m else \
                Counter(t for t in stream if t != vocab.bos_id)
            assert math.isclose(q.sum(), 1.0, rel_tol=1e-12)
            assert all(math.isclose(q[w], following[w] / sum(following.values())) for w in range(V))


@settings(max_examples=30, deadline=None)
@given(sentences_strategy, st.lists(st.lists(st.integers(0, 3), max_size=6), min_size=1, max_size=4))
def test_perplexity_equals_brute_force(case, test_sentences):
    size, sentences = case
    test_sentences = [[w % size for w in s] for s in test_sentences]
    with tempfile.TemporaryDirectory() as folder:
        index = _build(folder, size, sentences)
        vocab = index.vocabulary
        stream = _stream(vocab, sentences)
        report = WittenBell(index).sentence_logprobs([vocab.decode(s) for s in test_sentences])
        expected = []
        for sentence in test_sentences:
            words = [vocab.bos_id] + sentence + [vocab.eos_id]
            expected += [math.log(_brute_witten_bell(stream, vocab, words[:t], words[t])) for t in range(1, len(words))]
        assert np.allclose(report.logprob, expected, rtol=1e-12, atol=0)
        assert math.isclose(report.perplexity, math.exp(-np.mean(expected)), rel_tol=1e-12)


def test_cli_index_count_next_and_a_damaged_index(tmp_path):
    from click.testing import CliRunner

    from varorder.cli.main import main

    corpus = tmp_path / "corpus.txt"
    corpus.write_text("the cat sat\nthe cat ran\nthe dog sat\n", encoding="utf-8")
    runner = CliRunner()
    result = runner.invoke(main, ["lm", "index", str(corpus), "-o", str(tmp_path / "idx")])
    assert result.exit_code == 0, result.output
    result = runner.invoke(main, ["lm", "count", str(tmp_path / "idx"), "the", "cat"])
    assert result.exit_code == 0 and result.stdout.strip() == "2"
    result = runner.invoke(main, ["lm", "next", str(tmp_path / "idx"), "the"])
    assert result.exit_code == 0
    assert result.stdout.splitlines() == ["cat\t2\t0.666667", "dog\t1\t0.333333"]
    _flip(tmp_path / "idx" / "sa.bin", 0)
    result = runner.invoke(main, ["lm", "count", str(tmp_path / "idx"), "the"])
    assert result.exit_code == 1 and "sa.bin" in result.output and "Traceback" not in result.output


@settings(max_examples=25, deadline=None)
@given(sentences_strategy, st.integers(1, 3), st.data())
def test_witten_bell_continuing_a_fixed_order_model(case, order, data):
    from varorder.lm import AdditiveSmoothing

    size, sentences = case
    with tempfile.TemporaryDirectory() as folder:
        vocabulary = _vocabulary(size)
        ids = np.asarray([w for s in sentences for w in s], dtype=np.int64)
        lengths = np.asarray([len(s) for s in sentences], dtype=np.int64)
        index = build_index_from_ids(vocabulary, ids, lengths, folder)
        base = AdditiveSmoothing(order=order, alpha=0.5).fit_ids(ids.astype(np.int32), lengths, vocabulary).model_
        stream = _stream(vocabulary, sentences)
        model = WittenBell(index, base=base)
        words = [w for w in range(len(vocabulary)) if w not in (vocabulary.bos_id, vocabulary.eos_id)]
        tests = [data.draw(st.lists(st.sampled_from(words), max_size=5)) for _ in range(3)]
        report = model.sentence_logprobs([vocabulary.decode(s) for s in tests])
        position = 0
        for sentence in tests:
            full = [vocabulary.bos_id] + sentence + [vocabulary.eos_id]
            for t in range(1, len(full)):
                context = full[:t]
                p = model.distribution(context)
                assert math.isclose(p.sum(), 1.0, rel_tol=1e-5)  # the base stores float32 values
                base_p = 10.0 ** base.next_word_log10probs(vocabulary.decode(context[1:]))
                expected = base_p[full[t]]
                for k in range(order, len(context) + 1):
                    following = _naive_next(stream, context[len(context) - k:])
                    if not following:
                        break
                    c = sum(following.values())
                    expected = (following[full[t]] + len(following) * expected) / (c + len(following))
                assert math.isclose(p[full[t]], expected, rel_tol=1e-9)
                assert math.isclose(report.logprob[position], math.log(expected), rel_tol=1e-6, abs_tol=1e-9)
                position += 1


# --- building in bounded memory: shards sorted by their whole continuation, then merged -------

# sentences drawn from a few templates, so that long passages repeat and suffixes compared
# across shards share prefixes longer than any shard
repetitive_strategy = st.integers(1, 3).flatmap(
    lambda size: st.tuples(st.just(size), st.lists(st.lists(st.integers(0, size - 1), max_size=6), min_size=1,
                                                   max_size=3).flatmap(
        lambda templates: st.lists(st.sampled_from(templates), min_size=1, max_size=8))))


def _files(folder: Path) -> dict:
    return {name: (folder / name).read_bytes() for name in ("index.json", "tokens.bin", "sa.bin", "docs.bin",
                                                            "vocab.txt")}


@settings(max_examples=80, deadline=None)
@given(st.one_of(sentences_strategy, repetitive_strategy), st.integers(1, 9), st.integers(0, 3),
       st.sampled_from([None, 1, 2, 5]), st.data())
def test_sharded_build_equals_the_in_memory_build(case, shard_tokens, overlap, window, data):
    size, sentences = case
    with tempfile.TemporaryDirectory() as folder:
        folder = Path(folder)
        expected = _build(folder / "memory", size, sentences)
        vocabulary = _vocabulary(size)
        ids = np.asarray([w for s in sentences for w in s], dtype=np.int64)
        lengths = np.asarray([len(s) for s in sentences], dtype=np.int64)
        if window is None:
            index = build_index_from_ids(vocabulary, ids, lengths, folder / "sharded", shard_tokens=shard_tokens,
                                         overlap=overlap)
        else:  # the merge through windows of `window` positions (refilled many times)
            from varorder.lm.suffix_index import _finish, _FramedWriter, _prepare, sorted_suffixes_to_file

            out = _prepare(folder / "sharded")
            framed = _FramedWriter(out, vocabulary, np.uint16)
            with framed:
                framed.add(ids, lengths)
            files = framed.files()
            tokens = np.fromfile(out / "tokens.bin", dtype="<u2")
            files["sa.bin"] = sorted_suffixes_to_file(tokens, out / "sa.bin", np.int32, shard_tokens=shard_tokens,
                                                      overlap=overlap, temp_dir=folder, merge_window=window)
            index = _finish(out, vocabulary, framed.num_tokens, framed.num_documents, np.uint16, np.int32, files)
        assert _files(folder / "sharded") == _files(folder / "memory")
        assert list(folder.glob("sharded/.sa-shards-*")) == []  # the shard files are gone
        index = open_index(folder / "sharded")  # every check, the permutation included
        assert np.array_equal(np.asarray(index.sa), np.asarray(expected.sa))
        stream = _stream(index.vocabulary, sentences)
        V = len(index.vocabulary)
        for _ in range(6):
            ngram = data.draw(st.lists(st.integers(0, V - 1), max_size=5))
            assert index.count(ngram) == _naive_count(stream, ngram)
            tokens, counts = index.ntd(ngram)
            assert dict(zip(tokens.tolist(), counts.tolist())) == _naive_next(stream, ngram)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(0, 3), min_size=1, max_size=40), st.data())
def test_sort_suffixes_orders_any_positions_by_their_whole_suffix(values, data):
    from varorder.lm import _suffix

    tokens = np.asarray(values, dtype=np.uint16)
    positions = np.asarray(data.draw(st.permutations(range(len(values)))), dtype=np.int32)
    positions = positions[:data.draw(st.integers(0, len(values)))].copy()
    expected = sorted(positions.tolist(), key=lambda p: values[p:])
    _suffix.sort_suffixes(tokens, positions)
    assert positions.tolist() == expected
    assert _suffix.order_breaks(tokens, positions) == 0


def test_bounded_build_from_text_files_equals_the_in_memory_build(tmp_path):
    rng = np.random.default_rng(3)
    words = [f"w{i}" for i in range(40)]
    lines = [" ".join(rng.choice(words, size=int(rng.integers(1, 12)), p=np.arange(40, 0, -1) / 820))
             for _ in range(300)]
    lines[10:20] = lines[:10]  # a repeated passage
    (tmp_path / "a.txt").write_text("\n".join(lines[:150]) + "\n\n", encoding="utf-8")
    (tmp_path / "b.txt").write_text("\n".join(lines[150:]) + "\n", encoding="utf-8")
    paths = [tmp_path / "a.txt", tmp_path / "b.txt"]
    for min_count in (1, 3):
        build_index(paths, tmp_path / "memory", min_count=min_count)
        build_index(paths, tmp_path / "bounded", min_count=min_count, memory=1 << 20, shard_tokens=97, overlap=5)
        assert _files(tmp_path / "bounded") == _files(tmp_path / "memory")
        build_index(paths, tmp_path / "bounded", min_count=min_count, memory=1 << 20)  # one shard
        assert _files(tmp_path / "bounded") == _files(tmp_path / "memory")


def test_bounded_build_refuses_a_tiny_budget_and_leaves_no_index_when_interrupted(tmp_path, monkeypatch):
    from varorder.errors import ParameterError
    from varorder.lm import _suffix

    (tmp_path / "c.txt").write_text("a b c\na b d\n", encoding="utf-8")
    with pytest.raises(ParameterError, match="memory"):
        build_index(tmp_path / "c.txt", tmp_path / "idx", memory=1000)
    build_index(tmp_path / "c.txt", tmp_path / "idx")

    def fail(*args):
        raise KeyboardInterrupt

    monkeypatch.setattr(_suffix, "merge_shards", fail)
    with pytest.raises(KeyboardInterrupt):
        build_index(tmp_path / "c.txt", tmp_path / "idx", memory=1 << 20, shard_tokens=3)
    with pytest.raises(FormatError, match="index.json"):  # the old index stopped opening; no half-built one opens
        open_index(tmp_path / "idx")
    assert [p.name for p in (tmp_path / "idx").iterdir() if p.name.startswith(".")] == []


def test_cli_index_with_a_memory_budget_writes_the_same_index(tmp_path):
    from click.testing import CliRunner

    from varorder.cli.main import main

    corpus = tmp_path / "corpus.txt"
    corpus.write_text("the cat sat\nthe cat ran\nthe dog sat\n", encoding="utf-8")
    runner = CliRunner()
    assert runner.invoke(main, ["lm", "index", str(corpus), "-o", str(tmp_path / "a")]).exit_code == 0
    result = runner.invoke(main, ["lm", "index", str(corpus), "-o", str(tmp_path / "b"), "-S", "2M", "-T",
                                  str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert _files(tmp_path / "a") == _files(tmp_path / "b")
    result = runner.invoke(main, ["lm", "index", str(corpus), "-o", str(tmp_path / "c"), "-S", "12x"])
    assert result.exit_code == 2 and "memory budget" in result.output
