"""Fingerprints of every alignment-lattice kind and of short training runs (issue #11).

A speed-up that claims identical results must leave this JSON unchanged: SHA-256 prefixes of
every array of 12 training words' lattices (RCMS model / target, beam, beam target, hybrid,
forced, exact bigram model / target) under {paper, backoff} features and {zero, random} weights,
and with ``full`` also the weights, per-pass log-likelihoods, 20-word dev CER and predictions of
8 training configurations (60 words, 2 passes). Run it with each version's ``src`` on
``PYTHONPATH`` and compare the outputs::

    PYTHONPATH=/tmp/before/src python benchmarks/guards/transduce_fingerprints.py full > before.json
    PYTHONPATH=src python benchmarks/guards/transduce_fingerprints.py full > after.json
"""
import sys, json, hashlib
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/, for papers.transduce
import numpy as np
from papers.transduce import load_split
from varorder.transduce.model import AlignmentTransducer, _max_length

try:  # the rarely used knobs in an options object; an older tree (a baseline) takes them as keywords
    from varorder.transduce.model import TransducerOptions
    from varorder.base import nested_params

    def spelled(params: dict) -> dict:
        return nested_params(params, "options", TransducerOptions)
except ImportError:
    def spelled(params: dict) -> dict:
        return params
from varorder.transduce.features import AlignmentFeatureSpace
from varorder.transduce.lattice import build_alignment_lattice
from varorder import lattice as lt

def h(*arrays):
    d = hashlib.sha256()
    for a in arrays:
        a = np.ascontiguousarray(a)
        d.update(str(a.dtype).encode() if a.dtype.kind != "i" else b"int"); d.update(a.astype(np.int64).tobytes() if a.dtype.kind == "i" else a.tobytes())
    return d.hexdigest()[:16]

X, Y, Xd, Yd = load_split("../shared/data/cmudict", 746, 253, 0)
out = {}
m0 = AlignmentTransducer(method="rcms", epochs=1).fit(X[:40], Y[:40])
for backoff in (False, True):
    for order in (5, 2):
        fs = AlignmentFeatureSpace(len(m0.codec_.letters), len(m0.codec_.phonemes), order, 3, 22, False, backoff)
        for thetaname in ("zero", "random"):
            theta = np.zeros(fs.size) if thetaname == "zero" else np.random.default_rng(1).normal(0, 1, fs.size)
            for k in range(12):
                x = m0.codec_.encode_input(X[100 + k]); y = m0.codec_.encode_output(Y[100 + k])
                if y is None: continue
                L = max(_max_length(len(x), 2.0, 2), len(y))
                kinds = {"bigram_model": dict(bigram_exact=True), "bigram_target": dict(bigram_exact=True, clamp=y)} if order == 2 else {
                    "rcms_model": {}, "rcms_target": dict(clamp=y), "beam": dict(selection="beam"),
                    "beam_target": dict(selection="beam", clamp=y),
                    "hybrid": dict(selection="beam", gold_letters=y, extra_gold=20),
                    "forced": dict(selection="beam", gold_letters=y, forced_moves=np.ones(len(y), np.int64) * 0 + 1)}
                for name, kw in kinds.items():
                    if name == "forced" and len(y) > len(x): kw["forced_moves"] = None; kw.pop("gold_letters")
                    try:
                        a = build_alignment_lattice(x, theta, fs, 20, max_length=L, **kw)
                    except ValueError as e:
                        out[f"{backoff}-{order}-{thetaname}-{k}-{name}"] = str(e); continue
                    l = a.lattice
                    out[f"{backoff}-{order}-{thetaname}-{k}-{name}"] = h(l.node_position, l.arc_source, l.arc_target, l.arc_label, l.arc_weight, l.final,
                        a.node_alignment, a.node_length, a.node_is_root, a.node_forward, a.node_is_end, a.arc_position, a.arc_features)
if sys.argv[1] == "full":
    configs = [dict(method="rcms"), dict(method="forced"), dict(method="target"), dict(method="hybrid"), dict(method="model"),
               dict(method="rcms", truncation=0.1), dict(method="rcms", backoff=True), dict(method="forced", backoff=True, truncation=0.1)]
    for cfg in configs:
        m = AlignmentTransducer(**spelled(dict(epochs=2, bigram_epochs=1, seed=3, **cfg))).fit(X[:60], Y[:60])
        pred = m.predict(Xd[:20])
        from varorder.eval.metrics import character_error_rate
        out[json.dumps(cfg)] = [hashlib.sha256(m.weights_.tobytes()).hexdigest()[:16], [r["train_log_likelihood"] for r in m.history_],
                                character_error_rate(pred, Yd[:20]), pred]
json.dump(out, sys.stdout, indent=0)
