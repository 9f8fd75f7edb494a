"""The server side of a run: built and restored by one function for the trainer and the
Flower ServerApp, each round configured by the server (one downlink per client), and the
consensus kept in one form."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.tree import DecisionTreeClassifier

from consensus import MajorityVote, NoisyArgmax, QualifiedMajority, SoftMean
from cotrain import FederatedCoTrainer
from cotrain.callbacks import Callback
from cotrain.federation import client as client_module
from cotrain.federation.client import Client
from cotrain.federation.seeding import client_seed
from cotrain.federation.server import CoTrainingServer
from cotrain.federation.setup import ServerRun, build_server
from cotrain.history import RoundRecord
from cotrain.wire.broadcast import BroadcastDecoder, Downlink
from cotrain.wire.format import WireFormat
from cotrain.wire.upload import Upload

# three clients' hard labels on a 16-example pool; the majority is ROWS[0] but for
# example 3, where clients 1 and 2 outvote client 0
ROWS = np.array(
    [
        [0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1],
        [0, 1, 0, 0, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1],
        [0, 1, 0, 0, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 1, 0],
    ]
)
MAJORITY = np.array([0, 1, 0, 0, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1])


def _round(server, senders, t, rows, ids, acked=None):
    """Clients ``ids`` upload ``rows`` in round ``t`` against the server's references."""
    links = server.configure_round(t, ids)
    uploads = []
    for i in ids:
        message = senders[i].encode(rows[i], t, links[i].ref_round)
        uploads.append(Upload(i, message, broadcast_version=None if acked is None else acked))
    return links, server.finish_round(t, np.array(ids), uploads, started=0.0)


# ------------------------------------------------------------- configure_round


def test_configure_round_hands_each_sampled_client_its_one_downlink():
    wire = WireFormat(n_classes=2, n_public=160, encoding="delta")
    server = CoTrainingServer(MajorityVote(), wire, n_clients=3)
    senders = [wire.sender() for _ in range(3)]
    rows, majority = np.tile(ROWS, 10), np.tile(MAJORITY, 10)
    links, _ = _round(server, senders, 1, rows, [0, 1, 2])
    assert links == {i: Downlink(None, 0, 0) for i in range(3)}  # no consensus yet
    assert server.hard_consensus.tolist() == majority.tolist()

    # round 2, clients 0 and 2: the consensus in full (nobody acknowledged one yet) and
    # the round of their last upload the server decoded (1); both now vote the majority
    links, _ = _round(server, senders, 2, [majority] * 3, [0, 2], acked=1)
    full = wire.encode_broadcast(majority)
    assert list(links) == [0, 2]
    assert all(link == Downlink(full, 0, 1) for link in links.values())
    assert len(full) == 10 + 160 * 2 // 8  # header + 160 labels at 2 bits (or abstain)

    # round 3: clients 0 and 2 acknowledged version 1, so they get a delta against it
    # (nothing changed: an empty delta, shorter than the full message); client 1 sat out
    # round 2 and acknowledged nothing: the full message, with its upload reference (1)
    links = server.configure_round(3, [0, 1, 2])
    assert [links[i].ref for i in range(3)] == [1, 0, 1]
    assert [links[i].ref_round for i in range(3)] == [2, 1, 2]
    assert links[1] == Downlink(full, 0, 1)
    assert links[0] == links[2] and links[0].nbytes < len(full)
    decoder = BroadcastDecoder(wire)
    decoder.decode(Downlink(full), version=1)
    assert decoder.decode(links[0], version=2).tolist() == majority.tolist()


def test_configuring_a_round_changes_nothing_on_the_server():
    wire = WireFormat(n_classes=2, n_public=16, encoding="delta")
    server = CoTrainingServer(MajorityVote(), wire, n_clients=3)
    _round(server, [wire.sender() for _ in range(3)], 1, ROWS, [0, 1, 2])
    before = server.state_dict()
    assert server.configure_round(2, [1]) == server.configure_round(2, [1])
    after = server.state_dict()
    assert before["downlink"]["acked"] == after["downlink"]["acked"] == [0, 0, 0]
    _assert_same(before["receivers"], after["receivers"])


