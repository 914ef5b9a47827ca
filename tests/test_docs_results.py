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
    # one table row per results row, every area a section
    table_rows = [line for line in page.splitlines() if line.startswith("| ") and not line.startswith("| system")]
    assert len(table_rows) == sum(len(doc["rows"]) for _, doc in results)
    for _, doc in results:
        assert f"## {doc['area']}" in page
        assert doc["command"] in page


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
    assert "`benchmarks/lm.py`" in row


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
