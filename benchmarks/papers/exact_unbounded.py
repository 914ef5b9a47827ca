"""Exact decoding under an unbounded-order LM against 5-gram and 10-gram models, on the
tasks of Carter, Dymetman & Bouchard (2012): POS tagging with a high-order tag model and
T9-style candidate lists (issue 44, item 3).

    python benchmarks/papers/exact_unbounded.py pos [--max-sentences 60]
    python benchmarks/papers/exact_unbounded.py t9  [--per-length 2] [--decode-cap 100]
    python benchmarks/papers/exact_unbounded.py spelling [--per-length 2]
    python benchmarks/papers/exact_unbounded.py t9-sample [--sample-lengths 4 6 8]
    ... --json benchmarks/results/exact-unbounded.json

Models on the same inputs (the same candidate lists and observation log-likelihoods):
modified Kneser–Ney 5-gram and 10-gram (varorder.lm) and interpolated Witten–Bell at
unbounded order over a suffix array of the same training text (varorder.lm.unbounded,
bounds over left extensions from varorder.exact.model.UnboundedContext). Each input is
decoded exactly by Algorithm 1 with each model in turn (the order reversed every other
input; one untimed warm-up decode each first), timed in process CPU seconds. Reported as
the paper does: q's states against the implicit state space (an n-gram model: every tuple
of the last n - 1 candidates at every position; the unbounded model: every candidate
prefix), the refinements (Viterbi iterations - 1), and the CPU time against the 5-gram
decoder (target: the unbounded decoder within 10x).

POS: ptb-wsj-sample files wsj_0001-0159 train the tag models and TnT emissions; sentences
of wsj_0180-0199 (test) are tagged. T9: ptb-lm train trains the LMs; ptb-lm valid
sentences of lengths 1-10 (all words in the vocabulary, no numbers) are typed cleanly;
candidates are the same-length words (``--decode-cap`` keeps the most likely m).
Spelling (noisy channel, varorder.tasks.spelling): the same LMs and sentences, each word of
four letters or more misspelt by one random edit with probability 0.3; candidates are the
words within two edits, 4 nats an edit. t9-sample: adaptive rejection sampling (batch 100,
100 candidates a position, as the paper's sampling) until AR-100 >= 20 %: trials, final q
states and CPU seconds per model (paper Table 3 / Fig. 3c-d).
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

from varorder.exact import HighOrderTarget, MaxBackoffWeights, decode, sample
from varorder.exact.model import DEFAULT_EXTENSION_BUDGET, UnboundedContext
from varorder.lm import ModifiedKneserNey, read_corpus
from varorder.lm.suffix_index import build_index, build_index_from_ids
from varorder.lm.unbounded import WittenBell
from varorder.tasks.pos_highorder import PosTask
from varorder.tasks.spelling import SpellingTask
from varorder.tasks.t9 import T9Task, read_test_sentences

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the shared harness
import harness  # noqa: E402

DATA = harness.DATA


def implicit_states(sizes, order: int | None) -> float:
    """States of the explicit lattice over the candidate lists: at position j every tuple
    of the last min(n - 1, j) candidates (order None: every prefix), the root included."""
    total = 1.0
    for j in range(1, len(sizes) + 1):
        first = 0 if order is None else max(0, j - (order - 1))
        total += math.prod(float(s) for s in sizes[first:j])
    return total


def same_inputs(target: HighOrderTarget, weights: MaxBackoffWeights) -> HighOrderTarget:
    """The target's candidate lists and log-likelihoods over another model."""
    L = target.length
    return HighOrderTarget(weights.lm, list(zip(target.symbols[:L], target.logliks[:L])), eos=target.eos,
                           weights=weights)


