"""``varorder tag``: train, apply and evaluate sequence taggers on CoNLL-U files.

    varorder tag train TRAIN.conllu[.gz] -o MODEL.npz [--dev DEV.conllu] [--model crf|memm|hmm]
    varorder tag predict MODEL.npz INPUT.conllu -o OUTPUT.conllu     # tag column filled in
    echo "The dog runs." | varorder tag predict MODEL.npz -         # plain text: TOKEN<TAB>TAG lines
    varorder tag eval MODEL.npz GOLD.conllu                          # token accuracy
    varorder tag train ... --learner samplerank [--skip-factors] [--second-order]   # factor graph, SampleRank
    varorder tag train PART1.conllu PART2.conllu ... --parts -o MODEL.npz [--jobs N | --dask-scheduler ADDRESS]

CRF and MEMM use the POS feature templates of :func:`varorder.models.features.pos_features`
unless ``--features`` names others (:func:`varorder.models.features.parse_templates`; the
model file records them, so predict and eval re-apply them); with ``--format crfsuite`` the
input is a CRFsuite attribute file instead (:mod:`varorder.io.crfsuite`), features given item
by item; ``predict`` also reads plain text, one sentence a line, tokenized by
:func:`varorder.io.text.tokenize` (``--no-tokenize``: already space-separated tokens), the
default for ``-`` (standard input) and ``*.txt``, and writes ``TOKEN<TAB>TAG`` lines
(:func:`varorder.tasks.tagging.tag_text`); its output goes to stdout unless ``-o`` names a
file. The HMM uses the word forms. The tag column (UPOS or XPOS) is chosen with
--tag-column (give the same one to every subcommand). ``predict --probabilities FILE`` writes
every token's marginal label probabilities. ``train --parts`` trains a CRF (L-BFGS) on several
training files as the shards of one corpus, each read and featurised where its shard is evaluated
(:meth:`varorder.models.CRF.fit_sources`; on the workers of ``--dask-scheduler``, which must reach
the files at the same paths): the model file is the same on any executor and worker count.
"""

from __future__ import annotations

import atexit
import functools
import gc
import json
import time

import click

import varorder._numba_start  # noqa: F401,I001  (before Numba's import: no SciPy version check, no scipy.linalg)
from varorder.cli._options import DaskAddress, OutputFile, Real, executor, max_input_option
from varorder.cli._stream import max_line_option

from varorder.cli._samplerank import samplerank_learner, samplerank_models
from varorder.errors import FormatError
from varorder.io import atomic_write_text
from varorder.io.conllu import read_conllu, write_conllu
from varorder.io.crfsuite import read_crfsuite, write_labels
from varorder.models.crf import CRF
from varorder.models.crf2 import SecondOrderCRF
from varorder.models.features import format_templates, parse_templates
from varorder.models.hmm import HMM
from varorder.models.memm import MEMM
from varorder.models.persist import model_kind
from varorder.models.sequences import token_accuracy
from varorder.tasks.tagging import model_inputs

# The interpreter's last garbage collection at exit walks every object Numba and LLVM made (~0.2 CPU s, a
# fifth of a tiny training run). Python does not promise finalizers for objects still alive at exit, and the
# command's files are closed by then: freeze them out of that collection.
atexit.register(gc.freeze)

_ESTIMATORS = {"CRF": CRF, "CRF2": SecondOrderCRF, "MEMM": MEMM, "HMM": HMM}
# the options' defaults are the library's (one place states them), except --c1: see its help
_CRF_DEFAULTS, _HMM_DEFAULTS = CRF().get_params(), HMM().get_params()


