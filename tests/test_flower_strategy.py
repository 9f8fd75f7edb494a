"""The Flower server strategy and ClientApp handlers, over an in-memory Grid.

The grid below delivers each pushed message to the real ClientApp handlers at once
(no SuperLink, no processes), so these tests check the protocol and the round logic
in seconds; ``test_flower_deployment.py`` runs the same code over real processes.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

pytest.importorskip("flwr")

from flwr.app import Context, Error, Message, RecordDict
from flwr.supercore.task_identity import TaskIdentity
from sklearn.linear_model import LogisticRegression, SGDClassifier
from sklearn.neural_network import MLPClassifier
from sklearn.tree import DecisionTreeClassifier

from cotrain import FederatedCoTrainer
from cotrain.callbacks import Callback
from cotrain.flower import protocol
from cotrain.flower.client_app import handle_query, handle_train
from cotrain.flower.server_app import FlowerCoTraining
from cotrain.flower.site import load_site, pool_fingerprint, write_site, write_sites
from cotrain.wire import envelope
from cotrain.wire.broadcast import Downlink
from cotrain.wire.messages import HardLabels
from tests.conftest import FailingClassifier
from tests.conftest import mixed_site_learners as mixed


class InMemoryGrid:
    """A Grid whose nodes answer at once by calling the ClientApp handlers.

    ``lost[node] = {rounds}``: the site runs those rounds but its reply never arrives
    (a dropped connection). ``silent``: nodes that never answer anything.
    """

    def __init__(self, site_paths, lost=None, silent=()):
        self.sites = {1000 + 7 * i: str(p) for i, p in enumerate(site_paths)}
        self.states = {node: RecordDict() for node in self.sites}
        self.lost = lost or {}
        self.silent = set(silent)
        self.replies = {}
        self.pushed = []

    def get_node_ids(self):
        return list(self.sites)

    def push_messages(self, messages):
        ids = []
        for msg in messages:
            msg.metadata.__dict__["_message_id"] = msg.object_id
            self.pushed.append(msg)
            ids.append(msg.metadata.message_id)
            node = msg.metadata.dst_node_id
            if node in self.silent:
                continue
            context = Context(1, node, {"site": self.sites[node]}, self.states[node], {})
            handler = handle_query if msg.metadata.message_type == "query" else handle_train
            try:
                reply = handler(msg, context)
            except Exception as err:
                reply = Message(Error(2, f"{type(err)}:<'{err}'>"), reply_to=msg)
            group = msg.metadata.group_id
            if group and int(group) in self.lost.get(node, ()):
                continue
            self.replies[msg.metadata.message_id] = reply
        return ids

    def pull_messages(self, message_ids):
        return [self.replies.pop(i) for i in list(message_ids) if i in self.replies]


@pytest.fixture(autouse=True)
def task_identity():
    """Messages need a run id, as they would have inside a Flower app process."""
    TaskIdentity.run_id, TaskIdentity.node_id, TaskIdentity.task_id = 1, 0, 1
    yield
    TaskIdentity.run_id = TaskIdentity.node_id = TaskIdentity.task_id = None


@pytest.fixture
def federation(cancer, tmp_path):
    """Three mixed sites on breast cancer, written to disk as a deployment would have."""
    X_clients, y_clients, X_public = cancer["X"], cancer["y"], cancer["X_public"]
    paths = write_sites(tmp_path / "sites", X_clients, y_clients, X_public, mixed())
    np.save(tmp_path / "public.npy", X_public)
    return {
        "paths": paths,
        "pool": tmp_path / "public.npy",
        "X_clients": X_clients,
        "y_clients": y_clients,
        "X_public": X_public,
    }


def in_process(federation, **params):
    return FederatedCoTrainer(mixed(), **params).fit(
        federation["X_clients"], federation["y_clients"], X_public=federation["X_public"]
    )


@pytest.mark.slow
@pytest.mark.parametrize(
    "params",
    [
        {},
        {"encoding": "delta"},
        {"share": "soft", "consensus": "mean"},
        {"share": "soft", "consensus": "mean", "soft_bits": 4},
        {"participation": 0.67, "consensus": "qualified"},
    ],
    ids=["packed", "delta", "soft", "soft-4bit", "sampled-qualified"],
)
def test_flower_strategy_equals_in_process_trainer(federation, params):
    grid = InMemoryGrid(federation["paths"])
    flower = FlowerCoTraining(federation["pool"], rounds=4, random_state=3, **params).run(grid)
    local = in_process(federation, rounds=4, random_state=3, **params)

    np.testing.assert_array_equal(flower.pseudo_label_codes_, local.pseudo_label_codes_)
    if params.get("share") == "soft":
        np.testing.assert_array_equal(flower.pseudo_labels_, local.pseudo_labels_)
    for a, b in zip(flower.history_, local.history_, strict=True):
        assert (a.clients, a.bytes_up, a.bytes_down, a.changed) == (
            b.clients,
            b.bytes_up,
            b.bytes_down,
            b.changed,
        )
        assert a.agreement == pytest.approx(b.agreement)
    assert flower.learners_ == [
        "DecisionTreeClassifier",
        "LogisticRegression",
        "KNeighborsClassifier",
    ]


@pytest.mark.slow
def test_labels_travel_as_uint8_arrays_never_pickles(federation):
    grid = InMemoryGrid(federation["paths"])
    FlowerCoTraining(federation["pool"], rounds=2, random_state=0).run(grid)
    train = [m for m in grid.pushed if m.metadata.message_type == "train"]
    with_labels = [m for m in train if envelope.LABELS in m.content.array_records]
    assert len(with_labels) == 3  # the broadcast of round 1, sent in round 2
    array = with_labels[0].content.array_records[envelope.LABELS][protocol.PAYLOAD]
    assert array.dtype == "uint8" and array.stype == "numpy.ndarray"
    # 300 binary labels with abstentions allowed: 10-byte header + 2 bits each
    assert array.numpy().nbytes == 10 + 300 * 2 // 8


def test_site_with_a_different_public_pool_is_refused(federation, tmp_path):
    other = write_site(
        tmp_path / "stranger",
        federation["X_clients"][0],
        federation["y_clients"][0],
        federation["X_public"][:-1],  # one row short
        DecisionTreeClassifier(),
    )
    grid = InMemoryGrid([*federation["paths"], other])
    strategy = FlowerCoTraining(federation["pool"], rounds=2, random_state=0).run(grid)
    stranger = list(grid.sites)[-1]
    assert list(strategy.refused_) == [stranger]
    assert "public pool mismatch" in strategy.refused_[stranger]
    assert "299 rows" in strategy.refused_[stranger]
    assert stranger not in strategy.node_ids_ and len(strategy.node_ids_) == 3


def test_site_checks_the_pool_hash_of_every_round(federation):
    site = load_site(federation["paths"][0])
    grid = InMemoryGrid(federation["paths"][:1])
    strategy = FlowerCoTraining(federation["pool"], rounds=1, min_nodes=1, random_state=0)
    strategy.run(grid)
    message = strategy._train_message(2, 0, Downlink(None))
    message.content.config_records[protocol.ROUND]["pool-hash"] = "0" * 64
    message.metadata.__dict__["_message_id"] = message.object_id
    context = Context(1, 1, {"site": str(site.path)}, RecordDict(), {})
    with pytest.raises(ValueError, match="public pool mismatch"):
        handle_train(message, context)


@pytest.mark.slow
def test_silent_node_is_a_straggler_and_the_round_goes_on(federation):
    grid = InMemoryGrid(federation["paths"])
    # the third node answers the handshake, then goes quiet
    strategy = FlowerCoTraining(federation["pool"], rounds=2, round_timeout=0.2, random_state=0)
    original = grid.push_messages

    def push(messages):
        messages = list(messages)
        if messages[0].metadata.message_type == "train":
            grid.silent = {strategy.node_ids_[2]}
        return original(messages)

    grid.push_messages = push
    strategy.run(grid)
    for record in strategy.history_:
        assert record.timed_out == (2,)
        assert record.clients == (0, 1, 2)
    assert strategy.history_[0].bytes_up == 2 * (10 + 300 // 8 + 1)


@pytest.mark.slow
def test_lost_reply_under_delta_coding_falls_back_to_a_full_message(federation):
    grid = InMemoryGrid(federation["paths"])
    node = list(grid.sites)[1]
    grid.lost = {node: {2}}  # site 1 runs round 2 but its upload never arrives
    strategy = FlowerCoTraining(
        federation["pool"], rounds=4, encoding="delta", round_timeout=0.2, random_state=0
    ).run(grid)
    assert strategy.history_[1].timed_out == (1,)
    assert [r.failed for r in strategy.history_] == [{}, {}, {}, {}]
    # without the server's ref-round the site would delta-code against round 2, which
    # the server never saw, and the CRC check would fail in round 3
    assert strategy.history_[2].timed_out == ()


@pytest.mark.slow
def test_broadcasts_are_delta_coded_per_site_and_survive_a_lost_reply(federation):
    grid = InMemoryGrid(federation["paths"])
    node = list(grid.sites)[1]
    grid.lost = {node: {3}}  # site 1 decodes round 3's broadcast, but its ack never arrives
    strategy = FlowerCoTraining(
        federation["pool"], rounds=5, encoding="delta", round_timeout=0.2, random_state=0
    ).run(grid)
    refs = [
        (int(m.metadata.group_id), m.metadata.dst_node_id,
         m.content.config_records[protocol.ROUND]["broadcast-ref"])
        for m in grid.pushed if m.metadata.message_type == "train"
    ]  # fmt: skip
    # round t carries the consensus of round t - 1; in round 4 site 1 is still sent a
    # delta against version 1, the last it acknowledged (it holds 1 and 2)
    assert [ref for t, n, ref in refs if n == node] == [0, 0, 1, 1, 3]
    assert not any("does not hold" in m for (_, _, m) in strategy.learner_warnings_)
    assert [r.failed for r in strategy.history_] == [{}] * 5
    full = len(strategy._server.encoder.full)  # the consensus in full
    assert strategy.history_[1].bytes_down == 3 * full  # round 2: the first broadcast
    assert strategy.history_[4].bytes_down < 3 * full


class RestartNode(Callback):
    """After ``round``, site ``site``'s SuperNode restarts under a new node id (and a
    stranger claiming the same client-id with another learner connects too)."""

    def __init__(self, grid, site, round, stranger=None):
        self.grid, self.site, self.round, self.stranger = grid, site, round, stranger

    def on_round_end(self, loop, record):
        if record.round != self.round:
            return
        old = list(self.grid.sites)[self.site]
        path = self.grid.sites.pop(old)
        self.grid.sites[5000] = path
        self.grid.states[5000] = RecordDict()
        if self.stranger is not None:
            self.grid.sites[6000] = str(self.stranger)
            self.grid.states[6000] = RecordDict()


@pytest.mark.slow
def test_a_site_whose_node_restarts_under_a_new_id_rejoins(federation, tmp_path):
    stranger = write_site(
        tmp_path / "stranger", federation["X_clients"][1], federation["y_clients"][1],
        federation["X_public"], DecisionTreeClassifier(), client_id=1,
    )  # fmt: skip
    grid = InMemoryGrid(federation["paths"])
    restart = RestartNode(grid, site=1, round=2, stranger=stranger)
    strategy = FlowerCoTraining(
        federation["pool"], rounds=4, encoding="delta", random_state=3, callbacks=[restart]
    ).run(grid)
    local = in_process(federation, rounds=4, encoding="delta", random_state=3)
    # the site took its place again before round 3 and continued from its own state
    assert strategy.rejoined_ == [(3, 1, 1007, 5000)] and strategy.node_ids_[1] == 5000
    assert "not a site of this run" in strategy.refused_[6000]
    assert [r.failed for r in strategy.history_] == [{}] * 4
    assert [r.timed_out for r in strategy.history_] == [()] * 4
    np.testing.assert_array_equal(strategy.pseudo_label_codes_, local.pseudo_label_codes_)
    assert [r.bytes_up for r in strategy.history_] == [r.bytes_up for r in local.history_]


@pytest.mark.slow
def test_failing_site_is_skipped_or_raises(federation, tmp_path):
    bad = write_site(
        tmp_path / "bad",
        federation["X_clients"][0],
        federation["y_clients"][0],
        federation["X_public"],
        FailingClassifier(),
    )
    paths = [*federation["paths"], bad]
    skip = FlowerCoTraining(federation["pool"], rounds=2, random_state=0).run(InMemoryGrid(paths))
    assert skip.history_[0].failed == {3: "RemoteClientError: ArithmeticError: deliberate failure"}
    with pytest.raises(
        RuntimeError, match=r"site 3 \(node .*FailingClassifier\) failed in round 1"
    ):
        FlowerCoTraining(federation["pool"], rounds=2, on_client_error="raise", random_state=0).run(
            InMemoryGrid(paths)
        )


def continuing():
    """Learners that continue training across rounds: each site must keep its model."""
    from learners import TorchClassifier, XGBoostClassifier

    return [
        SGDClassifier(loss="log_loss", warm_start=True, max_iter=5, tol=None),
        XGBoostClassifier(n_estimators=4, max_depth=2),
        TorchClassifier(module_params={"hidden": [8]}, max_epochs=3, lr=0.01, n_threads=1),
    ]


@pytest.mark.slow
def test_sites_keep_their_models_between_rounds_as_in_process(federation, tmp_path):
    """Continued boosting, warm-started SGD and a torch client give on Flower exactly the
    in-process result, round by round: each site keeps its model on disk, per run."""
    pytest.importorskip("xgboost")
    pytest.importorskip("torch")
    X, y, U = federation["X_clients"], federation["y_clients"], federation["X_public"]
    paths = write_sites(tmp_path / "warm", X, y, U, continuing())
    for rounds in (1, 3):
        flower = FlowerCoTraining(
            federation["pool"], rounds=rounds, encoding="delta", random_state=5
        ).run(InMemoryGrid(paths))
        local = FederatedCoTrainer(
            continuing(), rounds=rounds, encoding="delta", random_state=5
        ).fit(X, y, X_public=U)
        np.testing.assert_array_equal(flower.pseudo_label_codes_, local.pseudo_label_codes_)
        for a, b in zip(flower.history_, local.history_, strict=True):
            assert (a.bytes_up, a.bytes_down, a.changed) == (b.bytes_up, b.bytes_down, b.changed)
        assert not any("SiteStateWarning" in key[1] for key in flower.learner_warnings_)
    # the state lives at the sites, one folder per run, never on the server
    runs = sorted((paths[1].parent / "state").iterdir())
    assert len(runs) == 2 and all(r.name.startswith("run-") for r in runs)


def test_a_site_that_lost_its_state_says_so_and_refits(federation, tmp_path):
    import shutil

    X, y, U = federation["X_clients"], federation["y_clients"], federation["X_public"]
    paths = write_sites(tmp_path / "warm", X, y, U, [SGDClassifier(warm_start=True)] * 3)

    class Forgetful(InMemoryGrid):
        def push_messages(self, messages):
            if messages and messages[0].metadata.group_id == "3":  # before round 3
                shutil.rmtree(paths[0].parent / "state")
            return super().push_messages(messages)

    flower = FlowerCoTraining(federation["pool"], rounds=3, encoding="delta", random_state=0).run(
        Forgetful(paths)
    )
    assert flower.n_rounds_ == 3 and not flower.history_[-1].failed
    lost = [key for key in flower.learner_warnings_ if key[1] == "SiteStateWarning"]
    assert [key[0] for key in lost] == [0] and "refitting from scratch" in lost[0][2]


def test_a_continuing_learner_that_cannot_be_stored_is_refused(federation, tmp_path):
    """A learner that continues training but whose model cannot be stored (here a stand-in
    that declares it; every library learner that continues training can be stored now) is
    refused at the handshake, before any round."""
    unstorable = write_site(
        tmp_path / "unstorable",
        federation["X_clients"][0],
        federation["y_clients"][0],
        federation["X_public"],
        MLPClassifier(warm_start=True),
    )
    grid = InMemoryGrid([*federation["paths"], unstorable])
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(MLPClassifier, "checkpoint_unsupported", "a stand-in reason", raising=False)
        strategy = FlowerCoTraining(federation["pool"], rounds=1, random_state=0).run(grid)
    reason = strategy.refused_[list(grid.sites)[-1]]
    assert "NotImplementedError" in reason and "a stand-in reason" in reason


def test_bad_parameters_are_refused_before_any_round(federation):
    grid = InMemoryGrid(federation["paths"])
    with pytest.raises(ValueError, match="share must be 'hard' or 'soft'"):
        FlowerCoTraining(federation["pool"], share="labels").run(grid)
    assert not [m for m in grid.pushed if m.metadata.message_type == "train"]


@pytest.mark.slow
def test_privacy_budget_stops_the_flower_run_as_in_process(federation):
    """A noisy consensus is accounted on Flower by the same ledger and stopped by the same
    budget callback as in-process (it replaces an earlier NotImplementedError)."""
    from consensus import NoisyArgmax

    def gnmax(**kw):
        return NoisyArgmax(sigma=40.0, budget=6.0, **kw)

    grid = InMemoryGrid(federation["paths"])
    flower = FlowerCoTraining(federation["pool"], rounds=20, consensus=gnmax(), random_state=3)
    flower.run(grid)
    local = in_process(federation, rounds=20, consensus=gnmax(), random_state=3)
    assert flower.stopped_reason_ == local.stopped_reason_ == "privacy budget"
    assert 1 < flower.n_rounds_ == local.n_rounds_ < 20
    # the noise is drawn from OS entropy on both sides: the ε agree, the labels need not
    assert [r.epsilon for r in flower.history_] == [r.epsilon for r in local.history_]
    assert flower.history_[-1].epsilon <= 6.0
    assert flower.history_[-1].epsilon_adversary == "broadcast observers"
    # a deployment refuses noise that anyone knowing the seed could replay
    seeded = FlowerCoTraining(
        federation["pool"], rounds=2, consensus=gnmax(random_state=5), random_state=3
    )
    with pytest.raises(ValueError, match="replay"):
        seeded.run(InMemoryGrid(federation["paths"]))


class Crash(Exception):
    pass


class CrashAfter:
    """A callback that kills the server after a given round (as a power cut would)."""

    def __init__(self, round_):
        self.round = round_

    def on_fit_start(self, loop):
        pass

    def on_round_start(self, loop, t, sampled):
        pass

    def on_round_end(self, loop, record):
        if record.round == self.round:
            raise Crash(f"server died after round {record.round}")

    def on_fit_end(self, loop):
        pass


@pytest.mark.slow
@pytest.mark.parametrize("params", [{}, {"encoding": "delta", "participation": 0.67}])
def test_flower_run_resumes_from_its_checkpoint(federation, tmp_path, params):
    ckpt = tmp_path / "server-ckpt"
    whole = FlowerCoTraining(federation["pool"], rounds=5, random_state=1, **params).run(
        InMemoryGrid(federation["paths"])
    )
    grid = InMemoryGrid(federation["paths"])
    crashing = FlowerCoTraining(
        federation["pool"], rounds=5, random_state=1, checkpoint_dir=ckpt,
        callbacks=[CrashAfter(3)], **params,
    )  # fmt: skip
    with pytest.raises(Crash):
        crashing.run(grid)
    # the SuperNodes stay up (same grid, same site state); a new ServerApp resumes
    resumed = FlowerCoTraining(
        federation["pool"], rounds=5, random_state=1, checkpoint_dir=ckpt, **params
    ).run(grid, resume=True)
    assert [r.round for r in resumed.history_] == [1, 2, 3, 4, 5]
    np.testing.assert_array_equal(resumed.consensus_codes_, whole.consensus_codes_)
    for a, b in zip(resumed.history_, whole.history_, strict=True):
        assert (a.clients, a.bytes_up, a.changed, a.failed) == (b.clients, b.bytes_up,
                                                                b.changed, b.failed)  # fmt: skip
    trained = [m for m in grid.pushed if m.metadata.message_type == "train"]
    assert sorted({int(m.metadata.group_id) for m in trained}) == [1, 2, 3, 4, 5]


def test_flower_resume_refuses_another_configuration(federation, tmp_path):
    ckpt = tmp_path / "ckpt"
    FlowerCoTraining(federation["pool"], rounds=2, random_state=1, checkpoint_dir=ckpt).run(
        InMemoryGrid(federation["paths"])
    )
    other = FlowerCoTraining(federation["pool"], rounds=4, random_state=2, checkpoint_dir=ckpt)
    with pytest.raises(ValueError, match="different configuration"):
        other.run(InMemoryGrid(federation["paths"]), resume=True)
    with pytest.raises(ValueError, match="checkpoint_dir"):
        FlowerCoTraining(federation["pool"], rounds=2).run(
            InMemoryGrid(federation["paths"]), resume=True
        )


def _tamper(grid, node, edit):
    """Let ``edit(reply)`` change every train reply of ``node`` before the server reads it."""
    original = grid.push_messages

    def push(messages):
        ids = original(messages)
        for mid in ids:
            reply = grid.replies.get(mid)
            if reply is not None and reply.metadata.src_node_id == node and not reply.has_error():
                if protocol.ROUND in grid.pushed[-1].content.config_records:
                    edit(reply)
        return ids

    grid.push_messages = push


def _set_payload(data):
    from flwr.app import ArrayRecord

    def edit(reply):
        reply.content[envelope.LABELS] = ArrayRecord({protocol.PAYLOAD: protocol.to_array(data)})

    return edit


def _drop(record):
    def edit(reply):
        del reply.content[record]

    return edit


@pytest.mark.slow
@pytest.mark.parametrize(
    "edit, reason",
    [
        (_set_payload(b"\x00 not a message at all"), "MalformedMessage"),
        (_set_payload(HardLabels(np.zeros(300, dtype=int), 5).to_bytes()), "n_classes"),
        (_set_payload(HardLabels(np.zeros(12, dtype=int), 2).to_bytes()), "MalformedMessage"),
        (_drop(envelope.LABELS), "malformed reply"),
        (_drop(envelope.STATS), "malformed reply"),
    ],
    ids=["garbage", "wrong-classes", "wrong-length", "no-labels", "no-stats"],
)
def test_malformed_site_reply_is_that_sites_failure(federation, edit, reason):
    grid = InMemoryGrid(federation["paths"])
    _tamper(grid, list(grid.sites)[1], edit)
    strategy = FlowerCoTraining(federation["pool"], rounds=2, random_state=0).run(grid)
    for record in strategy.history_:
        assert list(record.failed) == [1] and reason in record.failed[1]
    assert strategy.n_rounds_ == 2
    with pytest.raises(RuntimeError, match=r"site 1 \(node .*\) (sent a malformed upload|failed)"):
        grid = InMemoryGrid(federation["paths"])
        _tamper(grid, list(grid.sites)[1], edit)
        FlowerCoTraining(federation["pool"], rounds=2, on_client_error="raise", random_state=0).run(
            grid
        )


def test_too_few_nodes_is_a_clear_error(federation):
    grid = InMemoryGrid(federation["paths"][:1])
    with pytest.raises(RuntimeError, match=r"only 1 SuperNodes connected .* min_nodes=2"):
        FlowerCoTraining(federation["pool"], node_timeout=0.3).run(grid)


def test_run_config_maps_to_parameters():
    strategy = FlowerCoTraining.from_run_config(
        {
            "public-pool": "u.npy",
            "rounds": 7,
            "on-client-error": "raise",
            "early-stopping": 0,
            "round-timeout": 0,
            "random-state": 0,
            "sites-dir": "ignored by the server",
        }
    )
    assert (strategy.rounds, strategy.on_client_error, strategy.random_state) == (7, "raise", 0)
    assert strategy.checkpoint_dir is None
    saved = FlowerCoTraining.from_run_config({"public-pool": "u", "checkpoint-dir": "ck"})
    assert saved.checkpoint_dir == "ck"
    none = FlowerCoTraining.from_run_config({"public-pool": "u", "checkpoint-dir": ""})
    assert none.checkpoint_dir is None
    unseeded = FlowerCoTraining.from_run_config({"public-pool": "u", "random-state": -1})
    assert unseeded.random_state is None
    assert strategy.early_stopping is None and strategy.round_timeout is None
    with pytest.raises(ValueError, match="public-pool"):
        FlowerCoTraining.from_run_config({"rounds": 2})


@pytest.mark.slow
def test_early_stopping_and_save(federation, tmp_path):
    strategy = FlowerCoTraining(
        federation["pool"], rounds=30, early_stopping=2, random_state=0
    ).run(InMemoryGrid(federation["paths"]))
    assert strategy.stopped_reason_ == "early stopping" and strategy.n_rounds_ < 30
    folder = strategy.save(tmp_path / "out")
    codes = np.load(folder / "consensus_codes.npy")
    assert codes.shape == (strategy.n_rounds_, 300)
    np.testing.assert_array_equal(codes[-1], strategy.pseudo_label_codes_)
    assert (folder / "history.csv").read_text().count("\n") == strategy.n_rounds_ + 1


def test_site_files_round_trip_and_errors(tmp_path, cancer):
    path = write_site(
        tmp_path / "s",
        cancer["X"][0],
        cancer["y"][0],
        cancer["X_public"],
        LogisticRegression(C=0.5),
        client_id=4,
    )
    site = load_site(path.parent)
    assert site.client_id == 4 and site.estimator.C == 0.5
    assert site.pool_hash == pool_fingerprint(cancer["X_public"])
    text = path.read_text()
    path.write_text(text.replace("sklearn.linear_model.LogisticRegression", "numpy.ndarray"))
    with pytest.raises((ValueError, TypeError)):
        load_site(path)
    path.write_text(
        text.replace(
            'class = "sklearn.linear_model.LogisticRegression"',
            'class = "sklearn.preprocessing.StandardScaler"',
        ).replace("C = 0.5", "")
    )
    with pytest.raises(ValueError, match="is not a classifier"):
        load_site(path)
    path.write_text(text.replace('data = "private.npz"\n', ""))
    with pytest.raises(ValueError, match="lacks the key 'data'"):
        load_site(path)
    with pytest.raises(ValueError, match="does not exist"):
        load_site(tmp_path / "nowhere")


@pytest.mark.slow
def test_sites_evaluate_on_their_own_data_as_in_process(cancer, tmp_path):
    """Each site reports its model's accuracy on its own evaluation data; with the same
    evaluation set everywhere, the history's per-client accuracies equal in-process."""
    X, y, U = cancer["X"], cancer["y"], cancer["X_public"]
    test = (cancer["X_test"], cancer["y_test"])
    paths = write_sites(tmp_path / "eval", X, y, U, mixed(), eval_set=test)
    np.save(tmp_path / "public.npy", U)
    flower = FlowerCoTraining(
        tmp_path / "public.npy", rounds=3, participation=0.67, random_state=2
    ).run(InMemoryGrid(paths))
    local = FederatedCoTrainer(mixed(), rounds=3, participation=0.67, random_state=2).fit(
        X, y, X_public=U, eval_set=test
    )
    for a, b in zip(flower.history_, local.history_, strict=True):
        assert a.client_accuracy == pytest.approx(b.client_accuracy)
        assert a.mean_accuracy == pytest.approx(b.mean_accuracy)
        assert a.std_accuracy == pytest.approx(b.std_accuracy)
    assert len(flower.history_[-1].client_accuracy) == 3
    # a site without evaluation data reports none, and the run goes on
    plain = FlowerCoTraining(tmp_path / "public.npy", rounds=1, random_state=2).run(
        InMemoryGrid(write_sites(tmp_path / "plain", X, y, U, mixed()))
    )
    assert plain.history_[0].client_accuracy == {} and plain.history_[0].mean_accuracy is None


