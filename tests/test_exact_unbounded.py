"""Exact decoding and sampling under the unbounded-order Witten–Bell model
(varorder.exact.model.UnboundedContext): the bound over left extensions read from the
suffix array is an upper bound of p over every history (checked by enumerating every
history up to a length that covers the corpus) and the maximum of the recursion over the
occurring extensions (a brute-force walk over the corpus's substrings); the exact decode
equals the brute-force argmax and exact samples pass a fixed-seed chi-square test."""

from __future__ import annotations

import itertools
import math
from collections import Counter

import numpy as np
import pytest

from varorder.errors import ParameterError
from varorder.exact import HighOrderTarget, QAutomaton, decode, sample
from varorder.exact.model import NgramContext, UnboundedContext, context_model
from varorder.lm import Vocabulary
from varorder.lm.suffix_index import build_index_from_ids
from varorder.lm.unbounded import WittenBell
from varorder.testing import oracle

WORDS = ["a", "b", "c", "d"]


def random_model(tmp_path, seed: int, n_words: int = 3, n_sentences: int = 12, max_length: int = 4,
                 budget: int = 10**6):
    """A Witten–Bell model over a random corpus of short sentences (skewed word choice,
    repeated sentences, so that long contexts occur and branch), and its context model
    (by default with a budget that never falls back to the bound 1)."""
    rng = np.random.default_rng(seed)
    weights = rng.dirichlet(np.full(n_words, 0.8))
    sentences = [list(rng.choice(n_words, size=rng.integers(1, max_length + 1), p=weights))
                 for _ in range(n_sentences)]
    sentences += [sentences[i] for i in rng.integers(0, len(sentences), size=3)]
    vocabulary = Vocabulary(WORDS[:n_words])
    ids = np.asarray([w for s in sentences for w in s], dtype=np.int64)
    lengths = np.asarray([len(s) for s in sentences], dtype=np.int64)
    index = build_index_from_ids(vocabulary, ids, lengths, tmp_path / f"idx{seed}")
    model = WittenBell(index)
    return model, sentences, UnboundedContext(model, budget=budget)


def _stream(model, sentences):
    vocab = model.vocabulary
    out = []
    for s in sentences:
        out += [vocab.bos_id] + list(s) + [vocab.eos_id]
    return out


def brute_force_extension_max(model, sentences, context, word) -> float:
    """max of p(word | v) over v = the context and every corpus substring that ends in it
    (not crossing a sentence start), each scored by the NumPy recursion of
    WittenBell.distribution (v is its own longest occurring suffix)."""
    vocab = model.vocabulary
    best = model.distribution(list(context))[word]
    stream = _stream(model, sentences)
    k = len(context)
    for start in range(len(stream)):
        for end in range(start + 1, len(stream)):
            v = stream[start:end]
            if len(v) <= k or v[len(v) - k:] != list(context) or vocab.bos_id in v[1:] or vocab.eos_id in v:
                continue
            best = max(best, model.distribution(v)[word])
    return float(best)


def predictable(model):
    vocab = model.vocabulary
    return [w for w in range(len(vocab)) if w != vocab.bos_id]


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_bound_is_the_extension_maximum_and_bounds_every_history(tmp_path, seed):
    model, sentences, ctx = random_model(tmp_path, seed)
    vocab = model.vocabulary
    inner = [w for w in range(len(vocab)) if w not in (vocab.bos_id, vocab.eos_id, vocab.unk_id)]
    longest = max(len(s) for s in sentences)
    # Every history <s> y_1 .. y_j with j <= longest + 1: past that length no suffix longer
    # than a sentence occurs, so longer histories repeat these factors.
    histories = [[vocab.bos_id] + list(y) for j in range(longest + 2) for y in itertools.product(inner, repeat=j)]
    table = {tuple(h): model.distribution(h) for h in histories}
    rng = np.random.default_rng(seed)
    contexts = {()} | {tuple(h[len(h) - k:]) for h in histories for k in range(1, min(len(h), 3) + 1)}
    checked_strict = 0
    for context in sorted(contexts):
        for word in predictable(model):
            bound = ctx.max_logprob(context, word)
            ending = [p[word] for h, p in table.items() if len(h) >= len(context) and h[len(h) - len(context):] == context]
            best_history = max(ending)
            assert math.log(best_history) <= bound + 1e-12
            if rng.random() < 0.35 or context == ():
                assert bound == pytest.approx(math.log(brute_force_extension_max(model, sentences, context, word)),
                                              abs=1e-12)
            checked_strict += bound > math.log(best_history) + 1e-9
    # The bound is the maximum over the occurring extensions; where one of those is never a
    # longest occurring suffix it exceeds every history's p (allowed, and counted).
    assert checked_strict < len(contexts) * len(predictable(model))


def test_bound_at_an_absent_context_or_a_full_history_is_p(tmp_path):
    model, sentences, ctx = random_model(tmp_path, 7)
    vocab = model.vocabulary
    absent = [0, 0, 0, 0, 0, 0]  # longer than any sentence: occurs nowhere
    for word in predictable(model):
        assert ctx.max_logprob(absent, word) == ctx.logprob(absent, word)
        history = [vocab.bos_id] + sentences[0]
        assert ctx.max_logprob(history, word) == ctx.logprob(history, word)
        assert ctx.logprob(history, word) == pytest.approx(math.log(model.distribution(history)[word]), abs=1e-12)


