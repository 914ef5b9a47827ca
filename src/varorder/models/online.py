"""CRFsuite's online trainers for the linear-chain CRF: averaged perceptron, passive-aggressive, AROW and
ℓ2-regularised SGD, one sequence at a time, decoding and marginals from the chain engine.

All update the parameter vector θ = (W (F, K), T (K, K), start (K,), end (K,)) of
:class:`varorder.models.crf.CRF` with φ(x, y), the sequence's feature counts (token features × labels,
label bigrams, first and last label), and touch only the feature rows of the sequence at hand:

* ``ap`` — averaged perceptron (Collins, EMNLP 2002): on a wrong Viterbi path ŷ, θ += φ(x, y) − φ(x, ŷ);
  the averaged θ is returned.
* ``pa`` — passive-aggressive (Crammer et al., JMLR 2006): with d = φ(x, y) − φ(x, ŷ) and the loss
  ℓ = s(ŷ) − s(y) + √(#wrong labels) (``error_sensitive``, else 1), τ = ℓ/‖d‖² (``pa_type`` 0),
  min(c, ℓ/‖d‖²) (PA-I) or ℓ/(‖d‖² + 1/(2c)) (PA-II); θ += τ d; optionally averaged.
* ``arow`` — adaptive regularisation of weights (Crammer, Kulesza & Dredze, NIPS 2009) with a
  diagonal covariance Σ (``variance`` at the start): β = 1/(dᵀΣd + γ), μ += ℓβ Σd, Σ ← Σ − β(Σd)².
* ``l2sgd`` — SGD on Σ NLL + c2‖θ‖² with the step η_t = 1/(λ(t₀ + t)), λ = 2c2/N (Bottou 2010; CRFsuite's
  ``train_l2sgd.c``), t₀ from the initial step η₀ that ``calibration_*`` choose on a sample.

CRFsuite's stopping rules: ``ap``/``pa``/``arow`` stop when the epoch's fraction of wrong labels is
≤ ``epsilon``, ``l2sgd`` when the objective improved by < ``delta`` (relative) over ``period`` epochs, all
after at most ``max_iterations`` epochs. Sequences are visited in a seeded random order per epoch.
"""

from __future__ import annotations

import math

import numpy as np

from varorder.engine import chain as _engine

__all__ = ["ONLINE_ALGORITHMS", "train_online"]

ONLINE_ALGORITHMS = ("ap", "pa", "arow", "l2sgd")


class _Sequences:
    """Per-sequence slices of a CSR design matrix and its gold labels, with θ's layout."""

    def __init__(self, matrix, lengths, gold, K, state_mask=None, transition_mask=None, boundary=True):
        self.boundary = boundary
        self.indptr, self.indices, self.data = matrix.indptr, matrix.indices, matrix.data
        self.F, self.K = matrix.shape[1], K
        self.offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
        self.gold = gold
        self.state_mask = state_mask
        self.transition_mask = transition_mask
        F = self.F
        self.t_at, self.s_at, self.e_at = F * K, (F + K) * K, (F + K + 1) * K

    def rows(self, s):
        lo, hi = self.offsets[s], self.offsets[s + 1]
        p0, p1 = self.indptr[lo], self.indptr[hi]
        token = np.repeat(np.arange(hi - lo), np.diff(self.indptr[lo:hi + 1]))
        return token, self.indices[p0:p1], self.data[p0:p1], int(hi - lo)

    def emissions(self, theta, s):
        token, cols, vals, n = self.rows(s)
        W = theta[: self.t_at].reshape(self.F, self.K)
        E = np.zeros((n, self.K))
        np.add.at(E, token, vals[:, None] * W[cols])
        return E

    def potentials(self, theta):
        F, K = self.F, self.K
        T = theta[self.t_at:self.s_at].reshape(K, K)
        return T, theta[self.s_at:self.e_at], theta[self.e_at:]

    def features(self, s, labels, sign=1.0, out=None):
        """φ(x_s, labels) as a sparse dict {θ index: value} (accumulated into ``out``)."""
        token, cols, vals, n = self.rows(s)
        out = {} if out is None else out
        K = self.K
        idx = cols * K + labels[token]
        keep = np.ones(idx.size, dtype=bool) if self.state_mask is None else self.state_mask[cols, labels[token]]
        for i, v in zip(idx[keep].tolist(), vals[keep].tolist()):
            out[i] = out.get(i, 0.0) + sign * v
        for a, b in zip(labels[:-1].tolist(), labels[1:].tolist()):
            if self.transition_mask is None or self.transition_mask[a, b]:
                i = self.t_at + a * K + b
                out[i] = out.get(i, 0.0) + sign
        if self.boundary:
            for i in (self.s_at + int(labels[0]), self.e_at + int(labels[-1])):
                out[i] = out.get(i, 0.0) + sign
        return out

    def gold_of(self, s):
        return self.gold[self.offsets[s]:self.offsets[s + 1]]


