"""LocalFederation: a real Flower deployment (SuperLink + SuperNodes) on localhost.

Each test starts real ``flower-superlink`` / ``flower-supernode`` processes and runs the tiny
echo app in ``tests/flower_echo_app``, whose ServerApp writes the node ids it saw and every
node's reply (node id, node config, ClientApp process id) to a JSON file.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

pytest.importorskip("flwr")

from cotrain.flower.local.localhost import LocalFederation
from cotrain.flower.local.processes import pid_alive

pytestmark = pytest.mark.slow

ECHO_APP = Path(__file__).parent / "flower_echo_app"


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def _echo(fed: LocalFederation, out: Path, *, check_status: bool = False, **config) -> dict:
    done = fed.run(ECHO_APP, {"out": str(out), **config}, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Successfully started run" in done.stdout
    if check_status:  # `flwr run --stream` returns once the SuperLink marks the run finished
        (run,) = fed.runs()
        assert run["status"] == "finished:completed", run
    return json.loads(out.read_text())


def test_insecure_run_reaches_every_node_and_stop_leaves_nothing(tmp_path):
    configs = [{"partition-id": i, "data": f"/data/part-{i}.npz"} for i in range(2)]
    fed = LocalFederation(tmp_path / "home", 2, configs)
    with fed:
        assert sorted(fed.node_ids) == [0, 1]
        echo = _echo(fed, tmp_path / "echo.json", check_status=True, **{"min-nodes": 2})
        started = fed.all_pids
        assert len(fed.processes()) >= 3  # SuperLink, 2 SuperNodes (+ their SuperExecs)

    assert echo["errors"] == []
    assert sorted(echo["node_ids"]) == sorted(fed.node_ids.values())
    by_node = {r["node_id"]: r["node_config"] for r in echo["replies"]}
    assert by_node == {fed.node_ids[i]: configs[i] for i in range(2)}
    # every ClientApp ran in its own flwr-clientapp process, started under a SuperNode
    assert {r["pid"] for r in echo["replies"]} <= started
    assert len({r["pid"] for r in echo["replies"]}) == 2

    assert [p for p in started if pid_alive(p)] == []
    assert fed.processes() == []
    fed.stop()  # idempotent


def test_tls_and_node_auth_refuse_an_unregistered_node(tmp_path):
    fed = LocalFederation(
        tmp_path / "home",
        2,
        [{"partition-id": 0}, {"partition-id": 1}, {"partition-id": 99}],
        tls=True,
        auth=True,
        unregistered_nodes=1,
    )
    with fed:
        assert "--enable-supernode-auth" in fed.superlink_command()
        assert "https://127.0.0.1" in fed.superlink_log()
        assert sorted(fed.node_ids.values()) == sorted(fed.registered_node_ids)

        # The unregistered node connects over TLS, but the SuperLink does not know its
        # public key: ActivateNode fails (HTTP 412, Flower API error 2004) and the
        # SuperNode exits with Flower exit code 305 (process exit status 1).
        outsider = fed.node_process(2)
        assert outsider.wait(timeout=30) == 1
        log = fed.node_log(2)
        assert "Exit Code: 305" in log
        assert "[code: 2004] Failed to activate SuperNode." in log
        assert "SuperNode ID:" not in log
        assert "No SuperNode found with the given public key." in fed.superlink_log()

        echo = _echo(fed, tmp_path / "echo.json", **{"min-nodes": 2})

    assert echo["errors"] == []
    assert sorted(echo["node_ids"]) == sorted(fed.registered_node_ids)
    assert sorted(r["node_id"] for r in echo["replies"]) == sorted(fed.registered_node_ids)
    assert sorted(r["node_config"]["partition-id"] for r in echo["replies"]) == [0, 1]
    assert fed.processes() == []


def test_kill_node_kills_the_node_and_its_children(tmp_path):
    fed = LocalFederation(tmp_path / "home", 1)
    with fed:
        run = fed.submit(ECHO_APP, {"client-sleep": 60.0, "wait-timeout": 90.0})
        deadline = time.monotonic() + 60
        while not any("flwr-clientapp" in _cmdline(p) for p in fed.node_children(0)):
            assert run.poll() is None, run.communicate()
            assert time.monotonic() < deadline, fed.node_log(0)
            time.sleep(0.2)
        node = fed.node_process(0).pid
        children = fed.node_children(0)
        assert any("flower-superexec" in _cmdline(p) for p in children)

        killed = fed.kill_node(0)

        assert {node, *children} <= set(killed)
        assert not any(pid_alive(p) for p in [node, *children])
        assert fed.node_process(0).returncode == -9
        assert pid_alive(fed.superlink_process.pid)
        assert run.poll() is None  # the run waits for a reply that never comes
    assert fed.processes() == []
    assert run.returncode is not None


DRIVER = """
import sys, time
from cotrain.flower.local.localhost import LocalFederation
fed = LocalFederation(sys.argv[1], 1, warm_workers=False)
with fed:
    print("pids", *fed.processes(), flush=True)
    time.sleep(600)
"""


def test_a_sigterm_to_the_driver_stops_every_process_it_started(tmp_path):
    """``timeout`` on a driver sends SIGTERM: the SuperLink, the SuperNode and whatever they
    started end with the driver, instead of polling on for minutes."""
    import signal
    import subprocess
    import sys

    from cotrain.flower.local.processes import tagged

    driver = subprocess.Popen(
        [sys.executable, "-c", DRIVER, str(tmp_path / "home")],
        stdout=subprocess.PIPE,
        text=True,
    )
    line = driver.stdout.readline()
    assert line.startswith("pids "), line
    started = [int(p) for p in line.split()[1:]]
    assert started and all(pid_alive(p) for p in started)
    driver.send_signal(signal.SIGTERM)
    assert driver.wait(timeout=60) == 128 + signal.SIGTERM
    deadline = time.monotonic() + 30
    while any(pid_alive(p) for p in started) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not [p for p in started if pid_alive(p)]
    assert tagged("COTRAIN_LOCAL_FEDERATION", f"{driver.pid}-") == []


SLOW_START = """
import os, sys, time
if sys.argv and sys.argv[0].endswith("flwr-clientapp"):
    time.sleep(float(os.environ["SLOW_CLIENTAPP_START"]))
"""


def test_a_clientapp_slower_to_start_than_flowers_30_s_still_answers(tmp_path, monkeypatch):
    """A loaded machine: each ClientApp process takes 32 s to start. Flower alone withdraws
    its token after 30 s and starts another, as slow (HTTP 401, forever); with the start-up
    limit the federation's SuperNodes run under, the message is answered."""
    import os

    (tmp_path / "slow").mkdir()
    (tmp_path / "slow" / "sitecustomize.py").write_text(SLOW_START)
    path = os.pathsep.join(p for p in (str(tmp_path / "slow"), os.environ.get("PYTHONPATH")) if p)
    monkeypatch.setenv("PYTHONPATH", path)
    monkeypatch.setenv("SLOW_CLIENTAPP_START", "32")
    fed = LocalFederation(tmp_path / "home", 1, start_limit=120)
    with fed:
        echo = _echo(fed, tmp_path / "echo.json", **{"min-nodes": 1, "wait-timeout": 100.0})
        log = fed.node_log(0)
    assert echo["errors"] == [] and len(echo["replies"]) == 1
    assert "authentication failed" not in log
