"""Dual distillation (consensus.DualDistillation, thesis ch. 5.2.4): the server distils a
model on the public pool each round and broadcasts its (quantised) soft labels."""

from __future__ import annotations

import math
import pickle

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.datasets import load_breast_cancer
from sklearn.linear_model import LogisticRegression
from sklearn.neighbors import KNeighborsClassifier
from sklearn.tree import DecisionTreeClassifier

from consensus import DualDistillation, QualifiedMajority, majority_vote, soft_mean
from consensus.dual import soft_targets_of
from cotrain import FederatedCoTrainer
from cotrain.federation.privacy_setup import bind_public

HEADER = 10  # bytes of a SoftLabels / QuantizedSoftLabels header (cotrain.wire.messages)


@pytest.fixture(scope="module")
def cancer():
    X, y = load_breast_cancer(return_X_y=True)
    X = (X - X.mean(axis=0)) / X.std(axis=0)
    rng = np.random.default_rng(0)
    order = rng.permutation(len(y))
    X, y = X[order], y[order]
    test, public, train = slice(0, 150), slice(150, 350), slice(350, None)
    parts = np.array_split(np.arange(len(y[train])), 4)
    return {
        "X": [X[train][p] for p in parts],
        "y": [y[train][p] for p in parts],
        "X_public": X[public],
        "X_test": X[test],
        "y_test": y[test],
    }


def server_round(rule, labels, n_classes):
    """What CoTrainingServer.finish_round does: ask for weights, then form the consensus."""
    ids = np.arange(np.shape(labels)[0])
    weights = rule.weights_for(ids, np.shape(labels)[1])
    return rule(labels, n_classes=n_classes, weights=weights)


def random_probs(rng, m, n, c):
    p = rng.random((m, n, c)) ** 3
    return p / p.sum(axis=-1, keepdims=True)


def trainer(rounds=3, **kw):
    params = {
        "estimators": [DecisionTreeClassifier(max_depth=3, random_state=i) for i in range(4)],
        "consensus": DualDistillation(LogisticRegression(max_iter=500)),
        "share": "soft",
        "rounds": rounds,
        "random_state": 0,
    }
    params.update(kw)
    return FederatedCoTrainer(**params)


def fit(t, data, **kw):
    return t.fit(
        data["X"], data["y"], X_public=data["X_public"], eval_set=(data["X_test"], data["y_test"]),
        **kw,
    )  # fmt: skip


# ---------------------------------------------------------------------- the rule itself


def test_server_model_learns_the_base_consensus_and_its_predictions_are_returned():
    rng = np.random.default_rng(1)
    U = rng.normal(size=(40, 3))
    probs = random_probs(rng, 3, 40, 4)
    rule = DualDistillation(LogisticRegression(max_iter=1000), base="mean")
    bind_public(rule, U)
    out = server_round(rule, probs, 4)
    np.testing.assert_allclose(rule.base_consensus_, soft_mean(probs, 4))
    # weighted rows: the server model saw every class with mass >= 1e-3, weighted by it
    assert rule.n_fits_ == 1 and isinstance(rule.server_model_, LogisticRegression)
    np.testing.assert_allclose(out, rule.server_model_.predict_proba(U))
    assert not np.allclose(out, rule.base_consensus_)  # the server model's, not the mean
    np.testing.assert_allclose(out.sum(axis=1), 1.0)
    # the template is never fitted
    assert not hasattr(rule.server_model, "coef_")


def test_weighted_fit_equals_an_explicit_row_expansion():
    rng = np.random.default_rng(2)
    U = rng.normal(size=(30, 2))
    probs = random_probs(rng, 2, 30, 3)
    rule = DualDistillation(LogisticRegression(max_iter=1000))
    rule.bind_public(U)
    out = server_round(rule, probs, 3)
    mean = soft_mean(probs, 3)
    keep = mean >= 1e-3
    keep[np.arange(30), mean.argmax(axis=1)] = True
    rows, cols = np.nonzero(keep)
    w = mean[rows, cols] / np.where(keep, mean, 0).sum(axis=1)[rows]
    ref = LogisticRegression(max_iter=1000).fit(U[rows], cols, sample_weight=w)
    np.testing.assert_allclose(out, ref.predict_proba(U), atol=1e-6)


