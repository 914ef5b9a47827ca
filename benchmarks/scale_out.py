"""Scale-out benchmark (issue #35): learners on 1 vs 2 worker processes, and a simulated cluster.

Measured on this machine, for CRF training (L-BFGS, UD English EWT train, the CRFsuite-tutorial
POS features) and HMM Baum-Welch (unsupervised, EWT train words, 12 states):

* ``local``: the default serial fit (one shard);
* ``sharded``: the same data in ``--shards`` shards, serially (the reference every executor must
  equal bit for bit);
* ``dask-1`` / ``dask-2``: the shards on a ``distributed.LocalCluster`` of 1 and 2 worker processes.

Per run: wall seconds, the model's equality with the sharded serial model, the bytes one
iteration sends (θ or the parameter tables to every shard, one (value, gradient) or count tables
back from every shard), the driver's peak RSS and the workers' peak RSS (psutil, sampled).

The simulated scale-out table takes the measured per-shard compute of one evaluation (the
serial sharded run's time per evaluation, divided by the shards' share of the tokens) and the
per-shard message size, and prints for 8, 64 and 512 workers (one shard each, the corpus split
evenly) the compute per worker per iteration against the driver's communication per iteration
(every shard's message goes through the driver: a star, not a tree), at 1 GB/s, saying where
communication dominates.

    python benchmarks/scale_out.py [--sentences 4000] [--iterations 10] [--shards 8] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import sys
import threading
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
EWT = Path(os.environ.get("VARORDER_SHARED_DATA", ROOT.parent / "shared" / "data")) / "ud-english-ewt"
BANDWIDTH = 1e9  # bytes per second through the driver


def _cpu_model() -> str:
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _load(n_sentences):
    from varorder.io.conllu import read_conllu
    from varorder.models.features import pos_features

    sentences = read_conllu(EWT / "en_ewt-ud-train.conllu.gz")[:n_sentences]
    return ([pos_features(s.words) for s in sentences], [s.tags("upos") for s in sentences],
            [list(s.words) for s in sentences])


class _PeakSampler:
    """Peak RSS of some processes, sampled every 50 ms in a thread."""

    def __init__(self, pids):
        import psutil

        self.processes = [psutil.Process(p) for p in pids]
        self.peak = {p.pid: 0 for p in self.processes}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while not self._stop.is_set():
            for p in self.processes:
                try:
                    self.peak[p.pid] = max(self.peak[p.pid], p.memory_info().rss)
                except Exception:
                    pass
            time.sleep(0.05)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()


def _fit(make, fit, executor_kind, n_workers):
    """(model, wall seconds, worker peak RSS bytes list)."""
    if executor_kind != "dask":
        began = time.perf_counter()
        model = fit(make(None))
        return model, time.perf_counter() - began, []
    import distributed

    with distributed.LocalCluster(n_workers=n_workers, threads_per_worker=1, processes=True,
                                  dashboard_address=None, silence_logs=50) as cluster, \
            distributed.Client(cluster) as client:
        pids = list(client.run(os.getpid).values())
        with _PeakSampler(pids) as sampler:
            began = time.perf_counter()
            model = fit(make(client))
            wall = time.perf_counter() - began
        return model, wall, list(sampler.peak.values())


def _same(a, b, names) -> bool:
    return all(np.array_equal(getattr(a, n), getattr(b, n)) for n in names)


def run(args):
    from varorder.models import CRF, HMM

    X, y, words = _load(args.sentences)
    n_tokens = sum(len(s) for s in y)
    rows = []
    learners = {
        "CRF": (lambda shards, executor: CRF(max_iterations=args.iterations, c2=0.1, n_shards=shards,
                                              executor=executor, delta=0.0),
                lambda model: model.fit(X, y),
                ("emission_weights_", "transition_weights_", "start_weights_", "end_weights_")),
        "HMM": (lambda shards, executor: HMM(n_states=12, max_iterations=args.iterations, tol=0.0, random_state=0,
                                              n_shards=shards, executor=executor),
                lambda model: model.fit(words),
                ("log_start_", "log_transitions_", "log_emissions_")),
    }
    for name, (build, fit, attributes) in learners.items():
        reference, sharded_wall, _ = _fit(lambda ex: build(args.shards, ex), fit, "serial", 1)
        local, local_wall, _ = _fit(lambda ex: build(None, ex), fit, "serial", 1)
        n_evaluations = getattr(reference, "n_evaluations_", None) or len(reference.history_)
        if name == "CRF":
            n_params = (reference.n_features_in_ + len(reference.classes_) + 2) * len(reference.classes_)
            per_shard_bytes = 8 * n_params * 2 + 8  # θ out, gradient and value back
        else:
            n_params = reference.log_start_.size + reference.log_transitions_.size + reference.log_emissions_.size
            per_shard_bytes = 8 * n_params * 2 + 8  # the tables out, the expected counts back
        row = {"learner": name, "tokens": n_tokens, "shards": args.shards, "evaluations": int(n_evaluations),
               "parameters": int(n_params), "local_wall_s": local_wall, "sharded_serial_wall_s": sharded_wall,
               "bytes_per_iteration": per_shard_bytes * args.shards,
               "driver_peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}
        for workers in (1, 2):
            model, wall, peaks = _fit(lambda ex: build(args.shards, ex), fit, "dask", workers)
            row[f"dask{workers}_wall_s"] = wall
            row[f"dask{workers}_identical"] = _same(model, reference, attributes)
            row[f"dask{workers}_worker_peak_rss_mb"] = [round(p / 2**20, 1) for p in peaks]
        compute_per_eval = sharded_wall / max(1, n_evaluations)
        row["simulated"] = []
        for workers in (8, 64, 512):
            compute = compute_per_eval / workers  # the corpus split evenly, one shard per worker
            communication = per_shard_bytes * workers / BANDWIDTH
            row["simulated"].append({"workers": workers, "compute_s": compute, "communication_s": communication,
                                     "communication_dominates": communication > compute})
        rows.append(row)
        print(json.dumps(row, indent=1), flush=True)
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sentences", type=int, default=4000)
    parser.add_argument("--iterations", type=int, default=10)
    parser.add_argument("--shards", type=int, default=8)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    if not EWT.exists():
        sys.exit(f"needs {EWT} (../shared/data)")
    began_load = os.getloadavg()
    rows = run(args)
    result = {"command": "python " + " ".join(sys.argv), "date": time.strftime("%Y-%m-%d"), "cpu": _cpu_model(),
              "cores": os.cpu_count(), "load_before": began_load, "load_after": os.getloadavg(), "rows": rows}
    if args.json:
        args.json.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