def _inputs(model, sentences):
    """What the model reads: words for the HMM and for a CRF or MEMM with feature templates (its
    ``features`` parameter), feature dicts otherwise (CRFsuite attribute input arrives as feature
    dicts already; a model trained on dicts without templates gets the 'pos' ones)."""
    if not sentences or isinstance(sentences[0], list):
        if isinstance(model, HMM):
            raise click.UsageError("the HMM reads words: give it CoNLL-U, not a CRFsuite attribute file")
        if getattr(model, "features", None) is not None:
            raise click.UsageError(f"this model extracts its own features (features={model.features!r}): give it "
                                   "CoNLL-U, not a CRFsuite attribute file")
        return sentences
    return model_inputs(model, [s.words for s in sentences])


def _templates(spec):
    """--features: a preset, a template list, or @FILE holding one (one template per line)."""
    if spec is None:
        return "pos"
    try:
        if spec.startswith("@"):
            from varorder.io import open_text

            with open_text(spec[1:]) as handle:
                text = handle.read()
            return format_templates(parse_templates(text, spec[1:]))
        return format_templates(parse_templates(spec))
    except (ValueError, OSError) as err:
        raise click.BadParameter(str(err), param_hint="--features") from None


def _load(path):
    try:
        kind = model_kind(path)
        if kind not in _ESTIMATORS:
            raise FormatError(f"{path}: model kind {kind!r} is not a tagger", path=path)
        return _ESTIMATORS[kind].load(path)
    except (ValueError, FileNotFoundError) as err:
        raise click.ClickException(str(err)) from None


def _ner_data(path, input_format, column, scheme):
    """:func:`varorder.tasks.ner.read_ner_file` of a CoNLL column file, or of CoNLL-U with CorefUD entities."""
    from varorder.tasks.ner import read_ner_file

    return read_ner_file(path, "conll" if input_format == "conll" else "gum", column, scheme)


def _read_file(path, input_format="conllu", tag_column="upos", task="pos", column=-1, scheme="BIO"):
    """(sentences or feature-dict sequences, gold tags) of a CoNLL-U, CoNLL column or CRFsuite attribute file
    (with ``task="ner"``, CoNLL-U gives the named-entity tags of its CorefUD annotation); ValueError for a bad
    or empty one."""
    if input_format == "crfsuite":
        return read_crfsuite(path)
    if input_format == "conll" or task == "ner":
        data = _ner_data(path, input_format, column, scheme)
        return data.sentences, data.tags
    sentences = read_conllu(path)
    if not sentences:
        raise FormatError(f"{path}: no sentences (an empty CoNLL-U file)", path=path)
    return sentences, [s.tags(tag_column) for s in sentences]


def _read(path, input_format="conllu", tag_column="upos", task="pos", column=-1, scheme="BIO"):
    """:func:`_read_file`, a bad file a one-line command error."""
    try:
        return _read_file(path, input_format, tag_column, task, column, scheme)
    except (ValueError, FileNotFoundError) as err:
        raise click.ClickException(str(err)) from None


_FORMAT = click.option("--format", "input_format", type=click.Choice(["conllu", "crfsuite", "conll"]),
                       default="conllu", show_default=True,
                       help="CoNLL-U sentences, a CRFsuite attribute file (LABEL<TAB>ATTR...), or CoNLL-2002/2003 "
                            "columns (TOKEN ... TAG, -DOCSTART- lines; the tag column is --column)")


def _task(command):
    """--task, --scheme and --column: named-entity tagging on CoNLL columns or GUM."""
    command = click.option("--column", type=int, default=-1, show_default=True,
                           help="--format conll: the tag column (0 is the token; -1 the last, CoNLL-2003's NER "
                                "tags)")(command)
    command = click.option("--scheme", default="BIO", show_default=True,
                           help="--task ner: the tag scheme (BIO = IOB2, IOB1, BIOES, BILOU). CoNLL-U input gets its "
                                "tags in it; predict and eval forbid every transition invalid in it; eval's strict "
                                "entity scores read spans by it")(command)
    return click.option("--task", type=click.Choice(["pos", "ner"]), default="pos", show_default=True,
                        help="ner: named entities — CoNLL-U input is read as CorefUD (GUM) entities, flat named "
                             "mentions (PROPN head, outermost) as tags; the default features are the NER preset; "
                             "predict decodes under --scheme's constraints; eval prints entity P/R/F1")(command)


