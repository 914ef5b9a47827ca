"""The benchmark results files and the summary page rendered from them (docs/tools/summarize_results.py)."""

import copy
import importlib.util
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _load_tool():
    spec = importlib.util.spec_from_file_location("summarize_results", ROOT / "docs" / "tools" / "summarize_results.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


tool = _load_tool()

GOOD = {
    "schema": 1, "area": "n-gram LMs", "title": "one line", "issue": 32,
    "command": "python benchmarks/lm.py --sections score", "date": "2026-11-27",
    "machine": {"cpu": "AMD EPYC", "cores": 2, "load": "1.4"},
    "rows": [{"system": "varorder lm score", "task": "one sentence", "metric": "CPU s",
              "varorder": 0.21, "reference": 0.012, "reference_name": "KenLM query",
              "ratio": 17.5, "better": "lower", "note": "paper protocol"}],
}


def _write(tmp_path, doc, name="x.json"):
    path = tmp_path / name
    path.write_text(json.dumps(doc) if not isinstance(doc, str) else doc)
    return path


def test_every_committed_results_file_follows_the_schema():
    results = tool.load_results()
    assert results, "benchmarks/results/ holds no results file"
    page = tool.render(results)
    shown = tool.latest_rows(results)
    # one table row per user-facing row, every area with such rows a section
    table_rows = [line for line in page.splitlines()
                  if line.startswith("| ") and not line.startswith(("| system", "| coming from"))]
    assert len(table_rows) == sum(len(rows) for rows in shown.values()) + len(tool.headline(results))
    for area in shown:
        assert f"## {area}" in page


def test_every_headline_entry_finds_its_row():
    results = tool.load_results()
    found = {(peer, question) for peer, question, *_ in tool.headline(results)}
    missing = [(peer, question, name) for peer, question, name, _ in tool.HEADLINE if (peer, question) not in found]
    assert not missing, f"headline entries whose results row is gone: {missing}"
    page = tool.render(results)
    assert page.index("## At a glance") < min(page.index(f"## {area}") for area in tool.latest_rows(results))


def test_the_summary_page_shows_no_machine_paths_issue_numbers_or_history():
    page = tool.render(tool.load_results())
    bad = [line[:120] for line in page.splitlines() if tool.FORBIDDEN_ON_USER_PAGES.search(line)]
    assert not bad, bad


def test_user_pages_show_no_machine_paths_issue_numbers_or_history():
    docs = ROOT / "docs"
    pages = sorted(docs.glob("*.md")) + sorted((docs / "examples").glob("*.py")) + [docs / "ARCHITECTURE.md"]
    bad = [f"{p.relative_to(ROOT)}:{i}: {line.strip()[:100]}"
           for p in pages for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
           if tool.FORBIDDEN_ON_USER_PAGES.search(line)]
    assert not bad, bad


def test_the_forbidden_pattern_catches_what_it_should():
    for text in ("/work/shared/data/ptb", "see issue 32", "fixed in #34", "before this branch", "s66 ran it",
                 "git archive f1eedc9^"):
        assert tool.FORBIDDEN_ON_USER_PAGES.search(text), text
    for text in ("../shared/data/ptb", "benchmarks/results/x.json", "K=45, L=25", "CPU s", "c1 = 0.1"):
        assert not tool.FORBIDDEN_ON_USER_PAGES.search(text), text


def test_no_measurement_appears_twice_and_the_latest_wins(tmp_path):
    old = copy.deepcopy(GOOD)
    new = copy.deepcopy(GOOD)
    new["date"] = "2026-11-30"
    new["rows"][0]["varorder"], new["rows"][0]["ratio"] = 0.12, 10.0
    guard = copy.deepcopy(GOOD)
    guard["rows"][0]["reference_name"] = "varorder before the change (same process)"
    guard["rows"][0]["system"] = "varorder lm score (guard)"
    for name, doc in (("a.json", new), ("b.json", old), ("c.json", guard)):
        _write(tmp_path, doc, name)
    results = tool.load_results(tmp_path)
    shown = tool.latest_rows(results)
    rows = [row for rows in shown.values() for _, _, row in rows]
    assert len(rows) == 1 and rows[0]["varorder"] == 0.12
    page = tool.render(results)
    assert "0.12" in page and "guard" not in page
    keys = [(a, r["system"], r["task"], r["metric"], r["reference_name"]) for a, rs in shown.items() for _, _, r in rs]
    assert len(keys) == len(set(keys))


def test_scrub_drops_history_clauses_and_cuts_paths():
    assert tool.scrub("target <= 2x; before this branch 170.7 MB") == "target <= 2x"
    assert tool.scrub("paper's pair; issue #15 run") == "paper's pair"
    assert tool.scrub("read /tmp/peers/bin/lmplz output") == "read lmplz output"


def test_every_committed_command_lexes_as_shell():
    """The summary page shows each command in a bash block, and the docs build runs with -W: a
    command that the bash lexer cannot read (an unpaired quote in a prose aside) fails the build."""
    lexers = pytest.importorskip("pygments.lexers")
    from pygments.token import Error

    for path, doc in tool.load_results():
        bad = [text for token, text in lexers.BashLexer().get_tokens(doc["command"]) if token is Error]
        assert not bad, f"{path}: the command does not lex as shell at {bad[:3]}"


def test_a_good_file_renders_its_figures(tmp_path):
    _write(tmp_path, GOOD)
    page = tool.render(tool.load_results(tmp_path))
    row = next(line for line in page.splitlines() if line.startswith("| varorder lm score"))
    assert "0.21" in row and "0.012 (KenLM query)" in row and "17.5×" in row and "2026-11-27" in row
    # the script, where it lives now, in the sources list the row points to
    sources = page[page.index("## Sources"):]
    assert "[1]" in row and "1. `x.json`: one line — `benchmarks/peers/lm.py`, AMD EPYC" in sources


@pytest.mark.parametrize("mutate, field", [
    (lambda d: d.pop("command"), "missing key(s) command"),
    (lambda d: d.update(extra=1), "unknown key(s) extra"),
    (lambda d: d.update(schema=2), "schema"),
    (lambda d: d.update(date="27 Nov 2026"), "date"),
    (lambda d: d.update(issue="32"), "issue"),
    (lambda d: d["machine"].update(cores=0), "machine.cores"),
    (lambda d: d["machine"].pop("load"), "machine: missing key(s) load"),
    (lambda d: d.update(rows=[]), "rows"),
    (lambda d: d["rows"][0].update(varorder="fast"), "rows[0].varorder"),
    (lambda d: d["rows"][0].update(varorder=float("nan")), "rows[0].varorder"),
    (lambda d: d["rows"][0].update(reference="1"), "rows[0].reference"),
    (lambda d: d["rows"][0].update(better="smaller"), "rows[0].better"),
    (lambda d: d["rows"][0].update(ratio=2.0), "rows[0].ratio: 2.0 is not varorder / reference"),
    (lambda d: d["rows"][0].pop("reference_name"), "rows[0]: missing key(s) reference_name"),
    (lambda d: d["rows"][0].update(peer="x"), "rows[0]: unknown key(s) peer"),
])
def test_a_malformed_file_is_refused_naming_file_and_field(tmp_path, mutate, field):
    doc = copy.deepcopy(GOOD)
    mutate(doc)
    path = _write(tmp_path, doc, "bad.json")
    with pytest.raises(tool.ResultsError) as info:
        tool.load_results(tmp_path)
    assert str(path) in str(info.value) and field in str(info.value)


def test_invalid_json_names_the_line(tmp_path):
    _write(tmp_path, '{"schema": 1,\n  "area": }', "broken.json")
    with pytest.raises(tool.ResultsError, match=r"broken\.json: line 2, column"):
        tool.load_results(tmp_path)


def test_null_reference_and_ratio_are_allowed(tmp_path):
    doc = copy.deepcopy(GOOD)
    doc["rows"][0].update(reference=None, ratio=None)
    doc["issue"] = None
    del doc["rows"][0]["note"]
    _write(tmp_path, doc)
    assert "— (KenLM query)" in tool.render(tool.load_results(tmp_path))


def test_the_command_line_exits_2_with_the_error(tmp_path, capsys):
    bad = copy.deepcopy(GOOD)
    bad["rows"][0]["better"] = "up"
    _write(tmp_path, bad)
    assert tool.main(["--results", str(tmp_path), "--check"]) == 2
    assert "rows[0].better" in capsys.readouterr().err
    out = tmp_path / "summary.md"
    _write(tmp_path, GOOD)
    assert tool.main(["--results", str(tmp_path), "-o", str(out)]) == 0
    assert out.read_text().startswith("# How varorder compares")
