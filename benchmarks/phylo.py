"""Missing-nucleotide prediction with the two-slice phylogenetic HMM (Liang, Klein & Jordan 2008, §5.3, Fig. 3).

Data: ``../shared/data/phylo/hpmrc.fa.gz`` (5 species, 20,608 columns) on the tree of
``hpmrc-rev-dg-global.mod``. A fraction (20 %, 50 %) of the observed nucleotides is
held out at random; both submodels (odd and even slices) are trained by independent
EM and by parameter-approximate product EM from the same initialisation, and each
held-out nucleotide is predicted by the argmax of the two submodels' averaged
posteriors (from each training mode's own E-step). Accuracy per iteration is
printed and plotted.

    .venv/bin/python benchmarks/phylo.py --iterations 30 --plot docs/figures/phylo_agreement.png --json phylo.json
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

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "phylo"


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


def run(tree, leaf_nodes, observed, fraction, mode, iterations, seed):
    rng = np.random.default_rng(seed)
    held = (observed >= 0) & (rng.random(observed.shape) < fraction)
    masked = np.where(held, -1, observed)
    data = PhyloData(tree, leaf_nodes, masked)
    models = [PhyloSlices(m, tree).initialize(seed=100 + m) for m in (0, 1)]
    scale = 2.0 if mode == "parameter" else 1.0
    curve = [accuracy(models, data, held, observed, scale)]
    times = []
    start = time.perf_counter()

    def callback(it, est):
        times.append(time.perf_counter() - start)
        curve.append(accuracy(models, data, held, observed, scale))

    est = AgreementEM(models, mode=mode, n_iter=iterations, callback=callback).fit([data])
    return {"fraction": fraction, "mode": mode, "held_out": int(held.sum()), "accuracy": curve,
            "objectives": est.objectives_, "s_per_iter": float(np.mean(np.diff([0.0] + times)))}


def plot(rows, path):
    """One PNG per held-out fraction: ``<path stem>-<percent>.png``."""
    from varorder.eval.plots import plot_curves

    path = Path(path)
    for frac in sorted({r["fraction"] for r in rows}):
        curves = {("independent EM" if r["mode"] == "independent" else "agreement (param.-approx. product EM)"):
                  (list(range(len(r["accuracy"]))), r["accuracy"]) for r in rows if r["fraction"] == frac}
        out = path.with_name(f"{path.stem}-{round(100 * frac)}{path.suffix}")
        plot_curves(curves, out, xlabel="iteration", ylabel="held-out nucleotide accuracy",
                    title=f"{frac:.0%} of observed nucleotides held out")
        print(f"wrote {out}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--iterations", type=int, default=30)
    ap.add_argument("--fractions", default="0.2,0.5")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--plot", default=None)
    ap.add_argument("--json", default=None)
    ap.add_argument("--replot", default=None, help="redraw the plots from a --json file and exit")
    args = ap.parse_args(argv)
    if args.replot:
        plot(json.loads(Path(args.replot).read_text()), args.plot or "docs/figures/phylo_agreement.png")
        return
    tree, leaf_nodes, observed = load()
    print(f"{observed.shape[0]} species, {observed.shape[1]} columns, {int((observed >= 0).sum())} observed nucleotides")
    rows = []
    for fraction in map(float, args.fractions.split(",")):
        for mode in ("independent", "parameter"):
            row = run(tree, leaf_nodes, observed, fraction, mode, args.iterations, args.seed)
            rows.append(row)
            acc = row["accuracy"]
            print(f"held out {fraction:.0%} {mode:12} ({row['s_per_iter']:.2f} s/iter): accuracy "
                  + " ".join(f"{a:.4f}" for a in acc[:: max(1, len(acc) // 10)]) + f" … final {acc[-1]:.4f}",
                  flush=True)
    if args.plot:
        plot(rows, args.plot)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