def _constraints(task, scheme):
    """The scheme predict and eval decode under (None for POS), checked."""
    if task != "ner":
        return None
    from varorder.io.schemes import canonical_scheme

    try:
        return canonical_scheme(scheme)
    except ValueError as err:
        raise click.BadParameter(str(err), param_hint="--scheme") from None


def _train_files(command):
    """``tag train``'s TRAIN_FILE...: one file, or with --parts the pieces of one corpus (a tuple)."""

    @functools.wraps(command)
    def wrapper(**kwargs):
        files = kwargs["train_file"]
        if kwargs["parts"]:
            if kwargs["learner"] != "exact":
                raise click.UsageError("--parts trains a CRF by L-BFGS, not --learner samplerank")
        elif len(files) > 1:
            raise click.UsageError(f"{len(files)} TRAIN_FILEs given: several files are the pieces of one corpus "
                                   "with --parts (CRF, L-BFGS), else give one")
        else:
            kwargs["train_file"] = files[0]
        return command(**kwargs)

    return wrapper


@click.group("tag")
def COMMAND():
    """Train, apply and evaluate part-of-speech taggers on CoNLL-U files."""


@COMMAND.command("train")
@max_input_option
@_train_files
@samplerank_learner
@click.argument("train_file", nargs=-1, required=True, metavar="TRAIN_FILE...",
                type=click.Path(exists=True, dir_okay=False))
@click.option("-o", "--output", required=True, type=OutputFile(), help="model file (.npz) to write")
@click.option("--dev", "dev_file", type=click.Path(exists=True, dir_okay=False), help="CoNLL-U dev file, scored each iteration")
@click.option("--model", "model_name", type=click.Choice(["crf", "crf2", "memm", "hmm"]), default="crf",
              show_default=True, help="crf2: the second-order CRF (label pairs as states; with --task ner only the "
                                      "pairs --scheme allows)")
@click.option("--tag-column", type=click.Choice(["upos", "xpos"]), default="upos", show_default=True)
@click.option("--algorithm", type=click.Choice(["lbfgs", "adagrad", "sgd", "ap", "pa", "arow", "l2sgd"]),
              default=_CRF_DEFAULTS["algorithm"], show_default=True,
              help="CRF optimiser (ap, pa, arow, l2sgd: CRFsuite's online trainers with its default parameters; "
                   "they take --c1 0)")
@click.option("--c1", type=Real(min=0), default=0.1, show_default=True,
              help="L1 coefficient on the summed NLL (CRF/MEMM). Differs from the library's CRF(c1=0) and MEMM(c1=0) "
                   "on purpose: 0.1 with c2 = 0.1 is the configuration of the documented EWT benchmark (the "
                   "sklearn-crfsuite tutorial's), whose L1 sets most unseen (feature, label) weights to zero; the "
                   "library keeps CRFsuite's own default c1 = 0 (a smooth objective, plain L-BFGS)")
@click.option("--c2", type=Real(min=0), default=_CRF_DEFAULTS["c2"], show_default=True,
              help="L2 coefficient on the summed NLL (CRF/MEMM)")
@click.option("--max-iterations", type=click.IntRange(min=1), default=_CRF_DEFAULTS["max_iterations"],
              show_default=True)
@click.option("--alpha", type=Real(min=0), default=_HMM_DEFAULTS["alpha_emission"], show_default=True,
              help="HMM add-alpha smoothing of start, transition and emission counts")
@click.option("--threads", type=click.IntRange(min=1), default=None, help="Numba threads for CRF training (default: all cores)")
@click.option("--features", "features", default=None, metavar="TEMPLATES",
              help="CRF/MEMM feature templates: 'pos' (default; the CRFsuite tutorial's), a list such as "
                   "'bias,w[0],w[-1]|w[0],suf3[0],shape[0]', or @FILE with one template per line")
