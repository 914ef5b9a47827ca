"""Parameter types shared by the subcommands, so bad values are refused before any work.

``OutputFile``: a file the command will write — its folder must exist and be writable when
the command starts, not after an hour of training. ``OutputFolder``: a folder the command
fills — an existing writable folder, or a new one whose parent is writable. ``Real``: a finite float in a range
(click's FloatRange lets NaN through, since every comparison with NaN is false). ``DaskAddress``: a
scheduler address where a Dask scheduler answers (never empty).
"""

from __future__ import annotations

import functools
import math
import os

import click

__all__ = ["DaskAddress", "OutputFile", "OutputFolder", "Real", "dask_client", "executor", "max_input_option",
           "MAX_INPUT_BYTES"]


class OutputFile(click.Path):
    """A path to write (``-`` for stdout where ``allow_dash``); its folder must be writable."""

    name = "output file"

    def __init__(self, allow_dash: bool = False):
        super().__init__(dir_okay=False, allow_dash=allow_dash)

    def convert(self, value, param, ctx):
        value = super().convert(value, param, ctx)
        if self.allow_dash and value == "-":
            return value
        folder = os.path.dirname(os.path.abspath(os.fspath(value)))
        if not os.path.isdir(folder):
            self.fail(f"cannot write {value!r}: folder {folder!r} does not exist", param, ctx)
        if not os.access(folder, os.W_OK | os.X_OK):
            self.fail(f"cannot write {value!r}: folder {folder!r} is not writable", param, ctx)
        return value


class OutputFolder(click.Path):
    """A folder to write into: it exists and is writable, or it can be created (its nearest
    existing ancestor is a writable folder)."""

    name = "output folder"

    def __init__(self):
        super().__init__(file_okay=False)

    def convert(self, value, param, ctx):
        value = super().convert(value, param, ctx)
        target = os.path.abspath(os.fspath(value))
        existing = target
        while not os.path.exists(existing):
            existing = os.path.dirname(existing)
        if not os.path.isdir(existing):
            self.fail(f"cannot write into {value!r}: {existing!r} is a file, not a folder", param, ctx)
        if not os.access(existing, os.W_OK | os.X_OK):
            self.fail(f"cannot write into {value!r}: folder {existing!r} is not writable", param, ctx)
        return value


class Real(click.FloatRange):
    """A finite float within [min, max] (bounds optional, open with min_open / max_open)."""

    def convert(self, value, param, ctx):
        number = super().convert(value, param, ctx)
        if not math.isfinite(number):  # NaN passes every range check; ±inf is no setting either
            self.fail(f"{value!r} is not a finite number", param, ctx)
        return number


class DaskAddress(click.ParamType):
    """A Dask scheduler address, checked as the option is parsed (before any input is read): an
    empty or blank one is a usage error (it would silently mean "no scheduler"), and so is one where
    no Dask scheduler answers a bounded handshake (:func:`varorder.parallel.probe_dask_scheduler`)."""

    name = "address"

    def __init__(self, timeout: float = 10.0):
        self.timeout = timeout

    def convert(self, value, param, ctx):
        from varorder.parallel import probe_dask_scheduler

        if not isinstance(value, str) or not value.strip():
            self.fail(f"{value!r} is not a Dask scheduler address (expected e.g. tcp://host:8786)", param, ctx)
        try:  # before any work: the option is processed before the inputs are read
            probe_dask_scheduler(value.strip(), self.timeout)
        except ValueError as exc:
            self.fail(str(exc), param, ctx)
        return value.strip()


# the default limit of a command that holds its whole input: some GB of memory once parsed
MAX_INPUT_BYTES = 1 << 30


def max_input_option(command):
    """``--max-input-bytes`` for a command that holds its whole input in memory: every file it reads
    may hold at most that much text (:func:`varorder.io.input_limit`), refused with one line
    naming the file and its size, before it is read where the size is known, never a MemoryError.
    Put it right under the ``@...command`` decorator, so that it covers the whole command."""

    @functools.wraps(command)
    def limited(*args, max_input_bytes, **kwargs):
        from varorder.io import input_limit

        with input_limit(max_input_bytes):
            return command(*args, **kwargs)

    return click.option("--max-input-bytes", type=click.IntRange(min=1), default=MAX_INPUT_BYTES, show_default=True,
                        help="refuse an input file of more text than this (the command holds its whole input in "
                             "memory)")(limited)


def dask_client(address: str, timeout: float = 10.0):
    """A ``distributed.Client`` of the scheduler at ``address``
    (:func:`varorder.agree.connect_dask`); an unreachable or malformed address is a one-line
    error after ``timeout`` seconds, never a traceback."""
    return executor(1, address, timeout)


def executor(workers: int, dask_address: str | None, timeout: float = 10.0):
    """:func:`varorder.agree.make_executor` with its errors as one-line CLI errors."""
    from varorder.agree.product_em import make_executor

    try:
        return make_executor(workers, dask_address, timeout)
    except ImportError as exc:
        raise click.UsageError(str(exc)) from None
    except ValueError as exc:
        raise click.ClickException(str(exc)) from None


def refuse_inapplicable(ctx: click.Context, rules) -> None:
    """A usage error, before any work, for an option given on the command line (not left at
    its default) that this invocation would ignore — a flag of another model family, mode or
    method, which would otherwise be dropped silently.

    ``rules``: (parameter name, whether it applies here, where it applies — e.g. "--model crf").
    """
    from click.core import ParameterSource

    params = {p.name: p for p in ctx.command.params}
    for name, applies, where in rules:
        if applies or ctx.get_parameter_source(name) in (None, ParameterSource.DEFAULT):
            continue
        raise click.UsageError(f"{'/'.join(params[name].opts)} applies to {where} only", ctx=ctx)
