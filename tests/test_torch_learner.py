"""TorchClassifier and the ready-made torch modules (learners.torch, learners.modules)."""

from __future__ import annotations

import pickle
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from sklearn.base import clone  # noqa: E402
from sklearn.datasets import load_digits  # noqa: E402
from sklearn.exceptions import NotFittedError  # noqa: E402
from sklearn.tree import DecisionTreeClassifier  # noqa: E402
from sklearn.utils.estimator_checks import (  # noqa: E402
    check_supervised_y_2d,
    parametrize_with_checks,
)

from learners import MLP, ClassAlignedClassifier, SmallCNN, TorchClassifier  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


pytestmark = pytest.mark.usefixtures("one_torch_thread")


# ------------------------------------------------------------------ helpers (module level so
# that estimators using them can be pickled)


def frozen_first_layer(n_features: int, n_classes: int) -> torch.nn.Module:
    """An MLP whose first layer is frozen."""
    net = MLP(n_features, n_classes, hidden=(8,))
    net.layers[0].requires_grad_(False)
    return net


def linear(d: int, c: int) -> torch.nn.Module:
    """A factory with neither ``n_features`` nor ``n_classes`` by name: called positionally."""
    return torch.nn.Linear(d, c)


class RecordingTorchClassifier(TorchClassifier):
    """Records the shapes of what reaches ``fit``."""

    def fit(self, X, y, sample_weight=None):
        self.fit_shapes_ = (np.shape(X), np.shape(y))
        return super().fit(X, y, sample_weight=sample_weight)


@pytest.fixture(scope="module")
def digits():
    """sklearn digits, standardised on the training part: 1000 train, 797 test rows."""
    X, y = load_digits(return_X_y=True)
    order = np.random.default_rng(0).permutation(len(y))
    X, y = X[order], y[order]
    mean, std = X[:1000].mean(axis=0), X[:1000].std(axis=0) + 1e-6
    X = ((X - mean) / std).astype(np.float32)
    return X[:1000], y[:1000], X[1000:], y[1000:]


@pytest.fixture(scope="module")
def small(digits):
    """300 digits rows, for quick fits."""
    X, y, _, _ = digits
    return X[:300], y[:300]


def small_mlp(**params) -> TorchClassifier:
    defaults = {"module_params": {"hidden": (16,)}, "batch_size": 32, "random_state": 0}
    return TorchClassifier(MLP, **{**defaults, **params})


# ------------------------------------------------------------------ scikit-learn checks

EXPECTED_FAILED_CHECKS = {
    # Mini-batch SGD: a row of weight 2 is not the same as the row twice (the batches,
    # their number and the shuffling all differ), nor is weight 0 the same as no row.
    "check_sample_weight_equivalence_on_dense_data": (
        "mini-batch training: weighting a row is not equivalent to repeating it"
    ),
}
# check_supervised_y_2d fits the *same* instance twice and expects equal predictions; with
# warm_start=True the second fit continues training, so whether it passes depends on
# convergence. It runs with warm_start=False in test_supervised_y_2d_without_warm_start.
RUN_SEPARATELY = {"check_supervised_y_2d"}


@parametrize_with_checks(
    [small_mlp(max_epochs=10, lr=3e-2, batch_size=64)],
    expected_failed_checks=lambda est: EXPECTED_FAILED_CHECKS,
)
def test_sklearn_estimator_checks(estimator, check):
    if getattr(check, "func", check).__name__ in RUN_SEPARATELY:
        pytest.skip("run with warm_start=False in test_supervised_y_2d_without_warm_start")
    check(estimator)


def test_supervised_y_2d_without_warm_start():
    check_supervised_y_2d("TorchClassifier", small_mlp(max_epochs=3, warm_start=False))


# ------------------------------------------------------------------ continued training


