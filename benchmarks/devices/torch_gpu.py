"""varorder.torch on a CUDA device (issue #43): the checks of tests/test_torch.py's native path,
then the forward + backward benchmark against pytorch-crf and torch-struct, on the GPU.

One command, a few minutes, on a machine with a CUDA GPU, from the repository root, with the
package and the test extra installed (``pip install -e ".[test]"`` — or any CUDA build of torch
plus pytorch-crf and torch-struct; ``PYTHONPATH=src`` instead of the install also works):

    python benchmarks/devices/torch_gpu.py                                   # checks + benchmark, prints JSON lines
    python benchmarks/devices/torch_gpu.py --out benchmarks/results/torch-crf-gpu.json   # + a results file
    python benchmarks/devices/torch_gpu.py --checks-only                     # about 10 s

Without CUDA it prints why and exits 0 (nothing is measured, nothing written), so it is safe to
run anywhere. A failed check exits 1 before any timing. ``--out`` writes a results file in
schema 1 (``benchmarks/harness.py``: one row per size and dtype against each peer, GPU wall ms per
batch, and one row per check, its largest relative error against its tolerance; the full report
under ``details``), so ``python docs/tools/summarize_results.py --check`` accepts it and the
comparison page shows it.

Checks (CUDA tensors against the CPU engine, the oracle of the native path): log Z, the
gradients (= node / edge / start marginals), node marginals and Viterbi paths of
``varorder.torch.native`` in float64 to 1e-10 (shared and per-sequence transitions, ragged
lengths, an ``allowed`` mask, a −inf potential), float32 to 1e-4 relative; the ``CRF`` module
on CUDA (``backend="auto"`` picks the native path) equals pytorch-crf on CUDA in
log-likelihood, gradients and decodes.

Benchmark: as benchmarks/peers/torch_crf.py (negative log-likelihood + backward per batch,
ragged lengths) at (B = 32, L = 128, K = 9) and (B = 32, L = 50, K = 45), float32 and float64,
interleaved rounds, wall time per batch with ``torch.cuda.synchronize()`` around each batch
(on a GPU the wall time is the cost); values compared with the CPU engine. Target of #43:
≥ pytorch-crf and torch-struct at both sizes, values within float32 tolerance of the CPU engine.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import statistics
import sys
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "benchmarks" / "peers"))
sys.path.insert(0, str(ROOT / "benchmarks"))


def _close(name, got, want, tol, failures):
    import numpy as np

    got = np.asarray(got, dtype=np.float64)
    want = np.asarray(want, dtype=np.float64)
    same_inf = np.isneginf(got) & np.isneginf(want)
    err = np.where(same_inf, 0.0, np.abs(got - want) / np.maximum(1.0, np.abs(want)))
    worst = float(err.max()) if err.size else 0.0
    ok = worst <= tol
    print(f"{'ok  ' if ok else 'FAIL'} {name}: max relative error {worst:.2e} (tolerance {tol:.0e})", flush=True)
    if not ok:
        failures.append(name)
    return worst


def checks(device) -> dict:
    import numpy as np
    import torch

    from varorder import chain
    from varorder.torch import CRF, chain_log_partition, native

    failures, errors = [], {}
    g = torch.Generator().manual_seed(0)
    for shared in (True, False):
        B, L, K = 6, 40, 7
        E = torch.randn(B, L, K, generator=g, dtype=torch.float64)
        E[0, 3, 2] = -math.inf
        T = torch.randn(*((K, K) if shared else (B, K, K)), generator=g, dtype=torch.float64)
        S, F = torch.randn(K, generator=g, dtype=torch.float64), torch.randn(K, generator=g, dtype=torch.float64)
        lengths = np.array([40, 31, 1, 17, 40, 9])
        allowed = np.random.default_rng(1).random((B, L, K)) < 0.8
        allowed[:, :, 0] = True
        args = tuple(x.numpy() for x in (E, T, S, F))
        ref_z = chain.log_partition(*args, lengths=lengths, allowed=allowed)
        node, edge = chain.marginals(*args, lengths=lengths, allowed=allowed, edges="sum")
        ref_paths, ref_scores = chain.viterbi(*args, lengths=lengths, allowed=allowed)
        tag = "shared" if shared else "per-sequence"
        for dtype, tol in ((torch.float64, 1e-10), (torch.float32, 1e-4)):
            e, t, s, f = (x.to(device, dtype).requires_grad_(True) for x in (E, T, S, F))
            z = chain_log_partition(e, t, s, f, lengths=lengths, allowed=allowed, backend="auto")
            ge, gt, gs = torch.autograd.grad(z.sum(), (e, t, s))
            name = f"{tag} {str(dtype)[6:]}"
            errors[f"log Z, {name}"] = _close(f"log Z, {name}", z.detach().cpu(), ref_z, tol, failures)
            errors[f"d log Z / d emissions = node marginals, {name}"] = _close(
                f"d log Z / d emissions = node marginals, {name}", ge.cpu(), node, tol, failures)
            errors[f"d log Z / d transitions = edge marginals, {name}"] = _close(
                f"d log Z / d transitions = edge marginals, {name}", gt.cpu(), edge.sum(0) if shared else edge, tol,
                failures)
            errors[f"d log Z / d start, {name}"] = _close(f"d log Z / d start, {name}", gs.cpu(), node[:, 0].sum(0),
                                                         tol, failures)
            if dtype == torch.float64:
                paths, scores = native.chain_viterbi(e, t, s, f, lengths=lengths, allowed=allowed)
                same = bool((paths.cpu().numpy() == ref_paths).all())
                print(f"{'ok  ' if same else 'FAIL'} Viterbi paths, {name}: {'identical' if same else 'differ'}")
                if not same:
                    failures.append(f"Viterbi paths, {name}")
                errors[f"Viterbi scores, {name}"] = _close(f"Viterbi scores, {name}", scores.cpu(), ref_scores, tol,
                                                           failures)
    try:
        import torchcrf
    except ImportError:
        print("skip CRF vs pytorch-crf on CUDA: pytorch-crf is not installed")
    else:
        torch.manual_seed(2)
        ref = torchcrf.CRF(9, batch_first=True).double().to(device)
        mine = CRF(9, batch_first=True).double().to(device)
        mine.load_state_dict(ref.state_dict())
        E = torch.randn(8, 30, 9, dtype=torch.float64, device=device, requires_grad=True)
        tags = torch.randint(0, 9, (8, 30), device=device)
        mask = torch.arange(30, device=device).unsqueeze(0) < torch.randint(1, 31, (8, 1), device=device)
        mask[:, 0] = True
        a, b = ref(E, tags, mask, reduction="none"), mine(E, tags, mask, reduction="none")
        errors["CRF log-likelihood vs pytorch-crf"] = _close("CRF log-likelihood vs pytorch-crf", b.detach().cpu(),
                                                            a.detach().cpu(), 1e-10, failures)
        ga = torch.autograd.grad(a.sum(), (E, ref.transitions))
        gb = torch.autograd.grad(b.sum(), (E, mine.transitions))
        for what, x, y in (("emissions", ga[0], gb[0]), ("transitions", ga[1], gb[1])):
            errors[f"CRF gradient ({what}) vs pytorch-crf"] = _close(f"CRF gradient ({what}) vs pytorch-crf",
                                                                     y.cpu(), x.cpu(), 1e-10, failures)
        same = mine.decode(E, mask) == ref.decode(E, mask)
        print(f"{'ok  ' if same else 'FAIL'} CRF decode vs pytorch-crf: {'identical' if same else 'differ'}")
        if not same:
            failures.append("CRF decode vs pytorch-crf")
    return {"failures": failures, "max_relative_errors": errors}


def benchmark(device, rounds: int):
    import torch

    import torch_crf  # benchmarks/peers/torch_crf.py: the same systems and work

    warnings.filterwarnings("ignore")
    out = []
    for B, L, K in torch_crf.SIZES:
        for dtype in (torch.float32, torch.float64):
            systems, _ = torch_crf._systems(B, L, K, dtype, device=device)
            systems.pop("varorder.torch native (CPU)", None)

            def timed(step, reps):
                torch.cuda.synchronize()
                began = time.perf_counter()
                for _ in range(reps):
                    value = step()
                torch.cuda.synchronize()
                return (time.perf_counter() - began) / reps, value

            reps = {}
            for name, step in systems.items():
                step()
                wall, _ = timed(step, 1)
                reps[name] = max(1, min(50, int(0.5 / max(wall, 1e-4))))
            walls = {name: [] for name in systems}
            values = {}
            for r in range(rounds):
                for name in (list(systems) if r % 2 == 0 else list(reversed(systems))):
                    wall, values[name] = timed(systems[name], reps[name])
                    walls[name].append(wall)
            row = {"B": B, "L": L, "K": K, "dtype": str(dtype)[6:],
                   "wall_s": {n: statistics.median(w) for n, w in walls.items()}, "values": values}
            print(json.dumps(row), flush=True)
            out.append(row)
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--checks-only", action="store_true")
    parser.add_argument("--out", type=Path, default=None, help="write checks and timings (JSON) here")
    args = parser.parse_args(argv)
    try:
        import torch
    except ImportError:
        print("skipped: torch is not installed (pip install -e '.[test]')")
        return 0
    if not torch.cuda.is_available():
        print(f"skipped: no CUDA device (torch {torch.__version__}, CUDA build: {torch.version.cuda})")
        return 0
    device = torch.device("cuda")
    print(f"device: {torch.cuda.get_device_name(0)}, torch {torch.__version__}, CUDA {torch.version.cuda}")
    report = {"issue": 43, "date": dt.date.today().isoformat(), "device": torch.cuda.get_device_name(0),
              "torch": torch.__version__, "checks": checks(device)}
    if report["checks"]["failures"]:
        print(f"{len(report['checks']['failures'])} check(s) failed; no timing")
    elif not args.checks_only:
        report["benchmark"] = benchmark(device, args.rounds)
    if args.out is not None:
        import harness

        harness.write_results(args.out, results_file(report))
        print(f"wrote {args.out}")
    return 1 if report["checks"]["failures"] else 0


#: the tolerance of each check, by the dtype its name ends with (pytorch-crf's checks: float64)
_TOLERANCES = {"float64": 1e-10, "float32": 1e-4}


def results_file(report) -> dict:
    """The report as a results file (schema 1): timing rows, varorder.torch against each peer (GPU wall ms
    per batch), and a row per check (its largest relative error against its tolerance)."""
    import harness

    rows = []
    for run in report.get("benchmark", []):
        task = (f"B={run['B']}, L={run['L']}, K={run['K']}, {run['dtype']}: NLL forward + backward per batch, "
                f"ragged lengths, on {report['device']}")
        mine = run["wall_s"]["varorder.torch"]
        for peer in ("pytorch-crf", "torch-struct"):
            if peer not in run["wall_s"]:
                continue
            agree = abs(run["values"][peer] - run["values"]["varorder.torch"]) / max(1.0, abs(run["values"][peer]))
            rows.append(harness.row("varorder.torch CRF (native path, CUDA)", task, "GPU wall ms per batch",
                                    1e3 * mine, 1e3 * run["wall_s"][peer], peer, better="lower",
                                    note=f"values agree to {agree:.1e} relative"))
    for name, error in report["checks"]["max_relative_errors"].items():
        tolerance = _TOLERANCES["float32" if name.endswith("float32") else "float64"]
        rows.append(harness.row("varorder.torch on CUDA against the CPU engine", name, "max relative error",
                                error, tolerance, "tolerance", better="lower"))
    title = "varorder.torch on a CUDA device: checks against the CPU engine, NLL + backward against peers"
    return harness.results_document("Neural structured layers", title, rows, issue=43,
                                    machine_info=harness.machine(note=report["device"]), details=report)


if __name__ == "__main__":
    sys.exit(main())
