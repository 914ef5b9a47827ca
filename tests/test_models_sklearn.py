"""The taggers under scikit-learn's estimator protocol: clone, GridSearchCV over c2, cross_val_score."""

from __future__ import annotations

import numpy as np
import pytest

from varorder.models.crf import CRF
from varorder.models.features import pos_features
from varorder.models.hmm import HMM
from varorder.models.memm import MEMM

sklearn = pytest.importorskip("sklearn", reason="scikit-learn is the optional extra 'sklearn'")
from sklearn.base import clone  # noqa: E402
from sklearn.model_selection import GridSearchCV, KFold, cross_val_score  # noqa: E402

_LEXICON = {"the": "DET", "a": "DET", "dog": "NOUN", "cat": "NOUN", "runs": "VERB", "sleeps": "VERB",
            "big": "ADJ", "small": "ADJ", ".": "PUNCT", "fish": "NOUN"}


def _corpus(n, seed, features=True):
    rng = np.random.default_rng(seed)
    X, y = [], []
    for _ in range(n):
        words = [str(rng.choice(["the", "a"]))]
        if rng.random() < 0.5:
            words.append(str(rng.choice(["big", "small"])))
        words += [str(rng.choice(["dog", "cat", "fish"])), str(rng.choice(["runs", "sleeps"])), "."]
        X.append(pos_features(words) if features else words)
        y.append([_LEXICON[w] for w in words])
    return X, y


@pytest.mark.parametrize("estimator", [CRF(c1=0.3, c2=0.05, max_iterations=7, random_state=3),
                                       MEMM(c2=0.2, conjoin_previous=True), HMM(alpha_emission=0.5)])
def test_clone_round_trips_parameters(estimator):
    twin = clone(estimator)
    assert type(twin) is type(estimator) and twin is not estimator
    assert twin.get_params() == estimator.get_params()
    assert "c2" in CRF().get_params() and "alpha_emission" in HMM().get_params()


def test_set_params_rejects_unknown_names_and_returns_self():
    model = CRF()
    assert model.set_params(c2=0.5, c1=0.01) is model and (model.c1, model.c2) == (0.01, 0.5)
    with pytest.raises(ValueError, match="invalid parameter 'momentum'"):
        model.set_params(momentum=1.0)
    assert "c2=0.5" in repr(model) and "max_iterations" not in repr(model)


def test_clone_of_fitted_model_is_unfitted():
    X, y = _corpus(20, 0)
    fitted = CRF(max_iterations=5).fit(X, y)
    twin = clone(fitted)
    assert not hasattr(twin, "emission_weights_")
    with pytest.raises(ValueError, match="not fitted"):
        twin.predict(X)


def test_grid_search_over_c2_refits_the_best():
    X, y = _corpus(40, 1)
    # a huge c2 shrinks every weight towards 0 and the marginals towards uniform: the mean
    # marginal of the gold tag must prefer the small c2 (whichever order the grid lists them in)
    search = GridSearchCV(CRF(max_iterations=30), {"c2": [1e4, 0.01]}, cv=KFold(3), error_score="raise",
                          scoring=_mean_gold_marginal)
    search.fit(X, y)
    assert search.best_params_ == {"c2": 0.01}
    scores = search.cv_results_["mean_test_score"]
    assert scores[1] > 0.9 and scores[0] < 0.5
    assert search.best_estimator_.c2 == 0.01
    X_test, y_test = _corpus(10, 2)
    assert search.best_estimator_.score(X_test, y_test) >= 0.95


def _mean_gold_marginal(estimator, X, y):
    marginals = estimator.predict_marginals(X)
    column = {c: k for k, c in enumerate(estimator.classes_)}
    return float(np.mean([m[t, column[tag]] for m, tags in zip(marginals, y) for t, tag in enumerate(tags)]))


@pytest.mark.parametrize("estimator", [CRF(max_iterations=20), MEMM(max_iterations=20), HMM(alpha_emission=0.1)])
def test_cross_val_score(estimator):
    X, y = _corpus(30, 4, features=not isinstance(estimator, HMM))
    scores = cross_val_score(estimator, X, y, cv=KFold(3), error_score="raise")
    assert scores.shape == (3,) and (scores >= 0.9).all()
