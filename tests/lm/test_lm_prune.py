"""Relative-entropy pruning (Stolcke 1998, SRILM's -prune): against a dict-based reference
written from the paper's formulas in SRILM's order of work (one n-gram at a time), θ = 0
keeps everything, the kept set shrinks as θ grows, the pruned model normalises, a
hand-computed ΔH, --target-size, and the command."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from click.testing import CliRunner

from _lm_oracle import backoff_log10prob, random_corpus, table_of
from varorder.cli.main import main
from varorder.errors import ParameterError
from varorder.lm import AbsoluteDiscounting, ModifiedKneserNey, NgramLM, Vocabulary
from varorder.lm.arpa import read_arpa, write_arpa
from varorder.lm.prune import entropy_pruning, prune_entropy


def trained(seed, order=3, method=AbsoluteDiscounting):
    rng = np.random.default_rng(seed)
    sentences = random_corpus(rng, 250, 12, max_length=8)
    estimator = method(order=order, discount_fallback=(0.5, 1.0, 1.5)) if method is ModifiedKneserNey \
        else method(order=order)
    return estimator.fit_sentences(sentences).model_


def reference_prune(model, threshold, min_order=2):
    """SRILM's Ngram::pruneProbs step by step on a dict {word ids: (log10 p, log10 bow)}:
    contexts of each order from the highest down, each n-gram's criterion from the
    formulas, protection of n-grams still used as contexts, then recomputeBOWs."""
    table = table_of(model)
    order, bos, eos = model.order, model.vocabulary.bos_id, model.vocabulary.eos_id
    stored = set(table)

    def p(context, word):
        return backoff_log10prob({g: table[g] for g in stored}, order, context, word)

    def context_prob(context):
        total = 0.0
        for i in range(len(context)):
            word = context[i]
            if i == 0 and word == bos:
                word = eos
            total += p(context[:i], word)
        return total

    for n in range(order, min_order - 1, -1):
        contexts = sorted({g[:-1] for g in stored if len(g) == n})
        pruned_now = []
        for h in contexts:
            children = [g for g in stored if len(g) == n and g[:-1] == h]
            numerator = 1 - sum(10 ** table[g][0] for g in children)
            denominator = 1 - sum(10 ** p(g[1:-1], g[-1]) for g in children)
            log_bow = table[h][1]
            log_ph = context_prob(h)
            for g in children:
                f = table[g][0]
                lower = p(g[1:-1], g[-1])
                new_bow = math.log10(numerator + 10 ** f) - math.log10(denominator + 10 ** lower)
                delta = -(10 ** log_ph) * (10 ** f * (lower + new_bow - f) + numerator * (new_bow - log_bow))
                if threshold > 0 and 10 ** delta - 1 < threshold:
                    if not any(len(x) == n + 1 and x[:-1] == g for x in stored):
                        pruned_now.append(g)
        stored -= set(pruned_now)
    bows = {}
    for n in range(1, order):
        for h in [g for g in stored if len(g) == n]:
            children = [g for g in stored if len(g) == n + 1 and g[:-1] == h]
            lower_table = {g: (table[g][0], bows.get(g, 0.0)) for g in stored if len(g) <= n}
            numerator = 1 - sum(10 ** table[g][0] for g in children)
            denominator = 1 - sum(10 ** backoff_log10prob(lower_table, n, g[1:-1], g[-1]) for g in children)
            bows[h] = 0.0 if numerator <= 1e-12 or denominator <= 1e-12 else math.log10(numerator / denominator)
    return {g: (table[g][0], bows.get(g, 0.0)) for g in stored}


def kept_ngrams(model, criteria, threshold):
    kept = criteria.kept(threshold)
    return {tuple(row) for m in range(model.order) for row in model.ngrams(m + 1)[0][kept[m]].tolist()}


@pytest.mark.filterwarnings("ignore:modified Kneser-Ney")
@pytest.mark.parametrize("seed,threshold,method", [(0, 1e-3, ModifiedKneserNey), (1, 3e-3, ModifiedKneserNey),
                                                   (2, 1e-2, AbsoluteDiscounting), (3, 3e-4, AbsoluteDiscounting)])
def test_same_ngrams_kept_and_same_scores_as_the_reference(seed, threshold, method):
    model = trained(seed, method=method)
    criteria = entropy_pruning(model)
    reference = reference_prune(model, threshold)
    assert kept_ngrams(model, criteria, threshold) == set(reference)
    assert len(reference) < sum(model.ngram_counts), "the threshold should prune something"
    pruned = criteria.prune(threshold)
    words = [w for w in range(pruned.vocab_size) if w != pruned.vocabulary.eos_id]
    for context in itertools.product(words, repeat=2):
        for word in range(pruned.vocab_size):
            expected = backoff_log10prob(reference, 3, context, word)
            assert pruned.log10prob(context, word) == pytest.approx(expected, abs=2e-5)


def test_zero_threshold_keeps_everything_and_changes_no_distribution():
    model = trained(4)
    pruned, used = prune_entropy(model, 0.0)
    assert used == 0.0 and pruned.ngram_counts == model.ngram_counts
    for m in range(1, model.order + 1):
        np.testing.assert_array_equal(pruned.ngrams(m)[0], model.ngrams(m)[0])
        np.testing.assert_allclose(pruned.ngrams(m)[1], model.ngrams(m)[1])
    # Back-off weights are recomputed (as SRILM does at any θ); where a context leaves
    # almost no mass to back off they may move in the last digits, the distributions not.
    words = [w for w in model.vocabulary.words if w not in ("<s>", "</s>")]
    for history in itertools.product(words, repeat=2):
        np.testing.assert_allclose(10.0 ** pruned.next_word_log10probs(list(history)),
                                   10.0 ** model.next_word_log10probs(list(history)), atol=1e-7)


def test_kept_set_shrinks_as_the_threshold_grows_and_every_context_normalises():
    model = trained(5, method=AbsoluteDiscounting)
    criteria = entropy_pruning(model)
    previous = None
    for threshold in [0.0, 1e-5, 1e-4, 1e-3, 3e-3, 1e-2, 3e-2, 0.1, 1.0]:
        kept = kept_ngrams(model, criteria, threshold)
        if previous is not None:
            assert kept <= previous
        previous = kept
        pruned = criteria.prune(threshold)
        words = [w for w in pruned.vocabulary.words if w not in ("<s>", "</s>")]
        for length in range(3):
            for history in itertools.product(words, repeat=length):
                for bos in (True, False):
                    total = np.sum(10.0 ** pruned.next_word_log10probs(list(history), bos=bos))
                    assert total == pytest.approx(1.0, abs=1e-6), (threshold, history)
    assert {len(g) for g in kept_ngrams(model, criteria, 1e9)} == {1}, "a huge θ prunes every n-gram above unigrams"


def test_hand_computed_entropy_change_of_one_bigram():
    # Words a, b plus the specials; unigrams p(a) = 0.5, p(b) = 0.3, p(</s>) = 0.1, p(<unk>) = 0.1.
    vocabulary = Vocabulary(["a", "b"])
    a, b, unk, bos, eos = (vocabulary.id_of(w) for w in ("a", "b", "<unk>", "<s>", "</s>"))
    unigram = {a: 0.5, b: 0.3, eos: 0.1, unk: 0.1, bos: 0.0}
    # After a: p(b | a) = 0.6 stored; the rest, 0.4, by back-off over {a, </s>, <unk>} (mass 0.7).
    bow_a = 0.4 / (1 - 0.3)
    rows = np.asarray([[w] for w in range(len(vocabulary))])
    with np.errstate(divide="ignore"):
        unigrams = (rows, np.log10([unigram[w] for w in range(len(vocabulary))]),
                    np.asarray([math.log10(bow_a) if w == a else 0.0 for w in range(len(vocabulary))]))
    model = NgramLM.from_ngrams(vocabulary, [unigrams, (np.asarray([[a, b]]), np.log10([0.6]), np.zeros(1))])
    criteria = entropy_pruning(model)
    # By hand: removing "a b" gives bow'(a) = (0.4 + 0.6) / (0.7 + 0.3) = 1, p'(b | a) = 0.3, and
    # ΔH = -P(a) [p(b|a) (log10 p'(b|a) - log10 p(b|a)) + N(a) (log10 bow'(a) - log10 bow(a))]
    #    = -0.5 [0.6 log10(0.3 / 0.6) + 0.4 log10(1 / (0.4 / 0.7))].
    delta = -0.5 * (0.6 * math.log10(0.5) + 0.4 * math.log10(0.7 / 0.4))
    assert delta == pytest.approx(0.5 * (0.180618 - 0.097215), abs=1e-6)  # = 0.041701
    assert criteria.delta_entropy[1][0] == pytest.approx(delta, rel=1e-6)
    assert criteria.perplexity_change[1][0] == pytest.approx(10 ** delta - 1, rel=1e-6)
    assert prune_entropy(model, 10 ** delta - 1 + 1e-6)[0].ngram_counts == (5, 0)
    assert prune_entropy(model, 10 ** delta - 1 - 1e-6)[0].ngram_counts == (5, 1)


def test_target_size_prunes_to_at_most_that_many_ngrams_with_the_smallest_threshold():
    model = trained(6)
    criteria = entropy_pruning(model)
    total = sum(model.ngram_counts)
    for target in (total, total - 10, total // 2, model.vocab_size + 5):
        pruned, threshold = prune_entropy(model, target_size=target)
        assert sum(pruned.ngram_counts) <= target
        if threshold > 0:
            assert criteria.size(float(np.nextafter(threshold, 0))) > target or \
                criteria.size(threshold / (1 + 1e-9)) > target
    with pytest.raises(ParameterError, match="below"):
        prune_entropy(model, target_size=3)
    with pytest.raises(ParameterError, match="exactly one"):
        prune_entropy(model)
    with pytest.raises(ParameterError, match="min_order"):
        entropy_pruning(model, min_order=1)


def test_min_order_protects_lower_orders():
    model = trained(7)
    pruned, _ = prune_entropy(model, 1.0, min_order=3)
    assert pruned.ngram_counts[:2] == model.ngram_counts[:2]
    assert pruned.ngram_counts[2] < model.ngram_counts[2]


def test_lm_prune_command(tmp_path):
    model = trained(8)
    arpa, output = tmp_path / "m.arpa", tmp_path / "pruned.arpa"
    write_arpa(model, arpa)
    held = tmp_path / "held.txt"
    held.write_text("\n".join(random_corpus(np.random.default_rng(9), 40, 12)) + "\n")
    result = CliRunner().invoke(main, ["lm", "prune", str(arpa), str(output), "--threshold", "1e-3",
                                       "--eval", str(held)])
    assert result.exit_code == 0, result.output
    expected, _ = prune_entropy(read_arpa(arpa), 1e-3)
    assert read_arpa(output).ngram_counts == expected.ngram_counts
    assert "perplexity" in result.stdout
    result = CliRunner().invoke(main, ["lm", "prune", str(arpa), str(output), "--target-size", "60"])
    assert result.exit_code == 0, result.output
    assert sum(read_arpa(output).ngram_counts) <= 60
    refused = CliRunner().invoke(main, ["lm", "prune", str(arpa), str(output)])
    assert refused.exit_code != 0 and "--threshold or --target-size" in refused.output


def test_lm_train_prune_entropy_writes_the_pruned_model(tmp_path):
    corpus = tmp_path / "train.txt"
    corpus.write_text("\n".join(random_corpus(np.random.default_rng(10), 300, 12, max_length=8)) + "\n")
    unpruned, pruned_arpa = tmp_path / "full.arpa", tmp_path / "pruned.arpa"
    for output, extra in ((unpruned, []), (pruned_arpa, ["--prune-entropy", "1e-3"])):
        result = CliRunner().invoke(main, ["lm", "train", str(corpus), "-n", "3", "--method", "absolute", "-o",
                                           str(output), *extra])
        assert result.exit_code == 0, result.output
    expected, _ = prune_entropy(read_arpa(unpruned), 1e-3)
    got = read_arpa(pruned_arpa)
    assert got.ngram_counts == expected.ngram_counts and sum(got.ngram_counts) < sum(read_arpa(unpruned).ngram_counts)
    for m in range(1, 4):
        np.testing.assert_array_equal(got.ngrams(m)[0], expected.ngrams(m)[0])
        np.testing.assert_allclose(got.ngrams(m)[1:], expected.ngrams(m)[1:], atol=1e-6)
