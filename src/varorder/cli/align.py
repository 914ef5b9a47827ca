"""``varorder align``: train, apply and evaluate word aligners (agreement-based or independent).

    varorder align train corpus.e corpus.f -o model.npz [--normalize] [-a corpus.align]
    varorder align train corpus.en-fr -o model.npz          # fast_align's 'english ||| french' lines
    varorder align apply model.npz test.e test.f -o test.align
    cat test.en-fr | varorder align apply model.npz > test.align      # stdin / stdout
    varorder align eval test.align gold.wa            # NAACL gold (or --gold-format pharaoh)

INPUT is one joint file (``-`` or nothing: stdin) or two line-aligned files, ENGLISH then
FRENCH. The text normalisation chosen at training (``--normalize`` or its parts) is stored in
the model and repeated by ``apply``. Alignments are Pharaoh ``i-j`` lines, 0-based, English
first; ``-f``/``-r`` add each direction's Viterbi links, ``-F``/``-R`` each direction's sentence
scores (−log p(target | source) per target word, lower is better), ``--link-probabilities``
the posterior ½(µ₁ + µ₂) of every output link.
"""

from __future__ import annotations

import json
import math
import sys
from contextlib import ExitStack, contextmanager

import click

from varorder.cli._options import DaskAddress, OutputFile, Real, executor, refuse_inapplicable
from varorder.cli._stream import max_line_option
from varorder.errors import FormatError

__all__ = ["COMMAND"]

_UNKNOWN_WARNING = 0.10  # share of unknown tokens above which apply warns
_CASED_WARNING = 0.01  # share of tokens with a capital above which training on un-lower-cased text warns
_METHODS = ["posterior", "intersection", "union", "grow-diag", "grow-diag-final", "grow-diag-final-and"]


@click.group("align")
def COMMAND():
    """Word alignment: IBM Model 1 / HMM in both directions, trained to agree (Liang et al. 2008)."""


def _lean_process():
    """Keep the align commands' resident memory down: load SciPy's BLAS module alone, before Numba
    builds its CPU target (which would import all of ``scipy.linalg``, ~12 MB; see
    :func:`varorder.engine.threads.load_cython_blas`), and :func:`_return_freed_memory`; and their
    CPU time: idle worker threads sleep instead of spinning
    (:func:`varorder.engine.threads.sleep_idle_threads`, −7 CPU s of 37 at 100k pairs)."""
    from varorder.engine.threads import load_cython_blas, sleep_idle_threads

    sleep_idle_threads()
    load_cython_blas()
    _return_freed_memory()


def _return_freed_memory():
    """Make glibc's malloc hand blocks of 6 MiB or more back to the system when they are freed
    (:func:`varorder._malloc.fix_mmap_threshold`). Measured on the 100k job (one process, peak RSS /
    CPU s / minor faults): glibc's rising default 333 MB before the later memory cuts; a fixed 1 MiB
    274 MB but 52–70 CPU s with two threads, 4 M page faults (16 GB zero-filled: every E-step batch
    array mapped afresh, the two threads' faults contending in the kernel); 6 MiB 280 MB, 36–41 CPU s,
    0.5–0.8 M faults (the per-batch arrays reuse heap blocks, the per-shard ones are still returned);
    16 MiB 297 MB, 34 CPU s. One arena for every thread: the E-step's batches run on worker threads
    (see :func:`varorder._malloc.fix_mmap_threshold`). Heap top kept up to 32 MiB instead of glibc's
    128 KiB: the batches' heap blocks at the top were handed back and faulted in again after every
    batch — 0.75–1.6 M minor faults and 4.8–10.7 s of system time per job, varying run to run, against
    0.19 M and 1.2 s kept (wall 16.7–21.2 s → 13.2–15.4 s, peak RSS +2–4 MB; 128 MiB: the same)."""
    from varorder._malloc import fix_mmap_threshold

    fix_mmap_threshold(6 << 20, single_arena=True, trim_threshold=32 << 20)


def _warn(message):
    click.echo(f"warning: {message}", err=True)


