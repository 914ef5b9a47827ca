"""``varorder transduce``: learn a phoneme → spelling transducer with a latent alignment
(Steinhardt & Liang 2015, §4.2 and §6).

    varorder transduce train cmudict.train.dict.gz -o g2p.npz --limit 746 --method rcms --epochs 5
    varorder transduce apply g2p.npz words.tsv -o predicted.tsv
    varorder transduce eval g2p.npz cmudict.dev.dict.gz --limit 253

Data files are CMUdict (``word PH ON EMES``; ``;;;``/``#`` comments, ``word(2)``
alternates, stress digits removed) or ``input symbols<TAB>output`` pairs; ``--format
auto`` tells them apart by the tab.
"""

from __future__ import annotations

import json

import click

from varorder.cli._options import (DaskAddress, OutputFile, Real, dask_client, max_input_option,
                                   refuse_inapplicable)
from varorder.cli._stream import max_line_option

__all__ = ["COMMAND"]

_FORMAT = click.option("--format", "fmt", type=click.Choice(["auto", "cmudict", "pairs"]), default="auto",
                       show_default=True, help="data file format")
_LIMIT = click.option("--limit", type=click.IntRange(min=1), default=None,
                      help="use a random LIMIT pairs (seeded by --sample-seed)")
_SAMPLE_SEED = click.option("--sample-seed", type=click.IntRange(min=0), default=0, show_default=True, help="seed of the --limit sample")
# the transducer's MAX_INPUT_SYMBOLS, named here so that the option does not import the model (and Numba)
_MAX_SYMBOLS = click.option("--max-input-symbols", type=click.IntRange(min=1), default=200, show_default=True,
                            help="refuse a longer input (its lattice grows with the square of its length)")


def _read(path, fmt, limit, sample_seed):
    import numpy as np

    from varorder.io.cmudict import read_transduction_pairs

    inputs, outputs = read_transduction_pairs(path, fmt)
    if limit is not None and limit < len(inputs):
        keep = np.random.default_rng(sample_seed).choice(len(inputs), limit, replace=False)
        inputs, outputs = [inputs[k] for k in keep], [outputs[k] for k in keep]
    return inputs, outputs


@click.group("transduce")
def COMMAND():
    """Phonemes → spelling through an unobserved alignment (RCMS, beam methods, forced decoding)."""


@COMMAND.command("train")
@click.argument("data", type=click.Path(exists=True, dir_okay=False))
@click.option("-o", "--output", required=True, type=OutputFile(), help="model file (.npz)")
@_FORMAT
@_LIMIT
@_SAMPLE_SEED
@click.option("--method", type=click.Choice(["rcms", "model", "target", "hybrid", "forced"]), default="rcms",
              show_default=True, help="how the target and model lattices are chosen (paper §6)")
@click.option("--size", type=click.IntRange(min=1), default=20, show_default=True,
              help="B: contexts per alignment position (RCMS) or beam size")
@click.option("--order", type=click.IntRange(min=2), default=5, show_default=True, help="n of the n-gram features")
@click.option("--max-advance", type=click.IntRange(min=1), default=3, show_default=True,
              help="most phonemes one letter may align to")
@click.option("--hash-bits", type=click.IntRange(4, 30), default=22, show_default=True, help="2^bits weights")
@click.option("--unigrams/--no-unigrams", default=False, show_default=True,
              help="add (phoneme, letter) indicators to the paper's n-gram features (extension)")
@click.option("--backoff", is_flag=True, help="add the n-gram features of every lower order (extension)")
@click.option("--epochs", type=click.IntRange(min=1), default=5, show_default=True)
@click.option("--step-size", type=Real(min=0, min_open=True), default=0.2, show_default=True, help="AdaGrad η")
@click.option("--delta", type=Real(min=0), default=1e-4, show_default=True, help="AdaGrad δ")
@click.option("--truncation", type=Real(min=0), default=0.0, show_default=True,
              help="randomized truncation of gradient coordinates below this (paper App. C; 0 = off)")
@click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True, help="order of the examples")
@click.option("--dev", type=click.Path(exists=True, dir_okay=False), default=None,
              help="report CER / exact match on this file after every pass")
@click.option("--history", type=OutputFile(), default=None, help="write the per-pass history as JSON")
@click.option("--batch-size", type=click.IntRange(min=1), default=None,
              help="mini-batch mode (an extension; default: the paper's one AdaGrad step per example): one step "
                   "per BATCH_SIZE examples on their summed gradient, computed in --shards pieces, which "
                   "--jobs / --dask-scheduler spread over workers")
@click.option("--shards", type=click.IntRange(min=1), default=None,
              help="--batch-size: pieces per batch (default 1, or 8 with --jobs/--dask-scheduler); a given value "
                   "trains the same model on any executor and number of workers")
@click.option("--jobs", type=click.IntRange(min=1), default=None,
              help="--batch-size: compute the pieces on this many local worker processes")
@click.option("--dask-scheduler", "dask_address", metavar="ADDRESS", type=DaskAddress(), default=None,
              help="--batch-size: compute the pieces on this dask.distributed scheduler's workers")
