"""OCR word recognition: RCMS vs beam search (Steinhardt & Liang, ICML 2015, §5), full protocol.

    .venv/bin/python benchmarks/rcms_ocr.py [--epochs 6] [--no-backoff] [--out docs/figures] [--json out.json]

Trains beam(10), RCMS(10) and beam(200) (near-exact) on folds 0, 2–9 with AdaGrad
(η = 0.2, δ = 1e-4), evaluates on fold 1 and prints the comparison table with the
paper's figures beside ours; then measures inference speed (test words/s) for
B = 10, 30, 100 with the trained RCMS(10) weights under both selection rules, and
writes the precision–recall, training-curve and context-length plots.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np

from varorder.contexts.model import ReifiedContextModel
from varorder.tasks.ocr import (OcrConfig, format_table, load_ocr, run_ocr_experiment, word_arrays, write_json,
                                write_plots)


def speed_table(model: ReifiedContextModel, xs, sizes=(10, 30, 100)):
    rows = []
    for mode in ("rcms", "beam"):
        for size in sizes:
            probe = ReifiedContextModel(**(model.get_params() | {"mode": mode, "num_contexts": size}))
            probe._init_state(model.num_inputs_)
            probe.ngram_weights_ = model.ngram_weights_
            probe.observation_weights_ = model.observation_weights_
            probe.predict_with_confidence(xs[:5])  # compile / warm up
            start = time.perf_counter()
            probe.predict_with_confidence(xs)
            rows.append((mode, size, len(xs) / (time.perf_counter() - start)))
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=OcrConfig.epochs)
    parser.add_argument("--no-backoff", action="store_true", help="paper eq. 6 features only")
    parser.add_argument("--methods", default="beam:10,rcms:10,beam:200")
    parser.add_argument("--out", default="docs/figures")
    parser.add_argument("--json", default=None)
    parser.add_argument("--data", default=None, help="letter.data(.gz); default: the vendored copy")
    args = parser.parse_args(argv)
    methods = tuple((m.split(":")[0], int(m.split(":")[1])) for m in args.methods.split(","))
    config = OcrConfig(epochs=args.epochs, backoff=not args.no_backoff, methods=methods, progress=False)
    results = run_ocr_experiment(config, data_path=args.data)
    print()
    print(format_table(results))
    paths = write_plots(results, args.out)
    print("plots:", ", ".join(paths))
    rcms = [r for r in results if r.mode == "rcms"]
    speeds = []
    if rcms:
        model = ReifiedContextModel(26, order=config.order, num_contexts=rcms[0].size, backoff=config.backoff,
                                    epochs=config.epochs, batch_size=config.batch_size, seed=config.seed)
        # retrain-free speed probe: reuse the trained weights kept by run_ocr_experiment
        model._init_state(32)
        model.ngram_weights_, model.observation_weights_ = rcms[0].weights
        _, test = load_ocr(args.data, config.test_fold)
        xs, _ = word_arrays(test)
        speeds = speed_table(model, xs)
        print("\n| selection | B | test words/s |\n|---|---|---|")
        for mode, size, wps in speeds:
            print(f"| {mode} | {size} | {wps:.0f} |")
    if args.json:
        write_json(results, args.json)
        with open(args.json) as handle:
            data = json.load(handle)
        data = {"methods": data, "speed": [{"mode": m, "B": b, "words_per_second": w} for m, b, w in speeds],
                "config": {"epochs": config.epochs, "backoff": config.backoff}}
        tmp = args.json + ".tmp"
        with open(tmp, "w") as handle:
            json.dump(data, handle, indent=1)
        os.replace(tmp, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
