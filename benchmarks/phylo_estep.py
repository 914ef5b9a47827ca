"""E-step speed of the two-slice phylogenetic HMM: tree sum-product run by the engine's
hypergraph inside–outside (now) against the NumPy message passing phylo.py ran before
(issue #34 item 2; the guard is 1.2x).

Both E-steps run on the same data and parameters (hpmrc, 5 species, 20,608 columns, both
parities), interleaved in rounds; prints per-round CPU seconds and the median ratio, and
checks that the expected counts agree.

    flock /tmp/varorder-bench.lock nice -n 5 .venv/bin/python benchmarks/phylo_estep.py \\
        --old /tmp/old_phylo.py --rounds 5
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import numpy as np

from varorder.agree import phylo
from varorder.io.fasta import read_alignment

DATA = Path(os.environ.get("VARORDER_DATA", Path(__file__).resolve().parents[1].parent / "shared" / "data")) / "phylo"


def load(module):
    names, seqs = read_alignment(DATA / "hpmrc.fa.gz")
    tree_line = next(line for line in (DATA / "hpmrc-rev-dg-global.mod").read_text().splitlines()
                     if line.startswith("TREE:"))
    tree = module.parse_newick(tree_line.split(":", 1)[1])
    node_of = {n: v for v, n in enumerate(tree.names) if n}
    leaf_nodes = np.array([node_of[n] for n in names])
    observed = np.stack([module.encode_nucleotides(s) for s in seqs])
    return module.PhyloData(tree, leaf_nodes, observed)


def estep(module, data, seed=0):
    start = time.process_time()
    stats = []
    for parity in (0, 1):
        model = module.PhyloSlices(parity, data.tree).initialize(seed + parity)
        stats.append(model.expected_statistics(data, model.shared_log_potentials(data)))
    return time.process_time() - start, stats


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--old", required=True, help="the former phylo.py (git show <rev>:src/varorder/agree/phylo.py)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--json")
    args = parser.parse_args()
    spec = importlib.util.spec_from_file_location("old_phylo", args.old)
    old = importlib.util.module_from_spec(spec)
    sys.modules["old_phylo"] = old
    spec.loader.exec_module(old)
    data_new, data_old = load(phylo), load(old)
    estep(phylo, data_new), estep(old, data_old)  # compile, warm caches
    times = {"engine": [], "numpy": []}
    for r in range(args.rounds):
        for name, module, data in (("engine", phylo, data_new), ("numpy", old, data_old))[::1 if r % 2 == 0 else -1]:
            seconds, stats = estep(module, data)
            times[name].append(seconds)
            if name == "engine":
                new_stats = stats
            else:
                old_stats = stats
        print(f"round {r}: engine {times['engine'][-1]:.3f} s, numpy {times['numpy'][-1]:.3f} s "
              f"(load {os.getloadavg()[0]:.2f})", flush=True)
    worst = max(float(np.max(np.abs(a.shared - b.shared)) / max(1.0, float(np.max(np.abs(b.shared)))))
                for a, b in zip(new_stats, old_stats))
    z = max(abs(a.log_normalizer - b.log_normalizer) / abs(b.log_normalizer) for a, b in zip(new_stats, old_stats))
    ratio = statistics.median(times["engine"]) / statistics.median(times["numpy"])
    print(f"median CPU s: engine {statistics.median(times['engine']):.3f}, numpy {statistics.median(times['numpy']):.3f}, "
          f"ratio {ratio:.3f}; counts max rel diff {worst:.2e}, log-likelihood rel diff {z:.2e}")
    if args.json:
        cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")),
                   platform.processor())
        Path(args.json).write_text(json.dumps({
            "schema": 1, "area": "engine", "title": "phylogenetic HMM E-step: engine hypergraph vs former NumPy tree DP",
            "issue": 34, "command": "benchmarks/phylo_estep.py --old OLD_PHYLO --rounds " + str(args.rounds),
            "date": time.strftime("%Y-%m-%d"), "machine": {"cpu": cpu, "cores": os.cpu_count(),
                                                         "load": f"{os.getloadavg()[0]:.2f}"},
            "rows": [{"system": "PhyloSlices.expected_statistics, both parities", "task": "hpmrc, 5 species, 20,608 columns",
                      "metric": "CPU s (median of rounds)", "varorder": statistics.median(times["engine"]),
                      "reference": statistics.median(times["numpy"]), "reference_name": "former NumPy tree DP",
                      "ratio": ratio, "better": "lower",
                      "note": f"counts max rel diff {worst:.1e}, log-likelihood rel diff {z:.1e}"}]}, indent=1) + "\n")


if __name__ == "__main__":
    main()
