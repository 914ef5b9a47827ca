"""``varorder demo``: the reified-context-models OCR experiment, or the engine on a toy HMM.

By default it runs the word-recognition experiment of Steinhardt & Liang ("Reified
Context Models", ICML 2015, §5) on the OCR letters shipped in the package
(:mod:`varorder.tasks.ocr`): a 4-gram model trained with beam search (beam 10), RCMS
(10 contexts per position) and beam 200 as near-exact inference, first with the
paper's own definitions (rows labelled ``paper``: eq. 6 features, App. A contexts of any
length, per-example AdaGrad, recall at 99% precision by the first-drop rule), then
RCMS(10) with each of varorder's extensions in its own labelled row (``+backoff``
features, ``+cap`` contexts at n − 1; ``--extension`` picks, ``--no-extensions`` skips
them). It prints the comparison table (letter and word accuracy, recall at 99%
precision by the paper's rule and the max-recall rule, speed) and writes the
precision–recall plot. The default training budget is small (1 epoch; a few minutes on
2 cores); ``--full`` runs 4 epochs.

``varorder demo --engine`` shows the engine instead, on Eisner's ice-cream HMM (Eisner
2002, "An Interactive Spreadsheet for Teaching the Forward-Backward Algorithm"): hidden
weather {HOT, COLD}, observed number of ice creams eaten per day; log Z, the Viterbi
path, the 3 best paths and a histogram of exact samples against the exact path
probabilities, all from :mod:`varorder.chain`.
"""

from __future__ import annotations

import itertools
import os

import click
import numpy as np

from varorder import chain
from varorder.cli._options import OutputFolder

STATES = ("HOT", "COLD")
# p(state), p(next | state), p(ice creams | state) from Eisner's spreadsheet
START = np.log([0.8, 0.2])
TRANSITION = np.log([[0.7, 0.3], [0.4, 0.6]])
EMISSION = np.log([[0.2, 0.4, 0.4], [0.5, 0.4, 0.1]])  # rows: state; columns: 1, 2, 3 ice creams


def engine_demo(observations: list[int], samples: int, seed: int) -> None:
    emissions = EMISSION[:, np.array(observations) - 1].T[None]  # (1, L, K)
    log_z = chain.log_partition(emissions, TRANSITION, START)[0]
    paths, scores = chain.viterbi(emissions, TRANSITION, START)
    top, top_scores = chain.kbest(emissions, TRANSITION, START, k=3)
    node, _ = chain.marginals(emissions, TRANSITION, START)
    draws = chain.sample(emissions, TRANSITION, START, n=samples, seed=seed)[0]

    def name(path):
        return " ".join(STATES[s] for s in path)

    click.echo(f"Ice creams eaten per day: {observations}")
    click.echo(f"log p(observations) = log Z = {log_z:.6f}   (p = {np.exp(log_z):.6g})")
    click.echo(f"Viterbi path: {name(paths[0])}   p(path | obs) = {np.exp(scores[0] - log_z):.4f}")
    click.echo("3 best paths:")
    for r in range(3):
        click.echo(f"  {r + 1}. {name(top[0, r])}   p = {np.exp(top_scores[0, r] - log_z):.4f}")
    click.echo("p(HOT on day t | obs): " + " ".join(f"{p:.3f}" for p in node[0, :, 0]))

    L = len(observations)
    counts = {}
    for row in map(tuple, draws):
        counts[row] = counts.get(row, 0) + 1
    exact = {}
    for path in itertools.product(range(2), repeat=L):
        exact[path] = float(np.exp(chain.path_score(emissions, TRANSITION, np.array([path]), START)[0] - log_z))
    click.echo(f"{samples} exact samples (forward filtering, backward sampling), seed {seed}:")
    click.echo(f"  {'path':<{5 * L}} {'exact':>8} {'sampled':>8}")
    for path, p in sorted(exact.items(), key=lambda kv: -kv[1]):
        freq = counts.get(path, 0) / samples
        bar = "#" * int(round(40 * freq))
        click.echo(f"  {name(path):<{5 * L}} {p:8.4f} {freq:8.4f} {bar}")


