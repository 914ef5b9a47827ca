"""``varorder strings``: inference in graphical models over strings (Cotterell & Eisner
2015, "Penalized Expectation Propagation for Graphical Models over Strings").

    varorder strings infer --synthetic 40 --alphabet-size 8         # pep-prox, the paper's method and schedule
    varorder strings infer --synthetic 100 --seed 0 --method pep    # greedy closed-form PEP (an extension)
    varorder strings infer --hopkins ../shared/data/morphophonology/hopkins-phonology-framework/phonological_datasets/english_plurals --method ep2 --top 3
    varorder strings infer --hopkins FILE --holdout-share 0.2 --em-iterations 3 --method ep2
"""

from __future__ import annotations

import json
import time

import click

from varorder.cli._options import OutputFile, Real, refuse_inapplicable

__all__ = ["COMMAND"]

METHOD_NAMES = ("bp", "ep1", "ep2", "ep3", "pep", "pep-prox")  # varorder.strings.inference.METHODS
PROX_PENALTIES = ("message", "belief")  # varorder.strings.inference.PROX_PENALTIES
# (--iterations, --inner-passes, --passes-sweeps, --tol) left unset: pep-prox gets the paper's schedule (§7: K = 20
# on the first few sweeps, then K = 1; "few" = 2 and the stopping rule are ours, docs/notes/30-pep-prox.md), run
# until its residual is below 0.2 or 40 sweeps; the other methods their earlier 4 sweeps, K = 3 on the first
PROX_SCHEDULE = (40, 20, 2, 0.2)
SCHEDULE = (4, 3, 1, 0.0)


@click.group("strings")
def COMMAND():
    """Graphical models over strings: pruned BP, EP and penalized EP."""


@COMMAND.command("infer")
@click.option("--synthetic", type=click.IntRange(2, 100_000), default=None,
              help="generate a seeded synthetic lexicon with this many observed words (gold underlying forms known)")
@click.option("--hopkins", type=click.Path(exists=True, dir_okay=False), default=None,
              help="a Hopkins phonology-framework file (surface<TAB>stem<TAB>suffix or surface<TAB>KEY=value,...)")
@click.option("--method", type=click.Choice(METHOD_NAMES), default="pep-prox", show_default=True,
              help="pep-prox: the paper's penalized EP by proximal gradient (§6.1, §7: one step of η per message "
                   "update, K = 20 passes on the first sweeps, then sweeps until --tol; at the paper's η = 0.05 it "
                   "needs tens of sweeps, see docs/notes/30-pep-prox.md); "
                   "bp: loopy BP with k-best pruning; ep1/ep2/ep3: EP with n-gram families; "
                   "pep: an extension, our closed form with greedy growing (App. B.8-B.9)")
@click.option("--lam", type=Real(0.0, None), default=None,
              help="PEP penalty λ [default: 0.001 for pep, chosen on a held-apart graph; 0.01 for pep-prox, the "
                   "paper's] (the two variants' λ are on different scales)")
@click.option("--eta", type=Real(0.0, None, min_open=True), default=0.05, show_default=True, help="pep-prox step size η")
@click.option("--prox-steps", type=click.IntRange(1, 10_000), default=1, show_default=True,
              help="pep-prox: proximal steps per message update (1: the paper's §7; more is an extension: η doubles "
                   "after a step taken without backtracking, and the steps stop once the update's objective falls "
                   "by less than 1e-3)")
@click.option("--prox-penalty", type=click.Choice(PROX_PENALTIES), default="message", show_default=True,
              help="pep-prox: what the group lasso penalises: message, the paper's (λΩ added to eq. 7, a penalty "
                   "on the message θ_{F→V}), or belief (an option: on the belief θ_V)")
@click.option("--k", "k", type=click.IntRange(1, 10_000), default=20, show_default=True, help="bp: strings kept per message")
@click.option("--iterations", type=click.IntRange(1, 1000), default=None,
              help="forward/backward sweeps; with --tol > 0 the most sweeps [default: 40 for pep-prox (stopping "
                   "earlier at --tol), 4 for the others]. Differs from the library's StringEP/PrunedBP(iterations=4) "
                   "for pep-prox: the CLI runs the paper's schedule")
