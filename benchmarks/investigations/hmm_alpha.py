"""Supervised HMM tagger's add-α smoothing on UD English EWT (dev), for the library default.

    PYTHONPATH=src python benchmarks/investigations/hmm_alpha.py [--data ../shared/data/ud-english-ewt] [--alphas 1,0.1,0.01]

Trains :class:`varorder.models.HMM` on the train file's word forms and UPOS tags with the
same α for start, transition and emission counts (as ``varorder tag train --model hmm
--alpha A``) and prints dev token accuracy per α as JSON lines. Dev only: this chose the
default (issue #31), so no test-set figure is reported from it.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from varorder.io.conllu import read_conllu
from varorder.models.hmm import HMM


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=str(Path("..") / "shared" / "data" / "ud-english-ewt"))
    parser.add_argument("--alphas", default="1,0.1,0.01")
    args = parser.parse_args()
    train = read_conllu(Path(args.data) / "en_ewt-ud-train.conllu.gz")
    dev = read_conllu(Path(args.data) / "en_ewt-ud-dev.conllu.gz")
    X, y = [s.words for s in train], [s.tags("upos") for s in train]
    X_dev, y_dev = [s.words for s in dev], [s.tags("upos") for s in dev]
    for alpha in (float(a) for a in args.alphas.split(",")):
        began = time.process_time()
        model = HMM(alpha_start=alpha, alpha_transition=alpha, alpha_emission=alpha).fit(X, y)
        print(json.dumps({"alpha": alpha, "dev_accuracy": round(model.score(X_dev, y_dev), 4),
                          "cpu_seconds": round(time.process_time() - began, 2)}), flush=True)


if __name__ == "__main__":
    main()
