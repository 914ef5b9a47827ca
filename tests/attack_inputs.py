"""Re-runnable attack on everything that reads input (issue #18): counts bad outcomes per row.

Rows, as in the issue:

* ``readers-real``: real files of ``../shared/data`` (their first lines), each reader's,
  with bytes overwritten and the file cut, plain and gzip-compressed; also a gzip
  member with a broken CRC and a plain file named ``*.gz``.
* ``readers-generated``: arbitrary bytes and random text over each format's alphabet.
* ``model-files``: a tiny fitted model of every estimator that saves (CRF, MEMM, HMM,
  word aligner, SampleRank tagger, log-linear LM, decipherer, grammar inducer, reified
  context model) with bytes / metadata / one array damaged, and binary n-gram LMs with
  bytes damaged (:mod:`varorder.testing.hostile` does the damage, as in the tests).
* ``engine``: hostile arguments to the chain, lattice and hypergraph entry points.
* ``cli``: the hostile command lines of the issue, then every numeric option of every
  command given NaN, ±inf, junk, an overflowing number and a value below its range,
  every output path in a missing folder, an unreachable Dask address, ``lm score -``.
* ``files``: the mode of every writer's file under umasks 022, 077 and 002, and
  commands killed (SIGTERM, SIGINT) while they write: no hidden temporary file may remain.
* ``memory``: the aligner on 1,000- and 5,000-word pairs and ``read_naacl`` on a file that
  names sentence 10⁸, each in a child process with a 60 s limit and its peak memory measured.

Bad outcome = a traceback, an exception other than ValueError from a library call (or a
ValueError that does not name the file), exit 0 on a bad value or exit 1 instead of a
usage error (work began), a silent wrong answer (NaN, a damaged gzip read as good, a
model that loads and then fails), a wrong file mode, a leftover temporary file, more than
60 s, or a crash.

    nice -n 10 .venv/bin/python tests/attack_inputs.py --json attack.json [--scale 1.0]

``--scale`` multiplies the number of random cases per row (1.0: the counts recorded in
docs/notes/benchmarks-notebook.md).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import resource
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
import traceback
import warnings
from pathlib import Path

from _shared_data import SHARED_DATA

ROOT = Path(__file__).resolve().parents[1]
DATA = SHARED_DATA
sys.path.insert(0, str(ROOT / "src"))

import numpy as np  # noqa: E402

from varorder.testing.hostile import (MODEL_KINDS, RandomChooser, model_members, mutate_array, write_members,  # noqa: E402
                                      mutate_bytes, mutate_metadata, saved_model)

ROWS = ("readers-real", "readers-generated", "model-files", "engine", "cli", "files", "memory")


# whether the last case ended in a (good) refusal rather than a result: reported beside
# the bad counts, so that a row whose every case is refused (or accepted) shows it
REFUSED = [False]
VERBOSE = [False]


class Tally:
    def __init__(self):
        self.rows = {row: {"cases": 0, "bad": 0, "refused": 0, "examples": []} for row in ROWS}

    def case(self, row: str, bad: str | None, what: str = "") -> None:
        entry = self.rows[row]
        entry["cases"] += 1
        entry["refused"] += bool(REFUSED[0]) and not bad
        REFUSED[0] = False
        if bad:
            entry["bad"] += 1
            if len(entry["examples"]) < 12:
                entry["examples"].append(f"{what}: {bad}"[:400])

    def report(self) -> str:
        lines = [f"{'row':<18} {'cases':>7} {'refused':>8} {'bad':>5}"]
        for row, entry in self.rows.items():
            lines.append(f"{row:<18} {entry['cases']:>7} {entry['refused']:>8} {entry['bad']:>5}")
            lines += [f"    {example}" for example in entry["examples"]]
        return "\n".join(lines)


def library_outcome(call, path=None) -> str | None:
    """None when ``call()`` returns or raises a ValueError (naming ``path`` when given);
    otherwise what went wrong."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            call()
    except ValueError as exc:
        if path is not None and str(path) not in str(exc):
            return f"ValueError without the file name: {str(exc)[:120]}"
        REFUSED[0] = True
        return None
    except (MemoryError, RecursionError) as exc:
        return f"{type(exc).__name__}"
    except Exception as exc:  # noqa: BLE001 - the point is to see every other type
        return f"{type(exc).__name__}: {str(exc)[:120]} at {traceback.extract_tb(exc.__traceback__)[-1].name}"
    return None


# ---------------------------------------------------------------------------------- readers

def _head(path: Path, lines: int) -> str:
    from varorder.io._text import open_text

    with open_text(path) as handle:
        return "".join(line for _, line in zip(range(lines), handle))


def _ptb_member() -> str:
    with tarfile.open(DATA / "ptb-wsj-sample" / "wsj_sample.mrg.tar.gz") as archive:
        member = next(m for m in archive.getmembers() if m.name.endswith(".mrg"))
        return archive.extractfile(member).read().decode("utf-8")


