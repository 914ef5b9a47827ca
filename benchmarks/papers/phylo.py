"""Missing-nucleotide prediction with the two-slice phylogenetic HMM (Liang, Klein & Jordan 2008, §5.3, Fig. 3).

Data: ``../shared/data/phylo/hpmrc.fa.gz`` (5 species, 20,608 columns) on the tree of
``hpmrc-rev-dg-global.mod``. A fraction (20 %, 50 %) of the observed nucleotides is
held out at random; both submodels (odd and even slices) are trained by independent
EM and by parameter-approximate product EM from the same initialisation. Each held-out
nucleotide is predicted, after every iteration, by two rules, reported in separate rows:

* ``paper``: the argmax of the two submodels' averaged posteriors p_m(d | x; θ_m) (§5.3:
  "the posteriors over heldout nucleotides under each model are averaged"), the same
  rule for both training modes;
* ``tempered`` (an extension, not in the paper): each submodel's posterior computed
  with its shared potentials scaled by M = 2 (∝ p_m², the potentials agreement's E-step
  uses), then averaged.

Accuracy per iteration is printed and plotted (the paper rule; ``--plot-rule`` picks).

    .venv/bin/python benchmarks/papers/phylo.py --iterations 30 --plot docs/figures/phylo_agreement.png --json phylo.json
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from varorder.agree.phylo import PhyloData, PhyloSlices, encode_nucleotides, parse_newick
from varorder.agree.product_em import AgreementEM
from varorder.io.fasta import read_alignment

import sys

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the shared harness
import harness  # noqa: E402

DATA = harness.DATA / "phylo"


def load():
    names, seqs = read_alignment(DATA / "hpmrc.fa.gz")
    tree_line = next(line for line in (DATA / "hpmrc-rev-dg-global.mod").read_text().splitlines()
                     if line.startswith("TREE:"))
    tree = parse_newick(tree_line.split(":", 1)[1])
    node_of = {n: v for v, n in enumerate(tree.names) if n}
    leaf_nodes = np.array([node_of[n] for n in names])
    observed = np.stack([encode_nucleotides(s) for s in seqs])
    return tree, leaf_nodes, observed


def accuracy(models, data, truth_mask, truth, scale):
    post = 0.0
    for m in models:
        _, columns, _, _ = m.posteriors(data, scale * m.shared_log_potentials(data))
        post = post + columns[:, data.leaf_nodes, :]  # (L, leaves, 4)
    pred = post.argmax(axis=2).T  # (leaves, L)
    return float((pred[truth_mask] == truth[truth_mask]).mean())


#: prediction rules: the scale applied to each submodel's shared potentials before averaging posteriors
RULES = {"paper": 1.0, "tempered": 2.0}


def run(tree, leaf_nodes, observed, fraction, mode, iterations, seed):
    rng = np.random.default_rng(seed)
    held = (observed >= 0) & (rng.random(observed.shape) < fraction)
    masked = np.where(held, -1, observed)
    data = PhyloData(tree, leaf_nodes, masked)
    models = [PhyloSlices(m, tree).initialize(seed=100 + m) for m in (0, 1)]
    curves = {rule: [accuracy(models, data, held, observed, scale)] for rule, scale in RULES.items()}
    times, eval_seconds = [], [0.0]
    start = time.perf_counter()

    def callback(it, est):
        times.append(time.perf_counter() - start - eval_seconds[0])
        t0 = time.perf_counter()
        for rule, scale in RULES.items():
            curves[rule].append(accuracy(models, data, held, observed, scale))
        eval_seconds[0] += time.perf_counter() - t0

    est = AgreementEM(submodels=models, mode=mode, n_iter=iterations, callback=callback).fit([data])
    return {"fraction": fraction, "mode": mode, "held_out": int(held.sum()), "accuracy": curves["paper"],
            "accuracy_by_rule": curves, "objectives": est.objectives_,
            "s_per_iter": float(np.mean(np.diff([0.0] + times)))}


def plot(rows, path, rule="paper"):
    """One PNG per held-out fraction: ``<path stem>-<percent>.png``, curves of one prediction rule."""
    from varorder.eval.plots import plot_curves

    path = Path(path)
    for frac in sorted({r["fraction"] for r in rows}):
        curves = {}
        for r in rows:
            if r["fraction"] != frac:
                continue
            acc = r.get("accuracy_by_rule", {"paper": r["accuracy"]})[rule]
            label = "independent EM" if r["mode"] == "independent" else "agreement (param.-approx. product EM)"
            curves[label] = (list(range(len(acc))), acc)
        out = path.with_name(f"{path.stem}-{round(100 * frac)}{path.suffix}")
        plot_curves(curves, out, xlabel="iteration", ylabel="held-out nucleotide accuracy",
                    title=f"{frac:.0%} of observed nucleotides held out ({rule} prediction rule)")
        print(f"wrote {out}")


def table(rows, its=(1, 2, 3, 5, 10, 20, 30)):
    """Markdown: one row per (held-out fraction, training mode, prediction rule), paper rule first."""
    its = [i for i in its if i < len(rows[0]["accuracy"])]
    lines = ["| held out | training | prediction rule | init | " + " | ".join(f"it {i}" for i in its) + " |",
             "|---|---|---|---|" + "---|" * len(its)]
    for frac in sorted({r["fraction"] for r in rows}):
        for rule in RULES:
            for r in rows:
                if r["fraction"] != frac:
                    continue
                acc = r["accuracy_by_rule"][rule]
                mode = "independent EM" if r["mode"] == "independent" else "agreement (param.-approx.)"
                label = "averaged posteriors (paper)" if rule == "paper" else "tempered p² (extension)"
                lines.append(f"| {frac:.0%} ({r['held_out']:,}) | {mode} | {label} | {acc[0]:.3f} | "
                             + " | ".join(f"{acc[i]:.3f}" for i in its) + " |")
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--iterations", type=int, default=30)
    ap.add_argument("--fractions", default="0.2,0.5")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--plot", default=None)
    ap.add_argument("--json", default=None)
    ap.add_argument("--replot", default=None, help="redraw the plots from a --json file and exit")
    ap.add_argument("--plot-rule", default="paper", choices=tuple(RULES))
    args = ap.parse_args(argv)
    if args.replot:
        plot(json.loads(Path(args.replot).read_text()), args.plot or "docs/figures/phylo_agreement.png",
             args.plot_rule)
        return
    tree, leaf_nodes, observed = load()
    print(f"{observed.shape[0]} species, {observed.shape[1]} columns, {int((observed >= 0).sum())} observed nucleotides")
    rows = []
    for fraction in map(float, args.fractions.split(",")):
        for mode in ("independent", "parameter"):
            row = run(tree, leaf_nodes, observed, fraction, mode, args.iterations, args.seed)
            rows.append(row)
            for rule, acc in row["accuracy_by_rule"].items():
                print(f"held out {fraction:.0%} {mode:12} {rule:8} ({row['s_per_iter']:.2f} s/iter): accuracy "
                      + " ".join(f"{a:.4f}" for a in acc[:: max(1, len(acc) // 10)]) + f" … final {acc[-1]:.4f}",
                      flush=True)
    print()
    print(table(rows))
    if args.plot:
        plot(rows, args.plot, args.plot_rule)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
