"""Render the one-page benchmark summary from ``benchmarks/results/*.json``.

Every row of the summary page comes from a results file under version control; nothing in
the page is typed by hand.  The docs build (``docs/conf.py``) runs :func:`write_summary`;
the command line does the same for a quick look::

    python docs/tools/summarize_results.py                  # writes docs/_generated/summary.md
    python docs/tools/summarize_results.py --check          # validate every file, write nothing

A results file holds one measured result set, in exactly this schema (schema 1)::

    {"schema": 1, "area": "n-gram LMs", "title": "one line", "issue": 32,
     "command": "exact command line that produced it", "date": "2026-11-27",
     "machine": {"cpu": "model name", "cores": 2, "load": "1-min load avg during the run"},
     "rows": [{"system": "...", "task": "...", "metric": "CPU s per process",
               "varorder": 0.21, "reference": 0.012, "reference_name": "KenLM query",
               "ratio": 17.5, "better": "lower", "note": "..."}]}

``reference`` is a peer tool's figure or the paper's (``null`` where the source gives only
the ratio or no peer exists); ``ratio`` is varorder / reference (``null`` when there is
no reference); ``issue`` may be ``null``; ``note`` may be omitted.  Any other key, a
missing key, a value of the wrong type, a date not in ``YYYY-MM-DD`` form, or a ratio
that disagrees with varorder / reference by more than rounding is an error naming the
file and the field (:class:`ResultsError`, a ``ValueError``).
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import math
import re
import sys
from collections import OrderedDict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RESULTS_DIR = ROOT / "benchmarks" / "results"
SUMMARY_PATH = ROOT / "docs" / "_generated" / "summary.md"

TOP_KEYS = ("schema", "area", "title", "issue", "command", "date", "machine", "rows")
# free-form supporting data (per-seed runs, counts) kept beside the summary rows; not rendered
TOP_OPTIONAL = ("details",)
MACHINE_KEYS = ("cpu", "cores", "load")
ROW_KEYS = ("system", "task", "metric", "varorder", "reference", "reference_name", "ratio", "better")
ROW_OPTIONAL = ("note",)
# areas in this order on the page (peer-tool comparisons first), any other area after them
AREA_ORDER = ("Dense-chain engine", "Sequence tagging", "n-gram LMs", "Word alignment", "Reified context models",
              "Exact high-order HMMs", "Grammar induction", "Decipherment", "Latent-alignment transduction",
              "Graphical models over strings")
# a ratio may differ from varorder / reference by this much (figures are rounded in the sources)
RATIO_RTOL = 0.03


class ResultsError(ValueError):
    """A results file that does not follow schema 1."""


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _iso_date(value) -> bool:
    if not isinstance(value, str) or len(value) != 10:
        return False
    try:
        _dt.date.fromisoformat(value)
    except ValueError:
        return False
    return True


def _fail(path: Path, where: str, message: str):
    raise ResultsError(f"{path}: {where}: {message}")


def _check_keys(path, where, obj, required, optional=()):
    if not isinstance(obj, dict):
        _fail(path, where, f"expected a JSON object, got {type(obj).__name__}")
    missing = [k for k in required if k not in obj]
    if missing:
        _fail(path, where, f"missing key(s) {', '.join(missing)}")
    extra = sorted(set(obj) - set(required) - set(optional))
    if extra:
        _fail(path, where, f"unknown key(s) {', '.join(extra)} (schema 1 has {', '.join(required + tuple(optional))})")


def _text(path, where, value):
    if not isinstance(value, str) or not value.strip():
        _fail(path, where, f"expected a non-empty string, got {value!r}")


def validate(doc, path: Path) -> dict:
    """Check one parsed results file against schema 1; return it unchanged."""
    _check_keys(path, "top level", doc, TOP_KEYS, TOP_OPTIONAL)
    if "details" in doc and not isinstance(doc["details"], dict):
        _fail(path, "details", f"expected an object, got {type(doc['details']).__name__}")
    if doc["schema"] != 1 or isinstance(doc["schema"], bool):
        _fail(path, "schema", f"expected 1, got {doc['schema']!r}")
    for key in ("area", "title", "command"):
        _text(path, key, doc[key])
    issue = doc["issue"]
    if issue is not None and (not isinstance(issue, int) or isinstance(issue, bool) or issue < 1):
        _fail(path, "issue", f"expected a positive issue number or null, got {issue!r}")
    if not _iso_date(doc["date"]):
        _fail(path, "date", f"expected YYYY-MM-DD, got {doc['date']!r}")
    machine = doc["machine"]
    _check_keys(path, "machine", machine, MACHINE_KEYS)
    _text(path, "machine.cpu", machine["cpu"])
    if not isinstance(machine["cores"], int) or isinstance(machine["cores"], bool) or machine["cores"] < 1:
        _fail(path, "machine.cores", f"expected a positive integer, got {machine['cores']!r}")
    if not (_number(machine["load"]) or (isinstance(machine["load"], str) and machine["load"].strip())):
        _fail(path, "machine.load", f"expected a number or a non-empty string, got {machine['load']!r}")
    rows = doc["rows"]
    if not isinstance(rows, list) or not rows:
        _fail(path, "rows", "expected a non-empty list of rows")
    for i, row in enumerate(rows):
        where = f"rows[{i}]"
        _check_keys(path, where, row, ROW_KEYS, ROW_OPTIONAL)
        for key in ("system", "task", "metric", "reference_name"):
            _text(path, f"{where}.{key}", row[key])
        if "note" in row and not isinstance(row["note"], str):
            _fail(path, f"{where}.note", f"expected a string, got {row['note']!r}")
        if not _number(row["varorder"]):
            _fail(path, f"{where}.varorder", f"expected a finite number, got {row['varorder']!r}")
        for key in ("reference", "ratio"):
            if row[key] is not None and not _number(row[key]):
                _fail(path, f"{where}.{key}", f"expected a finite number or null, got {row[key]!r}")
        if row["better"] not in ("lower", "higher"):
            _fail(path, f"{where}.better", f"expected 'lower' or 'higher', got {row['better']!r}")
        ref, ratio = row["reference"], row["ratio"]
        if ref is not None and ratio is not None and ref != 0:
            expected = row["varorder"] / ref
            if not math.isclose(ratio, expected, rel_tol=RATIO_RTOL, abs_tol=0.005):
                _fail(path, f"{where}.ratio", f"{ratio!r} is not varorder / reference = {expected:.4g}")
    return doc


def load_file(path: Path) -> dict:
    """Read and validate one results file (a ResultsError names the file on any defect)."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ResultsError(f"{path}: cannot read: {exc}") from None
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ResultsError(f"{path}: line {exc.lineno}, column {exc.colno}: not valid JSON: {exc.msg}") from None
    return validate(doc, path)


