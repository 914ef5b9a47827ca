"""The error kinds: each is a ValueError, says where, and keeps its fields."""

import pytest

from varorder.errors import DivergenceError, FormatError, ParameterError, VarorderError


def test_format_error_names_file_and_line():
    err = FormatError("bad count", path="model.arpa", line=7, expected="an integer")
    assert str(err) == "model.arpa:7: bad count (expected an integer)"
    assert (err.path, err.line, err.expected) == ("model.arpa", 7, "an integer")
    assert isinstance(err, VarorderError) and isinstance(err, ValueError)


def test_format_error_without_a_file():
    assert str(FormatError("no header", line=3)) == "line 3: no header"
    assert str(FormatError("empty")) == "empty"


def test_parameter_and_divergence_errors_keep_their_fields():
    err = ParameterError("order must be ≥ 1, got 0", name="order", value=0)
    assert (err.name, err.value) == ("order", 0)
    div = DivergenceError("weights became NaN at iteration 3", option="--lipschitz")
    assert div.option == "--lipschitz" and isinstance(div, ArithmeticError)
    with pytest.raises(ValueError):
        raise div
    # one kind never passes for another
    assert not isinstance(err, DivergenceError) and not isinstance(div, ParameterError)
