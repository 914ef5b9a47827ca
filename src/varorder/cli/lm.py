"""``varorder lm``: train n-gram language models, score text with them, convert ARPA to
varorder's memory-mapped binary format (and verify such files), print next-word
distributions, write MAX-ARPA files, mix models (SRILM's -mix-lm) and prune them by relative entropy (Stolcke 1998) (Carter, Dymetman & Bouchard 2012, §2.3). See :mod:`varorder.lm`.

Every command that takes a MODEL accepts ARPA text (``.gz`` too) or a binary model made
by ``build-binary`` (recognised by its magic bytes). Imports happen inside the commands,
so that scoring a sentence with a binary model does not load Numba or the estimators.
"""

from __future__ import annotations

import os
import sys
import time

import click

ESTIMATOR_METHODS = ("absolute", "additive", "kneser-ney")
# varorder.lm.estimate.MAX_ORDER, named here to keep `--help` free of model imports (a test checks the two agree)
NGRAM_MAX_ORDER = 10
MODEL_HELP = "ARPA file (.gz too) or binary model from `varorder lm build-binary`."
VERIFY_HELP = ("Binary model: read the whole file and check every checksum and table invariant before "
               "using it, even if this version of the file passed that check before (by default the "
               "full check runs once per file version: when it is written, or on its first open).")
MINUS_99_HELP = ("ARPA text: read a log10 value of -99 as probability zero (SRILM's convention) "
                 "or as the number -99 (KenLM's reading).")

from varorder.cli._loglinear import LOGLINEAR_MAX_ORDER, loglinear_options  # noqa: E402  (light: no model imports)
from varorder.cli._options import DaskAddress, OutputFile, Real, dask_client, refuse_inapplicable  # noqa: E402
from varorder.cli._stream import max_line_option  # noqa: E402


def _say(message: str) -> None:
    click.echo(message, err=True)


def _load(model_path: str, minus_99: str = "zero", verify: bool = False):
    # --verify forces the full check; without it a binary model is checked in full only
    # the first time this version of the file is opened (open_binary's default)
    from varorder.cli._loglinear import load_loglinear_if_one
    from varorder.lm.arpa import load_model

    try:
        loglinear = load_loglinear_if_one(model_path)
        if loglinear is not None:
            context = click.get_current_context(silent=True)
            if context is not None:  # options of ARPA text and binary files only
                refuse_inapplicable(context, [("minus_99", False, "n-gram models (ARPA text)"),
                                              ("verify", False, "binary n-gram models")])
            return loglinear
        return load_model(model_path, progress=True, minus_99=minus_99, verify=True if verify else None)
    except ValueError as error:
        raise click.ClickException(str(error)) from None


def _checked_numbers(text: str | None, kind, param) -> list | None:
    """Numbers separated by spaces or commas, each finite and non-negative (checked before any work)."""
    import math

    if text is None:
        return None
    try:
        numbers = [kind(part) for part in text.replace(",", " ").split()]
    except ValueError:
        numbers = None
    if not numbers or not all(math.isfinite(n) and n >= 0 for n in numbers):
        raise click.BadParameter(f"expected non-negative numbers separated by spaces or commas, got {text!r}",
                                 param=param)
    return numbers


def _checked_memory(text: str | None, param) -> int | None:
    """Bytes of an -S budget (at least 1 MB), refused before any work when malformed."""
    if text is None:
        return None
    from varorder.lm.external import parse_memory

    try:
        budget = parse_memory(text)
    except ValueError as error:
        raise click.BadParameter(str(error), param=param) from None
    if budget < 1 << 20:
        raise click.BadParameter(f"memory budget {text!r} is below 1 MB", param=param)
    return budget


# lm train's memory budget without -S (lmplz's default is 80%; this leaves room for other jobs)
DEFAULT_MEMORY = "20%"

# options that only an n-gram model reads (refused with --model loglinear rather than ignored)
_NGRAM_ONLY = ("method", "discount", "smoothing", "alpha", "prune", "limit_vocab_file", "discount_fallback",
               "fallback_discounts", "memory", "temp_dir", "dask_scheduler", "binary", "max_arpa", "prune_entropy")


def _refuse_inapplicable(ctx, model_family: str, method: str) -> None:
    from varorder.cli._loglinear import LOGLINEAR_ONLY

    ngram = model_family != "loglinear"
    refuse_inapplicable(ctx, [(name, ngram, "n-gram models (--model ngram)") for name in _NGRAM_ONLY]
                        + [(name, not ngram, "--model loglinear") for name in LOGLINEAR_ONLY]
                        + [("discount", method == "absolute", "--method absolute"),
                           ("smoothing", method == "absolute", "--method absolute"),
                           ("alpha", method == "additive", "--method additive"),
                           ("fallback_discounts", bool(ctx.params.get("discount_fallback")), "--discount-fallback")])


