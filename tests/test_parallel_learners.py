"""Issue #35, the learners added after the first round: the phoneme → spelling transducer's mini-batch
mode, the phylogenetic HMM on Dask, the aligner reading its corpus on the workers, and ``lm train``'s
Dask path merging in-memory counts. Each: 1 process vs a LocalCluster of 2 worker processes vs
joblib with 2 jobs give the same model (bit for bit: every reduction here is a fixed-order sum or an
integer merge).

The Dask tests share one LocalCluster of two worker processes (loopback only) for the module."""

from __future__ import annotations

import numpy as np
import pytest
from click.testing import CliRunner

from local_clusters import local_cluster
from varorder.parallel import JoblibExecutor, SerialExecutor, ThreadExecutor


@pytest.fixture(scope="module")
def dask_client():
    pytest.importorskip("distributed")
    with local_cluster(processes=True) as (cluster, client):
        yield client


# ---- AlignmentTransducer: the mini-batch mode ---------------------------------------------------

def _transduction_pairs(n=16, seed=1):
    table = {"a": "x", "b": "yy", "c": "z"}
    rng = np.random.default_rng(seed)
    inputs = [list(rng.choice(list(table), size=int(rng.integers(1, 4)))) for _ in range(n)]
    return inputs, ["".join(table[p] for p in x) for x in inputs]


_SMALL = dict(num_contexts=2, order=3, max_advance=2, hash_bits=12, bigram_epochs=1, track_every=5, seed=4, epochs=2)


def _transducer(**params):
    from varorder.transduce.model import AlignmentTransducer

    return AlignmentTransducer(**{**_SMALL, **params})


def _same_transducer(a, b):
    assert np.array_equal(a.weights_, b.weights_)
    assert [r["train_log_likelihood"] for r in a.history_] == [r["train_log_likelihood"] for r in b.history_]
    assert [r["updates"] for r in a.history_] == [r["updates"] for r in b.history_]
    assert a.context_length_trace_ == b.context_length_trace_


@pytest.mark.parametrize("method, truncation", [("rcms", 0.0), ("forced", 0.0), ("hybrid", 0.2)])
def test_transducer_minibatches_give_the_serial_model_on_every_local_executor(method, truncation):
    inputs, outputs = _transduction_pairs()
    params = dict(method=method, truncation=truncation, batch_size=5, n_shards=3)
    serial = _transducer(**params).fit(inputs, outputs)
    assert np.count_nonzero(serial.weights_) > 0 and serial.history_[0]["updates"] > 0
    for executor in ({"executor": ThreadExecutor(2)}, {"n_jobs": 2}):
        _same_transducer(serial, _transducer(**params, **executor).fit(inputs, outputs))


@pytest.mark.parametrize("method, truncation", [("rcms", 0.0), ("rcms", 0.3), ("forced", 0.0)])
def test_transducer_minibatches_of_one_example_are_the_online_protocol(method, truncation):
    # one example per batch and one piece: the summed gradient is the example's, the step the same
    inputs, outputs = _transduction_pairs(n=10)
    online = _transducer(method=method, truncation=truncation).fit(inputs, outputs)
    batched = _transducer(method=method, truncation=truncation, batch_size=1).fit(inputs, outputs)
    _same_transducer(online, batched)


def test_transducer_minibatch_step_is_one_adagrad_step_on_the_summed_gradient():
    from varorder.models.optim import AdaGrad

    inputs, outputs = _transduction_pairs(n=9)
    model = _transducer(method="rcms", epochs=1, batch_size=len(inputs), n_shards=4).fit(inputs, outputs)
    reference = _transducer(method="rcms", epochs=0).fit(inputs, outputs)  # zero weights, same codec
    total = np.zeros(reference.weights_.size)
    for x, y in zip(inputs, outputs):
        _, idx, val, _ = reference.example_gradient(reference.codec_.encode_input(x), reference.codec_.encode_output(y))
        np.add.at(total, idx, val)
    weights = np.zeros_like(total)
    from varorder.transduce import TransducerOptions

    defaults = TransducerOptions()  # the estimator's AdaGrad η, δ (its options=None)
    AdaGrad(defaults.step_size, defaults.delta).step(weights, total)
    np.testing.assert_allclose(model.weights_, weights, rtol=1e-12, atol=1e-12)
    assert model.history_[0]["updates"] == len(inputs)


