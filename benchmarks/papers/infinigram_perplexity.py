"""Perplexity of the unbounded-order models of varorder.lm.unbounded beside modified
Kneser–Ney 3/5/10-gram (varorder.lm.ModifiedKneserNey) on the same split,
with infini-gram's ∞-gram statistics (Liu et al. 2024, §4: the share of sparse estimates
and how often they are right, the effective n).

Corpora: PTB-LM (train → valid; the test split is held back) and a larger one assembled from
../shared/data (Hansards ISI English train + Brown plain words + War and Peace train → War
and Peace valid + Hansards ISI English heldout), words seen once in training → <unk>
(``--min-count``, both models on one vocabulary). Nothing is tuned on the evaluation text:
the Witten–Bell models have no parameter and MKN's discounts come from training counts.

    python benchmarks/papers/infinigram_perplexity.py --json benchmarks/results/lm-unbounded-perplexity.json

With ``--mkn-memory 1G`` every MKN model is estimated in bounded memory in a child process of
its own (``varorder.lm.train_from_files(..., memory=, output=ARPA)``: sorted counts on disk,
the ARPA written as it is computed), then read back and scored in a second child, one order
at a time, and the index is built in bounded memory too (``--index-memory``); each child's
CPU time and peak resident set are recorded. This is how the larger corpus's rows fit on a
shared machine:

    nice -n 5 python benchmarks/papers/infinigram_perplexity.py --no-ptb --mkn-memory 1G \
        --json benchmarks/results/lm-unbounded-perplexity-large.json
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
import subprocess
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/
import harness  # noqa: E402
from infinigram_index import DATA, _cpu, brown_text  # noqa: E402


FIT_CHILD = r"""
import json, sys, time
from varorder.lm import ModifiedKneserNey
def hwm():  # this process's peak resident set (ru_maxrss would count the parent's pages at fork)
    return next(int(l.split()[1]) / 1024 for l in open("/proc/self/status") if l.startswith("VmHWM"))
from varorder.lm.train import train_from_files
a = json.loads(sys.argv[1])
start = time.process_time()
trained = train_from_files(ModifiedKneserNey(order=a["order"], min_count=a["min_count"]), a["train"],
                           memory=a["memory"], temp_dir=a["tmp"], output=a["arpa"])
print(json.dumps({"fit_cpu_s": time.process_time() - start, "ngram_counts": trained.ngram_counts,
                  "streamed": trained.streamed, "fit_peak_rss_mb": hwm()}))
"""
SCORE_CHILD = r"""
import json, sys, time
from varorder.lm import iter_sentences
def hwm():
    return next(int(l.split()[1]) / 1024 for l in open("/proc/self/status") if l.startswith("VmHWM"))
from varorder.lm.arpa import read_arpa
from varorder.lm.suffix_index import open_index
from varorder.lm.unbounded import WittenBell
a = json.loads(sys.argv[1])
start = time.process_time()
lm = read_arpa(a["arpa"])
read = time.process_time() - start
valid = [tokens for path in a["valid"] for _, tokens in iter_sentences(path)]
mkn = lm.perplexity(valid)
print(json.dumps({"mkn": mkn}), flush=True)
start = time.process_time()
continued = WittenBell(open_index(a["index"]), base=lm).sentence_logprobs(valid).perplexity if a["continued"] else None
print(json.dumps({"mkn": mkn, "continued": continued, "read_cpu_s": read, "continuation_cpu_s": time.process_time() - start,
                  "score_peak_rss_mb": hwm()}))
