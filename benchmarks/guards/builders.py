"""The structure builders of this tree against a baseline tree: every output array compared
bit for bit on random instances, and CPU seconds per round in interleaved rounds.

The baseline's ``varorder`` is loaded beside this tree's as ``varorder_base``
(:func:`harness.baseline_package`). Builders: the RCMS/beam context lattice
(``contexts.context_set``), the decipherment context sets (``decipher.context_sets``), the
alignment lattice (``transduce.lattice``). ``equality`` draws instances with ties in the
scores, −∞ potentials, capped contexts, forced labels, gold extras, forced gold moves,
clamped outputs, −∞ weights and exact bigrams;
``speed`` times fixed workloads (OCR-sized contexts, a 150-word decipherment, order-5
alignment) in interleaved rounds and checks their outputs too.

    PYTHONPATH=src python benchmarks/guards/builders.py --baseline /tmp/base equality --trials 200
    PYTHONPATH=src flock /tmp/varorder-bench.lock nice -n 5 python benchmarks/guards/builders.py \\
        --baseline /tmp/base speed --rounds 7 --json out.json
"""

from __future__ import annotations

import argparse
import importlib
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the shared harness
import harness  # noqa: E402

MODULES = {"contexts": "contexts.context_set", "decipher": "decipher.context_sets", "transduce": "transduce.lattice"}


def modules(package: str) -> dict:
    return {key: importlib.import_module(f"{package}.{name}") for key, name in MODULES.items()}


def _fields(obj):
    if hasattr(obj, "__dict__"):
        return dict(vars(obj))
    names = [n for c in type(obj).__mro__ for n in getattr(c, "__slots__", ())]
    return {n: getattr(obj, n) for n in names if hasattr(obj, n)}


def same(a, b, what: str, counter: list) -> None:
    """Assert ``a`` and ``b`` equal bit for bit: arrays by dtype, shape and values (NaN = NaN),
    objects field by field (feature spaces, the builders' inputs, are skipped)."""
    if isinstance(a, (tuple, list)):
        assert len(a) == len(b), what
        for i, (x, y) in enumerate(zip(a, b)):
            same(x, y, f"{what}[{i}]", counter)
        return
    if isinstance(a, np.ndarray):
        assert a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b, equal_nan=True), what
        counter[0] += 1
        return
    if isinstance(a, (int, float, str, bool, np.generic)) or a is None:
        assert a == b or (a != a and b != b), what
        return
    if "Feature" in type(a).__name__:
        return
    fa, fb = _fields(a), _fields(b)
    assert fa.keys() == fb.keys(), what
    for key in fa:
        same(fa[key], fb[key], f"{what}.{key}", counter)


def equality(new: dict, base: dict, trials: int, seed: int = 0, only=None) -> dict:
    """Random instances through both trees' builders; counts of instances compared. ``only``:
    the builders to compare (MODULES keys; the instances drawn are the same either way)."""
    def want(key):
        return not only or key in only

    from varorder.contexts.features import NgramFeatureSpace
    from varorder.decipher.transitions import fit_transitions
    from varorder.transduce import AlignmentFeatureSpace
    counter = [0]
    n = {key: 0 for key in MODULES}
    rng = np.random.default_rng(seed)
    for trial in range(trials):
        V, order = int(rng.integers(2, 5)), int(rng.integers(2, 4))
        fs = NgramFeatureSpace(V, order, backoff=bool(rng.integers(2)))
        L = int(rng.integers(1, 9))
        obs = rng.normal(size=(L, V)) * 2
        obs[rng.random((L, V)) < 0.1] = -np.inf
        theta = rng.normal(size=fs.size)
        theta = np.round(theta, 1) if trial % 3 == 0 else theta  # ties
        mode = "beam" if trial % 4 == 1 else "rcms"
        kw = {}
        if mode == "rcms" and trial % 5 == 2:
            kw["max_context"] = fs.window + int(rng.integers(0, 2))
        if trial % 7 == 3:
            kw["force_labels"] = rng.integers(0, V, size=L)
        if mode == "rcms" and trial % 6 == 4:
            kw["coverage_weight"] = -1.5
        B = int(rng.integers(1, 6))
        if want("contexts"):
            same(base["contexts"].build_context_lattice(obs, theta, fs, B, mode=mode, **kw),
                 new["contexts"].build_context_lattice(obs, theta, fs, B, mode=mode, **kw), "contexts", counter)
            n["contexts"] += 1

        words = ["a", "b", "c", "d"]
        sents = [[words[i] for i in rng.integers(0, 4, size=int(rng.integers(1, 6)))] for _ in range(30)]
        tables = fit_transitions(words, sents, int(rng.integers(1, 3)))
        em = np.log(rng.dirichlet(np.ones(4), size=int(rng.integers(1, 9))))
        if trial % 3 == 0:
            em = np.round(em, 1)
        dmode = "beam" if trial % 2 else "rcms"
        size = int(rng.integers(1, 6))
        if want("decipher"):
            same(base["decipher"].build_context_arrays(em, tables, size, dmode),
                 new["decipher"].build_context_arrays(em, tables, size, dmode), "decipher", counter)
            same(base["decipher"].context_estep(em, tables, size, dmode),
                 new["decipher"].context_estep(em, tables, size, dmode), "decipher estep", counter)
            n["decipher"] += 1

        big = trial % 10 == 9  # now and then a larger alphabet and input
        Vt, Lp = int(rng.integers(1, 4 if big else 3)), int(rng.integers(1, 6 if big else 4))
        tord, M = int(rng.integers(2, 4)), int(rng.integers(1, 3))
        fst = AlignmentFeatureSpace(Vt, 2, order=tord, max_advance=M, hash_bits=18, edge_unigrams=bool(trial & 1),
                                    backoff=bool(trial & 2))
        x = rng.integers(0, 2, size=Lp)
        th = rng.normal(size=fst.size)
        if trial % 3 == 0:
            th = np.round(th, 1)
        if trial % 4 == 3:  # −∞ weights: unreachable groups, merged candidate by candidate
            th[rng.random(fst.size) < 0.05] = -np.inf
        Lmax = int(rng.integers(1, 5))
        sel = "beam" if trial % 2 else "rcms"
        kw = {}
        if trial % 5 == 1:
            kw["gold_letters"] = rng.integers(0, Vt, size=Lmax)
            kw["extra_gold"] = int(rng.integers(0, 3))
        if trial % 7 == 2:
            kw["bigram_exact"] = True
        if trial % 11 == 6:  # the gold (letters, moves) forced onto the beam
            kw["gold_letters"] = rng.integers(0, Vt, size=Lmax)
            kw["forced_moves"] = rng.integers(0, M + 1, size=Lmax)
        if trial % 3 == 2:  # the target lattice p(z | x, y)
            kw["clamp"] = rng.integers(0, Vt, size=int(rng.integers(1, Lmax + 2)))
        B = int(rng.integers(1, 5))
        if not want("transduce"):
            continue
        outcomes = []
        for module in (base["transduce"], new["transduce"]):
            try:
                outcomes.append(module.build_alignment_lattice(x, th, fst, B, selection=sel, max_length=Lmax, **kw))
            except ValueError as exc:
                outcomes.append(("error", str(exc)))
        same(outcomes[0], outcomes[1], "transduce", counter)
        n["transduce"] += 1
    n["arrays compared"] = counter[0]
    return n


