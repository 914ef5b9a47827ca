"""Every reader behind ``io._text.open_text`` on hostile bytes: arbitrary data, truncations
and byte mutations of a valid file, plain and gzip-compressed, and misnamed files.
Each must end in a clear ``ValueError`` naming the file, or in a correct result — never
another exception type."""

from __future__ import annotations

import gzip
import zlib

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from varorder.decipher.data import read_corpus_sentences
from varorder.lm.arpa import read_arpa
from varorder.io.bitext import read_bitext, read_joint
from varorder.io.crfsuite import read_crfsuite
from varorder.io.ptb import read_ptb
from varorder.lm.corpus import iter_sentences
from varorder.tasks.grammar_induction import load_sentences
from varorder.io.conllu import read_conllu
from varorder.io.fasta import read_fasta
from varorder.io.naacl import read_naacl
from varorder.io.ocr import read_ocr_letters
from varorder.io.pharaoh import read_pharaoh
from varorder.io.tagged import read_tagged

_PIXELS = "\t".join(["0", "1"] * 64)
VALID = {
    "conllu": (read_conllu, "# sent_id = 1\n1\tThe\tthe\tDET\tDT\t_\t2\tdet\t_\t_\n2\tdog\tdog\tNOUN\tNN\t_\t0\troot\t_\t_\n\n"),
    "tagged": (read_tagged, "The\tDT\ndog\tNN\n\nIt\tPRP\n"),
    "fasta": (read_fasta, ">human\nACGT-A\n>mouse\nACGTTA\n"),
    "naacl": (read_naacl, "1 1 1 S\n1 2 2 P\n2 1 1\n"),
    "pharaoh": (read_pharaoh, "0-0 1-1\n\n2-0\n"),
    "arpa": (lambda path: _lm_scores(read_arpa(path)), "\\data\\\nngram 1=4\nngram 2=2\n\n\\1-grams:\n"
             "-1.0\t<s>\t-0.5\n-0.6\t</s>\n-0.7\t<unk>\n-0.5\ta\t-0.3\n\n\\2-grams:\n-0.1\t<s> a\n"
             "-0.2\ta </s>\n\n\\end\\\n"),
    "ocr": (read_ocr_letters, f"1\ta\t2\t1\t1\t0\t{_PIXELS}\t\n2\tb\t-1\t1\t2\t0\t{_PIXELS}\t\n"),
    "crfsuite": (read_crfsuite, "DT\tw=the\tsuffix=he:0.5\nNN\tw=dog\n\nVB\tw=runs\n"),
    "ptb": (lambda path: [repr(t) for t in read_ptb(path)], "(S (NP (DT the) (NN dog)) (VP (VBZ runs)))\n( (X (Y a)))\n"),
    "bitext": (lambda path: read_bitext(path, path), "the house\na book\n"),
    "joint": (read_joint, "the house ||| das haus\na book ||| ein buch\n"),
    "lm-corpus": (lambda path: list(iter_sentences(path)), "the cat sat\na dog\n"),
    "cipher-corpus": (read_corpus_sentences, "The cat sat. A dog ran!\n\nIt ended?\n"),
    "induction-tags": (lambda path: load_sentences(path, fmt="tags"), "D N V\nN V P D N\n"),
    "induction-ptb": (lambda path: load_sentences(path, fmt="ptb"), "(S (NP (DT the) (NN dog)) (VP (VBZ runs)))\n"),
}
def _lm_scores(model):
    return [round(float(model.score_sentence(s)), 6) for s in ("a", "a a", "")]


