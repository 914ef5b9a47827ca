"""The two-direction aligner: training on a synthetic bitext, decoding, save/load, CLI, parallel E-steps."""

import numpy as np
import pytest
from click.testing import CliRunner

from local_clusters import local_cluster
from varorder.agree.aligner import WordAligner
from varorder.agree.align import IBM1
from varorder.agree.product_em import AgreementEM
from varorder.cli.align import COMMAND
from varorder.eval.aer import alignment_error_rate


def _synthetic(n, seed=0, vocab=12):
    """A bitext with a known word-for-word lexicon and local reordering; gold links returned."""
    rng = np.random.default_rng(seed)
    pairs, gold = [], []
    for _ in range(n):
        I = int(rng.integers(2, 7))
        e = [f"e{w}" for w in rng.integers(0, vocab, I)]
        order = list(range(I))
        if I > 2 and rng.random() < 0.5:  # swap one adjacent pair
            k = int(rng.integers(0, I - 1))
            order[k], order[k + 1] = order[k + 1], order[k]
        f = [e[i].replace("e", "f") for i in order]
        links = {(i, j) for j, i in enumerate(order)}
        if rng.random() < 0.3:  # an unaligned French function word
            f.insert(0, "fnull")
            links = {(i, j + 1) for i, j in links}
        pairs.append((e, f))
        gold.append(links)
    return pairs, gold


@pytest.mark.parametrize("training", ["independent", "agreement", "product"])
def test_learns_synthetic_lexicon(training):
    pairs, gold = _synthetic(300)
    al = WordAligner(training=training, ibm1_iterations=4, iterations=3, shard_size=100).fit(pairs)
    scores = alignment_error_rate(al.align(pairs), gold, gold)
    assert scores.aer < 0.1, scores
    assert [p for p, _ in al.history_] == ["ibm1/independent", f"hmm/{ {'independent': 'independent', 'agreement': 'domain', 'product': 'product'}[training]}"]


def test_save_load_round_trip_aligns_new_text(tmp_path):
    pairs, _ = _synthetic(150, seed=1)
    al = WordAligner(training="agreement", ibm1_iterations=2, iterations=2).fit(pairs)
    path = tmp_path / "m.npz"
    al.save(path)
    back = WordAligner.load(path)
    new = [(["e1", "e2", "unseen"], ["f2", "f1", "inconnu"]), ([], ["f1"]), (["e3"], [])]
    for method in ["posterior", "intersection", "grow-diag-final-and"]:
        assert back.align(new, method) == al.align(new, method)
    assert back.align(new, joint=True) == al.align(new, joint=True)
    post = back.posteriors(new)
    assert post[0].shape == (3, 3) and post[1].shape == (0, 1)
    assert (0, 1) in back.align(new)[0] and (1, 0) in back.align(new)[0]
    (tmp_path / "junk.npz").write_bytes(b"not a model")
    with pytest.raises(ValueError, match="junk.npz"):
        WordAligner.load(tmp_path / "junk.npz")


def test_joint_posteriors_are_the_agreement_estep():
    pairs, _ = _synthetic(60, seed=4)
    al = WordAligner(training="agreement", ibm1_iterations=2, iterations=1).fit(pairs)
    shard = al.encode(pairs[:5])[0]
    total = sum(m.shared_log_potentials(shard) for m in al.models_)
    mu = 0.5 * sum(m.expected_statistics(shard, total).shared for m in al.models_)
    got = al.posteriors(pairs[:5], joint=True)
    np.testing.assert_allclose(np.concatenate([g.ravel() for g in got]), mu, atol=1e-12)


def test_bad_parameters():
    with pytest.raises(ValueError, match="training"):
        WordAligner(training="nope").fit([(["a"], ["b"])])
    with pytest.raises(ValueError, match="threshold"):
        WordAligner(threshold=2).fit([(["a"], ["b"])])
    with pytest.raises(ValueError, match="at least one"):
        WordAligner().fit([])


def _ibm1_counts(executor):
    al = WordAligner(model="ibm1", shard_size=40).fit(_synthetic(120, seed=2)[0])
    models = [IBM1(m.direction, al.pairs_, m.n_target_words).copy_tables_from(m) for m in al.models_]
    shards = al.encode(_synthetic(120, seed=2)[0])
    return AgreementEM(submodels=models, mode="domain", executor=executor).estep(shards)


def test_thread_executor_gives_same_statistics():
    from concurrent.futures import ThreadPoolExecutor

    serial, obj = _ibm1_counts(None)
    with ThreadPoolExecutor(2) as ex:
        threaded, obj2 = _ibm1_counts(ex)
    assert obj2 == obj  # bit for bit (#33): the serial E-step sums per shard, then adds as executors do
    for a, b in zip(serial, threaded):
        for k in a:
            assert a[k].tobytes() == b[k].tobytes(), k


def test_dask_executor_gives_same_statistics():
    # The design's promise (docs/notes/35-scale-out.md, docs/notes/33-determinism.md): the same shards
    # give bit-identical statistics on any backend, the one-task serial E-step (executor=None, which sums
    # each shard in a scratch table before adding it, as executors add per-shard tables) included.
    pytest.importorskip("distributed")
    from varorder.parallel import SerialExecutor

    with local_cluster(processes=False) as (cluster, client):
        remote, obj2 = _ibm1_counts(client)
    for executor in (SerialExecutor(), None):
        serial, obj = _ibm1_counts(executor)
        assert obj2 == obj
        for a, b in zip(serial, remote):
            assert sorted(a) == sorted(b)
            for k in a:
                assert a[k].tobytes() == b[k].tobytes(), k


def test_cli_train_apply_eval(tmp_path):
    pairs, gold = _synthetic(120, seed=3)
    (tmp_path / "c.e").write_text("".join(" ".join(e) + "\n" for e, _ in pairs))
    (tmp_path / "c.f").write_text("".join(" ".join(f) + "\n" for _, f in pairs))
    (tmp_path / "gold.wa").write_text("".join(f"{s + 1} {i + 1} {j + 1} S\n" for s, links in enumerate(gold)
                                              for i, j in sorted(links)))
    runner = CliRunner()
    r = runner.invoke(COMMAND, ["train", str(tmp_path / "c.e"), str(tmp_path / "c.f"), "-o", str(tmp_path / "m.npz"),
                                "--iterations", "2", "--ibm1-iterations", "3"])
    assert r.exit_code == 0, r.output
    r = runner.invoke(COMMAND, ["apply", str(tmp_path / "m.npz"), str(tmp_path / "c.e"), str(tmp_path / "c.f"),
                                "-o", str(tmp_path / "out.align")])
    assert r.exit_code == 0, r.output
    assert len((tmp_path / "out.align").read_text().splitlines()) == len(pairs)
    r = runner.invoke(COMMAND, ["eval", str(tmp_path / "out.align"), str(tmp_path / "gold.wa"), "--json"])
    assert r.exit_code == 0, r.output
    import json
    assert json.loads(r.output)["aer"] < 0.15
    (tmp_path / "bad.align").write_text("0-0 x\n")
    r = runner.invoke(COMMAND, ["eval", str(tmp_path / "bad.align"), str(tmp_path / "gold.wa")])
    assert r.exit_code != 0 and "bad.align, line 1" in r.output