def _viterbi(E, T, start, end):
    small = _engine.small_viterbi(E[None], T, start, end)
    if small is not None:
        return small[0][0], float(small[1][0])
    paths, scores = _engine.viterbi(_engine.prepare(E[None], T, start, end))
    return paths[0], float(scores[0])


def _difference(data, s, gold, predicted):
    d = data.features(s, gold)
    data.features(s, predicted, -1.0, d)
    keys = np.fromiter((k for k, v in d.items() if v != 0.0), dtype=np.int64)
    return keys, np.array([d[k] for k in keys.tolist()], dtype=np.float64)


def _score(theta, keys, values):
    return float(theta[keys] @ values)


def _decode_one(data, s, theta):
    gold = data.gold_of(s)
    E = data.emissions(theta, s)
    T, start, end = data.potentials(theta)
    predicted, _ = _viterbi(E, T, start, end)
    wrong = int((predicted != gold).sum())
    return gold, predicted, wrong


def _train_margin(params, data, theta, record, rng, n_params):
    """ap, pa and arow: one pass per epoch, each sequence decoded with the current weights."""
    algorithm = params["algorithm"]
    S = data.offsets.size - 1
    n_items = int(data.offsets[-1])
    total = np.zeros(n_params)  # Σ_t c_t·update (the averaging trick: mean = θ − total / count)
    count = 0.0  # examples seen: Daumé's averaging counter, final mean θ − total / (count + 1)
    variance = np.full(n_params, float(params["variance"])) if algorithm == "arow" else None
    averaging = algorithm == "ap" or (algorithm == "pa" and params["averaging"])
    epoch = 0
    for epoch in range(1, params["max_iterations"] + 1):
        wrong_total = 0
        loss_total = 0.0
        for s in rng.permutation(S).tolist():
            gold, predicted, wrong = _decode_one(data, s, theta)
            count += 1.0
            if wrong == 0:
                continue
            wrong_total += wrong
            keys, d = _difference(data, s, gold, predicted)
            if keys.size == 0:
                continue
            if algorithm == "ap":
                tau = 1.0
                loss_total += wrong
            else:
                cost = -_score(theta, keys, d) + (math.sqrt(wrong) if params["error_sensitive"] else 1.0)
                loss_total += max(cost, 0.0)
                if cost <= 0:
                    continue
                if algorithm == "pa":
                    norm2 = float(d @ d)
                    if params["pa_type"] == 0:
                        tau = cost / norm2
                    elif params["pa_type"] == 1:
                        tau = min(params["c"], cost / norm2)
                    else:
                        tau = cost / (norm2 + 0.5 / params["c"])
                else:  # arow
                    sd = variance[keys] * d
                    beta = 1.0 / (float(d @ sd) + params["gamma"])
                    theta[keys] += cost * beta * sd
                    variance[keys] -= beta * sd * sd
                    continue
            theta[keys] += tau * d
            if averaging:
                total[keys] += count * tau * d
        fraction = wrong_total / n_items
        record(epoch, theta - total / (count + 1.0) if averaging else theta, loss_total, fraction)
        if fraction <= params["epsilon"]:
            break
    if averaging:
        theta -= total / (count + 1.0)
    return epoch, "epsilon" if epoch < params["max_iterations"] else "max_iterations"


def _nll_step(data, s, theta, eta, scale):
    """One SGD step on sequence s's NLL at θ = scale·v (v is ``theta``); returns the NLL."""
    token, cols, vals, n = data.rows(s)
    K = data.K
    W = theta[: data.t_at].reshape(data.F, K)
    E = np.zeros((n, K))
    np.add.at(E, token, vals[:, None] * W[cols] * scale)
    T, start, end = (a * scale for a in data.potentials(theta))
    node, edge, logz = _engine.marginals(_engine.prepare(E[None], T, start, end), edges="sum")
    node, edge = node[0], edge[0]
    gold = data.gold_of(s)
    gold_score = E[np.arange(n), gold].sum() + T[gold[:-1], gold[1:]].sum() + start[gold[0]] + end[gold[-1]]
    residual = node.copy()
    residual[np.arange(n), gold] -= 1.0
    gW = np.zeros((cols.size, K))
    gW[:] = vals[:, None] * residual[token]
    if data.state_mask is not None:
        gW *= data.state_mask[cols]
    step = eta / scale
    np.subtract.at(W, cols, step * gW)
    gT = edge
    np.subtract.at(gT, (gold[:-1], gold[1:]), 1.0)
    if data.transition_mask is not None:
        gT = gT * data.transition_mask
    theta[data.t_at:data.s_at] -= step * gT.ravel()
    if not data.boundary:
        return float(logz[0] - gold_score)
    g_start = node[0].copy()
    g_start[gold[0]] -= 1.0
    g_end = node[-1].copy()
    g_end[gold[-1]] -= 1.0
    theta[data.s_at:data.e_at] -= step * g_start
    theta[data.e_at:] -= step * g_end
    return float(logz[0] - gold_score)


