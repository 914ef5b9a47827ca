"""varorder.torch's CRF against pytorch-crf and torch-struct (issue #43): forward + backward per
batch on CPU tensors, interleaved rounds (benchmarks/harness.py), CPU time per batch (all threads of the process)
beside wall time, load average per round; the values (log-likelihood / log Z) are compared too.

    python benchmarks/peers/torch_crf.py                       # both sizes, float32 and float64
    python benchmarks/peers/torch_crf.py --rounds 3 --out benchmarks/results/torch-crf-cpu.json

Each system does the same work per batch: the negative log-likelihood of B gold tag
sequences of ragged lengths (uniform in [L/2, L]) and its gradient with respect to the
emissions and the transition parameters. pytorch-crf (``torchcrf.CRF``) and varorder.torch's
``CRF`` share parameters (a state-dict copy); torch-struct's ``LinearChainCRF`` gets the same
potentials as its (B, L−1, K, K) edge tensor and computes log Z and its backward (the gold
score, a gather, is left out of its time, which favours it). "native" is varorder.torch's
torch recursion (its CUDA path) run on the CPU, for reference. torch runs one intra-op
thread (``torch.set_num_threads(1)``, so that no system oversubscribes the two shared cores);
the engine follows its own thread policy; CPU time counts every thread.

Targets of #43: ≥ 5× pytorch-crf and ≥ 10× torch-struct at both sizes, same values.
"""

from __future__ import annotations

import argparse
import json
import sys
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import harness  # noqa: E402

sys.path.insert(0, str(harness.SRC))

SIZES = ((32, 128, 9), (32, 50, 45))