def readers():
    """name -> (reader(path), real sample text or None, alphabet for generated text)."""
    from varorder.decipher.data import read_corpus_sentences
    from varorder.lm.arpa import load_model, read_arpa
    from varorder.io.bitext import read_bitext, read_joint
    from varorder.io.conllu import read_conllu
    from varorder.io.crfsuite import read_crfsuite
    from varorder.io.fasta import read_fasta
    from varorder.io.naacl import read_naacl
    from varorder.io.ocr import read_ocr_letters
    from varorder.io.pharaoh import read_pharaoh
    from varorder.io.ptb import read_ptb
    from varorder.io.tagged import read_tagged
    from varorder.lm.corpus import iter_sentences
    from varorder.tasks.grammar_induction import load_sentences

    def real(relative, lines):
        path = DATA / relative
        return _head(path, lines) if path.exists() else None

    def lm_scores(model):
        return [float(model.score_sentence(s)) for s in ("the", "the of", "")]

    naacl = real("hansards-en-fr/trial/dev.wa.nonullalign", 400)
    pharaoh = None
    if naacl:
        pairs = {}
        for line in naacl.splitlines():
            s, e, f, *_ = line.split()
            pairs.setdefault(int(s), []).append(f"{int(e) - 1}-{int(f) - 1}")
        pharaoh = "".join(" ".join(pairs.get(s, [])) + "\n" for s in range(1, max(pairs) + 1))
    mrg = _ptb_member() if (DATA / "ptb-wsj-sample").exists() else None
    return {
        "conllu": (read_conllu, real("ud-english-ewt/en_ewt-ud-dev.conllu.gz", 300), "1234567890\t_#=- abcDET\n"),
        "tagged": (read_tagged, real("ptb-wsj-sample/wsj_sample.pos.tsv.gz", 300), "\tNNDT abc#=\n "),
        "fasta": (read_fasta, real("phylo/hpmrc.fa.gz", 30), ">ACGT-N\n acgt"),
        "naacl": (read_naacl, naacl, "0123456789 SP\n-"),
        "pharaoh": (read_pharaoh, pharaoh, "0123456789-p \n"),
        "arpa": (lambda p: lm_scores(read_arpa(p)), real("arpa/kenlm/test.arpa", 10_000), "\\-0123456789.e \tabc<s>\n=gram:"),
        "arpa-dispatch": (lambda p: lm_scores(load_model(p)), real("arpa/pocketsphinx/turtle.lm", 10_000), "\\-0123.9 \t<s>a\n"),
        "ocr": (read_ocr_letters, _whole_words(real("ocr-letters/letter.data.gz", 120)), "0123456789\t-ab\n"),
        "ptb": (read_ptb, mrg, "() NPVBthe\n "),
        "bitext": (lambda p: read_bitext(p, DATA / "hansards-en-fr/normalized/trial.f"
                                         if (DATA / "hansards-en-fr").exists() else p),
                   real("hansards-en-fr/normalized/trial.e", 37), "abc \n."),
        "joint": (read_joint, None, "ab |\n"),
        "crfsuite": (read_crfsuite, None, "NNw=a:0.5\t\n"),
        "lm-corpus": (lambda p: list(iter_sentences(p)), real("ptb-lm/ptb.valid.txt.gz", 200), "ab <s></s>\n"),
        "cipher-corpus": (read_corpus_sentences, real("warandpeace/valid.txt", 200)
                          if (DATA / "warandpeace/valid.txt").exists() else _first_in(DATA / "warandpeace", 200),
                          "Ab.!? \n"),
        "induction-ptb": (lambda p: load_sentences(p, fmt="ptb"), mrg, "() NPVB\n"),
    }


def _whole_words(text):
    """OCR lines up to the last one that ends a word (next_id -1)."""
    if text is None:
        return None
    lines = text.splitlines(keepends=True)
    last = max(i for i, line in enumerate(lines) if line.split("\t")[2] == "-1")
    return "".join(lines[:last + 1])


def _first_in(folder: Path, lines: int):
    if not folder.exists():
        return None
    files = sorted(p for p in folder.iterdir() if "valid" in p.name or "train" in p.name)
    return _head(files[0], lines) if files else None


def _read_and_check(reader, path):
    return library_outcome(lambda: reader(path), path)


def attack_readers(tally: Tally, work: Path, scale: float) -> None:
    rng = random.Random(18)
    for name, (reader, text, alphabet) in readers().items():
        folder = work / f"reader-{name}"
        folder.mkdir()
        if text is not None:
            raw = text.encode("utf-8")
            plain = folder / "sample.txt"
            plain.write_bytes(raw)
            try:
                expected = repr(reader(plain))
            except Exception as exc:  # noqa: BLE001
                tally.case("readers-real", f"the unharmed file fails: {type(exc).__name__}: {exc}", name)
                continue
            misnamed = folder / "plain.gz"
            misnamed.write_bytes(raw)
            try:
                same = repr(reader(misnamed)) == expected
                tally.case("readers-real", None if same else "a plain file named .gz reads differently", name)
            except Exception as exc:  # noqa: BLE001
                tally.case("readers-real", f"plain file named .gz: {type(exc).__name__}", name)
            packed = gzip.compress(raw)
            broken_crc = bytearray(packed)
            broken_crc[-8] ^= 0xFF  # the CRC-32 in the gzip trailer
            crc_path = folder / "crc.gz"
            crc_path.write_bytes(bytes(broken_crc))
            try:
                reader(crc_path)
                tally.case("readers-real", "a gzip file with a bad CRC is read as good", name)
            except ValueError as exc:
                REFUSED[0] = True
                tally.case("readers-real", None if str(crc_path) in str(exc) else "CRC error names no file", name)
            except Exception as exc:  # noqa: BLE001
                tally.case("readers-real", f"bad CRC: {type(exc).__name__}: {exc}", name)
            for k in range(int(60 * scale)):
                compressed = k % 2 == 1
                chooser = RandomChooser(rng.random())
                damaged = mutate_bytes(chooser, packed if compressed else raw, max_edits=4)
                path = folder / (f"m{k}.gz" if compressed else f"m{k}.txt")
                path.write_bytes(damaged)
                tally.case("readers-real", _read_and_check(reader, path), f"{name} {path.name}")
                path.unlink()
        for k in range(int(200 * scale)):
            if k % 2:
                data = bytes(rng.randrange(256) for _ in range(rng.randrange(300)))
            else:
                pool = alphabet + "\x00\ufffd\u00e9\r"
                data = "".join(rng.choice(pool) for _ in range(rng.randrange(400))).encode("utf-8")
                if k % 4 == 0:
                    data = gzip.compress(data)[: rng.randrange(1, 400)] if k % 8 == 0 else gzip.compress(data)
            path = folder / f"g{k}.txt"
            path.write_bytes(data)
            tally.case("readers-generated", _read_and_check(reader, path), f"{name} {path.name}")
            path.unlink()
    attack_cipher_folder(tally, work, rng, scale)
    attack_arpa_fields(tally, work, rng, scale)


