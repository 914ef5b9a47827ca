"""Write the generated pages of the documentation site into ``docs/_generated``.

* ``summary.md``: the benchmark summary, one table per area, from ``benchmarks/results``
  (:mod:`summarize_results`);
* ``api/<package>.rst``: one API page per public package, every public module of it
  documented by autodoc from its docstrings (numpydoc);
* ``cli.md``: the command-line reference, the ``--help`` of every ``varorder`` command and
  subcommand as click prints it (the commands are imported, so the reference cannot drift
  from the code).

Files are rewritten only when their text changes, so Sphinx rebuilds only what changed.
"""

from __future__ import annotations

import importlib
import pkgutil
from pathlib import Path

import summarize_results

# the public packages and modules of the API reference, in the reader's order
PUBLIC = [
    ("varorder.chain", "Dense chains: log Z, marginals, Viterbi, k-best and sampling"),
    ("varorder.lattice", "Position-indexed lattices"),
    ("varorder.semimarkov", "Semi-Markov chains: labelled segmentations (HSMMs, semi-Markov CRFs)"),
    ("varorder.hypergraph", "Hypergraphs (inside-outside)"),
    ("varorder.torch", "PyTorch layers: CRF, semi-Markov CRF, dependency trees, autograd Functions"),
    ("varorder.models", "CRF, MEMM and HMM estimators"),
    ("varorder.lm", "n-gram language models"),
    ("varorder.loglinear", "Log-linear language models with structured penalties"),
    ("varorder.contexts", "Reified context models (RCMS)"),
    ("varorder.exact", "Exact decoding and sampling in high-order HMMs"),
    ("varorder.agree", "Agreement-based learning and word alignment"),
    ("varorder.grammar", "Grammar induction"),
    ("varorder.decipher", "Decipherment"),
    ("varorder.transduce", "Learning through latent alignments"),
    ("varorder.strings", "Graphical models over strings"),
    ("varorder.wfsa", "Weighted finite-state automata"),
    ("varorder.factorgraph", "Factor graphs and SampleRank"),
    ("varorder.neg", "Named-entity generation (GREC-NEG on GUM)"),
    ("varorder.parallel", "Executors: shards on threads, joblib or Dask"),
    ("varorder.io", "File formats: readers and writers"),
    ("varorder.eval", "Evaluation metrics"),
]


def write_if_changed(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists() or path.read_text(encoding="utf-8") != text:
        path.write_text(text, encoding="utf-8")


def public_modules(name: str) -> list[str]:
    """``name`` and, for a package, its modules whose names do not start with ``_``."""
    module = importlib.import_module(name)
    names = [name]
    if hasattr(module, "__path__"):
        for info in sorted(pkgutil.iter_modules(module.__path__), key=lambda i: i.name):
            if not info.name.startswith("_"):
                names.append(f"{name}.{info.name}")
    return names


def _heading(text: str, char: str) -> str:
    return f"{text}\n{char * len(text)}\n"


def api_page(name: str, title: str) -> str:
    modules = public_modules(name)
    out = [_heading(f"{name}: {title}", "="), f".. automodule:: {name}\n"]
    if len(modules) == 1:
        # a module: its members here
        out[-1] = f".. automodule:: {name}\n   :members:\n   :ignore-module-all:\n"
        return "\n".join(out)
    # a package: its docstring, then each public module with its members. The package's own
    # re-exports are not documented again here (each object has one place: the module
    # that defines it), so the names a user imports from the package link to those entries.
    for module in modules[1:]:
        out.append(_heading(module, "-"))
        out.append(f".. automodule:: {module}\n   :members:\n   :ignore-module-all:\n")
    return "\n".join(out)


def api_index() -> str:
    lines = [
        "# API reference",
        "",
        "Generated from the docstrings (numpydoc style) of every public module. A package's page",
        "shows its docstring, then each module with the classes and functions it defines.",
        "",
        "```{toctree}",
        ":maxdepth: 1",
        "",
    ]
    lines += [f"{name}" for name, _ in PUBLIC]
    lines += ["```", ""]
    return "\n".join(lines)


def cli_page() -> str:
    import click

    from varorder.cli.main import main as varorder_main

    lines = [
        "# Command-line reference",
        "",
        "Generated from the click commands when the site is built: each section is the command's",
        "`--help` as `varorder` prints it. `python -m varorder` works as `varorder` does.",
        "",
    ]

    def walk(command, path, parent):
        ctx = click.Context(command, info_name=path[-1], parent=parent, terminal_width=80, max_content_width=80)
        depth = min(len(path) + 1, 4)
        lines.extend([f"{'#' * depth} `{' '.join(path)}`", "", "```text", command.get_help(ctx).rstrip(), "```", ""])
        if isinstance(command, click.Group):
            for sub in command.list_commands(ctx):
                walk(command.get_command(ctx, sub), path + [sub], ctx)

    walk(varorder_main, ["varorder"], None)
    return "\n".join(lines)


def generate_all(out: Path) -> None:
    out = Path(out)
    summarize_results.write_summary(out=out / "summary.md")
    for name, title in PUBLIC:
        write_if_changed(out / "api" / f"{name}.rst", api_page(name, title))
    write_if_changed(out / "api" / "index.md", api_index())
    write_if_changed(out / "cli.md", cli_page())


if __name__ == "__main__":
    import sys

    generate_all(Path(__file__).resolve().parents[1] / "_generated")
    sys.exit(0)