"""


def _child(code: str, arguments: dict) -> dict:
    run = harness.run_child([sys.executable, "-c", code, json.dumps(arguments)])
    out = json.loads(run.stdout.strip().splitlines()[-1])
    out["child_cpu_s"], out["child_wall_s"], out["child_peak_rss_mb"] = run.cpu, run.wall, run.max_rss_mb
    return out


def evaluate_bounded(name, train_files, valid_files, min_count, orders, rows, tmp, memory, index_memory,
                     save=lambda: None, witten_bell=True, continued=True):
    """:func:`evaluate` with every model estimated in bounded memory, one child per step."""
    from varorder.lm import iter_sentences
    from varorder.lm.suffix_index import build_index
    from varorder.lm.unbounded import WittenBell

    train_files = [str(p) for p in train_files]
    valid_files = [str(p) for p in valid_files]
    load = os.getloadavg()[0]
    start = time.process_time()
    index = build_index(train_files, tmp / f"{name}.idx", min_count=min_count, memory=index_memory)
    build = time.process_time() - start
    valid = [tokens for path in valid_files for _, tokens in iter_sentences(path)]
    task = f"{name}: {index.num_tokens:,} training tokens, {sum(len(s) + 1 for s in valid):,} valid tokens"
    if witten_bell:
        start = time.process_time()
        summary = WittenBell(index).sentence_logprobs(valid).summary()
        seconds = time.process_time() - start
        print(name, summary, file=sys.stderr, flush=True)
        rows.append({"system": "Witten–Bell, unbounded order (suffix array)", "task": task,
                     "metric": "valid perplexity", "varorder": round(summary["perplexity_witten_bell"], 2),
                     "reference": None, "reference_name": "none (no peer run)", "ratio": None, "better": "lower",
                     "note": (f"index (bounded, {index_memory >> 20} MB) {build:.1f} CPU s, scoring {seconds:.1f} "
                              f"CPU s; ∞-gram: mean effective n {summary['mean_effective_n']:.2f}, P∞(next) = 0 on "
                              f"{summary['infinigram_zero_share']:.1%} of tokens, sparse on "
                              f"{summary['infinigram_sparse_share']:.1%} (right "
                              f"{summary['infinigram_sparse_correct']:.1%} of those); load {load:.1f}")})
        save()
    del index
    for order in orders:
        arpa = tmp / f"{name}.{order}.arpa"
        load = os.getloadavg()[0]
        try:
            fit = _child(FIT_CHILD, {"order": order, "min_count": min_count, "train": train_files, "memory": memory,
                                     "tmp": str(tmp), "arpa": str(arpa)})
            print(name, order, fit, file=sys.stderr, flush=True)
            score = _child(SCORE_CHILD, {"arpa": str(arpa), "valid": valid_files, "index": str(tmp / f"{name}.idx"),
                                     "continued": continued})
            print(name, order, score, file=sys.stderr, flush=True)
        except RuntimeError as error:  # a child died (e.g. killed for memory): say so, go on
            print(name, order, "failed:", error, file=sys.stderr, flush=True)
            continue
        finally:
            arpa.unlink(missing_ok=True)
        if not continued:  # MKN alone
            rows.append({"system": f"MKN {order}-gram (varorder, estimated on disk)", "task": task,
                         "metric": "valid perplexity", "varorder": round(score["mkn"], 2), "reference": None,
                         "reference_name": "none (no peer run)", "ratio": None, "better": "lower",
                         "note": (f"estimated under {memory >> 20} MB: {fit['child_cpu_s']:.0f} CPU s, "
                                  f"{fit['child_wall_s']:.0f} s wall, {sum(fit['ngram_counts']):,} n-grams; ARPA "
                                  f"read + scoring {score['child_cpu_s']:.0f} CPU s; load {load:.1f}-"
                                  f"{os.getloadavg()[0]:.1f}")})
            save()
            continue
        rows.append({"system": f"MKN {order}-gram continued by Witten–Bell past order {order}, unbounded",
                     "task": task, "metric": "valid perplexity", "varorder": round(score["continued"], 2),
                     "reference": round(score["mkn"], 2), "reference_name": f"MKN {order}-gram (varorder)",
                     "ratio": round(round(score["continued"], 2) / round(score["mkn"], 2), 4), "better": "lower",
                     "note": (f"MKN estimated on disk under {memory >> 20} MB: {fit['child_cpu_s']:.0f} CPU s, "
                              f"{fit['child_wall_s']:.0f} s wall, peak RSS {fit.get('fit_peak_rss_mb', fit['child_peak_rss_mb']):.0f} MB, "
                              f"{sum(fit['ngram_counts']):,} n-grams; ARPA read + scoring: {score['child_cpu_s']:.0f} "
                              f"CPU s, peak RSS {score.get('score_peak_rss_mb', score['child_peak_rss_mb']):.0f} MB; load {load:.1f}-{os.getloadavg()[0]:.1f}")})
        save()


def evaluate(name, train_files, valid_files, min_count, orders, rows, tmp):
    from varorder.lm import ModifiedKneserNey, iter_sentences
    from varorder.lm.suffix_index import build_index
    from varorder.lm.unbounded import WittenBell

    load = os.getloadavg()[0]
    start = time.process_time()
    index = build_index(train_files, tmp / f"{name}.idx", min_count=min_count)
    build = time.process_time() - start
    valid = [tokens for path in valid_files for _, tokens in iter_sentences(path)]
    start = time.process_time()
    report = WittenBell(index).sentence_logprobs(valid)
    seconds = time.process_time() - start
    summary = report.summary()
    print(name, summary, file=sys.stderr)
    task = f"{name}: {index.num_tokens:,} training tokens, {summary['tokens']:,} valid tokens"
    rows.append({"system": "Witten–Bell, unbounded order (suffix array)", "task": task, "metric": "valid perplexity",
                 "varorder": round(summary["perplexity_witten_bell"], 2), "reference": None, "reference_name": "none (no peer run)",
                 "ratio": None, "better": "lower",
                 "note": (f"index {build:.1f} CPU s, scoring {seconds:.1f} CPU s; ∞-gram: mean effective n "
                          f"{summary['mean_effective_n']:.2f}, P∞(next) = 0 on {summary['infinigram_zero_share']:.1%} "
                          f"of tokens, sparse on {summary['infinigram_sparse_share']:.1%} (right "
                          f"{summary['infinigram_sparse_correct']:.1%} of those); load {load:.1f}")})
    for order in orders:
        start = time.process_time()
        lm = ModifiedKneserNey(order=order, min_count=min_count).fit(train_files).model_
        fit = time.process_time() - start
        mkn = lm.perplexity(valid)
        start = time.process_time()
        continued = WittenBell(index, base=lm).sentence_logprobs(valid).perplexity
        seconds = time.process_time() - start
        print(name, order, mkn, continued, file=sys.stderr)
        rows.append({"system": f"MKN {order}-gram continued by Witten–Bell past order {order}, unbounded",
                     "task": task, "metric": "valid perplexity", "varorder": round(continued, 2),
                     "reference": round(mkn, 2), "reference_name": f"MKN {order}-gram (varorder)",
                     "ratio": round(round(continued, 2) / round(mkn, 2), 4), "better": "lower",
                     "note": f"MKN fit {fit:.1f} CPU s; continuation scoring {seconds:.1f} CPU s; load {os.getloadavg()[0]:.1f}"})
        del lm


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--orders", default="3,5,10")
    parser.add_argument("--large", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument("--ptb", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--mkn-memory", help="estimate MKN in bounded memory in child processes (e.g. 1G)")
    parser.add_argument("--index-memory", default="256M", help="with --mkn-memory: the index build's budget")
    parser.add_argument("--witten-bell", action=argparse.BooleanOptionalAction, default=True,
                        help="with --mkn-memory: score the Witten-Bell row too")
    parser.add_argument("--continued", action=argparse.BooleanOptionalAction, default=True,
                        help="with --mkn-memory: score each MKN model continued by Witten-Bell too")
    args = parser.parse_args()
    if args.mkn_memory:
        from varorder.lm.external import parse_memory

        bounded = (parse_memory(args.mkn_memory), parse_memory(args.index_memory))
    orders = [int(o) for o in args.orders.split(",")]
    rows = []
    loads = [os.getloadavg()[0]]

    def save():
        loads.append(os.getloadavg()[0])
        if args.json:
            harness.write_results(args.json, harness.results_document(
                "n-gram LMs", "unbounded-order LMs over a suffix array (Witten–Bell; MKN continued past its order) "
                f"against MKN {'/'.join(map(str, orders))}", rows, issue=44, loads=loads))
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        if args.ptb:
            evaluate("PTB-LM", [DATA / "ptb-lm" / "ptb.train.txt.gz"], [DATA / "ptb-lm" / "ptb.valid.txt.gz"], 1, orders,
                     rows, tmp)
        if args.large:
            hansards = DATA / "hansards-en-fr" / "isi-bitext"
            large = ("Hansards-EN + Brown + War and Peace", [hansards / "train.e.gz", brown_text(tmp),
                                                             DATA / "warandpeace" / "wap.train.txt.gz"],
                     [DATA / "warandpeace" / "wap.valid.txt.gz", hansards / "heldout.e.gz"], 2, orders, rows, tmp)
            if args.mkn_memory:
                evaluate_bounded(*large, *bounded, save=save, witten_bell=args.witten_bell,
                                 continued=args.continued)
            else:
                evaluate(*large)
    save()


if __name__ == "__main__":
    main()