def test_hard_fit_uses_the_argmax_and_missing_classes_get_zero_probability():
    U = np.arange(6.0)[:, None]
    votes = np.array([[0, 0, 0, 2, 2, 2], [0, 0, 2, 2, 2, 2], [0, -1, 0, 2, 2, 2]])
    rule = DualDistillation(DecisionTreeClassifier(random_state=0), base="majority")
    rule.bind_public(U)
    out = server_round(rule, votes, 4)
    assert out.shape == (6, 4)
    np.testing.assert_array_equal(out.argmax(axis=1), [0, 0, 0, 2, 2, 2])
    np.testing.assert_array_equal(out[:, [1, 3]], 0.0)


def test_rows_where_the_base_abstains_are_left_out_of_the_fit_but_labelled():
    U = np.array([[0.0], [1.0], [2.0], [3.0]])
    votes = np.array([[0, 0, 1, 1], [0, 1, 1, 0]])  # ties on rows 1 and 3 at quorum 1.0
    rule = DualDistillation(KNeighborsClassifier(n_neighbors=1), base=QualifiedMajority(quorum=1.0))
    rule.bind_public(U)
    out = server_round(rule, votes, 2)
    assert np.isnan(rule.base_consensus_[[1, 3]]).all()
    assert rule.server_model_.n_samples_fit_ == 2  # rows 0 and 2 only
    np.testing.assert_array_equal(out, [[1, 0], [1, 0], [0, 1], [0, 1]])


def test_identity_server_model_returns_the_base_consensus():
    """A 1-NN on distinct public rows predicts its own training labels: with a hard base,
    dual distillation is the base consensus itself."""
    rng = np.random.default_rng(3)
    U = rng.normal(size=(50, 4))
    votes = rng.integers(0, 3, size=(5, 50))
    rule = DualDistillation(KNeighborsClassifier(n_neighbors=1), base="majority")
    rule.bind_public(U)
    out = server_round(rule, votes, 3)
    np.testing.assert_array_equal(out, soft_targets_of(majority_vote(votes, 3), 3))


def test_a_call_outside_a_server_round_is_the_base_consensus():
    rng = np.random.default_rng(4)
    rule = DualDistillation(LogisticRegression())
    rule.bind_public(rng.normal(size=(20, 2)))
    probs = random_probs(rng, 3, 20, 2)  # e.g. the clients' probabilities on test rows
    np.testing.assert_array_equal(rule(probs, n_classes=2), soft_mean(probs, 2))
    assert not hasattr(rule, "server_model_")
    # the dry run before round 1: weights asked for the pool, a one-example call
    rule.weights_for([0, 1, 2], 20)
    np.testing.assert_array_equal(rule(probs[:, :1], n_classes=2), soft_mean(probs[:, :1], 2))
    assert not hasattr(rule, "server_model_")


def test_a_server_round_without_the_public_pool_is_refused():
    rule = DualDistillation(LogisticRegression())
    with pytest.raises(ValueError, match="bind_public"):
        server_round(rule, np.full((2, 5, 2), 0.5), 2)


def test_a_server_model_that_keeps_training_continues_across_rounds():
    rng = np.random.default_rng(5)
    U = rng.normal(size=(30, 2))
    rule = DualDistillation(LogisticRegression(warm_start=True, max_iter=1000))
    rule.bind_public(U)
    server_round(rule, random_probs(rng, 2, 30, 2), 2)
    first = rule.server_model_
    server_round(rule, random_probs(rng, 2, 30, 2), 2)
    assert rule.server_model_ is first and rule.n_fits_ == 2
    with pytest.raises(NotImplementedError, match="warm_start"):
        rule.state_dict()
    fresh = DualDistillation(LogisticRegression(max_iter=1000))
    fresh.bind_public(U)
    server_round(fresh, random_probs(rng, 2, 30, 2), 2)
    kept = fresh.server_model_
    server_round(fresh, random_probs(rng, 2, 30, 2), 2)
    assert fresh.server_model_ is not kept  # refitted afresh


