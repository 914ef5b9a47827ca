"""Speed of the three RCMS/beam builders before and after they shared one selection step
(varorder.engine.selection, issue #34 item 3): old and new modules on the same inputs,
interleaved in rounds, CPU seconds per round; outputs checked bit for bit.

The old modules are copies of contexts/context_set.py, decipher/context_sets.py and
transduce/lattice.py from the revision before the change, in ``--old-dir`` as
old_context_set.py, old_decipher_sets.py, old_transduce_lattice.py.

    flock /tmp/varorder-bench.lock nice -n 5 .venv/bin/python benchmarks/selection_builders.py --old-dir /tmp/old
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

from varorder.contexts import context_set
from varorder.contexts.features import NgramFeatureSpace
from varorder.decipher import context_sets
from varorder.decipher.transitions import fit_transitions
from varorder.transduce import AlignmentFeatureSpace
from varorder.transduce import lattice as transduce_lattice


def load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def workloads(rng):
    """name -> (function of a module returning outputs, module key)."""
    V = 26
    ocr = NgramFeatureSpace(V, 3, backoff=False)
    ocr_obs = [rng.normal(size=(int(rng.integers(4, 12)), V)) * 3 for _ in range(40)]
    ocr_theta = rng.normal(size=ocr.size)
    words = [f"w{i}" for i in range(150)]
    zipf = 1.0 / np.arange(1, 151)
    sents = [[words[i] for i in rng.choice(150, size=int(rng.integers(3, 15)), p=zipf / zipf.sum())]
             for _ in range(2000)]
    tables = fit_transitions(words, sents, 2)
    dec_obs = [np.log(rng.dirichlet(np.ones(150), size=int(rng.integers(5, 20)))) for _ in range(10)]
    fst = AlignmentFeatureSpace(26, 40, order=5, max_advance=2, hash_bits=20)
    th = rng.normal(size=fst.size) * 0.1
    phonemes = [rng.integers(0, 40, size=int(rng.integers(4, 9))) for _ in range(20)]

    def contexts(mode, B):
        return lambda m: [m.build_context_lattice(o, ocr_theta, ocr, B, mode=mode).lattice.arc_weight for o in ocr_obs]

    def decipher(mode, B):
        return lambda m: [m.context_estep(o, tables, B, mode)[1] for o in dec_obs]

    def transduce(sel, B):
        return lambda m: [m.build_alignment_lattice(x, th, fst, B, selection=sel, max_length=len(x) + 3).lattice.arc_weight
                          for x in phonemes]

    return {"contexts rcms:10": (contexts("rcms", 10), "ctx"), "contexts beam:10": (contexts("beam", 10), "ctx"),
            "contexts beam:200": (contexts("beam", 200), "ctx"),
            "decipher rcms:100 (K=150, bigram)": (decipher("rcms", 100), "dec"),
            "decipher beam:100": (decipher("beam", 100), "dec"),
            "transduce rcms:20 (order 5)": (transduce("rcms", 20), "tra"),
            "transduce beam:20": (transduce("beam", 20), "tra")}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--old-dir", required=True)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--json")
    args = parser.parse_args()
    old = {"ctx": load("old_context_set", f"{args.old_dir}/old_context_set.py"),
           "dec": load("old_decipher_sets", f"{args.old_dir}/old_decipher_sets.py"),
           "tra": load("old_transduce_lattice", f"{args.old_dir}/old_transduce_lattice.py")}
    new = {"ctx": context_set, "dec": context_sets, "tra": transduce_lattice}
    rows = []
    for name, (run, key) in workloads(np.random.default_rng(0)).items():
        a, b = run(old[key]), run(new[key])  # compile; outputs compared bit for bit
        assert all(np.array_equal(x, y) for x, y in zip(a, b)), name
        times = {"new": [], "old": []}
        for r in range(args.rounds):
            for label in (("new", "old") if r % 2 == 0 else ("old", "new")):
                module = new[key] if label == "new" else old[key]
                start = time.process_time()
                run(module)
                times[label].append(time.process_time() - start)
        ratio = statistics.median(times["new"]) / statistics.median(times["old"])
        print(f"{name:36s} new {statistics.median(times['new']):.4f} s  old {statistics.median(times['old']):.4f} s  "
              f"ratio {ratio:.3f}  (load {os.getloadavg()[0]:.1f})", flush=True)
        rows.append({"system": f"builder {name}", "task": "random inputs (see the script)",
                     "metric": "CPU s per round (median)", "varorder": statistics.median(times["new"]),
                     "reference": statistics.median(times["old"]), "reference_name": "the builder before #34 item 3",
                     "ratio": ratio, "better": "lower", "note": "outputs bit-identical"})
    if args.json:
        cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")), "")
        Path(args.json).write_text(json.dumps({
            "schema": 1, "area": "engine", "title": "RCMS/beam builders with the shared selection step vs before",
            "issue": 34, "command": f"benchmarks/selection_builders.py --old-dir OLD --rounds {args.rounds}",
            "date": time.strftime("%Y-%m-%d"),
            "machine": {"cpu": cpu, "cores": os.cpu_count(), "load": f"{os.getloadavg()[0]:.2f}"},
            "rows": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
