"""Scoring kernels of two source trees on the PTB 5-gram binary model (issue #20: the cost
of the lookup kernels' bounds checks, and where scoring from strings spends its time),
interleaved in fresh child processes.

Rows: ``token_log10probs`` over the pre-encoded valid set (the batched scorer,
:func:`varorder.lm._kernels.score_flat`: probes bounded by the table's capacity);
``batched_lookup`` of every (4-word context, word) pair of the valid set (one
:func:`~varorder.lm._kernels.backoff_log10prob` per query: probes bounded and every row
read from a slot checked against its order); and the parts of ``score_sentences`` on the
valid sentences as strings: ``Vocabulary.encode_lines`` (strings -> ids), the whole
call, and ``token_log10probs`` of the first 100 sentences scored again and again (their
table slots cached: the scorer's cost without memory stalls, in ns a token). Only public
methods are called, so any tree runs. Best of ``--rounds`` per child, best child per
tree; CPU seconds (``time.process_time``).

    python benchmarks/guards/lm_bounds.py MODEL.bin --src /path/to/old/src --src src
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the shared harness
import harness  # noqa: E402

DATA = harness.DATA / "ptb-lm"

CHILD = textwrap.dedent("""
    import json, sys, time
    import numpy as np
    from varorder.lm.binary import open_binary
    from varorder.lm import iter_sentences
    model = open_binary(sys.argv[1])
    rounds = int(sys.argv[3])
    ids, lengths = model.vocabulary.encode_sentences(t for _, t in iter_sentences(sys.argv[2]))
    padded = np.concatenate([[model.vocabulary.bos_id] * 4, ids]).astype(np.int64)
    flat, offsets, words = model._flat_queries([padded[i:i + 4] for i in range(len(ids))], ids)
    out, used = np.empty(len(words)), np.empty(len(words), dtype=np.int64)
    from varorder.lm import _kernels
    def lookups():  # the kernel alone: the Python list of contexts would dominate otherwise
        _kernels.batched_lookup(flat, offsets, words, model.vocab_size, model._hash_rows, model._hash_base,
                                model._hash_cap, model._values, model._value_base, out, used)
    sentences = [" ".join(t) for _, t in iter_sentences(sys.argv[2])]
    first = int(lengths[:100].sum())
    model.token_log10probs(ids, lengths); lookups(); model.score_sentences(sentences)  # compile / load
    best = {}
    for name, call in (("token_log10probs", lambda: model.token_log10probs(ids, lengths)), ("lookups", lookups),
                       ("encode_lines", lambda: model.vocabulary.encode_lines(sentences)),
                       ("score_sentences", lambda: model.score_sentences(sentences)),
                       ("cached", lambda: model.token_log10probs(ids[:first], lengths[:100]))):
        seconds = []
        for _ in range(rounds):
            start = time.process_time()
            call()
            seconds.append(time.process_time() - start)
        best[name] = min(seconds)
    print(json.dumps({"n_tokens": int(len(ids) + len(lengths)), "n_queries": len(ids), "n_cached": first + 100,
                      "best": best}))
""")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("model")
    parser.add_argument("--src", action="append", required=True, help="a source tree (repeat: the trees compared)")
    parser.add_argument("--children", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args()
    valid = DATA / "ptb.valid.txt.gz"
    results = {src: [] for src in args.src}
    for _ in range(args.children):
        for src in args.src:
            env = dict(os.environ, PYTHONPATH=str(Path(src).resolve()), NUMBA_NUM_THREADS="1")
            out = subprocess.run([sys.executable, "-c", CHILD, args.model, str(valid), str(args.rounds)], env=env,
                                 check=True, capture_output=True, text=True).stdout
            results[src].append(json.loads(out))
    print(f"load average {os.getloadavg()}")
    for src, runs in results.items():
        tokens = runs[0]["n_tokens"] / min(r["best"]["token_log10probs"] for r in runs)
        queries = runs[0]["n_queries"] / min(r["best"]["lookups"] for r in runs)
        parts = {name: min(r["best"][name] for r in runs) for name in ("encode_lines", "score_sentences", "cached")}
        print(f"{src:40s} token_log10probs {tokens / 1e6:7.2f} M tokens/CPU s   batched_lookup {queries / 1e6:6.2f} M "
              f"queries/CPU s   token_log10probs {runs[0]['n_tokens'] / tokens * 1e3:.2f} ms   encode_lines "
              f"{parts['encode_lines'] * 1e3:.2f} ms   score_sentences {parts['score_sentences'] * 1e3:.2f} ms   "
              f"cached {parts['cached'] / runs[0]['n_cached'] * 1e9:.1f} ns/token")


if __name__ == "__main__":
    main()
