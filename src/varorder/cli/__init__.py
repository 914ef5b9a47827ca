"""Command-line interface. Each module here that defines ``COMMAND`` (a click
command or group) is registered as a ``varorder`` subcommand by :mod:`varorder.cli.main`."""