def test_warm_start_continues_from_previous_weights(small):
    X, y = small
    clf = small_mlp(max_epochs=3, epochs_per_fit=2)
    assert clf.continues_training
    first = clf.fit(X, y).get_weights()
    second = clf.fit(X, y).get_weights()
    fresh = clone(clf).fit(X, y).get_weights()
    for name in first:
        np.testing.assert_array_equal(first[name], fresh[name])  # seeded
        assert not np.array_equal(second[name], fresh[name])
    assert len(clf.loss_curve_) == 3 + 2
    assert clf.n_epochs_ == 5
    assert clf.loss_curve_[3] < clf.loss_curve_[0]  # start of fit 2 below start of fit 1
    assert np.all(np.diff(clf.loss_curve_) < 0), clf.loss_curve_


def test_cold_start_refits_from_scratch(small):
    X, y = small
    clf = small_mlp(max_epochs=2, warm_start=False)
    assert not clf.continues_training
    first = clf.fit(X, y).predict_proba(X)
    np.testing.assert_array_equal(clf.fit(X, y).predict_proba(X), first)
    assert len(clf.loss_curve_) == 2


def test_steps_per_fit(small):
    X, y = small  # 300 rows, batches of 32: 10 steps per epoch
    clf = small_mlp(max_epochs=1, steps_per_fit=25).fit(X, y)
    assert clf.n_steps_ == 10
    clf.fit(X, y)
    assert clf.n_steps_ == 35
    assert clf.n_epochs_ == 3  # two full passes during the 25 steps
    assert len(clf.loss_curve_) == 2  # one entry per continued fit


def test_continued_fit_checks_classes_and_shape(small):
    X, y = small
    clf = small_mlp(max_epochs=1).fit(X, y)
    with pytest.raises(ValueError, match="classes changed"):
        clf.fit(X, y % 2)
    with pytest.raises(ValueError, match="features"):
        clf.fit(X[:, :10], y)


# ------------------------------------------------------------------ targets and weights


def test_soft_targets(small):
    X, y = small
    rng = np.random.default_rng(0)
    soft = 0.5 * np.eye(10)[y] + 0.5 * rng.dirichlet(np.ones(10), size=len(y))
    hard = soft.argmax(axis=1)
    params = {"max_epochs": 3, "classes": np.arange(10)}
    from_soft = small_mlp(**params).fit(X, soft).predict_proba(X)
    from_hard = small_mlp(**params).fit(X, hard).predict_proba(X)
    assert not np.allclose(from_soft, from_hard)
    # one-hot soft targets are exactly hard labels
    onehot = small_mlp(**params).fit(X, np.eye(10)[y]).predict_proba(X)
    np.testing.assert_array_equal(onehot, small_mlp(**params).fit(X, y).predict_proba(X))


def test_soft_targets_rows_are_normalised_and_empty_rows_ignored(small):
    X, y = small
    onehot = np.eye(10)[y]
    params = {"max_epochs": 2, "classes": np.arange(10)}
    base = small_mlp(**params).fit(X, onehot).predict_proba(X)
    counts = 3 * onehot
    scaled = small_mlp(**params).fit(X, counts).predict_proba(X)
    np.testing.assert_array_equal(counts, 3 * onehot)  # the caller's targets are untouched
    np.testing.assert_allclose(scaled, base, rtol=1e-5, atol=1e-6)
    zero_rows = onehot.copy()
    zero_rows[::2] = 0
    weighted = np.ones(len(y))
    weighted[::2] = 0
    a = small_mlp(**params).fit(X, zero_rows).predict_proba(X)
    b = small_mlp(**params).fit(X, onehot, sample_weight=weighted).predict_proba(X)
    np.testing.assert_array_equal(a, b)


def test_sample_weight(small):
    X, y = small
    plain = small_mlp(max_epochs=2).fit(X, y).predict_proba(X)
    ones = small_mlp(max_epochs=2).fit(X, y, sample_weight=np.ones(len(y))).predict_proba(X)
    np.testing.assert_array_equal(plain, ones)
    weights = np.where(y == 3, 10.0, 1.0)
    weighted = small_mlp(max_epochs=2).fit(X, y, sample_weight=weights).predict_proba(X)
    assert weighted[:, 3].mean() > plain[:, 3].mean()


