"""A reader that stops early (``varorder ... | head -1``) ends the command quietly: exit status 1
as click's standalone mode gives, nothing on stderr (it used to print 'Error: [Errno 32] Broken
pipe', as if an input or output file were at fault)."""

import os
import subprocess
import sys
from pathlib import Path


def test_closed_stdout_pipe_exits_quietly(tmp_path: Path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("".join(f"the cat sat on the mat number {i} .\n" for i in range(4000)))
    model = tmp_path / "m.arpa"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1] / "src")}
    env.pop("VARORDER_DEBUG", None)
    subprocess.run([sys.executable, "-m", "varorder", "lm", "train", "-n", "2", "--discount-fallback",
                    "-o", str(model), str(corpus)], check=True, capture_output=True, env=env)
    # --per-token writes ~0.5 MB, far past a pipe's buffer, so writes continue after the reader left
    proc = subprocess.Popen([sys.executable, "-m", "varorder", "lm", "score", "--per-token", str(model),
                             str(corpus)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    first = proc.stdout.readline()
    proc.stdout.close()
    stderr = proc.stderr.read().decode()
    proc.stderr.close()
    assert proc.wait(timeout=600) == 1
    assert first.startswith(b"the=")
    assert stderr == ""
