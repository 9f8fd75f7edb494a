"""The seams of a round: malformed uploads are client failures, callbacks drive the loop,
models stay with their clients, and every stateful part has a state dict."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from sklearn.ensemble import RandomForestClassifier
from sklearn.tree import DecisionTreeClassifier

from consensus import MajorityVote, ReputationVote
from cotrain import FederatedCoTrainer
from cotrain.callbacks import Callback
from cotrain.federation.client import Client
from cotrain.federation.sampling import ClientSampler
from cotrain.federation.server import CoTrainingServer
from cotrain.privacy import RandomizedResponse
from cotrain.privacy.ledgers.ledger import PrivacyLedger
from cotrain.runtime.pools import host_objects
from cotrain.runtime.runtimes import SequentialRuntime
from cotrain.wire.broadcast import Downlink
from cotrain.wire.format import WireFormat
from cotrain.wire.messages import HardLabels, SoftLabels
from cotrain.wire.upload import Upload

# ---------------------------------------------------------------- malformed uploads


class TamperingRuntime(SequentialRuntime):
    """Runs clients in this process, but replaces client ``victim``'s upload in every
    round with ``forge(message, t)``: a hostile client at the message level."""

    def __init__(self, victim, forge):
        super().__init__()
        self.victim, self.forge = victim, forge

    def host(self, objects):
        return TamperingPool(host_objects(SequentialRuntime(), objects), self)


class TamperingPool:
    def __init__(self, pool, runtime):
        self.pool, self.runtime = pool, runtime

    def __enter__(self):
        self.pool.__enter__()
        return self

    def __exit__(self, *exc):
        return self.pool.__exit__(*exc)

    def call(self, method, args, shared=(), timeout=None):
        out = self.pool.call(method, args, shared, timeout=timeout)
        victim = self.runtime.victim
        if method == "run_round" and victim in out:
            t = args[victim][0]  # run_round(t, downlink, privacy_seed)
            out[victim].message = self.runtime.forge(out[victim].message, t)
        return out

    def get(self, ids=None):
        return self.pool.get(ids)

    def put(self, objects):
        self.pool.put(objects)

    def close(self):
        self.pool.close()


def _forged(kind):
    """Forgers of client 1's upload on a 2-class, 300-example federation."""
    return {
        "garbage": lambda m, t: b"\x00garbage that is no message",
        "empty": lambda m, t: b"",
        "truncated": lambda m, t: m[:-3],
        "unknown kind": lambda m, t: m[:4] + b"\x63" + m[5:],
        "wrong n_classes": lambda m, t: HardLabels(np.zeros(300, dtype=int), 3).to_bytes(),
        "wrong length": lambda m, t: HardLabels(np.zeros(299, dtype=int), 2).to_bytes(),
        "soft under hard": lambda m, t: SoftLabels(np.full((300, 2), 0.5)).to_bytes(),
        "abstain": lambda m, t: HardLabels(np.full(300, -1), 2, allow_abstain=True).to_bytes(),
        "not bytes": lambda m, t: 12345,
    }[kind]


KINDS = [
    "garbage",
    "empty",
    "truncated",
    "unknown kind",
    "wrong n_classes",
    "wrong length",
    "soft under hard",
    "abstain",
    "not bytes",
]


def _fit(cancer, rounds=2, **params):
    return FederatedCoTrainer(
        [DecisionTreeClassifier(max_depth=3) for _ in range(3)],
        rounds=rounds,
        random_state=0,
        **params,
    ).fit(cancer["X"], cancer["y"], X_public=cancer["X_public"])


