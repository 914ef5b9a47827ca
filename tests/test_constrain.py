"""varorder.constrain against enumeration on tiny vocabularies: the DFAs accept what their
definition says; the product lattice's log Z, decode, samples (fixed-seed goodness of fit)
and conditional next-token distributions equal brute force over every sentence."""

from __future__ import annotations

import itertools
import math
import re
from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from varorder.constrain import ConstrainedLM, contains_dfa, intersect, length_dfa, regex_dfa
from varorder.errors import ParameterError
from varorder.lm import AdditiveSmoothing
from varorder.testing.oracle import chi_square_pvalue

LETTERS = {"a": "a", "b": "b", "c": "c", "<unk>": "u"}


def _lm(seed: int, order: int):
    rng = np.random.default_rng(seed)
    sentences = [" ".join(rng.choice(["a", "b", "c"], size=rng.integers(1, 6))) for _ in range(8)]
    sentences.append("a b c")  # every word seen
    return AdditiveSmoothing(order=order, alpha=float(rng.uniform(0.1, 1.0))).fit_sentences(sentences).model_


def _words(lm):
    vocab = lm.vocabulary
    return [w for w in range(lm.vocab_size) if w not in (vocab.bos_id, vocab.eos_id)]


def _enumerate(lm, dfa, min_length, max_length) -> dict:
    """log p(x) of every allowed sentence (id tuples)."""
    out = {}
    for n in range(min_length, max_length + 1):
        for x in itertools.product(_words(lm), repeat=n):
            if dfa.accepts(x):
                scores, _ = lm.token_log10probs(np.asarray(x, dtype=np.int32))
                out[x] = float(np.sum(scores, dtype=np.float64)) * math.log(10)
    return out


def _logsumexp(values):
    values = list(values)
    top = max(values)
    return top + math.log(sum(math.exp(v - top) for v in values))


constraints = st.sampled_from([
    ("contains", [["a"]], False), ("contains", [["b", "a"]], False), ("contains", [["a"], ["c"]], False),
    ("contains", [["c"], ["a"]], True), ("contains", [["a", "b"], ["b"]], True),
    ("regex", "a .* b", None), ("regex", "(a|b)+ c?", None), ("regex", "c* (a b)+ .", None),
    ("regex", ". . a .*", None)])


def _dfa(lm, constraint):
    kind, value, ordered = constraint
    if kind == "contains":
        return contains_dfa(value, lm.vocabulary, ordered=ordered)
    return regex_dfa(value, lm.vocabulary)


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 10**6), st.integers(2, 3), constraints, st.integers(0, 2), st.integers(0, 2), st.data())
def test_product_equals_enumeration(seed, order, constraint, min_length, extra, data):
    lm = _lm(seed, order)
    dfa = _dfa(lm, constraint)
    max_length = min_length + extra + 1
    allowed = _enumerate(lm, dfa, min_length, max_length)
    if not allowed:
        with pytest.raises(ParameterError):
            ConstrainedLM(lm, dfa, min_length=min_length, max_length=max_length)
        return
    model = ConstrainedLM(lm, dfa, min_length=min_length, max_length=max_length)
    log_z = _logsumexp(allowed.values())
    assert math.isclose(model.log_probability, log_z, rel_tol=1e-9, abs_tol=1e-9)
    words, score = model.decode()
    best = max(allowed.values())
    assert math.isclose(score, best, rel_tol=1e-9, abs_tol=1e-9)
    assert math.isclose(allowed[tuple(lm.vocabulary.encode(words))], best, rel_tol=1e-9, abs_tol=1e-9)
    # conditional next-token distributions after prefixes of allowed sentences
    for _ in range(3):
        sentence = data.draw(st.sampled_from(sorted(allowed)))
        cut = data.draw(st.integers(0, len(sentence)))
        prefix = sentence[:cut]
        got = model.next_logprobs(list(prefix))
        mass = Counter()
        for x, logp in allowed.items():
            if x[:cut] == prefix:
                nxt = x[cut] if len(x) > cut else lm.vocabulary.eos_id
                mass[nxt] += math.exp(logp)
        total = sum(mass.values())
        for w in range(lm.vocab_size):
            expected = mass[w] / total
            assert math.isclose(math.exp(got[w]), expected, rel_tol=1e-9, abs_tol=1e-12)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_exact_samples_and_hook_pass_goodness_of_fit(seed):
    lm = _lm(seed, 3)
    dfa = contains_dfa([["a", "b"], ["c"]], lm.vocabulary, ordered=False)
    model = ConstrainedLM(lm, dfa, min_length=2, max_length=4)
    allowed = _enumerate(lm, dfa, 2, 4)
    log_z = _logsumexp(allowed.values())
    probs = {x: math.exp(v - log_z) for x, v in allowed.items()}
    draws = Counter(model.sample_ids(20000, seed=seed))
    assert chi_square_pvalue(draws, probs) > 1e-4
    # a token-by-token sampler calling the hook draws the same distribution
    hook = model.logits_processor()
    rng = np.random.default_rng(seed)
    hooked = Counter()
    for _ in range(1500):
        prefix = []
        while True:
            p = np.exp(hook(prefix))
            w = int(rng.choice(lm.vocab_size, p=p / p.sum()))
            if w == lm.vocabulary.eos_id:
                break
            prefix.append(w)
        hooked[tuple(prefix)] += 1
    assert chi_square_pvalue(hooked, probs) > 1e-4