def attack_arpa_fields(tally: Tally, work: Path, rng: random.Random, scale: float) -> None:
    """Targeted edits of a real ARPA file (KenLM's test.arpa): one field of a random line set
    to an extreme, non-finite or junk value, a line dropped or repeated, a section header
    beyond the declared orders. A ValueError naming the file, or a model whose scores are
    finite or -inf (never NaN or +inf, the float32 overflow of a 1e39 back-off)."""
    from varorder.lm.arpa import read_arpa

    source = DATA / "arpa" / "kenlm" / "test.arpa"
    if not source.exists():
        return
    lines = source.read_text(encoding="utf-8").splitlines()
    entries = [k for k, line in enumerate(lines) if "\t" in line]
    values = ["1e39", "-1e39", "nan", "inf", "+inf", "-inf", "x", "", "1e400", "-99", "0x10", "1_0"]
    for k in range(int(120 * scale)):
        edited = list(lines)
        how = rng.choice(["field", "field", "field", "drop", "repeat", "section", "count"])
        where = rng.choice(entries)
        if how == "field":
            fields = edited[where].split("\t")
            fields[rng.choice([0, len(fields) - 1])] = rng.choice(values)
            edited[where] = "\t".join(fields)
        elif how == "drop":
            del edited[where]
        elif how == "repeat":
            edited.insert(where, edited[where])
        elif how == "section":
            edited.insert(len(edited) - 1, "\\6-grams:\n-1.0\t, . </s> a b c\n")
        else:
            header = next(i for i, line in enumerate(edited) if line.startswith("ngram "))
            edited[header + rng.randrange(5)] = f"ngram {rng.randint(1, 5)}={rng.choice([0, 1, 99, -1, 10 ** 12])}"
        path = work / f"arpa-edit{k}.arpa"
        path.write_text("\n".join(edited) + "\n", encoding="utf-8")

        def read_and_score():
            model = read_arpa(path)
            words = [w for w in model.vocabulary.words if not w.startswith("<")][:6]
            scores = np.array([model.score_sentence(" ".join(words[:n])) for n in range(len(words) + 1)])
            if np.isnan(scores).any() or np.isposinf(scores).any():
                raise AssertionError(f"silent wrong answer: scores {scores}")

        outcome = library_outcome(read_and_score, path)
        tally.case("readers-real", outcome, f"ARPA edit {how} {path.name}")
        path.unlink()


def attack_cipher_folder(tally: Tally, work: Path, rng: random.Random, scale: float) -> None:
    from varorder.decipher import load, prepare, save

    words = ["a", "b", "c", "d"]
    sentences = [[rng.choice(words) for _ in range(rng.randint(1, 6))] for _ in range(80)]
    good = work / "cipher-good"
    save(prepare(sentences, num_words=4, num_cipher=10, seed=1), good)
    for k in range(int(60 * scale)):
        folder = work / "cipher-bad"
        shutil.rmtree(folder, ignore_errors=True)
        shutil.copytree(good, folder)
        target = folder / rng.choice(sorted(p.name for p in folder.iterdir()))
        target.write_bytes(mutate_bytes(RandomChooser(rng.random()), target.read_bytes() or b"x"))
        tally.case("readers-generated", library_outcome(lambda: load(folder), folder), f"cipher folder {target.name}")


# ------------------------------------------------------------------------------ model files

def attack_models(tally: Tally, work: Path, scale: float) -> None:
    rng = random.Random(1818)
    for kind in MODEL_KINDS:
        folder = work / f"model-{kind}"
        folder.mkdir()
        cls, use, path = saved_model(kind, folder)
        members = model_members(path)
        for k in range(int(60 * scale)):
            chooser = RandomChooser(rng.random())
            bad = folder / f"bad{k}.npz"
            how = ("bytes", "metadata", "array")[k % 3]
            try:
                if how == "bytes":
                    bad.write_bytes(mutate_bytes(chooser, path.read_bytes()))
                else:
                    # digest recomputed: the kind's field checks are under attack, not the digest
                    write_members(bad, (mutate_metadata if how == "metadata" else mutate_array)(chooser, members))
            except Exception as exc:  # noqa: BLE001 - a damage the helper cannot make: not a case
                continue
            tally.case("model-files", _load_and_use(cls, use, bad), f"{kind} {how}")
            bad.unlink()
    attack_binary_lm(tally, work, rng, scale)


def _load_and_use(cls, use, path) -> str | None:
    try:
        model = cls.load(path)
    except ValueError as exc:
        REFUSED[0] = True
        return None if str(path) in str(exc) else f"ValueError without the file name: {str(exc)[:120]}"
    except Exception as exc:  # noqa: BLE001
        return f"load: {type(exc).__name__}: {str(exc)[:120]}"
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", RuntimeWarning)
            use(model)
    except ValueError as exc:
        if "dense feature arrays" in str(exc):  # a valid model of dense inputs (metadata says so): not a fault
            return None
        return f"loaded, then failed in use: ValueError: {str(exc)[:120]}"
    except Exception as exc:  # noqa: BLE001
        return f"loaded, then failed in use: {type(exc).__name__}: {str(exc)[:120]}"
    return None


UNDETECTED = {"binary LM, structural open": 0}


def _binary_lm_queries(model, probes):
    """Every kind of query of a model, scores of ``probes`` returned."""
    scores = [model.score_sentence(s) for s in probes]
    ids = np.arange(model.vocab_size, dtype=np.int32)
    model.score_sentences(probes)
    model.token_log10probs(ids, np.asarray([len(ids)]))
    model.lookups([ids[i:i + 2] for i in range(len(ids) - 2)], ids[2:])
    model.next_word_log10probs("the cat")
    model.minimal_state(ids[:2].tolist())
    model.ngrams(model.order)
    return scores


