"""The kinds of error varorder raises, so that a caller can tell them apart without
reading the message.

Every kind derives from :class:`VarorderError`, which derives from ``ValueError``: code
that catches ``ValueError`` keeps working, and code that needs one kind catches that kind
alone (never a bare ``except ValueError`` around code that can raise another kind).

* :class:`FormatError` — a file or stream does not hold what its format requires; carries
  ``path`` (or ``None`` for a stream or string), ``line`` (1-based, or ``None``) and
  ``expected``; its message starts with ``path:line:``, as compilers and KenLM write.
* :class:`ParameterError` — an argument or option has a value the call cannot use;
  carries ``name`` and ``value``.
* :class:`DivergenceError` — an iterative fit or inference left the finite numbers (or
  ran away); carries ``option``: the setting a user should change, when one is known.
* :class:`NotFittedError` lives in :mod:`varorder.base` (scikit-learn's class when
  scikit-learn is installed, so that its tools recognise it).

This module imports only the standard library, so every layer may use it.
"""

from __future__ import annotations

__all__ = ["VarorderError", "FormatError", "ParameterError", "DivergenceError"]


class VarorderError(ValueError):
    """Base of every error kind varorder raises on purpose."""


class FormatError(VarorderError):
    """Input that does not follow its format: names the file, the line and what was expected."""

    def __init__(self, message: str, *, path=None, line: int | None = None, expected: str | None = None):
        self.path = None if path is None else str(path)
        self.line = line
        self.expected = expected
        where = ""
        if self.path is not None:
            where = f"{self.path}:{line}: " if line is not None else f"{self.path}: "
        elif line is not None:
            where = f"line {line}: "
        # a message that already leads with the file (``path, line 3: ...``) keeps its own wording
        named = where and (message.startswith(where) or (self.path is not None and message.startswith(self.path)))
        text = message if not where or named else where + message
        if expected and "expected" not in message:
            text = f"{text} (expected {expected})"
        super().__init__(text)


class ParameterError(VarorderError):
    """An argument whose value cannot be used: names the parameter and the value."""

    def __init__(self, message: str, *, name: str | None = None, value=None):
        self.name = name
        self.value = value
        super().__init__(message)


class DivergenceError(VarorderError, ArithmeticError):
    """An iterative procedure that left the finite numbers or ran away."""

    def __init__(self, message: str, *, option: str | None = None):
        self.option = option
        super().__init__(message)
