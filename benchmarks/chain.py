"""Dense-chain inference speed: varorder against hmmlearn, pytorch-crf and torch-struct.

All systems run in this one process on the same synthetic data (random normal
log-potentials, float64). Each measures Viterbi, log Z and node marginals in
sequences per second (best of ``--repeat`` timed runs after a warm-up that
also triggers Numba compilation). Agreement is checked before timing: log Z
within 1e-8 and identical Viterbi paths.

    python benchmarks/chain.py                # K=45, L=25, B=2000
    python benchmarks/chain.py --json         # also print the table as JSON

Peers that are not installed are skipped with a note. hmmlearn is driven through
its compiled per-sequence kernels (``hmmlearn._hmmc``: forward_scaling,
backward_scaling, viterbi), which is what its ``implementation="scaling"``
estimators call, one sequence at a time.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

from varorder import chain


def best_time(fn, repeat):
    fn()  # warm-up (JIT compilation, caches)
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def varorder_system(E, T, S):
    return {
        "viterbi": lambda: chain.viterbi(E, T, S),
        "log_z": lambda: chain.log_partition(E, T, S),
        "marginals": lambda: chain.marginals(E, T, S, edges=False),
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


def pytorch_crf_system(E, T, S):
    import torch
    from torchcrf import CRF

    B, L, K = E.shape
    crf = CRF(K, batch_first=True).double()
    with torch.no_grad():
        crf.transitions.copy_(torch.from_numpy(T))
        crf.start_transitions.copy_(torch.from_numpy(S))
        crf.end_transitions.zero_()
    em = torch.from_numpy(E)
    mask = torch.ones(B, L, dtype=torch.bool)
    # the private normaliser is time-major; decode() transposes itself when batch_first
    em_t = em.transpose(0, 1).contiguous()
    mask_t = mask.transpose(0, 1).contiguous()

    def log_z():
        with torch.no_grad():
            return crf._compute_normalizer(em_t, mask_t).numpy()

    def viterbi():
        with torch.no_grad():
            return np.array(crf.decode(em, mask))

    def marginals():
        em_g = em_t.clone().requires_grad_(True)
        crf._compute_normalizer(em_g, mask_t).sum().backward()
        return em_g.grad.numpy()

    return {"viterbi": viterbi, "log_z": log_z, "marginals": marginals}


def torch_struct_system(E, T, S, chunk=20):
    import torch
    from torch_struct import LinearChainCRF

    # torch-struct edge potentials (B, N-1, C, C) indexed [.., next, prev]; fold start into step 0.
    pot = E[:, 1:, :, None] + T.T[None, None]

    pot[:, 0] += (E[:, 0] + S)[:, None, :]
    log_pot = torch.from_numpy(pot)
    # Its log-semiring matrix products materialise (batch, N/2, C, C, C) tensors
    # (gigabytes at B=2000), so it runs in chunks of `chunk` sequences.
    parts = torch.split(log_pot, chunk)

    def log_z():
        with torch.no_grad():
            return torch.cat([LinearChainCRF(p).partition for p in parts]).numpy()

    def viterbi():
        with torch.no_grad():
            return torch.cat([LinearChainCRF(p).argmax for p in parts])

    def marginals():
        return [LinearChainCRF(p.clone().requires_grad_(True)).marginals.sum(-1).detach() for p in parts]

    return {"viterbi": viterbi, "log_z": log_z, "marginals": marginals}


PEERS = {"hmmlearn": hmmlearn_system, "pytorch-crf": pytorch_crf_system, "torch-struct": torch_struct_system}
# torch-struct's log-semiring matrix products materialise (batch, N/2, C, C, C)
# tensors: at K=45 a full B=2000 batch needs tens of GB, so it runs on the
# first SUBSET sequences (throughput is per sequence; agreement checked on those).
SUBSET = {"torch-struct": 200}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--K", type=int, default=45)
    ap.add_argument("--L", type=int, default=25)
    ap.add_argument("--B", type=int, default=2000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)

    rng = np.random.default_rng(args.seed)
    E = rng.normal(size=(args.B, args.L, args.K))
    T = rng.normal(size=(args.K, args.K))
    S = rng.normal(size=args.K)

    systems = {"varorder": varorder_system(E, T, S)}
    batch = {"varorder": args.B}
    notes = []
    for name, make in PEERS.items():
        n = min(args.B, SUBSET.get(name, args.B))
        try:
            systems[name] = make(E[:n], T, S)
            batch[name] = n
        except ImportError as exc:
            notes.append(f"{name}: skipped (not installed: {exc.name})")
        if n < args.B:
            notes.append(f"{name}: timed on the first {n} sequences (memory), seq/s per sequence")

    ref_z = systems["varorder"]["log_z"]()
    ref_paths = systems["varorder"]["viterbi"]()[0]
    agree = {}
    for name, ops in systems.items():
        if name == "varorder":
            continue
        n = batch[name]
        z = np.asarray(ops["log_z"](), dtype=float)
        paths = ops["viterbi"]()
        paths = np.asarray(paths.numpy() if hasattr(paths, "numpy") else paths)
        if paths.ndim == 4:  # torch-struct: one-hot edges [b, t, y(t+1), y(t)]
            paths = np.concatenate([paths.sum(-2).argmax(-1)[:, :1], paths.sum(-1).argmax(-1)], axis=1)
        dz = float(np.max(np.abs(z - ref_z[:n])))
        same = bool(np.array_equal(paths, ref_paths[:n]))
        agree[name] = {"max_abs_log_z_diff": dz, "viterbi_identical": same}
        if dz > 1e-8 or not same:
            notes.append(f"{name}: DISAGREES with varorder (max |Δlog Z| = {dz:.2e}, identical paths: {same})")

    results = {}
    for name, ops in systems.items():
        results[name] = {op: batch[name] / best_time(fn, args.repeat) for op, fn in ops.items()}

    ops = ["viterbi", "log_z", "marginals"]
    print(f"chain inference, K={args.K} L={args.L} B={args.B}, float64, sequences/second (best of {args.repeat})")
    print(f"{'system':<14}" + "".join(f"{op:>14}" for op in ops))
    for name, r in results.items():
        print(f"{name:<14}" + "".join(f"{r[op]:>14,.0f}" for op in ops))
    for name in results:
        if name == "varorder":
            continue
        ratios = {op: results["varorder"][op] / results[name][op] for op in ops}
        print(f"{'ratio vs ' + name:<26}" + "".join(f"{op}={ratios[op]:.2f}x  " for op in ops))
    for name, a in agree.items():
        print(f"agreement with {name}: max |Δlog Z| = {a['max_abs_log_z_diff']:.2e}, "
              f"identical Viterbi paths: {a['viterbi_identical']}")
    for note in notes:
        print("note:", note)
    if args.json:
        print(json.dumps({"config": vars(args), "seq_per_s": results, "agreement": agree, "notes": notes}, indent=2))


if __name__ == "__main__":
    main()
