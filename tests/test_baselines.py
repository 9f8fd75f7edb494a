"""Baselines: FedAvg, DP-FedAvg, PATE, distributed distillation, local-only, centralised."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.datasets import load_digits
from sklearn.linear_model import LogisticRegression
from sklearn.naive_bayes import GaussianNB
from sklearn.tree import DecisionTreeClassifier

from consensus import majority_vote
from cotrain import FederatedCoTrainer
from cotrain.baselines import (
    PATE,
    Centralized,
    DistributedDistillation,
    DPFedAvg,
    FedAvg,
    LocalOnly,
    average_weights,
    gnmax,
)
from cotrain.baselines.aggregation import dp_aggregate
from cotrain.baselines.fedavg import _epsilons
from cotrain.wire.messages import HardLabels, SoftLabels


def hard_bytes(n: int, n_classes: int) -> int:
    return len(HardLabels(np.zeros(n, dtype=np.int64), n_classes).to_bytes())


@pytest.fixture(scope="module")
def digits():
    """Digits scaled to [0, 1]: 4 clients of 150 rows, 397 test rows."""
    X, y = load_digits(return_X_y=True)
    X = (X / 16.0).astype(np.float32)
    rng = np.random.default_rng(0)
    order = rng.permutation(len(y))
    X, y = X[order], y[order]
    parts = np.array_split(np.arange(600), 4)
    return {
        "X": [X[p] for p in parts],
        "y": [y[p] for p in parts],
        "X_public": X[600:1400],
        "X_test": X[1400:],
        "y_test": y[1400:],
    }


def torch_learner(**params):
    pytest.importorskip("torch")
    from learners import TorchClassifier
    from learners.modules import MLP

    params.setdefault("random_state", 0)
    params.setdefault("lr", 1e-2)
    params.setdefault("classes", list(range(10)))
    return TorchClassifier(MLP, module_params={"hidden": (16,)}, **params)


class NumpySoftmax(ClassifierMixin, BaseEstimator):
    """Full-batch gradient-descent softmax regression with the torch learners' weight API."""

    def __init__(self, classes=None, max_epochs=1, epochs_per_fit=1, lr=0.5, warm_start=True):
        self.classes = classes
        self.max_epochs = max_epochs
        self.epochs_per_fit = epochs_per_fit
        self.lr = lr
        self.warm_start = warm_start

    def initialize(self, X, y=None):
        self.classes_ = np.asarray(self.classes)
        self.W_ = np.zeros((np.shape(X)[1], len(self.classes_)), dtype=np.float32)
        return self

    def get_weights(self, trainable_only=True):
        return {"W": self.W_.copy()}

    def set_weights(self, weights):
        self.W_ = np.asarray(weights["W"], dtype=np.float32).copy()
        return self

    def n_parameters(self, trainable_only=True):
        return self.W_.size

    def fit(self, X, y, sample_weight=None):
        epochs = self.epochs_per_fit if hasattr(self, "W_") else self.max_epochs
        if not hasattr(self, "W_"):
            self.initialize(X)
        onehot = (np.asarray(y)[:, None] == self.classes_[None, :]).astype(np.float32)
        for _ in range(epochs):
            grad = X.T @ (self.predict_proba(X) - onehot) / len(X)
            self.W_ = (self.W_ - self.lr * grad).astype(np.float32)
        return self

    def predict_proba(self, X):
        z = np.asarray(X, dtype=np.float32) @ self.W_
        e = np.exp(z - z.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)

    def predict(self, X):
        return self.classes_[self.predict_proba(X).argmax(axis=1)]