def _ngram_model_only(model_path: str, command: str) -> None:
    """Refuse a log-linear model (an npz) where a command needs an n-gram back-off model."""
    with open(model_path, "rb") as handle:
        if handle.read(4) != b"PK\x03\x04":
            return
    raise click.BadParameter(f"{model_path} is an npz model (log-linear, or another varorder kind); `lm {command}` "
                             f"needs an n-gram back-off model (ARPA or binary)", param_hint="MODEL")


def _no_client():
    import contextlib

    return contextlib.nullcontext(None)


@click.group()
def lm():
    """n-gram language models: estimation, scoring, binary models, MAX-ARPA bounds, mixing, pruning."""


@lm.command()
@click.argument("corpus", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False))
@click.option("-o", "--output", required=True, type=OutputFile(),
              help="Model file to write: ARPA (.gz compresses), or binary with --binary.")
@click.option("-n", "--order", default=3, show_default=True, type=click.IntRange(1, LOGLINEAR_MAX_ORDER),
              help=f"n-gram order: up to {NGRAM_MAX_ORDER} for n-gram models, {LOGLINEAR_MAX_ORDER} with --model loglinear.")
@click.option("--method", type=click.Choice(ESTIMATOR_METHODS), default="kneser-ney", show_default=True)
@click.option("--discount", default=0.25, show_default=True, type=Real(0), help="absolute: the discount D.")
@click.option("--smoothing", default=0.01, show_default=True, type=Real(0), help="absolute: additive term on unigram counts.")
@click.option("--alpha", default=1.0, show_default=True, type=Real(0, min_open=True), help="additive: pseudo-count per word.")
@click.option("--min-count", default=1, show_default=True, type=click.IntRange(1), help="Rarer words become <unk>.")
@click.option("--prune", metavar="'T1 T2 ...'", callback=lambda ctx, param, value: _checked_numbers(value, int, param),
              help="kneser-ney: per-order raw-count thresholds, unigrams first (must be 0), e.g. '0 0 1' drops "
                   "n-grams of order >= 3 seen once; the last value repeats (lmplz's --prune).")
@click.option("--limit-vocab-file", type=click.Path(exists=True, dir_okay=False),
              help="kneser-ney: whitespace-separated words; n-grams holding any other word are dropped after "
                   "estimation and <unk> takes those words' mass (lmplz's --limit_vocab_file).")
@click.option("--discount-fallback", is_flag=True,
              help="kneser-ney: when an order's counts-of-counts give no valid discounts, use --fallback-discounts "
                   "instead of refusing (lmplz's --discount_fallback).")
@click.option("--fallback-discounts", default="0.5 1 1.5", show_default=True, metavar="'D1 D2 D3+'",
              callback=lambda ctx, param, value: _checked_numbers(value, float, param),
              help="The discounts --discount-fallback uses.")
@click.option("-S", "--memory", "memory", callback=lambda ctx, param, value: _checked_memory(value, param),
              help=f"Memory budget (e.g. 2G, 500M, 20%; lmplz's -S), default {DEFAULT_MEMORY} of physical memory. "
                   "The counts and the estimate stay in memory while they fit in it; a corpus whose counts do "
                   "not is counted into sorted runs on disk (-T) and estimated by passes over them, the ARPA "
                   "file written as it goes (with --binary, --max-arpa or --prune-entropy only the counting is "
                   "on disk). On top comes a fixed ~130 MB for Python, NumPy and Numba, and the vocabulary.")
@click.option("-T", "--temp-dir", type=click.Path(exists=True, file_okay=False, writable=True),
              help="Folder for the sorted tables when the counts do not fit in -S (with --dask-scheduler the "
                   "workers must reach it).")
@click.option("--dask-scheduler", metavar="ADDRESS", type=DaskAddress(),
              help="Count n-grams on the workers of this Dask scheduler (e.g. tcp://host:8786; the corpus files "
                   "must be reachable there at the same paths): one shard of the sentences per worker, the shards' "
                   "counts merged here in memory (exactly the counts of one pass). With -S the shards write sorted "
                   "runs into -T instead (reachable by the workers), merged on disk under -S.")