def run(models: dict, targets: list, labels: list, gold=None) -> tuple[list[dict], dict]:
    names = list(models)
    for name in names:  # warm-up: compilation, the unigram bounds of the first input
        decode(same_inputs(targets[0], models[name][1]))
    per = {name: {"cpu": [], "states": [], "refinements": [], "share": [], "correct": 0, "total": 0, "exact": 0}
           for name in names}
    loads = [harness.load_average()]
    for k, (target, label) in enumerate(zip(targets, labels)):
        order = names if k % 2 == 0 else names[::-1]
        for name in order:
            weights = models[name][1]
            t = same_inputs(target, weights)
            sample, result = harness.timed(lambda: decode(t))
            record = per[name]
            record["cpu"].append(sample.cpu)
            record["states"].append(result.num_states)
            record["refinements"].append(result.iterations - 1)
            sizes = [len(s) for s in t.symbols]
            record["share"].append(result.num_states / implicit_states(sizes, models[name][0]))
            record["exact"] += int(result.exact)
            if gold is not None:
                good = gold(label, result.sentence)
                record["correct"] += good[0]
                record["total"] += good[1]
        loads.append(harness.load_average())
        if k % 10 == 9:
            print(f"  {k + 1}/{len(targets)} inputs, load {loads[-1]:.1f}", flush=True)
    summary = {}
    for name in names:
        r = per[name]
        ratios = [a / b for a, b in zip(r["cpu"], per[names[0]]["cpu"]) if b > 0]
        summary[name] = {
            "inputs": len(r["cpu"]), "exact": r["exact"], "cpu_total": float(np.sum(r["cpu"])),
            "cpu_median": float(np.median(r["cpu"])), "states_mean": float(np.mean(r["states"])),
            "refinements_mean": float(np.mean(r["refinements"])), "refinements_max": int(np.max(r["refinements"])),
            "share_median": float(np.median(r["share"])), "share_max": float(np.max(r["share"])),
            "cpu_ratio_total_vs_first": float(np.sum(r["cpu"]) / np.sum(per[names[0]]["cpu"])),
            "cpu_ratio_median_per_input": float(np.median(ratios)),
            "accuracy": (r["correct"] / r["total"]) if r["total"] else None,
        }
    return loads, summary


def print_summary(task: str, summary: dict, loads) -> None:
    print(f"{task} (load {harness.load_range(loads)}):")
    for name, s in summary.items():
        acc = f"  acc {s['accuracy']:.4f}" if s["accuracy"] is not None else ""
        print(f"  {name:10s} exact {s['exact']}/{s['inputs']}  CPU {s['cpu_total']:.2f} s "
              f"({s['cpu_ratio_total_vs_first']:.2f}x; median per input {s['cpu_ratio_median_per_input']:.2f}x)  "
              f"states {s['states_mean']:.1f}  refinements {s['refinements_mean']:.1f} (max {s['refinements_max']})  "
              f"share of the implicit states {s['share_median']:.3g} (max {s['share_max']:.3g}){acc}", flush=True)


def rows_of(task: str, summary: dict, note: str) -> list[dict]:
    out = []
    first = next(iter(summary))
    metrics = [("CPU seconds per input (median)", "cpu_median", "lower"), ("CPU seconds, all inputs", "cpu_total", "lower"),
               ("q states (mean)", "states_mean", "lower"), ("refinements (mean)", "refinements_mean", "lower"),
               ("share of the implicit state space (median)", "share_median", "lower"),
               ("accuracy", "accuracy", "higher")]
    for name, s in summary.items():
        for metric, key, better in metrics:
            if s[key] is not None:
                out.append(harness.row(name, task, metric, s[key], summary[first][key], first, better=better, note=note))
    return out


def pos(args, folder: Path):
    path = DATA / "ptb-wsj-sample" / "wsj_sample.pos.tsv.gz"
    t0 = time.process_time()
    task5 = PosTask.from_ptb_sample(path, order=5)
    task10 = PosTask.from_ptb_sample(path, order=10)
    if task10.lm.vocabulary.words != task5.lm.vocabulary.words:
        raise SystemExit("the 5- and 10-gram tag LMs have different vocabularies")
    from varorder.tasks.pos_highorder import split_ptb_sample

    vocab = task5.lm.vocabulary
    train = split_ptb_sample(path)["train"]
    ids = np.asarray([vocab.id_of(t) for s in train for t in s.tags], dtype=np.int64)
    index = build_index_from_ids(vocab, ids, np.asarray([len(s.tags) for s in train]), folder / "pos-tags")
    wb = WittenBell(index)
    print(f"pos: models trained in {time.process_time() - t0:.1f} CPU s; {index.num_tokens} tag tokens", flush=True)
    models = {"mkn-5": (5, task5.weights), "mkn-10": (10, task10.weights), "wb-unbounded": (None, MaxBackoffWeights(UnboundedContext(wb, budget=args.budget)))}
    sentences = task5.test[: args.max_sentences]
    targets = [task5.target(s.words) for s in sentences]

    def gold(sentence, path):
        predicted = task5.tags_of(path)
        return sum(p == g for p, g in zip(predicted, sentence.tags)), len(sentence.tags)

    loads, summary = run(models, targets, sentences, gold)
    print_summary("pos", summary, loads)
    return loads, summary


