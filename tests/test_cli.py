"""The varorder command: help, version, and the engine demo."""

from __future__ import annotations

import subprocess
import sys

from click.testing import CliRunner

import varorder
from varorder.cli.main import main


def test_help_lists_demo():
    result = CliRunner().invoke(main, ["--help"])
    assert result.exit_code == 0
    assert "demo" in result.output


def test_help_reads_each_subcommand_as_importing_it_would():
    """--help prints the static table; its names and help must be the imported commands', and
    it must list every subcommand module (else --help imports the unlisted ones)."""
    import importlib

    from varorder.cli.main import COMMANDS, _module_names

    assert sorted(module for module, _ in COMMANDS.values()) == _module_names()
    for name, (module_name, short) in COMMANDS.items():
        command = importlib.import_module(f"varorder.cli.{module_name}").COMMAND
        assert command.name == name, module_name
        first = command.help.strip().split("\n\n")[0].replace("\n", " ").strip()
        assert " ".join(first.split()) == short, module_name


def test_help_imports_no_subcommand_module():
    code = (
        "import sys\nfrom varorder.cli.main import main\n"
        "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
        "heavy = [m for m in ('numpy', 'numba', 'scipy') if m in sys.modules]\n"
        "assert not heavy, heavy\n"
    )
    subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)


def test_version_via_python_m():
    out = subprocess.run([sys.executable, "-m", "varorder", "--version"], capture_output=True, text=True, check=True)
    assert varorder.__version__ in out.stdout


def test_engine_demo_runs_and_matches_exact_probabilities():
    result = CliRunner().invoke(main, ["demo", "--engine", "--observations", "2,3,1", "--samples", "2000"])
    assert result.exit_code == 0, result.output
    assert "log Z" in result.output and "Viterbi path" in result.output and "3 best paths" in result.output


def test_engine_demo_rejects_bad_observations():
    result = CliRunner().invoke(main, ["demo", "--engine", "--observations", "2,7"])
    assert result.exit_code != 0
    assert "observations" in result.output


def test_errors_are_one_line_without_traceback(tmp_path):
    corrupt = tmp_path / "corpus.txt.gz"
    corrupt.write_bytes(b"\x1f\x8b\x08\x00garbage")
    arpa = tmp_path / "bad.arpa"
    arpa.write_text("not an arpa file\n")
    for args in (["tag", "train", str(corrupt), "-o", str(tmp_path / "m.npz")],
                 ["lm", "score", str(arpa), str(corrupt)]):
        result = subprocess.run([sys.executable, "-m", "varorder", *args], capture_output=True, text=True)
        assert result.returncode == 1, (args, result.stderr)
        assert "Traceback" not in result.stderr, result.stderr
        assert result.stderr.startswith("Error: ") and result.stderr.count("\n") == 1, result.stderr


def test_sigterm_mid_write_leaves_no_temporary_file(tmp_path):
    """A CLI process killed with SIGTERM while an atomic writer is open removes its temp file."""
    import signal
    import time

    script = tmp_path / "slow.py"
    script.write_text(
        "import sys, time\n"
        "from varorder.cli.main import _exit_cleanly_on_sigterm\n"
        "from varorder.io._text import atomic_write_text\n"
        "_exit_cleanly_on_sigterm()\n"
        "with atomic_write_text(sys.argv[1]) as handle:\n"
        "    handle.write('partial')\n    print('writing', flush=True)\n    time.sleep(60)\n")
    process = subprocess.Popen([sys.executable, str(script), str(tmp_path / "out.txt")], stdout=subprocess.PIPE, text=True)
    assert process.stdout.readline().strip() == "writing"
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=300) == 128 + signal.SIGTERM  # generous: a busy machine
    time.sleep(0.1)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["slow.py"]


def test_a_command_named_as_its_module_is_found_without_reading_the_others():
    code = ("import sys\n"
            "from varorder.cli.main import main\n"
            "try:\n"
            "    main.main(['lm', '--help'], standalone_mode=False)\n"
            "except SystemExit:\n"
            "    pass\n"
            "print(getattr(main, '_scanned', None) is None, sorted(main.commands))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={"PYTHONPATH": str(varorder.__path__[0]).rsplit("/", 1)[0]}).stdout
    assert "Usage:" in out and "score" in out
    assert out.strip().splitlines()[-1] == "True ['lm']"
