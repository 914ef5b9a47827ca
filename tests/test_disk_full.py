"""Writers on a full disk or past the file-size limit (#33): every command exits 1 with one
line naming the path it could not write — the output, or the temporary table in the ``-T``
folder — and leaves no temporary file and the old output untouched.

The limit is ``RLIMIT_FSIZE`` in a subprocess (``write`` then fails with ``EFBIG``, SIGXFSZ
ignored); ``ENOSPC`` takes the same path through the writers (checked in-process by a
handle whose writes fail)."""

from __future__ import annotations

import errno
import subprocess
import sys
import textwrap

import numpy as np
import pytest

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="RLIMIT_FSIZE and SIGXFSZ as on Linux")

RUN = textwrap.dedent("""
    import resource, signal, sys
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    limit = int(sys.argv[1])
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    from varorder.cli.main import main
    main(sys.argv[2:], prog_name="varorder")
""")


def _run(limit, *args, cwd):
    import os
    from pathlib import Path

    import varorder

    # the varorder under test, whatever the working folder (PYTHONPATH may be relative)
    source = str(Path(varorder.__file__).resolve().parents[1])
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([source, os.environ.get("PYTHONPATH", "")]))
    return subprocess.run([sys.executable, "-c", RUN, str(limit), *map(str, args)], capture_output=True,
                          text=True, cwd=cwd, timeout=300, env=env)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    rng = np.random.default_rng(0)
    path = tmp_path_factory.mktemp("corpus") / "c.txt"  # Zipf-like: Kneser-Ney needs singletons
    path.write_text("".join(" ".join(f"w{k}" for k in rng.zipf(1.5, size=12)) + "\n" for _ in range(3000)))
    return path


@pytest.mark.parametrize("extra, role", [([], "the output"), (["-S", "1M", "-T", "tables"], "a temporary table")])
def test_lm_train_past_the_file_size_limit_names_the_path(corpus, tmp_path, extra, role):
    (tmp_path / "tables").mkdir()
    (tmp_path / "m.arpa").write_text("old\n")
    result = _run(64_000, "lm", "train", corpus, "-n", "3", "-o", "m.arpa", *extra, cwd=tmp_path)
    assert result.returncode == 1, result.stderr
    error = [line for line in result.stderr.splitlines() if line.startswith("Error")]
    assert len(error) == 1 and "Traceback" not in result.stderr, result.stderr
    assert f"[Errno {errno.EFBIG}]" in error[0] and f"while writing {role}" in error[0], error[0]
    named = "'m.arpa'" if role == "the output" else "'tables/varorder-"
    assert named in error[0], error[0]
    assert (tmp_path / "m.arpa").read_text() == "old\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.arpa", "tables"]  # no temporary file left
    assert not any((tmp_path / "tables").iterdir())


def test_model_file_past_the_limit_names_it(tmp_path):
    (tmp_path / "t.txt").write_text("".join(f"DT NN{i % 40} VB{i % 7}\n" for i in range(400)))
    result = _run(300, "induce", "train", "t.txt", "--format", "tags", "-o", "g.npz", "--model", "dmv",
                  "--iterations", "1", "--quiet", cwd=tmp_path)
    assert result.returncode == 1, result.stderr
    assert "while writing the model file: 'g.npz'" in result.stderr, result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.txt"]


class _Full:
    """A write handle on a full disk."""

    def write(self, data):
        raise OSError(errno.ENOSPC, "No space left on device")

    def close(self):
        pass


def test_disk_column_on_a_full_disk_names_its_path(tmp_path, monkeypatch):
    from varorder.lm._disk import DiskColumn

    column = DiskColumn(tmp_path / "t.rows", np.int32)
    column._handle.close()
    column._handle = _Full()
    with pytest.raises(OSError, match=r"No space left on device while writing a temporary table.*t\.rows"):
        column.append(np.arange(4))


def test_atomic_text_write_on_a_full_disk_names_the_output(tmp_path):
    from varorder.io._text import atomic_write_text

    target = tmp_path / "out.txt"
    target.write_text("old\n")
    with pytest.raises(OSError, match=r"while writing the output: '.*out\.txt'"):
        with atomic_write_text(target):
            raise OSError(errno.ENOSPC, "No space left on device")
    assert target.read_text() == "old\n" and sorted(p.name for p in tmp_path.iterdir()) == ["out.txt"]


def test_a_broken_pipe_is_not_blamed_on_a_file_being_written(tmp_path):
    # the body of a file writer also printed to a closed pipe: the error is the pipe's
    import errno

    from varorder.io import atomic_write_text

    with pytest.raises(BrokenPipeError) as info:
        with atomic_write_text(tmp_path / "side.txt") as fh:
            fh.write("x\n")
            raise BrokenPipeError(errno.EPIPE, "Broken pipe")
    assert info.value.filename is None and "while writing" not in str(info.value)
    assert not (tmp_path / "side.txt").exists()