SETTINGS = settings(max_examples=int(__import__("os").environ.get("HOSTILE_EXAMPLES", "60")), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def _outcome(reader, path):
    """Run the reader; a ValueError must name the file, anything but ValueError fails."""
    try:
        return reader(path)
    except ValueError as exc:
        assert str(path) in str(exc), f"error does not name the file: {exc}"
        return None


@pytest.mark.parametrize("name", sorted(VALID))
def test_valid_sample_reads_plain_gzip_and_misnamed(tmp_path, name):
    reader, text = VALID[name]
    plain = tmp_path / "plain.txt"
    plain.write_text(text, encoding="utf-8")
    expected = reader(plain)
    assert expected  # the sample is a real, non-empty file of its format
    packed = tmp_path / "packed.txt"  # gzip without the .gz name
    packed.write_bytes(gzip.compress(text.encode()))
    assert repr(reader(packed)) == repr(expected)
    misnamed = tmp_path / "plain.gz"  # plain text with a .gz name
    misnamed.write_text(text, encoding="utf-8")
    assert repr(reader(misnamed)) == repr(expected)


@pytest.mark.parametrize("name", sorted(VALID))
@SETTINGS
@given(data=st.binary(max_size=300))
def test_arbitrary_bytes(tmp_path, name, data):
    path = tmp_path / "any.txt"
    path.write_bytes(data)
    _outcome(VALID[name][0], path)


@pytest.mark.parametrize("name", sorted(VALID))
@SETTINGS
@given(data=st.data(), compress=st.booleans())
def test_mutated_and_truncated(tmp_path, name, data, compress):
    reader, text = VALID[name]
    raw = bytearray(gzip.compress(text.encode()) if compress else text.encode())
    for _ in range(data.draw(st.integers(0, 4))):
        position = data.draw(st.integers(0, len(raw) - 1))
        raw[position] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(1, len(raw)))
    path = tmp_path / ("mutated.gz" if compress else "mutated.txt")
    path.write_bytes(bytes(raw[:cut]))
    _outcome(reader, path)


def test_corruption_names_file_and_line(tmp_path):
    path = tmp_path / "bad.conllu"
    path.write_bytes(b"# sent_id = 1\n1\tThe\tthe\tDET\tDT\t_\t0\troot\t_\t_\n2\t\xff\xfe\tx\tNOUN\tNN\t_\t1\tx\t_\t_\n")
    with pytest.raises(ValueError, match=r"bad.conllu: line \d+: not valid UTF-8"):
        read_conllu(path)
    truncated = tmp_path / "cut.gz"
    truncated.write_bytes(gzip.compress(VALID["tagged"][1].encode() * 50)[:-30])
    with pytest.raises(ValueError, match=r"cut.gz: line \d+: corrupt or truncated gzip"):
        read_tagged(truncated)
    assert zlib  # imported for the error types the reader must translate


def test_known_bad_arpa_and_gold_files(tmp_path):
    head = "\\data\\\nngram 1=3\n\n\\1-grams:\n-1.0\t<s>\t-0.5\n-0.5\t</s>\n-0.5\ta\t-0.3\n\n"
    cases = {
        "extra.arpa": (head + "\\2-grams:\n-0.1\t<s> a\n\n\\end\\\n", r"extra.arpa:9: section \\2-grams: but"),
        "huge.arpa": (head.replace("-0.3", "1e39") + "\\end\\\n", r"huge.arpa:7: back-off 1e39 is outside the float32"),
    }
    for name, (text, match) in cases.items():
        (tmp_path / name).write_text(text)
        with pytest.raises(ValueError, match=match):
            read_arpa(tmp_path / name)
    raw = bytearray(gzip.compress((head + "\\end\\\n" + "trailing\n" * 200).encode()))
    raw[-6] ^= 0xFF  # the CRC, checked although reading could stop at \end\
    (tmp_path / "crc.arpa.gz").write_bytes(bytes(raw))
    with pytest.raises(ValueError, match=r"crc.arpa.gz(:1)?: corrupt"):
        read_arpa(tmp_path / "crc.arpa.gz")
    (tmp_path / "far.wa").write_text("100000000 1 1 S\n")
    with pytest.raises(ValueError, match="implausibly large"):
        read_naacl(tmp_path / "far.wa")


def test_known_bad_fields(tmp_path):
    huge = tmp_path / "huge.data"
    huge.write_text("1\ta\t-1\t1\t1\t0\t" + "\t".join(["0"] * 127 + ["9" * 25]) + "\t\n")
    with pytest.raises(ValueError, match=r"huge.data:1: non-integer or out-of-range"):
        read_ocr_letters(huge)
    empty = tmp_path / "empty.conllu"
    empty.write_text("1\tThe\tthe\t\tDT\t_\t0\troot\t_\t_\n\n")
    with pytest.raises(ValueError, match=r"empty.conllu:1: column 4 is empty"):
        read_conllu(empty)


