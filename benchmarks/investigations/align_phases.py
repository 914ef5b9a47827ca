"""CPU and wall seconds of the one-process align job (``varorder align train E F -o M -q -a OUT``) by phase.

Runs the command's steps in this process — encoding, the pair index, each IBM 1 and HMM iteration,
saving, decoding and writing — timing each with ``time.process_time`` (CPU of every thread) and
``time.perf_counter``, with the peak resident set of each phase (``VmHWM``, reset between phases
through ``/proc/self/clear_refs``), and the aligner's compiled kernels wrapped to sum their own time
(the search of the edges' pair ids among them). Thread count: ``NUMBA_NUM_THREADS=1`` for one.

    PYTHONPATH=src python benchmarks/investigations/align_phases.py train100k.e train100k.f --out /tmp/out.align
"""

from __future__ import annotations

import argparse
import os
import time


def _peak_mb():
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmHWM"):
                return int(line.split()[1]) / 1e3
    return float("nan")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("english")
    ap.add_argument("french")
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("--out", default=os.devnull, help="alignments (Pharaoh)")
    ap.add_argument("--model", default=None, help="also save the model here")
    args = ap.parse_args(argv)

    from varorder.cli.align import _cased_share, _encode, _iter_pairs, _lean_process, _normalization, _write_outputs

    _lean_process()  # what the command does first (thread wait policy, BLAS module, malloc threshold)
    from varorder import chain
    from varorder.agree import align, aligner, corpus
    from varorder.agree.aligner import WordAligner
    from varorder.agree.corpus import Vocabulary

    kernels = {}

    def timed(name, fn):
        def run(*a, **k):
            c0, w0 = time.process_time(), time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                row = kernels.setdefault(name, [0.0, 0.0, 0])
                row[0] += time.process_time() - c0
                row[1] += time.perf_counter() - w0
                row[2] += 1
        return run

    corpus.PairIndex.edge_pair_ids = timed("pair id search", corpus.PairIndex.edge_pair_ids)
    for name in ("_gather_log_table", "_add_at", "_ibm1_estep", "_conditional", "_fill_emissions",
                 "_scatter_posteriors", "_jump_moves"):
        setattr(align, name, timed(name, getattr(align, name)))
    align.chain = type("chain", (), {"marginals": staticmethod(timed("chain.marginals", chain.marginals)),
                                     "viterbi": staticmethod(chain.viterbi),
                                     "log_partition": staticmethod(chain.log_partition)})
    phases = []
    clock = [time.process_time(), time.perf_counter()]

    def mark(name):
        c, w = time.process_time(), time.perf_counter()
        phases.append((name, c - clock[0], w - clock[1], _peak_mb()))
        clock[:] = [c, w]
        try:
            with open("/proc/self/clear_refs", "w") as fh:
                fh.write("5")  # reset VmHWM: each phase's own peak
        except OSError:
            pass

    norm = _normalization(False, False, False, False)
    pairs = _encode(_iter_pairs((args.english, args.french), norm, args.limit), Vocabulary(), Vocabulary(), 5000,
                    grow=True, max_length=200)
    _cased_share(pairs)
    mark("encoding")
    index_corpus = aligner.index_corpus

    def indexed(shards):
        out = index_corpus(shards)
        mark("pair index")
        return out

    aligner.index_corpus = indexed
    model = WordAligner(normalization=norm.to_dict(), callback=lambda phase, it, al: mark(f"{phase} {it + 1}"))
    model.fit(pairs)
    if args.model:
        model.save(args.model)
    mark("saving")
    model.keep_log_tables_only()
    _write_outputs(model, pairs, args.out, "posterior", None, None, None, None, None, None)
    mark("decoding + writing")
    # cores busy = CPU / wall: ~1 marks a phase that leaves the second core idle
    print(f"{'phase':20} {'CPU s':>7} {'wall s':>7} {'cores':>6} {'peak MB':>8}")
    for name, c, w, peak in phases:
        print(f"{name:20} {c:7.2f} {w:7.2f} {c / max(w, 1e-9):6.2f} {peak:8.1f}")
    cpu, wall = sum(p[1] for p in phases), sum(p[2] for p in phases)
    print(f"{'total':20} {cpu:7.2f} {wall:7.2f} {cpu / max(wall, 1e-9):6.2f}")
    print(f"\n{'kernel':20} {'CPU s':>7} {'wall s':>7} {'cores':>6} {'calls':>6}")
    for name, (c, w, n) in sorted(kernels.items(), key=lambda kv: -kv[1][0]):
        print(f"{name:20} {c:7.2f} {w:7.2f} {c / max(w, 1e-9):6.2f} {n:6d}")


if __name__ == "__main__":
    main()
