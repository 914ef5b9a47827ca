"""Performance guard of #34 for the model families on the engine: the word aligner, the CRF,
RCMS and the n-gram LM, plus the engine operations whose dispatch #34 changed (chain k-best,
entropy, sampling; lattice k-best, entropy, marginals, Viterbi; hypergraph inside, Viterbi),
this tree against a baseline copy of varorder (renamed ``varorder_base`` so both load in
one process), interleaved in rounds on the same data. CPU seconds (``time.process_time``)
per call, one thread (NUMBA_NUM_THREADS=1, BLAS pinned), median over rounds; the ratio is
this tree / baseline. Small configurations (a few minutes in all):

* aligner: ``WordAligner(training="agreement", ibm1_iterations=1, iterations=2)`` on the
  first 3,000 Hansards train10k pairs (HMM E-steps: ``chain.marginals(edges="sum")``, banded);
* CRF: ``CRF(max_iterations=8)`` on the first 1,000 UD EWT training sentences (POS features);
* RCMS: ``ReifiedContextModel(num_labels=26, num_contexts=10, epochs=1)`` on 120 OCR words
  of the training folds, then ``predict_with_confidence`` on 200 test words (lattice
  forward–backward and Viterbi on the built context sets);
* LM: ``ModifiedKneserNey(order=4)`` on 20,000 PTB training sentences, then ``perplexity``
  on 2,000 validation sentences (no engine code: a control for the machine's noise).

    git archive <baseline> src | tar -x -C /tmp/base     # the baseline's varorder, loaded as varorder_base
    NUMBA_NUM_THREADS=1 PYTHONPATH=src flock /tmp/varorder-bench.lock nice -n 5 \\
        python benchmarks/guards/engine_guard_families.py --baseline /tmp/base --json out.json
"""

from __future__ import annotations

import argparse
import gzip
import importlib
import statistics
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_limits

import sys

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the shared harness
import harness  # noqa: E402

DATA = next((p for p in (harness.DATA, Path("/work/shared/data"))
             if p.is_dir()), Path("/work/shared/data"))


def _lines(path, n):
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as handle:
        return [line.split() for _, line in zip(range(n), handle)]


def load_data():
    from varorder.io.conllu import read_conllu
    from varorder.models.features import pos_features
    from varorder.tasks.ocr import load_ocr, word_arrays

    hans = DATA / "hansards-en-fr" / "normalized"
    pairs = list(zip(_lines(hans / "train10k.e.gz", 3000), _lines(hans / "train10k.f.gz", 3000)))
    sents = read_conllu(DATA / "ud-english-ewt" / "en_ewt-ud-train.conllu.gz")[:1000]
    crf = ([pos_features(s.words) for s in sents], [s.tags("upos") for s in sents])
    train, test = load_ocr()
    xs, ys = word_arrays(train[:120])
    xt, _ = word_arrays(test[:200])
    lm_train = [" ".join(w) for w in _lines(DATA / "ptb-lm" / "ptb.train.txt.gz", 20_000)]
    lm_valid = [" ".join(w) for w in _lines(DATA / "ptb-lm" / "ptb.valid.txt.gz", 2_000)]
    rng = np.random.default_rng(0)
    E = rng.normal(size=(200, 30, 12))
    T = rng.normal(size=(12, 12))
    return {"pairs": pairs, "crf": crf, "ocr": (xs, ys, xt), "lm": (lm_train, lm_valid), "chain": (E, T)}