def attack_binary_lm(tally: Tally, work: Path, rng: random.Random, scale: float) -> None:
    """Two cases per damaged file: the structural open (``verify=False``, what the default
    open does for a file version it has verified before; the kernels' bounds checks must
    turn damage into a ValueError naming the file or a usable model; wrong scores there are
    counted as undetected, not bad: only the full check reads the tables) and
    ``open_binary(verify=True)`` (refused, or the scores unchanged)."""
    from varorder.lm import ModifiedKneserNey
    from varorder.lm.binary import open_binary, write_binary

    words = "the of a cat dog sat on mat".split()
    sentences = [" ".join(rng.choice(words) for _ in range(rng.randint(1, 8))) for _ in range(200)]
    model = ModifiedKneserNey(order=3).fit_sentences(sentences).model_
    good = work / "lm.bin"
    write_binary(model, good)
    probes = ["the cat sat", "a dog", "", "mat mat on the"]
    expected = [model.score_sentence(s) for s in probes]
    for k in range(int(80 * scale)):
        bad = work / f"lm-bad{k}.bin"
        bad.write_bytes(mutate_bytes(RandomChooser(rng.random()), good.read_bytes(), max_edits=4))
        for verify in (False, True):
            try:
                scores = _binary_lm_queries(open_binary(bad, verify=verify), probes)
                outcome = None
                if scores != expected:
                    if verify:
                        outcome = "silent wrong scores after verify=True"
                    else:
                        UNDETECTED["binary LM, structural open"] += 1
            except ValueError as exc:
                REFUSED[0] = True
                outcome = None if str(bad) in str(exc) else f"ValueError without the file name: {str(exc)[:120]}"
            except Exception as exc:  # noqa: BLE001
                outcome = f"{type(exc).__name__}: {exc}"
            tally.case("model-files", outcome, f"binary LM {k} ({'verify' if verify else 'structural open'})")
        bad.unlink()


# ----------------------------------------------------------------------------------- engine

def attack_engine(tally: Tally, scale: float) -> None:
    from varorder import chain, hypergraph, lattice

    rng = random.Random(7)
    specials = [1e308, -1e308, np.inf, -np.inf, np.nan, 1e300, 750.0, -750.0, 0.0]

    def check_chain(emissions, transitions, lengths, seed, k, n):
        result = {}
        result["logz"] = chain.log_partition(emissions, transitions, lengths=lengths)
        node, _ = chain.marginals(emissions, transitions, lengths=lengths)
        paths, scores = chain.viterbi(emissions, transitions, lengths=lengths)
        draws = chain.sample(emissions, transitions, lengths=lengths, n=n, seed=seed)
        top, top_scores = chain.kbest(emissions, transitions, lengths=lengths, k=k)
        back = chain.path_score(emissions, transitions, paths, lengths=lengths)
        if np.isnan(result["logz"]).any() or np.isnan(node).any() or np.isnan(scores).any():
            raise AssertionError("NaN in a result")
        length = np.full(emissions.shape[0], emissions.shape[1]) if lengths is None else np.asarray(lengths)
        for b in range(emissions.shape[0]):
            if not np.isfinite(scores[b]):  # no allowed path: -1 throughout, with a warning
                continue
            inside = [paths[b, :length[b]], draws[b, :, :length[b]], top[b, 0, :length[b]]]
            outside = [paths[b, length[b]:], draws[b, :, length[b]:]]
            if any(((x < 0) | (x >= emissions.shape[2])).any() for x in inside) or any((x != -1).any() for x in outside):
                raise AssertionError("a state outside [0, K) within a sequence, or not -1 past its end")
        finite = np.isfinite(scores)
        if not np.allclose(back[finite], scores[finite], rtol=1e-9, atol=1e-6):
            raise AssertionError("path_score disagrees with viterbi")

    for case in range(int(150 * scale)):
        B, L, K = rng.randint(1, 3), rng.randint(1, 5), rng.randint(1, 4)
        emissions = np.array([[[rng.gauss(0, 1) for _ in range(K)] for _ in range(L)] for _ in range(B)])
        transitions = np.array([[rng.gauss(0, 1) for _ in range(K)] for _ in range(K)])
        for _ in range(rng.randint(0, 2)):
            (emissions if rng.random() < 0.5 else transitions).flat[rng.randrange(K)] = rng.choice(specials)
        def hostile(good, bad, p=0.2):  # each argument hostile with probability p
            return rng.choice(bad) if rng.random() < p else rng.choice(good)

        lengths = hostile([None, [L] * B, [max(L - 1, 1)] * B], [[True] * B, [L + 1] * B, [-1] * B, [0] * B, [1.5] * B, ["2"] * B])
        seed = hostile([0, 3, None, np.int64(4)], [-1, "x", 1.5, True, 2 ** 70])
        k = hostile([1, 3], [0, -2, 2.5])
        n = hostile([1, 5], [0, -1])
        shapes = rng.random()
        if shapes < 0.1:
            emissions = emissions[..., :max(K - 1, 0)]
        elif shapes < 0.15:
            emissions = emissions.astype(object)
        elif shapes < 0.2:
            emissions = emissions.astype(np.complex128)
        outcome = library_outcome(lambda: check_chain(emissions, transitions, lengths, seed, k, n))
        if outcome and outcome.startswith("AssertionError"):
            outcome = "silent wrong answer: " + outcome
        tally.case("engine", outcome, f"chain case {case}")
    for case in range(int(80 * scale)):
        def hostile(good, bad, p=0.2):
            return rng.choice(bad) if rng.random() < p else rng.choice(good)

        weights = [rng.choice([0.5, -1.0, rng.gauss(0, 3), rng.choice(specials)]) for _ in range(3)]
        positions = hostile([[0, 1, 1, 2]], [[0, 2, 1, 2], [1, 2, 2, 3], [0, 0, 1, 2], [0, 1.5, 1, 2], []])
        arcs = hostile([([0, 0, 1], [1, 2, 3]), ([0, 0, 2], [1, 2, 3])], [([0, 5, 1], [1, 2, 3]), ([0, -1, 1], [1, 2, 3]),
                                                                       ([0, 0, 1], [1, 3, 3])])
        labels = hostile([[0, 1, 2], [3, 3, 0]], [[0, -1, 2], [0.5, 1, 2], [0, 1]])
        seed = hostile([0, 7], ["x", -1, 1.5])

        def run_lattice():
            lat = lattice.Lattice(positions, arcs[0], arcs[1], labels, weights)
            logz = lattice.log_partition(lat)
            marg = lattice.marginals(lat)
            samples = lattice.sample(lat, n=3, seed=seed)
            lattice.viterbi(lat)
            lattice.kbest(lat, hostile([1, 2], [0, -1]))
            if np.isnan(logz) or np.isnan(np.asarray(marg[0] if isinstance(marg, tuple) else marg)).any():
                raise AssertionError("NaN")
            return samples

        outcome = library_outcome(run_lattice)
        if outcome and outcome.startswith("AssertionError"):
            outcome = "silent wrong answer: " + outcome
        tally.case("engine", outcome, f"lattice case {case}")
    for case in range(int(60 * scale)):
        def hostile(good, bad, p=0.2):
            return rng.choice(bad) if rng.random() < p else rng.choice(good)

        weight = [rng.choice([0.5, -1.0, rng.gauss(0, 3), rng.choice(specials)]) for _ in range(3)]
        heads = hostile([[1, 2, 2]], [[1, 2, 5], [1, -1, 2], [1.0, 2, 2]])
        tails = hostile([[[0], [1], [0]], [[0], [0, 1], [1]]], [[[0], [1], [3]], [[0], [2], [0]], [[0], [], [0]]])
        num_nodes = hostile([3, [3]], [0, -1, 2.5, True])

        def run_hypergraph():
            graph = hypergraph.Hypergraph(num_nodes, heads, tails, weight)
            logz = hypergraph.log_partition(graph)
            hypergraph.marginals(graph)
            hypergraph.viterbi(graph)
            hypergraph.sample(graph, n=2, seed=hostile([0, 5], ["x", -2]))
            if np.isnan(logz).any():
                raise AssertionError("NaN")

        outcome = library_outcome(run_hypergraph)
        if outcome and outcome.startswith("AssertionError"):
            outcome = "silent wrong answer: " + outcome
        tally.case("engine", outcome, f"hypergraph case {case}")