def _systems(B, L, K, dtype, seed=0, device="cpu"):
    import torch
    import torch_struct
    import torchcrf

    from varorder.torch import CRF

    g = torch.Generator().manual_seed(seed)
    emissions = torch.randn(B, L, K, generator=g, dtype=dtype).to(device)
    tags = torch.randint(0, K, (B, L), generator=g).to(device)
    lengths = torch.randint(L // 2, L + 1, (B,), generator=g)
    lengths[0] = L
    lengths = lengths.to(device)
    mask = torch.arange(L, device=device).unsqueeze(0) < lengths.unsqueeze(1)
    ref = torchcrf.CRF(K, batch_first=True).to(device, dtype)
    mine = CRF(K, batch_first=True).to(device, dtype)
    mine.load_state_dict(ref.state_dict())
    native = CRF(K, batch_first=True, backend="native").to(device, dtype)
    native.load_state_dict(ref.state_dict())
    trans = ref.transitions.detach().clone().requires_grad_(True)
    start, end = ref.start_transitions.detach(), ref.end_transitions.detach()

    def crf_step(model):
        def step():
            model.zero_grad()
            E = emissions.clone().requires_grad_(True)
            nll = -model(E, tags, mask)
            nll.backward()
            return float(nll.detach())
        return step

    def struct_step():
        E = emissions.clone().requires_grad_(True)
        # torch-struct: log_potentials[b, n, z_{n+1}, z_n] for the edge between positions n and n + 1
        pot = trans.t().unsqueeze(0).unsqueeze(0) + E[:, 1:].unsqueeze(3)
        pot = torch.cat([pot[:, :1] + (E[:, 0] + start).unsqueeze(1).unsqueeze(1), pot[:, 1:]], dim=1)
        # end scores at each sequence's own last edge
        last = (lengths - 2).clamp(min=0)
        bonus = torch.zeros_like(pot)
        bonus[torch.arange(B, device=device), last] = end.view(1, K, 1).expand(B, K, K)
        dist = torch_struct.LinearChainCRF(pot + bonus, lengths=lengths)
        logz = dist.partition.sum()
        logz.backward()
        return float(logz)

    def logz_value():
        with torch.no_grad():
            return float(-(mine(emissions, tags, mask) - mine._score(emissions, tags, lengths.cpu()).sum()))

    return {"varorder.torch": crf_step(mine), "pytorch-crf": crf_step(ref), "torch-struct": struct_step,
            "varorder.torch native (CPU)": crf_step(native)}, logz_value


def run(rounds: int, budget_s: float):
    """Per size and dtype: each system's batch repeated to about ``budget_s`` CPU seconds, those
    repetitions timed in the harness's interleaved rounds; medians per batch."""
    import torch

    torch.set_num_threads(1)
    warnings.filterwarnings("ignore")
    results, loads = [], []
    for B, L, K in SIZES:
        for dtype in (torch.float32, torch.float64):
            systems, logz_value = _systems(B, L, K, dtype)
            reps = {}
            for name, step in systems.items():  # warm-up (compilation, allocator), then a repetition count
                step()
                sample, _ = harness.timed(step)
                reps[name] = max(1, min(50, int(budget_s / max(sample.cpu, 1e-4))))
            batches = {name: (lambda step=step, n=reps[name]: [step() for _ in range(n)][-1])
                       for name, step in systems.items()}
            timing = harness.interleaved(batches, rounds, warmup=False)
            loads += timing.loads
            values = {name: step() for name, step in systems.items()}
            logz = logz_value()
            nll = values["varorder.torch"]
            results.append({
                "B": B, "L": L, "K": K, "dtype": str(dtype).replace("torch.", ""), "reps": reps,
                "cpu_s": {n: timing.median(n, "cpu") / reps[n] for n in systems},
                "wall_s": {n: timing.median(n, "wall") / reps[n] for n in systems},
                "load": timing.load(),
                "nll": {n: values[n] for n in ("varorder.torch", "pytorch-crf", "varorder.torch native (CPU)")},
                "logz": {"varorder.torch": logz, "torch-struct": values["torch-struct"]},
                "nll_rel_diff_vs_pytorch_crf": abs(nll - values["pytorch-crf"]) / abs(values["pytorch-crf"]),
                "logz_rel_diff_vs_torch_struct": abs(logz - values["torch-struct"]) / abs(values["torch-struct"]),
            })
            r = results[-1]
            print(json.dumps({k: r[k] for k in ("B", "L", "K", "dtype", "cpu_s", "load")}), flush=True)
    return results, loads


def to_results_file(results, loads):
    rows = []
    for r in results:
        task = f"B={r['B']}, L={r['L']}, K={r['K']}, {r['dtype']}: NLL forward + backward per batch, ragged lengths"
        mine = r["cpu_s"]["varorder.torch"]
        for peer, name, diff in (("pytorch-crf", "pytorch-crf 0.7.2", r["nll_rel_diff_vs_pytorch_crf"]),
                                 ("torch-struct", "torch-struct 0.5 LinearChainCRF (log Z only)",
                                  r["logz_rel_diff_vs_torch_struct"])):
            ref = r["cpu_s"][peer]
            rows.append(harness.row("varorder.torch CRF (CPU engine)", task, "CPU ms per batch", mine * 1e3, ref * 1e3,
                                    name, note=f"{ref / mine:.1f}x faster; values agree to {diff:.1e} relative; "
                                               f"load {r['load']}", digits=6))
        native, ref = r["cpu_s"]["varorder.torch native (CPU)"], r["cpu_s"]["pytorch-crf"]
        rows.append(harness.row("varorder.torch native recursion (its CUDA path) on CPU", task, "CPU ms per batch",
                                native * 1e3, ref * 1e3, "pytorch-crf 0.7.2",
                                note=f"{ref / native:.1f}x; for reference (on CPU the engine is the default)",
                                digits=6))
    return harness.results_document(
        "Neural structured layers", "varorder.torch CRF vs pytorch-crf and torch-struct, forward + backward per "
        "batch on CPU", rows, issue=43, loads=loads, details={"sizes": results})


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--budget", type=float, default=0.3, help="CPU seconds per system per round (about)")
    parser.add_argument("--out", type=Path, default=None, help="write a results file (schema 1) here")
    args = parser.parse_args(argv)
    results, loads = run(args.rounds, args.budget)
    if args.out is not None:
        harness.write_results(args.out, to_results_file(results, loads))
        print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
