"""Every class that learns from data follows one convention (issue #31, varorder.base):
keyword-only parameters that ``__init__`` only stores, get_params/set_params/clone,
``fit`` returns self and leaves the parameters as given, learned state ends in ``_``,
parameters checked at ``fit`` (a ValueError naming the parameter and the value passed),
NotFittedError before ``fit``.

scikit-learn's ``check_estimator`` cannot run whole: its data checks fit 2-d float arrays
and compare predictions on them, while these estimators learn from sequences, bitexts,
sentences of tags, corpora and string graphs. So the tests run scikit-learn's own checks
that need no data (listed in ``SKLEARN_CHECKS``) on every estimator, and the data checks
that apply to structured outputs are written here against a tiny data set per estimator:
fit returns self (``check_estimators_fit_returns_self``), fit changes no parameter
(``check_estimators_overwrite_params``), fit sets no public attribute without a trailing
underscore (``check_dont_overwrite_parameters``), and calls before fit raise NotFittedError
(``check_estimators_unfitted``). Skipped: every check on 2-d arrays, dtypes, sample
weights, n_features_in_ and classifier/regressor behaviour (no such inputs or outputs).
"""

from __future__ import annotations

import inspect

import numpy as np
import pytest

from varorder.agree.aligner import WordAligner
from varorder.agree.product_em import AgreementEM
from varorder.agree.views import HMMView, MultiViewSequences
from varorder.base import NotFittedError
from varorder.contexts.model import ReifiedContextModel
from varorder.decipher.data import DecipherData, SubstitutionCipher
from varorder.decipher.model import Decipherer
from varorder.factorgraph.samplerank import SampleRankTagger
from varorder.grammar.induce import GrammarInducer
from varorder.lm.estimate import AbsoluteDiscounting, AdditiveSmoothing, ModifiedKneserNey
from varorder.loglinear.model import StructuredLogLinear
from varorder.models.crf import CRF
from varorder.models.features import pos_features
from varorder.models.count_hmm import CategoricalHMM, PoissonHMM
from varorder.models.gaussian_hmm import GaussianHMM
from varorder.models.gmm_hmm import GMMHMM
from varorder.models.hmm import HMM
from varorder.models.hsmm import GaussianHSMM, PoissonHSMM
from varorder.models.memm import MEMM
from varorder.neg.model import NegGenerator
from varorder.neg.task import Candidate, NegDocument, Slot
from varorder.strings.em import EditEM
from varorder.strings.inference import PrunedBP, StringEP
from varorder.strings.model import synthetic_lexicon
from varorder.tasks.pos_highorder import TntEmissions
from varorder.transduce.model import AlignmentTransducer

_WORDS = [["the", "dog", "runs"], ["a", "cat", "sleeps"], ["the", "cat", "runs"], ["a", "dog", "sleeps"]]
_TAGS = [["D", "N", "V"]] * 4


def _tagging(features=True):
    return ([pos_features(w) for w in _WORDS] if features else _WORDS), _TAGS


def _decipher_data():
    rng = np.random.default_rng(0)
    words = ["a", "b", "c"]
    plain = [[words[i] for i in rng.integers(0, 3, size=4)] for _ in range(12)]
    key = SubstitutionCipher.random(3, rng)
    index = {w: i for i, w in enumerate(words)}
    cipher = [key.encipher([index[w] for w in s]) for s in plain[:4]]
    return DecipherData(words, plain[4:], cipher, plain[:4], key)


def _views():
    return [HMMView(m, 2, 3).initialize(m) for m in range(2)]


def _view_shards():
    rng = np.random.default_rng(0)
    return [MultiViewSequences([rng.integers(0, 3, size=(3, 4)) for _ in range(2)], np.array([4, 3, 2]))]


def _graph():
    return synthetic_lexicon(2, seed=3, alphabet_size=3)


