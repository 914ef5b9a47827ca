"""Second-order linear-chain CRF: label pairs as the states of a first-order chain, exact on the one engine.

Factorization (the second-order CRF of e.g. Sha & Pereira, NAACL 2003 §3; Thede & Harper 1999 for HMMs):

    s(x, y) = start[y₁] + Σₜ xₜ·W[:, yₜ] + Σₜ₌₂ⁿ (T[yₜ₋₁, yₜ] + U[yₜ₋₂, yₜ₋₁, yₜ]) + end[yₙ],

with y₀ = BOS, so U (K + 1, K, K) also scores the first bigram after the sentence start. As a first-order
chain over pair states (yₜ₋₁, yₜ) (Rabiner's state expansion): state (i, j) emits xₜ·W[:, j]; the
move (i, j) → (j, k) scores T[j, k] + U[i, j, k] and every other move −∞; only (BOS, j) may start, with
start[j]; (i, j) ends with end[j]. Every label path is exactly one state path with the same score, so the
chain engine's log Z, marginals (summed over the first label of the pair), Viterbi and k-best are the
second-order model's, exactly. With U = 0 the model is the first-order :class:`~varorder.models.crf.CRF`.

``constraints`` (a tag scheme, e.g. ``"BIO"``) keeps as states only the pairs the scheme allows (and
as starts only the labels it allows first): fewer states (≈ 260 instead of 462 for GUM's 21 BIO labels)
and outputs that are always valid. The training tags must then be valid in the scheme. Training runs
the pair chain on the engine's sparse-move chain (:mod:`varorder.engine.chain_sparse`): S·K products per
position, not the S² of a dense S × S matrix.
"""

from __future__ import annotations

import numpy as np

from varorder.engine import chain_sparse
from varorder.errors import ParameterError
from varorder.models import persist
from varorder.models.crf import CRF, ChainObjective
from varorder.models.features import FeatureIndexer, csr_times_dense
from varorder.models.sequences import ChainDecoding, ChunkPlan, decode_viterbi, numba_threads, token_mask

__all__ = ["SecondOrderCRF", "PairStates", "SecondOrderObjective"]

NEG_INF = -np.inf


class PairStates:
    """The pair states (previous label or BOS = K, label) of K labels and the allowed moves between them."""

    def __init__(self, K: int, allowed=None, allowed_start=None):
        self.K = K
        pairs = [(K, j) for j in range(K) if allowed_start is None or allowed_start[j]]
        pairs += [(i, j) for i in range(K) for j in range(K) if allowed is None or allowed[i, j]]
        self.previous = np.array([p[0] for p in pairs], dtype=np.int64)
        self.label = np.array([p[1] for p in pairs], dtype=np.int64)
        self.S = len(pairs)
        self.index = {p: s for s, p in enumerate(pairs)}
        # moves a = (i, j) → b = (j, k)
        src, dst = [], []
        by_previous: dict[int, list[int]] = {}
        for s, (i, j) in enumerate(pairs):
            if i < K:
                by_previous.setdefault(i, []).append(s)
        for a, (_, j) in enumerate(pairs):
            for b in by_previous.get(j, []):
                src.append(a)
                dst.append(b)
        self.src = np.array(src, dtype=np.int64)
        self.dst = np.array(dst, dtype=np.int64)
        self.bigram = self.label[self.src] * K + self.label[self.dst]  # T index (j, k)
        self.trigram = (self.previous[self.src] * K + self.label[self.src]) * K + self.label[self.dst]  # U index
        self.is_start = self.previous == K
        self.to_label = np.zeros((self.S, K))  # state marginals @ to_label = label marginals
        self.to_label[np.arange(self.S), self.label] = 1.0

    def potentials(self, T, U, start, end):
        """(transitions (S, S), start (S,), end (S,)) of the pair chain."""
        moves = np.full((self.S, self.S), NEG_INF)
        moves[self.src, self.dst] = T.ravel()[self.bigram] + U.ravel()[self.trigram]
        first = np.where(self.is_start, start[self.label], NEG_INF)
        return moves, first, end[self.label].copy()

    def encode(self, gold: np.ndarray, plan: ChunkPlan, where: str = "y") -> np.ndarray:
        """The gold pair state of every token (ValueError if a gold pair is not a state: invalid in the scheme)."""
        previous = np.full(gold.size, self.K, dtype=np.int64)
        prev_rows, next_rows = plan.next_pairs()
        previous[next_rows] = gold[prev_rows]
        out = np.empty(gold.size, dtype=np.int64)
        for t, pair in enumerate(zip(previous.tolist(), gold.tolist())):
            state = self.index.get(pair)
            if state is None:
                raise ParameterError(f"{where}: token {t} has the label pair {pair} that the constraints forbid")
            out[t] = state
        return out