def _iter_pairs(inputs, normalization, limit=None):
    """Sentence pairs from INPUT..., read as they are consumed: nothing or '-' (stdin) or one joint
    '|||' file, or ENGLISH FRENCH."""
    from varorder.io.bitext import iter_bitext, iter_joint

    if len(inputs) > 2:
        raise click.UsageError(f"give one joint 'english ||| french' file or two files (ENGLISH FRENCH), "
                               f"not {len(inputs)}")
    if len(inputs) == 2:
        if inputs[0] == inputs[1] == "-":
            raise click.UsageError("only one of ENGLISH and FRENCH can be stdin")
        return iter_bitext(inputs[0], inputs[1], limit=limit, normalize_text=normalization)
    return iter_joint(inputs[0] if inputs else "-", limit=limit, normalize_text=normalization)


def _encode(pairs, e_vocab, f_vocab, shard_size, grow, max_length):
    """The pairs as integer ids shard by shard (no token lists of the whole corpus are kept), pairs
    longer than ``max_length`` cut into pieces (the aligner's length guard)."""
    from varorder.agree.corpus import encode_bitext

    return encode_bitext(pairs, e_vocab, f_vocab, shard_size, grow=grow, max_length=max_length)


def _normalization(normalize, lowercase, strip_accents, tokenize):
    from varorder.io.bitext import Normalization

    if normalize:
        return Normalization.naacl()
    return Normalization(lowercase=lowercase, strip_accents=strip_accents, tokenize=tokenize)


def _cased_share(corpus):
    """Share of the training tokens that contain a capital (from the vocabularies' token counts)."""
    import numpy as np

    cased = total = 0
    for counts, vocab in zip(corpus.token_counts(), (corpus.e_vocab, corpus.f_vocab)):
        flags = np.fromiter((t != t.lower() for t in vocab.tokens), dtype=bool, count=len(vocab))
        cased += int(counts[flags].sum())
        total += int(counts.sum())
    return cased / total if total else 0.0


class _CaseCount:
    """Pass pairs through, counting the tokens that contain a capital (for ``apply``'s hint)."""

    def __init__(self, pairs):
        self.pairs = pairs
        self.cased = self.total = 0

    def __iter__(self):
        for e, f in self.pairs:
            for tokens in (e, f):
                self.total += len(tokens)
                line = " ".join(tokens)
                if line != line.lower():
                    self.cased += sum(t != t.lower() for t in tokens)
            yield e, f

    @property
    def share(self):
        return self.cased / self.total if self.total else 0.0


def _output_options(fn):
    """Options shared by ``train --alignments`` and ``apply``: decoding and the extra outputs."""
    for decorator in reversed([
        click.option("--method", type=click.Choice(_METHODS), default="posterior", show_default=True,
                     help="posterior decoding, or each direction's Viterbi links symmetrized"),
        click.option("-f", "--forward", "forward_path", type=OutputFile(), default=None,
                     help="also write the f|e direction's Viterbi links (Pharaoh, English first)"),
        click.option("-r", "--reverse", "reverse_path", type=OutputFile(), default=None,
                     help="also write the e|f direction's Viterbi links (Pharaoh, English first)"),
        click.option("-F", "--forward-scores", "forward_scores", type=OutputFile(), default=None,
                     help="per pair, -log p(french | english) per French word under the f|e model"),
        click.option("-R", "--reverse-scores", "reverse_scores", type=OutputFile(), default=None,
                     help="per pair, -log p(english | french) per English word under the e|f model"),
        click.option("--link-probabilities", "link_probabilities", type=OutputFile(), default=None,
                     help="per pair, the posterior ½(µ₁+µ₂) of each output link, in the order of the Pharaoh line"),
    ]):
        fn = decorator(fn)
    return fn


@contextmanager
def _line_sink(path):
    """A text handle on ``path`` (written atomically), or on stdout for None / '-'."""
    from varorder.io import atomic_write_text

    if path in (None, "-"):
        yield sys.stdout
        sys.stdout.flush()
        return
    with atomic_write_text(path) as fh:
        yield fh


def _write_rows(paths, rows):
    """Write the k-th line of every row to ``paths[k]``: all the files in one pass over ``rows``."""
    with ExitStack() as stack:
        sinks = [stack.enter_context(_line_sink(path)) for path in paths]
        for row in rows:
            for fh, line in zip(sinks, row):
                fh.write(line + "\n")


def _write_lines(path, lines):
    _write_rows((path,), ((line,) for line in lines))


