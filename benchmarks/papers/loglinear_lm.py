"""Log-linear language models with structured penalties (Nelakanti et al. 2013, Fig. 2-3) on
PTB (Mikolov's split; its test set is held back, so nothing here reads it).

Subsets as in the paper's protocol (four 100K-word training sets with 20K-word evaluation
sets): subset k trains on the k-th run of whole sentences holding 100K words of
``ptb.train.txt.gz`` and evaluates on the k-th 20K-word run of ``ptb.valid.txt.gz`` (PTB valid
holds three; the fourth is cut from PTB train, see :func:`subsets`). λ and α are chosen per
order on a split of PTB train after the four subsets (:func:`tuning_split`: the paper's 30K /
10K words, or 100K / 20K), never on the reported evaluation runs.

    python benchmarks/papers/loglinear_lm.py tune --split 100k --orders 4,9 --penalty wlt2 --lams 0.2,0.3,0.4 \\
        --alphas 1.1,1.25 --optimizer adagrad --average --json docs/figures/loglinear_tune_adagrad.json
    python benchmarks/papers/loglinear_lm.py perplexity --subsets 0 --orders 2,3,4,5,6,7,8,9 --penalties wlt2 \\
        --optimizer adagrad --average --tuned docs/figures/loglinear_tune_adagrad.json \\
        --json docs/figures/loglinear_ppl.json
    python benchmarks/papers/loglinear_lm.py prox-time --json docs/figures/loglinear_prox.json
    python benchmarks/papers/loglinear_lm.py plot docs/figures/loglinear_ppl*.json --prox docs/figures/loglinear_prox.json \\
        -o docs/img/loglinear_lm.png
    python benchmarks/papers/loglinear_lm.py table docs/figures/loglinear_ppl*.json

Baselines from :mod:`varorder.lm` on the same data: interpolated modified Kneser-Ney, and
interpolated (original, one discount per order D = n1 / (n1 + 2 n2)) Kneser-Ney, which is
the modified estimator with its three discounts set equal.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import time
from pathlib import Path

import numpy as np

from varorder.lm import ModifiedKneserNey, Vocabulary, read_corpus
from varorder.loglinear import prox as P
from varorder.loglinear.model import SolverOptions, StructuredLogLinear
from varorder.loglinear.trie import build_trie, ngram_counts

import sys

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the shared harness
import harness  # noqa: E402

DATA = Path(os.environ.get("VARORDER_PTB_LM", harness.DATA / "ptb-lm"))
TRAIN_WORDS, EVAL_WORDS = 100_000, 20_000


class InterpolatedKneserNey(ModifiedKneserNey):
    """Original interpolated Kneser-Ney: one discount D = n1 / (n1 + 2 n2) per order."""

    def _prepare(self, counts):
        adjusted = super()._prepare(counts)
        bos = counts.vocabulary.bos_id
        discounts = []
        for m, order_counts in enumerate(adjusted, start=1):
            considered = order_counts if m > 1 else np.delete(order_counts, bos)
            n1, n2 = (int(np.count_nonzero(considered == k)) for k in (1, 2))
            d = n1 / (n1 + 2 * n2) if n1 + n2 else 0.5
            discounts.append((d, d, d))
        self.discounts_ = discounts
        return adjusted


def _sentences(path):
    with gzip.open(path, "rt") as handle:
        return [line.split() for line in handle if line.split()]


def word_runs(sentences, words, count, skip_words=0):
    """``count`` consecutive runs of whole sentences, each reaching ``words`` words."""
    runs, current, n, seen = [], [], 0, 0
    for tokens in sentences:
        if seen < skip_words:
            seen += len(tokens)
            continue
        current.append(tokens)
        n += len(tokens)
        if n >= words:
            runs.append(current)
            current, n = [], 0
            if len(runs) == count:
                break
    return runs


def subsets(n_subsets=4):
    """PTB valid (70,390 words) holds only three 20K-word runs: a fourth evaluation run is cut
    from PTB train after the subsets and the tuning split (words 600K on), trained on by nothing."""
    all_train = _sentences(DATA / "ptb.train.txt.gz")
    train = word_runs(all_train, TRAIN_WORDS, n_subsets)
    valid = word_runs(_sentences(DATA / "ptb.valid.txt.gz"), EVAL_WORDS, n_subsets)
    if len(valid) < n_subsets:
        valid += word_runs(all_train, EVAL_WORDS, n_subsets - len(valid), skip_words=600_000)
    return train, valid


def tuning_split(size="30k"):
    """A training / validation pair cut from PTB train after the four 100K subsets, so the
    reported 20K-word evaluation runs of PTB valid are never used to choose λ or α.
    ``30k``: the paper's 30K / 10K words; ``100k``: 100K / 20K words, the subsets' own sizes
    (λ against the summed loss then needs no transfer across training sizes)."""
    sentences = _sentences(DATA / "ptb.train.txt.gz")
    skip = 4 * TRAIN_WORDS
    n_train, n_valid = {"30k": (30_000, 10_000), "100k": (TRAIN_WORDS, EVAL_WORDS)}[size]
    return word_runs(sentences, n_train, 1, skip)[0], word_runs(sentences, n_valid, 1, skip + n_train + 10_000)[0]


def encode(train_sentences, eval_sentences):
    words = sorted({w for s in train_sentences for w in s})
    vocabulary = Vocabulary(words)
    train = vocabulary.encode_sentences(train_sentences)
    held = vocabulary.encode_sentences(eval_sentences)
    return vocabulary, train, held


def fit_loglinear(args, order, penalty, lam, vocabulary, train, alpha=None):
    solver = SolverOptions(learning_rate=args.learning_rate, lipschitz_scale=args.lipschitz_scale, mu=args.mu,
                           average=args.average, restart=args.restart, polish_tol=args.polish_tol)
    estimator = StructuredLogLinear(order=order, penalty=penalty, lam=lam, alpha=alpha, epochs=args.epochs, optimizer=args.optimizer,
                                    weighting=args.weighting, penalize_root=not args.free_root, polish=args.polish,
                                    solver=solver, seed=args.seed)
    return estimator.fit_ids(*train, vocabulary)


def cmd_tune(args):
    """Grid over orders × λ × α on a split cut from PTB train (see :func:`tuning_split`);
    rows are appended to ``--json`` so grids can be refined run by run."""
    train_s, held_s = tuning_split(args.split)
    vocabulary, train, held = encode(train_s, held_s)
    rows = json.loads(Path(args.json).read_text()) if args.json and Path(args.json).exists() else []
    alphas = [None] if not args.alphas else [float(x) for x in args.alphas.split(",")]
    for order in args.orders:
        if not any(r["model"] == "MKN" and r["order"] == order and r["split"] == args.split for r in rows):
            model = ModifiedKneserNey(order=order).fit_ids(*train, vocabulary).model_
            rows.append({"split": args.split, "order": order, "model": "MKN", "perplexity": model.perplexity(held)})
            print(f"tune split {args.split} order {order} MKN: {rows[-1]['perplexity']:.2f}", flush=True)
        for alpha in alphas:
            for lam in (float(x) for x in args.lams.split(",")):
                start, cpu = time.perf_counter(), time.process_time()
                estimator = fit_loglinear(args, order, args.penalty, lam, vocabulary, train, alpha)
                rows.append({"split": args.split, "order": order, "model": args.penalty, "optimizer": args.optimizer,
                             "epochs": args.epochs, "mu": args.mu, "learning_rate": args.learning_rate,
                             "lipschitz_scale": args.lipschitz_scale, "average": args.average, "lam": lam,
                             "weighting": args.weighting, "restart": args.restart, "free_root": args.free_root,
                             "polish": args.polish, "polish_history": estimator.polish_history_,
                             "polish_residual": estimator.polish_residual_,
                             "alpha": estimator.alpha_, "perplexity": estimator.model_.perplexity(held),
                             "objective": estimator.objective_,
                             "train_loss": estimator.history_, "seconds": time.perf_counter() - start,
                             "cpu_seconds": time.process_time() - cpu, "load": os.getloadavg()[0]})
                how = args.optimizer + (", averaged" if args.average else "") + (
                    f", polished {len(estimator.polish_history_) - 1} its" if args.polish else "")
                print(f"tune split {args.split} {args.penalty} ({how}) order {order} lam {lam:g} "
                      f"alpha {estimator.alpha_:g}: valid perplexity {rows[-1]['perplexity']:.2f}, train loss "
                      f"{estimator.history_[-1]:.3f}, objective {estimator.objective_:.1f} ({rows[-1]['cpu_seconds']:.0f} cpu-s, load {rows[-1]['load']:.1f})",
                      flush=True)
                if args.json:
                    Path(args.json).write_text(json.dumps(rows, indent=1))
    for order in args.orders:
        mine = [r for r in rows if r["order"] == order and r["model"] == args.penalty and r["split"] == args.split
                and r["optimizer"] == args.optimizer]
        if mine:
            best = min(mine, key=lambda r: r["perplexity"])
            print(f"best for {args.penalty} order {order}: lam {best['lam']:g} alpha {best['alpha']:g} "
                  f"({best['perplexity']:.2f})")


SWEEP_TUNE_SKIP = 480_000  # words of PTB train before the tuning split: after the four 120K-word subsets


def train_subsets(n_subsets=4):
    """Issue #30's protocol, everything from PTB train (its test set is held back, its valid set
    unused): subset k is the k-th run of whole sentences reaching 120K words, its first sentences
    reaching 100K words train and the rest (~20K words) evaluate."""
    runs = word_runs(_sentences(DATA / "ptb.train.txt.gz"), TRAIN_WORDS + EVAL_WORDS, n_subsets)
    out = []
    for run in runs:
        seen, cut = 0, len(run)
        for i, tokens in enumerate(run):
            seen += len(tokens)
            if seen >= TRAIN_WORDS:
                cut = i + 1
                break
        out.append((run[:cut], run[cut:]))
    return out


def cmd_sweep(args):
    """λ (and wℓT2's α) tuned on a 30K / 10K split of PTB train (§6, :mod:`varorder.loglinear.tune`,
    every grid point converged to ``--tol``), then each penalty × order fitted at its tuned
    setting on the 100K-word training part of each subset and scored on its 20K-word part,
    beside modified and one-discount interpolated Kneser-Ney. The JSON is rewritten after
    every cell; a rerun resumes (cells already in it are skipped)."""
    from varorder.loglinear.tune import DEFAULT_LAMS, split_for_tuning, tune_loglinear

    out = Path(args.json)
    if out.exists():
        state = json.loads(out.read_text())
    elif args.resume:
        state = sweep_state_from_results(json.loads(Path(args.resume).read_text()))
    else:
        state = {"tuning": [], "cells": [], "alpha": {}}
    save = lambda: out.write_text(json.dumps(state, indent=1))  # noqa: E731
    sentences = _sentences(DATA / "ptb.train.txt.gz")
    tune_run = word_runs(sentences, 40_000, 1, SWEEP_TUNE_SKIP)[0]
    vocabulary = Vocabulary(sorted({w for s in tune_run[:len(tune_run)] for w in s}))
    tune_train, tune_valid = split_for_tuning(*vocabulary.encode_sentences(tune_run))
    # the vocabulary of the 30K training part only (validation words unseen there are <unk>)
    n_train = len(tune_train[1])
    vocabulary, tune_train, tune_valid = encode(tune_run[:n_train], tune_run[n_train:n_train + len(tune_valid[1])])
    print(f"tuning split: {int(tune_train[1].sum())} / {int(tune_valid[1].sum())} words, {len(vocabulary)} types", flush=True)
    settings = {"weighting": args.weighting}
    lams = [float(x) for x in args.lams.split(",")] if args.lams else DEFAULT_LAMS

    def tuned(penalty, order, alphas):
        for row in state["tuning"]:
            if row.get("penalty") == penalty and row["order"] == order:
                return row
        while args.tuning_from:  # another sweep process tunes: wait for its row
            other = json.loads(Path(args.tuning_from).read_text())
            for row in other["tuning"]:
                if (row.get("penalty") == penalty or row.get("model") == "MKN") and row["order"] == order:
                    if row not in state["tuning"]:
                        state["tuning"].append(row)
            state["alpha"].update(other["alpha"])
            for row in state["tuning"]:
                if row.get("penalty") == penalty and row["order"] == order:
                    return row
            time.sleep(30)
        start = time.time()
        result = tune_loglinear(tune_train, tune_valid, vocabulary, order=order, penalty=penalty, lams=lams,
                                alphas=alphas, tol=args.tol, max_iter=args.max_iter, settings=settings,
                                stop_past_minimum=True,
                                report=lambda r: print(f"   tune {penalty} order {order} alpha {r['alpha']:g} lam {r['lam']:.4g}: "
                                                       f"{r['perplexity']:.2f} ({r['iterations']} its, converged "
                                                       f"{r['converged']}, {r['cpu_seconds']:.1f} cpu-s)", flush=True))
        row = {**result.to_dict(), "wall_seconds": time.time() - start, "load": os.getloadavg()[0]}
        if len(lams) and row["order"] != order:
            raise AssertionError
        if (mkn := [r for r in state["tuning"] if r.get("model") == "MKN" and r["order"] == order]) == [] and order <= 10:
            model = ModifiedKneserNey(order=order).fit_ids(*tune_train, vocabulary).model_
            state["tuning"].append({"model": "MKN", "order": order, "perplexity": model.perplexity(tune_valid)})
        state["tuning"].append(row)
        save()
        print(f"tuned {penalty} order {order}: lam {row['lam']:.4g} alpha {row['alpha']:g} valid {row['perplexity']:.2f} "
              f"(lam interior {row['lam_interior']}, alpha interior {row['alpha_interior']})", flush=True)
        return row

    # α of each weighted penalty: jointly with λ at the reference order, then fixed (the paper gives one α per penalty)
    for penalty in args.penalties:
        if penalty.startswith("w") and penalty not in state["alpha"] and not args.tuning_from:
            alphas = [float(a) for a in args.alphas.split(",")] if args.alphas else None
            state["alpha"][penalty] = tuned(penalty, args.alpha_order, alphas)["alpha"]
            save()
    runs = train_subsets(max(args.subsets) + 1)
    for k in args.subsets:
        vocabulary_k, train, held = encode(*runs[k])
        print(f"subset {k}: {int(train[1].sum())} train words, {int(held[1].sum())} test words, {len(vocabulary_k)} types", flush=True)
        for order in args.orders:
            for name, cls in (("MKN", ModifiedKneserNey), ("KN", InterpolatedKneserNey)):
                if any(c["subset"] == k and c["order"] == order and c["model"] == name for c in state["cells"]):
                    continue
                kn_order = min(order, 10)  # varorder.lm's largest order
                model = cls(order=kn_order).fit_ids(*train, vocabulary_k).model_
                state["cells"].append({"subset": k, "order": order, "model": name, "kn_order": kn_order,
                                       "perplexity": model.perplexity(held)})
                save()
            for penalty in args.penalties:
                if any(c["subset"] == k and c["order"] == order and c["model"] == penalty for c in state["cells"]):
                    continue
                alphas = [state["alpha"][penalty]] if penalty.startswith("w") and penalty in state["alpha"] else None
                setting = tuned(penalty, order, alphas)
                start, cpu = time.time(), time.process_time()
                fit = StructuredLogLinear(order=order, penalty=penalty, lam=setting["lam"], alpha=setting["alpha"], epochs=0,
                                          polish=args.max_iter, solver=SolverOptions(polish_tol=args.tol),
                                          **settings).fit_ids(*train, vocabulary_k)
                cell = {"subset": k, "order": order, "model": penalty, "lam": setting["lam"], "alpha": setting["alpha"],
                        "perplexity": fit.model_.perplexity(held), "iterations": len(fit.polish_history_) - 1,
                        "converged": fit.polish_converged_, "objective": fit.objective_, "residual": fit.polish_residual_,
                        "parameters": fit.model_.n_parameters(), "trie_weights": fit.model_.trie.n_params,
                        "cpu_seconds": time.process_time() - cpu, "wall_seconds": time.time() - start,
                        "load": os.getloadavg()[0]}
                state["cells"].append(cell)
                save()
                kn = {c["model"]: c["perplexity"] for c in state["cells"] if c["subset"] == k and c["order"] == order
                      and c["model"] in ("MKN", "KN")}
                print(f"  subset {k} order {order} {penalty} (lam {cell['lam']:.4g}, alpha {cell['alpha']:g}): "
                      f"{cell['perplexity']:.2f} (MKN {kn['MKN']:.2f}, KN {kn['KN']:.2f}; {cell['iterations']} its, "
                      f"converged {cell['converged']}, {cell['cpu_seconds']:.0f} cpu-s, load {cell['load']:.1f})", flush=True)


def sweep_state_from_results(document):
    """The ``sweep`` state (tuning rows with their grids, validation MKN, α, cells) held in the
    ``details`` of a results file that ``report`` wrote, so a sweep resumes from the committed
    results: every tuned λ / α and every measured cell is reused, nothing is refitted."""
    details = document["details"]
    tuning = [{**row, "grid": details["tuning_grids"][f"{row['penalty']}-{row['order']}"]} for row in details["tuning"]]
    mkn = [{"model": "MKN", "order": int(order), "perplexity": value} for order, value in details["tuning_mkn_valid"].items()]
    return {"tuning": mkn + tuning, "cells": list(details["cells"]), "alpha": dict(details["alpha"])}


SWEEP_NAMES = {"l1": "ℓ1", "l2sq": "ℓ2²", "lt2": "ℓT2", "wlt2": "wℓT2"}


def sweep_table(state, subsets=None):
    """The mean perplexity over one set of subsets at every order shown: the orders that the
    ``subsets`` (default: every subset with a complete order, if they share one, else the first
    subset) have complete (every model), and the subsets that have all those orders — so a row
    never mixes subsets across orders — plus the orders that only some models reached on all
    those subsets (the others blank: absent from the table). Returns
    ``(table {(model, order): mean}, orders, models, subsets)``."""
    cells = state["cells"]
    models = [m for m in ("MKN", "KN", "l1", "l2sq", "lt2", "wlt2") if any(c["model"] == m for c in cells)]
    have = {}
    for c in cells:
        have.setdefault((c["subset"], c["order"]), set()).add(c["model"])
    complete = {(k, o) for (k, o), ms in have.items() if set(models) <= ms}
    all_subsets = sorted({k for k, _ in complete})
    lead = all_subsets[:1] if subsets is None else subsets
    if subsets is None and any(all((j, o) in complete for j in all_subsets) for _, o in complete):
        lead = all_subsets  # every subset measured, at the orders they all have complete
    orders = sorted({o for k, o in complete if k in lead and all((j, o) in complete for j in lead)})
    chosen = [k for k in all_subsets if all((k, o) in complete for o in orders)] if subsets is None else list(subsets)
    # orders measured for only some penalties (a partial sweep): shown with the models that every
    # chosen subset has there, the others left blank
    orders = sorted(set(orders) | {o for (k, o), ms in have.items() if k in chosen and {"MKN", "KN"} < ms
                                   and all({"MKN", "KN"} <= have.get((j, o), set()) for j in chosen)})
    table = {}
    for m in models:
        for o in orders:
            if chosen and all(m in have.get((k, o), set()) for k in chosen):
                values = [c["perplexity"] for c in cells if c["model"] == m and c["order"] == o and c["subset"] in chosen]
                table[m, o] = float(np.mean(values))
    return table, orders, models, chosen


def shape_verdicts(table, orders):
    """The issue's shape checks on the subset means: ℓ1 / ℓ2² degrade after a low order (best at
    order ≤ 4 and the largest order > 0.5 % worse than the best); ℓT2 and wℓT2 do not (largest order
    within 0.5 % of the best), and wℓT2 improves to at least order 6 (order 6 below every lower
    order): both must hold for wℓT2."""
    out = {}
    for m in ("l1", "l2sq", "lt2", "wlt2"):
        series = {o: table[m, o] for o in orders if (m, o) in table}
        if len(series) < 2:
            continue
        best = min(series, key=series.get)
        last = max(series)
        rise = series[last] / series[best] - 1.0
        if m in ("l1", "l2sq"):
            ok = best <= 4 and rise > 0.005
            text = f"best at order {best}, order {last} {100 * rise:+.1f} % from it"
        elif m == "lt2":
            ok = rise <= 0.005
            text = f"best at order {best}, order {last} {100 * rise:+.1f} % from it"
        else:
            lower = [o for o in series if o < 6]
            improves = all(series[6] < series[o] for o in lower) if 6 in series else None  # None: order 6 not measured
            ok = None if improves is None else improves and rise <= 0.005
            text = f"best at order {best}; order 6 {series.get(6, float('nan')):.2f} vs lower orders' best " \
                   f"{min((series[o] for o in lower), default=float('nan')):.2f}; order {last} {100 * rise:+.1f} % from the best"
        out[m] = {"reproduced": None if ok is None else bool(ok), "best_order": best, "detail": text}
    return out


def _verdict(v):
    return "not measured" if v["reproduced"] is None else "reproduced" if v["reproduced"] else "NOT reproduced"


def cmd_report(args):
    """Markdown table, shape verdicts and the schema-1 results file of a ``sweep`` JSON."""
    state = json.loads(Path(args.sweep).read_text())
    table, orders, models, chosen = sweep_table(state)
    used = {o: chosen for o in orders}
    print(f"mean over subsets {chosen}:\n")
    print("| model | " + " | ".join(str(o) for o in orders) + " |")
    print("|---|" + "---:|" * len(orders))
    for m in models:
        print(f"| {SWEEP_NAMES.get(m, m)} | " + " | ".join(f"{table[m, o]:.2f}" if (m, o) in table else "" for o in orders) + " |")
    per_subset = {}
    for k in sorted({c["subset"] for c in state["cells"]}):
        t, o_k, _, _ = sweep_table(state, [k])
        if not o_k:
            continue
        per_subset[k] = (t, o_k)
        print(f"\nsubset {k}:\n")
        print("| model | " + " | ".join(str(o) for o in o_k) + " |")
        print("|---|" + "---:|" * len(o_k))
        for m in models:
            print(f"| {SWEEP_NAMES.get(m, m)} | " + " | ".join(f"{t[m, o]:.2f}" if (m, o) in t else "" for o in o_k) + " |")
        for m, v in shape_verdicts(t, o_k).items():
            print(f"subset {k} {SWEEP_NAMES[m]}: shape {_verdict(v)} ({v['detail']})")
    tuning = [r for r in state["tuning"] if "penalty" in r]
    print("\n| penalty | order | λ | α | λ grid measured | interior | valid ppl | MKN valid |")
    print("|---|---:|---:|---:|---|---|---:|---:|")
    mkn_valid = {r["order"]: r["perplexity"] for r in state["tuning"] if r.get("model") == "MKN"}
    for r in sorted(tuning, key=lambda r: (r["penalty"], r["order"])):
        print(f"| {SWEEP_NAMES[r['penalty']]} | {r['order']} | {r['lam']:.4g} | {r['alpha']:g} | "
              f"{', '.join(f'{x:.3g}' for x in r['lams'])} | {r['lam_interior'] and r['alpha_interior']} | "
              f"{r['perplexity']:.2f} | " + (f"{mkn_valid[r['order']]:.2f}" if r["order"] in mkn_valid else "–") + " |")
    verdicts = shape_verdicts(table, orders)
    print()
    for m, v in verdicts.items():
        print(f"{SWEEP_NAMES[m]}: shape {_verdict(v)} ({v['detail']})")
    print("\n| penalty | order | perplexity | KN | MKN | beats KN | beats MKN |")
    print("|---|---:|---:|---:|---:|---|---|")
    rows = []
    for m in models:
        if m in ("MKN", "KN"):
            continue
        for o in orders:
            if (m, o) not in table:
                continue
            kn, mkn = table["KN", o], table["MKN", o]
            print(f"| {SWEEP_NAMES[m]} | {o} | {table[m, o]:.2f} | {kn:.2f} | {mkn:.2f} | "
                  f"{'yes' if table[m, o] < kn else 'no'} | {'yes' if table[m, o] < mkn else 'no'} |")
            cells = [c for c in state["cells"] if c["model"] == m and c["order"] == o and c["subset"] in used[o]]
            rows.append({"system": f"{SWEEP_NAMES[m]}, λ (and α) tuned as §6, converged eq. 2",
                         "task": f"PTB-train 100K/20K subsets {used[o]} (mean), order {o}"
                                 + (" (KN at order 10, varorder.lm's largest)" if o > 10 else ""),
                         "metric": "test perplexity", "varorder": round(table[m, o], 2), "reference": round(kn, 2),
                         "reference_name": "interpolated KN, one discount per order (varorder.lm)",
                         "ratio": round(table[m, o] / kn, 4), "better": "lower",
                         "note": f"MKN {mkn:.2f}; λ {cells[0]['lam']:.3g}, α {cells[0]['alpha']:g}; "
                                 f"outperforms KN: {'yes' if table[m, o] < kn else 'no'}, "
                                 f"MKN: {'yes' if table[m, o] < mkn else 'no'}"})
    if args.results:
        loads = [c["load"] for c in state["cells"] if "load" in c]
        document = {
            "schema": 1, "area": "n-gram LMs",
            "title": "Log-linear LMs tuned as Nelakanti et al. §6 (λ by CV on 30K/10K, α on its validation words, "
                     "every fit converged) on 100K/20K PTB-train subsets, vs KN and MKN",
            "issue": 30, "command": args.sweep_command, "date": time.strftime("%Y-%m-%d"),
            "machine": {"cpu": args.cpu, "cores": os.cpu_count(),
                        "load": f"{min(loads):.1f}-{max(loads):.1f} (quality figures, not timed)" if loads else "n/a"},
            "rows": rows,
            "details": {"shape": verdicts, "alpha": state["alpha"], "subsets": chosen,
                        "shape_per_subset": {str(k): shape_verdicts(t, o_k) for k, (t, o_k) in per_subset.items()},
                        "tuning": [{k: v for k, v in r.items() if k != "grid"} for r in tuning],
                        "tuning_grids": {f"{r['penalty']}-{r['order']}": r["grid"] for r in tuning},
                        "tuning_mkn_valid": mkn_valid,
                        "cells": state["cells"]},
        }
        Path(args.results).write_text(json.dumps(document, indent=1, ensure_ascii=False) + "\n")
        print(f"wrote {args.results}")


def tuned_settings(path, penalty, args):
    """{order: (λ, α)} of the lowest validation perplexity in a ``tune`` JSON, among the rows
    trained like this run (same optimizer, epochs and, for AdaGrad, learning rate)."""
    best = {}
    for row in json.loads(Path(path).read_text()):
        same = (row.get("optimizer") == args.optimizer and row.get("epochs") == args.epochs
                and row.get("average", False) == args.average
                and row.get("weighting", "groups") == args.weighting and row.get("restart", "none") == args.restart
                and row.get("free_root", False) == args.free_root and row.get("polish", 0) == args.polish
                and (args.optimizer != "adagrad" or row.get("learning_rate") == args.learning_rate)
                and (args.optimizer != "apg" or row.get("lipschitz_scale", 1.0) == args.lipschitz_scale))
        if row["model"] == penalty and same:
            if row["order"] not in best or row["perplexity"] < best[row["order"]]["perplexity"]:
                best[row["order"]] = row
    return {order: (row["lam"], row["alpha"]) for order, row in best.items()}


def cmd_perplexity(args):
    if args.full:  # all of PTB train, evaluated on all of PTB valid
        train_runs, eval_runs = [_sentences(DATA / "ptb.train.txt.gz")], [_sentences(DATA / "ptb.valid.txt.gz")]
        args.subsets = [0]
    else:
        train_runs, eval_runs = subsets(max(args.subsets) + 1)
    lams = dict(item.split("=") for item in args.lam.split(",")) if args.lam else {}
    alphas = dict(item.split("=") for item in args.alpha.split(",")) if args.alpha else {}
    results = json.loads(Path(args.json).read_text()) if args.json and Path(args.json).exists() and args.append else []
    for k in args.subsets:
        vocabulary, train, held = encode(train_runs[k], eval_runs[k])
        print(f"subset {k}: {int(train[1].sum())} train words, {int(held[1].sum())} eval words, {len(vocabulary)} types")
        for order in args.orders:
            if order <= 10:
                for name, estimator in (("MKN", ModifiedKneserNey(order=order)), ("KN", InterpolatedKneserNey(order=order))):
                    model = estimator.fit_ids(*train, vocabulary).model_
                    results.append({"subset": "full" if args.full else k, "order": order, "model": name, "perplexity": model.perplexity(held),
                                    "parameters": int(sum(model.ngram_counts))})
                    print(f"  order {order} {name}: {results[-1]['perplexity']:.2f}", flush=True)
            for penalty in args.penalties:
                lam, alpha = float(lams.get(penalty, 0.3)), alphas.get(penalty)
                alpha = None if alpha is None else float(alpha)
                if args.tuned:
                    settings = tuned_settings(args.tuned, penalty, args)
                    if order not in settings:  # the nearest tuned order
                        nearest = min(settings, key=lambda o: (abs(o - order), -o))
                        settings[order] = settings[nearest]
                    lam, alpha = settings[order]
                start = time.perf_counter()
                cpu = time.process_time()
                estimator = fit_loglinear(args, order, penalty, lam, vocabulary, train, alpha)
                model = estimator.model_
                row = {"subset": "full" if args.full else k, "order": order, "model": penalty, "lam": lam, "alpha": estimator.alpha_,
                       "optimizer": args.optimizer, "mu": args.mu, "epochs": args.epochs, "learning_rate": args.learning_rate,
                       "lipschitz_scale": args.lipschitz_scale, "average": args.average,
                       "weighting": args.weighting, "restart": args.restart, "free_root": args.free_root,
                       "polish": args.polish, "polish_history": estimator.polish_history_,
                       "polish_residual": estimator.polish_residual_,
                       "perplexity": model.perplexity(held), "objective": estimator.objective_,
                       "parameters": model.n_parameters(), "collapsed_parameters": model.n_parameters(collapsed=True),
                       "trie_weights": model.trie.n_params, "train_loss": estimator.history_,
                       "seconds": time.perf_counter() - start, "cpu_seconds": time.process_time() - cpu,
                       "prox_seconds": estimator.prox_seconds_, "load": os.getloadavg()[0]}
                results.append(row)
                print(f"  order {order} {penalty} ({args.optimizer}, lam {lam:g}): {row['perplexity']:.2f}, "
                      f"{row['parameters']} non-zero / {row['trie_weights']} weights, {row['collapsed_parameters']} collapsed, "
                      f"{row['seconds']:.0f} s (load {row['load']:.1f})", flush=True)
                if args.json:
                    Path(args.json).write_text(json.dumps(results, indent=1))
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))


def cmd_gap(args):
    """Where on the evaluation tokens the log-linear model loses to modified Kneser-Ney: tokens
    bucketed by the longest n-gram (context suffix + word) seen in training and its count; per
    bucket the mean of ln p_MKN − ln p_loglinear (> 0: MKN better) and its share of the total
    gap (the buckets' contributions sum to ln(perplexity ratio))."""
    train_runs, eval_runs = subsets(args.subset + 1)
    vocabulary, train, held = encode(train_runs[args.subset], eval_runs[args.subset])
    mkn = ModifiedKneserNey(order=args.order).fit_ids(*train, vocabulary).model_
    estimator = fit_loglinear(args, args.order, args.penalty, args.lam, vocabulary, train, args.alpha)
    log_mkn = mkn.token_log10probs(*held)[0] * np.log(10.0)
    log_ll = estimator.model_.token_log10probs(*held)[0] * np.log(10.0)

    def padded(ids, lengths):
        out, start = [], 0
        for n in lengths:
            out.append([vocabulary.bos_id] + list(ids[start:start + n]) + [vocabulary.eos_id])
            start += n
        return out

    seen = {}
    for sentence in padded(*train):
        for i in range(1, len(sentence)):
            for n in range(1, args.order + 1):
                if i - n + 1 < 0:
                    break
                key = tuple(sentence[i - n + 1:i + 1])
                seen[key] = seen.get(key, 0) + 1
    buckets = {}
    token = 0
    for sentence in padded(*held):
        for i in range(1, len(sentence)):
            longest, count = 0, 0
            for n in range(1, args.order + 1):
                if i - n + 1 < 0 or tuple(sentence[i - n + 1:i + 1]) not in seen:
                    break
                longest, count = n, seen[tuple(sentence[i - n + 1:i + 1])]
            key = (longest, min(count, 3))
            buckets.setdefault(key, []).append(log_mkn[token] - log_ll[token])
            token += 1
    total = float(np.sum(log_mkn - log_ll))
    print(f"subset {args.subset}, order {args.order}: MKN {np.exp(-log_mkn.mean()):.2f}, {args.penalty} "
          f"{np.exp(-log_ll.mean()):.2f} (λ {args.lam:g}, α {estimator.alpha_:g}); {token} tokens; "
          f"ln ratio {total / token:+.5f}")
    print("| longest seen n-gram | its count | tokens | share | mean ln p_MKN − ln p_LL | share of the gap |")
    print("|---:|---:|---:|---:|---:|---:|")
    rows = []
    for (n, c), values in sorted(buckets.items()):
        rows.append({"n": n, "count": c, "tokens": len(values), "mean": float(np.mean(values)), "sum": float(np.sum(values))})
        print(f"| {n} | {'3+' if c == 3 else c} | {len(values)} | {len(values) / token:.1%} | {np.mean(values):+.4f} | "
              f"{np.sum(values) / total:+.1%} |")
    if args.json:
        Path(args.json).write_text(json.dumps({"subset": args.subset, "order": args.order, "lam": args.lam,
                                               "alpha": estimator.alpha_, "mkn": float(np.exp(-log_mkn.mean())),
                                               "loglinear": float(np.exp(-log_ll.mean())), "buckets": rows}, indent=1))


def interleaved_times(functions: dict, repeat: int) -> tuple[dict, dict]:
    """Best wall-clock and per-process CPU seconds of each function over ``repeat``
    interleaved rounds (one call of each per round, after one warm-up call each)."""
    timing = harness.interleaved(functions, repeat, alternate=False)
    return ({name: timing.best(name, "wall") for name in functions},
            {name: timing.best(name, "cpu") for name in functions})


def prox_case(ids, lengths, vocabulary, depth, lam):
    """The ℓT∞ prox input of a real trie: weights = log(1 + n-gram count) scaled, constant on
    chains whose longer contexts always co-occur (as an ℓT∞ solution is, Prop. 1)."""
    trie, positions, targets = build_trie(ids, lengths, depth + 1, len(vocabulary), vocabulary.bos_id, vocabulary.eos_id)
    values = np.log1p(ngram_counts(trie, positions, targets).astype(float))
    collapsed, counts, cparent, _, _ = P.collapse_chains(values, trie.param_parent)
    return trie, values, collapsed, counts, cparent


def cmd_prox_time(args):
    train_runs, _ = subsets(1)
    rows = []
    all_train = _sentences(DATA / "ptb.train.txt.gz")
    for label, sentences, depths in (
        ("depth", train_runs[0], args.depths),
        *((f"size{n}", word_runs(all_train, n, 1)[0], [args.size_depth]) for n in args.sizes),
    ):
        vocabulary, train, _ = encode(sentences, [])
        for depth in depths:
            trie, values, collapsed, counts, cparent = prox_case(*train, vocabulary, depth, args.lam)
            timings, cpu = interleaved_times({
                "rand-pivot": lambda: P.prox_tree_linf_pivot(values, trie.param_parent, args.lam),
                "rand-pivot-col": lambda: P.prox_tree_linf_collapsed(collapsed, counts, cparent, args.lam),
                "k-best-heap": lambda: P.prox_tree_linf_heap(collapsed, cparent, args.lam, counts=counts),
                "tree-l2": lambda: P.prox_tree_l2(values, trie.param_parent, args.lam),
            }, args.repeat)
            row = {"series": label, "train_words": int(train[1].sum()), "depth": depth, "trie_nodes": trie.n_params,
                   "collapsed_nodes": len(collapsed), **timings, "cpu": cpu, "load": os.getloadavg()[0]}
            rows.append(row)
            print(f"{label} words {row['train_words']} depth {depth}: trie {trie.n_params} nodes, collapsed {len(collapsed)}; "
                  + ", ".join(f"{k} {v * 1e3:.1f} ms (cpu {cpu[k] * 1e3:.1f})" for k, v in timings.items())
                  + f"; pivot/pivot-col cpu ratio {cpu['rand-pivot'] / cpu['rand-pivot-col']:.2f}, "
                  f"pivot-col/heap {cpu['rand-pivot-col'] / cpu['k-best-heap']:.2f} (load {row['load']:.1f})", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))


