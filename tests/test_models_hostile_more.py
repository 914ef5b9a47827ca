"""Model files of every other estimator under attack (the CRF, MEMM and HMM have their own
file, tests/test_models_hostile_files.py): the word aligner, the SampleRank tagger, the
log-linear LM, the decipherer, the grammar inducer and the reified-context model.

Byte mutations and truncations of a saved file, metadata fields replaced by arbitrary
JSON, arrays replaced by other dtypes, shapes and values. Loading must end in a
ValueError naming the file, or give a model that works on the training inputs (valid,
finite outputs) — never another exception type, never a model that loads and then
fails, reads out of bounds or goes NaN."""

from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from varorder.testing.hostile import HypothesisChooser, model_members, mutate_array, mutate_bytes, mutate_metadata

SETTINGS = settings(max_examples=int(os.environ.get("HOSTILE_EXAMPLES", "25")), deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture])

PAIRS = [(["the", "house"], ["das", "haus"]), (["the", "book"], ["das", "buch"]),
         (["a", "book"], ["ein", "buch"]), (["a", "small", "house"], ["ein", "kleines", "haus"])]
TAGS = [["D", "N", "V"], ["D", "J", "N", "V", "D", "N"], ["N", "V", "P", "D", "N"], ["N", "V"]]
FEATURES = [[{"w=the": 1.0}, {"w=dog": 1.0}], [{"w=a": 1.0}, {"w=cat": 1.0}, {"w=runs": 1.0}]]
LABELS = [["D", "N"], ["D", "N", "V"]]


def _rcm_task():
    rng = np.random.default_rng(0)
    xs = [rng.normal(size=(int(rng.integers(2, 5)), 3)) for _ in range(12)]
    ys = [rng.integers(0, 3, size=len(x)) for x in xs]
    return xs, ys


def _aligner(tmp):
    from varorder.agree.aligner import WordAligner

    model = WordAligner(model="hmm", iterations=2, ibm1_iterations=2).fit(PAIRS)

    def use(m):
        links = m.align(PAIRS)
        assert all(0 <= i < len(e) and 0 <= j < len(f) for (e, f), s in zip(PAIRS, links) for i, j in s)
        forward, reverse = m.sentence_scores(PAIRS)
        assert not np.isnan(forward).any() and not np.isnan(reverse).any()
        for method in ("grow-diag-final", "intersection"):
            m.align(PAIRS, method=method)
    return model, use


def _samplerank(tmp):
    from varorder.factorgraph import SampleRankTagger

    model = SampleRankTagger(n_epochs=2, random_state=0).fit(FEATURES, LABELS)

    def use(m):
        predicted = m.predict(FEATURES)
        assert [len(p) for p in predicted] == [len(x) for x in FEATURES]
        assert all(label in m.classes_ for p in predicted for label in p)
    return model, use


def _loglinear(tmp):
    from varorder.loglinear.model import StructuredLogLinear

    rng = np.random.default_rng(5)
    text = tmp / "train.txt"
    text.write_text("\n".join(" ".join(rng.choice(["the", "cat", "sat", "on", "a"], size=rng.integers(2, 6)))
                              for _ in range(40)) + "\n")
    model = StructuredLogLinear(order=3, epochs=1, batch_size=20).fit(text).model_

    def use(m):
        perplexity = m.perplexity(["the cat sat", "a cat on the mat"])
        assert np.isfinite(perplexity) and perplexity >= 1.0 - 1e-9
    return model, use


def _decipherer(tmp):
    from varorder.decipher import Decipherer, prepare

    rng = np.random.default_rng(0)
    sentences = [[["a", "b", "c", "d"][i] for i in rng.choice(4, size=int(rng.integers(1, 6)))] for _ in range(80)]
    data = prepare(sentences, num_words=4, num_cipher=20, seed=1)
    model = Decipherer(order=1, inference="exact", n_iter=2).fit(data)
    model.words_ = data.words

    def use(m):
        mapping = m.decode_symbols()
        assert mapping.dtype.kind in "iu" and ((mapping >= 0) & (mapping < len(m.words_))).all()
        assert np.isfinite(m.emission_).all()
    return model, use


def _grammar(tmp):
    from varorder.grammar.induce import GrammarInducer

    model = GrammarInducer(model="product", n_iter=1).fit(TAGS)

    def use(m):
        heads, spans = m.parse(TAGS)
        assert len(heads) == len(spans) == len(TAGS)
        assert np.isfinite(m.log_likelihood(TAGS))
    return model, use


def _rcm(tmp):
    from varorder.contexts.model import ReifiedContextModel

    xs, ys = _rcm_task()
    model = ReifiedContextModel(3, order=2, num_contexts=3, epochs=1).fit(xs, ys)

    def use(m):
        predicted = m.predict(xs)
        assert all(len(p) == len(x) and ((np.asarray(p) >= 0) & (np.asarray(p) < 3)).all()
                   for p, x in zip(predicted, xs))
    return model, use


KINDS = {"WordAligner": _aligner, "SampleRankTagger": _samplerank, "LogLinearLM": _loglinear,
         "Decipherer": _decipherer, "GrammarInducer": _grammar, "ReifiedContextModel": _rcm}


@pytest.fixture(scope="module", params=sorted(KINDS))
def saved(request, tmp_path_factory):
    tmp = tmp_path_factory.mktemp(request.param)
    model, use = KINDS[request.param](tmp)
    path = tmp / "model.npz"
    if request.param == "Decipherer":
        model.save(path, model.words_)
    else:
        model.save(path)
    use(type(model).load(path))  # the unharmed file loads and works
    return type(model), use, path


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


@SETTINGS
@given(data=st.data())
def test_metadata_mutations(saved, tmp_path, data):
    cls, use, path = saved
    bad = tmp_path / "meta.npz"
    np.savez(bad, **mutate_metadata(HypothesisChooser(data), model_members(path)))
    check_load(cls, use, bad)


@SETTINGS
@given(data=st.data())
def test_array_mutations(saved, tmp_path, data):
    cls, use, path = saved
    bad = tmp_path / "arrays.npz"
    np.savez(bad, **mutate_array(HypothesisChooser(data), model_members(path)))
    check_load(cls, use, bad)
