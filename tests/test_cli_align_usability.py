"""`varorder align` as a fast_align / eflomal user drives it: joint and stdin input, stored normalisation,
per-direction outputs, scores and link probabilities, warnings, model validation on load."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from varorder.agree.aligner import WordAligner
from varorder.cli.align import COMMAND
from varorder.io.bitext import Normalization, normalize, read_joint
from varorder.io.pharaoh import read_pharaoh
from varorder.models.persist import load_model, save_model

from _shared_data import SHARED_DATA

from test_agree_aligner import _synthetic

_ENGLISH = ["The", "house", "Minister", "bill", "tax", "Member", "Canada", "question", "vote", "today", "people",
            "work"]
_FRENCH = ["la", "chambre", "ministre", "projet", "impôt", "député", "Canada", "question", "vote", "aujourd'hui",
           "gens", "travail"]


def _raw(n=150, seed=3):
    """Cased, accented raw text whose normalised form is a synthetic bitext with a known lexicon."""
    pairs, gold = _synthetic(n, seed=seed)
    def side(tokens, words):
        text = " ".join(words[int(t[1:])] if t[1:].isdigit() else "De" for t in tokens)
        return text + "."  # glued punctuation: only the tokeniser splits it off
    return [(side(e, _ENGLISH), side(f, _FRENCH)) for e, f in pairs], gold


def _write(tmp_path, raw):
    e, f, joint = tmp_path / "c.e", tmp_path / "c.f", tmp_path / "c.en-fr"
    e.write_text("".join(a + "\n" for a, _ in raw), encoding="utf-8")
    f.write_text("".join(b + "\n" for _, b in raw), encoding="utf-8")
    joint.write_text("".join(f"{a} ||| {b}\n" for a, b in raw), encoding="utf-8")
    return e, f, joint


def _invoke(args, **kw):
    result = CliRunner().invoke(COMMAND, [str(a) for a in args], **kw)
    assert result.exit_code == 0, result.output
    return result


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("align")
    raw, _ = _raw()
    e, f, joint = _write(tmp_path, raw)
    model = tmp_path / "m.npz"
    _invoke(["train", e, f, "-o", model, "--normalize", "--ibm1-iterations", "3", "--iterations", "2", "-q"])
    return tmp_path, raw, e, f, joint, model


def test_normalisation_is_stored_and_reapplied(trained):
    tmp_path, raw, e, f, joint, model = trained
    aligner = WordAligner.load(model)
    assert aligner.normalization == Normalization.naacl().to_dict()
    from_files = _invoke(["apply", model, e, f]).output
    # the same text normalised beforehand (normalising is idempotent on it) aligns the same
    norm_e, norm_f = tmp_path / "n.e", tmp_path / "n.f"
    norm_e.write_text("".join(" ".join(normalize(a, "en")) + "\n" for a, _ in raw), encoding="utf-8")
    norm_f.write_text("".join(" ".join(normalize(b, "fr")) + "\n" for _, b in raw), encoding="utf-8")
    assert _invoke(["apply", model, norm_e, norm_f]).output == from_files
    # and the links index the normalised tokens (the glued '.' is its own token)
    first = read_joint(joint, normalize_text=True)[0]
    assert first[0][-1] == "." and first[1][-1] == "."
    assert len(from_files.splitlines()) == len(raw)


def test_joint_and_stdin_inputs_equal_file_inputs(trained):
    tmp_path, raw, e, f, joint, model = trained
    from_files = _invoke(["apply", model, e, f]).output
    assert _invoke(["apply", model, joint]).output == from_files
    assert _invoke(["apply", model], input=joint.read_text(encoding="utf-8")).output == from_files
    assert _invoke(["apply", model, "-"], input=joint.read_text(encoding="utf-8")).output == from_files
    assert _invoke(["apply", model, "-", f], input=e.read_text(encoding="utf-8")).output == from_files
    # training from the joint file on stdin gives the same model
    model2 = tmp_path / "m2.npz"
    _invoke(["train", "-o", model2, "--normalize", "--ibm1-iterations", "3", "--iterations", "2", "-q"],
            input=joint.read_text(encoding="utf-8"))
    assert _invoke(["apply", model2, e, f]).output == from_files
    bad = tmp_path / "bad.en-fr"
    bad.write_text("a b ||| c\nno separator here\n", encoding="utf-8")
    result = CliRunner().invoke(COMMAND, ["apply", str(model), str(bad)])
    assert result.exit_code != 0 and "bad.en-fr, line 2: expected 'english tokens ||| french tokens'" in result.output


def test_directional_outputs_scores_and_link_probabilities(trained):
    tmp_path, raw, e, f, joint, model = trained
    paths = {k: tmp_path / f"{k}.txt" for k in ("fwd", "rev", "fs", "rs", "lp", "inter", "main")}
    _invoke(["apply", model, joint, "-o", paths["main"], "-f", paths["fwd"], "-r", paths["rev"], "-F", paths["fs"],
             "-R", paths["rs"], "--link-probabilities", paths["lp"]])
    _invoke(["apply", model, joint, "-o", paths["inter"], "--method", "intersection"])
    fwd, rev = read_pharaoh(paths["fwd"]), read_pharaoh(paths["rev"])
    assert [a & b for a, b in zip(fwd, rev)] == read_pharaoh(paths["inter"])
    aligner = WordAligner.load(model)
    pairs = read_joint(joint, normalize_text=True)
    want_f, want_r = aligner.directional(pairs)
    assert fwd == want_f and rev == want_r
    log_f, log_r = aligner.sentence_scores(pairs)
    got_f = np.loadtxt(paths["fs"])
    np.testing.assert_allclose(got_f, [-s / len(p[1]) for s, p in zip(log_f, pairs)], rtol=1e-5)
    np.testing.assert_allclose(np.loadtxt(paths["rs"]), [-s / len(p[0]) for s, p in zip(log_r, pairs)], rtol=1e-5)
    main = read_pharaoh(paths["main"])
    posteriors = aligner.posteriors(pairs)
    for links, line, m in zip(main, paths["lp"].read_text().splitlines(), posteriors):
        probs = [float(x) for x in line.split()]
        assert len(probs) == len(links)
        np.testing.assert_allclose(probs, [m[i, j] for i, j in sorted(links)], rtol=1e-3)
        assert all(p >= aligner.threshold for p in probs)


def test_train_aligns_its_own_text_with_grow_diag_final(trained):
    tmp_path, raw, e, f, joint, model = trained
    out = tmp_path / "own.align"
    _invoke(["train", joint, "-o", tmp_path / "m3.npz", "--normalize", "--ibm1-iterations", "3", "--iterations", "2",
             "-q", "-a", out, "--method", "grow-diag-final"])
    again = _invoke(["apply", tmp_path / "m3.npz", joint, "--method", "grow-diag-final"]).output
    assert out.read_text() == again


def test_warnings_for_cased_input_and_unknown_words(trained):
    tmp_path, raw, e, f, joint, model = trained
    cased_model = tmp_path / "cased.npz"
    result = CliRunner().invoke(COMMAND, ["train", str(joint), "-o", str(cased_model), "--ibm1-iterations", "1",
                                          "--iterations", "1", "-q"])
    assert result.exit_code == 0 and "contain capitals" in result.output and "--lowercase" in result.output
    lowered = tmp_path / "lower.en-fr"
    lowered.write_text(joint.read_text(encoding="utf-8").lower(), encoding="utf-8")
    result = CliRunner().invoke(COMMAND, ["apply", str(cased_model), str(lowered)])
    assert result.exit_code == 0 and "tokens are unknown to the model" in result.output
    quiet = CliRunner().invoke(COMMAND, ["apply", str(model), str(joint)])
    assert "warning" not in quiet.output


def test_load_rejects_unsorted_pair_keys(trained, tmp_path):
    _, _, _, _, _, model = trained
    params, state, arrays = load_model(model, "WordAligner", ("pair_keys", "e_vocab", "f_vocab", "table0", "null0",
                                                               "jumps0", "table1", "null1", "jumps1"))
    arrays["pair_keys"] = arrays["pair_keys"][::-1].copy()
    bad = tmp_path / "bad.npz"
    save_model(bad, "WordAligner", params, state, arrays)
    with pytest.raises(ValueError, match="bad.npz: pair_keys must be a sorted"):
        WordAligner.load(bad)


_HANSARDS = SHARED_DATA / "hansards-en-fr"


@pytest.mark.shared_data
@pytest.mark.skipif(not (_HANSARDS / "test-text").exists(), reason="../shared/data/hansards-en-fr is absent")
@pytest.mark.parametrize("side,language", [("e", "en"), ("f", "fr")])
def test_normalisation_reproduces_the_naacl_test_and_trial_text(side, language):
    """The NAACL test text is already tokenised: normalising it keeps every line's token count, and the
    result is the distributed normalised text (so the gold links index it)."""
    for raw, done in (("test-text/test", "normalized/test"), ("trial/dev", "normalized/trial")):
        lines = (_HANSARDS / f"{raw}.{side}").read_text(encoding="utf-8").splitlines()
        want = (_HANSARDS / f"{done}.{side}").read_text(encoding="utf-8").splitlines()
        assert len(lines) == len(want)
        for no, (line, reference) in enumerate(zip(lines, want), 1):
            tokens = normalize(line, language)
            assert len(tokens) == len(line.split()), (raw, no, line)
            assert tokens == reference.split(), (raw, no, line)


def test_normalisation_edge_cases():
    assert normalize("Federal carpenters get $ 6.42 , 1,122,000 and .5 -- at 2 p.m. ...", "en") == [
        "federal", "carpenters", "get", "$", "6.42", ",", "1,122,000", "and", ".5", "--", "at", "2", "p.m.", "..."]
    assert normalize("I can't, he won't, John's", "en") == ["i", "can", "not", ",", "he", "will", "not", ",",
                                                            "john", "'s"]
    assert normalize("Rivière-du-Loup, au-dessus du lac, il a dû partir aujourd'hui", "fr") == [
        "riviere", "-", "du", "-", "loup", ",", "au", "-", "dessus", "de", "le", "lac", ",", "il", "a", "du",
        "partir", "aujourd'", "hui"]
    assert Normalization(lowercase=True)("Élan Vital", "fr") == ["élan", "vital"]
    assert Normalization(strip_accents=True)("Élan Vital", "fr") == ["Elan", "Vital"]
    assert Normalization()("A  b ", "en") == ["A", "b"]


def test_kept_training_encoding_aligns_like_a_fresh_one():
    pairs, _ = _synthetic(80, seed=5)
    aligner = WordAligner(ibm1_iterations=2, iterations=2, shard_size=30).fit(pairs, keep_encoding=True)
    assert aligner.encode(pairs) is aligner._kept_encoding[1].shards
    for method in ("posterior", "grow-diag-final-and"):
        assert aligner.align(pairs, method) == aligner.align(list(pairs), method)
    aligner.release_encoding()
    assert aligner.encode(pairs) is not None and aligner._kept_encoding is None


def test_mmap_threshold_is_set_without_a_child_process(monkeypatch):
    """The align commands fix glibc's mmap threshold from the process's own C library: finding it with
    ctypes.util.find_library ran `ldconfig -p` in a child, which tree memory measurements counted."""
    import ctypes
    import subprocess
    import sys

    from varorder._malloc import fix_mmap_threshold

    try:
        ctypes.CDLL(None).mallinfo2
    except (OSError, AttributeError):
        pytest.skip("not glibc: fix_mmap_threshold is a no-op")
    # the effect, in a fresh process (this one's heap may hold free chunks that serve 2 MiB arrays)
    probe = """
import ctypes, numpy as np
from varorder._malloc import fix_mmap_threshold
class Info(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in ("arena ordblks smblks hblks hblkhd usmblks fsmblks uordblks "
                                               "fordblks keepcost").split()]
libc = ctypes.CDLL(None)
libc.mallinfo2.restype = Info
big = np.ones(1 << 20); del big  # 8 MiB freed: glibc's dynamic threshold rises past 2 MiB: such arrays then come from the heap
fix_mmap_threshold(1 << 20)
before = libc.mallinfo2().hblks
held = [np.ones(1 << 18) for _ in range(4)]  # 2 MiB each: above the fixed threshold, so mapped
print(libc.mallinfo2().hblks - before)
"""
    src = str(Path(__file__).resolve().parents[1] / "src")
    mapped = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True,
                            env={**__import__("os").environ, "PYTHONPATH": src}).stdout
    assert int(mapped) >= 4

    def no_child(*args, **kwargs):
        raise AssertionError(f"a child process was started: {args!r}")

    monkeypatch.setattr(subprocess, "Popen", no_child)
    fix_mmap_threshold(6 << 20)  # the align commands' own setting
