"""``varorder neg``: named-entity generation (GREC-NEG'10 style) on CorefUD-annotated CoNLL-U (GUM).

    varorder neg prepare GUM.conllu[.gz] -o TASK.json[.gz]          # slots, candidates; prints counts
    varorder neg train TASK.json -o MODEL.npz [--method samplerank|chain|unary|first-mention]
    varorder neg predict MODEL.npz TASK.json -o TEXT.txt --slots SLOTS.tsv
    varorder neg eval MODEL.npz TASK.json                           # the GREC-NEG scorer's figures

The task (:mod:`varorder.neg.task`), the models (:mod:`varorder.neg.model`) and the figures
(:mod:`varorder.eval.neg`) are documented there. ``predict`` writes the regenerated text, one
sentence per line, each document after a ``# doc`` line, chosen REs marked ``[entity: RE]``, and
a TSV of the slots (doc, slot, entity, gold, chosen, type, chosen_type).
"""

from __future__ import annotations

import json
import sys

import click

from varorder.cli._options import OutputFile, Real, max_input_option
from varorder.errors import FormatError
from varorder.io import atomic_write_text


@click.group("neg")
def COMMAND():
    """Named-entity generation: choose each person reference's expression (Bouchard 2010)."""


def _task(path):
    from varorder.neg.task import load_task

    try:
        return load_task(path)
    except (ValueError, OSError) as err:
        raise click.ClickException(str(err)) from None


def _slots(documents) -> int:
    return sum(len(d.slots) for d in documents)


def _nothing_to_do(task_file, documents, what: str) -> None:
    """eval/predict on a task with no slot: a warning and exit status 1 (no figures, no file)."""
    click.echo(f"Warning: {task_file} holds {len(documents)} documents and 0 slots: nothing to {what}", err=True)
    sys.exit(1)


def _model(path):
    from varorder.models.persist import model_kind
    from varorder.neg.model import NegGenerator

    try:
        if model_kind(path) != NegGenerator._MODEL_KIND:
            raise FormatError(f"{path}: model kind {model_kind(path)!r} is not a NegGenerator", path=path)
        return NegGenerator.load(path)
    except (ValueError, OSError) as err:
        raise click.ClickException(str(err)) from None


@COMMAND.command("prepare")
@max_input_option
@click.argument("conllu_file", type=click.Path(exists=True, dir_okay=False))
@click.option("-o", "--output", required=True, type=OutputFile(), help="task file to write (.json or .json.gz)")
def prepare(conllu_file, output):
    """Build the task (slots, gold REs, candidate lists) from CoNLL-U with Entity= annotation."""
    from varorder.io.coref import read_coref
    from varorder.neg.task import build_documents, save_task, task_counts

    try:
        documents = build_documents(read_coref(conllu_file))
    except (ValueError, OSError) as err:
        raise click.ClickException(str(err)) from None
    if not documents:
        raise click.ClickException(f"{conllu_file}: no document with a named person's mention (Entity= with "
                                   "etype person on a proper noun): the task would have 0 slots")
    save_task(output, documents, source=str(conllu_file))
    click.echo(json.dumps(task_counts(documents)))


@COMMAND.command("train")
@click.argument("task_file", type=click.Path(exists=True, dir_okay=False))
@click.option("-o", "--output", required=True, type=OutputFile(), help="model file (.npz) to write")
@click.option("--method", type=click.Choice(["samplerank", "chain", "unary", "first-mention"]), default="samplerank",
              show_default=True)
@click.option("--link/--no-link", default=True, show_default=True, help="the label-dependent link to the previous name")
@click.option("--other-pairs/--no-other-pairs", default=True, show_default=True,
              help="pair factors between contiguous slots of different entities")
@click.option("--link-between", is_flag=True,
              help="extension: the link's code also tells whether another entity's slot lies between")
@click.option("--cues", is_flag=True, help="extension: unary person cues (1st/2nd person words around, quotes)")
@click.option("--warm-start", type=click.Choice(["none", "chain", "unary"]), default="none", show_default=True,
              help="start SampleRank from the exactly trained chain's (or unary model's) weights")
@click.option("--unary-step", type=Real(min=0), default=1.0, show_default=True,
              help="scale of the unary weights' SampleRank step (0 holds them at the warm start)")
@click.option("--step-size", type=Real(0, min_open=True), default=1.0, show_default=True,
              help="SampleRank's perceptron step")