class SecondOrderObjective(ChainObjective):
    """Σ NLL of a second-order CRF and its gradient in θ = (W, T, start, end, U), by the pair chain.

    The pair chain's moves are sparse (a state (i, j) moves only to the states (j, ·)), so the engine's
    sparse-move chain (:mod:`varorder.engine.chain_sparse`) runs it: M = S·K products per position
    instead of the dense chain's S², and no (n, S) emission array (states emit their label's score).
    """

    def __init__(self, X, lengths, gold, n_labels, states: PairStates):
        super().__init__(X, lengths, gold, n_labels)
        self.states = states
        self.moves = chain_sparse.SparseMoves(states.label, states.src, states.dst, n_labels)
        gold_states = states.encode(gold, self.plan)
        K = n_labels
        prev_rows, next_rows = self.plan.next_pairs()
        # U's gold counts: (y_{t-2} or BOS, y_{t-1}, y_t) for every t ≥ 2 (1-based), BOS where t = 2
        self.gold_trigram = (states.previous[gold_states[prev_rows]] * K + gold[prev_rows]) * K + gold[next_rows]
        self.empirical_U = np.bincount(self.gold_trigram, minlength=(K + 1) * K * K).astype(np.float64)
        first = self.plan.first_tokens()
        if not states.is_start[gold_states[first]].all():
            raise ParameterError("y: a sentence opens with a label the constraints forbid first")

    @property
    def n_params(self) -> int:
        K = self.K
        return (self.F + K + 2) * K + (K + 1) * K * K

    def unpack(self, theta):
        F, K = self.F, self.K
        base = (F + K + 2) * K
        W, T, start, end = super().unpack(theta[:base])
        return W, T, start, end, theta[base:].reshape(K + 1, K, K)

    def __call__(self, theta):
        W, T, start, end, U = self.unpack(theta)
        st = self.states
        move_scores = T.ravel()[st.bigram] + U.ravel()[st.trigram]
        first = np.where(st.is_start, start[st.label], NEG_INF)
        last = end[st.label]
        scores = csr_times_dense(self.X, W)
        grad = np.empty_like(theta)
        gW, gT, g_start, g_end, gU = self.unpack(grad)
        node_label = np.zeros_like(scores)
        move_counts = np.zeros(self.moves.M)
        log_z = 0.0
        for _, lengths, flat_index, valid in self.plan.chunks:
            logz, node, counts = chain_sparse.marginals(self.moves, scores[flat_index], move_scores, first, last,
                                                        lengths)
            log_z += logz.sum()
            node_label[flat_index[valid]] = node[valid]
            move_counts += counts
        K = self.K
        gT[:] = np.bincount(st.bigram, weights=move_counts, minlength=K * K).reshape(K, K) - self.empirical_T
        gU[:] = (np.bincount(st.trigram, weights=move_counts, minlength=(K + 1) * K * K)
                 - self.empirical_U).reshape(K + 1, K, K)
        g_start[:] = node_label[self.plan.first_tokens()].sum(axis=0) - self.empirical_start
        g_end[:] = node_label[self.plan.last_tokens()].sum(axis=0) - self.empirical_end
        csr_times_dense(self.XT, node_label, out=gW)
        gW -= self.empirical_W
        gold_score = float(scores[np.arange(self.gold.size), self.gold].sum()
                           + T[self.gold_prev, self.gold_next].sum() + U.ravel()[self.gold_trigram].sum()
                           + start[self.gold_first].sum() + end[self.gold_last].sum())
        return float(log_z - gold_score), grad


