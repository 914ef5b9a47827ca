"""Word-alignment benchmark: AER on the 37-sentence NAACL 2003 trial set and time per iteration.

Peers in one run on the same normalised Hansards corpora
(``../shared/data/hansards-en-fr/normalized/train{10k,100k,all}``, which contain
the trial and test text): independent HMM (posterior decoding and Viterbi +
symmetrization), domain-approximate product EM ("agreement", Liang, Klein &
Jordan 2008), the Liang–Taskar–Klein 2006 product variant, and eflomal (optional;
``pip install eflomal``) symmetrized with grow-diag-final-and / intersection.

    .venv/bin/python benchmarks/peers/align.py --sizes 10k,100k --iterations 5 --json out.json

``--cli-job`` instead times the whole command-line job a user runs — train on the corpus and
align it, reading and writing files — for ``varorder align train ... -a`` (one process),
``varorder align train`` then ``apply`` (two processes) and ``eflomal-align`` (whose Python
front end runs the C aligner as a child process), in interleaved rounds. Each job's process
tree is measured: wall time, CPU time (user + system of the tree, children included via
``wait4``), and peak memory as the largest sum of the tree's resident set sizes seen by
polling every 10 ms (psutil), the sum of every process's own peak (``VmHWM``, read while it runs:
an upper bound on the tree's peak) and the largest process's ``VmHWM``, beside ``ru_maxrss`` (which
a child forked from a larger process inherits: an overstatement for ``eflomal-align``'s C process).
The peers: ``benchmarks/peers/install_peers.sh`` installs eflomal (GPL; a benchmark peer only):

    benchmarks/peers/install_peers.sh
    .venv/bin/python benchmarks/peers/align.py --cli-job 100k --rounds 3 --json cli100k.json

``--long-pair MODEL`` aligns one pair of ~1,000 words (consecutive test sentences joined) with
the jump band of long sentences set to each of ``--bands`` (``none``: the full O(T·S²) computation).
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

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the shared harness
import harness  # noqa: E402

DATA = harness.DATA / "hansards-en-fr"
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
    tables = index.f_words.nbytes + index.rows().nbytes + 2 * 8 * len(index)  # pair rows + τ(f|e) + τ(e|f)
    edges = sum(int(s.edge_offsets[-1]) for s in shards)
    # an E-step holds one shard's edge posteriors for both directions plus the HMM batch arrays (≤ 32 MB each)
    return {"n_pairs": len(pairs), "word_pairs": len(index), "edges": edges,
            "corpus_bytes_per_pair": corpus / len(pairs), "table_bytes_per_pair": tables / len(pairs),
            "total_bytes_per_pair": (corpus + tables) / len(pairs)}


def measure_tree(command, poll_s=0.01):
    """Run ``command``; (wall s, CPU s of the tree, peak summed RSS MB of the tree, max single-process RSS MB)."""
    import subprocess

    import psutil

    began = time.perf_counter()
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    root = psutil.Process(proc.pid)
    peak = 0
    high_water = {}  # pid -> VmHWM (kB): each process's own peak, which polling cannot miss
    while True:
        total = 0
        try:
            for p in [root] + root.children(recursive=True):
                try:
                    total += p.memory_info().rss
                    with open(f"/proc/{p.pid}/status") as fh:
                        for line in fh:
                            if line.startswith("VmHWM:"):
                                high_water[p.pid] = max(high_water.get(p.pid, 0), int(line.split()[1]))
                except (psutil.Error, OSError, ValueError):
                    pass
        except psutil.Error:
            pass
        peak = max(peak, total)
        try:
            _, status, usage = os.wait4(proc.pid, os.WNOHANG)
        except ChildProcessError:
            break
        if _:
            break
        time.sleep(poll_s)
    wall = time.perf_counter() - began
    stderr = proc.stderr.read().decode(errors="replace")
    proc.stderr.close()
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"{command[0]} failed: {stderr[-2000:]}")
    # ru_maxrss and VmHWM: kilobytes on Linux. The tree's peak is at least the polled concurrent sum and
    # at most the sum of every process's own peak; both are reported.
    return (wall, usage.ru_utime + usage.ru_stime, peak / 1e6, usage.ru_maxrss / 1e3,
            sum(high_water.values()) / 1e3, max(high_water.values(), default=0) / 1e3)


def cli_job(size, rounds, trial_gold, json_path=None):
    """Interleaved rounds of the whole CLI job (train + align the corpus) for varorder and eflomal."""
    import gzip
    import shutil

    stem = FILES[size]
    python = sys.executable
    env_src = str(harness.SRC)
    os.environ["PYTHONPATH"] = env_src + os.pathsep + os.environ.get("PYTHONPATH", "")
    eflomal_align = shutil.which("eflomal-align") or str(Path(python).parent / "eflomal-align")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        text = {}
        for side in ("e", "f"):
            text[side] = os.path.join(tmp, f"corpus.{side}")
            with gzip.open(DATA / "normalized" / f"{stem}.{side}.gz", "rb") as src, open(text[side], "wb") as dst:
                shutil.copyfileobj(src, dst)
        n_pairs = sum(1 for _ in open(text["e"], encoding="utf-8"))
        out = {k: os.path.join(tmp, k) for k in ("model.npz", "ours.align", "ours2.align", "fwd", "rev")}
        jobs = {
            "varorder train -a (1 process)": [[python, "-m", "varorder", "align", "train", text["e"], text["f"],
                                              "-o", out["model.npz"], "-q", "-a", out["ours.align"]]],
            "varorder train + apply (2 processes)": [
                [python, "-m", "varorder", "align", "train", text["e"], text["f"], "-o", out["model.npz"], "-q"],
                [python, "-m", "varorder", "align", "apply", out["model.npz"], text["e"], text["f"], "-o",
                 out["ours2.align"], "-q"]],
            "eflomal-align -f -r": [[eflomal_align, "-s", text["e"], "-t", text["f"], "-f", out["fwd"], "-r",
                                     out["rev"], "--overwrite"]],
        }
        if not os.path.exists(eflomal_align):
            del jobs["eflomal-align -f -r"]
            print("eflomal-align not found; eflomal skipped", flush=True)
        for r in range(rounds):
            for name, commands in jobs.items():
                wall = cpu = peak = single = summed = largest = 0.0
                for command in commands:  # sequential processes: memory peaks do not add up
                    w, c, p, s1, hw, big = measure_tree(command)
                    wall, cpu, peak, single, summed = wall + w, cpu + c, max(peak, p), max(single, s1), max(summed, hw)
                    largest = max(largest, big)
                row = {"job": name, "round": r, "size": size, "n_pairs": n_pairs, "wall_s": wall, "cpu_s": cpu,
                       "peak_tree_rss_mb": peak, "max_process_rss_mb": single, "sum_process_peaks_mb": summed,
                       "largest_process_peak_mb": largest, "load_avg_1min": os.getloadavg()[0]}
                sure, possible = [g[0] for g in trial_gold], [g[1] for g in trial_gold]
                trial = slice(n_pairs - len(trial_gold), n_pairs)
                if name.startswith("eflomal"):
                    fwd, rev = read_pharaoh(out["fwd"])[trial], read_pharaoh(out["rev"])[trial]
                    for method in ("intersection", "grow-diag-final-and"):
                        pred = [symmetrize(a, b, method) for a, b in zip(fwd, rev)]
                        row[f"aer-{method}"] = alignment_error_rate(pred, sure, possible).aer
                else:
                    path = out["ours.align" if "1 process" in name else "ours2.align"]
                    row["aer-posterior"] = alignment_error_rate(read_pharaoh(path)[trial], sure, possible).aer
                rows.append(row)
                print(json.dumps({k: (round(v, 4) if isinstance(v, float) else v) for k, v in row.items()}),
                      flush=True)
    print(f"\n{size} CLI job, medians over {rounds} rounds (ratios to eflomal in the same rounds)")
    names = list(dict.fromkeys(r["job"] for r in rows))
    median = {n: {k: float(np.median([r[k] for r in rows if r["job"] == n]))
                  for k in ("wall_s", "cpu_s", "peak_tree_rss_mb", "max_process_rss_mb", "sum_process_peaks_mb",
                            "largest_process_peak_mb")}
              for n in names}
    ref = median.get("eflomal-align -f -r")
    print(f"{'job':40} {'wall s':>8} {'CPU s':>8} {'tree MB':>8} {'Σpeaks':>8} {'largest':>8}  "
          "ratios wall / CPU / tree / Σpeaks / largest process")
    for n in names:
        m = median[n]
        ratio = " / ".join(f"{m[k] / ref[k]:.2f}" for k in ("wall_s", "cpu_s", "peak_tree_rss_mb", "sum_process_peaks_mb",
                                                              "largest_process_peak_mb")) if ref else "-"
        print(f"{n:40} {m['wall_s']:8.1f} {m['cpu_s']:8.1f} {m['peak_tree_rss_mb']:8.0f} "
              f"{m['sum_process_peaks_mb']:8.0f} {m['largest_process_peak_mb']:8.0f}  {ratio}")
    if json_path:
        Path(json_path).write_text(json.dumps(rows, indent=1))


def long_pair(model_path, bands, min_words=1000):
    """Align one ~1,000-word pair (consecutive normalised test sentences joined) under each jump band."""
    import resource

    e_lines = (DATA / "normalized" / "test.e").read_text(encoding="utf-8").splitlines()
    f_lines = (DATA / "normalized" / "test.f").read_text(encoding="utf-8").splitlines()
    e, f = [], []
    for a, b in zip(e_lines, f_lines):
        if len(e) >= min_words:
            break
        e += a.split()
        f += b.split()
    aligner = WordAligner.load(model_path)
    aligner.align([(e[:20], f[:20])])  # compile outside the timing
    for band in bands:
        for m in aligner.models_:
            m.band = band
        began, cpu = time.perf_counter(), time.process_time()
        links = aligner.align([(e, f)])[0]
        row = {"english_words": len(e), "french_words": len(f), "band": band, "wall_s": time.perf_counter() - began,
               "cpu_s": time.process_time() - cpu, "links": len(links),
               "max_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e3,
               "load_avg_1min": os.getloadavg()[0]}
        print(json.dumps({k: (round(v, 3) if isinstance(v, float) else v) for k, v in row.items()}), flush=True)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="10k", help="comma list of 10k,100k,300k")
    ap.add_argument("--methods", default="independent,agreement,product,eflomal")
    ap.add_argument("--iterations", type=int, default=5)
    ap.add_argument("--ibm1-iterations", type=int, default=5)
    ap.add_argument("--null-prob", type=float, default=None, help="HMM p0 (default: WordAligner's)")
    ap.add_argument("--json", default=None)
    ap.add_argument("--memory-only", action="store_true", help="only report bytes per sentence pair")
    ap.add_argument("--cli-job", default=None, metavar="SIZE", help="time the whole CLI job against eflomal-align")
    ap.add_argument("--rounds", type=int, default=3, help="interleaved rounds of --cli-job")
    ap.add_argument("--long-pair", default=None, metavar="MODEL", help="time one ~1,000-word pair with MODEL")
    ap.add_argument("--bands", default="50,100", help="jump bands for --long-pair ('none' = full computation)")
    args = ap.parse_args(argv)
    if not DATA.exists():
        sys.exit(f"data not found at {DATA}")
    trial_e = (DATA / "normalized" / "trial.e").read_text().splitlines()
    gold = read_naacl(DATA / "trial" / "dev.wa.nonullalign", n_sentences=len(trial_e))
    if args.long_pair:
        long_pair(args.long_pair, [None if b == "none" else int(b) for b in args.bands.split(",")])
        return
    if args.cli_job:
        cli_job(args.cli_job, args.rounds, gold, args.json)
        return
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