def test_fedavg_needs_no_torch_and_matches_one_client_for_identical_clients(digits):
    X, y = digits["X"][0], digits["y"][0]
    proto = NumpySoftmax(classes=list(range(10)))
    fedavg = FedAvg(proto, rounds=4, local_epochs=3).fit([X, X], [y, y])
    single = NumpySoftmax(classes=list(range(10)), max_epochs=3, epochs_per_fit=3)
    single.initialize(X)
    for _ in range(4):
        single.fit(X, y)
    np.testing.assert_allclose(fedavg.global_model_.get_weights()["W"], single.W_, rtol=1e-6)
    assert fedavg.history_[0].bytes_up == 2 * 4 * 64 * 10
    # two clients with 1 and 3 examples, one round: the global model is their 1:3 mean
    parts = ([X[:1], X[1:4]], [y[:1], y[1:4]])
    one = FedAvg(proto, rounds=1, local_epochs=1).fit(*parts)
    a, b = (
        NumpySoftmax(classes=list(range(10))).initialize(X).fit(Xi, yi).W_
        for Xi, yi in zip(*parts, strict=True)
    )
    np.testing.assert_allclose(one.global_model_.W_, (a + 3 * b) / 4, rtol=1e-6, atol=1e-7)
    assert one.history_[0].bytes_down == one.history_[0].bytes_up == 2 * 4 * 640


# ------------------------------------------------------------------ averaging (numpy only)
def test_average_weights_hand_checked():
    a = {"w": np.array([[1.0, 2.0]], dtype=np.float32), "b": np.array([0.0], dtype=np.float32)}
    b = {"w": np.array([[5.0, -2.0]], dtype=np.float32), "b": np.array([4.0], dtype=np.float32)}
    out = average_weights([a, b], counts=[1, 3])  # (1·a + 3·b) / 4
    np.testing.assert_array_equal(out["w"], [[4.0, -1.0]])
    np.testing.assert_array_equal(out["b"], [3.0])
    assert out["w"].dtype == np.float32
    np.testing.assert_array_equal(average_weights([a, b])["w"], [[3.0, 0.0]])
    with pytest.raises(ValueError, match="parameters"):
        average_weights([a, {"w": a["w"]}])
    with pytest.raises(ValueError, match="shape"):
        average_weights([a, {"w": np.zeros((2, 2)), "b": a["b"]}])
    with pytest.raises(ValueError, match="counts"):
        average_weights([a, b], counts=[0, 0])


def test_dp_aggregate_clips_every_update():
    rng = np.random.default_rng(1)
    w0 = {"a": rng.normal(size=(3, 4)), "b": rng.normal(size=5)}
    locals_ = [{k: v + rng.normal(scale=10, size=v.shape) for k, v in w0.items()} for _ in range(4)]
    new, norms = dp_aggregate(w0, locals_, clip_norm=0.5, noise_multiplier=0.0, rng=rng)
    assert (norms > 0.5).all()
    update = math.sqrt(sum(float(np.sum((new[k] - w0[k]) ** 2)) for k in w0))
    assert update <= 0.5 + 1e-5
    # small updates pass unchanged: plain mean of the updates
    small = [{k: v + 1e-3 * (i + 1) for k, v in w0.items()} for i, _ in enumerate(range(2))]
    new, _ = dp_aggregate(w0, small, clip_norm=10.0, noise_multiplier=0.0, rng=rng)
    np.testing.assert_allclose(new["a"], w0["a"] + 1.5e-3, rtol=1e-5)
    # the noise has standard deviation σ·C on the sum, divided by k clients
    zeros = {"a": np.zeros(200_000)}
    noisy, _ = dp_aggregate(zeros, [zeros, zeros], 2.0, 3.0, np.random.default_rng(0))
    assert np.std(noisy["a"]) == pytest.approx(3.0 * 2.0 / 2, rel=0.02)


@pytest.mark.slow
def test_epsilon_matches_dp_accounting_and_falls_with_noise():
    dp_accounting = pytest.importorskip("dp_accounting")
    for q in (1.0, 0.5):
        eps = {nm: _epsilons(nm, q, rounds=5, delta=1e-5) for nm in (0.8, 1.5, 4.0)}
        assert eps[0.8][-1] > eps[1.5][-1] > eps[4.0][-1]
        assert all(np.diff(eps[1.5]) > 0)  # composition: ε grows with rounds
        event = dp_accounting.GaussianDpEvent(1.5)
        if q < 1:
            event = dp_accounting.PoissonSampledDpEvent(q, event)
        accountant = dp_accounting.rdp.RdpAccountant()
        accountant.compose(event, 5)
        assert eps[1.5][-1] == pytest.approx(accountant.get_epsilon(1e-5))
    assert _epsilons(0.0, 1.0, 3, 1e-5) == [math.inf] * 3


