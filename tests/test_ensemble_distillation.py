"""FedDF, FedDS and FedAUX: targets, distillation, bytes, checks."""

from __future__ import annotations

import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from sklearn.base import clone  # noqa: E402
from sklearn.datasets import load_digits  # noqa: E402

from cotrain.baselines import FedAUX, FedDF, FedDS  # noqa: E402
from cotrain.baselines.ensemble_distillation import (  # noqa: E402
    FEDDS_GAMMA,
    distillation_targets,
)
from cotrain.baselines.server_distillation import (  # noqa: E402
    RotationHead,
    distill_module,
    feature_layer,
    rotate_batch,
)
from learners import MLP, SmallCNN, TorchClassifier  # noqa: E402


@pytest.fixture(scope="module")
def digits():
    X, y = load_digits(return_X_y=True)
    X = (X / 16.0).astype(np.float32)
    return [X[:60], X[60:120]], [y[:60], y[60:120]], X[120:200], (X[-100:], y[-100:])


def mlp(seed: int = 0) -> TorchClassifier:
    return TorchClassifier(MLP, module_params={"hidden": (8,)}, n_threads=1, random_state=seed)


def n_params(n_features: int = 64, hidden: int = 8, n_classes: int = 10) -> int:
    return n_features * hidden + hidden + hidden * n_classes + n_classes


# ----------------------------------------------------------------- hand-checked targets
def test_mean_targets_hand_checked():
    probs = np.array([[[0.9, 0.1], [0.2, 0.8]], [[0.5, 0.5], [0.0, 1.0]]])
    np.testing.assert_allclose(distillation_targets(probs), [[0.7, 0.3], [0.1, 0.9]])


def test_entropy_targets_hand_checked():
    # H([1, 0]) = 0, H([.5, .5]) = ln 2: weights ∝ 1 : exp(-k ln 2) = 1 : 2^-k
    probs = np.array([[[1.0, 0.0]], [[0.5, 0.5]]])
    for k in (1.0, 2.0, 5.0):
        w = np.array([1.0, 2.0**-k]) / (1.0 + 2.0**-k)
        expected = w[0] * np.array([1.0, 0.0]) + w[1] * np.array([0.5, 0.5])
        np.testing.assert_allclose(distillation_targets(probs, "entropy", k=k)[0], expected)
    np.testing.assert_allclose(distillation_targets(probs, "entropy", k=0.0), [[0.75, 0.25]])


def test_certainty_targets_hand_checked():
    probs = np.array([[[1.0, 0.0], [1.0, 0.0]], [[0.0, 1.0], [0.0, 1.0]]])
    scores = np.array([[0.9, 0.1], [0.3, 0.3]])  # per client, per example
    # example 0: (0.9·[1,0] + 0.3·[0,1]) / 1.2; example 1: (0.1·[1,0] + 0.3·[0,1]) / 0.4
    np.testing.assert_allclose(
        distillation_targets(probs, "certainty", scores=scores), [[0.75, 0.25], [0.25, 0.75]]
    )


def test_byzantine_client_gets_low_entropy_weight_only_when_less_confident():
    """FedDS's own caveat: entropy weighting resists uncertain liars, not confident ones."""
    honest = np.array([[0.9, 0.05, 0.05]] * 3)  # 3 honest clients say class 0
    uncertain_liar = np.array([[0.2, 0.6, 0.2]])  # wrong class, less confident
    confident_liar = np.array([[0.0, 1.0, 0.0]])  # wrong class, more confident
    k = 5.0
    for liar, liar_wins in ((uncertain_liar, False), (confident_liar, True)):
        probs = np.concatenate([honest, liar])[:, None, :]
        t = distillation_targets(probs, "entropy", k=k)[0]
        plain = distillation_targets(probs, "mean")[0]
        if liar_wins:
            assert t[1] > plain[1]  # more weight than under the plain mean
        else:
            assert t[1] < plain[1]  # less weight than under the plain mean
            assert t.argmax() == 0


def test_bad_rule_and_shapes():
    with pytest.raises(ValueError, match="rule"):
        distillation_targets(np.ones((1, 1, 2)) / 2, "median")
    with pytest.raises(ValueError, match="probs"):
        distillation_targets(np.ones((2, 2)), "mean")
    with pytest.raises(ValueError, match="scores"):
        distillation_targets(np.ones((1, 1, 2)) / 2, "certainty")


# ----------------------------------------------------------------- the distillation step
@pytest.mark.slow
def test_student_matches_ensemble_better_after_distillation(digits):
    Xs, ys, U, _ = digits
    teachers = [
        mlp(i).set_params(max_epochs=30).fit(X, y)
        for i, (X, y) in enumerate(zip(Xs, ys, strict=True))
    ]
    targets = distillation_targets(np.stack([t.predict_proba(U) for t in teachers]))
    student = mlp(9).initialize(U, np.arange(10))

    def kl() -> float:
        p = student.predict_proba(U)
        return float(np.sum(targets * (np.log(targets) - np.log(p))) / len(U))

    before = kl()
    losses = distill_module(student.module_, U, targets, epochs=30, lr=1e-2, seed=0)
    after = kl()
    assert after < 0.5 * before
    assert losses[-1] < losses[0]
    assert np.mean(student.predict(U) == targets.argmax(1)) > 0.7