class SecondOrderCRF(CRF):
    """A second-order linear-chain CRF with the API of :class:`~varorder.models.crf.CRF` (see the module doc).

    Parameters: those of :class:`~varorder.models.crf.CRF` (L-BFGS training only;
    ``all_possible_transitions=False`` also keeps only the label trigrams seen), ``constraints``: None,
    or a tag scheme whose invalid label pairs are not states, and ``c2_second_order``: the ℓ2 coefficient
    on the second-order weights U (None: ``c2``, as every other weight).

    Learned attributes: the CRF's, and ``second_order_weights_`` (K + 1, K, K): U[i, j, k] for labels
    i (K: the sentence start), j, k in a row.

    Examples
    --------
    >>> from varorder.models.crf2 import SecondOrderCRF
    >>> X = [[{"w": w} for w in s.split()] for s in ("Anna Smith sang", "Paris sleeps", "Anna sang")]
    >>> y = [["B-PER", "I-PER", "O"], ["B-LOC", "O"], ["B-PER", "O"]]
    >>> crf = SecondOrderCRF(constraints="BIO", max_iterations=50).fit(X, y)
    >>> crf.predict([[{"w": "Anna"}, {"w": "Smith"}, {"w": "sleeps"}]])
    [['B-PER', 'I-PER', 'O']]
    """

    _MODEL_KIND = "CRF2"

    def __init__(self, *, constraints: str | None = None, c1: float = 0.0, c2: float = 0.1,
                 max_iterations: int = 100, delta: float = 1e-5, period: int = 10, min_feature_count: int = 1,
                 features: str | None = None, n_threads: int | None = None, verbose: bool = False,
                 all_possible_states: bool = True, all_possible_transitions: bool = True,
                 boundary_weights: bool = False, c2_second_order: float | None = None):
        super().__init__(c1=c1, c2=c2, max_iterations=max_iterations, delta=delta, period=period,
                         min_feature_count=min_feature_count, features=features, n_threads=n_threads,
                         verbose=verbose, all_possible_states=all_possible_states,
                         all_possible_transitions=all_possible_transitions, boundary_weights=boundary_weights)
        self.constraints = constraints
        self.c2_second_order = c2_second_order

    def _check_params(self):
        from varorder.base import check_real

        super()._check_params()
        check_real(self, "c2_second_order", 0, allow_none=True)
        if self.algorithm != "lbfgs":
            raise ParameterError(f"SecondOrderCRF trains with algorithm='lbfgs', not {self.algorithm!r}")
        if self.constraints is not None:
            from varorder.io.schemes import canonical_scheme

            canonical_scheme(self.constraints)

    def _pair_states(self, K) -> PairStates:
        if self.constraints is None:
            return PairStates(K)
        from varorder.io.schemes import allowed_transitions

        allowed, allowed_start, _ = allowed_transitions([str(c) for c in self.classes_], self.constraints)
        return PairStates(K, allowed, allowed_start)

    def _n_params(self, K):
        return (self.n_features_in_ + K + 2) * K + (K + 1) * K * K

    def _sparse_mask(self, matrix, lengths, gold, K, partial):
        """The first-order mask, then U: every trigram, or with ``all_possible_transitions=False`` only the
        label trigrams (BOS first where the bigram opens the sentence) seen in training."""
        first = super()._sparse_mask(matrix, lengths, gold, K, partial)
        if self.all_possible_transitions:
            if first is None:
                return None
            trigrams = np.ones((K + 1) * K * K, dtype=bool)
        else:
            prev, nxt = ChunkPlan(lengths).next_pairs()
            before = np.full(gold.size, K, dtype=np.int64)
            before[nxt] = gold[prev]
            trigrams = np.zeros((K + 1) * K * K, dtype=bool)
            trigrams[(before[prev] * K + gold[prev]) * K + gold[nxt]] = True
        if first is None:
            first = np.ones((self.n_features_in_ + K + 2) * K, dtype=bool)
        return np.concatenate([first, trigrams])

    def _objective(self, matrix, lengths, gold, K):
        if self.n_shards not in (None, 1) or self.executor is not None or self.n_jobs not in (None, 1):
            raise ParameterError("SecondOrderCRF trains on one shard (no n_shards / n_jobs / executor)")
        self._states = self._pair_states(K)
        objective = SecondOrderObjective(matrix, lengths, gold, K, self._states)
        if self.c2_second_order is None or self.c2_second_order == self.c2:
            return objective
        extra = self.c2_second_order - self.c2  # the ℓ2 coefficient on U becomes c2_second_order
        base = (self.n_features_in_ + K + 2) * K

        def penalised(theta):
            f, g = objective(theta)
            U = theta[base:]
            f += extra * float(U @ U)
            g[base:] += 2.0 * extra * U
            return f, g

        return penalised

    def _set_params(self, theta, K):
        F = self.n_features_in_
        base = (F + K + 2) * K
        super()._set_params(theta[:base], K)
        self.second_order_weights_ = theta[base:].reshape(K + 1, K, K).copy()

    def fit(self, X, y, X_dev=None, y_dev=None):
        from varorder.models.sequences import is_partial

        if is_partial(y):
            raise ParameterError("SecondOrderCRF: partial labels are not supported (train a first-order CRF)")
        return super().fit(X, y, X_dev, y_dev)

    # -- the pair chain at prediction ------------------------------------------------------------

    def _state_chain(self, matrix, lengths):
        K = len(self.classes_)
        states = getattr(self, "_states", None)
        if states is None or states.K != K:
            states = self._states = self._pair_states(K)
        plan = ChunkPlan(lengths)
        scores = csr_times_dense(matrix, self.emission_weights_)[:, states.label]
        moves, first, last = states.potentials(self.transition_weights_, self.second_order_weights_,
                                               self.start_weights_, self.end_weights_)
        return states, plan, scores, moves, first, last

    def _predict_design(self, matrix, plan):
        states, plan, scores, moves, first, last = self._state_chain(matrix, plan.lengths)
        ids = states.label[decode_viterbi(plan, scores, moves, first, last, constrained=True)].tolist()
        classes, offsets = self.classes_, plan.offsets.tolist()
        return [[classes[i] for i in ids[offsets[s]:offsets[s + 1]]] for s in range(plan.lengths.size)]

    def _constrained_chain(self, X, allowed, constraints):
        matrix, lengths = self._design(X, csr=False)
        states, plan, scores, moves, first, last = self._state_chain(matrix, lengths)
        free = (moves, first, last)
        if constraints is not None:  # forbid every move into a pair the scheme forbids, and bad first / last labels
            from varorder.io.schemes import allowed_transitions

            K = len(self.classes_)
            ok_t, ok_start, ok_end = allowed_transitions([str(c) for c in self.classes_], constraints)
            pair_ok = np.where(states.previous < K, ok_t[np.minimum(states.previous, K - 1), states.label],
                               ok_start[states.label])
            moves = np.where(pair_ok[None, :], moves, NEG_INF)
            first = np.where(pair_ok, first, NEG_INF)
            last = np.where(ok_end[states.label], last, NEG_INF)
        mask = token_mask(self.classes_, allowed, lengths)
        if mask is not None:
            mask = mask[:, states.label]
        self._decode_states = states
        return plan, scores, free, (moves, first, last), mask

    def _labels(self, ids, plan):
        return super()._labels(self._decode_states.label[ids], plan)

    def predict_kbest(self, X, k: int = 5, allowed=None, constraints: str | None = None):
        self._check_fitted()
        with numba_threads(self.n_threads):
            taggings, scores = ChainDecoding.predict_kbest(_StateView(self), X, k, allowed, constraints)
        label, classes = self._decode_states.label, self.classes_
        return [[[classes[label[s]] for s in tagging] for tagging in seq] for seq in taggings], scores

    predict_kbest.__doc__ = ChainDecoding.predict_kbest.__doc__

    def predict_marginals(self, X, allowed=None, constraints: str | None = None) -> list[np.ndarray]:
        self._check_fitted()
        with numba_threads(self.n_threads):
            nodes = self._constrained_marginals(X, allowed, constraints)
        return [node @ self._decode_states.to_label for node in nodes]

    # -- persistence ------------------------------------------------------------------------------

    def save(self, path) -> None:
        self._check_fitted()
        params = self.get_params()
        persist.save_model(path, self._MODEL_KIND, params, {
            "classes": self.classes_, "feature_names": self.feature_names_, "n_features_in": self.n_features_in_,
        }, {"emission_weights": self.emission_weights_, "transition_weights": self.transition_weights_,
            "start_weights": self.start_weights_, "end_weights": self.end_weights_,
            "second_order_weights": self.second_order_weights_})

    @classmethod
    @persist.model_loader
    def load(cls, path) -> "SecondOrderCRF":
        params, state, arrays = persist.load_model(path, cls._MODEL_KIND, (
            "emission_weights", "transition_weights", "start_weights", "end_weights", "second_order_weights"))
        model = cls(**params)
        model.classes_ = persist.check_labels(path, "classes", state["classes"])
        model.feature_names_ = persist.check_labels(path, "feature_names", state["feature_names"], allow_none=True)
        model.n_features_in_ = int(state["n_features_in"])
        model._indexer = None if model.feature_names_ is None else FeatureIndexer.from_names(model.feature_names_)
        K, F = len(model.classes_), model.n_features_in_
        persist.check_shapes(path, arrays, {"emission_weights": (F, K), "transition_weights": (K, K),
                                            "start_weights": (K,), "end_weights": (K,),
                                            "second_order_weights": (K + 1, K, K)})
        for name, value in arrays.items():
            setattr(model, name + "_", value)
        return model


class _StateView:
    """A second-order CRF seen by :class:`~varorder.models.sequences.ChainDecoding` as a chain over its states."""

    def __init__(self, model):
        self._model = model
        self.classes_ = list(range(model._pair_states(len(model.classes_)).S))

    def _constrained_chain(self, X, allowed, constraints):
        return self._model._constrained_chain(X, allowed, constraints)
