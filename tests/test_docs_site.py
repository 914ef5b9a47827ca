"""The documentation site: the Sphinx build (system pages run as examples, warnings as errors),
the docstring examples as doctests, and the built pages opened in headless Chromium.

The build is the one ``docs/about-these-docs.md`` gives (``python -m sphinx -W --keep-going
-b html docs OUT``); it writes its generated sources into ``docs/_generated`` and
``docs/systems`` (both ignored by git).
"""

import doctest
import importlib
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
sys.path.insert(0, str(DOCS / "tools"))
import generate_pages  # noqa: E402  (docs/tools)


# the packages a system page needs beyond varorder's own dependencies (its data set), and the page
EXAMPLE_PEERS = {"statsmodels": "sys_14_hmm_regimes.py"}


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """Build the site once for this module; the HTML folder."""
    pytest.importorskip("sphinx", reason="the docs build needs the 'docs' extra (pip install -e '.[docs]')")
    for module, example in EXAMPLE_PEERS.items():
        pytest.importorskip(module, reason=f"the docs build runs {example}, which needs {module} (the 'docs' extra)")
    out = tmp_path_factory.mktemp("site")
    env = dict(os.environ, MPLBACKEND="Agg", VARORDER_THREADS="1", PYTHONPATH=os.pathsep.join(
        p for p in (str(ROOT / "src"), os.environ.get("PYTHONPATH")) if p))
    command = [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html",
               "-d", str(out / "doctrees"), str(DOCS), str(out / "html")]
    result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=1800)
    assert result.returncode == 0, f"docs build failed:\n{result.stdout[-5000:]}\n{result.stderr[-10000:]}"
    return out / "html"


def test_the_site_builds_with_every_page(site):
    for page in ("index.html", "getting-started.html", "file-formats.html", "architecture.html",
                 "_generated/summary.html", "_generated/cli.html", "_generated/api/index.html",
                 "notes/benchmarks-notebook.html", "systems/index.html"):
        assert (site / page).is_file(), page
    for name, _ in generate_pages.PUBLIC:
        assert (site / "_generated" / "api" / f"{name}.html").is_file(), name
    systems = sorted(p.name for p in (site / "systems").glob("sys_*.html"))
    assert len(systems) == len(list((DOCS / "examples").glob("sys_*.py"))) >= 14
    # the examples ran: their printed output is on the pages
    # no page's output includes compilation (the build warms the kernels first; a command that compiled
    # anyway would have printed varorder._numba_start's notice into its page)
    for page in sorted((site / "systems").glob("sys_*.html")):
        assert "compiling Numba kernels on first use" not in page.read_text(encoding="utf-8"), page.name
    engine = (site / "systems" / "sys_01_engine.html").read_text(encoding="utf-8")
    assert "+ varorder demo --engine" in engine and "Viterbi scores" in engine
    # the HMM regimes page: its shell lines, its printed fit and both figures
    regimes = (site / "systems" / "sys_14_hmm_regimes.html").read_text(encoding="utf-8")
    assert "+ varorder hmm train gdp.csv" in regimes and "falling-output segments" in regimes
    for figure in ("sphx_glr_sys_14_hmm_regimes_001.png", "sphx_glr_sys_14_hmm_regimes_002.png"):
        assert figure in regimes and (site / "_images" / figure).is_file(), figure
    # the summary holds every results row; the CLI reference every command
    summary = (site / "_generated" / "summary.html").read_text(encoding="utf-8")
    assert "How varorder compares" in summary and "KenLM" in summary and "eflomal" in summary
    cli = (site / "_generated" / "cli.html").read_text(encoding="utf-8")
    for command in ("varorder tag train", "varorder lm score", "varorder align apply", "varorder demo"):
        assert command in cli, command


EXAMPLES = sorted((DOCS / "examples").glob("sys_*.py"))
# the width of the page's code column: a longer line is cut off on the page
EXAMPLE_LINE_WIDTH = 100


def test_examples_use_only_the_public_api_and_fit_the_column():
    import ast

    for path in EXAMPLES:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            for name in names:
                top = name.split(".")[0]
                assert top not in {"gallery", "summarize_results", "generate_pages", "conftest"}, (path.name, name)
                assert not any(part.startswith("_") for part in name.split(".")[1:]), (path.name, name)
        wide = [i for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
                if len(line) > EXAMPLE_LINE_WIDTH]
        assert not wide, f"{path.name}: lines wider than {EXAMPLE_LINE_WIDTH}: {wide}"


@pytest.mark.slow
@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.stem)
def test_every_example_runs_as_downloaded(example, tmp_path):
    """Each system page's script, copied alone into an empty folder and run with python, in a
    shell where the environment is active (its bin folder first on PATH): its Python and its
    shell lines run, with no docs helper on the path."""
    for module, page in EXAMPLE_PEERS.items():
        if page == example.name and importlib.util.find_spec(module) is None:
            pytest.skip(f"{example.name} reads its data set from {module} (pip install {module})")
    bin_dir = os.path.dirname(sys.executable)
    if not shutil.which("varorder", path=bin_dir):
        pytest.skip(f"no varorder command beside {sys.executable} (install the package: pip install -e .)")
    script = tmp_path / example.name
    shutil.copy(example, script)
    env = dict(os.environ, MPLBACKEND="Agg", VARORDER_THREADS="1",
               PATH=os.pathsep.join((bin_dir, os.environ.get("PATH", ""))),
               PYTHONPATH=os.pathsep.join(p for p in (str(ROOT / "src"), os.environ.get("PYTHONPATH")) if p))
    result = subprocess.run([sys.executable, script.name], cwd=tmp_path, env=env, capture_output=True, text=True,
                            timeout=1800)
    assert result.returncode == 0, f"{example.name} failed:\n{result.stdout[-3000:]}\n{result.stderr[-5000:]}"


