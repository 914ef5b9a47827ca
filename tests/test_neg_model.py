"""NEG models: the exact chain baseline against brute force over the candidate lists, its likelihood
gradient against finite differences, the unary model's argmax, SampleRank learning a separable toy
task, persistence, the CLI, and (when ../shared has GUM) the task's counts."""

from __future__ import annotations

import itertools
import os

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from varorder.cli.neg import COMMAND
from varorder.factorgraph import domains
from varorder.neg import model as neg_model
from varorder.neg.model import NegGenerator
from varorder.neg.task import ATTRS, Candidate, NegDocument, Slot, load_task, save_task
from _shared_data import SHARED_DATA

_FEATURES = ["dep=nsubj", "dep=obj", "prevpos=VERB", "prevpos=BOS", "first_in_doc", "first_in_paragraph",
             "prevdist=1", "other_between=True"]


def _random_documents(rng, n_docs=2, max_slots=4, n_entities=2, max_cands=3):
    documents = []
    for d in range(n_docs):
        candidates = {}
        for e in range(n_entities):
            size = int(rng.integers(1, max_cands + 1))
            attrs = rng.choice(len(ATTRS), size=size, replace=True)
            candidates[str(e)] = [Candidate(f"e{e} re{k}", ATTRS[a]) for k, a in enumerate(attrs)]
        n_slots = int(rng.integers(1, max_slots + 1))
        words = [f"w{i}" for i in range(2 * n_slots + 2)]
        slots = []
        for j in range(n_slots):
            entity = str(int(rng.integers(n_entities)))
            gold = candidates[entity][int(rng.integers(len(candidates[entity])))]
            features = list(rng.choice(_FEATURES, size=3, replace=False))
            slots.append(Slot(2 * j, 2 * j, entity, gold.text, gold.reg08, str(rng.choice(["nom", "acc", "gen"])),
                              j // 2, (j // 2) // 2, features))  # the sentence's own paragraph
        documents.append(NegDocument(f"d{d}", "bio", words, [True] * len(words), list(range(0, len(words), 4)),
                                     [s // 2 for s in range(len(range(0, len(words), 4)))], slots, candidates))
    return documents


def _chain_design(documents):
    design = neg_model._Design(documents, None, fit=True)
    layout = domains.DomainLayout(design.X.shape[1], len(ATTRS), neg_model._N_CHAIN_CODES)
    return design, layout


def _brute_force(design, layout, theta):
    graph = design.graph(other_pairs=False)
    configs = [np.array(c) for c in itertools.product(*[range(s) for s in graph.domain_sizes])]
    scores = np.array([domains.full_score(graph, layout, theta, c) for c in configs])
    return configs, scores


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 2 ** 31 - 1))
def test_chain_viterbi_and_partition_equal_brute_force(seed):
    rng = np.random.default_rng(seed)
    documents = _random_documents(rng)
    design, layout = _chain_design(documents)
    if np.prod(np.diff(design.cand_ptr).astype(float)) > 3000:
        return
    theta = 2.0 * rng.normal(size=layout.n_params)
    configs, scores = _brute_force(design, layout, theta)
    chosen = neg_model._viterbi_chains(design, layout, theta)
    best = domains.full_score(design.graph(other_pairs=False), layout, theta, chosen)
    assert best == pytest.approx(scores.max())
    # the negative log-likelihood at l2 = 0 is log Z − s(gold): Z by enumeration
    value, _ = neg_model._chain_objective(design, layout, 0.0)(theta)
    gold = domains.full_score(design.graph(other_pairs=False), layout, theta, design.gold)
    log_z = np.logaddexp.reduce(scores)
    assert value == pytest.approx(log_z - gold)


def test_chain_gradient_matches_finite_differences():
    rng = np.random.default_rng(4)
    documents = _random_documents(rng, n_docs=2, max_slots=5)
    design, layout = _chain_design(documents)
    objective = neg_model._chain_objective(design, layout, 0.3)
    theta = rng.normal(size=layout.n_params)
    _, grad = objective(theta)
    used = np.flatnonzero(np.abs(grad) > 1e-12)
    for i in rng.choice(used, size=min(25, used.size), replace=False):
        step = np.zeros_like(theta)
        step[i] = 1e-5
        numeric = (objective(theta + step)[0] - objective(theta - step)[0]) / 2e-5
        assert grad[i] == pytest.approx(numeric, rel=1e-4, abs=1e-6)


def test_unary_model_is_the_independent_argmax():
    rng = np.random.default_rng(2)
    documents = _random_documents(rng, n_docs=3)
    model = NegGenerator(method="unary").fit(documents)
    design = neg_model._Design(documents, model._indexer, fit=False)
    scores = design.X @ model.theta_
    expected = [int(np.argmax(scores[design.cand_ptr[t]:design.cand_ptr[t + 1]])) for t in range(design.n_slots)]
    assert [k for chosen in model.predict_indices(documents) for k in chosen] == expected


def _separable_documents(n_docs=6):
    """Subjects are pronouns, objects names: a task every model with the relation feature can learn."""
    documents = []
    for d in range(n_docs):
        candidates = {"1": [Candidate("Ada Lovelace", "name-plain"), Candidate("she", "pron3-nom"),
                            Candidate("her", "pron3-acc")]}
        slots = []
        for j in range(6):
            subject = (j + d) % 2 == 0
            gold = "she" if subject else "Ada Lovelace"
            slots.append(Slot(j, j, "1", gold, "pronoun" if subject else "name", "nom" if subject else "acc", j,
                              0, ["dep=nsubj" if subject else "dep=obj"]))
        words = [f"w{i}" for i in range(6)]
        documents.append(NegDocument(f"d{d}", "bio", words, [True] * 6, list(range(6)), [0] * 6, slots, candidates))
    return documents


@pytest.mark.parametrize("kwargs", [{"method": "samplerank"}, {"method": "samplerank", "proposal": "mh"},
                                    {"method": "samplerank", "warm_start": "chain", "n_epochs": 3},
                                    {"method": "samplerank", "link_between": True, "rule": "mira", "C": 0.01},
                                    {"method": "samplerank", "warm_start": "unary", "unary_step": 0.0,
                                     "step_size": 0.1},
                                    {"method": "chain"}, {"method": "unary"}])
def test_models_learn_a_separable_task(kwargs):
    documents = _separable_documents()
    model = NegGenerator(**({"n_epochs": 10} | kwargs)).fit(documents)
    predicted = model.predict(documents)
    assert predicted == [[s.gold for s in d.slots] for d in documents]


def test_warm_start_from_the_unary_fit_with_its_weights_held():
    """warm_start="unary" with unary_step 0: the unary block stays (b)'s exact fit; the rest learns."""
    documents = _random_documents(np.random.default_rng(4), n_docs=4, max_slots=6)
    unary = NegGenerator(method="unary").fit(documents)
    model = NegGenerator(warm_start="unary", unary_step=0.0, n_epochs=3, margin=100.0).fit(documents)
    F = model.layout_.n_features
    # (two L-BFGS fits of one design may differ in the last bits: compared to round-off)
    np.testing.assert_allclose(model.theta_[:F], unary.theta_, rtol=0, atol=1e-12)
    assert np.any(model.theta_[F:] != 0.0)
    moved = NegGenerator(warm_start="unary", unary_step=1.0, n_epochs=3, margin=100.0).fit(documents)
    assert np.abs(moved.theta_[:F] - unary.theta_).max() > 1e-3


def test_samplerank_with_unary_factors_only_scores_the_unary_sum():
    """chain_pairs, other_pairs and link_factors off: the graph's score is the candidates' unary scores' sum."""
    documents = _random_documents(np.random.default_rng(6), n_docs=3, max_slots=5)
    model = NegGenerator(chain_pairs=False, other_pairs=False, link_factors=False, n_epochs=3).fit(documents)
    full = NegGenerator(n_epochs=3).fit(documents)
    design = neg_model._Design(documents, model._indexer, fit=False)
    assert design.graph(False, False).pairs.shape == (0, 3) and design.graph().pairs.shape[0] > 0
    chosen = model.predict_indices(documents)
    flat = np.array([k for c in chosen for k in c])
    unary = design.X @ model.theta_[:design.X.shape[1]]
    assert model.score_configuration(documents, chosen) == pytest.approx(unary[design.cand_ptr[:-1] + flat].sum())
    assert full.score_configuration(documents, chosen) != pytest.approx(
        (design.X @ full.theta_[:design.X.shape[1]])[design.cand_ptr[:-1] + flat].sum())


def test_person_cues_see_the_context_but_not_the_holes():
    """_slot_cues reads the sentence around a slot without any slot's words (the holes' REs are what is
    generated) and counts the quote marks since the paragraph's start; the cue features carry the
    candidate's grammatical person."""
    words = ["I", "told", "him", '"', "you", "know", "me", '"', ".", "She", "left", "."]
    slots = [Slot(0, 0, "1", "I", "pronoun", "nom", 0, 0, ["genre=bio"]),
             Slot(2, 2, "2", "him", "pronoun", "acc", 0, 0, ["genre=bio"]),
             Slot(6, 6, "1", "me", "pronoun", "acc", 0, 0, ["genre=bio"]),
             Slot(9, 9, "1", "She", "pronoun", "nom", 1, 0, ["genre=bio"])]
    document = NegDocument("d", "bio", words, [True] * 12, [0, 9], [0, 0], slots,
                           {"1": [Candidate("I", "pron-nom"), Candidate("she", "pron3-nom"),
                                  Candidate("me", "pron-acc")],
                            "2": [Candidate("him", "pron3-acc")]})
    holes = {0, 2, 6, 9}
    # sentence 0 without its holes: told " you know " . → a 2nd person word, no 1st person one
    assert neg_model._slot_cues(document, slots[0], holes) == ["ctx1=False", "ctx2=True", "quoted=False"]
    assert neg_model._slot_cues(document, slots[2], holes) == ["ctx1=False", "ctx2=True", "quoted=True"]
    assert neg_model._slot_cues(document, slots[3], holes) == ["ctx1=False", "ctx2=False", "quoted=False"]
    feats = neg_model._candidate_features(document, slots[2], document.candidates["1"], 0,
                                          ["ctx1=False", "ctx2=True", "quoted=True"])
    assert "cue:quoted=True|p=1" in feats and "cue:ctx2=True|p=1|genre=bio" in feats
    feats = neg_model._candidate_features(document, slots[2], document.candidates["1"], 1, ["quoted=True"])
    assert "cue:quoted=True|p=3" in feats
    for slot in slots:  # the cues only add features: every candidate keeps its features without them
        candidates = document.candidates[slot.entity]
        for k in range(len(candidates)):
            plain = neg_model._candidate_features(document, slot, candidates, k)
            cued = neg_model._candidate_features(document, slot, candidates, k, neg_model._slot_cues(document, slot,
                                                                                                     holes))
            assert cued[:len(plain)] == plain and all(f.startswith("cue:") for f in cued[len(plain):])
    model = NegGenerator(method="unary", cues=True).fit([document])
    assert "cue:quoted=True|p=1|A=pron-nom" not in model.feature_names_  # cues conjoin the person only
    assert "cue:quoted=True|p=1" in model.feature_names_


def test_samplerank_is_reproducible_and_persists(tmp_path):
    documents = _random_documents(np.random.default_rng(9), n_docs=4, max_slots=6)
    a = NegGenerator(n_epochs=4, random_state=3).fit(documents)
    b = NegGenerator(n_epochs=4, random_state=3).fit(documents)
    assert np.array_equal(a.theta_, b.theta_)
    path = tmp_path / "m.npz"
    a.save(path)
    loaded = NegGenerator.load(path)
    assert np.array_equal(loaded.theta_, a.theta_)
    assert loaded.predict_indices(documents) == a.predict_indices(documents)
    # a damaged file is refused naming it
    import json
    import zipfile

    with np.load(path) as archive:
        arrays = {k: archive[k] for k in archive.files}
    meta = json.loads(arrays["__meta__"].tobytes())
    meta.pop("sha256", None)  # as a file written before the content digest: the field checks must refuse it
    meta["state"]["layout"][2] = 99
    arrays["__meta__"] = np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)
    np.savez(tmp_path / "bad.npz", **arrays)
    with pytest.raises(ValueError, match="bad.npz: layout"):
        NegGenerator.load(tmp_path / "bad.npz")
    meta["state"]["layout"][2] = a.layout_.n_pair_codes
    arrays["__meta__"] = np.frombuffer(json.dumps({**meta, "params": {**meta["params"], "method": "x"}}).encode(),
                                       dtype=np.uint8)
    np.savez(tmp_path / "bad2.npz", **arrays)
    with pytest.raises(ValueError, match="bad2.npz.*method"):
        NegGenerator.load(tmp_path / "bad2.npz")
    del zipfile


def test_task_file_round_trip_and_errors(tmp_path):
    documents = _random_documents(np.random.default_rng(1))
    path = tmp_path / "task.json.gz"
    save_task(path, documents)
    loaded = load_task(path)
    assert [d.slots for d in loaded] == [d.slots for d in documents]
    assert [d.candidates for d in loaded] == [d.candidates for d in documents]
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": "varorder-neg-task", "version": 1, "documents": [{"words": []}]}')
    with pytest.raises(ValueError, match="bad.json: invalid NEG task"):
        load_task(bad)


def test_cli_train_predict_eval(tmp_path):
    documents = _separable_documents(3)
    task = tmp_path / "task.json"
    save_task(task, documents)
    runner = CliRunner()
    result = runner.invoke(COMMAND, ["train", str(task), "-o", str(tmp_path / "m.npz"), "--epochs", "5"])
    assert result.exit_code == 0, result.output
    result = runner.invoke(COMMAND, ["predict", str(tmp_path / "m.npz"), str(task), "-o", str(tmp_path / "out.txt"),
                                     "--slots", str(tmp_path / "slots.tsv")])
    assert result.exit_code == 0, result.output
    text = (tmp_path / "out.txt").read_text()
    assert text.startswith("# doc d0\n[1: She]")  # sentence-initial RE capitalised and marked
    rows = (tmp_path / "slots.tsv").read_text().splitlines()
    assert rows[0].split("\t")[:6] == ["doc", "slot", "entity", "gold", "chosen", "type"]
    assert len(rows) == 1 + 18
    result = runner.invoke(COMMAND, ["eval", str(tmp_path / "m.npz"), str(task)])
    assert result.exit_code == 0 and "reg08 type accuracy : 1.000000" in result.output
    result = runner.invoke(COMMAND, ["eval", str(task), str(task)])
    assert result.exit_code != 0 and "Traceback" not in result.output
    # the extensions' options reach the saved model
    result = runner.invoke(COMMAND, ["train", str(task), "-o", str(tmp_path / "x.npz"), "--epochs", "2", "--cues",
                                     "--link-between", "--warm-start", "unary", "--unary-step", "0", "--step-size",
                                     "0.1", "--rule", "mira", "-C", "0.01"])
    assert result.exit_code == 0, result.output
    params = NegGenerator.load(tmp_path / "x.npz").get_params()
    options = params["options"]  # the rarely used knobs, in NegGenerator(options=NegOptions(...))
    assert (params["cues"], params["link_between"], params["warm_start"], options.unary_step, options.step_size,
            options.C) == (True, True, "unary", 0.0, 0.1, 0.01)


GUM = str(SHARED_DATA / "gum")


@pytest.mark.shared_data
@pytest.mark.skipif(not os.path.exists(f"{GUM}/en_gum-ud-dev.conllu.gz"), reason="GUM (../shared/data/gum) absent")
def test_gum_dev_task_counts(tmp_path):
    runner = CliRunner()
    result = runner.invoke(COMMAND, ["prepare", f"{GUM}/en_gum-ud-dev.conllu.gz", "-o", str(tmp_path / "dev.json")])
    assert result.exit_code == 0, result.output
    import json

    counts = json.loads(result.output)
    assert (counts["documents"], counts["entities"], counts["slots"]) == (22, 127, 962)


def test_the_design_cache_never_answers_for_an_indexer_that_only_shares_an_id():
    """_design's key holds ids; an id is reused once its object is freed, so an entry whose key matches
    but whose indexer (or slot lists) are other objects must not be returned."""
    documents = _separable_documents(2)
    model = NegGenerator(method="unary", n_epochs=2).fit(documents)
    indexer = model._indexer
    real = neg_model._design(documents, indexer, fit=False)
    slots = [d.slots for d in documents]
    key = (id(documents), tuple((id(s), len(s)) for s in slots), False, id(indexer), False)
    stale = object()
    for entry in ((documents, object(), slots, stale), (documents, indexer, [list(s) for s in slots], stale)):
        neg_model._DESIGNS[key] = entry  # as if an earlier indexer / slot list had lived at these ids
        fresh = neg_model._design(documents, indexer, fit=False)
        assert fresh is not stale
        assert np.array_equal(fresh.X.toarray() if hasattr(fresh.X, "toarray") else fresh.X,
                              real.X.toarray() if hasattr(real.X, "toarray") else real.X)
    neg_model._DESIGNS[key] = (documents, indexer, slots, real)
    assert neg_model._design(documents, indexer, fit=False) is real
