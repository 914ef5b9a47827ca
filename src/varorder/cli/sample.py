"""``varorder sample``: exact samples of a high-order HMM by adaptive rejection sampling
over q-automata (Carter, Dymetman & Bouchard 2012, Algorithm 1 in sampling mode).

    varorder sample LM.arpa --task t9 --text "843 66639" --target-ar 0.2 --batch 10 --seed 0
    varorder sample TAGS.arpa --task pos --train wsj.tsv --text "The cat sat ." --samples 100

Observations are read as in ``varorder decode``. Sampling stops at the first of
``--samples`` accepted samples, acceptance rate over the last 100 trials (AR-100)
>= ``--target-ar``, ``--max-trials``. Prints the distinct accepted samples with their
counts and log p, and the run statistics.
"""

from __future__ import annotations

import json
from collections import Counter

import click

from varorder.cli._options import Real

from varorder.cli.decode import TargetFactory, check_task_options, load_lm, observations, task_options
from varorder.exact import QAutomaton, acceptance_rate, sample


@click.command("sample")
@task_options
@click.option("--samples", "n_samples", type=click.IntRange(min=1), default=None, help="stop after this many accepted samples")
@click.option("--target-ar", type=Real(0, 1, min_open=True), default=None, help="stop when AR-100 reaches this (default 0.2 without --samples)")
@click.option("--batch", type=click.IntRange(min=1), default=1, show_default=True, help="trials per q before one refinement step")
@click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True)
@click.option("--max-trials", type=click.IntRange(min=1), default=100_000, show_default=True)
@click.option("--top", type=click.IntRange(min=1), default=10, show_default=True, help="distinct samples to print")
def COMMAND(lm_file, task, text, input_file, train, tag_column, k, max_candidates, as_json,
            n_samples, target_ar, batch, seed, max_trials, top):
    """Exact samples of p_lm x p_obs for each observation (adaptive rejection sampling)."""
    check_task_options(task, train)
    if n_samples is None and target_ar is None:
        target_ar = 0.2
    lm = load_lm(lm_file)
    # the paper caps T9 candidates at 100 per position for sampling (not for decoding)
    factory = TargetFactory(lm, task, train, tag_column, k, 100 if max_candidates is None else max_candidates)
    for number, line in enumerate(observations(text, input_file), start=1):
        target = factory.target(line, f"{input_file or '--text'}:{number}")
        q = QAutomaton(target)
        try:
            result = sample(target, n_samples=n_samples, target_ar=target_ar, batch=batch, seed=seed,
                            max_trials=max_trials, automaton=q)
        except ValueError as err:
            raise click.ClickException(str(err)) from None
        counts = Counter(tuple(s) for s in result.samples)
        log_p = {tuple(s): lp for s, lp in zip(result.samples, result.log_p)}
        history = result.history
        stats = {
            "trials": history.num_trials,
            "accepted": history.num_accepted,
            "AR": acceptance_rate(history.accepted),
            "AR-100": acceptance_rate(history.accepted, 100),
            "refinements": len(history.refinements),
            "states": result.num_states,
            "ngrams_per_order": result.ngram_counts,
            "stopped_by": result.stopped_by,
            "seconds": round(result.seconds, 4),
        }
        ranked = counts.most_common(top)
        if as_json:
            stats["samples"] = [{"output": " ".join(factory.words(s)), "count": c, "log_p": log_p[s],
                                 "log_q": q.log_q(target.with_end(s))} for s, c in ranked]
            click.echo(json.dumps(stats))
            continue
        click.echo(f"{'count':>6}  {'log q':>9}  {'log p':>9}  sample")
        for s, c in ranked:
            # log q under the final q: equal to log p once the sample's n-grams are fully refined.
            click.echo(f"{c:>6}  {q.log_q(target.with_end(s)):>9.4f}  {log_p[s]:>9.4f}  {' '.join(factory.words(s))}")
        click.echo(f"  trials {stats['trials']}  accepted {stats['accepted']}  AR {stats['AR']:.3f}  "
                   f"AR-100 {stats['AR-100']:.3f}  refinements {stats['refinements']}  states {stats['states']}  "
                   f"n-grams {stats['ngrams_per_order']}  stopped by {stats['stopped_by']}  {stats['seconds']:.3f} s")