def _neg_documents():
    candidates = {"1": [Candidate("Ada Lovelace", "name-plain"), Candidate("she", "pron3-nom")]}
    slots = [Slot(j, j, "1", ["she", "Ada Lovelace"][j % 2], ["pronoun", "name"][j % 2], ["nom", "acc"][j % 2], j, 0,
                  [["dep=nsubj", "dep=obj"][j % 2]]) for j in range(4)]
    return [NegDocument("d0", "bio", [f"w{i}" for i in range(4)], [True] * 4, list(range(4)), [0] * 4, slots,
                        candidates)]


def _corpus_file(tmp_path):
    path = tmp_path / "corpus.txt"
    path.write_text("a b a\nb a b\na a b\n", encoding="utf-8")
    return [str(path)]


# name -> (estimator, fit(estimator, tmp_path), [calls that need a fitted estimator])
CASES = {
    "CRF": (lambda: CRF(max_iterations=3), lambda m, _: m.fit(*_tagging()),
            [lambda m: m.predict(_tagging()[0]), lambda m: m.predict_marginals(_tagging()[0])]),
    "CRF(features)": (lambda: CRF(max_iterations=3, features="bias,w[0],suf2[0]"),
                      lambda m, _: m.fit(*_tagging(False)), [lambda m: m.predict(_WORDS)]),
    "MEMM": (lambda: MEMM(max_iterations=3), lambda m, _: m.fit(*_tagging()), [lambda m: m.predict(_tagging()[0])]),
    "HMM": (lambda: HMM(), lambda m, _: m.fit(_WORDS, _TAGS), [lambda m: m.predict(_WORDS)]),
    "SampleRankTagger": (lambda: SampleRankTagger(n_epochs=2), lambda m, _: m.fit(*_tagging()),
                         [lambda m: m.predict(_tagging()[0])]),
    "WordAligner": (lambda: WordAligner(model="ibm1", ibm1_iterations=1, iterations=1, shard_size=2),
                    lambda m, _: m.fit([(w, [x.upper() for x in w]) for w in _WORDS]),
                    [lambda m: m.align([(["the"], ["THE"])])]),
    "GrammarInducer": (lambda: GrammarInducer(model="dmv", n_iter=1), lambda m, _: m.fit(_TAGS),
                       [lambda m: m.parse(_TAGS)]),
    "Decipherer": (lambda: Decipherer(order=1, inference="exact", n_iter=1),
                   lambda m, _: m.fit(_decipher_data()), [lambda m: m.decode_symbols()]),
    "ReifiedContextModel": (lambda: ReifiedContextModel(num_labels=2, order=2, num_contexts=2, epochs=1),
                            lambda m, _: m.fit([np.eye(3, 2)], [np.array([0, 1, 0])]),
                            [lambda m: m.predict([np.eye(3, 2)])]),
    "AlignmentTransducer": (lambda: AlignmentTransducer(order=2, num_contexts=2, epochs=1, hash_bits=8),
                            lambda m, _: m.fit([["a", "b"], ["b"]], ["ab", "b"]), [lambda m: m.predict([["a"]])]),
    "StructuredLogLinear": (lambda: StructuredLogLinear(order=2, epochs=1, batch_size=2),
                            lambda m, tmp: m.fit(_corpus_file(tmp)), []),
    "NegGenerator": (lambda: NegGenerator(n_epochs=2, anneal_sweeps=2), lambda m, _: m.fit(_neg_documents()),
                     [lambda m: m.predict(_neg_documents())]),
    "ModifiedKneserNey": (lambda: ModifiedKneserNey(order=2), lambda m, tmp: m.fit(_corpus_file(tmp)), []),
    "AbsoluteDiscounting": (lambda: AbsoluteDiscounting(order=2), lambda m, tmp: m.fit(_corpus_file(tmp)), []),
    "AdditiveSmoothing": (lambda: AdditiveSmoothing(order=2), lambda m, tmp: m.fit(_corpus_file(tmp)), []),
    "StringEP": (lambda: StringEP(iterations=1, inner_passes=1), lambda m, _: m.fit(_graph()),
                 [lambda m: m.belief_dfa(_graph().morphemes[0])]),
    "PrunedBP": (lambda: PrunedBP(k=3, iterations=1), lambda m, _: m.fit(_graph()),
                 [lambda m: m.belief_dfa(_graph().morphemes[0])]),
    "EditEM": (lambda: EditEM(method="ep1", iterations=1, method_params={"iterations": 1, "inner_passes": 1}),
               lambda m, _: m.fit(_graph()), []),
    "AgreementEM": (lambda: AgreementEM(submodels=_views(), n_iter=1), lambda m, _: m.fit(_view_shards()), []),
    "GaussianHMM": (lambda: GaussianHMM(n_components=2, n_iter=2, random_state=0),
                    lambda m, _: m.fit(np.arange(12.0).reshape(6, 2) % 5, [4, 2]),
                    [lambda m: m.predict(np.zeros((3, 2))), lambda m: m.sample(3, random_state=0)]),
    # means_prior (a mean: any sign) left None (= 0), so the bad-value check picks means_weight
    "GMMHMM": (lambda: GMMHMM(n_components=2, n_mix=2, n_iter=2, random_state=0, means_prior=None),
               lambda m, _: m.fit(np.arange(24.0).reshape(12, 2) % 7), [lambda m: m.predict(np.zeros((3, 2)))]),
    "PoissonHMM": (lambda: PoissonHMM(n_components=2, n_iter=2, random_state=0),
                   lambda m, _: m.fit(np.arange(12).reshape(6, 2) % 5), [lambda m: m.predict(np.ones((3, 2)))]),
    "CategoricalHMM": (lambda: CategoricalHMM(n_components=2, n_iter=2, random_state=0),
                       lambda m, _: m.fit(np.array([[0], [1], [2], [1]])), [lambda m: m.predict(np.array([[0], [2]]))]),
    "GaussianHSMM": (lambda: GaussianHSMM(n_components=2, max_duration=3, n_iter=2, random_state=0),
                     lambda m, _: m.fit(np.arange(12.0).reshape(6, 2) % 5, [4, 2]),
                     [lambda m: m.predict(np.zeros((3, 2)))]),
    "PoissonHSMM": (lambda: PoissonHSMM(n_components=2, max_duration=3, n_iter=2, random_state=0),
                    lambda m, _: m.fit(np.arange(12).reshape(6, 2) % 5), [lambda m: m.predict(np.ones((3, 2)))]),
    "TntEmissions": (lambda: TntEmissions(), lambda m, _: m.fit(list(zip(_WORDS, _TAGS))),
                     [lambda m: m.log_likelihoods("dog")]),
}
# estimators whose required parameter has no meaningful default (the number of labels of
# an observation-vector model; the submodels agreement EM trains)
NO_DEFAULT = {"ReifiedContextModel": "num_labels", "AgreementEM": "submodels"}


