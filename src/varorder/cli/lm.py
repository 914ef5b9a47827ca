"""``varorder lm``: train n-gram language models, score text with them, and write
MAX-ARPA files (Carter, Dymetman & Bouchard 2012, §2.3). See :mod:`varorder.lm`."""

from __future__ import annotations

import sys
import time

import click
import numpy as np

from varorder.cli._loglinear import load_scoring_model, loglinear_options, train_loglinear
from varorder.io.arpa import read_arpa, write_arpa
from varorder.lm import ESTIMATORS, AbsoluteDiscounting, AdditiveSmoothing, ModifiedKneserNey, iter_sentences


def _say(message: str) -> None:
    click.echo(message, err=True)


@click.group()
def lm():
    """n-gram language models: estimation, scoring, MAX-ARPA bounds."""


@lm.command()
@click.argument("corpus", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False))
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False), help="ARPA file to write (.gz compresses).")
@click.option("-n", "--order", default=3, show_default=True, type=click.IntRange(1, 10))
@click.option("--method", type=click.Choice(sorted(ESTIMATORS)), default="kneser-ney", show_default=True)
@click.option("--discount", default=0.25, show_default=True, type=float, help="absolute: the discount D.")
@click.option("--smoothing", default=0.01, show_default=True, type=float, help="absolute: additive term on unigram counts.")
@click.option("--alpha", default=1.0, show_default=True, type=float, help="additive: pseudo-count per word.")
@click.option("--min-count", default=1, show_default=True, type=click.IntRange(1), help="Rarer words become <unk>.")
@click.option("--max-arpa", is_flag=True, help="Write MAX-ARPA (two extra columns) instead of ARPA.")
@loglinear_options
def train(corpus, output, order, method, discount, smoothing, alpha, min_count, max_arpa, model_family, **loglinear):
    """Estimate a model from CORPUS files (one sentence per line, .gz read transparently)."""
    if model_family == "loglinear":
        return train_loglinear(corpus, output, order, min_count, loglinear, _say)
    if method == "kneser-ney":
        estimator = ModifiedKneserNey(order=order, min_count=min_count)
    elif method == "absolute":
        estimator = AbsoluteDiscounting(order=order, discount=discount, smoothing=smoothing, min_count=min_count)
    else:
        estimator = AdditiveSmoothing(order=order, alpha=alpha, min_count=min_count)
    start = time.perf_counter()
    _say(f"estimating a {order}-gram {method} model from {', '.join(corpus)} ...")
    try:
        estimator.fit(list(corpus))
    except ValueError as error:
        raise click.ClickException(str(error)) from None
    model = estimator.model_
    counts = " ".join(f"{m}-grams={n}" for m, n in enumerate(model.ngram_counts, start=1))
    _say(f"{counts} in {time.perf_counter() - start:.1f} s")
    if method == "kneser-ney":
        for m, discounts in enumerate(estimator.discounts_, start=1):
            fallback = " (fallback)" if m in estimator.fallback_orders_ else ""
            _say(f"  order {m} discounts D1={discounts[0]:.4f} D2={discounts[1]:.4f} D3+={discounts[2]:.4f}{fallback}")
    write_arpa(model, output, max_arpa=max_arpa)
    _say(f"wrote {output}")


@lm.command()
@click.argument("model_path", metavar="MODEL", type=click.Path(exists=True, dir_okay=False))
@click.argument("text", type=click.Path(exists=True, dir_okay=False, allow_dash=True))
@click.option("--sentences/--no-sentences", default=True, show_default=True,
              help="Print one line per sentence: log10 probability, predicted tokens, OOVs.")
def score(model_path, text, sentences):
    """Score TEXT (one sentence per line; - for stdin) with the ARPA (or log-linear npz) MODEL.

    Per sentence: log10 p (with <s> and </s>), the number of predicted tokens (words and
    </s>), and OOVs. Then a summary with the perplexity over all predicted tokens
    (OOVs scored as <unk>, as KenLM's query does).
    """
    try:
        model = load_scoring_model(model_path, read_arpa)
        if text == "-":
            lines = [line.split() for line in sys.stdin]
            tokens = [t for t in lines if t]
        else:
            tokens = [t for _, t in iter_sentences(text)]
    except ValueError as error:
        raise click.ClickException(str(error)) from None
    vocabulary = model.vocabulary
    ids, lengths = vocabulary.encode_sentences(tokens)
    per_sentence = model.sentence_log10probs(ids, lengths)
    oov = np.fromiter((sum(1 for w in sentence if w not in vocabulary) for sentence in tokens), dtype=np.int64, count=len(tokens))
    if sentences:
        out = sys.stdout
        out.write("log10prob\ttokens\toovs\n")
        for total, length, n_oov in zip(per_sentence, lengths, oov):
            out.write(f"{total:.6f}\t{length + 1}\t{n_oov}\n")
    n_tokens = int(lengths.sum() + len(lengths))
    total = float(per_sentence.sum())
    perplexity = 10.0 ** (-total / n_tokens) if n_tokens else float("nan")
    click.echo(
        f"sentences={len(lengths)} tokens={n_tokens} oovs={int(oov.sum())} log10prob={total:.4f} perplexity={perplexity:.4f}"
    )


@lm.command()
@click.argument("model_path", metavar="MODEL", type=click.Path(exists=True, dir_okay=False))
@click.argument("output", type=click.Path(dir_okay=False))
def maxarpa(model_path, output):
    """Read an ARPA MODEL and write its MAX-ARPA table to OUTPUT.

    Each n-gram line gains two columns: the max log10 probability over all left
    extensions of its context (mf) and the max back-off (mbow), Carter et al. (2012) §2.3.
    """
    try:
        model = read_arpa(model_path, progress=True)
    except ValueError as error:
        raise click.ClickException(str(error)) from None
    start = time.perf_counter()
    model.max_backoff()
    _say(f"max-backoff weights of {sum(model.ngram_counts)} n-grams in {time.perf_counter() - start:.1f} s")
    write_arpa(model, output, max_arpa=True)
    _say(f"wrote {output}")


COMMAND = lm
