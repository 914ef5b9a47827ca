"""Binary format version 2 (the trie, #46 item 4) against version 1 (hash tables) and, when
its binaries are given, KenLM's ``build_binary`` (probing and trie): file size, peak memory
and CPU of ``varorder lm build-binary``, open time, and lookups per CPU second.

    PYTHONPATH=src python benchmarks/peers/lm_binary_trie.py --models /tmp/trie-bench \\
        [--build-binary /tmp/peers/bin/build_binary] [--orders 3 5] [--rounds 3]

The ARPA files come from ``varorder lm train`` on PTB train (``--data``, default the
shared ptb-lm folder), written once into ``--models``. Each build is a child process
(its CPU from ``wait4``, its peak resident set), the builds of one order interleaved
round by round; opens and lookups run in this process, interleaved too. Lookups: every
token of PTB valid scored with state (``token_log10probs``), and the same tokens asked as
independent (context, word) queries (``lookups``). KenLM's binaries, when given, are
built and timed the same way and opened through the pip ``kenlm`` module (its per-sentence
``Model.score``: Python call overhead included, as a user sees it). Writes
``benchmarks/results/lm-binary-trie.json`` (``--output``).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import harness  # noqa: E402

PYTHON = sys.executable
# KenLM's figures from the issue-32 run (benchmarks/results/lm-kenlm-binary.json, 2026-11-27,
# load 9-10): the reference when its binaries are not installed here.
KENLM_RECORDED = {"trie_mb": 22.4, "probing_mb": 48.9, "probing_build_peak_mb": 54.01}


def _env() -> dict:
    return dict(os.environ, PYTHONPATH=str(harness.SRC))


def _train(models: Path, data: Path, order: int) -> Path:
    arpa = models / f"ptb{order}.arpa"
    if not arpa.exists():
        harness.run_child([PYTHON, "-m", "varorder", "lm", "train", str(data / "ptb.train.txt.gz"), "-n", str(order),
                           "-o", str(arpa)], env=_env())
    return arpa


def _builds(arpa: Path, models: Path, order: int, build_binary: str | None) -> dict[str, tuple[list, Path]]:
    out = {
        "v1": ([PYTHON, "-m", "varorder", "lm", "build-binary", str(arpa)], models / f"ptb{order}.v1.bin"),
        "v2": ([PYTHON, "-m", "varorder", "lm", "build-binary", "--trie", str(arpa)], models / f"ptb{order}.v2.bin"),
        "v2-q8": ([PYTHON, "-m", "varorder", "lm", "build-binary", "-q", "8", "-b", "8", str(arpa)],
                  models / f"ptb{order}.v2q8.bin"),
    }
    if build_binary:
        out["kenlm-probing"] = ([build_binary, "probing", str(arpa)], models / f"ptb{order}.kenlm-probing")
        out["kenlm-trie"] = ([build_binary, "trie", str(arpa)], models / f"ptb{order}.kenlm-trie")
        out["kenlm-trie-q8"] = ([build_binary, "-q", "8", "-b", "8", "trie", str(arpa)],
                                models / f"ptb{order}.kenlm-trieq8")
    return {name: (command + [str(path)], path) for name, (command, path) in out.items()}


def build_all(order: int, args, loads: list) -> tuple:
    """The builds of one order, interleaved round by round, each a child process. Run
    before this process maps or loads anything: a child's peak resident set counts the
    parent's pages until it execs."""
    models = Path(args.models)
    arpa = _train(models, Path(args.data), order)
    builds = _builds(arpa, models, order, args.build_binary)
    runs: dict[str, list] = {name: [] for name in builds}
    for r in range(args.rounds):
        names = list(builds) if r % 2 == 0 else list(builds)[::-1]
        for name in names:
            command, _ = builds[name]
            runs[name].append(harness.run_child(command, env=_env()))
            loads.append(harness.load_average())
    return arpa, builds, runs