@_FORMAT
@_task
@click.option("--jobs", type=click.IntRange(min=1), default=None,
              help="CRF/MEMM L-BFGS: evaluate the objective in shards on this many local threads")
@click.option("--dask-scheduler", "dask_address", metavar="ADDRESS", type=DaskAddress(), default=None,
              help="CRF/MEMM L-BFGS: evaluate the objective's shards on this dask.distributed scheduler's workers")
@click.option("--shards", type=click.IntRange(min=1), default=None,
              help="CRF/MEMM L-BFGS: shards of the objective (default 1, or 8 with --jobs/--dask-scheduler); "
                   "a given value trains the same model on any number of workers")
@click.option("--parts", is_flag=True,
              help="CRF L-BFGS: the TRAIN_FILEs are pieces of one corpus, one shard each, read and featurised where "
                   "the shard is evaluated (on the workers of --dask-scheduler, which must reach the files at the same "
                   "paths, the corpus is never held here); the model is the same on any executor")
@click.option("--verbose/--quiet", default=True, show_default=True)
def train(train_file, output, dev_file, model_name, tag_column, algorithm, c1, c2, max_iterations, alpha, threads,
          features, input_format, task, scheme, column, jobs, dask_address, shards, parts, verbose):
    """Train a tagger on TRAIN_FILE (or, with --parts, on the TRAIN_FILEs as pieces of one corpus) and write it
    to --output."""
    if input_format == "crfsuite" and (model_name == "hmm" or features is not None):
        raise click.UsageError("a CRFsuite attribute file already holds the features: it trains a CRF or MEMM "
                               "and takes no --features")
    parallel = jobs is not None or dask_address is not None or shards is not None
    if parallel and (model_name == "hmm" or (model_name == "crf" and algorithm != "lbfgs")):
        raise click.UsageError("--jobs, --dask-scheduler and --shards apply to L-BFGS training of a CRF or MEMM "
                               f"(got --model {model_name}" + (f" --algorithm {algorithm})" if model_name == "crf" else ")"))
    # the estimator applies the templates itself (its features parameter), and saves them
    _constraints(task, scheme)
    templates = _templates(features if features is not None or task != "ner" else "ner") \
        if input_format != "crfsuite" else None
    if parts and (task == "ner" or input_format == "conll"):
        raise click.UsageError("--parts reads CoNLL-U or CRFsuite pieces for POS tagging, not --task ner or "
                               "--format conll")
    if parts:
        return _train_parts(train_file, output, input_format, tag_column, templates, dict(
            c1=c1, c2=c2, max_iterations=max_iterations, n_threads=threads, verbose=verbose), jobs, dask_address,
            model_name, algorithm, dev_file, shards)
    sentences, y = _read(train_file, input_format, tag_column, task, column, scheme)
    began = time.perf_counter()
    sharding = {}
    if parallel:
        sharding = {"n_shards": shards, "executor": executor(jobs or 1, dask_address)}
    if model_name == "hmm":
        model = HMM(alpha_start=alpha, alpha_transition=alpha, alpha_emission=alpha)
    elif model_name == "crf2":
        model = SecondOrderCRF(constraints=_constraints(task, scheme), c1=c1, c2=c2, max_iterations=max_iterations,
                               features=templates, n_threads=threads, verbose=verbose)
    elif model_name == "memm":
        model = MEMM(c1=c1, c2=c2, max_iterations=max_iterations, features=templates, verbose=verbose, **sharding)
    else:
        model = CRF(algorithm=algorithm, c1=c1, c2=c2, max_iterations=max_iterations, features=templates,
                    n_threads=threads, verbose=verbose, **sharding)
    if dev_file and model_name == "crf":
        dev, y_dev = _read(dev_file, input_format, tag_column, task, column, scheme)
        model.fit(_inputs(model, sentences), y, _inputs(model, dev), y_dev)
    else:
        model.fit(_inputs(model, sentences), y)
    model.save(output)
    click.echo(f"trained {type(model).__name__} on {len(sentences)} sentences in {time.perf_counter() - began:.1f} s "
               f"-> {output}", err=True)