# the in-process run summarises its teachers' warnings (a shard may hold one class)
@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:UserWarning raised:UserWarning")
def test_sites_apply_the_runs_privacy_mechanism_with_their_own_entropy(cancer, tmp_path):
    """Each site applies the run's record-level mechanism; the ServerApp's ledger gives the
    in-process ε, a site declaring another mechanism is refused, and the sites' noise
    differs between two runs with the same random_state (the server knows no seed)."""
    from cotrain.privacy import SubsampleAndAggregate

    X, y, U = cancer["X"], cancer["y"], cancer["X_public"]
    mech = SubsampleAndAggregate(n_teachers=4, sigma=30.0)  # 2 runs within ε = 10
    paths = write_sites(tmp_path / "private", X, y, U, mixed())
    for p, Xi, yi, est in zip(paths, X, y, mixed(), strict=True):
        write_site(
            p.parent, Xi, yi, U, est, client_id=int(p.parent.name[-1]), privacy=mech, classes=[0, 1]
        )
    other = write_site(
        tmp_path / "other", X[0], y[0], U, DecisionTreeClassifier(),
        privacy=SubsampleAndAggregate(n_teachers=4, sigma=1.0), classes=[0, 1],
    )  # fmt: skip
    np.save(tmp_path / "public.npy", U)

    def run():
        return FlowerCoTraining(
            tmp_path / "public.npy", rounds=2, random_state=1, privacy=mech, classes=[0, 1]
        ).run(InMemoryGrid([*paths, other]))

    first, second = run(), run()
    local = FederatedCoTrainer(mixed(), rounds=2, random_state=1, privacy=mech, classes=[0, 1]).fit(
        X, y, X_public=U
    )
    assert [r.epsilon for r in first.history_] == pytest.approx([r.epsilon for r in local.history_])
    assert first.history_[-1].epsilon_unit == "record"
    assert "privacy mismatch" in first.refused_[list(InMemoryGrid([*paths, other]).sites)[-1]]
    assert not np.array_equal(first.consensus_codes_, second.consensus_codes_)
    assert not first.learner_warnings_  # private sites keep their warnings to themselves
    report, expected = first.privacy_report(), local.privacy_report()
    assert (report["unit"], report["adversary"]) == ("record", "server")
    assert [c["epsilon"] for c in report["clients"]] == pytest.approx(
        [c["epsilon"] for c in expected["clients"]]
    )
    saved = json.loads((first.save(tmp_path / "out") / "privacy.json").read_text())
    assert saved["max_epsilon"] == pytest.approx(report["max_epsilon"])


