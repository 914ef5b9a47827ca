"""Numba kernels over a factor graph: incremental local scores, Gibbs / Metropolis–Hastings
sweeps, simulated annealing, and SampleRank epochs.

Factorization: that of :mod:`varorder.factorgraph.graph`. Changing one variable yₜ changes
only the factors that touch t — its unary factor, the neighbour factors T[yₜ₋₁, yₜ] and
T[yₜ, yₜ₊₁] (start/end at the sequence edges), its skip factors and the (up to three)
second-order windows containing t — so the *local score* ℓₜ(k) = Σ_{factors ∋ t} with yₜ = k
gives s(y with yₜ = k) − s(y with yₜ = k′) = ℓₜ(k) − ℓₜ(k′) without a full rescore.
Every non-unary factor is an indicator of one parameter, so a factor's contribution is θ at
one index and the feature difference of a one-variable change is sparse.

Proposals: Gibbs draws yₜ from p(yₜ | y₋ₜ) ∝ exp(ℓₜ(·)/τ); Metropolis–Hastings proposes a
uniform other label and accepts with min(1, exp(Δℓ/τ)). Simulated annealing for MAP runs
one sweep per temperature of a decreasing schedule, then iterated conditional modes until
no variable changes.

SampleRank (Wick, Rohanimanesh, Culotta & McCallum, NIPS 2009 workshop; as used by Bouchard,
GREC-NEG 2010): walk the chain with these proposals; for each proposal y → y′ compare the
model's ranking Δs = s(y′) − s(y) with the truth objective's Δo = o(y′) − o(y) (o = −Σ
loss[gold, y], token accuracy by default); when Δo ≠ 0 and the better configuration is not
scored above the worse one by more than ``margin``, update θ += τ (φ(better) − φ(worse)) with
the perceptron step τ = η or the MIRA step τ = min(C, (|Δo| − gap) / ‖Δφ‖²). Averaged
parameters are kept by the usual lazy trick: u += c·τ·Δφ at step c, average = θ − u / c.

Every kernel draws from Numba's generator seeded at entry, so a seed fixes the result.
"""

from __future__ import annotations

import numba as nb
import numpy as np
import varorder._numba_start  # noqa: E402,F401,I001  (Numba's cache saves locked across processes)

__all__ = ["local_scores", "sample_sweeps", "anneal", "samplerank_epoch", "GIBBS", "METROPOLIS", "PERCEPTRON", "MIRA"]

GIBBS, METROPOLIS = 0, 1
PERCEPTRON, MIRA = 0, 1


@nb.njit(cache=True)
def _terms(t, k, y, G, L, idx):
    """θ indices of the non-unary factors touching t when yₜ = k (each an indicator); returns the count."""
    prev, nxt, skip_ptr, skip_other, skip_first = G[3], G[4], G[5], G[6], G[7]
    K, o_T, o_start, o_end, o_S, o_U = L[0], L[1], L[2], L[3], L[4], L[5]
    n = 0
    p = prev[t]
    q = nxt[t]
    if p < 0:
        idx[n] = o_start + k
    else:
        idx[n] = o_T + y[p] * K + k
    n += 1
    if q < 0:
        idx[n] = o_end + k
    else:
        idx[n] = o_T + k * K + y[q]
    n += 1
    if o_U >= 0:
        if p >= 0 and prev[p] >= 0:
            idx[n] = o_U + (y[prev[p]] * K + y[p]) * K + k
            n += 1
        if p >= 0 and q >= 0:
            idx[n] = o_U + (y[p] * K + k) * K + y[q]
            n += 1
        if q >= 0 and nxt[q] >= 0:
            idx[n] = o_U + (k * K + y[q]) * K + y[nxt[q]]
            n += 1
    if o_S >= 0:
        for m in range(skip_ptr[t], skip_ptr[t + 1]):
            o = skip_other[m]
            if skip_first[m]:
                idx[n] = o_S + k * K + y[o]
            else:
                idx[n] = o_S + y[o] * K + k
            n += 1
    return n


@nb.njit(cache=True)
def _local_all(t, y, theta, G, L, out, idx):
    """ℓₜ(k) for every label k into out (K,)."""
    indptr, indices, data = G[0], G[1], G[2]
    K = L[0]
    for k in range(K):
        out[k] = 0.0
    for p in range(indptr[t], indptr[t + 1]):
        base = indices[p] * K
        v = data[p]
        for k in range(K):
            out[k] += v * theta[base + k]
    for k in range(K):
        n = _terms(t, k, y, G, L, idx)
        for i in range(n):
            out[k] += theta[idx[i]]


@nb.njit(cache=True)
def _local_one(t, k, y, theta, G, L, idx):
    indptr, indices, data = G[0], G[1], G[2]
    K = L[0]
    total = 0.0
    for p in range(indptr[t], indptr[t + 1]):
        total += data[p] * theta[indices[p] * K + k]
    n = _terms(t, k, y, G, L, idx)
    for i in range(n):
        total += theta[idx[i]]
    return total