def word_models(args, folder: Path):
    corpus = DATA / "ptb-lm" / "ptb.train.txt.gz"
    t0 = time.process_time()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        lm5 = ModifiedKneserNey(order=5).fit(corpus).model_
        lm10 = ModifiedKneserNey(order=10).fit(corpus).model_
    if lm10.vocabulary.words != lm5.vocabulary.words:
        raise SystemExit("the 5- and 10-gram LMs have different vocabularies")
    index = build_index(corpus, folder / "ptb", vocabulary=lm5.vocabulary)
    wb = WittenBell(index)
    print(f"word LMs trained in {time.process_time() - t0:.1f} CPU s; {index.num_tokens} tokens", flush=True)
    return lm5, lm10, wb


_WORD_MODELS = {}


def t9(args, folder: Path):
    if not _WORD_MODELS:
        _WORD_MODELS["models"] = word_models(args, folder)
    lm5, lm10, wb = _WORD_MODELS["models"]
    task = T9Task(lm5, max_candidates=args.decode_cap)
    models = {"mkn-5": (5, task.weights), "mkn-10": (10, MaxBackoffWeights(lm10)),
              "wb-unbounded": (None, MaxBackoffWeights(UnboundedContext(wb, budget=args.budget)))}
    groups = read_test_sentences(DATA / "ptb-lm" / "ptb.valid.txt.gz", lm5.vocabulary, per_length=args.per_length,
                                 seed=args.seed)
    sentences = [words for length in sorted(groups) for words in groups[length]]
    targets = [task.target(task.observe(words)) for words in sentences]

    def gold(words, path):
        return int(task.words(path) == words), 1

    loads, summary = run(models, targets, sentences, gold)
    print_summary("t9", summary, loads)
    return loads, summary


def spelling(args, folder: Path):
    if not _WORD_MODELS:
        _WORD_MODELS["models"] = word_models(args, folder)
    lm5, lm10, wb = _WORD_MODELS["models"]
    task = SpellingTask(lm5)
    models = {"mkn-5": (5, task.weights), "mkn-10": (10, MaxBackoffWeights(lm10)),
              "wb-unbounded": (None, MaxBackoffWeights(UnboundedContext(wb, budget=args.budget)))}
    groups = read_test_sentences(DATA / "ptb-lm" / "ptb.valid.txt.gz", lm5.vocabulary, per_length=args.per_length,
                                 seed=args.seed + 1)
    sentences = [words for length in sorted(groups) for words in groups[length]]
    rng = np.random.default_rng(args.seed)
    observed = [task.corrupt(words, rng) for words in sentences]
    targets = [task.target(tokens) for tokens in observed]
    print(f"spelling: {sum(a != b for o, w in zip(observed, sentences) for a, b in zip(o, w))} misspelt words in "
          f"{sum(map(len, sentences))}", flush=True)

    def gold(words, path):
        return sum(a == b for a, b in zip(task.words(path), words)), len(words)

    loads, summary = run(models, targets, sentences, gold)
    print_summary("spelling", summary, loads)
    return loads, summary