def test_dpsgd_sites_report_their_rounds_to_the_servers_ledger(cancer, tmp_path):
    pytest.importorskip("opacus")
    from cotrain.privacy import DPSGD
    from learners import TorchClassifier

    X, y, U = cancer["X"], cancer["y"], cancer["X_public"]

    def torch_sites():
        return [TorchClassifier(module_params={"hidden": [4]}, max_epochs=1, n_threads=1)] * 3

    mech = DPSGD(noise_multiplier=2.0, sampling_rate=0.1, steps=10)
    paths = [
        write_site(
            tmp_path / f"site-{i}", Xi, yi, U, est, client_id=i, privacy=mech, classes=[0, 1]
        )
        for i, (Xi, yi, est) in enumerate(zip(X, y, torch_sites(), strict=True))
    ]
    np.save(tmp_path / "public.npy", U)
    flower = FlowerCoTraining(
        tmp_path / "public.npy", rounds=2, random_state=0, privacy=mech, classes=[0, 1]
    )
    flower.run(InMemoryGrid(paths))
    local = FederatedCoTrainer(
        torch_sites(), rounds=2, random_state=0, privacy=mech, classes=[0, 1]
    )
    local.fit(X, y, X_public=U)
    # the same training sizes and steps: the same reported events, the same ε per client
    assert [c["epsilon"] for c in flower._server.ledger.report()["clients"]] == pytest.approx(
        [c["epsilon"] for c in local.privacy_report()["clients"]]
    )
    assert flower.history_[-1].epsilon > 0


