"""#33 item 6: on long chains the LOG paths keep log Z and the marginals within 1e-14
relative of an extended-precision (x87 long double, 64-bit mantissa) reference.

log Z: a plain running sum of the per-step shifts and powers of two drifted by ~1e-13
relative over 10⁴ steps (5.8e-14 here before the fix); the powers of two are now counted
as an integer and the shifts summed with compensation.

Marginals: the scaled path's node and edge marginals were already within ~1e-15; the
log-space path (sequences the scaled one hands over: possible underflow) kept unshifted
log alpha / log beta rows (|log alpha| ≈ 5·10⁴ at L = 10⁴), whose per-entry roundings
put 1.3e-11 relative noise into the marginals here (and 1.4e-14 into log Z); its rows are
now shifted to a largest entry of 0 every step. Relative error is measured entry by entry,
|p − p_ref| / p_ref, over the entries with p_ref > 1e-250 (the rest are below what float64
marginals resolve)."""

from __future__ import annotations

import numpy as np
import pytest

from varorder import chain

pytestmark = pytest.mark.skipif(np.finfo(np.longdouble).eps > 1e-18,
                                reason="long double has no extra precision on this platform")

from varorder.testing.precision import LD, log_z_reference as reference, marginals_reference, relative_error


def long_chains(per_sequence, seed=1):
    rng = np.random.default_rng(seed)
    B, L, K = 2, 10_000, 8
    E = rng.normal(size=(B, L, K))
    T = rng.normal(size=(B, K, K) if per_sequence else (K, K))
    S = rng.normal(size=K)
    return E, T, S


@pytest.mark.parametrize("per_sequence", [False, True])
def test_long_chain_log_partition_is_within_1e_14_relative(per_sequence):
    E, T, S = long_chains(per_sequence)
    want = np.array([reference(E[b], T[b] if per_sequence else T, S) for b in range(E.shape[0])], dtype=LD)
    for got in (chain.log_partition(E, T, start=S),
                chain.marginals(E, T, start=S, return_log_z=True)[-1]):
        rel = np.abs((got.astype(LD) - want) / want).max()
        assert rel < 1e-14, rel


@pytest.mark.parametrize("path", ["scaled", "scaled per-sequence", "log-space"])
def test_long_chain_marginals_are_within_1e_14_relative(path):
    """Node and edge marginals at L = 10⁴, on the scaled path and on the log-space path (one
    emission 1000 nats below its row hands the sequence over: the scaled products could
    underflow)."""
    per_sequence = path == "scaled per-sequence"
    E, T, S = long_chains(per_sequence)
    if path == "log-space":
        E[:, 5_000, 0] = -1000.0
    node, edge, logz = chain.marginals(E, T, start=S, edges=True, return_log_z=True)
    node_only, _ = chain.marginals(E, T, start=S)  # the path that writes node marginals during the backward
    for b in range(E.shape[0]):
        Tb = T[b] if per_sequence else T
        want_node, want_edge = marginals_reference(E[b], Tb, S)
        assert relative_error(node[b], want_node) < 1e-14
        assert relative_error(node_only[b], want_node) < 1e-14
        assert relative_error(edge[b], want_edge) < 1e-14
    want = np.array([reference(E[b], T[b] if per_sequence else T, S) for b in range(E.shape[0])], dtype=LD)
    for got in (logz, chain.log_partition(E, T, start=S)):
        assert np.abs((got.astype(LD) - want) / want).max() < 1e-14
