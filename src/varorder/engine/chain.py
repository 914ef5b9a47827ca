"""Exact inference on dense first-order chains (linear-chain CRFs, HMMs, MEMMs).

Factorization. A batch holds B sequences over K labels, padded to length L.
For sequence b with length n = lengths[b], a path y₁ … yₙ scores

    s(y) = start[y₁] + Σₜ emissions[b, t, yₜ] + Σₜ₌₂ⁿ transitions[yₜ₋₁, yₜ] + end[yₙ]

and p(y) = exp(s(y) − log Z). Labels forbidden by ``allowed`` get −inf
emissions; any −inf potential is a hard zero. A sequence with no finite path
has log Z = −inf (never NaN); ``viterbi`` returns score −inf and path −1.

Algorithms (Rabiner 1989; Lafferty et al. 2001; CS287 "Sequence Models 4"):

* forward/backward in any log-domain semiring from
  :mod:`varorder.engine.semiring` (one kernel, specialised per ⊕);
* for the LOG semiring a faster *scaled* exp-space recursion (as in CRFsuite
  and hmmlearn's "scaling" implementation): transitions are exponentiated once
  per matrix, shifted by their largest entry; each step multiplies by the
  exp-transitions and the exp-emissions (exponentiated once per entry, unshifted
  when the validated magnitudes allow, else shifted per chunk of positions) and
  rescales the row by an exact power of two (no rounding, no log per step). Sequences advance in
  blocks, so with shared transitions a step is one small BLAS product for the
  whole block. A bound on the smallest product each step forms (one scalar test
  per step for matrices without zeros, a per-element minimum otherwise) routes
  a sequence whose potentials could underflow (a dynamic range of hundreds of
  nats) to the log-space kernel, so the fast path never trades accuracy for
  speed;
* Viterbi is the MAX-semiring forward pass; the path is recovered by
  re-maximising one column per position, so no back-pointer table is stored;
* k-best is list Viterbi (Seshadri & Sundberg 1994): a sorted top-k list per
  (position, label);
* sampling is forward filtering, backward sampling with uniforms drawn from a
  seeded NumPy generator, so results do not depend on thread scheduling;
* entropy is log Z − E[s(y)], the expectation taken with the marginals;
* these last three fused kernels are registered specialisations (``SPECIALISED``) of the
  generic recursion in KBEST, LOG and EXPECTATION (:mod:`varorder.engine.chain_generic_ops`).

Kernels run one chunk of sequences (or of blocks) per Numba ``prange``
iteration; blocks and reductions never depend on the thread count, so neither do
the results.
"""

from __future__ import annotations

import math

import numba as nb
import numpy as np

from varorder.engine.semiring import LOG, MAX, Semiring, operation, resolve
from varorder.engine.semiring_structured import EXPECTATION, KBEST
from varorder.engine.chain_generic_ops import generic_entropy, generic_kbest, generic_sample
from varorder.engine.threads import uses_engine_threads
from varorder.engine.chain_generic import NEG_INF, generic_forward
from varorder.engine.chain_scaled import _MIN_SHIFTED
from varorder.engine.chain_forward import _logz_kernel
from varorder.engine.chain_marginals import _entropy_finish, _marginals_kernel
from varorder.engine.chain_viterbi import _kbest_kernel, _viterbi_kernel
from varorder.engine.chain_sample import _sample_kernel
from varorder.engine.validate import (as_potentials, as_rng, check_int_at_least, check_no_overflow, first_index,
                                      potentials_and_bound)

__all__ = [
    "ChainInput",
    "prepare",
    "log_partition",
    "viterbi",
    "marginals",
    "sample",
    "kbest",
    "entropy",
    "forward_values",
]


# ---------------------------------------------------------------------------
# input preparation
# ---------------------------------------------------------------------------


class ChainInput:
    """Validated, float64, C-contiguous chain potentials (``allowed`` folded in).

    ``transitions`` is always 3-d, (1, K, K) when shared by the batch or
    (B, K, K) per sequence; kernels read ``transitions[b if per-sequence else 0]``.
    ``emission_bound`` bounds |emissions| + |start| and ``transition_bound`` |transitions|
    over their finite entries (found by the validation pass).
    """

    __slots__ = ("emissions", "transitions", "start", "end", "lengths", "emission_bound", "transition_bound")

    def __init__(self, emissions, transitions, start, end, lengths, emission_bound=np.inf, transition_bound=np.inf):
        self.emissions = emissions
        self.transitions = transitions
        self.start = start
        self.end = end
        self.lengths = lengths
        self.emission_bound = emission_bound
        self.transition_bound = transition_bound

    @property
    def shape(self) -> tuple[int, int, int]:
        return self.emissions.shape


