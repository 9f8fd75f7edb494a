"""Clustered co-training: the label-space bi-partition on hand-made
labels, the server's per-cluster consensus and broadcasts, and the trainer recovering two
groups of clients under different label maps."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.datasets import load_breast_cancer
from sklearn.tree import DecisionTreeClassifier

from consensus import MajorityVote
from cotrain import FederatedCoTrainer
from cotrain.clustering import (
    AgreementClustering,
    agreement_matrix,
    bipartition,
    cluster_clients,
    get_clustering,
    separation_gap,
)
from cotrain.federation.server import CoTrainingServer
from cotrain.history import History, RoundRecord
from cotrain.params import check_params
from cotrain.wire.broadcast import BroadcastDecoder, Downlink
from cotrain.wire.format import WireFormat
from cotrain.wire.upload import Upload

# ----------------------------------------------------------------- pure functions


def test_agreement_matrix_is_the_share_of_equal_labels():
    labels = np.array([[0, 1, 2, 0], [0, 1, 0, 0], [2, 1, 0, -1]])
    s = agreement_matrix(labels, n_classes=3)
    # 0-1: 3 of 4 equal; 0-2: position 1 of the 3 both labelled; 1-2: positions 1, 2 of 3
    np.testing.assert_allclose(s, [[1, 3 / 4, 1 / 3], [3 / 4, 1, 2 / 3], [1 / 3, 2 / 3, 1]])


def test_soft_similarities_and_their_hard_special_case():
    p = np.array(
        [
            [[0.5, 0.5], [1.0, 0.0]],
            [[1.0, 0.0], [1.0, 0.0]],
        ]
    )
    # tv: sum_c min(p, q) = 0.5 on the first example, 1 on the second
    assert agreement_matrix(p, similarity="tv")[0, 1] == pytest.approx(0.75)
    # cosine of the flattened matrices: (0.5 + 1) / (sqrt(1.5) * sqrt(2))
    assert agreement_matrix(p, similarity="cosine")[0, 1] == pytest.approx(1.5 / np.sqrt(3))
    # argmax agreement: example 1 is a tie (argmax 0) -> both equal
    assert agreement_matrix(p, similarity="agreement")[0, 1] == 1.0
    # on one-hot rows every measure is the share of equal labels
    codes = np.array([[0, 1, 1, 2], [0, 1, 2, 2], [1, 0, 1, 2]])
    onehot = np.eye(3)[codes]
    for similarity in ("agreement", "tv", "cosine"):
        np.testing.assert_allclose(
            agreement_matrix(onehot, similarity=similarity), agreement_matrix(codes, 3)
        )
    # a row with NaN is left out of that pair
    p_nan = p.copy()
    p_nan[0, 0] = np.nan
    assert agreement_matrix(p_nan, similarity="tv")[0, 1] == 1.0


def test_bipartition_minimises_the_largest_cross_similarity():
    s = np.array(
        [
            [1.0, 0.9, 0.2, 0.1],
            [0.9, 1.0, 0.3, 0.2],
            [0.2, 0.3, 1.0, 0.8],
            [0.1, 0.2, 0.8, 1.0],
        ]
    )
    first, second, cross = bipartition(s)
    assert (first.tolist(), second.tolist(), cross) == ([0, 1], [2, 3], 0.3)
    # Corollary 2's gap: least inside (0.8) minus largest across (0.3)
    assert separation_gap(s, first, second) == pytest.approx(0.5)
    # single linkage: a chain 0-1-2 stays together, 3 is cut off
    chain = np.array(
        [[1, 0.9, 0.1, 0.0], [0.9, 1, 0.9, 0.1], [0.1, 0.9, 1, 0.2], [0.0, 0.1, 0.2, 1]]
    )
    first, second, cross = bipartition(chain)
    assert (first.tolist(), second.tolist(), cross) == ([0, 1, 2], [3], 0.2)
    with pytest.raises(ValueError, match="at least 2 clients"):
        bipartition(np.ones((1, 1)))


def test_recursive_bipartition_finds_three_groups_and_keeps_alike_clients_together():
    base = np.array([0, 1, 2, 0, 1, 2, 0, 1, 2, 0])
    maps = [np.arange(3), np.array([1, 2, 0]), np.array([2, 0, 1])]
    labels = np.stack([maps[g][base] for g in (0, 0, 1, 1, 2, 2)])
    labels[1, 0] = 2  # one disagreement inside group 0
    ids = np.array([10, 11, 12, 13, 14, 15])
    assert cluster_clients(labels, ids, n_classes=3) == ((10, 11), (12, 13), (14, 15))
    # all agree: one cluster
    assert cluster_clients(np.stack([base] * 4), n_classes=3) == ((0, 1, 2, 3),)
    # alike clients with noise: cross 0.9 is above max_cross, no split
    noisy = np.stack([base, base, base])
    noisy[2, 0] = 1
    assert cluster_clients(noisy, n_classes=3) == ((0, 1, 2),)
    # below max_cross but no gap beyond the margin: 0.4 agreement everywhere, no split
    a = np.array([0, 0, 0, 0, 0, 1, 1, 1, 1, 1])
    b = np.array([0, 0, 1, 1, 1, 0, 0, 0, 1, 1])  # agrees with a on 4 of 10
    c = np.array([0, 1, 0, 0, 0, 0, 0, 0, 0, 0])  # 4 of 10 with a, 4 with b
    assert agreement_matrix(np.stack([a, b, c]), 2)[np.triu_indices(3, 1)].tolist() == [
        0.4,
        0.4,
        0.4,
    ]
    assert cluster_clients(np.stack([a, b, c]), n_classes=2, max_cross=0.5) == ((0, 1, 2),)
    # min_size: a lone outlier is not split off when each side needs two clients
    lone = np.stack([base, base, base, maps[1][base]])
    assert cluster_clients(lone, n_classes=3) == ((0, 1, 2), (3,))
    assert cluster_clients(lone, n_classes=3, min_size=2) == ((0, 1, 2, 3),)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"similarity": "jaccard"}, ValueError, "similarity must be one of"),
        ({"similarity": 3}, TypeError, "similarity must be a str"),
        ({"max_cross": 1.5}, ValueError, r"max_cross must be in \[-1, 1\]"),
        ({"max_cross": "high"}, TypeError, "max_cross must be a number"),
        ({"min_gap": True}, TypeError, "min_gap must be a number"),
        ({"stationary": -0.1}, ValueError, "stationary must be in"),
        ({"min_size": 0}, ValueError, "min_size must be >= 1"),
        ({"min_size": 1.5}, TypeError, "min_size must be an int"),
        ({"probe": 0.7}, ValueError, r"probe must be in \[0, 0.5\]"),
    ],
)
def test_bad_clustering_parameters_are_named(kwargs, error, match):
    with pytest.raises(error, match=match):
        AgreementClustering(**kwargs)


def test_the_trainer_parameter_is_checked_by_name():
    check_params({"clustering": None})
    check_params({"clustering": "agreement"})
    check_params({"clustering": AgreementClustering(max_cross=0.7)})
    with pytest.raises(ValueError, match="clustering must be None, 'agreement' or a"):
        check_params({"clustering": "kmeans"})
    with pytest.raises(TypeError, match="clustering must be None, 'agreement' or a"):
        check_params({"clustering": 2})
    assert get_clustering("agreement") == AgreementClustering()


# ------------------------------------------------------------------ the server


def _uploads(wire, rows, ids):
    return [Upload(i, wire.encode_upload(np.array(r))) for i, r in zip(ids, rows, strict=True)]


def test_server_forms_one_consensus_per_cluster_and_sends_each_client_its_own():
    wire = WireFormat(n_classes=2, n_public=120, encoding="delta")
    server = CoTrainingServer(MajorityVote(), wire, n_clients=5, clustering="agreement")
    a = np.tile([0, 0, 1, 1, 0, 1], 20)
    b = 1 - a
    # client 2 does not answer: it is listed with the side holding more answers (ties:
    # the side with the smaller id) and waits, sent no pseudo-labels, until it answers
    record, answered = server.finish_round(
        1, np.arange(5), _uploads(wire, [a, a, b, b], [0, 1, 3, 4]), started=0.0
    )
    assert answered == [0, 1, 3, 4]
    assert record.clusters == server.clusters == ((0, 1, 2), (3, 4))
    assert server.pending == {2}
    assert record.agreement == 1.0 and record.coverage == 1.0
    assert server.hard_consensus.tolist() == a.tolist()  # the largest cluster's
    links = server.configure_round(2, np.arange(5))
    for i, expected in ((0, a), (2, np.full(120, -1)), (3, b), (4, b)):
        link = links[i]
        assert link.ref == 0 and wire.decode_broadcast(link.data).tolist() == expected.tolist()
    # round 2: clients acknowledge version 1; one label of cluster (3, 4) changes, and
    # client 2's own labels (b: the other map) place it in that cluster
    b2 = b.copy()
    b2[5] = 1 - b2[5]
    uploads = _uploads(wire, [a, a, b, b2, b2], range(5))
    for u in uploads:
        u.broadcast_version = 1
    record, _ = server.finish_round(2, np.arange(5), uploads, started=0.0)
    assert record.clusters == ((0, 1), (2, 3, 4)) and not server.pending
    # changed: client 2 now receives labels everywhere (it was sent none)
    assert record.changed == 120 and record.agreement == pytest.approx(1 - 1 / 600)
    links = server.configure_round(3, np.arange(5))
    link = links[3]  # a delta against the codes client 3 holds
    decoder = BroadcastDecoder(wire)
    decoder.decode(Downlink(wire.encode_broadcast(b)), version=1)
    assert link.ref == 1 and decoder.decode(link, version=2).tolist() == b2.tolist()
    assert links[0].ref == 1  # cluster (0, 1, 2): an empty delta
    # state survives a round trip
    fresh = CoTrainingServer(MajorityVote(), wire, n_clients=5, clustering="agreement")
    fresh.load_state_dict(server.state_dict())
    assert fresh.clusters == server.clusters
    assert fresh.configure_round(3, [0, 3]) == server.configure_round(3, [0, 3])


def test_probe_positions_are_left_out_of_every_consensus():
    wire = WireFormat(n_classes=2, n_public=8)
    rule = AgreementClustering(probe=0.25)
    server = CoTrainingServer(MajorityVote(), wire, n_clients=2, clustering=rule)
    rows = [[0, 1, 0, 1, 0, 1, 0, 1]] * 2
    record, _ = server.finish_round(1, np.arange(2), _uploads(wire, rows, [0, 1]), started=0.0)
    assert np.flatnonzero(server.hard_consensus < 0).tolist() == [0, 4]
    assert record.coverage == 0.75 and record.clusters == ((0, 1),)


def test_history_keeps_clusters_through_json_and_tables():
    record = RoundRecord(round=3, clients=(0, 1, 2), clusters=((0, 2), (1,)))
    assert RoundRecord.from_json(record.to_json()) == record
    assert RoundRecord.from_json({**record.to_json(), "clusters": []}).clusters == ()
    old = record.to_json()
    del old["clusters"]  # a record written before clustered co-training
    assert RoundRecord.from_json(old).clusters == ()
    history = History()
    history.append(record)
    frame = history.to_frame()
    assert frame.loc[0, "clusters"] == "0,2|1" and frame.loc[0, "n_clusters"] == 2


# ------------------------------------------------------------------ the trainer


@pytest.fixture(scope="module")
def shifted():
    """Breast cancer over six clients; clients 3-5 have the labels flipped."""
    X, y = load_breast_cancer(return_X_y=True)
    order = np.random.default_rng(0).permutation(len(y))
    X, y = X[order], y[order]
    X_test, y_test, X_public, X_train, y_train = X[:120], y[:120], X[120:320], X[320:], y[320:]
    parts = np.array_split(np.arange(len(y_train)), 6)
    y_clients = [y_train[p] if i < 3 else 1 - y_train[p] for i, p in enumerate(parts)]
    return {
        "X": [X_train[p] for p in parts],
        "y": y_clients,
        "X_public": X_public,
        "X_test": X_test,
        "y_test": y_test,
    }


def _trainer(clustering, rounds=4, **params):
    return FederatedCoTrainer(
        [DecisionTreeClassifier(max_depth=4) for _ in range(6)],
        rounds=rounds,
        trust=None,
        clustering=clustering,
        random_state=0,
        **params,
    )


def _group_accuracy(trainer, data):
    out = []
    for ids, truth in (((0, 1, 2), data["y_test"]), ((3, 4, 5), 1 - data["y_test"])):
        out.append(np.mean([np.mean(trainer.clients_[i].predict(data["X_test"]) == truth)
                            for i in ids]))  # fmt: skip
    return out


def test_the_trainer_recovers_two_groups_and_each_does_as_well_as_alone(shifted):
    d = shifted
    clustered = _trainer("agreement").fit(d["X"], d["y"], X_public=d["X_public"])
    assert [r.clusters for r in clustered.history_] == [((0, 1, 2), (3, 4, 5))] * 4
    plain = _trainer(None).fit(d["X"], d["y"], X_public=d["X_public"])
    assert all(r.clusters == () for r in plain.history_)
    a, b = _group_accuracy(clustered, d)
    assert a > 0.85 and b > 0.85  # seeded: 0.92 and 0.91
    # plain FedCT: one consensus for both label maps; one group ends below chance
    assert min(_group_accuracy(plain, d)) < 0.5


def test_soft_labels_recover_the_groups_too(shifted):
    d = shifted
    rule = AgreementClustering(similarity="tv")
    soft = _trainer(rule, rounds=2, share="soft", consensus="mean")
    soft.fit(d["X"], d["y"], X_public=d["X_public"])
    assert [r.clusters for r in soft.history_] == [((0, 1, 2), (3, 4, 5))] * 2


def test_one_cluster_is_exactly_plain_fedct(shifted):
    d = shifted
    y_same = [1 - y if i >= 3 else y for i, y in enumerate(d["y"])]  # one label map
    runs = [
        _trainer(c, encoding="delta").fit(
            d["X"], y_same, X_public=d["X_public"], eval_set=(d["X_test"], d["y_test"])
        )
        for c in (None, "agreement")
    ]
    plain, clustered = runs
    assert [r.clusters for r in clustered.history_] == [((0, 1, 2, 3, 4, 5),)] * 4
    np.testing.assert_array_equal(plain.pseudo_label_codes_, clustered.pseudo_label_codes_)
    for name in ("coverage", "agreement", "changed", "bytes_up", "bytes_down", "mean_accuracy"):
        assert [getattr(r, name) for r in plain.history_] == [
            getattr(r, name) for r in clustered.history_
        ], name


@pytest.mark.slow
def test_clusters_survive_checkpoint_and_resume(shifted, tmp_path):
    d = shifted
    params = {"encoding": "delta", "participation": 0.84}
    full = _trainer("agreement", rounds=4, **params).fit(d["X"], d["y"], X_public=d["X_public"])
    _trainer("agreement", rounds=2, checkpoint_dir=tmp_path, **params).fit(
        d["X"], d["y"], X_public=d["X_public"]
    )
    resumed = _trainer("agreement", rounds=4, checkpoint_dir=tmp_path, **params).fit(
        d["X"], d["y"], X_public=d["X_public"], resume=True
    )
    assert [r.clusters for r in resumed.history_] == [r.clusters for r in full.history_]
    assert full.history_[-1].clusters == ((0, 1, 2), (3, 4, 5))
    assert [r.bytes_down for r in resumed.history_] == [r.bytes_down for r in full.history_]
    np.testing.assert_array_equal(resumed.pseudo_label_codes_, full.pseudo_label_codes_)
    for i in range(6):
        np.testing.assert_array_equal(
            resumed.clients_[i].predict(d["X_test"]), full.clients_[i].predict(d["X_test"])
        )


def test_a_bad_clustering_is_refused_before_training(shifted):
    d = shifted
    with pytest.raises(ValueError, match="clustering must be"):
        _trainer("spectral").fit(d["X"], d["y"], X_public=d["X_public"])
