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
    "ocr": (read_ocr_letters, f"1\ta\t2\t1\t1\t0\t{_PIXELS}\t\n2\tb\t-1\t1\t2\t0\t{_PIXELS}\t\n"),
}
SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


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

    old = os.umask(umask)
    try:
        path = tmp_path / "out.align"
        write_pharaoh(path, [{(0, 1)}])
    finally:
        os.umask(old)
    assert (path.stat().st_mode & 0o777) == (0o666 & ~umask)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.align"]
    with pytest.raises(ValueError, match="does not exist"):
        write_pharaoh(tmp_path / "missing" / "out.align", [{(0, 1)}])