@click.option("--inner-passes", type=click.IntRange(1, 100), default=None,
              help="K: passes over a variable's incoming messages on each of the first --passes-sweeps sweeps, then 1 "
                   "[default: 20 for pep-prox, the paper's K (§7); 3 for the others]. Differs from the library's StringEP(inner_passes=3) "
                   "for pep-prox: the CLI runs the paper's schedule")
@click.option("--passes-sweeps", type=click.IntRange(0, 1000), default=None,
              help="how many first sweeps take K passes [default: 2 for pep-prox (the paper: 'the first few "
                   "iterations', unstated; ours), 1 for the others]")
@click.option("--tol", type=Real(0.0, None), default=None,
              help="pep-prox: stop once a sweep's fixed-point residual (the largest |Δθ|/η of its updates: the "
                   "proximal-gradient mapping, in expected counts) is below this; 0 runs every sweep [default: 0.2; "
                   "the paper states no stopping rule: ours]")
@click.option("--seed", type=click.IntRange(0, None), default=0, show_default=True, help="synthetic lexicon seed")
@click.option("--alphabet-size", type=click.IntRange(2, 26), default=12, show_default=True, help="synthetic alphabet size")
@click.option("--top", type=click.IntRange(1, 1000), default=3, show_default=True, help="strings printed per variable")
@click.option("--max-variables", type=click.IntRange(0, None), default=20, show_default=True,
              help="variables printed (0: all)")
@click.option("--holdout-share", type=Real(0.0, 1.0, max_open=True), default=0.0, show_default=True,
              help="--hopkins: hide this share of the surface forms (seeded by --seed; only words whose morphemes "
                   "stay observed) and report their NLL and 1-best accuracy under the beliefs")
@click.option("--em-iterations", type=click.IntRange(0, 100), default=0, show_default=True,
              help="EM rounds on the edit transducer's parameters (inference, expected edit counts, M step) "
                   "before the final inference")
@click.option("--em-smoothing", type=Real(0.0, None), default=0.1, show_default=True,
              help="EM: pseudo-count added to every edit operation in the M step")
@click.option("--json", "json_path", type=OutputFile(allow_dash=True), default=None,
              help="also write the summary and every variable's top strings as JSON ('-' for stdout)")
