"""Exact decoding and exact sampling in high-order HMMs by adaptive rejection sampling over
q-automata (Carter, Dymetman & Bouchard, EMNLP 2012, "Exact Sampling and Decoding in
High-Order Hidden Markov Models").

Factorization: p(x) = prod_i p_lm(x_i | x_{i-n+1} .. x_{i-1}) p_obs(o_i | x_i) [p_lm(</s> | x)]
for an ARPA back-off LM of any order and per-position candidate lists
(:class:`HighOrderTarget`). :class:`QAutomaton` is the variable-order upper bound q >= p
whose arcs carry max-backoff bounds (MAX-ARPA, :meth:`varorder.lm.NgramLM.max_logprob`),
unrolled over positions as a :class:`varorder.lattice.Lattice`; :func:`decode` and
:func:`sample` are Algorithm 1 in optimisation and sampling mode (refinement: Algorithm 2);
:class:`FullWFSA` + :func:`wfsa_viterbi` is the paper's full-model baseline F and
:func:`full_viterbi` an explicit n-th-order baseline pruned to the candidates.

Typical use::

    from varorder.exact import HighOrderTarget, decode, sample
    target = HighOrderTarget(lm, [(ids_1, loglik_1), (ids_2, loglik_2), ...])
    best = decode(target)                   # best.sentence, best.log_p == best.log_q
    draws = sample(target, target_ar=0.2, batch=10, seed=0)
"""

from varorder.exact.ars import DecodeResult, RunHistory, SampleResult, acceptance_rate, decode, sample
from varorder.exact.full import FullViterbiResult, FullWFSA, full_lattice, full_viterbi, wfsa_viterbi
from varorder.exact.qautomaton import PathTrace, QAutomaton
from varorder.exact.target import HighOrderTarget, MaxBackoffWeights

__all__ = [
    "DecodeResult",
    "FullViterbiResult",
    "FullWFSA",
    "HighOrderTarget",
    "MaxBackoffWeights",
    "PathTrace",
    "QAutomaton",
    "RunHistory",
    "SampleResult",
    "acceptance_rate",
    "decode",
    "full_lattice",
    "full_viterbi",
    "sample",
    "wfsa_viterbi",
]
