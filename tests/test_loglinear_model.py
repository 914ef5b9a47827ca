"""Log-linear language model (Nelakanti et al. 2013): trie, probabilities, gradients,
training, persistence, CLI."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from varorder.lm import Vocabulary
from varorder.loglinear.model import LogLinearLM, StructuredLogLinear, _loss_and_grad, is_loglinear_model
from varorder.loglinear.trie import build_trie, find_contexts
from varorder.testing.oracle import loglinear_lm_distribution

WORDS = ["a", "b", "c", "d"]


def small_corpus(rng, n_sentences=6, max_len=6):
    vocab = Vocabulary(WORDS)
    ids = [vocab.index[w] for w in WORDS]
    sentences = [list(rng.choice(ids, size=rng.integers(0, max_len + 1))) for _ in range(n_sentences)]
    flat = np.asarray([w for s in sentences for w in s], dtype=np.int64)
    return vocab, sentences, flat, np.asarray([len(s) for s in sentences])


def pairs_of(trie):
    """{(context suffix as a tuple of ids, read left to right), word} of every weight."""
    def context(c):
        words = []
        while c > 0:
            words.append(int(trie.ctx_word[c]))
            c = trie.ctx_parent[c]
        return tuple(words)  # the deepest node holds the leftmost word

    return {(context(c), int(w)): p for c, w, p in zip(trie.param_ctx, trie.param_word, range(trie.n_params))}


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(1, 5))
def test_trie_holds_exactly_the_training_ngrams(seed, order):
    rng = np.random.default_rng(seed)
    vocab, sentences, flat, lengths = small_corpus(rng)
    trie, positions, targets = build_trie(flat, lengths, order, len(vocab), vocab.bos_id, vocab.eos_id)
    trie.validate()
    expected = set()
    for s in sentences:
        padded = [vocab.bos_id] + s + [vocab.eos_id]
        for i in range(1, len(padded)):
            for k in range(0, min(order - 1, i) + 1):
                expected.add((tuple(int(x) for x in padded[i - k:i]), int(padded[i])))
    assert set(pairs_of(trie)) == expected
    again, again_targets = find_contexts(trie, flat, lengths, vocab.bos_id, vocab.eos_id)
    np.testing.assert_array_equal(again, positions)
    np.testing.assert_array_equal(again_targets, targets)


def random_model(seed, order=3, negative=False):
    rng = np.random.default_rng(seed)
    vocab, sentences, flat, lengths = small_corpus(rng)
    trie, positions, targets = build_trie(flat, lengths, order, len(vocab), vocab.bos_id, vocab.eos_id)
    weights = rng.normal(size=trie.n_params) if negative else np.abs(rng.normal(size=trie.n_params))
    return LogLinearLM(vocab, trie, weights), sentences, positions, targets


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(1, 4))
def test_probabilities_match_the_definition_and_sum_to_one(seed, order):
    model, sentences, _, _ = random_model(seed, order, negative=True)
    rng = np.random.default_rng(seed + 1)
    vocab = model.vocabulary
    pairs = pairs_of(model.trie)
    history = [vocab.bos_id] + [int(x) for x in rng.choice([vocab.index[w] for w in WORDS] + [vocab.unk_id], size=rng.integers(0, 4))]
    p = model.distribution(history[1:])
    assert p.sum() == pytest.approx(1.0, abs=1e-12)
    assert p[vocab.bos_id] == 0.0
    expected = loglinear_lm_distribution(sentences, order, lambda c, v: model.weights[pairs[(c, v)]] if (c, v) in pairs else 0.0,
                                         history, len(vocab), vocab.bos_id, vocab.eos_id)
    np.testing.assert_allclose(p, expected, rtol=1e-10, atol=1e-14)


@pytest.mark.parametrize("seed", range(4))
def test_gradient_matches_finite_differences(seed):
    model, _, positions, targets = random_model(seed, order=3, negative=True)
    t, vocab = model.trie, model.vocabulary

    def loss(w, grad=None):
        g = np.zeros_like(w) if grad is None else grad
        return _loss_and_grad(w, positions, targets, t.ctx_parent, t.succ_start, t.succ_word, t.succ_param,
                              model.root_param, vocab.bos_id, g, grad is not None, np.empty(0))

    w = model.weights
    grad = np.zeros_like(w)
    loss(w, grad)
    numeric = np.empty_like(w)
    h = 1e-6
    for i in range(len(w)):
        up, down = w.copy(), w.copy()
        up[i] += h
        down[i] -= h
        numeric[i] = (loss(up) - loss(down)) / (2 * h)
    np.testing.assert_allclose(grad, numeric, atol=1e-8)


def training_text(tmp_path):
    rng = np.random.default_rng(5)
    lines = [" ".join(rng.choice(["the", "cat", "sat", "on", "a", "mat", "dog"], size=rng.integers(2, 8))) for _ in range(150)]
    path = tmp_path / "train.txt"
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.parametrize("penalty", ["l2sq", "wl1", "wlt2", "ltinf"])
@pytest.mark.parametrize("optimizer", ["apg", "adagrad"])
def test_training_lowers_the_loss_and_is_reproducible(tmp_path, penalty, optimizer):
    path = training_text(tmp_path)
    fit = lambda: StructuredLogLinear(order=3, penalty=penalty, lam=1e-4, epochs=4, batch_size=50,  # noqa: E731
                                      optimizer=optimizer, lipschitz=0.5).fit(path)
    first, second = fit(), fit()
    assert first.history_[-1] < first.history_[0]
    np.testing.assert_array_equal(first.model_.weights, second.model_.weights)
    assert (first.model_.weights >= 0).all()


@pytest.mark.parametrize("optimizer", ["apg", "adagrad"])
def test_tail_averaging_means_the_last_epochs_iterates(tmp_path, optimizer):
    path = training_text(tmp_path)
    fit = lambda batch, average: StructuredLogLinear(order=3, penalty="wlt2", lam=0.1, epochs=3, batch_size=batch,  # noqa: E731
                                                     optimizer=optimizer, average=average, polish=0).fit(path).model_.weights
    # one mini-batch per epoch: the last epoch has one iterate, its mean is the last iterate
    np.testing.assert_array_equal(fit(10**6, True), fit(10**6, False))
    averaged, last = fit(50, True), fit(50, False)
    assert (averaged >= 0).all()
    assert not np.allclose(averaged, last)
    # w >= 0 and a sparse last iterate: the mean keeps each weight that any iterate of the epoch had
    assert np.count_nonzero(averaged) >= np.count_nonzero(last)


def one_full_batch_step(corpus, **params):
    """Weights after one plain proximal-gradient step from zero on a single mini-batch, and the
    ingredients to recompute it: the mean log-loss gradient at zero, the trie and the step."""
    vocab, _, flat, lengths = corpus
    fit = StructuredLogLinear(epochs=1, batch_size=10**6, accelerated=False, lipschitz=2.0, polish=0,
                              **params).fit_ids(flat, lengths, vocab)
    model = fit.model_
    t = model.trie
    positions, targets = find_contexts(t, flat, lengths, vocab.bos_id, vocab.eos_id)
    grad = np.zeros(t.n_params)
    _loss_and_grad(np.zeros(t.n_params), positions, targets, t.ctx_parent, t.succ_start, t.succ_word, t.succ_param,
                   model.root_param, vocab.bos_id, grad, True, np.empty(0))
    return model, grad, 1.0 / 2.0, len(targets)


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.filterwarnings("ignore:StructuredLogLinear. weighting=.groups. is deprecated:FutureWarning")
def test_alpha_as_feature_values_scales_the_gradient_and_the_weights(seed):
    """weighting="features": θ is optimised, w = α^depth ⊙ θ scores, so one step from 0 with λ = 0
    gives w = [−step · α^(2·depth) ⊙ ∇_w f(0)]₊ (chain rule twice); "groups" leaves the step alone."""
    corpus = small_corpus(np.random.default_rng(seed))
    alpha = 1.7
    for weighting, power in (("features", 2), ("groups", 0)):
        model, grad, step, _ = one_full_batch_step(corpus, order=3, penalty="wl1", lam=0.0, alpha=alpha, weighting=weighting)
        scale = alpha ** (power * model.trie.param_depth.astype(float))
        np.testing.assert_allclose(model.weights, np.maximum(-step * scale * grad, 0.0), rtol=1e-12, atol=1e-15)


@pytest.mark.filterwarnings("ignore:StructuredLogLinear. weighting=.groups. is deprecated:FutureWarning")
@pytest.mark.parametrize("weighting", ["features", "groups"])
def test_unpenalised_root_is_not_thresholded(weighting):
    """penalize_root=False: the unigram (depth 0) weights take the plain gradient step while
    deeper ones are soft-thresholded by λ·step·a/n (ℓ1, a = α^depth for groups, 1 for features)."""
    corpus = small_corpus(np.random.default_rng(7))
    alpha, lam = 1.3, 0.05
    for penalize_root in (True, False):
        model, grad, step, n = one_full_batch_step(corpus, order=3, penalty="wl1", lam=lam, alpha=alpha,
                                                   weighting=weighting, penalize_root=penalize_root)
        depth = model.trie.param_depth.astype(float)
        feature = alpha ** depth if weighting == "features" else np.ones_like(depth)
        a = np.ones_like(depth) if weighting == "features" else alpha ** depth
        if not penalize_root:
            a[depth == 0] = 0.0
        theta = np.maximum(np.maximum(-step * feature * grad, 0.0) - lam / n * step * a, 0.0)
        np.testing.assert_allclose(model.weights, feature * theta, rtol=1e-12, atol=1e-15)
        root = depth == 0
        assert (model.weights[root] > 0).any()


@pytest.mark.filterwarnings("ignore:StructuredLogLinear. weighting=.groups. is deprecated:FutureWarning")
@pytest.mark.parametrize("weighting", ["features", "groups"])
def test_objective_is_the_training_log_loss_plus_the_penalty(weighting):
    """objective_ = Σ −ln p over the training tokens + λ Ω(θ), θ = w / α^depth under "features"
    (a = 1), θ = w under "groups" (a = α^depth)."""
    from varorder.loglinear import prox as P

    vocab, _, flat, lengths = small_corpus(np.random.default_rng(3), n_sentences=12)
    alpha, lam = 1.2, 0.7
    fit = StructuredLogLinear(order=3, penalty="wlt2", lam=lam, alpha=alpha, weighting=weighting, epochs=2,
                              batch_size=8).fit_ids(flat, lengths, vocab)
    model = fit.model_
    depth_scale = alpha ** model.trie.param_depth.astype(float)
    log10p, _ = model.token_log10probs(flat, lengths)
    loss = -np.log(10.0) * log10p.sum()
    theta, a = (model.weights / depth_scale, None) if weighting == "features" else (model.weights, depth_scale)
    expected = loss + lam * P.penalty_value("tree_l2", theta, parent=model.trie.param_parent, weights=a)
    assert fit.objective_ == pytest.approx(expected, rel=1e-10)
    assert fit.train_loss_ == pytest.approx(loss, rel=1e-10)


def test_restart_each_epoch_with_one_batch_per_epoch_is_plain_proximal_gradient(tmp_path):
    """restart="epoch" resets τ = δ = 1 and Z = W at each pass: with one mini-batch per pass
    every step is then the un-accelerated step 1/(L + μ)."""
    path = training_text(tmp_path)
    common = dict(order=3, penalty="wlt2", lam=0.5, epochs=3, batch_size=10**6, lipschitz=1.0, mu=0.0)
    restarted = StructuredLogLinear(restart="epoch", **common).fit(path).model_.weights
    plain = StructuredLogLinear(accelerated=False, **common).fit(path).model_.weights
    accelerated = StructuredLogLinear(**common).fit(path).model_.weights
    np.testing.assert_allclose(restarted, plain, rtol=1e-12, atol=1e-15)
    assert not np.allclose(accelerated, plain)


def test_pivot_and_heap_training_agree(tmp_path):
    path = training_text(tmp_path)
    models = [StructuredLogLinear(order=4, penalty="wltinf", lam=3.0, epochs=2, batch_size=50, prox_method=m).fit(path).model_
              for m in ("heap", "pivot")]
    np.testing.assert_allclose(models[0].weights, models[1].weights, atol=1e-12)


def test_save_load_round_trip_and_validation(tmp_path):
    path = training_text(tmp_path)
    model = StructuredLogLinear(order=3, epochs=2, batch_size=50, optimizer="adagrad").fit(path).model_
    saved = tmp_path / "model.npz"
    model.save(saved)
    assert is_loglinear_model(saved) and not is_loglinear_model(path)
    loaded = LogLinearLM.load(saved)
    text = ["the cat sat", "a dog on the mat unseen"]
    assert loaded.perplexity(text) == model.perplexity(text)
    assert loaded.params["penalty"] == "wlt2"

    arrays = dict(np.load(saved))
    from varorder.models.persist import save_model
    import json
    meta = json.loads(arrays.pop("__meta__").tobytes())
    broken = dict(arrays)
    broken["param_parent"] = broken["param_parent"].copy()
    broken["param_parent"][-1] = len(broken["param_parent"])  # a parent after its child
    save_model(tmp_path / "bad.npz", meta["kind"], meta["params"], meta["state"], broken)
    with pytest.raises(ValueError, match="bad.npz.*param_parent"):
        LogLinearLM.load(tmp_path / "bad.npz")
    broken = dict(arrays)
    broken["weights"] = broken["weights"][:-1]
    save_model(tmp_path / "short.npz", meta["kind"], meta["params"], meta["state"], broken)
    with pytest.raises(ValueError, match="short.npz.*weights"):
        LogLinearLM.load(tmp_path / "short.npz")


def test_cli_trains_and_scores(tmp_path):
    from click.testing import CliRunner

    from varorder.cli.main import main

    path = training_text(tmp_path)
    out = tmp_path / "ll.npz"
    runner = CliRunner()
    result = runner.invoke(main, ["lm", "train", str(path), "-n", "3", "-o", str(out), "--model", "loglinear",
                                  "--penalty", "wlt2", "--epochs", "2", "--optimizer", "adagrad", "--lam", "1e-4"])
    assert result.exit_code == 0, result.output
    test = tmp_path / "test.txt"
    test.write_text("the cat sat\na zebra\n")
    result = runner.invoke(main, ["lm", "score", str(out), str(test)])
    assert result.exit_code == 0, result.output
    model = LogLinearLM.load(out)
    lines = result.stdout.splitlines()
    assert lines[0] == "log10prob\ttokens\toovs"
    assert float(lines[1].split("\t")[0]) == pytest.approx(model.sentence_log10probs(model.vocabulary.encode("the cat sat".split()))[0], abs=1e-5)
    assert f"perplexity={model.perplexity(['the cat sat', 'a zebra']):.4f}" in lines[-1]


def test_cli_trains_loglinear_above_the_ngram_order_bound(tmp_path):
    """The issue's orders run to 12: the log-linear CLI takes them while n-gram models stop at 10."""
    from click.testing import CliRunner

    from varorder.cli.lm import NGRAM_MAX_ORDER
    from varorder.cli.main import main

    path = training_text(tmp_path)
    out = tmp_path / "ll12.npz"
    runner = CliRunner()
    result = runner.invoke(main, ["lm", "train", str(path), "-n", "12", "-o", str(out), "--model", "loglinear",
                                  "--epochs", "1", "--optimizer", "adagrad", "--average"])
    assert result.exit_code == 0, result.output
    model = LogLinearLM.load(out)
    assert model.order == 12 and model.params["average"] is True
    result = runner.invoke(main, ["lm", "train", str(path), "-n", str(NGRAM_MAX_ORDER + 1), "-o", str(tmp_path / "m.arpa")])
    assert result.exit_code != 0
    assert "largest order of an n-gram model" in result.output
    assert not (tmp_path / "m.arpa").exists()