@click.option("--binary", "binary", is_flag=True, help="Write the binary format instead of ARPA.")
@click.option("--max-arpa", is_flag=True, help="Write MAX-ARPA (two extra columns) instead of ARPA.")
@click.option("--prune-entropy", type=Real(0), metavar="THETA",
              help="Prune the estimated model by relative entropy before writing it, as `varorder lm prune "
                   "--threshold THETA` (SRILM's -prune); the model is then estimated in memory (counts on disk with -S).")
@loglinear_options
def train(corpus, output, order, method, discount, smoothing, alpha, min_count, prune, limit_vocab_file,
          discount_fallback, fallback_discounts, memory, temp_dir, dask_scheduler, binary, max_arpa,
          prune_entropy, model_family, **loglinear):
    """Estimate a model from CORPUS files (one sentence per line, .gz read transparently)."""
    _refuse_inapplicable(click.get_current_context(), model_family, method)
    import os

    for path in corpus:
        if path != "-" and os.path.getsize(path) == 0:
            raise click.BadParameter(f"{path} is empty: nothing to estimate a model from", param_hint="CORPUS")
    if model_family != "loglinear" and order > NGRAM_MAX_ORDER:
        raise click.BadParameter(f"{order} is above {NGRAM_MAX_ORDER}, the largest order of an n-gram model "
                                 f"(--model loglinear goes up to {LOGLINEAR_MAX_ORDER})", param_hint="'-n' / '--order'")
    if model_family == "loglinear":
        from varorder.cli._loglinear import train_loglinear

        return train_loglinear(corpus, output, order, min_count, loglinear, _say)
    from varorder.lm import AbsoluteDiscounting, AdditiveSmoothing, ModifiedKneserNey

    kneser_ney_only = {"--prune": prune, "--limit-vocab-file": limit_vocab_file, "--discount-fallback": discount_fallback}
    for flag, value in kneser_ney_only.items():
        if value and method != "kneser-ney":
            raise click.UsageError(f"{flag} applies to --method kneser-ney only")
    if method == "kneser-ney":
        fallback = fallback_discounts
        limit_vocab = None
        if limit_vocab_file:
            from varorder.lm.corpus import open_text

            with open_text(limit_vocab_file) as handle:
                limit_vocab = handle.read().split()
        estimator = ModifiedKneserNey(order=order, min_count=min_count,
                                      discount_fallback=tuple(fallback) if discount_fallback else None,
                                      prune=prune, limit_vocab=limit_vocab)
    elif method == "absolute":
        estimator = AbsoluteDiscounting(order=order, discount=discount, smoothing=smoothing, min_count=min_count)
    else:
        estimator = AdditiveSmoothing(order=order, alpha=alpha, min_count=min_count)
    from varorder.lm.train import train_from_files

    if memory is None and not dask_scheduler:  # with Dask and no -S: the shards' counts merged in memory
        from varorder.lm.external import parse_memory

        memory = parse_memory(DEFAULT_MEMORY)
    start = time.perf_counter()
    _say(f"estimating a {order}-gram {method} model from {', '.join(corpus)} ...")
    try:
        with dask_client(dask_scheduler) if dask_scheduler else _no_client() as client:
            trained = train_from_files(estimator, list(corpus), memory=memory, temp_dir=temp_dir, client=client,
                                       output=output, binary=binary, max_arpa=max_arpa, progress=True,
                                       prune_entropy=prune_entropy)
    except ValueError as error:
        raise click.ClickException(str(error)) from None
    if trained.n_workers is not None:
        _say(f"counted on {trained.n_workers} Dask workers, shard counts merged in memory")
    elif memory is not None:
        where = "in memory" if trained.path == "memory" else \
            "on disk (sorted tables in -T" + (", the ARPA file written as estimated)" if trained.streamed else ")")
        _say(f"counts held {where} under a budget of {memory / 2**20:.0f} MB")
    counts = " ".join(f"{m}-grams={n}" for m, n in enumerate(trained.ngram_counts, start=1))
    _say(f"{counts} in {time.perf_counter() - start:.1f} s")
    if method == "kneser-ney":
        for m, discounts in enumerate(estimator.discounts_, start=1):
            fallback_note = " (fallback)" if m in estimator.fallback_orders_ else ""
            _say(f"  order {m} discounts D1={discounts[0]:.4f} D2={discounts[1]:.4f} D3+={discounts[2]:.4f}{fallback_note}")
    _say(f"wrote {output}")


