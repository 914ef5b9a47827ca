"""Log-linear language model with structured penalties, trained by accelerated stochastic
proximal gradient (Nelakanti et al. 2013, eq. 1-2 and Algorithm 1).

Factorization: p(y | x) = exp(s_y(x)) / Σ_{v ≠ <s>} exp(s_v(x)), with
s_v(x) = Σ_{c ∈ suffixes(x), |c| < m} w[c, v] over the contexts of the
:class:`~varorder.loglinear.trie.ContextTrie` (an unseen (c, v) pair has weight zero). The
fit minimises eq. 2, Σ_i −log p(y_i | x_i) + λ Ω(w) subject to w ≥ 0 (§2.5), Ω one of the
penalties of :mod:`varorder.loglinear.prox`. As in the paper λ multiplies Ω against the
*summed* log-loss, so a λ tuned on a small split transfers to a larger one (the paper tunes on
30K words and trains on 100K); internally the steps work on the mean, with λ/n.

The softmax over the whole vocabulary is never formed per token: every token shares the
root (unigram) scores u, so with E_v = exp(u_v) precomputed once per mini-batch,
Z(x) = Σ_v E_v + Σ_{v touched by a deeper context of x} E_v (exp(δ_v) − 1) costs only the
successors of the context's suffixes; the root gradient Σ_i p_i(v) is likewise E_v·Σ_i 1/Z_i
plus corrections at the touched words. Exact, and Numba-compiled.
"""

from __future__ import annotations

import math
import os
import time
import warnings
from dataclasses import dataclass, fields

import numba as nb
import numpy as np

from varorder._progress import Progress
from varorder.base import (DEPRECATED, ParamsMixin, check_bool, check_choice, check_deprecated, check_int, check_real,
                           options_with_deprecated)
from varorder.errors import DivergenceError, FormatError, ParameterError
from varorder.lm.corpus import Vocabulary, read_corpus
from varorder.loglinear import prox as proxlib
from varorder.loglinear.trie import ContextTrie, build_trie, find_contexts
from varorder.models.optim import AdaGrad, FistaObjective, fista, fista_loop
from varorder.models.persist import check_keys, load_model, model_kind, model_loader, save_model
from varorder.engine.validate import as_rng
import varorder._numba_start  # noqa: E402,F401,I001  (Numba's cache saves locked across processes)

__all__ = ["LogLinearLM", "SolverOptions", "StructuredLogLinear", "is_loglinear_model"]

KIND = "LogLinearLM"
# default α where §6's tuning was run here (PTB train 30K / 10K, converged fits); the
# other weighted penalties default to the paper's own best α (prox.PENALTIES)
TUNED_ALPHA = {"wlt2": 1.3}
LN10 = math.log(10.0)


@nb.njit(cache=True)
def _root_scores(weights, root_param, bos_id):
    """Unigram scores u (0 for words never predicted), their max, and E = exp(u − max)."""
    V = len(root_param)
    u = np.zeros(V)
    for v in range(V):
        if root_param[v] >= 0:
            u[v] = weights[root_param[v]]
    top = -np.inf
    for v in range(V):
        if v != bos_id and u[v] > top:
            top = u[v]
    e = np.empty(V)
    base = 0.0
    for v in range(V):
        e[v] = 0.0 if v == bos_id else np.exp(u[v] - top)
        base += e[v]
    return u, top, e, base


@nb.njit(cache=True)
def _loss_and_grad(weights, positions, targets, ctx_parent, succ_start, succ_word, succ_param, root_param,
                   bos_id, grad, want_grad, out_logprob):
    """Mean −log p over ``positions`` (deepest context of each token); adds the gradient of
    the mean into ``grad`` when ``want_grad``; writes each token's natural-log probability
    into ``out_logprob`` when it is non-empty."""
    V = len(root_param)
    u, top, e, base = _root_scores(weights, root_param, bos_id)
    delta = np.zeros(V)
    touched = np.zeros(V, dtype=np.bool_)
    touched_list = np.empty(V, dtype=np.int64)
    root_correction = np.zeros(V)
    inv_z_total = 0.0
    total = 0.0
    n = len(positions)
    scale = 1.0 / n if n > 0 else 0.0
    for i in range(n):
        n_touched = 0
        c = positions[i]
        while c > 0:
            for k in range(succ_start[c], succ_start[c + 1]):
                v = succ_word[k]
                delta[v] += weights[succ_param[k]]
                if not touched[v]:
                    touched[v] = True
                    touched_list[n_touched] = v
                    n_touched += 1
            c = ctx_parent[c]
        z = base
        for t in range(n_touched):
            v = touched_list[t]
            z += e[v] * (np.exp(delta[v]) - 1.0)
        y = targets[i]
        logprob = u[y] - top + delta[y] - np.log(z)
        total -= logprob
        if len(out_logprob):
            out_logprob[i] = logprob
        if want_grad:
            inv_z = 1.0 / z
            inv_z_total += inv_z
            c = positions[i]
            while c > 0:
                for k in range(succ_start[c], succ_start[c + 1]):
                    v = succ_word[k]
                    grad[succ_param[k]] += scale * e[v] * np.exp(delta[v]) * inv_z
                    if v == y:
                        grad[succ_param[k]] -= scale
                c = ctx_parent[c]
            for t in range(n_touched):
                v = touched_list[t]
                root_correction[v] += e[v] * (np.exp(delta[v]) - 1.0) * inv_z
            if root_param[y] >= 0:
                grad[root_param[y]] -= scale
        for t in range(n_touched):
            v = touched_list[t]
            delta[v] = 0.0
            touched[v] = False
    if want_grad:
        for v in range(V):
            if root_param[v] >= 0:
                grad[root_param[v]] += scale * (e[v] * inv_z_total + root_correction[v])
    return total * scale