def test_goodness_of_fit_can_fail():
    lm = _lm(0, 3)
    dfa = contains_dfa([["a"]], lm.vocabulary)
    allowed = _enumerate(lm, dfa, 1, 3)
    uniform = {x: 1 / len(allowed) for x in allowed}
    draws = Counter(ConstrainedLM(lm, dfa, min_length=1, max_length=3).sample_ids(3000, seed=0))
    assert chi_square_pvalue(draws, uniform) < 1e-6


def _python_regex(pattern: str) -> str:
    out = []
    for item in pattern.split():
        core = item.rstrip("*+?")
        suffix = item[len(core):]
        body = "".join("[abcu]" if ch == "." else LETTERS.get(ch, ch) for ch in core)
        out.append(body + suffix)
    return "".join(out)


@pytest.mark.parametrize("pattern", ["a .* b", "( a | b )+ c?", "c* ( a b )+ .", ". . a .*", "a? b* c+", "( a | b c ) ( a )*"])
def test_regex_dfa_accepts_what_python_re_accepts(pattern):
    lm = _lm(0, 2)
    dfa = regex_dfa(pattern, lm.vocabulary)
    compiled = re.compile(_python_regex(pattern))
    ids = {w: lm.vocabulary.id_of(w) for w in LETTERS}
    for n in range(6):
        for x in itertools.product(list(LETTERS), repeat=n):
            expected = compiled.fullmatch("".join(LETTERS[w] for w in x)) is not None
            assert dfa.accepts([ids[w] for w in x]) == expected, (pattern, x)


def test_contains_intersect_and_length():
    lm = _lm(0, 2)
    vocab = lm.vocabulary
    enc = lambda text: vocab.encode(text.split())  # noqa: E731
    ordered = contains_dfa([["a"], ["b", "c"]], vocab, ordered=True)
    unordered = contains_dfa([["a"], ["b", "c"]], vocab, ordered=False)
    assert ordered.accepts(enc("c a c b c")) and not ordered.accepts(enc("b c a"))
    assert unordered.accepts(enc("b c a")) and not unordered.accepts(enc("b a c"))
    both = intersect(unordered, length_dfa(lm.vocab_size, 3, 4))
    assert both.accepts(enc("b c a")) and not both.accepts(enc("b c a a a")) and not both.accepts(enc("a b"))
    assert length_dfa(lm.vocab_size, 2).accepts(enc("a a a a a a")) and not length_dfa(lm.vocab_size, 2).accepts(enc("a"))


@pytest.mark.parametrize("bad", ["a (b", "zebra", "*", "a )", "| *"])
def test_bad_patterns_are_refused_naming_the_pattern(bad):
    lm = _lm(0, 2)
    with pytest.raises(ParameterError, match="regular expression"):
        regex_dfa(bad, lm.vocabulary)