@lm.command()
@click.argument("model_path", metavar="MODEL", type=click.Path(exists=True, dir_okay=False))
@click.argument("text", type=click.Path(exists=True, dir_okay=False, allow_dash=True))
@click.option("--sentences/--no-sentences", default=True, show_default=True,
              help="Print one line per sentence: log10 probability, predicted tokens, OOVs.")
@click.option("--per-token", is_flag=True,
              help="Print each sentence's tokens as KenLM's query does: word=id n-gram-length log10p, "
                   "then Total and OOV.")
@click.option("--minus-99", type=click.Choice(("zero", "literal")), default="zero", show_default=True, help=MINUS_99_HELP)
@click.option("--verify", is_flag=True, help=VERIFY_HELP)
@click.option("--stream", is_flag=True,
              help="Answer each line of TEXT as it is read (flushed; a blank line is the empty sentence), so "
                   "that a pipeline pays the model's load once: e.g. TEXT - fed line by line by another process.")
@max_line_option
def score(model_path, text, sentences, per_token, minus_99, verify, stream, max_line_chars):
    """Score TEXT (one sentence per line; - for stdin) with MODEL (an n-gram model, or a log-linear npz).

    Per sentence: log10 p (with <s> and </s>), the number of predicted tokens (words and
    </s>), and OOVs. Then a summary with the perplexity over all predicted tokens
    (OOVs scored as <unk>, as KenLM's query does).
    """
    from varorder.lm.corpus import iter_sentences

    if stream and not (sentences or per_token):
        raise click.UsageError("--stream answers each line: give it --sentences (the default) or --per-token, "
                               "not --no-sentences")
    model = _load(model_path, minus_99, verify)
    out = sys.stdout
    header = "log10prob\ttokens\toovs\n" if sentences and not per_token else ""
    if stream:
        out.write(header)
        from varorder.cli._stream import stream_lines
        from varorder.lm.corpus import BOS, EOS

        totals = [0, 0.0, 0, 0]
        for where, line in stream_lines(text, max_line_chars):
            tokens = line.split()
            if BOS in tokens or EOS in tokens:
                raise click.ClickException(f"{where}: the text spells out {BOS} or {EOS}; write sentences "
                                           "without them (the model adds them)")
            for k, v in enumerate(_write_scores(model, [tokens], out, sentences, per_token)):
                totals[k] += v
            out.flush()
            if totals[2] > _STREAM_COMPILED_AFTER and "varorder.lm._kernels" not in sys.modules:
                # a long stream: the compiled scorer (loaded once, ~0.3 s) from here on; ~30x faster per line
                # than the Python one that spares a short run Numba's start (the same numbers)
                from varorder.lm.model import use_compiled_scoring

                use_compiled_scoring()
        n_sentences, total, n_tokens, n_oov = totals
    else:
        out.write(header)
        totals = [0, 0.0, 0, 0]
        try:  # a batch of sentences at a time, never the whole text ("-" is stdin, under a file's rules)
            for batch in _batches(iter_sentences(text), _SCORE_BATCH_TOKENS):
                for k, v in enumerate(_write_scores(model, batch, out, sentences, per_token)):
                    totals[k] += v
        except ValueError as error:
            raise click.ClickException(str(error)) from None
        n_sentences, total, n_tokens, n_oov = totals
    perplexity = 10.0 ** (-total / n_tokens) if n_tokens else float("nan")
    click.echo(
        f"sentences={n_sentences} tokens={n_tokens} oovs={n_oov} log10prob={total:.4f} perplexity={perplexity:.4f}"
    )


# predicted tokens after which `score --stream` switches to the compiled scorer
_STREAM_COMPILED_AFTER = 2000


# tokens of the sentences `score` holds at once: a few MB, whatever the size of the text
_SCORE_BATCH_TOKENS = 200_000


def _batches(numbered_sentences, max_tokens: int):
    """Lists of sentences of about ``max_tokens`` tokens from ``(line, tokens)`` pairs, read as needed."""
    batch, size = [], 0
    for _, tokens in numbered_sentences:
        batch.append(tokens)
        size += len(tokens) + 1
        if size >= max_tokens:
            yield batch
            batch, size = [], 0
    if batch:
        yield batch


