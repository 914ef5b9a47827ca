"""Scale-out benchmark (issue #35): learners on 1 vs 2 worker processes, and a simulated cluster.

Measured on this machine, for CRF training (L-BFGS, UD English EWT train, the CRFsuite-tutorial
POS features), HMM Baum-Welch (unsupervised, EWT train words, 12 states) and the word aligner
(IBM Model 1 then HMM, agreement training, on the first ``--pairs`` normalised Hansards pairs):

* ``local``: the default serial fit (one shard; the aligner: the part files read, then ``fit``);
* ``sharded``: the same data in ``--shards`` shards, serially (the reference every executor must
  equal bit for bit); the aligner: ``fit_sources`` over ``--parts`` part files, serially;
* ``dask-1`` / ``dask-2``: the shards (the aligner's part files, read and kept on the workers) on a
  ``distributed.LocalCluster`` of 1 and 2 worker processes.

Every configuration runs ``--rounds`` times, interleaved round by round (the machine is shared);
the fastest wall time is reported, every time kept in the raw figures. Per run: wall seconds, the model's equality with the sharded serial model, the bytes one
iteration moves through the driver (the shared arguments once — θ or the parameter tables, sent
as one task of the graph that the other workers fetch from its first holder — and one result
per shard back: (value, gradient) or count tables), the growth of the driver process's RSS during
the fit (peak less start, after a garbage collection and ``malloc_trim``, with a fixed 1 MiB
mmap threshold so that freed arrays leave the resident set: the process holds earlier rows' data
too; it holds the LocalCluster's scheduler) and the workers' peak RSS (psutil, sampled every 50 ms during the
fit).

The simulated scale-out table takes the measured compute of one evaluation (the serial sharded
run's time per evaluation; the aligner's: its mean HMM iteration) split evenly over 8, 64 and 512
workers (one shard each), against the driver's communication per iteration at 1 GB/s (the shared
arguments once plus one result per worker), saying where communication dominates.

    python benchmarks/guards/scale_out.py [--sentences 4000] [--iterations 10] [--shards 8] \
        [--pairs 100000] [--parts 8] [--aligner-iterations 3] [--learners crf,hmm,aligner] [--json out.json]

``--json`` writes the schema-1 results file (``benchmarks/results/scale-out.json``), the raw
figures under ``details``.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import pickle
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the shared harness
import harness  # noqa: E402

ROOT = harness.ROOT
sys.path.insert(0, str(ROOT / "src"))
DATA = harness.DATA
EWT = DATA / "ud-english-ewt"
HANSARDS = DATA / "hansards-en-fr" / "normalized"
BANDWIDTH = 1e9  # bytes per second through the driver


def _load(n_sentences):
    from varorder.io.conllu import read_conllu
    from varorder.models.features import pos_features

    sentences = read_conllu(EWT / "en_ewt-ud-train.conllu.gz")[:n_sentences]
    return ([pos_features(s.words) for s in sentences], [s.tags("upos") for s in sentences],
            [list(s.words) for s in sentences])


class _PeakSampler:
    """Peak RSS of some processes, sampled every 50 ms in a thread, and their RSS at the start."""

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
        self.start = {p.pid: p.memory_info().rss for p in self.processes}
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()


def _growth(sampler, pid):
    return max(0, sampler.peak[pid] - sampler.start[pid])


def _fit(make, fit, executor_kind, n_workers, warm=None):
    """(model, wall seconds, driver RSS growth bytes, worker peak RSS bytes list), sampled during
    the fit: the driver's growth is its peak RSS less its RSS when the fit began (this process
    holds the data of earlier rows too). ``warm()`` runs on every Dask worker before the clock starts (a small fit: the
    workers load the compiled kernels, as the driver did before its serial runs)."""
    import gc

    from varorder._malloc import release_free_heap

    gc.collect()
    release_free_heap()  # the driver's start RSS: what is alive, not what earlier rows freed
    if executor_kind != "dask":
        with _PeakSampler([os.getpid()]) as sampler:
            began = time.perf_counter()
            model = fit(make(None))
            wall = time.perf_counter() - began
        return model, wall, _growth(sampler, os.getpid()), []
    import distributed

    with distributed.LocalCluster(n_workers=n_workers, threads_per_worker=1, processes=True,
                                  dashboard_address=None, silence_logs=50) as cluster, \
            distributed.Client(cluster) as client:
        pids = list(client.run(os.getpid).values())
        if warm is not None:
            client.run(warm)
        with _PeakSampler([os.getpid(), *pids]) as sampler:
            began = time.perf_counter()
            model = fit(make(client))
            wall = time.perf_counter() - began
        return model, wall, _growth(sampler, os.getpid()), [sampler.peak[p] for p in pids]


def _same(a, b, names) -> bool:
    return all(np.array_equal(getattr(a, n), getattr(b, n)) for n in names)


def _simulated(compute_per_iteration, shared_bytes, result_bytes):
    """Compute per worker against the driver's communication per iteration, 8 to 512 workers."""
    rows = []
    for workers in (8, 64, 512):
        compute = compute_per_iteration / workers  # the corpus split evenly, one shard per worker
        communication = (shared_bytes + result_bytes * workers) / BANDWIDTH
        rows.append({"workers": workers, "compute_s": compute, "communication_s": communication,
                     "communication_dominates": communication > compute})
    return rows