def test_soft_targets_reach_a_learner_that_takes_them():
    seen = {}

    class SoftLearner(LogisticRegression):
        accepts_soft_targets = True

        def fit(self, X, y, sample_weight=None):
            seen["y"] = np.asarray(y)
            return super().fit(X, np.asarray(y).argmax(axis=1))

    rng = np.random.default_rng(6)
    probs = random_probs(rng, 2, 12, 3)
    rule = DualDistillation(SoftLearner())
    rule.bind_public(rng.normal(size=(12, 2)))
    server_round(rule, probs, 3)
    np.testing.assert_allclose(seen["y"], soft_mean(probs, 3))


def test_state_pickle_and_clone():
    rng = np.random.default_rng(7)
    U = rng.normal(size=(25, 2))
    rule = DualDistillation(LogisticRegression(max_iter=1000))
    rule.bind_public(U)
    out = server_round(rule, random_probs(rng, 3, 25, 2), 2)
    assert rule.state_dict() == {"base": {}, "n_fits": 1}
    copy = pickle.loads(pickle.dumps(rule))
    assert copy.n_public is None  # the public pool is the federation's, bound again
    np.testing.assert_allclose(copy.server_proba(U, 2), out)
    assert copy.n_fits_ == 1
    fresh = clone(rule, safe=False)
    assert not hasattr(fresh, "server_model_") and fresh.n_public is None
    restored = DualDistillation(LogisticRegression())
    restored.load_state_dict(rule.state_dict())
    assert restored.n_fits_ == 1
    with pytest.raises(ValueError, match="keys"):
        restored.load_state_dict({"reputation": []})


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"server_model": None}, TypeError, "server_model"),
        ({"server_model": "logistic"}, TypeError, "server_model"),
        ({"server_model": LogisticRegression(), "targets": "bogus"}, ValueError, "targets"),
        ({"server_model": LogisticRegression(), "targets": "soft"}, ValueError, "targets='soft'"),
        (
            {"server_model": KNeighborsClassifier(), "targets": "weighted"},
            ValueError,
            "sample_weight",
        ),
        ({"server_model": LogisticRegression(), "base": "nope"}, ValueError, "unknown consensus"),
        (
            {"server_model": LogisticRegression(), "base": DualDistillation(LogisticRegression())},
            ValueError,
            "base",
        ),
    ],
)
def test_bad_parameters_are_refused_naming_the_argument(kwargs, error, match):
    rule = DualDistillation(**kwargs)
    with pytest.raises(error, match=match):
        rule.bind_public(np.zeros((3, 1)))


def test_bad_parameters_are_refused_before_any_client_trains(cancer):
    bad = DualDistillation(LogisticRegression(), targets="bogus")
    with pytest.raises(ValueError, match="targets"):
        fit(trainer(consensus=bad, estimators=[_Exploding()] * 4), cancer)


class _Exploding(DecisionTreeClassifier):
    def fit(self, X, y, sample_weight=None):  # pragma: no cover - must not run
        raise AssertionError("a client trained before the consensus was checked")


# ---------------------------------------------------------------------- in a federation


def test_end_to_end_the_broadcast_is_the_server_models_labels(cancer):
    t = fit(trainer(rounds=3), cancer)
    rule = t.consensus_
    assert rule.n_fits_ == 3
    expected = rule.server_proba(cancer["X_public"], 2)
    np.testing.assert_allclose(t.pseudo_labels_, expected.astype(np.float32), rtol=1e-6)
    assert t.history_[-1].mean_accuracy > 0.88  # breast cancer, depth-3 trees: ~0.93
    assert rule.server_model_.score(cancer["X_test"], cancer["y_test"]) > 0.9
    assert t.predict(cancer["X_test"]).shape == (150,)  # the clients' ensemble


