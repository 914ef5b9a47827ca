"""Decipherment by EM (Steinhardt & Liang 2015, §6, Fig. 5–6): exact / beam / RCMS E-steps.

    python benchmarks/papers/decipher.py prepare  [--root out/decipher]          # seeded task folders (strict, -unk)
    python benchmarks/papers/decipher.py curves   --corpus wap --configs fig5    # learning curves (JSON per run)
    python benchmarks/papers/decipher.py timing   --corpus wap --rounds 3        # interleaved E-step timing
    python benchmarks/papers/decipher.py plot     [--figures docs/figures/decipher]       # PNGs + markdown table

Configurations (order, inference, size): Fig. 5 left = 1st-order exact / beam-60 / RCMS-60 and
2nd-order beam-60 / RCMS-60; Fig. 5 right = 2nd-order beam and RCMS at 10, 20, 30, 60.
``curves`` records, per EM iteration, mapping accuracy, log-likelihood, seconds (wall and
CPU) and the mass-weighted mean context length (Fig. 6); the load average goes beside them.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

from varorder.decipher import Decipherer, fit_transitions, load, prepare, read_corpus_sentences, save
from varorder.decipher.model import DecipherHMM, split_shards

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the shared harness
import harness  # noqa: E402

DATA = harness.DATA
CORPORA = {
    "wap": [DATA / "warandpeace" / "wap.train.txt.gz", DATA / "warandpeace" / "wap.valid.txt.gz"],
    "brown": [DATA / "brown" / "brown.tar.gz"],
}
# Tasks: the strict (paper's in-list) preparation with every in-list sentence enciphered,
# and the lenient extension (``-unk``): 2,000 cipher sentences with at most one
# out-of-list token (<= 25 % of the sentence), that token the hidden word <unk>.
STRICT = {"num_cipher": 1750}
LENIENT = {"num_cipher": 2000, "max_unk_tokens": 1, "max_unk_share": 0.25}
TASKS = {name: (name, STRICT) for name in CORPORA} | {f"{name}-unk": (name, LENIENT) for name in CORPORA}
LEFT = [(1, "exact", 60), (1, "beam", 60), (1, "rcms", 60), (2, "beam", 60), (2, "rcms", 60)]
RIGHT = [(2, inf, size) for size in (10, 20, 30) for inf in ("beam", "rcms")]
CONFIGS = {"fig5": LEFT + RIGHT, "left": LEFT, "right": RIGHT}


def _name(order, inference, size):
    return f"order{order}-{inference}" + ("" if inference == "exact" else f"-{size}")


def _label(order, inference, size):
    return f"{'1st' if order == 1 else '2nd'}-order " + (inference if inference == "exact" else f"{inference} {size}")


def cmd_prepare(args):
    for task, (corpus, settings) in TASKS.items():
        folder = Path(args.root) / task
        if (folder / "meta.json").exists():
            print(f"{folder}: exists")
            continue
        paths = CORPORA[corpus]
        sentences = [s for p in paths for s in read_corpus_sentences(p)]
        data = prepare(sentences, num_words=500, seed=args.seed, name="+".join(p.name for p in paths), **settings)
        save(data, folder)
        print(json.dumps(data.meta))


def cmd_curves(args):
    data = load(Path(args.root) / args.corpus)
    configs = CONFIGS.get(args.configs) or [(int(c.split(":")[0]), c.split(":")[1], int(c.split(":")[2]))
                                            for c in args.configs.split(",")]
    out = Path(args.root) / "results"
    out.mkdir(parents=True, exist_ok=True)
    tables = {}
    for order, inference, size in configs:
        if order not in tables:
            tables[order] = fit_transitions(data.words, data.plaintext, order)
        load_before = os.getloadavg()
        start = time.perf_counter()
        path = out / f"{args.corpus}-{_name(order, inference, size)}.json"

        def write(model, complete):
            record = {"corpus": args.corpus, "order": order, "inference": inference, "size": size,
                      "num_cipher": args.num_cipher or len(data.cipher), "iterations": args.iterations, "meta": data.meta,
                      "seconds": time.perf_counter() - start, "loadavg_before": load_before,
                      "loadavg_after": os.getloadavg(), "complete": complete, "history": model.history_}
            path.write_text(json.dumps(record, indent=1) + "\n")

        # the history is rewritten after every iteration, so a run cut short keeps its curve
        model = Decipherer(order=order, inference=inference, size=size, n_iter=args.iterations,
                           callback=lambda entry, m: write(m, False)).fit(
            data, num_cipher=args.num_cipher, tables=tables[order])
        write(model, True)
        acc = " ".join(f"{h['accuracy']:.3f}" for h in model.history_)
        print(f"{args.corpus} {_label(order, inference, size)}: {acc} "
              f"(median {np.median([h['seconds'] for h in model.history_[1:]] or [0]):.2f} s/iter)", flush=True)


def cmd_timing(args):
    """E-step seconds (wall, CPU) per configuration, in interleaved rounds on the same sentences."""
    data = load(Path(args.root) / args.corpus)
    symbols, offsets = data.cipher_flat(args.num_cipher)
    shard = split_shards(symbols, offsets, 1)[0]
    configs = CONFIGS["fig5"]
    tables = {order: fit_transitions(data.words, data.plaintext, order) for order in (1, 2)}
    models = {}
    for order, inference, size in configs:
        model = DecipherHMM(tables[order], max(len(data.words), int(symbols.max()) + 1), inference, size)
        model.initialize()
        small = split_shards(symbols[:offsets[2]], offsets[:3], 1)[0]
        model.expected_statistics(small, model.shared_log_potentials(small))  # compile
        models[(order, inference, size)] = model
    print(f"load average before: {os.getloadavg()}")
    timing = harness.interleaved(
        {c: (lambda m=models[c]: m.expected_statistics(shard, m.shared_log_potentials(shard))) for c in configs},
        args.rounds, warmup=False, alternate=False)
    base = timing.median((1, "exact", 60))
    rows = []
    for c in configs:
        wall, cpu = timing.median(c, "wall"), timing.median(c, "cpu")
        rows.append({"config": _label(*c), "wall_s": wall, "cpu_s": cpu, "cpu_ratio_to_exact": cpu / base})
        print(f"{_label(*c):24s} wall {wall:7.2f} s  cpu {cpu:7.2f} s  cpu/exact {cpu / base:5.2f}")
    print(f"load average after: {os.getloadavg()}")
    out = Path(args.root) / "results" / f"{args.corpus}-timing.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"corpus": args.corpus, "num_cipher": args.num_cipher, "rounds": args.rounds,
                               "rows": rows, "loadavg": os.getloadavg()}, indent=1) + "\n")


def cmd_plot(args):
    from varorder.eval.plots import plot_curves

    results = Path(args.root) / "results"
    figures = Path(args.figures)
    lines = []
    for corpus in TASKS:
        runs = {}
        for path in sorted(results.glob(f"{corpus}-order*.json")):
            r = json.loads(path.read_text())
            runs[(r["order"], r["inference"], r["size"])] = r
        if not runs:
            continue

        def curve(key, field="accuracy"):
            h = runs[key]["history"]
            return [e["iteration"] for e in h], [e[field] for e in h]

        left = {_label(*k): curve(k) for k in LEFT if k in runs}
        plot_curves(left, figures / f"{corpus}_fig5_left.png", "EM iteration", "mapping accuracy",
                    f"{corpus}: size 60 (Fig. 5 left)")
        right = {_label(*k): curve(k) for k in sorted(set(RIGHT + LEFT[3:])) if k in runs}
        plot_curves(right, figures / f"{corpus}_fig5_right.png", "EM iteration", "mapping accuracy",
                    f"{corpus}: 2nd order, beam vs RCMS (Fig. 5 right)")
        ctx = {_label(*k): curve(k, "context_length") for k in runs if k[1] == "rcms"}
        plot_curves(ctx, figures / f"{corpus}_fig6_context.png", "EM iteration",
                    "mean context length (mass-weighted)", f"{corpus}: RCMS context length (Fig. 6)")
        lines.append(f"\n{corpus} ({next(iter(runs.values()))['num_cipher']} cipher sentences)\n")
        horizons = [int(n) for n in args.horizons.split(",")]
        lines.append("| configuration | iterations | " + " | ".join(f"acc. @{n}" for n in horizons)
                     + " | final acc. | best acc. | CPU s/iter | wall s/iter | mean ctx len (first → last) |")
        lines.append("|---|---:|" + "---:|" * (len(horizons) + 4) + "---|")
        for k in LEFT + RIGHT:
            if k not in runs:
                continue
            h = runs[k]["history"]
            acc = np.array([e["accuracy"] for e in h])
            at = [f"{acc[n - 1]:.3f}" if len(acc) >= n else "–" for n in horizons]
            steady = h[1:] if len(h) > 1 else h  # the first iteration includes compilation
            cpu = np.median([e["cpu_seconds"] for e in steady])
            wall = np.median([e["seconds"] for e in steady])
            ctx_text = "–" if k[1] != "rcms" else f"{h[0]['context_length']:.2f} → {h[-1]['context_length']:.2f}"
            lines.append(f"| {_label(*k)} | {len(h)} | {' | '.join(at)} | {acc[-1]:.3f} | {acc.max():.3f} | "
                         f"{cpu:.2f} | {wall:.1f} | {ctx_text} |")
        unk = {_label(*k): runs[k]["history"][-1]["unk_symbol_correct"] for k in LEFT + RIGHT
               if k in runs and "unk_symbol_correct" in runs[k]["history"][-1]}
        if unk:
            lines.append("\n<unk> symbol (left out of the accuracy) decoded as <unk> after the last iteration: "
                         + ", ".join(f"{name} {'yes' if right else 'no'}" for name, right in unk.items()))
        loads = [runs[k]["loadavg_before"][0] for k in runs]
        lines.append(f"\nload average (1 min) at the start of the runs: {min(loads):.1f} – {max(loads):.1f}")
    print("\n".join(lines))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=["prepare", "curves", "timing", "plot"])
    parser.add_argument("--root", default="out/decipher")
    parser.add_argument("--corpus", choices=sorted(TASKS), default="wap", help="task: corpus, or corpus-unk (lenient)")
    parser.add_argument("--configs", default="fig5", help="fig5 | left | right | order:inference:size,...")
    parser.add_argument("--num-cipher", type=int, default=None, help="cipher sentences used (curves/timing; default all)")
    parser.add_argument("--iterations", type=int, default=15)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--figures", default="docs/figures/decipher")
    parser.add_argument("--horizons", default="10,15", help="plot: iterations at which the table reads accuracy")
    args = parser.parse_args(argv)
    {"prepare": cmd_prepare, "curves": cmd_curves, "timing": cmd_timing, "plot": cmd_plot}[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