def prepare(emissions, transitions, start=None, end=None, lengths=None, allowed=None) -> ChainInput:
    """Validate chain arguments; raise ValueError naming the offending argument."""
    raw_e = np.asarray(emissions)
    # a path adds 2L + 1 potentials; with no mask to apply, the overflow test rides on the
    # validation pass (large emission arrays are read once)
    terms = 2 * raw_e.shape[1] + 1 if raw_e.ndim == 3 else None
    E, e_top = potentials_and_bound("emissions", raw_e, (None, None, None), terms if allowed is None else None)
    B, L, K = E.shape
    if L < 1:
        raise ValueError(f"emissions must have at least one position (L >= 1), got shape {E.shape}")
    if K < 1:
        raise ValueError(f"emissions must have at least one label (K >= 1), got shape {E.shape}")
    T = np.asarray(transitions)
    T, t_top = potentials_and_bound("transitions", T, (B, K, K) if T.ndim == 3 else (K, K), terms)
    T = T if T.ndim == 3 else T[None]
    S, s_top = (np.zeros(K), 0.0) if start is None else potentials_and_bound("start", start, (K,), terms)
    F = np.zeros(K) if end is None else as_potentials("end", end, (K,), terms)
    if lengths is None:
        n = np.full(B, L, dtype=np.int64)
    else:
        raw = np.asarray(lengths)
        if raw.shape != (B,):
            raise ValueError(f"lengths must have shape ({B},), got {raw.shape}")
        if raw.dtype == np.bool_:
            raise ValueError("lengths must hold integers, got booleans")
        if raw.size and not np.issubdtype(raw.dtype, np.integer):
            if not np.issubdtype(raw.dtype, np.floating) or not np.all(np.isfinite(raw)) or not np.all(raw == np.round(raw)):
                raise ValueError(f"lengths must hold integers, got dtype {raw.dtype}")
        n = raw.astype(np.int64)
        bad = (n < 1) | (n > L)
        if bad.any():
            b = first_index(bad)[0]
            raise ValueError(f"lengths[{b}] = {n[b]} is out of range: must be in [1, {L}]")
    if allowed is not None:
        mask = np.asarray(allowed)
        if mask.dtype != np.bool_:
            raise ValueError(f"allowed must be a boolean array, got dtype {mask.dtype}")
        if mask.shape != E.shape:
            raise ValueError(f"allowed must have shape {E.shape} like emissions, got {mask.shape}")
        E = np.where(mask, E, NEG_INF)
        check_no_overflow(terms, emissions=E)  # masked-out entries may be as large as they like
    return ChainInput(E, T, S, F, n, e_top + s_top, t_top)


def _exp_transitions(T: np.ndarray):
    """exp(T − c) for (Bt, K, K) transitions, c the largest finite entry of each matrix.

    Returns (expT (Bt, K, K), c (Bt,), smallest nonzero entry per matrix (Bt,), dense
    (Bt,): no zero entry). The smallest entry is 0 — never take the scaled path — when a
    finite entry lies more than 600 nats below c.
    """
    flat = T.reshape(T.shape[0], -1)
    top = flat.max(axis=1) if flat.shape[1] else np.zeros(T.shape[0])
    top = np.where(np.isfinite(top), top, 0.0)
    shifted = T - top[:, None, None]
    expT = np.exp(shifted)
    masked = np.where(expT > 0, expT, np.inf).reshape(T.shape[0], -1)
    min_nz = masked.min(axis=1) if masked.shape[1] else np.ones(T.shape[0])
    min_nz = np.where(np.isfinite(min_nz), min_nz, 1.0)
    too_small = ((shifted < _MIN_SHIFTED) & np.isfinite(shifted)).reshape(T.shape[0], -1).any(axis=1)
    min_nz = np.where(too_small, 0.0, min_nz)
    dense = (expT > 0).reshape(T.shape[0], -1).all(axis=1)
    return (np.ascontiguousarray(expT), np.ascontiguousarray(top), np.ascontiguousarray(min_nz),
            np.ascontiguousarray(dense))

# ---------------------------------------------------------------------------
# public operations on a prepared ChainInput
# ---------------------------------------------------------------------------


