"""Word-alignment benchmark: AER on the 37-sentence NAACL 2003 trial set and time per iteration.

Peers in one run on the same normalised Hansards corpora
(``../shared/data/hansards-en-fr/normalized/train{10k,100k,all}``, which contain
the trial and test text): independent HMM (posterior decoding and Viterbi +
symmetrization), domain-approximate product EM ("agreement", Liang, Klein &
Jordan 2008), the Liang–Taskar–Klein 2006 product variant, and eflomal (optional;
``pip install eflomal``) symmetrized with grow-diag-final-and / intersection.

    .venv/bin/python benchmarks/align.py --sizes 10k,100k --iterations 5 --json out.json
"""

from __future__ import annotations

import argparse
import io
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from varorder.agree.aligner import WordAligner
from varorder.agree.symmetrize import symmetrize
from varorder.eval.aer import alignment_error_rate
from varorder.io.bitext import read_bitext
from varorder.io.naacl import read_naacl
from varorder.io.pharaoh import read_pharaoh

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "hansards-en-fr"
FILES = {"10k": "train10k", "100k": "train100k", "300k": "trainall"}
THRESHOLDS = (0.3, 0.4, 0.5, 0.6, 0.7)


def _rss_gb():
    try:
        import resource

        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6
    except ImportError:
        return float("nan")


def run_ours(pairs, trial_slice, gold, training, iterations, ibm1_iterations, null_prob=None):
    stamps = []
    start = time.perf_counter()

    def callback(phase, it, al):
        stamps.append((phase, time.perf_counter() - start))

    settings = {} if null_prob is None else {"null_prob": null_prob}
    al = WordAligner(training=training, iterations=iterations, ibm1_iterations=ibm1_iterations,
                     callback=callback, **settings).fit(pairs)
    wall = time.perf_counter() - start
    hmm_times = np.diff([t for p, t in stamps if p == "ibm1"][-1:] + [t for p, t in stamps if p == "hmm"])
    trial = pairs[trial_slice]
    sure, possible = [g[0] for g in gold], [g[1] for g in gold]
    row = {"method": f"hmm-{training}", "wall_s": wall, "s_per_hmm_iter": float(np.mean(hmm_times)),
           "null_prob": al.null_prob, "iterations": iterations, "ibm1_iterations": ibm1_iterations,
           "objectives": al.history_[-1][1]}
    for joint in (False, True):
        post = al.posteriors(trial, joint=joint)
        for d in THRESHOLDS:
            pred = [{(int(i), int(j)) for i, j in zip(*np.nonzero(m >= d))} for m in post]
            row[f"aer{'-joint' if joint else ''}@{d}"] = alignment_error_rate(pred, sure, possible).aer
    if training == "independent":
        for method in ("intersection", "grow-diag-final-and"):
            row[f"aer-{method}"] = alignment_error_rate(al.align(trial, method), sure, possible).aer
    return row


def run_eflomal(pairs, trial_slice, gold):
    import eflomal

    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        fwd, rev = os.path.join(tmp, "fwd"), os.path.join(tmp, "rev")
        src = io.StringIO("".join(" ".join(e) + "\n" for e, _ in pairs))
        trg = io.StringIO("".join(" ".join(f) + "\n" for _, f in pairs))
        eflomal.Aligner().align(src, trg, links_filename_fwd=fwd, links_filename_rev=rev, quiet=True)
        forward, reverse = read_pharaoh(fwd), read_pharaoh(rev)
    wall = time.perf_counter() - start
    sure, possible = [g[0] for g in gold], [g[1] for g in gold]
    row = {"method": "eflomal", "wall_s": wall}
    f_t, r_t = forward[trial_slice], reverse[trial_slice]
    for method in ("intersection", "grow-diag-final-and"):
        pred = [symmetrize(a, b, method) for a, b in zip(f_t, r_t)]
        row[f"aer-{method}"] = alignment_error_rate(pred, sure, possible).aer
    return row


