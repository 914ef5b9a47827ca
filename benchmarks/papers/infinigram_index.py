"""The suffix-array index of varorder.lm.suffix_index against infini-gram's published
figures (Liu et al. 2024, §3: ~7 bytes a token of index, counts in milliseconds): index
bytes per token, build CPU time and peak memory against the corpus size (each size built in
a fresh child process), and count / next-token latency percentiles .

The corpus is assembled from ../shared/data (PTB-LM train, Hansards ISI English and French
train + heldout, Brown as plain words, War and Peace train), read once by
varorder.lm.read_corpus; size N is its first N tokens (sentences kept whole, markers
counted). Latency: n-grams (n = 1..5) drawn from random corpus positions plus as many
never-seen ones, each queried once through the public ``SuffixIndex.count`` /
``SuffixIndex.ntd`` (Python call included), CPU-time per query, after a warm-up.

    python benchmarks/papers/infinigram_index.py --sizes 1e5,1e6,3e6,1e7 --json benchmarks/results/lm-suffix-index.json
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/
import harness  # noqa: E402

# ../shared/data beside the project root (or beside a folder above it, for worktrees)
DATA = next((p / "shared" / "data" for p in Path(__file__).resolve().parents if (p / "shared" / "data").is_dir()),
            Path(__file__).resolve().parents[3] / "shared" / "data")
CHILD = r"""
import json, resource, sys, time
import numpy as np
from varorder.lm import Vocabulary
from varorder.lm.suffix_index import build_index_from_ids, open_index
ids = np.load(sys.argv[1]); lengths = np.load(sys.argv[2])
words = open(sys.argv[3], encoding="utf-8", errors="surrogateescape").read().split("\n")[:-1]
vocabulary = Vocabulary(words)
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
cpu, wall = time.process_time(), time.perf_counter()
index = build_index_from_ids(vocabulary, ids, lengths, sys.argv[4])
cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
start = time.process_time(); open_index(sys.argv[4]); verify = time.process_time() - start
print(json.dumps({"tokens": index.num_tokens, "build_cpu_s": cpu, "build_wall_s": wall, "verify_open_cpu_s": verify,
                  "peak_rss_mb": peak / 1024, "rss_before_build_mb": before / 1024, "bytes": index.nbytes}))
"""


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1e5,1e6,3e6,1e7")
    parser.add_argument("--queries", type=int, default=2000)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    from varorder.lm import read_corpus
    from varorder.lm.suffix_index import open_index

    sizes = [int(float(s)) for s in args.sizes.split(",")]
    rows, runs = [], []
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        files = [DATA / "ptb-lm" / "ptb.train.txt.gz", DATA / "hansards-en-fr" / "isi-bitext" / "train.e.gz",
                 DATA / "hansards-en-fr" / "isi-bitext" / "train.f.gz", brown_text(tmp),
                 DATA / "warandpeace" / "wap.train.txt.gz", DATA / "hansards-en-fr" / "isi-bitext" / "heldout.e.gz",
                 DATA / "hansards-en-fr" / "isi-bitext" / "heldout.f.gz"]
        vocabulary, ids, lengths = read_corpus(files)
        stream = np.cumsum(lengths + 2)
        print(f"corpus: {int(stream[-1])} tokens with markers, {len(vocabulary)} words", file=sys.stderr)
        (tmp / "vocab.txt").write_text("".join(w + "\n" for w in vocabulary.words), encoding="utf-8",
                                       errors="surrogateescape")
        for size in sizes:
            sentences = int(np.searchsorted(stream, size, side="right"))
            if sentences == len(lengths) and stream[-1] < size:
                print(f"size {size}: the corpus has only {int(stream[-1])} tokens; using them all", file=sys.stderr)
            n_words = int(lengths[:sentences].sum())
            np.save(tmp / "ids.npy", ids[:n_words]); np.save(tmp / "lengths.npy", lengths[:sentences])
            folder = tmp / f"idx{size}"
            load_before = os.getloadavg()[0]
            child = subprocess.run([sys.executable, "-c", CHILD, str(tmp / "ids.npy"), str(tmp / "lengths.npy"),
                                    str(tmp / "vocab.txt"), str(folder)], check=True, capture_output=True, text=True)
            built = json.loads(child.stdout)
            index = open_index(folder, verify=False)
            built["latency"] = latency(index, np.random.default_rng(0), args.queries)
            built["load"] = [load_before, os.getloadavg()[0]]
            built["sa_bytes_per_token"] = built["bytes"]["sa"] / built["tokens"]
            built["token_bytes_per_token"] = built["bytes"]["tokens"] / built["tokens"]
            runs.append(built)
            print(json.dumps(built), file=sys.stderr)
            N = built["tokens"]
            note = f"load {built['load'][0]:.1f}-{built['load'][1]:.1f}"
            rows += [
                {"system": "varorder lm index", "task": f"index of {N:,} tokens", "metric": "index bytes/token beside the token ids",
                 "varorder": round(built["sa_bytes_per_token"], 3), "reference": 7.0, "reference_name": "infini-gram (paper, ~7 bytes/token incl. its 2-byte ids)",
                 "ratio": round(built["sa_bytes_per_token"] / 7.0, 3), "better": "lower",
                 "note": f"token ids {built['token_bytes_per_token']:.0f} bytes/token more; docs offsets {built['bytes']['docs'] / N:.2f}"},
                {"system": "varorder lm index", "task": f"index of {N:,} tokens", "metric": "build CPU s",
                 "varorder": round(built["build_cpu_s"], 3), "reference": None, "reference_name": "none (no peer run)", "ratio": None,
                 "better": "lower", "note": f"peak RSS {built['peak_rss_mb']:.0f} MB (child, ids loaded: {built['rss_before_build_mb']:.0f} MB); {note}"},
                {"system": "SuffixIndex.count", "task": f"index of {N:,} tokens", "metric": "count latency p95 ms (CPU)",
                 "varorder": round(built["latency"]["count"]["p95_ms"], 4), "reference": 1.0, "reference_name": "target: 1 ms at the 95th percentile",
                 "ratio": round(built["latency"]["count"]["p95_ms"] / 1.0, 4), "better": "lower",
                 "note": f"p50 {built['latency']['count']['p50_ms']:.4f}, p99 {built['latency']['count']['p99_ms']:.4f}; ntd p95 {built['latency']['ntd']['p95_ms']:.3f} ms, p99 {built['latency']['ntd']['p99_ms']:.3f}; {note}"},
            ]
    if args.json:
        harness.write_results(args.json, harness.results_document(
            "n-gram LMs", "suffix-array index: bytes/token, build time and memory, count latency against corpus size",
            rows, issue=44, loads=[load for run in runs for load in run["load"]]))

def _cpu() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.machine()


if __name__ == "__main__":
    main()