def test_missing_class_and_string_labels(small):
    X, y = small
    classes = np.array([f"c{k:02d}" for k in range(12)])  # c10, c11 never occur
    clf = small_mlp(max_epochs=5, lr=1e-2, classes=classes)
    keep = y < 5
    proba = clf.fit(X[keep], classes[y[keep]]).predict_proba(X)
    assert proba.shape == (len(X), 12)
    assert proba.dtype == np.float64
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    assert clf.classes_.tolist() == classes.tolist()
    assert set(clf.predict(X)) <= set(classes[:5])
    assert clf.module_.layers[-1].out_features == 12


# ------------------------------------------------------------------ reproducibility


def test_determinism_and_private_rng(small):
    X, y = small
    torch.manual_seed(123)
    state = torch.get_rng_state()
    params = {"max_epochs": 2, "module_params": {"hidden": (16,), "dropout": 0.3}}
    a = small_mlp(**params).fit(X, y)
    b = small_mlp(**params).fit(X, y)
    assert torch.equal(torch.get_rng_state(), state)  # global torch RNG untouched
    np.testing.assert_array_equal(a.predict_proba(X), b.predict_proba(X))
    np.testing.assert_array_equal(a.fit(X, y).predict_proba(X), b.fit(X, y).predict_proba(X))
    c = small_mlp(**{**params, "random_state": 1}).fit(X, y)
    assert not np.allclose(a.predict_proba(X), c.predict_proba(X))


def test_pickle_and_clone_round_trip(small):
    X, y = small
    clf = small_mlp(max_epochs=2).fit(X, y)
    copy = pickle.loads(pickle.dumps(clf))
    np.testing.assert_array_equal(copy.predict_proba(X), clf.predict_proba(X))
    # the optimizer state and random stream travel too: continuing gives the same model
    np.testing.assert_array_equal(copy.fit(X, y).predict_proba(X), clf.fit(X, y).predict_proba(X))
    cloned = clone(clf)
    assert not hasattr(cloned, "module_")
    assert cloned.get_params()["module_params"] == {"hidden": (16,)}


def test_n_threads_is_restored(small):
    X, y = small
    previous = torch.get_num_threads()
    clf = small_mlp(max_epochs=1, n_threads=2).fit(X[:50], y[:50])
    clf.predict(X)
    assert torch.get_num_threads() == previous
    with pytest.raises(ValueError, match="n_threads"):
        small_mlp(n_threads=0).fit(X, y)


def test_predict_restores_train_mode(small):
    X, y = small
    clf = small_mlp(max_epochs=1, module_params={"hidden": (16,), "dropout": 0.5}).fit(X, y)
    assert clf.module_.training
    first = clf.predict_proba(X)
    np.testing.assert_array_equal(clf.predict_proba(X), first)  # dropout off in eval
    assert clf.module_.training


# ------------------------------------------------------------------ weights (FedAvg)


def test_get_set_weights_and_n_parameters(small):
    X, y = small
    a = small_mlp(max_epochs=2).fit(X, y)
    b = small_mlp(random_state=1, classes=np.arange(10)).initialize(X)
    assert b.n_epochs_ == 0 and b.loss_curve_ == []
    weights = a.get_weights()
    assert list(weights) == ["layers.0.weight", "layers.0.bias", "layers.2.weight", "layers.2.bias"]
    assert all(w.dtype == np.float32 for w in weights.values())
    assert a.n_parameters() == 64 * 16 + 16 + 16 * 10 + 10 == sum(w.size for w in weights.values())
    weights["layers.0.bias"][:] = 99.0  # a copy: the model is unchanged
    assert not np.any(a.get_weights()["layers.0.bias"] == 99.0)
    b.set_weights(a.get_weights())
    np.testing.assert_array_equal(b.predict_proba(X), a.predict_proba(X))
    # the next fit continues from the loaded weights, for epochs_per_fit epochs
    b.set_weights(a.get_weights(), reset_optimizer=True).fit(X, y)
    assert len(b.loss_curve_) == 1
    assert b.loss_curve_[0] < a.loss_curve_[0]

    with pytest.raises(ValueError, match="shape"):
        b.set_weights({"layers.0.bias": np.zeros(3)})
    with pytest.raises(KeyError, match="unknown parameter"):
        b.set_weights({"nope": np.zeros(3)})
    with pytest.raises(NotFittedError, match="initialize"):
        small_mlp().get_weights()
    with pytest.raises(ValueError, match="classes"):
        small_mlp().initialize(X)
    assert small_mlp().initialize(X, y).n_classes_ == 10


