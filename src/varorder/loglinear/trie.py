"""Suffix trie of training contexts and the parameter forest of a log-linear language model
(Nelakanti et al. 2013, §2.2).

Factorization: the feature map φ_m(x) indicates every suffix of the context x of length
0 .. m−1 that was seen as a context in training (the context is reset at each sentence:
``<s> w_1 .. w_{i−1}`` predicts ``w_i``, and ``</s>`` ends the sentence). A suffix is a
node of the *context trie*: the root is the empty context, and the child of node c by word
u is the context ``u c`` (one more word to the left). The weights form a forest: one tree
per predicted word y, whose nodes are the contexts c after which y was seen (every shorter
suffix of such a c was seen before y too, so the set is prefix-closed); a (context, word)
pair never seen has weight zero under the positivity constraint (§2.5), so only the n-grams
of the training text carry parameters. The forest is stored in depth-first preorder, the
layout :mod:`varorder.loglinear.prox` works on; contexts are numbered level by level with
each node's children contiguous and sorted by word, so a lookup is a binary search per word.

The collapsed suffix tree (Props. 1-2) of a weight vector is
:func:`varorder.loglinear.prox.collapse_chains` applied to this forest.
"""

from __future__ import annotations

from dataclasses import dataclass

import numba as nb
import numpy as np
import varorder._numba_start  # noqa: E402,F401,I001  (Numba's cache saves locked across processes)

from varorder.errors import FormatError, ParameterError

__all__ = ["ContextTrie", "build_trie", "find_contexts", "ngram_counts", "sentence_positions"]


@dataclass
class ContextTrie:
    """Context trie plus the (context, word) parameter forest.

    Attributes
    ----------
    order : int
        n-gram order m: contexts hold at most m − 1 words.
    vocab_size : int
    ctx_parent, ctx_word, ctx_depth : arrays over contexts
        Parent context (−1 for the root, context 0), the word that extends the parent to the
        left, and the context length.
    child_start : int64 array (n_contexts + 1)
        Children of context c are the contexts ``child_start[c] .. child_start[c + 1] − 1``,
        sorted by ``ctx_word``.
    succ_start, succ_word, succ_param : CSR over contexts
        The words seen after each context and the index of their weight.
    param_parent, param_word, param_ctx, param_depth : arrays over weights
        The weight forest in depth-first preorder (one tree per predicted word).
    """

    order: int
    vocab_size: int
    ctx_parent: np.ndarray
    ctx_word: np.ndarray
    ctx_depth: np.ndarray
    child_start: np.ndarray
    succ_start: np.ndarray
    succ_word: np.ndarray
    succ_param: np.ndarray
    param_parent: np.ndarray
    param_word: np.ndarray
    param_ctx: np.ndarray
    param_depth: np.ndarray

    @property
    def n_contexts(self) -> int:
        return len(self.ctx_parent)

    @property
    def n_params(self) -> int:
        return len(self.param_parent)

    def arrays(self) -> dict[str, np.ndarray]:
        return {name: getattr(self, name) for name in _ARRAYS}

    @classmethod
    def from_arrays(cls, order: int, vocab_size: int, arrays: dict[str, np.ndarray], where: str = "model") -> "ContextTrie":
        """Rebuild from stored arrays, checking every structural invariant (FormatError naming
        ``where`` and the broken array otherwise)."""
        def stored(name):
            # integers of any width as int64, the kernels' type (an int32 array would compile them
            # again, for seconds); a uint64 beyond int64 wraps negative and fails validate's ranges
            array = np.asarray(arrays[name])
            return array.astype(np.int64) if array.dtype.kind in "iu" else array

        trie = cls(order, vocab_size, **{name: stored(name) for name in _ARRAYS})
        trie.validate(where)
        return trie

    def validate(self, where: str = "model") -> None:
        def fail(message):
            raise FormatError(f"{where}: {message}")

        n_ctx, n_par, V = self.n_contexts, self.n_params, self.vocab_size
        if self.order < 1 or V < 1:
            fail(f"order {self.order} and vocabulary size {V} must be positive")
        for name, length in (("ctx_parent", n_ctx), ("param_parent", n_par), ("ctx_word", n_ctx), ("ctx_depth", n_ctx),
                             ("child_start", n_ctx + 1), ("succ_start", n_ctx + 1), ("succ_word", n_par), ("succ_param", n_par),
                             ("param_word", n_par), ("param_ctx", n_par), ("param_depth", n_par)):
            array = getattr(self, name)
            if array.ndim != 1 or len(array) != length or array.dtype.kind not in "iu":
                fail(f"array {name!r} must be 1-d integers of length {length}, got {array.dtype} {array.shape}")
        if n_ctx == 0 or self.ctx_parent[0] != -1 or self.ctx_word[0] != -1 or self.ctx_depth[0] != 0:
            fail("context 0 must be the root (parent −1, word −1, depth 0)")
        index = np.arange(n_ctx)
        if ((self.ctx_parent[1:] < 0) | (self.ctx_parent[1:] >= index[1:])).any() or (np.diff(self.ctx_parent) < 0).any():
            fail("ctx_parent must be non-decreasing with parent < child")
        if (self.ctx_depth[1:] != self.ctx_depth[self.ctx_parent[1:]] + 1).any() or self.ctx_depth.max() > self.order - 1:
            fail(f"ctx_depth must count words, at most order − 1 = {self.order - 1}")
        if ((self.ctx_word[1:] < 0) | (self.ctx_word[1:] >= V)).any():
            fail("ctx_word out of the vocabulary")
        if (self.child_start != np.searchsorted(self.ctx_parent, np.arange(n_ctx + 1), side="left")).any():
            fail("child_start does not match ctx_parent")
        same_parent = self.ctx_parent[2:] == self.ctx_parent[1:-1]
        if (self.ctx_word[2:][same_parent] <= self.ctx_word[1:-1][same_parent]).any():
            fail("children must be sorted by word without repeats")
        if self.succ_start[0] != 0 or self.succ_start[-1] != n_par or (np.diff(self.succ_start) < 0).any():
            fail("succ_start must run from 0 to the number of weights")
        if ((self.succ_word < 0) | (self.succ_word >= V)).any() or ((self.param_word < 0) | (self.param_word >= V)).any():
            fail("a successor word is out of the vocabulary")
        if (np.sort(self.succ_param) != np.arange(n_par)).any():
            fail("succ_param must be a permutation of the weights")
        ctx_of_succ = np.repeat(np.arange(n_ctx), np.diff(self.succ_start))
        if (self.param_ctx[self.succ_param] != ctx_of_succ).any() or (self.param_word[self.succ_param] != self.succ_word).any():
            fail("succ_* and param_* disagree")
        parent = self.param_parent
        has_parent = parent >= 0
        if ((parent < -1) | (parent >= np.arange(n_par))).any():
            fail("param_parent must satisfy −1 <= parent < index (preorder)")
        if (has_parent != (self.ctx_depth[self.param_ctx] > 0)).any() or (self.param_depth != self.ctx_depth[self.param_ctx]).any():
            fail("exactly the non-root contexts' weights must have a parent; param_depth must be the context length")
        p = parent[has_parent]
        if (self.param_word[p] != self.param_word[has_parent]).any() or (self.param_ctx[p] != self.ctx_parent[self.param_ctx[has_parent]]).any():
            fail("a weight's parent must be the same word after the one-shorter context")
        from varorder.loglinear.prox import preorder_sizes

        preorder_sizes(parent)