def test_ngram_counts_match_counting():
    from collections import Counter

    from varorder.loglinear.trie import ngram_counts

    rng = np.random.default_rng(11)
    vocab, sentences, flat, lengths = small_corpus(rng, n_sentences=10)
    trie, positions, targets = build_trie(flat, lengths, 3, len(vocab), vocab.bos_id, vocab.eos_id)
    counted = Counter()
    for s in sentences:
        padded = [vocab.bos_id] + s + [vocab.eos_id]
        for i in range(1, len(padded)):
            for k in range(0, min(2, i) + 1):
                counted[(tuple(int(x) for x in padded[i - k:i]), int(padded[i]))] += 1
    counts = ngram_counts(trie, positions, targets)
    assert {pair: int(counts[p]) for pair, p in pairs_of(trie).items()} == dict(counted)


def _mean_objective(model, flat, lengths, lam, kind, a, theta):
    """f(θ)/n + (λ/n)·Ω_a(θ) computed from the scored probabilities, independently of the optimiser."""
    from varorder.loglinear import prox as P

    log10p, _ = model.token_log10probs(flat, lengths)
    n = len(log10p)
    return (-np.log(10.0) * log10p.sum() + lam * P.penalty_value(kind, theta, parent=model.trie.param_parent, weights=a)) / n


