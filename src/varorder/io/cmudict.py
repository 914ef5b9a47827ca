"""Readers for transduction pairs: the CMU Pronouncing Dictionary and ``input<TAB>output`` files.

CMUdict lines are ``word PH1 PH2 …`` (ARPAbet with stress digits 0/1/2); ``;;;`` lines
and blank lines are skipped, a ``#`` starts a trailing comment, alternates ``word(2)``
become separate entries for ``word``; stress digits are removed from the phonemes and
the word is lower-cased (the spelling to predict). Pair files hold one pair per line:
space-separated input symbols, a tab, the output string. Both read through
:func:`varorder.io._text.open_text` (gzip by magic bytes); a malformed line is a
FormatError naming the file and line.
"""

from __future__ import annotations

import os
import re

from varorder.errors import FormatError, ParameterError
from varorder.io._text import open_text

__all__ = ["read_cmudict", "read_pairs", "read_transduction_pairs", "sniff_format"]

_ALTERNATE = re.compile(r"\(\d+\)$")
_STRESS = re.compile(r"[012]$")


def read_cmudict(path) -> tuple[list[list[str]], list[str]]:
    """(phoneme lists, lower-case spellings) of a CMUdict file."""
    inputs, outputs = [], []
    with open_text(path) as handle:
        for number, line in enumerate(handle, 1):
            text = line.split("#", 1)[0].strip() if not line.startswith(";;;") else ""
            if not text:
                continue
            fields = text.split()
            if len(fields) < 2:
                raise FormatError(f"{os.fspath(path)}:{number}: expected 'word PHONEME …', got {line.strip()!r:.60}", path=os.fspath(path), line=number)
            word = _ALTERNATE.sub("", fields[0]).lower()
            if not word:
                raise FormatError(f"{os.fspath(path)}:{number}: empty word before the phonemes", path=os.fspath(path), line=number)
            inputs.append([_STRESS.sub("", p) for p in fields[1:]])
            outputs.append(word)
    return inputs, outputs


def read_pairs(path) -> tuple[list[list[str]], list[str]]:
    """(input symbol lists, output strings) of an ``input symbols<TAB>output`` file."""
    inputs, outputs = [], []
    with open_text(path) as handle:
        for number, line in enumerate(handle, 1):
            line = line.rstrip("\n")
            if not line.strip():
                continue
            parts = line.split("\t")
            if len(parts) != 2 or not parts[0].split() or not parts[1]:
                raise FormatError(f"{os.fspath(path)}:{number}: expected 'input symbols<TAB>output', "
                                  f"got {line!r:.60}", path=os.fspath(path), line=number)
            inputs.append(parts[0].split())
            outputs.append(parts[1])
    return inputs, outputs


def sniff_format(path) -> str:
    """"pairs" when the first content line holds a tab, else "cmudict"."""
    with open_text(path) as handle:
        for line in handle:
            if line.strip() and not line.startswith(";;;"):
                return "pairs" if "\t" in line else "cmudict"
    return "pairs"


def read_transduction_pairs(path, fmt: str = "auto"):
    """Read ``path`` as "cmudict", "pairs" or "auto" (sniffed)."""
    if fmt not in ("auto", "cmudict", "pairs"):
        raise ParameterError(f"format must be auto, cmudict or pairs, got {fmt!r}", name='format', value=fmt)
    if fmt == "auto":
        fmt = sniff_format(path)
    inputs, outputs = read_cmudict(path) if fmt == "cmudict" else read_pairs(path)
    if not inputs:
        raise FormatError(f"{os.fspath(path)}: no pairs found", path=os.fspath(path))
    return inputs, outputs