@nb.njit(cache=True)
def _counts_objective(weights, ctx_sel, param_sel, ctx_count, param_count, scale, ctx_parent, succ_start, succ_param,
                      param_parent, param_ctx, root_param, bos_id, grad, want_grad):
    """scale × Σ_i −log p(y_i | x_i) from counts alone, in O(selected weights + contexts + V);
    adds scale × its gradient into ``grad`` at the selected weights when ``want_grad``.

    Tokens with the same deepest context x share p(· | x), and the loss is linear in the counts:
    Σ_i −log p(y_i | x_i) = Σ_x n_x (top + log Z(x)) − Σ_p N_p w_p, with n_x the tokens whose
    deepest context is x and N_p the training count of weight p's (context, word) pair. With
    c_p = Σ of the weights on p's path to its root (the score of p's word after p's context) and
    e_p = exp(c_p − top), Z(x) = Z(parent(x)) + Σ_{p after x} (e_p − e_{parent(p)}) — one pass over
    the contexts, parents first. The gradient Σ_{x under p's context} n_x p(word | x) − N_p is
    G_p − N_p with G_p = e_p S(ctx p) + Σ_{children q} (G_q − e_p S(ctx q)), S(c) = Σ_{x under c}
    n_x / Z(x): one pass over the weights, children first (the forest is in preorder). Exactly
    the per-token :func:`_loss_and_grad` over the counted tokens, regrouped.

    ``ctx_sel`` (ascending) must hold every context on the suffix path of a counted token (all
    of them for the whole text), ``param_sel`` (ascending) every weight after those contexts:
    a shard of the text (:class:`_CountsShard`) touches only its own part of the trie."""
    u, top, e, base = _root_scores(weights, root_param, bos_id)
    P = len(param_parent)
    C = len(ctx_parent)
    ex = np.empty(P)
    cum = np.empty(P)
    total = 0.0
    for p in param_sel:
        parent = param_parent[p]
        cum[p] = weights[p] + (cum[parent] if parent >= 0 else 0.0)
        ex[p] = np.exp(cum[p] - top)
        total -= param_count[p] * weights[p]
    z = np.empty(C)
    for c in ctx_sel:
        if c == 0:
            z[0] = base
            continue
        value = z[ctx_parent[c]]
        for k in range(succ_start[c], succ_start[c + 1]):
            p = succ_param[k]
            value += ex[p] - ex[param_parent[p]]
        z[c] = value
    for c in ctx_sel:
        if ctx_count[c] > 0:
            total += ctx_count[c] * (top + np.log(z[c]))
    if want_grad:
        s = np.empty(C)
        for c in ctx_sel:
            s[c] = ctx_count[c] / z[c]
        for i in range(len(ctx_sel) - 1, -1, -1):
            c = ctx_sel[i]
            if c > 0:
                s[ctx_parent[c]] += s[c]
        g = np.empty(P)
        for p in param_sel:
            g[p] = 0.0
        for i in range(len(param_sel) - 1, -1, -1):
            p = param_sel[i]
            own = s[param_ctx[p]]
            g[p] += ex[p] * own
            parent = param_parent[p]
            if parent >= 0:
                g[parent] += g[p] - ex[parent] * own
            grad[p] += scale * (g[p] - param_count[p])
    return total * scale


@nb.njit(cache=True)
def _aggregated_loss_and_grad(weights, ctx_count, param_count, n_tokens, ctx_parent, succ_start, succ_param,
                              param_parent, param_ctx, root_param, bos_id, grad, want_grad):
    """The full-batch mean −log p and (added into ``grad``) its gradient: :func:`_counts_objective`
    over the whole trie with scale 1 / n_tokens."""
    scale = 1.0 / n_tokens if n_tokens > 0 else 0.0
    return _counts_objective(weights, np.arange(len(ctx_parent)), np.arange(len(param_parent)), ctx_count,
                             param_count, scale, ctx_parent, succ_start, succ_param, param_parent, param_ctx,
                             root_param, bos_id, grad, want_grad)


# polish stops after this many consecutive accepted iterations below polish_tol: one small
# decrease is no proof (a warm start's first steps, at the cautious step 1/L, can be tiny)
_STOP_AFTER = 3
# ... nor before this many accepted iterations (the step, which starts at 1/L and grows by 1.25
# per iteration, is then large enough for a decrease to say something)
_MIN_ITERATIONS = 20

# the penalties whose full-batch FISTA runs compiled (ℓT∞'s heap prox stays on the Python path)
_FISTA_CODES = {"l2sq": 0, "l1": 1, "tree_l2": 2}


@nb.njit(cache=True)
def _prox_code(code, v, parent, thresholds):
    if code == 0:
        for i in range(len(v)):
            v[i] /= 1.0 + thresholds[i]
    elif code == 1:
        for i in range(len(v)):
            mag = abs(v[i]) - thresholds[i]
            v[i] = (mag if v[i] > 0 else -mag) if mag > 0.0 else 0.0
    else:
        proxlib._tree_l2_kernel(v, parent, thresholds)


@nb.njit(cache=True)
def _penalty_code(code, w, parent, weights):
    if code == 0:
        total = 0.0
        for i in range(len(w)):
            total += 0.5 * weights[i] * w[i] * w[i]
        return total
    if code == 1:
        total = 0.0
        for i in range(len(w)):
            total += weights[i] * abs(w[i])
        return total
    return proxlib._tree_penalty_kernel(w, parent, weights, False)


@nb.njit(cache=True)
def _smooth(theta, feature_values, grad, want_grad, ctx_count, param_count, n_tokens, ctx_parent, succ_start,
            succ_param, param_parent, param_ctx, root_param, bos_id):
    w = theta * feature_values
    if want_grad:
        grad[:] = 0.0
    value = _aggregated_loss_and_grad(w, ctx_count, param_count, n_tokens, ctx_parent, succ_start, succ_param,
                                      param_parent, param_ctx, root_param, bos_id, grad, want_grad)
    if want_grad:
        grad *= feature_values
    return value


# the full-batch objective as the FISTA loop's hooks; ctx = (feature values, penalty code,
# penalty weights, positive, parent, threshold scratch, the objective's count tables)
@nb.njit(cache=True)
def _fista_smooth(ctx, x, grad, want_grad):
    return _smooth(x, ctx[0], grad, want_grad, *ctx[6])


@nb.njit(cache=True)
def _fista_prox_step(ctx, y, grad, step, z):
    code, penalty_weights, positive, parent, thresholds = ctx[1], ctx[2], ctx[3], ctx[4], ctx[5]
    for i in range(len(y)):
        v = y[i] - step * grad[i]
        z[i] = v if (v > 0.0 or not positive) else 0.0
        thresholds[i] = step * penalty_weights[i]
    _prox_code(code, z, parent, thresholds)


