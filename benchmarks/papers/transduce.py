"""Learning with indirect supervision on CMUdict (Steinhardt & Liang 2015, §6, Fig. 4 and Fig. 6 speech panel).

Trains the alignment transducer (phonemes → spelling, alignment unobserved) with the five
methods of §6 — select-by-model, select-by-target, hybrid, forced decoding, RCMS — for
``--passes`` passes over a random ``--train-size`` words of the CMUdict train split, each
with ``--perms`` random orders of the data (seeds), and evaluates CER and exact match on a
random ``--dev-size`` words of the dev split (and on the first ``--train-eval`` training
words) after every pass. The CMUdict test split is held back.

    PYTHONPATH=src python benchmarks/papers/transduce.py run --out results/transduce --workers 16
    PYTHONPATH=src python benchmarks/papers/transduce.py plot results/transduce --figures docs/figures/transduce

``run`` writes one JSON per (method, permutation) into ``--out`` as it finishes (so a
cut-off run keeps what it finished); ``plot`` draws Fig. 4 (a: CER of every method per
pass, medians over permutations with min–max bands; b: CER of forced decoding and RCMS,
every permutation and the median; c: exact match, same) and Fig. 6's speech panel (RCMS
mass-weighted average context length vs updates), and prints the markdown table.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

import numpy as np

METHOD_NAMES = {"model": "select-by-model", "target": "select-by-target", "hybrid": "hybrid",
                "forced": "forced decoding", "rcms": "RCMS"}


def load_split(data_dir, train_size, dev_size, seed=0, dev_as_train_size=None):
    """Random train and dev words (seed ``seed``). The dev draw follows the train draw in one
    stream, so it depends on the train size; ``dev_as_train_size`` draws the dev words the split
    with that many training words would (the same dev words at every training size)."""
    from varorder.io.cmudict import read_cmudict

    X, Y = read_cmudict(Path(data_dir) / "cmudict.train.dict.gz")
    Xd, Yd = read_cmudict(Path(data_dir) / "cmudict.dev.dict.gz")
    rng = np.random.default_rng(seed)
    tr = rng.choice(len(X), train_size, replace=False)
    if dev_as_train_size is not None and dev_as_train_size != train_size:
        rng = np.random.default_rng(seed)
        rng.choice(len(X), dev_as_train_size, replace=False)
    dv = rng.choice(len(Xd), dev_size, replace=False)
    return [X[i] for i in tr], [Y[i] for i in tr], [Xd[i] for i in dv], [Yd[i] for i in dv]


def run_job(method, perm, args):
    os.environ.setdefault("NUMBA_NUM_THREADS", "1")
    from varorder.eval.metrics import character_error_rate, exact_match
    from varorder.transduce.model import AlignmentTransducer, TransducerOptions

    X, Y, Xd, Yd = load_split(args.data_dir, args.train_size, args.dev_size, args.split_seed, args.dev_as_train_size)
    Xe, Ye = X[:args.train_eval], Y[:args.train_eval]

    settings = {"method": method, "perm": perm, "train_size": len(X), "dev_size": len(Xd), "num_contexts": args.size,
                "order": args.order, "edge_unigrams": args.unigrams, "backoff": args.backoff,
                "hash_bits": args.hash_bits, "truncation": args.truncation,
                "dev_as_train_size": args.dev_as_train_size or args.train_size}
    # clock[0]: end of the last evaluation; clock[1]: training seconds of this pass before it;
    # cpu_clock: the same in CPU seconds of this process (a paused or shared run's wall time overstates)
    passes, checkpoints, clock, cpu_clock = [], [], [time.perf_counter(), 0.0], [time.process_time(), 0.0]
    state_path = Path(args.out) / f"{method}-{perm}.state.npz" if args.save_state else None
    if args.save_state and args.resume and state_path.exists():
        # go on after the saved pass: the rows of the passes it holds come from the partial JSON
        from varorder.models.persist import load_model
        done = load_model(state_path, "AlignmentTransducerTrainingState", ())[1]["epochs_done"]
        previous = json.loads((Path(args.out) / f"{method}-{perm}.partial.json").read_text())
        passes[:] = previous["history"][:done]
        checkpoints[:] = [c for c in previous["checkpoints"] if c["examples"] < done * args.train_size]

    def write_partial(model):
        write_json(Path(args.out) / f"{method}-{perm}.partial.json",
                   {**settings, "complete": False, "imputation_seconds": model.imputation_seconds_, "history": passes,
                    "checkpoints": checkpoints, "context_length_trace": model.context_length_trace_})

    def checkpoint(model, examples):
        """Dev scores inside a pass (a learning curve over the examples seen so far)."""
        start, cpu_start = time.perf_counter(), time.process_time()
        dev = model.predict(Xd)
        seconds = time.perf_counter() - start
        clock[1] += start - clock[0]
        cpu_clock[1] += cpu_start - cpu_clock[0]
        row = {"examples": examples, "pass_train_seconds": clock[1], "pass_train_cpu_seconds": cpu_clock[1],
               "dev_cer": character_error_rate(dev, Yd),
               "dev_exact": exact_match(dev, Yd), "dev_empty": sum(p == "" for p in dev) / len(dev),
               "predict_words_per_s": len(Xd) / seconds, "nonzero_weights": int(np.count_nonzero(model.weights_))}
        checkpoints.append(row)
        print(f"{method} perm {perm} after {examples} examples: dev CER {row['dev_cer']:.3f} exact {row['dev_exact']:.3f}",
              file=sys.stderr, flush=True)
        write_partial(model)
        clock[0], cpu_clock[0] = time.perf_counter(), time.process_time()

    def evaluate(model, epoch):
        start, cpu_start = time.perf_counter(), time.process_time()
        dev = model.predict(Xd)
        seconds = time.perf_counter() - start
        row = {"dev_cer": character_error_rate(dev, Yd), "dev_exact": exact_match(dev, Yd),
               "dev_empty": sum(p == "" for p in dev) / len(dev), "predict_words_per_s": len(Xd) / seconds,
               "dev_examples": [f"{Yd[k]}->{dev[k]}" for k in range(5)]}
        if Xe:
            tr = model.predict(Xe)
            row.update(train_cer=character_error_rate(tr, Ye), train_exact=exact_match(tr, Ye))
        print(f"{method} perm {perm} pass {epoch}: dev CER {row['dev_cer']:.3f} exact {row['dev_exact']:.3f}",
              file=sys.stderr, flush=True)
        # a cut-off run keeps its finished passes: the history so far, this pass's training time
        # measured here (fit adds its own row after the callback returns)
        row["cpu_seconds"] = cpu_clock[1] + cpu_start - cpu_clock[0]
        passes.append({"epoch": epoch, "seconds": clock[1] + start - clock[0], **row,
                       "nonzero_weights": int(np.count_nonzero(model.weights_))})
        write_partial(model)
        clock[0], clock[1] = time.perf_counter(), 0.0
        cpu_clock[0], cpu_clock[1] = time.process_time(), 0.0
        return row

    model = AlignmentTransducer(method=method, num_contexts=args.size, order=args.order, epochs=args.passes,
                                hash_bits=args.hash_bits, edge_unigrams=args.unigrams, backoff=args.backoff,
                                seed=perm, options=TransducerOptions(truncation=args.truncation,
                                                                     bigram_epochs=args.bigram_epochs,
                                                                     track_every=args.track_every))
    start = time.perf_counter()
    alignments = imputation_seconds = None
    if method == "forced" and args.share_imputation:
        # one bigram imputation per training set, shared by the permutations (it is computed
        # once "at the beginning" in the paper; the permutation orders the 5-gram training)
        alignments, imputation_seconds = shared_imputation(args, X, Y)
    clock[0], cpu_clock[0] = time.perf_counter(), time.process_time()
    model.fit(X, Y, callback=evaluate, alignments=alignments, checkpoint=checkpoint, checkpoint_every=args.eval_every,
              state_path=state_path, resume=args.resume)
    if imputation_seconds is not None:
        model.imputation_seconds_ = imputation_seconds
    result = {**settings, "imputation_seconds": model.imputation_seconds_, "total_seconds": time.perf_counter() - start,
              "history": model.history_, "checkpoints": checkpoints, "context_length_trace": model.context_length_trace_}
    write_json(Path(args.out) / f"{method}-{perm}.json", result)
    (Path(args.out) / f"{method}-{perm}.partial.json").unlink(missing_ok=True)
    return method, perm


def write_json(path, value):
    from varorder.io._text import atomic_write_text

    with atomic_write_text(path) as handle:
        json.dump(value, handle, indent=1)


def read_imputation(cache, num_pairs):
    """The cached (alignments, seconds), or None when the file is absent or not a complete cache for
    ``num_pairs`` pairs (a reader never sees a half-written file: writes are atomic renames; this also
    survives a damaged or foreign file by recomputing)."""
    from varorder.io._text import open_text

    try:
        with open_text(cache) as handle:
            data = json.load(handle)
        alignments, seconds = data["alignments"], float(data["seconds"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if not isinstance(alignments, list) or len(alignments) != num_pairs:
        return None
    return alignments, seconds


def shared_imputation(args, X, Y):
    """Forced decoding's bigram imputation for this training set, computed once and cached in ``--out``.

    Concurrent jobs may both miss the cache and both compute it (the same numbers, seed 0);
    each publishes it by an atomic rename, so readers see a whole file or none.
    """
    from varorder.transduce.model import AlignmentTransducer, TransducerOptions

    cache = Path(args.out) / f"imputed-{args.split_seed}-{args.train_size}.json"
    cached = read_imputation(cache, len(X))
    if cached is not None:
        return cached
    imputer = AlignmentTransducer(method="forced", order=args.order, seed=0,
                                  options=TransducerOptions(bigram_epochs=args.bigram_epochs))
    t0 = time.perf_counter()
    alignments = imputer.impute_alignments(X, Y)
    seconds = time.perf_counter() - t0
    write_json(cache, {"alignments": alignments, "seconds": seconds})
    return alignments, seconds


def cmd_run(args):
    Path(args.out).mkdir(parents=True, exist_ok=True)
    jobs = [(m, p) for p in range(args.first_perm, args.first_perm + args.perms) for m in args.methods.split(",")]
    jobs = [j for j in jobs if not (Path(args.out) / f"{j[0]}-{j[1]}.json").exists()]
    with ProcessPoolExecutor(args.workers) as pool:
        futures = [pool.submit(run_job, m, p, args) for m, p in jobs]
        for fut in as_completed(futures):
            print("done", fut.result(), file=sys.stderr, flush=True)


def _load_results(folder, partial=False):
    results = {}
    for path in sorted(Path(folder).glob("*.json")):
        if path.name.startswith("imputed-") or (path.name.endswith(".partial.json") and not partial):
            continue
        if path.name.endswith(".partial.json") and path.with_name(path.name.replace(".partial", "")).exists():
            continue
        r = json.loads(path.read_text())
        results.setdefault(r["method"], []).append(r)
    return results


def cmd_plot(args):
    from varorder.eval.plots import _pyplot, _save

    results = _load_results(args.results, args.partial)
    plt = _pyplot()
    fig_dir = Path(args.figures)
    fig_dir.mkdir(parents=True, exist_ok=True)
    order = [m for m in ("model", "target", "hybrid", "forced", "rcms") if m in results]

    def curves(method, key):
        """(runs, passes) with NaN after a cut-off run's last finished pass."""
        passes = max(len(r["history"]) for r in results[method])
        return np.array([[row[key] for row in r["history"]] + [np.nan] * (passes - len(r["history"]))
                         for r in results[method]])

    fig, axes = plt.subplots(1, 3, figsize=(13, 3.8))
    for m in order:
        c = curves(m, "dev_cer")
        x = np.arange(1, c.shape[1] + 1)
        axes[0].plot(x, np.nanmedian(c, 0), marker="o", label=METHOD_NAMES[m])
        axes[0].fill_between(x, np.nanmin(c, 0), np.nanmax(c, 0), alpha=0.15)
    axes[0].set(title="(a) dev CER, all methods", xlabel="pass", ylabel="CER (median, min–max band)")
    axes[0].legend(fontsize=8)
    for ax, key, title in ((axes[1], "dev_cer", "(b) dev CER"), (axes[2], "dev_exact", "(c) dev exact match")):
        for m, colour in (("forced", "tab:red"), ("rcms", "tab:purple")):
            if m not in results:
                continue
            c = curves(m, key)
            x = np.arange(1, c.shape[1] + 1)
            for row in c:
                ax.plot(x, row, color=colour, alpha=0.3, lw=0.8)
            ax.plot(x, np.nanmedian(c, 0), color=colour, lw=2, label=f"{METHOD_NAMES[m]} (median)")
        ax.set(title=title + ": forced vs RCMS", xlabel="pass")
        ax.legend(fontsize=8)
    fig.tight_layout()
    _save(fig, fig_dir / f"fig4_cer_exact{args.suffix}.png")

    if "rcms" in results:
        fig, ax = plt.subplots(figsize=(5, 3.5))
        for r in results["rcms"]:
            trace = np.array(r["context_length_trace"])
            if trace.size:
                ax.plot(trace[:, 0], trace[:, 1], alpha=0.7, label=f"perm {r['perm']}")
        ax.set(title="Speech-panel analogue: RCMS context length", xlabel="training examples (updates)",
               ylabel="avg. context length (qⁱ mass)")
        ax.legend(fontsize=7)
        fig.tight_layout()
        _save(fig, fig_dir / f"fig6_context_length{args.suffix}.png")

    if any(r.get("checkpoints") for rs in results.values() for r in rs):
        # learning curve inside long passes: dev scores after every --eval-every examples and at pass ends
        fig, axes = plt.subplots(1, 2, figsize=(9, 3.6))
        for m, colour in (("forced", "tab:red"), ("rcms", "tab:purple"), ("hybrid", "tab:green"),
                          ("target", "tab:orange"), ("model", "tab:blue")):
            for r in results.get(m, []):
                points = sorted([(c["examples"], c["dev_cer"], c["dev_exact"]) for c in r.get("checkpoints", [])]
                                + [(row["epoch"] * r["train_size"], row["dev_cer"], row["dev_exact"])
                                   for row in r["history"]])
                if not points:
                    continue
                xs, cer, exact = np.array(points).T
                label = f"{METHOD_NAMES[m]} (perm {r['perm']})"
                axes[0].plot(xs, cer, marker="o", color=colour, label=label)
                axes[1].plot(xs, exact, marker="o", color=colour, label=label)
        for ax, title in ((axes[0], "dev CER"), (axes[1], "dev exact match")):
            ax.set(title=f"{title} vs training examples seen", xlabel="examples (updates)")
            ax.legend(fontsize=7)
        fig.tight_layout()
        _save(fig, fig_dir / f"learning_curve{args.suffix}.png")

    print("| method | perms | dev CER per pass (median) | dev exact, last pass (median [min, max]) "
          "| train CER / exact, last pass (median) | empty dev outputs, last pass | no-signal examples, last pass "
          "| non-zero weights, last pass (median) | train s/pass (median) | predict words/s |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for m in order:
        rs = results[m]
        cer = curves(m, "dev_cer")
        ex = curves(m, "dev_exact")
        runs_at = (~np.isnan(cer)).sum(0)
        per_pass = " → ".join(f"{v:.3f}" + (f" ({n} runs)" if n < len(rs) else "")
                              for v, n in zip(np.nanmedian(cer, 0), runs_at))
        last = ~np.isnan(ex[:, -1])
        runs = rs
        rs = [r for r, done in zip(rs, last) if done]  # the last-pass columns: runs that reached it
        tcer = np.median([r["history"][-1].get("train_cer", np.nan) for r in rs])
        tex = np.median([r["history"][-1].get("train_exact", np.nan) for r in rs])
        empty = np.median([r["history"][-1]["dev_empty"] for r in rs])
        nosig = np.median([r["history"][-1].get("no_signal", np.nan) for r in rs])
        nonzero = [r["history"][-1]["nonzero_weights"] for r in rs if "nonzero_weights" in r["history"][-1]]
        nonzero = (f"{np.median(nonzero) / 1e6:.2f} M of {2 ** rs[0].get('hash_bits', 22) / 1e6:.2f} M"
                   + (f" ({len(nonzero)} runs)" if len(nonzero) < len(rs) else "")) if nonzero else "not recorded"
        secs = np.median([row["seconds"] for r in runs for row in r["history"]])
        wps = np.median([row["predict_words_per_s"] for r in runs for row in r["history"]])
        extra = f" (+{np.median([r['imputation_seconds'] for r in rs]):.0f} s imputation)" if m == "forced" else ""
        print(f"| {METHOD_NAMES[m]} | {len(runs)} | {per_pass} | {np.median(ex[last, -1]):.3f} "
              f"[{ex[last, -1].min():.3f}, {ex[last, -1].max():.3f}] | {tcer:.3f} / {tex:.3f} | {empty:.3f} | {nosig:.0f} "
              f"| {nonzero} | {secs:.0f}{extra} | {wps:.1f} |")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run")
    run.add_argument("--data-dir", default="../shared/data/cmudict")
    run.add_argument("--out", required=True)
    run.add_argument("--methods", default="rcms,forced,hybrid,target,model")
    run.add_argument("--train-size", type=int, default=746)
    run.add_argument("--dev-size", type=int, default=253)
    run.add_argument("--train-eval", type=int, default=253, help="training words scored after each pass")
    run.add_argument("--passes", type=int, default=5)
    run.add_argument("--perms", type=int, default=5)
    run.add_argument("--first-perm", type=int, default=0)
    run.add_argument("--size", type=int, default=20, help="B: contexts per z_i / beam size")
    run.add_argument("--order", type=int, default=5)
    run.add_argument("--hash-bits", type=int, default=22, help="weight table of 2^bits entries")
    run.add_argument("--truncation", type=float, default=0.0,
                     help="randomized truncation threshold of small gradient coordinates (App. C; 0 = off)")
    run.add_argument("--unigrams", action="store_true", help="add (phoneme, letter) edge unigrams (extension)")
    run.add_argument("--backoff", action="store_true", help="add every lower-order n-gram (extension)")
    run.add_argument("--bigram-epochs", type=int, default=1)
    run.add_argument("--track-every", type=int, default=100)
    run.add_argument("--split-seed", type=int, default=0)
    run.add_argument("--dev-as-train-size", type=int, default=None,
                     help="draw the dev words as the split with this many training words does (same dev at every size)")
    run.add_argument("--eval-every", type=int, default=0,
                     help="also score dev after every N examples inside a pass (0: only after each pass)")
    run.add_argument("--workers", type=int, default=1)
    run.add_argument("--save-state", action="store_true",
                     help="write the training state after every pass to <method>-<perm>.state.npz in --out")
    run.add_argument("--resume", action="store_true",
                     help="with --save-state: go on from the saved state and the partial JSON of a cut-off run")
    run.add_argument("--share-imputation", action="store_true",
                     help="forced decoding: impute once (seed 0) and reuse for every permutation")
    run.set_defaults(func=cmd_run)
    plot = sub.add_parser("plot")
    plot.add_argument("results")
    plot.add_argument("--figures", default="docs/figures/transduce")
    plot.add_argument("--suffix", default="", help="appended to the figure file names (one feature set per folder)")
    plot.add_argument("--partial", action="store_true",
                      help="also read cut-off runs (their finished passes; curves are cut to the shortest run)")
    plot.set_defaults(func=cmd_plot)
    args = parser.parse_args(argv)
    args.func(args)


if __name__ == "__main__":
    main()
