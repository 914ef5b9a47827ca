"""Lazy package exports (PEP 562): a package lists its public names and the module that
defines each; a name's module is imported on first attribute access, not when the
package is imported.

``import varorder`` and ``import varorder.models`` therefore stay cheap (no NumPy, SciPy
or Numba until a class is touched), while ``from varorder.models import CRF`` and
``varorder.CRF`` work as usual. Each package's ``__init__`` does::

    __getattr__, __dir__, __all__ = attach(__name__, {"CRF": "varorder.models.crf", ...})

``submodules`` names the package's subpackages and modules reachable as attributes
(``varorder.models`` after ``import varorder``); they are listed by ``dir()`` but are not
in ``__all__`` (a star-import should not import every subpackage).
"""

from __future__ import annotations

import importlib

__all__ = ["attach"]


def attach(package: str, exports: dict[str, str], eager: tuple[str, ...] = (), submodules: tuple[str, ...] = ()):
    """``(__getattr__, __dir__, __all__)`` for ``package`` exporting ``exports`` lazily.

    ``exports`` maps each public name to the module that defines it; ``eager`` names are
    already bound in the package's namespace (imported eagerly) and only join ``__all__``.
    """
    names = sorted(set(exports) | set(eager))
    children = frozenset(submodules)

    def __getattr__(name: str):
        if name in exports:
            value = getattr(importlib.import_module(exports[name]), name)
            # bind it, so the next access is an ordinary attribute lookup
            importlib.import_module(package).__dict__[name] = value
            return value
        if name in children:
            return importlib.import_module(f"{package}.{name}")
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    def __dir__() -> list[str]:
        return sorted(set(importlib.import_module(package).__dict__) | set(names) | children)

    return __getattr__, __dir__, names
