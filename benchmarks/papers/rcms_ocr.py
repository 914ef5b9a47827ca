"""OCR word recognition: RCMS vs beam search (Steinhardt & Liang, ICML 2015, §5, Fig. 3 and Fig. 6).

    PYTHONPATH=src python benchmarks/papers/rcms_ocr.py [--protocols paper,+backoff] [--seeds 0,1,2,3,4]
        [--methods beam:10,rcms:10,beam:200] [--epochs 4] [--off-beam force] [--out docs/figures]
        [--json out.json] [--speed]

Trains each method on folds 0, 2–9 and evaluates on fold 1, once per (protocol, seed).
``paper`` is the paper's protocol (eq. 6 features, App. A contexts of any length,
per-example AdaGrad η = 0.2, δ = 1e-4, recall at 99% precision by the first-drop rule);
the other protocols are varorder's extensions (:data:`varorder.tasks.ocr.PROTOCOLS`),
reported in their own labelled rows. Prints one row per run and a summary over seeds
(mean, standard deviation, min–max), writes the JSON after every run (so a long job
keeps what it finished), the precision–recall / training / context-length (Fig. 6) plots
of the first seed, and with ``--speed`` the inference speed for B = 10, 30, 100 under
both selection rules with the trained RCMS(10) weights.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from dataclasses import replace

import numpy as np

from varorder.contexts.model import ContextModelOptions, ReifiedContextModel
from varorder.tasks.ocr import (PROTOCOLS, OcrConfig, format_table, load_ocr, run_ocr_experiment, word_arrays,
                                write_plots)


def speed_table(model: ReifiedContextModel, xs, sizes=(10, 30, 100)):
    rows = []
    for mode in ("rcms", "beam"):
        for size in sizes:
            options = replace(model.options or ContextModelOptions(), max_context=None)
            probe = ReifiedContextModel(**(model.get_params() | {"mode": mode, "num_contexts": size,
                                                                 "options": options}))
            probe._init_state(model.num_inputs_)
            probe.ngram_weights_ = model.ngram_weights_
            probe.observation_weights_ = model.observation_weights_
            probe.predict_with_confidence(xs[:5])  # compile / warm up
            start = time.perf_counter()
            probe.predict_with_confidence(xs)
            rows.append((mode, size, len(xs) / (time.perf_counter() - start)))
    return rows


def summarise(rows):
    """Markdown: per (method, protocol), mean ± sd and min–max over seeds."""
    groups = {}
    for r in rows:
        groups.setdefault((r["name"], r["protocol"]), []).append(r)
    out = ["| method | protocol | seeds | word acc mean ± sd (min–max) | recall@99%P, paper rule | "
           "recall@99%P, max rule | letter acc |", "|---|---|---|---|---|---|---|"]

    def stat(vals):
        vals = np.asarray(vals)
        sd = vals.std(ddof=1) if vals.size > 1 else 0.0
        return f"{vals.mean():.3f} ± {sd:.3f} ({vals.min():.3f}–{vals.max():.3f})"

    for (name, protocol), rs in groups.items():
        out.append(f"| {name} | {protocol} | {len(rs)} | {stat([r['word_acc'] for r in rs])} | "
                   f"{stat([r['recall_at_99'] for r in rs])} | {stat([r['recall_at_99_max'] for r in rs])} | "
                   f"{stat([r['letter_acc'] for r in rs])} |")
    return "\n".join(out)


def _write_json(path, payload):
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=folder, suffix=".json.tmp")
    with os.fdopen(fd, "w") as handle:
        json.dump(payload, handle, indent=1)
    os.replace(tmp, path)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--protocols", default="paper", help=f"comma-separated, of {', '.join(PROTOCOLS)}")
    parser.add_argument("--seeds", default="0")
    parser.add_argument("--epochs", type=int, default=OcrConfig.epochs)
    parser.add_argument("--off-beam", default="force", choices=("force", "skip", "early"))
    parser.add_argument("--methods", default="beam:10,rcms:10,beam:200")
    parser.add_argument("--dev-fold", type=int, default=None,
                        help="evaluate on this fold, train on the others except the test fold 1 (held back)")
    parser.add_argument("--step-size", type=float, default=OcrConfig.step_size, help="AdaGrad η (the paper's 0.2)")
    parser.add_argument("--out", default=None, help="folder for the plots of the first seed")
    parser.add_argument("--json", default=None)
    parser.add_argument("--speed", action="store_true")
    parser.add_argument("--data", default=None, help="letter.data(.gz); default: the vendored copy")
    args = parser.parse_args(argv)
    methods = tuple((m.split(":")[0], int(m.split(":")[1])) for m in args.methods.split(","))
    protocols = args.protocols.split(",")
    unknown = [p for p in protocols if p not in PROTOCOLS]
    if unknown:
        parser.error(f"unknown protocol(s) {unknown}; known: {list(PROTOCOLS)}")
    seeds = [int(s) for s in args.seeds.split(",")]
    rows, first_results, speeds = [], [], []
    load = os.getloadavg()[0]
    for protocol in protocols:
        for seed in seeds:
            config = replace(OcrConfig(epochs=args.epochs, methods=methods, progress=False, seed=seed,
                                       off_beam=args.off_beam, dev_fold=args.dev_fold, step_size=args.step_size),
                             **PROTOCOLS[protocol])
            label = protocol if args.off_beam == "force" else f"{protocol}, off-beam {args.off_beam}"
            label += f", η {args.step_size:g}" if args.step_size != OcrConfig.step_size else ""
            results = run_ocr_experiment(config, data_path=args.data, protocol=label)
            if seed == seeds[0]:
                first_results += results
            for r in results:
                rows.append(r.summary() | {"seed": seed, "epochs": args.epochs, "load_avg_1min": load,
                                           "evaluated_on": "test fold 1" if args.dev_fold is None
                                           else f"dev fold {args.dev_fold}"})
            load = os.getloadavg()[0]
            if args.json:
                _write_json(args.json, {"runs": rows})
    print()
    print(format_table(first_results))
    print()
    print(summarise(rows))
    if args.out:
        print("plots:", ", ".join(write_plots(first_results, args.out)))
    rcms = [r for r in first_results if r.mode == "rcms"]
    if args.speed and rcms:
        model = ReifiedContextModel(num_labels=26, order=OcrConfig.order, num_contexts=rcms[0].size)
        model._init_state(32)
        model.ngram_weights_, model.observation_weights_ = rcms[0].weights
        _, test = load_ocr(args.data)
        xs, _ = word_arrays(test)
        speeds = speed_table(model, xs)
        print("\n| selection | B | test words/s |\n|---|---|---|")
        for mode, size, wps in speeds:
            print(f"| {mode} | {size} | {wps:.0f} |")
        if args.json:
            _write_json(args.json, {"runs": rows, "speed": [{"mode": m, "B": b, "words_per_second": w}
                                                            for m, b, w in speeds]})
    return 0


if __name__ == "__main__":
    sys.exit(main())
