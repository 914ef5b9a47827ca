"""Trace one latent variable through PEP/EP inference (Cotterell & Eisner 2015, eqs. 5-7):
after every update of ``--variable`` print the belief's log-probability of its gold value
and of ``--probe`` strings, and its context count; at the end its 6 best strings and
contexts. ``--dump-updates`` also prints, around those updates (1-based), the weights of
every incoming message θ_{F→V} over |θ| > 0.5 — how the diagnosis of issue #14's STEM47
was made (docs/notes/benchmarks-notebook.md, "The 300-word gap").

    PYTHONPATH=src python benchmarks/investigations/strings_trace.py --size 300 --variable STEM47 --probe pppa pap papi pai
    PYTHONPATH=src python benchmarks/investigations/strings_trace.py --size 300 --variable STEM47 --drop-cavity-contexts --dump-updates 12
"""

from __future__ import annotations

import argparse
import math
import sys

import numpy as np

from varorder.strings.inference import StringEP, _string_score, belief_nll, make_method
from varorder.strings.model import synthetic_lexicon


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=300)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--alphabet-size", type=int, default=16)
    parser.add_argument("--variable", default="STEM47")
    parser.add_argument("--probe", nargs="*", default=[])
    parser.add_argument("--method", default="pep")
    parser.add_argument("--lam", type=float, default=0.001)
    parser.add_argument("--drop-cavity-contexts", action="store_true")
    parser.add_argument("--dump-updates", type=int, nargs="*", default=[])
    args = parser.parse_args(argv)
    graph = synthetic_lexicon(args.size, seed=args.seed, alphabet_size=args.alphabet_size)
    target = args.variable
    gold = graph.gold[target]
    print("gold", target, "".join(gold))
    for i, w in enumerate(graph.words):
        if target in w.morphemes:
            print("word", i, w.morphemes, "".join(w.surface or ()), ["".join(graph.gold[m]) for m in w.morphemes])
    est = make_method(args.method, lam=args.lam, iterations=3, inner_passes=2,
                      cavity_contexts=not args.drop_cavity_contexts)
    probes = [tuple(gold)] + [tuple(p) for p in args.probe]
    seen = [0]

    def score(v, string):
        machine, theta = est.belief_machine(v), est._theta(v)
        try:
            log_z = machine.log_partition(theta)
        except ValueError:
            log_z = math.inf
        return _string_score(machine, theta, string, log_z)

    def dump(v):
        registry = est.registry_[v]
        for f in est.neighbours_[v]:
            m = est._msg(f, v)
            print("   msg", f, " ".join(f"{''.join(registry.strings[i])}:{m[i]:.1f}"
                                     for i in np.flatnonzero(np.abs(m) > 0.5) if len(registry.strings[i]) >= 2))

    original = StringEP._update

    def traced(self, v, f, unigram, mu):
        if v == target:
            seen[0] += 1
            if seen[0] in args.dump_updates:
                print(" before", seen[0], "contexts", sorted("".join(c) for c in self.contexts_.get(v, [])))
                dump(v)
        original(self, v, f, unigram, mu)
        if v == target:
            contexts = len(self.contexts_.get(v, [])) if hasattr(self, "contexts_") else "-"
            print(seen[0], f, " ".join(f"{''.join(s) or 'ε'}:{score(v, s):.2f}" for s in probes), "contexts", contexts)
            if seen[0] in args.dump_updates:
                print(" after", seen[0], "contexts", sorted("".join(c) for c in self.contexts_.get(v, [])))
                dump(v)

    StringEP._update = traced
    try:
        est.fit(graph)
    finally:
        StringEP._update = original
    print(belief_nll(est.beliefs_, graph.gold))
    print("top", [("".join(s), round(p, 3)) for s, p in est.beliefs_.top(target, 6)])
    if hasattr(est, "contexts_"):
        print("contexts", sorted("".join(c) for c in est.contexts_[target]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