def _write_outputs(aligner, corpus, output, method, threshold, forward_path, reverse_path, forward_scores,
                   reverse_scores, link_probabilities):
    from varorder.io.pharaoh import format_line

    # one shard at a time: neither the links nor the posteriors of the whole corpus are held
    if link_probabilities:  # the posteriors give the links (posterior decoding) and their probabilities at once
        rows = ((format_line(links), " ".join(f"{m[i, j]:.4g}" for i, j in sorted(links)))
                for links, m in aligner.iter_align(corpus, method=method, threshold=threshold, with_posteriors=True))
        _write_rows((output, link_probabilities), rows)
    elif method == "posterior":
        with _line_sink(output) as fh:
            for text in aligner.iter_pharaoh_text(corpus, threshold=threshold):
                fh.write(text)
    else:
        _write_lines(output, (format_line(links) for links in aligner.iter_align(corpus, method=method,
                                                                                 threshold=threshold)))
    if forward_path or reverse_path:
        forward, reverse = aligner.directional(corpus)
        for path, links in ((forward_path, forward), (reverse_path, reverse)):
            if path:
                _write_lines(path, (format_line(x) for x in links))
    if forward_scores or reverse_scores:
        forward, reverse = aligner.sentence_scores(corpus)
        e_len, f_len = corpus.lengths()
        for path, scores, lengths in ((forward_scores, forward, f_len), (reverse_scores, reverse, e_len)):
            if path:
                _write_lines(path, (f"{-s / max(int(n), 1):.6g}" if math.isfinite(s) else "inf"
                                    for s, n in zip(scores, lengths)))


@COMMAND.command("train")
@click.argument("inputs", nargs=-1, type=click.Path(allow_dash=True, dir_okay=False))
@click.option("-o", "--output", required=True, type=OutputFile(), help="model file (.npz)")
@click.option("--model", type=click.Choice(["hmm", "ibm1"]), default="hmm", show_default=True)
@click.option("--training", type=click.Choice(["agreement", "independent", "product"]), default="agreement",
              show_default=True, help="agreement = domain-approximate product EM; product = Liang et al. 2006")
@click.option("--iterations", type=click.IntRange(min=1), default=5, show_default=True, help="iterations of the final model")
@click.option("--ibm1-iterations", type=click.IntRange(min=0), default=5, show_default=True)
@click.option("--null-prob", type=Real(0, 1, max_open=True), default=0.05, show_default=True)
@click.option("--max-jump", type=click.IntRange(min=1), default=7, show_default=True)
@click.option("--band", type=click.IntRange(min=1), default=100, show_default=True,
              help="pairs with a longer source side prune jumps longer than this many words (extension; stored in the model)")
@click.option("--threshold", type=Real(0, 1), default=0.6, show_default=True, help="posterior decoding δ (stored in the model)")
@click.option("--max-length", type=click.IntRange(min=1), default=200, show_default=True,
              help="length guard: longer pairs are cut into pieces of at most this many words per side, aligned "
                   "separately, with a warning (extension; stored in the model)")
@click.option("--normalize", is_flag=True, help="all of --lowercase --strip-accents --tokenize (NAACL 2003)")
@click.option("--lowercase", is_flag=True, help="lower-case the text (recorded in the model)")
@click.option("--strip-accents", is_flag=True, help="strip accents to ASCII (recorded in the model)")
@click.option("--tokenize", is_flag=True, help="NAACL 2003 tokenisation (recorded in the model)")
@click.option("--limit", type=click.IntRange(min=1), default=None, help="read at most this many sentence pairs")
@click.option("--shard-size", type=click.IntRange(min=1), default=5000, show_default=True,
              help="sentence pairs per E-step task (memory grows with it)")
@click.option("--workers", "--jobs", "workers", type=click.IntRange(min=1), default=1, show_default=True, help="local E-step threads")
@click.option("--dask", "--dask-scheduler", "dask_address", type=DaskAddress(), default=None, help="dask.distributed scheduler address")
@click.option("--parts", is_flag=True,
              help="INPUTs are pieces of one corpus, each an 'english ||| french' file, read and kept where the "
                   "E-steps run: on the workers of --dask-scheduler (which must reach the files at the same paths) "
                   "the corpus is never held here; the model equals a local run's")
@click.option("-a", "--alignments", "alignments_path", type=OutputFile(allow_dash=True), default=None,
              help="also align the training text with the trained model (Pharaoh; '-' = stdout)")
