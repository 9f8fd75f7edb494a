"""Delta-coded broadcasts: each client receives the changes since the consensus it
acknowledged (cotrain.wire.broadcast), in-process and with the state a client keeps."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression
from sklearn.tree import DecisionTreeClassifier

from cotrain import FederatedCoTrainer
from cotrain.federation.client import Client
from cotrain.wire.broadcast import BroadcastDecoder, BroadcastEncoder, Downlink, MissingReference
from cotrain.wire.format import MalformedMessage, WireFormat


@pytest.fixture
def wire():
    return WireFormat(n_classes=10, n_public=1000, encoding="delta")


def consensus(changes=None):
    codes = np.arange(1000) % 10
    codes[7] = -1  # the consensus abstains somewhere
    for position, value in (changes or {}).items():
        codes[position] = value
    return codes


def test_a_delta_broadcast_carries_only_the_changes(wire):
    server, client = BroadcastEncoder(wire, 2), BroadcastDecoder(wire)
    server.publish(1, consensus())
    first = server.message_for(0)
    # a full HardLabels broadcast: 10-byte header + 1000 labels at 4 bits (10 classes +
    # abstain = 11 symbols)
    assert (first.ref, len(first.data)) == (0, 10 + 500)
    np.testing.assert_array_equal(client.decode(first, version=1), consensus())
    server.acknowledge(0, client.version)
    server.publish(2, consensus({10: 3, 500: -1}))
    second = server.message_for(0)
    # 14-byte header + m (4) + gap width (1) + gaps 10 and 489 at 9 bits + 2 symbols at
    # 4 bits (26 bits: 4 bytes)
    assert (second.ref, len(second.data)) == (1, 14 + 4 + 1 + 4)
    np.testing.assert_array_equal(client.decode(second, version=2), consensus({10: 3, 500: -1}))
    # client 1 acknowledged nothing: it gets the full message
    assert server.message_for(1) == Downlink(server.full)


def test_a_lost_acknowledgement_keeps_the_old_reference_decodable(wire):
    server, client = BroadcastEncoder(wire, 1), BroadcastDecoder(wire)
    server.publish(1, consensus())
    client.decode(server.message_for(0), version=1)
    server.acknowledge(0, client.version)
    server.publish(2, consensus({0: 5}))
    client.decode(server.message_for(0), version=2)  # its reply (the ack of 2) is lost
    server.publish(3, consensus({0: 5, 1: 6}))
    late = server.message_for(0)
    assert late.ref == 1  # still against what the server knows the client holds
    np.testing.assert_array_equal(client.decode(late, version=3), consensus({0: 5, 1: 6}))
    server.acknowledge(0, client.version)
    assert server.acked == [3] and sorted(server.state_dict()["versions"]) == [3]


def test_a_client_that_lost_its_state_cannot_decode_and_says_so(wire):
    server = BroadcastEncoder(wire, 1)
    server.publish(1, consensus())
    server.acknowledge(0, 1)
    server.publish(2, consensus({3: 0}))
    with pytest.raises(MissingReference, match="version 1"):
        BroadcastDecoder(wire).decode(server.message_for(0), version=2)
    server.acknowledge(0, 0)  # it reports holding nothing: the next broadcast is full
    assert server.message_for(0).ref == 0


def test_a_wrong_reference_is_refused_never_decoded(wire):
    server, client = BroadcastEncoder(wire, 1), BroadcastDecoder(wire)
    client.decode(Downlink(wire.encode_broadcast(consensus({1: 2}))), version=1)
    server.publish(1, consensus())  # the server's version 1 differs from the client's
    server.acknowledge(0, 1)
    server.publish(2, consensus({4: 4}))
    with pytest.raises(MalformedMessage, match="CRC"):
        client.decode(server.message_for(0), version=2)


def test_an_unknown_acknowledgement_gets_a_full_message(wire):
    server = BroadcastEncoder(wire, 1)
    server.publish(1, consensus())
    server.acknowledge(0, 99)  # a hostile or confused client
    assert server.acked == [0] and server.message_for(0).ref == 0


def test_soft_and_packed_broadcasts_are_always_full():
    soft = WireFormat(n_classes=2, n_public=3, share="soft", encoding="delta")
    server = BroadcastEncoder(soft, 1)
    server.publish(1, np.array([[0.5, 0.5], [1.0, 0.0], [0.0, 1.0]]))
    server.acknowledge(0, 1)
    assert server.message_for(0) == Downlink(server.full)
    packed = BroadcastEncoder(WireFormat(n_classes=2, n_public=3), 1)
    packed.publish(1, np.array([0, 1, 1]))
    packed.acknowledge(0, 1)
    assert packed.message_for(0).ref == 0 and packed.acked == [0]


def test_encoder_state_round_trips(wire):
    server = BroadcastEncoder(wire, 2)
    server.publish(1, consensus())
    server.acknowledge(1, 1)
    server.publish(2, consensus({9: 9}))
    twin = BroadcastEncoder(wire, 2)
    twin.load_state_dict(server.state_dict(), server.full)
    assert twin.message_for(1) == server.message_for(1) and twin.message_for(1).ref == 1


def test_client_with_a_lost_reference_trains_alone_and_reports_version_zero(cancer, wire):
    wire = WireFormat(n_classes=2, n_public=300, encoding="delta")
    server = BroadcastEncoder(wire, 1)
    server.publish(1, np.zeros(300, dtype=np.int64))
    server.acknowledge(0, 1)
    server.publish(2, np.ones(300, dtype=np.int64))
    client = Client(
        0, DecisionTreeClassifier(random_state=0), cancer["X"][0], cancer["y"][0],
        np.array([0, 1]), X_public=cancer["X_public"], wire=wire,
    )  # fmt: skip
    result = client.run_round(3, server.message_for(0))
    assert result.error is None and result.broadcast_version == 0
    assert any("does not hold" in message for _, message in result.warnings)
    # it trained on its 20 private rows alone
    assert client.model.estimator_.tree_.n_node_samples[0] == 20


@pytest.mark.parametrize(
    "params",
    [{}, {"consensus": "qualified", "participation": 0.67}],
    ids=["majority", "qualified-sampled"],
)
def test_delta_broadcasts_change_nothing_but_the_bytes(cancer, params):
    def fit(encoding):
        learners = [DecisionTreeClassifier(max_depth=3), LogisticRegression(max_iter=200)] * 2
        X = np.array_split(np.concatenate(cancer["X"]), 4)
        y = np.array_split(np.concatenate(cancer["y"]), 4)
        return FederatedCoTrainer(
            learners, rounds=5, encoding=encoding, random_state=0, **params
        ).fit(X, y, X_public=cancer["X_public"])

    packed, delta = fit("packed"), fit("delta")
    for a, b in zip(packed.history_, delta.history_, strict=True):
        assert (a.clients, a.changed, a.coverage) == (b.clients, b.changed, b.coverage)
    np.testing.assert_array_equal(packed.pseudo_label_codes_, delta.pseudo_label_codes_)
    down_packed = sum(r.bytes_down for r in packed.history_)
    down_delta = sum(r.bytes_down for r in delta.history_)
    assert down_delta < down_packed
