"""The ``varorder-results`` directive of the system pages (``docs/examples/sys_*.py``).

A system page is a plain script that runs as downloaded (public API, shell lines run through
``bash``); its "Measured" section is text holding ::

    .. varorder-results:: Sequence tagging
       :systems: CRF; SampleRank

which the docs build renders as the latest figure of each measurement of that area (rows whose
system names contain one of ``systems``), read from ``benchmarks/results`` by
``summarize_results`` — the same rows, with the same history left out, as the summary page.
"""

from __future__ import annotations

import html

from docutils import nodes
from docutils.parsers.rst import Directive, directives

import summarize_results as summary


class ResultsTable:
    """The latest user-facing rows of one area (optionally of some systems), as an HTML table."""

    def __init__(self, area: str, systems: tuple[str, ...] = ()):
        results = summary.load_results()
        rows = summary.latest_rows(results).get(area, [])
        self.rows = [item for item in rows if not systems or any(s in item[2]["system"] for s in systems)]
        if not self.rows:
            raise ValueError(f"no results rows for area {area!r} (systems {systems!r})")

    def _repr_html_(self) -> str:
        esc = html.escape
        head = "".join(f"<th>{h}</th>" for h in ("system", "task", "varorder", "peer or paper", "ratio", "measured"))
        body = []
        for path, doc, row in self.rows:
            note = summary.scrub(row.get("note") or "")
            task = f"{summary.scrub(row['task'])} — {summary._metric(row)}" + (f" ({note})" if note else "")
            cells = (summary.scrub(row["system"]), task, summary._fmt(row["varorder"]),
                     f"{summary._fmt(row['reference'])} ({summary.scrub(row['reference_name'])})",
                     summary._ratio(row), f"{summary._conditions(doc)} ({path.name})")
            body.append("<tr>" + "".join(f"<td>{esc(str(c))}</td>" for c in cells) + "</tr>")
        return (f"<table class='docutils align-default'><thead><tr>{head}</tr></thead>"
                f"<tbody>{''.join(body)}</tbody></table>")


class ResultsDirective(Directive):
    """``.. varorder-results:: AREA`` with an optional ``:systems: A; B``."""

    required_arguments = 1
    final_argument_whitespace = True
    option_spec = {"systems": directives.unchanged}

    def run(self):
        systems = tuple(s.strip() for s in self.options.get("systems", "").split(";") if s.strip())
        try:
            table = ResultsTable(self.arguments[0], systems)
        except ValueError as exc:
            raise self.error(str(exc)) from None
        return [nodes.raw("", table._repr_html_(), format="html")]


def setup(app) -> None:
    app.add_directive("varorder-results", ResultsDirective)