def cmd_plot(args):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    results = [r for r in load_results(args.results) if args.subsets is None or r["subset"] in args.subsets]
    prox_rows = json.loads(Path(args.prox).read_text()) if args.prox else []
    fig, axes = plt.subplots(1, 3 if prox_rows else 2, figsize=(16 if prox_rows else 10.5, 4.4))
    labels = sorted({_label(r) for r in results}, key=lambda m: (m not in ("KN", "MKN"), m))
    for label in labels:
        rows = [r for r in results if _label(r) == label]
        orders = sorted({r["order"] for r in rows})
        mean = [np.mean([r["perplexity"] for r in rows if r["order"] == o]) for o in orders]
        params = [np.mean([r["collapsed_parameters"] if "ltinf" in label else r["parameters"]
                           for r in rows if r["order"] == o]) for o in orders]
        style = "--" if label in ("KN", "MKN") else "-"
        axes[0].plot(orders, mean, style, marker="o", label=label)
        axes[1].plot(orders, params, style, marker="o", label=label)
    subsets_used = sorted({r["subset"] for r in results})
    axes[0].set(xlabel="order", ylabel="perplexity", title=f"PTB 100K train / 20K valid, subsets {subsets_used}")
    axes[1].set(xlabel="order", ylabel="parameters", title="non-zero weights (ltinf: collapsed nodes); KN: n-grams")
    axes[0].legend(fontsize=8)
    axes[1].legend(fontsize=8)
    from matplotlib.ticker import MaxNLocator

    for axis in axes:
        axis.xaxis.set_major_locator(MaxNLocator(integer=True))
    if prox_rows:
        rows = [r for r in prox_rows if r["series"] == "depth"]
        for key in ("rand-pivot", "rand-pivot-col", "k-best-heap", "tree-l2"):
            axes[2].plot([r["depth"] for r in rows], [r["cpu"][key] * 1e3 for r in rows], marker="o", label=key)
        axes[2].set(xlabel="tree depth", ylabel="CPU ms per proximal step", title="prox time, 100K words")
        axes[2].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(args.output, dpi=110)
    print(f"wrote {args.output}")