def test_a_spent_budget_falls_back_to_probability_one(tmp_path):
    model, sentences, ctx = random_model(tmp_path, 4, budget=1)
    word = sentences[0][0]
    # the empty context: every occurrence of the word is an extension to walk
    assert model.index.count([word]) > 1
    assert ctx.max_logprob((), word) == 0.0
    assert ctx.unigram_bounds_of(np.asarray([word]))[0] == 0.0
    full = UnboundedContext(model, budget=10**6)
    assert full.unigram_bounds_of(np.asarray([word]))[0] == full.max_logprob((), word) < 0.0
    with pytest.raises(ParameterError):
        UnboundedContext(model, budget=0)


def random_target(model, seed: int, length: int, n_candidates: int, eos: bool = True):
    rng = np.random.default_rng(seed + 1000)
    vocab = model.vocabulary
    word_ids = np.asarray([i for i in range(len(vocab)) if i not in (vocab.bos_id, vocab.eos_id)])
    candidates = []
    for _ in range(length):
        chosen = rng.choice(word_ids, size=min(n_candidates, len(word_ids)), replace=False)
        candidates.append((chosen, rng.normal(scale=1.0, size=len(chosen))))
    return HighOrderTarget(model, candidates, eos=eos)


def enumerate_target(target):
    return oracle.product_paths(list(target.symbols[: target.length]),
                                lambda seq: target.log_p(target.with_end(seq)))


@pytest.mark.parametrize("seed,length,n_candidates,eos", [(0, 3, 3, True), (1, 4, 3, True), (2, 5, 2, True),
                                                          (3, 4, 4, False), (5, 6, 2, True)])
def test_unbounded_decode_equals_brute_force_argmax(tmp_path, seed, length, n_candidates, eos):
    model, _, _ = random_model(tmp_path, seed, n_words=4, n_sentences=20, max_length=5)
    target = random_target(model, seed, length, n_candidates, eos)
    assert isinstance(target.model, UnboundedContext) and target.order == target.num_positions + 1
    paths = enumerate_target(target)
    result = decode(target)
    assert result.exact
    assert result.log_q == pytest.approx(result.log_p, abs=1e-9)
    assert result.log_p == pytest.approx(oracle.max_score(paths), abs=1e-9)
    assert tuple(result.sentence) in oracle.argmax_paths(paths, tol=1e-9)
    assert result.iterations > 1  # the unigram bound was not already exact


@pytest.mark.parametrize("seed", [0, 1])
def test_unbounded_q_bounds_p_after_every_refinement(tmp_path, seed):
    model, _, _ = random_model(tmp_path, seed, n_words=3, n_sentences=15)
    target = random_target(model, seed, 4, 3)
    paths = enumerate_target(target)
    q = QAutomaton(target)
    for _ in range(6):
        for sentence, log_p in paths:
            assert q.log_q(target.with_end(sentence)) >= log_p - 1e-9
        arcs, _ = q.best_path()
        assert q.path_log_p(arcs) == pytest.approx(target.log_p(q.trace_arcs(arcs).symbols), abs=1e-9)
        if q.refine(q.trace_arcs(arcs).symbols) == 0:
            break


@pytest.mark.parametrize("seed,batch", [(0, 1), (1, 20)])
def test_unbounded_samples_follow_p(tmp_path, seed, batch):
    model, _, _ = random_model(tmp_path, seed, n_words=3, n_sentences=15)
    target = random_target(model, seed, 3, 3)
    paths = enumerate_target(target)
    result = sample(target, n_samples=3000, batch=batch, seed=seed)
    assert result.stopped_by == "samples" and not all(result.history.accepted)
    counts = Counter(tuple(s) for s in result.samples)
    assert oracle.chi_square_pvalue(counts, oracle.probabilities(paths)) > 1e-3
    # the same test rejects the distribution of q's first draws (a wrong sampler)
    q = QAutomaton(target)
    drawn = q.sample_arcs(3000, np.random.default_rng(seed))
    wrong = Counter(tuple(q.trace_arcs(a).symbols[: target.length]) for a in drawn)
    assert oracle.chi_square_pvalue(wrong, oracle.probabilities(paths)) < 1e-3


def test_context_model_dispatch(tmp_path):
    model, _, _ = random_model(tmp_path, 3)
    assert isinstance(context_model(model), UnboundedContext)
    with pytest.raises(ParameterError):
        context_model(object())
    with pytest.raises(ParameterError):
        NgramContext(model)


def test_cli_decodes_and_samples_under_the_index_model(tmp_path):
    import json

    from click.testing import CliRunner

    from varorder.cli.main import main

    model, _, _ = random_model(tmp_path, 2, n_words=4, n_sentences=20, max_length=5)
    target = random_target(model, 2, 4, 3)
    paths = enumerate_target(target)
    vocab = model.vocabulary
    line = json.dumps([{vocab.words[int(s)]: float(l) for s, l in zip(symbols, logliks)}
                       for symbols, logliks in zip(target.symbols[: target.length], target.logliks[: target.length])])
    folder = str(model.index.folder)
    result = CliRunner().invoke(main, ["decode", folder, "--task", "candidates", "--text", line, "--json"])
    assert result.exit_code == 0, result.output
    record = json.loads(result.output.strip().splitlines()[-1])
    assert record["exact"] and record["log_p"] == pytest.approx(oracle.max_score(paths), abs=1e-9)
    result = CliRunner().invoke(main, ["sample", folder, "--task", "candidates", "--text", line, "--samples", "5",
                                       "--seed", "0"])
    assert result.exit_code == 0, result.output
    damaged = tmp_path / "not-an-index"
    damaged.mkdir()
    result = CliRunner().invoke(main, ["decode", str(damaged), "--task", "candidates", "--text", line])
    assert result.exit_code != 0 and "Traceback" not in result.output and "index" in result.output
