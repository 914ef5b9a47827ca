"""The documentation's examples run as written.

Shell blocks: every ```bash block of docs/getting-started.md runs, except one preceded by
``<!-- skip-run -->`` (installs, the test suite, the site build); on any other docs/*.md
page only the blocks preceded by ``<!-- runnable -->`` run (docs/about-these-docs.md
states the convention). Each block runs with ``bash -e`` in its own empty temporary
folder, with this interpreter's bin folder first on PATH, so a bare ``varorder`` is the
one installed beside it. The Python blocks of getting-started.md run in order in one
namespace, in one temporary folder, as a reader pasting them would.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
FIRST_PAGE = DOCS / "getting-started.md"
BIN = Path(sys.executable).parent
SKIP_MARK = "<!-- skip-run -->"
RUN_MARK = "<!-- runnable -->"
FENCE = re.compile(r"^```(\w+)[^\n]*\n(.*?)^```", re.M | re.S)


def blocks(page: Path, language: str) -> list[tuple[int, str, str]]:
    """(line, marker before the block or '', text) of each ```language block of page."""
    text = page.read_text(encoding="utf-8")
    found = []
    for match in FENCE.finditer(text):
        if match.group(1) != language:
            continue
        before = text[:match.start()].rstrip().splitlines()
        marker = before[-1].strip() if before and before[-1].strip().startswith("<!--") else ""
        found.append((text.count("\n", 0, match.start()) + 1, marker, match.group(2)))
    return found


def runnable_shell_blocks() -> list[tuple[str, str]]:
    chosen = []
    for page in sorted(DOCS.glob("*.md")):
        for line, marker, text in blocks(page, "bash"):
            runs = marker != SKIP_MARK if page == FIRST_PAGE else marker == RUN_MARK
            if runs:
                chosen.append((f"{page.name}:{line}", text))
    return chosen


SHELL_BLOCKS = runnable_shell_blocks()


def _environment() -> dict:
    env = dict(os.environ)
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    source = str(ROOT / "src")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (source, env.get("PYTHONPATH")) if p)
    return env


def test_the_first_page_has_shell_and_python_blocks_to_run():
    assert len([b for b in SHELL_BLOCKS if b[0].startswith(FIRST_PAGE.name)]) >= 5, SHELL_BLOCKS
    assert len(blocks(FIRST_PAGE, "python")) >= 5


def test_the_marker_convention_selects_blocks(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("text\n\n<!-- runnable -->\n```bash\necho a\n```\n\n```bash\necho b\n```\n"
                    "<!-- skip-run -->\n```bash\necho c\n```\n", encoding="utf-8")
    assert [(m, t) for _, m, t in blocks(page, "bash")] == [
        (RUN_MARK, "echo a\n"), ("", "echo b\n"), (SKIP_MARK, "echo c\n")]


def test_shell_blocks_fit_the_column():
    wide = [f"{where}: {line}" for where, text in SHELL_BLOCKS for line in text.splitlines() if len(line) > 90]
    assert not wide, wide


@pytest.mark.parametrize("where, text", SHELL_BLOCKS, ids=[where for where, _ in SHELL_BLOCKS])
def test_shell_block_runs_in_an_empty_folder(where, text, tmp_path):
    if not (BIN / "varorder").exists():
        pytest.skip(f"no varorder script beside {sys.executable} (install the package into this environment)")
    done = subprocess.run(["bash", "-e", "-c", text], cwd=tmp_path, env=_environment(), capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, (f"{where} exited {done.returncode}\n--- block\n{text}--- stdout\n"
                                  f"{done.stdout[-4000:]}--- stderr\n{done.stderr[-4000:]}")


def test_python_blocks_of_the_first_page_run_in_order(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    namespace: dict = {"__name__": "__docs__"}
    for line, _, text in blocks(FIRST_PAGE, "python"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the toy LM's discount fallback warns, as the page says
            try:
                exec(compile(text, f"{FIRST_PAGE.name}:{line}", "exec"), namespace)
            except Exception as error:  # noqa: BLE001 - report which block failed and its text
                pytest.fail(f"{FIRST_PAGE.name}:{line} raised {error!r}\n--- block\n{text}")
    printed = capsys.readouterr().out
    assert "['DET', 'NOUN', 'VERB', 'PUNCT']" in printed
