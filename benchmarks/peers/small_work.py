"""Small work against the C/C++ tools (issue #32): one sentence, one call, one process — and the same
code on a batch, so that the big-work figures are seen not to regress.

Cases (varorder vs its peer; each run is a fresh child process, systems interleaved round by round):

* ``crf``: one-sentence ``CRF.predict([x])`` vs python-crfsuite's ``Tagger.tag(x)`` (the same feature
  dicts, models trained on the first 2,000 UD-EWT train sentences, 30 iterations, c1 = c2 = 0.1), per call
  over 300 dev sentences one at a time; and the whole dev set in one call (batch).
* ``chain``: one short sequence (B = 1, L = 20, K = 10) ``chain.viterbi`` / ``chain.log_partition`` vs
  hmmlearn's compiled ``_hmmc.viterbi`` / ``forward_log``; and B = 2,000 (batch).
* ``lm``: the whole process ``varorder lm score MODEL.bin ONE_SENTENCE`` vs a process that loads the ARPA
  model with the kenlm module and scores the sentence (KenLM's ``query`` binary is not built on this
  machine); and ``lm score --stream``'s per-line answer time.
* ``help``: the whole process ``varorder --help``.
* ``train``: the whole process ``varorder tag train`` on 200 UD-EWT sentences × 5 L-BFGS iterations vs a
  process that trains python-crfsuite on the same sentences' feature dicts (read from JSON lines) × 5.

Per call: CPU time (all threads; the child's own ``process_time``, or ``wait4``'s rusage for a process)
and wall time; the printout gives each case's median over rounds and the ratio varorder / peer, with the
load average and CPU model (the machine is shared: say so beside any figure). ``--baseline SRC`` runs
varorder's cases a second time from another source tree (e.g. the tree before #32:
``git archive 82815f1 src | tar -x -C /tmp/base``), so each figure can be compared with it.

    python benchmarks/peers/small_work.py --work /tmp/sw [--rounds 3] [--baseline /tmp/base/src] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the shared harness
import harness  # noqa: E402

ROOT = harness.ROOT
SRC = ROOT / "src"
DATA = harness.DATA
if not DATA.exists():
    DATA = Path("/work/shared/data")
EWT = DATA / "ud-english-ewt"
PTB = DATA / "ptb-lm"
PYTHON = sys.executable
SENTENCE = "the stock market fell sharply on friday after the report ."


def _env(src: Path) -> dict:
    # bytecode written and reused, as after an install (PYTHONDONTWRITEBYTECODE would charge every process
    # ~0.1 s of compiling varorder's sources)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    return dict(env, PYTHONPATH=str(src))


def _process(command, src: Path, stdin=None) -> dict:
    """CPU (user + system, rusage of the child) and wall seconds of one whole process."""
    began = time.perf_counter()
    proc = subprocess.Popen(command, env=_env(src), stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    if stdin:
        proc.stdin.write(stdin.encode())
        proc.stdin.close()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - began
    if status != 0:
        raise RuntimeError(f"{command} failed: {proc.stderr.read().decode()[-2000:]}")
    return {"process_cpu_s": usage.ru_utime + usage.ru_stime, "process_wall_s": wall}


def _child(case: str, src: Path, work: Path) -> dict:
    out = subprocess.run([PYTHON, __file__, "--child", case, "--work", str(work)], env=_env(src),
                         capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"child {case} failed: {out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


# -- children (run inside a fresh process) ----------------------------------------------------------


def _per_call(function, items, repeat=1) -> tuple[float, float]:
    for item in items[:5]:
        function(item)
    c0, w0 = time.process_time(), time.perf_counter()
    for _ in range(repeat):
        for item in items:
            function(item)
    n = len(items) * repeat
    return (time.process_time() - c0) / n, (time.perf_counter() - w0) / n


def _once(function, repeat: int = 3) -> tuple[float, float]:
    """Mean CPU and wall seconds of ``repeat`` calls (after the caller's warm-up call)."""
    c0, w0 = time.process_time(), time.perf_counter()
    for _ in range(repeat):
        function()
    return (time.process_time() - c0) / repeat, (time.perf_counter() - w0) / repeat


def _dev_features(work: Path):
    return [json.loads(line) for line in (work / "dev.jsonl").read_text().splitlines()]


def child_crf(work: Path, peer: bool) -> dict:
    X, _ = zip(*_dev_features(work))
    X = list(X)
    one = [[x] for x in X[:300]]
    if peer:
        import pycrfsuite

        tagger = pycrfsuite.Tagger()
        tagger.open(str(work / "crf.crfsuite"))
        call_cpu, call_wall = _per_call(lambda x: tagger.tag(x[0]), one)
        tagger.tag(X[0])
        batch_cpu, batch_wall = _once(lambda: [tagger.tag(x) for x in X])
    else:
        from varorder.models.crf import CRF

        model = CRF.load(work / "crf.npz")
        model.predict(X)  # the batch path's kernels loaded, as CRFsuite's are precompiled
        call_cpu, call_wall = _per_call(model.predict, one)
        batch_cpu, batch_wall = _once(lambda: model.predict(X))
    return {"call_cpu_s": call_cpu, "call_wall_s": call_wall, "batch_cpu_s": batch_cpu, "batch_wall_s": batch_wall,
            "batch_tokens": sum(map(len, X))}


def child_chain(work: Path, peer: bool) -> dict:
    import numpy as np

    rng = np.random.default_rng(0)
    K, L = 10, 20
    T, S = np.log(rng.dirichlet(np.ones(K), K)), np.log(rng.dirichlet(np.ones(K)))
    ones = [rng.normal(size=(1, L, K)) for _ in range(200)]
    E = rng.normal(size=(2000, L, K))
    out = {}
    if peer:
        from hmmlearn import _hmmc

        # _hmmc's forward_log / viterbi take log-probabilities (per sequence); scores need not normalise
        for name, fn in (("viterbi", lambda e: _hmmc.viterbi(S, T, e[0])),
                         ("log_partition", lambda e: _hmmc.forward_log(S, T, e[0]))):
            out[f"{name}_call_cpu_s"], out[f"{name}_call_wall_s"] = _per_call(fn, ones, 5)
            fn(E[:1])
            out[f"{name}_batch_cpu_s"], out[f"{name}_batch_wall_s"] = _once(lambda: [fn(e[None]) for e in E], 5)
    else:
        from varorder import chain

        for name, fn in (("viterbi", lambda e: chain.viterbi(e, T, S)), ("log_partition",
                                                                        lambda e: chain.log_partition(e, T, S))):
            out[f"{name}_call_cpu_s"], out[f"{name}_call_wall_s"] = _per_call(fn, ones, 5)
            fn(E)
            out[f"{name}_batch_cpu_s"], out[f"{name}_batch_wall_s"] = _once(lambda: fn(E), 5)
    return out


def child_stream(work: Path, peer: bool) -> dict:
    """Per-line answer time of ``lm score --stream`` (varorder) or the kenlm module's ``score`` (peer), after
    the model is loaded: one line written, its answer read, then the next."""
    # 150 lines first (~3,000 tokens: past the switch to the compiled scorer), then 300 timed
    lines = [line for line in (work / "dev.txt").read_text().splitlines()[:480] if line.strip()]
    warm, lines = lines[:150], lines[150:450]
    if peer:
        import kenlm

        model = kenlm.Model(str(work / "lm.arpa"))
        cpu, wall = _per_call(lambda x: model.score(x, bos=True, eos=True), lines)
        return {"line_cpu_s": cpu, "line_wall_s": wall}
    proc = subprocess.Popen([PYTHON, "-m", "varorder", "lm", "score", "--stream", str(work / "lm.bin"), "-"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=os.environ)
    proc.stdout.readline()  # the header
    for line in warm:
        proc.stdin.write(line + "\n")
        proc.stdin.flush()
        proc.stdout.readline()
    before = os.times()
    w0 = time.perf_counter()
    for line in lines:
        proc.stdin.write(line + "\n")
        proc.stdin.flush()
        proc.stdout.readline()
    wall = time.perf_counter() - w0
    proc.stdin.close()
    proc.stdout.read()
    _, _, usage = os.wait4(proc.pid, 0)
    # the child's CPU over the timed lines: its whole CPU minus what it had used before them is not
    # visible from here, so report its whole CPU per line beside the wall figure (an upper bound)
    del before
    return {"line_wall_s": wall / len(lines), "process_cpu_s": usage.ru_utime + usage.ru_stime,
            "lines": len(lines) + len(warm)}


CHILDREN = {"crf": child_crf, "chain": child_chain, "stream": child_stream}


# -- set-up -------------------------------------------------------------------------------------------


def setup(work: Path) -> None:
    """Models and inputs in ``work`` (made once; delete the folder to remake them)."""
    work.mkdir(parents=True, exist_ok=True)
    sys.path.insert(0, str(SRC))
    from varorder.io.conllu import read_conllu
    from varorder.models.features import pos_features

    if not (work / "dev.jsonl").exists():
        dev = read_conllu(EWT / "en_ewt-ud-dev.conllu.gz")
        (work / "dev.jsonl").write_text("".join(json.dumps([pos_features(s.words), s.tags("upos")]) + "\n"
                                                for s in dev))
    if not (work / "train200.conllu").exists():
        import gzip

        blocks = gzip.open(EWT / "en_ewt-ud-train.conllu.gz", "rt", encoding="utf-8").read().split("\n\n")
        (work / "train200.conllu").write_text("\n\n".join(blocks[:200]) + "\n\n")
        train = read_conllu(work / "train200.conllu")
        (work / "train200.jsonl").write_text("".join(json.dumps([pos_features(s.words), s.tags("upos")]) + "\n"
                                                     for s in train))
    if not (work / "crf.npz").exists():
        from varorder.models.crf import CRF

        train = read_conllu(EWT / "en_ewt-ud-train.conllu.gz")[:2000]
        X, y = [pos_features(s.words) for s in train], [s.tags("upos") for s in train]
        CRF(c1=0.1, c2=0.1, max_iterations=30).fit(X, y).save(work / "crf.npz")
        import pycrfsuite

        trainer = pycrfsuite.Trainer(verbose=False)
        for a, b in zip(X, y):
            trainer.append(a, b)
        trainer.set_params({"c1": 0.1, "c2": 0.1, "max_iterations": 30})
        trainer.train(str(work / "crf.crfsuite"))
    (work / "one.txt").write_text(SENTENCE + "\n")
    if not (work / "dev.txt").exists():
        import gzip

        (work / "dev.txt").write_text(gzip.open(PTB / "ptb.valid.txt.gz", "rt").read())
    if not (work / "lm.bin").exists():
        for args in (["lm", "train", str(PTB / "ptb.train.txt.gz"), "-n", "5", "-o", str(work / "lm.arpa")],
                     ["lm", "build-binary", str(work / "lm.arpa"), str(work / "lm.bin")]):
            subprocess.run([PYTHON, "-m", "varorder", *args], env=_env(SRC), check=True, capture_output=True)
        subprocess.run([PYTHON, "-m", "varorder", "lm", "score", str(work / "lm.bin"), str(work / "one.txt")],
                       env=_env(SRC), check=True, capture_output=True)  # the first open's full check, once


_KENLM_ONE = ("import sys, kenlm; m = kenlm.Model(sys.argv[1]); "
              "print(m.score(open(sys.argv[2]).read().strip(), bos=True, eos=True))")
_CRFSUITE_TRAIN = ("import sys, json, pycrfsuite; t = pycrfsuite.Trainer(verbose=False)\n"
                   "for line in open(sys.argv[1]):\n    x, y = json.loads(line); t.append(x, y)\n"
                   "t.set_params({'c1': 0.0, 'c2': 1.0, 'max_iterations': 5}); t.train(sys.argv[2])")


def processes(work: Path, src: Path, peer: bool) -> dict:
    out = {}
    if peer:
        out["lm"] = _process([PYTHON, "-c", _KENLM_ONE, str(work / "lm.arpa"), str(work / "one.txt")], src)
        out["train"] = _process([PYTHON, "-c", _CRFSUITE_TRAIN, str(work / "train200.jsonl"),
                                 str(work / "tiny.crfsuite")], src)
        return out
    out["help"] = _process([PYTHON, "-m", "varorder", "--help"], src)
    out["lm"] = _process([PYTHON, "-m", "varorder", "lm", "score", str(work / "lm.bin"), str(work / "one.txt")], src)
    out["train"] = _process([PYTHON, "-m", "varorder", "tag", "train", str(work / "train200.conllu"), "-o",
                             str(work / "tiny.npz"), "--max-iterations", "5", "--quiet"], src)
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--work", type=Path, required=True, help="folder for the models and inputs (kept)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--baseline", type=Path, help="another varorder source tree (its src folder) to run too")
    parser.add_argument("--baseline-name", default="varorder before #32 (--baseline tree)",
                        help="the system name of the --baseline tree's rows in --json")
    parser.add_argument("--json", type=Path, help="write the medians and ratios here (runs appended)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        case, _, who = args.child.partition(":")
        print(json.dumps(CHILDREN[case](args.work, who == "peer")))
        return
    setup(args.work)
    trees = {"varorder": SRC}
    if args.baseline:
        trees["baseline"] = args.baseline
    samples: dict[str, list] = {}
    loads = []
    for r in range(args.rounds):
        for name, src in [*trees.items(), ("peer", SRC)]:
            who = "peer" if name == "peer" else "ours"
            for case in ("crf", "chain", "stream") if name != "baseline" else ("crf", "chain"):
                samples.setdefault(f"{case}/{name}", []).append(_child(f"{case}:{who}", src, args.work))
            samples.setdefault(f"process/{name}", []).append(processes(args.work, src, name == "peer"))
            loads.append(os.getloadavg()[0])
        print(f"round {r + 1}/{args.rounds} done, load {loads[-1]:.2f}", file=sys.stderr)
    medians = {key: _median_dicts(values) for key, values in samples.items()}
    report = {"machine": harness.machine(loads), "rounds": args.rounds,
              "medians": medians}
    _print(report, list(trees))
    if args.json:
        _record(args.json, report, " ".join(sys.argv), args.baseline_name)


def _record(path: Path, report: dict, command: str, baseline_name: str) -> None:
    """Add this run to ``path`` in the results schema of benchmarks/results: ``rows`` are the latest run's, every
    run's rows and loads are kept under ``details`` (``rows_every_run``, ``runs``); a file without
    ``details`` is started afresh."""
    import datetime
    import math

    data = json.loads(path.read_text()) if path.exists() else {}
    details = data.get("details") if isinstance(data.get("details"), dict) else None
    if not details or "runs" not in details:
        details = {"runs": [], "rows_every_run": []}
    run = 1 + max((r["run"] for r in details["runs"]), default=0)
    details["runs"].append({"run": run, "command": command, "load": report["machine"]["load"],
                            "rounds": report["rounds"]})
    names = {"varorder": "varorder", "baseline": baseline_name}
    rows = []
    for label, tree, c_ours, c_peer, w_ours, w_peer, unit, peer_name in report["rows"]:
        per = "per process" if "process" in label else ("per line" if "line" in label else "per call")
        for metric, ours, peer in ((f"CPU {unit} {per}", c_ours, c_peer), (f"wall {unit} {per}", w_ours, w_peer)):
            if math.isnan(ours):
                continue
            rows.append({"system": names[tree], "task": label, "metric": metric, "varorder": round(ours, 6),
                         "reference": None if math.isnan(peer) else round(peer, 6), "reference_name": peer_name,
                         "ratio": None if math.isnan(peer) else round(ours / peer, 3), "better": "lower",
                         "note": f"median of {report['rounds']} interleaved rounds, load {report['machine']['load']}"})
    details["rows_every_run"] += [{"run": run, **row} for row in rows]
    loads = "; ".join(f"run {r['run']}: {r['load']}" for r in details["runs"])
    for row in rows:
        row["note"] += f"; run {run} of {run} (every run under details)"
    data = {"schema": 1, "area": "Small work (one call, one process)", "issue": 32,
            "title": "one sentence, one call, one process: varorder vs the C/C++ tools, and the same code on batches",
            "command": data.get("command", command), "date": datetime.date.today().isoformat(),
            "machine": {"cpu": report["machine"]["cpu"], "cores": report["machine"]["cores"], "load": loads},
            "rows": rows, "details": details}
    path.write_text(json.dumps(data, indent=1) + "\n")


def _median_dicts(dicts):
    out = {}
    for key in dicts[0]:
        values = [d[key] for d in dicts]
        out[key] = _median_dicts(values) if isinstance(values[0], dict) else statistics.median(values)
    return out


def _print(report, trees):
    m = report["medians"]
    print(f"CPU: {report['machine']['cpu']} ({report['machine']['cores']} cores); 1-min load during the runs "
          f"{report['machine']['load']}; medians of {report['rounds']} interleaved rounds")
    rows = []
    for label, case, key, scale, unit, peer_name in (
            ("CRF one sentence", "crf", "call", 1e3, "ms", "python-crfsuite Tagger.tag"),
            ("CRF dev batch", "crf", "batch", 1, "s", "python-crfsuite Tagger.tag"),
            ("chain B=1 viterbi", "chain", "viterbi_call", 1e3, "ms", "hmmlearn _hmmc.viterbi"),
            ("chain B=1 log Z", "chain", "log_partition_call", 1e3, "ms", "hmmlearn _hmmc.forward_log"),
            ("chain B=2000 viterbi", "chain", "viterbi_batch", 1, "s", "hmmlearn _hmmc.viterbi"),
            ("chain B=2000 log Z", "chain", "log_partition_batch", 1, "s", "hmmlearn _hmmc.forward_log")):
        for tree in trees:
            ours, peer = m[f"{case}/{tree}"], m[f"{case}/peer"]
            rows.append((label, tree, ours[f"{key}_cpu_s"] * scale, peer[f"{key}_cpu_s"] * scale,
                         ours[f"{key}_wall_s"] * scale, peer[f"{key}_wall_s"] * scale, unit, peer_name))
    for label, key, peer_name in (("lm score one sentence (process)", "lm", "python + kenlm module, ARPA load"),
                                  ("tag train 200 x 5 (process)", "train", "python + python-crfsuite")):
        for tree in trees:
            ours, peer = m[f"process/{tree}"][key], m["process/peer"][key]
            rows.append((label, tree, ours["process_cpu_s"], peer["process_cpu_s"], ours["process_wall_s"],
                         peer["process_wall_s"], "s", peer_name))
    for tree in trees:
        ours = m[f"process/{tree}"]["help"]
        rows.append(("varorder --help (process)", tree, ours["process_cpu_s"], float("nan"),
                     ours["process_wall_s"], float("nan"), "s", "none"))
    stream, peer = m["stream/varorder"], m["stream/peer"]
    rows.append(("lm score --stream per line", "varorder", float("nan"), peer["line_cpu_s"] * 1e3,
                 stream["line_wall_s"] * 1e3, peer["line_wall_s"] * 1e3, "ms", "kenlm module Model.score"))
    print(f"{'case':48s} {'CPU ours':>10s} {'CPU peer':>10s} {'ratio':>7s} {'wall ours':>10s} {'wall peer':>10s} "
          f"{'ratio':>7s}")
    for label, tree, c_ours, c_peer, w_ours, w_peer, unit, _ in rows:
        print(f"{label + ' [' + tree + ']':48s} {c_ours:9.4g}{unit:>1s} {c_peer:9.4g}{unit:>1s} {c_ours / c_peer:7.2f} "
              f"{w_ours:9.4g}{unit:>1s} {w_peer:9.4g}{unit:>1s} {w_ours / w_peer:7.2f}")
    report["rows"] = rows


if __name__ == "__main__":
    main()
