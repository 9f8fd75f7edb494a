"""Per-client trust in the pseudo-labelled pool (cotrain.trust): the weight is chosen from
the client's own rows, recorded in the history, and never makes a strong client follow a
wrong consensus."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.linear_model import LogisticRegression
from sklearn.neighbors import KNeighborsClassifier
from sklearn.tree import DecisionTreeClassifier

from consensus import Consensus, MajorityVote
from cotrain import FederatedCoTrainer
from cotrain.federation.client import Client
from cotrain.federation.server import CoTrainingServer
from cotrain.trust import (
    FixedTrust,
    PseudoLabelTrust,
    client_trust,
    get_trust,
    pick_weight,
    weighted_training_set,
)
from cotrain.trust.cross_fit import CrossFitTrust
from cotrain.wire.broadcast import Downlink
from cotrain.wire.format import WireFormat
from cotrain.wire.upload import Upload

CLASSES = np.array([0, 1, 2])


# ------------------------------------------------------- weighted training set
def test_pool_rows_of_held_classes_get_the_weight_others_keep_one():
    X, y = np.zeros((3, 1)), np.array([0, 0, 1])
    U, pseudo = np.arange(4.0).reshape(4, 1), np.array([0, 2, 1, 2])
    Xt, yt, w = weighted_training_set(LogisticRegression(), X, y, U, pseudo, CLASSES, 0.25)
    assert yt.tolist() == [0, 0, 1, 0, 2, 1, 2]
    assert w.tolist() == [1, 1, 1, 0.25, 1, 0.25, 1]
    assert Xt[3:, 0].tolist() == [0, 1, 2, 3]


def test_weight_zero_drops_held_pool_rows_and_weight_one_has_no_weights():
    X, y = np.zeros((2, 1)), np.array([0, 1])
    U, pseudo = np.ones((3, 1)), np.array([0, 2, 1])
    _, yt, w = weighted_training_set(LogisticRegression(), X, y, U, pseudo, CLASSES, 0.0)
    assert yt.tolist() == [0, 1, 2] and w.tolist() == [1, 1, 1]
    _, yt, w = weighted_training_set(LogisticRegression(), X, y, U, pseudo, CLASSES, 1.0)
    assert yt.tolist() == [0, 1, 0, 2, 1] and w is None


def test_learner_without_sample_weight_gets_a_nested_seeded_subset():
    X, y = np.zeros((2, 1)), np.array([0, 1])
    U, pseudo = np.arange(100.0).reshape(100, 1), np.tile([0, 1], 50)
    knn = KNeighborsClassifier()
    kept = {}
    for weight in (0.3, 0.6):
        Xt, _, w = weighted_training_set(knn, X, y, U, pseudo, CLASSES, weight, random_state=4)
        assert w is None
        kept[weight] = set(Xt[2:, 0].tolist())
        assert len(kept[weight]) == round(100 * weight)
    assert kept[0.3] < kept[0.6]
    again = weighted_training_set(knn, X, y, U, pseudo, CLASSES, 0.3, random_state=4)[0]
    assert set(again[2:, 0].tolist()) == kept[0.3]


def test_soft_pool_rows_are_weighted_by_their_argmax_class():
    X, y = np.zeros((1, 1)), np.array([1])
    U = np.ones((2, 1))
    soft = np.array([[0.2, 0.7, 0.1], [0.1, 0.1, 0.8]])
    _, yt, w = weighted_training_set(LogisticRegression(), X, y, U, soft, CLASSES, 0.5)
    np.testing.assert_array_equal(yt, [[0, 1, 0], [0.2, 0.7, 0.1], [0.1, 0.1, 0.8]])
    assert w.tolist() == [1.0, 0.5, 1.0]


# ------------------------------------------------------------ choosing trust
def _two_blobs(rng, n):
    X = rng.normal(size=(n, 2))
    return X, (X[:, 0] > 0).astype(int)


def test_a_wrong_consensus_gets_weight_zero_and_a_right_one_weight_one():
    rng = np.random.default_rng(0)
    X, y = _two_blobs(rng, 60)
    U, truth = _two_blobs(rng, 200)
    trust = PseudoLabelTrust(weights=(0.0, 0.5, 1.0), random_state=0)
    tree = DecisionTreeClassifier(random_state=0)
    wrong = trust.choose(tree, X, y, U, 1 - truth, np.array([0, 1]))
    assert wrong.weight == 0.0
    assert wrong.scores[0.0] > wrong.scores[0.5] > wrong.scores[1.0]
    assert wrong.quality == wrong.scores[0.0]
    right = trust.choose(tree, X, y, U, truth, np.array([0, 1]))
    assert right.weight == 1.0 and right.scores[1.0] >= right.scores[0.0]


def test_a_smaller_weight_must_win_beyond_noise():
    pool = np.array([1, 1, 1, 1, 0, 0, 1, 1])
    own = np.array([1, 1, 1, 1, 1, 1, 1, 0])  # diffs 0,0,0,0,1,1,0,-1: mean 0.125, se 0.2266
    assert pick_weight({0.0: own, 1.0: pool}, z=0.55) == 0.0
    assert pick_weight({0.0: own, 1.0: pool}, z=0.56) == 1.0
    half = np.array([1, 1, 1, 1, 1, 1, 1, 1])  # beats the pool by 0.25, se 0.1637
    assert pick_weight({0.0: own, 0.5: half, 1.0: pool}, z=1.0) == 0.5
    assert pick_weight({0.0: own, 1.0: own.copy()}, z=0.0) == 1.0  # a tie keeps trust


def test_too_few_rows_or_one_candidate_makes_no_extra_fit():
    X, y = np.zeros((5, 1)), np.array([0, 1, 0, 1, 0])
    U, pseudo = np.ones((3, 1)), np.array([0, 1, 1])
    choice = PseudoLabelTrust(cv=3).choose(None, X, y, U, pseudo, np.array([0, 1]))
    assert choice.weight == 1.0 and choice.scores == {} and choice.quality is None
    assert PseudoLabelTrust(weights=(0.5,)).choose(None, X, y, U, pseudo, CLASSES).weight == 0.5


@pytest.mark.parametrize(
    ("trust", "error", "text"),
    [
        ("always", ValueError, "trust must be 'auto'"),
        (1.5, ValueError, "trust must be in \\[0, 1\\]"),
        (True, TypeError, "trust must be"),
        (PseudoLabelTrust(weights=()), ValueError, "trust weights must be a non-empty"),
        (PseudoLabelTrust(weights=(0.0, 2.0)), ValueError, "trust weights must be in"),
        (PseudoLabelTrust(cv=1), ValueError, "trust cv must be an integer >= 2"),
        (PseudoLabelTrust(z=-1.0), ValueError, "trust z must be a number >= 0"),
    ],
)
def test_bad_trust_is_refused(trust, error, text):
    with pytest.raises(error, match=text):
        get_trust(trust)


def test_trainer_refuses_a_bad_trust_before_training(cancer):
    trainer = FederatedCoTrainer([DecisionTreeClassifier()] * 3, trust="sometimes")
    with pytest.raises(ValueError, match="trust must be 'auto', None, a weight in"):
        trainer.fit(cancer["X"], cancer["y"], X_public=cancer["X_public"])


def test_a_privately_trained_model_gets_full_weight_not_cross_validation():
    from cotrain.privacy import LabelMechanism

    class DPTraining(LabelMechanism):
        cross_validated_trust = False

        def dp_event(self, n_classes, n_labels):
            return None

    assert isinstance(client_trust("auto", DPTraining(), 0), FixedTrust)
    assert client_trust(None, DPTraining(), 0).weight == 1.0
    assert client_trust(1.0, DPTraining(), 0).weight == 1.0
    with pytest.raises(ValueError, match=r"trust=0\.5 cannot be combined with DPTraining"):
        client_trust(0.5, DPTraining(), 0)  # pool weights would depend on the private labels
    with pytest.raises(ValueError, match="outside the accounted ε"):
        client_trust(PseudoLabelTrust(), DPTraining(), 0)

    class OldDPTraining:  # the earlier protocol: refused
        applies_to = "model"

    with pytest.raises(TypeError, match=r"must be a cotrain\.privacy\.LabelMechanism"):
        client_trust("auto", OldDPTraining(), 0)
    assert client_trust("auto", None, 7).random_state == client_trust("auto", None, 7).random_state
    assert client_trust("auto", None, 7).random_state != client_trust("auto", None, 8).random_state


# -------------------------------------------------------------- in the trainer
def _fit(cancer, **params):
    estimators = [DecisionTreeClassifier(), LogisticRegression(max_iter=500)]
    estimators.append(KNeighborsClassifier())
    trainer = FederatedCoTrainer(estimators, rounds=3, random_state=0, **params)
    return trainer.fit(cancer["X"], cancer["y"], X_public=cancer["X_public"])


def test_history_records_each_clients_trust_per_round(cancer):
    trainer = _fit(cancer, trust=PseudoLabelTrust())
    assert trainer.history_[0].trust == {}  # round 1: no consensus yet
    for record in trainer.history_[1:]:
        assert set(record.trust) == {0, 1, 2}
        assert all(w in (0.0, 1.0) for w in record.trust.values())
    frame = trainer.history_.to_frame()
    assert frame.loc[2, "trust_client_1"] == trainer.history_[2].trust[1]
    again = _fit(cancer, trust=PseudoLabelTrust())  # seeded: the same choices and models
    assert [r.trust for r in again.history_] == [r.trust for r in trainer.history_]
    X_test = cancer["X_test"]
    np.testing.assert_array_equal(again.predict(X_test), trainer.predict(X_test))


def test_trust_none_and_full_weight_are_plain_fedct(cancer):
    plain, full = _fit(cancer, trust=None), _fit(cancer, trust=1.0)
    np.testing.assert_array_equal(plain.pseudo_label_codes_, full.pseudo_label_codes_)
    assert plain.history_[-1].trust == {0: 1.0, 1: 1.0, 2: 1.0}


def test_weight_zero_clients_are_their_local_only_models(cancer):
    trainer = _fit(cancer, trust=0.0)
    for est, X, y, model in zip(
        [DecisionTreeClassifier(), LogisticRegression(max_iter=500), KNeighborsClassifier()],
        cancer["X"], cancer["y"], trainer.clients_, strict=True,
    ):  # fmt: skip
        local = clone(est).set_params(**model.get_params()).fit(X, y)
        X_test = cancer["X_test"]
        np.testing.assert_array_equal(local.predict(X_test), model.predict(X_test))


def test_a_strong_client_does_not_follow_a_wrong_majority():
    """Three clients learned flipped labels; the fourth holds the truth. Plain FedCT drags
    it to the wrong consensus; with trust it keeps its own accuracy."""
    rng = np.random.default_rng(3)
    X, y = _two_blobs(rng, 400)
    U = rng.normal(size=(300, 2))
    X_test, y_test = _two_blobs(rng, 500)
    Xs = [X[i * 100 : (i + 1) * 100] for i in range(4)]
    ys = [1 - y[i * 100 : (i + 1) * 100] for i in range(3)] + [y[300:]]
    accuracy = {}
    for trust in (None, "auto"):
        est = [DecisionTreeClassifier(max_depth=3) for _ in range(4)]
        t = FederatedCoTrainer(est, trust=trust, rounds=3, random_state=0)
        t.fit(Xs, ys, X_public=U)
        accuracy[trust] = np.mean(t.clients_[3].predict(X_test) == y_test)
        if trust == "auto":  # cross-fitted: client 3 keeps its own model (weight 0)
            assert t.history_[-1].trust[3] == 0.0
    local = DecisionTreeClassifier(max_depth=3, random_state=0).fit(Xs[3], ys[3])
    assert accuracy[None] < 0.1  # it learned the flipped consensus
    assert accuracy["auto"] >= np.mean(local.predict(X_test) == y_test) - 0.02
    assert accuracy["auto"] > 0.9


# ------------------------------------------------------------- quality upload
class RecordsQuality(Consensus):
    output = "hard"
    uses_quality = True

    def __init__(self):
        self.seen = []

    def weights_for(self, client_ids, n_public, quality=None):
        self.seen.append(quality)
        return None

    def __call__(self, labels, *, n_classes, weights=None):
        return MajorityVote()(labels, n_classes=n_classes)


def test_clients_send_their_out_of_fold_accuracy_and_the_consensus_gets_it():
    rng = np.random.default_rng(0)
    X, y = _two_blobs(rng, 60)
    U, _ = _two_blobs(rng, 40)
    wire = WireFormat(2, 40)
    classes = np.array([0, 1])
    trust = PseudoLabelTrust(random_state=0)
    client = Client(0, DecisionTreeClassifier(random_state=0), X, y, classes, X_public=U,
                    wire=wire, trust=trust)  # fmt: skip
    first = client.run_round(1, None)
    assert first.quality is None and first.trust is None  # no consensus to weigh yet
    server = CoTrainingServer(RecordsQuality(), wire, 2)
    silent = Upload(1, wire.encode_upload(np.zeros(40, dtype=int)))
    server.finish_round(1, np.arange(2), [first.upload(), silent], started=0.0)
    second = client.run_round(2, server.configure_round(2, [0])[0])
    assert 0.5 < second.quality <= 1.0 and second.upload().quality == second.quality
    server.finish_round(2, np.arange(2), [second.upload(), silent], started=0.0)
    seen = server.consensus.seen
    assert np.isnan(seen[0]).all()
    assert seen[1][0] == second.quality and np.isnan(seen[1][1])


def test_a_private_client_keeps_its_quality_and_trust_off_the_upload():
    from cotrain.privacy import RandomizedResponse

    rng = np.random.default_rng(0)
    X, y = _two_blobs(rng, 60)
    U, _ = _two_blobs(rng, 40)
    wire = WireFormat(2, 40)
    client = Client(0, DecisionTreeClassifier(random_state=0), X, y, np.array([0, 1]),
                    X_public=U, wire=wire, privacy=RandomizedResponse(epsilon=2.0),
                    trust=PseudoLabelTrust(random_state=0))  # fmt: skip
    client.run_round(1, None, privacy_seed=1)
    broadcast = wire.encode_broadcast(np.ones(40, dtype=int))
    result = client.run_round(2, Downlink(broadcast, ref_round=1), privacy_seed=2)
    assert result.error is None and result.trust is not None and result.quality is not None
    assert result.upload().quality is None and result.upload().trust is None  # measured, kept


# ----------------------------------------------------------------- deployment
def test_flower_sites_choose_the_same_trust_as_in_process_clients(tmp_path):
    pytest.importorskip("flwr")
    from flwr.supercore.task_identity import TaskIdentity

    from cotrain.flower.server_app import FlowerCoTraining
    from cotrain.flower.site import load_site, write_sites
    from tests.test_flower_strategy import InMemoryGrid, mixed

    TaskIdentity.run_id, TaskIdentity.node_id, TaskIdentity.task_id = 1, 0, 1
    try:
        rng = np.random.default_rng(2)
        X, y = _two_blobs(rng, 90)
        U, _ = _two_blobs(rng, 80)
        Xs, ys = np.array_split(X, 3), np.array_split(y, 3)
        ys[0] = 1 - ys[0]  # a client with flipped labels pulls the consensus around
        paths = write_sites(tmp_path / "sites", Xs, ys, U, mixed(), trust="auto")
        assert load_site(paths[0]).trust == "auto"
        np.save(tmp_path / "public.npy", U)
        flower = FlowerCoTraining(tmp_path / "public.npy", rounds=3, random_state=1)
        flower.run(InMemoryGrid(paths))
    finally:
        TaskIdentity.run_id = TaskIdentity.node_id = TaskIdentity.task_id = None
    local = FederatedCoTrainer(mixed(), trust="auto", rounds=3, random_state=1)
    local.fit(Xs, ys, X_public=U)
    np.testing.assert_array_equal(flower.pseudo_label_codes_, local.pseudo_label_codes_)
    assert [r.trust for r in flower.history_] == [r.trust for r in local.history_]
    assert set(flower.history_[-1].trust) == {0, 1, 2}


def test_site_config_trust_is_checked(tmp_path):
    pytest.importorskip("tomli_w", reason="a Flower site config is written with cotrain[flower]")
    from cotrain.flower.site import load_site, write_site

    path = write_site(tmp_path, np.zeros((2, 1)), np.array([0, 1]), np.ones((3, 1)),
                      DecisionTreeClassifier(), trust=0.5)  # fmt: skip
    assert load_site(path).trust == 0.5
    path.write_text(path.read_text().replace("trust = 0.5", 'trust = "often"'))
    with pytest.raises(ValueError, match='trust must be "auto", "none" or a number'):
        load_site(path)


@pytest.mark.slow
@pytest.mark.parametrize("trust", ["auto", PseudoLabelTrust(weights=(0.0, 0.5, 1.0))])
def test_a_resumed_run_with_trust_equals_an_uninterrupted_one(cancer, tmp_path, trust):
    def trainer(rounds, **params):
        est = [DecisionTreeClassifier(), LogisticRegression(max_iter=500), KNeighborsClassifier()]
        return FederatedCoTrainer(est, trust=trust, rounds=rounds, random_state=0, **params)

    def fit(model, **kwargs):
        return model.fit(cancer["X"], cancer["y"], X_public=cancer["X_public"], **kwargs)

    full = fit(trainer(4))
    fit(trainer(2, checkpoint_dir=tmp_path))
    resumed = fit(trainer(4, checkpoint_dir=tmp_path), resume=True)
    np.testing.assert_array_equal(resumed.pseudo_label_codes_, full.pseudo_label_codes_)
    assert [r.trust for r in resumed.history_] == [r.trust for r in full.history_]
    with pytest.raises(ValueError, match="trust"):
        FederatedCoTrainer(
            [DecisionTreeClassifier()] * 3, trust=0.5, rounds=4, random_state=0,
            checkpoint_dir=tmp_path,
        ).fit(cancer["X"], cancer["y"], X_public=cancer["X_public"], resume=True)  # fmt: skip


def test_auto_gives_torch_and_gpt2_learners_full_weight():
    """No extra training for them (the held-out check is an explicit option); DP-SGD
    trains at weight 1 too."""
    pytest.importorskip("torch")
    from cotrain.privacy import DPSGD
    from learners import MLP, GPT2Classifier, TorchClassifier

    assert get_trust("auto", 0, TorchClassifier(MLP)).weight == 1.0
    assert GPT2Classifier.cross_validated_trust is False
    assert isinstance(get_trust("auto", 0, DecisionTreeClassifier()), CrossFitTrust)
    private = client_trust("auto", DPSGD(sampling_rate=0.1, steps=20), 0, TorchClassifier(MLP))
    assert isinstance(private, FixedTrust) and private.weight == 1.0


def test_private_only_fold_scores_are_computed_once_per_client():
    rng = np.random.default_rng(0)
    X, y = _two_blobs(rng, 60)
    U, truth = _two_blobs(rng, 200)
    tree, classes = DecisionTreeClassifier(random_state=0), np.array([0, 1])
    trust, cache = PseudoLabelTrust(random_state=0), {}
    first = trust.choose(tree, X, y, U, truth, classes, cache=cache)
    assert list(cache) == ["private-only"] and cache["private-only"].mean() == first.scores[0.0]
    assert first == trust.choose(tree, X, y, U, truth, classes)  # the same without a cache
    cache["private-only"] = np.full(60, 0.5)  # reused, not refitted
    assert trust.choose(tree, X, y, U, truth, classes, cache=cache).scores[0.0] == 0.5
    # a pool class the client lacks stays in every fit: nothing to reuse
    three = trust.choose(tree, X, y, U, np.where(truth == 1, 2, 0), CLASSES, cache=cache)
    assert three.scores[0.0] != 0.5


def test_a_site_reporting_an_impossible_quality_is_that_sites_failure(tmp_path):
    pytest.importorskip("flwr")
    from flwr.supercore.task_identity import TaskIdentity

    from cotrain.flower.server_app import FlowerCoTraining
    from cotrain.flower.site import write_sites
    from cotrain.wire import envelope
    from tests.test_flower_strategy import InMemoryGrid, _tamper, mixed

    def inflate(reply):
        reply.content.metric_records[envelope.STATS]["quality"] = 1e9

    TaskIdentity.run_id, TaskIdentity.node_id, TaskIdentity.task_id = 1, 0, 1
    try:
        rng = np.random.default_rng(2)
        X, y = _two_blobs(rng, 90)
        U, _ = _two_blobs(rng, 80)
        paths = write_sites(tmp_path / "s", np.array_split(X, 3), np.array_split(y, 3), U, mixed())
        np.save(tmp_path / "public.npy", U)
        grid = InMemoryGrid(paths)
        _tamper(grid, list(grid.sites)[1], inflate)
        run = FlowerCoTraining(tmp_path / "public.npy", rounds=2, consensus="quality")
        run.run(grid)
    finally:
        TaskIdentity.run_id = TaskIdentity.node_id = TaskIdentity.task_id = None
    assert "quality must be in [0, 1]" in run.history_[-1].failed[1]
    assert run.history_[-1].clients == (0, 1, 2) and run.n_rounds_ == 2