def _write_scores(model, tokens, out, sentences: bool, per_token: bool) -> tuple[int, float, int, int]:
    """Score the sentences ``tokens`` (lists of words), write their lines (as ``score`` asks) to ``out``;
    return (sentences, Σ log10 p, predicted tokens, OOVs)."""
    import numpy as np

    vocabulary = model.vocabulary
    ids, lengths = vocabulary.encode_sentences(tokens)
    token_scores, ngram_lengths = model.token_log10probs(ids, lengths)
    ends = np.cumsum(lengths + 1)
    per_sentence = np.add.reduceat(token_scores, ends - lengths - 1) if len(lengths) else np.zeros(0)
    oov = np.fromiter((sum(1 for w in sentence if w not in vocabulary) for sentence in tokens), dtype=np.int64, count=len(tokens))
    if per_token:
        eos = vocabulary.words[vocabulary.eos_id]
        for sentence, end, total, n_oov in zip(tokens, ends, per_sentence, oov):
            begin = end - len(sentence) - 1
            words = [*sentence, eos]
            word_ids = [*vocabulary.encode(sentence).tolist(), vocabulary.eos_id]
            fields = [f"{w}={i} {int(n)} {p:.6g}" for w, i, n, p in
                      zip(words, word_ids, ngram_lengths[begin:end], token_scores[begin:end])]
            out.write("\t".join(fields) + f"\tTotal: {total:.6g} OOV: {n_oov}\n")
    elif sentences:
        for total, length, n_oov in zip(per_sentence, lengths, oov):
            out.write(f"{total:.6f}\t{length + 1}\t{n_oov}\n")
    return len(lengths), float(per_sentence.sum()), int(lengths.sum() + len(lengths)), int(oov.sum())


@lm.command("build-binary")
@click.argument("arpa", type=click.Path(exists=True, dir_okay=False))
@click.argument("output", type=OutputFile())
@click.option("--max-arpa", is_flag=True, help="Also store the MAX-ARPA columns (computed when the ARPA file lacks them; "
                                               "format version 1 only).")
@click.option("--minus-99", type=click.Choice(("zero", "literal")), default="zero", show_default=True, help=MINUS_99_HELP)
@click.option("--trie", is_flag=True, help="Write format version 2: a sorted trie with bit-packed columns, about 5x "
                                           "smaller than version 1's hash tables (KenLM's `build_binary trie`), "
                                           "built in one streamed pass.")
@click.option("-q", "--prob-bits", type=click.IntRange(1, 24), default=None,
              help="Quantise the log10 probabilities of orders >= 2 to this many bits (KenLM's -q; implies --trie).")
@click.option("-b", "--backoff-bits", type=click.IntRange(1, 24), default=None,
              help="Quantise the log10 back-offs of orders >= 2 to this many bits (KenLM's -b; implies --trie).")
def build_binary(arpa, output, max_arpa, minus_99, trie, prob_bits, backoff_bits):
    """Convert ARPA to varorder's binary format, which opens by memory-mapping (no parse).

    The file is versioned and checked on open: its layout and control arrays always, every
    checksum and table invariant the first time a version of the file is opened (a copy or
    a changed file is checked in full again; `varorder lm verify` checks everything on
    demand). Version 1 (the default) holds the same hash tables as the model in memory;
    version 2 (--trie) the same values in a trie: either way its scores equal the ARPA
    file's, unless -q/-b quantise them (then within the error the file records).
    """
    from varorder.lm.binary import is_binary_model, write_binary

    _ngram_model_only(arpa, "build-binary")
    trie = trie or prob_bits is not None or backoff_bits is not None
    if trie and max_arpa:
        raise click.BadParameter("format version 2 (--trie, -q, -b) stores no MAX-ARPA columns; they are "
                                 "computed when needed", param_hint="--max-arpa")
    start = time.perf_counter()
    if trie and not is_binary_model(arpa):
        from varorder.lm.trie_build import build_trie

        try:
            streamed = build_trie(arpa, output, prob_bits=prob_bits, backoff_bits=backoff_bits, minus_99=minus_99)
        except ValueError as error:
            raise click.ClickException(str(error)) from None
        _say(f"wrote {output} ({'streamed' if streamed else 'read in memory first'}) in "
             f"{time.perf_counter() - start:.1f} s")
        return
    model = _load(arpa, minus_99)
    _say(f"read {sum(model.ngram_counts)} n-grams in {time.perf_counter() - start:.1f} s")
    # Not read back and verified here: write_binary writes from a model the reader has
    # validated and records the file version as verified, as every writer of the format
    # does (reading the 116 MB PTB 5-gram back was a fifth of the command's CPU time);
    # `varorder lm verify` checks a file in full on demand.
    write_binary(model, output, max_arpa=True if max_arpa else None, trie=trie, prob_bits=prob_bits,
                 backoff_bits=backoff_bits)
    _say(f"wrote {output}")