@pytest.mark.parametrize("bits", [None, 8, 2, 1])
def test_bytes_down_are_exact(cancer, bits):
    n_public, n_classes = len(cancer["X_public"]), 2
    t = fit(trainer(rounds=3, soft_bits=bits, participation=0.5), cancer)
    body = n_public * n_classes * 4 if bits is None else math.ceil(n_public * n_classes * bits / 8)
    per_client = HEADER + body  # 810 float32, 410 at 8 bits, 110 at 2 bits, 60 at 1 bit
    assert [r.bytes_down for r in t.history_] == [
        0 if r.round == 1 else len(r.clients) * per_client for r in t.history_
    ]
    assert all(len(r.clients) == 2 for r in t.history_)
    if bits is not None:  # what the clients receive is the server model's labels, quantised
        levels = 2**bits - 1
        received = np.asarray(t.pseudo_labels_) * levels
        np.testing.assert_allclose(received, np.round(received), atol=1e-9)
        assert (received.argmax(axis=1) == t.consensus_.base_consensus_.argmax(axis=1)).mean() > 0.9


def test_with_a_1nn_server_at_one_bit_the_run_is_plain_distributed_distillation(cancer):
    """1-bit labels are one-hot; a 1-NN fitted to the mean's argmax gives it back, so the
    federation runs exactly as with consensus='mean'."""
    dual = DualDistillation(KNeighborsClassifier(n_neighbors=1))
    a = fit(trainer(consensus=dual, soft_bits=1), cancer)
    b = fit(trainer(consensus="mean", soft_bits=1), cancer)
    np.testing.assert_array_equal(a.pseudo_labels_, b.pseudo_labels_)
    assert [r.mean_accuracy for r in a.history_] == [r.mean_accuracy for r in b.history_]
    assert [r.bytes_down for r in a.history_] == [r.bytes_down for r in b.history_]


@pytest.mark.slow
def test_checkpoint_resume_gives_the_uninterrupted_run(cancer, tmp_path):
    full = fit(trainer(rounds=4), cancer)
    fit(trainer(rounds=2, checkpoint_dir=tmp_path), cancer)
    resumed = fit(trainer(rounds=4, checkpoint_dir=tmp_path), cancer, resume=True)
    np.testing.assert_array_equal(resumed.pseudo_labels_, full.pseudo_labels_)
    assert resumed.consensus_.n_fits_ == 4
    assert [r.mean_accuracy for r in resumed.history_] == [r.mean_accuracy for r in full.history_]


def test_a_saved_federation_keeps_the_server_model_but_not_the_public_pool(cancer, tmp_path):
    t = fit(trainer(rounds=2), cancer)
    t.save(tmp_path / "fed")
    loaded = FederatedCoTrainer.load(tmp_path / "fed")
    rule = loaded.consensus_
    assert isinstance(rule, DualDistillation) and rule.n_fits_ == 2
    assert rule.n_public is None  # drop_data: the public pool is not saved inside the rule
    X = cancer["X_test"]
    np.testing.assert_allclose(rule.server_proba(X, 2), t.consensus_.server_proba(X, 2))
    np.testing.assert_allclose(loaded.predict_proba(X), t.predict_proba(X))


def test_a_consensus_of_one_class_is_sent_everywhere_without_a_fit():
    rule = DualDistillation(LogisticRegression())  # cannot fit a single class
    rule.bind_public(np.arange(5.0)[:, None])
    probs = np.tile([[0.9, 0.1, 0.0]], (2, 5, 1))  # every row's mass above 1e-3: classes 0, 1
    out = server_round(rule, probs, 3)
    assert rule.n_fits_ == 1  # weighted rows hold classes 0 and 1: a real fit
    hard = DualDistillation(DecisionTreeClassifier(), targets="hard")
    hard.bind_public(np.arange(5.0)[:, None])
    out = server_round(hard, probs, 3)
    np.testing.assert_array_equal(out, np.tile([1.0, 0.0, 0.0], (5, 1)))
    assert not hasattr(hard, "server_model_") and not hasattr(hard, "n_fits_")