def test_a_prefix_that_rules_the_constraint_out_is_refused():
    lm = _lm(0, 2)
    model = ConstrainedLM(lm, regex_dfa("a b", lm.vocabulary), min_length=2, max_length=2)
    with pytest.raises(ParameterError, match="prefix"):
        model.next_logprobs(["b"])


def test_cli_constrain_decodes_and_samples(tmp_path, monkeypatch):
    from click.testing import CliRunner

    from varorder.cli.main import main
    from varorder.lm.arpa import write_arpa

    lm = _lm(3, 3)
    write_arpa(lm, tmp_path / "lm.arpa")
    runner = CliRunner()
    args = ["lm", "constrain", str(tmp_path / "lm.arpa"), "--contains", "a b", "--contains", "c", "--min-length", "2",
            "--max-length", "4"]
    result = runner.invoke(main, args)
    assert result.exit_code == 0, result.output
    from varorder.lm.arpa import read_arpa

    model = read_arpa(tmp_path / "lm.arpa")
    dfa = contains_dfa([["a", "b"], ["c"]], model.vocabulary)
    allowed = _enumerate(model, dfa, 2, 4)
    best = max(allowed, key=allowed.get)
    words, score = result.stdout.strip().split("\t")
    assert words == " ".join(model.vocabulary.decode(best))
    assert math.isclose(float(score), allowed[best] / math.log(10), abs_tol=1e-5)
    with monkeypatch.context() as patch:  # sampling runs on the backward tables, not on the lattice
        patch.setattr(ConstrainedLM, "_build", lambda self: pytest.fail("sampling built the product lattice"))
        result = runner.invoke(main, args + ["-n", "5", "--seed", "1"])
    assert result.exit_code == 0 and len(result.stdout.splitlines()) == 5, result.output
    assert "p(constraint) = " in result.stderr
    for line in result.stdout.splitlines():
        assert tuple(model.vocabulary.encode(line.split("\t")[0].split())) in allowed
    result = runner.invoke(main, ["lm", "constrain", str(tmp_path / "lm.arpa"), "--regex", "a ( b"])
    assert result.exit_code == 1 and "unbalanced" in result.output and "Traceback" not in result.output


# --- HMM x DFA ----------------------------------------------------------------------------------

HMM_WORDS = ["a", "b", "c"]


def _random_hmm(seed, K=2, V=3):
    rng = np.random.default_rng(seed)
    norm = lambda m: np.log(m / m.sum(axis=-1, keepdims=True))  # noqa: E731
    return norm(rng.random(K) + 0.1), norm(rng.random((K, K)) + 0.1), norm(rng.random((K, V)) + 0.1)


def _hmm_enumerate(params, dfa, min_length, max_length):
    """{x: log Σ_z p_T(x, z)} and {(x, z): log p_T(x, z)} over the allowed sentences."""
    log_start, log_trans, log_emit = params
    K, V = log_emit.shape
    marginal, joint = {}, {}
    for n in range(min_length, max_length + 1):
        for x in itertools.product(range(V), repeat=n):
            if not dfa.accepts(x):
                continue
            terms = []
            for z in itertools.product(range(K), repeat=n):
                s = log_start[z[0]] + log_emit[z[0], x[0]] if n else 0.0
                for t in range(1, n):
                    s += log_trans[z[t - 1], z[t]] + log_emit[z[t], x[t]]
                joint[(x, z)] = s
                terms.append(s)
            marginal[x] = _logsumexp(terms)
    return marginal, joint


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 10**6), st.sampled_from(["a .* b", "( a | b )+ c?", ". a .*", "c* ( a b )+ ."]),
       st.integers(0, 2), st.integers(0, 2), st.data())
