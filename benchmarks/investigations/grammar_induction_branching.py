"""Which way do the induced trees branch? DMV, CCM and their product on UD10 (EWT) by training size.

A diagnostic for issue #16 (Klein & Manning 2004; Liang, Klein & Jordan 2008, §5.1): for each
setting it trains a model for 50 EM iterations, parses UD10 dev and reports the bracket F1
against UD's subtree yields and the share of predicted non-trivial brackets that start at the
first word ("left-branching" share), end at the last word ("right-branching" share) or neither.
The same shares are given for the gold brackets of UD10 dev and of the WSJ10 sample, and for the
CCM trained on the WSJ10 sample. Training subsets are random draws of UD10 train
(``numpy.random.default_rng(seed).choice``, as ``grammar_induction.py --ud-subsample``).

    PYTHONPATH=src NUMBA_NUM_THREADS=1 python benchmarks/investigations/grammar_induction_branching.py \
        --json docs/figures/grammar_induction_branching.json
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

import numpy as np

from varorder.grammar.induce import GrammarInducer
from varorder.tasks.grammar_induction import evaluate, load_sentences

import sys

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the shared harness
import harness  # noqa: E402

DATA = harness.DATA
# (model, training sentences (None = all), draw seed, CCM smoothing)
SETTINGS = [("ccm", 537, 0, (2.0, 8.0)), ("ccm", 537, 1, (2.0, 8.0)), ("ccm", 1600, 0, (2.0, 8.0)),
            ("ccm", 3200, 0, (2.0, 8.0)), ("ccm", None, 0, (2.0, 8.0)), ("ccm", None, 0, (20.0, 80.0)),
            ("dmv", 537, 0, (2.0, 8.0)), ("dmv", None, 0, (2.0, 8.0)),
            ("product", 537, 0, (2.0, 8.0)), ("product", 537, 2, (2.0, 8.0)), ("product", None, 0, (2.0, 8.0)),
            ("product", None, 0, (20.0, 80.0))]


def branching(spans, sentences) -> dict:
    """Shares of non-trivial brackets (length 2 … n − 1) starting at 0, ending at n, or inner."""
    counts = {"starts_at_first_word": 0, "ends_at_last_word": 0, "inner": 0}
    for s, g in zip(spans, sentences):
        n = len(g.tags)
        for i, j in s:
            if 1 < j - i < n:
                key = "starts_at_first_word" if i == 0 else "ends_at_last_word" if j == n else "inner"
                counts[key] += 1
    total = sum(counts.values())
    return {k: v / total for k, v in counts.items()}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--iterations", type=int, default=50)
    ap.add_argument("--json")
    args = ap.parse_args()
    ud = DATA / "ud-english-ewt"
    train = load_sentences(ud / "en_ewt-ud-train.conllu.gz")
    dev = load_sentences(ud / "en_ewt-ud-dev.conllu.gz")
    wsj = load_sentences(DATA / "ptb-wsj-sample" / "wsj_sample.mrg.tar.gz")
    result = {"load_average": os.getloadavg(), "iterations": args.iterations,
              "gold": {"ud10_dev": branching([g.spans for g in dev], dev),
                       "wsj10_sample": branching([g.spans for g in wsj], wsj)}, "runs": []}
    est = GrammarInducer(model="ccm", n_iter=args.iterations).fit([g.tags for g in wsj])
    result["wsj10_sample_ccm"] = branching(est.parse([g.tags for g in wsj])[1], wsj)
    print("gold", result["gold"], "\nwsj ccm", result["wsj10_sample_ccm"], flush=True)
    for model, size, seed, smoothing in SETTINGS:
        subset = train
        if size is not None:
            keep = np.random.default_rng(seed).choice(len(train), min(size, len(train)), replace=False)
            subset = [train[i] for i in sorted(keep)]
        est = GrammarInducer(model=model, n_iter=args.iterations, ccm_smoothing=smoothing)
        est.fit([g.tags for g in subset])
        heads, spans = est.parse([g.tags for g in dev])
        scores = evaluate(heads, spans, dev)
        row = {"model": model, "train_sentences": len(subset), "seed": seed, "ccm_smoothing": list(smoothing),
               "directed": scores.get("directed"), "f1": scores["f1"], **branching(spans, dev)}
        result["runs"].append(row)
        print(row, flush=True)
    result["load_average_end"] = os.getloadavg()
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
