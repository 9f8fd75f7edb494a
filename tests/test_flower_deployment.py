"""A real Flower deployment on localhost: a SuperLink and three SuperNodes as processes.

Each test starts its own federation (temporary FLWR_HOME, free ports) with
:class:`cotrain.flower.local.localhost.LocalFederation`, runs the example app in
``examples/flower`` with ``flwr run``, and stops every process by PID at the end.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("flwr")


from cotrain import FederatedCoTrainer
from cotrain.callbacks import Callback
from cotrain.flower.local.localhost import LocalFederation
from cotrain.flower.site import write_site, write_sites
from cotrain.privacy import SubsampleAndAggregate
from tests.conftest import mixed_site_learners as mixed

pytestmark = pytest.mark.slow

APP = Path(__file__).resolve().parents[1] / "examples" / "flower"


@pytest.fixture
def sites(cancer, tmp_path):
    paths = write_sites(tmp_path / "sites", cancer["X"], cancer["y"], cancer["X_public"], mixed())
    np.save(tmp_path / "public.npy", cancer["X_public"])
    return {"paths": paths, "pool": tmp_path / "public.npy", "out": tmp_path / "out"}


def run_config(sites, **overrides):
    return {
        "public-pool": str(sites["pool"]),
        "output-dir": str(sites["out"]),
        "min-nodes": 3,
        "random-state": 0,
        **overrides,
    }


def test_three_supernodes_give_the_in_process_result(sites, cancer, tmp_path):
    configs = [{"site": str(p)} for p in sites["paths"]]
    with LocalFederation(tmp_path / "home", 3, configs) as federation:
        done = federation.run(APP, run_config(sites, rounds=3, encoding="delta"), timeout=240)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    codes = np.load(sites["out"] / "consensus_codes.npy")
    history = pd.read_csv(sites["out"] / "history.csv")
    summary = json.loads((sites["out"] / "summary.json").read_text())
    assert summary["refused"] == {} and summary["n_rounds"] == 3
    for t in (1, 2, 3):
        local = FederatedCoTrainer(mixed(), rounds=t, encoding="delta", random_state=0).fit(
            cancer["X"], cancer["y"], X_public=cancer["X_public"]
        )
        np.testing.assert_array_equal(codes[t - 1], local.pseudo_label_codes_)
        assert history["bytes_up"].iloc[t - 1] == local.history_[-1].bytes_up
    assert summary["learners"] == [
        "DecisionTreeClassifier",
        "LogisticRegression",
        "KNeighborsClassifier",
    ]


class EveryRoundCodes(Callback):
    """The in-process consensus codes after every round."""

    def __init__(self):
        self.codes = []

    def on_round_end(self, loop, record):
        self.codes.append(np.array(loop.owner.pseudo_label_codes_))


def history_frame(path):
    """A history.csv as written (pandas reads its floats back exactly)."""
    return pd.read_csv(path, index_col=0)


def test_the_deployed_defaults_equal_the_in_process_run_round_by_round(cancer, tmp_path):
    """The library's defaults (``trust="auto"`` at every site, ``consensus="auto"``, the
    reliability vote) with an evaluation set every site shares: each round's consensus
    codes, consensus accuracy, every site's accuracy and the bytes sent are the in-process
    trainer's, and so is every other column of the history but the timings."""
    X, y, U = cancer["X"], cancer["y"], cancer["X_public"]
    test = (cancer["X_test"], cancer["y_test"])
    paths = write_sites(tmp_path / "sites", X, y, U, mixed(), eval_set=test)
    assert all("share-eval" not in p.read_text() for p in paths)  # shared: the default
    np.save(tmp_path / "public.npy", U)
    out = tmp_path / "out"
    config = {"public-pool": str(tmp_path / "public.npy"), "output-dir": str(out),
              "min-nodes": 3, "random-state": 0, "rounds": 3}  # fmt: skip
    with LocalFederation(tmp_path / "home", 3, [{"site": str(p)} for p in paths]) as federation:
        done = federation.run(APP, config, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["refused"] == {} and summary["n_rounds"] == 3
    assert summary["eval_sites"] == [0, 1, 2]
    codes = np.load(out / "consensus_codes.npy")
    deployed = history_frame(out / "history.csv")
    every_round = EveryRoundCodes()
    local = FederatedCoTrainer(mixed(), rounds=3, random_state=0, callbacks=[every_round])
    local.fit(X, y, X_public=U, eval_set=test)
    assert (local.trust, local.consensus) == ("auto", "auto")  # what the app defaults to
    assert len(local.history_) == len(deployed) == len(codes) == 3
    for t, record in enumerate(local.history_):
        row = deployed.iloc[t]
        np.testing.assert_array_equal(codes[t], every_round.codes[t], err_msg=f"round {t + 1}")
        assert row["consensus_accuracy"] == record.consensus_accuracy, t + 1
        assert record.consensus_accuracy is not None
        assert {c: row[f"accuracy_client_{c}"] for c in range(3)} == record.client_accuracy
        assert row["bytes_up"] == record.bytes_up and row["bytes_down"] == record.bytes_down
    assert any(local.history_[-1].trust.values())  # "auto" chose a weight for some site
    local.history_.to_frame().to_csv(tmp_path / "local.csv")
    timings = ["time_s", "learner_time_s"]
    pd.testing.assert_frame_equal(
        deployed.drop(columns=timings),
        history_frame(tmp_path / "local.csv").drop(columns=timings),
        check_exact=True,
    )


PRIVATE = {"n_teachers": 4, "epsilon": 2.0}


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_a_private_deployment_reports_the_in_process_epsilon_per_site(cancer, tmp_path):
    """Record-level private sites (``SubsampleAndAggregate`` declared in each site.toml):
    the ε the deployed run reports, per round and per site (the server's count and each
    site's own ledger, ``site-epsilon``), is the in-process run's for the same rounds.

    Codes and accuracies are not compared: each site draws its noise (and its teachers'
    shard key) from its own entropy, in the deployment and in process alike, so two runs
    release different labels; the ε of a release does not depend on them."""
    X, y, U = cancer["X"], cancer["y"], cancer["X_public"]
    mech = SubsampleAndAggregate(**PRIVATE)
    paths = [
        write_site(tmp_path / "sites" / f"site-{i}", X[i], y[i], U, est, client_id=i,
                   privacy=mech, classes=[0, 1])
        for i, est in enumerate(mixed())
    ]  # fmt: skip
    np.save(tmp_path / "public.npy", U)
    out = tmp_path / "out"
    privacy = {"class": "cotrain.privacy.SubsampleAndAggregate", "params": PRIVATE}
    config = {"public-pool": str(tmp_path / "public.npy"), "output-dir": str(out),
              "min-nodes": 3, "random-state": 0, "rounds": 2, "classes": "[0, 1]",
              "privacy": json.dumps(privacy)}  # fmt: skip
    with LocalFederation(tmp_path / "home", 3, [{"site": str(p)} for p in paths]) as federation:
        done = federation.run(APP, config, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["refused"] == {} and summary["n_rounds"] == 2
    assert all(summary["failed"][t] == {} and summary["timed_out"][t] == [] for t in "12")
    deployed = history_frame(out / "history.csv")
    report = json.loads((out / "privacy.json").read_text())
    local = FederatedCoTrainer(mixed(), rounds=2, random_state=0, privacy=mech, classes=[0, 1])
    local.fit(X, y, X_public=U)
    expected = local.privacy_report()
    assert list(deployed["epsilon"]) == [r.epsilon for r in local.history_]
    assert local.history_[0].epsilon < local.history_[1].epsilon  # both rounds released
    assert report["max_epsilon"] == expected["max_epsilon"]
    assert report["clients"] == expected["clients"]  # ε, ε by relation, rounds, site_epsilon
    for site in report["clients"]:
        assert site["rounds"] == 2 and site["site_epsilon"] == site["epsilon"]


def wait_for(condition, what, timeout=180, run=None, log=None):
    """Poll ``condition`` until true; fail with ``log()``'s tail after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"waited {timeout} s for {what}\n" + (
            log()[-3000:] if log else ""
        )
        if run is not None:
            assert run.poll() is None, run.communicate()
        time.sleep(0.2)


def train_messages(federation, i):
    """How many train messages SuperNode ``i`` received in its current life."""
    return federation.node_log(i).count("Receiving: train")


def test_a_killed_supernode_restarts_and_its_site_rejoins_from_its_own_state(sites, tmp_path):
    configs = [{"site": str(p)} for p in sites["paths"]]
    with LocalFederation(tmp_path / "home", 3, configs) as federation:
        # a generous round timeout: only the round of the kill waits for it, and round 1
        # once took 15 s under a loaded full test suite
        config = run_config(sites, rounds=5, encoding="delta", **{"round-timeout": 45.0})
        run = federation.submit(APP, config)
        # once site 2 has received round 2 (so its round-1 upload is in), kill its
        # SuperNode and the processes under it in the middle of that round
        wait_for(lambda: train_messages(federation, 2) >= 2, "round 2 at site 2", run=run,
                 log=lambda: federation.node_log(2))  # fmt: skip
        federation.kill_node(2)
        federation.start_node(2)  # a new SuperNode process: it registers as a new node
        federation.wait_for_node(2)
        stdout, stderr = run.communicate(timeout=300)
    assert run.returncode == 0, stdout[-3000:] + stderr[-3000:]
    summary = json.loads((sites["out"] / "summary.json").read_text())
    assert summary["n_rounds"] == 5
    lost = {t: summary["timed_out"][t] + [int(k) for k in summary["failed"][t]] for t in "12345"}
    assert lost["1"] == [] and lost["2"] == [2], lost
    # it took site 2's place again before round 3 and took part in every later round
    [(round_, index, old, new)] = summary["rejoined"]
    assert (round_, index) == (3, 2) and old != new == summary["node_ids"][2]
    assert all(lost[t] == [] for t in "345"), lost
    # from its own state: no SiteStateWarning ("state is gone") and no lost reference
    assert not [w for w in summary["warnings"] if "state" in w[2] or "does not hold" in w[2]]
    state = sites["paths"][2].parent / "state"
    [run_dir] = list(state.iterdir())
    assert sorted(p.name for p in run_dir.iterdir() if p.name.startswith("round-"))[-1] == (
        "round-000005"
    )
    history = pd.read_csv(sites["out"] / "history.csv")
    assert history["coverage"].iloc[-1] > 0.9


def serverapp_pids(federation):
    """The ``flwr-serverapp`` processes under the SuperLink."""
    from cotrain.flower.local.processes import descendants

    found = []
    for pid in descendants(federation.superlink_process.pid):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if b"flwr-serverapp" in cmdline:
            found.append(pid)
    return found


def test_a_killed_serverapp_resumes_and_ends_as_an_uninterrupted_run(sites, cancer, tmp_path):
    import os
    import signal

    configs = [{"site": str(p)} for p in sites["paths"]]
    checkpoints = tmp_path / "checkpoints"
    config = run_config(
        sites, rounds=4, encoding="delta", **{"checkpoint-dir": str(checkpoints),
                                              "round-timeout": 45.0}
    )  # fmt: skip
    with LocalFederation(tmp_path / "home", 3, configs) as federation:
        run = federation.submit(APP, config)
        # every site has received round 3: rounds 1 and 2 are checkpointed, round 3 runs
        wait_for(
            lambda: min(train_messages(federation, i) for i in range(3)) >= 3, "round 3",
            run=run, log=lambda: federation.node_log(0),
        )  # fmt: skip
        [pid] = serverapp_pids(federation)
        os.kill(pid, signal.SIGKILL)
        run.kill()  # the `flwr run --stream` client of the dead run
        run.communicate(timeout=30)
        done = federation.run(
            APP, {**config, "resume": True, "output-dir": str(tmp_path / "resumed")}, timeout=300
        )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    summary = json.loads((tmp_path / "resumed" / "summary.json").read_text())
    assert summary["n_rounds"] == 4 and summary["refused"] == {}
    assert all(summary["failed"][t] == {} and summary["timed_out"][t] == [] for t in "1234")
    codes = np.load(tmp_path / "resumed" / "consensus_codes.npy")
    local = FederatedCoTrainer(mixed(), rounds=4, encoding="delta", random_state=0).fit(
        cancer["X"], cancer["y"], X_public=cancer["X_public"]
    )
    np.testing.assert_array_equal(codes[-1], local.pseudo_label_codes_)
    history = pd.read_csv(tmp_path / "resumed" / "history.csv")
    assert list(history["bytes_up"]) == [r.bytes_up for r in local.history_]
    assert list(history["bytes_down"]) == [r.bytes_down for r in local.history_]


def test_a_round_no_site_answers_ends_the_run_with_its_rounds_and_a_resumable_state(
    sites, cancer, tmp_path
):
    configs = [{"site": str(p)} for p in sites["paths"]]
    # min-clients=3: a round ends only with every site, so the resumed run must equal the
    # uninterrupted one; no checkpoint-dir: output-dir/checkpoint is the default
    config = run_config(sites, rounds=4, **{"min-clients": 3, "round-timeout": 20.0})
    with LocalFederation(tmp_path / "home", 3, configs) as federation:
        run = federation.submit(APP, config)
        wait_for(
            lambda: min(train_messages(federation, i) for i in range(3)) >= 2, "round 2",
            run=run, log=lambda: federation.node_log(0),
        )  # fmt: skip
        for i in range(3):  # every site goes away in the middle of a round
            federation.kill_node(i)
        stdout, stderr = run.communicate(timeout=240)
        assert run.returncode == 0, stdout[-3000:] + stderr[-3000:]
        summary = json.loads((sites["out"] / "summary.json").read_text())
        ran = summary["n_rounds"]
        assert ran in (1, 2), summary  # the rounds before the one nobody finished
        assert summary["stopped_reason"].startswith(f"stopped: round {ran + 1}: only ")
        assert f"to continue from round {ran + 1}, run it again with resume=true" in stdout
        assert "Traceback" not in stdout + stderr
        assert len(pd.read_csv(sites["out"] / "history.csv")) == ran
        assert (sites["out"] / "checkpoint").is_dir()
        for i in range(3):
            federation.start_node(i)
            federation.wait_for_node(i)
        done = federation.run(APP, {**config, "resume": True}, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    summary = json.loads((sites["out"] / "summary.json").read_text())
    assert summary["n_rounds"] == 4 and summary["stopped_reason"] is None
    local = FederatedCoTrainer(mixed(), rounds=4, random_state=0).fit(
        cancer["X"], cancer["y"], X_public=cancer["X_public"]
    )
    codes = np.load(sites["out"] / "consensus_codes.npy")
    np.testing.assert_array_equal(codes[-1], local.pseudo_label_codes_)


EVIL_WORKER = """
import sys
from cotrain.flower.worker import SiteWorker

class Compromised(SiteWorker):
    # a compromised site: its round runs, but its upload is garbage on the wire
    def handle(self, request):
        reply = super().handle(request)
        if request.get("op") == "train" and reply.get("ok"):
            reply["content"]["arrays"]["labels"] = bytes([9, 9, 9, 9, 9])
        return reply

worker = Compromised(sys.argv[1], sys.argv[2])
worker.serve()
"""


def test_a_site_sending_malformed_uploads_is_skipped_or_named(sites, tmp_path):
    import subprocess
    import sys

    configs = [{"site": str(p)} for p in sites["paths"]]
    with LocalFederation(tmp_path / "home", 3, configs) as federation:
        federation.kill_worker(2)  # the site's own service is replaced by a compromised one
        socket = federation.worker_socket(2)
        socket.unlink(missing_ok=True)
        evil = subprocess.Popen([sys.executable, "-c", EVIL_WORKER, str(sites["paths"][2]),
                                 str(socket)])  # fmt: skip
        try:
            wait_for(socket.exists, "the compromised worker's socket", timeout=60)
            skipped = federation.run(
                APP, run_config(sites, rounds=2, **{"on-client-error": "skip"}), timeout=240
            )
            raised = federation.run(
                APP,
                run_config(sites, rounds=2, **{"on-client-error": "raise",
                                               "output-dir": str(tmp_path / "raised")}),
                timeout=240,
            )  # fmt: skip
        finally:
            evil.kill()
            evil.wait()
    assert skipped.returncode == 0, skipped.stdout[-3000:] + skipped.stderr[-3000:]
    summary = json.loads((sites["out"] / "summary.json").read_text())
    assert summary["n_rounds"] == 2
    for t in "12":  # the other sites carry on; site 2's upload is refused every round
        assert list(summary["failed"][t]) == ["2"], summary["failed"]
        assert "MalformedMessage" in summary["failed"][t]["2"]
    # under "raise" the run stops and names the site and what it did
    assert not (tmp_path / "raised" / "summary.json").exists()
    said = raised.stdout + raised.stderr
    assert "site 2" in said and "malformed upload in round 1" in said, said[-3000:]
