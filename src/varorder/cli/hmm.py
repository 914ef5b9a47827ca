"""``varorder hmm``: hidden Markov and semi-Markov models of time series, without Python.

    varorder hmm train series.csv -o model.npz --n-components 3 [--model gaussian|gmm|poisson|categorical|
                       gaussian-hsmm|poisson-hsmm] [--covariance-type diag] [--sequence-column id]
    varorder hmm decode model.npz series.csv [--probabilities] [--filtered] [--algorithm map]
    varorder hmm score model.npz series.csv
    varorder hmm sample model.npz -n 100 [--seed 0]

Input: CSV (one row per time step, optional header, empty/NA = missing) or ``.npy``; an
optional sequence-id column cuts the rows into sequences. Output: CSV on stdout.
"""

from __future__ import annotations

import sys

import click

from varorder.cli._options import OutputFile

_SEQUENCE = click.option("--sequence-column", default=None, metavar="NAME|INDEX",
                         help="Column holding a sequence id (a new sequence where it changes).")


def _print(table) -> None:
    from varorder.io.series import write_rows

    header, rows = table
    write_rows(sys.stdout, header, rows)


@click.group()
def hmm():
    """Hidden Markov / semi-Markov models of time series (hmmlearn's models)."""


@hmm.command()
@click.argument("input_path", metavar="INPUT", type=click.Path(exists=True, dir_okay=False))
@click.option("-o", "--output", required=True, type=OutputFile(), help="Model file to write (.npz).")
@click.option("--model", default="gaussian", show_default=True,
              type=click.Choice(["gaussian", "gmm", "poisson", "categorical", "gaussian-hsmm", "poisson-hsmm"]))
@click.option("--n-mix", default=None, type=click.IntRange(1), help="gmm: mixture components per state (1).")
@click.option("--n-components", default=2, show_default=True, type=click.IntRange(1))
@click.option("--covariance-type", default=None, type=click.Choice(["spherical", "diag", "full", "tied"]),
              help="Gaussian models (default diag).")
@click.option("--n-iter", default=100, show_default=True, type=click.IntRange(1))
@click.option("--tol", default=1e-2, show_default=True, type=click.FloatRange(0))
@click.option("--max-duration", default=None, type=click.IntRange(1), help="HSMMs: the longest segment (50).")
@click.option("--duration", "duration_distribution", default=None,
              type=click.Choice(["nonparametric", "poisson", "negative_binomial"]), help="HSMMs' durations.")
@click.option("--seed", "random_state", default=0, show_default=True, type=click.IntRange(0))
@_SEQUENCE
def train(input_path, output, model, sequence_column, **params):
    """Fit a model by EM and save it."""
    from varorder.tasks.hmm_series import train_series_model

    fitted = train_series_model(input_path, output, model=model, sequence_column=sequence_column, **params)
    history = fitted.history_
    click.echo(f"{type(fitted).__name__}: {fitted.n_iter_} iterations, log-likelihood "
               f"{history[-1]['log_likelihood']:.6f}, saved to {output}", err=True)


@hmm.command()
@click.argument("model_path", metavar="MODEL", type=click.Path(exists=True, dir_okay=False))
@click.argument("input_path", metavar="INPUT", type=click.Path(exists=True, dir_okay=False))
@click.option("--algorithm", default="viterbi", show_default=True, type=click.Choice(["viterbi", "map"]))
@click.option("--probabilities", is_flag=True, help="Also print the smoothed state posteriors.")
@click.option("--filtered", is_flag=True, help="Print the filtered (causal) posteriors p(z_t | x_1..t).")
@_SEQUENCE
def decode(model_path, input_path, algorithm, probabilities, filtered, sequence_column):
    """The decoded state of every time step."""
    from varorder.tasks.hmm_series import decode_series

    _print(decode_series(model_path, input_path, sequence_column=sequence_column, algorithm=algorithm,
                         probabilities=probabilities, filtered=filtered))


@hmm.command()
@click.argument("model_path", metavar="MODEL", type=click.Path(exists=True, dir_okay=False))
@click.argument("input_path", metavar="INPUT", type=click.Path(exists=True, dir_okay=False))
@_SEQUENCE
def score(model_path, input_path, sequence_column):
    """log p(x) per sequence, the total, AIC and BIC."""
    from varorder.tasks.hmm_series import score_series

    _print(score_series(model_path, input_path, sequence_column=sequence_column))


@hmm.command()
@click.argument("model_path", metavar="MODEL", type=click.Path(exists=True, dir_okay=False))
@click.option("-n", "--n-samples", default=100, show_default=True, type=click.IntRange(1))
@click.option("--seed", default=0, show_default=True, type=click.IntRange(0))
def sample(model_path, n_samples, seed):
    """Draw a series (state and features per time step) from the model."""
    from varorder.tasks.hmm_series import sample_series

    _print(sample_series(model_path, n_samples, seed=seed))


COMMAND = hmm