@pytest.mark.parametrize("kind", KINDS)
def test_malformed_upload_is_that_clients_failure_under_skip(cancer, kind):
    honest = _fit(cancer, on_client_error="skip")
    hostile = _fit(cancer, on_client_error="skip", runtime=TamperingRuntime(1, _forged(kind)))
    for record in hostile.history_:
        assert set(record.failed) == {1}
        assert record.failed[1].startswith("MalformedMessage: ")
    # the round went on with the other two clients: their votes only
    first = hostile.history_[0]
    assert first.bytes_up == 2 * (10 + 300 // 8 + 1)
    assert honest.history_[0].failed == {}


@pytest.mark.parametrize("kind", ["garbage", "wrong n_classes", "wrong length"])
def test_malformed_upload_under_raise_names_the_client(cancer, kind):
    with pytest.raises(
        RuntimeError,
        match=r"client 1 \(DecisionTreeClassifier\) sent a malformed upload in round 1: "
        r"MalformedMessage",
    ):
        _fit(cancer, runtime=TamperingRuntime(1, _forged(kind)))


def test_delta_coding_detects_a_desynchronised_reference_and_recovers(cancer):
    from cotrain.wire.delta import DeltaHardLabels

    def lie_in_round_3(message, t):
        if t != 3:
            return message
        codes = np.zeros(300, dtype=np.int64)  # every label changed: needs no reference
        return DeltaHardLabels.encode(codes, 1 - codes, 2)

    hostile = _fit(
        cancer,
        rounds=5,
        encoding="delta",
        on_client_error="skip",
        runtime=TamperingRuntime(1, lie_in_round_3),
    )
    # round 3's forgery is well-formed (a lie, not a malformed message) and is decoded;
    # in round 4 the client codes against the labels it really sent in round 3, which the
    # server never received: the CRC catches it and only that client sits the round out;
    # in round 5 the server still holds round 3, the client sent round 4: a full message
    assert [sorted(r.failed) for r in hostile.history_] == [[], [], [], [1], []]
    assert "CRC" in hostile.history_[3].failed[1]
    honest = _fit(cancer, rounds=5, encoding="delta")
    assert hostile.history_[4].bytes_up > honest.history_[4].bytes_up


def test_server_with_too_few_wellformed_uploads_stops_with_min_clients():
    wire = WireFormat(n_classes=2, n_public=4)
    server = CoTrainingServer(
        MajorityVote(), wire, n_clients=2, on_client_error="skip", min_clients=2
    )
    uploads = [Upload(0, wire.encode_upload(np.array([0, 1, 1, 0]))), Upload(1, b"junk")]
    with pytest.raises(RuntimeError, match=r"only 1 of 2 sampled clients answered"):
        server.finish_round(1, np.arange(2), uploads, started=0.0)


# ------------------------------------------------------------------------ callbacks


class Recorder(Callback):
    def __init__(self, stop_at=None):
        self.events, self.stop_at = [], stop_at

    def on_fit_start(self, loop):
        self.events.append(("start", loop.start))

    def on_round_start(self, loop, t, sampled):
        self.events.append(("round", t, tuple(sampled.tolist())))

    def on_round_end(self, loop, record):
        self.events.append(("end", record.round, len(loop.history)))
        if record.round == self.stop_at:
            loop.stop("enough")

    def on_fit_end(self, loop):
        self.events.append(("fit end", loop.stopped_reason))


def test_user_callbacks_see_every_round_in_order_and_can_stop_the_run(cancer):
    recorder = Recorder(stop_at=2)
    trainer = _fit(cancer, rounds=5, participation=0.67, callbacks=[recorder])
    assert trainer.stopped_reason_ == "enough" and trainer.n_rounds_ == 2
    starts = [e for e in recorder.events if e[0] == "round"]
    assert [e[1] for e in starts] == [1, 2]
    assert [e[2] for e in starts] == [r.clients for r in trainer.history_]
    assert recorder.events[0] == ("start", 1)
    assert recorder.events[-1] == ("fit end", "enough")
    assert [e for e in recorder.events if e[0] == "end"] == [("end", 1, 1), ("end", 2, 2)]


def test_callbacks_are_validated_before_training(cancer):
    with pytest.raises(TypeError, match=r"callbacks\[1\]"):
        _fit(cancer, callbacks=[Recorder(), object()])
    with pytest.raises(TypeError, match="callbacks"):
        _fit(cancer, callbacks=Recorder())


def test_privacy_budget_is_a_callback_that_stops_before_the_round(cancer):
    recorder = Recorder()
    trainer = _fit(
        cancer,
        rounds=10,
        privacy=RandomizedResponse(epsilon=1.0, sensitivity=1, budget=3.5),
        classes=[0, 1],
        callbacks=[recorder],
    )
    assert trainer.stopped_reason_ == "privacy budget" and trainer.n_rounds_ == 3
    assert recorder.events[-1] == ("fit end", "privacy budget")
    assert trainer.privacy_report()["max_epsilon"] <= 3.5


# ------------------------------------------------------- models stay with clients


class SizeSpy(SequentialRuntime):
    """Records the pickled size of everything the clients return each round."""

    def __init__(self, runtime):
        super().__init__()
        self.inner, self.sizes = runtime, []

    def __enter__(self):
        self.inner.__enter__()
        return self

    def __exit__(self, *exc):
        return self.inner.__exit__(*exc)

    def host(self, objects):
        spy = self

        class Pool(TamperingPool):
            def call(self, method, args, shared=(), timeout=None):
                out = self.pool.call(method, args, shared, timeout=timeout)
                if method == "run_round":
                    spy.sizes += [len(pickle.dumps(r)) for r in out.values()]
                return out

        return Pool(host_objects(self.inner, objects), self)


@pytest.mark.slow
@pytest.mark.parametrize("n_jobs", [1, 2])
def test_only_labels_come_back_from_a_round_never_the_model(cancer, n_jobs):
    from cotrain.runtime.runtimes import make_runtime

    spy = SizeSpy(make_runtime(n_jobs))
    trainer = FederatedCoTrainer(
        [RandomForestClassifier(n_estimators=50) for _ in range(3)],
        rounds=2,
        random_state=0,
        runtime=spy,
    ).fit(cancer["X"], cancer["y"], X_public=cancer["X_public"])
    model_bytes = len(pickle.dumps(trainer.clients_[0]))
    assert model_bytes > 20_000
    assert len(spy.sizes) == 6 and max(spy.sizes) < 1_500  # a 48-byte message and its status
    # the fitted models came back once, at the end of fit
    assert all(m is not None for m in trainer.clients_)


# ------------------------------------------------------------------- state dicts


def test_state_dicts_round_trip():
    wire = WireFormat(n_classes=3, n_public=5, encoding="delta")
    server = CoTrainingServer(ReputationVote(), wire, n_clients=2)
    uploads = [
        Upload(i, wire.sender().encode(np.array(v), 1, 0))
        for i, v in enumerate(([0, 1, 2, 0, 1], [0, 1, 1, 0, 1]))
    ]
    server.finish_round(1, np.arange(2), uploads, started=0.0)
    twin = CoTrainingServer(ReputationVote(), wire, n_clients=2)
    twin.load_state_dict(server.state_dict())
    assert twin.configure_round(2, [0, 1]) == server.configure_round(2, [0, 1])
    assert [link.ref_round for link in twin.configure_round(2, [0, 1]).values()] == [1, 1]
    np.testing.assert_array_equal(twin.hard_consensus, server.hard_consensus)
    np.testing.assert_array_equal(
        twin.consensus.state_dict()["reputation"], server.consensus.state_dict()["reputation"]
    )

    sampler = ClientSampler(7, n_clients=10, participation=0.3)
    state = sampler.state_dict()
    draws = [sampler.sample().tolist() for _ in range(3)]
    sampler.load_state_dict(state)
    assert [sampler.sample().tolist() for _ in range(3)] == draws

    ledger = PrivacyLedger([RandomizedResponse(epsilon=1.0)], 3, 2, 10)
    ledger.record([0, 2])
    other = PrivacyLedger([RandomizedResponse(epsilon=1.0)], 3, 2, 10)
    other.load_state_dict(ledger.state_dict())
    assert other.rounds_taken.tolist() == [1, 0, 1]
    with pytest.raises(ValueError, match="rounds_taken"):
        other.load_state_dict({"rounds_taken": [1, 2]})

    X = np.arange(8.0).reshape(-1, 1)
    client = Client(0, DecisionTreeClassifier(random_state=0), X, X[:, 0] > 3, np.array([0, 1]),
                    X_public=X, wire=WireFormat(2, 8, encoding="delta"))  # fmt: skip
    client.run_round(1)
    copy = Client(0, DecisionTreeClassifier(random_state=0), X, X[:, 0] > 3, np.array([0, 1]),
                  X_public=X, wire=WireFormat(2, 8, encoding="delta"))  # fmt: skip
    copy.load_state_dict(client.state_dict())
    assert copy.fitted and copy.last_sent.tolist() == client.last_sent.tolist()
    assert (
        copy.run_round(2, Downlink(None, ref_round=1)).message
        == client.run_round(2, Downlink(None, ref_round=1)).message
    )
