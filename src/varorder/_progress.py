"""Progress reporting, one helper for every loop that reports it.

A tqdm bar redraws itself many times a second; on a terminal that is one line, but sent to
a file or a pipe every redraw is kept (163 KB of bars for ``varorder demo``'s stderr). So
:func:`progress` draws a tqdm bar only when the stream is a terminal, and otherwise prints
one summary line per stage when the stage ends (``desc: n/total unit in s``, with the
last postfix). Log lines go through :meth:`Progress.write`, which keeps them above a bar on
a terminal and prints them as they are elsewhere.

``VARORDER_PROGRESS`` overrides the detection: ``bar`` (always a bar), ``summary``
(never a bar) or ``off`` (nothing at all, not even the summary).
"""

from __future__ import annotations

import os
import sys
import time

__all__ = ["Progress", "progress"]


def _mode(stream) -> str:
    setting = os.environ.get("VARORDER_PROGRESS", "").strip().lower()
    if setting in ("bar", "summary", "off"):
        return setting
    try:
        return "bar" if stream.isatty() else "summary"
    except (AttributeError, ValueError):  # no isatty, or a closed stream
        return "summary"


class Progress:
    """tqdm's calls that varorder uses (update, write, set_postfix, close, iteration), drawn as a bar
    on a terminal and as one summary line at :meth:`close` elsewhere; disabled, it does nothing."""

    def __init__(self, iterable=None, *, total=None, desc: str = "", unit: str = "it", enabled: bool = True,
                 leave: bool = True, initial: int = 0, unit_scale: bool = False, file=None):
        self.iterable = iterable
        if total is None and iterable is not None and hasattr(iterable, "__len__"):
            total = len(iterable)
        self.total, self.desc, self.unit, self.n = total, desc, unit, initial
        self._initial = initial
        self._file = file if file is not None else sys.stderr
        self._mode = _mode(self._file) if enabled else "off"
        self._postfix = ""
        self._began = time.perf_counter()
        self._closed = False
        self._bar = None
        if self._mode == "bar":
            from tqdm import tqdm  # only a terminal needs it

            self._bar = tqdm(total=total, desc=desc, unit=unit, leave=leave, initial=initial,
                             unit_scale=unit_scale, file=self._file, dynamic_ncols=True)

    # -- tqdm's interface -----------------------------------------------------------

    def __iter__(self):
        try:
            for item in self.iterable:
                yield item
                self.update(1)
        finally:
            self.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def update(self, n: int = 1) -> None:
        self.n += n
        if self._bar is not None:
            self._bar.update(n)

    def set_postfix(self, values=None, **kwargs) -> None:
        values = dict(values or {}, **kwargs)
        self._postfix = ", ".join(f"{k}={v}" for k, v in values.items())
        if self._bar is not None:
            self._bar.set_postfix(values)

    def write(self, message: str) -> None:
        """A log line: above the bar on a terminal, as it is elsewhere (not when disabled)."""
        if self._bar is not None:
            self._bar.write(message, file=self._file)
        elif self._mode != "off":
            print(message, file=self._file, flush=True)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._bar is not None:
            self._bar.close()
        elif self._mode == "summary" and (self.n > self._initial or self.total):
            done = f"{self.n}/{self.total}" if self.total else f"{self.n}"
            extra = f" ({self._postfix})" if self._postfix else ""
            name = f"{self.desc}: " if self.desc else ""
            print(f"{name}{done} {self.unit.strip()} in {time.perf_counter() - self._began:.1f} s{extra}",
                  file=self._file, flush=True)


def progress(iterable=None, **kwargs) -> Progress:
    """A :class:`Progress` (``enabled=False`` for a silent one); see the module docstring."""
    return Progress(iterable, **kwargs)