def _read_part(path, input_format, tag_column):
    """``read`` of a --parts piece, run where the shard lives: (words or feature dicts, tags)."""
    X, y = _read_file(path, input_format, tag_column)
    return (X, y) if input_format == "crfsuite" else ([s.words for s in X], y)


def _train_parts(paths, output, input_format, tag_column, templates, params, jobs, dask_address, model_name,
                 algorithm, dev_file, shards):
    """``train --parts``: :meth:`CRF.fit_sources` over the TRAIN_FILEs, each read where its shard lives."""
    if model_name != "crf" or algorithm != "lbfgs":
        raise click.UsageError(f"--parts trains a CRF by L-BFGS (got --model {model_name}"
                               + (f" --algorithm {algorithm})" if model_name == "crf" else ")"))
    if dev_file is not None:
        raise click.UsageError("--dev does not apply to --parts (no per-iteration scoring of pieces)")
    if shards is not None:
        raise click.UsageError("--shards does not apply to --parts: each TRAIN_FILE is one shard")
    began = time.perf_counter()
    pool = executor(jobs or 1, dask_address)
    try:
        model = CRF(features=templates, executor=pool, **params)
        model.fit_sources(list(paths), functools.partial(_read_part, input_format=input_format,
                                                         tag_column=tag_column))
        model.save(output)
    except (ValueError, FileNotFoundError) as err:
        raise click.ClickException(str(err)) from None
    finally:
        close = getattr(pool, "close", None) or getattr(pool, "shutdown", None)
        if close is not None:
            close()
    click.echo(f"trained CRF on {len(paths)} parts in {time.perf_counter() - began:.1f} s -> {output}", err=True)


_PREDICT_FORMAT = click.option(
    "--format", "input_format", type=click.Choice(["text", "conllu", "crfsuite", "conll"]), default=None,
    help="text: plain text, one sentence a line (tokenized unless --no-tokenize), tagged as TOKEN<TAB>TAG lines; "
         "conllu, crfsuite, conll: as for train, written back with the tags filled in. [default: text for - "
         "(stdin) and *.txt, conllu otherwise]")


def _predict_format(input_file, input_format):
    if input_format is not None:
        return input_format
    name = input_file.lower()
    return "text" if input_file == "-" or name.endswith((".txt", ".txt.gz")) else "conllu"


def _wrong_format(err, input_format):
    """A reader's FormatError, with the option that reads the other format: a one-line command error."""
    if input_format == "text":
        hint = "--format conllu reads CoNLL-U (conll: CoNLL columns, crfsuite: attribute files)"
    else:
        hint = ("plain text, one sentence a line, is read with --format text (the default for - and *.txt)"
                if input_format == "conllu" else "--format text reads plain text, one sentence a line")
    return click.ClickException(f"{err} [read as --format {input_format}; {hint}]")


@COMMAND.command("predict")
@samplerank_models("predict")
@click.argument("model_file", type=click.Path(exists=True, dir_okay=False))
@click.argument("input_file", type=click.Path(exists=True, dir_okay=False, allow_dash=True))
@click.option("-o", "--output", type=OutputFile(allow_dash=True), default="-", show_default=True,
              help="file to write (.gz compresses; - is stdout): the input's format with the tags filled in, "
                   "TOKEN<TAB>TAG lines for text, one label per line for --format crfsuite")
@click.option("--tag-column", type=click.Choice(["upos", "xpos"]), default="upos", show_default=True)
@_PREDICT_FORMAT
@click.option("--tokenize/--no-tokenize", default=True, show_default=True,
              help="--format text: split each line by varorder.io.text.tokenize (punctuation and the English "
                   "clitics n't 's 're 've 'll 'd 'm apart), or take its space-separated tokens as they are")