@nb.njit(cache=True)
def _fista_penalty(ctx, x):
    return _penalty_code(ctx[1], x, ctx[4], ctx[2])


_FISTA = fista_loop(FistaObjective(_fista_smooth, _fista_prox_step, _fista_penalty))


@nb.njit(cache=True)
def _fista_kernel(theta, feature_values, code, penalty_weights, lipschitz, max_iter, tol, positive, history,
                  ctx_count, param_count, n_tokens, ctx_parent, succ_start, succ_param, param_parent, param_ctx,
                  root_param, bos_id):
    """:func:`varorder.models.optim.fista`'s iterations compiled over this model's objective
    (:func:`varorder.models.optim.fista_loop`), for ℓ2², ℓ1 and ℓT2; this cached kernel
    carries the loop's code. Returns (θ, objectives written to ``history``, final step,
    stopped by tol)."""
    args = (ctx_count, param_count, n_tokens, ctx_parent, succ_start, succ_param, param_parent, param_ctx,
            root_param, bos_id)
    ctx = (feature_values, code, penalty_weights, positive, param_parent, np.empty(len(theta)), args)
    return _FISTA(ctx, theta, 1.0 / lipschitz, max_iter, tol, _STOP_AFTER, _MIN_ITERATIONS, history)


@nb.njit(cache=True)
def _gradient_step(w, grad, step, lam, node_weights, positive, out, thresholds):
    """Algorithm 1's ParamUpdate steps 1-2: w − ∇f / L, then [·]₊; zeroes ``grad``."""
    for i in range(len(w)):
        x = w[i] - step * grad[i]
        out[i] = x if (x > 0.0 or not positive) else 0.0
        thresholds[i] = lam * step * node_weights[i]
        grad[i] = 0.0


class LogLinearLM:
    """A fitted log-linear language model: vocabulary, context trie and weights.

    Scores text through the same batched interface as :class:`varorder.lm.NgramLM`
    (``token_log10probs``, ``sentence_log10probs``, ``perplexity``) so ``varorder lm score``
    takes either. It is not a back-off model and has no ARPA form.
    """

    def __init__(self, vocabulary: Vocabulary, trie: ContextTrie, weights: np.ndarray, params: dict | None = None):
        self.vocabulary = vocabulary
        self.trie = trie
        self.weights = np.ascontiguousarray(weights, dtype=np.float64)
        self.params = dict(params or {})
        self.root_param = _root_params(trie)

    @property
    def order(self) -> int:
        return self.trie.order

    def __repr__(self) -> str:
        return f"LogLinearLM(order={self.order}, {self.trie.n_params} weights, {len(self.vocabulary)} words)"

    def n_parameters(self, *, collapsed: bool = False, nonzero: bool = True) -> int:
        """Number of free parameters: non-zero weights on the trie, or nodes of the collapsed
        suffix tree (constant-value non-branching chains count once, paper Fig. 2c)."""
        if collapsed:
            values, _, _, _, _ = proxlib.collapse_chains(self.weights, self.trie.param_parent)
            return int(np.count_nonzero(values)) if nonzero else len(values)
        return int(np.count_nonzero(self.weights)) if nonzero else len(self.weights)

    def token_log10probs(self, ids, lengths=None, *, bos: bool = True, eos: bool = True):
        """log10 p of every predicted token (each word, then ``</s>``); ``(log10probs, None)``
        to mirror :meth:`varorder.lm.NgramLM.token_log10probs`."""
        if not (bos and eos):
            raise ParameterError("a log-linear model scores whole sentences (<s> ... </s>) only", name='bos', value=bos)
        ids = np.asarray(ids, dtype=np.int64)
        if lengths is None:
            lengths = np.asarray([len(ids)])
        lengths = np.asarray(lengths, dtype=np.int64)
        if int(lengths.sum()) != len(ids) or (lengths < 0).any():
            raise ParameterError(f"lengths must be non-negative and sum to len(ids) = {len(ids)}", name='lengths', value=lengths)
        if len(ids) and (ids.min() < 0 or ids.max() >= len(self.vocabulary)):
            raise ParameterError(f"word ids must lie in [0, {len(self.vocabulary)})", name='ids', value=ids)
        vocab = self.vocabulary
        positions, targets = find_contexts(self.trie, ids, lengths, vocab.bos_id, vocab.eos_id)
        out = np.empty(len(targets))
        t = self.trie
        _loss_and_grad(self.weights, positions, targets, t.ctx_parent, t.succ_start, t.succ_word, t.succ_param,
                       self.root_param, vocab.bos_id, np.empty(0), False, out)
        return out / LN10, None

    def sentence_log10probs(self, ids, lengths=None, *, bos: bool = True, eos: bool = True) -> np.ndarray:
        scores, _ = self.token_log10probs(ids, lengths, bos=bos, eos=eos)
        lengths = np.asarray([len(ids)] if lengths is None else lengths, dtype=np.int64)
        ends = np.cumsum(lengths + 1)
        cums = np.concatenate([[0.0], np.cumsum(scores)])
        return cums[ends] - cums[np.concatenate([[0], ends[:-1]])]

    def perplexity(self, sentences) -> float:
        """10^(−Σ log10 p / N) over every word and ``</s>`` (OOVs scored as ``<unk>``)."""
        if isinstance(sentences, tuple) and len(sentences) == 2 and isinstance(sentences[0], np.ndarray):
            ids, lengths = sentences
        else:
            ids, lengths = self.vocabulary.encode_sentences(s.split() if isinstance(s, str) else s for s in sentences)
        scores, _ = self.token_log10probs(ids, lengths)
        if len(scores) == 0:
            raise ParameterError("perplexity of an empty set of sentences", name='sentences', value=sentences)
        return float(10.0 ** (-scores.sum() / len(scores)))

    def distribution(self, context) -> np.ndarray:
        """p(· | context) over the whole vocabulary (``<s>`` gets 0): for tests and inspection."""
        context = [int(w) for w in context]
        V = len(self.vocabulary)
        logp = np.full(V, -np.inf)
        for v in range(V):
            if v == self.vocabulary.bos_id:
                continue
            ids = np.asarray(context + [v], dtype=np.int64)
            positions, _ = find_contexts(self.trie, ids, np.asarray([len(ids)]), self.vocabulary.bos_id, self.vocabulary.eos_id)
            out = np.empty(1)
            t = self.trie
            _loss_and_grad(self.weights, positions[len(context):len(context) + 1], np.asarray([v]), t.ctx_parent,
                           t.succ_start, t.succ_word, t.succ_param, self.root_param, self.vocabulary.bos_id,
                           np.empty(0), False, out)
            logp[v] = out[0]
        return np.exp(logp)

    # ------------------------------------------------------------------ persistence

    def save(self, path) -> None:
        """npz + JSON (no pickle), written atomically."""
        arrays = dict(self.trie.arrays())
        arrays["weights"] = self.weights
        state = {"order": self.order, "vocab_size": len(self.vocabulary), "words": list(self.vocabulary.words)}
        save_model(path, KIND, self.params, state, arrays)

    @classmethod
    @model_loader
    def load(cls, path) -> "LogLinearLM":
        """Load and fully validate a model file (FormatError naming the file otherwise)."""
        names = ("weights",) + tuple(ContextTrie(0, 0, *([np.empty(0)] * 11)).arrays())
        params, state, arrays = load_model(path, KIND, names)
        where = os.fspath(path)
        check_keys(path, "params", params, StructuredLogLinear().get_params())
        check_keys(path, "state", state, ("order", "vocab_size", "words"))
        try:
            words = state["words"]
            order = int(state["order"])
            if not isinstance(words, list) or not all(isinstance(w, str) for w in words) or len(words) != state["vocab_size"]:
                raise FormatError("the stored vocabulary is not a list of vocab_size strings")
            vocabulary = Vocabulary(words)
            if len(vocabulary) != len(words):
                raise FormatError("the stored vocabulary lacks <unk>, <s> or </s>")
            if "order" in params and params["order"] != order:
                raise FormatError(f"params.order {params['order']!r:.20} differs from state.order {order}")
        except (KeyError, TypeError, ValueError) as error:
            raise FormatError(f"{where}: bad model metadata ({error})", path=where) from None
        trie = ContextTrie.from_arrays(order, len(vocabulary), arrays, where)
        # a context never holds </s> (it ends the sentence), a predicted word is never <s>
        if (trie.ctx_word[1:] == vocabulary.eos_id).any():
            raise FormatError(f"{where}: field 'ctx_word': a context holds </s>", path=where)
        if (trie.succ_word == vocabulary.bos_id).any() or (trie.param_word == vocabulary.bos_id).any():
            raise FormatError(f"{where}: field 'succ_word'/'param_word': <s> is predicted", path=where)
        weights = arrays["weights"]
        if weights.shape != (trie.n_params,) or weights.dtype.kind != "f" or not np.isfinite(weights).all():
            raise FormatError(f"{where}: weights must be {trie.n_params} finite floats, got {weights.dtype} {weights.shape}", path=where)
        if weights.size and float(np.abs(weights).max()) > MAX_WEIGHT:
            raise FormatError(f"{where}: a weight of magnitude {float(np.abs(weights).max()):.3g} (> {MAX_WEIGHT:g}, "
                              f"a factor e^{MAX_WEIGHT:g} on a word): the file is damaged", path=where)
        return cls(vocabulary, trie, np.asarray(weights, dtype=np.float64), params)


