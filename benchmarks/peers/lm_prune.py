"""varorder lm prune against an independent implementation of Stolcke's (1998)
relative-entropy pruning: Kaldi's ``egs/wsj/s5/utils/lang/ngram_entropy_pruning.py``
(Ruizhe Huang, 2021, Apache-2.0; the same file is icefall's ``shared/ngram_entropy_pruning.py``),
run as a peer, never vendored: pass its path with ``--kaldi-script`` (fetch it with
``curl -LO https://raw.githubusercontent.com/kaldi-asr/kaldi/master/egs/wsj/s5/utils/lang/ngram_entropy_pruning.py``).

On a modified Kneser-Ney 3-gram of PTB train (varorder's estimator), for each threshold:
the n-grams kept (as sets of strings, compared exactly), the perplexity of each pruned
model on PTB valid (test held back), and CPU seconds. The peer runs twice: as published,
and with its context marginal of a lone ``<s>`` read as p(``</s>``), which is what SRILM's
``Ngram::computeContextProb`` does (the published script adds p(``<s>``) = 10^-99 there,
so it prunes more ``<s> w`` bigrams than SRILM); varorder follows SRILM. Beside them,
count pruning (``ModifiedKneserNey(prune=...)``, lmplz's ``--prune``) for the size-vs-
perplexity curve.

    PYTHONPATH=src python benchmarks/peers/lm_prune.py --kaldi-script /tmp/peers/ngram_entropy_pruning.py \\
        --data /work/shared/data/ptb-lm --out benchmarks/results/lm-prune-entropy.json
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

# The published script's context marginal, and SRILM's reading of a lone <s> as </s>.
PUBLISHED = "        seq = sequence\n        while len(seq) > 0:\n"
SRILM_CONTEXT = ("        seq = sequence\n        if len(seq) == 1 and seq[0] == self.SOS:\n"
                 "            seq = (self.EOS,)\n        while len(seq) > 0:\n")


def arpa_ngrams(path: Path) -> set[str]:
    """The n-grams of an ARPA file as strings ("order:w1 w2 ..."), read independently."""
    grams, order = set(), 0
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            line = line.strip()
            if line.endswith("-grams:"):
                order = int(line[1:].split("-")[0])
            elif order and line and not line.startswith("\\"):
                fields = line.split("\t") if "\t" in line else line.split()
                words = fields[1] if "\t" in line else " ".join(fields[1:order + 1])
                grams.add(f"{order}:{words}")
    return grams


def recount_header(path: Path) -> None:
    """Rewrite the ``\\data\\`` counts of ``path`` from its sections: the peer keeps an order's
    old count when it prunes every n-gram of that order (only at extreme thresholds)."""
    lines = path.read_text(encoding="utf-8").split("\n")
    counts, order = {}, 0
    for line in lines:
        if line.strip().endswith("-grams:"):
            order = int(line.strip()[1:].split("-")[0])
            counts[order] = 0
        elif order and line.strip() and not line.startswith("\\"):
            counts[order] += 1
    fixed = [f"ngram {line.split()[1].split('=')[0]}={counts.get(int(line.split()[1].split('=')[0]), 0)}"
             if line.startswith("ngram ") else line for line in lines]
    path.write_text("\n".join(fixed), encoding="utf-8")


def run_peer(script: Path, arpa: Path, threshold: float, output: Path) -> float:
    """CPU seconds of the peer pruning ``arpa`` at ``threshold`` into ``output``."""
    run = harness.run_child([sys.executable, str(script), "-threshold", repr(threshold), "-lm", str(arpa),
                             "-write-lm", str(output), "-verbose", "3"])
    recount_header(output)
    return run.cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kaldi-script", type=Path, required=True)
    parser.add_argument("--data", type=Path, default=harness.DATA / "ptb-lm")
    parser.add_argument("--thresholds", type=float, nargs="+", default=[1e-8, 1e-7, 1e-6])
    parser.add_argument("--count-prune", nargs="*", default=["0 0 1", "0 1 1", "0 1 2"])
    parser.add_argument("--work", type=Path, default=None)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()

    from varorder.lm import ModifiedKneserNey
    from varorder.lm.arpa import read_arpa, write_arpa
    from varorder.lm.corpus import iter_sentences
    from varorder.lm.prune import entropy_pruning

    work = args.work or Path(tempfile.mkdtemp(prefix="lm-prune-"))
    work.mkdir(parents=True, exist_ok=True)
    train, valid = args.data / "ptb.train.txt.gz", args.data / "ptb.valid.txt.gz"
    valid_sentences = [tokens for _, tokens in iter_sentences(valid)]
    arpa = work / "ptb3.arpa"
    if not arpa.exists():
        write_arpa(ModifiedKneserNey(order=3).fit(train).model_, arpa)
    model = read_arpa(arpa)
    full_perplexity = model.perplexity(valid_sentences)
    published = args.kaldi_script
    patched = work / "ngram_entropy_pruning_srilm_context.py"
    text = published.read_text()
    if PUBLISHED not in text:
        raise SystemExit(f"{published}: its log_joint_prob is not the published one; cannot make the SRILM variant")
    patched.write_text(text.replace(PUBLISHED, SRILM_CONTEXT, 1))

    loads, rows, details = [], [], {"unpruned": {"ngrams": list(model.ngram_counts),
                                                 "valid_perplexity": round(full_perplexity, 4)}, "thresholds": []}
    for threshold in args.thresholds:
        loads.append(harness.load_average())
        start = time.process_time()
        criteria = entropy_pruning(model)
        kept = criteria.kept(threshold)
        pruned = criteria.prune(threshold)
        ours_cpu = time.process_time() - start
        ours_path = work / f"varorder-{threshold:g}.arpa"
        write_arpa(pruned, ours_path)
        srilm_set = {f"{m + 1}:{' '.join(model.vocabulary.words[w] for w in row)}"
                     for m in range(model.order) for row in model.ngrams(m + 1)[0][kept[m]].tolist()}
        ours_perplexity = pruned.perplexity(valid_sentences)
        record = {"threshold": threshold, "varorder": {"kept": len(srilm_set), "written": sum(pruned.ngram_counts),
                                                       "counts": list(pruned.ngram_counts),
                                                       "valid_perplexity": round(ours_perplexity, 4),
                                                       "cpu_s": round(ours_cpu, 2)}}
        for name, script in (("published", published), ("srilm_context", patched)):
            loads.append(harness.load_average())
            peer_path = work / f"kaldi-{name}-{threshold:g}.arpa"
            peer_cpu = run_peer(script, arpa, threshold, peer_path)
            peer_set = arpa_ngrams(peer_path)
            peer_perplexity = read_arpa(peer_path).perplexity(valid_sentences)
            only_ours, only_peer = srilm_set - peer_set, peer_set - srilm_set
            record[name] = {"kept": len(peer_set), "valid_perplexity": round(peer_perplexity, 4),
                            "cpu_s": round(peer_cpu, 2), "only_varorder": len(only_ours), "only_peer": len(only_peer),
                            "examples_only_varorder": sorted(only_ours)[:5], "examples_only_peer": sorted(only_peer)[:5]}
            print(f"θ={threshold:g} {name}: kept {len(peer_set)} vs varorder {len(srilm_set)} (only varorder "
                  f"{len(only_ours)}, only peer {len(only_peer)}), ppl {peer_perplexity:.4f} vs {ours_perplexity:.4f}, "
                  f"CPU {peer_cpu:.1f} s vs {ours_cpu:.1f} s", flush=True)
        details["thresholds"].append(record)
        reference = record["srilm_context"]
        task = f"PTB 3-gram KN ({sum(model.ngram_counts)} n-grams), entropy pruning θ = {threshold:g}"
        peer_name = "Kaldi ngram_entropy_pruning.py (SRILM's <s> context)"
        rows.append(harness.row("varorder lm prune", task, "PTB valid perplexity", ours_perplexity,
                                reference["valid_perplexity"], peer_name, digits=7,
                                note=f"kept {len(srilm_set)} vs {reference['kept']} n-grams, {reference['only_varorder']} "
                                     f"only in varorder's set, {reference['only_peer']} only in the peer's; the "
                                     f"published script: "
                                     f"kept {record['published']['kept']}, perplexity "
                                     f"{record['published']['valid_perplexity']}"))
        rows.append(harness.row("varorder lm prune", task, "CPU s (user + system), one run", ours_cpu,
                                reference["cpu_s"], peer_name, digits=3,
                                note="varorder: criteria, kept sets and the pruned model in memory; the peer: the "
                                     "whole script (reading and writing ARPA included)"))
    counted = []
    for spec in args.count_prune:
        thresholds = [int(x) for x in spec.split()]
        counted_model = ModifiedKneserNey(order=3, prune=thresholds).fit(train).model_
        counted.append({"prune": thresholds, "ngrams": sum(counted_model.ngram_counts),
                        "valid_perplexity": round(counted_model.perplexity(valid_sentences), 4)})
        print(f"count pruning {thresholds}: {counted[-1]}", flush=True)
    details["count_pruning"] = counted
    document = harness.results_document(
        "n-gram LMs", "Entropy pruning (Stolcke 1998, SRILM's -prune) vs Kaldi's ngram_entropy_pruning.py, PTB 3-gram",
        rows, issue=46, loads=loads, details=details)
    if args.out:
        harness.write_results(args.out, document)
    print(json.dumps(document, indent=1, ensure_ascii=False))


if __name__ == "__main__":
    main()
