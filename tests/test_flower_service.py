"""``cotrain superlink``, ``cotrain site node`` and ``cotrain stop``: the documented localhost
deployment, whose every process ends when its command ends."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("flwr")

from cotrain.cli import main
from cotrain.flower.local.processes import free_ports, pid_alive, tagged
from cotrain.flower.local.service import node_pid_file, stop
from cotrain.flower.site import write_sites
from tests.conftest import mixed_site_learners as mixed

TAG = "COTRAIN_SERVICE"


def test_stop_without_a_running_command_says_so(tmp_path, capsys):
    with pytest.raises(ProcessLookupError, match="no pid file at"):
        stop(tmp_path)
    (tmp_path / "node.pid").write_text("999999999\n")  # no such process
    assert main(["stop", str(tmp_path)]) == 1
    assert "names no running command" in capsys.readouterr().err
    assert not (tmp_path / "node.pid").exists()  # the stale file is gone


def test_a_node_for_a_missing_site_is_refused_in_one_line(tmp_path, capsys):
    assert main(["site", "node", str(tmp_path / "nowhere"), "--insecure"]) == 2
    assert capsys.readouterr().err.strip().endswith("site.toml at " + str(tmp_path / "nowhere"))


def test_flower_arguments_are_refused_where_no_flower_command_takes_them(capsys):
    with pytest.raises(SystemExit):
        main(["stop", "x.pid", "--insecure"])
    assert "unrecognized arguments: --insecure" in capsys.readouterr().err


def _start(args: list[str], log: Path) -> subprocess.Popen:
    with open(log, "wb") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "cotrain", *args], stdout=out, stderr=subprocess.STDOUT
        )


def _wait_for(text: str, log: Path, proc: subprocess.Popen, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while text not in log.read_text(errors="replace"):
        assert proc.poll() is None, log.read_text()[-3000:]
        assert time.monotonic() < deadline, log.read_text()[-3000:]
        time.sleep(0.2)


@pytest.mark.slow
def test_stop_and_ctrl_c_end_every_process_a_node_and_a_superlink_started(cancer, tmp_path):
    paths = write_sites(tmp_path / "sites", cancer["X"], cancer["y"], cancer["X_public"], mixed())
    port, node_port, second_port = free_ports(3)
    flags = ["--insecure", "--disable-runtime-dependency-installation", "--port", str(port)]
    link = _start(["superlink", "--pid-file", str(tmp_path / "link.pid"), *flags],
                  tmp_path / "link.log")  # fmt: skip
    node_args = ["--superlink", f"127.0.0.1:{port}", "--insecure"]
    node = _start(["site", "node", str(paths[0]), *node_args, "--port", str(node_port)],
                  tmp_path / "node.log")  # fmt: skip
    other = _start(["site", "node", str(paths[1]), *node_args, "--port", str(second_port)],
                   tmp_path / "other.log")  # fmt: skip
    try:
        for proc, log in ((node, "node.log"), (other, "other.log")):
            _wait_for("SuperNode ID", tmp_path / log, proc)
        started = {p: tagged(TAG, f"{p.pid}-") for p in (link, node, other)}
        # each node: its worker, the launcher running flower-supernode, its superexec
        assert all(len(started[p]) >= 3 for p in (node, other)), started
        assert node_pid_file(paths[0]).read_text().split() == [str(node.pid)]
        # a second node for the same site is refused, and leaves the first one's pid file
        assert main(["site", "node", str(paths[0]), *node_args]) == 2
        assert node_pid_file(paths[0]).read_text().split() == [str(node.pid)]
        assert pid_alive(link.pid)

        assert main(["stop", str(paths[0]), str(tmp_path / "link.pid")]) == 0
        assert node.wait(timeout=60) == 0 and link.wait(timeout=60) == 0
        other.send_signal(signal.SIGINT)  # Ctrl-C in the node's terminal
        assert other.wait(timeout=60) == 0
    finally:
        for proc in (link, node, other):
            if proc.poll() is None:
                proc.kill()
    time.sleep(0.5)
    for proc, pids in started.items():
        assert [p for p in pids if pid_alive(p)] == [] and tagged(TAG, f"{proc.pid}-") == []
    assert not node_pid_file(paths[0]).exists() and not (tmp_path / "link.pid").exists()
