"""The compiled ARPA writer (:mod:`varorder.lm._arpa_write`) against NumPy's own text: every
float32 value is written as ``str`` of the float32 (-inf as -99), and whole files are the
bytes the NumPy formatting path writes."""

from __future__ import annotations

import numpy as np
import pytest

from _lm_oracle import random_model
from varorder.lm import _arpa_write, arpa
from varorder.lm.arpa import _value_strings, write_arpa


def _compiled_text(values: np.ndarray) -> list[str]:
    """One value per line (a one-word line each) through the compiled kernel."""
    values = np.asarray(values, dtype=np.float32)
    text = arpa._format_lines_compiled(np.zeros((values.size, 1), dtype=np.int64),
                                       np.frombuffer(b"w", dtype=np.uint8).reshape(1, 1), [(values, np.float32)])
    lines = text.decode("ascii").split("\n")
    assert lines[-1] == "" and all(line.endswith("\tw") for line in lines[:-1])
    return [line[:-2] for line in lines[:-1]]


def _numpy_text(values: np.ndarray) -> list[str]:
    table, index = _value_strings(np.asarray(values, dtype=np.float32), np.float32)
    return [bytes(row).rstrip(b"\0").decode("ascii") for row in table[index]]


@pytest.mark.parametrize("draw", ["bits", "log10", "cubes", "decimals"])
def test_values_are_written_as_numpy_writes_them(draw):
    rng = np.random.default_rng(["bits", "log10", "cubes", "decimals"].index(draw))
    if draw == "bits":  # any float32 at all: most leave the fast path, the rest must agree
        values = rng.integers(0, 2**32, 200_000, dtype=np.uint64).astype(np.uint32).view(np.float32)
    elif draw == "log10":
        values = -rng.random(200_000) * 10
    elif draw == "cubes":  # many near 0 and beyond -99
        values = -rng.exponential(1.0, 200_000) ** 3
    else:  # short decimals: ties and values on a power of ten
        values = [round(float(x), int(d)) for x, d in zip(-rng.random(50_000) * 100, rng.integers(0, 8, 50_000))]
    values = np.asarray(values, dtype=np.float32)
    assert _compiled_text(values) == _numpy_text(values)
    if draw in ("log10", "decimals"):  # the fast path did the work, not the fallback
        assert _arpa_write.needs_numpy(values.view(np.uint32).reshape(-1, 1)).mean() < 0.05


def test_special_values():
    values = np.array([0.0, 1.0, -1.0, 0.5, 10.0, 100.0, 999999.94, 1e6, 0.01, 0.1, 0.0099999, -99.0, -np.inf,
                       np.inf, np.nan, 123456.79, 9.999999, 99.99999, 0.099999994, 1e-30, 3e38], dtype=np.float32)
    assert _compiled_text(values) == _numpy_text(values)
    assert _compiled_text(np.array([-np.inf], dtype=np.float32)) == ["-99"]
    assert _compiled_text(np.array([-0.0, -1.5], dtype=np.float32)) == ["-0.0", "-1.5"]


def test_both_signed_zeros_take_the_numpy_path():
    values = np.array([0.0, -2.5, -0.0, 0.0], dtype=np.float32)
    rows = np.zeros((4, 1), dtype=np.int64)
    words = (np.frombuffer(b"w", dtype=np.uint8).reshape(1, 1), None)
    assert arpa._format_lines_compiled(rows, words[0], [(values, np.float32)]) is None
    expected = arpa._format_lines(rows, words, [(values, np.dtype(np.float32))])  # the NumPy path
    assert arpa._format_lines(rows, words, [(values, np.float32)]) == expected


@pytest.mark.parametrize("seed", range(3))
def test_files_equal_the_numpy_path(tmp_path, monkeypatch, seed):
    model, _ = random_model(np.random.default_rng(seed), 40, 3 + seed % 2)
    write_arpa(model, tmp_path / "compiled.arpa")
    original = arpa._format_lines
    # np.dtype(np.float32) is the same type but not the np.float32 object the compiled path
    # is chosen for: every block then goes through the NumPy formatting path.
    monkeypatch.setattr(arpa, "_format_lines", lambda rows, words, columns: original(
        rows, words, [(values, np.dtype(dtype)) for values, dtype in columns]))
    monkeypatch.setattr(arpa, "_format_lines_compiled", None)
    write_arpa(model, tmp_path / "numpy.arpa")
    assert (tmp_path / "compiled.arpa").read_bytes() == (tmp_path / "numpy.arpa").read_bytes()