def _sgd_epochs(data, theta, order, lam, eta0, t0, n_epochs, record=None, delta=None, period=None):
    """SGD epochs with the scaling trick for the ℓ2 decay (θ = scale·v); returns (θ, objective, epochs)."""
    scale = 1.0
    t = 0
    history = []
    objective = math.inf
    epoch = 0
    for epoch in range(1, n_epochs + 1):
        loss = 0.0
        for s in order(epoch):
            eta = 1.0 / (lam * (t0 + t))
            scale *= 1.0 - eta * lam
            if scale < 1e-9:
                theta *= scale
                scale = 1.0
            loss += _nll_step(data, s, theta, eta, scale)
            t += 1
        norm2 = float(theta @ theta) * scale * scale
        objective = loss + 0.5 * lam * norm2 * (data.offsets.size - 1)
        if record is not None:
            theta_now = theta * scale
            record(epoch, theta_now, objective, float("nan"))
        history.append(objective)
        if not math.isfinite(objective):
            break
        if delta is not None and len(history) > period:
            previous = history[-1 - period]
            if (previous - objective) / max(abs(objective), 1e-300) < delta:
                break
    theta *= scale
    return theta, objective, epoch


def _train_l2sgd(params, data, theta, record, rng):
    S = data.offsets.size - 1
    lam = 2.0 * params["c2"] / S if params["c2"] > 0 else 1e-8
    # calibration (CRFsuite's): try η on a sample, grow it by `rate` while the objective improves, else shrink
    sample = rng.permutation(S)[: min(params["calibration_samples"], S)]
    eta = params["calibration_eta"]
    best_eta, best_objective = eta, math.inf
    initial = None
    trials = 0
    candidates = 0
    direction = params["calibration_rate"]
    while candidates < params["calibration_candidates"] and trials < params["calibration_max_trials"]:
        trial = np.zeros_like(theta)
        _, objective, _ = _sgd_epochs(data, trial, lambda e: sample.tolist(), lam, eta, 1.0 / (lam * eta), 1)
        if initial is None:
            zero = np.zeros_like(theta)
            initial = sum(_nll_value(data, s, zero) for s in sample.tolist())
        trials += 1
        if math.isfinite(objective) and objective < initial:
            candidates += 1
            if objective < best_objective:
                best_objective, best_eta = objective, eta
            eta *= direction
        else:
            direction = 1.0 / params["calibration_rate"]
            eta = best_eta * direction if best_objective < math.inf else eta * direction
    t0 = 1.0 / (lam * best_eta)
    theta, _, epochs = _sgd_epochs(data, theta, lambda e: rng.permutation(S).tolist(), lam, best_eta, t0,
                                   params["max_iterations"], record, params["delta"], params["period"])
    return epochs, "delta" if epochs < params["max_iterations"] else "max_iterations"


def _nll_value(data, s, theta):
    E = data.emissions(theta, s)
    T, start, end = data.potentials(theta)
    gold = data.gold_of(s)
    logz = _engine.log_partition(_engine.prepare(E[None], T, start, end))[0]
    return float(logz - E[np.arange(gold.size), gold].sum() - T[gold[:-1], gold[1:]].sum() - start[gold[0]]
                 - end[gold[-1]])


def train_online(params: dict, matrix, lengths, gold, K, record, state_mask=None, transition_mask=None):
    """Train θ with one of :data:`ONLINE_ALGORITHMS` (``params`` holds the CRF's parameters); returns
    (θ, epochs, stop reason). ``matrix`` is a CSR design matrix (scipy or its arrays)."""
    data = _Sequences(matrix, lengths, gold, K, state_mask, transition_mask, params.get("boundary_weights", True))
    n_params = (data.F + K + 2) * K
    theta = np.zeros(n_params)
    rng = np.random.default_rng(params["random_state"])
    if params["algorithm"] == "l2sgd":
        epochs, reason = _train_l2sgd(params, data, theta, record, rng)
    else:
        epochs, reason = _train_margin(params, data, theta, record, rng, n_params)
    return theta, epochs, reason
