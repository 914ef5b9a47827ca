"""The stateful scorer of binary format 2 (the trie) against format 1's, and against a
baseline checkout's trie scorer: every token of PTB valid scored with state
(``token_log10probs``), CPU per call in interleaved rounds (#46 item 4, "lookups within
1.5x of format 1").

    PYTHONPATH=src python benchmarks/investigations/lm_trie_scoring.py --models /tmp/trie-bench \\
        [--baseline /path/to/checkout] [--orders 3 5] [--rounds 15]

``--models`` holds the files ``benchmarks/peers/lm_binary_trie.py`` writes there
(``ptb{N}.v1.bin``, ``ptb{N}.v2.bin``, ``ptb{N}.v2q8.bin``). With ``--baseline`` the
checkout's ``varorder`` is loaded beside this tree's (``harness.baseline_package``) and its
trie scorer timed in the same rounds; the scores of both trees are checked bit-equal.
Writes ``benchmarks/results/lm-trie-scoring.json`` (``--output``).
"""

from __future__ import annotations

import argparse
import importlib
import statistics
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import harness  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", required=True)
    parser.add_argument("--data", default=str(harness.DATA / "ptb-lm"))
    parser.add_argument("--baseline", default=None, help="a checkout whose trie scorer is timed too")
    parser.add_argument("--orders", type=int, nargs="+", default=[3, 5])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--output", default=str(harness.RESULTS / "lm-trie-scoring.json"))
    args = parser.parse_args()
    from varorder.lm.binary import open_binary
    from varorder.lm.corpus import open_text

    base_open = None
    if args.baseline:
        harness.baseline_package(args.baseline)
        base_open = importlib.import_module("varorder_base.lm.binary").open_binary
    sentences = [line.split() for line in open_text(Path(args.data) / "ptb.valid.txt.gz")]
    rows, loads, details = [], [harness.load_average()], {}
    for order in args.orders:
        models = Path(args.models)
        opened = {name: open_binary(models / f"ptb{order}.{name}.bin") for name in ("v1", "v2", "v2q8")}
        if base_open:
            for name in ("v2", "v2q8"):
                opened[f"base {name}"] = base_open(models / f"ptb{order}.{name}.bin")
        ids, lengths = opened["v1"].vocabulary.encode_sentences(sentences)
        n_tokens = len(ids) + len(lengths)
        scores = {name: model.token_log10probs(ids, lengths) for name, model in opened.items()}
        for name in ("v2", "base v2"):
            if name in scores:
                assert np.array_equal(scores[name][0].astype(np.float32), scores["v1"][0].astype(np.float32))
                assert np.array_equal(scores[name][1], scores["v1"][1])
        if base_open:
            for name in ("v2", "v2q8"):
                assert np.array_equal(scores[name][0], scores[f"base {name}"][0]), name
                assert np.array_equal(scores[name][1], scores[f"base {name}"][1]), name
        calls = {name: (lambda m=model: m.token_log10probs(ids, lengths)) for name, model in opened.items()}
        rounds = harness.interleaved(calls, args.rounds)
        loads.extend(rounds.loads)
        task = f"PTB {order}-gram, PTB valid ({n_tokens} tokens) scored with state"
        details[f"order {order}"] = {name: [round(x, 5) for x in rounds.cpu(name)] for name in calls}
        for name in calls:
            if name == "v1":
                continue
            rows.append(harness.row(f"token_log10probs, format 2 ({name})", task, "M tokens per CPU s, best",
                                    n_tokens / rounds.best(name) / 1e6, n_tokens / rounds.best("v1") / 1e6,
                                    "token_log10probs, format 1", better="higher",
                                    note=f"paired CPU ratio to format 1 {rounds.paired_ratio(name, 'v1'):.3f}x"))
            print(f"{order}-gram {name}: paired CPU ratio to v1 {rounds.paired_ratio(name, 'v1'):.3f}x"
                  + (f", to base {rounds.paired_ratio(name, 'base ' + name):.3f}x"
                     if f"base {name}" in calls else ""), file=sys.stderr)
    details["median_load"] = round(statistics.median(loads), 2)
    document = harness.results_document(
        "n-gram LMs", "Format 2's stateful scorer vs format 1's (and a baseline checkout's)", rows, issue=46,
        loads=loads, details=details)
    harness.write_results(args.output, document)
    print(f"wrote {args.output}", file=sys.stderr)


if __name__ == "__main__":
    main()