def _warm_crf(X, y):
    def warm():
        from varorder.models import CRF

        CRF(max_iterations=2, c2=0.1, n_shards=2).fit(X, y)
        CRF(max_iterations=2, c2=0.1).fit(X, y)
    return warm


def _warm_hmm(words):
    def warm():
        from varorder.models import HMM

        HMM(n_states=12, max_iterations=2, random_state=0, n_shards=2).fit(words)
    return warm


def _warm_aligner(path):
    def warm():
        from varorder.agree.aligner import WordAligner
        from varorder.io.bitext import iter_joint

        WordAligner(ibm1_iterations=1, iterations=1).fit_sources([path], iter_joint)
    return warm


def _keep(row, key, wall, driver_growth=None, peaks=None, identical=None, **extra):
    """Record one run of configuration ``key`` in ``row``: every wall time, the fastest one (with
    its ``extra`` figures) as the figure, the largest peak memory over the rounds, and whether
    every run's model was identical to the reference."""
    row.setdefault(f"{key}_walls_s", []).append(wall)
    if wall == min(row[f"{key}_walls_s"]):
        row[f"{key}_wall_s"] = wall
        row.update({f"{key}_{name}": value for name, value in extra.items()})
    if driver_growth is not None:
        row[f"{key}_driver_growth_mb"] = max(row.get(f"{key}_driver_growth_mb", 0), round(driver_growth / 2**20, 1))
    if peaks:
        old = row.get(f"{key}_worker_peak_rss_mb", [0] * len(peaks))
        row[f"{key}_worker_peak_rss_mb"] = [max(o, round(p / 2**20, 1)) for o, p in zip(old, peaks)]
    if identical is not None:
        row[f"{key}_identical"] = row.get(f"{key}_identical", True) and bool(identical)


