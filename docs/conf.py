"""Sphinx configuration of the varorder documentation site.

Build (warnings are errors; the examples and the doctests run during the build)::

    python -m sphinx -W --keep-going -b html docs docs/_build/html

The generator is Sphinx with numpydoc (the docstrings are numpydoc), autodoc (the API
reference), sphinx-gallery (every system page is an example script run at build time, so it
cannot rot) and MyST (the Markdown pages: ARCHITECTURE.md, the notes and this site's
prose).  ``docs/tools`` writes the generated pages (the benchmark summary from
``benchmarks/results/*.json``, the API pages, the CLI reference from the click commands) into
``docs/_generated`` before the build reads its sources.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent
sys.path.insert(0, str(DOCS / "tools"))
if (ROOT / "src" / "varorder").is_dir():
    sys.path.insert(0, str(ROOT / "src"))  # the checkout documents itself, installed or not

os.environ.setdefault("MPLBACKEND", "Agg")
os.environ.setdefault("VARORDER_THREADS", "1")  # examples print the same numbers on any machine
# the system pages run their shell lines with bash: `varorder` is this interpreter's, as in an active venv
os.environ["PATH"] = os.pathsep.join((os.path.dirname(sys.executable), os.environ.get("PATH", "")))

# The system pages print timings (a command's "read N n-grams in 0.4 s"): compile the kernels before any
# example runs, so that no page shows compilation as speed. A no-op while varorder._warmup's stamp matches
# the sources (the editable install warmed them); otherwise the warm-up, announced on stderr. A command that
# still compiles says so on its page (the notice goes to the shell lines' output; tests/test_docs_site.py
# fails on it).
if not os.environ.get("VARORDER_NO_WARMUP"):
    from varorder import _warmup  # noqa: E402

    _warmup.warm(jobs=2)
os.environ["VARORDER_COMPILE_NOTICE"] = "1"

import gallery  # noqa: E402  (docs/tools: the varorder-results directive of the system pages)
import generate_pages  # noqa: E402  (docs/tools)
import varorder  # noqa: E402

generate_pages.generate_all(DOCS / "_generated")

project = "varorder"
author = "the varorder developers"
copyright = "2026, the varorder developers"
release = version = varorder.__version__

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.doctest",
    "sphinx.ext.mathjax",
    "sphinx.ext.viewcode",
    "numpydoc",
    "myst_parser",
    "sphinx_gallery.gen_gallery",
]

source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
root_doc = "index"
# docs/notes/<issue>-<topic>.md are the engineers' per-issue records (not user docs, and written by
# many hands): left out of the site; the lab notebook (notes/benchmarks-notebook.md) is in it
exclude_patterns = ["_build", "tools", "examples/README.rst", "ARCHITECTURE.md", "notes/[0-9]*", "systems/*.ipynb", "systems/*.py",
                    "systems/*.zip", "systems/*.md5", "systems/*.json", "**/*.codeobj.json"]
suppress_warnings = ["myst.header"]  # the notebook and ARCHITECTURE.md start below level 1 in places

myst_enable_extensions = ["colon_fence"]
myst_heading_anchors = 3

autodoc_default_options = {"member-order": "bysource"}
autodoc_typehints = "none"  # numpydoc's Parameters sections carry the types
autodoc_mock_imports: list[str] = []
if importlib.util.find_spec("torch") is None:  # varorder.torch's pages build without the optional extra
    autodoc_mock_imports.append("torch")
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
numpydoc_validation_checks: set[str] = set()
numpydoc_xref_param_type = False

sphinx_gallery_conf = {
    "examples_dirs": str(DOCS / "examples"),
    "gallery_dirs": "systems",
    "filename_pattern": r"/(plot_|run_|sys_)",
    "ignore_pattern": r"__init__\.py",
    "within_subsection_order": "FileNameSortKey",
    "download_all_examples": False,
    "plot_gallery": "True",
    "run_stale_examples": True,  # every build runs every page: a changed results file or API shows at once
    "abort_on_example_error": True,
    "only_warn_on_example_error": False,
    "capture_repr": ("_repr_html_",),
    "remove_config_comments": True,
    "show_memory": False,
    "show_signature": False,
    "min_reported_time": 3600,
    "matplotlib_animations": False,
    "image_scrapers": ("matplotlib",),
    "reset_modules": ("matplotlib",),
    "write_computation_times": False,
}

html_theme = "furo"
html_title = f"varorder {release}"
html_static_path = ["_static"]
html_css_files = ["varorder.css"]
html_show_sourcelink = False


# --- plain-text notation in docstrings ------------------------------------------------------
# The docstrings write absolute values and sizes as |x| (|A ∩ S|, |w_i|, ...): plain-text
# notation that reStructuredText would read as a substitution reference. Prose lines get
# their bars escaped before numpydoc and docutils see them; table rows, literal blocks,
# doctest lines and inline literals are left alone.
import re  # noqa: E402

_INLINE_LITERAL = re.compile(r"(``.*?``)")


def _escape_bars(line: str) -> str:
    parts = _INLINE_LITERAL.split(line)
    return "".join(p if p.startswith("``") else p.replace("|", "\\|") for p in parts)


def escape_plain_bars(app, what, name, obj, options, lines):
    literal_indent = None
    for i, line in enumerate(lines):
        stripped = line.lstrip()
        indent = len(line) - len(stripped)
        if literal_indent is not None:
            if stripped and indent <= literal_indent:
                literal_indent = None
            else:
                continue
        table_row = stripped.startswith("+-") or stripped.startswith("+=") or (
            stripped.startswith("|") and stripped.rstrip().endswith("|") and stripped.count("|") > 2)
        if "|" in line and not table_row and not stripped.startswith((">>>", "...")):
            lines[i] = _escape_bars(line)
        if line.rstrip().endswith("::"):
            literal_indent = indent


def setup(app):
    app.connect("autodoc-process-docstring", escape_plain_bars, priority=100)
    gallery.setup(app)