# -------------------------------------------------------------------------------------- CLI

ISSUE_INVOCATIONS = [  # the issue's rows, plus the same kinds for every other command
    ["align", "apply", "m.npz", "a", "b", "--threshold", "-1"],
    ["align", "apply", "m.npz", "a", "b", "--threshold", "nan"],
    ["align", "train", "a", "b", "-o", "{missing}/m.npz"],
    ["align", "train", "a", "b", "-o", "m.npz", "--iterations", "0"],
    ["tag", "train", "t.conllu", "-o", "{missing}/m.npz"],
    ["tag", "train", "t.conllu", "-o", "m.npz", "--max-iterations", "-3"],
    ["tag", "train", "t.conllu", "-o", "m.npz", "--threads", "0"],
    ["tag", "train", "t.conllu", "-o", "m.npz", "--c2", "-1"],
    ["tag", "train", "t.conllu", "-o", "m.npz", "--learner", "samplerank", "--epochs", "0"],
    ["decode", "x.arpa", "--task", "t9", "--text", "1", "--time-limit", "-1"],
    ["decode", "x.arpa", "--task", "t9", "--text", "1", "--max-candidates", "0"],
    ["sample", "x.arpa", "--task", "t9", "--text", "1", "--max-trials", "0"],
    ["sample", "x.arpa", "--task", "t9", "--text", "1", "--samples", "0"],
    ["induce", "train", "t.conllu", "-o", "{missing}/m.npz"],
    ["lm", "train", "a", "-o", "{missing}/m.arpa"],
    ["lm", "build-binary", "a", "{missing}/m.bin"],
    ["decipher", "prepare", "a", "-o", "a/task"],
    ["decipher", "eval", "folder", "m.npz", "--decoded", "{missing}/d.txt"],
    ["demo", "--out", "a/plots"],
    ["--threads", "0", "demo", "--engine"],
    ["--threads", "x", "demo", "--engine"],
    ["tag", "predict", "junk.npz", "t.conllu", "-o", "out.conllu"],
    ["align", "apply", "junk.npz", "a", "b"],
    ["induce", "parse", "junk.npz", "t.conllu"],
    ["decipher", "eval", "folder", "junk.npz"],
    ["lm", "score", "junk.npz", "a"],
    ["lm", "score", "binary.bin", "a"],
    ["lm", "next", "junk.arpa", "the"],
    ["decode", "junk.arpa", "--task", "t9", "--text", "1"],
    ["tag", "train", "latin1.conllu", "-o", "m.npz"],
    ["lm", "train", "latin1.txt", "-o", "m.arpa"],
    ["lm", "train", "corrupt.gz", "-o", "m.arpa"],
    ["align", "train", "latin1.txt", "latin1.txt", "-o", "m.npz"],
    ["decode", "good.arpa", "--task", "t9", "--input", "latin1.txt"],
]


