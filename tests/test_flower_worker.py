"""A site's warm worker (cotrain.flower.worker) and the relay ClientApp (cotrain.flower.relay)."""

from __future__ import annotations

import copy
import socket
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

pytest.importorskip("flwr")

from flwr.app import Message, RecordDict
from flwr.supercore.task_identity import TaskIdentity

from cotrain import FederatedCoTrainer
from cotrain.flower import client_app, protocol
from cotrain.flower.relay import relay_query, relay_train, worker_socket
from cotrain.flower.site import load_site, write_sites
from cotrain.flower.worker import (
    WorkerError,
    WorkerUnavailable,
    call_worker,
    default_socket,
    read_frame,
    write_frame,
)
from cotrain.wire import envelope
from cotrain.wire.format import WireFormat
from tests.conftest import mixed_site_learners as mixed

APP = Path(__file__).resolve().parents[1] / "examples" / "flower"
TIMING = ("handler-start", "handler-end", "learner-time-s")


@pytest.fixture
def task_identity():
    """Messages need a run id, as they would have inside a Flower app process."""
    TaskIdentity.run_id, TaskIdentity.node_id, TaskIdentity.task_id = 1, 0, 1
    yield
    TaskIdentity.run_id = TaskIdentity.node_id = TaskIdentity.task_id = None