def t9_sample(args, folder: Path):
    if not _WORD_MODELS:
        _WORD_MODELS["models"] = word_models(args, folder)
    lm5, lm10, wb = _WORD_MODELS["models"]
    task = T9Task(lm5, max_candidates=100)
    models = {"mkn-5": task.weights, "mkn-10": MaxBackoffWeights(lm10),
              "wb-unbounded": MaxBackoffWeights(UnboundedContext(wb, budget=args.budget))}
    groups = read_test_sentences(DATA / "ptb-lm" / "ptb.valid.txt.gz", lm5.vocabulary, lengths=args.sample_lengths,
                                 per_length=args.per_length, seed=args.seed)
    sentences = [words for length in sorted(groups) for words in groups[length]]
    targets = [task.target(task.observe(words)) for words in sentences]
    for name, weights in models.items():  # warm-up
        sample(same_inputs(targets[0], weights), target_ar=0.2, batch=100, seed=0, max_trials=2000)
    per = {name: {"cpu": [], "trials": [], "states": [], "reached": 0} for name in models}
    loads = [harness.load_average()]
    names = list(models)
    for k, target in enumerate(targets):
        for name in (names if k % 2 == 0 else names[::-1]):
            t = same_inputs(target, models[name])
            timing, result = harness.timed(lambda: sample(t, target_ar=0.2, batch=100, seed=args.seed + k,
                                                          max_trials=args.max_trials))
            r = per[name]
            r["cpu"].append(timing.cpu)
            r["trials"].append(result.history.num_trials)
            r["states"].append(result.num_states)
            r["reached"] += int(result.stopped_by == "target_ar")
        loads.append(harness.load_average())
    summary = {}
    for name, r in per.items():
        summary[name] = {"inputs": len(r["cpu"]), "reached_ar": r["reached"], "cpu_total": float(np.sum(r["cpu"])),
                         "cpu_median": float(np.median(r["cpu"])), "trials_mean": float(np.mean(r["trials"])),
                         "states_mean": float(np.mean(r["states"])),
                         "cpu_ratio_total_vs_first": float(np.sum(r["cpu"]) / np.sum(per[names[0]]["cpu"]))}
    print(f"t9-sample (load {harness.load_range(loads)}):")
    for name, x in summary.items():
        print(f"  {name:12s} reached AR-100 >= 20% {x['reached_ar']}/{x['inputs']}  trials {x['trials_mean']:.0f}  "
              f"states {x['states_mean']:.0f}  CPU {x['cpu_total']:.2f} s ({x['cpu_ratio_total_vs_first']:.2f}x)",
              flush=True)
    return loads, summary


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("tasks", nargs="+", choices=["pos", "t9", "spelling", "t9-sample"])
    parser.add_argument("--sample-lengths", type=int, nargs="+", default=[4, 6, 8])
    parser.add_argument("--max-trials", type=int, default=20000)
    parser.add_argument("--max-sentences", type=int, default=60)
    parser.add_argument("--per-length", type=int, default=2)
    parser.add_argument("--decode-cap", type=int, default=None)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--budget", type=int, default=DEFAULT_EXTENSION_BUDGET,
                        help="left extensions walked per unbounded-order bound before it falls back to 1")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    rows, details, all_loads = [], {}, []
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.tasks:
            loads, summary = {"pos": pos, "t9": t9, "spelling": spelling, "t9-sample": t9_sample}[name](
                args, Path(tmp))
            all_loads += loads
            details[name] = summary
            if name == "pos":
                note = f"ptb-wsj-sample test sentences, first {args.max_sentences}"
            elif name == "t9":
                note = (f"ptb-lm valid, lengths 1-10, {args.per_length} a length, candidates "
                        f"{'all same-length words' if args.decode_cap is None else f'top {args.decode_cap}'}")
            elif name == "spelling":
                note = (f"ptb-lm valid, lengths 1-10, {args.per_length} a length, one edit per word w.p. 0.3; "
                        "candidates within 2 edits, 4 nats an edit")
            else:
                note = (f"ptb-lm valid, lengths {args.sample_lengths}, {args.per_length} a length, top 100 candidates, "
                        "B = 100, until AR-100 >= 20%")
            note += f"; unbounded bounds walk at most {args.budget} left extensions"
            if name == "t9-sample":
                first = next(iter(summary))
                for model, x in summary.items():
                    for metric, key in (("CPU seconds, all inputs", "cpu_total"), ("trials (mean)", "trials_mean"),
                                        ("q states (mean)", "states_mean")):
                        rows.append(harness.row(model, name, metric, x[key], summary[first][key], first, note=note))
                continue
            rows += rows_of(name, summary, note)
    if args.json:
        doc = harness.results_document("Exact high-order HMMs", "Exact decoding under an unbounded-order LM vs 5- and 10-gram",
                                       rows, issue=44, loads=all_loads, details=details)
        harness.write_results(args.json, doc)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
