"""Helpers for the system pages (``docs/examples/sys_*.py``), which sphinx-gallery runs at
build time: run a ``varorder`` command line in-process and show what it printed, and show
the measured results of an area from ``benchmarks/results``.
"""

from __future__ import annotations

import html
import os
import shlex
import tempfile
from pathlib import Path

import summarize_results


def workdir(name: str) -> Path:
    """A fresh folder for one page's files (outside the repository)."""
    return Path(tempfile.mkdtemp(prefix=f"varorder-docs-{name}-"))


def run_cli(command_line: str, cwd: Path, max_lines: int = 25) -> str:
    """Run ``varorder ...`` (the click command, in this process) in ``cwd`` and print its output.

    A non-zero exit status raises, so a command that stops working fails the docs build.
    """
    from click.testing import CliRunner

    from varorder.cli.main import main

    args = shlex.split(command_line)
    if args[0] != "varorder":
        raise ValueError(f"expected a varorder command line, got {command_line!r}")
    try:
        runner = CliRunner(mix_stderr=False)  # click < 8.2
    except TypeError:
        runner = CliRunner()  # click >= 8.2 keeps stderr apart by itself
    previous = os.getcwd()
    os.chdir(cwd)
    try:
        result = runner.invoke(main, args[1:], prog_name="varorder", catch_exceptions=False)
    finally:
        os.chdir(previous)
    # stdout, then the stderr lines a user reads (summaries, warnings), not progress bars
    notes = [line for line in result.stderr.replace("\r", "\n").splitlines()
             if line.strip() and "it/s" not in line and "s/it" not in line and "%|" not in line]
    if result.exit_code != 0:
        raise RuntimeError(f"{command_line!r} exited with {result.exit_code}:\n{result.stdout}\n" + "\n".join(notes))
    output = result.stdout + "".join(f"{line}\n" for line in notes)
    lines = output.rstrip("\n").splitlines()
    if len(lines) > max_lines:
        lines = lines[:max_lines] + [f"... ({len(lines) - max_lines} more lines)"]
    text = "\n".join(lines)
    print(f"$ {command_line}" + (f"\n{text}" if text else ""))
    return output


class ResultsTable:
    """The rows of one area's results files; shown as an HTML table on the page."""

    def __init__(self, area: str, systems: tuple[str, ...] = ()):
        self.rows = []
        for path, doc in summarize_results.load_results():
            if doc["area"] != area:
                continue
            for row in doc["rows"]:
                if not systems or any(s in row["system"] for s in systems):
                    self.rows.append((path, doc, row))
        if not self.rows:
            raise ValueError(f"no results rows for area {area!r}")

    def __repr__(self) -> str:
        return "\n".join(f"{r['system']} | {r['task']} — {summarize_results._metric(r)} | {summarize_results._fmt(r['varorder'])} | "
                         f"{summarize_results._fmt(r['reference'])} ({r['reference_name']}) | "
                         f"{summarize_results._ratio(r)} | {d['date']}" for _, d, r in self.rows)

    def _repr_html_(self) -> str:
        esc = html.escape
        head = "".join(f"<th>{h}</th>" for h in ("system", "task", "varorder", "peer or paper", "ratio", "date"))
        body = []
        for path, doc, row in self.rows:
            task = f"{row['task']} — {summarize_results._metric(row)}" + (f" ({row['note']})" if row.get("note") else "")
            cells = (row["system"], task, summarize_results._fmt(row["varorder"]),
                     f"{summarize_results._fmt(row['reference'])} ({row['reference_name']})",
                     summarize_results._ratio(row), f"{doc['date']} ({path.name})")
            body.append("<tr>" + "".join(f"<td>{esc(str(c))}</td>" for c in cells) + "</tr>")
        return (f"<table class='docutils align-default'><thead><tr>{head}</tr></thead>"
                f"<tbody>{''.join(body)}</tbody></table>")


def results(area: str, *systems: str) -> ResultsTable:
    """The measured results of ``area`` (rows whose system names contain one of ``systems``)."""
    return ResultsTable(area, systems)
