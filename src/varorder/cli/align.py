"""``varorder align``: train, apply and evaluate word aligners (agreement-based or independent).

    varorder align train corpus.e corpus.f -o model.npz [--training agreement]
    varorder align apply model.npz test.e test.f -o test.align
    varorder align eval test.align gold.wa            # NAACL gold (or --gold-format pharaoh)
"""

from __future__ import annotations

import json
import sys

import click

__all__ = ["COMMAND"]


@click.group("align")
def COMMAND():
    """Word alignment: IBM Model 1 / HMM in both directions, trained to agree (Liang et al. 2008)."""


def _executor(workers, dask_address):
    if dask_address:
        try:
            from distributed import Client
        except ImportError:
            raise click.UsageError("--dask needs the optional package 'distributed' (pip install 'dask[distributed]')")
        return Client(dask_address)
    if workers and workers > 1:
        from concurrent.futures import ThreadPoolExecutor

        return ThreadPoolExecutor(workers)
    return None


@COMMAND.command("train")
@click.argument("english", type=click.Path(exists=True, dir_okay=False))
@click.argument("french", type=click.Path(exists=True, dir_okay=False))
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False), help="model file (.npz)")
@click.option("--model", type=click.Choice(["hmm", "ibm1"]), default="hmm", show_default=True)
@click.option("--training", type=click.Choice(["agreement", "independent", "product"]), default="agreement",
              show_default=True, help="agreement = domain-approximate product EM; product = Liang et al. 2006")
@click.option("--iterations", type=int, default=5, show_default=True, help="iterations of the final model")
@click.option("--ibm1-iterations", type=int, default=5, show_default=True)
@click.option("--null-prob", type=float, default=0.05, show_default=True)
@click.option("--max-jump", type=int, default=7, show_default=True)
@click.option("--threshold", type=float, default=0.6, show_default=True, help="posterior decoding δ")
@click.option("--normalize", is_flag=True, help="lower-case, strip accents and tokenize (NAACL 2003 conventions)")
@click.option("--limit", type=int, default=None, help="read at most this many sentence pairs")
@click.option("--shard-size", type=int, default=50000, show_default=True)
@click.option("--workers", type=int, default=1, show_default=True, help="local E-step threads")
@click.option("--dask", "dask_address", default=None, help="dask.distributed scheduler address")
def train(english, french, output, model, training, iterations, ibm1_iterations, null_prob, max_jump, threshold,
          normalize, limit, shard_size, workers, dask_address):
    """Train an aligner on line-aligned ENGLISH and FRENCH files (.gz accepted)."""
    from varorder.agree.aligner import WordAligner
    from varorder.io.bitext import read_bitext

    try:
        pairs = read_bitext(english, french, limit=limit, normalize_text=normalize)
        aligner = WordAligner(model=model, training=training, iterations=iterations, ibm1_iterations=ibm1_iterations,
                              null_prob=null_prob, max_jump=max_jump, threshold=threshold, shard_size=shard_size,
                              executor=_executor(workers, dask_address), progress=True)
        aligner.fit(pairs)
        aligner.save(output)
    except ValueError as exc:
        raise click.ClickException(str(exc))
    for phase, objectives in aligner.history_:
        click.echo(f"{phase}: objective " + " ".join(f"{o:.6g}" for o in objectives), err=True)
    click.echo(f"wrote {output} ({len(pairs)} sentence pairs, {len(aligner.pairs_)} word pairs)", err=True)


@COMMAND.command("apply")
@click.argument("model_path", type=click.Path(exists=True, dir_okay=False))
@click.argument("english", type=click.Path(exists=True, dir_okay=False))
@click.argument("french", type=click.Path(exists=True, dir_okay=False))
@click.option("-o", "--output", type=click.Path(dir_okay=False), default=None, help="Pharaoh file (default stdout)")
@click.option("--method", type=click.Choice(["posterior", "intersection", "union", "grow-diag-final-and"]),
              default="posterior", show_default=True)
@click.option("--threshold", type=float, default=None, help="posterior decoding δ (default: the model's)")
@click.option("--normalize", is_flag=True, help="normalise the text as at training time")
def apply(model_path, english, french, output, method, threshold, normalize):
    """Align ENGLISH/FRENCH with a trained model; writes Pharaoh 'i-j' lines (0-based, English first)."""
    from varorder.agree.aligner import WordAligner
    from varorder.io.bitext import read_bitext
    from varorder.io.pharaoh import format_line, write_pharaoh

    try:
        aligner = WordAligner.load(model_path)
        pairs = read_bitext(english, french, normalize_text=normalize)
        alignments = aligner.align(pairs, method=method, threshold=threshold)
    except ValueError as exc:
        raise click.ClickException(str(exc))
    if output:
        write_pharaoh(output, alignments)
    else:
        for links in alignments:
            sys.stdout.write(format_line(links) + "\n")


@COMMAND.command("eval")
@click.argument("alignments", type=click.Path(exists=True, dir_okay=False))
@click.argument("gold", type=click.Path(exists=True, dir_okay=False))
@click.option("--gold-format", type=click.Choice(["naacl", "pharaoh"]), default="naacl", show_default=True)
@click.option("--json", "as_json", is_flag=True)
def evaluate(alignments, gold, gold_format, as_json):
    """Precision, recall and AER of Pharaoh ALIGNMENTS against GOLD sure/possible links."""
    from varorder.eval.aer import alignment_error_rate
    from varorder.io.naacl import read_naacl
    from varorder.io.pharaoh import read_pharaoh

    try:
        predicted = read_pharaoh(alignments)
        if gold_format == "naacl":
            reference = read_naacl(gold, n_sentences=len(predicted))
        else:
            reference = read_pharaoh(gold, with_possible=True)
        scores = alignment_error_rate(predicted, [s for s, _ in reference], [p for _, p in reference])
    except ValueError as exc:
        raise click.ClickException(str(exc))
    if as_json:
        click.echo(json.dumps(scores.__dict__))
    else:
        click.echo(f"precision {scores.precision:.4f}  recall {scores.recall:.4f}  AER {scores.aer:.4f}  "
                   f"({len(predicted)} sentences, {scores.n_predicted} links, {scores.n_sure} sure)")