def _public_modules():
    names = []
    for package, _ in generate_pages.PUBLIC:
        names += generate_pages.public_modules(package)
    return names


@pytest.mark.parametrize("module_name", _public_modules())
def test_docstring_examples(module_name):
    """Every ``>>>`` example in a public module's docstrings runs and prints what it shows."""
    module = importlib.import_module(module_name)
    finder = doctest.DocTestFinder(exclude_empty=True)
    runner = doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE | doctest.ELLIPSIS)
    tests = [t for t in finder.find(module, module_name) if t.examples]
    for test in tests:
        runner.run(test)
    results = runner.summarize(verbose=False)
    assert results.failed == 0, f"{results.failed} of {results.attempted} doctest examples failed in {module_name}"


def test_the_main_entry_points_have_running_examples():
    from varorder import chain, lattice
    from varorder.lm.model import NgramLM
    from varorder.models.crf import CRF
    from varorder.models.hmm import HMM

    for obj in (chain.log_partition, chain.viterbi, chain.marginals, chain.kbest, chain.sample, CRF, HMM, NgramLM,
                lattice.Lattice):
        assert ">>> " in (obj.__doc__ or ""), obj


def _chromium():
    found = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    if found:
        return found
    script = DOCS / "tools" / "install_chromium.sh"
    result = subprocess.run(["bash", str(script)], capture_output=True, text=True, timeout=900)
    if result.returncode != 0:
        pytest.skip(f"headless Chromium not available: {result.stderr.strip()[-300:]}")
    return result.stdout.strip().splitlines()[-1]


def _headless(browser, page: Path, *options: str) -> str:
    with tempfile.TemporaryDirectory(prefix="varorder-chromium-") as profile:
        result = subprocess.run(
            [browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
             "--disable-component-update", "--disable-sync", "--no-first-run", f"--user-data-dir={profile}",
             *options, page.as_uri()],
            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout


def _dump_dom(browser, page: Path, *options: str) -> str:
    return _headless(browser, page, *options, "--dump-dom")


def test_the_built_pages_open_in_a_browser(site):
    browser = _chromium()
    index = _dump_dom(browser, site / "index.html")
    assert "<title>varorder" in index and "How varorder compares" in index
    api = _dump_dom(browser, site / "_generated" / "api" / "varorder.models.html")
    # the CRF class and its fit method are listed, with their documentation
    assert 'id="varorder.models.crf.CRF"' in api
    assert 'id="varorder.models.crf.CRF.fit"' in api
    fit = api[api.index('id="varorder.models.crf.CRF.fit"'):]
    assert '<span class="pre">fit</span>' in fit[:2000]


# the width: a laptop's browser window, both sidebars of the theme shown
WINDOW = (1400, 1100)


def test_the_comparison_tables_fit_a_1400_px_window(site, tmp_path):
    """The comparison page in headless Chromium at 1400 px: no table reaches past the window or needs
    sideways scrolling in its column, and no cell hides text (docs/tools/table_fit.js measures each
    table in the laid-out page); the screenshot is saved in this test's folder."""
    import json
    import re

    browser = _chromium()
    page = site / "_generated" / "summary.html"
    measured = page.with_name("summary-table-fit.html")  # beside the page: its styles load as they do for it
    shutil.copy(DOCS / "tools" / "table_fit.js", measured.with_name("table_fit.js"))
    measured.write_text(page.read_text(encoding="utf-8").replace(
        "</body>", '<script src="table_fit.js"></script></body>'), encoding="utf-8")
    size = f"--window-size={WINDOW[0]},{WINDOW[1]}"
    dom = _dump_dom(browser, measured, size, "--hide-scrollbars")
    found = re.search(r'<pre id="varorder-table-fit">(.*?)</pre>', dom, re.S)
    assert found, "table_fit.js wrote no report"
    report = json.loads(found.group(1).replace("&quot;", '"').replace("&amp;", "&"))
    screenshot = tmp_path / "summary-1400px.png"
    _headless(browser, page, size, "--hide-scrollbars", f"--screenshot={screenshot}")
    print(f"screenshot of the comparison page at {WINDOW[0]} px: {screenshot}")
    assert screenshot.is_file() and screenshot.stat().st_size > 10_000
    sections = [table["section"] for table in report["tables"]]
    assert "at-a-glance" in sections and len(sections) >= 10, sections  # the headline table, then the areas
    assert report["viewport"] > WINDOW[0] - 40, report["viewport"]
    clipped = {table["section"]: table["clipped"] for table in report["tables"] if table["clipped"]}
    assert not clipped, f"tables cut off at {WINDOW[0]} px (screenshot: {screenshot}): {clipped}"