def measure(order: int, built: tuple, args, rows: list, loads: list, details: dict) -> None:
    from varorder.lm.binary import open_binary
    from varorder.lm.corpus import open_text

    arpa, builds, runs = built
    task = f"PTB {order}-gram ARPA ({arpa.stat().st_size / 1e6:.1f} MB)"
    sizes = {name: path.stat().st_size / 1e6 for name, (_, path) in builds.items()}
    peak = {name: min(run.max_rss_mb for run in rs) for name, rs in runs.items()}
    cpu = {name: min(run.cpu for run in rs) for name, rs in runs.items()}
    details[f"order {order}"] = {
        "sizes_mb": {k: round(v, 3) for k, v in sizes.items()},
        "build_peak_rss_mb_per_round": {k: [round(run.max_rss_mb, 1) for run in rs] for k, rs in runs.items()},
        "build_cpu_s_per_round": {k: [round(run.cpu, 3) for run in rs] for k, rs in runs.items()},
    }
    kenlm_here = args.build_binary is not None
    for name in ("v2", "v2-q8"):
        label = "unquantised" if name == "v2" else "-q 8 -b 8"
        reference = ("kenlm-trie" if name == "v2" else "kenlm-trie-q8") if kenlm_here else None
        if reference:
            rows.append(harness.row(f"varorder format 2 ({label})", task, "file MB", sizes[name], sizes[reference],
                                    f"KenLM build_binary trie ({label})", note="target <= 1.2x KenLM trie (quantised)"))
        elif order == 5 and name == "v2":
            rows.append(harness.row(f"varorder format 2 ({label})", task, "file MB", sizes[name],
                                    KENLM_RECORDED["trie_mb"], "KenLM trie, recorded 2026-11-27 (reference; "
                                    "build_binary not installed here)", note="target <= 1.2x KenLM trie (quantised)"))
        rows.append(harness.row(f"varorder format 2 ({label})", task, "file MB", sizes[name], sizes["v1"],
                                "varorder format 1 (hash tables)"))
    for name in ("v2", "v2-q8"):
        label = "--trie" if name == "v2" else "-q 8 -b 8"
        if kenlm_here:
            reference_key = "kenlm-trie" if name == "v2" else "kenlm-trie-q8"
            reference, reference_name = peak[reference_key], f"KenLM build_binary trie ({label})"
            rows.append(harness.row(f"varorder lm build-binary {label}", task, "peak RSS MB, best of "
                                    f"{args.rounds} interleaved rounds", peak[name], peak["kenlm-probing"],
                                    "KenLM build_binary probing"))
        elif order == 5:
            reference, reference_name = (KENLM_RECORDED["probing_build_peak_mb"],
                                         "KenLM build_binary probing, recorded 2026-11-27 (reference)")
        else:
            reference, reference_name = None, None
        if reference:
            rows.append(harness.row(f"varorder lm build-binary {label}", task, "peak RSS MB, best of "
                                    f"{args.rounds} interleaved rounds", peak[name], reference, reference_name,
                                    note="target <= 2x KenLM's; varorder's includes the interpreter and NumPy "
                                         "(about 29 MB before the file is read; the build imports no Numba)"))
        rows.append(harness.row(f"varorder lm build-binary {label}", task, f"peak RSS MB, best of {args.rounds}",
                                peak[name], peak["v1"], "varorder lm build-binary (format 1)"))
        rows.append(harness.row(f"varorder lm build-binary {label}", task, f"CPU s, best of {args.rounds}",
                                cpu[name], cpu["v1"], "varorder lm build-binary (format 1)"))
        if kenlm_here:
            rows.append(harness.row(f"varorder lm build-binary {label}", task, f"CPU s, best of {args.rounds}",
                                    cpu[name], cpu["kenlm-trie" if name == "v2" else "kenlm-trie-q8"],
                                    "KenLM build_binary trie"))

    # Opening (the files verified when written: the structural open) and lookups.
    opened = {name: open_binary(builds[name][1]) for name in ("v1", "v2", "v2-q8")}
    openers = {name: (lambda p=builds[name][1]: open_binary(p)) for name in opened}
    kenlm_models = {}
    if kenlm_here:
        import kenlm

        for name in ("kenlm-probing", "kenlm-trie", "kenlm-trie-q8"):
            kenlm_models[name] = kenlm.Model(str(builds[name][1]))
            openers[name] = lambda p=builds[name][1]: kenlm.Model(str(p))
    opening = harness.interleaved(openers, args.rounds * 5)
    loads.extend(opening.loads)
    for name in ("v2", "v2-q8"):
        rows.append(harness.row(f"open_binary, format 2 ({name})", task, "open wall ms, median",
                                opening.median(name, "wall") * 1e3, opening.median("v1", "wall") * 1e3,
                                "open_binary, format 1"))
        if kenlm_here:
            rows.append(harness.row(f"open_binary, format 2 ({name})", task, "open wall ms, median",
                                    opening.median(name, "wall") * 1e3, opening.median("kenlm-trie", "wall") * 1e3,
                                    "kenlm.Model(trie binary)"))
    sentences = [line.split() for line in open_text(Path(args.data) / "ptb.valid.txt.gz")]
    ids, lengths = opened["v1"].vocabulary.encode_sentences(sentences)
    n_tokens = len(ids) + len(lengths)
    import numpy as np

    contexts, words, start = [], [], 0
    for length in lengths:  # every token with a full (order - 1)-word context, as independent queries
        sentence = [opened["v1"].vocabulary.bos_id] + ids[start:start + length].tolist() + \
                   [opened["v1"].vocabulary.eos_id]
        for i in range(order - 1, len(sentence)):
            contexts.append(sentence[i - order + 1:i])
            words.append(sentence[i])
        start += length
    contexts, words = np.asarray(contexts, dtype=np.int64), np.asarray(words, dtype=np.int64)  # (M, order - 1)
    scorers = {name: (lambda m=model: m.token_log10probs(ids, lengths)) for name, model in opened.items()}
    lookers = {f"{name} lookups": (lambda m=model: m.lookups(contexts, words)) for name, model in opened.items()}
    text = [" ".join(s) for s in sentences]
    for name, model in kenlm_models.items():
        scorers[name] = lambda m=model: [m.score(s) for s in text]
    scoring = harness.interleaved({**scorers, **lookers}, args.rounds * 3)
    loads.extend(scoring.loads)
    details[f"order {order}"]["scoring_cpu_s_per_round"] = {
        name: [round(x, 5) for x in scoring.cpu(name)] for name in list(scorers) + list(lookers)}
    for name in ("v2", "v2-q8"):
        rate = n_tokens / scoring.best(name) / 1e6
        rows.append(harness.row(f"token_log10probs, format 2 ({name})", f"{task}: PTB valid ({n_tokens} tokens)",
                                "M tokens per CPU s, best", rate, n_tokens / scoring.best("v1") / 1e6,
                                "token_log10probs, format 1", better="higher",
                                note=f"target: within 1.5x of format 1; paired CPU ratio "
                                     f"{scoring.paired_ratio(name, 'v1'):.2f}x"))
        rate = len(words) / scoring.best(f"{name} lookups") / 1e6
        rows.append(harness.row(f"lookups, format 2 ({name})",
                                f"{task}: the {len(words)} PTB valid tokens with a full context, as independent queries",
                                "M lookups per CPU s, best", rate, len(words) / scoring.best("v1 lookups") / 1e6,
                                "lookups, format 1", better="higher",
                                note=f"paired CPU ratio {scoring.paired_ratio(f'{name} lookups', 'v1 lookups'):.2f}x"))
        if kenlm_here:
            reference = "kenlm-trie" if name == "v2" else "kenlm-trie-q8"
            rows.append(harness.row(f"token_log10probs, format 2 ({name})", f"{task}: PTB valid",
                                    "M tokens per CPU s, best", n_tokens / scoring.best(name) / 1e6,
                                    n_tokens / scoring.best(reference) / 1e6, f"kenlm.Model.score ({reference})",
                                    better="higher", note="target >= KenLM trie's speed"))
    perplexity = {name: 10 ** (-float(model.token_log10probs(ids, lengths)[0].mean())) for name, model in opened.items()}
    details[f"order {order}"]["valid_perplexity"] = {k: round(v, 4) for k, v in perplexity.items()}
    details[f"order {order}"]["max_score_error_q8"] = opened["v2-q8"].max_score_error


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", required=True, help="folder for the ARPA and binary files")
    parser.add_argument("--data", default=str(harness.DATA / "ptb-lm"))
    parser.add_argument("--build-binary", default=None, help="KenLM's build_binary (optional peer)")
    parser.add_argument("--orders", type=int, nargs="+", default=[3, 5])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--output", default=str(harness.RESULTS / "lm-binary-trie.json"))
    args = parser.parse_args()
    Path(args.models).mkdir(parents=True, exist_ok=True)
    rows, loads, details = [], [harness.load_average()], {}
    began = time.time()
    built = {}
    for order in args.orders:
        built[order] = build_all(order, args, loads)
        print(f"order {order} built ({time.time() - began:.0f} s)", file=sys.stderr)
    for order in args.orders:
        measure(order, built[order], args, rows, loads, details)
        print(f"order {order} measured ({time.time() - began:.0f} s)", file=sys.stderr)
    details["kenlm_binaries"] = args.build_binary or "not installed (`which build_binary` finds nothing)"
    details["median_load"] = round(statistics.median(loads), 2)
    document = harness.results_document(
        "n-gram LMs", "Binary format 2 (trie, quantised) vs format 1 and KenLM: size, build memory, open, lookups",
        rows, issue=46, loads=loads, details=details)
    harness.write_results(args.output, document)
    print(f"wrote {args.output}", file=sys.stderr)


if __name__ == "__main__":
    main()
