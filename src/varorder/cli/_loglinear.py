"""The log-linear half of ``varorder lm`` (Nelakanti et al. 2013, :mod:`varorder.loglinear`):
training options and model loading, kept apart from the n-gram commands in
:mod:`varorder.cli.lm`, which only dispatches here."""

from __future__ import annotations

import time

import click

from varorder.cli._options import Real
from varorder.errors import DivergenceError, FormatError

# the penalties of varorder.loglinear.prox.PENALTIES, named here so that building the
# command line does not import the Numba kernels (a test checks the two agree)
PENALTY_NAMES = ("l1", "l2sq", "lt2", "ltinf", "wl1", "wl2sq", "wlt2", "wltinf")

# the trie has no depth limit; this bound only keeps a typo (-n 300) from building a huge trie
LOGLINEAR_MAX_ORDER = 32

_OPTIONS = [
    click.option("--model", "model_family", type=click.Choice(["ngram", "loglinear"]), default="ngram", show_default=True,
                 help="ngram: back-off model written as ARPA; loglinear: penalised log-linear model written as npz."),
    click.option("--penalty", type=click.Choice(PENALTY_NAMES), default="wlt2", show_default=True,
                 help="loglinear: l2sq, l1, lt2 (tree l2), ltinf (tree linf); w* weights a node by alpha^depth."),
    click.option("--lam", type=Real(0), default=None, help="loglinear: regularisation lambda against the summed log-loss (paper eq. 2) [1.0: what --tune "
                      "chooses for wlt2 on PTB]."),
    click.option("--depth-alpha", type=Real(0, min_open=True), default=None, help="loglinear: alpha of the alpha^depth weights [1.3 for wlt2, tuned on PTB (the paper's "
                      "1.1 was tuned on AP News); the paper's best for the other w* penalties]."),
    click.option("--weighting", type=click.Choice(["features", "groups"]), default="features", show_default=True,
                 help="loglinear w*: alpha^depth as the value of a depth-d feature (the paper) or as the penalty's "
                      "weight on a depth-d group (an extension, deprecated)."),
    click.option("--free-root", is_flag=True, help="loglinear: leave the unigram (root) weights unpenalised (extension)."),
    click.option("--epochs", type=click.IntRange(0), default=10, show_default=True, help="loglinear: passes over the corpus."),
    click.option("--batch-size", type=click.IntRange(1), default=400, show_default=True, help="loglinear: mini-batch size."),
    click.option("--optimizer", type=click.Choice(["apg", "adagrad"]), default="apg", show_default=True,
                 help="loglinear: apg = the paper's Algorithm 1; adagrad = per-weight steps (extension)."),
    click.option("--learning-rate", type=Real(0, min_open=True), default=1.0, show_default=True, help="loglinear adagrad: step eta."),
    click.option("--average", is_flag=True,
                 help="loglinear: return the mean of the last epoch's iterates, not the last one (extension; dense weights)."),
    click.option("--polish", type=click.IntRange(0), default=20000, show_default=True,
                 help="loglinear: then at most this many full-batch FISTA iterations on the same objective, "
                      "stopping at a 1e-6 relative objective change (eq. 2's optimum, which the default lambda "
                      "assumes; 0: Algorithm 1 alone)."),
    click.option("--lipschitz", type=Real(0, min_open=True), default=None, help="loglinear apg: L (step 1/L) [order/2]."),
    click.option("--mu", type=Real(0), default=1e-5, show_default=True, help="loglinear apg: step 1/(L + mu/delta), damping the noise."),
    click.option("--restart", type=click.Choice(["none", "epoch"]), default="none", show_default=True,
                 help="loglinear apg: restart the acceleration at each epoch (extension)."),
    click.option("--seed", type=click.IntRange(0), default=0, show_default=True, help="loglinear: shuffling seed."),
    click.option("--tune", is_flag=True,
                 help="loglinear: choose lambda (and alpha for w* penalties) as the paper's section 6 does: fit the first "
                      "30K words of CORPUS for each lambda of a log grid (extended past an edge), pick the lowest "
                      "perplexity on the next 10K words, then fit all of CORPUS with it; every fit runs full-batch "
                      "FISTA to a 1e-6 relative objective change (eq. 2's optimum), so --epochs, --optimizer and "
                      "--polish are not used."),
]


# the options above that only --model loglinear reads (all but --model): `lm train` refuses them with n-grams
LOGLINEAR_ONLY = ("penalty", "lam", "depth_alpha", "weighting", "free_root", "epochs", "batch_size", "optimizer",
                  "learning_rate", "average", "polish", "lipschitz", "mu", "restart", "seed", "tune")


def loglinear_options(command):
    """Add the log-linear options to a click command."""
    for option in reversed(_OPTIONS):
        command = option(command)
    return command


