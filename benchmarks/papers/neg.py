"""Named-entity generation on GUM dev (issue #29): baselines (a)-(e), the GREC-NEG figures, training time.

    PYTHONPATH=src python benchmarks/papers/neg.py [--gum ../shared/data/gum] [--epochs 30] [--seeds 0 1 2]
        [--json benchmarks/results/neg-gum.json] [--paragraph docs/notes/29-neg-paragraph.txt]

Trains on GUM train (173 documents, without the 14 Reddit ones) and reports dev (the test split is
held back). Rows: (a) first-mention rule, (b) unary log-linear (exact), (c) chain per entity
(exact), (d) the full factor graph by SampleRank over several seeds (mean and spread = max − min),
(e) SampleRank from (c)'s weights, ablations of (d) (without the name-link factor, without the pair
factors between different entities, unary factors only) and extensions (neighbourhood pairs, MIRA,
the link coding a competitor in between, (b)'s exact weights held as the start, person cues for
(b), (c) and (d)). Error analysis of (b), (c) and (d) by gold type, attribute, position and genre.
Per-genre columns: bio (Wikipedia biographies, the
GREC corpus's kind of text) and the rest. Bouchard's figures on GREC-NEG (REG08-type 0.764,
string accuracy 0.702) are printed beside: different data, indicative only.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np

from varorder.io.coref import read_coref
from varorder.base import nested_params
from varorder.neg.model import NegGenerator, NegOptions
from varorder.neg.task import build_documents, evaluate, normal_key, regenerate, task_counts

from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the shared harness
import harness  # noqa: E402

PAPER = {"reg08 type accuracy": 0.764, "string accuracy": 0.702, "mean edit distance": 0.724,
         "mean normalised edit distance": 0.280, "BLEU 1 score": 0.7206, "BLEU 2 score": 0.7685,
         "BLEU 3 score": 0.7702, "BLEU 4 score": 0.754}
METRICS = ("reg08 type accuracy", "string accuracy", "mean edit distance", "mean normalised edit distance",
           "BLEU 1 score", "BLEU 2 score", "BLEU 3 score", "BLEU 4 score")


def _scores(documents, choices) -> dict:
    out = {"all": evaluate(documents, choices)}
    for name, keep in (("bio", lambda d: d.genre == "bio"), ("rest", lambda d: d.genre != "bio")):
        picked = [(d, c) for d, c in zip(documents, choices) if keep(d)]
        out[name] = evaluate([d for d, _ in picked], [c for _, c in picked])
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gum", default=str(harness.DATA / "gum"))
    parser.add_argument("--epochs", type=int, default=30)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--json", default=None)
    parser.add_argument("--paragraph", default=None, help="write a regenerated dev biography paragraph here")
    args = parser.parse_args(argv)
    began = time.perf_counter()
    train = build_documents(read_coref(os.path.join(args.gum, "en_gum-ud-train.conllu.gz")))
    dev = build_documents(read_coref(os.path.join(args.gum, "en_gum-ud-dev.conllu.gz")))
    print(f"task: train {json.dumps(task_counts(train))}\n      dev {json.dumps(task_counts(dev))}", flush=True)
    print(f"read + built in {time.perf_counter() - began:.1f} s", flush=True)
    systems = [("(a) first mention in paragraph: name, else pronoun", {"method": "first-mention"}, [0]),
               ("(b) unary factors, exact log-linear", {"method": "unary"}, [0]),
               ("(c) chain per entity, exact (varorder.chain)", {"method": "chain"}, [0]),
               ("(d) full graph, SampleRank", {"method": "samplerank", "n_epochs": args.epochs}, args.seeds),
               ("(e) full graph, SampleRank from (c)'s weights",
                {"method": "samplerank", "n_epochs": args.epochs, "warm_start": "chain"}, args.seeds),
               ("extension: (d) with neighbourhood pairs (FACTORIE's rule)",
                {"method": "samplerank", "n_epochs": args.epochs, "pairs": "neighbourhood"}, args.seeds),
               ("ablation: (d) without the name-link factor",
                {"method": "samplerank", "n_epochs": args.epochs, "link_factors": False}, args.seeds),
               ("ablation: (d) without pairs between different entities",
                {"method": "samplerank", "n_epochs": args.epochs, "other_pairs": False}, args.seeds[:1]),
               ("ablation: SampleRank with unary factors only (no pair, no link factors)",
                {"method": "samplerank", "n_epochs": args.epochs, "chain_pairs": False, "other_pairs": False,
                 "link_factors": False}, args.seeds),
               ("extension: (d) with MIRA (C = 0.01)",
                {"method": "samplerank", "n_epochs": args.epochs, "rule": "mira", "C": 0.01}, args.seeds),
               ("extension: (d) with the link coding a competitor in between",
                {"method": "samplerank", "n_epochs": args.epochs, "link_between": True}, args.seeds),
               ("extension: (d) from (b)'s exact unary weights, held; pair and link weights by SampleRank (step 0.1)",
                {"method": "samplerank", "n_epochs": args.epochs, "warm_start": "unary", "unary_step": 0.0,
                 "step_size": 0.1}, args.seeds),
               ("ablation: the extension above without the name-link factor",
                {"method": "samplerank", "n_epochs": args.epochs, "warm_start": "unary", "unary_step": 0.0,
                 "step_size": 0.1, "link_factors": False}, args.seeds),
               ("extension: (b) with person cues", {"method": "unary", "cues": True}, [0]),
               ("extension: (c) with person cues", {"method": "chain", "cues": True}, [0]),
               ("extension: (d) with person cues", {"method": "samplerank", "n_epochs": args.epochs, "cues": True},
                args.seeds),
               ("ablation: (d) with person cues, without the name-link factor",
                {"method": "samplerank", "n_epochs": args.epochs, "cues": True, "link_factors": False}, args.seeds)]
    results = []
    analysis = {}
    paragraph = None
    for name, params, seeds in systems:
        runs = []
        for seed in seeds:
            load = os.getloadavg()[0]
            wall, cpu = time.perf_counter(), time.process_time()
            model = NegGenerator(random_state=seed, **nested_params(params, "options", NegOptions)).fit(train)
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
            choices = model.predict(dev)
            runs.append({"seed": seed, "train_wall_s": wall, "train_cpu_s": cpu, "load": load,
                         "scores": _scores(dev, choices)})
            if params.get("method") == "samplerank" and "warm_start" not in params and len(params) == 2 \
                    and paragraph is None:
                paragraph = _bio_paragraph(dev, choices)
            if name[:3] in ("(b)", "(c)", "(d)"):
                analysis.setdefault(name[:3], []).append(_breakdown(dev, choices))
            print(f"{name} seed {seed}: type {runs[-1]['scores']['all']['reg08 type accuracy']:.4f} string "
                  f"{runs[-1]['scores']['all']['string accuracy']:.4f} train {wall:.1f} s wall / {cpu:.1f} s CPU",
                  flush=True)
        results.append({"system": name, "params": params, "runs": runs})
    _print_table(results)
    analysis = {system: _merge(parts) for system, parts in analysis.items()}
    _print_analysis(analysis)
    if args.paragraph and paragraph:
        with open(args.paragraph, "w", encoding="utf-8") as handle:
            handle.write(paragraph)
    if args.json:
        _write_json(args, results, train, dev, analysis)


def _breakdown(documents, choices) -> dict:
    """Slots, REG08-type and string matches by gold type, gold attribute, position and genre, and the
    confusion (gold attribute → chosen attribute) of the string errors."""
    out = {"gold type": {}, "gold attribute": {}, "position": {}, "genre": {}, "errors": {}}
    for document, chosen in zip(documents, choices):
        for slot, text in zip(document.slots, chosen):
            candidates = {normal_key(c.text): c for c in document.candidates[slot.entity]}
            gold, pick = candidates[normal_key(slot.gold)], candidates[normal_key(text)]
            position = "first in document" if "first_in_doc" in slot.features else \
                "first in paragraph" if "first_in_paragraph" in slot.features else "later"
            for part, key in (("gold type", slot.gold_type), ("gold attribute", gold.attr), ("position", position),
                              ("genre", document.genre)):
                cell = out[part].setdefault(key, [0, 0, 0])
                cell[0] += 1
                cell[1] += pick.reg08 == slot.gold_type
                cell[2] += pick is gold
            if pick is not gold:
                key = f"{gold.attr} -> {pick.attr}"
                out["errors"][key] = out["errors"].get(key, 0) + 1
    return out


def _merge(parts) -> dict:
    merged = {"seeds": len(parts)}
    for name in parts[0]:
        if name == "errors":
            keys = {k for p in parts for k in p[name]}
            merged[name] = dict(sorted(((k, sum(p[name].get(k, 0) for p in parts)) for k in keys),
                                       key=lambda kv: -kv[1])[:15])
            continue
        merged[name] = {}
        for key in parts[0][name]:
            n, t, s = (sum(p[name][key][i] for p in parts) for i in range(3))
            merged[name][key] = {"slots": n // len(parts), "type": round(t / n, 4), "string": round(s / n, 4)}
    return merged


def _print_analysis(analysis):
    print("\nError analysis (dev; (d) pooled over its seeds): type / string accuracy")
    systems = list(analysis)
    for part in ("gold type", "gold attribute", "position", "genre"):
        print(f"| {part} | slots | " + " | ".join(systems) + " |")
        print("|" + "---|" * (2 + len(systems)))
        for key, cell in analysis[systems[0]][part].items():
            print(f"| {key} | {cell['slots']} | " + " | ".join(
                f"{analysis[s][part][key]['type']:.3f} / {analysis[s][part][key]['string']:.3f}"
                for s in systems) + " |")
    for system in systems:
        print(f"{system} string errors (gold attribute -> chosen): {analysis[system]['errors']}")


def _bio_paragraph(documents, choices) -> str:
    """The first dev biography's second paragraph: original, and regenerated with choices marked."""
    for document, chosen in zip(documents, choices):
        if document.genre != "bio":
            continue
        paragraph = 1 if max(document.paragraph_of_sentence) >= 1 else 0
        sentences = [i for i, p in enumerate(document.paragraph_of_sentence) if p == paragraph]
        gold = regenerate(document, [s.gold for s in document.slots], mark=True)
        ours = regenerate(document, chosen, mark=True)
        return (f"{document.doc_id}, paragraph {paragraph + 1}\n\noriginal:\n" + " ".join(gold[i] for i in sentences)
                + "\n\nregenerated by (d):\n" + " ".join(ours[i] for i in sentences) + "\n")
    return ""