_ARRAYS = ("ctx_parent", "ctx_word", "ctx_depth", "child_start", "succ_start", "succ_word", "succ_param",
           "param_parent", "param_word", "param_ctx", "param_depth")


def sentence_positions(ids: np.ndarray, lengths: np.ndarray, bos_id: int, eos_id: int):
    """The sentences as ``<s> w_1 .. w_T </s>`` in one flat array, and the predicted positions.

    Returns ``(seq, targets, available)``: for each predicted token (every word and each
    ``</s>``), its index in ``seq`` and the number of history tokens before it in its sentence
    (``<s>`` included)."""
    ids = np.asarray(ids, dtype=np.int64)
    lengths = np.asarray(lengths, dtype=np.int64)
    n_sent = len(lengths)
    seq = np.empty(len(ids) + 2 * n_sent, dtype=np.int64)
    starts = np.zeros(n_sent, dtype=np.int64)
    if n_sent:
        starts[1:] = np.cumsum(lengths + 2)[:-1]
    seq[starts] = bos_id
    seq[starts + lengths + 1] = eos_id
    word_slots = np.ones(len(seq), dtype=bool)
    word_slots[starts] = False
    word_slots[starts + lengths + 1] = False
    seq[word_slots] = ids
    targets = np.flatnonzero(np.arange(len(seq)) != np.repeat(starts, lengths + 2))
    available = targets - np.repeat(starts, lengths + 1)
    return seq, targets, available