def test_hmm_product_equals_enumeration(seed, pattern, min_length, extra, data):
    from varorder.constrain import ConstrainedHMM

    params = _random_hmm(seed)
    dfa = regex_dfa(pattern, HMM_WORDS)
    max_length = min_length + extra + 1
    marginal, joint = _hmm_enumerate(params, dfa, min_length, max_length)
    if not marginal:
        with pytest.raises(ParameterError):
            ConstrainedHMM(*params, dfa, min_length=min_length, max_length=max_length, words=HMM_WORDS)
        return
    model = ConstrainedHMM(*params, dfa, min_length=min_length, max_length=max_length, words=HMM_WORDS)
    assert math.isclose(model.log_probability, _logsumexp(marginal.values()), rel_tol=1e-9, abs_tol=1e-9)
    x, z, score = model.decode()
    assert math.isclose(score, max(joint.values()), rel_tol=1e-9, abs_tol=1e-9)
    assert math.isclose(joint[(tuple(x), tuple(z))], score, rel_tol=1e-9, abs_tol=1e-9)
    for _ in range(3):
        sentence = data.draw(st.sampled_from(sorted(marginal)))
        cut = data.draw(st.integers(0, len(sentence)))
        prefix = sentence[:cut]
        got = model.next_logprobs(prefix)
        mass = Counter()
        for y, logp in marginal.items():
            if y[:cut] == prefix:
                mass[y[cut] if len(y) > cut else 3] += math.exp(logp)
        total = sum(mass.values())
        for w in range(4):
            assert math.isclose(math.exp(got[w]), mass[w] / total, rel_tol=1e-9, abs_tol=1e-12)


def test_hmm_samples_pass_goodness_of_fit():
    from varorder.constrain import ConstrainedHMM

    params = _random_hmm(7)
    dfa = contains_dfa([["a", "b"]], HMM_WORDS)
    model = ConstrainedHMM(*params, dfa, min_length=2, max_length=4, words=HMM_WORDS)
    marginal, _ = _hmm_enumerate(params, dfa, 2, 4)
    log_z = _logsumexp(marginal.values())
    probs = {x: math.exp(v - log_z) for x, v in marginal.items()}
    assert chi_square_pvalue(Counter(model.sample(20000, seed=3)), probs) > 1e-4
    uniform = {x: 1 / len(probs) for x in probs}
    assert chi_square_pvalue(Counter(model.sample(20000, seed=3)), uniform) < 1e-6


def test_hmm_from_a_fitted_estimator():
    from varorder.constrain import ConstrainedHMM
    from varorder.models import HMM

    X = [["a", "b", "c"], ["b", "a"], ["c", "c", "a", "b"]]
    y = [["N", "V", "N"], ["V", "N"], ["N", "N", "V", "N"]]
    hmm = HMM().fit(X, y)
    dfa = contains_dfa([["b"]], list(hmm.symbols_))
    model = ConstrainedHMM.from_hmm(hmm, dfa, min_length=1, max_length=3)
    params = (hmm.log_start_, hmm.log_transitions_, hmm.log_emissions_[:, :-1])
    marginal, _ = _hmm_enumerate(params, dfa, 1, 3)
    assert math.isclose(model.log_probability, _logsumexp(marginal.values()), rel_tol=1e-9)
    assert all(hmm.symbols_[w] in "abc" for x in model.sample(20, seed=0) for w in x)


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 10**6), st.integers(1, 6), st.integers(1, 3))
def test_minimized_dfa_is_equivalent_and_minimal(seed, Q, V):
    from varorder.constrain import DFA

    rng = np.random.default_rng(seed)
    dfa = DFA(rng.integers(0, Q, (Q, V)), int(rng.integers(Q)), rng.random(Q) < 0.5)
    small = dfa.minimized()
    assert small.start == 0 and small.num_states <= dfa.num_states
    strings = [x for n in range(Q + 2) for x in itertools.product(range(V), repeat=n)]
    for x in strings:
        assert dfa.accepts(x) == small.accepts(x)

    def accepts_from(q, x):
        for c in x:
            q = small.delta[q, c]
        return bool(small.accepting[q])

    for a, b in itertools.combinations(range(small.num_states), 2):  # every two states told apart
        assert any(accepts_from(a, x) != accepts_from(b, x) for x in strings)


def test_contains_one_word_minimizes_to_two_live_states():
    lm = _lm(0, 2)  # and one dead state: the sentence markers lead there
    small = contains_dfa([["a"]], lm.vocabulary).minimized()
    assert small.num_states == 3 and small.live().sum() == 2