@nb.njit(cache=True)
def _scratch_size(G, L):
    skip_ptr = G[5]
    degree = 0
    for t in range(skip_ptr.size - 1):
        degree = max(degree, skip_ptr[t + 1] - skip_ptr[t])
    return 5 + degree


@nb.njit(cache=True)
def _gibbs_draw(scores, weights, temperature, K):
    top = scores[0]
    for k in range(1, K):
        top = max(top, scores[k])
    total = 0.0
    for k in range(K):
        weights[k] = np.exp((scores[k] - top) / temperature)
        total += weights[k]
    u = np.random.random() * total
    acc = 0.0
    for k in range(K):
        acc += weights[k]
        if u < acc:
            return k
    return K - 1


@nb.njit(cache=True)
def _propose(t, y, theta, G, L, kind, temperature, scores, idx):
    """(proposed label, Δℓ = ℓₜ(k′) − ℓₜ(yₜ), MH acceptance) for variable t."""
    K = L[0]
    k = y[t]
    if kind == 0:
        _local_all(t, y, theta, G, L, scores, idx)
        k_new = _gibbs_draw(scores, scores[K:], temperature, K)
        return k_new, scores[k_new] - scores[k], True
    k_new = np.random.randint(0, K - 1)
    if k_new >= k:
        k_new += 1
    delta = _local_one(t, k_new, y, theta, G, L, idx) - _local_one(t, k, y, theta, G, L, idx)
    accept = delta >= 0.0 or np.random.random() < np.exp(delta / temperature)
    return k_new, delta, accept


@nb.njit(cache=True)
def local_scores(t, y, theta, G, L):
    """ℓₜ(·) (K,) of variable t in configuration y."""
    out = np.empty(L[0])
    idx = np.empty(_scratch_size(G, L), dtype=np.int64)
    _local_all(t, y, theta, G, L, out, idx)
    return out


@nb.njit(cache=True)
def sample_sweeps(y, theta, G, L, n_sweeps, thin, temperature, kind, seed, out):
    """Run n_sweeps in-order sweeps from y (updated in place); record y every ``thin`` sweeps into out."""
    np.random.seed(seed)
    N = y.size
    K = L[0]
    scores = np.empty(2 * K)  # local scores, then Gibbs weights
    idx = np.empty(_scratch_size(G, L), dtype=np.int64)
    row = 0
    for sweep in range(n_sweeps):
        for t in range(N):
            k_new, _, accept = _propose(t, y, theta, G, L, kind, temperature, scores, idx)
            if accept:
                y[t] = k_new
        if (sweep + 1) % thin == 0 and row < out.shape[0]:
            out[row, :] = y
            row += 1
    return row


@nb.njit(cache=True)
def anneal(y, theta, G, L, temperatures, kind, seed, max_greedy_sweeps):
    """Simulated annealing from y (in place): one sweep per temperature, then greedy sweeps to a local optimum.

    Returns the number of greedy sweeps run (the last one changed nothing unless the cap was hit).
    """
    np.random.seed(seed)
    N = y.size
    K = L[0]
    scores = np.empty(2 * K)  # local scores, then Gibbs weights
    idx = np.empty(_scratch_size(G, L), dtype=np.int64)
    for temperature in temperatures:
        for t in range(N):
            k_new, _, accept = _propose(t, y, theta, G, L, kind, temperature, scores, idx)
            if accept:
                y[t] = k_new
    sweeps = 0
    changed = True
    while changed and sweeps < max_greedy_sweeps:
        changed = False
        sweeps += 1
        for t in range(N):
            _local_all(t, y, theta, G, L, scores, idx)
            best = y[t]
            for k in range(K):
                if scores[k] > scores[best]:
                    best = k
            if best != y[t]:
                y[t] = best
                changed = True
    return sweeps


@nb.njit(cache=True)
def _sparse_update(t, better, worse, y, G, L, theta, u, step, c, idx):
    """θ += step·(φ(yₜ = better) − φ(yₜ = worse)), and u += c·step·(same)."""
    indptr, indices, data = G[0], G[1], G[2]
    K = L[0]
    for p in range(indptr[t], indptr[t + 1]):
        base = indices[p] * K
        change = step * data[p]
        theta[base + better] += change
        theta[base + worse] -= change
        u[base + better] += c * change
        u[base + worse] -= c * change
    n = _terms(t, better, y, G, L, idx)
    for i in range(n):
        theta[idx[i]] += step
        u[idx[i]] += c * step
    n = _terms(t, worse, y, G, L, idx)
    for i in range(n):
        theta[idx[i]] -= step
        u[idx[i]] -= c * step


