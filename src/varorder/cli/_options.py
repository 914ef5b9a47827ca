"""Parameter types shared by the subcommands, so bad values are refused before any work.

``OutputFile``: a file the command will write — its folder must exist and be writable when
the command starts, not after an hour of training. ``OutputFolder``: a folder the command
fills — an existing writable folder, or a new one whose parent is writable. ``Real``: a finite float in a range
(click's FloatRange lets NaN through, since every comparison with NaN is false).
"""

from __future__ import annotations

import math
import os

import click

__all__ = ["OutputFile", "OutputFolder", "Real", "dask_client", "executor"]


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