def test_transducer_executor_settings_need_the_minibatch_mode(tmp_path):
    inputs, outputs = _transduction_pairs(n=4)
    for bad in ({"n_jobs": 2}, {"executor": SerialExecutor()}, {"n_shards": 2}):
        with pytest.raises(ValueError, match="mini-batch"):
            _transducer(**bad).fit(inputs, outputs)
    with pytest.raises(ValueError, match="batch_size"):
        _transducer(batch_size=0).fit(inputs, outputs)
    # the executor is a setting of the run, not of the model file
    model = _transducer(batch_size=2, executor=ThreadExecutor(2), epochs=1).fit(inputs, outputs)
    model.save(tmp_path / "m.npz")
    again = type(model).load(tmp_path / "m.npz")
    assert again.executor is None and again.batch_size == 2
    assert again.predict(inputs) == model.predict(inputs)


@pytest.mark.slow
def test_transducer_minibatches_on_a_local_dask_cluster_give_the_serial_model(dask_client):
    # joblib's 2 worker processes: test_transducer_minibatches_give_the_serial_model_on_every_local_executor
    inputs, outputs = _transduction_pairs()
    params = dict(method="rcms", batch_size=5, n_shards=3)
    serial = _transducer(**params).fit(inputs, outputs)
    _same_transducer(serial, _transducer(**params, executor=dask_client).fit(inputs, outputs))


@pytest.mark.slow
def test_transduce_train_cli_on_jobs_and_dask_writes_the_serial_model(tmp_path, dask_client):
    from varorder.cli.transduce import COMMAND

    inputs, outputs = _transduction_pairs()
    data = tmp_path / "pairs.tsv"
    data.write_text("".join(f"{' '.join(x)}\t{y}\n" for x, y in zip(inputs, outputs)), encoding="utf-8")
    common = [str(data), "--size", "2", "--order", "3", "--max-advance", "2", "--hash-bits", "12", "--epochs", "2",
              "--batch-size", "5", "--shards", "3"]
    runner = CliRunner()
    for name, extra in (("serial", []), ("jobs", ["--jobs", "2"]),
                        ("dask", ["--dask-scheduler", dask_client.scheduler.address])):
        result = runner.invoke(COMMAND, ["train", *common, "-o", str(tmp_path / f"{name}.npz"), *extra])
        assert result.exit_code == 0, result.output
    serial = dict(np.load(tmp_path / "serial.npz"))
    for name in ("jobs", "dask"):
        other = dict(np.load(tmp_path / f"{name}.npz"))
        assert sorted(other) == sorted(serial)
        for key in serial:
            assert np.array_equal(serial[key], other[key]), (name, key)
    result = runner.invoke(COMMAND, ["train", str(data), "-o", str(tmp_path / "x.npz"), "--jobs", "2"])
    assert result.exit_code != 0 and "--batch-size" in result.output


# ---- WordAligner.fit_sources: the corpus read and kept on the workers ----------------------------

def _bitext_files(tmp_path, sizes=(23, 31, 17), seed=0):
    """Joint bitext files ('english ||| french' per line) with a word-for-word lexicon, one per size."""
    rng = np.random.default_rng(seed)
    paths, pairs = [], []
    for k, n in enumerate(sizes):
        lines = []
        for _ in range(n):
            e = [f"e{w}" for w in rng.integers(0, 12, int(rng.integers(2, 7)))]
            f = [w.replace("e", "f") for w in e][::-1 if rng.random() < 0.3 else 1]
            if rng.random() < 0.3:
                f.insert(0, "fnull")
            lines.append(f"{' '.join(e)} ||| {' '.join(f)}\n")
            pairs.append((e, f))
        path = tmp_path / f"part{k}.txt"
        path.write_text("".join(lines), encoding="utf-8")
        paths.append(str(path))
    return paths, pairs


def _aligner_arrays(aligner, path):
    aligner.save(path)
    with np.load(path) as data:
        return {name: data[name] for name in data.files}