def _summary(runs, part, metric):
    values = np.array([r["scores"][part][metric] for r in runs])
    return float(values.mean()), float(values.max() - values.min())


def _print_table(results):
    print("\nGUM dev (train on GUM train). Mean over seeds; ± = spread (max − min) where several seeds.")
    header = ["system", "seeds", "type", "string", "ED", "norm ED", "BLEU-1", "BLEU-2", "BLEU-3", "BLEU-4",
              "type bio", "string bio", "type rest", "string rest", "train s (wall/CPU)"]
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for result in results:
        runs = result["runs"]
        cells = [result["system"], str(len(runs))]
        for metric in METRICS:
            mean, spread = _summary(runs, "all", metric)
            cells.append(f"{mean:.3f}" + (f" ± {spread:.3f}" if len(runs) > 1 and metric in METRICS[:2] else ""))
        for part in ("bio", "rest"):
            for metric in METRICS[:2]:
                cells.append(f"{_summary(runs, part, metric)[0]:.3f}")
        wall = np.mean([r["train_wall_s"] for r in runs])
        cpu = np.mean([r["train_cpu_s"] for r in runs])
        cells.append(f"{wall:.1f} / {cpu:.1f}")
        print("| " + " | ".join(cells) + " |")
    paper = ["Bouchard 2010 on GREC-NEG (different data)", "-"] + [f"{PAPER[m]:.3f}" for m in METRICS] + ["-"] * 5
    print("| " + " | ".join(paper) + " |")