def _workspace(folder: Path) -> None:
    for name in ("a", "b", "m.npz", "t.conllu", "x.arpa"):
        (folder / name).write_text("x\n")
    (folder / "folder").mkdir(exist_ok=True)
    (folder / "junk.npz").write_bytes(b"PK\x03\x04" + bytes(range(200)))
    (folder / "junk.arpa").write_text("\\data\\\nngram 1=2\n\n\\1-grams:\n-1\t<s>\n")
    (folder / "binary.bin").write_bytes(b"varorder-lm\x00" + b"\x01" * 40)
    (folder / "latin1.conllu").write_bytes("1\tcaf\xe9\t_\tNOUN\t_\t_\t0\troot\t_\t_\n\n".encode("latin-1"))
    (folder / "latin1.txt").write_bytes("caf\xe9 au lait\n".encode("latin-1"))
    (folder / "corrupt.gz").write_bytes(gzip.compress(b"the cat sat\n" * 50)[:-12] + b"\x00" * 4)
    (folder / "good.arpa").write_text("\\data\\\nngram 1=4\n\n\\1-grams:\n-1\t<s>\t-0.5\n-0.6\t</s>\n-0.7\t<unk>\n"
                                      "-0.5\tthe\t-0.3\n\n\\end\\\n")


def _commands():
    """(path, click command) of every leaf command."""
    import click

    from varorder.cli.main import main

    ctx = click.Context(main)
    out = []

    def walk(prefix, command):
        if isinstance(command, click.Group):
            for name in command.list_commands(ctx):
                walk(prefix + [name], command.get_command(ctx, name))
        else:
            out.append((prefix, command))
    walk([], main)
    return out


def _dummy_arguments(command) -> list[str]:
    import click

    args = []
    for param in command.params:
        if isinstance(param, click.Argument) and param.required:
            kind = getattr(param.type, "file_okay", True)
            args += ["folder" if kind is False else "a"] * (param.nargs if param.nargs > 0 else 1)
    return args


def _bad_values(param) -> list[tuple[str, str]]:
    """(value, why it is bad) for a numeric option; [] for other types."""
    import click

    kind = param.type
    if isinstance(kind, click.Tuple):
        return []
    numeric_int = isinstance(kind, click.types.IntParamType)
    numeric_float = isinstance(kind, click.types.FloatParamType)
    if not (numeric_int or numeric_float):
        return []
    values = [("nan", "NaN"), ("inf", "inf"), ("abc", "junk"), ("1e400", "overflow")] if numeric_float else \
        [("abc", "junk"), ("1.5", "not an integer")]
    high = getattr(kind, "max", None)
    if high is not None:
        values.append((str(high + 1) if numeric_int else str(high + 0.5), "above the maximum"))
    low = getattr(kind, "min", None)
    if low is not None:
        below = (low - 1) if numeric_int else (low if getattr(kind, "min_open", False) else low - 0.5)
        values.append((str(below), "below the minimum"))
    else:
        values.append(("-1", "unbounded: -1 accepted?"))
    return values


class TooLong(Exception):
    """A command line that ran past 60 s (it began real work on a bad value)."""


def _too_long(signum, frame):
    raise TooLong("more than 60 s")


def attack_cli(tally: Tally, work: Path) -> None:
    from click.testing import CliRunner

    from varorder.cli.main import main

    folder = work / "cli"
    folder.mkdir()
    _workspace(folder)
    old = os.getcwd()
    os.chdir(folder)
    missing = str(folder / "no-such-folder")
    try:
        def invoke(args, expect_usage: bool, what: str, stdin: str | None = None):
            began = time.perf_counter()
            if VERBOSE[0]:
                print(f"  cli: {' '.join(args)}", file=sys.stderr, flush=True)
            signal.signal(signal.SIGALRM, _too_long)
            signal.alarm(60)
            try:
                result = CliRunner().invoke(main, args, input=stdin)
            finally:
                signal.alarm(0)
            seconds = time.perf_counter() - began
            output = result.output
            bad = None
            if result.exception is not None and not isinstance(result.exception, SystemExit):
                bad = f"exception {type(result.exception).__name__}: {result.exception}"
            elif "Traceback" in output:
                bad = "traceback printed"
            elif result.exit_code == 0:
                bad = "exit 0"
            elif expect_usage and result.exit_code != 2:
                bad = f"exit {result.exit_code} (work began): {output.strip()[-160:]}"
            elif len([line for line in output.splitlines() if line.startswith(("Error", "Aborted"))]) != 1:
                bad = f"not one error line: {output.strip()[-160:]!r}"
            elif "Aborted" in output:
                bad = "Aborted! instead of a message"
            elif seconds > 60:
                bad = f"{seconds:.0f} s"
            tally.case("cli", bad, what)

        for args in ISSUE_INVOCATIONS:
            args = [a.replace("{missing}", missing) for a in args]
            usage = any(a in ("-1", "nan", "0", "-3", "x") for a in args) or any(missing in a or a.startswith("a/")
                                                                                for a in args)
            invoke(args, usage, " ".join(args))
        invoke(["lm", "score", "good.arpa", "-"], False, "lm score - with a spelled-out <s>", stdin="<s> the\n")
        for prefix, command in _commands():
            import click

            base = prefix + _dummy_arguments(command)
            for param in command.params:
                if not isinstance(param, click.Option) or param.hidden:
                    continue
                flag = max(param.opts, key=len)
                for value, why in _bad_values(param):
                    invoke(base + [flag, value], True, f"{' '.join(prefix)} {flag} {value} ({why})")
                kind = type(param.type).__name__
                if kind == "OutputFile" or (kind != "OutputFolder" and isinstance(param.type, click.Path)
                                            and not param.type.exists and "out" in param.name):
                    invoke(base + [flag, missing + "/out"], True, f"{' '.join(prefix)} {flag} in a missing folder")
                if kind == "OutputFolder":  # may be created, but not under a file
                    invoke(base + [flag, "a/out"], True, f"{' '.join(prefix)} {flag} under a file")
            for param in command.params:
                if isinstance(param, click.Argument) and type(param.type).__name__ == "OutputFile":
                    args = [missing + "/out" if p is param else "a" for p in command.params
                            if isinstance(p, click.Argument) and p.required]
                    invoke(prefix + args, True, f"{' '.join(prefix)} {param.name} in a missing folder")
        for args in (["align", "train", "a", "b", "-o", "m.npz", "--dask", "tcp://127.0.0.1:9"],
                     ["lm", "train", "a", "-o", "m.arpa", "--dask-scheduler", "tcp://127.0.0.1:9"],
                     ["align", "train", "a", "b", "-o", "m.npz", "--dask", "not an address"]):
            invoke(args, False, " ".join(args))
    finally:
        os.chdir(old)