def train(data, output, fmt, limit, sample_seed, method, size, order, max_advance, hash_bits, unigrams, backoff, epochs,
          step_size, delta, truncation, seed, dev, history, batch_size, shards, jobs, dask_address):
    """Train on DATA and save the model."""
    from varorder.eval.metrics import character_error_rate, exact_match
    from varorder.io import atomic_write_text
    from varorder.transduce.model import AlignmentTransducer, TransducerOptions

    refuse_inapplicable(click.get_current_context(), [("sample_seed", limit is not None, "--limit")] + [
        (name, batch_size is not None, "--batch-size") for name in ("shards", "jobs", "dask_address")])
    inputs, outputs = _read(data, fmt, limit, sample_seed)
    dev_pairs = _read(dev, "auto", None, 0) if dev else None

    def report(model, epoch):
        if dev_pairs is None:
            return None
        predictions = model.predict(dev_pairs[0])
        scores = {"dev_cer": character_error_rate(predictions, dev_pairs[1]),
                  "dev_exact": exact_match(predictions, dev_pairs[1])}
        click.echo(f"pass {epoch}: dev CER {scores['dev_cer']:.4f}, exact match {scores['dev_exact']:.4f}",
                   err=True)
        return scores

    model = AlignmentTransducer(method=method, num_contexts=size, order=order, max_advance=max_advance,
                                hash_bits=hash_bits, edge_unigrams=unigrams, backoff=backoff,
                                options=TransducerOptions(step_size=step_size, delta=delta, truncation=truncation),
                                epochs=epochs, seed=seed, progress=True, batch_size=batch_size, n_shards=shards,
                                n_jobs=jobs)
    client = dask_client(dask_address) if dask_address else None
    try:
        model.set_params(executor=client).fit(inputs, outputs, callback=report)
    finally:
        if client is not None:
            client.close()
    model.progress = False  # a setting of this run, not of the saved model
    model.save(output)
    if history:
        with atomic_write_text(history) as handle:
            json.dump(model.history_, handle, indent=1)
    last = model.history_[-1]
    click.echo(f"trained on {len(inputs)} pairs ({last['no_signal']} without signal in the last pass); "
               f"saved {output}", err=True)


@COMMAND.command("apply")
@click.argument("model_file", type=click.Path(exists=True, dir_okay=False))
@click.argument("data", type=click.Path(exists=True, dir_okay=False, allow_dash=True))
@click.option("-o", "--output", type=OutputFile(allow_dash=True), default="-", show_default=True,
              help="'input<TAB>prediction' lines")
@click.option("--format", "fmt", type=click.Choice(["auto", "cmudict", "pairs", "inputs"]), default="auto",
              show_default=True, help="'inputs': one space-separated input per line")
@click.option("--stream", is_flag=True,
              help="Read DATA (- for stdin) as one space-separated input per line and write each line's "
                   "'input<TAB>prediction' to stdout as soon as the line is read (flushed), so a pipeline "
                   "loads the model once (a blank line gets a blank line).")
@max_line_option
@_MAX_SYMBOLS
def apply(model_file, data, output, fmt, stream, max_line_chars, max_input_symbols):
    """Predict the output of every input in DATA."""
    from varorder.io import atomic_write_text, open_text
    from varorder.transduce.model import AlignmentTransducer

    if stream and (output != "-" or fmt not in ("auto", "inputs")):
        raise click.UsageError("--stream reads inputs, one per line, and writes to stdout: no -o or --format")
    if not stream and data == "-":
        raise click.UsageError("DATA - (stdin) is read with --stream")
    model = AlignmentTransducer.load(model_file)
    if stream:
        return _stream_predictions(model, data, max_line_chars, max_input_symbols)
    if fmt == "inputs":
        with open_text(data) as handle:
            inputs = [line.split() for line in handle if line.strip()]
    else:
        inputs = _read(data, fmt, None, 0)[0]
    model.progress = output != "-"
    lines = [f"{' '.join(x)}\t{y}\n" for x, y in zip(inputs, model.predict(inputs, max_input_symbols))]
    if output == "-":
        click.echo("".join(lines), nl=False)
    else:
        with atomic_write_text(output) as handle:
            handle.writelines(lines)


def _stream_predictions(model, data, max_line_chars, max_input_symbols):
    """``apply --stream``: each line's prediction written (flushed) before the next line is read."""
    import sys

    from varorder.cli._stream import stream_lines

    model.progress = False
    for where, line in stream_lines(data, max_line_chars):
        symbols = line.split()
        if symbols:
            if len(symbols) > max_input_symbols:  # as an over-long line: answered empty, the stream goes on
                click.echo(f"Error: {where}: an input of {len(symbols)} symbols, longer than --max-input-symbols "
                           f"{max_input_symbols}: answered with an empty line", err=True)
            else:
                try:
                    prediction = model.predict([symbols], max_input_symbols)[0]
                except ValueError as err:
                    raise click.ClickException(f"{where}: {err}") from None
                sys.stdout.write(f"{' '.join(symbols)}\t{prediction}")
        sys.stdout.write("\n")
        sys.stdout.flush()


@COMMAND.command("eval")
@max_input_option
@click.argument("model_file", type=click.Path(exists=True, dir_okay=False))
@click.argument("data", type=click.Path(exists=True, dir_okay=False))
@_FORMAT
@_LIMIT
@_SAMPLE_SEED
@_MAX_SYMBOLS
def evaluate(model_file, data, fmt, limit, sample_seed, max_input_symbols):
    """Character error rate and exact match of the model on DATA (JSON on stdout)."""
    import time

    from varorder.eval.metrics import character_error_rate, exact_match
    from varorder.transduce.model import AlignmentTransducer

    model = AlignmentTransducer.load(model_file)
    inputs, outputs = _read(data, fmt, limit, sample_seed)
    start = time.perf_counter()
    predictions = model.predict(inputs, max_input_symbols)
    seconds = time.perf_counter() - start
    click.echo(json.dumps({"words": len(inputs), "cer": character_error_rate(predictions, outputs),
                           "exact_match": exact_match(predictions, outputs),
                           "words_per_second": len(inputs) / max(seconds, 1e-9)}))