def load_results(directory: Path = RESULTS_DIR) -> list[tuple[Path, dict]]:
    """Every ``*.json`` under ``directory``, validated, in file-name order."""
    directory = Path(directory)
    paths = sorted(directory.glob("*.json"))
    if not paths:
        raise ResultsError(f"{directory}: no results files (*.json)")
    return [(p, load_file(p)) for p in paths]


def _fmt(value) -> str:
    if value is None:
        return "—"
    if isinstance(value, int) or float(value).is_integer() and abs(value) >= 1000:
        return f"{int(value):,}"
    return f"{value:.4g}" if abs(value) < 1000 else f"{value:,.1f}"


def _cell(text: str) -> str:
    """Markdown table cell: pipes escaped, newlines folded."""
    return " ".join(str(text).split()).replace("|", "\\|")


def _ratio(row) -> str:
    return "—" if row["ratio"] is None else f"{row['ratio']:.3g}×"


def _metric(row) -> str:
    return f"{row['metric']} ({row['better']} is better)"


# Rows that compare varorder with an earlier varorder (speed guards, A/B checks) are kept in the
# results files and the lab notebook; the user page shows comparisons with peers and papers.
_INTERNAL = re.compile(r"\bbefore\b|\bvarorder at\b|\bformer\b|\bs\d+'s\b|\bold default\b", re.I)
# what a user page never shows: machine paths, issue numbers, session and branch talk
FORBIDDEN_ON_USER_PAGES = re.compile(
    r"(?<![\w/.])/(?:work|tmp|home|root|usr/local|opt)/|#\d+\b|\bissue \d+|\bs\d\d\b|\bthis branch\b|"
    r"\bthis session\b|\bgit archive\b|\bbefore s\d+", re.I)