def test_rotation_batch_and_head():
    x = torch.arange(2 * 16, dtype=torch.float32).reshape(2, 16)
    rot, labels = rotate_batch(x, (1, 4, 4))
    assert rot.shape == (8, 16) and labels.tolist() == [0, 0, 1, 1, 2, 2, 3, 3]
    # rotating four times by 90° is the identity
    img = x[0].reshape(4, 4)
    np.testing.assert_array_equal(torch.rot90(rot[6].reshape(4, 4), 1).numpy(), img.numpy())
    net = SmallCNN(10, image_size=4, width=2)
    head = RotationHead(feature_layer(net).in_features)
    before = [p.detach().clone() for p in head.parameters()]
    distill_module(net, x.numpy(), None, epochs=2, rotation_head=head, image_shape=(1, 4, 4))
    assert any(not torch.equal(a, b) for a, b in zip(before, head.parameters(), strict=True))
    with pytest.raises(ValueError, match="rotation_head"):
        distill_module(net, x.numpy(), None, epochs=1)


# ----------------------------------------------------------------- whole runs, bytes
def test_feddf_bytes_and_records(digits):
    Xs, ys, U, ev = digits
    df = FedDF(mlp(), rounds=2, distill_epochs=1, random_state=0).fit(
        Xs, ys, X_public=U, eval_set=ev
    )
    per_model = 4 * n_params()
    for r in df.history_:
        assert r.bytes_up == 2 * per_model and r.bytes_down == 2 * per_model
        assert 0 <= r.mean_accuracy <= 1 and r.consensus_accuracy == r.mean_accuracy
        assert r.epsilon is None
    assert len(df.distill_loss_) == 2
    assert df.predict(ev[0]).shape == (100,)
    # the distilled student is the server model, not the plain average
    again = FedDF(mlp(), rounds=2, distill_epochs=1, random_state=0).fit(
        Xs, ys, X_public=U, eval_set=ev
    )
    assert [r.mean_accuracy for r in again.history_] == [r.mean_accuracy for r in df.history_]


def test_fedaux_bytes_epsilon_and_report(digits):
    Xs, ys, U, ev = digits
    aux = FedAUX(mlp(), rounds=2, distill_epochs=1, random_state=0, noise_random_state=0)
    aux.fit(Xs, ys, X_public=U, eval_set=ev)
    per_model = 4 * n_params()
    # PCA(16) of the public pool + the constant feature: 17 float64 weights per client
    scorer_bytes = 2 * 17 * 8
    assert aux.history_[0].bytes_up == 2 * per_model + scorer_bytes
    assert aux.history_[1].bytes_up == 2 * per_model
    assert all(r.bytes_down == 2 * per_model for r in aux.history_)
    assert all(r.epsilon == 0.1 for r in aux.history_)
    assert aux.history_[0].epsilon_unit == "record"
    assert aux.history_[0].epsilon_adversary == "server"
    n_neg = round(0.2 * len(U))
    assert aux.scores_.shape == (2, len(U) - n_neg)
    report = aux.privacy_report()
    assert report["n_samples"] == [60 + n_neg, 60 + n_neg]
    assert report["sensitivity"][0] == pytest.approx(2 / (0.1 * (60 + n_neg)))
    assert "not DP" in report["note"]
    assert not hasattr(aux, "_X_private")  # no private data kept on the server object
    exact = FedAUX(mlp(), rounds=1, distill_epochs=1, dp=False, random_state=0)
    assert math.isinf(exact.fit(Xs, ys, X_public=U).history_[0].epsilon)


def test_fedaux_partial_participation_uses_the_sampled_clients(digits):
    Xs, ys, U, _ = digits
    Xs3, ys3 = [*Xs, Xs[0][:30]], [*ys, ys[0][:30]]
    aux = FedAUX(mlp(), rounds=2, distill_epochs=1, participation=0.34, dp=False, random_state=0)
    aux.fit(Xs3, ys3, X_public=U)
    assert all(len(r.clients) == 1 for r in aux.history_)
    # the ensemble distilled in the last round is the client sampled in it
    assert aux._round_clients == [int(i) for i in aux.history_[-1].clients]