@pytest.mark.parametrize("seed", range(3))
def test_polish_reaches_the_l2sq_optimum_found_by_a_generic_solver(seed):
    """polish: full-batch FISTA on eq. 2 with ℓ2² (smooth, strongly convex) and w ≥ 0 ends at the
    minimum that L-BFGS-B finds on the same objective from the exact scores and gradients."""
    from scipy.optimize import minimize

    vocab, _, flat, lengths = small_corpus(np.random.default_rng(seed), n_sentences=10)
    lam = 0.5
    fit = StructuredLogLinear(order=3, penalty="l2sq", lam=lam, epochs=1, batch_size=7, optimizer="adagrad",
                              polish=3000, polish_tol=0.0).fit_ids(flat, lengths, vocab)
    model = fit.model_
    t = model.trie
    positions, targets = find_contexts(t, flat, lengths, vocab.bos_id, vocab.eos_id)
    n = len(targets)

    def objective(w):
        grad = np.zeros(t.n_params)
        f = _loss_and_grad(w, positions, targets, t.ctx_parent, t.succ_start, t.succ_word, t.succ_param,
                           model.root_param, vocab.bos_id, grad, True, np.empty(0))
        return f + lam / n * 0.5 * w @ w, grad + lam / n * w

    best = minimize(objective, np.zeros(t.n_params), jac=True, method="L-BFGS-B",
                    bounds=[(0, None)] * t.n_params, options={"ftol": 1e-15, "gtol": 1e-12, "maxiter": 20000})
    assert fit.polish_history_[-1] == pytest.approx(best.fun, rel=1e-9, abs=1e-12)
    assert fit.polish_history_[-1] <= best.fun + 1e-10
    np.testing.assert_allclose(model.weights, best.x, atol=2e-4)
    assert fit.polish_residual_ < 1e-5


