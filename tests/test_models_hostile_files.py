"""Model files under attack: byte mutations and truncations of a saved file, metadata
fields replaced by arbitrary JSON, arrays replaced by other dtypes, shapes and values.
Loading must end in a ValueError naming the file, or give a model that predicts valid
labels for the training sentences — never another exception type, never a model that
loads and then fails or goes NaN at prediction."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from varorder.testing.hostile import HypothesisChooser, model_members, mutate_array, mutate_bytes, mutate_metadata

from varorder.models.crf import CRF
from varorder.models.hmm import HMM
from varorder.models.memm import MEMM

X = [[{"w=the": 1.0}, {"w=dog": 1.0}], [{"w=a": 1.0}, {"w=cat": 1.0}, {"w=runs": 1.0}]]
Y = [["D", "N"], ["D", "N", "V"]]
WORDS = [["the", "dog"], ["a", "cat", "runs"]]
SETTINGS = settings(max_examples=int(__import__("os").environ.get("HOSTILE_EXAMPLES", "40")), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def _fitted(kind):
    if kind == "CRF":
        return CRF(max_iterations=5).fit(X, Y), X
    if kind == "MEMM":
        return MEMM(max_iterations=5).fit(X, Y), X
    return HMM().fit(WORDS, Y), WORDS


@pytest.fixture(scope="module", params=["CRF", "MEMM", "HMM"])
def saved(request, tmp_path_factory):
    model, inputs = _fitted(request.param)
    path = tmp_path_factory.mktemp(request.param) / "model.npz"
    model.save(path)
    return type(model), inputs, path


def _check(cls, inputs, path):
    try:
        model = cls.load(path)
    except ValueError as exc:
        assert str(path) in str(exc), f"error does not name the file: {exc}"
        return
    try:
        predicted = model.predict(inputs)
    except ValueError as exc:  # a valid model of another input type (dense arrays, not dicts)
        assert "dense feature arrays" in str(exc), exc
        return
    assert [len(p) for p in predicted] == [len(x) for x in inputs]
    assert all(label in list(model.classes_) for sentence in predicted for label in sentence)


@SETTINGS
@given(data=st.data())
def test_byte_mutations_and_truncations(saved, tmp_path, data):
    cls, inputs, path = saved
    bad = tmp_path / "bad.npz"
    bad.write_bytes(mutate_bytes(HypothesisChooser(data), path.read_bytes()))
    _check(cls, inputs, bad)


@SETTINGS
@given(data=st.data())
def test_metadata_mutations(saved, tmp_path, data):
    cls, inputs, path = saved
    bad = tmp_path / "meta.npz"
    np.savez(bad, **mutate_metadata(HypothesisChooser(data), model_members(path)))
    _check(cls, inputs, bad)


@SETTINGS
@given(data=st.data())
def test_array_mutations(saved, tmp_path, data):
    cls, inputs, path = saved
    bad = tmp_path / "arrays.npz"
    np.savez(bad, **mutate_array(HypothesisChooser(data), model_members(path)))
    _check(cls, inputs, bad)


def test_duplicate_classes_refused(saved, tmp_path):
    cls, _, path = saved
    members = model_members(path)
    meta = json.loads(members["__meta__"].tobytes())
    meta["state"]["classes"][1] = meta["state"]["classes"][0]
    members["__meta__"] = np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)
    bad = tmp_path / "dup.npz"
    np.savez(bad, **members)
    with pytest.raises(ValueError, match="twice"):
        cls.load(bad)