def test_trainable_only_with_frozen_layer(small):
    X, y = small
    clf = TorchClassifier(frozen_first_layer, max_epochs=2, random_state=0)
    clf.initialize(X, y)
    frozen = clf.get_weights(trainable_only=False)["layers.0.weight"]
    assert set(clf.get_weights()) == {"layers.2.weight", "layers.2.bias"}
    assert set(clf.get_weights(trainable_only=False)) == {
        "layers.0.weight",
        "layers.0.bias",
        "layers.2.weight",
        "layers.2.bias",
    }
    assert clf.n_parameters() == 8 * 10 + 10
    assert clf.n_parameters(trainable_only=False) == 64 * 8 + 8 + 8 * 10 + 10
    clf.fit(X, y)
    np.testing.assert_array_equal(clf.get_weights(False)["layers.0.weight"], frozen)
    assert pickle.loads(pickle.dumps(clf)).n_parameters() == 90


# ------------------------------------------------------------------ module protocol, inputs


def test_module_protocol(small):
    X, y = small
    positional = TorchClassifier(linear, max_epochs=1, random_state=0).fit(X, y)
    assert isinstance(positional.module_, torch.nn.Linear)
    instance = torch.nn.Sequential(torch.nn.Linear(64, 10))
    clf = TorchClassifier(instance, max_epochs=1).fit(X, y)
    assert clf.module_ is not instance  # deep-copied; the given instance is untouched
    assert not torch.equal(clf.module_[0].weight, instance[0].weight)
    with pytest.raises(ValueError, match="injected"):
        TorchClassifier(MLP, module_params={"n_classes": 3}).fit(X, y)
    with pytest.raises(ValueError, match="optimizer"):
        TorchClassifier(optimizer="lbfgs").fit(X, y)
    with pytest.raises(ValueError, match="max_epochs"):
        TorchClassifier(max_epochs=0).fit(X, y)
    sgd = TorchClassifier(optimizer="sgd", optimizer_params={"momentum": 0.9}, max_epochs=1)
    assert isinstance(sgd.fit(X, y).optimizer_, torch.optim.SGD)
    assert isinstance(
        TorchClassifier(optimizer=torch.optim.RMSprop).fit(X, y).optimizer_, torch.optim.RMSprop
    )


def test_bad_module_optimizer_and_device_name_the_argument(small):
    X, y = small
    instance = torch.nn.Linear(64, 10)
    with pytest.raises(ValueError, match="module_params cannot be used with a module instance"):
        TorchClassifier(instance, module_params={"hidden": (4,)}).fit(X, y)
    with pytest.raises(TypeError, match=r"module must be an nn\.Module class, a callable"):
        TorchClassifier("mlp").fit(X, y)
    with pytest.raises(TypeError, match=r"module must build an nn\.Module, got int"):
        TorchClassifier(lambda n_features, n_classes: 3).fit(X, y)
    with pytest.raises(TypeError, match="optimizer must be a string or a torch optimizer"):
        TorchClassifier(optimizer=0.1).fit(X, y)
    with pytest.raises(ValueError, match="device='tpu-9' is not a torch device"):
        TorchClassifier(device="tpu-9").fit(X, y)
    with pytest.raises(ValueError, match="batch_size must be an integer >= 1, got True"):
        TorchClassifier(batch_size=True).fit(X, y)