@pytest.mark.filterwarnings("ignore:StructuredLogLinear. weighting=.groups. is deprecated:FutureWarning")
@pytest.mark.parametrize("penalty,weighting,free_root", [("wlt2", "features", False), ("wlt2", "groups", True),
                                                         ("ltinf", "features", False), ("wl1", "groups", False)])
def test_polish_lowers_the_objective_to_a_fixed_point_of_the_prox_step(penalty, weighting, free_root):
    """For the non-smooth penalties: every accepted FISTA iterate lowers the mean objective
    (recomputed here from the model's own scores), and the result satisfies the optimality
    condition θ = prox(θ − s∇f(θ)) to 1e-6."""
    from varorder.loglinear import prox as P

    vocab, _, flat, lengths = small_corpus(np.random.default_rng(11), n_sentences=12)
    lam, alpha = 0.8, 1.2
    common = dict(order=3, penalty=penalty, lam=lam, alpha=alpha, weighting=weighting, penalize_root=not free_root,
                  epochs=2, batch_size=9, optimizer="adagrad", average=True)
    rough = StructuredLogLinear(polish=0, **common).fit_ids(flat, lengths, vocab)
    fit = StructuredLogLinear(polish=5000, polish_tol=0.0, **common).fit_ids(flat, lengths, vocab)
    history = np.asarray(fit.polish_history_)
    assert (np.diff(history) <= 0).all()
    assert fit.polish_residual_ < 1e-6
    model = fit.model_
    kind = P.PENALTIES[penalty][0]
    scale = alpha ** model.trie.param_depth.astype(float)
    theta, a = (model.weights / scale, np.ones_like(scale)) if weighting == "features" else (model.weights, scale.copy())
    if free_root:
        a[model.trie.param_depth == 0] = 0.0
    assert history[-1] == pytest.approx(_mean_objective(model, flat, lengths, lam, kind, a, theta), rel=1e-10)
    assert history[0] == pytest.approx(rough.objective_ / len(fit.model_.token_log10probs(flat, lengths)[0]), rel=1e-10)
    assert history[-1] < history[0]