def _num_chunks(ci: ChainInput) -> int:
    """Work units for prange: a few per thread balances ragged lengths without per-sequence scratch."""
    return max(1, min(ci.shape[0], 4 * nb.get_num_threads()))


def _block_size(ci: ChainInput) -> int:
    """Sequences per block; a function of the shapes only (never of the thread count).

    Shared transitions: the rows of each BLAS product (more rows amortise the call and fill
    the kernel better for small K). Per-sequence transitions: how many exp-transition
    matrices a block keeps (no product is shared, so only their size matters)."""
    B, L, K = ci.shape
    if ci.transitions.shape[0] > 1:
        return max(1, min(B, 16, 8192 // (K * K)))
    return max(1, min(B, 64 if K <= 16 else 32 if K <= 128 else 16))


def _blocking(ci: ChainInput, block: int):
    """(length order, number of prange chunks of blocks)."""
    order = np.argsort(-ci.lengths, kind="stable").astype(np.int64)
    num_blocks = -(-ci.shape[0] // block)
    return order, max(1, min(num_blocks, 4 * nb.get_num_threads()))


def _scaling(ci: ChainInput):
    """exp-transitions, column maxima, smallest nonzero entry (shared matrix; placeholders
    when per sequence: the kernels exponentiate per block), exp(end) shifted, its smallest
    nonzero entry and the shift."""
    if ci.transitions.shape[0] == 1:
        expT, tshift, min_expT, dense = _exp_transitions(ci.transitions)
    else:
        K = ci.shape[2]
        expT, tshift, min_expT, dense = np.zeros((1, K, K)), np.zeros(1), np.zeros(1), np.zeros(1, bool)
    end_shift = float(ci.end.max()) if np.isfinite(ci.end.max()) else 0.0
    exp_end = np.exp(ci.end - end_shift)
    nz = exp_end[exp_end > 0]
    min_exp_end = float(nz.min()) if nz.size else 1.0
    return expT, tshift, min_expT, dense, exp_end, min_exp_end, end_shift, _emission_low(ci, min_expT)


# Unshifted exp-emissions are used while this bound on the underflow guard's exponent
# (see ``_emission_low``) stays this far above log(_TINY) ≈ −645: the guard never fires.
_DIRECT_LIMIT = 400.0


def _emission_low(ci: ChainInput, min_expT) -> float:
    """A lower bound (≤ 0) on every row's smallest log-emission minus its largest when the
    kernels may exponentiate emissions without shifting them, +1 when they must shift.

    Unshifted, exp(x) lies in [e^−M, e^M] for M = ``emission_bound`` (start included): no
    overflow and, with rows rescaled every step, the underflow guard's bound (two such
    row ranges, twice log min exp-transition, log 4K) stays above _TINY by a margin —
    so skipping the shift never sends a sequence to the log-space path. Typical
    potentials (all within about ±30) take this path; larger ones are shifted chunk by chunk."""
    K = ci.shape[2]
    if ci.transitions.shape[0] == 1:
        t_range = -math.log(float(min_expT[0])) if min_expT[0] > 0.0 else math.inf
    else:
        t_range = 2.0 * ci.transition_bound
    if 4.0 * ci.emission_bound + 2.0 * t_range + math.log(4.0 * K) <= _DIRECT_LIMIT:
        return -2.0 * ci.emission_bound
    return 1.0


def _scaled_log_z(ci: ChainInput) -> np.ndarray:
    """log Z by the blocked scaled exp-space recursion (LOG specialisation)."""
    block = _block_size(ci)
    order, chunks = _blocking(ci, block)
    return _logz_kernel(ci.emissions, ci.transitions, ci.start, ci.end, ci.lengths, order, block, *_scaling(ci),
                        chunks)


def _viterbi_scores(ci: ChainInput) -> np.ndarray:
    """Best path scores by the max-plus Viterbi kernel (MAX specialisation)."""
    return _viterbi_kernel(ci.emissions, ci.transitions, ci.start, ci.end, ci.lengths, _num_chunks(ci))[1]


# Registered specialisations of the generic forward (⊕ over the paths of each sequence):
# semiring -> function of a ChainInput. Each is tested equal to the generic recursion on
# random inputs (tests/test_engine_semiring.py).
SPECIALISED_FORWARD = {LOG: _scaled_log_z, MAX: _viterbi_scores}


@uses_engine_threads
def forward_values(ci: ChainInput, semiring: Semiring = LOG, specialised: bool = True, width=None) -> np.ndarray:
    """⊕ over all paths of each sequence in ``semiring`` (a Semiring or a registered name):
    its registered specialisation when there is one (and ``specialised``), else the
    generic recursion compiled for the semiring; (B,), or (B, d) for a structured semiring
    (``width`` = d where the call chooses it, e.g. k for KBEST)."""
    semiring = resolve(semiring)
    fast = SPECIALISED_FORWARD.get(semiring) if specialised else None
    if fast is not None:
        return fast(ci)
    return generic_forward(semiring, width)(ci.emissions, ci.transitions, ci.start, ci.end, ci.lengths)


def log_partition(ci: ChainInput) -> np.ndarray:
    """log Z (B,): the forward in the LOG semiring."""
    return forward_values(ci, LOG)


@uses_engine_threads
def viterbi(ci: ChainInput):
    return _viterbi_kernel(ci.emissions, ci.transitions, ci.start, ci.end, ci.lengths, _num_chunks(ci))


def _marginals(ci: ChainInput, want_edges: bool, want_sum: bool, want_texp: bool):
    B, L, K = ci.shape
    node = np.empty((B, L, K))  # every entry is written by the kernel
    edge = np.zeros((B, max(L - 1, 0), K, K)) if want_edges else np.zeros((B, 0, K, K))
    edge_sum = np.zeros((B, K, K)) if want_sum else np.zeros((B, 0, 0))
    texp = np.zeros(B)
    block = _block_size(ci)
    order, chunks = _blocking(ci, block)
    logz = _marginals_kernel(ci.emissions, ci.transitions, ci.start, ci.end, ci.lengths, order, block,
                             *_scaling(ci), node, edge, edge_sum, texp, want_edges, want_sum, want_texp, chunks)
    return node, edge, edge_sum, texp, logz


@uses_engine_threads
def marginals(ci: ChainInput, edges=True):
    """(node (B, L, K), edge, log Z (B,)).

    edges=True: edge (B, L−1, K, K) per position; edges="sum": (B, K, K) summed
    over positions (expected transition counts, without the B·L·K² array);
    edges=False: None.
    """
    if edges not in (True, False, "sum"):
        raise ValueError(f"edges must be True, False or 'sum', got {edges!r}")
    want_edges = edges is True
    want_sum = edges == "sum"
    node, edge, edge_sum, _, logz = _marginals(ci, want_edges, want_sum, False)
    return node, (edge if want_edges else edge_sum if want_sum else None), logz


def _entropy_fused(ci: ChainInput) -> np.ndarray:
    node, _, _, texp, logz = _marginals(ci, False, False, True)
    return _entropy_finish(ci.emissions, ci.start, ci.end, ci.lengths, node, logz, texp)


def _kbest_fused(ci: ChainInput, k: int):
    return _kbest_kernel(ci.emissions, ci.transitions, ci.start, ci.end, ci.lengths, k)


def _sample_fused(ci: ChainInput, uniforms: np.ndarray):
    return _sample_kernel(ci.emissions, ci.transitions, ci.start, ci.end, ci.lengths, uniforms)


# Operations = the generic recursion in a semiring plus a finishing step
# (engine/chain_generic_ops.py); their fused kernels are registered specialisations,
# tested equal (tests/test_engine_semiring_structured.py).
SPECIALISED = {"entropy": (EXPECTATION, _entropy_fused), "kbest": (KBEST, _kbest_fused), "sample": (LOG, _sample_fused)}
GENERIC = {"entropy": generic_entropy, "kbest": generic_kbest, "sample": generic_sample}


@uses_engine_threads
def entropy(ci: ChainInput, specialised: bool = True) -> np.ndarray:
    return operation("entropy", GENERIC, SPECIALISED, specialised)(ci)


@uses_engine_threads
def kbest(ci: ChainInput, k: int, specialised: bool = True):
    k = check_int_at_least("k", k, 1)
    return operation("kbest", GENERIC, SPECIALISED, specialised)(ci, k)


@uses_engine_threads
def sample(ci: ChainInput, n: int, seed=None, specialised: bool = True):
    n = check_int_at_least("n", n, 1)
    B, L, _ = ci.shape
    uniforms = as_rng(seed).random((B, n, L))
    return operation("sample", GENERIC, SPECIALISED, specialised)(ci, uniforms)