# ------------------------------------------------------------------------------------ files

def attack_files(tally: Tally, work: Path) -> None:
    from varorder.decipher import prepare, save
    from varorder.eval.plots import plot_curves
    from varorder.lm.arpa import write_arpa
    from varorder.io.conllu import ConlluSentence, write_conllu
    from varorder.io.pharaoh import write_pharaoh
    from varorder.io.ptb import read_ptb, write_ptb
    from varorder.lm import ModifiedKneserNey
    from varorder.lm.binary import write_binary
    from varorder.models.hmm import HMM

    lm = ModifiedKneserNey(order=2).fit_sentences(["the cat", "a dog", "the dog"] * 5).model_
    tree_file = work / "tree.mrg"
    tree_file.write_text("(S (NP (DT the) (NN dog)) (VP (VBZ runs)))\n")
    trees = read_ptb(tree_file)
    sentence = ConlluSentence([], [["1", "the", "_", "DET", "_", "_", "0", "root", "_", "_"]], [0])
    _, _, model_path = saved_model("HMM", work)

    def ocr_json(path):
        from varorder.io._text import atomic_write_text

        with atomic_write_text(path) as handle:  # what tasks.ocr.write_json does
            json.dump({"a": 1}, handle)

    writers = {
        "write_arpa": lambda p: write_arpa(lm, p),
        "write_arpa.gz": lambda p: write_arpa(lm, p.with_suffix(".gz")),
        "write_binary": lambda p: write_binary(lm, p),
        "write_conllu": lambda p: write_conllu(p, [sentence]),
        "write_pharaoh": lambda p: write_pharaoh(p, [{(0, 1)}]),
        "write_ptb": lambda p: write_ptb(p, trees),
        "ocr json": ocr_json,
        "png plot": lambda p: plot_curves({"a": ([0, 1], [0, 1])}, p.with_suffix(".png"), "x", "y"),
        "model save": lambda p: HMM.load(model_path).save(p),
        "decipher save": lambda p: save(prepare([["a", "b"], ["b", "a", "a"]] * 20, num_words=2, num_cipher=5), p),
    }
    for umask in (0o022, 0o077, 0o002):
        for name, write in writers.items():
            folder = work / f"umask{umask:o}-{name.replace(' ', '_')}"
            folder.mkdir()
            old = os.umask(umask)
            try:
                outcome = library_outcome(lambda: write(folder / "out"))
            finally:
                os.umask(old)
            if outcome is None:
                expected = 0o666 & ~umask
                for written in folder.rglob("*"):
                    if written.is_file():
                        mode = written.stat().st_mode & 0o777
                        if written.name.startswith(".") or written.name.endswith(".tmp"):
                            outcome = f"leftover temporary {written.name}"
                        elif mode != expected:
                            outcome = f"{written.name} has mode {mode:o}, expected {expected:o}"
            tally.case("files", outcome, f"{name} under umask {umask:03o}")
    attack_kills(tally, work)


_CHILD_WRITE = r"""
import sys, time
sys.path.insert(0, sys.argv[1])
from varorder.cli.main import _exit_cleanly_on_sigterm
_exit_cleanly_on_sigterm()  # as every varorder command does
which, out = sys.argv[2], sys.argv[3]

def stall():
    print("writing", flush=True)
    time.sleep(60)

if which in ("text", "text.gz"):
    from varorder.io._text import atomic_write_text
    with atomic_write_text(out + (".gz" if which == "text.gz" else "")) as handle:
        handle.write("partial ")
        stall()
elif which == "model":
    import numpy as np
    from varorder.models import persist
    savez = np.savez_compressed
    def slow_savez(*args, **kwargs):
        savez(*args, **kwargs)
        stall()
    np.savez_compressed = slow_savez
    persist.save_model(out, "X", {}, {}, {"a": np.zeros(3)})
elif which == "binary":
    from varorder.lm.corpus import atomic_output
    with atomic_output(out) as handle:
        handle.write(b"partial")
        stall()
"""


