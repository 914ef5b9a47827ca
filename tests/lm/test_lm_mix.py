"""Mixing n-gram models: the dynamic mixture sums to 1 after every history, the static
mixture (SRILM's -mix-lm -write-lm) is a valid back-off model that equals the dynamic one
on the union of the n-grams, and EM on held-out text never lowers its likelihood and
finds the optimum a generic solver finds."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from click.testing import CliRunner
from scipy.optimize import minimize_scalar

from varorder.cli.main import main
from varorder.errors import ParameterError
from varorder.lm import AbsoluteDiscounting
from varorder.lm.arpa import read_arpa, write_arpa
from varorder.lm.mix import LN10, MixtureLM, static_mixture, tune_weights


def corpus(rng, letters, n):
    weights = rng.dirichlet(np.ones(len(letters)))
    return [" ".join(rng.choice(list(letters), size=int(rng.integers(1, 7)), p=weights)) for _ in range(n)]


def two_models(seed):
    """Different vocabularies and orders, so union words and mixed orders are exercised."""
    rng = np.random.default_rng(seed)
    first = AbsoluteDiscounting(order=3).fit_sentences(corpus(rng, "abcde", 200)).model_
    second = AbsoluteDiscounting(order=2, discount=0.5).fit_sentences(corpus(rng, "cdefg", 120)).model_
    return first, second, rng


def every_history(vocabulary, longest):
    words = [w for w in vocabulary.words if w not in ("<s>", "</s>")]
    for length in range(longest + 1):
        for history in itertools.product(words, repeat=length):
            for bos in (True, False):
                yield list(history), bos


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_dynamic_mixture_sums_to_one_after_every_history(seed):
    first, second, rng = two_models(seed)
    weights = rng.dirichlet(np.ones(2))
    mixture = MixtureLM([first, second], weights)
    assert set(mixture.vocabulary.words) == set(first.vocabulary.words) | set(second.vocabulary.words)
    for history, bos in every_history(mixture.vocabulary, 2):
        assert np.sum(10.0 ** mixture.next_word_log10probs(history, bos=bos)) == pytest.approx(1.0, abs=1e-6)
    # Each token's probability is the weighted sum of what each model's own lookup gives.
    sentences = corpus(rng, "abcdefgz", 20)
    got = mixture.token_log10probs(sentences)
    expected = []
    for sentence in sentences:
        words = sentence.split() + ["</s>"]
        for position, word in enumerate(words):
            total = 0.0
            for weight, model in zip(weights, (first, second)):
                vocabulary = model.vocabulary
                context = [vocabulary.bos_id] + [vocabulary.id_of(w) for w in words[:position]]
                if word in vocabulary or word not in mixture.vocabulary:
                    total += weight * 10.0 ** model.log10prob(context, vocabulary.id_of(word))
            expected.append(np.log10(total))
    np.testing.assert_allclose(got, expected, atol=1e-9)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_static_mixture_is_a_valid_backoff_model_equal_to_the_mixture_on_the_union(seed):
    first, second, rng = two_models(seed)
    weights = rng.dirichlet(np.ones(2))
    static = static_mixture([first, second], weights)
    mixture = MixtureLM([first, second], weights)
    assert static.order == 3 and list(static.vocabulary.words) == list(mixture.vocabulary.words)
    for history, bos in every_history(static.vocabulary, 2):
        assert np.sum(10.0 ** static.next_word_log10probs(history, bos=bos)) == pytest.approx(1.0, abs=1e-6)
    words = static.vocabulary.words
    union = {tuple(model.vocabulary.words[i] for i in row) for model in (first, second)
             for m in range(1, model.order + 1) for row in model.ngrams(m)[0]}
    for order in (2, 3):
        rows, log10probs, _ = static.ngrams(order)
        for row, log10prob in zip(rows, log10probs):
            gram = tuple(words[i] for i in row)
            if gram in union and "<s>" not in gram[1:]:
                context, word = list(gram[:-1]), gram[-1]
                bos = context[:1] == ["<s>"]
                expected = mixture.log10prob(context[1:] if bos else context, word, bos=bos)
                assert log10prob == pytest.approx(expected, abs=1e-5), gram


def test_em_never_lowers_the_held_out_likelihood_and_matches_a_generic_solver():
    first, second, rng = two_models(3)
    held_out = corpus(rng, "abcdefg", 80)
    weights, history = tune_weights([first, second], held_out, [0.9, 0.1], tolerance=1e-12)
    assert len(history) > 3 and np.all(np.diff(history) >= -1e-9 * abs(history[0]))
    components = MixtureLM([first, second]).component_log10probs(held_out) * LN10

    def negative_log_likelihood(lam):
        return -np.logaddexp(np.log(lam) + components[0], np.log1p(-lam) + components[1]).sum()

    best = minimize_scalar(negative_log_likelihood, bounds=(1e-9, 1 - 1e-9), method="bounded",
                           options={"xatol": 1e-10})
    assert weights[0] == pytest.approx(best.x, abs=1e-4)
    assert history[-1] * LN10 == pytest.approx(-best.fun, rel=1e-9)
    three, _ = tune_weights([first, second, first], held_out)
    assert three.sum() == pytest.approx(1.0) and three[0] == pytest.approx(three[2])


def test_weights_are_checked():
    first, second, _ = two_models(0)
    with pytest.raises(ParameterError, match="at least two models"):
        MixtureLM([first])
    with pytest.raises(ParameterError, match="summing to 1"):
        MixtureLM([first, second], [0.7, 0.7])
    assert MixtureLM([first, second], [0.25]).weights.tolist() == [0.25, 0.75]


def test_lm_mix_command_tunes_writes_and_reports_both_perplexities(tmp_path):
    rng = np.random.default_rng(4)
    paths = []
    for name, letters in (("a", "abcdef"), ("b", "defghi")):
        text = tmp_path / f"{name}.txt"
        text.write_text("\n".join(corpus(rng, letters, 300)) + "\n")
        model = AbsoluteDiscounting(order=3).fit(text).model_
        paths.append(tmp_path / f"{name}.arpa")
        write_arpa(model, paths[-1])
    held_out = tmp_path / "held.txt"
    held_out.write_text("\n".join(corpus(rng, "abcdefghi", 60)) + "\n")
    output = tmp_path / "mixed.arpa"
    result = CliRunner().invoke(main, ["lm", "mix", *map(str, paths), "--tune", str(held_out), "-o", str(output)])
    assert result.exit_code == 0, result.output
    lines = dict(line.split("\t") for line in result.stdout.splitlines())
    weights = [float(w) for w in lines["weights"].split()]
    assert sum(weights) == pytest.approx(1.0, abs=1e-5)
    sentences = [line.split() for line in held_out.read_text().splitlines()]
    models = [read_arpa(p) for p in paths]
    dynamic = MixtureLM(models, weights).perplexity(sentences)
    assert float(lines["perplexity dynamic mixture"]) == pytest.approx(dynamic, rel=1e-4)
    assert float(lines["perplexity static mixture"]) == pytest.approx(read_arpa(output).perplexity(sentences), rel=1e-4)
    assert dynamic <= min(float(lines[f"perplexity {p}"]) for p in paths)
    refused = CliRunner().invoke(main, ["lm", "mix", str(paths[0]), "-o", str(output)])
    assert refused.exit_code != 0 and "at least two models" in refused.output
