"""The suffix-array index of varorder.lm.suffix_index against infini-gram's published
figures (Liu et al. 2024, §3: ~7 bytes a token of index, counts in milliseconds): index
bytes per token, build CPU and wall time and whole-process peak memory against the corpus
size, in memory and in bounded memory (shards sorted, then merged), the bounded build's peak
against its budget, and count / next-token latency percentiles.

The corpus is assembled from ../shared/data (PTB-LM train, Hansards ISI English and French
train + heldout, Brown as plain words, War and Peace train), read once by
varorder.lm.read_corpus; size N is its first N tokens (sentences kept whole, markers
counted). Sizes above it (``--synthetic``) append copies of it whose word ids are relabelled
by fixed random permutations of the vocabulary (the specials kept), so the copies share no
long passages with it or each other and the sort sees natural-text repeat lengths. Each
build runs in a fresh child process (``build_index_from_ids`` on the ids loaded from .npy);
this process samples the child's /proc status every 10 ms for its peak resident set, anonymous
(heap) and file-backed (the mapped token file's cached pages) parts; the child reports its
build CPU and wall time and the resident set before the build (the ids loaded). Latency:
n-grams (n = 1..5) drawn from random corpus positions plus as many never-seen ones, each
queried once through the public ``SuffixIndex.count`` / ``SuffixIndex.ntd`` (Python call
included), CPU time per query, after a warm-up.

    nice -n 5 python benchmarks/papers/infinigram_index.py --sizes 1e5,1e6,3e6,1e7,3e7 \
        --bounded-sizes 1e6,1e7,3e7,1e8 --budget 256M --budgets 16M,32M,64M,128M,256M \
        --memory-sizes 1e5,1e6,3e6,1e7,3e7 --json benchmarks/results/lm-suffix-index.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/
import harness  # noqa: E402

# ../shared/data beside the project root (or beside a folder above it, for worktrees)
DATA = Path(os.environ["VARORDER_SHARED_DATA"]) if os.environ.get("VARORDER_SHARED_DATA") else next(
    (p / "shared" / "data" for p in Path(__file__).resolve().parents if (p / "shared" / "data").is_dir()),
    Path(__file__).resolve().parents[3] / "shared" / "data")
CHILD = r"""
import json, sys, time
import numpy as np
from varorder.lm import Vocabulary
from varorder.lm.suffix_index import build_index_from_ids, open_index

def status():
    fields = {}
    for line in open("/proc/self/status"):
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM", "RssAnon", "RssFile"):
            fields[key] = int(value.split()[0]) / 1024
    return fields

ids = np.load(sys.argv[1]); lengths = np.load(sys.argv[2])
words = open(sys.argv[3], encoding="utf-8", errors="surrogateescape").read().split("\n")[:-1]
vocabulary = Vocabulary(words)
memory = int(sys.argv[5]) if sys.argv[5] != "none" else None
import tempfile
with tempfile.TemporaryDirectory() as warm:  # load every kernel first, so that "before" counts Numba's code
    tiny = Vocabulary(["a", "b"])
    build_index_from_ids(tiny, np.array([3, 4, 3, 4, 3]), np.array([2, 3]), warm + "/m")
    build_index_from_ids(tiny, np.array([3, 4, 3, 4, 3]), np.array([2, 3]), warm + "/b", memory=1 << 20, shard_tokens=2)
    open_index(warm + "/b")
before = status()
cpu, wall = time.process_time(), time.perf_counter()
index = build_index_from_ids(vocabulary, ids, lengths, sys.argv[4], memory=memory)
cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
peak = status()["VmHWM"]  # this process's own high-water mark (ru_maxrss would count the parent's pages at fork)
del index
start = time.process_time(); index = open_index(sys.argv[4]); verify = time.process_time() - start
print(json.dumps({"tokens": index.num_tokens, "build_cpu_s": cpu, "build_wall_s": wall, "verify_open_cpu_s": verify,
                  "peak_rss_mb_child": peak, "rss_before_build_mb": before["VmRSS"],
                  "anon_before_build_mb": before["RssAnon"], "bytes": index.nbytes}))