def test_image_input(small):
    X, y = small
    images = X.reshape(-1, 1, 8, 8)
    cnn = TorchClassifier(SmallCNN, module_params={"width": 4}, max_epochs=1, random_state=0).fit(
        images, y
    )
    assert cnn.module_.image_size == 8  # inferred from n_features = 64
    assert cnn.input_shape_ == (1, 8, 8) and cnn.n_features_in_ == 1
    flat = TorchClassifier(SmallCNN, module_params={"width": 4}, max_epochs=1, random_state=0).fit(
        X, y
    )
    np.testing.assert_allclose(flat.predict_proba(X), cnn.predict_proba(images), atol=1e-6)
    with pytest.raises(ValueError, match="shape"):
        cnn.predict(X.reshape(-1, 1, 4, 16))
    mlp = small_mlp(max_epochs=1).fit(images, y)  # MLP flattens images
    assert mlp.predict(images).shape == (len(y),)


@pytest.mark.skipif(torch.cuda.is_available(), reason="CUDA is available here")
def test_cuda_unavailable_is_a_clear_error(small):
    X, y = small
    with pytest.raises(ValueError, match="CUDA is not available"):
        small_mlp(device="cuda").fit(X, y)


# ------------------------------------------------------------------ inside the wrapper


def test_wrapper_passes_soft_targets_through_and_continues(small):
    X, y = small
    rng = np.random.default_rng(1)
    soft = rng.dirichlet(np.ones(10), size=len(y)) * 0.5 + np.eye(10)[y] * 0.5
    inner = RecordingTorchClassifier(max_epochs=2, epochs_per_fit=1, random_state=0)
    wrapper = ClassAlignedClassifier(inner, classes=np.arange(10)).fit(X, soft)
    assert wrapper.estimator_.fit_shapes_ == (X.shape, soft.shape)  # no row expansion
    first = wrapper.estimator_
    wrapper.fit(X, soft)
    assert wrapper.estimator_ is not first  # continued on a copy
    assert len(wrapper.estimator_.loss_curve_) == 3
    assert len(first.loss_curve_) == 2
    assert wrapper.predict_proba(X).shape == (len(X), 10)
    assert not hasattr(inner, "module_")


# ------------------------------------------------------------------ accuracy, federation


@pytest.mark.parametrize(
    ("module", "params", "epochs"),
    [(MLP, {"hidden": (64,)}, 5), (SmallCNN, {"width": 8}, 8)],
)
def test_digits_accuracy(digits, module, params, epochs):
    X, y, X_test, y_test = digits
    clf = TorchClassifier(module, module_params=params, max_epochs=epochs, lr=3e-3, random_state=0)
    assert clf.fit(X, y).score(X_test, y_test) >= 0.90


def test_federation_with_torch_clients(digits):
    from cotrain import FederatedCoTrainer

    X, y, X_test, y_test = digits
    X_public = X_test[:400]
    parts = np.array_split(np.arange(600), 4)
    clients = [
        TorchClassifier(
            MLP, module_params={"hidden": (32,)}, max_epochs=5, epochs_per_fit=2, lr=1e-2
        )
    ] * 3 + [DecisionTreeClassifier()]
    trainer = FederatedCoTrainer(clients, rounds=3, random_state=0)
    trainer.fit([X[p] for p in parts], [y[p] for p in parts], X_public=X_public)
    assert len(trainer.history_) == 3
    for model in trainer.clients_[:3]:
        assert isinstance(model, TorchClassifier)
        assert len(model.loss_curve_) == 5 + 2 * 2  # continued across rounds
    assert trainer.score(X_test[400:], y_test[400:]) > 0.85


@pytest.mark.slow
def test_import_learners_does_not_import_torch():
    code = "import learners, sys; assert 'torch' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)