@click.option("-C", "C", type=Real(0, min_open=True), default=1.0, show_default=True,
              help="MIRA's largest step")
@click.option("--epochs", type=click.IntRange(min=1), default=30, show_default=True)
@click.option("--rule", type=click.Choice(["perceptron", "mira"]), default="perceptron", show_default=True)
@click.option("--proposal", type=click.Choice(["gibbs", "mh"]), default="gibbs", show_default=True)
@click.option("--margin", type=Real(min=0), default=1.0, show_default=True)
@click.option("--l2", type=Real(min=0), default=1.0, show_default=True, help="L2 weight of the exact models")
@click.option("--seed", type=int, default=0, show_default=True)
def train(task_file, output, method, link, other_pairs, link_between, cues, warm_start, unary_step, step_size, C,
          epochs, rule, proposal, margin, l2, seed):
    """Train a referring-expression chooser on a prepared task."""
    from varorder.neg.model import NegGenerator, NegOptions

    documents = _task(task_file)
    if not _slots(documents):
        raise click.ClickException(f"{task_file}: {len(documents)} documents and 0 slots: nothing to train on")
    model = NegGenerator(method=method, link_factors=link, other_pairs=other_pairs, link_between=link_between,
                         cues=cues, warm_start=None if warm_start == "none" else warm_start, n_epochs=epochs, rule=rule,
                         proposal=proposal, random_state=seed, verbose=sys.stderr.isatty(),
                         options=NegOptions(unary_step=unary_step, step_size=step_size, C=C, margin=margin, l2=l2))
    model.fit(documents)
    model.save(output)
    click.echo(f"trained {method} on {sum(len(d.slots) for d in documents)} slots in {model.training_time_:.1f} s "
               f"-> {output}", err=True)


@COMMAND.command("predict")
@click.argument("model_file", type=click.Path(exists=True, dir_okay=False))
@click.argument("task_file", type=click.Path(exists=True, dir_okay=False))
@click.option("-o", "--output", required=True, type=OutputFile(), help="regenerated text, REs marked")
@click.option("--slots", "slots_file", type=OutputFile(), default=None, help="TSV of the slots and choices")
def predict(model_file, task_file, output, slots_file):
    """Choose every slot's RE and write the regenerated text (and the slot TSV)."""
    from varorder.neg.task import normal_key, regenerate

    model, documents = _model(model_file), _task(task_file)
    if not _slots(documents):
        _nothing_to_do(task_file, documents, "predict")
    indices = model.predict_indices(documents)
    with atomic_write_text(output) as handle:
        for document, chosen in zip(documents, indices):
            texts = [document.candidates[s.entity][k].text for s, k in zip(document.slots, chosen)]
            handle.write(f"# doc {document.doc_id}\n")
            for sentence in regenerate(document, texts, mark=True):
                handle.write(sentence + "\n")
    if slots_file:
        with atomic_write_text(slots_file) as handle:
            handle.write("doc\tslot\tentity\tgold\tchosen\ttype\tchosen_type\tcorrect\n")
            for document, chosen in zip(documents, indices):
                for i, (slot, k) in enumerate(zip(document.slots, chosen)):
                    candidate = document.candidates[slot.entity][k]
                    correct = normal_key(candidate.text) == normal_key(slot.gold)
                    fields = [document.doc_id, str(i), slot.entity, slot.gold, candidate.text, slot.gold_type,
                              candidate.reg08, str(int(correct))]
                    handle.write("\t".join(f.replace("\t", " ").replace("\n", " ") for f in fields) + "\n")


@COMMAND.command("eval")
@click.argument("model_file", type=click.Path(exists=True, dir_okay=False))
@click.argument("task_file", type=click.Path(exists=True, dir_okay=False))
@click.option("--json", "as_json", is_flag=True, help="print the figures as JSON")
def evaluate(model_file, task_file, as_json):
    """Print the GREC-NEG figures of the model's choices on a prepared task."""
    from varorder.eval.neg import format_scores
    from varorder.neg.task import evaluate as evaluate_task

    model, documents = _model(model_file), _task(task_file)
    if not _slots(documents):
        _nothing_to_do(task_file, documents, "evaluate")
    scores = evaluate_task(documents, model.predict(documents))
    click.echo(json.dumps(scores) if as_json else format_scores(scores))
