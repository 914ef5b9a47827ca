"""Model files of every estimator under attack: the CRF, MEMM and HMM taggers, the word
aligner, the SampleRank tagger, the log-linear LM, the decipherer, the grammar inducer and
the reified-context model.

Byte mutations and truncations of a saved file, metadata fields replaced by arbitrary
JSON, arrays replaced by other dtypes, shapes and values. Loading must end in a
ValueError naming the file, or give a model that works on the training inputs (valid,
finite outputs) — never another exception type, never a model that loads and then
fails, reads out of bounds or goes NaN."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from varorder.testing.hostile import (MODEL_KINDS, HypothesisChooser, model_members, mutate_array, mutate_bytes,
                                      mutate_metadata, saved_model)

SETTINGS = settings(max_examples=int(os.environ.get("HOSTILE_EXAMPLES", "25")), deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture])

@pytest.fixture(scope="module", params=sorted(MODEL_KINDS))
def saved(request, tmp_path_factory):
    tmp = tmp_path_factory.mktemp(request.param)
    cls, use, path = saved_model(request.param, tmp)
    use(cls.load(path))  # the unharmed file loads and works
    return cls, use, path


def check_load(cls, use, path):
    """Load ``path``: a ValueError naming it, or a model that works."""
    import warnings

    try:
        model = cls.load(path)
    except ValueError as exc:
        assert str(path) in str(exc), f"error does not name the file: {exc}"
        return
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # overflow / invalid value in use: the file was bad
        use(model)


@SETTINGS
@given(data=st.data())
def test_byte_mutations_and_truncations(saved, tmp_path, data):
    cls, use, path = saved
    bad = tmp_path / "bad.npz"
    bad.write_bytes(mutate_bytes(HypothesisChooser(data), path.read_bytes()))
    check_load(cls, use, bad)


@SETTINGS
@given(raw=st.binary(max_size=300))
def test_arbitrary_bytes(saved, tmp_path, raw):
    cls, use, _ = saved
    bad = tmp_path / "junk.npz"
    bad.write_bytes(raw)
    check_load(cls, use, bad)


@pytest.mark.parametrize("mutate", [mutate_metadata, mutate_array], ids=["metadata", "arrays"])
@SETTINGS
@given(data=st.data())
def test_member_mutations(saved, tmp_path, mutate, data):
    """Metadata fields replaced by arbitrary JSON; arrays by other dtypes, shapes and values."""
    cls, use, path = saved
    bad = tmp_path / "members.npz"
    np.savez(bad, **mutate(HypothesisChooser(data), model_members(path)))
    check_load(cls, use, bad)


@pytest.mark.parametrize("kind", ["CRF", "MEMM", "HMM"])
def test_duplicate_classes_refused(kind, tmp_path):
    cls, _, path = saved_model(kind, tmp_path)
    members = model_members(path)
    meta = json.loads(members["__meta__"].tobytes())
    meta["state"]["classes"][1] = meta["state"]["classes"][0]
    members["__meta__"] = np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)
    bad = tmp_path / "dup.npz"
    np.savez(bad, **members)
    with pytest.raises(ValueError, match="twice"):
        cls.load(bad)


def test_integer_parameters_beyond_int64_are_refused(tmp_path):
    """A float like 1e308 where compiled code takes an int64 (it was an OverflowError at predict)."""
    cls, _, path = saved_model("ReifiedContextModel", tmp_path)
    members = model_members(path)
    meta = json.loads(members["__meta__"].tobytes())
    meta["params"]["num_contexts"] = 1e308
    members["__meta__"] = np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)
    bad = tmp_path / "bad.npz"
    np.savez(bad, **members)
    with pytest.raises(ValueError, match="num_contexts"):
        cls.load(bad)
