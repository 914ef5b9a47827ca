"""Exact decoding and sampling in high-order HMMs (Carter, Dymetman & Bouchard 2012):
the paper's POS and T9 experiments on the shared data.

    python benchmarks/papers/exact_highorder.py pos   [--orders 3 4 5 6 7 8 9] [--full-cap 120]
    python benchmarks/papers/exact_highorder.py pos-ud [--orders 3 5 7]          # UD EWT XPOS, train -> dev
    python benchmarks/papers/exact_highorder.py t9-decode [--orders 3 4 5] [--per-length 3]
    python benchmarks/papers/exact_highorder.py t9-sample [--order 4] [--batches 1 10 20 50 100]
    python benchmarks/papers/exact_highorder.py t9-sample-lengths [--orders 3 4 5] [--per-length 10]
    python benchmarks/papers/exact_highorder.py t9-trace [--order 5] [--trace-batch 100]
    python benchmarks/papers/exact_highorder.py t9-table2 t9-table4 [--order 5] [--table-length 5]
    python benchmarks/papers/exact_highorder.py pos-sample [--orders 3 4 5] [--max-sentences 50]
    ... --json results.json --plots docs/img

* pos: accuracy, seconds per sentence and average states for Algorithm 1 (adaptive), the
  paper's baseline F (Viterbi over the LM's full WFSA: every context state at every
  position, :class:`varorder.exact.FullWFSA`) and the explicit n-th-order Viterbi pruned
  to the TnT candidates (full); each baseline stops when its cumulated time for one order
  (WFSA build included) passes --full-cap seconds, n = 3 .. 9, trained on ptb-wsj-sample
  wsj_0001-0159, evaluated on wsj_0180-0199 (paper Fig. 4a/4b).
* t9-decode: iterations and states to exact decoding per sentence length (paper Fig. 2)
  with ptb-lm LMs, and the n-grams per order of the final q of one length-10 sentence
  against the size of the full model (paper Table 1). Candidates: every same-length
  vocabulary word (the paper's exact decoding); ``--decode-cap 100`` keeps only the 100
  most likely per position (an option: exact for the truncated model only).
* t9-sample: trials and seconds to reach AR-100 >= 20% per batch size (paper Table 3).
* t9-sample-lengths: trials and states to AR-100 >= 20% per length and order, B = 100
  (paper Fig. 3c/3d).
* t9-trace: one sampling run continued to AR-100 >= 60%: running p/q ratio, AR, AR-100
  and accepts per trial (paper Fig. 3a/3b).
* t9-table2: the Viterbi path of q after every refinement of one exact decode, with
  log q and log p (paper Table 2; uncapped candidates unless --decode-cap).
* t9-table4: 1,000 exact samples of one input (B = 100, 100 candidates as the paper's
  sampling), ranked by count, with log p (paper Table 4).
* pos-sample: trials and final q states to reach AR-100 >= 60% per test sentence and
  order, B = 100 (paper Fig. 4c/4d).
Sampling runs (t9-sample*, t9-trace, t9-table4) use 100 candidates per position, as the
paper does for sampling.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from pathlib import Path

import numpy as np

from varorder.exact import decode, sample
from varorder.tasks.pos_highorder import PosTask, evaluate_pos
from varorder.tasks.t9 import T9Task, read_test_sentences

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the shared harness
import harness  # noqa: E402

DATA = harness.DATA


def run_pos(args, corpus: str = "ptb") -> list[dict]:
    path = DATA / "ptb-wsj-sample" / "wsj_sample.pos.tsv.gz"
    ud = DATA / "ud-english-ewt"
    rows = []
    for order in args.orders:
        if corpus == "ptb":
            task = PosTask.from_ptb_sample(path, order=order, split=args.split)
        else:
            task = PosTask.from_ud(ud / "en_ewt-ud-train.conllu.gz", ud / "en_ewt-ud-dev.conllu.gz", order=order)
        task.target(task.test[0].words)  # warm the JIT caches outside the timings
        decode(task.target(task.test[0].words))
        load = os.getloadavg()[0]
        adaptive = evaluate_pos(task, method="adaptive", max_sentences=args.max_sentences)
        wfsa = evaluate_pos(task, method="full-wfsa", time_cap=args.full_cap, max_sentences=args.max_sentences)
        full = evaluate_pos(task, method="full", time_cap=args.full_cap, max_sentences=args.max_sentences)
        split = args.split if corpus == "ptb" else "ud-ewt-dev"
        for r in (adaptive, wfsa, full):
            r["split"] = split
            r["load_average"] = load
            r["full_cap"] = args.full_cap
        for r in (wfsa, full):
            # Same sentences on both sides (a capped baseline decodes a prefix of the list).
            k = r["sentences"]
            same = adaptive["per_sentence_seconds"][:k]
            r["adaptive_seconds_same_sentences"] = float(np.mean(same)) if k else float("nan")
            r["time_ratio_vs_adaptive"] = r["seconds_per_sentence"] / r["adaptive_seconds_same_sentences"] if k else float("nan")
        wfsa["time_ratio_with_build"] = ((wfsa["seconds_per_sentence"] + wfsa["build_seconds"] / max(wfsa["sentences"], 1))
                                         / wfsa["adaptive_seconds_same_sentences"]) if wfsa["sentences"] else float("nan")
        rows.extend([adaptive, wfsa, full])
        print(f"{corpus} n={order} (load {load:.1f})  adaptive: acc {adaptive['accuracy']:.4f}  "
              f"{adaptive['seconds_per_sentence'] * 1e3:7.2f} ms/sent  states {adaptive['avg_states']:6.1f}  "
              f"iterations {adaptive['avg_iterations']:5.1f}\n"
              f"    F (full WFSA, {wfsa['wfsa_states']} context states, build {wfsa['build_seconds']:.2f} s): "
              f"{wfsa['sentences']}/{wfsa['of']} sents  acc {wfsa['accuracy']:.4f}  "
              f"{wfsa['seconds_per_sentence'] * 1e3:8.2f} ms/sent  states {wfsa['avg_states']:10.0f}  "
              f"F/adaptive {wfsa['time_ratio_vs_adaptive']:6.1f}x ({wfsa['time_ratio_with_build']:.1f}x with build)\n"
              f"    pruned full: {full['sentences']}/{full['of']} sents  acc {full['accuracy']:.4f}  "
              f"{full['seconds_per_sentence'] * 1e3:8.2f} ms/sent  states {full['avg_states']:8.1f}  "
              f"pruned/adaptive {full['time_ratio_vs_adaptive']:.2f}x", flush=True)
    return rows


#: candidates per position for sampling (the paper: "we limit the number of latent tokens to 100")
SAMPLING_CANDIDATES = 100


def _t9_task(order: int, max_candidates: int | None = SAMPLING_CANDIDATES) -> T9Task:
    return T9Task.train(DATA / "ptb-lm" / "ptb.train.txt.gz", order=order, max_candidates=max_candidates)


def run_t9_decode(args) -> dict:
    out = {"per_length": [], "table1": None, "decode_cap": args.decode_cap}
    for order in args.orders:
        task = _t9_task(order, args.decode_cap)
        sentences = read_test_sentences(DATA / "ptb-lm" / "ptb.valid.txt.gz", task.lm.vocabulary,
                                        per_length=args.per_length, seed=args.seed)
        typo_rng = np.random.default_rng(args.seed) if args.noisy else None
        for length, group in sentences.items():
            its, states, secs, correct, exact = [], [], [], [], []
            last = None
            for words in group:
                target = task.target(task.observe(words, rng=typo_rng))
                result = decode(target, time_limit=args.time_limit)
                its.append(result.iterations)
                states.append(result.num_states)
                secs.append(result.seconds)
                correct.append(task.words(result.sentence) == words)
                exact.append(result.exact)
                last = (target, result, words)
            row = {"order": order, "length": length, "noisy": bool(args.noisy), "sentences": len(group),
                   "decode_cap": args.decode_cap, "load_average": os.getloadavg()[0],
                   "avg_iterations": float(np.mean(its)),
                   "avg_states": float(np.mean(states)), "avg_seconds": float(np.mean(secs)),
                   "sentence_accuracy": float(np.mean(correct)), "exact": int(sum(exact))}
            out["per_length"].append(row)
            print(f"t9 decode{' (noisy)' if args.noisy else ''} cap={args.decode_cap} n={order} length={length:2d}: iterations {row['avg_iterations']:7.1f}  states "
                  f"{row['avg_states']:7.1f}  {row['avg_seconds']:6.2f} s  exact-match {row['sentence_accuracy']:.2f}  "
                  f"exact (p = q) {row['exact']}/{len(group)}",
                  flush=True)
            if length == 10 and order == max(args.orders) and last is not None:
                target, result, words = last
                full_states = 1.0
                # Full model size for this input: prod over positions of candidate counts
                # raised to the n-gram window, i.e. every n-gram over the candidate lists.
                sizes = [len(s) for s in target.symbols]
                full_ngrams = sum(math.prod(sizes[max(0, i - order + 1): i + 1]) for i in range(len(sizes)))
                full_states = sum(math.prod(sizes[max(0, i - order + 2): i + 1]) for i in range(len(sizes)))
                out["table1"] = {"order": order, "sentence": " ".join(words), "ngrams_per_order": result.ngram_counts,
                                 "total_ngrams": int(sum(result.ngram_counts.values())), "states": result.num_states,
                                 "full_model_ngrams": float(full_ngrams), "full_model_states": float(full_states)}
                print(f"Table 1 (n={order}, '{' '.join(words)}'): q n-grams per order {result.ngram_counts} "
                      f"(total {out['table1']['total_ngrams']}) vs {full_ngrams:.3g} n-grams in the full model", flush=True)
    return out


def run_t9_sample(args) -> list[dict]:
    task = _t9_task(args.order)
    sentences = read_test_sentences(DATA / "ptb-lm" / "ptb.valid.txt.gz", task.lm.vocabulary,
                                    lengths=[args.sample_length], per_length=args.sample_sentences, seed=args.seed)
    group = sentences[args.sample_length]
    rows = []
    for batch in args.batches:
        trials, secs, states, reached = [], [], [], []
        for k, words in enumerate(group):
            target = task.target(task.observe(words))
            result = sample(target, target_ar=0.2, batch=batch, seed=args.seed + k, time_limit=args.time_limit,
                            max_trials=args.max_trials)
            trials.append(result.history.num_trials)
            secs.append(result.seconds)
            states.append(result.num_states)
            reached.append(result.stopped_by == "target_ar")
        row = {"order": args.order, "length": args.sample_length, "batch": batch, "sentences": len(group),
               "avg_trials": float(np.mean(trials)), "avg_seconds": float(np.mean(secs)),
               "avg_states": float(np.mean(states)), "reached": int(sum(reached))}
        rows.append(row)
        print(f"t9 sample n={args.order} length={args.sample_length} B={batch:3d}: trials {row['avg_trials']:8.1f}  "
              f"{row['avg_seconds']:7.2f} s  states {row['avg_states']:7.1f}  reached AR-100>=20% "
              f"{row['reached']}/{len(group)}", flush=True)
    return rows


def run_t9_sample_lengths(args) -> list[dict]:
    """Trials and final states to reach AR-100 >= 20% per sentence length and LM order,
    batch size ``--trace-batch`` (paper Fig. 3c/3d, where B = 100)."""
    rows = []
    for order in args.orders:
        task = _t9_task(order)
        sentences = read_test_sentences(DATA / "ptb-lm" / "ptb.valid.txt.gz", task.lm.vocabulary,
                                        per_length=args.per_length, seed=args.seed)
        for length, group in sentences.items():
            trials, states, secs, reached = [], [], [], []
            for k, words in enumerate(group):
                result = sample(task.target(task.observe(words)), target_ar=0.2, batch=args.trace_batch,
                                seed=args.seed + k, time_limit=args.time_limit, max_trials=args.max_trials)
                trials.append(result.history.num_trials)
                states.append(result.num_states)
                secs.append(result.seconds)
                reached.append(result.stopped_by == "target_ar")
            row = {"order": order, "length": length, "batch": args.trace_batch, "sentences": len(group),
                   "avg_trials": float(np.mean(trials)), "avg_states": float(np.mean(states)),
                   "avg_seconds": float(np.mean(secs)), "reached": int(sum(reached))}
            rows.append(row)
            print(f"t9 sample n={order} length={length:2d} B={args.trace_batch}: trials {row['avg_trials']:7.1f}  "
                  f"states {row['avg_states']:7.1f}  {row['avg_seconds']:6.2f} s  reached {row['reached']}/{len(group)}",
                  flush=True)
    return rows


def run_t9_sample_trace(args) -> dict:
    """One sampling run kept going to AR-100 >= 60% (paper Fig. 3a/3b): per trial the
    ratio p/q and whether it was accepted."""
    task = _t9_task(args.order)
    sentences = read_test_sentences(DATA / "ptb-lm" / "ptb.valid.txt.gz", task.lm.vocabulary,
                                    lengths=[args.sample_length], per_length=1, seed=args.seed)
    words = sentences[args.sample_length][0]
    result = sample(task.target(task.observe(words)), target_ar=0.6, batch=args.trace_batch, seed=args.seed,
                    time_limit=args.time_limit, max_trials=args.max_trials)
    history = result.history
    print(f"t9 sample trace n={args.order} B={args.trace_batch} '{' '.join(words)}': {history.num_trials} trials, "
          f"{history.num_accepted} accepted, AR {history.num_accepted / history.num_trials:.3f}, "
          f"AR-100 {result.ar100:.2f}, {result.seconds:.1f} s, stopped by {result.stopped_by}", flush=True)
    return {"order": args.order, "batch": args.trace_batch, "sentence": " ".join(words),
            "log_ratio": (np.asarray(history.log_p) - np.asarray(history.log_q)).tolist(),
            "accepted": history.accepted, "seconds": result.seconds, "stopped_by": result.stopped_by}


def _table_sentence(args, task):
    group = read_test_sentences(DATA / "ptb-lm" / "ptb.valid.txt.gz", task.lm.vocabulary,
                                lengths=[args.table_length], per_length=1, seed=args.seed)[args.table_length]
    return group[0]


def run_t9_table2(args) -> dict:
    """Paper Table 2: the Viterbi path of q_t and its log q, log p after each refinement."""
    from varorder.exact import QAutomaton

    task = _t9_task(args.order, args.decode_cap)
    words = _table_sentence(args, task)
    observation = task.observe(words)
    target = task.target(observation)
    q = QAutomaton(target)
    rows = []
    start = time.perf_counter()
    while True:
        step = decode(target, max_iterations=1, automaton=q)
        rows.append({"iteration": len(rows) + 1, "path": " ".join(task.words(step.sentence)),
                     "log_q": step.log_q, "log_p": step.log_p})
        if step.exact or time.perf_counter() - start > args.time_limit:
            break
    every = max(1, len(rows) // 4)
    print(f"Table 2 (n={args.order}, cap={args.decode_cap}) input {' '.join(observation)}; oracle: {' '.join(words)}; "
          + (f"exact after {len(rows)} iterations" if rows[-1]["log_q"] == rows[-1]["log_p"]
             else f"NOT exact: stopped by the time limit after {len(rows)} iterations"))
    for r in rows:
        if r["iteration"] == 1 or r["iteration"] % every == 0 or r is rows[-1]:
            print(f"  q{r['iteration']:<5} {r['path']:<60} {r['log_q']:8.2f} {r['log_p']:8.2f}")
    return {"order": args.order, "decode_cap": args.decode_cap, "input": " ".join(observation),
            "oracle": " ".join(words), "iterations": len(rows), "exact": rows[-1]["log_q"] == rows[-1]["log_p"],
            "seconds": time.perf_counter() - start, "rows": rows}


def run_t9_table4(args) -> dict:
    """Paper Table 4: 1,000 exact samples of one input, ranked by count."""
    task = _t9_task(args.order)
    words = _table_sentence(args, task)
    observation = task.observe(words)
    target = task.target(observation)
    result = sample(target, n_samples=args.table_samples, batch=args.trace_batch, seed=args.seed,
                    time_limit=args.time_limit, max_trials=10 * args.max_trials)
    counts = {}
    for sent, lp in zip(result.samples, result.log_p):
        key = " ".join(task.words(sent))
        counts[key] = (counts.get(key, (0, lp))[0] + 1, lp)
    ranked = sorted(counts.items(), key=lambda kv: -kv[1][0])
    best = decode(target)
    print(f"Table 4 (n={args.order}, B={args.trace_batch}) input {' '.join(observation)}; oracle: {' '.join(words)}; "
          f"best: {' '.join(task.words(best.sentence))}; {len(result.samples)} samples from "
          f"{result.history.num_trials} trials, {len(counts)} distinct, "
          f"{sum(1 for c, _ in counts.values() if c == 1)} sampled once, {result.seconds:.1f} s")
    for text, (count, lp) in ranked[:5]:
        print(f"  {text:<60} {count:5d} {lp:8.2f}")
    return {"order": args.order, "batch": args.trace_batch, "input": " ".join(observation), "oracle": " ".join(words),
            "best": " ".join(task.words(best.sentence)), "best_log_p": best.log_p,
            "samples": len(result.samples), "trials": result.history.num_trials, "distinct": len(counts),
            "once": sum(1 for c, _ in counts.values() if c == 1), "seconds": result.seconds,
            "stopped_by": result.stopped_by,
            "ranked": [{"sentence": t, "count": c, "log_p": lp} for t, (c, lp) in ranked[:20]]}


def run_pos_sample(args) -> list[dict]:
    """Paper Fig. 4c/4d: trials and final q states to AR-100 >= 60% per test sentence, B = 100."""
    path = DATA / "ptb-wsj-sample" / "wsj_sample.pos.tsv.gz"
    rows = []
    for order in args.orders:
        task = PosTask.from_ptb_sample(path, order=order, split=args.split)
        sentences = task.test[: args.max_sentences] if args.max_sentences else task.test
        load = os.getloadavg()[0]
        trials, states, secs, reached = [], [], [], []
        for k, sent in enumerate(sentences):
            result = sample(task.target(sent.words), target_ar=0.6, batch=args.trace_batch, seed=args.seed + k,
                            time_limit=args.time_limit, max_trials=args.max_trials)
            trials.append(result.history.num_trials)
            states.append(result.num_states)
            secs.append(result.seconds)
            reached.append(result.stopped_by == "target_ar")
        row = {"order": order, "split": args.split, "batch": args.trace_batch, "sentences": len(sentences),
               "avg_trials": float(np.mean(trials)), "avg_states": float(np.mean(states)),
               "avg_seconds": float(np.mean(secs)), "reached": int(sum(reached)), "load_average": load}
        rows.append(row)
        print(f"pos sample n={order}: {len(sentences)} sentences, trials {row['avg_trials']:7.1f}  states "
              f"{row['avg_states']:7.1f}  {row['avg_seconds']:6.2f} s  reached AR-100>=60% "
              f"{row['reached']}/{len(sentences)} (load {load:.1f})", flush=True)
    return rows


def plots(results: dict, folder: str) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    os.makedirs(folder, exist_ok=True)
    written = []

    def save(fig, name):
        fig.tight_layout()
        path = os.path.join(folder, name)
        fig.savefig(path, dpi=110)
        plt.close(fig)
        written.append(path)

    def per_length_by_order(rows, y_key, y_title, name):
        """Two panels over input length, one line per LM order: ``y_key`` and final q states."""
        fig, axes = plt.subplots(1, 2, figsize=(10, 3.6))
        for order in sorted({r["order"] for r in rows}):
            sel = [r for r in rows if r["order"] == order]
            axes[0].plot([r["length"] for r in sel], [r[y_key] for r in sel], "o-", label=f"{order}-gram")
            axes[1].plot([r["length"] for r in sel], [r["avg_states"] for r in sel], "o-", label=f"{order}-gram")
        axes[0].set_title(y_title)
        axes[1].set_title("states in the final q")
        for ax in axes:
            ax.set_xlabel("input length")
            ax.legend()
        save(fig, name)

    for key in ("pos", "pos_ud"):
        if key not in results:
            continue
        rows = results[key]
        fig, axes = plt.subplots(1, 3, figsize=(13, 3.6))
        names = {"adaptive": "adaptive (ARS)", "full-wfsa": "F: full WFSA", "full": "full, pruned to candidates"}
        for method, marker in (("adaptive", "o-"), ("full-wfsa", "^-."), ("full", "s--")):
            sel = [r for r in rows if r["method"] == method and r["sentences"]]
            orders = [r["order"] for r in sel]
            axes[0].plot(orders, [100 * r["accuracy"] for r in sel], marker, label=names[method])
            axes[1].semilogy(orders, [1e3 * r["seconds_per_sentence"] for r in sel], marker, label=names[method])
            axes[2].semilogy(orders, [r["avg_states"] for r in sel], marker, label=names[method])
        for ax, title in zip(axes, ("accuracy % (decoded sentences)", "ms per sentence", "avg states (unrolled)")):
            ax.set_xlabel("n-gram order")
            ax.set_title(title)
            ax.legend()
        save(fig, f"exact_{key}.png")
    if "pos_sample" in results:
        rows = results["pos_sample"]
        fig, axes = plt.subplots(1, 2, figsize=(10, 3.6))
        axes[0].plot([r["order"] for r in rows], [r["avg_trials"] for r in rows], "o-")
        axes[0].set_title("trials to AR-100 >= 60% (Fig. 4c)")
        axes[1].plot([r["order"] for r in rows], [r["avg_states"] for r in rows], "o-")
        axes[1].set_title("states in the final q (Fig. 4d)")
        for ax in axes:
            ax.set_xlabel("n-gram order")
        save(fig, "exact_pos_sample.png")
    if "t9_decode" in results:
        per_length_by_order(results["t9_decode"]["per_length"], "avg_iterations", "iterations to exact decode",
                            "exact_t9_decode.png")
    if "t9_decode_noisy" in results:
        per_length_by_order(results["t9_decode_noisy"]["per_length"], "avg_iterations",
                            "iterations to exact decode (typed with eq. 9 errors)", "exact_t9_decode_noisy.png")
    if "t9_sample_lengths" in results:
        rows = results["t9_sample_lengths"]
        per_length_by_order(rows, "avg_trials", f"trials to AR-100 >= 20% (B = {rows[0]['batch']})",
                            "exact_t9_sample_lengths.png")
    if "t9_sample" in results:
        rows = results["t9_sample"]
        fig, axes = plt.subplots(1, 2, figsize=(10, 3.6))
        batches = [r["batch"] for r in rows]
        axes[0].plot(batches, [r["avg_seconds"] for r in rows], "o-")
        axes[0].set_title("seconds to AR-100 >= 20%")
        axes[1].plot(batches, [r["avg_trials"] for r in rows], "o-")
        axes[1].set_title("trials to AR-100 >= 20%")
        for ax in axes:
            ax.set_xlabel("batch size B")
            ax.set_xscale("log")
        save(fig, "exact_t9_sample.png")
    if "t9_sample_trace" in results:
        trace = results["t9_sample_trace"]
        ratio = np.exp(np.asarray(trace["log_ratio"]))
        accepted = np.asarray(trace["accepted"], dtype=float)
        trials = np.arange(1, len(ratio) + 1)
        window = lambda x, w: np.asarray([x[max(0, i - w + 1): i + 1].mean() for i in range(len(x))])
        fig, axes = plt.subplots(1, 2, figsize=(10, 3.6))
        axes[0].plot(trials, window(ratio, 10))
        axes[0].set_yscale("log")
        axes[0].set_title("p/q, running average over the last 10 trials")
        axes[1].plot(trials, 100 * np.cumsum(accepted) / trials, label="AR (cumulative)")
        axes[1].plot(trials, 100 * window(accepted, 100), label="AR-100")
        axes[1].set_ylabel("accept ratio %")
        twin = axes[1].twinx()
        twin.plot(trials, np.cumsum(accepted), "k--", label="# accepts")
        twin.set_ylabel("# accepts")
        axes[1].legend(loc="upper left")
        for ax in axes:
            ax.set_xlabel("trials")
        fig.suptitle(f"{trace['order']}-gram, B = {trace['batch']}: {trace['sentence']}", fontsize=9)
        save(fig, "exact_t9_sample_trace.png")
    return written


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("parts", nargs="+", choices=["pos", "pos-ud", "t9-decode", "t9-sample", "t9-sample-lengths",
                                                     "t9-trace", "t9-table2", "t9-table4", "pos-sample"])
    parser.add_argument("--orders", type=int, nargs="+", default=None)
    parser.add_argument("--split", default="test", choices=["dev", "test"])
    parser.add_argument("--max-sentences", type=int, default=None)
    parser.add_argument("--full-cap", type=float, default=120.0, help="seconds of full Viterbi per order")
    parser.add_argument("--per-length", type=int, default=3)
    parser.add_argument("--order", type=int, default=4, help="t9-sample LM order")
    parser.add_argument("--batches", type=int, nargs="+", default=[1, 10, 20, 50, 100])
    parser.add_argument("--sample-length", type=int, default=10)
    parser.add_argument("--sample-sentences", type=int, default=2)
    parser.add_argument("--noisy", action="store_true",
                        help="t9-decode: type each sentence with errors drawn from the eq. 9 noise model")
    parser.add_argument("--trace-batch", type=int, default=100, help="t9-trace batch size (the paper's default)")
    parser.add_argument("--max-trials", type=int, default=50_000)
    parser.add_argument("--time-limit", type=float, default=300.0, help="seconds per decode / sampling run")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--decode-cap", type=int, default=None,
                        help="t9-decode / t9-table2: candidates per position (default: all same-length words)")
    parser.add_argument("--table-length", type=int, default=5, help="t9-table2/4: input sentence length")
    parser.add_argument("--table-samples", type=int, default=1000, help="t9-table4: exact samples to draw")
    parser.add_argument("--json", default=None)
    parser.add_argument("--plots", default=None, help="folder for PNG plots")
    args = parser.parse_args(argv)
    if not DATA.exists():
        print(f"{DATA} is absent: the benchmark needs the shared data", file=sys.stderr)
        return 1
    results = {}
    began = time.perf_counter()
    if "pos" in args.parts:
        args_pos = argparse.Namespace(**vars(args))
        args_pos.orders = args.orders or [3, 4, 5, 6, 7, 8, 9]
        results["pos"] = run_pos(args_pos)
    if "pos-ud" in args.parts:
        args_ud = argparse.Namespace(**vars(args))
        args_ud.orders = args.orders or [3, 5, 7]
        results["pos_ud"] = run_pos(args_ud, corpus="ud")
    if "t9-decode" in args.parts:
        args_t9 = argparse.Namespace(**vars(args))
        args_t9.orders = args.orders or [3, 4, 5]
        key = "t9_decode_noisy" if args.noisy else "t9_decode"
        results[key if args.decode_cap is None else f"{key}_cap{args.decode_cap}"] = run_t9_decode(args_t9)
    if "t9-sample" in args.parts:
        results["t9_sample"] = run_t9_sample(args)
    if "t9-sample-lengths" in args.parts:
        args_len = argparse.Namespace(**vars(args))
        args_len.orders = args.orders or [3, 4, 5]
        results["t9_sample_lengths"] = run_t9_sample_lengths(args_len)
    if "t9-trace" in args.parts:
        results["t9_sample_trace"] = run_t9_sample_trace(args)
    if "t9-table2" in args.parts:
        results["t9_table2"] = run_t9_table2(args)
    if "t9-table4" in args.parts:
        results["t9_table4"] = run_t9_table4(args)
    if "pos-sample" in args.parts:
        args_ps = argparse.Namespace(**vars(args))
        args_ps.orders = args.orders or [3, 4, 5, 6, 7]
        results["pos_sample"] = run_pos_sample(args_ps)
    print(f"total {time.perf_counter() - began:.1f} s")
    if args.json:
        previous = {}
        if os.path.exists(args.json):
            with open(args.json) as handle:
                previous = json.load(handle)
        previous.update(results)
        tmp = args.json + ".tmp"
        with open(tmp, "w") as handle:
            json.dump(previous, handle, indent=1)
        os.replace(tmp, args.json)
        results = previous
    if args.plots:
        for path in plots(results, args.plots):
            print("wrote", path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