@pytest.mark.parametrize(
    ("t", "sampled", "error", "match"),
    [
        (1, [0], ValueError, r"t=1: the server holds the consensus of round 1"),
        (0, [0], ValueError, r"t=0"),
        (2, [3], ValueError, r"sampled must hold client ids in \[0, 3\), got \[3\]"),
        (2, [-1], ValueError, r"sampled must hold client ids"),
        (2, [[0, 1]], ValueError, r"sampled must be a 1-D array of client ids"),
        (2, [0.5], ValueError, r"sampled must be a 1-D array of client ids"),
        ("2", [0], TypeError, r"t must be an int \(the round\), got str"),
        (True, [0], TypeError, r"t must be an int"),
    ],
)
def test_configure_round_refuses_what_it_cannot_configure(t, sampled, error, match):
    wire = WireFormat(n_classes=2, n_public=16)
    server = CoTrainingServer(MajorityVote(), wire, n_clients=3)
    _round(server, [wire.sender() for _ in range(3)], 1, ROWS, [0, 1, 2])
    with pytest.raises(error, match=match):
        server.configure_round(t, sampled)


def test_an_empty_round_configures_no_client():
    server = CoTrainingServer(MajorityVote(), WireFormat(2, 16), n_clients=3)
    assert server.configure_round(1, np.array([], dtype=np.int64)) == {}


# ------------------------------------------------------------- one consensus form


def test_the_consensus_is_held_in_one_form_and_the_others_are_derived():
    wire = WireFormat(n_classes=2, n_public=3, share="soft", soft_dtype="float16")
    server = CoTrainingServer(SoftMean(), wire, n_clients=2)
    probs = [np.array([[0.9, 0.1], [0.3, 0.7], [0.5, 0.5]]), np.array([[0.7, 0.3]] * 3)]
    uploads = [Upload(i, wire.encode_upload(p)) for i, p in enumerate(probs)]
    server.finish_round(1, np.arange(2), uploads, started=0.0)
    # the one stored form: the consensus as the rule formed it, the mean of the uploads
    # (float16 on the wire) in float64
    mean = np.mean([p.astype(np.float16) for p in probs], axis=0, dtype=np.float64)
    assert len(server.cluster_consensus) == 1
    np.testing.assert_array_equal(server.cluster_consensus[0], mean)
    assert not {"hard_consensus", "consensus_labels", "broadcast"} & set(vars(server))
    assert "hard_consensus" not in server.state_dict()
    # derived: hard codes (argmax; a tie goes to the first class) and the consensus at
    # the wire's precision (float16), as every client receives it
    assert server.hard_consensus.tolist() == [0, 0, 0]
    np.testing.assert_array_equal(server.consensus_labels, mean.astype(np.float16))
    assert not np.array_equal(server.consensus_labels, mean)  # precision lost on the wire
    link = server.configure_round(2, [0])[0]
    np.testing.assert_array_equal(wire.decode_broadcast(link.data), server.consensus_labels)
    # the derived forms follow the stored one
    server.cluster_consensus[0] = np.array([[0.25, 0.75], [1.0, 0.0], [np.nan, np.nan]])
    assert server.hard_consensus.tolist() == [1, 0, -1]
    assert server.consensus_labels[0].tolist() == [0.25, 0.75]


def test_before_the_first_round_there_is_no_consensus():
    server = CoTrainingServer(MajorityVote(), WireFormat(2, 4), n_clients=2)
    assert server.hard_consensus is None and server.consensus_labels is None


# ------------------------------------------------------------------ build_server


def _build(**params):
    defaults = {
        "consensus": "majority",
        "X_public": np.zeros((16, 2)),
        "n_classes": 2,
        "client_names": ["client 0", "client 1", "client 2"],
        "random_state": 0,
    }
    return build_server(**(defaults | params))


