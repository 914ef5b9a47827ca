"""PNG plots of evaluation curves (matplotlib, Agg backend; needs the ``plot`` extra).

Every figure is written atomically (temporary file in the target folder, then
``os.replace``) so an interrupted run never leaves a half-written PNG.
"""

from __future__ import annotations

import math
import os
import tempfile

from varorder.io import umask_mode

__all__ = ["plot_precision_recall", "plot_curves", "plot_curve_panels"]


def _pyplot():
    try:
        import matplotlib
    except ImportError as err:  # pragma: no cover - depends on the environment
        raise ImportError("plots need matplotlib: pip install 'varorder[plot]'") from err
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(fig, path):
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=folder, suffix=".png.tmp")
    os.close(fd)
    try:
        fig.savefig(tmp, format="png", dpi=110, bbox_inches="tight")
        os.chmod(tmp, umask_mode())  # mkstemp creates 0600; give what open() would under the umask
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def plot_precision_recall(curves: dict, path, title: str = "Precision–recall", min_precision: float | None = None,
                          colors: dict | None = None):
    """Plot {name: (recall, precision)} as step curves to ``path`` (PNG). ``min_precision``
    is lowered to below the lowest curve point, so no curve's tail is cut off; ``colors``
    ({name: colour}) keeps one colour per name across figures."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(5.5, 4.0))
    for name, (recall, precision) in curves.items():
        ax.step(recall, precision, where="post", label=name, **_color(colors, name))
        if min_precision is not None and len(precision):
            min_precision = min(min_precision, math.floor(20 * float(min(precision)) - 0.5) / 20)
    ax.axhline(0.99, color="grey", lw=0.8, ls="--")
    ax.set_xlabel("recall (fraction of examples answered)")
    ax.set_ylabel("precision (accuracy on answered)")
    ax.set_xlim(0, 1)
    if min_precision is not None:
        ax.set_ylim(min_precision, 1.001)
    ax.set_title(title)
    ax.legend(loc="lower left")
    ax.grid(alpha=0.3)
    _save(fig, path)
    plt.close(fig)


def plot_curves(curves: dict, path, xlabel: str, ylabel: str, title: str = "", colors: dict | None = None,
                xlim: tuple | None = None):
    """Plot {name: (x, y)} as lines to ``path`` (PNG); ``colors`` as in :func:`plot_precision_recall`,
    ``xlim`` fixes the x range (e.g. from 0, where a curve has one point)."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(5.5, 4.0))
    for name, (x, y) in curves.items():
        ax.plot(x, y, marker="o" if len(x) < 2 else ("." if len(x) < 30 else None), label=name,
                **_color(colors, name))
    if xlim is not None:
        ax.set_xlim(*xlim)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title)
    ax.legend()
    ax.grid(alpha=0.3)
    _save(fig, path)
    plt.close(fig)


def _color(colors, name) -> dict:
    return {} if colors is None or name not in colors else {"color": colors[name]}


def plot_curve_panels(panels: dict, path, xlabel: str, ncols: int = 3):
    """A grid of line plots to ``path`` (PNG): {title: (curves {name: (x, y)}, ylabel, refs {label: y})};
    ``refs`` are drawn as dashed horizontal reference lines (e.g. published figures)."""
    plt = _pyplot()
    nrows = -(-len(panels) // ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(4.2 * ncols, 3.3 * nrows), squeeze=False)
    colors = {}  # one colour per curve or reference name across every panel
    for ax, (title, (curves, ylabel, refs)) in zip(axes.ravel(), panels.items()):
        for name, (x, y) in curves.items():
            ax.plot(x, y, label=name, color=colors.setdefault(name, f"C{len(colors)}"))
        for label, y in refs.items():
            ax.axhline(y, lw=0.9, ls="--", label=label, color=colors.setdefault(label, f"C{len(colors)}"))
        ax.set_title(title, fontsize=10)
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    for ax in axes.ravel()[len(panels):]:
        ax.axis("off")
    fig.tight_layout()
    _save(fig, path)
    plt.close(fig)