# A weight is a log-potential added to a word's score; penalised training keeps them
# near 1 (a log-odds of 20 is already p ~ 1e-9). Beyond this a file is damaged, and the scores of
# the model would overflow to infinite perplexity.
MAX_WEIGHT = 1e2


def _root_params(trie: ContextTrie) -> np.ndarray:
    root = np.full(trie.vocab_size, -1, dtype=np.int64)
    k = slice(trie.succ_start[0], trie.succ_start[1])
    root[trie.succ_word[k]] = trie.succ_param[k]
    return root


def is_loglinear_model(path) -> bool:
    """Whether ``path`` is a varorder model file holding a log-linear LM (cheap check first:
    an npz archive starts with the zip magic bytes)."""
    with open(path, "rb") as handle:
        if handle.read(4) != b"PK\x03\x04":
            return False
    try:
        return model_kind(path) == KIND
    except FormatError:
        return False


@dataclass(frozen=True)
class SolverOptions:
    """The rarely changed knobs of :class:`StructuredLogLinear`'s optimisers (its ``solver``
    parameter); checked when the estimator fits.

    Attributes
    ----------
    lipschitz : float, optional
        L of Algorithm 1 (step 1/L). Default: the bound ½‖φ‖² on the Lipschitz constant of the
        mean log-loss's gradient (the softmax Hessian is at most ½ I, and a word's score sums
        at most m weights: ½‖φ‖² = m/2, or ½Σ_{d<m} α^{2d} with ``weighting="features"``),
        times ``lipschitz_scale``.
    lipschitz_scale : float
        Multiplies the default L (< 1 takes longer steps than the worst-case bound allows).
    mu : float
        μ of Algorithm 1: the step is 1/γ with γ = L + μ/δ, δ = τ² shrinking like 4/t², so
        μ > 0 damps the stochastic-gradient noise that the accelerated updates otherwise
        amplify (our copy of the paper prints line 6's Z-update illegibly; we use the FISTA
        form Z ← Z + (W − W̄)/τ, which with γ fixed is Nesterov's method).
    restart : str
        ``"none"`` — Algorithm 1 as printed: τ and δ run on across epochs, so γ = L + μ/δ
        grows like μt²/4 and after a few thousand mini-batches the step 1/γ is tens of times
        smaller than 1/L (the iterates freeze before convergence).
        ``"epoch"`` — restart the acceleration at each pass (τ = δ = 1, Z = W): the usual
        remedy for momentum on noisy gradients (O'Donoghue & Candès 2015), an extension.
    accelerated : bool
        Algorithm 1's accelerated (Hu, Kwok & Pan 2009) updates; False gives plain stochastic
        proximal gradient.
    learning_rate : float
        η of ``adagrad``.
    average : bool
        An extension, not the paper's: return the mean of the iterates of the last epoch
        (Polyak-Ruppert tail averaging) instead of the last iterate, which carries the noise
        of its last mini-batches; the objective is convex, so the mean is a feasible point (w ≥ 0
        is kept) whose objective is at most the iterates' mean objective.
    polish_tol : float
        Stop polishing once an iteration lowers the mean objective by less than
        ``polish_tol`` × its value in three consecutive iterations, after at least 20
        (``polish_converged_`` says whether it did, before the cap).
    prox_method : str
        For ℓT∞: ``heap`` (Algorithm 4) or ``pivot`` (Algorithm 3 on the trie).
    """

    lipschitz: float | None = None
    lipschitz_scale: float = 1.0
    mu: float = 1e-5
    accelerated: bool = True
    restart: str = "none"
    learning_rate: float = 1.0
    average: bool = False
    polish_tol: float = 1e-6
    prox_method: str = "heap"


