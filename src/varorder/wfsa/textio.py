"""OpenFst's AT&T text format for :class:`varorder.wfsa.Wfsa` (Allauzen et al. 2007, "OpenFst").

One arc per line, ``src dst ilabel olabel [cost]`` (a transducer) or ``src dst label
[cost]`` (an acceptor); a final state is ``state [cost]``; the first arc's source is the
start state (a machine with no arcs starts at the first final line's state). Costs are
negated log weights, as in OpenFst's log and tropical (min-plus) semirings, whose
mirrors here are the log and max-plus semirings on log scores (``Infinity`` = weight
zero). Labels are symbols spelled as in the alphabet, ``<eps>`` for ε — the text that
``fstprint --isymbols --osymbols`` writes and ``fstcompile`` reads. Fields are separated by
tabs or spaces. The reader is strict: every problem is a FormatError naming file and line.
"""

from __future__ import annotations

import math

import numpy as np

from varorder.errors import FormatError, ParameterError
from varorder.io import atomic_write_text, open_text
from varorder.wfsa.fsa import EPSILON, NEG_INF, Wfsa

__all__ = ["EPSILON_SYMBOL", "format_fst", "read_fst", "write_fst"]

EPSILON_SYMBOL = "<eps>"


def _cost(weight: float) -> str:
    if weight == NEG_INF:
        return "Infinity"
    return repr(float(-weight) + 0.0)


def format_fst(fsa: Wfsa, acceptor: bool | None = None) -> str:
    """The machine as OpenFst text (acceptor columns when it is an acceptor, by default)."""
    acceptor = fsa.is_acceptor if acceptor is None else acceptor
    if acceptor and not fsa.is_acceptor:
        raise ParameterError("a transducer cannot be written in acceptor format", name='acceptor', value=acceptor)
    names = (EPSILON_SYMBOL,) + tuple(str(s) for s in fsa.alphabet)
    for s in names[1:]:
        if not s or any(c.isspace() for c in s) or s == EPSILON_SYMBOL:
            raise ParameterError(f"symbol {s!r} cannot be written in OpenFst text (empty, spaces, or <eps>)", name='fsa', value=fsa)
    # OpenFst's start is the first line's state: arcs leaving the start come first
    order = np.argsort(fsa.src != fsa.start, kind="stable")
    lines = []
    for e in order:
        cols = [str(fsa.src[e]), str(fsa.dst[e]), names[fsa.ilabel[e]]]
        if not acceptor:
            cols.append(names[fsa.olabel[e]])
        cols.append(_cost(fsa.weight[e]))
        lines.append("\t".join(cols))
    finals = [q for q in range(fsa.n_states) if fsa.final[q] > NEG_INF]
    if fsa.n_arcs == 0:
        finals.sort(key=lambda q: q != fsa.start)
    for q in finals:
        lines.append(f"{q}\t{_cost(fsa.final[q])}")
    return "\n".join(lines) + ("\n" if lines else "")


def write_fst(fsa: Wfsa, path, acceptor: bool | None = None) -> None:
    """Write OpenFst text atomically (``.gz`` compresses)."""
    text = format_fst(fsa, acceptor)
    with atomic_write_text(path) as handle:
        handle.write(text)


def _parse_state(token: str, where: str) -> int:
    if not token.isdigit():
        raise FormatError(f"{where}: expected a state number (non-negative integer), got {token!r}")
    return int(token)


def _parse_cost(token: str, where: str) -> float:
    try:
        cost = float(token)
    except ValueError:
        raise FormatError(f"{where}: expected a cost (a number or Infinity), got {token!r}") from None
    if math.isnan(cost) or cost == -math.inf:
        raise FormatError(f"{where}: cost {token!r} is not a weight (NaN or -Infinity)")
    return -cost


def _reads_as_acceptor(fields: list[str], alphabet_index: dict | None) -> bool:
    """How the first arc line reads when the caller did not say. Three fields are an
    acceptor arc and five a transducer arc; four are either an acceptor arc with its cost
    (what :func:`write_fst` writes for an acceptor) or a transducer arc without one (what
    ``fstprint`` writes for weight One). The fourth field decides: a number that is not a
    symbol of a given alphabet is a cost."""
    if len(fields) != 4:
        return len(fields) == 3
    if alphabet_index is not None and fields[3] in alphabet_index:
        return False
    try:
        float(fields[3])
    except ValueError:
        return False
    return True


def read_fst(path, alphabet=None, acceptor: bool | None = None) -> Wfsa:
    """Read OpenFst text. ``alphabet``: the symbols in label order (default: symbols in
    order of first appearance). ``acceptor``: force the 3/4-field (True) or 4/5-field
    (False) arc reading; by default the first arc line decides: 3 fields are an acceptor,
    5 a transducer, and 4 an acceptor with costs when the fourth field is a number (not a
    symbol of ``alphabet``), else a transducer without costs — so what :func:`write_fst`
    writes reads back as it was. A transducer whose output symbols are numbers and whose
    arcs carry no costs needs ``acceptor=False``. The start state is the first line's
    state, as in ``fstcompile``."""
    fixed = alphabet is not None
    symbols = list(alphabet) if fixed else []
    index = {s: i + 1 for i, s in enumerate(symbols)}
    arcs, finals = [], {}
    start = None
    n_states = 0
    with open_text(path) as handle:
        for lineno, line in enumerate(handle, 1):
            where = f"{path}:{lineno}"
            fields = line.split()
            if not fields:
                continue
            if len(fields) <= 2:
                q = _parse_state(fields[0], where)
                if q in finals:
                    raise FormatError(f"{where}: final state {q} is listed twice", path=path, line=lineno)
                finals[q] = _parse_cost(fields[1], where) if len(fields) == 2 else 0.0
                if start is None:
                    start = q
                n_states = max(n_states, q + 1)
                continue
            if acceptor is None:
                acceptor = _reads_as_acceptor(fields, index if fixed else None)
            expected = (3, 4) if acceptor else (4, 5)
            if len(fields) not in expected:
                raise FormatError(f"{where}: expected {expected[0]} or {expected[1]} fields for an "
                                  f"{'acceptor' if acceptor else 'transducer'} arc, got {len(fields)}", path=path, line=lineno)
            src = _parse_state(fields[0], where)
            dst = _parse_state(fields[1], where)
            labels = [fields[2]] if acceptor else fields[2:4]
            ids = []
            for sym in labels:
                if sym == EPSILON_SYMBOL:
                    ids.append(EPSILON)
                    continue
                if sym not in index:
                    if fixed:
                        raise FormatError(f"{where}: symbol {sym!r} is not in the alphabet", path=path, line=lineno)
                    symbols.append(sym)
                    index[sym] = len(symbols)
                ids.append(index[sym])
            cost_field = fields[3] if acceptor and len(fields) == 4 else fields[4] if len(fields) == 5 else None
            weight = _parse_cost(cost_field, where) if cost_field is not None else 0.0
            if start is None:
                start = src
            arcs.append((src, ids[0], ids[-1], weight, dst))
            n_states = max(n_states, src + 1, dst + 1)
    if start is None:
        raise FormatError(f"{path}: no arcs and no final states: an empty machine has no start state", path=path)
    return Wfsa.from_arcs(tuple(symbols), n_states, start, arcs, finals)