def train_loglinear(corpus, output, order, min_count, options, say) -> None:
    """Fit a :class:`StructuredLogLinear` on CORPUS files and save it to OUTPUT (npz + JSON)."""
    from varorder.loglinear.model import SolverOptions, StructuredLogLinear

    if options.get("tune"):
        return _train_tuned(corpus, output, order, min_count, options, say)
    estimator = StructuredLogLinear(
        order=order, penalty=options["penalty"], lam=1.0 if options["lam"] is None else options["lam"],
        alpha=options["depth_alpha"], epochs=options["epochs"], batch_size=options["batch_size"],
        optimizer=options["optimizer"], weighting=options["weighting"], penalize_root=not options["free_root"],
        polish=options["polish"], seed=options["seed"], min_count=min_count, progress=True,
        solver=SolverOptions(learning_rate=options["learning_rate"], lipschitz=options["lipschitz"], mu=options["mu"],
                             average=options["average"], restart=options["restart"]),
    )
    say(f"fitting a {order}-gram log-linear model ({options['penalty']}, {options['optimizer']}) on {', '.join(corpus)} ...")
    start = time.perf_counter()
    try:
        estimator.fit(list(corpus))
    except DivergenceError as error:
        flag = {"lipschitz": "--lipschitz", "lipschitz_scale": "--lipschitz", "learning_rate": "--learning-rate"}
        option = flag.get(error.option)
        raise click.ClickException(f"{error}{f' (the option {option})' if option else ''}; nothing was written") from None
    except ValueError as error:
        raise click.ClickException(str(error)) from None
    model = estimator.model_
    say(f"{model.trie.n_contexts} contexts, {model.trie.n_params} weights ({model.n_parameters()} non-zero, "
        f"{model.n_parameters(collapsed=True)} collapsed) in {time.perf_counter() - start:.1f} s; "
        f"training log-loss per epoch: {' '.join(f'{x:.4f}' for x in estimator.history_)}"
        + (f"; polished {len(estimator.polish_history_) - 1} iterations to mean objective "
           f"{estimator.polish_history_[-1]:.6f}" if estimator.polish else ""))
    model.save(output)
    say(f"wrote {output}")


def _train_tuned(corpus, output, order, min_count, options, say) -> None:
    """``--tune``: :func:`varorder.loglinear.tune.fit_tuned` on CORPUS, the grid printed."""
    from varorder.lm.corpus import read_corpus
    from varorder.loglinear.tune import fit_tuned

    for name, flag in (("lam", "--lam"), ("depth_alpha", "--depth-alpha")):
        if options[name] is not None:
            raise click.UsageError(f"{flag} and --tune both set it: --tune chooses it on the validation words")
    ctx = click.get_current_context(silent=True)
    for name in ("epochs", "batch_size", "optimizer", "learning_rate", "average", "polish", "lipschitz", "mu", "restart"):
        if ctx is not None and ctx.get_parameter_source(name) == click.core.ParameterSource.COMMANDLINE:
            raise click.UsageError(f"--{name.replace('_', '-')} is not used with --tune (every fit runs full-batch "
                                   "FISTA to a 1e-6 relative objective change)")
    try:
        vocabulary, ids, lengths = read_corpus(list(corpus), min_count=min_count)
        if len(lengths) < 2:
            raise FormatError(f"{', '.join(corpus)}: --tune needs at least two sentences (training and validation)")
        say(f"tuning a {order}-gram log-linear model ({options['penalty']}) on {', '.join(corpus)}: lambda by "
            f"validation perplexity, each fit to a 1e-6 relative objective change ...")
        estimator, result = fit_tuned(
            ids, lengths, vocabulary, order=order, penalty=options["penalty"],
            settings={"weighting": options["weighting"], "penalize_root": not options["free_root"], "seed": options["seed"]},
            report=lambda r: say(f"  alpha {r['alpha']:g} lambda {r['lam']:.4g}: validation perplexity "
                                 f"{r['perplexity']:.3f} ({r['iterations']} iterations"
                                 f"{'' if r['converged'] else ', NOT converged'})"))
    except ValueError as error:
        raise click.ClickException(str(error)) from None
    edge = "" if result.lam_interior and result.alpha_interior else " (at the edge of the grid: extensions exhausted)"
    say(f"chosen lambda {result.lam:.4g}, alpha {result.alpha:g}{edge}; lambda grid {', '.join(f'{x:.4g}' for x in result.lams)}; "
        f"final fit: {len(estimator.polish_history_) - 1} iterations, objective {estimator.objective_:.2f}")
    estimator.model_.save(output)
    say(f"wrote {output}")


def load_loglinear_if_one(path):
    """The log-linear model in ``path`` when it holds one (an npz archive of that kind), else None."""
    with open(path, "rb") as handle:
        if handle.read(4) != b"PK\x03\x04":  # not an npz archive: an ARPA or binary n-gram model
            return None
    from varorder.loglinear.model import KIND, LogLinearLM
    from varorder.models.persist import model_kind

    # an npz archive is never ARPA text: a damaged one is a damaged model file, said so by model_kind
    kind = model_kind(path)
    if kind != KIND:
        raise FormatError(f"{path}: a varorder {kind} model file, not a language model", path=path)
    return LogLinearLM.load(path)