@lm.command()
@click.argument("model_path", metavar="MODEL", type=click.Path(exists=True, dir_okay=False))
def verify(model_path):
    """Check a binary MODEL completely: every array's checksum and the tables' invariants
    (format 1: the key order, every hash slot's row and scores; format 2: the trie's
    pointers and word order, no NaN or +inf value). Exit status 0 and `ok` when it is
    sound, else an error naming the first problem. (Opening a model for scoring checks only
    its layout once this version of the file has passed the full check.)"""
    from varorder.lm.binary import is_binary_model, verify_binary

    if not is_binary_model(model_path):
        raise click.ClickException(f"{model_path}: not a varorder binary model (ARPA files are checked as they are read)")
    start = time.perf_counter()
    try:
        verify_binary(model_path)
    except ValueError as error:
        raise click.ClickException(str(error)) from None
    click.echo(f"ok: {model_path} verified in {time.perf_counter() - start:.2f} s")


@lm.command("next")
@click.argument("model_path", metavar="MODEL", type=click.Path(exists=True))
@click.argument("context", nargs=-1)
@click.option("-k", "--top", default=10, show_default=True, type=click.IntRange(1), help="How many words to print.")
@click.option("--bos/--no-bos", default=True, show_default=True, help="Start the context at <s>.")
@click.option("--minus-99", type=click.Choice(("zero", "literal")), default="zero", show_default=True, help=MINUS_99_HELP)
def next_word(model_path, context, top, bos, minus_99):
    """The distribution of the next word after CONTEXT (words): the TOP most probable
    words with their log10 p(word | context), and the total probability printed.

    MODEL may also be a suffix index (a directory from `varorder lm index`): then the
    words that follow CONTEXT in the corpus, with their counts and relative frequencies."""
    import numpy as np

    if os.path.isdir(model_path):
        _index_next(model_path, context, top, bos)
        return
    _ngram_model_only(model_path, "next")
    model = _load(model_path, minus_99)
    words = " ".join(context).split()
    log10probs = model.next_word_log10probs(words, bos=bos)
    best = np.argsort(-log10probs, kind="stable")[:top]
    for word_id in best:
        click.echo(f"{model.vocabulary.words[word_id]}\t{log10probs[word_id]:.6f}")
    _say(f"sum of p over the vocabulary = {float(np.sum(10.0 ** log10probs)):.6f}")


_INDEX_MEMORY_HELP = (
    "Build in bounded memory, holding about this much data (e.g. 2G, 500M; on top come ~200 MB for Python, NumPy "
    "and Numba, the vocabulary, and the cached pages of the token file): two passes over the text, the suffix "
    "array sorted in shards written to -T and merged. The index is the same bytes. Without it, everything is in "
    "memory (~25 bytes a token at the peak).")


@lm.command("index")
@click.argument("corpus", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False))
@click.option("-o", "--output", required=True, type=click.Path(file_okay=False),
              help="Directory to write the index to (created if needed).")
@click.option("--min-count", default=1, show_default=True, type=click.IntRange(1), help="Rarer words become <unk>.")
@click.option("-S", "--memory", "memory", callback=lambda ctx, param, value: _checked_memory(value, param),
              help=_INDEX_MEMORY_HELP)
@click.option("-T", "--temp-dir", type=click.Path(exists=True, file_okay=False, writable=True),
              help="Folder for the sorted shards of -S (default: inside OUTPUT).")
def index_corpus(corpus, output, min_count, memory, temp_dir):
    """Build a suffix-array index of CORPUS (text, one sentence per line, .gz too) in
    OUTPUT, for `lm count`, `lm next` and the unbounded-order models
    (varorder.lm.suffix_index)."""
    from varorder.lm.suffix_index import build_index

    start = time.perf_counter()
    index = build_index(list(corpus), output, min_count=min_count, memory=memory, temp_dir=temp_dir)
    sizes = index.nbytes
    _say(f"indexed {index.num_tokens} tokens ({index.num_documents} sentences, {len(index.vocabulary)} words) "
         f"in {time.perf_counter() - start:.1f} s: suffix array {sizes['sa'] / max(index.num_tokens, 1):.1f} "
         f"bytes/token beside {sizes['tokens'] / max(index.num_tokens, 1):.1f} of token ids")
    click.echo(output)


def _open_index(path: str):
    from varorder.lm.suffix_index import open_index

    try:
        return open_index(path)
    except ValueError as error:
        raise click.ClickException(str(error)) from None