def _run_sharded_learners(args, names):
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
        if name.lower() not in names:
            continue
        warm = _warm_crf(X[:50], y[:50]) if name == "CRF" else _warm_hmm(words[:50])
        warm()  # compiled kernels loaded before timing (the Dask workers run it too)
        row = {"learner": name, "tokens": n_tokens, "shards": args.shards, "rounds": args.rounds}
        reference = None
        for _ in range(args.rounds):  # the configurations interleaved, round by round
            model, wall, driver_growth, _ = _fit(lambda ex: build(args.shards, ex), fit, "serial", 1)
            reference = model if reference is None else reference
            _keep(row, "sharded_serial", wall, driver_growth, identical=_same(model, reference, attributes))
            _, wall, driver_growth, _ = _fit(lambda ex: build(None, ex), fit, "serial", 1)
            _keep(row, "local", wall, driver_growth)
            for workers in (1, 2):
                model, wall, driver_growth, peaks = _fit(lambda ex: build(args.shards, ex), fit, "dask", workers, warm)
                _keep(row, f"dask{workers}", wall, driver_growth, peaks, _same(model, reference, attributes))
            del model
        n_evaluations = getattr(reference, "n_evaluations_", None) or len(reference.history_)
        if name == "CRF":
            n_params = (reference.n_features_in_ + len(reference.classes_) + 2) * len(reference.classes_)
        else:
            n_params = reference.log_start_.size + reference.log_transitions_.size + reference.log_emissions_.size
        shared_bytes = 8 * n_params  # θ, or the tables, out once
        result_bytes = 8 * n_params + 8  # a gradient and a value, or the expected counts, back from every shard
        row.update(evaluations=int(n_evaluations), parameters=int(n_params),
                   bytes_per_iteration=shared_bytes + result_bytes * args.shards)
        row["simulated"] = _simulated(row["sharded_serial_wall_s"] / max(1, n_evaluations), shared_bytes, result_bytes)
        rows.append(row)
        print(json.dumps(row, indent=1), flush=True)
    return rows


def _write_parts(directory, n_pairs, n_parts):
    """The first ``n_pairs`` Hansards pairs as ``n_parts`` consecutive 'english ||| french' files
    (streamed: the corpus is never held here). Returns (paths, pairs written, tokens)."""
    paths = [str(Path(directory) / f"part{k:02d}.txt") for k in range(n_parts)]
    bounds = [round(n_pairs * k / n_parts) for k in range(n_parts + 1)]
    written = tokens = 0
    with gzip.open(HANSARDS / "train100k.e.gz", "rt", encoding="utf-8") as fe, \
            gzip.open(HANSARDS / "train100k.f.gz", "rt", encoding="utf-8") as ff:
        for k, path in enumerate(paths):
            with open(path, "w", encoding="utf-8") as out:
                for _ in range(bounds[k + 1] - bounds[k]):
                    e, f = fe.readline(), ff.readline()
                    if not e or not f:
                        break
                    e, f = e.split(), f.split()
                    out.write(f"{' '.join(e)} ||| {' '.join(f)}\n")
                    written += 1
                    tokens += len(e) + len(f)
    return paths, written, tokens


def _aligner_arrays(aligner, path):
    aligner.save(path)
    with np.load(path) as data:
        return {name: data[name] for name in data.files}


def _same_arrays(a, b) -> bool:
    return sorted(a) == sorted(b) and all(np.array_equal(a[name], b[name]) for name in a)


