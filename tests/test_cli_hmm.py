"""``varorder hmm train | decode | score | sample`` on CSV and .npy series, and the models'
npz + JSON files: round trips give the same numbers; damaged or edited files are refused
with the file named."""

from __future__ import annotations

import json
import zipfile

import numpy as np
import pytest
from click.testing import CliRunner

from varorder.cli.main import main
from varorder.io.series import read_series
from varorder.models.count_hmm import CategoricalHMM, PoissonHMM
from varorder.models.gaussian_hmm import GaussianHMM
from varorder.models.hsmm import GaussianHSMM, PoissonHSMM


def _series(path, seed=0):
    rng = np.random.default_rng(seed)
    lines = ["id,a,b"]
    for s in range(2):
        for t in range(40):
            m = 0.0 if (t // 10) % 2 == 0 else 5.0
            b = "" if t == 7 else repr(float(rng.normal(-m)))
            lines.append(f"s{s},{rng.normal(m)!r},{b}")
    path.write_text("\n".join(lines) + "\n")
    return path


def test_train_decode_score_sample_round_trip(tmp_path):
    data = _series(tmp_path / "series.csv")
    model = tmp_path / "model.npz"
    run = CliRunner().invoke
    result = run(main, ["hmm", "train", str(data), "-o", str(model), "--sequence-column", "id", "--n-components", "2",
                        "--covariance-type", "full"])
    assert result.exit_code == 0, result.output
    series = read_series(data, "id")
    assert series.ids == ["s0", "s1"] and series.lengths.tolist() == [40, 40] and np.isnan(series.X[7, 1])
    fitted = GaussianHMM.load(model)
    result = run(main, ["hmm", "score", str(model), str(data), "--sequence-column", "id"])
    assert result.exit_code == 0, result.output
    total = [line for line in result.output.splitlines() if line.startswith("total,")][0]
    assert np.isclose(float(total.split(",")[2]), fitted.score(series.X, series.lengths), rtol=1e-12)
    result = run(main, ["hmm", "decode", str(model), str(data), "--sequence-column", "id", "--probabilities"])
    assert result.exit_code == 0, result.output
    rows = result.output.splitlines()
    assert rows[0] == "sequence,t,state,p0,p1" and len(rows) == 81
    states = np.array([int(r.split(",")[2]) for r in rows[1:]])
    assert np.array_equal(states, fitted.predict(series.X, series.lengths))
    result = run(main, ["hmm", "sample", str(model), "-n", "5", "--seed", "3"])
    assert result.exit_code == 0 and len(result.output.splitlines()) == 6


def test_hsmm_and_npy_input(tmp_path):
    rng = np.random.default_rng(1)
    arr = np.concatenate([rng.poisson(1, (25, 1)), rng.poisson(8, (25, 1))] * 2).astype(float)
    np.save(tmp_path / "counts.npy", arr)
    model = tmp_path / "hsmm.npz"
    result = CliRunner().invoke(main, ["hmm", "train", str(tmp_path / "counts.npy"), "-o", str(model), "--model",
                                       "poisson-hsmm", "--max-duration", "40", "--duration", "negative_binomial"])
    assert result.exit_code == 0, result.output
    fitted = PoissonHSMM.load(model)
    assert fitted.durations_.shape == (2, 40) and fitted.duration_n_.shape == (2,)
    result = CliRunner().invoke(main, ["hmm", "decode", str(model), str(tmp_path / "counts.npy")])
    assert result.exit_code == 0, result.output


@pytest.mark.parametrize("make", [
    lambda: GaussianHMM(n_components=2, covariance_type="tied", n_iter=3, random_state=0),
    lambda: PoissonHMM(n_components=2, n_iter=3, random_state=0),
    lambda: CategoricalHMM(n_components=2, n_iter=3, random_state=0),
    lambda: GaussianHSMM(n_components=2, max_duration=5, duration_distribution="poisson", n_iter=2, random_state=0),
], ids=["gaussian", "poisson", "categorical", "gaussian-hsmm"])
def test_save_load_gives_the_same_numbers(make, tmp_path):
    rng = np.random.default_rng(2)
    X = rng.integers(0, 3, size=(30, 1)) if isinstance(make(), CategoricalHMM) else rng.poisson(3, (30, 2))
    model = make().fit(X, [20, 10])
    model.save(tmp_path / "m.npz")
    again = type(model).load(tmp_path / "m.npz")
    assert again.score(X, [20, 10]) == model.score(X, [20, 10])
    assert np.array_equal(again.predict(X, [20, 10]), model.predict(X, [20, 10]))


def _rewrite(path, edit):
    """Rewrite a model file with its metadata edited and its digest removed (a forged file
    passes the digest; the field checks must refuse it)."""
    with np.load(path) as archive:
        members = {name: archive[name] for name in archive.files}
    meta = json.loads(members.pop("__meta__").tobytes())
    meta.pop("sha256", None)
    edit(meta, members)
    members["__meta__"] = np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)
    np.savez(path, **members)


def test_damaged_or_forged_model_files_are_refused(tmp_path):
    rng = np.random.default_rng(3)
    model = GaussianHMM(n_components=2, covariance_type="full", n_iter=2, random_state=0).fit(rng.normal(size=(30, 2)))
    path = tmp_path / "m.npz"
    model.save(path)

    def not_pd(meta, members):
        members["covars"] = -members["covars"]

    _rewrite(path, not_pd)
    with pytest.raises(ValueError, match=r"m\.npz: invalid model \(covars_ of state 0 is not positive definite\)"):
        GaussianHMM.load(path)
    model.save(path)
    _rewrite(path, lambda meta, members: members.__setitem__("transmat", members["transmat"] * 2))
    with pytest.raises(ValueError, match=r"m\.npz: invalid model \(transmat_ row 0 sums to"):
        GaussianHMM.load(path)
    model.save(path)
    _rewrite(path, lambda meta, members: meta["params"].__setitem__("colour", 1))
    with pytest.raises(ValueError, match=r"m\.npz: .*'colour' is not a field"):
        GaussianHMM.load(path)
    model.save(path)
    with zipfile.ZipFile(path, "a") as archive:
        archive.writestr("extra.npy", b"junk")
    with pytest.raises(ValueError, match=r"m\.npz"):
        GaussianHMM.load(path)
    result = CliRunner().invoke(main, ["hmm", "score", str(path), str(_series(tmp_path / "s.csv"))])
    assert result.exit_code == 1 and "m.npz" in result.output


def test_bad_series_files_name_the_line(tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("a,b\n1,2\n3\n")
    with pytest.raises(ValueError, match=r"bad\.csv:3: has 1 fields"):
        read_series(bad)
    bad.write_text("1,2\n3,x\n")
    with pytest.raises(ValueError, match=r"bad\.csv:2: field 2 \('x'\) is not a number"):
        read_series(bad)
    with pytest.raises(ValueError, match="no column named 'idx'"):
        read_series(_series(tmp_path / "s.csv"), "idx")
