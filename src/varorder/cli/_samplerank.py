"""``varorder tag … --learner samplerank``: factor-graph taggers trained by SampleRank.

Decorators that ``varorder.cli.tag`` puts on its train / predict / eval commands, so the
factor-graph learner (:mod:`varorder.factorgraph`) joins them without changing their bodies:

    varorder tag train TRAIN.conllu -o MODEL.npz --learner samplerank [--skip-factors] [--second-order]
    varorder tag predict MODEL.npz INPUT.conllu -o OUTPUT.conllu
    varorder tag eval MODEL.npz GOLD.conllu

Inputs and outputs are the CRF's: CoNLL-U, the CRF's POS feature templates
(:func:`varorder.models.features.pos_features`); skip factors join repeated lower-cased
words within a document (``# newdoc`` comments). Models are npz + JSON like every tagger.
"""

from __future__ import annotations

import functools
import json
import time

import click

from varorder.errors import FormatError
from varorder.io.conllu import read_conllu, write_conllu
from varorder.models.persist import model_kind
from varorder.models.sequences import token_accuracy

__all__ = ["samplerank_learner", "samplerank_models"]

# SampleRankTagger._MODEL_KIND, named here so that `tag` commands on other models do not import the factor
# graph package (~0.3 CPU s of Numba loading at start; tests/test_cli_tag.py checks the two agree)
MODEL_KIND = "SampleRankTagger"

_OPTIONS = [
    click.option("--learner", type=click.Choice(["exact", "samplerank"]), default="exact", show_default=True,
                 help="exact: the estimator's own training; samplerank: a factor graph on the CRF's features "
                      "trained by SampleRank (Wick et al. 2009)"),
    click.option("--skip-factors", is_flag=True, help="samplerank: pairwise factors between repeated words "
                                                      "of a document"),
    click.option("--second-order", is_flag=True, help="samplerank: factors over three consecutive tags"),
    click.option("--epochs", type=click.IntRange(min=1), default=40, show_default=True,
                 help="samplerank: passes over the tokens. With Wick et al.'s pairs (the default) no configuration "
                      "tried reaches the exact CRF on UD-EWT dev: 40 passes end 0.45 points below it (93.93% vs "
                      "94.38%), 80 passes 0.44; the extension --pairs neighbourhood comes within 0.10 in 10"),
    click.option("--rule", type=click.Choice(["perceptron", "mira"]), default="perceptron", show_default=True,
                 help="samplerank: update step"),
    click.option("--pairs", type=click.Choice(["proposal", "neighbourhood"]), default="proposal",
                 show_default=True, help="samplerank: ranked pair per step — proposal: the current and proposed "
                                         "configuration (Wick et al. 2009, the paper's); neighbourhood: the model's "
                                         "and the objective's best values of the proposed variable (an extension, "
                                         "FACTORIE's rule)"),
    click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True, help="samplerank: random seed"),
]


def _fail(err):
    raise click.ClickException(str(err)) from None


def _read(path):
    try:
        return read_conllu(path)
    except (ValueError, FileNotFoundError) as err:
        _fail(err)


def _train(train_file, output, dev_file, tag_column, verbose, skip_factors, second_order, epochs, rule, pairs, seed):
    from varorder.factorgraph import SampleRankTagger
    from varorder.factorgraph.samplerank import conllu_inputs

    sentences = _read(train_file)
    if not sentences:
        _fail(f"{train_file}: no sentences (an empty CoNLL-U file)")
    y = [s.tags(tag_column) for s in sentences]
    began = time.perf_counter()
    model = SampleRankTagger(skip_factors=skip_factors, second_order=second_order, rule=rule, pairs=pairs,
                             n_epochs=epochs, random_state=seed, verbose=verbose)
    X, keys, documents = conllu_inputs(sentences)
    try:
        if dev_file:
            dev = _read(dev_file)
            X_dev, keys_dev, documents_dev = conllu_inputs(dev)
            model.fit(X, y, keys, documents, X_dev, [s.tags(tag_column) for s in dev], keys_dev, documents_dev)
        else:
            model.fit(X, y, keys, documents)
        model.save(output)
    except ValueError as err:
        named = [p for p in (train_file, dev_file) if p and str(p) in str(err)]
        _fail(err if named else f"{train_file}{f' (dev {dev_file})' if dev_file else ''}: {err}")
    click.echo(f"trained SampleRankTagger on {len(sentences)} sentences in {time.perf_counter() - began:.1f} s "
               f"-> {output}", err=True)


