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
  generic recursion in KBEST, LOG and EXPECTATION (:mod:`varorder.engine.chain_generic_ops`);
* over flat, ragged sequences: EM's expected statistics (``statistics``, Baum–Welch's
  E-step), log Z alone (``flat_log_partition``) and the filtered posteriors (``filtered``:
  the LOG forward normalised per position, Rabiner 1989 §V.A), each a registered LOG
  specialisation of its generic definition.

Kernels run one chunk of sequences (or of blocks) per Numba ``prange``
iteration; blocks and reductions never depend on the thread count, so neither do
the results.
"""

from __future__ import annotations

import math
from contextlib import contextmanager
from typing import NamedTuple

import numpy as np

from varorder.engine import threads as _threads
from varorder.engine.semiring import LOG, MAX, Semiring, operation, resolve
from varorder.engine.semiring_structured import EXPECTATION, KBEST
from varorder.engine.chain_generic_ops import generic_entropy, generic_filtered, generic_kbest, generic_sample
from varorder.engine.threads import (_BLAS_SERIAL_WORK, MIN_PARALLEL_SEQUENCES, load_cython_blas, runs_serial,
                                     serial_twin, single_threaded_blas, uses_engine_threads, warm_parallel_twin,
                                     engine_threads)
from varorder.engine.chain_generic import NEG_INF, generic_forward
from varorder.engine.chain_forward import (_DIRECT_LIMIT, _end_scaling, _logz_kernel, _logz_serial, _logz_small,
                                           _shared_scaling)
from varorder.engine.chain_marginals import _entropy_finish, _marginals_kernel
from varorder.engine.chain_viterbi import _kbest_kernel, _viterbi_kernel, _viterbi_serial, _viterbi_small
from varorder.engine.chain_sample import _sample_kernel
from varorder.engine import chain_statistics as _stats
from varorder.engine import chain_filter as _filter
from varorder.engine.validate import (_overflow_limit, as_potentials, as_rng, check_int_at_least, check_no_overflow,
                                      first_index, potentials_and_bound)
from varorder.errors import ParameterError

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
    "small_viterbi",
    "small_log_partition",
    "statistics",
    "flat_log_partition",
    "filtered",
    "Workspace",
    "ChainStatistics",
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
        raise ParameterError(f"emissions must have at least one position (L >= 1), got shape {E.shape}", name='emissions', value=emissions)
    if K < 1:
        raise ParameterError(f"emissions must have at least one label (K >= 1), got shape {E.shape}", name='emissions', value=emissions)
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
            raise ParameterError(f"lengths must have shape ({B},), got {raw.shape}", name='lengths', value=lengths)
        if raw.dtype == np.bool_:
            raise ParameterError("lengths must hold integers, got booleans", name='lengths', value=lengths)
        if raw.size and not np.issubdtype(raw.dtype, np.integer):
            if not np.issubdtype(raw.dtype, np.floating) or not np.all(np.isfinite(raw)) or not np.all(raw == np.round(raw)):
                raise ParameterError(f"lengths must hold integers, got dtype {raw.dtype}", name='lengths', value=lengths)
        n = raw.astype(np.int64)
        bad = (n < 1) | (n > L)
        if bad.any():
            b = first_index(bad)[0]
            raise ParameterError(f"lengths[{b}] = {n[b]} is out of range: must be in [1, {L}]", name='lengths', value=lengths)
    if allowed is not None:
        mask = np.asarray(allowed)
        if mask.dtype != np.bool_:
            raise ParameterError(f"allowed must be a boolean array, got dtype {mask.dtype}", name='allowed', value=allowed)
        if mask.shape != E.shape:
            raise ParameterError(f"allowed must have shape {E.shape} like emissions, got {mask.shape}", name='allowed', value=allowed)
        E = np.where(mask, E, NEG_INF)
        check_no_overflow(terms, emissions=E)  # masked-out entries may be as large as they like
    return ChainInput(E, T, S, F, n, e_top + s_top, t_top)


# ---------------------------------------------------------------------------
# public operations on a prepared ChainInput
# ---------------------------------------------------------------------------


def _num_chunks(ci: ChainInput) -> int:
    """Work units for prange: a few per thread balances ragged lengths without per-sequence scratch."""
    return max(1, min(ci.shape[0], 4 * _threads.numba_thread_count()))


def _block_size(ci: ChainInput) -> int:
    """Sequences per block; a function of the shapes only (never of the thread count).

    Shared transitions: the rows of each BLAS product (more rows amortise the call and fill
    the kernel better for small K). Per-sequence transitions: how many exp-transition
    matrices a block keeps (no product is shared, so only their size matters)."""
    B, L, K = ci.shape
    if ci.transitions.shape[0] > 1:
        return max(1, min(B, 16, 8192 // (K * K)))
    return _shared_block_size(B, K)


def _shared_block_size(B: int, K: int) -> int:
    return max(1, min(B, 64 if K <= 16 else 32 if K <= 128 else 16))


def _blocking(ci: ChainInput, block: int):
    """(length order, number of prange chunks of blocks)."""
    order = np.argsort(-ci.lengths, kind="stable").astype(np.int64)
    num_blocks = -(-ci.shape[0] // block)
    return order, max(1, min(num_blocks, 4 * _threads.numba_thread_count()))


def _scaling(ci: ChainInput):
    """exp-transitions, column maxima, smallest nonzero entry (shared matrix; placeholders
    when per sequence: the kernels exponentiate per block), exp(end) shifted, its smallest
    nonzero entry and the shift."""
    if ci.transitions.shape[0] == 1:  # compiled, shared with the small-input path (the same bits)
        expT, tshift, min_expT, dense, exp_end, min_exp_end, end_shift = _shared_scaling(ci.transitions[0], ci.end)
    else:
        K = ci.shape[2]
        expT, tshift, min_expT, dense = np.zeros((1, K, K)), np.zeros(1), np.zeros(1), np.zeros(1, bool)
        exp_end, min_exp_end, end_shift = _end_scaling(ci.end)
    return expT, tshift, min_expT, dense, exp_end, min_exp_end, end_shift, _emission_low(ci, min_expT)


def _emission_low(ci: ChainInput, min_expT) -> float:
    """A lower bound (≤ 0) on every row's smallest log-emission minus its largest when the
    kernels may exponentiate emissions without shifting them, +1 when they must shift.

    Unshifted, exp(x) lies in [e^−M, e^M] for M = ``emission_bound`` (start included): no
    overflow and, with rows rescaled every step, the underflow guard's bound (two such
    row ranges, twice log min exp-transition, log 4K) stays above _TINY by a margin —
    so skipping the shift never sends a sequence to the log-space path (the bound:
    ``chain_forward._DIRECT_LIMIT``). Typical
    potentials (all within about ±30) take this path; larger ones are shifted chunk by chunk."""
    K = ci.shape[2]
    if ci.transitions.shape[0] == 1:
        t_range = -math.log(float(min_expT[0])) if min_expT[0] > 0.0 else math.inf
    else:
        t_range = 2.0 * ci.transition_bound
    # the test of chain_forward.emission_low_of (the small-input path's, compiled), in the same operations
    if 4.0 * ci.emission_bound + 2.0 * t_range + math.log(4.0 * K) <= _DIRECT_LIMIT:
        return -2.0 * ci.emission_bound
    return 1.0


def _runs_serial(ci: ChainInput) -> bool:
    """threads.runs_serial for a chain call (its work: B·L·K² multiply-adds, the order of every chain kernel's)."""
    B, L, K = ci.shape
    return runs_serial(B, B * L * K * K)


@contextmanager
def _serial_blas(ci: ChainInput, block: int, per_sequence_products: bool):
    """BLAS as the serial kernels need it: ``scipy.linalg.cython_blas`` loaded without ``scipy.linalg`` (what
    Numba's ``np.dot`` calls), and pinned to one thread only when a product could be big enough for BLAS
    to thread it (threads.engine_threads' bound, here per product: the forward's (rows ≤ block, K)·(K, K)
    and, with ``per_sequence_products``, the marginals' (K, n ≤ L)·(n, K))."""
    B, L, K = ci.shape
    load_cython_blas()
    if max(min(B, block), L if per_sequence_products else 0) * K * K < _BLAS_SERIAL_WORK:
        yield
    else:
        with single_threaded_blas():
            yield


def _serial_log_z(ci: ChainInput) -> np.ndarray:
    """:func:`_scaled_log_z` on the kernel's serial twin: the same blocks in one chunk (blocks never depend on
    the chunks), so the same numbers bit for bit."""
    block = _block_size(ci)
    order = np.argsort(-ci.lengths, kind="stable").astype(np.int64)
    with _serial_blas(ci, block, False):
        logz = _logz_serial(ci.emissions, ci.transitions, ci.start, ci.end, ci.lengths, order, block,
                            *_scaling(ci), 1)
    warm_parallel_twin(_logz_serial)
    return logz


def _scaled_log_z(ci: ChainInput) -> np.ndarray:
    """log Z by the blocked scaled exp-space recursion (LOG specialisation)."""
    if _runs_serial(ci):
        return _serial_log_z(ci)
    block = _block_size(ci)
    order, chunks = _blocking(ci, block)
    return _logz_kernel(ci.emissions, ci.transitions, ci.start, ci.end, ci.lengths, order, block, *_scaling(ci),
                        chunks)


def _viterbi_scores(ci: ChainInput) -> np.ndarray:
    """Best path scores by the max-plus Viterbi kernel (MAX specialisation)."""
    B, L, _ = ci.shape
    scores = np.empty(B)
    _viterbi_kernel(ci.emissions, ci.transitions, ci.start, ci.end, ci.lengths, _num_chunks(ci),
                    np.empty((B, L), dtype=np.int64), scores)
    return scores


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
    """log Z (B,): the forward in the LOG semiring (a batch the policy runs on one thread, whose BLAS products
    are too small to thread, without entering the thread policy's block: the kernel's serial twin)."""
    if _runs_serial(ci):
        return _serial_log_z(ci)
    return forward_values(ci, LOG)


def viterbi(ci: ChainInput):
    """(paths (B, L), scores (B,)); a batch the policy runs on one thread takes the kernel's serial twin
    (no thread-count change, no parallel region, no BLAS pinning: Viterbi makes no BLAS call)."""
    B, L, _ = ci.shape
    paths, scores = np.empty((B, L), dtype=np.int64), np.empty(B)
    if _runs_serial(ci):
        _viterbi_serial(ci.emissions, ci.transitions, ci.start, ci.end, ci.lengths, 1, paths, scores)
        warm_parallel_twin(_viterbi_serial)
    else:
        _viterbi_batch(ci, paths, scores)
    return paths, scores


@uses_engine_threads
def _viterbi_batch(ci: ChainInput, paths, scores):
    _viterbi_kernel(ci.emissions, ci.transitions, ci.start, ci.end, ci.lengths, _num_chunks(ci), paths, scores)


# ---------------------------------------------------------------------------
# small inputs: checks and inference in one compiled call
# ---------------------------------------------------------------------------

_FLOAT64 = np.dtype(np.float64)


def _plain(x, shape) -> bool:
    return type(x) is np.ndarray and x.dtype == _FLOAT64 and x.shape == shape and x.flags.c_contiguous


def _small_input(emissions, transitions, start, end):
    """(E, T, start, end) as the compiled small-input paths take them, or None when the call is not one for
    them: emissions not a C-contiguous float64 (B, L, K) array with B, L, K ≥ 1 that the policy runs on one
    thread, or transitions not one shared C-contiguous float64 (K, K) matrix, or start/end not None or
    C-contiguous float64 (K,). Anything else (other dtypes, lengths, masks, per-sequence matrices) takes
    the checked path, which converts it; so do values the compiled checks refuse, to be named there."""
    E, T = emissions, transitions
    if type(E) is not np.ndarray or type(T) is not np.ndarray or E.dtype != _FLOAT64 or T.dtype != _FLOAT64 \
            or E.ndim != 3:
        return None
    B, L, K = E.shape
    if T.shape != (K, K) or B < 1 or L < 1 or K < 1 or not (E.flags.c_contiguous and T.flags.c_contiguous) \
            or (B > 1 and not (B < MIN_PARALLEL_SEQUENCES and runs_serial(B))):  # runs_serial(1) is always True
        return None
    if start is None:
        start = _zeros(K)
    elif not _plain(start, (K,)):
        return None
    if end is None:
        end = _zeros(K)
    elif not _plain(end, (K,)):
        return None
    return emissions, transitions, start, end


_ZEROS: dict[int, np.ndarray] = {}


def _zeros(K: int) -> np.ndarray:
    """A zero (K,) start or end for the compiled small-input paths (which only read it), made once per K."""
    zeros = _ZEROS.get(K)
    if zeros is None:
        zeros = _ZEROS[K] = np.zeros(K)
    return zeros


def small_viterbi(emissions, transitions, start=None, end=None):
    """``viterbi(prepare(emissions, transitions, start, end))`` of a small batch of full-length sequences in
    one compiled call (the checks included), or None when the call is not one for it (see
    :func:`_small_input`): (paths, scores, number of sequences with no path). The same loops as the batch
    kernel, so the same paths and scores bit for bit."""
    args = _small_input(emissions, transitions, start, end)
    if args is None:
        return None
    B, L, _ = emissions.shape
    paths, scores = np.empty((B, L), dtype=np.int64), np.empty(B)
    impossible = _viterbi_small(*args, paths, scores)
    if _threads._COMPILE_TWINS:  # the install-time warm-up: the checked path's kernels (both twins) too
        viterbi(prepare(*args))
    return None if impossible < 0 else (paths, scores, impossible)


def small_log_partition(emissions, transitions, start=None, end=None):
    """``log_partition(prepare(emissions, transitions, start, end))`` of a small batch of full-length
    sequences in one compiled call (the checks included), or None when the call is not one for it (see
    :func:`_small_input`; also when a product of the forward could be large enough for BLAS to thread):
    (log Z, number of sequences with log Z = −inf). The same blocks, scaling and kernel as the checked
    path, so the same numbers bit for bit."""
    args = _small_input(emissions, transitions, start, end)
    if args is None:
        return None
    B, L, K = emissions.shape
    if B * K * K >= _BLAS_SERIAL_WORK:  # the checked path pins BLAS around the forward's (rows, K)·(K, K) products
        return None
    accepted, logz, impossible = _logz_small(*args, _shared_block_size(B, K), _overflow_limit(2 * L + 1))
    if _threads._COMPILE_TWINS:  # the install-time warm-up: the checked path's kernels (both twins) too
        log_partition(prepare(*args))
    return (logz, impossible) if accepted else None


# the same loops without a parallel region, for batches the policy runs on one thread
_marginals_serial = serial_twin(_marginals_kernel, cache=True)


def _marginal_outputs(ci: ChainInput, want_edges: bool, want_sum: bool):
    B, L, K = ci.shape
    node = np.empty((B, L, K))  # every entry is written by the kernel
    edge = np.zeros((B, max(L - 1, 0), K, K)) if want_edges else np.zeros((B, 0, K, K))
    edge_sum = np.zeros((B, K, K)) if want_sum else np.zeros((B, 0, 0))
    return node, edge, edge_sum, np.zeros(B)


def _marginals(ci: ChainInput, want_edges: bool, want_sum: bool, want_texp: bool):
    node, edge, edge_sum, texp = _marginal_outputs(ci, want_edges, want_sum)
    block = _block_size(ci)
    order, chunks = _blocking(ci, block)
    logz = _marginals_kernel(ci.emissions, ci.transitions, ci.start, ci.end, ci.lengths, order, block,
                             *_scaling(ci), node, edge, edge_sum, texp, want_edges, want_sum, want_texp, chunks)
    return node, edge, edge_sum, texp, logz


def _serial_marginals(ci: ChainInput, want_edges: bool, want_sum: bool):
    """:func:`_marginals` on the kernel's serial twin: the same blocks in one chunk (blocks never depend on the
    chunks), so the same numbers bit for bit."""
    node, edge, edge_sum, texp = _marginal_outputs(ci, want_edges, want_sum)
    block = _block_size(ci)
    order = np.argsort(-ci.lengths, kind="stable").astype(np.int64)
    with _serial_blas(ci, block, True):
        logz = _marginals_serial(ci.emissions, ci.transitions, ci.start, ci.end, ci.lengths, order, block,
                                 *_scaling(ci), node, edge, edge_sum, texp, want_edges, want_sum, False, 1)
    warm_parallel_twin(_marginals_serial)
    return node, edge, edge_sum, texp, logz


@uses_engine_threads
def _parallel_marginals(ci: ChainInput, want_edges: bool, want_sum: bool):
    return _marginals(ci, want_edges, want_sum, False)


def marginals(ci: ChainInput, edges=True):
    """(node (B, L, K), edge, log Z (B,)).

    edges=True: edge (B, L−1, K, K) per position; edges="sum": (B, K, K) summed
    over positions (expected transition counts, without the B·L·K² array);
    edges=False: None. A batch the policy runs on one thread takes the kernel's serial twin.
    """
    if edges not in (True, False, "sum"):
        raise ParameterError(f"edges must be True, False or 'sum', got {edges!r}", name='edges', value=edges)
    want_edges = edges is True
    want_sum = edges == "sum"
    run = _serial_marginals if _runs_serial(ci) else _parallel_marginals
    node, edge, edge_sum, _, logz = run(ci, want_edges, want_sum)
    return node, (edge if want_edges else edge_sum if want_sum else None), logz


def _entropy_fused(ci: ChainInput) -> np.ndarray:
    node, _, _, texp, logz = _marginals(ci, False, False, True)
    return _entropy_finish(ci.emissions, ci.start, ci.end, ci.lengths, node, logz, texp)


def _kbest_fused(ci: ChainInput, k: int):
    return _kbest_kernel(ci.emissions, ci.transitions, ci.start, ci.end, ci.lengths, k)


def _sample_fused(ci: ChainInput, uniforms: np.ndarray):
    return _sample_kernel(ci.emissions, ci.transitions, ci.start, ci.end, ci.lengths, uniforms)


# ---------------------------------------------------------------------------
# expected sufficient statistics over flat, ragged sequences (the E-step of EM)
# ---------------------------------------------------------------------------


class ChainStatistics(NamedTuple):
    """What :func:`statistics` returns: log Z per sequence (S,); Σₛ wₛ p(y₁ = k) (K,); Σₛ wₛ Σₜ p(yₜ = i,
    yₜ₊₁ = j) (K, K); Σₛ wₛ Σₜ p(yₜ = k) (K,); Σₛ wₛ Σₜ p(yₜ = k) features[t] (K, P) or None; the node
    posteriors (N, K) (unweighted) or None."""

    log_z: np.ndarray
    start: np.ndarray
    transitions: np.ndarray
    occupancy: np.ndarray
    features: np.ndarray | None
    node: np.ndarray | None


def _flat_arguments(emissions, lengths, transitions, start, end, weights, features):
    """Validated float64 arrays of :func:`statistics`, or a ParameterError naming the argument."""
    E = np.asarray(emissions)
    if E.ndim != 2 or E.shape[0] < 1 or E.shape[1] < 1:
        raise ParameterError(f"emissions must have shape (N >= 1, K >= 1), got {E.shape}", name="emissions",
                             value=E.shape)
    N, K = E.shape
    lengths = np.asarray(lengths)
    if lengths.ndim != 1 or lengths.size < 1 or not np.issubdtype(lengths.dtype, np.integer):
        raise ParameterError(f"lengths must be a non-empty 1-d integer array, got {lengths!r:.80}", name="lengths",
                             value=lengths)
    lengths = lengths.astype(np.int64)
    if (lengths < 1).any():
        i = int(np.flatnonzero(lengths < 1)[0])
        raise ParameterError(f"lengths[{i}] = {int(lengths[i])}: every sequence needs a position", name="lengths",
                             value=int(lengths[i]))
    if int(lengths.sum()) != N:
        raise ParameterError(f"lengths sum to {int(lengths.sum())}, emissions have {N} rows", name="lengths",
                             value=int(lengths.sum()))
    terms = 2 * int(lengths.max()) + 1
    E, e_top = potentials_and_bound("emissions", E, (None, None), terms)
    T, _ = potentials_and_bound("transitions", transitions, (K, K), terms)
    S, _ = (_zeros(K), 0.0) if start is None else potentials_and_bound("start", start, (K,), terms)
    F_end = _zeros(K) if end is None else as_potentials("end", end, (K,), terms)
    w = np.ones(lengths.size) if weights is None else np.ascontiguousarray(weights, dtype=np.float64)
    if w.shape != lengths.shape or not np.isfinite(w).all() or (w < 0).any():
        raise ParameterError(f"weights must be {lengths.size} finite numbers >= 0", name="weights", value=w)
    if features is None:
        feats = np.zeros((N, 0))
    else:
        feats = np.ascontiguousarray(features, dtype=np.float64)
        if feats.ndim != 2 or feats.shape[0] != N:
            raise ParameterError(f"features must have shape ({N}, P), got {feats.shape}", name="features",
                                 value=feats.shape)
        if not np.isfinite(feats).all():
            raise ParameterError(f"features{list(first_index(~np.isfinite(feats)))} is not finite", name="features",
                                 value=feats)
    return E, lengths, T, S, F_end, w, feats


def _generic_statistics(E, lengths, T, start, end, weights, features, node: bool, workspace=None) -> ChainStatistics:
    """:func:`statistics` from the node and position-summed edge marginals of :func:`marginals` (sequences of
    one length together), the statistics summed in NumPy: the generic definition, and the path of
    sequences the scaled pass hands back."""
    N, K = E.shape
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    log_z = np.empty(lengths.size)
    posts = np.empty((N, K))
    edges = np.zeros((K, K))
    for n in np.unique(lengths):
        seqs = np.flatnonzero(lengths == n)
        rows = offsets[seqs][:, None] + np.arange(n)[None]
        nodes, edge_sums, z = marginals(prepare(E[rows], T, start, end), edges="sum")
        posts[rows] = nodes
        log_z[seqs] = z
        edges += np.einsum("s,sij->ij", weights[seqs], edge_sums)
    weighted = posts * np.repeat(weights, lengths)[:, None]
    return ChainStatistics(log_z, weighted[offsets[:-1]].sum(axis=0), edges, weighted.sum(axis=0),
                           weighted.T @ features if features.shape[1] else None, posts if node else None)


def _scaled_statistics(E, lengths, T, start, end, weights, features, node: bool, workspace=None) -> ChainStatistics:
    """:func:`statistics` by the per-sequence scaled forward–backward (``chain_statistics``; the LOG
    specialisation) for a matrix without zeros; the sequences its guard hands back (and every sequence under
    a matrix with zeros or an end vector with a wide range) by :func:`_generic_statistics`."""
    N, K = E.shape
    expT, tshift, min_expT, dense, exp_end, min_exp_end, end_shift = _shared_scaling(T, end)
    if not (dense[0] and min_expT[0] > 0.0 and min_exp_end >= 1e-20):
        return _generic_statistics(E, lengths, T, start, end, weights, features, node)
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    S, P = lengths.size, features.shape[1]
    chunks = _stats.num_chunks(S)
    posts = np.empty((N, K)) if node else np.empty((0, K))
    parts = (np.zeros((chunks, K)), np.zeros((chunks, K)), np.zeros((chunks, K, K)), np.zeros((chunks, K, P)))
    log_z, ok = np.empty(S), np.empty(S, dtype=np.bool_)
    parts_in_scratch = 2 if node else 3  # forward values, exp-emissions (and posteriors, when node does not hold them)
    at = _stats.scratch_layout(lengths, K, chunks, parts_in_scratch)
    scratch = (workspace or _stats.Workspace()).take(int(at[-1]))
    load_cython_blas()
    # BLAS products per sequence: (K, n)·(n, K) and (K, n)·(n, P)
    with single_threaded_blas() if K * max(K, P) * int(lengths.max()) >= _BLAS_SERIAL_WORK else _no_context():
        _stats.statistics_kernel(E, offsets, start, expT[0], np.ascontiguousarray(expT[0].T), float(tshift[0]),
                                 _stats.emission_guard(float(min_expT[0]), K), exp_end, end_shift, weights, features,
                                 True, node, posts, chunks, scratch, at, parts_in_scratch, log_z, ok, *parts)
    occupancy, first, xi, feats = (p.sum(axis=0) for p in parts)
    edges = expT[0] * xi
    if not ok.all():
        bad = np.flatnonzero(~ok)
        rows = np.concatenate([np.arange(offsets[s], offsets[s + 1]) for s in bad])
        rest = _generic_statistics(E[rows], lengths[bad], T, start, end, weights[bad], features[rows], node)
        log_z[bad] = rest.log_z
        first, edges, occupancy = first + rest.start, edges + rest.transitions, occupancy + rest.occupancy
        feats = feats + rest.features if P else feats
        if node:
            posts[rows] = rest.node
    return ChainStatistics(log_z, first, edges, occupancy, feats if P else None, posts if node else None)


@contextmanager
def _no_context():
    yield


# Operations = the generic recursion in a semiring plus a finishing step
# (engine/chain_generic_ops.py); their fused kernels are registered specialisations,
# tested equal (tests/test_engine_semiring_structured.py).
def _generic_filtered(E, lengths, T, start) -> np.ndarray:
    """:func:`filtered` by the generic LOG forward (``chain_generic_ops.generic_filtered``), sequences of one
    length together: the definition."""
    N, K = E.shape
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    out = np.empty((N, K))
    for n in np.unique(lengths):
        seqs = np.flatnonzero(lengths == n)
        rows = offsets[seqs][:, None] + np.arange(n)[None]
        with engine_threads(seqs.size, seqs.size * int(n) * K * K):  # the generic batch forward's prange
            out[rows] = generic_filtered(prepare(E[rows], T, start))
    return out


def _scaled_filtered(E, lengths, T, start) -> np.ndarray:
    """:func:`filtered` by the per-sequence kernel of ``chain_filter`` (the LOG specialisation): the scaled
    exp-space forward for a matrix without zeros, the log-space forward for the sequences its guard refuses and
    for every sequence under a matrix with zeros."""
    N, K = E.shape
    expT, _, min_expT, dense, _, _, _ = _shared_scaling(T, _zeros(K))
    scaled = bool(dense[0] and min_expT[0] > 0.0)
    guard = _stats.emission_guard(float(min_expT[0]), K) if scaled else 0.0
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    out = np.empty((N, K))
    ok = np.empty(lengths.size, dtype=np.bool_)
    _filter.filter_kernel(E, offsets, start, expT[0], T, guard, scaled, _stats.num_chunks(lengths.size), out, ok)
    return out


SPECIALISED = {"entropy": (EXPECTATION, _entropy_fused), "kbest": (KBEST, _kbest_fused), "sample": (LOG, _sample_fused),
               "statistics": (LOG, _scaled_statistics), "filtered": (LOG, _scaled_filtered)}
GENERIC = {"entropy": generic_entropy, "kbest": generic_kbest, "sample": generic_sample,
           "statistics": _generic_statistics, "filtered": _generic_filtered}


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


def statistics(emissions, lengths, transitions, start=None, end=None, *, weights=None, features=None,
               node: bool = False, workspace=None, specialised: bool = True) -> ChainStatistics:
    """The expected sufficient statistics of S sequences laid out flat — emissions (N, K), sequence s the rows
    ``lengths[:s].sum()`` … of length ``lengths[s]`` — under one shared (K, K) transition matrix (start, end
    as in :func:`prepare`): Baum–Welch's E-step as one call (:class:`ChainStatistics`). ``weights`` (S,)
    weight each sequence's statistics; ``features`` (N, P) are summed against the node posteriors
    (Σₜ p(yₜ = k) features[t]); ``node=True`` also returns the posteriors; ``workspace`` (a
    :class:`Workspace`) keeps the kernel's scratch between calls. The LOG specialisation (``chain_statistics``)
    unless ``specialised=False``: the statistics of :func:`marginals`."""
    args = _flat_arguments(emissions, lengths, transitions, start, end, weights, features)
    # SPECIALISED["statistics"] / GENERIC["statistics"], named directly: the kernel declares its own thread
    # policy (threads.parallel_kernel), so this entry point needs no engine_threads block around the registry
    return (_scaled_statistics if specialised else _generic_statistics)(*args, node, workspace)


Workspace = _stats.Workspace


def flat_log_partition(emissions, lengths, transitions, start=None, end=None) -> np.ndarray:
    """log Z (S,) of flat sequences (arguments as :func:`statistics`): the scaled pass's forward alone for a
    matrix without zeros (sequences its guard hands back, and other matrices, by :func:`log_partition`)."""
    E, lengths, T, S, F_end, _, _ = _flat_arguments(emissions, lengths, transitions, start, end, None, None)
    N, K = E.shape
    expT, tshift, min_expT, dense, exp_end, min_exp_end, end_shift = _shared_scaling(T, F_end)
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    log_z, ok = np.empty(lengths.size), np.zeros(lengths.size, dtype=np.bool_)
    if dense[0] and min_expT[0] > 0.0 and min_exp_end >= 1e-20:
        chunks = _stats.num_chunks(lengths.size)
        parts = (np.zeros((1, K)), np.zeros((1, K)), np.zeros((1, K, K)), np.zeros((1, K, 0)))
        at = np.zeros(chunks + 1, dtype=np.int64)
        scratch = np.empty(0)
        _stats.statistics_kernel(E, offsets, S, expT[0], expT[0], float(tshift[0]),
                                 _stats.emission_guard(float(min_expT[0]), K), exp_end, end_shift,
                                 np.ones(lengths.size), np.zeros((N, 0)), False, False, np.empty((0, K)), chunks,
                                 scratch, at, 2, log_z, ok, *parts)
    for s in np.flatnonzero(~ok):
        rows = slice(offsets[s], offsets[s + 1])
        log_z[s] = log_partition(prepare(E[rows][None], T, S, F_end))[0]
    return log_z


def filtered(emissions, lengths, transitions, start=None, *, specialised: bool = True) -> np.ndarray:
    """Filtered posteriors (N, K) of flat sequences (arguments as :func:`statistics`, no end potentials):
    row t of sequence s is p(yₜ = k) under the chain cut after t — an HMM's causal p(zₜ | x₁..ₜ); NaN rows
    where a prefix has no path. The LOG specialisation (``chain_filter``, compiled once and cached on disk)
    unless ``specialised=False``: the generic LOG forward's values normalised per position."""
    E, lengths, T, S, _, _, _ = _flat_arguments(emissions, lengths, transitions, start, None, None, None)
    # SPECIALISED["filtered"] / GENERIC["filtered"], named directly: the kernel declares its own thread policy
    return (_scaled_filtered if specialised else _generic_filtered)(E, lengths, T, S)


def _register_serial_kernels() -> None:
    """Cached serial kernels of the chain load without refreshing Numba's registries (varorder._numba_start)."""
    import sys

    from varorder import _numba_start
    from varorder.engine import chain_forward, chain_viterbi, potential_scan

    _numba_start.load_without_refresh(sys.modules[__name__], chain_forward, chain_viterbi, potential_scan)


_register_serial_kernels()
