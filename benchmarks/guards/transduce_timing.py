"""Per-word CPU cost of the alignment transducer's stages, for comparing code versions (issue #11).

Runs the code on ``PYTHONPATH`` (a checkout's ``src``) and prints one JSON line: CPU seconds per
word of an RCMS pass from zero weights (the first ``--train`` words of the 5k split), of RCMS
prediction (``--predict`` dev words) and of forced decoding's bigram imputation (the first
``--impute`` words), plus hashes of the weights, predictions and imputed alignments, which must
agree between versions that claim identical results. Compare versions in interleaved rounds
under the shared lock, e.g.::

    git archive <commit> src benchmarks | tar -x -C /tmp/before
    for v in /tmp/before .; do
      flock /tmp/varorder-bench.lock env PYTHONPATH=$v/src nice -n 10 python benchmarks/guards/transduce_timing.py
    done
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from pathlib import Path


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", default="../shared/data/cmudict")
    parser.add_argument("--train", type=int, default=100)
    parser.add_argument("--predict", type=int, default=100)
    parser.add_argument("--impute", type=int, default=60)
    args = parser.parse_args(argv)
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/
    from papers.transduce import load_split
    from varorder.transduce.model import AlignmentTransducer
    try:  # the rarely used knobs in an options object; an older tree (a baseline) takes them as keywords
        from varorder.transduce.model import TransducerOptions
        one_bigram_pass = {"options": TransducerOptions(bigram_epochs=1)}
    except ImportError:
        one_bigram_pass = {"bigram_epochs": 1}

    X, Y, Xd, _ = load_split(args.data_dir, 5000, 253, 0, 746)
    # compile every kernel first: the figures are steady-state costs
    AlignmentTransducer(method="rcms", epochs=1).fit(X[:3], Y[:3]).predict(Xd[:2])
    AlignmentTransducer(method="forced", **one_bigram_pass).impute_alignments(X[:3], Y[:3])
    out = {}
    start = time.process_time()
    model = AlignmentTransducer(method="rcms", epochs=1, seed=0).fit(X[:args.train], Y[:args.train])
    out["rcms_pass_cpu_s_per_word"] = (time.process_time() - start) / args.train
    out["rcms_weights_sha"] = hashlib.sha256(model.weights_.tobytes()).hexdigest()[:16]
    start = time.process_time()
    predictions = model.predict(Xd[:args.predict])
    out["rcms_predict_cpu_s_per_word"] = (time.process_time() - start) / args.predict
    out["rcms_predictions_sha"] = hashlib.sha256("|".join(predictions).encode()).hexdigest()[:16]
    start = time.process_time()
    moves = AlignmentTransducer(method="forced", seed=0, **one_bigram_pass).impute_alignments(X[:args.impute],
                                                                                              Y[:args.impute])
    out["impute_cpu_s_per_word"] = (time.process_time() - start) / args.impute
    out["imputed_sha"] = hashlib.sha256(json.dumps(moves).encode()).hexdigest()[:16]
    print(json.dumps(out))


if __name__ == "__main__":
    main()
