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

from varorder.testing.hostile import (MODEL_KINDS, HypothesisChooser, break_array_header, model_members,
                                      mutate_array, mutate_bytes, mutate_metadata, saved_model, write_members)

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
    """Metadata fields replaced by arbitrary JSON; arrays by other dtypes, shapes and values (the
    content digest recomputed, so that the kind's own field checks are what is tested)."""
    cls, use, path = saved
    bad = tmp_path / "members.npz"
    write_members(bad, mutate(HypothesisChooser(data), model_members(path)))
    check_load(cls, use, bad)


@pytest.mark.parametrize("kind", ["CRF", "MEMM", "HMM"])
def test_duplicate_classes_refused(kind, tmp_path):
    cls, _, path = saved_model(kind, tmp_path)
    members = model_members(path)
    meta = json.loads(members["__meta__"].tobytes())
    meta["state"]["classes"][1] = meta["state"]["classes"][0]
    members["__meta__"] = np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)
    bad = tmp_path / "dup.npz"
    write_members(bad, members)
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
    write_members(bad, members)
    with pytest.raises(ValueError, match="num_contexts"):
        cls.load(bad)


@SETTINGS
@given(data=st.data())
def test_edits_without_the_digest_are_refused(saved, tmp_path, data):
    """Any edit of a field or array, consistent or not (``params.order + 1``, a list of tags
    reordered), is refused naming the file and the digest unless it changed nothing."""
    cls, use, path = saved
    chooser = HypothesisChooser(data)
    members = model_members(path)
    mutated = (mutate_metadata if chooser.choice([0, 1]) else mutate_array)(chooser, members)
    bad = tmp_path / "edited.npz"
    write_members(bad, mutated, redigest=False)
    unchanged = mutated.keys() == members.keys() and all(
        mutated[k].dtype == members[k].dtype and np.array_equal(mutated[k], members[k]) for k in members)
    if unchanged:
        cls.load(bad)
        return
    with pytest.raises(ValueError, match=str(bad)):  # the digest, or an earlier check (format, kind)
        cls.load(bad)


def test_an_array_header_that_breaks_numpys_tokenizer_is_refused(saved, tmp_path):
    """#47: a header whose brackets never close made NumPy raise tokenize.TokenError (a
    ReifiedContextModel file with flipped bytes), not the ValueError naming the file."""
    cls, _, path = saved
    bad = tmp_path / "header.npz"
    break_array_header(path, bad)
    with pytest.raises(ValueError, match=f"{bad}.*not a readable varorder model file"):
        cls.load(bad)


def _forge(path, tmp_path, edit):
    """The saved model with ``edit(meta, arrays)`` applied and its digest recomputed (a forgery)."""
    members = model_members(path)
    meta = json.loads(members.pop("__meta__").tobytes())
    edit(meta, members)
    members["__meta__"] = np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)
    bad = tmp_path / "forged.npz"
    write_members(bad, members)
    return bad


def _set(section, key, value):
    def edit(meta, arrays):
        meta[section][key] = value(meta[section].get(key)) if callable(value) else value
    return edit


def _array(name, change):
    def edit(meta, arrays):
        arrays[name] = change(arrays[name].copy())
    return edit


def _first_set(array, value):
    array[1] = value
    return array


# the examples (#33) of forged files that loaded and then answered differently
FORGED = [
    ("AlignmentTransducer", _set("state", "letters", lambda v: ["ab"] + v[1:]), "letters"),
    ("Decipherer", _set("params", "colour", 1), "colour"),
    ("Decipherer", _array("observed_symbols", lambda a: a[::-1].copy()), "observed_symbols"),
    ("GrammarInducer", _set("params", "colour", 1), "colour"),
    ("GrammarInducer", _set("state", "yields", lambda v: v + [v[-1]]), "yield"),
    ("GrammarInducer", _set("state", "tags", lambda v: [v[0]] + v[:-1]), "tags"),
    ("LogLinearLM", _set("params", "colour", 1), "colour"),
    ("LogLinearLM", _set("params", "order", lambda v: v + 1), "order"),
    ("LogLinearLM", _array("ctx_parent", lambda a: a.astype(np.float64)), "ctx_parent"),
    ("CRF", _set("state", "feature_names", lambda v: v[:-1]), "feature_names"),
    ("MEMM", _set("state", "feature_names", lambda v: v[:-1]), "feature_names"),
    ("ReifiedContextModel", _set("state", "coverage_weight", float("nan")), "coverage_weight"),
    ("ReifiedContextModel", _set("state", "coverage_weight", 2.5), "coverage_weight"),
]


@pytest.mark.parametrize("kind, edit, field", FORGED, ids=[f"{k}-{f}" for k, _, f in FORGED])
def test_forged_fields_refused_naming_file_and_field(kind, edit, field, tmp_path):
    cls, _, path = saved_model(kind, tmp_path)
    bad = _forge(path, tmp_path, edit)
    with pytest.raises(ValueError, match=f"{bad}.*{field}"):
        cls.load(bad)



def test_every_field_edit_is_refused_or_harmless(saved, tmp_path):
    """Each params/state field and each array of the file edited in turn (type, range, length,
    order, dtype, shape; removed; an unknown key added) and the digest recomputed: the kind's own
    checks must refuse the file naming it, or the model must work (the contract of
    docs/model-files.md; consistent edits that still work are the digest's to refuse)."""
    from varorder.testing.hostile import field_edits

    cls, use, path = saved
    bad = tmp_path / "field.npz"
    failures = []
    for label, members in field_edits(model_members(path)):
        write_members(bad, members)
        try:
            check_load(cls, use, bad)
        except Exception as error:  # noqa: BLE001 - collected, so that one run lists every gap
            failures.append(f"{label}: {type(error).__name__}: {error}"[:300])
    assert not failures, "\n".join(failures)


def test_the_contract_page_names_every_field_of_every_kind(saved):
    """docs/model-files.md lists each state field and array a saved model of each kind holds."""
    from pathlib import Path

    cls, _, path = saved
    page = (Path(__file__).resolve().parents[1] / "docs" / "model-files.md").read_text()
    members = model_members(path)
    meta = json.loads(members.pop("__meta__").tobytes())
    kind = meta["kind"]
    section = page[page.index(f"| **{kind}**"):]
    section = section[:section.index("\n| **", 1)] if "\n| **" in section[1:] else section
    missing = [name for name in [*meta["state"], *members] if f"`{name}" not in section and f"{name}`" not in section]
    assert not missing, f"{kind}: docs/model-files.md does not describe {missing}"