def _same_arrays(a, b, where=""):
    assert sorted(a) == sorted(b)
    for name in a:
        assert np.array_equal(a[name], b[name]), (where, name, np.abs(a[name] - b[name]).max())


_ALIGNER = dict(ibm1_iterations=3, iterations=2, shard_size=10, max_length=5)


@pytest.mark.parametrize("training", ["agreement", "independent"])
def test_aligner_fit_sources_gives_the_local_model_on_every_local_executor(tmp_path, training):
    from varorder.agree.aligner import WordAligner
    from varorder.agree.corpus import LongPairWarning
    from varorder.io.bitext import iter_joint

    paths, pairs = _bitext_files(tmp_path)
    with pytest.warns(LongPairWarning):
        local = WordAligner(training=training, **_ALIGNER).fit_sources(paths, iter_joint)
    expected = _aligner_arrays(local, tmp_path / "local.npz")
    for executor in (ThreadExecutor(2), JoblibExecutor(2)):
        with pytest.warns(LongPairWarning):
            other = WordAligner(training=training, executor=executor, **_ALIGNER).fit_sources(paths, iter_joint)
        _same_arrays(expected, _aligner_arrays(other, tmp_path / "other.npz"), executor)
        assert other.history_ == local.history_
    # the whole corpus in memory: the same vocabularies and pair table; the tables differ only in
    # the order the pieces' counts are added
    with pytest.warns(LongPairWarning):
        whole = WordAligner(training=training, **_ALIGNER).fit(pairs)
    assert whole.e_vocab_.tokens == local.e_vocab_.tokens and whole.f_vocab_.tokens == local.f_vocab_.tokens
    assert np.array_equal(whole.pairs_.keys, local.pairs_.keys)
    for a, b in zip(whole.models_, local.models_):
        np.testing.assert_allclose(a.table_, b.table_, rtol=1e-9, atol=1e-12)
    assert whole.align(pairs[:20]) == local.align(pairs[:20])


def test_aligner_fit_sources_on_one_piece_is_fit_bit_for_bit(tmp_path):
    from varorder.agree.aligner import WordAligner
    from varorder.io.bitext import iter_joint

    paths, pairs = _bitext_files(tmp_path, sizes=(40,), seed=3)
    params = dict(_ALIGNER, max_length=None)
    whole = _aligner_arrays(WordAligner(**params).fit(pairs), tmp_path / "whole.npz")
    _same_arrays(whole, _aligner_arrays(WordAligner(**params).fit_sources(paths, iter_joint), tmp_path / "s.npz"))
    with pytest.raises(ValueError, match="sources is empty"):
        WordAligner().fit_sources([], iter_joint)
    (tmp_path / "empty.txt").write_text("")
    with pytest.raises(ValueError, match="at least one sentence pair"):
        WordAligner().fit_sources([str(tmp_path / "empty.txt")], iter_joint)


@pytest.mark.slow
def test_aligner_fit_sources_on_a_local_dask_cluster_writes_the_local_model_file(tmp_path, dask_client):
    from varorder.agree.aligner import WordAligner
    from varorder.agree.corpus import LongPairWarning
    from varorder.io.bitext import iter_joint

    paths, _ = _bitext_files(tmp_path, seed=5)
    with pytest.warns(LongPairWarning):
        local = _aligner_arrays(WordAligner(**_ALIGNER).fit_sources(paths, iter_joint), tmp_path / "local.npz")
    with pytest.warns(LongPairWarning):
        remote = WordAligner(executor=dask_client, **_ALIGNER).fit_sources(paths, iter_joint)
    _same_arrays(local, _aligner_arrays(remote, tmp_path / "dask.npz"))


