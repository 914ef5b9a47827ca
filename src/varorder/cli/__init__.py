"""Command-line interface. Each module here that defines ``COMMAND`` (a click
command or group) is registered as a ``varorder`` subcommand by :mod:`varorder.cli.main`.

The command line is the API here: ``varorder --help``, or ``varorder.cli.main.main`` (a
click group) to call it from Python.
"""

__all__: list[str] = []
