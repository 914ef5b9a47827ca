"""Guard for the semi-Markov engine's two exp-space kernels: the flat dense marginals
(:func:`varorder.engine.semimarkov_flat.marginals`, what :class:`~varorder.models.semicrf.SemiMarkovCRF`
trains on) and the factored statistics (:func:`varorder.engine.semimarkov.segment_statistics`, the HSMM's
E-step), this tree against a baseline copy of varorder (``varorder_base``) in interleaved rounds on the same
random instances. CPU seconds per call (one thread), median over rounds; the ratio is this tree / baseline.
Every output array is compared byte for byte before timing (``identical`` in the results). Compare trees
compiled alike: the factored kernel's last bits differ between a fresh compilation and a load from Numba's
cache of the same source (seen on the baseline alone), so run once to fill both caches, then measure.

Workloads: ``flat`` — 2 000 sequences of 1–40 positions, K = 11 labels, D = 8, 10 % of the segment scores
−inf (GUM's NER shape); ``factored`` — 200 sequences of 20–120 positions, K = 10, D = 20.

    git archive <baseline> src | tar -x -C /tmp/base
    NUMBA_NUM_THREADS=1 PYTHONPATH=src nice -n 5 python benchmarks/guards/semimarkov_scaled.py \\
        --baseline /tmp/base --json out.json
"""

from __future__ import annotations

import argparse
import importlib
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the shared harness
import harness  # noqa: E402


def instances(seed=0):
    rng = np.random.default_rng(seed)
    lengths = rng.integers(1, 41, size=2000)
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    K, D = 11, 8
    P = rng.normal(size=(int(offsets[-1]), D, K))
    P[rng.random(P.shape) < 0.1] = -np.inf
    flat = (P, offsets, rng.normal(size=(K, K)), rng.normal(size=K), rng.normal(size=K))
    K, D = 10, 20
    lengths = rng.integers(20, 121, size=200).astype(np.int64)
    E = rng.normal(size=(200, int(lengths.max()), K))
    factored = (E, rng.normal(size=(K, D)), rng.normal(size=(1, K, K)) * 0.3, rng.normal(size=K),
                rng.normal(size=K), lengths)
    return flat, factored


def calls(package, flat, factored):
    sm = importlib.import_module(f"{package}.engine.semimarkov")
    sf = importlib.import_module(f"{package}.engine.semimarkov_flat")
    E, logdur, T, start, end, lengths = factored
    si = sm.SegmentInput("factored", E, logdur, T, start, end, lengths)
    return {"flat": lambda: sf.marginals(*flat), "factored": lambda: sm.segment_statistics(si)}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--baseline", required=True, help="the baseline checkout (or its src folder)")
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    harness.baseline_package(args.baseline)
    flat, factored = instances()
    ours, base = calls("varorder", flat, factored), calls("varorder_base", flat, factored)
    rows, details = [], {}
    for name in ours:
        a, b = ours[name](), base[name]()
        identical = all(np.asarray(x).tobytes() == np.asarray(y).tobytes() for x, y in zip(a, b))
        result = harness.interleaved({"tree": ours[name], "baseline": base[name]}, args.rounds)
        ratio = result.paired_ratio("tree", "baseline")
        details[name] = {"tree_cpu_s": result.cpu("tree"), "baseline_cpu_s": result.cpu("baseline"),
                         "identical": identical, "load": result.load()}
        rows.append(harness.row(f"semi-Markov {name} kernel", f"{name} workload (see the script)",
                                "CPU s per call (1 thread)", result.median("tree"), result.median("baseline"),
                                "varorder at the baseline tree (same process, interleaved)", "lower",
                                f"median of per-round ratios {ratio:.3f} over {args.rounds} interleaved rounds; "
                                f"outputs {'bit-identical' if identical else 'DIFFER'}; load {result.load()}"))
        print(name, f"ratio {ratio:.3f}", "identical" if identical else "DIFFER", result.load(), flush=True)
    document = harness.results_document("Engine structure", "Semi-Markov exp-space kernels: this tree vs a baseline",
                                        rows, issue=42,
                                        command="NUMBA_NUM_THREADS=1 " + harness.command_line(), details=details)
    if args.json:
        harness.write_results(args.json, document)


if __name__ == "__main__":
    main()