def _run_aligner(args):
    """The word aligner: ``fit`` (pairs in memory, one task) vs ``fit_sources`` over part files, serially
    and on 1 and 2 Dask worker processes."""
    from varorder.agree.aligner import TRAINING, WordAligner
    from varorder.agree.sources import _attached, _estep_piece, encoded_source
    from varorder.io.bitext import iter_joint, read_joint

    params = dict(ibm1_iterations=args.aligner_iterations, iterations=args.aligner_iterations)
    with tempfile.TemporaryDirectory() as tmp:
        paths, n_pairs, n_tokens = _write_parts(tmp, args.pairs, args.parts)

        def timed(fit, kind="serial", workers=1):
            """(model, wall, driver peak, worker peaks, mean HMM iteration seconds) of ``fit(aligner)``."""
            stamps = []

            def callback(phase, it, aligner):
                stamps.append((phase, time.perf_counter()))

            def build(executor):
                return WordAligner(executor=executor, callback=callback, **params)

            model, wall, driver_growth, peaks = _fit(build, fit, kind, workers, _warm_aligner(paths[0]))
            hmm = [t for phase, t in stamps if phase == "hmm"]
            last_ibm1 = [t for phase, t in stamps if phase == "ibm1"][-1:]
            per_iteration = float(np.mean(np.diff(last_ibm1 + hmm))) if hmm else float("nan")
            return model, wall, driver_growth, peaks, per_iteration

        def from_sources(aligner):
            return aligner.fit_sources(paths, iter_joint)

        def read_and_fit(aligner):  # the local job reads the corpus too, as fit_sources does
            return aligner.fit([pair for path in paths for pair in read_joint(path)])

        row = {"learner": "aligner", "pairs": n_pairs, "tokens": n_tokens, "parts": len(paths),
               "iterations": {"ibm1": args.aligner_iterations, "hmm": args.aligner_iterations},
               "rounds": args.rounds}
        _warm_aligner(paths[0])()  # compiled kernels loaded before timing (the Dask workers run it too)
        expected = None
        for _ in range(args.rounds):  # the configurations interleaved, round by round
            model, wall, driver_growth, _, per_iteration = timed(from_sources)
            arrays = _aligner_arrays(model, Path(tmp) / "model.npz")
            expected = arrays if expected is None else expected
            _keep(row, "sharded_serial", wall, driver_growth, identical=_same_arrays(arrays, expected),
                  hmm_iteration_s=per_iteration)
            if "pair_table" not in row:
                reference = model
                row["pair_table"] = len(reference.pairs_)
                # what one iteration moves: the two submodels out once, one piece's counts back per piece
                shared_bytes = len(pickle.dumps(reference.models_, protocol=pickle.HIGHEST_PROTOCOL))
                shards = _attached(encoded_source(paths[0], iter_joint, reference.e_vocab_.tokens[1:],
                                                  reference.f_vocab_.tokens[1:], reference.shard_size,
                                                  reference.max_length), reference.pairs_)
                result_bytes = len(pickle.dumps(_estep_piece(shards, reference.models_, TRAINING[reference.training]),
                                                protocol=pickle.HIGHEST_PROTOCOL))
                del shards, reference
                row.update(shared_bytes=shared_bytes, result_bytes_per_part=result_bytes,
                           bytes_per_iteration=shared_bytes + result_bytes * len(paths))
            del model
            _, wall, driver_growth, _, per_iteration = timed(read_and_fit)
            _keep(row, "local", wall, driver_growth, hmm_iteration_s=per_iteration)
            for workers in (1, 2):
                model, wall, driver_growth, peaks, per_iteration = timed(from_sources, "dask", workers)
                _keep(row, f"dask{workers}", wall, driver_growth, peaks,
                      _same_arrays(_aligner_arrays(model, Path(tmp) / "model.npz"), expected),
                      hmm_iteration_s=per_iteration)
                del model
    row["simulated"] = _simulated(row["sharded_serial_hmm_iteration_s"], shared_bytes, result_bytes)
    print(json.dumps(row, indent=1), flush=True)
    return [row]


def run(args):
    names = set(args.learners.split(","))
    rows = _run_sharded_learners(args, names)
    if "aligner" in names:
        rows += _run_aligner(args)
    return rows


def _ratio(value, reference):
    """The ratio of the two figures as the results file shows them (3 decimals)."""
    return round(round(value, 3) / round(reference, 3), 3)