def attack_kills(tally: Tally, work: Path) -> None:
    """Writers stopped mid-write by SIGTERM / SIGINT (a child process signalled once it is inside
    the write), then whole commands signalled at random moments: no hidden temporary file may
    remain, and no partial output."""
    for which in ("text", "text.gz", "model", "binary"):
        for k in range(6):
            out = work / f"midwrite-{which}-{k}"
            out.mkdir()
            process = subprocess.Popen([sys.executable, "-c", _CHILD_WRITE, str(ROOT / "src"), which, str(out / "out")],
                                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            line = process.stdout.readline()
            sig = signal.SIGTERM if k % 2 == 0 else signal.SIGINT
            process.send_signal(sig)
            try:
                _, err = process.communicate(timeout=60)
            except subprocess.TimeoutExpired:
                process.kill()
                tally.case("files", "did not stop within 60 s of the signal", which)
                continue
            left = sorted(p.name for p in out.iterdir())
            bad = None if line.strip() == "writing" else f"the child never began writing: {err.strip()[-200:]}"
            if left:
                bad = f"left behind: {left}"
            tally.case("files", bad, f"{which} writer stopped mid-write by {sig.name}")

    """Commands killed by SIGTERM / SIGINT at random moments: no hidden temp file, and the
    output either absent or complete."""
    rng = random.Random(5)
    corpus = work / "kill-corpus.txt"
    words = [f"w{i}" for i in range(20000)]
    corpus.write_text("".join(" ".join(rng.choice(words) for _ in range(20)) + "\n" for _ in range(100000)))
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    jobs = {"lm train -> ARPA": ["lm", "train", str(corpus), "-o", "{out}/model.arpa", "-n", "3"],
            "lm train -> binary": ["lm", "train", str(corpus), "-o", "{out}/model.bin", "-n", "3", "--binary"]}
    for job, (name, args) in enumerate(jobs.items()):
        probe = work / "kill-probe"
        probe.mkdir(exist_ok=True)
        began = time.perf_counter()
        subprocess.run([sys.executable, "-m", "varorder", *[a.replace("{out}", str(probe)) for a in args]], env=env,
                       capture_output=True, timeout=600)
        total = time.perf_counter() - began
        print(f"  {name}: {total:.1f} s uninterrupted; killed at random moments in [0.5 s, {total * 0.98:.1f} s]",
              file=sys.stderr, flush=True)
        for k in range(6):
            out = work / f"kill-{job}-{k}"
            out.mkdir()
            process = subprocess.Popen([sys.executable, "-m", "varorder", *[a.replace("{out}", str(out)) for a in args]],
                                       env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            time.sleep(rng.uniform(0.5, total * 0.98) if k < 3 else rng.uniform(total * 0.7, total * 0.98))
            process.send_signal(signal.SIGTERM if k % 2 == 0 else signal.SIGINT)
            try:
                _, err = process.communicate(timeout=60)
            except subprocess.TimeoutExpired:
                process.kill()
                err = b""
                tally.case("files", "did not stop within 60 s of the signal", name)
                continue
            left = sorted(p.name for p in out.iterdir())
            bad = None
            if any(p.startswith(".") or p.endswith(".tmp") for p in left):
                bad = f"temporary files left: {left}"
            elif b"Traceback" in err:
                bad = "traceback on the signal"
            tally.case("files", bad, f"{name} killed by {'SIGTERM' if k % 2 == 0 else 'SIGINT'}")


# ----------------------------------------------------------------------------------- memory

_CHILD_ALIGN = r"""
import sys, time, resource
sys.path.insert(0, sys.argv[1])
from varorder.agree.aligner import WordAligner
from varorder.io.bitext import read_bitext
pairs = read_bitext(sys.argv[2], sys.argv[3])
model = WordAligner(iterations=2, ibm1_iterations=2).fit(pairs)
n = int(sys.argv[4])
e, f = [], []
for pe, pf in pairs * 200:
    e += pe; f += pf
    if len(e) >= n: break
e, f = e[:n], f[:n]
began = time.perf_counter()
links = model.align([(e, f)])
forward, reverse = model.directional([(e, f)])
print(len(links[0]), round(time.perf_counter() - began, 2), resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024)
"""

_CHILD_NAACL = r"""
import sys, resource
sys.path.insert(0, sys.argv[1])
from varorder.io.naacl import read_naacl
try:
    out = read_naacl(sys.argv[2])
    print("read", len(out), resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024)
except ValueError as exc:
    print("refused", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024, exc)
"""


def attack_memory(tally: Tally, work: Path) -> None:
    def child(code, *args, what):
        began = time.perf_counter()
        try:
            done = subprocess.run([sys.executable, "-c", code, str(ROOT / "src"), *map(str, args)], capture_output=True,
                                  text=True, timeout=60, preexec_fn=lambda: resource.setrlimit(
                                      resource.RLIMIT_AS, (4 << 30, 4 << 30)))
        except subprocess.TimeoutExpired:
            tally.case("memory", "more than 60 s", what)
            return
        seconds = time.perf_counter() - began
        if done.returncode != 0:
            tally.case("memory", f"exit {done.returncode}: {done.stderr.strip()[-200:]}", what)
            return
        print(f"  {what}: {done.stdout.strip()[:200]} ({seconds:.1f} s with start-up)", flush=True)
        peak_mb = int(done.stdout.split()[-1] if "refused" not in done.stdout else done.stdout.split()[1])
        tally.case("memory", f"peak {peak_mb} MB" if peak_mb > 2000 else None, what)

    trial = DATA / "hansards-en-fr" / "normalized"
    if (trial / "trial.e").exists():
        for n in (1000, 5000):
            child(_CHILD_ALIGN, trial / "trial.e", trial / "trial.f", n, what=f"aligner on a {n}-word pair")
    naacl = work / "huge.wa"
    naacl.write_text("1 1 1 S\n100000000 1 1 P\n")
    child(_CHILD_NAACL, naacl, what="read_naacl naming sentence 10^8")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--scale", type=float, default=1.0, help="multiplier of the random cases per row")
    parser.add_argument("--rows", default=",".join(ROWS), help="comma-separated rows to run")
    parser.add_argument("--json", type=Path, help="write the tally here")
    parser.add_argument("--verbose", action="store_true", help="print every command line tried")
    args = parser.parse_args(argv)
    VERBOSE[0] = args.verbose
    tally = Tally()
    rows = args.rows.split(",")
    began = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="varorder-attack-") as folder:
        work = Path(folder)
        steps = [("readers-real", lambda: attack_readers(tally, work, args.scale)),
                 ("model-files", lambda: attack_models(tally, work, args.scale)),
                 ("engine", lambda: attack_engine(tally, args.scale)),
                 ("cli", lambda: attack_cli(tally, work)),
                 ("files", lambda: attack_files(tally, work)),
                 ("memory", lambda: attack_memory(tally, work))]
        for row, step in steps:
            if row in rows or (row == "readers-real" and "readers-generated" in rows):
                started = time.perf_counter()
                step()
                print(f"[{row}] done in {time.perf_counter() - started:.0f} s", file=sys.stderr, flush=True)
    report = tally.report()
    print(report)
    for what, count in UNDETECTED.items():
        print(f"{what}: {count} damaged files opened and scored differently without an error (not bad: "
              f"the structural open only, which the default open uses for file versions verified before; the "
              f"verify=True cases above count any such file it lets through as bad)")
    print(f"total {time.perf_counter() - began:.0f} s")
    if args.json:
        args.json.write_text(json.dumps(tally.rows, indent=1) + "\n")
    return 1 if any(entry["bad"] for entry in tally.rows.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