_HISTORY_CLAUSE = re.compile(r"#\d+|\bissue \d+|\bs\d\d\b|\bbranch\b|\bthis session\b|\bgit archive\b", re.I)

# The headline table: per peer, the questions its users ask first and the row that answers each
# (results file, and a test on the row). tests/test_docs_results.py checks every entry finds its row.
HEADLINE = (
    ("hmmlearn", "How fast are forward–backward and Viterbi?", "engine-chain-hmmlearn.json",
     lambda r: r["system"] == "chain.marginals" and "K=45" in r["task"]),
    ("CRFsuite", "Same accuracy with the same features?", "tagging-crf-crfsuite.json",
     lambda r: r["metric"].startswith("dev accuracy")),
    ("CRFsuite", "How fast does it train (one thread)?", "tagging-crf-crfsuite.json",
     lambda r: r["metric"] == "train wall s" and "1 Numba thread" in r["system"]),
    ("CRFsuite", "How fast does it tag?", "tagging-crf-crfsuite.json",
     lambda r: r["metric"] == "tagging tokens/s"),
    ("KenLM", "How fast does it score?", "lm-kenlm-score.json",
     lambda r: r["system"].startswith("score_sentences, binary")),
    ("KenLM", "How fast does it read an ARPA file?", "lm-kenlm-load.json",
     lambda r: r["system"] == "read_arpa, fresh process" and r["metric"] == "CPU s"),
    ("lmplz", "How much memory does estimation take?", "lm-lmplz-estimate.json",
     lambda r: r["metric"] == "peak RSS MB" and r["reference_name"] == "lmplz -o 5 -S 100M"),
    ("eflomal", "Same alignment quality?", "align-eflomal-aer.json",
     lambda r: r["metric"] == "AER" and r["task"].startswith("100k") and "paper" in r["system"]),
    ("eflomal", "How much CPU does a job take?", "align-eflomal-memory.json",
     lambda r: r["task"] == "Hansards 100k: whole job" and r["metric"].startswith("CPU s")),
)


def internal(row) -> bool:
    """A row that compares varorder with an earlier varorder, not with a peer or a paper."""
    return bool(_INTERNAL.search(row["system"]) or _INTERNAL.search(row["reference_name"]))


def scrub(text: str) -> str:
    """Text for a user page: clauses that tell the project's history dropped, paths cut to names."""
    clauses = [c for c in re.split(r";\s*", text) if not _HISTORY_CLAUSE.search(c)]
    text = "; ".join(c for c in clauses if c.strip())
    text = re.sub(r"\s*\(s\d+\)", "", text)
    return re.sub(r"(?<![\w.])/(?:[\w.-]+/)+([\w.-]+)", r"\1", text)


def _script(command: str) -> str:
    """The benchmark script (where it lives now) or CLI command a command line runs."""
    for word in command.split():
        if word.endswith(".py"):
            name = word.rsplit("/", 1)[-1]
            if not (ROOT / word).exists():
                found = sorted(ROOT.glob(f"benchmarks/*/{name}")) or sorted(ROOT.glob(f"benchmarks/{name}"))
                if found:
                    word = found[0].relative_to(ROOT).as_posix()
            return f"`{word}`" if not word.startswith("/") else f"`{name}`"
        if word == "varorder":
            return "`varorder`"
    return f"`{command.split()[0].rsplit('/', 1)[-1]}`"


def _conditions(doc) -> str:
    machine = doc["machine"]
    return f"{doc['date']}, {machine['cores']} cores, load {scrub(str(machine['load']))}"


def latest_rows(results):
    """The user-facing rows by area: internal rows left out, and of the rows that measure the same
    (system, task, metric) only the latest (by date, then file name)."""
    areas: "OrderedDict[str, OrderedDict]" = OrderedDict()
    first = {area.lower(): i for i, area in enumerate(AREA_ORDER)}
    ordered = sorted(results, key=lambda item: (first.get(item[1]["area"].lower(), len(first)),
                                                item[1]["area"].lower(), item[0].name))
    for path, doc in ordered:
        for row in doc["rows"]:
            if internal(row) or _HISTORY_CLAUSE.search(doc["area"]):
                continue
            key = (row["system"], row["task"], row["metric"], row["reference_name"])
            table = areas.setdefault(doc["area"], OrderedDict())
            held = table.get(key)
            if held is None or (doc["date"], path.name) >= (held[1]["date"], held[0].name):
                table[key] = (path, doc, row)
    return OrderedDict((area, list(table.values())) for area, table in areas.items() if table)


