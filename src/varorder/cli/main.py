"""The ``varorder`` command: discovers subcommands in the :mod:`varorder.cli` package.

Each module ``varorder/cli/<name>.py`` that defines ``COMMAND`` contributes one
subcommand, so features add their CLI without editing this file. A module that
fails to import (e.g. a missing optional dependency) is reported, not fatal.

Subcommand modules import NumPy, Numba and their models, which costs seconds; so
``varorder --help`` reads each module's source (its ``COMMAND`` assignment, the
decorated function's name and docstring) instead of importing it, and a module is
imported only when its subcommand runs.
"""

from __future__ import annotations

import ast
import importlib
import os
import sys
from pathlib import Path

import click

import varorder

_CLI_DIR = Path(__file__).resolve().parent
_CLICK_DECORATORS = ("command", "group")


def _decorator_name(decorator: ast.expr) -> str | None:
    """The explicit name in ``@click.command("x")`` / ``@click.group("x")``, or None."""
    if not isinstance(decorator, ast.Call):
        return None
    func = decorator.func
    if not (isinstance(func, ast.Attribute) and func.attr in _CLICK_DECORATORS):
        return None
    if decorator.args and isinstance(decorator.args[0], ast.Constant) and isinstance(decorator.args[0].value, str):
        return decorator.args[0].value
    for keyword in decorator.keywords:
        if keyword.arg == "name" and isinstance(keyword.value, ast.Constant):
            return keyword.value.value
    return None


def _is_click_command(function: ast.FunctionDef) -> bool:
    for decorator in function.decorator_list:
        target = decorator.func if isinstance(decorator, ast.Call) else decorator
        if isinstance(target, ast.Attribute) and target.attr in _CLICK_DECORATORS:
            return True
    return False


def scan_module(path: Path) -> tuple[str, str] | None:
    """(subcommand name, one-line help) of a CLI module, read from its source.

    None when the module defines no click command or group named ``COMMAND``
    (``COMMAND = f`` or ``def COMMAND``) whose name can be read statically; such
    a module is imported to find out.
    """
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    except (OSError, SyntaxError, UnicodeDecodeError):
        return None
    target = None
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == "COMMAND":
            target = "COMMAND"
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "COMMAND" for t in node.targets):
            if isinstance(node.value, ast.Name):
                target = node.value.id
    if target is None:
        return None
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == target and _is_click_command(node):
            name = None
            for decorator in node.decorator_list:
                name = name or _decorator_name(decorator)
            if name is None and node.name == "COMMAND":
                return None  # click would name it "command": import to learn the real name
            name = name or node.name.replace("_", "-")
            doc = ast.get_docstring(node) or ""
            first = doc.strip().split("\n\n")[0].replace("\n", " ").strip()
            return name, first
    return None


def _module_names() -> list[str]:
    names = []
    for entry in sorted(os.listdir(_CLI_DIR)):
        stem, ext = os.path.splitext(entry)
        if ext == ".py" and stem != "main" and not stem.startswith("_"):
            names.append(stem)
    return names


class _LazyGroup(click.Group):
    """Lists subcommands from their modules' source; imports a module only to run it."""

    def _scan(self):
        if getattr(self, "_scanned", None) is not None:
            return self._scanned
        self._scanned = {}  # command name -> (module name, short help)
        self._unscanned = []
        for module_name in _module_names():
            found = scan_module(_CLI_DIR / f"{module_name}.py")
            if found is None:
                self._unscanned.append(module_name)
            else:
                self._scanned[found[0]] = (module_name, found[1])
        return self._scanned

    def _import(self, module_name):
        try:
            module = importlib.import_module(f"varorder.cli.{module_name}")
        except ImportError as exc:  # optional dependency missing: say so, keep the rest
            print(f"varorder: subcommand module {module_name!r} unavailable: {exc}", file=sys.stderr)
            return
        command = getattr(module, "COMMAND", None)
        if command is not None:
            self.add_command(command)

    def _import_unscanned(self):
        self._scan()
        while self._unscanned:
            self._import(self._unscanned.pop())

    def list_commands(self, ctx):
        self._import_unscanned()
        return sorted(set(self._scan()) | set(self.commands))

    def get_command(self, ctx, name):
        if name not in self.commands and getattr(self, "_scanned", None) is None and name in _module_names():
            # The usual case, a command named as its module: read that one source, not all
            # of them (parsing every module took 20 ms of each command's start-up).
            found = scan_module(_CLI_DIR / f"{name}.py")
            if found is not None and found[0] == name:
                self._import(name)
        if name not in self.commands:
            scanned = self._scan()
            if name in scanned:
                self._import(scanned[name][0])
            else:
                self._import_unscanned()
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
        scanned = self._scan()
        self._import_unscanned()
        rows = []
        for name in self.list_commands(ctx):
            if name in self.commands:
                rows.append((name, self.commands[name].get_short_help_str(formatter.width - 6 - len(name))))
            else:
                short = scanned[name][1]
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
