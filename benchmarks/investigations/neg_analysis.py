"""Named-entity generation (issue #29): why the SampleRank graph does not beat the exact unary model on GUM dev.

    PYTHONPATH=src python benchmarks/investigations/neg_analysis.py [--gum ../shared/data/gum] [--json out.json]

Three measurements (docs/notes/29-neg.md reports them):

1. **Held-out fifth of train** (the development protocol: train on the first 118 train documents,
   score the last 30): (b), (c) and SampleRank settings and extensions over seeds 0, 1, 2 — where
   every setting was compared before dev was run.
2. **Oracle context on dev**: the exact unary model (b) given, as extra slot features, what the
   structured factors can only infer — the *gold* attribute of the entity's previous mention (what
   the contiguous pair factor reads) and the *gold* sentence distance to the entity's previous name
   (what the name link reads). The gain bounds what those factors can bring with perfect context.
3. **Where (d)'s seed spread comes from**: three training seeds × four decoding seeds on dev.
"""

from __future__ import annotations

import argparse
import copy
import json
import os

import numpy as np

from varorder.io.coref import read_coref
from varorder.base import nested_params
from varorder.neg.model import NegGenerator, NegOptions
from varorder.neg.task import build_documents, evaluate, normal_key

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the shared harness
import harness  # noqa: E402

HELD_OUT = [("(b) unary, exact", {"method": "unary"}, [0]),
            ("(c) chain, exact", {"method": "chain"}, [0]),
            ("(d) SampleRank", {}, [0, 1, 2]),
            ("(d) without the name link", {"link_factors": False}, [0, 1, 2]),
            ("SampleRank, unary factors only", {"chain_pairs": False, "other_pairs": False, "link_factors": False},
             [0, 1, 2]),
            ("(d) MIRA C = 0.1", {"rule": "mira", "C": 0.1}, [0, 1, 2]),
            ("(d) MIRA C = 0.01", {"rule": "mira", "C": 0.01}, [0, 1, 2]),
            ("(d) MIRA C = 0.01, 60 epochs", {"rule": "mira", "C": 0.01, "n_epochs": 60}, [0, 1, 2]),
            ("(d) margin 10", {"margin": 10.0}, [0, 1, 2]),
            ("(d) link codes a competitor in between", {"link_between": True}, [0, 1, 2]),
            ("(d) from (b)'s weights held, step 0.1", {"warm_start": "unary", "unary_step": 0.0, "step_size": 0.1},
             [0, 1, 2]),
            ("(d) from (b)'s weights held, step 0.01", {"warm_start": "unary", "unary_step": 0.0, "step_size": 0.01},
             [0, 1, 2]),
            ("(d) from (b)'s weights, unary step 0.1, MIRA C = 0.1",
             {"warm_start": "unary", "unary_step": 0.1, "step_size": 0.1, "rule": "mira", "C": 0.1}, [0, 1, 2]),
            ("(b) with person cues", {"method": "unary", "cues": True}, [0]),
            ("(d) with person cues", {"cues": True}, [0, 1, 2]),
            ("(d) with person cues, without the name link", {"cues": True, "link_factors": False}, [0, 1, 2])]


def _accuracies(documents, choices):
    scores = evaluate(documents, choices)
    return round(scores["reg08 type accuracy"], 4), round(scores["string accuracy"], 4)


def _summary(runs):
    a = np.array(runs)
    return {"type": round(float(a[:, 0].mean()), 4), "type_spread": round(float(np.ptp(a[:, 0])), 4),
            "string": round(float(a[:, 1].mean()), 4), "string_spread": round(float(np.ptp(a[:, 1])), 4),
            "runs": [list(r) for r in runs]}


def held_out(train):
    fit_on, score_on = train[:118], train[118:]
    out = {}
    for name, params, seeds in HELD_OUT:
        runs = []
        for seed in seeds:
            model = NegGenerator(**nested_params({"method": "samplerank"} | params, "options", NegOptions),
                                 random_state=seed).fit(fit_on)
            runs.append(_accuracies(score_on, model.predict(score_on)))
        out[name] = _summary(runs)
        print(f"held-out fifth  {name}: {out[name]}", flush=True)
    return out


def _with_oracle(documents, which):
    documents = copy.deepcopy(documents)
    for document in documents:
        last, last_name = {}, {}
        for j, slot in enumerate(document.slots):
            by_key = {normal_key(c.text): c for c in document.candidates[slot.entity]}
            previous = last.get(slot.entity)
            if "previous attribute" in which:
                gold = "none" if previous is None else by_key[normal_key(document.slots[previous].gold)].attr
                slot.features.append(f"oracle_prev={gold}")
            if "distance to the previous name" in which:
                q = last_name.get(slot.entity)
                slot.features.append("oracle_name=none" if q is None else
                                     f"oracle_name={min(slot.sentence - document.slots[q].sentence, 5)}"
                                     f"|{document.slots[q].paragraph == slot.paragraph}")
            last[slot.entity] = j
            if by_key[normal_key(slot.gold)].is_name:
                last_name[slot.entity] = j
    return documents


def oracle(train, dev):
    out = {}
    for which in ((), ("previous attribute",), ("distance to the previous name",),
                  ("previous attribute", "distance to the previous name")):
        fit_on, score_on = _with_oracle(train, which), _with_oracle(dev, which)
        model = NegGenerator(method="unary").fit(fit_on)
        name = "(b)" + "".join(f" + gold {w}" for w in which)
        out[name] = dict(zip(("type", "string"), _accuracies(score_on, model.predict(score_on))))
        print(f"oracle on dev  {name}: {out[name]}", flush=True)
    return out


def seed_spread(train, dev):
    out = {}
    for seed in (0, 1, 2):
        model = NegGenerator(random_state=seed).fit(train)
        runs = []
        for decode in range(4):
            model.random_state = decode  # the annealing's seed
            runs.append(_accuracies(dev, model.predict(dev)))
        out[f"training seed {seed}"] = _summary(runs)
        print(f"dev, training seed {seed}, decoding seeds 0-3: {out[f'training seed {seed}']}", flush=True)
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gum", default=str(harness.DATA / "gum"))
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    train = build_documents(read_coref(os.path.join(args.gum, "en_gum-ud-train.conllu.gz")))
    dev = build_documents(read_coref(os.path.join(args.gum, "en_gum-ud-dev.conllu.gz")))
    result = {"held-out fifth of train": held_out(train), "oracle context on dev": oracle(train, dev),
              "dev seed spread": seed_spread(train, dev)}
    if args.json:
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump(result, handle, indent=1)


if __name__ == "__main__":
    main()
