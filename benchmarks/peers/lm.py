"""varorder's n-gram LM toolkit against KenLM on the Penn Treebank LM text (Mikolov's split).

Sections (each run in fresh child processes, peers interleaved round by round, best of
``--rounds``; per-core CPU seconds beside wall-clock; the load average is printed):

* ``load``: open the PTB 5-gram — varorder's ARPA reader, varorder's binary model
  (``varorder lm build-binary``; the default open of a file version already verified,
  i.e. the structural checks), KenLM's module on the
  same ARPA file — time and the resident memory the load added (VmRSS after minus
  before, in the child); and a fresh process's CPU seconds for varorder's ARPA read by
  step (importing NumPy and Numba, Numba's first call of a cached kernel, the read);
* ``cli``: ``varorder lm score MODEL one-sentence.txt`` end to end (process start to
  exit) with the binary and with the ARPA model: wall time and peak RSS of the process;
  the ARPA model interleaved round by round with KenLM's module reading the same file and
  scoring the sentence in a fresh process; and the full check on demand (``lm score
  --verify``, ``lm verify``);
* ``score``: scoring the valid sentences from strings — varorder's ``score_sentences``
  (bytes -> ids in a compiled kernel, then the batched scorer) on the binary model and
  on the model read from ARPA, against KenLM's ``Model.score`` in a Python loop (its
  model read from the same ARPA file); per-sentence scores compared first; each round
  times every peer in turn (best of 5 calls), and the ratio is given per round too;
* ``estimate``: ``varorder lm train -n N`` (read, count, estimate, write ARPA) per
  order, in memory and with ``-S`` (sorted runs on disk): wall time and peak RSS of the
  process; with ``--lmplz PATH`` also lmplz ``-o N -S M`` (each ``--lmplz-memory`` M) on the same text;
* ``scale``: PTB train copied ``--copies`` times, ``lm train`` at its default budget, at
  ``-S 100M`` and forced through disk, against lmplz ``-S 100M`` / ``-S 20%``: whole-job
  peak RSS and CPU in interleaved rounds (``--varorder-src`` runs another tree's varorder);
* ``binary``: ``varorder lm build-binary`` on the PTB 5-gram ARPA, with ``--build-binary
  PATH`` against KenLM's ``build_binary`` (probing and trie) in interleaved rounds: wall,
  CPU and peak RSS of each process;
* ``large``: a synthetic corpus of ``--large-tokens`` tokens sampled from the PTB 5-gram
  (seed 0) estimated with ``-S 2G`` (streamed through disk): time and peak RSS of the
  process and of its whole process tree; then a ``--compare-tokens`` sample (seed 1)
  estimated in memory, with ``-S`` and Dask-sharded on a LocalCluster: the ARPA files
  compared byte for byte, and the valid perplexity. ``--large-paths dask`` estimates the
  large corpus Dask-sharded instead (``--worker-memory``: each worker's ``-S``; the
  cluster is closed before the client merges under ``--large-memory``), with every
  process's peak RSS and CPU; ``--large-corpus FILE`` keeps (or reuses) the corpus.

    python benchmarks/peers/lm.py --json lm.json                 # every section
    python benchmarks/peers/lm.py --sections load cli score      # some
    benchmarks/peers/install_peers.sh                      # KenLM's lmplz, build_binary (and eflomal)
    python benchmarks/peers/lm.py --sections estimate binary --orders 5 --lmplz /tmp/peers/bin/lmplz \
        --lmplz-memory 100M 20% --build-binary /tmp/peers/bin/build_binary
"""

from __future__ import annotations

import argparse
import filecmp
import gzip
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import numba
import numpy as np

from varorder.lm._kernels import find, find_ngram

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the shared harness
import harness  # noqa: E402

ROOT = harness.ROOT
DATA = harness.DATA / "ptb-lm"
SENTENCE = "the stock market fell sharply in early trading on friday\n"
PYTHON = sys.executable


VARORDER_SRC = ROOT / "src"  # --varorder-src: the tree the varorder children run


def child_env() -> dict:
    env = dict(os.environ, PYTHONPATH=str(VARORDER_SRC), NUMBA_NUM_THREADS="1", OMP_NUM_THREADS="1")
    return env


def run_measured(command: list[str]) -> dict:
    """Run a process; return its wall seconds and output."""
    start = time.perf_counter()
    process = subprocess.run(command, env=child_env(), capture_output=True)
    if process.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, command))} failed:\n{process.stderr.decode()[-2000:]}")
    return {"wall_s": time.perf_counter() - start, "stdout": process.stdout.decode(), "stderr": process.stderr.decode()}


def runs_in_rounds(commands: dict[str, list[str]], rounds: int) -> dict[str, list[dict]]:
    """Every command once per round, in turn, ``rounds`` times: each one's runs."""
    results: dict[str, list[dict]] = {name: [] for name in commands}
    for _ in range(rounds):
        for name, command in commands.items():
            results[name].append(run_with_rusage(command))
    return results


def best_of(runs: list[dict]) -> dict:
    """The fastest round's CPU, wall and peak memory (each its own minimum), with every
    round's CPU and peak memory beside them."""
    return {"cpu_s": min(r["cpu_s"] for r in runs), "wall_s": min(r["wall_s"] for r in runs),
            "peak_rss_mb": min(r["peak_rss_mb"] for r in runs), "cpu_s_per_round": [r["cpu_s"] for r in runs],
            "peak_rss_mb_per_round": [r["peak_rss_mb"] for r in runs]}