def test_a_private_sites_error_text_reaches_the_server_masked(cancer, tmp_path):
    """An exception text can quote private values: a private site sends the server the
    exception's class and fixed words (its own log keeps the text)."""
    from cotrain.privacy import SubsampleAndAggregate

    X, y, U = cancer["X"], cancer["y"], cancer["X_public"]
    mech = SubsampleAndAggregate(n_teachers=15, sigma=30.0)  # within ε = 10
    learners = [FailingClassifier(), DecisionTreeClassifier(), DecisionTreeClassifier()]
    paths = [
        write_site(tmp_path / f"site-{i}", Xi, yi, U, est, i, privacy=mech, classes=[0, 1])
        for i, (Xi, yi, est) in enumerate(zip(X, y, learners, strict=True))
    ]
    np.save(tmp_path / "public.npy", U)
    flower = FlowerCoTraining(
        tmp_path / "public.npy", rounds=1, random_state=0, privacy=mech, classes=[0, 1]
    )
    flower.run(InMemoryGrid(paths))
    assert flower.history_[0].failed == {
        0: f"RemoteClientError: ArithmeticError: {envelope.MASKED_MESSAGE}"
    }  # "deliberate failure" stayed at the site; the other sites went on


def test_a_resumed_server_finds_each_sites_state_of_that_round(federation, tmp_path):
    """The ServerApp dies after the sites trained round 4 but before it checkpointed it; the
    resumed run re-runs round 4, and each continuing site starts it from its own state of
    round 3 (not the abandoned round 4): the result equals an uninterrupted run."""
    X, y, U = federation["X_clients"], federation["y_clients"], federation["X_public"]
    learners = [SGDClassifier(loss="log_loss", warm_start=True, max_iter=5, tol=None)] * 3
    paths = write_sites(tmp_path / "warm", X, y, U, learners)
    whole = FlowerCoTraining(federation["pool"], rounds=5, random_state=4).run(InMemoryGrid(paths))

    class DiesInRound4(InMemoryGrid):
        def push_messages(self, messages):
            ids = super().push_messages(messages)  # the sites train (and store) round 4
            if messages and messages[0].metadata.group_id == "4":
                raise Crash("server died in round 4")
            return ids

    ckpt = tmp_path / "server-ckpt"
    params = {"rounds": 5, "random_state": 4, "checkpoint_dir": ckpt}
    with pytest.raises(Crash):
        FlowerCoTraining(federation["pool"], **params).run(DiesInRound4(paths))
    resumed = FlowerCoTraining(federation["pool"], **params).run(InMemoryGrid(paths), resume=True)
    assert [r.round for r in resumed.history_] == [1, 2, 3, 4, 5]
    np.testing.assert_array_equal(resumed.consensus_codes_, whole.consensus_codes_)
    assert not any("SiteStateWarning" in key[1] for key in resumed.learner_warnings_)