_SOLVER_KEYS = tuple(field.name for field in fields(SolverOptions))


class StructuredLogLinear(ParamsMixin):
    """Estimator: penalised maximum likelihood for :class:`LogLinearLM` (paper eq. 2).

    Parameters are keyword-only and checked by :meth:`fit` (a ParameterError names the parameter
    and the value passed). The fitted model is ``model_`` (a :class:`LogLinearLM`).

    Parameters
    ----------
    order : int
        n-gram order m (contexts of up to m − 1 words).
    penalty : str
        One of :data:`varorder.loglinear.prox.PENALTIES`: ``l2sq``, ``l1``, ``lt2``,
        ``ltinf`` and their weighted forms ``wl2sq``, ``wl1``, ``wlt2``, ``wltinf``.
    lam : float
        Regularisation λ against the summed log-loss (paper eq. 2). Default 1: what §6's
        procedure (:mod:`varorder.loglinear.tune`, ``lm train --tune``) chooses for wℓT2 on a
        30K / 10K split of PTB train at orders 2-12 with the converged fits of the default
        ``polish`` (docs/notes/30-loglinear-tuning.md).
    alpha : float, optional
        Depth weighting α; defaults to 1.3 for wℓT2 (chosen by the same tuning on PTB; the
        paper's 1.1 was tuned on AP News) and to the paper's best value for the other weighted
        penalties (0.5 wℓ2², 0.7 wℓ1, 0.85 wℓT∞), 1 for the unweighted ones.
    weighting : str
        How α enters. ``"features"`` — the paper's §6 ("weights varying as α^m for a feature at
        depth m", "weighted features"): the feature of a context of length m (root = the empty
        context, m = 0) takes the value α^m instead of 1, and the penalty acts unweighted on
        the raw weights θ; the model's effective weight is w = α^m θ, so in terms of w a deep
        feature is penalised *less* when α > 1 (the paper: its best wℓT2 α = 1.1 > 1 shows the
        unweighted ℓT2 "was over-penalising features at larger depths"). ``"groups"`` — an
        extension (deprecated: a FutureWarning): the feature values stay 1 and the penalty puts
        a_j = α^depth(j) on the group (or coordinate) of node j, so α > 1 penalises deep
        groups *more*: the reciprocal direction of the paper's sentence.
    penalize_root : bool
        True (the paper's trie: the empty context is its root and is penalised like every
        node). False — an extension — leaves the unigram weights unpenalised (a_root = 0: the
        root's group and coordinate get no threshold, every deeper group keeps its own), as
        the bias of a maximum-entropy model usually is.
    positive : bool
        Constrain w ≥ 0 (§2.5, default as in the paper).
    batch_size, epochs : int
        Mini-batches of ``batch_size`` tokens (400 in the paper), ``epochs`` passes.
    optimizer : str
        ``"apg"`` — Algorithm 1, the paper's method (accelerated when ``accelerated``). With
        one global step 1/L the rarely seen n-gram weights move by about 1/(L·batch) per
        occurrence, so it needs many epochs. ``"adagrad"`` — an extension, not the paper's:
        per-weight steps η/√(Σ g²) (Duchi, Hazan & Singer 2011) followed by the prox with
        per-node thresholds λ·step_j·a_j. For ℓ1 and ℓ2² that is exactly AdaGrad's composite
        mirror-descent step; for the tree penalties it is a heuristic (the exact prox in a
        non-uniform metric has no closed form), so results under it are reported apart.
    polish : int
        After the stochastic passes, at most this many iterations
        of full-batch FISTA (Beck & Teboulle 2009) on the same objective (eq. 2, w ≥ 0 kept),
        warm-started from the stochastic result: step found by backtracking on the sufficient-
        decrease condition and allowed to grow again by 1.25 per iteration, momentum restarted
        whenever the objective would rise (O'Donoghue & Candès 2015), so each accepted iterate
        lowers it. The returned model is then (near) the objective's optimum for λ, α, not a
        stochastic approximation of it; ``polish_history_`` holds the objective (mean form,
        f/n + (λ/n)Ω) per iteration and ``polish_residual_`` the final fixed-point residual
        ‖θ − prox(θ − s∇f(θ))‖∞ / s (zero exactly at the optimum). On by default (20000
        iterations at most, stopping at ``polish_tol`` = 1e-6): the model is then eq.
        2's optimum for λ, as the tuned default λ assumes; ``polish=0`` gives Algorithm 1 alone.
    solver : SolverOptions, optional
        The optimiser's rarely changed knobs (:class:`SolverOptions`: ``lipschitz``,
        ``lipschitz_scale``, ``mu``, ``restart``, ``accelerated``, ``learning_rate``,
        ``average``, ``polish_tol``, ``prox_method``); None: their defaults. The same names
        as keywords of this constructor still work for one release (a FutureWarning).
    seed : int
        Shuffling seed.
    n_shards, n_jobs, executor : the full-batch objective of ``polish`` summed over ``n_shards``
        contiguous shards of sentences (about equal token counts) on the executor that
        :func:`varorder.parallel.as_executor` builds from ``executor`` or ``n_jobs``
        (:class:`varorder.models.sharded.ShardedObjective`; default 1 shard serially, 8 with an
        executor). Each shard holds its tokens' counts and evaluates only the contexts on their
        suffix paths; the sums are added in shard order, so the model is the same on any executor
        and worker count, and within float rounding (~1e-15 relative per evaluation) of the serial
        one-piece fit, which runs the compiled FISTA loop instead.
    min_count : int
        Rarer training words become ``<unk>``.
    """

    _requires_y = False  # fit takes the data alone (scikit-learn's target tag)

    def __init__(self, *, order: int = 3, penalty: str = "wlt2", lam: float = 1.0, alpha: float | None = None,
                 positive: bool = True, batch_size: int = 400, epochs: int = 10, optimizer: str = "apg",
                 weighting: str = "features", penalize_root: bool = True, polish: int = 20000,
                 solver: SolverOptions | None = None, seed: int = 0, min_count: int = 1, progress: bool = False,
                 n_shards: int | None = None, n_jobs: int | None = None, executor=None,
                 lipschitz=DEPRECATED, lipschitz_scale=DEPRECATED, mu=DEPRECATED, accelerated=DEPRECATED,
                 restart=DEPRECATED, learning_rate=DEPRECATED, average=DEPRECATED, polish_tol=DEPRECATED,
                 prox_method=DEPRECATED):
        self.order = order
        self.penalty = penalty
        self.lam = lam
        self.alpha = alpha
        self.positive = positive
        self.batch_size = batch_size
        self.epochs = epochs
        self.optimizer = optimizer
        self.weighting = weighting
        self.penalize_root = penalize_root
        self.polish = polish
        self.solver = solver
        self.seed = seed
        self.min_count = min_count
        self.progress = progress
        self.n_shards = n_shards
        self.n_jobs = n_jobs
        self.executor = executor
        # the keywords that moved into ``solver`` (kept for one release)
        self.lipschitz = lipschitz
        self.lipschitz_scale = lipschitz_scale
        self.mu = mu
        self.accelerated = accelerated
        self.restart = restart
        self.learning_rate = learning_rate
        self.average = average
        self.polish_tol = polish_tol
        self.prox_method = prox_method

    def _solver(self) -> SolverOptions:
        """``solver`` with the deprecated keywords passed put in (a FutureWarning)."""
        return options_with_deprecated(self, "solver", SolverOptions, _SOLVER_KEYS, stacklevel=4)

    # the model's own parameters, recorded in the fitted LogLinearLM (progress is not one)
    # (the solver's among them, in this order: the saved model's metadata)
    _MODEL_PARAMS = ("order", "penalty", "lam", "alpha", "positive", "batch_size", "epochs", "lipschitz",
                     "lipschitz_scale", "mu", "accelerated", "weighting", "restart", "penalize_root", "optimizer",
                     "learning_rate", "average", "polish", "polish_tol", "prox_method", "seed", "min_count")

    def _validate(self) -> SolverOptions:
        """Check the parameters; returns the solver options in force."""
        solver = self._solver()
        check_int(self, "order", 1)
        check_choice(self, "penalty", tuple(proxlib.PENALTIES))
        check_real(self, "lam", 0)
        check_real(self, "alpha", 0, exclusive_minimum=True, allow_none=True)
        check_int(self, "batch_size", 1)
        check_int(self, "epochs", 0)
        check_real(solver, "lipschitz", 0, exclusive_minimum=True, allow_none=True)
        check_real(solver, "lipschitz_scale", 0, exclusive_minimum=True)
        check_real(solver, "mu", 0)
        check_choice(self, "optimizer", ("apg", "adagrad"))
        check_real(solver, "learning_rate", 0, exclusive_minimum=True)
        check_choice(solver, "prox_method", ("heap", "pivot"))
        check_choice(self, "weighting", ("features", "groups"))
        check_deprecated(self, "weighting", {"groups": "weighting='features' is the paper's depth weighting (§6)"})
        check_choice(solver, "restart", ("none", "epoch"))
        check_int(self, "polish", 0)
        check_real(solver, "polish_tol", 0)
        check_int(self, "min_count", 1)
        check_int(self, "n_shards", 1, allow_none=True)
        from varorder.parallel import check_n_jobs

        check_n_jobs(self)
        for name in ("positive", "penalize_root", "progress"):
            check_bool(self, name)
        for name in ("accelerated", "average"):
            check_bool(solver, name)
        return solver

    def fit(self, paths) -> "StructuredLogLinear":
        """Fit on text files (one sentence per line, ``.gz`` read transparently)."""
        self._validate()
        vocabulary, ids, lengths = read_corpus(paths, min_count=self.min_count)
        if len(lengths) == 0:
            names = [os.fspath(paths)] if isinstance(paths, (str, os.PathLike)) else [os.fspath(p) for p in paths]
            raise FormatError(f"{', '.join(names)}: no sentences to train on (empty, or blank lines only)")
        with warnings.catch_warnings():  # the deprecations were told once, above
            warnings.filterwarnings("ignore", ".*deprecated and will be removed", FutureWarning)
            return self.fit_ids(ids, lengths, vocabulary)

    def fit_ids(self, ids, lengths, vocabulary: Vocabulary, *, on_epoch=None, init=None) -> "StructuredLogLinear":
        """Fit on encoded sentences; ``on_epoch(epoch, model)`` is called after each pass
        (the model then holds the current weights), e.g. to follow validation perplexity.
        ``init``: a starting point in the optimised variable (``theta_`` of an earlier fit on
        the same sentences and order — a warm start along a λ path), zeros by default."""
        solver = self._validate()
        kind, best_alpha = proxlib.PENALTIES[self.penalty]
        best_alpha = TUNED_ALPHA.get(self.penalty, best_alpha)
        alpha = best_alpha if self.alpha is None else float(self.alpha)
        start = time.perf_counter()
        trie, positions, targets = build_trie(ids, lengths, self.order, len(vocabulary), vocabulary.bos_id, vocabulary.eos_id)
        model = LogLinearLM(vocabulary, trie, np.zeros(trie.n_params), {**{k: getattr(solver if k in _SOLVER_KEYS else self, k) for k in self._MODEL_PARAMS}, "alpha": alpha})
        depth_scale = proxlib.depth_weights(trie.param_depth, alpha)
        if self.weighting == "features" and alpha != 1.0:  # θ is optimised, w = α^depth ⊙ θ scores (see ``weighting``)
            feature_values, node_weights = depth_scale, np.ones(trie.n_params)
        else:
            feature_values, node_weights = None, depth_scale
        if not self.penalize_root:
            node_weights = np.where(trie.param_depth == 0, 0.0, node_weights)
        # ½‖φ‖²: the softmax Hessian is at most ½ I and a token's features are its m suffixes
        feature_norm2 = (sum(alpha ** (2 * d) for d in range(self.order)) if feature_values is not None
                         else float(self.order))
        L = solver.lipschitz if solver.lipschitz is not None else solver.lipschitz_scale * feature_norm2 / 2.0
        self.lipschitz_ = float(L)
        self.alpha_ = alpha
        self.build_seconds_ = time.perf_counter() - start
        self.history_ = []
        self.prox_seconds_ = 0.0
        rng = as_rng(self.seed)
        if init is None:
            W = np.zeros(trie.n_params)
        else:
            W = np.array(init, dtype=np.float64)
            if W.shape != (trie.n_params,) or not np.isfinite(W).all():
                raise ParameterError(f"init must hold {trie.n_params} finite weights (an earlier fit's theta_ on the same "
                                     f"sentences and order), got shape {W.shape}", name='init', value=init)
            if self.positive:
                np.maximum(W, 0.0, out=W)
        Z = W.copy()
        grad = np.zeros(trie.n_params)
        adagrad = AdaGrad(step_size=solver.learning_rate, delta=1e-8)  # δ: only guards the first step's 0/0
        W_new = np.zeros(trie.n_params)
        thresholds = np.zeros(trie.n_params)
        sizes = proxlib.preorder_sizes(trie.param_parent)
        tau, delta = 1.0, 1.0
        n = len(targets)
        lam_mean = self.lam / max(n, 1)
        steps = 0
        iterator = Progress(range(self.epochs), enabled=self.progress, desc=f"loglinear {self.penalty} order {self.order}",
                            unit="epoch")
        tail_sum = np.zeros(trie.n_params) if solver.average and self.epochs > 0 else None
        tail_steps = 0
        effective = np.zeros(trie.n_params) if feature_values is not None else None
        for epoch in iterator:
            if solver.restart == "epoch" and epoch > 0:
                tau, delta = 1.0, 1.0
                Z[:] = W
            order_ = rng.permutation(n)
            epoch_loss = 0.0
            for first in range(0, n, self.batch_size):
                batch = order_[first:first + self.batch_size]
                accelerated = solver.accelerated and self.optimizer == "apg"
                W_bar = (1.0 - tau) * W + tau * Z if accelerated else W
                if effective is not None:
                    np.multiply(W_bar, feature_values, out=effective)
                loss = _loss_and_grad(W_bar if effective is None else effective, positions[batch], targets[batch], trie.ctx_parent, trie.succ_start,
                                      trie.succ_word, trie.succ_param, model.root_param, vocabulary.bos_id, grad,
                                      True, np.empty(0))
                epoch_loss += loss * len(batch)
                if effective is not None:  # chain rule through w = α^depth ⊙ θ
                    grad *= feature_values
                if self.optimizer == "adagrad":
                    adagrad.prox_half_step(W_bar, grad, W_new, thresholds, lam_mean, node_weights, self.positive)
                else:
                    gamma = L + solver.mu / delta if accelerated else L
                    _gradient_step(W_bar, grad, 1.0 / gamma, lam_mean, node_weights, self.positive, W_new, thresholds)
                tick = time.perf_counter()
                proxlib.prox_inplace(kind, W_new, trie.param_parent, thresholds, method=solver.prox_method, sizes=sizes)
                self.prox_seconds_ += time.perf_counter() - tick
                if accelerated:
                    Z += (W_new - W_bar) / tau
                    tau_next = (math.sqrt(delta * delta + 4.0 * delta) - delta) / 2.0
                    delta = (1.0 - tau_next) * delta
                    tau = tau_next
                W, W_new = W_new, W
                steps += 1
                if tail_sum is not None and epoch == self.epochs - 1:
                    tail_sum += W
                    tail_steps += 1
            self.history_.append(epoch_loss / max(n, 1))
            if on_epoch is not None:
                model.weights = W if feature_values is None else W * feature_values
                on_epoch(len(self.history_), model)
        theta = tail_sum / tail_steps if tail_steps else W
        self.polish_history_, self.polish_residual_, self.polish_converged_ = [], None, False
        smooth = _FullBatchLoss(positions, targets, trie, model.root_param, vocabulary.bos_id, feature_values)
        if self.polish and (self.executor is not None or self.n_jobs not in (None, 1) or self.n_shards not in (None, 1)):
            from varorder.models.sharded import shard_plan

            executor, plan = shard_plan(self, np.asarray(lengths, dtype=np.int64) + 1)  # + 1: each sentence's </s>
            if plan is not None:
                smooth = _FullBatchLoss(positions, targets, trie, model.root_param, vocabulary.bos_id, feature_values,
                                        shards=[tokens for _, tokens in plan], executor=executor)
        if self.polish:
            self._check_converged(theta if feature_values is None else theta * feature_values, solver)
            try:
                theta = self._polish(theta, smooth, kind, trie.param_parent, lam_mean * node_weights, sizes, L, solver)
            except ZeroDivisionError:  # backtracking halved the step to zero: no finite step decreases
                self._diverged("the full-batch polish found no step that decreases the objective", solver)
        self._check_converged(theta if feature_values is None else theta * feature_values, solver)
        model.weights = theta if feature_values is None else theta * feature_values
        self.theta_ = theta
        # eq. 2 at the returned point, in the optimised variable θ (w itself under "groups")
        self.train_loss_ = n * smooth.value(theta)
        self.objective_ = self.train_loss_ + self.lam * proxlib.penalty_value(kind, theta, parent=trie.param_parent,
                                                                              weights=node_weights)
        self.steps_ = steps
        self.fit_seconds_ = time.perf_counter() - start
        self.model_ = model
        return self

    def _check_converged(self, weights, solver) -> None:
        """A :class:`~varorder.errors.DivergenceError` naming the step's option when the weights left the
        finite numbers or ran past what a model file may hold (``MAX_WEIGHT``: ``load`` would refuse it)."""
        finite = np.isfinite(weights).all()
        largest = float(np.abs(weights).max()) if weights.size and finite else 0.0
        if finite and largest <= MAX_WEIGHT and all(math.isfinite(h) for h in self.history_):
            return
        self._diverged("non-finite weights" if not finite else f"a weight of magnitude {largest:.3g} (> {MAX_WEIGHT:g})", solver)

    def _diverged(self, what: str, solver):
        if self.optimizer == "adagrad":
            option, value = "learning_rate", solver.learning_rate
        elif solver.lipschitz is not None:
            option, value = "lipschitz", solver.lipschitz
        else:
            option, value = "lipschitz_scale", solver.lipschitz_scale
        advice = "lower it" if option == "learning_rate" else "raise it"
        raise DivergenceError(f"the log-linear fit diverged ({what}): its step is too long ({option}={value!r}; "
                              f"{advice})", option=option)

    def _polish(self, theta, smooth, kind, parent, penalty_weights, sizes, lipschitz, solver):
        """Full-batch FISTA with backtracking and function-value restart (see ``polish``),
        minimising smooth(θ) + Σ-form penalty with per-node weights ``penalty_weights``
        (= λ/n · a) subject to θ ≥ 0 when ``positive``."""

        def prox_step(point, grad, step):
            out = point - step * grad
            if self.positive:
                np.maximum(out, 0.0, out=out)
            proxlib.prox_inplace(kind, out, parent, step * penalty_weights, method=solver.prox_method, sizes=sizes)
            return out

        def penalty(values):
            return proxlib.penalty_value(kind, values, parent=parent, weights=penalty_weights)

        if kind in _FISTA_CODES and smooth.sharded is None:  # the same iterations, compiled
            history = np.empty(self.polish + 1)
            fv = smooth.feature_values if smooth.feature_values is not None else np.ones(len(theta))
            x, h, step, converged = _fista_kernel(
                np.ascontiguousarray(theta, dtype=np.float64), fv, _FISTA_CODES[kind], penalty_weights,
                float(lipschitz), int(self.polish), float(solver.polish_tol), bool(self.positive), history, *smooth.args)
            _, grad_x = smooth.value_and_grad(x)
            self.polish_residual_ = float(np.abs(x - prox_step(x, grad_x, step)).max() / step)
            self.polish_history_ = history[:h].tolist()
            self.polish_converged_ = bool(converged)
            return x
        x, history, step, self.polish_converged_ = fista(
            smooth.value, smooth.value_and_grad, prox_step, penalty, theta, 1.0 / lipschitz, self.polish,
            tol=solver.polish_tol, stop_after=_STOP_AFTER, min_iterations=_MIN_ITERATIONS)
        _, grad_x = smooth.value_and_grad(x)
        self.polish_residual_ = float(np.abs(x - prox_step(x, grad_x, step)).max() / step)
        self.polish_history_ = history
        return x


