"""Dense-chain inference speed: varorder against hmmlearn ("scaling") and a NumPy batch-GEMM loop.

All systems run in this one process on the same synthetic data (random normal
log-potentials, float64, shared transitions, start potentials, no end). Systems are
*interleaved*: every round times each (system, operation) once, in turn, so a change in
machine load hits them alike; each figure is the median over rounds. Both the wall time and
the process CPU time (all threads; ``time.process_time``) are recorded — on a shared,
noisy machine the CPU-time ratios are the stable figures. Single-core DGEMM (1000 × 1000,
BLAS pinned to one thread) is timed in the same rounds, and each varorder operation is
reported as a percentage of it, counting 2·K² flops per sequence step for log Z and
Viterbi (max-plus operations for the latter) and 4·K² for marginals (forward + backward).

hmmlearn 0.3 is driven through its compiled per-sequence kernels (``hmmlearn._hmmc``:
forward_scaling, backward_scaling, viterbi) — what ``implementation="scaling"`` calls — with
the exponentiated inputs prepared outside the timing (so its figures exclude the exps).
The NumPy baseline (``numpy_system``, ~20 lines) advances all sequences at once: a (B, K)·(K, K)
product per position with row rescaling (log Z, marginals) or a (B, K, K) max (Viterbi).
Agreement is checked before timing (log Z within 1e-8, identical Viterbi paths).

    python benchmarks/peers/chain.py                                  # K=45, L=25, B=2000
    python benchmarks/peers/chain.py --grid                           # K = 10, 45, 100, 300 × L = 25, 250, 2500
    python benchmarks/peers/chain.py --grid --rounds 5 --json out.json
"""

from __future__ import annotations

import argparse
import json

import numpy as np
from threadpoolctl import threadpool_limits

from varorder import chain

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the shared harness
import harness  # noqa: E402

OPS = ("viterbi", "log_z", "marginals")


def varorder_system(E, T, S):
    return {
        "viterbi": lambda: chain.viterbi(E, T, S)[0],
        "log_z": lambda: chain.log_partition(E, T, S),
        "marginals": lambda: chain.marginals(E, T, S)[0],
    }


def hmmlearn_system(E, T, S):
    from hmmlearn import _hmmc

    startprob, transmat, frames = np.exp(S), np.exp(T), np.exp(E)

    def log_z():
        return np.array([_hmmc.forward_scaling(startprob, transmat, f)[0] for f in frames])

    def viterbi():
        return np.array([_hmmc.viterbi(startprob, transmat, e)[1] for e in E])

    def marginals():
        out = np.empty_like(frames)
        for b, f in enumerate(frames):
            _, fwd, scaling = _hmmc.forward_scaling(startprob, transmat, f)
            bwd = _hmmc.backward_scaling(startprob, transmat, f, scaling)
            post = fwd * bwd
            out[b] = post / post.sum(axis=1, keepdims=True)
        return out

    return {"viterbi": viterbi, "log_z": log_z, "marginals": marginals}


def numpy_system(E, T, S):
    """All sequences advance together: one batch GEMM per position, rows rescaled."""
    B, L, K = E.shape
    c = T.max()
    expT = np.exp(T - c)

    def forward():
        m = E.max(axis=2)
        ev = np.exp(E - m[:, :, None])
        a = np.exp(S - S.max()) * ev[:, 0]
        s = a.sum(axis=1)
        alphas = [a / s[:, None]]
        logz = m[:, 0] + S.max() + np.log(s)
        for t in range(1, L):
            a = (alphas[-1] @ expT) * ev[:, t]
            s = a.sum(axis=1)
            alphas.append(a / s[:, None])
            logz += np.log(s) + m[:, t] + c
        return logz, alphas, ev

    def marginals():
        _, alphas, ev = forward()
        node = np.empty_like(E)
        beta = np.full((B, K), 1.0 / K)
        for t in range(L - 1, -1, -1):
            p = alphas[t] * beta
            node[:, t] = p / p.sum(axis=1, keepdims=True)
            beta = (ev[:, t] * beta) @ expT.T
            beta /= beta.sum(axis=1, keepdims=True)
        return node

    def viterbi():
        delta = S + E[:, 0]
        back = np.empty((L, B, K), dtype=np.int64)
        for t in range(1, L):
            cand = delta[:, :, None] + T
            back[t] = cand.argmax(axis=1)
            delta = np.take_along_axis(cand, back[t][:, None, :], axis=1)[:, 0] + E[:, t]
        paths = np.empty((B, L), dtype=np.int64)
        paths[:, -1] = delta.argmax(axis=1)
        for t in range(L - 1, 0, -1):
            paths[:, t - 1] = back[t][np.arange(B), paths[:, t]]
        return paths

    return {"viterbi": viterbi, "log_z": lambda: forward()[0], "marginals": marginals}


def dgemm_system():
    rng = np.random.default_rng(1)
    A, Bm = rng.random((1000, 1000)), rng.random((1000, 1000))
    return lambda: A @ Bm


SYSTEMS = {"varorder": varorder_system, "hmmlearn": hmmlearn_system, "numpy": numpy_system}


