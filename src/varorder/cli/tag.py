"""``varorder tag``: train, apply and evaluate sequence taggers on CoNLL-U files.

    varorder tag train TRAIN.conllu[.gz] -o MODEL.npz [--dev DEV.conllu] [--model crf|memm|hmm]
    varorder tag predict MODEL.npz INPUT.conllu -o OUTPUT.conllu     # tag column filled in
    varorder tag eval MODEL.npz GOLD.conllu                          # token accuracy
    varorder tag train ... --learner samplerank [--skip-factors] [--second-order]   # factor graph, SampleRank

CRF and MEMM use the POS feature templates of :func:`varorder.models.features.pos_features`;
the HMM uses the word forms. The tag column (UPOS or XPOS) is chosen with --tag-column
(give the same one to every subcommand).
"""

from __future__ import annotations

import json
import time

import click

from varorder.cli._samplerank import samplerank_learner, samplerank_models
from varorder.io.conllu import read_conllu, write_conllu
from varorder.models.crf import CRF
from varorder.models.features import pos_features
from varorder.models.hmm import HMM
from varorder.models.memm import MEMM
from varorder.models.persist import model_kind
from varorder.models.sequences import token_accuracy

_ESTIMATORS = {"CRF": CRF, "MEMM": MEMM, "HMM": HMM}


def _inputs(model, sentences):
    if isinstance(model, HMM):
        return [s.words for s in sentences]
    return [pos_features(s.words) for s in sentences]


def _load(path):
    try:
        kind = model_kind(path)
        if kind not in _ESTIMATORS:
            raise ValueError(f"{path}: model kind {kind!r} is not a tagger")
        return _ESTIMATORS[kind].load(path)
    except (ValueError, FileNotFoundError) as err:
        raise click.ClickException(str(err)) from None


def _read(path):
    try:
        return read_conllu(path)
    except (ValueError, FileNotFoundError) as err:
        raise click.ClickException(str(err)) from None


@click.group("tag")
def COMMAND():
    """Train, apply and evaluate part-of-speech taggers on CoNLL-U files."""


@COMMAND.command("train")
@samplerank_learner
@click.argument("train_file", type=click.Path(exists=True, dir_okay=False))
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False), help="model file (.npz) to write")
@click.option("--dev", "dev_file", type=click.Path(exists=True, dir_okay=False), help="CoNLL-U dev file, scored each iteration")
@click.option("--model", "model_name", type=click.Choice(["crf", "memm", "hmm"]), default="crf", show_default=True)
@click.option("--tag-column", type=click.Choice(["upos", "xpos"]), default="upos", show_default=True)
@click.option("--algorithm", type=click.Choice(["lbfgs", "adagrad", "sgd"]), default="lbfgs", show_default=True,
              help="CRF optimiser")
@click.option("--c1", type=float, default=0.0, show_default=True, help="L1 coefficient on the summed NLL (CRF/MEMM)")
@click.option("--c2", type=float, default=0.1, show_default=True, help="L2 coefficient on the summed NLL (CRF/MEMM)")
@click.option("--max-iterations", type=int, default=100, show_default=True)
@click.option("--alpha", type=float, default=0.1, show_default=True, help="HMM add-alpha smoothing")
@click.option("--threads", type=int, default=None, help="Numba threads for CRF training (default: all cores)")
@click.option("--verbose/--quiet", default=True, show_default=True)
def train(train_file, output, dev_file, model_name, tag_column, algorithm, c1, c2, max_iterations, alpha, threads,
          verbose):
    """Train a tagger on TRAIN_FILE and write it to --output."""
    sentences = _read(train_file)
    y = [s.tags(tag_column) for s in sentences]
    began = time.perf_counter()
    if model_name == "hmm":
        model = HMM(alpha_start=alpha, alpha_transition=alpha, alpha_emission=alpha).fit([s.words for s in sentences], y)
    elif model_name == "memm":
        model = MEMM(c1=c1, c2=c2, max_iterations=max_iterations, verbose=verbose).fit(_inputs(None, sentences), y)
    else:
        model = CRF(algorithm=algorithm, c1=c1, c2=c2, max_iterations=max_iterations, n_threads=threads,
                    verbose=verbose)
        if dev_file:
            dev = _read(dev_file)
            model.fit(_inputs(model, sentences), y, _inputs(model, dev), [s.tags(tag_column) for s in dev])
        else:
            model.fit(_inputs(model, sentences), y)
    model.save(output)
    click.echo(f"trained {type(model).__name__} on {len(sentences)} sentences in {time.perf_counter() - began:.1f} s "
               f"-> {output}", err=True)


@COMMAND.command("predict")
@samplerank_models("predict")
@click.argument("model_file", type=click.Path(exists=True, dir_okay=False))
@click.argument("input_file", type=click.Path(exists=True, dir_okay=False))
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False), help="CoNLL-U file to write (.gz compresses)")
@click.option("--tag-column", type=click.Choice(["upos", "xpos"]), default="upos", show_default=True)
def predict(model_file, input_file, output, tag_column):
    """Tag INPUT_FILE with MODEL_FILE, writing CoNLL-U with the tag column filled in."""
    model = _load(model_file)
    sentences = _read(input_file)
    tags = model.predict(_inputs(model, sentences))
    write_conllu(output, sentences, tags, tag_column)


@COMMAND.command("eval")
@samplerank_models("eval")
@click.argument("model_file", type=click.Path(exists=True, dir_okay=False))
@click.argument("gold_file", type=click.Path(exists=True, dir_okay=False))
@click.option("--tag-column", type=click.Choice(["upos", "xpos"]), default="upos", show_default=True)
@click.option("--json", "as_json", is_flag=True, help="print a JSON object")
def evaluate(model_file, gold_file, tag_column, as_json):
    """Token accuracy of MODEL_FILE on GOLD_FILE."""
    model = _load(model_file)
    sentences = _read(gold_file)
    began = time.perf_counter()
    predicted = model.predict(_inputs(model, sentences))
    seconds = time.perf_counter() - began
    gold = [s.tags(tag_column) for s in sentences]
    accuracy = token_accuracy(predicted, gold)
    n_tokens = sum(map(len, gold))
    result = {"accuracy": accuracy, "tokens": n_tokens, "sentences": len(sentences), "seconds": seconds}
    if as_json:
        click.echo(json.dumps(result))
    else:
        click.echo(f"accuracy {accuracy:.4f} on {n_tokens} tokens ({len(sentences)} sentences), "
                   f"{n_tokens / seconds:,.0f} tokens/s including feature extraction")
