"""n-gram LM estimation and scoring on the Penn Treebank LM text (Mikolov's split).

For each order (3 and 5 by default), in one process:

* estimate interpolated modified Kneser-Ney on ``ptb.train.txt.gz``: wall time, then peak
  traced memory (tracemalloc, in a second, traced run, so tracing does not slow the timed one);
* valid-set perplexity (every word and ``</s>`` predicted);
* model size: n-grams, bytes held, bytes per n-gram, ARPA size, MAX-ARPA time;
* scoring throughput on the valid sentences, best of ``--repeat``: varorder's batched
  scorer on encoded ids, the same including the string -> id encoding, and KenLM's Python
  module (``Model.score`` per sentence, bos and eos) on the ARPA file varorder wrote. The
  per-token log10 scores of both are compared first (max |difference|).
* with ``--lmplz PATH`` (KenLM's estimator, built from the kenlm source), a reference
  model from lmplz on the same text and its valid perplexity under KenLM.

    python benchmarks/lm.py                        # orders 3 and 5
    python benchmarks/lm.py --lmplz /path/to/lmplz --json lm.json
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import tempfile
import time
import tracemalloc
from pathlib import Path

import numpy as np

from varorder.io.arpa import read_arpa, write_arpa
from varorder.lm import ModifiedKneserNey, iter_sentences, read_corpus

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "ptb-lm"


def best_time(fn, repeat):
    fn()  # warm-up: Numba compilation, caches
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


# lmplz refuses <unk> in its input; PTB spells rare words <unk>, an ordinary token for
# varorder (it is counted like any word), so lmplz sees it under another name.
PTB_UNK_FOR_LMPLZ = "<ptb-unk>"


def lmplz_perplexity(lmplz, order, train, valid_sentences, folder, kenlm):
    arpa = folder / f"lmplz{order}.arpa"
    text = folder / "train.txt"
    if not text.exists():
        with text.open("w") as handle:
            for _, tokens in iter_sentences(train):
                handle.write(" ".join(PTB_UNK_FOR_LMPLZ if t == "<unk>" else t for t in tokens) + "\n")
    valid_sentences = [
        " ".join(PTB_UNK_FOR_LMPLZ if t == "<unk>" else t for t in s.split()) for s in valid_sentences
    ]
    start = time.perf_counter()
    with text.open("rb") as source, arpa.open("wb") as sink:
        subprocess.run([lmplz, "-o", str(order), "-S", "20%", "-T", str(folder)], stdin=source, stdout=sink,
                       stderr=subprocess.DEVNULL, check=True)
    seconds = time.perf_counter() - start
    model = kenlm.Model(str(arpa))
    total = sum(model.score(s) for s in valid_sentences)
    n_tokens = sum(len(s.split()) + 1 for s in valid_sentences)
    return 10 ** (-total / n_tokens), seconds


def run(order, repeat, folder, lmplz, kenlm):
    train, valid = DATA / "ptb.train.txt.gz", DATA / "ptb.valid.txt.gz"
    row = {"order": order}
    start = time.perf_counter()
    estimator = ModifiedKneserNey(order=order).fit(train)
    row["estimate_s"] = time.perf_counter() - start
    model = estimator.model_
    tracemalloc.start()
    ModifiedKneserNey(order=order).fit(train)
    row["estimate_peak_mb"] = tracemalloc.get_traced_memory()[1] / 2**20
    tracemalloc.stop()

    row["ngrams"] = list(model.ngram_counts)
    row["model_mb"] = model.nbytes / 2**20
    row["bytes_per_ngram"] = model.bytes_per_ngram
    _, ids, lengths = read_corpus(valid, vocabulary=model.vocabulary)
    row["valid_perplexity"] = model.perplexity((ids, lengths))
    start = time.perf_counter()
    model.max_backoff()
    row["maxarpa_s"] = time.perf_counter() - start

    arpa = folder / f"varorder{order}.arpa"
    start = time.perf_counter()
    write_arpa(model, arpa)
    row["write_arpa_s"] = time.perf_counter() - start
    row["arpa_mb"] = arpa.stat().st_size / 2**20
    start = time.perf_counter()
    read_arpa(arpa)
    row["read_arpa_s"] = time.perf_counter() - start

    sentences = [" ".join(tokens) for _, tokens in iter_sentences(valid)]
    n_tokens = len(ids) + len(lengths)
    row["valid_tokens"] = n_tokens
    seconds = best_time(lambda: model.token_log10probs(ids, lengths), repeat)
    row["varorder_batched_tok_s"] = n_tokens / seconds

    def encode_and_score():
        encoded, encoded_lengths = model.vocabulary.encode_sentences(s.split() for s in sentences)
        model.token_log10probs(encoded, encoded_lengths)

    row["varorder_with_encoding_tok_s"] = n_tokens / best_time(encode_and_score, repeat)
    if kenlm is not None:
        reference = kenlm.Model(str(arpa))
        ours, _ = model.token_log10probs(ids, lengths)
        theirs = np.asarray([score for s in sentences for score, _, _ in reference.full_scores(s)])
        row["max_abs_log10_difference_vs_kenlm"] = float(np.abs(ours - theirs).max())
        seconds = best_time(lambda: [reference.score(s) for s in sentences], repeat)
        row["kenlm_score_tok_s"] = n_tokens / seconds
        row["batched_over_kenlm"] = row["varorder_batched_tok_s"] / row["kenlm_score_tok_s"]
        if lmplz:
            perplexity, seconds = lmplz_perplexity(lmplz, order, train, sentences, folder, kenlm)
            row["lmplz_valid_perplexity"] = perplexity
            row["lmplz_estimate_s"] = seconds
            row["perplexity_relative_difference"] = row["valid_perplexity"] / perplexity - 1
    return row


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--orders", type=int, nargs="+", default=[3, 5])
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--lmplz", help="path to KenLM's lmplz, for the reference perplexity")
    parser.add_argument("--json", help="also write the rows to this JSON file")
    args = parser.parse_args()
    if not DATA.exists():
        raise SystemExit(f"{DATA} is absent: this benchmark needs ../shared/data/ptb-lm")
    try:
        import kenlm
    except ImportError:
        kenlm = None
        print("kenlm is not installed: its columns are skipped (pip install kenlm)")
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        for order in args.orders:
            row = run(order, args.repeat, Path(folder), args.lmplz, kenlm)
            rows.append(row)
            for key, value in row.items():
                print(f"{order}-gram {key:38s} {value:.6g}" if isinstance(value, float) else f"{order}-gram {key:38s} {value}")
    print(f"load average during the run: {os.getloadavg()}")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
