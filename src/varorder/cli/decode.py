"""``varorder decode``: exact decoding of a high-order HMM by q-automaton refinement
(Carter, Dymetman & Bouchard 2012, Algorithm 1 in optimisation mode).

    varorder decode LM.arpa --task t9 --text "843 66639"            # keypad digits per word
    varorder decode TAGS.arpa --task pos --train wsj.tsv --text "The cat sat ."
    varorder decode LM.arpa --task candidates --input cands.jsonl    # generic observations
    varorder decode CORPUS.idx --task t9 --max-candidates 100 --text "843 66639"

LM is an ARPA file or a suffix index directory (``varorder lm index``), decoded under the
unbounded-order Witten–Bell model over it (:mod:`varorder.exact.model`).

``--input FILE`` holds one observation per line (t9: digit strings; pos: words;
candidates: a JSON list over positions of ``{"word": log-likelihood, ...}``); ``--text``
gives one observation on the command line. Each result line shows the decoded sequence,
log q and log p (equal when exact) and the run statistics.
"""

from __future__ import annotations

import json
import os

import click

from varorder.cli._options import Real, refuse_inapplicable
import numpy as np

from varorder.errors import ParameterError
from varorder.exact import HighOrderTarget, MaxBackoffWeights, decode

TASKS = ("t9", "pos", "candidates")


def load_lm(path):
    """An ARPA file, or a suffix index directory (``varorder lm index``): the unbounded-order
    Witten–Bell model over it."""
    try:
        if os.path.isdir(path):
            from varorder.lm.suffix_index import open_index
            from varorder.lm.unbounded import WittenBell

            return WittenBell(open_index(path))
        from varorder.lm.arpa import read_arpa

        return read_arpa(path)
    except (ValueError, OSError) as err:
        raise click.ClickException(str(err)) from None


def observations(text, input_file) -> list[str]:
    if (text is None) == (input_file is None):
        raise click.UsageError("give exactly one of --text or --input")
    if text is not None:
        return [text]
    from varorder.io import open_text

    with open_text(input_file) as handle:
        return [line.rstrip("\n") for line in handle if line.strip()]


class TargetFactory:
    """Builds targets for one task from observation lines, and names their symbols."""

    def __init__(self, lm, task, train=None, tag_column="xpos", k=64.0, max_candidates=None):
        self.lm = lm
        self.task = task
        if task == "t9":
            from varorder.tasks.t9 import T9Task

            self._t9 = T9Task(lm, k=k, max_candidates=max_candidates)
        elif task == "pos":
            if train is None:
                raise click.UsageError("--task pos needs --train (word<TAB>tag or CoNLL-U) for the emission model")
            from varorder.io.conllu import read_conllu
            from varorder.io.tagged import TaggedSentence, read_tagged
            from varorder.tasks.pos_highorder import PosTask, TntEmissions

            try:
                if ".conllu" in os.path.basename(train):
                    sentences = [TaggedSentence(s.words, s.tags(tag_column)) for s in read_conllu(train)]
                else:
                    sentences = read_tagged(train)
            except (ValueError, OSError) as err:
                raise click.ClickException(str(err)) from None
            emissions = TntEmissions().fit([(s.words, s.tags) for s in sentences])
            self._pos = PosTask(lm, emissions, [])
        else:
            self._weights = MaxBackoffWeights(lm)

    def target(self, line: str, where: str) -> HighOrderTarget:
        try:
            if self.task == "t9":
                return self._t9.target(line.split())
            if self.task == "pos":
                return self._pos.target(line.split())
            positions = json.loads(line)
            vocab = self.lm.vocabulary
            candidates = []
            for i, options in enumerate(positions):
                if not isinstance(options, dict) or not options:
                    raise ParameterError(f"position {i} must be a non-empty object word -> log-likelihood")
                unknown = [w for w in options if w not in vocab]
                if unknown:
                    raise ParameterError(f"position {i}: {unknown[0]!r} is not in the LM vocabulary")
                candidates.append((np.asarray([vocab.id_of(w) for w in options]), np.asarray(list(options.values()), float)))
            return HighOrderTarget(self.lm, candidates, weights=self._weights)
        except (ValueError, json.JSONDecodeError) as err:
            raise click.ClickException(f"{where}: {err}") from None

    def words(self, ids) -> list[str]:
        if self.task == "pos":
            return self._pos.tags_of(ids)
        return self.lm.vocabulary.decode(ids)


def check_task_options(task: str, train) -> None:
    """Before the LM is read: --train only for pos (which needs it), --k and --max-candidates only for t9."""
    refuse_inapplicable(click.get_current_context(), [
        ("train", task == "pos", "--task pos"), ("tag_column", task == "pos", "--task pos"),
        ("k", task == "t9", "--task t9"), ("max_candidates", task == "t9", "--task t9")])
    if task == "pos" and train is None:
        raise click.UsageError("--task pos needs --train (word<TAB>tag or CoNLL-U) for the emission model")


def task_options(function):
    for option in reversed([
        click.argument("lm_file", type=click.Path(exists=True, dir_okay=True)),
        click.option("--task", type=click.Choice(TASKS), required=True, help="how observations are read"),
        click.option("--text", default=None, help="one observation given inline"),
        click.option("--input", "input_file", type=click.Path(exists=True, dir_okay=False), default=None,
                     help="file with one observation per line"),
        click.option("--train", type=click.Path(exists=True, dir_okay=False), default=None,
                     help="pos: tagged training file for the TnT emission model"),
        click.option("--tag-column", type=click.Choice(["upos", "xpos"]), default="xpos", show_default=True,
                     help="pos with a CoNLL-U --train: tag column"),
        click.option("--k", type=Real(min=0, min_open=True), default=64.0, show_default=True, help="t9: keypad noise constant"),
        click.option("--max-candidates", type=click.IntRange(min=1), default=None,
                     help="t9: keep only the N likeliest candidate words per position (default: all for decode, "
                          "so decoding is exact as in the paper; 100 for sample, the paper's cap)"),
        click.option("--json", "as_json", is_flag=True, help="one JSON object per observation"),
    ]):
        function = option(function)
    return function


@click.command("decode")
@task_options
@click.option("--max-iterations", type=click.IntRange(min=1), default=100_000, show_default=True)
@click.option("--time-limit", type=Real(min=0, min_open=True), default=None, help="seconds per observation")
def COMMAND(lm_file, task, text, input_file, train, tag_column, k, max_candidates, as_json, max_iterations, time_limit):
    """Exact argmax of p_lm x p_obs for each observation (Algorithm 1, optimisation)."""
    check_task_options(task, train)
    lm = load_lm(lm_file)
    factory = TargetFactory(lm, task, train, tag_column, k, max_candidates)
    for number, line in enumerate(observations(text, input_file), start=1):
        target = factory.target(line, f"{input_file or '--text'}:{number}")
        result = decode(target, max_iterations=max_iterations, time_limit=time_limit)
        record = {
            "output": " ".join(factory.words(result.sentence)),
            "log_q": result.log_q,
            "log_p": result.log_p,
            "exact": result.exact,
            "iterations": result.iterations,
            "states": result.num_states,
            "ngrams_per_order": result.ngram_counts,
            "seconds": round(result.seconds, 4),
        }
        if as_json:
            click.echo(json.dumps(record))
        else:
            click.echo(record["output"])
            click.echo(f"  log q {result.log_q:.4f}  log p {result.log_p:.4f}  exact {result.exact}  "
                       f"iterations {result.iterations}  states {result.num_states}  "
                       f"n-grams {result.ngram_counts}  {result.seconds:.3f} s")