def _wait_ready(path: Path, proc: subprocess.Popen, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            call_worker(path, "ping", timeout=5)
            return
        except (OSError, EOFError, WorkerError):
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the worker did not come up"
            time.sleep(0.05)


@pytest.fixture(scope="module")
def served(tmp_path_factory, cancer):
    """One site on disk and its worker, started as ``python -m cotrain.flower.worker``."""
    folder = tmp_path_factory.mktemp("sites")
    paths = write_sites(folder, cancer["X"], cancer["y"], cancer["X_public"], mixed())
    sock = default_socket(paths[0])
    proc = subprocess.Popen(
        [sys.executable, "-m", "cotrain.flower.worker", str(paths[0])],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    _wait_ready(sock, proc)
    yield {"paths": paths, "socket": sock, "proc": proc, "site": load_site(paths[0])}
    proc.terminate()
    proc.communicate(timeout=30)
    assert proc.returncode == 0 and not sock.exists()  # a clean SIGTERM removes the socket


def round_content(site, t: int, token: str, broadcast: bytes | None = None) -> dict:
    config = {
        "round": t,
        "client-index": 0,
        "seed": 11,
        "ref-round": 0,
        **WireFormat(n_classes=2, n_public=int(site.X_public.shape[0])).to_config(),
        "pool-hash": site.pool_hash,
        "classes": [0, 1],
        "run-token": token,
        "broadcast-ref": 0,
    }
    content = {"config": {protocol.ROUND: config}, "metrics": {}, "arrays": {}}
    if broadcast is not None:
        content["arrays"][envelope.LABELS] = broadcast
    return content


def without_timing(reply: dict) -> dict:
    reply = copy.deepcopy(reply)
    for key in TIMING:
        reply["metrics"][envelope.STATS].pop(key)
    return reply


@pytest.mark.slow
def test_worker_round_trip_equals_site_train(served):
    site, sock = served["site"], served["socket"]
    assert oct(sock.stat().st_mode & 0o777) == "0o600"
    assert call_worker(sock, "query", site=str(served["paths"][0])) == client_app.site_query(site)
    first = call_worker(sock, "train", round_content(site, 1, "via-worker"))
    assert first["metrics"][envelope.STATS]["handler-end"] >= time.time() - 60
    assert without_timing(first) == without_timing(
        client_app.site_train(site, round_content(site, 1, "direct"))
    )
    # round 2 with a broadcast (the round-1 labels) and the state kept on disk
    labels = first["arrays"][envelope.LABELS]
    second = call_worker(sock, "train", round_content(site, 2, "via-worker", labels))
    assert envelope.ERROR not in second["config"]
    assert without_timing(second) == without_timing(
        client_app.site_train(site, round_content(site, 2, "direct", labels))
    )


def test_garbage_frames_get_error_replies_and_the_worker_goes_on(served):
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(30)
    with sock:
        sock.connect(str(served["socket"]))
        for body in (
            b"\xff\xfe not json",
            b'{"op": 3}',
            b'{"op": "train", "content": {"arrays": {"labels": {"$b64": "!!"}}}}',
            b"[1, 2]",
        ):
            sock.sendall(len(body).to_bytes(4, "big") + body)
            reply = read_frame(sock)
            assert reply["ok"] is False and reply["error"]["type"] == "ValueError", reply
        write_frame(sock, {"op": "ping"})  # the same connection still works
        assert read_frame(sock) == {"ok": True, "content": {}}
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as bad:  # a length beyond MAX_FRAME
        bad.settimeout(30)
        bad.connect(str(served["socket"]))
        bad.sendall(b"\xff\xff\xff\xff")
        assert read_frame(bad)["ok"] is False
    assert call_worker(served["socket"], "ping") == {}
    assert served["proc"].poll() is None


def test_a_failing_round_comes_back_as_the_exception_the_relay_raises(served, task_identity):
    site, sock = served["site"], served["socket"]
    content = round_content(site, 1, "bad-pool")
    content["config"][protocol.ROUND]["pool-hash"] = "0" * 64
    with pytest.raises(WorkerError, match="public pool mismatch") as caught:
        call_worker(sock, "train", content)
    assert caught.value.type == "ValueError"
    with pytest.raises(WorkerError, match="serves the site"):
        call_worker(sock, "query", site=str(served["paths"][1]))
    # the relay raises it again as the same built-in type, as handle_train would
    msg = Message(content=protocol.from_plain(content), dst_node_id=1, message_type="train")
    context = SimpleNamespace(node_config={"site": str(served["paths"][0])}, run_config={})
    with pytest.raises(ValueError, match="public pool mismatch"):
        relay_train(msg, context)
    assert call_worker(sock, "ping") == {}


def test_relay_hands_over_to_the_worker(served, task_identity):
    site = served["site"]
    context = SimpleNamespace(node_config={"site": str(served["paths"][0])}, run_config={})
    assert worker_socket(context.node_config, {}) == served["socket"]
    reply = relay_query(Message(content=RecordDict(), dst_node_id=1, message_type="query"), context)
    assert protocol.to_plain(reply.content)["config"] == client_app.site_query(site)["config"]
    content = round_content(site, 1, "relay")
    msg = Message(content=protocol.from_plain(content), dst_node_id=1, message_type="train")
    got = protocol.to_plain(relay_train(msg, context).content)
    assert without_timing(got) == without_timing(
        client_app.site_train(site, round_content(site, 1, "relay-direct"))
    )


@pytest.mark.slow
def test_relay_module_import_is_light():
    code = (
        "import sys; sys.path.insert(0, 'examples/flower'); "
        "import cotrain.flower.relay, cotrain_app.client_app; "
        "print(sorted(m for m in ('sklearn', 'torch', 'scipy', 'cotrain.federation.client') "
        "if m in sys.modules))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        cwd=Path(__file__).resolve().parents[1],
    )
    assert done.stdout.strip() == "[]", done.stdout + done.stderr


def test_relay_falls_back_in_process_without_a_worker(tmp_path, cancer, caplog, task_identity):
    paths = write_sites(tmp_path, cancer["X"], cancer["y"], cancer["X_public"], mixed())
    site = load_site(paths[1])
    context = SimpleNamespace(node_config={"site": str(paths[1])}, run_config={})
    assert worker_socket(context.node_config, {}) is None
    content = round_content(site, 1, "fallback")
    msg = Message(content=protocol.from_plain(content), dst_node_id=1, message_type="train")
    with caplog.at_level("WARNING", logger="cotrain.relay"):
        got = protocol.to_plain(relay_train(msg, context).content)
    assert "no site worker" in caplog.text
    assert without_timing(got) == without_timing(
        client_app.site_train(site, round_content(site, 1, "fallback-direct"))
    )
    # a configured socket nobody serves: the same fallback
    dead = SimpleNamespace(
        node_config={"site": str(paths[1]), "worker": str(tmp_path / "none.sock")},
        run_config={},
    )
    reply = relay_query(Message(content=RecordDict(), dst_node_id=1, message_type="query"), dead)
    assert protocol.to_plain(reply.content)["config"] == client_app.site_query(site)["config"]
    with pytest.raises(WorkerUnavailable):
        call_worker(tmp_path / "none.sock", "ping")
    bad = SimpleNamespace(
        node_config={"worker": str(tmp_path / "x.sock"), "worker-timeout": -1}, run_config={}
    )
    with pytest.raises(ValueError, match="worker-timeout"):
        relay_query(Message(content=RecordDict(), dst_node_id=1, message_type="query"), bad)


@pytest.mark.slow
def test_local_federation_with_warm_workers_gives_the_in_process_result(cancer, tmp_path):
    from cotrain.flower.local.localhost import LocalFederation

    paths = write_sites(tmp_path / "sites", cancer["X"], cancer["y"], cancer["X_public"], mixed())
    np.save(tmp_path / "public.npy", cancer["X_public"])
    configs = [{"site": str(p)} for p in paths]
    run_config = {
        "public-pool": str(tmp_path / "public.npy"),
        "output-dir": str(tmp_path / "out"),
        "min-nodes": 3,
        "random-state": 0,
        "rounds": 2,
    }
    with LocalFederation(tmp_path / "home", 3, configs) as fed:
        workers = [fed.worker_process(i).pid for i in range(3)]
        done = fed.run(APP, run_config, timeout=120)
        served = [fed.log_dir.joinpath(f"worker-{i}.log").read_text() for i in range(3)]
        fed.kill_node(0)  # the site's worker is its own service: it survives its SuperNode
        assert fed.worker_process(0).poll() is None
        assert fed.kill_worker(0) and fed.worker_process(0).poll() is not None
        fed.start_node(0)  # starts the dead worker again first
        assert fed.worker_process(0).pid not in workers
        assert call_worker(fed.worker_socket(0), "ping") == {}
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert all(log.count("train: ok") == 2 for log in served), served
    assert fed.processes() == [] and not any(default_socket(p).exists() for p in paths)
    local = FederatedCoTrainer(mixed(), rounds=2, random_state=0).fit(
        cancer["X"], cancer["y"], X_public=cancer["X_public"]
    )
    np.testing.assert_array_equal(
        np.load(tmp_path / "out" / "consensus_codes.npy")[-1], local.pseudo_label_codes_
    )