# ---- the phylogenetic HMM on a Dask cluster -----------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("mode", ["independent", "parameter"])
def test_phylo_training_on_a_local_dask_cluster_gives_the_serial_model(mode, dask_client):
    from test_agree_phylo import _synthetic_alignment

    from varorder.agree.phylo import PhyloSlices
    from varorder.agree.product_em import AgreementEM

    shards = [_synthetic_alignment(0), _synthetic_alignment(1), _synthetic_alignment(2)]

    def fitted(executor):
        models = [PhyloSlices(m, shards[0].tree).initialize(1 + m) for m in (0, 1)]
        est = AgreementEM(submodels=models, mode=mode, n_iter=3, executor=executor).fit(shards)
        return est.objectives_, [(m.root_, m.p1_, m.p2_) for m in models]

    serial = fitted(SerialExecutor())
    for executor in (dask_client, JoblibExecutor(2)):
        objectives, tables = fitted(executor)
        assert objectives == serial[0]
        for a, b in zip(tables, serial[1]):
            assert all(np.array_equal(x, y) for x, y in zip(a, b))


# ---- lm train: counts made on the workers, merged in memory -------------------------------------

def _lm_corpus(tmp_path, n_files=3, seed=0):
    rng = np.random.default_rng(seed)
    words = [f"w{k}" for k in range(15)]
    paths = []
    for k in range(n_files):
        lines = [" ".join(rng.choice(words, int(rng.integers(1, 9)))) for _ in range(int(rng.integers(20, 40)))]
        path = tmp_path / f"corpus{k}.txt"
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        paths.append(str(path))
    return paths


@pytest.mark.parametrize("min_count, n_shards", [(1, 2), (2, 5)])
def test_sharded_counts_equal_one_pass_on_every_local_executor(tmp_path, min_count, n_shards):
    from test_parallel import _assert_same_counts

    from varorder.lm.corpus import read_corpus
    from varorder.lm.estimate import count_ngrams
    from varorder.lm.sharded import count_ngrams_sharded

    paths = _lm_corpus(tmp_path)
    vocabulary, ids, lengths = read_corpus(paths, min_count=min_count)
    whole = count_ngrams(ids, lengths, 3, vocabulary)
    for executor in (SerialExecutor(), ThreadExecutor(2), JoblibExecutor(2)):
        merged = count_ngrams_sharded(paths, 3, executor, min_count=min_count, n_shards=n_shards)
        assert merged.vocabulary.words == vocabulary.words
        _assert_same_counts(merged, whole)


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:modified Kneser-Ney")
def test_lm_train_on_a_local_dask_cluster_merges_counts_into_the_one_pass_model(tmp_path, dask_client):
    from varorder.cli.lm import lm

    paths = _lm_corpus(tmp_path, seed=2)
    runner = CliRunner()
    for name, extra in (("local", []), ("dask", ["--dask-scheduler", dask_client.scheduler.address])):
        result = runner.invoke(lm, ["train", *paths, "-o", str(tmp_path / f"{name}.arpa"), "-n", "3",
                                    "--discount-fallback", *extra])
        assert result.exit_code == 0, result.output
    assert "merged" in result.output
    assert (tmp_path / "dask.arpa").read_bytes() == (tmp_path / "local.arpa").read_bytes()


# ---- progress of distributed runs: a line per iteration (objective, workers busy, time) -----------

def test_executor_stats_count_the_workers_that_ran_tasks():
    import time

    from varorder.parallel import progress_note

    def nap(k, _):
        time.sleep(0.05)
        return k

    with ThreadExecutor(2) as threads:
        assert threads.map(nap, range(4), None) == [0, 1, 2, 3]
        stats = threads.take_stats()
        assert stats.maps == 1 and stats.tasks == 4 and len(stats.workers) == 2
        assert stats.task_seconds >= 4 * 0.05 and stats.seconds >= 2 * 0.05
        assert threads.take_stats().tasks == 0  # a new record after each take
        threads.map(nap, range(1), None)
        assert "workers busy 1/2, 1 tasks" in progress_note(threads)
    serial = SerialExecutor()
    serial.map(nap, range(3), None)
    assert len(serial.take_stats().workers) == 1 and progress_note(serial) == ""


