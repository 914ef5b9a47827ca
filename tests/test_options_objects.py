"""The rarely used knobs grouped into an options object (``options=...Options(...)``) for
NegGenerator, AlignmentTransducer, StringEP, SampleRankTagger and ReifiedContextModel: the old
keywords still work for one release (a FutureWarning) and fit the same model bit for bit; the
new spelling warns of nothing; clone / set_params see both; a bad field is a ParameterError
naming it; a saved model records the flat parameters as before and loads equal."""

from __future__ import annotations

import dataclasses
import warnings

import numpy as np
import pytest

from varorder.base import DEPRECATED
from varorder.errors import ParameterError


def _words():
    lexicon = {"the": "DET", "a": "DET", "dog": "NOUN", "cat": "NOUN", "runs": "VERB", "sleeps": "VERB", ".": "PUNCT"}
    rng = np.random.default_rng(3)
    sentences = [[str(rng.choice(["the", "a"])), str(rng.choice(["dog", "cat"])), str(rng.choice(["runs", "sleeps"])),
                  "."] for _ in range(30)]
    from varorder.models.features import pos_features

    X = [pos_features(s) for s in sentences]
    y = [[lexicon[w] for w in s] for s in sentences]
    keys = [[w.lower() for w in s] for s in sentences]
    documents = [i // 5 for i in range(len(sentences))]
    return X, y, keys, documents


def _samplerank():
    from varorder.factorgraph import SampleRankOptions, SampleRankTagger

    X, y, keys, documents = _words()
    return dict(
        estimator=SampleRankTagger, options=SampleRankOptions, bad=dict(temperature=-1.0),
        common=dict(n_epochs=3, random_state=1, skip_factors=True, decoder="anneal"),
        knobs=[dict(step_size=0.5, C=2.0, margin=0.5, temperature=0.8, average=False, init="gold", anneal_sweeps=4,
                    anneal_start=0.9, anneal_end=0.1)],
        fit=lambda m: m.fit(X, y, keys, documents),
        result=lambda m: (m.theta_, m.predict(X, keys, documents), _history(m)))


def _neg_documents():
    from varorder.neg.task import Candidate, NegDocument, Slot

    candidates = {"1": [Candidate("Ada Lovelace", "name-plain"), Candidate("she", "pron3-nom"),
                        Candidate("Lovelace", "name-plain")],
                  "2": [Candidate("Charles Babbage", "name-plain"), Candidate("he", "pron3-nom")]}
    documents = []
    for d in range(3):
        slots = []
        for j in range(6):
            entity = "1" if (j + d) % 3 else "2"
            gold = ("she" if entity == "1" else "he") if j % 2 else candidates[entity][0].text
            slots.append(Slot(j, j, entity, gold, "pronoun" if j % 2 else "name", "nom", j, 0,
                              ["dep=nsubj" if j % 2 else "dep=obj"]))
        documents.append(NegDocument(f"d{d}", "bio", ["w"] * 6, [True] * 6, list(range(6)), [0] * 6, slots,
                                     candidates))
    return documents


def _neg():
    from varorder.neg import NegGenerator, NegOptions

    documents = _neg_documents()
    return dict(
        estimator=NegGenerator, options=NegOptions, bad=dict(max_iter=0),
        common=dict(n_epochs=3, warm_start="unary", random_state=2),
        knobs=[dict(step_size=0.5, C=2.0, margin=0.5, temperature=0.9, average=False, init="gold", anneal_sweeps=5,
                    anneal_start=0.8, anneal_end=0.1, l2=0.5, max_iter=20, unary_step=0.5)],
        fit=lambda m: m.fit(documents),
        result=lambda m: (m.theta_, m.predict_indices(documents), _history(m)))


def _transducer():
    from varorder.transduce import AlignmentTransducer, TransducerOptions

    table = {"a": "x", "b": "yy", "c": "z"}
    rng = np.random.default_rng(0)
    inputs = [list(rng.choice(list(table), size=int(rng.integers(1, 4)))) for _ in range(20)]
    outputs = ["".join(table[p] for p in x) for x in inputs]
    return dict(
        estimator=AlignmentTransducer, options=TransducerOptions, bad=dict(delta=-1.0),
        common=dict(num_contexts=2, order=3, max_advance=2, hash_bits=12, epochs=2),
        knobs=[dict(step_size=0.3, delta=1e-3, truncation=0.01, length_ratio=1.5, length_slack=3, track_every=3),
               dict(step_size=0.1, bigram_epochs=1, length_slack=1)],
        method=lambda knobs: dict(method="forced") if "bigram_epochs" in knobs else {},
        fit=lambda m: m.fit(inputs, outputs),
        result=lambda m: (m.weights_, m.predict(inputs), getattr(m, "context_length_trace_", None),
                          _history(m)))


def _string_ep():
    from varorder.strings import EPOptions, StringEP
    from varorder.strings.model import synthetic_lexicon

    graph = synthetic_lexicon(6, seed=1, alphabet_size=4)
    return dict(
        estimator=StringEP, options=EPOptions, bad=dict(prox_penalty="both"), save=False,
        common=dict(family="pep", iterations=3, inner_passes=2),
        knobs=[dict(prox_steps=2, prox_tol=1e-2, passes_sweeps=2, damping=False, prox_penalty="belief"),
               dict(growth_rounds=1, greedy_floor=1e-5, cavity_contexts=False)],
        method=lambda knobs: dict(optimizer="greedy") if "growth_rounds" in knobs else {},
        fit=lambda m: m.fit(graph),
        result=lambda m: (m.theta_, m.msgs_, m.history_, m.stats_))


def _context_model():
    from varorder.contexts import ContextModelOptions, ReifiedContextModel

    rng = np.random.default_rng(4)
    ys = [rng.integers(0, 3, size=int(rng.integers(3, 7))) for _ in range(20)]
    xs = [np.eye(3)[y] + rng.normal(scale=0.8, size=(len(y), 3)) for y in ys]
    return dict(
        estimator=ReifiedContextModel, options=ContextModelOptions, bad=dict(off_beam="never"),
        common=dict(num_labels=3, order=3, num_contexts=3, epochs=2),
        knobs=[dict(step_size=0.3, delta=1e-3, track_every=3, max_context=3, context_mass="posterior"),
               dict(off_beam="early", step_size=0.5)],
        method=lambda knobs: dict(mode="beam") if "off_beam" in knobs else {},
        fit=lambda m: m.fit(xs, ys),
        result=lambda m: (m.ngram_weights_, m.observation_weights_, m.predict(xs),
                          getattr(m, "context_length_trace_", None), _history(m)))


CASES = {"samplerank": _samplerank, "neg": _neg, "transducer": _transducer, "string_ep": _string_ep,
         "context_model": _context_model}


def _history(model) -> list:
    """``history_`` less its timings (none on a loaded model)."""
    return [{k: v for k, v in row.items() if k not in ("time", "seconds")} for row in getattr(model, "history_", [])]


def _same(a, b) -> bool:
    """Equal bit for bit: arrays elementwise (NaN equal to NaN), containers item by item."""
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return isinstance(b, (list, tuple)) and len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        a, b = np.asarray(a), np.asarray(b)
        return a.shape == b.shape and a.dtype == b.dtype and np.array_equal(a, b, equal_nan=a.dtype.kind == "f")
    if isinstance(a, float) and isinstance(b, float) and np.isnan(a) and np.isnan(b):
        return True
    return a == b


def _spellings(case, knobs):
    common = case["common"] | case.get("method", lambda knobs: {})(knobs)
    new = case["estimator"](options=case["options"](**knobs), **common)
    old = case["estimator"](**knobs, **common)
    return new, old


def _fit_quietly(case, model):
    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)  # the new spelling warns of nothing
        return case["fit"](model)