@nb.njit(cache=True)
def _difference_norm2(t, better, worse, y, G, L, idx, idx2):
    """‖φ(yₜ = better) − φ(yₜ = worse)‖² (unary columns are distinct per token; indicators may coincide)."""
    indptr, data = G[0], G[2]
    total = 0.0
    for p in range(indptr[t], indptr[t + 1]):
        total += 2.0 * data[p] * data[p]
    n_plus = _terms(t, better, y, G, L, idx)
    n_minus = _terms(t, worse, y, G, L, idx2)
    # merge the two indicator lists into (index, coefficient) counts: O(m²), m ≤ 5 + skip degree
    for i in range(n_plus):
        first = True
        for j in range(i):
            if idx[j] == idx[i]:
                first = False
        if not first:
            continue
        coefficient = 0.0
        for j in range(n_plus):
            if idx[j] == idx[i]:
                coefficient += 1.0
        for j in range(n_minus):
            if idx2[j] == idx[i]:
                coefficient -= 1.0
        total += coefficient * coefficient
    for i in range(n_minus):
        first = True
        for j in range(i):
            if idx2[j] == idx2[i]:
                first = False
        seen_in_plus = False
        for j in range(n_plus):
            if idx[j] == idx2[i]:
                seen_in_plus = True
        if not first or seen_in_plus:
            continue
        coefficient = 0.0
        for j in range(n_minus):
            if idx2[j] == idx2[i]:
                coefficient += 1.0
        total += coefficient * coefficient
    return total


@nb.njit(cache=True)
def _record(log, i, t, k, k_new, delta_model, delta_objective, updated):
    """Row i of a SampleRank log (when it has rows): (t, yₜ, k′, Δs, Δo, updated)."""
    if log.shape[0] > 0:
        log[i, 0] = t
        log[i, 1] = k
        log[i, 2] = k_new
        log[i, 3] = delta_model
        log[i, 4] = delta_objective
        log[i, 5] = 1.0 if updated else 0.0


@nb.njit(cache=True)
def samplerank_epoch(order, y, gold, loss, theta, u, c, G, L, rule, step_size, C, margin, kind, temperature,
                     pairs, seed, log):
    """One SampleRank pass: one proposal per entry of ``order`` (token ids), y updated in place.

    ``pairs`` chooses the ranked pair at each step: 0 (Wick et al. 2009) the current
    configuration and the proposal; 1 (the neighbourhood rule of FACTORIE's SampleRank
    trainer, an extension) the model's best and the objective's best of the K configurations
    that differ from y at most in yₜ (objective ties broken by model score).

    Returns (c after the pass, proposals with Δo ≠ 0, updates, accepted changes, objective
    o(y) after the pass). When log has rows, row i records (t, yₜ, k′, Δs, Δo, updated).
    """
    np.random.seed(seed)
    K = L[0]
    scores = np.empty(2 * K)  # local scores, then Gibbs weights
    size = _scratch_size(G, L)
    idx = np.empty(size, dtype=np.int64)
    idx2 = np.empty(size, dtype=np.int64)
    n_ranked = 0
    n_updates = 0
    n_moves = 0
    for i in range(order.size):
        t = order[i]
        c += 1.0
        k = y[t]
        k_new, delta_model, accept = _propose(t, y, theta, G, L, kind, temperature, scores, idx)
        updated = False
        if pairs == 0:
            delta_objective = loss[gold[t], k] - loss[gold[t], k_new]
            ranked = k_new != k and delta_objective != 0.0
            if delta_objective > 0.0:
                better, worse, gap = k_new, k, delta_model
            else:
                better, worse, gap = k, k_new, -delta_model
        else:
            if kind != 0:  # Metropolis–Hastings computed only two local scores
                _local_all(t, y, theta, G, L, scores, idx)
            g = gold[t]
            model_best = 0
            objective_best = 0
            for j in range(1, K):
                if scores[j] > scores[model_best]:
                    model_best = j
                if loss[g, j] < loss[g, objective_best] or (
                        loss[g, j] == loss[g, objective_best] and scores[j] > scores[objective_best]):
                    objective_best = j
            delta_objective = loss[g, model_best] - loss[g, objective_best]
            ranked = delta_objective != 0.0
            better, worse, gap = objective_best, model_best, scores[objective_best] - scores[model_best]
            delta_model = -gap
        if ranked:
            n_ranked += 1
            if gap <= margin:
                if rule == 0:
                    step = step_size
                else:
                    norm2 = _difference_norm2(t, better, worse, y, G, L, idx, idx2)
                    step = min(C, (abs(delta_objective) - gap) / norm2) if norm2 > 0.0 else 0.0
                if step > 0.0:
                    _sparse_update(t, better, worse, y, G, L, theta, u, step, c, idx)
                    updated = True
                    n_updates += 1
        _record(log, i, t, k, k_new, delta_model, delta_objective, updated)
        if accept and k_new != k:
            y[t] = k_new
            n_moves += 1
    objective = 0.0
    for t in range(y.size):
        objective -= loss[gold[t], y[t]]
    return c, n_ranked, n_updates, n_moves, objective