@pytest.mark.parametrize("name", sorted(CASES))
def test_init_is_keyword_only_and_only_stores(name):
    estimator = CASES[name][0]()
    parameters = [p for p in inspect.signature(type(estimator).__init__).parameters.values() if p.name != "self"]
    assert parameters and all(p.kind is p.KEYWORD_ONLY for p in parameters), "positional parameters"
    assert set(vars(estimator)) == {p.name for p in parameters}, "__init__ sets something besides its parameters"
    with pytest.raises(TypeError):
        type(estimator)(0)
    required = [p.name for p in parameters if p.default is p.empty]
    assert required == ([NO_DEFAULT[name]] if name in NO_DEFAULT else [])


SKLEARN_CHECKS = ["check_estimator_cloneable", "check_estimator_repr", "check_no_attributes_set_in_init",
                  "check_get_params_invariance", "check_set_params", "check_do_not_raise_errors_in_init_or_set_params",
                  "check_parameters_default_constructible", "check_estimator_tags_renamed", "check_valid_tag_types",
                  "check_mixin_order"]


@pytest.mark.parametrize("check", SKLEARN_CHECKS)
@pytest.mark.parametrize("name", sorted(CASES))
def test_scikit_learn_checks_without_data(name, check):
    checks = pytest.importorskip("sklearn.utils.estimator_checks", reason="scikit-learn is the optional extra")
    if check == "check_parameters_default_constructible" and type(CASES[name][0]()).__name__ in NO_DEFAULT:
        pytest.skip(f"{name} has a required parameter ({NO_DEFAULT[type(CASES[name][0]()).__name__]})")
    getattr(checks, check)(name, CASES[name][0]())