def build_trie(ids: np.ndarray, lengths: np.ndarray, order: int, vocab_size: int, bos_id: int, eos_id: int):
    """Build the context trie and weight forest of a training text.

    Returns ``(trie, positions, targets)``: for each predicted token its deepest context node
    and the word to predict. Near-linear: one ``np.unique`` per context length.
    """
    if order < 1:
        raise ParameterError(f"order must be at least 1, got {order}", name='order', value=order)
    V = int(vocab_size)
    seq, target_slots, available = sentence_positions(ids, lengths, bos_id, eos_id)
    targets = seq[target_slots]
    n = len(targets)
    node = np.zeros(n, dtype=np.int64)
    ctx_parent = [np.array([-1], dtype=np.int64)]
    ctx_word = [np.array([-1], dtype=np.int64)]
    ctx_depth = [np.array([0], dtype=np.int64)]
    n_ctx = 1
    for k in range(1, order):
        valid = np.flatnonzero(available >= k)
        if len(valid) == 0:
            break
        keys = node[valid] * V + seq[target_slots[valid] - k]
        unique, inverse = np.unique(keys, return_inverse=True)
        node[valid] = n_ctx + inverse
        ctx_parent.append(unique // V)
        ctx_word.append(unique % V)
        ctx_depth.append(np.full(len(unique), k, dtype=np.int64))
        n_ctx += len(unique)
    ctx_parent = np.concatenate(ctx_parent)
    ctx_word = np.concatenate(ctx_word)
    ctx_depth = np.concatenate(ctx_depth)
    child_start = np.searchsorted(ctx_parent, np.arange(n_ctx + 1), side="left").astype(np.int64)

    # every (context on the path, predicted word) pair
    keys = _all_pair_keys(node, targets, ctx_parent, V)
    param_ctx = keys // V
    param_word = keys % V
    parent_keys = np.where(param_ctx > 0, ctx_parent[param_ctx] * V + param_word, -1)
    parent_sorted = np.searchsorted(keys, parent_keys)
    parent_sorted[param_ctx == 0] = -1

    # depth-first preorder: per word, contexts in the context trie's own preorder
    ctx_rank = _preorder_rank(child_start, n_ctx)
    order_ = np.lexsort((ctx_rank[param_ctx], param_word))
    rank_of = np.empty(len(keys), dtype=np.int64)
    rank_of[order_] = np.arange(len(keys))
    param_parent = np.where(parent_sorted[order_] >= 0, rank_of[np.maximum(parent_sorted[order_], 0)], -1)
    succ_start = np.searchsorted(param_ctx, np.arange(n_ctx + 1), side="left").astype(np.int64)
    trie = ContextTrie(
        order=order, vocab_size=V, ctx_parent=ctx_parent, ctx_word=ctx_word, ctx_depth=ctx_depth,
        child_start=child_start, succ_start=succ_start, succ_word=param_word.copy(), succ_param=rank_of,
        param_parent=param_parent, param_word=param_word[order_], param_ctx=param_ctx[order_],
        param_depth=ctx_depth[param_ctx[order_]],
    )
    return trie, node, seq[target_slots]


def _all_pair_keys(node, targets, ctx_parent, V):
    keys = []
    level_node, level_targets = node, targets
    while len(level_node):
        keys.append(np.unique(level_node * V + level_targets))
        deeper = level_node > 0
        level_node, level_targets = ctx_parent[level_node[deeper]], level_targets[deeper]
    return np.unique(np.concatenate(keys))


@nb.njit(cache=True)
def _preorder_rank(child_start, n_ctx):
    rank = np.empty(n_ctx, dtype=np.int64)
    stack = np.empty(n_ctx, dtype=np.int64)
    top = 0
    stack[0] = 0
    next_rank = 0
    while top >= 0:
        c = stack[top]
        top -= 1
        rank[c] = next_rank
        next_rank += 1
        for child in range(child_start[c + 1] - 1, child_start[c] - 1, -1):  # first child on top
            top += 1
            stack[top] = child
    return rank


@nb.njit(cache=True)
def _find_contexts(seq, target_slots, available, max_depth, ctx_word, child_start, out):
    for i in range(len(target_slots)):
        c = 0
        depth = min(available[i], max_depth)
        for k in range(1, depth + 1):
            word = seq[target_slots[i] - k]
            lo = child_start[c]
            hi = child_start[c + 1]
            while lo < hi:  # binary search among the children, sorted by word
                mid = (lo + hi) >> 1
                if ctx_word[mid] < word:
                    lo = mid + 1
                else:
                    hi = mid
            if lo < child_start[c + 1] and ctx_word[lo] == word:
                c = lo
            else:
                break
        out[i] = c


def find_contexts(trie: ContextTrie, ids, lengths, bos_id: int, eos_id: int):
    """For new text: each predicted token's deepest context in the trie, and the token."""
    seq, target_slots, available = sentence_positions(ids, lengths, bos_id, eos_id)
    out = np.empty(len(target_slots), dtype=np.int64)
    _find_contexts(seq, target_slots, available, trie.order - 1, trie.ctx_word, trie.child_start, out)
    return out, seq[target_slots]


@nb.njit(cache=True)
def _ngram_counts(positions, targets, ctx_parent, succ_start, succ_word, succ_param, out):
    for i in range(len(positions)):
        c = positions[i]
        y = targets[i]
        while c >= 0:
            lo, hi = succ_start[c], succ_start[c + 1]
            while lo < hi:  # successors of a context are sorted by word
                mid = (lo + hi) >> 1
                if succ_word[mid] < y:
                    lo = mid + 1
                else:
                    hi = mid
            out[succ_param[lo]] += 1
            c = ctx_parent[c]


def ngram_counts(trie: ContextTrie, positions, targets) -> np.ndarray:
    """Training count of each weight's (context, word) pair, given :func:`build_trie`'s
    positions and targets."""
    out = np.zeros(trie.n_params, dtype=np.int64)
    _ngram_counts(np.asarray(positions, dtype=np.int64), np.asarray(targets, dtype=np.int64), trie.ctx_parent,
                  trie.succ_start, trie.succ_word, trie.succ_param, out)
    return out
