"""Sequence-model estimators (CRF, MEMM, HMM), their feature indexing, optimisers and persistence.

Every estimator here delegates inference to the one DP engine (:mod:`varorder.chain`,
:mod:`varorder.lattice`); nothing in this package runs its own forward–backward.
"""
