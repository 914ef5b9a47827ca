"""Why proximal-gradient PEP (Cotterell & Eisner 2015, §6.1: η = 0.05, λ = 0.01, one step
per update) converges slowly here: (1) one projection of a fixed peaked distribution onto
the substring family, cross-entropy after n proximal-gradient steps against the closed-form
greedy projection; (2) PEP on a synthetic lexicon, the gold forms' NLL after every sweep.

    PYTHONPATH=src python benchmarks/investigations/strings_prox_convergence.py projection
    PYTHONPATH=src python benchmarks/investigations/strings_prox_convergence.py sweeps --size 100 --sweeps 4 --eta 0.05
    # the paper's schedule (§7): K = 20 on the first few sweeps, one step per update, until converged
    PYTHONPATH=src python benchmarks/investigations/strings_prox_convergence.py sweeps --size 100 --sweeps 40 \
        --inner-passes 20 --passes-sweeps 3 --tol 0.01 --max-cpu 600
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time

import numpy as np

from varorder.io._text import atomic_write_text
from varorder.strings.inference import PROX_PENALTIES, EPOptions, StringEP, _string_score, belief_nll, project_acceptor
from varorder.strings.model import synthetic_lexicon
from varorder.wfsa import strings_acceptor


def cross_entropy(machine, theta, p):
    log_z = machine.log_partition(theta)
    return -sum(math.exp(w) * _string_score(machine, theta, s, log_z) for s, w in p.items())


def projection(args):
    alphabet = tuple("abcdefghijklmnop")
    p = {tuple("ahbk"): math.log(0.8), tuple("ahb"): math.log(0.1), tuple("ahbko"): math.log(0.05),
         tuple("chbk"): math.log(0.05)}
    acceptor = strings_acceptor(alphabet, p)
    print(f"H(p) = {-sum(math.exp(w) * w for w in p.values()):.3f} nats")
    machine, theta = project_acceptor(acceptor, optimizer="greedy", steps=3, lam=0.003)
    print(f"closed form, greedy growing (λ = 0.003): cross-entropy {cross_entropy(machine, theta, p):.3f}")
    for eta in args.etas:
        for steps in args.steps:
            started = time.perf_counter()
            machine, theta = project_acceptor(acceptor, optimizer="prox", steps=steps, eta=eta, lam=args.lam)
            print(f"prox η = {eta:g}, {steps} steps (λ = {args.lam:g}): cross-entropy "
                  f"{cross_entropy(machine, theta, p):.3f}, {np.count_nonzero(theta)} nonzero θ, "
                  f"{time.perf_counter() - started:.1f} s", flush=True)


def sweeps(args):
    graph = synthetic_lexicon(args.size, seed=args.seed, alphabet_size=args.alphabet_size)
    started = time.perf_counter()
    cpu = time.process_time()
    ep = StringEP(family="pep", optimizer="prox", lam=args.lam, eta=args.eta, iterations=args.sweeps,
                  inner_passes=args.inner_passes, options=EPOptions(passes_sweeps=args.passes_sweeps,
                                                                    prox_penalty=args.prox_penalty,
                                                                    prox_steps=args.prox_steps))
    rows = []

    def progress(done, total):
        ep.seconds_ = time.perf_counter() - started
        beliefs = ep._beliefs()
        score = belief_nll(beliefs, graph.gold)
        rows.append({"sweep": done, "seconds": round(ep.seconds_, 1), "cpu_seconds": round(time.process_time() - cpu, 1),
                     "nll": score["nll"], "accuracy": score["accuracy"], "capped": score["capped"],
                     "mean_states": beliefs.stats["mean_states"], "residual": ep.history_[-1]["residual"],
                     "backtracks": ep.stats_.get("backtracks", 0), "load": round(os.getloadavg()[0], 2)})
        print(f"sweep {done}: {ep.seconds_:.1f} s wall, {rows[-1]['cpu_seconds']} s CPU, NLL {score['nll']:.3f}, "
              f"1-best {score['accuracy']:.3f}, capped {score['capped']}, belief states "
              f"{beliefs.stats['mean_states']:.1f}, residual {rows[-1]['residual']:.3g}, load {rows[-1]['load']}",
              flush=True)
        if args.output:
            with atomic_write_text(args.output) as handle:
                json.dump({"args": vars(args), "rows": rows}, handle, indent=1)
        if args.max_cpu and rows[-1]["cpu_seconds"] >= args.max_cpu:
            raise _OutOfTime
        if len(rows) > args.passes_sweeps and abs(rows[-2]["nll"] - rows[-1]["nll"]) < args.tol:
            raise _OutOfTime  # converged: the NLL moved less than --tol in one sweep

    ep.progress = progress
    try:
        ep.fit(graph)
    except _OutOfTime:
        pass


class _OutOfTime(Exception):
    pass


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("what", choices=("projection", "sweeps"))
    parser.add_argument("--etas", type=float, nargs="+", default=[0.05, 0.3, 1.0])
    parser.add_argument("--steps", type=int, nargs="+", default=[5, 20, 80])
    parser.add_argument("--eta", type=float, default=0.05)
    parser.add_argument("--lam", type=float, default=0.01)
    parser.add_argument("--prox-penalty", choices=PROX_PENALTIES, default="message",
                        help="sweeps: penalise the message θ_{F→V} (the paper's eq. 7 + λΩ) or the belief θ_V "
                             "(an option)")
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--alphabet-size", type=int, default=16)
    parser.add_argument("--prox-steps", type=int, default=1, help="proximal steps per update (1: the paper's)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--sweeps", type=int, default=4)
    parser.add_argument("--inner-passes", type=int, default=2, help="K on the first --passes-sweeps sweeps")
    parser.add_argument("--passes-sweeps", type=int, default=1, help="sweeps with K passes (§7: the first few)")
    parser.add_argument("--tol", type=float, default=0.0, help="stop when one sweep moves the NLL less than this")
    parser.add_argument("--max-cpu", type=float, default=0.0, help="stop after the sweep that passes this CPU time")
    parser.add_argument("-o", "--output", default=None)
    args = parser.parse_args(argv)
    (projection if args.what == "projection" else sweeps)(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