def test_fedds_rotation_head_and_init_weights(digits):
    Xs, ys, U, _ = digits
    cnn = TorchClassifier(SmallCNN, module_params={"width": 2}, n_threads=1, random_state=0)
    ds = FedDS(cnn, rounds=1, distill_epochs=1, random_state=0).fit(Xs, ys, X_public=U)
    assert ds.rotation_head_.linear.in_features == 2 * 2 * 2 * 2
    assert ds.gamma == pytest.approx(300 / 64) == FEDDS_GAMMA
    assert ds.start_from_average is False  # the paper's B_AVG = false
    fedd = FedDS(cnn, rounds=1, distill_epochs=1, gamma=0.0, random_state=0).fit(Xs, ys, X_public=U)
    assert fedd.rotation_head_ is None
    # init_weights reach the clients of round 1
    init = mlp(5).initialize(Xs[0], np.arange(10)).get_weights()
    df = FedDF(mlp(), rounds=1, local_epochs=1, distill_epochs=1, init_weights=init)
    df.fit(Xs, ys, X_public=U)
    assert df.history_[0].bytes_down == 2 * 4 * n_params()
    # a client that trained one epoch from init is closer to init than a fresh seed is
    w = df.clients_[0].get_weights()
    fresh = mlp(0).initialize(Xs[0], np.arange(10)).get_weights()
    k = "layers.0.weight"
    assert np.abs(w[k] - init[k]).mean() < np.abs(fresh[k] - init[k]).mean()


# ----------------------------------------------------------------- checks, sklearn API
@pytest.mark.parametrize(
    ("cls", "params", "err", "name"),
    [
        (FedDF, {"distill_epochs": 0}, ValueError, "distill_epochs"),
        (FedDF, {"distill_lr": -1.0}, ValueError, "distill_lr"),
        (FedDF, {"start_from_average": "yes"}, TypeError, "start_from_average"),
        (FedDF, {"init_weights": 5}, TypeError, "init_weights"),
        (FedDS, {"k": -1.0}, ValueError, "k must"),
        (FedDS, {"gamma": float("nan")}, ValueError, "gamma"),
        (FedDS, {"image_shape": (8, 8)}, ValueError, "image_shape"),
        (FedAUX, {"epsilon": 1.5}, ValueError, "epsilon"),
        (FedAUX, {"negative_fraction": 1.0}, ValueError, "negative_fraction"),
        (FedAUX, {"feature_map": 5}, TypeError, "feature_map"),
        (FedAUX, {"lam": 0}, ValueError, "lam"),
    ],
)
def test_bad_parameters_named(digits, cls, params, err, name):
    Xs, ys, U, _ = digits
    with pytest.raises(err, match=name):
        cls(mlp(), rounds=1, **params).fit(Xs, ys, X_public=U)


def test_bad_public_pool_named(digits):
    Xs, ys, U, _ = digits
    with pytest.raises(ValueError, match="X_public"):
        FedDF(mlp(), rounds=1).fit(Xs, ys)
    with pytest.raises(ValueError, match="X_public"):
        FedDS(mlp(), rounds=1).fit(Xs, ys, X_public=U[:, :10])
    with pytest.raises(TypeError, match="estimator"):
        FedAUX(object(), rounds=1).fit(Xs, ys, X_public=U)


def test_clone_and_get_params():
    for est in (
        FedDF(mlp(), distill_epochs=3),
        FedDS(mlp(), k=8.0, gamma=1.0, image_shape=(1, 8, 8)),
        FedAUX(mlp(), epsilon=0.5, lam=0.2, dp=False),
    ):
        twin = clone(est)
        assert twin.get_params(deep=False).keys() == est.get_params(deep=False).keys()
        for key, value in est.get_params(deep=False).items():
            if key != "estimator":
                assert twin.get_params(deep=False)[key] == value
    assert clone(FedDS(mlp(), k=8.0)).k == 8.0
    assert FedAUX(mlp()).get_params()["epsilon"] == 0.1


def test_fedaux_with_pretrained_extractor_and_pickle(digits):
    """FedAUX P1 from cotrain.pretrain: the estimator carries the body, the scorers use it."""
    import pickle

    from cotrain.pretrain import pretrain_images

    Xs, ys, U, _ = digits
    ext = pretrain_images(U, epochs=1, width=4, random_state=0)
    aux = FedAUX(
        ext.classifier(n_threads=1, random_state=0),
        feature_map=ext,
        rounds=1,
        distill_epochs=1,
        random_state=0,
    ).fit(Xs, ys, X_public=U)
    dim = aux.scorers_[0].coef_.size  # the body's features + the constant feature
    assert aux.history_[0].bytes_up == 2 * 4 * aux.global_model_.n_parameters() + 2 * 8 * dim
    # "auto" with init_weights: the initial network's features, and the run pickles
    init = mlp(5).initialize(Xs[0], np.arange(10)).get_weights()
    auto = FedAUX(mlp(), init_weights=init, rounds=1, distill_epochs=1, dp=False)
    auto.fit(Xs, ys, X_public=U)
    assert auto.scorers_[0].coef_.size == 8 + 1  # MLP hidden width 8, plus the constant
    assert pickle.loads(pickle.dumps(auto)).predict(U[:3]).shape == (3,)