"""


def run_build(tmp: Path, folder: Path, memory: int | None) -> dict:
    """One build in a child process, its /proc status sampled for the peaks."""
    command = [sys.executable, "-c", CHILD, str(tmp / "ids.npy"), str(tmp / "lengths.npy"), str(tmp / "vocab.txt"),
               str(folder), "none" if memory is None else str(memory)]
    peaks = {"VmRSS": 0.0, "RssAnon": 0.0, "RssFile": 0.0}
    load_before = os.getloadavg()[0]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    stop = threading.Event()

    def sample():
        while not stop.is_set():
            try:
                with open(f"/proc/{proc.pid}/cmdline", "rb") as handle:  # after exec only (before it, the
                    if b"\0-c\0" not in handle.read():  # forked child shows this process's pages)
                        time.sleep(0.002)
                        continue
                with open(f"/proc/{proc.pid}/status") as handle:
                    for line in handle:
                        key, _, value = line.partition(":")
                        if key in peaks:
                            peaks[key] = max(peaks[key], int(value.split()[0]) / 1024)
            except (OSError, ValueError, IndexError):
                pass
            time.sleep(0.01)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    stdout, stderr = proc.communicate()
    stop.set()
    sampler.join()
    if proc.returncode != 0:
        raise RuntimeError(f"build child exited {proc.returncode}: {stderr[-3000:]}")
    built = json.loads(stdout)
    built.update({"memory_budget": memory, "peak_rss_mb": peaks["VmRSS"], "peak_anon_mb": peaks["RssAnon"],
                  "peak_file_mb": peaks["RssFile"], "load": [load_before, os.getloadavg()[0]]})
    built["sampled_after_exec"] = True
    return _derived(built)


def _derived(built: dict) -> dict:
    """The whole-process peak is the child's own VmHWM; the sampled anonymous / file-backed
    peaks only from runs that sampled after exec (earlier ones may show this process's pages)."""
    built["peak_rss_mb"] = built["peak_rss_mb_child"]
    built["build_peak_above_ids_mb"] = built["peak_rss_mb"] - built["rss_before_build_mb"]
    if not built.get("sampled_after_exec"):
        built["peak_anon_mb"] = built["peak_file_mb"] = None
    built["build_anon_above_ids_mb"] = (None if built["peak_anon_mb"] is None
                                        else built["peak_anon_mb"] - built["anon_before_build_mb"])
    return built


def brown_text(folder: Path) -> Path:
    out = folder / "brown.txt"
    with tarfile.open(DATA / "brown" / "brown.tar.gz") as archive, open(out, "w", encoding="utf-8") as handle:
        for member in archive.getmembers():
            if not member.isfile() or "/c" not in member.name:
                continue
            for line in archive.extractfile(member).read().decode("utf-8", errors="replace").splitlines():
                words = [token.rsplit("/", 1)[0] for token in line.split()]
                if words:
                    handle.write(" ".join(words) + "\n")
    return out


def latency(index, rng, queries: int) -> dict:
    tokens = np.asarray(index.tokens)
    n = tokens.size
    present = []
    for _ in range(queries):
        k = int(rng.integers(1, 6))
        p = int(rng.integers(0, n - k))
        present.append(tokens[p:p + k].astype(np.int64))
    V = len(index.vocabulary)
    absent = [rng.integers(3, V, size=int(rng.integers(2, 6))).astype(np.int64) for _ in range(queries)]
    for q in present[:50]:
        index.count(q); index.ntd(q)
    out = {}
    for name, call in (("count", index.count), ("ntd", index.ntd)):
        times = []
        for q in present + absent:
            start = time.process_time()
            call(q)
            times.append(time.process_time() - start)
        times = np.asarray(times) * 1e3
        out[name] = {"p50_ms": float(np.percentile(times, 50)), "p95_ms": float(np.percentile(times, 95)),
                     "p99_ms": float(np.percentile(times, 99)), "queries": len(times)}
    return out


def _sizes(text: str) -> list[int]:
    return [int(float(x)) for x in text.split(",") if x.strip()]


def _corpus(tmp: Path, largest: int, cache: Path | None = None):
    """(vocabulary, ids, lengths) of the assembled corpus, extended by relabelled copies
    up to ``largest`` tokens (markers counted); ``cache``: a folder keeping the assembled
    corpus's ids between runs."""
    from varorder.lm import Vocabulary, read_corpus

    if cache is not None and (cache / "vocab.txt").exists():
        vocabulary = Vocabulary((cache / "vocab.txt").read_text(encoding="utf-8", errors="surrogateescape").split("\n")[:-1])
        return _extend(vocabulary, np.load(cache / "ids.npy"), np.load(cache / "lengths.npy"), largest)
    files = [DATA / "ptb-lm" / "ptb.train.txt.gz", DATA / "hansards-en-fr" / "isi-bitext" / "train.e.gz",
             DATA / "hansards-en-fr" / "isi-bitext" / "train.f.gz", brown_text(tmp),
             DATA / "warandpeace" / "wap.train.txt.gz", DATA / "hansards-en-fr" / "isi-bitext" / "heldout.e.gz",
             DATA / "hansards-en-fr" / "isi-bitext" / "heldout.f.gz"]
    vocabulary, ids, lengths = read_corpus(files)
    if cache is not None:
        cache.mkdir(parents=True, exist_ok=True)
        np.save(cache / "ids.npy", ids)
        np.save(cache / "lengths.npy", lengths)
        (cache / "vocab.txt").write_text("".join(w + "\n" for w in vocabulary.words), encoding="utf-8",
                                         errors="surrogateescape")
    return _extend(vocabulary, ids, lengths, largest)


def _extend(vocabulary, ids, lengths, largest: int):
    real = int((lengths + 2).sum())
    print(f"corpus: {real} tokens with markers, {len(vocabulary)} words", file=sys.stderr)
    copies = max(0, -(-largest // real) - 1)
    if copies:
        rng = np.random.default_rng(44)
        V = len(vocabulary)
        parts = [ids]
        for _ in range(copies):
            relabel = np.arange(V, dtype=np.int32)
            relabel[3:] = rng.permutation(np.arange(3, V, dtype=np.int32))
            parts.append(relabel[ids])
        ids = np.concatenate(parts)
        lengths = np.tile(lengths, copies + 1)
        del parts
    return vocabulary, ids, lengths, real


def _rows(run: dict) -> list[dict]:
    N = run["tokens"]
    mode = "in memory" if run["memory_budget"] is None else f"bounded, budget {run['memory_budget'] >> 20} MB"
    note = f"load {run['load'][0]:.1f}-{run['load'][1]:.1f}"
    task = f"index of {N:,} tokens{' (synthetic: relabelled copies)' if run['synthetic'] else ''}"
    rows = [
        {"system": f"varorder lm index ({mode})", "task": task, "metric": "build CPU s",
         "varorder": round(run["build_cpu_s"], 3), "reference": None, "reference_name": "none (no peer run)",
         "ratio": None, "better": "lower",
         "note": (f"wall {run['build_wall_s']:.2f} s; whole-process peak RSS (VmHWM) {run['peak_rss_mb']:.0f} MB"
                  + ("" if run["peak_anon_mb"] is None else
                     f" (sampled: anonymous {run['peak_anon_mb']:.0f}, file-backed {run['peak_file_mb']:.0f})")
                  + f"; before the build (ids loaded, kernels loaded): {run['rss_before_build_mb']:.0f} MB; {note}")},
        {"system": f"varorder lm index ({mode})", "task": task, "metric": "build peak RSS above the loaded ids, MB",
         "varorder": round(run["build_peak_above_ids_mb"], 1),
         "reference": None if run["memory_budget"] is None else round(run["memory_budget"] / 2**20, 1),
         "reference_name": "none (no budget)" if run["memory_budget"] is None else "the budget (-S)",
         "ratio": None if run["memory_budget"] is None else round(run["build_peak_above_ids_mb"] / (run["memory_budget"] / 2**20), 3),
         "better": "lower",
         "note": (f"{run['build_peak_above_ids_mb'] * 2**20 / N:.1f} bytes/token"
                  + ("" if run["build_anon_above_ids_mb"] is None else
                     f"; anonymous above the ids {run['build_anon_above_ids_mb']:.0f} MB") + f"; {note}")},
    ]
    if "latency" in run:
        lat = run["latency"]
        rows = [{"system": "varorder lm index", "task": task, "metric": "index bytes/token beside the token ids",
                 "varorder": round(run["sa_bytes_per_token"], 3), "reference": 7.0,
                 "reference_name": "infini-gram (paper, ~7 bytes/token incl. its 2-byte ids)",
                 "ratio": round(run["sa_bytes_per_token"] / 7.0, 3), "better": "lower",
                 "note": f"token ids {run['token_bytes_per_token']:.0f} bytes/token more; docs offsets {run['bytes']['docs'] / N:.2f}"},
                *rows,
                {"system": "SuffixIndex.count", "task": task, "metric": "count latency p95 ms (CPU)",
                 "varorder": round(lat["count"]["p95_ms"], 4), "reference": 1.0,
                 "reference_name": "target: 1 ms at the 95th percentile",
                 "ratio": round(lat["count"]["p95_ms"] / 1.0, 4), "better": "lower",
                 "note": (f"p50 {lat['count']['p50_ms']:.4f}, p99 {lat['count']['p99_ms']:.4f}; ntd p50 "
                          f"{lat['ntd']['p50_ms']:.3f}, p95 {lat['ntd']['p95_ms']:.3f} ms, p99 {lat['ntd']['p99_ms']:.3f}; "
                          f"{lat['count']['queries']} queries; load {run['latency_load']:.1f}")}]
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--memory-sizes", default="1e5,1e6,3e6,1e7", help="sizes built in memory")
    parser.add_argument("--bounded-sizes", default="1e6,1e7", help="sizes built in bounded memory (--budget)")
    parser.add_argument("--budget", default="256M", help="the budget of --bounded-sizes")
    parser.add_argument("--budgets", default="16M,32M,64M,128M", help="budgets tried at --sweep-size")
    parser.add_argument("--sweep-size", default="1e7")
    parser.add_argument("--queries", type=int, default=2000)
    parser.add_argument("--cache", type=Path, help="folder keeping the assembled corpus's ids between runs")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--merge", nargs="+", type=Path,
                        help="write --json from the runs of these results files (their commands recorded) and build "
                             "nothing")
    args = parser.parse_args()
    if args.merge:
        documents = [json.loads(path.read_text()) for path in args.merge]
        runs = [_derived(run) for document in documents for run in document["details"]["runs"]]
        runs.sort(key=lambda run: (run["tokens"], run["memory_budget"] is not None, run["memory_budget"] or 0))
        harness.write_results(args.json, harness.results_document(
            "n-gram LMs", documents[0]["title"], [row for run in runs for row in _rows(run)], issue=44,
            command=" ; ".join(document["command"] for document in documents),
            loads=[load for run in runs for load in run["load"]],
            details={"runs": runs, "real_corpus_tokens": documents[0]["details"]["real_corpus_tokens"]}))
        return
    from varorder.lm.external import parse_memory
    from varorder.lm.suffix_index import open_index, shard_bytes_per_token

    memory_sizes, bounded_sizes = set(_sizes(args.memory_sizes)), set(_sizes(args.bounded_sizes))
    sweep_size = int(float(args.sweep_size))
    budget = parse_memory(args.budget)
    budgets = [parse_memory(b) for b in args.budgets.split(",") if b.strip()]
    sizes = sorted(memory_sizes | bounded_sizes | ({sweep_size} if budgets else set()))
    rows, runs, loads = [], [], []
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        vocabulary, ids, lengths, real = _corpus(tmp, max(sizes), args.cache)
        stream = np.cumsum(lengths + 2)
        (tmp / "vocab.txt").write_text("".join(w + "\n" for w in vocabulary.words), encoding="utf-8",
                                       errors="surrogateescape")
        for size in sizes:
            sentences = int(np.searchsorted(stream, size, side="right"))
            n_words = int(lengths[:sentences].sum())
            np.save(tmp / "ids.npy", ids[:n_words])
            np.save(tmp / "lengths.npy", lengths[:sentences])
            plan = ([None] if size in memory_sizes else []) + ([budget] if size in bounded_sizes else []) + (
                [b for b in budgets if b != budget or size not in bounded_sizes] if size == sweep_size else [])
            headers = {}
            for memory in plan:
                folder = tmp / f"idx{size}-{memory}"
                built = run_build(tmp, folder, memory)
                built["synthetic"] = built["tokens"] > real
                built["shard_tokens"] = None if memory is None else max(1 << 10, memory // shard_bytes_per_token(len(vocabulary)))
                headers[memory] = json.loads((folder / "index.json").read_text())
                built["same_files_as_first_build"] = headers[memory] == headers[plan[0]]
                if memory == plan[0]:
                    index = open_index(folder, verify=False)
                    latency_load = os.getloadavg()[0]
                    built["latency"] = latency(index, np.random.default_rng(0), args.queries)
                    built["latency_load"] = latency_load
                    built["sa_bytes_per_token"] = built["bytes"]["sa"] / built["tokens"]
                    built["token_bytes_per_token"] = built["bytes"]["tokens"] / built["tokens"]
                    del index
                loads += built["load"]
                runs.append(built)
                print(json.dumps(built), file=sys.stderr)
                rows += _rows(built)
                shutil.rmtree(folder)
            if not all(run["same_files_as_first_build"] for run in runs if run["tokens"] == runs[-1]["tokens"]):
                raise SystemExit(f"size {size}: the bounded build's files differ from the first build's")
    if args.json:
        harness.write_results(args.json, harness.results_document(
            "n-gram LMs", "suffix-array index: bytes/token, build time and memory (in memory and in bounded memory), "
            "count latency against corpus size", rows, issue=44, loads=loads,
            details={"runs": runs, "real_corpus_tokens": real}))


def _cpu() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.machine()


if __name__ == "__main__":
    main()