def workloads(pkg: str, data):
    """name → a function running one unit of work with package ``pkg`` (varorder or varorder_base)."""
    mod = lambda name: importlib.import_module(f"{pkg}.{name}")  # noqa: E731
    chain, lattice, hypergraph = mod("chain"), mod("lattice"), mod("hypergraph")
    E, T = data["chain"]
    lat = lattice.Lattice.from_chain(E[0, :12, :8], T[:8, :8])
    lats = [lattice.Lattice.from_chain(E[b, :20], T) for b in range(20)]
    hg = hypergraph.Hypergraph.from_lattice(lats[0])

    def aligner():
        mod("agree.aligner").WordAligner(training="agreement", ibm1_iterations=1, iterations=2).fit(data["pairs"])

    def crf():
        X, y = data["crf"]
        mod("models.crf").CRF(max_iterations=8).fit(X, y)

    def rcms():
        xs, ys, xt = data["ocr"]
        model = mod("contexts.model").ReifiedContextModel(num_labels=26, num_contexts=10, epochs=1, seed=0)
        model.fit(xs, ys)
        model.predict_with_confidence(xt)

    def lm():
        train, valid = data["lm"]
        model = mod("lm.estimate").ModifiedKneserNey(order=4).fit_sentences(train)
        model.model_.perplexity(valid)

    def chain_ops():
        for _ in range(5):
            chain.kbest(E, T, k=5)
            chain.entropy(E, T)
            chain.sample(E, T, n=5, seed=0)

    def lattice_ops():
        for _ in range(10):
            for one in lats:
                lattice.kbest(one, 5)
                lattice.entropy(one)
                lattice.marginals(one)
                lattice.viterbi(one)

    def hypergraph_ops():
        for _ in range(200):
            hypergraph.log_partition(hg)
            hypergraph.viterbi(hg)
            hypergraph.marginals(hg)
            lattice.forward(lat, "max")

    return {"aligner": aligner, "crf": crf, "rcms": rcms, "lm": lm, "chain-ops": chain_ops,
            "lattice-ops": lattice_ops, "hypergraph-ops": hypergraph_ops}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--only", nargs="+", help="workload names")
    ap.add_argument("--json")
    ap.add_argument("--baseline", required=True, help="the baseline checkout (or its src folder)")
    args = ap.parse_args()
    harness.baseline_package(args.baseline)
    data = load_data()
    systems = {"new": workloads("varorder", data), "base": workloads("varorder_base", data)}
    names = args.only or list(systems["new"])
    rows = []
    load = []
    with threadpool_limits(1):
        for name in names:
            timing = harness.interleaved({system: systems[system][name] for system in ("new", "base")}, args.rounds)
            load += timing.loads
            times = {system: timing.cpu(system) for system in ("new", "base")}
            new, base = statistics.median(times["new"]), statistics.median(times["base"])
            rows.append({"workload": name, "new_s": round(new, 4), "base_s": round(base, 4),
                         "ratio": round(new / base, 3), "new_all_s": [round(t, 4) for t in times["new"]],
                         "base_all_s": [round(t, 4) for t in times["base"]]})
            print(f"{name:15s} new {new:8.3f} s  base {base:8.3f} s  ratio {new / base:.3f}", flush=True)
    if args.json:
        harness.write_results(args.json, results_file(rows, load, args))


TASKS = {"aligner": "WordAligner agreement, IBM 1 x1 + HMM x2, 3,000 Hansards pairs (fit)",
         "crf": "CRF L-BFGS 8 iterations, 1,000 EWT sentences (fit)",
         "rcms": "RCMS(10) 1 epoch on 120 OCR words + predict 200",
         "lm": "modified Kneser-Ney order 4 on 20k PTB sentences + perplexity of 2k (no engine code: control)",
         "chain-ops": "chain kbest(k=5), entropy, sample(n=5) on B=200, L=30, K=12, x5",
         "lattice-ops": "lattice kbest(5), entropy, marginals, viterbi on 20 chain lattices (L=20, K=12), x10",
         "hypergraph-ops": "hypergraph log Z, Viterbi, marginals of a chain lattice's hypergraph + lattice MAX "
                           "forward, x200"}


def results_file(rows, load, args) -> dict:
    """Schema 1 (docs/tools/summarize_results.py): one row per workload."""
    rows = [harness.row(f"varorder {r['workload']}", TASKS[r["workload"]], "CPU s per unit (median)", r["new_s"],
                        r["base_s"], f"varorder at {args.baseline} (same process, interleaved)",
                        note=f"one thread; rounds new {r['new_all_s']}, baseline {r['base_all_s']}") for r in rows]
    return harness.results_document(
        "Engine structure (issue #34 guards)", "model families on the engine: this tree vs a baseline tree", rows,
        issue=34, machine_info=harness.machine(load, note="cores shared with other sessions"))


if __name__ == "__main__":
    main()
