"""The ``varorder`` command: discovers subcommands in the :mod:`varorder.cli` package.

Each module ``varorder/cli/<name>.py`` that defines ``COMMAND`` contributes one
subcommand, so features add their CLI without editing this file. A module that
fails to import (e.g. a missing optional dependency) is reported, not fatal.
"""

from __future__ import annotations

import importlib
import importlib.util
import pkgutil
import sys

import click

import varorder
import varorder.cli as _cli_pkg


class _LazyGroup(click.Group):
    def _discover(self):
        if getattr(self, "_discovered", False):
            return
        self._discovered = True
        for info in pkgutil.iter_modules(_cli_pkg.__path__):
            if info.name in ("main",) or info.name.startswith("_"):
                continue
            try:
                module = importlib.import_module(f"varorder.cli.{info.name}")
            except ImportError as exc:  # optional dependency missing: say so, keep the rest
                print(f"varorder: subcommand module {info.name!r} unavailable: {exc}", file=sys.stderr)
                continue
            command = getattr(module, "COMMAND", None)
            if command is not None:
                self.add_command(command)

    def list_commands(self, ctx):
        self._discover()
        return super().list_commands(ctx)

    def get_command(self, ctx, name):
        # A subcommand usually lives in the module of its name: import just that one, so
        # ``varorder lm score`` does not pay for every other subcommand's imports.
        if not getattr(self, "_discovered", False) and name.isidentifier() and not name.startswith("_") \
                and name != "main" and importlib.util.find_spec(f"varorder.cli.{name}") is not None:
            try:
                command = getattr(importlib.import_module(f"varorder.cli.{name}"), "COMMAND", None)
            except ImportError:
                command = None  # discovery below reports it
            if command is not None and command.name == name:
                return command
        self._discover()
        return super().get_command(ctx, name)


@click.group(cls=_LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(varorder.__version__, prog_name="varorder")
def main():
    """varorder: sequence models with adaptive context and exact inference."""


if __name__ == "__main__":
    main()
