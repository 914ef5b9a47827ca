"""The three RCMS/beam builders before (copies in OLD_DIR, as for
benchmarks/selection_builders.py) and after they shared varorder.engine.selection
(#34 item 3): every output array compared bit for bit on random instances (ties in the
scores, −∞ potentials, capped contexts, forced labels, gold extras, exact bigrams).

    python benchmarks/selection_equality.py OLD_DIR [TRIALS]
"""
import importlib.util
import sys

import numpy as np

def load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec); sys.modules[name] = mod; spec.loader.exec_module(mod); return mod

old_ctx = load("old_context_set", f"{sys.argv[1]}/old_context_set.py")
old_dec = load("old_decipher_sets", f"{sys.argv[1]}/old_decipher_sets.py")
old_tra = load("old_transduce_lattice", f"{sys.argv[1]}/old_transduce_lattice.py")
from varorder.contexts import context_set as new_ctx
from varorder.contexts.features import NgramFeatureSpace
from varorder.decipher import context_sets as new_dec
from varorder.decipher.transitions import fit_transitions
from varorder.transduce import lattice as new_tra
from varorder.transduce import AlignmentFeatureSpace

COMPARED = [0]
def fields(o):
    if hasattr(o, "__dict__"):
        return dict(vars(o))
    names = [n for c in type(o).__mro__ for n in getattr(c, "__slots__", ())]
    return {n: getattr(o, n) for n in names if hasattr(o, n)}
def same(a, b, what):
    if isinstance(a, tuple):
        for i, (x, y) in enumerate(zip(a, b)):
            same(x, y, what + f"[{i}]")
        return
    if isinstance(a, np.ndarray):
        assert a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b, equal_nan=True), what
        COMPARED[0] += 1
        return
    if isinstance(a, (int, float, str, bool, np.generic)) or a is None:
        assert a == b or (a != a and b != b), what
        return
    if "Feature" in type(a).__name__:
        return
    fa, fb = fields(a), fields(b)
    assert fa.keys() == fb.keys(), what
    for k in fa:
        same(fa[k], fb[k], what + "." + k)
n = {"contexts": 0, "decipher": 0, "transduce": 0}
rng = np.random.default_rng(0)
for trial in range(int(sys.argv[2]) if len(sys.argv) > 2 else 200):
    # contexts
    V, order = int(rng.integers(2, 5)), int(rng.integers(2, 4))
    fs = NgramFeatureSpace(V, order, backoff=bool(rng.integers(2)))
    L = int(rng.integers(1, 9))
    obs = rng.normal(size=(L, V)) * 2
    obs[rng.random((L, V)) < 0.1] = -np.inf
    theta = rng.normal(size=fs.size)
    theta = np.round(theta, 1) if trial % 3 == 0 else theta  # ties
    mode = "beam" if trial % 4 == 1 else "rcms"
    kw = {}
    if mode == "rcms" and trial % 5 == 2:
        kw["max_context"] = fs.window + int(rng.integers(0, 2))
    if trial % 7 == 3:
        kw["force_labels"] = rng.integers(0, V, size=L)
    if mode == "rcms" and trial % 6 == 4:
        kw["coverage_weight"] = -1.5
    B = int(rng.integers(1, 6))
    a = old_ctx.build_context_lattice(obs, theta, fs, B, mode=mode, **kw)
    b = new_ctx.build_context_lattice(obs, theta, fs, B, mode=mode, **kw)
    same(a, b, "contexts"); n["contexts"] += 1
    # decipher
    words = ["a", "b", "c", "d"]
    sents = [[words[i] for i in rng.integers(0, 4, size=int(rng.integers(1, 6)))] for _ in range(30)]
    tables = fit_transitions(words, sents, int(rng.integers(1, 3)))
    em = np.log(rng.dirichlet(np.ones(4), size=int(rng.integers(1, 9))))
    if trial % 3 == 0:
        em = np.round(em, 1)
    dmode = "beam" if trial % 2 else "rcms"
    size = int(rng.integers(1, 6))
    a = old_dec.build_context_arrays(em, tables, size, dmode)
    b = new_dec.build_context_arrays(em, tables, size, dmode)
    same(a, b, "decipher")
    pa = old_dec.context_estep(em, tables, size, dmode); pb = new_dec.context_estep(em, tables, size, dmode)
    assert np.array_equal(pa[0], pb[0]) and pa[1:] == pb[1:]
    n["decipher"] += 1
    # transduce
    Vt, Lp, tord, M = int(rng.integers(1, 3)), int(rng.integers(1, 4)), int(rng.integers(2, 4)), int(rng.integers(1, 3))
    fst = AlignmentFeatureSpace(Vt, 2, order=tord, max_advance=M, hash_bits=18, edge_unigrams=bool(trial & 1),
                                backoff=bool(trial & 2))
    x = rng.integers(0, 2, size=Lp)
    th = rng.normal(size=fst.size)
    if trial % 3 == 0:
        th = np.round(th, 1)
    Lmax = int(rng.integers(1, 5))
    sel = "beam" if trial % 2 else "rcms"
    kw = {}
    if trial % 5 == 1:
        kw["gold_letters"] = rng.integers(0, Vt, size=Lmax); kw["extra_gold"] = int(rng.integers(0, 3))
    if trial % 7 == 2:
        kw["bigram_exact"] = True
    B = int(rng.integers(1, 5))
    try:
        a = old_tra.build_alignment_lattice(x, th, fst, B, selection=sel, max_length=Lmax, **kw)
    except ValueError as e:
        try:
            new_tra.build_alignment_lattice(x, th, fst, B, selection=sel, max_length=Lmax, **kw)
        except ValueError as e2:
            assert str(e) == str(e2)
            continue
        raise
    b = new_tra.build_alignment_lattice(x, th, fst, B, selection=sel, max_length=Lmax, **kw)
    same(a, b, "transduce"); n["transduce"] += 1
print("bit-identical:", n, "arrays compared:", COMPARED[0])
