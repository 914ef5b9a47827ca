"""Runtime and accuracy of inference over strings (Cotterell & Eisner 2015, Fig. 3 / Fig. 4).

For each synthetic lexicon size (observed words) and each method — penalized EP by
proximal gradient (``pep-prox``, the paper's method, §6.1 and §7: the default and the
first row), pruned BP (k = 20), EP with unigram / bigram / trigram families, and our
closed-form PEP with greedy growing (``pep``, an extension: labelled PEP-greedy) — record
inference seconds, the mean negated log-probability of the gold underlying forms under
the beliefs (each capped at 50 nats: a pruned belief gives 0 to strings outside its
support), 1-best accuracy, and belief sizes. ``--lambdas`` sweeps λ of ``--sweep-method``
(default pep-prox, the paper's; Fig. 4's trade-off).

    PYTHONPATH=src python benchmarks/papers/strings_pep.py --sizes 100 200 300 --methods pep-prox bp ep1 ep2 ep3 pep \
        --lambdas 0.003 0.03 0.1 --alphabet-size 16 -o docs/figures/strings/results.json
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

from varorder.strings.inference import PROX_PENALTIES, UNIGRAM_STARTS, belief_nll, make_method
from varorder.strings.model import synthetic_lexicon


def run(size, method, args, lam=None, growth_rounds=None):
    graph = synthetic_lexicon(size, seed=args.seed, alphabet_size=args.alphabet_size)
    if lam is None:
        lam = args.prox_lam if method == "pep-prox" else args.lam
    rounds = args.growth_rounds if growth_rounds is None else growth_rounds
    estimator = make_method(method, k=args.k, lam=lam, eta=args.eta, iterations=args.iterations,
                            inner_passes=args.inner_passes, growth_rounds=rounds, greedy_floor=args.greedy_floor,
                            damping=not args.no_damping, cavity_contexts=not args.drop_cavity_contexts,
                            prox_penalty=args.prox_penalty, prox_steps=args.prox_steps,
                            unigram_start=args.unigram_start, passes_sweeps=args.passes_sweeps)
    started, cpu = time.perf_counter(), time.process_time()
    estimator.fit(graph)
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
    scores = belief_nll(estimator.beliefs_, graph.gold)
    label = estimator.beliefs_.method + (f"×{rounds} rounds" if method == "pep" and rounds is not None else "")
    if method == "pep-prox":
        label += f" η={args.eta:g}" if args.eta != 0.05 else ""
        label += f" ×{args.prox_steps} steps" if args.prox_steps != 1 else ""
        label += " [closed-form unigram start]" if args.unigram_start == "closed-form" else ""
    label += f" {args.iterations} sweeps" if args.iterations != 3 else ""
    label += " [no damping]" if args.no_damping else ""
    label += " [cavity contexts dropped]" if args.drop_cavity_contexts and method == "pep" else ""
    row = {"size": size, "method": method, "label": label, "seconds": round(seconds, 2),
           "cpu_seconds": round(cpu, 2),
           "variables": len(graph.morphemes), "max_degree": max(graph.degree().values()),
           "load": round(os.getloadavg()[0], 2), **{k: v for k, v in scores.items()}}
    stats = estimator.beliefs_.stats
    row.update({k: (round(v, 2) if isinstance(v, float) else v) for k, v in stats.items()})
    row["per_variable"] = {v: round(min(-estimator.beliefs_.score(v, g), 50.0), 4) for v, g in graph.gold.items()}
    row["skipped_at"] = [[it, v, "/".join(map(str, f)), kind] for it, v, f, kind in getattr(estimator, "skipped_", [])]
    if method.startswith("pep"):
        row["mean_features"] = round(sum(estimator.n_features(v) for v in graph.morphemes) / len(graph.morphemes), 1)
    return row


def _load_rows(paths, drop=()) -> dict:
    """(size, label) → row from result JSONs, later files replacing earlier rows."""
    rows = {}
    for path in paths:
        with open(path, encoding="utf-8") as handle:
            document = json.load(handle)
        sweeps = document.get("args", {}).get("iterations", 3)
        for row in document["rows"]:
            if sweeps != 3 and "sweeps" not in row["label"]:  # runs from before the label said so
                row["label"] += f" {sweeps} sweeps"
            if row["label"] not in drop:
                rows[(row["size"], row["label"])] = row
    return rows


def report(paths, plot=None, drop=()):
    """A markdown table (size × method: seconds, NLL, accuracy) from result JSONs; rows of
    the same (size, label) in later files replace earlier ones. ``plot``: Fig. 3-style PNG."""
    rows = _load_rows(paths, drop)
    lines = ["| words | method | wall s | CPU s | NLL of gold (nats) | 1-best acc. | capped | belief size | load |",
             "|---|---|---|---|---|---|---|---|---|"]
    rank = ("PEP-prox", "PEP-greedy", "BP-prune", "EP-3gram", "EP-2gram", "EP-1gram")  # the paper's method first

    def order(item):
        (size, label), _ = item
        return size, next((i for i, prefix in enumerate(rank) if label.startswith(prefix)), len(rank)), label

    for (size, label), row in sorted(rows.items(), key=order):
        size_note = (f"{row['mean_states']:.1f} states" if "mean_states" in row else
                     f"{row['mean_domain']:.1f} strings")
        cpu = f"{row['cpu_seconds']:.1f}" if "cpu_seconds" in row else "–"
        lines.append(f"| {size} | {label} | {row['seconds']:.1f} | {cpu} | {row['nll']:.3f} | {row['accuracy']:.3f} | "
                     f"{row['capped']} | {size_note} | {row['load']:.1f} |")
    print("\n".join(lines))
    if plot:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        from varorder.io._text import umask_mode
        fig, axes = plt.subplots(1, 2, figsize=(9, 3.4))
        labels = sorted({label for _, label in rows})
        for label in labels:
            points = sorted((s, r) for (s, l), r in rows.items() if l == label)
            if len(points) < 2:
                continue
            xs = [s for s, _ in points]
            axes[0].plot(xs, [r.get("cpu_seconds", r["seconds"]) for _, r in points], marker="o", label=label)
            axes[1].plot(xs, [r["nll"] for _, r in points], marker="o", label=label)
        axes[0].set_yscale("log")
        axes[0].set_ylabel("inference CPU seconds")
        axes[1].set_yscale("log")
        axes[1].set_ylabel("mean −log b(gold) (nats)")
        for ax in axes:
            ax.set_xlabel("observed words")
        axes[1].legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(plot, dpi=90)
        os.chmod(plot, umask_mode())


NOTES = {
    "PEP-prox": "paper protocol (§6.1, §7: one proximal step of η 0.05 per message update, λ {lam:g} on the "
                "message, unigram features only on the first sweep, by gradient steps from the uniform unigram model "
                "[start unstated: θ = 0 has Z = ∞]; K = 20 on the first 2 sweeps, then K = 1, 3 sweeps [how many: "
                "unstated]); the paper's Fig. 3: PEP about as accurate as trigram EP (ratio ≈ 1), much faster",
    "PEP-greedy": "extension: closed form with greedy growing (PEP-greedy), λ {lam:g}",
    "EP-3gram": "paper's baseline: EP with the trigram family",
    "EP-2gram": "paper's baseline: EP with the bigram family (the paper: fast, 'terrible accuracy')",
    "EP-1gram": "paper's baseline: EP with the unigram family",
    "BP-prune": "paper's baseline: pruned BP, k = 20 (Cotterell et al. 2015; the paper: PEP faster, about as accurate)",
}


def results_document(paths, command, date, load, main_lam=0.01):
    """Schema-1 rows (docs/tools/summarize_results.py) from result JSONs: NLL and CPU s of every
    method against EP-3gram of the same size (the paper's Fig. 3 comparator), the paper's method
    first; λ-sweep rows (Fig. 4) also give belief states against PEP-prox at ``main_lam``."""
    rows = _load_rows(paths)
    rank = ("PEP-prox", "PEP-greedy", "BP-prune", "EP-3gram", "EP-2gram", "EP-1gram")
    out = []
    for (size, label), row in sorted(rows.items(), key=lambda kv: (
            kv[0][0], next(i for i, p in enumerate(rank) if kv[0][1].startswith(p)), kv[0][1])):
        ep3 = next(r for (s, l), r in rows.items() if s == size and l == "EP-3gram")
        prefix = next(p for p in rank if label.startswith(p))
        lam = float(label.split("λ=")[1].split(")")[0]) if "λ=" in label else None
        note = NOTES[prefix].format(lam=lam if lam is not None else 0)
        sweep = prefix == "PEP-prox" and lam != main_lam
        if "sweeps" in label:
            sweeps = label.rsplit(" ", 2)[-2]
            note = note.replace(", 3 sweeps [how many: unstated]", f", {sweeps} sweeps [how many: unstated]")
        if sweep:
            note = f"Fig. 4 λ sweep: the paper protocol of the PEP-prox(λ={main_lam:g}) row at λ {lam:g}"
        note += f"; 1-best acc {row['accuracy']:.3f}, capped {row['capped']}, belief {row['mean_states']:.1f} states" \
            if "mean_states" in row else f"; 1-best acc {row['accuracy']:.3f}, capped {row['capped']}"
        note += f", load {row['load']}"
        task = f"synthetic lexicon, {size} observed words, seed 0, 16 symbols"
        for metric, key, digits in (("mean −log b(gold), nats (capped at 50)", "nll", 4), ("inference CPU s",
                                                                                          "cpu_seconds", 2)):
            value, reference = round(row[key], digits), round(ep3[key], digits)
            out.append({"system": label, "task": task, "metric": metric, "varorder": value, "reference": reference,
                        "reference_name": "varorder EP-3gram (the paper's Fig. 3 compares PEP to trigram EP)",
                        "ratio": round(value / reference, 3), "better": "lower", "note": note})
        if prefix == "PEP-prox":
            base = next((r for (s, l), r in rows.items() if s == size and l == f"PEP-prox(λ={main_lam:g})"), None)
            if base is not None and sweep:
                out.append({"system": label, "task": task, "metric": "mean belief states (Fig. 4's size axis)",
                            "varorder": round(row["mean_states"], 1), "reference": round(base["mean_states"], 1),
                            "reference_name": f"varorder PEP-prox(λ={main_lam:g}) (the paper's Fig. 4: larger λ, "
                                              "fewer features, accuracy degrading gracefully)",
                            "ratio": round(row["mean_states"] / base["mean_states"], 3), "better": "lower",
                            "note": note})
    return {"schema": 1, "area": "Graphical models over strings",
            "title": "Cotterell & Eisner 2015 Fig. 3/4 with PEP-prox (the paper's method, the default) first",
            "issue": 30, "command": command, "date": date,
            "machine": {"cpu": "AMD EPYC", "cores": 2, "load": load}, "rows": out}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[100, 200, 300])
    parser.add_argument("--methods", nargs="*", default=["pep-prox", "bp", "ep1", "ep2", "ep3", "pep"],
                        help="pep-prox is the paper's method; pep (greedy growing) is an extension")
    parser.add_argument("--lambdas", type=float, nargs="*", default=[], help="extra PEP λ values (sweep)")
    parser.add_argument("--sweep-method", choices=("pep-prox", "pep"), default="pep-prox",
                        help="the method whose λ --lambdas sweeps (pep-prox: the paper's; pep: the extension)")
    parser.add_argument("--lambda-sizes", type=int, nargs="*", default=None, help="sizes for the sweep (default: the first)")
    parser.add_argument("--lam", type=float, default=0.01, help="λ of pep (greedy growing)")
    parser.add_argument("--prox-lam", type=float, default=0.01, help="λ of pep-prox (the paper's 0.01)")
    parser.add_argument("--prox-penalty", choices=PROX_PENALTIES, default="message",
                        help="pep-prox: penalise the message θ_{F→V} (the paper's eq. 7 + λΩ) or the belief θ_V "
                             "(an option)")
    parser.add_argument("--eta", type=float, default=0.05, help="pep-prox step size (the paper's 0.05)")
    parser.add_argument("--prox-steps", type=int, default=1,
                        help="pep-prox: proximal steps per message update (1: the paper's; more: an extension)")
    parser.add_argument("--unigram-start", choices=UNIGRAM_STARTS, default="gradient",
                        help="pep-prox's unigram first sweep: gradient steps from the uniform unigram model (the "
                             "paper's, the default since s60) or the closed form (before s60)")
    parser.add_argument("--growth-rounds", type=int, default=None,
                        help="pep: growing rounds per projection (default: until no context is added; 1: one "
                             "symbol deeper per update)")
    parser.add_argument("--greedy-floor", type=float, default=None, help="pep: pseudo-count of an unseen n-gram "
                        "(default GREEDY_FLOOR = 1e-6)")
    parser.add_argument("--no-damping", action="store_true", help="skip updates whose product diverges (the old way)")
    parser.add_argument("--drop-cavity-contexts", action="store_true",
                        help="pep: let a projection drop the cavity's contexts (the behaviour before 24 Nov)")
    parser.add_argument("--k", type=int, default=20)
    parser.add_argument("--iterations", type=int, default=3, help="sweeps (the paper does not state how many)")
    parser.add_argument("--inner-passes", type=int, default=20, help="K on the first --passes-sweeps sweeps (the "
                        "paper's 20 'for the first few iterations')")
    parser.add_argument("--passes-sweeps", type=int, default=2, help="sweeps with K passes, then K = 1 (the paper: "
                        "'the first few iterations', unstated)")
    parser.add_argument("--alphabet-size", type=int, default=16)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("-o", "--output", default=None)
    parser.add_argument("--report", nargs="+", default=None, help="print a table from result JSONs instead")
    parser.add_argument("--plot", default=None, help="with --report: write a PNG")
    parser.add_argument("--drop", nargs="*", default=(), help="with --report: leave out rows with these labels")
    parser.add_argument("--results", default=None, help="with --report: also write the schema-1 results file here")
    parser.add_argument("--results-command", default="", help="with --results: the command lines that made the rows")
    parser.add_argument("--results-load", default="", help="with --results: the machine's load during the runs")
    args = parser.parse_args(argv)
    if args.report:
        report(args.report, args.plot, args.drop)
        if args.results:
            from varorder.io import atomic_write_text
            document = results_document(args.report, args.results_command, time.strftime("%Y-%m-%d"),
                                        args.results_load)
            with atomic_write_text(args.results) as handle:
                handle.write(json.dumps(document, ensure_ascii=False, indent=1) + "\n")
        return 0
    rows = []

    def emit(row):
        rows.append(row)
        print(json.dumps(row, ensure_ascii=False), flush=True)
        if args.output:
            with open(args.output, "w", encoding="utf-8") as handle:
                json.dump({"args": vars(args), "rows": rows}, handle, indent=1, ensure_ascii=False)

    for size in args.sizes:
        for method in args.methods:
            emit(run(size, method, args))
    for size in (args.lambda_sizes if args.lambda_sizes is not None else args.sizes[:1]):
        for lam in args.lambdas:
            emit(run(size, args.sweep_method, args, lam=lam))
    return 0


if __name__ == "__main__":
    sys.exit(main())
