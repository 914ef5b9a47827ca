"""Peak memory of `varorder lm train -S` by step, against the budget (issue #20 part B).

Runs the streaming estimation (``varorder.lm.streaming.train_on_disk``, what ``lm train
-S`` calls) in this process, after a warm-up on a tiny corpus that compiles and loads
every kernel; the resident set (VmRSS) is sampled every 20 ms and the largest value seen
during each step is reported, with the process's peak (VmHWM) and the floor measured
after the warm-up. With ``--compare``, the ARPA file is checked byte for byte against
the in-memory estimator's (run in a child process, so its memory does not count here).

    PYTHONPATH=src nice -n 10 python benchmarks/guards/lm_budget.py CORPUS -S 500M [--order 5]
        [--temp DIR] [--compare] [--json OUT]

Corpora: ``benchmarks/peers/lm.py``'s ``make_large_corpus`` (sampled from the PTB 5-gram); they
need ``--discount-fallback``, as there (a large sample has no rare words).
"""

from __future__ import annotations

import argparse
import filecmp
import functools
import gc
import json
import os
import resource
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

FALLBACK = (0.5, 1.0, 1.5)


def _rss_mb() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS"):
                return int(line.split()[1]) // 1024
    return 0


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("corpus")
    parser.add_argument("-S", "--memory", required=True)
    parser.add_argument("--order", type=int, default=5)
    parser.add_argument("--temp", default=None, help="folder for the tables (-T)")
    parser.add_argument("--compare", action="store_true", help="cmp the ARPA file with the in-memory path's")
    parser.add_argument("--json", help="append the row to this JSON-lines file")
    args = parser.parse_args()

    from varorder.lm import arpa
    from varorder.lm import ModifiedKneserNey, _disk, external, streaming
    from varorder.lm.external import parse_memory

    memory = parse_memory(args.memory)
    step = ["other"]
    peaks: dict[str, int] = {}

    def sample():
        while True:
            rss, name = _rss_mb(), step[0]
            peaks[name] = max(peaks.get(name, 0), rss)
            time.sleep(0.02)

    def labelled(module, name, label):
        function = getattr(module, name)

        @functools.wraps(function)
        def wrapper(*a, **k):
            outer, step[0] = step[0], label
            try:
                return function(*a, **k)
            finally:
                step[0] = outer
        setattr(module, name, wrapper)

    for module, name, label in [(external, "vocabulary_of", "vocabulary"), (external, "_count_blocks", "counting"),
                                (external, "_merge_to_disk", "merging runs"),
                                (streaming, "estimate_to_arpa", "estimating (other)"),
                                (streaming, "_prefixes_and_suffixes", "prefix/suffix rows"),
                                (streaming, "_used_counts", "adjusted counts"), (streaming, "gather", "gathers"),
                                (arpa, "write_arpa_stream", "writing ARPA")]:
        labelled(module, name, label)
    del _disk

    import warnings
    warnings.simplefilter("ignore", RuntimeWarning)  # the fallback discounts, expected here

    with tempfile.TemporaryDirectory(dir=args.temp) as folder:
        folder = Path(folder)
        tiny = folder / "tiny.txt"
        tiny.write_text("a b c d\nb c a\n" * 50)
        streaming.train_on_disk(ModifiedKneserNey(order=args.order, discount_fallback=FALLBACK), tiny,
                                folder / "tiny.arpa", memory=1 << 20, temp_dir=folder)
        gc.collect()
        floor = _rss_mb()
        peaks.clear()
        threading.Thread(target=sample, daemon=True).start()
        start, cpu = time.perf_counter(), time.process_time()
        out = folder / "disk.arpa"
        kept = streaming.train_on_disk(ModifiedKneserNey(order=args.order, discount_fallback=FALLBACK), args.corpus,
                                       out, memory=memory, temp_dir=folder)
        row = {"corpus": args.corpus, "-S MB": memory >> 20, "order": args.order, "n-grams": kept,
               "wall_s": round(time.perf_counter() - start, 1), "cpu_s": round(time.process_time() - cpu, 1),
               "floor_mb": floor, "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024,
               "peak by step mb": dict(peaks), "load average": os.getloadavg()}
        row["peak above floor mb"] = row["peak_mb"] - floor
        if args.compare:
            reference = folder / "memory.arpa"
            subprocess.run([sys.executable, "-m", "varorder", "lm", "train", args.corpus, "-n", str(args.order),
                            "--discount-fallback", "-o", str(reference)], check=True, capture_output=True)
            row["identical to in-memory"] = filecmp.cmp(out, reference, shallow=False)
    print(json.dumps(row), flush=True)
    if args.json:
        with open(args.json, "a") as handle:
            handle.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()