def _results(raw, args):
    """The schema-1 results document (docs/tools/summarize_results.py) of a run."""
    load = f"{raw['load_before'][0]:.2f} before, {raw['load_after'][0]:.2f} after (1-min load average)"
    rows = []
    for row in raw["rows"]:
        name = row["learner"]
        if name == "aligner":
            task = (f"IBM 1 + HMM agreement ({row['iterations']['ibm1']} + {row['iterations']['hmm']} iterations), "
                    f"Hansards en-fr first {row['pairs']:,} normalised pairs in {row['parts']} part files")
            reference_name = "varorder WordAligner.fit, the parts read into memory then fit, serial (the default)"
            sharded_name = "varorder WordAligner.fit_sources (parts, serial)"
            sharded_note = f"hmm iteration {row['sharded_serial_hmm_iteration_s']:.2f} s"
        else:
            kind = ("L-BFGS" if name == "CRF" else "Baum-Welch (12 states)")
            task = (f"{kind}, {row['evaluations']} evaluations, UD-EWT train first {args.sentences:,} sentences "
                    f"({row['tokens']} tokens), {row['shards']} shards")
            reference_name = f"varorder {name}, one shard, serial (the default)"
            sharded_name = f"varorder {name} (sharded, serial)"
            sharded_note = "the reference of the Dask runs"
        base = {"task": task, "metric": f"wall seconds (fit; best of {row['rounds']} interleaved rounds)",
                "reference": round(row["local_wall_s"], 3), "reference_name": reference_name, "better": "lower"}
        rows.append({"system": sharded_name, **base, "varorder": round(row["sharded_serial_wall_s"], 3),
                     "ratio": _ratio(row["sharded_serial_wall_s"], row["local_wall_s"]), "note": sharded_note})
        for workers in (1, 2):
            wall = row[f"dask{workers}_wall_s"]
            note = (f"bit-identical to the serial {'parts' if name == 'aligner' else 'sharded'} model: "
                    f"{row[f'dask{workers}_identical']}; driver RSS growth (scheduler included) "
                    f"{row[f'dask{workers}_driver_growth_mb']} MB (serial: {row['sharded_serial_driver_growth_mb']} MB), "
                    f"worker peak RSS {row[f'dask{workers}_worker_peak_rss_mb']} MB; "
                    f"{row['bytes_per_iteration'] / 1e6:.1f} MB through the driver per iteration")
            if name == "aligner":
                note += f"; hmm iteration {row[f'dask{workers}_hmm_iteration_s']:.2f} s"
            system = "WordAligner.fit_sources (parts" if name == "aligner" else f"{name} (sharded"
            rows.append({"system": f"varorder {system}, Dask LocalCluster {workers} worker "
                                   f"process{'es' if workers > 1 else ''})",
                         **base, "varorder": round(wall, 3), "ratio": _ratio(wall, row["local_wall_s"]),
                         "note": note})
    return {"schema": 1, "area": "Scale-out",
            "title": "Learners on 1 vs 2 Dask worker processes (LocalCluster): sharded objective, E-step, aligner parts",
            "issue": 35, "command": args.command, "date": raw["date"],
            "machine": {"cpu": raw["cpu"], "cores": raw["cores"], "load": load},
            "rows": rows, "details": {"raw": raw}}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sentences", type=int, default=4000)
    parser.add_argument("--iterations", type=int, default=10)
    parser.add_argument("--shards", type=int, default=8)
    parser.add_argument("--pairs", type=int, default=100_000, help="aligner: Hansards pairs (at most 100,000)")
    parser.add_argument("--parts", type=int, default=8, help="aligner: part files the pairs are cut into")
    parser.add_argument("--aligner-iterations", type=int, default=3, help="aligner: IBM 1 and HMM iterations each")
    parser.add_argument("--learners", default="crf,hmm,aligner")
    parser.add_argument("--rounds", type=int, default=2,
                        help="rounds of every configuration, interleaved; the fastest is reported")
    parser.add_argument("--command", default=None,
                        help="the command line to record in the results file (default: this one)")
    parser.add_argument("--json", type=Path, help="write the schema-1 results file here")
    args = parser.parse_args()
    unknown = set(args.learners.split(",")) - {"crf", "hmm", "aligner"}
    if unknown:
        parser.error(f"--learners: unknown {sorted(unknown)} (crf, hmm, aligner)")
    if not EWT.exists() or not HANSARDS.exists():
        sys.exit(f"needs {EWT} and {HANSARDS} (../shared/data)")
    args.command = args.command or "python " + " ".join(sys.argv)
    from varorder._malloc import fix_mmap_threshold

    fix_mmap_threshold(1 << 20)  # freed arrays of 1 MiB or more leave the resident set (the driver's growth)
    began_load = os.getloadavg()
    rows = run(args)
    raw = {"command": "python " + " ".join(sys.argv), "date": time.strftime("%Y-%m-%d"), "cpu": harness.cpu_model(),
           "cores": os.cpu_count(), "load_before": began_load, "load_after": os.getloadavg(), "rows": rows}
    if args.json:
        tmp = args.json.with_suffix(".tmp")
        tmp.write_text(json.dumps(_results(raw, args), indent=1) + "\n")
        os.replace(tmp, args.json)


if __name__ == "__main__":
    main()