def _label(row):
    if row["model"] in ("KN", "MKN"):
        return row["model"]
    extras = [row["optimizer"]]
    if row.get("average"):
        extras.append("averaged")
    if row["model"].startswith("w"):
        extras.append(f"α {row['alpha']:g} as " + ("feature values" if row.get("weighting") == "features" else "group weights"))
    if row.get("free_root"):
        extras.append("free root")
    if row.get("restart", "none") != "none":
        extras.append(f"restart {row['restart']}")
    if row.get("polish"):
        extras.append("FISTA-polished")
    return f"{row['model']} ({', '.join(extras)})"


def load_results(paths):
    rows = []
    for path in paths:
        rows.extend(json.loads(Path(path).read_text()))
    seen, unique = set(), []
    for row in rows:  # KN rows repeat across runs on the same data
        key = (_label(row), row["subset"], row["order"])
        if key not in seen:
            seen.add(key)
            unique.append(row)
    return unique


def cmd_table(args):
    rows = [r for r in load_results(args.results) if args.subsets is None or r["subset"] in args.subsets]
    if args.orders:
        rows = [r for r in rows if r["order"] in args.orders]
    orders = sorted({r["order"] for r in rows})
    labels = sorted({_label(r) for r in rows}, key=lambda m: (m not in ("KN", "MKN"), m))
    print("| model | " + " | ".join(str(o) for o in orders) + " |")
    print("|---|" + "---:|" * len(orders))
    for label in labels:
        cells = []
        for o in orders:
            values = [r["perplexity"] for r in rows if _label(r) == label and r["order"] == o]
            cells.append(f"{np.mean(values):.1f}" if values else "")
        print(f"| {label} | " + " | ".join(cells) + " |")
    print()
    print("| model | " + " | ".join(str(o) for o in orders) + " |  (parameters: non-zero weights; n-grams for KN)")
    print("|---|" + "---:|" * len(orders))
    for label in labels:
        cells = []
        for o in orders:
            values = [r["parameters"] for r in rows if _label(r) == label and r["order"] == o]
            extra = [r["collapsed_parameters"] for r in rows if _label(r) == label and r["order"] == o and "collapsed_parameters" in r]
            cell = f"{int(np.mean(values)):,}" if values else ""
            if extra and "ltinf" in label:
                cell += f" ({int(np.mean(extra)):,} collapsed)"
            cells.append(cell)
        print(f"| {label} | " + " | ".join(cells) + " |")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)

    def training(p):
        p.add_argument("--epochs", type=int, default=10)
        p.add_argument("--optimizer", choices=["apg", "adagrad"], default="apg")
        p.add_argument("--learning-rate", type=float, default=1.0)
        p.add_argument("--lipschitz-scale", type=float, default=1.0)
        p.add_argument("--mu", type=float, default=1e-5, help="apg: gamma = L + mu / delta (Algorithm 1)")
        p.add_argument("--average", action="store_true", help="mean of the last epoch's iterates (extension)")
        p.add_argument("--weighting", choices=["features", "groups"], default="features",
                       help="alpha^depth as feature values (the paper) or as group weights of the penalty (extension)")
        p.add_argument("--free-root", action="store_true", help="leave the unigram (root) weights unpenalised (extension)")
        p.add_argument("--restart", choices=["none", "epoch"], default="none", help="apg: restart the acceleration each epoch")
        p.add_argument("--polish", type=int, default=0,
                       help="then at most this many full-batch FISTA iterations on the same objective (extension)")
        p.add_argument("--polish-tol", type=float, default=1e-9, help="stop polishing below this relative decrease")
        p.add_argument("--seed", type=int, default=0)
        p.add_argument("--json")

    t = sub.add_parser("tune")
    t.add_argument("--orders", type=lambda s: [int(x) for x in s.split(",")], default=[3])
    t.add_argument("--penalty", default="wlt2")
    t.add_argument("--lams", default="0.03,0.1,0.3,1")
    t.add_argument("--alphas", default="", help="depth weights α to try [the paper's best for the penalty]")
    t.add_argument("--split", choices=["30k", "100k"], default="30k", help="see tuning_split()")
    training(t)
    p = sub.add_parser("perplexity")
    p.add_argument("--subsets", type=lambda s: [int(x) for x in s.split(",")], default=[0])
    p.add_argument("--orders", type=lambda s: [int(x) for x in s.split(",")], default=list(range(2, 10)))
    p.add_argument("--penalties", type=lambda s: s.split(","), default=["wlt2"])
    p.add_argument("--lam", default="", help="per penalty, against the summed log-loss, e.g. wlt2=0.3,l2sq=0.1 [0.3]")
    p.add_argument("--alpha", default="", help="per penalty, e.g. wlt2=1.25 [the paper's best α]")
    p.add_argument("--tuned", help="a tune JSON: per order, the (λ, α) of its lowest validation perplexity "
                   "(the nearest tuned order for the others); overrides --lam")
    p.add_argument("--append", action="store_true", help="add to the rows already in --json")
    p.add_argument("--full", action="store_true", help="train on all of PTB train, evaluate on all of PTB valid")
    training(p)
    d = sub.add_parser("gap", help="bucket the evaluation tokens' log-loss gap to MKN by the longest seen n-gram")
    d.add_argument("--subset", type=int, default=0)
    d.add_argument("--order", type=int, default=4)
    d.add_argument("--penalty", default="wlt2")
    d.add_argument("--lam", type=float, default=0.3)
    d.add_argument("--alpha", type=float, default=None)
    training(d)
    x = sub.add_parser("prox-time")
    x.add_argument("--depths", type=lambda s: [int(v) for v in s.split(",")], default=[1, 2, 3, 4, 6, 8, 10, 12])
    x.add_argument("--sizes", type=lambda s: [int(v) for v in s.split(",")], default=[100_000, 200_000, 400_000, 800_000])
    x.add_argument("--size-depth", type=int, default=6)
    x.add_argument("--lam", type=float, default=0.5)
    x.add_argument("--repeat", type=int, default=3)
    x.add_argument("--json")
    w = sub.add_parser("sweep", help="issue #30: tune on 30K/10K of PTB train, then 4 x 100K/20K PTB-train subsets")
    w.add_argument("--subsets", type=lambda s: [int(x) for x in s.split(",")], default=[0, 1, 2, 3])
    w.add_argument("--orders", type=lambda s: [int(x) for x in s.split(",")], default=[2, 3, 4, 6, 9, 12])
    w.add_argument("--penalties", type=lambda s: s.split(","), default=["l1", "l2sq", "lt2", "wlt2"])
    w.add_argument("--lams", default="", help="the λ grid [varorder.loglinear.tune.DEFAULT_LAMS]")
    w.add_argument("--alpha-order", type=int, default=4, help="order at which a weighted penalty's α is tuned")
    w.add_argument("--alphas", default="", help="the α grid of a weighted penalty [varorder.loglinear.tune.default_alphas]")
    w.add_argument("--weighting", choices=["features", "groups"], default="features")
    w.add_argument("--tol", type=float, default=1e-6, help="relative objective decrease at which a fit stops")
    w.add_argument("--max-iter", type=int, default=20000)
    w.add_argument("--tuning-from", help="take λ and α from another sweep's JSON (waiting for them), tuning nothing")
    w.add_argument("--json", required=True)
    w.add_argument("--resume", help="a results file written by `report`: start from its tuning and cells when --json does not exist")
    r = sub.add_parser("report", help="tables, shape verdicts and the results file of a sweep JSON")
    r.add_argument("sweep")
    r.add_argument("--results", help="write the schema-1 results file here")
    r.add_argument("--sweep-command", default="", help="the sweep's command line, recorded in the results file")
    r.add_argument("--cpu", default="AMD EPYC")
    g = sub.add_parser("plot")
    g.add_argument("results", nargs="+", help="perplexity JSON files")
    g.add_argument("--prox", help="prox-time JSON")
    g.add_argument("-o", "--output", required=True)
    g.add_argument("--subsets", type=lambda s: [int(x) for x in s.split(",")], help="only these subsets (mean over them)")
    b = sub.add_parser("table")
    b.add_argument("results", nargs="+")
    b.add_argument("--subsets", type=lambda s: [int(x) for x in s.split(",")], help="only these subsets (mean over them)")
    b.add_argument("--orders", type=lambda s: [int(x) for x in s.split(",")], help="only these orders")
    args = parser.parse_args()
    {"tune": cmd_tune, "perplexity": cmd_perplexity, "prox-time": cmd_prox_time, "plot": cmd_plot,
     "table": cmd_table, "gap": cmd_gap, "sweep": cmd_sweep,
     "report": cmd_report}[args.command](args)


if __name__ == "__main__":
    main()
