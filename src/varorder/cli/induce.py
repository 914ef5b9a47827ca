"""``varorder induce``: unsupervised parsing with the DMV, the CCM or their product (K&M 2004).

    varorder induce train en_ewt-ud-train.conllu.gz -o ud.npz --model product --iterations 50
    varorder induce parse ud.npz en_ewt-ud-dev.conllu.gz --conllu dev.conllu --trees dev.trees
    varorder induce eval ud.npz en_ewt-ud-dev.conllu.gz

Inputs are CoNLL-U (UPOS), PTB bracketed trees (``.mrg``, or a tar of them) or plain tag
files (one sentence per line); punctuation is removed and sentences longer than
``--max-length`` words are dropped (WSJ10 conventions).
"""

from __future__ import annotations

import json

import click

from varorder.cli._options import OutputFile, Real, max_input_option, refuse_inapplicable

__all__ = ["COMMAND"]

_format = click.option("--format", "fmt", type=click.Choice(["auto", "conllu", "ptb", "tags"]), default="auto",
                       show_default=True, help="input format (auto: by file name)")
_max_length = click.option("--max-length", type=click.IntRange(min=0), default=10, show_default=True,
                           help="keep sentences of at most this many words after removing punctuation (0: all)")


def _load(path, fmt, max_length, head_style="content"):
    from varorder.tasks.grammar_induction import load_sentences

    try:
        sentences = load_sentences(path, fmt, max_length or None, head_style=head_style)
    except ValueError as err:
        raise click.ClickException(str(err))
    if not sentences:
        raise click.ClickException(f"{path}: no sentence of at most {max_length} words")
    return sentences


def _model(path):
    from varorder.grammar.induce import GrammarInducer

    try:
        return GrammarInducer.load(path)
    except ValueError as err:
        raise click.ClickException(str(err))


@click.group("induce")
def COMMAND():
    """Grammar induction: DMV, CCM, and their product trained by exact product EM."""


@COMMAND.command("train")
@max_input_option
@click.argument("corpus", type=click.Path(exists=True, dir_okay=False))
@click.option("-o", "--output", required=True, type=OutputFile(), help="model file (.npz)")
@click.option("--model", type=click.Choice(["product", "dmv", "ccm"]), default="product", show_default=True)
@click.option("--iterations", type=click.IntRange(0), default=50, show_default=True)
@click.option("--ccm-smoothing", type=(Real(0), Real(0)), default=(2.0, 8.0), show_default=True,
              help="CCM pseudo-counts (constituent, distituent)")
@click.option("--dmv-smoothing", type=Real(0), default=0.0, show_default=True)
@click.option("--ccm-empty-spans", is_flag=True, help="give the CCM the empty spans as always-distituents (probably K&M 2002's span table; off by default)")
@_format
@_max_length
@click.option("--quiet", is_flag=True, help="no progress bar")
def train(corpus, output, model, iterations, ccm_smoothing, dmv_smoothing, ccm_empty_spans, fmt, max_length, quiet):
    """Train on the POS tags of CORPUS and save the model."""
    from varorder.grammar.induce import GrammarInducer

    refuse_inapplicable(click.get_current_context(), [
        ("ccm_smoothing", model != "dmv", "--model ccm or product"), ("ccm_empty_spans", model != "dmv", "--model ccm or product"),
        ("dmv_smoothing", model != "ccm", "--model dmv or product")])
    sentences = _load(corpus, fmt, max_length)
    est = GrammarInducer(model=model, n_iter=iterations, ccm_smoothing=ccm_smoothing, dmv_smoothing=dmv_smoothing,
                         ccm_empty_spans=ccm_empty_spans, progress=not quiet).fit([s.tags for s in sentences])
    est.save(output)
    click.echo(json.dumps({"model": model, "sentences": len(sentences), "iterations": iterations,
                           "objective": est.objectives_[-1] if est.objectives_ else None, "output": output}))


@COMMAND.command("parse")
@click.argument("model_file", type=click.Path(exists=True, dir_okay=False))
@click.argument("corpus", type=click.Path(exists=True, dir_okay=False))
@click.option("--conllu", "conllu_out", type=OutputFile(), help="write predicted heads as CoNLL-U")
@click.option("--trees", "trees_out", type=OutputFile(), help="write predicted bracketed trees")
@_format
@_max_length
def parse(model_file, corpus, conllu_out, trees_out, fmt, max_length):
    """Parse CORPUS; write heads (CoNLL-U) and/or trees (bracketed), or trees to stdout."""
    from varorder.tasks.grammar_induction import tree_lines, write_conllu_heads, write_trees

    est = _model(model_file)
    sentences = _load(corpus, fmt, max_length)
    try:
        heads, spans = est.parse([s.tags for s in sentences])
    except ValueError as err:
        raise click.ClickException(str(err))
    if conllu_out:
        if heads[0] is None:
            raise click.ClickException("the CCM predicts brackets, not heads: use --trees")
        write_conllu_heads(conllu_out, sentences, heads)
    if trees_out:
        write_trees(trees_out, sentences, spans)
    if not conllu_out and not trees_out:
        for line in tree_lines(sentences, spans):
            click.echo(line)


@COMMAND.command("eval")
@click.argument("model_file", type=click.Path(exists=True, dir_okay=False))
@click.argument("gold", type=click.Path(exists=True, dir_okay=False))
@_format
@_max_length
@click.option("--head-style", type=click.Choice(["content", "function"]), default="content", show_default=True,
              help="CoNLL-U gold: UD's content heads, or case/mark/aux/cop re-headed the PTB way (function)")
def evaluate(model_file, gold, fmt, max_length, head_style):
    """Parse GOLD's tags and score against its trees: attachment accuracy and bracket F1 (JSON)."""
    from varorder.tasks.grammar_induction import evaluate as score

    est = _model(model_file)
    sentences = _load(gold, fmt, max_length, head_style)
    if any(s.heads is None for s in sentences):  # before parsing: an unseen tag would hide the real problem
        raise click.BadParameter(f"{gold} has no trees (read as format 'tags': one tag sequence per line); "
                                 f"evaluation needs gold trees: give a CoNLL-U or PTB file", param_hint="GOLD")
    try:
        heads, spans = est.parse([s.tags for s in sentences])
        click.echo(json.dumps(score(heads, spans, sentences)))
    except ValueError as err:
        raise click.ClickException(str(err))
