"""The HMM command line's library side: train, decode, score and sample time series files.

Each function reads its input (:mod:`varorder.io.series`: CSV or ``.npy``, one row per
time step, an optional sequence-id column), calls the models of
:mod:`varorder.models.gaussian_hmm`, :mod:`~varorder.models.count_hmm` and
:mod:`~varorder.models.hsmm`, and returns what the command prints; model files are the
models' npz + JSON (validated in full on load).
"""

from __future__ import annotations

import numpy as np

from varorder.errors import FormatError, ParameterError
from varorder.io.series import read_series
from varorder.models import persist
from varorder.models.count_hmm import CategoricalHMM, PoissonHMM
from varorder.models.gaussian_hmm import GaussianHMM
from varorder.models.gmm_hmm import GMMHMM
from varorder.models.hsmm import GaussianHSMM, PoissonHSMM

__all__ = ["MODEL_KINDS", "train_series_model", "load_series_model", "decode_series", "score_series",
           "sample_series"]

MODEL_KINDS = {"gaussian": GaussianHMM, "gmm": GMMHMM, "poisson": PoissonHMM, "categorical": CategoricalHMM,
               "gaussian-hsmm": GaussianHSMM, "poisson-hsmm": PoissonHSMM}


def load_series_model(path):
    """The HMM or HSMM saved at ``path`` (its kind read from the file)."""
    kind = persist.model_kind(path)
    for cls in MODEL_KINDS.values():
        if cls.__name__ == kind:
            return cls.load(path)
    raise FormatError(f"holds a {kind!r} model, not one of the series models", path=path,
                      expected=", ".join(c.__name__ for c in MODEL_KINDS.values()))


def train_series_model(input_path, output_path, *, model: str = "gaussian", sequence_column=None, **params):
    """Fit a model of kind ``model`` (a key of MODEL_KINDS) with constructor ``params`` on
    the series file and save it; returns the fitted model."""
    if model not in MODEL_KINDS:
        raise ParameterError(f"model must be one of {sorted(MODEL_KINDS)}, got {model!r}", name="model", value=model)
    series = read_series(input_path, sequence_column)
    estimator = MODEL_KINDS[model](**{k: v for k, v in params.items() if v is not None})
    estimator.fit(series.X, series.lengths)
    estimator.save(output_path)
    return estimator


def decode_series(model_path, input_path, *, sequence_column=None, algorithm: str = "viterbi",
                  probabilities: bool = False, filtered: bool = False):
    """(header, rows): per time step the sequence id, the position in it, the decoded state,
    and with ``probabilities`` the state posteriors (``filtered``: causal p(zₜ | x₁..ₜ))."""
    estimator = load_series_model(model_path)
    series = read_series(input_path, sequence_column)
    _, states = estimator.decode(series.X, series.lengths, algorithm=algorithm)
    header = ["sequence", "t", "state"]
    post = None
    if probabilities or filtered:
        post = estimator.predict_proba(series.X, series.lengths, filtered=filtered)
        header += [f"p{k}" for k in range(post.shape[1])]
    rows = []
    offset = 0
    for sid, n in zip(series.ids, series.lengths):
        for t in range(int(n)):
            row = [sid, t, int(states[offset + t])]
            if post is not None:
                row += [float(p) for p in post[offset + t]]
            rows.append(row)
        offset += int(n)
    return header, rows


def score_series(model_path, input_path, *, sequence_column=None):
    """(header, rows): log p(x) of each sequence and the total, then AIC and BIC."""
    estimator = load_series_model(model_path)
    series = read_series(input_path, sequence_column)
    rows, offset = [], 0
    total = 0.0
    for sid, n in zip(series.ids, series.lengths):
        value = estimator.score(series.X[offset:offset + int(n)])
        total += value
        rows.append([sid, int(n), float(value)])
        offset += int(n)
    rows.append(["total", int(series.lengths.sum()), float(total)])
    rows.append(["aic", "", float(estimator.aic(series.X, series.lengths))])
    rows.append(["bic", "", float(estimator.bic(series.X, series.lengths))])
    return ["sequence", "length", "log_likelihood"], rows


def sample_series(model_path, n_samples: int, *, seed=None):
    """(header, rows): ``n_samples`` time steps drawn from the model: t, state, features."""
    estimator = load_series_model(model_path)
    X, states = estimator.sample(n_samples, random_state=seed)
    X = np.asarray(X).reshape(len(states), -1)
    header = ["t", "state"] + [f"x{j}" for j in range(X.shape[1])]
    return header, [[t, int(s), *X[t].tolist()] for t, s in enumerate(states)]