def test_build_server_copies_the_rule_and_seeds_every_part_from_random_state():
    rule = MajorityVote()
    run = _build(consensus=rule, encoding="delta", participation=0.67, min_clients=2)
    assert isinstance(run, ServerRun) and run.consensus is not rule
    assert run.wire == WireFormat(2, 16, encoding="delta")
    assert run.server.client_names == ["client 0", "client 1", "client 2"]
    assert run.ledger is None and len(run.history) == 0
    twin = _build(consensus=rule, encoding="delta", participation=0.67, min_clients=2)
    assert [client_seed(s) for s in run.client_seeds] == [client_seed(s) for s in twin.client_seeds]
    draws = [run.sampler.sample().tolist() for _ in range(4)]
    assert draws == [twin.sampler.sample().tolist() for _ in range(4)]
    assert all(len(d) == 2 for d in draws)  # 0.67 of 3 clients, at least min_clients


def test_build_server_checks_the_rule_before_any_client_trains():
    pytest.importorskip("dp_accounting", reason="the server's privacy ledger needs dp_accounting")
    with pytest.raises(ValueError, match="quorum"):
        _build(consensus=QualifiedMajority(quorum=2.0))
    with pytest.raises(ValueError, match="privacy budget"):
        _build(consensus=NoisyArgmax(sigma=1.0, budget=1e-6))


def test_a_deployment_refuses_replayable_server_noise_a_simulation_warns():
    pytest.importorskip("dp_accounting", reason="the server's privacy ledger needs dp_accounting")
    noisy = NoisyArgmax(sigma=5.0, random_state=0)
    with pytest.raises(ValueError, match=r"a deployment refuses it"):
        _build(consensus=noisy, deployment=True)
    with pytest.warns(UserWarning, match="seeds the server's privacy noise"):
        run = _build(consensus=noisy)
    assert run.ledger is not None  # the noisy consensus is accounted


def test_a_server_run_restores_from_its_state_dict():
    run = _build(encoding="delta")
    senders = [run.wire.sender() for _ in range(3)]
    for t in (1, 2):
        _, (record, _) = _round(run.server, senders, t, ROWS, [0, 1, 2], acked=t - 1 or None)
        run.history.append(record)
        run.sampler.sample()
    state, broadcast = run.state_dict()
    assert broadcast == run.wire.encode_broadcast(MAJORITY)

    fresh = _build(encoding="delta")
    fresh.load_state_dict(state, broadcast)
    assert fresh.server.configure_round(3, [0, 1, 2]) == run.server.configure_round(3, [0, 1, 2])
    assert fresh.server.hard_consensus.tolist() == MAJORITY.tolist()
    assert [r.round for r in fresh.history] == [1, 2]
    assert fresh.history[1] == RoundRecord.from_json(run.history[1].to_json())
    assert fresh.sampler.sample().tolist() == run.sampler.sample().tolist()


class KeepServerState(Callback):
    """Keeps the server side's state at the end of a run (trainer or Flower)."""

    def on_fit_end(self, loop):
        owner = loop.owner
        run = getattr(owner, "_run", None)  # the ServerApp's; the trainer's is its run's
        if not isinstance(run, ServerRun):
            run = owner._federation.run
        self.run = run
        self.state, self.broadcast = run.state_dict()


def test_the_trainer_runs_on_build_server(cancer):
    keep = KeepServerState()
    trainer = FederatedCoTrainer(
        [DecisionTreeClassifier(max_depth=3) for _ in range(3)],
        rounds=3, encoding="delta", participation=0.67, random_state=0, callbacks=[keep],
    ).fit(cancer["X"], cancer["y"], X_public=cancer["X_public"])  # fmt: skip
    assert isinstance(keep.run, ServerRun)
    twin = build_server(
        consensus="majority", X_public=cancer["X_public"], n_classes=2,
        client_names=["a", "b", "c"], encoding="delta", participation=0.67, random_state=0,
    )  # fmt: skip
    assert [r.clients for r in trainer.history_] == [
        tuple(twin.sampler.sample().tolist()) for _ in range(3)
    ]
    np.testing.assert_array_equal(keep.state["cluster_consensus"][0], trainer.pseudo_label_codes_)