_KEY_SYSTEMS = ("(a)", "(b)", "(c)", "(d)", "(e)", "ablation: (d) without the name-link factor")


def _row(system, part, metric, mean, note, reference=None, better="higher"):
    return {"system": system, "task": f"GUM dev ({part}), trained on GUM train", "metric": metric,
            "varorder": round(mean, 4), "reference": reference,
            "reference_name": "Bouchard 2010 on GREC-NEG (different data)" if reference else "none",
            "ratio": round(mean / reference, 4) if reference else None, "better": better, "note": note}


def _write_json(args, results, train, dev, analysis, command=None, date=None, machine=None):
    """Schema 1: rows = every system's REG08-type and string accuracy on dev (Bouchard's beside), the
    bio / rest rows and training times of (a)-(e) and the name-link ablation; the other metrics,
    the other systems' genre rows, the per-seed runs and the error analysis under ``details``."""
    rows, genre_rows, other_rows = [], [], []
    for result in results:
        runs, system = result["runs"], result["system"]
        key = system.startswith(_KEY_SYSTEMS)
        for part in ("all", "bio", "rest"):
            for metric in METRICS:
                mean, spread = _summary(runs, part, metric)
                note = f"{len(runs)} seed(s), spread {spread:.4f}; params {json.dumps(result['params'])}"
                better = "lower" if "edit" in metric else "higher"
                row = _row(system, part, metric, mean, note, PAPER.get(metric) if part == "all" else None, better)
                if metric in METRICS[:2] and (part == "all" or key):
                    rows.append(row)
                elif metric in METRICS[:2]:
                    genre_rows.append(row)
                else:
                    other_rows.append(row)
        time_row = {"system": system, "task": "GUM train", "metric": "training time (s, wall)",
                    "varorder": round(float(np.mean([r["train_wall_s"] for r in runs])), 2), "reference": None,
                    "reference_name": "none", "ratio": None, "better": "lower",
                    "note": f"CPU {np.mean([r['train_cpu_s'] for r in runs]):.2f} s; load "
                            f"{np.mean([r['load'] for r in runs]):.1f} (shared 2-core machine, noisy)"}
        (rows if key else genre_rows).append(time_row)
    payload = {"schema": 1, "area": "Named-entity generation", "title": "GREC-NEG-style RE choice on GUM dev: "
               "first-mention rule, exact unary, exact chain, SampleRank factor graph (Bouchard 2010), ablations and "
               "extensions", "issue": 29,
               "command": command or "PYTHONPATH=src python " + " ".join(["benchmarks/papers/neg.py"] + sys.argv[1:]),
               "date": date or time.strftime("%Y-%m-%d"),
               "machine": machine or harness.machine(),
               "rows": rows,
               "details": {"task_counts": {"train": task_counts(train), "dev": task_counts(dev)} if train else None,
                           "rows_by_genre_and_time": genre_rows, "rows_other_metrics": other_rows, "runs": results,
                           "error_analysis": {
                               "what": "dev slots by gold type, gold attribute, position and genre (slots, REG08-type "
                                       "and string accuracy), and the most frequent (gold attribute -> chosen "
                                       "attribute) string errors; (d) pooled over its seeds",
                               "systems": analysis}}}
    with open(args.json, "w", encoding="utf-8") as handle:
        json.dump(payload, handle, indent=1)


if __name__ == "__main__":
    main()
