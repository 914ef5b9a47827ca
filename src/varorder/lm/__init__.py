"""n-gram language models: counting, estimation, back-off querying and MAX-ARPA bounds.

Factorization: p(x_1 .. x_T) = prod_i p(x_i | x_{i-n+1} .. x_{i-1}) over ``<s> x_1 .. x_T
</s>``, each factor given by ARPA's back-off recursion (Carter, Dymetman & Bouchard 2012,
"Exact Sampling and Decoding in High-Order Hidden Markov Models", eq. 7). Estimators are
interpolated modified Kneser-Ney (Chen & Goodman 1999), interpolated absolute discounting
and additive smoothing. :mod:`varorder.lm.maxarpa` computes the paper's max-backoff
weights (eq. 2-8, §2.3); :mod:`varorder.lm.arpa` reads and writes ARPA and MAX-ARPA;
:mod:`varorder.lm.binary` is the memory-mapped binary model format (``varorder lm
build-binary``); :mod:`varorder.lm.external` counts corpora larger than memory (sorted
runs on disk, or sharded across Dask workers) and :mod:`varorder.lm.streaming`
estimates from those tables on disk, writing ARPA as it goes (``varorder lm train -S``);
:func:`varorder.lm.train.train_from_files` chooses among those paths for a memory budget
and an optional Dask client (what ``varorder lm train`` calls).

Typical use::

    from varorder.lm import ModifiedKneserNey
    from varorder.lm.arpa import write_arpa, read_arpa

    lm = ModifiedKneserNey(order=3).fit("train.txt.gz").model_
    write_arpa(lm, "model.arpa")
    lm = read_arpa("model.arpa")
    ids = lm.vocabulary.encode("the cat sat".split())
    lm.logprob([lm.vocabulary.bos_id, ids[0]], ids[1])      # natural log
    lm.max_logprob([ids[0]], ids[1])                         # bound over left extensions
    lm.minimal_state([lm.vocabulary.bos_id, ids[0], ids[1]])
    lm.score_sentences(["the cat sat", "a dog"])              # log10, from strings

    from varorder.lm.binary import write_binary, open_binary
    write_binary(lm, "model.bin"); lm = open_binary("model.bin")   # opens in milliseconds

Values are stored in log10 (ARPA's base); every method names the base it returns.
"""

from varorder.lm.corpus import BOS, EOS, UNK, Vocabulary, iter_sentences, open_text, read_corpus
from varorder.lm.model import MaxBackoffTable, NgramLM
from varorder.lm.state import State

# The estimators are imported on first use (PEP 562): reading or scoring a model never
# needs them, and every process that opens varorder.lm.corpus or .model imports this
# package first.
_ESTIMATION_NAMES = frozenset(
    {"ESTIMATORS", "AbsoluteDiscounting", "AdditiveSmoothing", "ModifiedKneserNey", "NgramCounts", "count_ngrams",
     "merge_counts"})


_FORMAT_NAMES = frozenset({"read_arpa", "write_arpa"})
_TRAIN_NAMES = frozenset({"FileTraining", "train_from_files"})


def __getattr__(name: str):
    if name in _ESTIMATION_NAMES:
        from varorder.lm import estimate

        return getattr(estimate, name)
    if name in _FORMAT_NAMES:
        from varorder.lm import arpa

        return getattr(arpa, name)
    if name in _TRAIN_NAMES:
        from varorder.lm import train

        return getattr(train, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | _ESTIMATION_NAMES | _FORMAT_NAMES | _TRAIN_NAMES)

__all__ = [
    "BOS",
    "EOS",
    "UNK",
    "ESTIMATORS",
    "AbsoluteDiscounting",
    "AdditiveSmoothing",
    "MaxBackoffTable",
    "ModifiedKneserNey",
    "NgramCounts",
    "NgramLM",
    "State",
    "Vocabulary",
    "count_ngrams",
    "merge_counts",
    "iter_sentences",
    "open_text",
    "read_corpus",
    "read_arpa",
    "write_arpa",
    "FileTraining",
    "train_from_files",
]
