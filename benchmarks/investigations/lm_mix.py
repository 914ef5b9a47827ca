"""Mixing two domains' n-gram models (varorder lm mix): PTB and War and Peace, each a
modified Kneser-Ney 3-gram of its train split over one vocabulary (PTB's 10k words: War and
Peace lowercased, cut at every character outside a-z, 0-9 and the apostrophe, numbers read
as PTB's ``N``, other words as ``<unk>``, so that both models score the same token stream);
adapting to each domain in turn: λ by EM on the first half of that domain's valid split,
perplexity on its second half (test splits held back). Rows per target domain: the static
mixture (SRILM's -mix-lm -write-lm way: union of n-grams, recomputed back-off weights)
against the exact dynamic mixture it approximates, and the dynamic mixture against the
in-domain model alone; details: the weights, the EM history, sizes, CPU seconds. No peer
runs here (SRILM is not installed on the measuring machine).

    PYTHONPATH=src python benchmarks/investigations/lm_mix.py --out benchmarks/results/lm-mix.json
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/
import harness  # noqa: E402


def in_ptb_vocabulary(source: Path, destination: Path, vocabulary) -> Path:
    """War and Peace text in PTB's conventions and vocabulary (see the module docstring)."""
    import re

    from varorder.lm.corpus import iter_sentences

    with open(destination, "w", encoding="utf-8") as out:
        for _, tokens in iter_sentences(source):
            words = re.sub(r"[^a-z0-9']+", " ", " ".join(tokens).lower()).split()
            words = ["N" if w.isdigit() else w if w in vocabulary else "<unk>" for w in words]
            if words:
                out.write(" ".join(words) + "\n")
    return destination


def halves(path):
    from varorder.lm.corpus import iter_sentences

    sentences = [tokens for _, tokens in iter_sentences(path)]
    return sentences[: len(sentences) // 2], sentences[len(sentences) // 2:]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--order", type=int, default=3)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()

    from varorder.lm import ModifiedKneserNey
    from varorder.lm.mix import MixtureLM, static_mixture, tune_weights

    ptb = harness.DATA / "ptb-lm"
    loads = [harness.load_average()]
    models = [ModifiedKneserNey(order=args.order).fit(ptb / "ptb.train.txt.gz").model_]
    work = Path(tempfile.mkdtemp(prefix="lm-mix-"))
    vocabulary = set(models[0].vocabulary.words)
    wap = {split: in_ptb_vocabulary(harness.DATA / "warandpeace" / f"wap.{split}.txt.gz", work / f"wap.{split}.txt",
                                    vocabulary) for split in ("train", "valid")}
    models.append(ModifiedKneserNey(order=args.order).fit(wap["train"]).model_)
    loads.append(harness.load_average())
    names = ("PTB", "War and Peace")
    rows, details = [], {"ngrams": {name: list(m.ngram_counts) for name, m in zip(names, models)}, "targets": {}}
    for target, valid in zip(names, (ptb / "ptb.valid.txt.gz", wap["valid"])):
        tune, report = halves(valid)
        start = time.process_time()
        weights, history = tune_weights(models, tune)
        tune_cpu = time.process_time() - start
        start = time.process_time()
        static = static_mixture(models, weights)
        static_cpu = time.process_time() - start
        loads.append(harness.load_average())
        figures = {"dynamic": MixtureLM(models, weights).perplexity(report), "static": static.perplexity(report),
                   **{f"{name} model": m.perplexity(report) for name, m in zip(names, models)}}
        details["targets"][target] = {"weights": [round(float(w), 6) for w in weights], "em_log10_likelihood": history,
                                      "tune_cpu_s": round(tune_cpu, 2), "static_build_cpu_s": round(static_cpu, 2),
                                      "static_ngrams": list(static.ngram_counts),
                                      "perplexity": {k: round(v, 4) for k, v in figures.items()}}
        print(target, details["targets"][target]["perplexity"], weights, flush=True)
        task = (f"{args.order}-gram KN models of PTB and War and Peace (PTB vocabulary), adapted to {target}: "
                f"λ = {weights[0]:.3f} / {weights[1]:.3f} by EM on half its valid split, the other half scored")
        rows.append(harness.row("varorder lm mix (static)", task, "perplexity", figures["static"], figures["dynamic"],
                                "varorder dynamic mixture (exact)", digits=7))
        rows.append(harness.row("varorder lm mix (dynamic)", task, "perplexity", figures["dynamic"],
                                figures[f"{target} model"], f"the {target} model alone", digits=7,
                                note=" / ".join(f"{k} {v:.2f}" for k, v in figures.items())))
    document = harness.results_document("n-gram LMs", "Mixing PTB and War and Peace: static mixture vs dynamic",
                                        rows, issue=46, loads=loads, details=details)
    if args.out:
        harness.write_results(args.out, document)
    print(json.dumps(document, indent=1, ensure_ascii=False))


if __name__ == "__main__":
    main()