def test_cli_polish_gives_the_estimators_model(tmp_path):
    from click.testing import CliRunner

    from varorder.cli.main import main

    path = training_text(tmp_path)
    out = tmp_path / "ll.npz"
    result = CliRunner().invoke(main, ["lm", "train", str(path), "-n", "3", "-o", str(out), "--model", "loglinear",
                                       "--epochs", "1", "--optimizer", "adagrad", "--polish", "20"])
    assert result.exit_code == 0, result.output
    fit = StructuredLogLinear(order=3, epochs=1, optimizer="adagrad", polish=20).fit(path)
    assert len(fit.polish_history_) > 1
    np.testing.assert_array_equal(LogLinearLM.load(out).weights, fit.model_.weights)
    result = CliRunner().invoke(main, ["lm", "train", str(path), "-n", "3", "-o", str(out), "--model", "loglinear",
                                       "--polish", "-1"])
    assert result.exit_code != 0 and "--polish" in result.output


def test_group_weighting_is_deprecated():
    import warnings

    with pytest.warns(FutureWarning, match="weighting='groups' is deprecated"):
        StructuredLogLinear(weighting="groups")._validate()
    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)
        StructuredLogLinear()._validate()


@pytest.mark.parametrize("knobs", [dict(mu=1e-3, restart="epoch", polish_tol=1e-9),
                                   dict(lipschitz=3.0, accelerated=False, average=True, prox_method="pivot"),
                                   dict(lipschitz_scale=0.8, learning_rate=0.5)])