@pytest.mark.parametrize("name", sorted(CASES))
def test_fit_returns_self_keeps_parameters_and_learns_underscored_state(name, tmp_path):
    make, fit, fitted_calls = CASES[name]
    estimator = make()
    for call in fitted_calls:
        with pytest.raises(NotFittedError, match="not fitted"):
            call(estimator)
    before = {k: repr(v) for k, v in estimator.get_params().items()}
    assert fit(estimator, tmp_path) is estimator
    assert {k: repr(v) for k, v in estimator.get_params().items()} == before, "fit changed a parameter"
    public = {k for k in vars(estimator) if not k.startswith("_")}
    assert all(k.endswith("_") for k in public - set(before)), f"learned state without '_': {public - set(before)}"
    assert public - set(before), "fit learned nothing"
    for call in fitted_calls:
        call(estimator)


def _first_numeric(estimator):
    for key, value in sorted(estimator.get_params().items()):
        if isinstance(value, (int, float)) and not isinstance(value, bool) and key not in ("seed", "random_state"):
            return key
    return None


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("bad", [float("nan"), -7.5, "eleven"])
def test_a_bad_parameter_is_a_value_error_naming_it_at_fit(name, bad, tmp_path):
    make, fit, _ = CASES[name]
    key = _first_numeric(make())
    estimator = make().set_params(**{key: bad})  # accepted by __init__/set_params: checked at fit
    with pytest.raises(ValueError) as info:
        fit(estimator, tmp_path)
    assert key in str(info.value) and repr(bad) in str(info.value), str(info.value)


# the CRF cases of issue #31, each of which used to escape as another error or train silently
@pytest.mark.parametrize("params, name, shown", [
    ({"period": -3}, "period", "-3"), ({"max_iterations": 2.5}, "max_iterations", "2.5"),
    ({"c2": float("nan")}, "c2", "nan"), ({"step_size": -1, "algorithm": "sgd"}, "step_size", "-1"),
    ({"c1": float("inf")}, "c1", "inf"), ({"delta": -1e-3}, "delta", "-0.001"),
    ({"batch_size": 0, "algorithm": "adagrad"}, "batch_size", "0"), ({"features": "w[0],nope[1]"}, "features", "nope"),
    ({"verbose": "yes"}, "verbose", "'yes'"), ({"algorithm": "newton"}, "algorithm", "'newton'"),
])
def test_crf_parameter_errors_name_the_parameter_and_value(params, name, shown):
    with pytest.raises(ValueError, match=rf"{name}=\S*{shown}"):
        CRF(**params).fit(*_tagging())


def test_crf_predict_before_fit_is_not_fitted_error():
    with pytest.raises(NotFittedError) as info:
        CRF().predict(_tagging()[0])
    # scikit-learn's class when it is installed; either way a ValueError and an AttributeError
    assert isinstance(info.value, ValueError) and isinstance(info.value, AttributeError)
    sklearn = pytest.importorskip("sklearn.exceptions")
    assert NotFittedError is sklearn.NotFittedError


SUPERVISED = {"CRF", "CRF(features)", "MEMM", "HMM", "SampleRankTagger", "ReifiedContextModel", "AlignmentTransducer"}


@pytest.mark.parametrize("name", sorted(CASES))
def test_target_tag_says_whether_fit_takes_labels(name):
    pytest.importorskip("sklearn")
    from sklearn.utils import get_tags

    # the HMM also learns without labels (Baum-Welch), so it does not require them
    required = name in SUPERVISED and name != "HMM"
    assert get_tags(CASES[name][0]()).target_tags.required is required
