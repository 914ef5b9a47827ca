"""Command-line interface. Each module here that defines ``COMMAND`` (a click
command or group) is registered as a ``varorder`` subcommand by :mod:`varorder.cli.main`."""

from varorder._lazy import attach

__getattr__, __dir__, __all__ = attach(__name__, {"main": "varorder.cli.main"})