# ---------------------------------------------------------------------- FedAvg (torch)
@pytest.mark.slow
def test_fedavg_of_identical_clients_equals_one_client(digits):
    X, y = digits["X"][0], digits["y"][0]
    fedavg = FedAvg(torch_learner(), rounds=3, local_epochs=2).fit([X, X, X], [y, y, y])
    single = torch_learner(max_epochs=2, epochs_per_fit=2).initialize(X, y)
    for _ in range(3):
        single.fit(X, y)
    expected = single.get_weights()
    got = fedavg.global_model_.get_weights()
    assert got.keys() == expected.keys()
    for name in expected:
        np.testing.assert_allclose(got[name], expected[name], rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(
        fedavg.predict(digits["X_test"]), single.predict(digits["X_test"])
    )


def test_fedavg_bytes_records_and_weighted_mean(digits):
    sizes = [10, 30, 60, 100]
    X = [Xi[:n] for Xi, n in zip(digits["X"], sizes, strict=True)]
    y = [yi[:n] for yi, n in zip(digits["y"], sizes, strict=True)]
    fedavg = FedAvg(torch_learner(), rounds=3, participation=0.5, random_state=0)
    fedavg.fit(X, y, eval_set=(digits["X_test"], digits["y_test"]))
    n_params = fedavg.global_model_.n_parameters()
    assert n_params == 64 * 16 + 16 + 16 * 10 + 10
    assert len(fedavg.history_) == fedavg.n_rounds_ == 3
    for record in fedavg.history_:
        assert len(record.clients) == 2
        assert record.bytes_up == record.bytes_down == 2 * 4 * n_params
        assert record.mean_accuracy == record.consensus_accuracy
        assert record.std_accuracy == 0.0
        assert set(record.client_accuracy) >= set(record.clients)
    # the last round's global weights are the sample-weighted mean of its clients' weights
    last = fedavg.history_[-1].clients
    expected = average_weights(
        [fedavg.clients_[i].get_weights() for i in last], [sizes[i] for i in last]
    )
    for name, value in fedavg.global_model_.get_weights().items():
        np.testing.assert_allclose(value, expected[name], rtol=1e-6, atol=1e-7)
    # same seed, same run
    again = FedAvg(torch_learner(), rounds=3, participation=0.5, random_state=0).fit(X, y)
    assert [r.clients for r in again.history_] == [r.clients for r in fedavg.history_]
    np.testing.assert_array_equal(again.predict(digits["X_test"]), fedavg.predict(digits["X_test"]))


def test_fedavg_learns_and_predicts_in_caller_labels(digits):
    names = np.array(list("abcdefghij"))
    learner = torch_learner(classes=list(names))
    fedavg = FedAvg(learner, rounds=5, local_epochs=5, random_state=0)
    fedavg.fit(
        digits["X"],
        [names[yi] for yi in digits["y"]],
        eval_set=(digits["X_test"], names[digits["y_test"]]),
    )
    assert fedavg.history_[-1].mean_accuracy > 0.85
    assert fedavg.score(digits["X_test"], names[digits["y_test"]]) > 0.85
    assert fedavg.predict_proba(digits["X_test"]).shape == (len(digits["y_test"]), 10)
    frame = fedavg.history_.to_frame()
    assert list(frame["round"]) == [1, 2, 3, 4, 5]


def test_dpfedavg_clips_and_accounts(digits):
    dp_accounting = pytest.importorskip("dp_accounting")
    init = torch_learner().initialize(digits["X"][0]).get_weights()
    dp = DPFedAvg(torch_learner(), rounds=1, clip_norm=1e-3, noise_multiplier=0.0, random_state=0)
    dp.fit(digits["X"], digits["y"])
    step = math.sqrt(
        sum(float(np.sum((w - init[k]) ** 2)) for k, w in dp.global_model_.get_weights().items())
    )
    assert 0 < step <= 1e-3 * (1 + 1e-4)
    assert dp.epsilon_ == [math.inf]

    eps = {}
    for nm in (1.0, 3.0):
        model = DPFedAvg(
            torch_learner(), rounds=2, participation=0.5, noise_multiplier=nm, random_state=0
        ).fit(digits["X"], digits["y"])
        eps[nm] = model.epsilon_
        report = model.privacy_report()
        assert report["epsilon"] == model.epsilon_[-1] and report["sampling_rate"] == 0.5
        assert model.history_[0].bytes_up == 2 * 4 * model.global_model_.n_parameters()
        # user-level DP with the noise added centrally: all of a client's data, against
        # whoever sees the global model (the server sees clean updates)
        record = model.history_[-1]
        assert (record.epsilon_unit, record.epsilon_adversary) == (
            "client",
            "global model observers",
        )
    assert eps[1.0][-1] > eps[3.0][-1] and eps[1.0][1] > eps[1.0][0]
    accountant = dp_accounting.rdp.RdpAccountant()
    accountant.compose(
        dp_accounting.PoissonSampledDpEvent(0.5, dp_accounting.GaussianDpEvent(3.0)), 2
    )
    assert eps[3.0][-1] == pytest.approx(accountant.get_epsilon(1e-5))


def test_dpfedavg_with_huge_noise_destroys_the_model(digits):
    pytest.importorskip("dp_accounting")
    params = {"rounds": 5, "local_epochs": 5, "random_state": 0}
    fit = {"eval_set": (digits["X_test"], digits["y_test"])}
    clean = DPFedAvg(torch_learner(), clip_norm=100.0, noise_multiplier=0.0, **params)
    noisy = DPFedAvg(torch_learner(), clip_norm=1.0, noise_multiplier=1e4, **params)
    clean.fit(digits["X"], digits["y"], **fit)
    noisy.fit(digits["X"], digits["y"], **fit)
    assert clean.history_[-1].mean_accuracy > 0.85
    assert noisy.history_[-1].mean_accuracy < 0.35
    assert noisy.epsilon_[-1] < 1e-2


def test_fedavg_rejects_bad_input(digits):
    X, y = digits["X"][:2], digits["y"][:2]
    with pytest.raises(TypeError, match="initialize"):
        FedAvg(DecisionTreeClassifier()).fit(X, y)
    learner = NumpySoftmax(classes=list(range(10)))
    with pytest.raises(ValueError, match="local_epochs"):
        FedAvg(learner, local_epochs=0).fit(X, y)
    with pytest.raises(ValueError, match="participation"):
        FedAvg(learner, participation=0).fit(X, y)
    with pytest.raises(ValueError, match="clip_norm"):
        DPFedAvg(learner, clip_norm=0.0).fit(X, y)
    with pytest.raises(ValueError, match="delta"):
        DPFedAvg(learner, delta=1.0).fit(X, y)
    with pytest.raises(ValueError, match="client 1"):
        FedAvg(learner).fit([X[0], X[1][:, :5]], y)
    with pytest.raises(TypeError, match="list"):
        FedAvg(learner).fit(X[0], y[0])


# ------------------------------------------------------------------------------ PATE
def test_pate_without_noise_is_the_majority_vote(cancer):
    teachers = [DecisionTreeClassifier(), GaussianNB(), LogisticRegression()]
    pate = PATE(teachers, LogisticRegression(), noise_sigma=0.0, random_state=0)
    pate.fit(
        cancer["X"],
        cancer["y"],
        X_public=cancer["X_public"],
        eval_set=(cancer["X_test"], cancer["y_test"]),
        y_public=cancer["y_public"],
    )
    votes = np.stack([t.predict(cancer["X_public"]) for t in pate.teachers_])
    np.testing.assert_array_equal(pate.votes_, votes)
    np.testing.assert_array_equal(pate.pseudo_labels_, majority_vote(votes, 2))
    # the student learnt the pseudo-labels
    assert np.mean(pate.student_.predict(cancer["X_public"]) == pate.pseudo_labels_) > 0.9
    np.testing.assert_array_equal(
        pate.predict(cancer["X_test"]), pate.student_.predict(cancer["X_test"])
    )
    (record,) = pate.history_
    n_public = len(cancer["X_public"])
    assert record.bytes_up == 3 * hard_bytes(n_public, 2) == 3 * (10 + 38)
    assert record.bytes_down == 0 and record.coverage == 1.0
    assert record.consensus_accuracy == pytest.approx(
        pate.score(cancer["X_test"], cancer["y_test"])
    )
    assert record.consensus_accuracy > 0.85 and record.pseudo_label_accuracy > 0.85
    assert len(record.client_accuracy) == 3


def test_pate_noise_is_seeded_and_flips_labels(cancer):
    def run(sigma, seed, reproducible_noise=True):
        return PATE(
            [GaussianNB()] * 3,
            GaussianNB(),
            noise_sigma=sigma,
            random_state=seed,
            reproducible_noise=reproducible_noise,
        ).fit(cancer["X"], cancer["y"], X_public=cancer["X_public"])

    with pytest.warns(UserWarning, match="reproducible_noise=True"):
        a, b = run(5.0, 0), run(5.0, 0)
    np.testing.assert_array_equal(a.pseudo_labels_, b.pseudo_labels_)
    assert a.noise_replayable_
    # by default random_state does not seed the GNMax noise (whoever knows it cannot replay
    # it): at σ = 5 about a third of the labels flip, so two runs differ
    c, d = run(5.0, 0, False), run(5.0, 0, False)
    assert not c.noise_replayable_
    assert np.any(c.pseudo_labels_ != d.pseudo_labels_)
    clean = run(0.0, 0)
    assert np.mean(a.pseudo_labels_ != clean.pseudo_labels_) > 0.2
    np.testing.assert_array_equal(gnmax(np.array([[0.0, 3.0, 3.0]]), 0.0), [1])
    with pytest.raises(ValueError, match="noise_sigma"):
        run(-1.0, 0)


def test_pate_keeps_string_labels(cancer):
    names = np.array(["benign", "malignant"])
    pate = PATE([GaussianNB()] * 3, GaussianNB(), noise_sigma=0.0).fit(
        cancer["X"], [names[yi] for yi in cancer["y"]], X_public=cancer["X_public"]
    )
    assert set(pate.predict(cancer["X_test"])) <= set(names)
    assert set(pate.pseudo_labels_) <= set(names)


# ------------------------------------------------------------- distributed distillation
def test_distributed_distillation_trains_on_the_soft_mean(cancer):
    estimators = [GaussianNB(), LogisticRegression(), GaussianNB()]
    dd = DistributedDistillation(estimators, rounds=2, random_state=0, trust=None)
    assert isinstance(dd, FederatedCoTrainer)
    assert dd.get_params()["consensus"] == "mean" and dd.get_params()["share"] == "soft"
    dd.fit(cancer["X"], cancer["y"], X_public=cancer["X_public"])
    local = LocalOnly(estimators, random_state=0).fit(cancer["X"], cancer["y"])
    for dd_model, local_model in zip(dd.clients_, local.clients_, strict=True):
        assert not np.allclose(
            dd_model.predict_proba(cancer["X_test"]), local_model.predict_proba(cancer["X_test"])
        )
    soft = len(SoftLabels(np.zeros((len(cancer["X_public"]), 2))).to_bytes())
    assert dd.history_[0].bytes_up == dd.history_[1].bytes_up == 3 * soft
    assert dd.history_[0].bytes_down == 0 and dd.history_[1].bytes_down == 3 * soft
    assert dd.pseudo_labels_.shape == (len(cancer["X_public"]), 2)
    with pytest.raises(TypeError, match="consensus"):
        DistributedDistillation(estimators, consensus="majority")


# ---------------------------------------------------------- local-only and centralised
def test_local_only_and_centralised_on_breast_cancer(cancer):
    eval_set = (cancer["X_test"], cancer["y_test"])
    for make in (DecisionTreeClassifier, LogisticRegression):
        local = LocalOnly([make()] * 3, random_state=0).fit(
            cancer["X"], cancer["y"], eval_set=eval_set
        )
        central = Centralized(make(), random_state=0).fit(
            cancer["X"], cancer["y"], eval_set=eval_set
        )
        (lr,), (cr,) = local.history_, central.history_
        assert lr.bytes_up == lr.bytes_down == cr.bytes_up == cr.bytes_down == 0
        assert len(lr.client_accuracy) == 3 and len(local.clients_) == 3
        assert lr.mean_accuracy == pytest.approx(np.mean(list(lr.client_accuracy.values())))
        assert lr.mean_accuracy > 0.8 and cr.mean_accuracy > 0.85
        assert cr.mean_accuracy >= lr.mean_accuracy
        assert lr.consensus_accuracy == pytest.approx(local.score(*eval_set))
        assert cr.mean_accuracy == pytest.approx(central.score(*eval_set))
        assert local.predict_proba(cancer["X_test"]).shape == (len(cancer["y_test"]), 2)
    # the pooled data may also be given as single arrays
    pooled = Centralized(LogisticRegression()).fit(
        np.concatenate(cancer["X"]), np.concatenate(cancer["y"])
    )
    np.testing.assert_array_equal(
        pooled.predict(cancer["X_test"]), central.predict(cancer["X_test"])
    )
    with pytest.raises(ValueError, match="features"):
        central.predict(cancer["X_test"][:, :3])
    with pytest.raises(ValueError, match="estimators has 2"):
        LocalOnly([GaussianNB()] * 2).fit(cancer["X"], cancer["y"])


def test_all_histories_tabulate_together(cancer):
    runs = {
        "fedct": FederatedCoTrainer([GaussianNB()] * 3, rounds=2, random_state=0),
        "dd": DistributedDistillation([GaussianNB()] * 3, rounds=2, random_state=0),
        "pate": PATE([GaussianNB()] * 3, GaussianNB(), noise_sigma=0.0),
    }
    frames = []
    for name, model in runs.items():
        model.fit(
            cancer["X"],
            cancer["y"],
            X_public=cancer["X_public"],
            eval_set=(cancer["X_test"], cancer["y_test"]),
        )
        frames.append(model.history_.to_frame().assign(method=name))
    for name, model in {
        "local": LocalOnly([GaussianNB()] * 3),
        "central": Centralized(GaussianNB()),
    }.items():
        model.fit(cancer["X"], cancer["y"], eval_set=(cancer["X_test"], cancer["y_test"]))
        frames.append(model.history_.to_frame().assign(method=name))
    table = pd.concat(frames, ignore_index=True)
    assert table["mean_accuracy"].notna().all()
    assert set(table["method"]) == {"fedct", "dd", "pate", "local", "central"}


def test_dp_fedavg_records_the_spent_epsilon_every_round():
    pytest.importorskip("torch")
    pytest.importorskip("dp_accounting")
    from cotrain.baselines import DPFedAvg
    from learners import MLP, TorchClassifier

    rng = np.random.default_rng(0)
    X = [rng.normal(size=(20, 4)) for _ in range(3)]
    y = [np.array([0, 1] * 10) for _ in range(3)]
    dp = DPFedAvg(
        TorchClassifier(MLP, module_params={"hidden": (4,)}, random_state=0),
        rounds=3,
        noise_multiplier=2.0,
        random_state=0,
    ).fit(X, y)
    assert [r.epsilon for r in dp.history_] == dp.epsilon_
    assert dp.history_.to_frame()["epsilon"].is_monotonic_increasing


def test_pate_reports_the_gnmax_epsilon():
    pytest.importorskip("dp_accounting")
    import dp_accounting
    from sklearn.tree import DecisionTreeClassifier

    from cotrain.baselines import PATE
    from cotrain.privacy import epsilon_spent

    rng = np.random.default_rng(0)
    X = [rng.normal(size=(20, 3)) for _ in range(3)]
    y = [np.array([0, 1] * 10) for _ in range(3)]
    U = rng.normal(size=(50, 3))
    pate = PATE(
        [DecisionTreeClassifier()] * 3, DecisionTreeClassifier(), noise_sigma=20.0, random_state=0
    ).fit(X, y, X_public=U)
    expected = epsilon_spent([dp_accounting.GaussianDpEvent(20.0 / np.sqrt(2 * 50))], 1e-5)
    assert pate.epsilon_ == pytest.approx(expected)
    assert pate.history_[0].epsilon == pate.epsilon_
    assert pate.history_[0].epsilon_adversary == "broadcast observers"  # not the server
    exact = PATE([DecisionTreeClassifier()] * 3, DecisionTreeClassifier(), noise_sigma=0.0)
    assert exact.fit(X, y, X_public=U).epsilon_ is None