@pytest.mark.parametrize("name", CASES)
def test_old_and_new_spelling_fit_the_same_model(name):
    case = CASES[name]()
    for knobs in case["knobs"]:
        new, old = _spellings(case, knobs)
        _fit_quietly(case, new)
        with pytest.warns(FutureWarning, match=rf"pass options={case['options'].__name__}\("):
            case["fit"](old)
        assert _same(case["result"](new), case["result"](old))
        # the knobs change the fit: the test would see a knob that does not reach the code
        default = case["estimator"](**case["common"], **case.get("method", lambda knobs: {})(knobs))
        _fit_quietly(case, default)
        assert not _same(case["result"](default), case["result"](new))


@pytest.mark.parametrize("name", CASES)
def test_clone_and_set_params_see_both_spellings(name):
    from sklearn.base import clone

    case = CASES[name]()
    knobs = case["knobs"][0]
    new, old = _spellings(case, knobs)
    field = next(iter(knobs))
    assert old.get_params()["options"] is None and old.get_params()[field] == knobs[field]
    assert new.get_params()["options"] == case["options"](**knobs) and new.get_params()[field] == DEPRECATED
    for estimator in (old, new):
        copy = clone(estimator)
        assert copy.get_params().keys() == estimator.get_params().keys()
        assert all(copy.get_params()[k] == v for k, v in estimator.get_params().items())
    changed = case["estimator"](**case["common"]).set_params(options=case["options"](**knobs))
    assert changed.options == case["options"](**knobs)
    assert case["estimator"](**case["common"]).set_params(**{field: knobs[field]}).get_params()[field] == knobs[field]


@pytest.mark.parametrize("name", CASES)
def test_a_bad_option_is_refused_naming_the_field(name):
    case = CASES[name]()
    (field, value), = case["bad"].items()
    with pytest.raises(ParameterError, match=field) as caught:
        case["fit"](case["estimator"](options=case["options"](**case["bad"]), **case["common"]))
    assert caught.value.name == field
    with pytest.raises(ParameterError, match="options"):
        case["fit"](case["estimator"](options=dataclasses.asdict(case["options"]()), **case["common"]))
    with pytest.raises(ParameterError, match=field), pytest.warns(FutureWarning):
        case["fit"](case["estimator"](**case["bad"], **case["common"]))


@pytest.mark.parametrize("name", [name for name in CASES if name != "string_ep"])
def test_a_saved_model_records_the_flat_parameters_and_loads_equal(name, tmp_path):
    from varorder.models.persist import load_model

    case = CASES[name]()
    knobs = case["knobs"][0]
    new, old = _spellings(case, knobs)
    _fit_quietly(case, new)
    with pytest.warns(FutureWarning):
        case["fit"](old)
    new.save(tmp_path / "new.npz")
    old.save(tmp_path / "old.npz")
    kind = case["estimator"].__name__
    params = load_model(tmp_path / "new.npz", kind, ())[0]
    assert params == load_model(tmp_path / "old.npz", kind, ())[0]
    # the keys are the constructor's flat names, as before the options object: old files load
    assert "options" not in params and all(params[k] == v for k, v in knobs.items())
    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)
        loaded = case["estimator"].load(tmp_path / "new.npz")
    assert loaded.options == case["options"](**knobs)
    assert _same(case["result"](loaded)[:2], case["result"](new)[:2])