def test_learners_on_an_executor_write_a_progress_line_per_iteration(capsys, monkeypatch):
    from test_parallel import _tagging_data

    from varorder.agree.aligner import WordAligner
    from varorder.models import CRF, HMM, MEMM

    monkeypatch.setenv("VARORDER_PROGRESS", "summary")  # lines, no bar (as on a pipe)
    X, y = _tagging_data(n=30)
    with ThreadExecutor(2) as threads:
        CRF(max_iterations=3, n_shards=4, executor=threads, verbose=True).fit(X, y)
        crf = capsys.readouterr().err
        MEMM(max_iterations=3, n_shards=4, executor=threads, verbose=True).fit(X, y)
        memm = capsys.readouterr().err
        HMM(n_states=2, max_iterations=3, n_shards=4, executor=threads, verbose=True).fit([[w for w in s] for s in y])
        hmm = capsys.readouterr().err
        pairs = [(e, f) for e, f in zip(y, y)]
        WordAligner(model="ibm1", ibm1_iterations=2, shard_size=5, executor=threads, progress=True).fit(pairs)
        aligner = capsys.readouterr().err
    for name, text in (("crf", crf), ("memm", memm), ("hmm", hmm), ("aligner", aligner)):
        lines = [line for line in text.splitlines() if "workers busy" in line]
        assert len(lines) >= 2, (name, text)
        assert all("/2, " in line and " s (compute " in line for line in lines), (name, lines)
    assert "objective=" in crf and "log-likelihood=" in hmm and "EM (domain) iteration 2: objective" in aligner
    CRF(max_iterations=2, n_shards=2, executor=ThreadExecutor(2)).fit(X, y)  # not verbose: silent
    assert "workers busy" not in capsys.readouterr().err


@pytest.mark.slow
def test_align_train_parts_on_a_local_dask_cluster_writes_the_local_model_file(tmp_path, dask_client):
    from varorder.cli.align import COMMAND

    paths, _ = _bitext_files(tmp_path, seed=7)
    runner = CliRunner()
    common = ["train", *paths, "--parts", "--ibm1-iterations", "2", "--iterations", "2", "--shard-size", "10", "-q"]
    for name, extra in (("local", []), ("jobs", ["--jobs", "2"]),
                        ("dask", ["--dask-scheduler", dask_client.scheduler.address])):
        result = runner.invoke(COMMAND, [*common, "-o", str(tmp_path / f"{name}.npz"), *extra])
        assert result.exit_code == 0, result.output
    local = dict(np.load(tmp_path / "local.npz"))
    for name in ("jobs", "dask"):
        _same_arrays(local, dict(np.load(tmp_path / f"{name}.npz")), name)
    result = runner.invoke(COMMAND, [*common, "-o", str(tmp_path / "x.npz"), "--limit", "3"])
    assert result.exit_code != 0 and "--parts" in result.output


# ---- tag train --parts: the CRF's training files as shards, read and featurised where they run ----

def _tag_train(*args):
    from varorder.cli.tag import COMMAND

    return CliRunner().invoke(COMMAND, ["train", *args, "--quiet", "--max-iterations", "12"])


def _npz(path):
    with np.load(path) as data:
        return {name: data[name] for name in data.files}


def test_tag_train_parts_writes_the_single_file_model(tmp_path):
    from test_parallel import _conllu_files

    from varorder.models import CRF

    paths, words, _ = _conllu_files(tmp_path, n_files=3, seed=1)
    whole = tmp_path / "whole.conllu"
    whole.write_text("".join(open(p, encoding="utf-8").read() for p in paths), encoding="utf-8")
    for name, args in (("single", [str(whole)]), ("one-part", [str(whole), "--parts"]),
                       ("parts", [*paths, "--parts"]), ("parts-jobs", [*paths, "--parts", "--jobs", "2"])):
        result = _tag_train(*args, "-o", str(tmp_path / f"{name}.npz"))
        assert result.exit_code == 0, (name, result.output)
    single = _npz(tmp_path / "single.npz")
    # one piece is the single-file serial run, bit for bit (metadata included); the pieces of a
    # corpus give the same model on any executor
    _same_arrays(single, _npz(tmp_path / "one-part.npz"), "one part")
    _same_arrays(_npz(tmp_path / "parts.npz"), _npz(tmp_path / "parts-jobs.npz"), "--jobs 2")
    # several pieces: fit on the concatenation's features and labels exactly, its weights up to the
    # order of the shards' floating-point additions (as CRF.fit_sources's own tests)
    one, parts = CRF.load(tmp_path / "single.npz"), CRF.load(tmp_path / "parts.npz")
    assert parts.feature_names_ == one.feature_names_ and parts.classes_ == one.classes_
    for name in ("emission_weights_", "transition_weights_", "start_weights_", "end_weights_"):
        np.testing.assert_allclose(getattr(parts, name), getattr(one, name), rtol=1e-7, atol=1e-9)
    assert parts.predict(words[:5]) == one.predict(words[:5])