def run_with_rusage(command: list[str], tree: bool = False) -> dict:
    """Wall time, CPU time and peak RSS of one child process (os.wait4's rusage).

    The peak RSS is read by ``/usr/bin/time`` when it exists: a child started from this
    (larger) process inherits its peak into ``ru_maxrss`` (Linux folds the memory image a
    vfork/fork child starts from into it at exec), which inflated the figures. With
    ``tree``, also the peak of the RSS summed over the whole process tree (Dask workers
    are processes of their own), sampled every 0.2 s with psutil, and the largest single
    process the command started (a Dask worker)."""
    import threading

    import psutil

    timer = Path("/usr/bin/time")
    with tempfile.NamedTemporaryFile("r", suffix=".rss") as rss_file:
        wrapped = [str(timer), "-f", "%M", "-o", rss_file.name, *command] if timer.exists() else command
        start = time.perf_counter()
        process = subprocess.Popen(wrapped, env=child_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        tree_peak = [0]
        worker_peak = [0]  # the largest process the command itself started (a Dask worker)
        each = {}  # pid -> [role, peak RSS, last CPU seconds seen, first seen, last seen]
        done = threading.Event()

        def sample():
            root = psutil.Process(process.pid)
            while not done.wait(0.2):
                try:
                    members = [root] + root.children(recursive=True)
                    command_pids = {c.pid for c in root.children()} if timer.exists() else {root.pid}
                except psutil.Error:
                    continue
                total, now = 0, time.perf_counter() - start
                for m in members:
                    try:
                        rss, cpu = m.memory_info().rss, sum(m.cpu_times()[:2])
                        if m.pid not in each:
                            each[m.pid] = [_role(m, root.pid, command_pids), 0, 0.0, now, now]
                    except psutil.Error:
                        continue
                    total += rss
                    row = each[m.pid]
                    row[1], row[2], row[4] = max(row[1], rss), cpu, now
                    if m.pid != root.pid and m.pid not in command_pids:
                        worker_peak[0] = max(worker_peak[0], rss)
                tree_peak[0] = max(tree_peak[0], total)

        sampler = threading.Thread(target=sample, daemon=True)
        if tree:
            sampler.start()
        # Drain the pipes while waiting (a long run's progress bars would fill them).
        outputs = {}
        readers = [threading.Thread(target=lambda n, f: outputs.__setitem__(n, f.read()), args=(n, f), daemon=True)
                   for n, f in (("stdout", process.stdout), ("stderr", process.stderr))]
        for reader in readers:
            reader.start()
        _, status, usage = os.wait4(process.pid, 0)
        done.set()
        wall = time.perf_counter() - start
        for reader in readers:
            reader.join()
        stdout, stderr = outputs["stdout"].decode(), outputs["stderr"].decode()
        if status != 0:
            raise RuntimeError(f"{' '.join(map(str, command))} failed:\n{stderr[-2000:]}")
        peak_kb = int(rss_file.read().split()[-1]) if timer.exists() else usage.ru_maxrss
    result = {"wall_s": wall, "cpu_s": usage.ru_utime + usage.ru_stime, "peak_rss_mb": peak_kb / 1024,
              "stdout": stdout, "stderr": stderr}
    if tree:
        result["tree_peak_rss_mb"] = tree_peak[0] / 2**20
        result["largest_worker_peak_rss_mb"] = worker_peak[0] / 2**20
        result["processes"] = {f"{role} (pid {pid})": {"peak_rss_mb": peak / 2**20, "cpu_s": cpu, "from_s": first,
                                                       "to_s": last}
                               for pid, (role, peak, cpu, first, last) in sorted(each.items())}
    return result


def _role(process, root_pid: int, command_pids: set) -> str:
    """What a process of a measured tree is: the timer, the command, or one the command started."""
    if process.pid == root_pid and root_pid not in command_pids:
        return "/usr/bin/time"
    if process.pid in command_pids:
        return "command (client, scheduler, nannies)"
    line = " ".join(process.cmdline())
    if "resource_tracker" in line:
        return "multiprocessing resource tracker"
    if "spawn_main" in line or "forkserver" in line:
        return "Dask worker"
    return "other"


LOAD_CHILD = textwrap.dedent("""
    import json, sys, time
    def rss():
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    kind, path = sys.argv[1], sys.argv[2]
    if kind == "kenlm":
        import kenlm
        before = rss(); start = time.perf_counter(); cpu = time.process_time()
        model = kenlm.Model(path)
    else:
        import numpy
        from varorder.lm.arpa import load_model
        before = rss(); start = time.perf_counter(); cpu = time.process_time()
        model = load_model(path)
    seconds = time.perf_counter() - start; cpu = time.process_time() - cpu
    added, total = rss() - before, rss()
    del model  # a second read in the same process: no module or compiled-kernel loading
    start = time.perf_counter(); again = time.process_time()
    model = kenlm.Model(path) if kind == "kenlm" else load_model(path)
    again_s = time.perf_counter() - start; again = time.process_time() - again
    print(json.dumps({"load_s": seconds, "cpu_s": cpu, "added_rss_mb": added, "rss_mb": total,
                      "again_s": again_s, "again_cpu_s": again}))
""")


COLD_CHILD = textwrap.dedent("""
    import json, sys, time
    marks = {}
    def mark(what, since):
        marks[what] = time.process_time() - since
        return time.process_time()
    cpu = time.process_time()
    import numpy
    cpu = mark("import numpy", cpu)
    import varorder._numba_start  # imports numba as varorder does (without SciPy's version check)
    cpu = mark("import numba", cpu)
    from varorder.lm.arpa import read_arpa
    from varorder.lm import _arpa_fast
    from varorder.lm import _words
    cpu = mark("import varorder.lm.arpa", cpu)
    _words.word_table(["a"])  # the first call of a cached kernel: Numba's runtime, the code loaded
    cpu = mark("first call of a cached Numba kernel", cpu)
    read_arpa(sys.argv[1])
    cpu = mark("read_arpa", cpu)
    read_arpa(sys.argv[1])
    mark("read_arpa again", cpu)
    marks["scipy.linalg imported"] = "scipy.linalg" in sys.modules
    marks["scipy imported"] = "scipy" in sys.modules
    marks["Numba's compiler registries loaded"] = "numba.np.linalg" in sys.modules
    print(json.dumps(marks))
""")


def section_load(folder: Path, rounds: int, rows: dict) -> None:
    arpa, binary = folder / "ptb5.arpa", folder / "ptb5.bin"
    peers = {"varorder ARPA": ["varorder", arpa], "varorder binary": ["varorder", binary], "KenLM ARPA": ["kenlm", arpa]}
    results: dict[str, list[dict]] = {name: [] for name in peers}
    # A first varorder ARPA read compiles and caches the reader's kernels.
    run_measured([PYTHON, "-c", LOAD_CHILD, "varorder", str(arpa)])
    for _ in range(rounds):
        for name, (kind, path) in peers.items():
            results[name].append(json.loads(run_measured([PYTHON, "-c", LOAD_CHILD, kind, str(path)])["stdout"]))
    for name, runs in results.items():
        best = min(runs, key=lambda r: r["load_s"])
        rows[f"load {name}"] = {"seconds": best["load_s"], "cpu_s": min(r["cpu_s"] for r in runs),
                                "again_s": min(r["again_s"] for r in runs),
                                "again_cpu_s": min(r["again_cpu_s"] for r in runs),
                                "added_rss_mb": min(r["added_rss_mb"] for r in runs), "process_rss_mb": best["rss_mb"],
                                "cpu_s_per_round": [r["cpu_s"] for r in runs]}
    rows["load KenLM ARPA / varorder ARPA (time)"] = rows["load KenLM ARPA"]["seconds"] / rows["load varorder ARPA"]["seconds"]
    rows["load KenLM ARPA / varorder ARPA (CPU)"] = rows["load KenLM ARPA"]["cpu_s"] / rows["load varorder ARPA"]["cpu_s"]
    rows["load KenLM ARPA / varorder ARPA, second read (CPU)"] = \
        rows["load KenLM ARPA"]["again_cpu_s"] / rows["load varorder ARPA"]["again_cpu_s"]
    # Where a fresh process's CPU seconds go before and during the first read (best of rounds per step).
    cold = [json.loads(run_measured([PYTHON, "-c", COLD_CHILD, str(arpa)])["stdout"]) for _ in range(rounds)]
    flags = ("scipy.linalg imported", "scipy imported", "Numba's compiler registries loaded")
    rows["load varorder ARPA, fresh process CPU by step"] = {step: min(c[step] for c in cold) for step in cold[0]
                                                              if step not in flags}
    for flag in flags:
        rows[f"load varorder ARPA, fresh process: {flag}"] = any(c[flag] for c in cold)


def section_cli(folder: Path, rounds: int, rows: dict) -> None:
    text = folder / "one.txt"
    text.write_text(SENTENCE)
    command = [PYTHON, "-m", "varorder", "lm", "score", str(folder / "ptb5.bin"), str(text)]
    run_with_rusage(command)  # warm the page cache and Numba's cache
    runs = [run_with_rusage(command) for _ in range(rounds)]
    best = min(runs, key=lambda r: r["wall_s"])
    rows["cli score one sentence, binary model"] = {"seconds": best["wall_s"], "cpu_s": best["cpu_s"],
                                                    "peak_rss_mb": min(r["peak_rss_mb"] for r in runs)}
    # The ARPA model, interleaved round by round with its peer: KenLM's module reading the
    # same ARPA file and scoring the sentence, whole process (KenLM's `query` is not built here).
    peers = {"cli score one sentence, ARPA model": [PYTHON, "-m", "varorder", "lm", "score", str(folder / "ptb5.arpa"),
                                                    str(text)],
             "cli KenLM module one sentence, ARPA model": [
                 PYTHON, "-c", "import sys, kenlm; print(kenlm.Model(sys.argv[1]).score(open(sys.argv[2]).read()))",
                 str(folder / "ptb5.arpa"), str(text)]}
    run_with_rusage(peers["cli score one sentence, ARPA model"])
    results: dict[str, list[dict]] = {name: [] for name in peers}
    for _ in range(rounds):
        for name, peer in peers.items():
            results[name].append(run_with_rusage(peer))
    for name, runs in results.items():
        rows[name] = {"seconds": min(r["wall_s"] for r in runs), "cpu_s": min(r["cpu_s"] for r in runs),
                      "cpu_s_per_round": [r["cpu_s"] for r in runs], "peak_rss_mb": min(r["peak_rss_mb"] for r in runs)}
    rows["cli one sentence, ARPA model: KenLM / varorder (CPU)"] = \
        rows["cli KenLM module one sentence, ARPA model"]["cpu_s"] / rows["cli score one sentence, ARPA model"]["cpu_s"]
    # The full check of the binary file: on demand, and what the default open pays once
    # for a file version it has not verified before (a copy, a changed file).
    for name, command in (("lm score --verify, binary model", ["lm", "score", "--verify", str(folder / "ptb5.bin"), str(text)]),
                          ("lm verify, binary model", ["lm", "verify", str(folder / "ptb5.bin")])):
        runs = [run_with_rusage([PYTHON, "-m", "varorder", *command]) for _ in range(max(1, rounds // 2))]
        best = min(runs, key=lambda r: r["wall_s"])
        rows[f"cli {name}"] = {"seconds": best["wall_s"], "cpu_s": best["cpu_s"], "peak_rss_mb": best["peak_rss_mb"]}


SCORE_CHILD = textwrap.dedent("""
    import json, sys, time
    import numpy as np
    import kenlm
    from varorder.lm.arpa import load_model
    from varorder.lm import iter_sentences
    arpa, binary, valid, rounds = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    sentences = [" ".join(tokens) for _, tokens in iter_sentences(valid)]
    n_tokens = sum(len(s.split()) + 1 for s in sentences)
    ours, ours_arpa, theirs = load_model(binary), load_model(arpa), kenlm.Model(arpa)
    difference = float(np.abs(ours.score_sentences(sentences) - np.array([theirs.score(s) for s in sentences])).max())
    ours_arpa.score_sentences(sentences[:10])
    peers = {"varorder score_sentences": lambda: ours.score_sentences(sentences),
             "varorder score_sentences, model read from ARPA": lambda: ours_arpa.score_sentences(sentences),
             "KenLM Model.score loop": lambda: [theirs.score(s) for s in sentences]}
    for fn in peers.values():  # one untimed call each: first touches of every table page
        fn()
    # Each round times every peer in turn (best of a few calls); rounds interleave peers.
    per_round = {name: [] for name in peers}
    for _ in range(rounds):
        for name, fn in peers.items():
            best = [1e9, 1e9]
            for _ in range(5):
                wall, cpu = time.perf_counter(), time.process_time()
                fn()
                wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
                best = [min(best[0], wall), min(best[1], cpu)]
            per_round[name].append(best)
    best = {name: [min(r[0] for r in runs), min(r[1] for r in runs)] for name, runs in per_round.items()}
    print(json.dumps({"n_tokens": n_tokens, "max_sentence_difference": difference, "best": best,
                      "per_round": per_round}))
""")


def section_score(folder: Path, rounds: int, rows: dict) -> None:
    out = json.loads(run_measured([PYTHON, "-c", SCORE_CHILD, str(folder / "ptb5.arpa"), str(folder / "ptb5.bin"),
                                   str(DATA / "ptb.valid.txt.gz"), str(rounds)])["stdout"])
    n_tokens = out["n_tokens"]
    for name, (wall, cpu) in out["best"].items():
        rows[f"score strings 5-gram, {name}"] = {"tokens_per_s": n_tokens / wall, "cpu_tokens_per_s": n_tokens / cpu}
    theirs = out["best"]["KenLM Model.score loop"]
    for name, label in (("varorder score_sentences", "binary"),
                        ("varorder score_sentences, model read from ARPA", "ARPA")):
        ours = out["best"][name]
        rows[f"score strings varorder ({label} model) / KenLM"] = {"wall": theirs[0] / ours[0], "cpu": theirs[1] / ours[1]}
        # The same ratio round by round: is it above 1 in every round, or only at best?
        rounds_theirs, rounds_ours = out["per_round"]["KenLM Model.score loop"], out["per_round"][name]
        rows[f"score strings varorder ({label} model) / KenLM, CPU per round"] = [
            t[1] / o[1] for t, o in zip(rounds_theirs, rounds_ours)]
    rows["score max |sentence log10 difference| vs KenLM"] = out["max_sentence_difference"]


def section_estimate(folder: Path, rounds: int, rows: dict, orders, lmplz: str | None,
                     lmplz_memory=("20%",)) -> None:
    train = DATA / "ptb.train.txt.gz"
    for order in orders:
        peers = {
            "in memory": [PYTHON, "-m", "varorder", "lm", "train", str(train), "-n", str(order), "-o", str(folder / "e.arpa")],
            "-S 200M": [PYTHON, "-m", "varorder", "lm", "train", str(train), "-n", str(order), "-S", "200M", "-T",
                        str(folder), "-o", str(folder / "d.arpa")],
        }
        if lmplz:
            plain = folder / "train.txt"
            if not plain.exists():
                with gzip.open(train, "rt") as source:
                    plain.write_text(source.read().replace("<unk>", "<ptb-unk>"))
            for memory in lmplz_memory:  # lmplz's -S: its sorting buffers, which set its peak RSS
                peers[f"lmplz -S {memory}"] = ["sh", "-c", f"{lmplz} -o {order} -S {memory} -T {folder} < {plain} "
                                                           f"> {folder / 'l.arpa'} 2>/dev/null"]
        results = runs_in_rounds(peers, rounds)
        for name, runs in results.items():
            best = best_of(runs)
            rows[f"estimate {order}-gram, {name}"] = {"seconds": best.pop("wall_s"), **best}
        for name in results:
            if name.startswith("lmplz"):
                ours, theirs = rows[f"estimate {order}-gram, in memory"], rows[f"estimate {order}-gram, {name}"]
                rows[f"estimate {order}-gram, in memory / {name}"] = {
                    "cpu": ours["cpu_s"] / theirs["cpu_s"], "peak_rss": ours["peak_rss_mb"] / theirs["peak_rss_mb"],
                    "cpu per round": [a / b for a, b in zip(ours["cpu_s_per_round"], theirs["cpu_s_per_round"])]}
        same = filecmp.cmp(folder / "e.arpa", folder / "d.arpa", shallow=False)  # chunked: this process stays small
        rows[f"estimate {order}-gram, -S output identical to in-memory"] = same


def section_binary(folder: Path, rounds: int, rows: dict, build_binary: str | None) -> None:
    """``varorder lm build-binary ptb5.arpa`` against KenLM's ``build_binary`` (probing, its
    default, and trie) on the same ARPA file, whole processes in interleaved rounds: wall,
    CPU (user + system) and peak RSS (``/usr/bin/time``). The binary files differ (each
    tool its own format): their sizes are given."""
    arpa = folder / "ptb5.arpa"
    peers = {"varorder lm build-binary": [PYTHON, "-m", "varorder", "lm", "build-binary", str(arpa),
                                          str(folder / "bb.bin")]}
    if build_binary:
        peers["KenLM build_binary (probing)"] = [build_binary, str(arpa), str(folder / "kenlm.probing")]
        peers["KenLM build_binary trie"] = [build_binary, "trie", str(arpa), str(folder / "kenlm.trie")]
    run_with_rusage(peers["varorder lm build-binary"])  # compiles/caches the reader's kernels
    results = runs_in_rounds(peers, rounds)
    for name, runs in results.items():
        best = best_of(runs)
        rows[f"binary {name}"] = {"seconds": best.pop("wall_s"), **best,
                                  "seconds_per_round": [r["wall_s"] for r in runs]}
    rows["binary varorder file MB"] = (folder / "bb.bin").stat().st_size / 2**20
    if build_binary:
        for kind in ("probing", "trie"):
            rows[f"binary KenLM {kind} file MB"] = (folder / f"kenlm.{kind}").stat().st_size / 2**20
        ours, theirs = results["varorder lm build-binary"], results["KenLM build_binary (probing)"]
        rows["binary varorder / KenLM probing"] = {
            "wall": rows["binary varorder lm build-binary"]["seconds"] / rows["binary KenLM build_binary (probing)"]["seconds"],
            "cpu": rows["binary varorder lm build-binary"]["cpu_s"] / rows["binary KenLM build_binary (probing)"]["cpu_s"],
            "peak_rss": rows["binary varorder lm build-binary"]["peak_rss_mb"]
            / rows["binary KenLM build_binary (probing)"]["peak_rss_mb"],
            "cpu per round": [a["cpu_s"] / b["cpu_s"] for a, b in zip(ours, theirs)],
            "wall per round": [a["wall_s"] / b["wall_s"] for a, b in zip(ours, theirs)]}
    for path in (folder / "bb.bin", folder / "kenlm.probing", folder / "kenlm.trie"):
        path.unlink(missing_ok=True)


@numba.njit(cache=True)
def _sample_corpus(n_tokens, seed, order, vocab_size, bos, eos, keys, values_base, cumulative, hash_rows, hash_base,
                   hash_cap, max_length, out_ids, out_lengths):
    """Sentences drawn from a back-off model exactly: at the longest stored context, a
    stored continuation with probability equal to its stored mass, else a draw from the
    next shorter context conditioned on not being stored here (rejection, redrawn from
    that shorter level, as the back-off recursion defines it)."""
    np.random.seed(seed)
    context = np.empty(order, dtype=np.int64)
    rows = np.empty(order, dtype=np.int64)
    pending = np.empty(order, dtype=np.int64)
    written = 0
    n_sentences = 0
    while written < n_tokens:
        context[0] = bos
        n_context = 1
        length = 0
        while True:
            # rows[k]: row of the last k context words in the order-k table (-1: absent).
            top = min(n_context, order - 1)
            rows[0] = 0
            for k in range(1, top + 1):
                rows[k] = find_ngram(context[n_context - k:n_context], vocab_size, hash_rows, hash_base, hash_cap)
            n_pending = 0
            level = top
            while True:
                if level > 0 and rows[level] < 0:
                    level -= 1
                    continue
                base = values_base[level]
                if level == 0:
                    lo, hi = base, values_base[1]
                else:
                    table = keys[base:values_base[level + 1]]
                    lo = base + np.searchsorted(table, rows[level] * vocab_size)
                    hi = base + np.searchsorted(table, (rows[level] + 1) * vocab_size)
                mass = cumulative[hi - 1] if hi > lo else 0.0
                if level > 0 and np.random.random() >= mass:
                    pending[n_pending] = level
                    n_pending += 1
                    level -= 1
                    continue
                position = lo + np.searchsorted(cumulative[lo:hi], np.random.random() * mass, side="right")
                word = min(position, hi - 1) - base if level == 0 else keys[min(position, hi - 1)] % vocab_size
                # Each level backed off from accepts the word unless it stores it.
                while n_pending > 0:
                    j = pending[n_pending - 1]
                    if find(hash_rows, hash_base[j - 1], hash_cap[j - 1], rows[j] * vocab_size + word) >= 0:
                        break
                    n_pending -= 1
                if n_pending == 0:
                    break
                level = pending[n_pending - 1] - 1  # redraw below the level that refused
            if word == eos or length == max_length:
                break
            out_ids[written] = word
            written += 1
            length += 1
            if n_context == order - 1:
                context[:n_context - 1] = context[1:n_context]
                n_context -= 1
            context[n_context] = word
            n_context += 1
            if written == out_ids.shape[0]:
                break
        out_lengths[n_sentences] = length
        n_sentences += 1
        if written == out_ids.shape[0]:
            break
    return written, n_sentences


def make_large_corpus(path: Path, n_tokens: int, model_path: Path, seed: int = 0) -> int:
    """``n_tokens`` tokens of sentences sampled from the PTB 5-gram (see _sample_corpus)."""
    from varorder.lm.arpa import load_model

    model = load_model(model_path)
    vocab_size, order = model.vocab_size, model.order
    probabilities = 10.0 ** model._values[:, 0].astype(np.float64)
    keys = np.concatenate(model._keys)
    group = keys // vocab_size
    group[: vocab_size] = 0
    order_of = np.repeat(np.arange(order), np.diff(model._value_base))
    starts = np.ones(len(keys), dtype=bool)
    starts[1:] = (group[1:] != group[:-1]) | (order_of[1:] != order_of[:-1])
    total = np.cumsum(probabilities)
    first = np.flatnonzero(starts)
    offsets = np.repeat(total[first] - probabilities[first], np.diff(np.append(first, len(keys))))
    cumulative = total - offsets
    out_ids = np.empty(n_tokens, dtype=np.int64)
    out_lengths = np.empty(n_tokens, dtype=np.int64)
    written, n_sentences = _sample_corpus(n_tokens, seed, order, vocab_size, model.vocabulary.bos_id,
                                          model.vocabulary.eos_id, keys, model._value_base, cumulative,
                                          model._hash_rows, model._hash_base, model._hash_cap, 250, out_ids, out_lengths)
    words = np.asarray(model.vocabulary.words, dtype=object)
    ends = np.cumsum(out_lengths[:n_sentences])
    with open(path, "w") as out:
        for begin in range(0, n_sentences, 100_000):
            stop = min(n_sentences, begin + 100_000)
            start_token = ends[begin - 1] if begin else 0
            text = words[out_ids[start_token:ends[stop - 1]]]
            lines = np.split(text, ends[begin:stop - 1] - start_token)
            out.write("\n".join(" ".join(line) for line in lines if len(line)) + "\n")
    return int(written)


DASK_CHILD = textwrap.dedent("""
    import sys, time
    from distributed import Client, LocalCluster
    from varorder.lm import ModifiedKneserNey
    from varorder.lm.external import parse_memory
    from varorder.lm.streaming import train_on_disk
    corpus, order, memory, folder, output, workers = sys.argv[1:7]
    # The workers' own -S, and whether to close the cluster once the shards are counted
    # (its workers are idle while this process merges and estimates).
    shard_memory, close = (sys.argv[7], sys.argv[8] == "close") if len(sys.argv) > 8 else (memory, False)
    start = time.perf_counter()
    if __name__ == "__main__":
        with LocalCluster(n_workers=int(workers), threads_per_worker=1, processes=True, dashboard_address=None) as cluster, \\
                Client(cluster) as client:
            def after_counting():
                print(f"counted in {time.perf_counter() - start:.1f} s", file=sys.stderr, flush=True)
                if close:
                    client.close()
                    cluster.close()
            counts = train_on_disk(ModifiedKneserNey(order=int(order)), corpus, output, memory=parse_memory(memory),
                                   temp_dir=folder, client=client, shard_memory=parse_memory(shard_memory),
                                   after_counting=after_counting)
        print(f"{counts} in {time.perf_counter() - start:.1f} s", file=sys.stderr, flush=True)
""")


def _train_row(run: dict) -> dict:
    return {"wall_s": run["wall_s"], "cpu_s": run["cpu_s"], "peak_rss_mb": run["peak_rss_mb"],
            "tree_peak_rss_mb": run.get("tree_peak_rss_mb"),
            "largest_worker_peak_rss_mb": run.get("largest_worker_peak_rss_mb"), "processes": run.get("processes"),
            "log": [line for line in run["stderr"].splitlines() if "grams=" in line or "counted in" in line
                    or line.startswith("[")]}


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(16 << 20):
            digest.update(block)
    return digest.hexdigest()


def section_large(folder: Path, rows: dict, n_tokens: int, order: int, memory: str, compare_tokens: int,
                  dask_workers: int, large_paths=("disk",), corpus: Path | None = None,
                  worker_memory: str | None = None) -> None:
    """The out-of-memory estimation: ``n_tokens`` sampled tokens (seed 0; kept in ``corpus``
    when given, and reused if it exists) with ``-S memory`` (``large_paths`` "disk") and/or
    Dask-sharded ("dask": a LocalCluster of ``dask_workers`` processes counting under
    ``-S worker_memory`` each, closed before the client merges and estimates under ``-S
    memory``); each ARPA's size and SHA-256. Then a ``compare_tokens`` sample (seed 1)
    estimated in memory, with ``-S`` and Dask-sharded: the three ARPA files compared byte
    for byte and the valid perplexity of the model."""
    # A large sample from the model has no rare words: the unigram continuation counts
    # n1..n4 are all zero, so (as lmplz would) it needs the fallback discounts there.
    train = [PYTHON, "-m", "varorder", "lm", "train", "-n", str(order), "--discount-fallback"]
    if n_tokens:
        keep = corpus is not None
        corpus = Path(corpus) if keep else folder / "large.txt"
        if keep and corpus.exists():
            rows["large corpus"] = f"{corpus} (an existing file, reused)"
        else:
            rows["large corpus tokens"] = make_large_corpus(corpus, n_tokens, folder / "ptb5.bin")
        rows["large corpus sha256"] = sha256_of(corpus)
        for path in large_paths:
            arpa = folder / "large.arpa"
            if path == "disk":
                name = f"large {order}-gram, -S {memory}"
                run = run_with_rusage([*train, str(corpus), "-S", memory, "-T", str(folder), "-o", str(arpa)],
                                      tree=True)
            else:
                name = (f"large {order}-gram, Dask {dask_workers} workers at -S {worker_memory or memory}, "
                        f"cluster closed, client -S {memory}")
                run = run_with_rusage([PYTHON, "-c", DASK_CHILD, str(corpus), str(order), memory, str(folder),
                                       str(arpa), str(dask_workers), worker_memory or memory, "close"], tree=True)
            rows[name] = _train_row(run)
            rows[name]["load average after"] = os.getloadavg()
            rows[name]["ARPA MB"] = arpa.stat().st_size / 2**20
            rows[name]["ARPA bytes"] = arpa.stat().st_size
            rows[name]["ARPA sha256"] = sha256_of(arpa)
            print(f"[{name}: {rows[name]}]", flush=True)
            arpa.unlink()
        if not keep:
            corpus.unlink()
    if not compare_tokens:
        return
    small = folder / "compare.txt"
    rows["comparison corpus tokens"] = make_large_corpus(small, compare_tokens, folder / "ptb5.bin", seed=1)
    outputs = {}
    for name in ("in memory", f"-S {memory}", f"Dask {dask_workers} workers, -S {memory}"):
        out = folder / f"compare-{len(outputs)}.arpa"
        if name == "in memory":
            run = run_with_rusage([*train, str(small), "-o", str(out)], tree=True)
        elif name.startswith("-S"):
            run = run_with_rusage([*train, str(small), "-S", memory, "-T", str(folder), "-o", str(out)], tree=True)
        else:
            run = run_with_rusage([PYTHON, "-c", DASK_CHILD, str(small), str(order), memory, str(folder), str(out),
                                   str(dask_workers)], tree=True)
        rows[f"comparison {order}-gram, {name}"] = _train_row(run)
        outputs[name] = out
        print(f"[{name}: {rows[f'comparison {order}-gram, {name}']}]", flush=True)
    reference = outputs.pop("in memory")
    rows["comparison ARPA files identical to in-memory"] = {
        name: filecmp.cmp(reference, out, shallow=False) for name, out in outputs.items()}
    rows["comparison ARPA MB"] = reference.stat().st_size / 2**20
    scored = run_measured([PYTHON, "-m", "varorder", "lm", "score", str(reference), str(DATA / "ptb.valid.txt.gz"),
                           "--no-sentences"])["stdout"]
    rows["comparison valid perplexity"] = scored.strip().split("perplexity=")[1]
    for out in [reference, *outputs.values()]:
        out.unlink()
    small.unlink()


FORCED_DISK_CHILD = textwrap.dedent("""
    import sys
    from varorder.lm import ModifiedKneserNey, train_from_files
    from varorder.lm.external import parse_memory
    corpus, order, memory, folder, output = sys.argv[1:6]
    train_from_files(ModifiedKneserNey(order=int(order)), corpus, memory=parse_memory(memory),
                     temp_dir=folder, output=output, path="disk")
""")


def section_scale(folder: Path, rounds: int, rows: dict, copies, order: int, lmplz: str | None, peers) -> None:
    """PTB train copied ``copies`` times (0.9M words each), ``order``-gram modified KN:
    ``varorder lm train`` at its default budget, at ``-S 100M`` and forced through disk at
    ``-S 100M``, against lmplz ``-S 100M`` and ``-S 20%``; whole processes in interleaved
    rounds, peak RSS by ``/usr/bin/time``, CPU = user + system. The varorder ARPA files
    are compared byte for byte with the first one."""
    with gzip.open(DATA / "ptb.train.txt.gz", "rt") as source:
        text = source.read()
    for k in copies:
        corpus, plain = folder / f"x{k}.txt", folder / f"l{k}.txt"
        corpus.write_text(text * k)
        plain.write_text(text.replace("<unk>", "<ptb-unk>") * k)
        # Copies make counts-of-counts no valid discounts come from (every raw count a multiple of
        # the copies): both tools use their fallback discounts, (0.5, 1, 1.5) for such orders.
        train = [PYTHON, "-m", "varorder", "lm", "train", str(corpus), "-n", str(order), "--discount-fallback"]
        every = {
            "varorder default budget": [*train, "-o", str(folder / "v0.arpa")],
            "varorder -S 100M": [*train, "-S", "100M", "-T", str(folder), "-o", str(folder / "v1.arpa")],
            "varorder on disk -S 100M": [PYTHON, "-c", FORCED_DISK_CHILD, str(corpus), str(order), "100M", str(folder),
                                         str(folder / "v2.arpa")],
        }
        if lmplz:
            for memory in ("100M", "20%"):
                every[f"lmplz -S {memory}"] = ["sh", "-c", f"{lmplz} -o {order} -S {memory} -T {folder} --discount_fallback "
                                                           f"< {plain} > {folder / 'l.arpa'} 2>/dev/null"]
        chosen = {name: command for name, command in every.items() if name in peers or name.startswith("lmplz")}
        if k == copies[0]:  # an untimed run each: Numba's cache filled, the page cache warm
            for name, command in chosen.items():
                run_with_rusage(command)
        results = runs_in_rounds(chosen, rounds)
        for name, runs in results.items():
            rows[f"scale x{k} {order}-gram, {name}"] = {
                **best_of(runs), "log": [line for line in runs[-1]["stderr"].splitlines() if "held" in line]}
        outputs = [folder / f"v{i}.arpa" for i in range(3) if (folder / f"v{i}.arpa").exists()]
        rows[f"scale x{k} varorder ARPA files identical"] = all(
            filecmp.cmp(outputs[0], other, shallow=False) for other in outputs[1:])
        rows[f"scale x{k} words"] = len(text.split()) * k
        rows[f"scale x{k} load average after"] = os.getloadavg()
        print(f"[scale x{k}: {json.dumps({n: rows[f'scale x{k} {order}-gram, {n}'] for n in results})}]", flush=True)
        for path in [corpus, plain, *outputs, folder / "l.arpa"]:
            path.unlink(missing_ok=True)


def prepare(folder: Path) -> None:
    train = DATA / "ptb.train.txt.gz"
    subprocess.run([PYTHON, "-m", "varorder", "lm", "train", str(train), "-n", "5", "-o", str(folder / "ptb5.arpa")],
                   env=child_env(), check=True, capture_output=True)
    subprocess.run([PYTHON, "-m", "varorder", "lm", "build-binary", str(folder / "ptb5.arpa"), str(folder / "ptb5.bin")],
                   env=child_env(), check=True, capture_output=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sections", nargs="+", default=["load", "cli", "score", "estimate", "binary", "large"],
                        choices=["load", "cli", "score", "estimate", "binary", "large", "scale"])
    parser.add_argument("--copies", type=int, nargs="+", default=[1, 4, 16],
                        help="scale: how many copies of PTB train each corpus holds")
    parser.add_argument("--scale-order", type=int, default=5)
    parser.add_argument("--scale-peers", nargs="+",
                        default=["varorder default budget", "varorder -S 100M", "varorder on disk -S 100M"],
                        help="scale: the varorder peers to run (lmplz's run whenever --lmplz is given)")
    parser.add_argument("--varorder-src", help="the source tree the varorder children run (default: this one's src)")
    parser.add_argument("--orders", type=int, nargs="+", default=[3, 4, 5, 6])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--large-tokens", type=int, default=200_000_000, help="0: skip the large run")
    parser.add_argument("--large-order", type=int, default=5)
    parser.add_argument("--large-memory", default="2G", help="the -S budget of the large section")
    parser.add_argument("--compare-tokens", type=int, default=10_000_000,
                        help="the corpus both paths estimate (0: skip the comparison)")
    parser.add_argument("--dask-workers", type=int, default=2)
    parser.add_argument("--large-paths", nargs="+", default=["disk"], choices=["disk", "dask"],
                        help="how the large corpus is estimated: -S in one process, and/or Dask-sharded")
    parser.add_argument("--worker-memory", help="the -S of each Dask worker in the large run (default: --large-memory)")
    parser.add_argument("--large-corpus", help="keep the large corpus in this file (reused if it exists)")
    parser.add_argument("--lmplz", help="path to KenLM's lmplz, for the estimation peer "
                                        "(benchmarks/peers/install_peers.sh builds it into /tmp/peers/bin)")
    parser.add_argument("--lmplz-memory", nargs="+", default=["20%"],
                        help="lmplz's -S values, each a peer of its own (its memory follows -S)")
    parser.add_argument("--build-binary", help="path to KenLM's build_binary, the peer of the binary section "
                                               "(benchmarks/peers/install_peers.sh)")
    parser.add_argument("--json", help="also write the rows to this JSON file")
    parser.add_argument("--models", help="a folder holding ptb5.arpa and ptb5.bin (`varorder lm train -n 5` on PTB "
                                         "train, then `build-binary`) to use instead of making them")
    parser.add_argument("--data", help="the ptb-lm folder (default: ../shared/data/ptb-lm beside the project)")
    args = parser.parse_args()
    global DATA, VARORDER_SRC
    if args.data:
        DATA = Path(args.data)
    if args.varorder_src:
        VARORDER_SRC = Path(args.varorder_src).resolve()
    if not DATA.exists():
        raise SystemExit(f"{DATA} is absent: this benchmark needs ../shared/data/ptb-lm")
    rows: dict = {"load average before": os.getloadavg()}
    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        if args.models:  # ptb5.arpa and ptb5.bin made earlier by prepare()
            for model in ("ptb5.arpa", "ptb5.bin"):
                (folder / model).symlink_to(Path(args.models).resolve() / model)
        elif args.sections != ["scale"]:
            prepare(folder)
        if (folder / "ptb5.arpa").exists():
            rows["PTB 5-gram ARPA MB"] = (folder / "ptb5.arpa").stat().st_size / 2**20
            rows["PTB 5-gram binary MB"] = (folder / "ptb5.bin").stat().st_size / 2**20
        for section in args.sections:
            if section == "load":
                section_load(folder, args.rounds, rows)
            elif section == "cli":
                section_cli(folder, args.rounds, rows)
            elif section == "score":
                section_score(folder, args.rounds, rows)
            elif section == "estimate":
                section_estimate(folder, max(1, args.rounds // 2), rows, args.orders, args.lmplz, args.lmplz_memory)
            elif section == "binary":
                section_binary(folder, args.rounds, rows, args.build_binary)
            elif section == "scale":
                section_scale(folder, args.rounds, rows, args.copies, args.scale_order, args.lmplz, args.scale_peers)
            else:
                section_large(folder, rows, args.large_tokens, args.large_order, args.large_memory,
                              args.compare_tokens, args.dask_workers, args.large_paths, args.large_corpus,
                              args.worker_memory)
            print(f"[{section} done, load average {os.getloadavg()}]", flush=True)
            if args.json:  # after every section, so a failure later keeps what was measured
                Path(args.json).write_text(json.dumps(rows, indent=2))
    rows["load average after"] = os.getloadavg()
    for key, value in rows.items():
        print(f"{key:60s} {json.dumps(value)}")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