def memory_report(pairs):
    """Bytes per sentence pair of the encoded corpus (shards + pair index + both directions' tables)."""
    from varorder.agree.corpus import Vocabulary, index_corpus, shard_bitext

    ev, fv = Vocabulary(), Vocabulary()
    shards = shard_bitext(pairs, ev, fv, 10000)
    index = index_corpus(shards)
    corpus = sum(s.nbytes() for s in shards)
    tables = index.keys.nbytes + 2 * 8 * len(index)  # keys + τ(f|e) + τ(e|f)
    edges = sum(int(s.edge_offsets[-1]) for s in shards)
    # an E-step holds one shard's edge posteriors for both directions plus the HMM batch arrays (≤ 32 MB each)
    return {"n_pairs": len(pairs), "word_pairs": len(index), "edges": edges,
            "corpus_bytes_per_pair": corpus / len(pairs), "table_bytes_per_pair": tables / len(pairs),
            "total_bytes_per_pair": (corpus + tables) / len(pairs)}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="10k", help="comma list of 10k,100k,300k")
    ap.add_argument("--methods", default="independent,agreement,product,eflomal")
    ap.add_argument("--iterations", type=int, default=5)
    ap.add_argument("--ibm1-iterations", type=int, default=5)
    ap.add_argument("--null-prob", type=float, default=None, help="HMM p0 (default: WordAligner's)")
    ap.add_argument("--json", default=None)
    ap.add_argument("--memory-only", action="store_true", help="only report bytes per sentence pair")
    args = ap.parse_args(argv)
    if not DATA.exists():
        sys.exit(f"data not found at {DATA}")
    trial_e = (DATA / "normalized" / "trial.e").read_text().splitlines()
    gold = read_naacl(DATA / "trial" / "dev.wa.nonullalign", n_sentences=len(trial_e))
    rows = []
    for size in args.sizes.split(","):
        stem = FILES[size]
        t0 = time.perf_counter()
        pairs = read_bitext(DATA / "normalized" / f"{stem}.e.gz", DATA / "normalized" / f"{stem}.f.gz")
        trial_slice = slice(len(pairs) - len(trial_e), len(pairs))  # the trial text closes every corpus
        assert [" ".join(e) for e, _ in pairs[trial_slice]] == [t.strip() for t in trial_e]
        print(f"== {size}: {len(pairs)} pairs (read in {time.perf_counter() - t0:.1f}s)", flush=True)
        mem = memory_report(pairs)
        print(json.dumps({k: (round(v, 1) if isinstance(v, float) else v) for k, v in mem.items()}), flush=True)
        if args.memory_only:
            continue
        for method in args.methods.split(","):
            if method == "eflomal":
                try:
                    row = run_eflomal(pairs, trial_slice, gold)
                except ImportError:
                    print("eflomal not installed; skipped", flush=True)
                    continue
            else:
                row = run_ours(pairs, trial_slice, gold, method, args.iterations, args.ibm1_iterations,
                               args.null_prob)
            row.update(size=size, n_pairs=len(pairs), max_rss_gb=_rss_gb())
            rows.append(row)
            row["load_avg_1min"] = os.getloadavg()[0]
            shown = {k: (round(v, 4) if isinstance(v, float) else v) for k, v in row.items() if k != "objectives"}
            print(json.dumps(shown), flush=True)
    print("\nsize   method               wall_s  s/iter  AER@0.5  best AER (δ or symmetrization)")
    for r in rows:
        aers = {k: v for k, v in r.items() if k.startswith("aer")}
        best = min(aers, key=aers.get)
        print(f"{r['size']:6} {r['method']:20} {r['wall_s']:7.1f} {r.get('s_per_hmm_iter', float('nan')):7.1f} "
              f"{r.get('aer@0.5', float('nan')):8.4f}  {aers[best]:.4f} ({best})")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