def ocr_demo(full: bool, epochs: int | None, max_train_words: int | None, extensions: tuple[str, ...], out: str,
             as_json: bool, off_beam: str = "force") -> None:
    from dataclasses import replace

    from varorder.tasks.ocr import (DEMO_EPOCHS, GAP_NOTE, PROTOCOLS, OcrConfig, format_table, run_ocr_experiment,
                                    write_json, write_plots)

    config = OcrConfig(epochs=OcrConfig.epochs if full else DEMO_EPOCHS, max_train_words=max_train_words,
                       off_beam=off_beam)
    if epochs is not None:
        config.epochs = epochs
    budget = "4 epochs" if full else "demo budget (--full for 4 epochs)"
    click.echo(f"Reified context models vs beam search on OCR word recognition — {budget}")
    click.echo("Rows labelled 'paper' follow the paper's definitions; each '+...' row adds one varorder extension.")
    label = "paper" if off_beam == "force" else f"paper, off-beam {off_beam}"
    results = run_ocr_experiment(config, log=click.echo, protocol=label)
    for name in extensions:
        variant = replace(config, methods=(("rcms", 10),), **PROTOCOLS[name])
        results += run_ocr_experiment(variant, log=click.echo, protocol=name)
    click.echo("")
    click.echo(format_table(results))
    click.echo("")
    click.echo(GAP_NOTE.format(epochs=config.epochs, words=max_train_words or "all"))
    try:
        paths = write_plots(results, out)
    except ImportError as err:  # matplotlib is the `plot` extra
        click.echo(f"\nplots skipped: {err}")
    else:
        click.echo(f"\nprecision-recall plot: {paths[0]}\ntraining curves: {paths[1]}\ncontext length: {paths[2]}")
    if as_json:
        write_json(results, os.path.join(out, "ocr_results.json"))
        click.echo(f"results: {os.path.join(out, 'ocr_results.json')}")


@click.command("demo")
@click.option("--engine", "engine_only", is_flag=True, help="Run the engine demo (built-in ice-cream HMM) instead.")
@click.option("--full", is_flag=True, help="OCR: the paper's full training protocol (longer).")
@click.option("--epochs", type=click.IntRange(min=1), default=None,
              help="OCR: training epochs per method (default: 1 for the demo, 4 with --full).")
@click.option("--max-train-words", type=click.IntRange(min=1), default=None,
              help="OCR: train on a random subset of this many words.")
@click.option("--extension", "extensions", multiple=True, default=("+backoff", "+cap"), show_default=True,
              type=click.Choice(["+backoff", "+cap", "+batch8", "recorded (backoff+cap+batch8)"]),
              help="OCR: extension rows to add for RCMS(10), each labelled (repeat the option for several).")
@click.option("--no-extensions", is_flag=True, help="OCR: only the paper-faithful rows.")
@click.option("--off-beam", type=click.Choice(["force", "early", "skip"]), default="force", show_default=True,
              help="OCR: beam training when the gold falls off the beam (the paper does not say): keep it on the "
                   "beam, update early on the prefix (Collins & Roark 2004: reaches the paper's beam(10)), or skip")
@click.option("--out", type=OutputFolder(), default="varorder-demo", show_default=True, help="OCR: folder for the PNG plots.")
@click.option("--json", "as_json", is_flag=True, help="OCR: also write the results as JSON.")
@click.option("--observations", default="2,3,3,2,3", show_default=True,
              help="Engine demo: comma-separated ice-cream counts (1-3).")
@click.option("--samples", type=click.IntRange(1, 10_000_000), default=20000, show_default=True, help="Engine demo: number of exact samples to draw.")
@click.option("--seed", type=click.IntRange(0), default=0, show_default=True, help="Engine demo: sampling seed.")
def COMMAND(engine_only: bool, full: bool, epochs, max_train_words, extensions, no_extensions: bool, off_beam: str,
            out: str, as_json: bool, observations: str, samples: int, seed: int) -> None:
    """RCMS vs beam search on OCR (default), or the engine on a toy HMM (--engine)."""
    if not engine_only:
        ocr_demo(full, epochs, max_train_words, () if no_extensions else tuple(extensions), out, as_json, off_beam)
        return
    try:
        obs = [int(x) for x in observations.split(",")]
    except ValueError as exc:
        raise click.BadParameter(f"expected comma-separated integers, got {observations!r}") from exc
    if not obs or any(o not in (1, 2, 3) for o in obs) or len(obs) > 12:
        raise click.BadParameter("observations must be 1 to 12 counts, each 1, 2 or 3", param_hint="--observations")
    engine_demo(obs, samples, seed)