def test_the_flower_server_app_runs_on_the_same_builder_with_the_same_state(cancer, tmp_path):
    pytest.importorskip("flwr")
    from flwr.supercore.task_identity import TaskIdentity

    from cotrain.flower.server_app import FlowerCoTraining
    from cotrain.flower.site import write_sites
    from tests.conftest import mixed_site_learners
    from tests.test_flower_strategy import InMemoryGrid

    paths = write_sites(
        tmp_path / "sites", cancer["X"], cancer["y"], cancer["X_public"], mixed_site_learners()
    )
    np.save(tmp_path / "public.npy", cancer["X_public"])
    params = {"rounds": 3, "encoding": "delta", "participation": 0.67, "random_state": 3}
    flower_keep, local_keep = KeepServerState(), KeepServerState()
    TaskIdentity.run_id, TaskIdentity.node_id, TaskIdentity.task_id = 1, 0, 1
    try:
        FlowerCoTraining(tmp_path / "public.npy", callbacks=[flower_keep], **params).run(
            InMemoryGrid(paths)
        )
    finally:
        TaskIdentity.run_id = TaskIdentity.node_id = TaskIdentity.task_id = None
    FederatedCoTrainer(mixed_site_learners(), callbacks=[local_keep], **params).fit(
        cancer["X"], cancer["y"], X_public=cancer["X_public"]
    )
    assert isinstance(flower_keep.run, ServerRun)
    assert flower_keep.broadcast == local_keep.broadcast
    # every part of the server side's state is the same (the history's times aside)
    for key in ("cluster_consensus", "receivers", "downlink", "sampler", "clusters"):
        _assert_same(flower_keep.state[key], local_keep.state[key])
    flower_rounds = [(r["round"], r["clients"]) for r in flower_keep.state["history"]]
    assert flower_rounds == [(r["round"], r["clients"]) for r in local_keep.state["history"]]


def _assert_same(a, b):
    if isinstance(a, dict):
        assert a.keys() == b.keys()
        for k in a:
            _assert_same(a[k], b[k])
    elif isinstance(a, list | tuple):
        assert len(a) == len(b)
        for x, y in zip(a, b, strict=True):
            _assert_same(x, y)
    elif isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        np.testing.assert_array_equal(a, b)
    else:
        assert a == b


# ------------------------------------------------------------------ the client


def test_the_client_receives_one_downlink_and_its_old_step_is_gone():
    assert not hasattr(Client, "step") and not hasattr(client_module, "run_client_step")
    X = np.arange(8.0).reshape(-1, 1)
    wire = WireFormat(2, 8, encoding="delta")

    def make():
        return Client(0, DecisionTreeClassifier(random_state=0), X, X[:, 0] > 3,
                      np.array([0, 1]), X_public=X, wire=wire)  # fmt: skip

    a, b = make(), make()
    assert a.run_round(1).message == b.run_round(1, Downlink(None)).message
    broadcast = wire.encode_broadcast(np.array([0, 0, 0, 0, 1, 1, 1, 1]))
    # bytes: a full broadcast with no upload reference, as Downlink(bytes)
    assert a.run_round(2, broadcast).message == b.run_round(2, Downlink(broadcast)).message
    # the upload reference travels in the downlink: a delta against round 2's upload
    full, delta = make(), a
    full.load_state_dict(a.state_dict())
    sent = delta.run_round(3, Downlink(broadcast, ref_round=2)).message
    assert len(sent) < len(full.run_round(3, Downlink(broadcast)).message)
    with pytest.raises(TypeError, match="downlink must be a Downlink, bytes or None, got int"):
        a.run_round(4, 12)