@_task
@click.option("--probabilities", "probabilities", type=OutputFile(), default=None,
              help="also write each token's marginal label probabilities (TSV: sentence, token, form, tag, "
                   "p(tag), then one column per label)")
@click.option("--stream", is_flag=True,
              help="Read INPUT_FILE (- for stdin) as one sentence of space-separated words per line and write "
                   "each line's tags (space-separated) to stdout as soon as the line is read (flushed), so a "
                   "pipeline loads the model once (a blank line gets a blank line). No -o.")
@max_line_option
def predict(model_file, input_file, output, tag_column, input_format, tokenize, task, scheme, column, probabilities,
            stream, max_line_chars):
    """Tag INPUT_FILE (- for stdin) with MODEL_FILE. Plain text (one sentence a line; the default for - and
    *.txt) gives TOKEN<TAB>TAG lines, a blank line after each sentence; the other formats are written back with
    the tags filled in (CoNLL-U: the tag column, or with --task ner a MISC NER= item per word; CoNLL columns:
    --column). Output goes to stdout unless -o names a file."""
    constraints = _constraints(task, scheme)
    if stream:
        if output != "-" or probabilities or input_format not in (None, "text"):
            raise click.UsageError("--stream writes tags to stdout: give no -o, --probabilities or --format")
        return _stream_tags(_load(model_file), input_file, max_line_chars, constraints)
    input_format = _predict_format(input_file, input_format)
    if input_format == "text":
        if probabilities:
            raise click.UsageError("--probabilities applies to --format conllu, conll or crfsuite, not text")
        return _tag_text(_load(model_file), input_file, output, tokenize, constraints, max_line_chars)
    if input_file == "-":
        raise click.UsageError(f"INPUT_FILE - (stdin) is read as plain text (--format text) or with --stream, "
                               f"not as --format {input_format}")
    model = _load(model_file)
    ner = input_format == "conll" or (task == "ner" and input_format == "conllu")
    try:
        if ner:
            data = _ner_data(input_file, input_format, column, scheme)
            sentences = data.sentences
        else:
            sentences, _ = _read_file(input_file, input_format, tag_column)
    except FormatError as err:
        raise _wrong_format(err, input_format) from None
    except (ValueError, FileNotFoundError) as err:
        raise click.ClickException(str(err)) from None
    began = time.perf_counter()
    inputs = _inputs(model, sentences)
    tags = _predict(model, inputs, constraints)
    if input_format == "crfsuite":
        write_labels(output, tags)
    elif ner:
        from varorder.tasks.ner import write_ner_file

        write_ner_file(output, data, tags)
    else:
        write_conllu(output, sentences, tags, tag_column)
    if probabilities:
        marginals = model.predict_marginals(inputs) if constraints is None else \
            model.predict_marginals(inputs, constraints=constraints)
        _write_probabilities(probabilities, model, sentences, tags, marginals)
    click.echo(f"tagged {sum(map(len, tags))} tokens in {len(tags)} sentences with {type(model).__name__} in "
               f"{time.perf_counter() - began:.1f} s -> {_shown(output)}", err=True)


def _shown(output):
    return "stdout" if output == "-" else output


def _tag_text(model, input_file, output, tokenize, constraints, max_line_chars):
    """``predict`` on plain text: :func:`varorder.tasks.tagging.tag_text`, written as it is tagged."""
    from varorder.io.text import format_tagged
    from varorder.tasks.tagging import tag_text

    began = time.perf_counter()
    tokens = sentences = 0
    try:
        with atomic_write_text(output) as handle:
            for words, tags in tag_text(model, input_file, tokenize, constraints, max_line_chars=max_line_chars):
                handle.write(format_tagged(words, tags))
                tokens, sentences = tokens + len(words), sentences + 1
    except FormatError as err:
        raise _wrong_format(err, "text") from None
    except ValueError as err:
        raise click.ClickException(str(err)) from None
    click.echo(f"tagged {tokens} tokens in {sentences} sentences with {type(model).__name__} in "
               f"{time.perf_counter() - began:.1f} s -> {_shown(output)}", err=True)


