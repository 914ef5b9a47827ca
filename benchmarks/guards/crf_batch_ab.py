"""The CRF dev-batch guard of issue #32 ("batch figures within 5 % of today's"), measured finely enough to
resolve 5 %: one ``CRF.predict`` of the whole UD-EWT dev set per call, 15 calls per process after a warm-up
call; prints the minimum and median CPU seconds as one JSON line. Run it alternately from two source trees
(``PYTHONPATH=<tree>/src``), pairs interleaved, and compare pair by pair; the work folder is the one
``benchmarks/peers/small_work.py --work`` prepared (its CRF model and dev features):

    for i in $(seq 1 10); do for t in src /tmp/base/src; do
        PYTHONPATH=$t flock /tmp/varorder-bench.lock nice -n 5 python benchmarks/guards/crf_batch_ab.py --work /tmp/sw; done; done
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the shared harness
import harness  # noqa: E402
from peers import small_work  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work", type=Path, default=Path("/tmp/sw32/work"))
    parser.add_argument("--calls", type=int, default=15)
    args = parser.parse_args()
    from varorder.models.crf import CRF

    X, _ = zip(*small_work._dev_features(args.work))
    X = list(X)
    model = CRF.load(args.work / "crf.npz")
    times = sorted(harness.interleaved({"predict": lambda: model.predict(X)}, args.calls).cpu("predict"))
    print(json.dumps({"min": times[0], "median": times[len(times) // 2]}))


if __name__ == "__main__":
    main()
