"""Unbounded-order language models over a suffix-array index: infini-gram's ∞-gram and
interpolated Witten–Bell over every suffix length of the context.

Factorization: p(x) = Π_t p(x_t | <s> x_1 .. x_{t-1}) over ``<s> x_1 .. x_T </s>``, each
factor conditioned on the *whole* sentence prefix h, read from the corpus through the
index of :mod:`varorder.lm.suffix_index` (counts c(·) there; c(u •) = Σ_w c(u w) is the
continuation count of u and N₁₊(u •) the number of distinct tokens that follow it).

* :class:`InfiniGram` — the ∞-gram of Liu et al. (2024, "Infini-gram: Scaling Unbounded
  n-gram Language Models to a Trillion Tokens", §2, eq. 2): P∞(w | h) = c(u w) / c(u •)
  with u the longest suffix of h with c(u •) > 0. Zero for every token never seen after
  u, so it has no finite perplexity; its estimate is *sparse* (their term) when only one
  token follows u.
* :class:`WittenBell` — interpolated Witten–Bell smoothing (Witten & Bell 1991; the
  interpolated form of Chen & Goodman 1999, §2.5) applied at every suffix length with no
  upper order, i.e. PPM*'s unbounded contexts (Cleary & Teahan 1997) with Witten–Bell
  blending: for the suffixes u_0 = ε ⊂ u_1 ⊂ ... ⊂ u_m of h (u_m the longest with
  c(u_m •) > 0),

      p_0(w) = (c(w) + N₁₊(•) / |W|) / (c(•) + N₁₊(•))          (c(w): corpus counts, <s> not predicted)
      p_k(w) = (c(u_k w) + N₁₊(u_k •) p_{k-1}(w)) / (c(u_k •) + N₁₊(u_k •)),

  and p(w | h) = p_m(w). |W| = V − 1 predictable tokens (every id but ``<s>``). Each
  level mixes a proper distribution with the level below, so p(· | h) sums to one over
  W at every h. Parameter-free: nothing is tuned, on the evaluation set or elsewhere.

With ``base=`` a fixed-order :class:`~varorder.lm.NgramLM` of order n trained on the same
corpus (e.g. modified Kneser–Ney, Chen & Goodman 1999), the levels below n are that
model's: p_{n-1}(w) = p_base(w | last n − 1 tokens of h), and the Witten–Bell recursion
continues it over the suffix lengths n, n + 1, ..., m, so the context is still unbounded
while the short contexts keep Kneser–Ney's continuation counts.

Kneser–Ney at unbounded order (Shareghi et al. 2016) needs left-extension counts
N₁₊(• u w), which a forward suffix array does not give in O(log N); it is not here.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from varorder.errors import FormatError, ParameterError
from varorder.lm.suffix_index import SuffixIndex

__all__ = ["InfiniGram", "WittenBell", "PerplexityReport"]


class _OnIndex:
    def __init__(self, index: SuffixIndex):
        if not isinstance(index, SuffixIndex):
            raise TypeError(f"index must be a varorder.lm.suffix_index.SuffixIndex, got {type(index).__name__}")
        self.index = index
        self.vocabulary = index.vocabulary

    @property
    def vocab_size(self) -> int:
        return len(self.vocabulary)

    def _context_ids(self, context) -> np.ndarray:
        return self.index.encode(context, unknown="unk")

    def _levels(self, context):
        """[(k, ids, counts)] for k = 1 .. m: the next-token counts after each suffix of
        the context that has a continuation."""
        ids = self._context_ids(context)
        m, _ = self.index.longest_suffix(ids)
        levels = []
        for k in range(1, m + 1):
            tokens, counts = self.index.ntd(ids[ids.size - k:])
            if counts.sum() == 0:
                break
            levels.append((k, tokens, counts))
        return levels


class InfiniGram(_OnIndex):
    """The ∞-gram (see the module)."""

    def distribution(self, context) -> tuple[np.ndarray, int]:
        """(P∞(· | context) over all V ids, the effective n = 1 + |u|)."""
        levels = self._levels(context)
        p = np.zeros(self.vocab_size)
        if levels:
            k, tokens, counts = levels[-1]
        else:
            counts_all = self.index.unigram_counts()
            tokens = np.flatnonzero(counts_all)
            counts, k = counts_all[tokens], 0
        p[tokens] = counts / counts.sum()
        return p, k + 1


class WittenBell(_OnIndex):
    """Interpolated Witten–Bell over every suffix length (see the module); ``base``: an
    optional fixed-order NgramLM over the same vocabulary that supplies the levels below
    its order."""

    def __init__(self, index: SuffixIndex, base=None):
        super().__init__(index)
        if base is not None:
            from varorder.lm.model import NgramLM

            if not isinstance(base, NgramLM):
                raise ParameterError(f"base must be a varorder.lm.NgramLM, got {type(base).__name__}", name="base",
                                     value=type(base).__name__)
            if base.vocabulary.words != self.vocabulary.words:
                raise ParameterError("base's vocabulary differs from the index's (train both on the same corpus "
                                     "with the same min_count)", name="base", value=len(base.vocabulary))
        self.base = base

    def _base_distribution(self, context_ids: np.ndarray) -> np.ndarray:
        vocab = self.vocabulary
        words = vocab.decode(context_ids)
        bos = bool(len(words)) and words[0] == "<s>"
        p = 10.0 ** self.base.next_word_log10probs(words[1:] if bos else words, bos=bos)
        p[vocab.bos_id] = 0.0
        return p

    def _base(self) -> np.ndarray:
        counts = self.index.unigram_counts().astype(np.float64)
        types = np.count_nonzero(counts)
        predictable = self.vocab_size - 1
        uniform = np.full(self.vocab_size, 1.0 / predictable)
        uniform[self.vocabulary.bos_id] = 0.0
        return (counts + types * uniform) / (counts.sum() + types)

    def distribution(self, context) -> np.ndarray:
        """p(· | context) over all V ids (0 at ``<s>``); sums to one."""
        if self.base is None:
            p, first_level = self._base(), 1
        else:
            p, first_level = self._base_distribution(self._context_ids(context)), self.base.order
        for level, tokens, counts in self._levels(context):
            if level < first_level:
                continue
            distinct = tokens.size
            mixed = distinct * p
            mixed[tokens] += counts
            p = mixed / (counts.sum() + distinct)
        return p

    def logprob(self, context, word) -> float:
        """Natural log p(word | context)."""
        return float(np.log(self.distribution(context)[self._context_ids([word])[0]]))

    def sentence_logprobs(self, sentences) -> "PerplexityReport":
        """Score sentences (lists of words, or strings split on whitespace) with the
        compiled recursion: every word and ``</s>``, each given its whole prefix."""
        from varorder.lm import _suffix

        vocab = self.vocabulary
        flat = []
        starts = [0]
        for sentence in sentences:
            words = sentence.split() if isinstance(sentence, str) else list(sentence)
            flat.append(vocab.bos_id)
            flat.extend(vocab.id_of(w) for w in words)
            flat.append(vocab.eos_id)
            starts.append(len(flat))
        eval_ids = np.asarray(flat, dtype=np.int64)
        sentence_starts = np.asarray(starts, dtype=np.int64)
        n = eval_ids.size
        logprob = np.empty(n)
        match = np.empty(n, np.int64)
        infinigram = np.empty(n)
        sparse = np.empty(n, np.bool_)
        base_logprob = np.zeros(n)
        if self.base is not None:
            inner = np.ones(n, bool)
            inner[sentence_starts[:-1]] = False
            inner[sentence_starts[1:] - 1] = False
            scores, _ = self.base.token_log10probs(eval_ids[inner].astype(np.int32), np.diff(sentence_starts) - 2)
            predicted = np.ones(n, bool)
            predicted[sentence_starts[:-1]] = False
            base_logprob[predicted] = np.asarray(scores, dtype=np.float64) * np.log(10.0)
        status = _suffix.witten_bell_stream(self.index.tokens, self.index.sa, self.index.unigram_counts(),
                                            float(self.vocab_size - 1), eval_ids, sentence_starts, base_logprob,
                                            0 if self.base is None else self.base.order, logprob, match,
                                            infinigram, sparse)
        if status != 0:
            raise FormatError("damaged suffix index: a position outside the corpus", path=self.index.folder / "sa.bin")
        predicted = np.ones(n, bool)
        predicted[sentence_starts[:-1]] = False
        return PerplexityReport(logprob[predicted], match[predicted], infinigram[predicted], sparse[predicted],
                                len(starts) - 1)

    def perplexity(self, sentences) -> float:
        """exp(−mean natural-log probability) over every word and ``</s>``."""
        return self.sentence_logprobs(sentences).perplexity


@dataclass
class PerplexityReport:
    """Per predicted token (words and ``</s>``): Witten–Bell ``logprob`` (natural log),
    the length of the longest matching suffix used (``match``: ∞-gram effective n − 1),
    the ∞-gram probability and whether that estimate was sparse."""

    logprob: np.ndarray
    match: np.ndarray
    infinigram: np.ndarray
    sparse: np.ndarray
    num_sentences: int

    @property
    def num_tokens(self) -> int:
        return int(self.logprob.size)

    @property
    def perplexity(self) -> float:
        return float(np.exp(-self.logprob.mean())) if self.logprob.size else float("nan")

    def summary(self) -> dict:
        """The figures infini-gram reports, plus the smoothed perplexity."""
        sparse = self.sparse
        return {
            "sentences": self.num_sentences,
            "tokens": self.num_tokens,
            "perplexity_witten_bell": self.perplexity,
            "mean_effective_n": float(self.match.mean() + 1) if self.match.size else float("nan"),
            "infinigram_zero_share": float(np.mean(self.infinigram == 0)) if self.match.size else float("nan"),
            "infinigram_sparse_share": float(sparse.mean()) if sparse.size else float("nan"),
            "infinigram_sparse_correct": float(np.mean(self.infinigram[sparse] == 1.0)) if sparse.any() else float("nan"),
        }