@lm.command("count")
@click.argument("index_path", metavar="INDEX", type=click.Path(exists=True, file_okay=False))
@click.argument("ngram", nargs=-1)
def count_ngram(index_path, ngram):
    """How often NGRAM (words; none: every token) occurs in the corpus of INDEX."""
    click.echo(_open_index(index_path).count(" ".join(ngram).split()))


def _index_next(index_path, context, top, bos):
    import numpy as np

    index = _open_index(index_path)
    words = (["<s>"] if bos else []) + " ".join(context).split()
    tokens, counts = index.ntd(words)
    total = int(counts.sum())
    for j in np.argsort(-counts, kind="stable")[:top] if total else []:
        click.echo(f"{index.vocabulary.words[tokens[j]]}\t{counts[j]}\t{counts[j] / total:.6f}")
    _say(f"{total} continuations of {len(tokens)} distinct words")


@lm.command()
@click.argument("model_path", metavar="MODEL", type=click.Path(exists=True, dir_okay=False))
@click.argument("output", type=OutputFile())
def maxarpa(model_path, output):
    """Read MODEL (ARPA or binary) and write its MAX-ARPA table to OUTPUT.

    Each n-gram line gains two columns: the max log10 probability over all left
    extensions of its context (mf) and the max back-off (mbow), Carter et al. (2012) §2.3.
    """
    from varorder.lm.arpa import write_arpa

    _ngram_model_only(model_path, "maxarpa")
    model = _load(model_path)
    start = time.perf_counter()
    model.max_backoff()
    _say(f"max-backoff weights of {sum(model.ngram_counts)} n-grams in {time.perf_counter() - start:.1f} s")
    write_arpa(model, output, max_arpa=True)
    _say(f"wrote {output}")


@lm.command("constrain")
@click.argument("model_path", metavar="MODEL", type=click.Path(exists=True, dir_okay=False))
@click.option("--contains", "contains", multiple=True, metavar="'WORDS'",
              help="A phrase the sentence must contain (repeat for several).")
@click.option("--ordered", is_flag=True, help="The --contains phrases must appear in the order given.")
@click.option("--regex", metavar="PATTERN",
              help="Token-level regular expression the whole sentence must match: words, '.', ( ), |, * + ?.")
@click.option("--min-length", default=1, show_default=True, type=click.IntRange(0), help="Fewest words.")
@click.option("--max-length", default=10, show_default=True, type=click.IntRange(0), help="Most words.")
@click.option("-n", "--samples", default=0, show_default=True, type=click.IntRange(0),
              help="Exact samples to draw (0: print the most probable sentence only).")
@click.option("--seed", default=0, show_default=True, type=int)
def constrain(model_path, contains, ordered, regex, min_length, max_length, samples, seed):
    """Exact decoding and sampling from MODEL (an n-gram LM) conditioned on a constraint:
    the most probable sentence that satisfies it, or exact samples from p(x | constraint)
    (varorder.constrain: the LM's automaton times the constraint's DFA on the lattice
    engine). Prints each sentence with its log10 p under the LM; the constraint's
    probability goes to stderr."""
    import math

    from varorder.constrain import ConstrainedLM

    _ngram_model_only(model_path, "constrain")
    model = _load(model_path)
    if min_length > max_length:
        raise click.BadParameter(f"--min-length {min_length} exceeds --max-length {max_length}")
    constrained = ConstrainedLM.from_spec(model, contains=contains, ordered=ordered, regex=regex,
                                          min_length=min_length, max_length=max_length)
    p_constraint = f"p(constraint) = {math.exp(constrained.log_probability):.6g}"
    if samples == 0:
        words, logp = constrained.decode()  # on the product lattice (sampling needs none)
        _say(f"{p_constraint} (product lattice: {constrained.num_nodes} nodes, {constrained.num_arcs} arcs)")
        click.echo(f"{' '.join(words)}\t{logp / math.log(10):.6f}")
        return
    _say(p_constraint)
    for words in constrained.sample(samples, seed=seed):
        click.echo(f"{' '.join(words)}\t{model.score_sentence(words):.6f}")


@lm.command()
@click.argument("models", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False))
@click.option("-o", "--output", type=OutputFile(),
              help="Write the static mixture (one back-off model, SRILM's -mix-lm -write-lm): ARPA, or binary with "
                   "--binary.")
@click.option("--lambda", "weights", metavar="'L1 L2 ...'",
              callback=lambda ctx, param, value: _checked_numbers(value, float, param),
              help="Mixture weights, one per model (or one fewer: the last model takes the rest, as SRILM's -lambda "
                   "for two models); equal when omitted. With --tune, the starting point of EM.")