def test_solver_options_and_the_old_keywords_give_the_same_model(tmp_path, knobs):
    """The knobs that moved into ``solver=SolverOptions(...)`` still work as keywords for one
    release, with a FutureWarning, and give the same model bit for bit."""
    from varorder.base import DEPRECATED
    from varorder.loglinear import SolverOptions

    path = training_text(tmp_path)
    common = dict(order=3, penalty="wltinf" if "prox_method" in knobs else "wlt2", lam=0.5, epochs=2, batch_size=50,
                  polish=40, optimizer="adagrad" if "learning_rate" in knobs else "apg")
    new = StructuredLogLinear(solver=SolverOptions(**knobs), **common)
    old = StructuredLogLinear(**knobs, **common)
    with pytest.warns(FutureWarning, match="deprecated"):
        old.fit(path)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)  # the new spelling warns of nothing
        new.fit(path)
    assert np.array_equal(new.model_.weights, old.model_.weights)
    assert new.polish_history_ == old.polish_history_ and new.history_ == old.history_
    assert new.model_.params == old.model_.params
    assert all(new.model_.params[k] == v for k, v in knobs.items())
    # scikit-learn's convention: the parameters as given, clone rebuilds both spellings
    assert old.get_params()["solver"] is None and new.get_params()["mu"] == DEPRECATED
    from sklearn.base import clone

    for estimator in (old, new):
        copy = clone(estimator)
        assert copy.get_params().keys() == estimator.get_params().keys()
        assert all(copy.get_params()[k] == v for k, v in estimator.get_params().items())
    assert clone(old).get_params()["mu"] == old.mu and clone(new).get_params()["mu"] == DEPRECATED
    assert StructuredLogLinear().set_params(solver=SolverOptions(mu=0.1)).solver.mu == 0.1


def test_solver_options_are_checked_at_fit(tmp_path):
    from varorder.errors import ParameterError
    from varorder.loglinear import SolverOptions

    path = training_text(tmp_path)
    with pytest.raises(ParameterError, match="mu"):
        StructuredLogLinear(epochs=1, solver=SolverOptions(mu=-1.0)).fit(path)
    with pytest.raises(ParameterError, match="solver"):
        StructuredLogLinear(epochs=1, solver={"mu": 0.1}).fit(path)
    with pytest.raises(ParameterError, match="restart"), pytest.warns(FutureWarning):
        StructuredLogLinear(epochs=1, restart="sometimes").fit(path)
