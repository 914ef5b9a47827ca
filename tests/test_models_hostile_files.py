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


def _members(path):
    with np.load(path, allow_pickle=False) as archive:
        return {name: archive[name] for name in archive.files}


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
    raw = bytearray(path.read_bytes())
    for _ in range(data.draw(st.integers(0, 3))):
        raw[data.draw(st.integers(0, len(raw) - 1))] = data.draw(st.integers(0, 255))
    bad = tmp_path / "bad.npz"
    bad.write_bytes(bytes(raw[: data.draw(st.integers(1, len(raw)))]))
    _check(cls, inputs, bad)


JSON = st.recursive(st.none() | st.booleans() | st.integers(-5, 10**20) | st.floats(allow_nan=False) | st.text(max_size=5),
                    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
                    max_leaves=8)


@SETTINGS
@given(data=st.data())
def test_metadata_mutations(saved, tmp_path, data):
    cls, inputs, path = saved
    members = _members(path)
    meta = json.loads(members["__meta__"].tobytes())
    section = data.draw(st.sampled_from(["params", "state", None]))
    if section is None:
        meta[data.draw(st.sampled_from(sorted(meta)))] = data.draw(JSON)
    else:
        keys = sorted(meta[section]) or ["x"]
        meta[section][data.draw(st.sampled_from(keys + ["unknown"]))] = data.draw(JSON)
    members["__meta__"] = np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)
    bad = tmp_path / "meta.npz"
    np.savez(bad, **members)
    _check(cls, inputs, bad)


@SETTINGS
@given(data=st.data())
def test_array_mutations(saved, tmp_path, data):
    cls, inputs, path = saved
    members = _members(path)
    name = data.draw(st.sampled_from(sorted(k for k in members if k != "__meta__")))
    original = members[name]
    how = data.draw(st.sampled_from(["value", "shape", "dtype"]))
    if how == "value":
        changed = original.astype(np.float64).copy()
        if changed.size:
            changed.flat[data.draw(st.integers(0, changed.size - 1))] = data.draw(
                st.sampled_from([np.inf, -np.inf, np.nan, 1e308, -1e308, 1e5, 0.0]))
    elif how == "shape":
        changed = original.reshape(-1)[: max(original.size - 1, 0)]
    else:
        changed = original.astype(data.draw(st.sampled_from(["U3", "bool", "int8", "complex128", "float16"])))
    members[name] = changed
    bad = tmp_path / "arrays.npz"
    np.savez(bad, **members)
    _check(cls, inputs, bad)


def test_duplicate_classes_refused(saved, tmp_path):
    cls, _, path = saved
    members = _members(path)
    meta = json.loads(members["__meta__"].tobytes())
    meta["state"]["classes"][1] = meta["state"]["classes"][0]
    members["__meta__"] = np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)
    bad = tmp_path / "dup.npz"
    np.savez(bad, **members)
    with pytest.raises(ValueError, match="twice"):
        cls.load(bad)