@click.option("--tune", type=click.Path(exists=True, dir_okay=False),
              help="Held-out text (one sentence per line): choose the weights by EM on it (SRILM's compute-best-mix).")
@click.option("--eval", "evaluate", type=click.Path(exists=True, dir_okay=False),
              help="Text to report perplexities on (default: the --tune text).")
@click.option("--binary", is_flag=True, help="Write the binary format instead of ARPA.")
def mix(models, output, weights, tune, evaluate, binary):
    """Interpolate two or more MODELS linearly: p(w | h) = sum of weight_i p_i(w | h).

    Prints the weights, and with --tune or --eval the perplexity of the dynamic mixture
    (exact, at query time) beside that of the static model written with -o (the union of
    the n-grams with their mixed probabilities and recomputed back-off weights: SRILM's
    approximation), and of each model.
    """
    from varorder.lm.mix import mix_models

    if len(models) < 2:
        raise click.UsageError("mixing needs at least two models")
    if not (output or tune or evaluate):
        raise click.UsageError("nothing to do: give -o to write the mixture, or --tune/--eval to measure it")
    for path in models:
        _ngram_model_only(path, "mix")
    start = time.perf_counter()
    try:
        result = mix_models(models, weights=weights, tune=tune, evaluate=evaluate, output=output, binary=binary)
    except ValueError as error:
        raise click.ClickException(str(error)) from None
    click.echo("weights\t" + " ".join(f"{w:.6f}" for w in result.weights))
    if result.history:
        _say(f"EM: {len(result.history) - 1} iterations, held-out log10 likelihood {result.history[0]:.4f} -> "
             f"{result.history[-1]:.4f}")
    if result.dynamic_perplexity is not None:
        click.echo(f"perplexity dynamic mixture\t{result.dynamic_perplexity:.4f}")
        click.echo(f"perplexity static mixture\t{result.static_perplexity:.4f}")
        for path, perplexity in zip(models, result.component_perplexities):
            click.echo(f"perplexity {path}\t{perplexity:.4f}")
    counts = " ".join(f"{m}-grams={n}" for m, n in enumerate(result.model.ngram_counts, start=1))
    _say(f"static mixture: {counts} in {time.perf_counter() - start:.1f} s")
    if output:
        _say(f"wrote {output}")


@lm.command()
@click.argument("model_path", metavar="MODEL", type=click.Path(exists=True, dir_okay=False))
@click.argument("output", type=OutputFile())
@click.option("--threshold", type=Real(0),
              help="Prune every n-gram whose removal raises the training-set perplexity by a relative amount "
                   "below this (SRILM's -prune; e.g. 1e-8).")
@click.option("--target-size", type=click.IntRange(1),
              help="Instead of --threshold: the smallest threshold leaving at most this many n-grams.")
@click.option("--min-order", default=2, show_default=True, type=click.IntRange(2),
              help="Prune only n-grams of this order and above (SRILM's -minprune); unigrams never.")
@click.option("--eval", "evaluate", type=click.Path(exists=True, dir_okay=False),
              help="Text to report the perplexity on before and after pruning.")
@click.option("--binary", is_flag=True, help="Write the binary format instead of ARPA.")
def prune(model_path, output, threshold, target_size, min_order, evaluate, binary):
    """Prune MODEL by relative entropy (Stolcke 1998, as SRILM's `ngram -prune`) and write
    it to OUTPUT, back-off weights recomputed."""
    from varorder.lm.prune import prune_model_file

    if (threshold is None) == (target_size is None):
        raise click.UsageError("give one of --threshold or --target-size")
    _ngram_model_only(model_path, "prune")
    start = time.perf_counter()
    try:
        report = prune_model_file(model_path, output, threshold=threshold, target_size=target_size,
                                  min_order=min_order, binary=binary, evaluate=evaluate)
    except ValueError as error:
        raise click.ClickException(str(error)) from None
    click.echo(f"threshold\t{report['threshold']:.6g}")
    for name in ("before", "after"):
        counts = " ".join(f"{m}-grams={n}" for m, n in enumerate(report[name], start=1))
        click.echo(f"{name}\t{counts}\ttotal={sum(report[name])}")
    if evaluate:
        click.echo(f"perplexity before\t{report['perplexity_before']:.4f}")
        click.echo(f"perplexity after\t{report['perplexity_after']:.4f}")
    _say(f"wrote {output} in {time.perf_counter() - start:.1f} s")


COMMAND = lm