def _predict(model, inputs, constraints):
    """model.predict, under the scheme ``constraints`` when given (a sentence no tagging satisfies: a command
    error)."""
    if constraints is None:
        return model.predict(inputs)
    try:
        return model.predict(inputs, constraints=constraints)
    except ValueError as err:
        raise click.ClickException(str(err)) from None


def _stream_tags(model, input_file, max_line_chars, constraints=None):
    """``predict --stream``: one line of tags per line of words, each flushed before the next line is read."""
    import sys

    from varorder.cli._stream import stream_lines

    out = sys.stdout
    for where, line in stream_lines(input_file, max_line_chars):
        words = line.split()
        if words:
            try:
                item = model_inputs(model, [words])
                tags = (model.predict(item) if constraints is None else
                        model.predict(item, constraints=constraints))[0]
            except ValueError as err:
                raise click.ClickException(f"{where}: {err}") from None
            out.write(" ".join(map(str, tags)))
        out.write("\n")
        out.flush()


def _write_probabilities(path, model, sentences, tags, marginals):
    column = {label: k for k, label in enumerate(model.classes_)}
    with atomic_write_text(path) as fh:
        fh.write("\t".join(["sentence", "token", "form", "tag", "p"] + [str(c) for c in model.classes_]) + "\n")
        for s, (sentence, labels, table) in enumerate(zip(sentences, tags, marginals), 1):
            forms = sentence.words if hasattr(sentence, "words") else ["_"] * len(labels)
            for t, (form, label, row) in enumerate(zip(forms, labels, table), 1):
                fh.write("\t".join([str(s), str(t), form, str(label), f"{row[column[label]]:.6g}"]
                                   + [f"{p:.6g}" for p in row]) + "\n")


@COMMAND.command("eval")
@samplerank_models("eval")
@click.argument("model_file", type=click.Path(exists=True, dir_okay=False))
@click.argument("gold_file", type=click.Path(exists=True, dir_okay=False))
@click.option("--tag-column", type=click.Choice(["upos", "xpos"]), default="upos", show_default=True)
@_FORMAT
@_task
@click.option("--json", "as_json", is_flag=True, help="print a JSON object")
def evaluate(model_file, gold_file, tag_column, input_format, task, scheme, column, as_json):
    """Token accuracy of MODEL_FILE on GOLD_FILE; with --task ner, entity precision / recall / F1 per type and
    micro / macro, in conlleval's (seqeval's default) mode and seqeval's strict mode for --scheme."""
    constraints = _constraints(task, scheme)
    model = _load(model_file)
    sentences, gold = _read(gold_file, input_format, tag_column, task, column, scheme)
    began = time.perf_counter()
    predicted = _predict(model, _inputs(model, sentences), constraints)
    seconds = time.perf_counter() - began
    if task == "ner":
        from varorder.tasks.ner import evaluate_ner, format_ner_scores

        result = evaluate_ner(gold, predicted, constraints, seconds)
        click.echo(json.dumps(result) if as_json else format_ner_scores(result))
        return
    accuracy = token_accuracy(predicted, gold)
    n_tokens = sum(map(len, gold))
    result = {"accuracy": accuracy, "tokens": n_tokens, "sentences": len(sentences), "seconds": seconds}
    if as_json:
        click.echo(json.dumps(result))
    else:
        click.echo(f"accuracy {accuracy:.4f} on {n_tokens} tokens ({len(sentences)} sentences), "
                   f"{n_tokens / seconds:,.0f} tokens/s including feature extraction")