def infer(synthetic, hopkins, method, lam, eta, prox_steps, prox_penalty, k, iterations, inner_passes, passes_sweeps, tol,
          seed, alphabet_size, top, max_variables, holdout_share, em_iterations, em_smoothing, json_path):
    """Infer every morpheme's underlying form; print top strings with probabilities and timing."""
    from varorder._progress import Progress
    from varorder.io import atomic_write_text
    from varorder.strings.em import EditEM, heldout_surface_scores
    from varorder.strings.inference import belief_nll, make_method
    from varorder.strings.model import read_hopkins, synthetic_lexicon

    if (synthetic is None) == (hopkins is None):
        raise click.BadParameter("give exactly one of --synthetic N or --hopkins FILE")
    if holdout_share > 0 and hopkins is None:
        raise click.BadParameter("--holdout-share needs --hopkins (synthetic graphs report gold underlying forms)")
    refuse_inapplicable(click.get_current_context(), [
        ("k", method == "bp", "--method bp"), ("lam", method in ("pep", "pep-prox"), "--method pep or pep-prox"),
        ("eta", method == "pep-prox", "--method pep-prox"), ("prox_penalty", method == "pep-prox", "--method pep-prox"),
        ("prox_steps", method == "pep-prox", "--method pep-prox"),
        ("inner_passes", method != "bp", "the EP methods (ep1-3, pep, pep-prox)"),
        ("passes_sweeps", method != "bp", "the EP methods (ep1-3, pep, pep-prox)"),
        ("tol", method == "pep-prox", "--method pep-prox"),
        ("alphabet_size", synthetic is not None, "--synthetic"),
        ("seed", synthetic is not None or holdout_share > 0, "--synthetic or --hopkins with --holdout-share"),
        ("em_smoothing", em_iterations > 0, "--em-iterations > 0")])
    started = time.perf_counter()
    if synthetic is not None:
        graph = synthetic_lexicon(synthetic, seed=seed, alphabet_size=alphabet_size)
    else:
        graph = read_hopkins(hopkins, holdout_share=holdout_share, seed=seed)
    if lam is None:
        lam = 0.01 if method == "pep-prox" else 0.001
    schedule = PROX_SCHEDULE if method == "pep-prox" else SCHEDULE
    iterations, inner_passes, passes_sweeps, tol = (
        default if given is None else given
        for given, default in zip((iterations, inner_passes, passes_sweeps, tol), schedule))
    params = {"k": k, "lam": lam, "eta": eta, "iterations": iterations, "inner_passes": inner_passes,
              "passes_sweeps": passes_sweeps, "tol": tol, "prox_penalty": prox_penalty, "prox_steps": prox_steps}
    em_history = []
    if em_iterations:
        bar = Progress(total=em_iterations, desc=f"EM ({method})", unit="round", leave=False)
        em = EditEM(method=method, iterations=em_iterations, smoothing=em_smoothing, method_params=params,
                    progress=lambda done, total: bar.update(1)).fit(graph)
        bar.close()
        graph, estimator, em_history = em.graph_, em.estimator_, em.history_
        for row in em_history:
            ll = "undefined" if row["log_likelihood"] is None else f"{row['log_likelihood']:.3f}"
            click.echo(f"EM iteration {row['iteration']}: Σ log p(surface | beliefs)={ll} words={row['words']} "
                       f"skipped={row['skipped']} seconds={row['seconds']:.1f}", err=True)
    else:
        bar = Progress(total=iterations, desc=method, unit="sweep", leave=False)
        estimator = make_method(method, **params, progress=lambda done, total: bar.update(1))
        estimator.fit(graph)
        bar.close()
    beliefs = estimator.beliefs_
    summary = {"method": beliefs.method, "words": len(graph.observed), "variables": len(graph.morphemes),
               "alphabet": len(graph.alphabet), "inference_seconds": round(beliefs.seconds, 3),
               "total_seconds": round(time.perf_counter() - started, 3),
               "sweeps": getattr(estimator, "sweeps_", iterations),
               "stats": {key: (round(v, 3) if isinstance(v, float) else v) for key, v in beliefs.stats.items()}}
    history = getattr(estimator, "history_", None)
    if history and tol > 0:
        summary["residual"] = round(history[-1]["residual"], 4)
        summary["converged"] = history[-1]["residual"] < tol
        if not summary["converged"]:
            click.echo(f"warning: {method} stopped at --iterations {iterations} with residual "
                       f"{history[-1]['residual']:.3g} ≥ --tol {tol:g}: the beliefs have not converged "
                       "(raise --iterations)", err=True)
    if graph.gold:
        summary.update({f"gold_{key}": (round(v, 4) if isinstance(v, float) else v)
                        for key, v in belief_nll(beliefs, graph.gold).items()})
    heldout = None
    if graph.held_out:
        heldout = heldout_surface_scores(estimator, graph)
        summary.update({f"heldout_{key}": (round(v, 4) if isinstance(v, float) else v)
                        for key, v in heldout.items() if key != "predictions"})
    if em_history:
        summary["em"] = [{key: (round(v, 4) if isinstance(v, float) else v) for key, v in row.items()}
                         for row in em_history]
    shown = graph.morphemes if max_variables == 0 else graph.morphemes[:max_variables]
    table = {}
    for v in shown:
        best = beliefs.top(v, top)
        table[v] = [["".join(s), p] for s, p in best]
        gold = graph.gold.get(v)
        strings = "  ".join(f"{''.join(s) or 'ε'} {p:.3f}" for s, p in best)
        suffix = f"   (gold {''.join(gold) or 'ε'})" if gold is not None else ""
        click.echo(f"{v}\t{strings}{suffix}")
    if heldout is not None:
        for gold, predicted, nll in heldout["predictions"]:
            click.echo(f"held-out\t{gold}\tpredicted {predicted if predicted is not None else '-'}\tNLL {nll:.3f}")
    click.echo(" ".join(f"{key}={value}" for key, value in summary.items() if key not in ("stats", "em")), err=True)
    if json_path is not None:
        document = {"summary": summary, "beliefs": table}
        if heldout is not None:
            document["heldout"] = [{"gold": g, "predicted": p, "nll": n} for g, p, n in heldout["predictions"]]
        if em_iterations:
            document["edit"] = {"alphabet": list(graph.alphabet), "substitute": graph.edit.substitute.tolist(),
                                "insert": graph.edit.insert.tolist()}
        text = json.dumps(document, ensure_ascii=False, indent=1) + "\n"
        if json_path == "-":
            click.echo(text, nl=False)
        else:
            with atomic_write_text(json_path) as handle:
                handle.write(text)