@pytest.mark.parametrize("umask", [0o022, 0o077, 0o002])
def test_atomic_writes_respect_umask_and_leave_no_temp(tmp_path, umask):
    import os

    from varorder.io.pharaoh import write_pharaoh

    from varorder.eval.plots import plot_curves

    old = os.umask(umask)
    try:
        path = tmp_path / "out.align"
        write_pharaoh(path, [{(0, 1)}])
        plot_curves({"a": ([0, 1], [0, 1])}, tmp_path / "plot.png", "x", "y")
    finally:
        os.umask(old)
    for written in (path, tmp_path / "plot.png"):
        assert (written.stat().st_mode & 0o777) == (0o666 & ~umask)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.align", "plot.png"]
    with pytest.raises(ValueError, match="does not exist"):
        write_pharaoh(tmp_path / "missing" / "out.align", [{(0, 1)}])


@pytest.fixture(scope="module")
def cipher_task(tmp_path_factory):
    from varorder.testing.hostile import cipher_task as write_task

    return write_task(tmp_path_factory.mktemp("cipher") / "task", sentences=60, num_cipher=10)


@SETTINGS
@given(data=st.data())
def test_damaged_cipher_task_folder(cipher_task, tmp_path, data):
    """One file of a prepared decipherment folder damaged: a ValueError naming a file of the
    folder (a damaged word list can surface as a key that names unknown words), or a task
    that reads (every line checked)."""
    import shutil

    from varorder.decipher import load
    from varorder.testing.hostile import HypothesisChooser, mutate_bytes

    folder = tmp_path / "task"
    shutil.rmtree(folder, ignore_errors=True)
    shutil.copytree(cipher_task, folder)
    target = folder / data.draw(st.sampled_from(sorted(p.name for p in folder.iterdir())))
    raw = target.read_bytes()
    target.write_bytes(mutate_bytes(HypothesisChooser(data), raw) if raw else b"\xff")
    try:
        task = load(folder)
    except ValueError as exc:
        assert str(folder) in str(exc), exc
        return
    assert all(len(c) and (c >= 0).all() for c in task.cipher)


def test_arpa_announcing_more_ngrams_than_fit_in_the_file(tmp_path):
    """A count of 10^12 must not be allocated before the section is read (it was a MemoryError)."""
    text = VALID["arpa"][1].replace("ngram 2=2", f"ngram 2={10 ** 12}")
    path = tmp_path / "huge.arpa"
    path.write_text(text)
    with pytest.raises(ValueError, match=r"huge\.arpa:\d+: .*ngram 2=1000000000000"):
        read_arpa(path)


@settings(max_examples=80, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(records=st.lists(st.tuples(st.text("abcXY", min_size=1, max_size=4),
                                  st.lists(st.text("ACGT-", max_size=5), max_size=3)), max_size=5))
def test_fasta_headers_without_sequences_refused_at_their_line(tmp_path, records):
    """A header followed by no sequence line (a file of headers only read as sequences of length 0, #33)."""
    lines, headers = [], []
    for name, parts in records:
        headers.append(len(lines) + 1)
        lines += [f">{name}", *parts]
    path = tmp_path / "x.fa"
    path.write_text("".join(line + "\n" for line in lines))
    empty = [(no, name) for no, (name, parts) in zip(headers, records) if not "".join(parts)]
    if empty:
        with pytest.raises(ValueError, match=f"{path}, line {empty[0][0]}: record"):
            read_fasta(path)
    else:
        assert read_fasta(path) == [(name, "".join(parts)) for name, parts in records]


@settings(max_examples=150, deadline=None, derandomize=True)
@given(line=st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=30),
       language=st.sampled_from(["en", "fr"]), tokenize=st.booleans())
def test_normalized_tokens_are_never_empty_or_spaced(line, language, tokenize):
    """Characters whose decomposition is a space (the spacing accents '¯', '´', '¨') gave the token ' ' (#33)."""
    from varorder.io.bitext import normalize

    for token in normalize(line, language, tokenize=tokenize):
        assert token and not any(c.isspace() for c in token), (line, token)
    assert normalize("a \u00af b", "en") == ["a", "b"] and normalize("x\u00b4y", "fr") == ["x", "y"]
