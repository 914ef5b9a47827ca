"""Proximal PEP against exact enumeration on a 3-variable tree with finite supports (issue #30).

Two stems S0, S1 and a shared suffix X, words S0·X and S1·X with observed surfaces, a prior
over a random finite support (seeded), the uniform edit transducer: a tree, so BP, EP with a
family that contains the marginals (EP-3gram: the supports are strings of ≤ 2 symbols) and PEP
at λ = 0 all have the exact marginals as their fixed point. Prints the worst total variation
over the variables between each method's beliefs and the marginals enumerated by
``varorder.testing.oracle.string_graph_marginals``, for PEP-prox at several step sizes and
sweep counts (Cotterell & Eisner 2015, §6.1, §7: one proximal step per message update).

    PYTHONPATH=src python benchmarks/investigations/strings_prox_tree.py [--seed 4] [--lam 0] [--sweeps 4 10 30] [--etas 0.05 1]
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np

from varorder.strings.inference import StringEP
from varorder.strings.model import EditTransducer, PhonologyGraph, Word, bigram_prior
from varorder.testing import oracle

AB = ("a", "b")


def tree_graph(seed: int):
    rng = np.random.default_rng(seed)
    strings = {tuple(rng.choice(AB, size=int(rng.integers(0, 3)))) for _ in range(5)}
    support = {s: math.log(p) for s, p in zip(strings, rng.dirichlet(np.ones(len(strings))))}
    edit = EditTransducer.uniform(AB, copy=0.8, delete=0.1, insert=0.1)
    words = [Word(("S0", "X"), ("a", "b", "a")), Word(("S1", "X"), ("b", "b"))]
    return PhonologyGraph(AB, ["S0", "S1", "X"], words, edit, bigram_prior(AB), prior_strings=support), support


def exact_marginals(graph, support):
    domains = {m: list(support) for m in graph.morphemes}
    factors = [((m,), lambda vals: support.get(vals[0], -math.inf)) for m in graph.morphemes]
    for w in graph.observed:
        factors.append((w.morphemes, lambda vals, w=w: oracle.edit_likelihood(
            AB, graph.edit.substitute.tolist(), graph.edit.insert.tolist(), sum(vals, ()), w.surface)))
    return oracle.string_graph_marginals(domains, factors)


def worst_tv(beliefs, exact) -> float:
    worst = 0.0
    for m, table in exact.items():
        q = {s: math.exp(beliefs.score(m, s)) for s in table}
        tv = 0.5 * (sum(abs(q[s] - p) for s, p in table.items()) + abs(1.0 - sum(q.values())))
        worst = max(worst, tv)
    return worst


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=4)
    parser.add_argument("--lam", type=float, default=0.0)
    parser.add_argument("--sweeps", type=int, nargs="+", default=[4, 10, 30])
    parser.add_argument("--etas", type=float, nargs="+", default=[0.05, 1.0])
    parser.add_argument("--max-order", type=int, default=None)
    args = parser.parse_args(argv)
    graph, support = tree_graph(args.seed)
    exact = exact_marginals(graph, support)
    print("| method | η | sweeps | worst TV to the exact marginals | CPU s |\n|---|---|---|---|---|")
    for label, estimator in (("EP-3gram", StringEP(family="ngram", order=3, iterations=4, inner_passes=3)),
                             (f"PEP-greedy(λ={args.lam:g})", StringEP(family="pep", optimizer="greedy", lam=args.lam,
                                                                      iterations=4, inner_passes=3))):
        cpu = time.process_time()
        estimator.fit(graph)
        print(f"| {label} | – | 4 | {worst_tv(estimator.beliefs_, exact):.2e} | {time.process_time() - cpu:.1f} |")
    for eta in args.etas:
        for sweeps in args.sweeps:
            cpu = time.process_time()
            pep = StringEP(family="pep", optimizer="prox", lam=args.lam, eta=eta, iterations=sweeps, inner_passes=3,
                           max_order=args.max_order).fit(graph)
            print(f"| PEP-prox(λ={args.lam:g}) | {eta:g} | {sweeps} | {worst_tv(pep.beliefs_, exact):.2e} | "
                  f"{time.process_time() - cpu:.1f} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
