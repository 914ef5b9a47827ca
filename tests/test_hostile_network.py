"""Issue #47, network inputs: a ``--dask-scheduler`` address where no Dask scheduler answers.

Before #47 an HTTP server there (a dashboard port) ended in ``MemoryError: Unable to allocate 3.07 EiB``
(distributed read "HTTP/1.1" as a frame length), a silent listener or ``python -m http.server`` hung the
command, and ``--dask-scheduler ""`` was ignored. Now the address is checked with a bounded handshake
(a timeout on the connection and on the scheduler's greeting, the greeting's frame length checked)
as the option is parsed, before any input is read, and anything else is one line naming the address
and what answered. Every command with a ``--dask-scheduler`` option is found by walking the command
tree, so the next command that takes one is attacked the same way by default.

The listeners (varorder.testing.hostile.not_a_dask_scheduler) are on 127.0.0.1, on ports the OS chose,
and stop when their test ends or by themselves after two minutes."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
import time

import pytest
from click.testing import CliRunner

from varorder.cli.main import main
from varorder.errors import ParameterError
from varorder.parallel import as_executor, connect_dask, probe_dask_scheduler
from varorder.testing.hostile import NOT_A_SCHEDULER, commands_with, not_a_dask_scheduler

_EXPECTED = {"http": "an HTTP server answered (HTTP/1.1 404 Not Found)", "silent": "sent nothing within",
             "garbage": "is not a Dask scheduler (its first bytes", "closes": "is not a Dask scheduler"}


def _dask_commands():
    """(command words) of every command with a Dask scheduler option."""
    from varorder.cli._options import DaskAddress

    return [line.split() for line in commands_with(main, lambda ps: any(isinstance(p.type, DaskAddress) for p in ps))]


def _dask_option(words):
    command = main
    for word in words:
        command = command.get_command(None, word)
    return next(p.opts[-1] for p in command.params if "dask" in p.name)


def test_every_command_with_a_scheduler_option_is_found():
    assert {" ".join(w) for w in _dask_commands()} >= {"align train", "decipher train", "lm train", "tag train",
                                                        "transduce train"}


@pytest.mark.parametrize("kind", NOT_A_SCHEDULER)
def test_probe_names_the_address_and_what_answered(kind):
    with not_a_dask_scheduler(kind) as address:
        began = time.monotonic()
        with pytest.raises(ParameterError, match="cannot reach the Dask scheduler") as caught:
            probe_dask_scheduler(address, timeout=5.0)
        assert time.monotonic() - began < 30  # bounded: 5 s for the greeting, 3 for the HTTP check
    message = str(caught.value)
    assert address in message and _EXPECTED[kind] in message and "\n" not in message, message
    assert caught.value.name == "dask_scheduler" and caught.value.value == address


def test_connect_refuses_before_distributed_reads_a_frame():
    pytest.importorskip("distributed")
    with not_a_dask_scheduler("http") as address, pytest.raises(ParameterError, match="HTTP server answered"):
        connect_dask(address, timeout=5.0)


@pytest.mark.parametrize("address", ["", "   "])
def test_an_empty_address_is_an_error(address):
    pytest.importorskip("distributed")
    with pytest.raises(ParameterError, match="empty"):
        as_executor(dask_scheduler=address)


@pytest.mark.parametrize("address, what", [("http://127.0.0.1:8787", "web address"), ("tcp://127.0.0.1:port", "expected"),
                                           ("tcp://127.0.0.1:99999", "expected tcp://host:port")])
def test_malformed_addresses_are_refused_at_once(address, what):
    with pytest.raises(ParameterError, match=what):
        probe_dask_scheduler(address, timeout=1.0)


def test_a_real_scheduler_passes_the_probe():
    from local_clusters import local_cluster

    with local_cluster(processes=False, protocol="tcp") as (cluster, _):
        probe_dask_scheduler(cluster.scheduler_address, timeout=60.0)


@pytest.mark.parametrize("words", _dask_commands(), ids=" ".join)
@pytest.mark.parametrize("kind", ["garbage", "closes", ""])
def test_every_dask_command_refuses_a_bad_address_before_any_work(words, kind):
    # the option first on the command line: it is checked before the (missing) inputs are
    if kind:
        with not_a_dask_scheduler(kind) as address:
            result = CliRunner().invoke(main, [*words, _dask_option(words), address])
    else:
        address = ""
        result = CliRunner().invoke(main, [*words, _dask_option(words), address])
    assert result.exit_code == 2, result.output
    errors = [line for line in result.output.splitlines() if line.startswith("Error")]
    assert len(errors) == 1 and "Traceback" not in result.output, result.output
    assert repr(address) in errors[0] and ("not a Dask scheduler" in errors[0] or "empty" in errors[0]
                                           or "not a Dask scheduler address" in errors[0]), errors[0]


@pytest.mark.parametrize("kind", ["http", "silent"])
def test_tag_train_names_an_http_server_or_a_silent_listener(kind, tmp_path):
    corpus = tmp_path / "t.conllu"
    corpus.write_text("1\tthe\t_\tDET\t_\t_\t_\t_\t_\t_\n\n")
    with not_a_dask_scheduler(kind) as address:
        result = CliRunner().invoke(main, ["tag", "train", str(corpus), "-o", str(tmp_path / "m.npz"),
                                           "--dask-scheduler", address])
    assert result.exit_code == 2 and address in result.output and _EXPECTED[kind] in result.output, result.output
    assert not (tmp_path / "m.npz").exists()


def test_python_http_server_as_scheduler_is_one_line(tmp_path):
    """``python -m http.server`` (the issue's hang, then a traceback): refused naming its status line."""
    server = subprocess.Popen([sys.executable, "-u", "-m", "http.server", "0", "--bind", "127.0.0.1"],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, cwd=tmp_path)
    try:
        lines = []
        reader = threading.Thread(target=lambda: lines.append(server.stdout.readline()), daemon=True)
        reader.start()
        reader.join(120)
        assert lines and "port" in lines[0], lines
        port = int(lines[0].split("port")[1].split()[0])
        address = f"tcp://127.0.0.1:{port}"
        with pytest.raises(ParameterError, match=r"HTTP server answered \(HTTP/1\.0 200"):
            probe_dask_scheduler(address, timeout=5.0)
    finally:
        server.kill()
        server.wait(60)


def test_a_refused_port_is_named():
    with socket.socket() as holder:  # a port that was free a moment ago and has no listener
        holder.bind(("127.0.0.1", 0))
        port = holder.getsockname()[1]
    with pytest.raises(ParameterError, match=f"127.0.0.1:{port}.*refused"):
        probe_dask_scheduler(f"tcp://127.0.0.1:{port}", timeout=1.0)