def test_tag_train_parts_reads_crfsuite_attribute_files(tmp_path):
    from test_cli_tag_options import _crfsuite_file
    from test_parallel import _conllu_files

    paths, _, _ = _conllu_files(tmp_path, n_files=2, seed=3)
    parts = [tmp_path / f"part{k}.crfsuite" for k in range(2)]
    for conllu, part in zip(paths, parts):
        _crfsuite_file(part, conllu)
    whole = tmp_path / "whole.crfsuite"
    whole.write_text("".join(part.read_text(encoding="utf-8") for part in parts), encoding="utf-8")
    for name, args in (("single", [str(whole)]), ("one-part", [str(whole), "--parts"]),
                       ("parts", [*map(str, parts), "--parts"]), ("parts-jobs", [*map(str, parts), "--parts", "--jobs", "2"])):
        result = _tag_train(*args, "--format", "crfsuite", "-o", str(tmp_path / f"{name}.npz"))
        assert result.exit_code == 0, (name, result.output)
    _same_arrays(_npz(tmp_path / "single.npz"), _npz(tmp_path / "one-part.npz"), "one part")
    _same_arrays(_npz(tmp_path / "parts.npz"), _npz(tmp_path / "parts-jobs.npz"), "--jobs 2")


@pytest.mark.parametrize("extra, message", [
    ([], "with --parts"),  # several files without --parts
    (["--parts", "--model", "memm"], "--parts trains a CRF by L-BFGS"),
    (["--parts", "--algorithm", "sgd"], "--parts trains a CRF by L-BFGS"),
    (["--parts", "--learner", "samplerank"], "not --learner samplerank"),
    (["--parts", "--shards", "2"], "--shards does not apply to --parts"),
    (["--parts", "--dev", "DEV"], "--dev does not apply to --parts"),
    (["--parts", "--alpha", "0.5"], "--alpha applies to --model hmm only"),
])
def test_tag_train_parts_refuses_what_does_not_apply(tmp_path, extra, message):
    from test_parallel import _conllu_files

    paths, _, _ = _conllu_files(tmp_path, n_files=2)
    extra = [paths[0] if arg == "DEV" else arg for arg in extra]
    result = _tag_train(*paths, *extra, "-o", str(tmp_path / "m.npz"))
    assert result.exit_code == 2 and message in result.output, result.output
    assert not (tmp_path / "m.npz").exists()


def test_tag_train_parts_names_the_bad_piece(tmp_path):
    from test_parallel import _conllu_files

    paths, _, _ = _conllu_files(tmp_path, n_files=2)
    (tmp_path / "empty.conllu").write_text("", encoding="utf-8")
    (tmp_path / "bad.conllu").write_text("1\tdog\n\n", encoding="utf-8")
    for bad in ("empty.conllu", "bad.conllu"):
        result = _tag_train(*paths, str(tmp_path / bad), "--parts", "-o", str(tmp_path / "m.npz"))
        assert result.exit_code == 1 and bad in result.output, result.output
    assert not (tmp_path / "m.npz").exists()


@pytest.mark.slow
def test_tag_train_parts_on_a_local_dask_cluster_writes_the_local_model_file(tmp_path, dask_client):
    from test_parallel import _conllu_files

    paths, _, _ = _conllu_files(tmp_path, n_files=4, seed=2)
    for name, extra in (("local", []), ("dask", ["--dask-scheduler", dask_client.scheduler.address])):
        result = _tag_train(*paths, "--parts", *extra, "-o", str(tmp_path / f"{name}.npz"))
        assert result.exit_code == 0, result.output
    _same_arrays(_npz(tmp_path / "local.npz"), _npz(tmp_path / "dask.npz"), "dask")