def batch_size(K, L, tokens):
    """Sequences per configuration: `tokens` positions at K ≤ 45, fewer for larger K (the
    peers' work grows as K²), at least one sequence."""
    return max(1, round(tokens * min(1.0, (45 / K) ** 2) / L))


def run_config(K, L, B, rounds, seed):
    rng = np.random.default_rng(seed)
    E = rng.normal(size=(B, L, K))
    T = rng.normal(size=(K, K))
    S = rng.normal(size=K)
    systems = {}
    notes = []
    for name, make in SYSTEMS.items():
        try:
            systems[name] = make(E, T, S)
        except ImportError as exc:
            notes.append(f"{name}: skipped (not installed: {exc.name})")
    ref_z = systems["varorder"]["log_z"]()
    ref_paths = systems["varorder"]["viterbi"]()
    agree = {}
    for name, ops in systems.items():
        if name != "varorder":
            dz = float(np.max(np.abs(np.asarray(ops["log_z"]()) - ref_z)))
            same = bool(np.array_equal(np.asarray(ops["viterbi"]()), ref_paths))
            agree[name] = {"max_abs_log_z_diff": dz, "viterbi_identical": same}
            if dz > 1e-8 or not same:
                notes.append(f"{name}: DISAGREES with varorder (max |Δlog Z| = {dz:.2e}, identical paths: {same})")
    calls = {("dgemm", "dgemm"): dgemm_system()}
    calls.update({(name, op): ops[op] for op in OPS for name, ops in systems.items()})
    timing = harness.interleaved(calls, rounds, alternate=False)  # one warm-up call each first
    med = {key: (timing.median(key, "wall"), timing.median(key, "cpu")) for key in calls}
    loads = timing.loads
    dgemm_gflops = 2e9 / 1e9 / med[("dgemm", "dgemm")][1]
    flops = {"viterbi": 2 * K * K * (L - 1) * B, "log_z": 2 * K * K * (L - 1) * B,
             "marginals": 4 * K * K * (L - 1) * B}
    result = {"K": K, "L": L, "B": B, "rounds": rounds, "load_avg": [min(loads), max(loads)],
              "dgemm_gflops_per_cpu_s": dgemm_gflops, "agreement": agree, "notes": notes, "ops": {}}
    for op in OPS:
        wall_v, cpu_v = med[("varorder", op)]
        entry = {"varorder_seq_per_cpu_s": B / cpu_v, "varorder_seq_per_wall_s": B / wall_v,
                 "varorder_gflop_per_cpu_s": flops[op] / cpu_v / 1e9,
                 "pct_of_dgemm": 100 * flops[op] / cpu_v / 1e9 / dgemm_gflops}
        for name in systems:
            if name == "varorder":
                continue
            wall_p, cpu_p = med[(name, op)]
            entry[f"{name}_seq_per_cpu_s"] = B / cpu_p
            entry[f"cpu_ratio_vs_{name}"] = cpu_p / cpu_v
            entry[f"wall_ratio_vs_{name}"] = wall_p / wall_v
        result["ops"][op] = entry
    return result


def print_result(r):
    print(f"\nK={r['K']} L={r['L']} B={r['B']}  rounds={r['rounds']}  load {r['load_avg'][0]:.1f}–{r['load_avg'][1]:.1f}"
          f"  single-core DGEMM {r['dgemm_gflops_per_cpu_s']:.1f} GFLOP/CPU-s")
    for op, e in r["ops"].items():
        peers = "  ".join(f"vs {n}: CPU {e[f'cpu_ratio_vs_{n}']:.2f}× wall {e[f'wall_ratio_vs_{n}']:.2f}×"
                          for n in ("hmmlearn", "numpy") if f"cpu_ratio_vs_{n}" in e)
        print(f"  {op:<10} {e['varorder_seq_per_cpu_s']:>10,.0f} seq/CPU-s  {e['varorder_gflop_per_cpu_s']:5.1f} GFLOP/CPU-s"
              f" ({e['pct_of_dgemm']:4.1f}% DGEMM)  {peers}")
    for name, a in r["agreement"].items():
        print(f"  agreement with {name}: max |Δlog Z| = {a['max_abs_log_z_diff']:.1e}, identical Viterbi: "
              f"{a['viterbi_identical']}")
    for note in r["notes"]:
        print("  note:", note)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--K", type=int, nargs="+", default=[45])
    ap.add_argument("--L", type=int, nargs="+", default=[25])
    ap.add_argument("--tokens", type=int, default=50_000, help="positions per configuration at K <= 45")
    ap.add_argument("--grid", action="store_true", help="K = 10 45 100 300 and L = 25 250 2500")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", help="write all results to this file")
    args = ap.parse_args(argv)
    Ks, Ls = ([10, 45, 100, 300], [25, 250, 2500]) if args.grid else (args.K, args.L)
    results = []
    with threadpool_limits(limits=1, user_api="blas"):  # NumPy's GEMMs and DGEMM on one core
        for K in Ks:
            for L in Ls:
                r = run_config(K, L, batch_size(K, L, args.tokens), args.rounds, args.seed)
                print_result(r)
                results.append(r)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump({"config": vars(args), "results": results}, fh, indent=1)


if __name__ == "__main__":
    main()
