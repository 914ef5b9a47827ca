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
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/
import harness  # noqa: E402
from infinigram_index import DATA, _cpu, brown_text  # noqa: E402


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
    args = parser.parse_args()
    orders = [int(o) for o in args.orders.split(",")]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        if args.ptb:
            evaluate("PTB-LM", [DATA / "ptb-lm" / "ptb.train.txt.gz"], [DATA / "ptb-lm" / "ptb.valid.txt.gz"], 1, orders,
                     rows, tmp)
        if args.large:
            hansards = DATA / "hansards-en-fr" / "isi-bitext"
            evaluate("Hansards-EN + Brown + War and Peace", [hansards / "train.e.gz", brown_text(tmp),
                                                             DATA / "warandpeace" / "wap.train.txt.gz"],
                     [DATA / "warandpeace" / "wap.valid.txt.gz", hansards / "heldout.e.gz"], 2, orders, rows, tmp)
    if args.json:
        harness.write_results(args.json, harness.results_document(
            "n-gram LMs", "unbounded-order LMs over a suffix array (Witten–Bell; MKN continued past its order) "
            f"against MKN {'/'.join(map(str, orders))}", rows, issue=44))


if __name__ == "__main__":
    main()