class _CountsShard:
    """One shard of the text for the full-batch objective: the counts of its tokens and the part
    of the trie they touch (every context on their suffix paths and the weights after those
    contexts); ``theta -> (summed −log p, its gradient in θ)`` (:class:`ShardedObjective`'s protocol)."""

    def __init__(self, positions, targets, trie, root_param, bos_id, feature_values):
        from varorder.loglinear.trie import ngram_counts

        positions = np.asarray(positions, dtype=np.int64)
        self.ctx_count = np.bincount(positions, minlength=trie.n_contexts).astype(np.float64)
        self.param_count = ngram_counts(trie, positions, targets).astype(np.float64)
        on_path = _context_closure(positions, trie.ctx_parent)
        self.ctx_sel = np.flatnonzero(on_path)
        self.param_sel = np.flatnonzero(on_path[trie.param_ctx])
        self.trie = (trie.ctx_parent, trie.succ_start, trie.succ_param, trie.param_parent, trie.param_ctx)
        self.root_param, self.bos_id = root_param, bos_id
        self.feature_values = feature_values

    def __call__(self, theta):
        w = theta if self.feature_values is None else theta * self.feature_values
        grad = np.zeros(len(theta))
        value = _counts_objective(w, self.ctx_sel, self.param_sel, self.ctx_count, self.param_count, 1.0, *self.trie,
                                  self.root_param, self.bos_id, grad, True)
        if self.feature_values is not None:
            grad *= self.feature_values
        return value, grad