def samplerank_learner(train):
    """Add --learner and the SampleRank options to ``tag train``; route --learner samplerank here."""

    @functools.wraps(train)
    def wrapper(*, learner, skip_factors, second_order, epochs, rule, pairs, seed, **kwargs):
        from varorder.cli._options import refuse_inapplicable

        model, exact = kwargs.get("model_name", "crf"), learner == "exact"
        refuse_inapplicable(click.get_current_context(), [
            *[(name, not exact, "--learner samplerank") for name in ("epochs", "rule", "pairs", "seed")],
            *[(name, exact and model in ("crf", "crf2", "memm"), "--model crf, crf2 or memm")
              for name in ("c1", "c2", "max_iterations")],
            ("algorithm", exact and model == "crf", "--model crf"),
            ("threads", exact and model in ("crf", "crf2"), "--model crf or crf2"),
            ("alpha", exact and model == "hmm", "--model hmm"),
            ("dev_file", model == "crf", "--model crf (either learner)")])
        if learner == "exact":
            if skip_factors or second_order:
                raise click.UsageError("--skip-factors and --second-order need --learner samplerank")
            return train(**kwargs)
        if kwargs.get("model_name", "crf") != "crf":
            raise click.UsageError("--learner samplerank trains a factor graph on the CRF's features: "
                                   "leave --model at crf")
        if kwargs.get("input_format", "conllu") != "conllu" or kwargs.get("features") is not None or \
                kwargs.get("task", "pos") != "pos":
            raise click.UsageError("--learner samplerank reads CoNLL-U with the CRF's default POS features")
        return _train(kwargs["train_file"], kwargs["output"], kwargs.get("dev_file"), kwargs["tag_column"],
                      kwargs.get("verbose", True), skip_factors, second_order, epochs, rule, pairs, seed)

    def holder():
        pass

    for option in reversed(_OPTIONS):
        holder = option(holder)
    # click lists parameters in reverse order of this list: the command's own first, then ours
    wrapper.__click_params__ = holder.__click_params__ + list(getattr(train, "__click_params__", []))
    return wrapper


def samplerank_models(mode: str):
    """Let ``tag predict`` (mode "predict") or ``tag eval`` ("eval") apply a SampleRankTagger model file."""

    def decorate(command):
        @functools.wraps(command)
        def wrapper(**kwargs):
            path = kwargs["model_file"]
            try:
                is_ours = model_kind(path) == MODEL_KIND
            except (FormatError, FileNotFoundError):
                is_ours = False  # the command's own loader reports the problem
            if not is_ours:
                return command(**kwargs)
            from varorder.factorgraph import SampleRankTagger
            from varorder.factorgraph.samplerank import conllu_inputs

            if kwargs.get("stream"):
                raise click.UsageError("a SampleRankTagger tags whole CoNLL-U files: no --stream")
            if kwargs.get("input_format") not in (None, "conllu") or kwargs.get("probabilities"):
                raise click.UsageError("a SampleRankTagger reads CoNLL-U and gives no probabilities")
            try:
                model = SampleRankTagger.load(path)
            except ValueError as err:
                _fail(err)
            sentences = _read(kwargs["input_file" if mode == "predict" else "gold_file"])
            began = time.perf_counter()
            X, keys, documents = conllu_inputs(sentences)
            try:
                tags = model.predict(X, keys, documents)
            except ValueError as err:
                _fail(err)
            seconds = time.perf_counter() - began
            if mode == "predict":
                write_conllu(kwargs["output"], sentences, tags, kwargs["tag_column"])
                click.echo(f"tagged {sum(map(len, tags))} tokens in {len(tags)} sentences with SampleRankTagger in "
                           f"{time.perf_counter() - began:.1f} s -> {'stdout' if kwargs['output'] == '-' else kwargs['output']}",
                           err=True)
                return
            gold = [s.tags(kwargs["tag_column"]) for s in sentences]
            accuracy = token_accuracy(tags, gold)
            n_tokens = sum(map(len, gold))
            if kwargs.get("as_json"):
                click.echo(json.dumps({"accuracy": accuracy, "tokens": n_tokens, "sentences": len(sentences),
                                       "seconds": seconds}))
            else:
                click.echo(f"accuracy {accuracy:.4f} on {n_tokens} tokens ({len(sentences)} sentences), "
                           f"{n_tokens / max(seconds, 1e-9):,.0f} tokens/s including feature extraction")

        return wrapper

    return decorate
