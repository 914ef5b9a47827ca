"""A word aligner trained on a corpus in pieces (files) that are read, encoded and kept on the workers
: :meth:`varorder.agree.WordAligner.fit_sources`.

The model is the one of :mod:`varorder.agree.aligner` (IBM Model 1, then the HMM aligners, trained by
:class:`~varorder.agree.product_em.AgreementEM`; Liang, Klein & Jordan 2008); only where the data lives
changes. Four rounds on the executor of :mod:`varorder.parallel`:

1. each piece is read where it runs and sends back its English and French tokens in first-seen
   order (and its pair count); the driver numbers the tokens piece by piece, which is the first-seen
   numbering of the whole corpus, the one :meth:`WordAligner.fit` gives the concatenation;
2. each piece is read again, encoded with those vocabularies into shards of ``shard_size`` pairs (long
   pairs cut at ``max_length``, as ``fit`` does) and **kept where it was made** (``map_remote``);
3. each piece sends back its sorted word-pair keys; the driver's union is the pair table of the model
   (the model's size, not the corpus's), sent back once to attach every piece's shards to it;
4. EM: each E-step maps over the pieces (one task per piece, its shards in turn, as ``fit``'s serial
   E-step runs over its shards) and adds the pieces' counts in piece order.

So the driver holds the vocabularies, the pair table and the model's tables, never the corpus; on Dask
the pieces stay on the workers as tasks with their lineage, so that a piece lost with its worker is
read and encoded again from its source where it is next needed. Equal
pieces and parameters give the bit-identical model on any executor and worker count; a single piece
gives the model of ``fit`` on the whole corpus bit for bit; several pieces give ``fit``'s vocabularies
and pair table exactly and its tables up to the order in which the pieces' counts are added (within
1e-9 relative after a few iterations in the tests).
"""

from __future__ import annotations

import warnings

import numpy as np

from varorder.agree.align import HMMAligner, IBM1
from varorder.agree.corpus import LongPairWarning, PairIndex, Vocabulary, encode_bitext, index_corpus
from varorder.agree.product_em import AgreementEM, _estep_many
from varorder.errors import ParameterError
from varorder.parallel import as_executor

__all__ = ["fit_sources", "source_vocabulary", "encoded_source"]


def source_vocabulary(source, read, max_length):
    """Where a piece is read: its English and French tokens in first-seen order, its pair count and
    how many of its pairs are longer than ``max_length`` (cut into pieces when encoded)."""
    e_vocab, f_vocab = Vocabulary(), Vocabulary()
    n_pairs = n_long = 0
    for e, f in read(source):
        e_vocab.encode(e)
        f_vocab.encode(f)
        n_pairs += 1
        n_long += max_length is not None and (len(e) > max_length or len(f) > max_length)
    return e_vocab.tokens[1:], f_vocab.tokens[1:], n_pairs, n_long


def encoded_source(source, read, e_tokens, f_tokens, shard_size, max_length):
    """Where a piece is read: its shards over the corpus's vocabularies (kept there)."""
    with warnings.catch_warnings():  # the driver warns once for the whole corpus
        warnings.simplefilter("ignore", LongPairWarning)
        encoded = encode_bitext(read(source), Vocabulary(e_tokens), Vocabulary(f_tokens), shard_size, grow=False,
                                max_length=max_length)
    return list(encoded.shards)


def _pair_keys(shards) -> np.ndarray:
    """A piece's word pairs, as sorted unique keys."""
    return index_corpus(shards).keys


def _attached(shards, pairs: PairIndex):
    """A piece's shards, attached to the corpus's pair table (their edges' pair ids are searched in it)."""
    for shard in shards:
        shard.attach(pairs)
    return shards


def _estep_piece(shards, submodels, mode):
    """One piece's E-step: its shards in turn, counts summed (as the serial E-step of ``fit``)."""
    return _estep_many(submodels, shards, mode)


class _PieceEM(AgreementEM):
    """:class:`AgreementEM` whose unit of work is a piece (a list of shards) kept on the workers."""

    def _map_estep(self, executor, shards):
        return executor.map(_estep_piece, shards, self.submodels, self.mode)


def _train(aligner, executor, pieces, mode, n_iter, phase):
    callback = None
    if aligner.callback is not None:
        def callback(it, est):
            aligner.callback(phase, it, aligner)
    em = _PieceEM(submodels=aligner.models_, mode=mode, n_iter=n_iter, executor=executor, progress=aligner.progress,
                  callback=callback)
    em.fit(pieces)
    aligner.history_.append((f"{phase}/{mode}", list(em.objectives_)))


def fit_sources(aligner, sources, read, mode: str):
    """Train ``aligner`` (a :class:`~varorder.agree.WordAligner`) on the pairs ``read(source)`` yields for
    every source, each read on the workers of ``aligner.executor``, its final model in the
    :class:`AgreementEM` ``mode`` of its ``training``; returns the aligner (see the module docstring)."""
    aligner._check_params()
    sources = list(sources)
    if not sources:
        raise ParameterError("fit_sources: sources is empty", name='sources', value=sources)
    executor = as_executor(aligner.executor)
    e_vocab, f_vocab = Vocabulary(), Vocabulary()
    kept, n_long = [], 0
    for source, (e_tokens, f_tokens, n_pairs, long_pairs) in zip(
            sources, executor.map(source_vocabulary, sources, read, aligner.max_length)):
        for token in e_tokens:  # piece by piece: the first-seen numbering of the whole corpus
            e_vocab.add(token)
        for token in f_tokens:
            f_vocab.add(token)
        if n_pairs:
            kept.append(source)
        n_long += long_pairs
    if not kept:
        raise ParameterError("pairs must hold at least one sentence pair", name='sources', value=sources)
    if n_long:
        warnings.warn(f"{n_long} sentence pair(s) longer than max_length={aligner.max_length} words were cut into "
                      f"pieces of at most {aligner.max_length} words, aligned separately (links never cross a cut)",
                      LongPairWarning, stacklevel=3)
    pieces = executor.map_remote(encoded_source, kept, read, e_vocab.tokens[1:], f_vocab.tokens[1:],
                                 aligner.shard_size, aligner.max_length)
    keys = executor.map(_pair_keys, pieces)
    pairs = PairIndex.from_sorted_unique(np.unique(np.concatenate(keys)) if len(keys) > 1 else keys[0])
    del keys
    pieces = executor.map_remote(_attached, pieces, pairs)
    aligner._kept_encoding = None
    aligner.e_vocab_, aligner.f_vocab_, aligner.pairs_ = e_vocab, f_vocab, pairs
    aligner.history_ = []
    ibm1 = [IBM1("f|e", pairs, len(f_vocab)).initialize(), IBM1("e|f", pairs, len(e_vocab)).initialize()]
    aligner.models_ = ibm1
    if aligner.model == "ibm1":
        _train(aligner, executor, pieces, mode, aligner.ibm1_iterations, "ibm1")
        return aligner
    _train(aligner, executor, pieces, "independent", aligner.ibm1_iterations, "ibm1")
    aligner.models_ = [HMMAligner(m.direction, pairs, m.n_target_words, aligner.null_prob, aligner.max_jump,
                                  aligner.band).initialize().copy_tables_from(m) for m in ibm1]
    del ibm1
    _train(aligner, executor, pieces, mode, aligner.iterations, "hmm")
    return aligner