@nb.njit(cache=True)
def _context_closure(positions, ctx_parent):
    mark = np.zeros(len(ctx_parent), dtype=np.bool_)
    for c in positions:
        while c >= 0 and not mark[c]:
            mark[c] = True
            c = ctx_parent[c]
    return mark


class _FullBatchLoss:
    """The mean training log-loss f(θ)/n over every token and its gradient in θ (w = θ, or
    α^depth ⊙ θ under ``weighting="features"``): the smooth part that ``polish`` minimises,
    evaluated from context and n-gram counts (:func:`_aggregated_loss_and_grad`), so one
    evaluation costs O(weights), not O(tokens × successors). With ``shards`` (token slices) and
    an ``executor``, it is the sum of :class:`_CountsShard` objectives on the executor
    (:class:`varorder.models.sharded.ShardedObjective`, added in shard order)."""

    def __init__(self, positions, targets, trie, root_param, bos_id, feature_values, *, shards=None, executor=None):
        from varorder.loglinear.trie import ngram_counts

        self.n_tokens = float(len(targets))
        self.feature_values = feature_values
        self.n_params = trie.n_params
        self.sharded = None
        if shards is not None:
            from varorder.models.sharded import ShardedObjective

            self.sharded = ShardedObjective([_CountsShard(positions[k], targets[k], trie, root_param, bos_id, feature_values)
                                             for k in shards], executor)
            return
        ctx_count = np.bincount(np.asarray(positions, dtype=np.int64), minlength=trie.n_contexts).astype(np.float64)
        param_count = ngram_counts(trie, positions, targets).astype(np.float64)
        self.args = (ctx_count, param_count, self.n_tokens, trie.ctx_parent, trie.succ_start, trie.succ_param,
                     trie.param_parent, trie.param_ctx, root_param, bos_id)

    def _weights(self, theta):
        return theta if self.feature_values is None else theta * self.feature_values

    def value(self, theta) -> float:
        if self.sharded is not None:
            return self.value_and_grad(theta)[0]
        return _aggregated_loss_and_grad(self._weights(theta), *self.args, np.empty(0), False)

    def value_and_grad(self, theta):
        if self.sharded is not None:
            value, grad = self.sharded(np.ascontiguousarray(theta, dtype=np.float64))
            scale = 1.0 / self.n_tokens if self.n_tokens > 0 else 0.0
            return value * scale, grad * scale
        grad = np.zeros(self.n_params)
        value = _aggregated_loss_and_grad(self._weights(theta), *self.args, grad, True)
        if self.feature_values is not None:
            grad *= self.feature_values
        return value, grad