@_output_options
@click.option("-q", "--quiet", is_flag=True, help="no progress bars or summary (warnings are still shown)")
def train(inputs, output, model, training, iterations, ibm1_iterations, null_prob, max_jump, band, threshold,
          max_length, normalize, lowercase, strip_accents, tokenize, limit, shard_size, workers, dask_address, parts,
          alignments_path, method, forward_path, reverse_path, forward_scores, reverse_scores, link_probabilities, quiet):
    """Train an aligner on INPUT: one 'english ||| french' file (default stdin) or ENGLISH FRENCH files (.gz accepted)."""
    from varorder.agree.aligner import WordAligner
    from varorder.agree.corpus import Vocabulary

    _lean_process()
    norm = _normalization(normalize, lowercase, strip_accents, tokenize)
    extra = (forward_path, reverse_path, forward_scores, reverse_scores, link_probabilities)
    if alignments_path is None and any(extra):
        raise click.UsageError("-f/-r/-F/-R/--link-probabilities describe --alignments: give -a FILE too")
    refuse_inapplicable(click.get_current_context(), [("method", alignments_path is not None, "-a/--alignments")])
    params = dict(model=model, training=training, iterations=iterations, ibm1_iterations=ibm1_iterations,
                  null_prob=null_prob, max_jump=max_jump, band=band, threshold=threshold, max_length=max_length,
                  shard_size=shard_size, executor=executor(workers, dask_address), progress=not quiet,
                  normalization=norm.to_dict())
    if parts:
        return _train_parts(inputs, output, norm, limit, alignments_path, quiet, params)
    try:
        pairs = _encode(_iter_pairs(inputs, norm, limit), Vocabulary(), Vocabulary(), shard_size, grow=True,
                        max_length=max_length)
        if len(pairs) == 0:
            raise FormatError(f"{', '.join(inputs) or 'stdin'}: no sentence pairs to train on")
        cased = 0.0 if norm.lowercase else _cased_share(pairs)
        if cased > _CASED_WARNING:
            _warn(f"{100 * cased:.1f}% of the tokens contain capitals and the text is not lower-cased: "
                  "'The' and 'the' will be different words (alignments are usually worse); "
                  "add --lowercase or --normalize")
        aligner = WordAligner(**params)
        aligner.fit(pairs)
        aligner.save(output)
        if alignments_path is not None:
            aligner.keep_log_tables_only()  # saved: decoding needs only the logs
            _write_outputs(aligner, pairs, alignments_path, method, None, *extra)
    except ValueError as exc:
        raise click.ClickException(str(exc))
    if not quiet:
        for phase, objectives in aligner.history_:
            click.echo(f"{phase}: objective " + " ".join(f"{o:.6g}" for o in objectives), err=True)
        click.echo(f"wrote {output} ({len(pairs)} sentence pairs, {len(aligner.pairs_)} word pairs, "
                   f"normalization: {norm.describe()})", err=True)


def _train_parts(inputs, output, norm, limit, alignments_path, quiet, params):
    """``train --parts``: :meth:`WordAligner.fit_sources` over the INPUT files, each read where it is kept."""
    import functools

    from varorder.agree.aligner import WordAligner
    from varorder.io.bitext import iter_joint

    if not inputs or "-" in inputs:
        raise click.UsageError("--parts reads 'english ||| french' files named as INPUTs (not stdin)")
    if limit is not None or alignments_path is not None:
        raise click.UsageError("--parts trains on every pair of the INPUT files: no --limit or -a/--alignments")
    try:
        aligner = WordAligner(**params).fit_sources(list(inputs), functools.partial(iter_joint, normalize_text=norm))
        aligner.save(output)
    except ValueError as exc:
        raise click.ClickException(str(exc))
    finally:
        close = getattr(params["executor"], "close", None) or getattr(params["executor"], "shutdown", None)
        if close is not None:
            close()
    if not quiet:
        for phase, objectives in aligner.history_:
            click.echo(f"{phase}: objective " + " ".join(f"{o:.6g}" for o in objectives), err=True)
        click.echo(f"wrote {output} ({len(inputs)} parts, {len(aligner.pairs_)} word pairs, "
                   f"normalization: {norm.describe()})", err=True)


@COMMAND.command("apply")
@click.argument("model_path", type=click.Path(exists=True, dir_okay=False))
@click.argument("inputs", nargs=-1, type=click.Path(allow_dash=True, dir_okay=False))
@click.option("-o", "--output", type=OutputFile(allow_dash=True), default=None,
              help="Pharaoh file (default stdout)")
@_output_options
@click.option("--threshold", type=Real(0, 1), default=None, help="posterior decoding δ (default: the model's)")
@click.option("--normalize", is_flag=True,
              help="NAACL normalisation even if the model was trained without it (default: the model's own)")
