"""The ``varorder`` command: its subcommands, one per module of the :mod:`varorder.cli` package.

Subcommand modules import NumPy, Numba and their models, which costs seconds; so the
subcommands are listed in :data:`COMMANDS` (name → module and one-line help), which
``varorder --help`` prints without importing any of them, and a module is imported only
when its subcommand runs (``tests/test_cli.py`` checks the table against the imported
commands). A module of the package that defines ``COMMAND`` but is not in the table yet is
imported when the commands are listed, so a feature's CLI works before its row is added.
A module that fails to import (e.g. a missing optional dependency) is reported, not fatal.
"""

from __future__ import annotations

import importlib
import os
import sys
from pathlib import Path

import click

import varorder

_CLI_DIR = Path(__file__).resolve().parent

# subcommand name -> (module of varorder.cli defining it as COMMAND, the first paragraph of its help)
COMMANDS = {
    "align": ("align", "Word alignment: IBM Model 1 / HMM in both directions, trained to agree (Liang et al. 2008)."),
    "decipher": ("decipher", "Decipher a 1:1 word substitution by EM (exact / beam / RCMS E-steps)."),
    "decode": ("decode", "Exact argmax of p_lm x p_obs for each observation (Algorithm 1, optimisation)."),
    "demo": ("demo", "RCMS vs beam search on OCR (default), or the engine on a toy HMM (--engine)."),
    "hmm": ("hmm", "Hidden Markov / semi-Markov models of time series (hmmlearn's models)."),
    "induce": ("induce", "Grammar induction: DMV, CCM, and their product trained by exact product EM."),
    "lm": ("lm", "n-gram language models: estimation, scoring, binary models, MAX-ARPA bounds, mixing, pruning."),
    "neg": ("neg", "Named-entity generation: choose each person reference's expression (Bouchard 2010)."),
    "ocr": ("ocr", "Word recognition on the OCR letters data with a first-order pixel CRF."),
    "sample": ("sample", "Exact samples of p_lm x p_obs for each observation (adaptive rejection sampling)."),
    "strings": ("strings", "Graphical models over strings: pruned BP, EP and penalized EP."),
    "tag": ("tag", "Train, apply and evaluate part-of-speech taggers on CoNLL-U files."),
    "transduce": ("transduce", "Phonemes → spelling through an unobserved alignment (RCMS, beam methods, "
                               "forced decoding)."),
}


def _module_names() -> list[str]:
    """The subcommand modules of the package (public modules other than this one)."""
    names = []
    for entry in sorted(os.listdir(_CLI_DIR)):
        stem, ext = os.path.splitext(entry)
        if ext == ".py" and stem != "main" and not stem.startswith("_"):
            names.append(stem)
    return names


class _LazyGroup(click.Group):
    """Lists subcommands from :data:`COMMANDS`; imports a module only to run its command."""

    def _unlisted(self) -> list[str]:
        listed = {module for module, _ in COMMANDS.values()}
        return [name for name in _module_names() if name not in listed]

    def _import(self, module_name):
        try:
            module = importlib.import_module(f"varorder.cli.{module_name}")
        except ImportError as exc:  # optional dependency missing: say so, keep the rest
            print(f"varorder: subcommand module {module_name!r} unavailable: {exc}", file=sys.stderr)
            return
        command = getattr(module, "COMMAND", None)
        if command is not None:
            self.add_command(command)

    def _import_unlisted(self):
        for module_name in self._unlisted():
            self._import(module_name)

    def list_commands(self, ctx):
        self._import_unlisted()
        return sorted(set(COMMANDS) | set(self.commands))

    def get_command(self, ctx, name):
        if name not in self.commands:
            if name in COMMANDS:
                self._import(COMMANDS[name][0])
            else:
                self._import_unlisted()
        return self.commands.get(name)

    def invoke(self, ctx):
        """Run the subcommand; a ValueError or OSError (bad input, unreadable or unwritable
        file, an estimator refusing a parameter) becomes a one-line error and exit status
        1, not a traceback. ``VARORDER_DEBUG=1`` shows the traceback instead."""
        try:
            return super().invoke(ctx)
        except click.ClickException:
            _close_progress_bars()
            raise
        except BrokenPipeError:
            # the reader of stdout went away (`| head -1`): no fault of the input or of any file,
            # so no message; click's standalone main exits 1 quietly and pacifies the final flush
            _close_progress_bars()
            raise
        except (ValueError, OSError) as exc:
            _close_progress_bars()
            if os.environ.get("VARORDER_DEBUG"):
                raise
            message = str(exc) or type(exc).__name__
            if isinstance(exc, OSError) and exc.filename and str(exc.filename) not in message:
                message = f"{exc.filename}: {message}"
            raise click.ClickException(message.replace("\n", " ")) from None

    def format_commands(self, ctx, formatter):
        rows = []
        for name in self.list_commands(ctx):
            if name in self.commands:
                rows.append((name, self.commands[name].get_short_help_str(formatter.width - 6 - len(name))))
            else:
                short = COMMANDS[name][1]
                limit = max(formatter.width - 6 - len(name), 45)
                rows.append((name, short if len(short) <= limit else short[: limit - 3].rsplit(" ", 1)[0] + "..."))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


def _set_threads(ctx, param, value):
    if value is None:
        return value
    from varorder.engine.threads import set_threads, sleep_idle_threads  # imports Numba: only when asked

    try:
        if str(value).strip().lower() != "auto":
            # a count starts Numba's OpenMP runtime now, which reads its wait policy once: the policy the
            # align commands set (sleep_idle_threads) must come first, so it holds for every command given one
            sleep_idle_threads()
        set_threads(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None
    return value


@click.group(cls=_LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(varorder.__version__, prog_name="varorder")
@click.option("--threads", default=None, metavar="N|auto", expose_value=False, callback=_set_threads,
              help="Engine threads: a count, or 'auto' (default; one thread for small batches or a busy "
                   "machine). Also VARORDER_THREADS.")
def main():
    """varorder: sequence models with adaptive context and exact inference."""
    _exit_cleanly_on_sigterm()
    _warnings_on_one_line()


def _warnings_on_one_line():
    """Library warnings (a cut long pair, a fallback discount) as ``warning: <message>`` on
    stderr, not Python's file:line and source listing (kept with VARORDER_DEBUG=1)."""
    if os.environ.get("VARORDER_DEBUG"):
        return
    import warnings

    def one_line(message, category, filename, lineno, line=None):
        _close_progress_bars()
        return f"warning: {message}\n"

    # formatwarning, not showwarning: catch_warnings(record=True) (pytest.warns) still records
    warnings.formatwarning = one_line


def _close_progress_bars():
    """End the line of any progress bar left open by a failing command, so that the error
    message starts a line of its own."""
    tqdm = sys.modules.get("tqdm")
    if tqdm is not None:
        for bar in list(getattr(tqdm.tqdm, "_instances", ())):
            bar.close()


def _exit_cleanly_on_sigterm():
    """Turn SIGTERM into SystemExit, so that atomic writers' cleanup (``finally`` /
    ``except BaseException``) removes their hidden temporary files, as Ctrl-C already does."""
    import signal

    def terminate(signum, frame):
        raise SystemExit(128 + signum)

    try:
        signal.signal(signal.SIGTERM, terminate)
    except ValueError:  # not the main thread (e.g. invoked from a test runner's worker)
        pass


if __name__ == "__main__":
    main()
