"""GaussianHMM against hmmlearn (both ``implementation``s) and the HSMM against the HMM (#41).

One EM iteration (``fit`` with ``n_iter=1`` from the same parameters, ``init_params=""``)
and ``score``, at the issue's sizes: (T = 10⁵, K = 10, D = 5, diag), (T = 10⁵, K = 45,
D = 5, diag), (T = 10⁴, K = 10, D = 10, full) and 1,000 sequences of 100 (K = 10, D = 5,
diag); then one EM iteration of ``GaussianHSMM(max_duration=50)`` against ``GaussianHMM``
on the same data. Interleaved rounds through ``benchmarks/harness.py``; per-round CPU-time
ratios (process CPU, all threads) with wall beside them, against each of hmmlearn's
implementations and against the faster of the two in each round (the issue's target); the
log-likelihoods of both systems are compared on every case (relative difference in the
row's note).

    python benchmarks/peers/hmm_emissions.py --rounds 3 --json benchmarks/results/hmm-emissions-hmmlearn.json

``--only hsmm`` runs the HSMM-against-HMM case alone (its results file:
``benchmarks/results/hsmm-vs-hmm.json``); ``--only hmmlearn`` the hmmlearn cases alone.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import harness  # noqa: E402

from varorder.models.gaussian_hmm import GaussianHMM  # noqa: E402
from varorder.models.hsmm import GaussianHSMM  # noqa: E402

CASES = [("T=1e5, K=10, D=5, diag", 100_000, 1, 10, 5, "diag"),
         ("T=1e5, K=45, D=5, diag", 100_000, 1, 45, 5, "diag"),
         ("T=1e4, K=10, D=10, full", 10_000, 1, 10, 10, "full"),
         ("1000 sequences of 100, K=10, D=5, diag", 100, 1000, 10, 5, "diag")]


def _parameters(rng, K, D, covariance_type):
    start = rng.dirichlet(np.ones(K))
    trans = rng.dirichlet(np.ones(K) * 5, size=K)
    means = rng.normal(size=(K, D)) * 2
    if covariance_type == "diag":
        covars = rng.uniform(0.5, 2.0, (K, D))
    else:
        A = rng.normal(size=(K, D, D)) * 0.3
        covars = A @ A.transpose(0, 2, 1) + np.eye(D)
    return start, trans, means, covars


def _model(cls, params, covariance_type, **kw):
    m = cls(n_components=len(params[0]), covariance_type=covariance_type, init_params="", n_iter=1, **kw)
    m.startprob_, m.transmat_, m.means_, m.covars_ = (p.copy() for p in params)
    return m


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", type=Path, default=None, help="write a results file (schema 1)")
    parser.add_argument("--quick", action="store_true", help="a tenth of each size (a smoke run)")
    parser.add_argument("--only", choices=("all", "hmmlearn", "hsmm"), default="all",
                        help="the hmmlearn cases, the HSMM-vs-HMM case, or both")
    args = parser.parse_args(argv)

    rng = np.random.default_rng(0)
    rows, loads, details = [], [], {}
    if args.only != "hsmm":
        _hmmlearn_cases(args, rng, rows, loads, details)
    if args.only != "hmmlearn":
        _hsmm_case(args, np.random.default_rng(1), rows, loads, details)
    if args.json is not None:
        title = {"all": "GaussianHMM / GaussianHSMM vs hmmlearn: EM iteration and score, CPU-time speed-ups",
                 "hmmlearn": "GaussianHMM vs hmmlearn: EM iteration and score, CPU-time speed-ups",
                 "hsmm": "GaussianHSMM's EM iteration against GaussianHMM's (max_duration 50), CPU-time ratio"}
        doc = harness.results_document("Dense-chain engine", title[args.only], rows, issue=41, loads=loads,
                                       details=details)
        harness.write_results(args.json, doc)


def _hmmlearn_cases(args, rng, rows, loads, details):
    from hmmlearn import hmm as hmmlearn

    for label, T, S, K, D, ct in CASES:
        if args.quick:
            T, S = max(T // 10, 100), max(S // 10, 1)
        params = _parameters(rng, K, D, ct)
        X = rng.normal(size=(T * S, D)) * 2
        lengths = np.full(S, T)
        peers = {"varorder": lambda **kw: _model(GaussianHMM, params, ct, **kw),
                 "hmmlearn scaling": lambda **kw: _model(hmmlearn.GaussianHMM, params, ct, implementation="scaling"),
                 "hmmlearn log": lambda **kw: _model(hmmlearn.GaussianHMM, params, ct, implementation="log")}
        scores = {name: make().score(X, lengths) for name, make in peers.items()}
        for what, call in (("EM iteration", lambda m: m.fit(X, lengths)), ("score", lambda m: m.score(X, lengths))):
            systems = {name: (lambda make=make: call(make())) for name, make in peers.items()}
            rounds = harness.interleaved(systems, args.rounds)
            loads += rounds.loads
            for peer in ("hmmlearn scaling", "hmmlearn log"):
                ratio = rounds.paired_ratio(peer, "varorder")
                wall = rounds.paired_ratio(peer, "varorder", clock="wall")
                rel = abs(scores["varorder"] - scores[peer]) / abs(scores[peer])
                rows.append(harness.row(f"GaussianHMM {what}", label, "speed-up over the peer (CPU time)", ratio,
                                        None, f"hmmlearn 0.3.3 {peer.split()[1]}", better="higher",
                                        note=f"wall {wall:.2f}x; varorder {rounds.median('varorder'):.3f} CPU s, "
                                             f"peer {rounds.median(peer):.3f} CPU s (medians of {args.rounds}); "
                                             f"log-likelihoods differ by {rel:.1e} relative"))
            faster = [min(a, b) / v for a, b, v in zip(rounds.cpu("hmmlearn scaling"), rounds.cpu("hmmlearn log"),
                                                      rounds.cpu("varorder")) if v > 0]
            modes = ["scaling" if a <= b else "log" for a, b in zip(rounds.cpu("hmmlearn scaling"),
                                                                    rounds.cpu("hmmlearn log"))]
            rel = max(abs(scores["varorder"] - scores[p]) / abs(scores[p]) for p in ("hmmlearn scaling", "hmmlearn log"))
            target = 4.0 if K >= 45 else 1.5
            rows.append(harness.row(f"GaussianHMM {what}", label, "speed-up over the peer's faster mode (CPU time)",
                                    statistics.median(faster), None, "hmmlearn 0.3.3 faster of scaling / log",
                                    better="higher",
                                    note=f"per round the faster of hmmlearn's two implementations "
                                         f"({', '.join(modes)}); target >= {target}x; log-likelihoods differ by "
                                         f"{rel:.1e} relative at most"))
            details[f"{label} {what}"] = {name: rounds.cpu(name) for name in systems}
            print(f"{label:42s} {what:13s} " + "  ".join(f"{n} {rounds.median(n):.3f}s" for n in systems)
                  + f"  load {rounds.load()}", flush=True)


def _hsmm_case(args, rng, rows, loads, details):
    """The HSMM at max_duration 50 against the HMM, one EM iteration each from the same start."""
    T, K, D = (2_000 if args.quick else 20_000), 10, 5
    X = rng.normal(size=(T, D)) * 2
    start = GaussianHSMM(n_components=K, max_duration=50, n_iter=1, random_state=0).fit(X[:500])
    hmm = GaussianHMM(n_components=K, n_iter=1, random_state=0).fit(X[:500])

    def fresh(model):
        m = type(model)(**model.get_params()).set_params(init_params="")
        for name in model._learned_names():
            setattr(m, name, np.array(getattr(model, name)))
        return m

    rounds = harness.interleaved({"HSMM": lambda: fresh(start).fit(X), "HMM": lambda: fresh(hmm).fit(X)},
                                 args.rounds)
    loads += rounds.loads
    ratio = rounds.paired_ratio("HSMM", "HMM")
    rows.append(harness.row("GaussianHSMM EM iteration", f"T={T}, K={K}, D={D}, diag, max_duration=50",
                            "CPU time relative to GaussianHMM's EM iteration", ratio, None, "varorder GaussianHMM",
                            better="lower", note=f"wall {rounds.paired_ratio('HSMM', 'HMM', clock='wall'):.2f}x; "
                                                 f"HSMM {rounds.median('HSMM'):.3f} CPU s, HMM "
                                                 f"{rounds.median('HMM'):.3f} CPU s; target <= 3x"))
    details["HSMM vs HMM EM iteration"] = {name: rounds.cpu(name) for name in ("HSMM", "HMM")}
    print(f"HSMM / HMM per EM iteration: {ratio:.2f}x (HSMM {rounds.median('HSMM'):.4f} CPU s, HMM "
          f"{rounds.median('HMM'):.4f} CPU s; load {rounds.load()})")


if __name__ == "__main__":
    main()