@pytest.mark.slow
def test_dual_distillation_runs_on_flower_as_in_process(federation):
    from sklearn.linear_model import LogisticRegression

    from consensus import DualDistillation

    def dual():
        return DualDistillation(LogisticRegression(max_iter=500), base="mean")

    params = {"rounds": 3, "share": "soft", "soft_bits": 4, "random_state": 3}
    grid = InMemoryGrid(federation["paths"])
    flower = FlowerCoTraining(federation["pool"], consensus=dual(), **params).run(grid)
    local = in_process(federation, consensus=dual(), **params)
    np.testing.assert_array_equal(flower.pseudo_labels_, local.pseudo_labels_)
    assert [r.bytes_down for r in flower.history_] == [r.bytes_down for r in local.history_]


@pytest.mark.slow
def test_clustered_cotraining_runs_on_flower_as_in_process(federation):
    from cotrain.clustering import AgreementClustering

    params = {"rounds": 3, "random_state": 3, "encoding": "delta"}
    clustering = AgreementClustering(max_cross=0.99, min_gap=0.0, min_size=1)
    grid = InMemoryGrid(federation["paths"])
    flower = FlowerCoTraining(federation["pool"], clustering=clustering, **params).run(grid)
    local = in_process(federation, clustering=clustering, **params)
    assert [r.clusters for r in flower.history_] == [r.clusters for r in local.history_]
    assert len(flower.history_[-1].clusters) >= 2  # the three sites do not all agree
    np.testing.assert_array_equal(flower.pseudo_label_codes_, local.pseudo_label_codes_)
    assert [r.bytes_down for r in flower.history_] == [r.bytes_down for r in local.history_]