def headline(results):
    """(peer, question, path, doc, row) for every headline entry whose row is present."""
    by_name = {path.name: (path, doc) for path, doc in results}
    out = []
    for peer, question, name, test in HEADLINE:
        if name not in by_name:
            continue
        path, doc = by_name[name]
        rows = [r for r in doc["rows"] if test(r)]
        if rows:
            out.append((peer, question, path, doc, rows[0]))
    return out


def render(results: list[tuple[Path, dict]]) -> str:
    """The summary page (MyST Markdown): the headline table, then one table per area with the latest
    figure of each measurement, then the sources (results file, script, machine)."""
    out = [
        "# How varorder compares",
        "",
        "Every figure below is read from a results file in `benchmarks/results/` when the site is",
        "built; nothing here is typed by hand. The ratio is varorder ÷ the peer's (or the paper's)",
        "figure, and each metric says whether lower or higher is better. Timings come from a shared",
        "2-core machine; the conditions of each run are in its row, and the results file keeps the",
        "exact command line and every round.",
        "",
        "## At a glance",
        "",
        "| coming from | question | varorder | peer | ratio | measured |",
        "|---|---|---|---|---|---|",
    ]
    sources: "OrderedDict[str, tuple]" = OrderedDict()

    def source(path, doc) -> str:
        if path.name not in sources:
            sources[path.name] = (len(sources) + 1, path, doc)
        return f"[{sources[path.name][0]}]"

    for peer, question, path, doc, row in headline(results):
        out.append("| " + " | ".join(_cell(c) for c in (
            peer, f"{question} ({scrub(row['metric'])}, {row['better']} is better)",
            _fmt(row["varorder"]), f"{_fmt(row['reference'])} ({scrub(row['reference_name'])})", _ratio(row),
            f"{_conditions(doc)} {source(path, doc)}")) + " |")
    out.append("")
    for area, rows in latest_rows(results).items():
        out += [f"## {area}", ""]
        out.append("| system | task | varorder | peer or paper | ratio | measured |")
        out.append("|---|---|---|---|---|---|")
        for path, doc, row in rows:
            task = f"{scrub(row['task'])} — {scrub(_metric(row))}"
            note = scrub(row.get("note") or "")
            if note:
                task += f" ({note})"
            ref = f"{_fmt(row['reference'])} ({scrub(row['reference_name'])})"
            out.append("| " + " | ".join(_cell(c) for c in (
                scrub(row["system"]), task, _fmt(row["varorder"]), ref, _ratio(row),
                f"{_conditions(doc)} {source(path, doc)}")) + " |")
        out.append("")
    out += ["## Sources", ""]
    for number, path, doc in sources.values():
        out.append(f"{number}. `{path.name}`: {_cell(scrub(doc['title']))} — {_script(doc['command'])}, "
                   f"{_cell(scrub(doc['machine']['cpu']))}")
    out.append("")
    return "\n".join(out)


def write_summary(results_dir: Path = RESULTS_DIR, out: Path = SUMMARY_PATH) -> Path:
    """Validate every results file and write the summary page (only when its text changes)."""
    text = render(load_results(results_dir))
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    if not out.exists() or out.read_text(encoding="utf-8") != text:
        out.write_text(text, encoding="utf-8")
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=Path, default=RESULTS_DIR, help="folder of results files")
    parser.add_argument("-o", "--out", type=Path, default=SUMMARY_PATH, help="summary page to write")
    parser.add_argument("--check", action="store_true", help="validate the files only")
    args = parser.parse_args(argv)
    try:
        if args.check:
            results = load_results(args.results)
            print(f"{len(results)} results files, {sum(len(d['rows']) for _, d in results)} rows: OK")
        else:
            print(write_summary(args.results, args.out))
    except ResultsError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