@click.option("-q", "--quiet", is_flag=True, help="no summary line (warnings are still shown)")
@click.option("--stream", is_flag=True,
              help="Align each input line as it is read and write its Pharaoh line to stdout at once (flushed), "
                   "so a pipeline loads the model once (a blank line gets a blank line); no -o, -f, -r, -F, -R or "
                   "--link-probabilities.")
@max_line_option
def apply(model_path, inputs, output, method, forward_path, reverse_path, forward_scores, reverse_scores,
          link_probabilities, threshold, normalize, quiet, stream, max_line_chars):
    """Align INPUT (one 'english ||| french' file, default stdin, or ENGLISH FRENCH) with a trained model.

    The text is normalised as the model's training text was. Writes Pharaoh 'i-j' lines (0-based, English first).
    """
    from varorder.agree.aligner import WordAligner
    from varorder.io.bitext import Normalization

    # δ decides posterior decoding's links; the symmetrization heuristics ignore it
    refuse_inapplicable(click.get_current_context(), [("threshold", method == "posterior", "--method posterior")])
    _lean_process()
    try:
        aligner = WordAligner.load(model_path).keep_log_tables_only()
        recorded = Normalization.from_dict(aligner.normalization) if aligner.normalization else Normalization()
        norm = Normalization.naacl() if normalize else recorded
        if norm != recorded:
            _warn(f"normalising with {norm.describe()} but the model was trained with {recorded.describe()}")
        if stream:
            if output not in (None, "-") or forward_path or reverse_path or forward_scores or reverse_scores \
                    or link_probabilities:
                raise click.UsageError("--stream writes Pharaoh lines to stdout only: no -o, -f, -r, -F, -R or "
                                       "--link-probabilities")
            return _stream_alignments(aligner, _stream_pairs(inputs, norm, max_line_chars), method, threshold)
        text = _CaseCount(_iter_pairs(inputs, norm))
        pairs = _encode(text, aligner.e_vocab_, aligner.f_vocab_, aligner.shard_size, grow=False,
                        max_length=aligner.max_length)
        unknown_e, unknown_f = aligner.unknown_share(pairs)
        for side, share in (("English", unknown_e), ("French", unknown_f)):
            if share > _UNKNOWN_WARNING:
                hint = ("it is cased and the model is not" if not norm.lowercase and text.share > _CASED_WARNING
                        else f"was it prepared as the training text (normalization: {recorded.describe()})?")
                _warn(f"{100 * share:.1f}% of the {side} tokens are unknown to the model; {hint}")
        _write_outputs(aligner, pairs, output, method, threshold, forward_path, reverse_path, forward_scores,
                       reverse_scores, link_probabilities)
    except ValueError as exc:
        raise click.ClickException(str(exc))
    if not quiet and output not in (None, "-"):
        click.echo(f"aligned {len(pairs)} sentence pairs -> {output}", err=True)


def _stream_pairs(inputs, norm, max_line_chars):
    """``apply --stream``'s pairs, read one line at a time: None for a blank line (answered by a blank
    line, as every --stream command answers one); ENGLISH FRENCH files are read pair by pair."""
    from varorder.cli._stream import stream_lines
    from varorder.io.bitext import parse_joint_line

    if len(inputs) == 2:
        yield from _iter_pairs(inputs, norm)
        return
    path = inputs[0] if inputs else "-"
    for where, line in stream_lines(path, max_line_chars):
        yield None if not line.strip() else parse_joint_line(line, path, int(where.rsplit(":", 1)[1]), norm)


def _stream_alignments(aligner, pairs, method, threshold):
    """``apply --stream``: each pair aligned and its line written (flushed) before the next is read."""
    from varorder.io.pharaoh import format_line

    for pair in pairs:
        if pair is None:  # a blank line: a blank answer
            sys.stdout.write("\n")
            sys.stdout.flush()
            continue
        corpus = _encode(iter([pair]), aligner.e_vocab_, aligner.f_vocab_, aligner.shard_size, grow=False,
                         max_length=aligner.max_length)
        if method == "posterior":
            text = "".join(aligner.iter_pharaoh_text(corpus, threshold=threshold))
        else:
            text = "".join(format_line(links) + "\n" for links in aligner.iter_align(corpus, method=method,
                                                                                     threshold=threshold))
        sys.stdout.write(text)
        sys.stdout.flush()


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