def workloads(rng) -> dict:
    """name -> (function of a module dict returning outputs)."""
    from varorder.contexts.features import NgramFeatureSpace
    from varorder.decipher.transitions import fit_transitions
    from varorder.transduce import AlignmentFeatureSpace
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
        return lambda m: [m["contexts"].build_context_lattice(o, ocr_theta, ocr, B, mode=mode).lattice.arc_weight
                          for o in ocr_obs]

    def decipher(mode, B):
        return lambda m: [m["decipher"].context_estep(o, tables, B, mode)[1] for o in dec_obs]

    def transduce(sel, B):
        return lambda m: [m["transduce"].build_alignment_lattice(x, th, fst, B, selection=sel,
                                                                 max_length=len(x) + 3).lattice.arc_weight
                          for x in phonemes]

    return {"contexts rcms:10": contexts("rcms", 10), "contexts beam:10": contexts("beam", 10),
            "contexts beam:200": contexts("beam", 200),
            "decipher rcms:100 (K=150, bigram)": decipher("rcms", 100), "decipher beam:100": decipher("beam", 100),
            "transduce rcms:20 (order 5)": transduce("rcms", 20), "transduce beam:20": transduce("beam", 20)}


def speed(new: dict, base: dict, rounds: int, only=None, repeat: int = 1) -> tuple[list, list]:
    rows, loads = [], []
    for name, run in workloads(np.random.default_rng(0)).items():
        if only and not any(name.startswith(prefix) for prefix in only):
            continue
        same(run(base), run(new), name, [0])  # compiles both; outputs bit for bit
        timing = harness.interleaved({"new": lambda: [run(new) for _ in range(repeat)],
                                      "base": lambda: [run(base) for _ in range(repeat)]}, rounds, warmup=False)
        loads += timing.loads
        ratio = timing.paired_ratio("new", "base")
        print(f"{name:36s} new {timing.median('new'):.4f} s  base {timing.median('base'):.4f} s  "
              f"CPU ratio {ratio:.3f} (median of per-round ratios)  load {timing.load()}", flush=True)
        rows.append(harness.row(f"builder {name}", "random inputs (benchmarks/guards/builders.py)",
                                "CPU s per round (median)", timing.median("new"), timing.median("base"),
                                "varorder at the baseline tree (same process, interleaved)",
                                note=f"outputs bit-identical; median per-round ratio {ratio:.3f}; "
                                     f"rounds new {[round(t, 4) for t in timing.cpu('new')]}, "
                                     f"baseline {[round(t, 4) for t in timing.cpu('base')]}"))
    return rows, loads


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--baseline", required=True, help="the baseline checkout (or its src folder)")
    sub = ap.add_subparsers(dest="command", required=True)
    eq = sub.add_parser("equality")
    eq.add_argument("--trials", type=int, default=200)
    eq.add_argument("--seed", type=int, default=0)
    eq.add_argument("--only", nargs="+", choices=sorted(MODULES), help="the builders to compare (default: all)")
    sp = sub.add_parser("speed")
    sp.add_argument("--rounds", type=int, default=7)
    sp.add_argument("--only", nargs="+", help="workload name prefixes (contexts, decipher, transduce)")
    sp.add_argument("--repeat", type=int, default=1, help="calls of a workload per round")
    sp.add_argument("--json")
    args = ap.parse_args(argv)
    harness.baseline_package(args.baseline)
    new, base = modules("varorder"), modules("varorder_base")
    if args.command == "equality":
        print("bit-identical:", equality(new, base, args.trials, args.seed, args.only))
        return
    rows, loads = speed(new, base, args.rounds, args.only, args.repeat)
    if args.json:
        harness.write_results(args.json, harness.results_document(
            "Engine structure", "structure builders of this tree vs a baseline tree", rows, issue=40, loads=loads))


if __name__ == "__main__":
    main()
