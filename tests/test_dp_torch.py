"""DPTorchClassifier (learners.dp_torch): DP-SGD steps, sampling, accounting and state."""

from __future__ import annotations

import copy
import math
import pickle

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("opacus")
dp = pytest.importorskip("dp_accounting")

from sklearn.base import clone  # noqa: E402
from sklearn.utils.estimator_checks import parametrize_with_checks  # noqa: E402

from cotrain.privacy import epsilon_spent  # noqa: E402
from cotrain.privacy.mechanisms.dpsgd import dpsgd_epsilon  # noqa: E402
from learners import MLP, ClassAlignedClassifier  # noqa: E402
from learners.dp_torch import DPTorchClassifier  # noqa: E402

DELTA = 1e-5


pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def digits(digits_split):
    return digits_split


def batchnorm_net(n_features: int, n_classes: int) -> torch.nn.Module:
    """Not DP-compatible: BatchNorm mixes the rows of a batch."""
    return torch.nn.Sequential(
        torch.nn.Linear(n_features, 8), torch.nn.BatchNorm1d(8), torch.nn.Linear(8, n_classes)
    )


def dp_clf(**kw) -> DPTorchClassifier:
    params = dict(module_params={"hidden": (32,)}, batch_size=64, lr=0.02, random_state=0)
    params.update(kw)
    return DPTorchClassifier(**params)


# ------------------------------------------------------------------ the DP-SGD step itself


def _one_step(X, y, w, *, noise, clip, lr=0.5):
    """One full-batch (q = 1) DP-SGD step with SGD: the weights before and after, and the
    clipped mean of the per-row gradients computed here by hand."""
    clf = DPTorchClassifier(
        module_params={"hidden": (64,)},
        classes=np.arange(3),
        batch_size=len(X),  # q = 1: every row in the one step of an epoch
        epochs_per_fit=1,
        optimizer="sgd",
        lr=lr,
        noise_multiplier=noise,
        max_grad_norm=clip,
        random_state=0,
    ).initialize(X)
    net = copy.deepcopy(clf.module_)
    before = {k: torch.from_numpy(v) for k, v in clf.get_weights().items()}
    clipped = {k: torch.zeros_like(v) for k, v in before.items()}
    for xi, yi, wi in zip(X, y, w, strict=True):
        net.zero_grad()
        logit = net(torch.from_numpy(xi[None].astype(np.float32)))
        (wi * torch.nn.functional.cross_entropy(logit, torch.tensor([yi]))).backward()
        grads = {k: p.grad.detach().clone() for k, p in net.named_parameters()}
        norm = math.sqrt(sum(float((g**2).sum()) for g in grads.values()))
        factor = min(1.0, clip / (norm + 1e-6))  # Opacus' clipping factor
        for k, g in grads.items():
            clipped[k] += factor * g
    clf.fit(X, y, sample_weight=w)
    after = {k: torch.from_numpy(v) for k, v in clf.get_weights().items()}
    mean = {k: v / len(X) for k, v in clipped.items()}
    return clf, before, after, mean


@pytest.fixture(scope="module")
def small():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 5)).astype(np.float32) * 3.0
    y = rng.integers(0, 3, size=40)
    w = rng.uniform(0.2, 3.0, size=40)  # non-uniform sample weights
    return X, y, w


def test_step_is_clipped_weighted_mean_of_per_row_gradients(small):
    X, y, w = small
    clf, before, after, mean = _one_step(X, y, w, noise=1e-9, clip=0.3)
    assert clf.dp_steps_ == [1] and clf.sample_rates_ == [1.0]
    for k in before:
        np.testing.assert_allclose(after[k], before[k] - 0.5 * mean[k], atol=1e-6)
    # the clipping bites: the unclipped mean gradient would move the weights much further
    assert sum(float((mean[k] ** 2).sum()) for k in mean) ** 0.5 <= 0.3 + 1e-6


def test_clipping_bounds_the_update(small):
    """‖Δθ‖ ≤ lr·C with (almost) no noise, whatever the gradients' size."""
    X, y, w = small
    for clip in (1e-3, 0.05):
        _, before, after, _ = _one_step(X, y, w * 100.0, noise=1e-9, clip=clip)
        step = math.sqrt(sum(float(((after[k] - before[k]) ** 2).sum()) for k in before))
        assert 0 < step <= 0.5 * clip * (1 + 1e-5)


def test_noise_has_the_stated_scale(small):
    """Δθ − (−lr·clipped mean) = −lr·N(0, (σC)²)/n, entry by entry."""
    X, y, w = small
    _, before, after, mean = _one_step(X, y, w, noise=2.0, clip=0.5)
    noise = torch.cat(
        [((before[k] - 0.5 * mean[k] - after[k]) * len(X) / 0.5).flatten() for k in before]
    ).numpy()
    assert noise.size == 5 * 64 + 64 + 64 * 3 + 3
    assert abs(noise.mean()) < 4 * 1.0 / math.sqrt(noise.size)
    assert 0.85 < noise.std() / (2.0 * 0.5) < 1.15


def test_empty_poisson_batches_still_take_a_noisy_step():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(50, 3)).astype(np.float32)
    y = (X[:, 0] > 0).astype(int)
    clf = DPTorchClassifier(batch_size=1, max_epochs=1, random_state=0).fit(X, y)
    assert clf.dp_steps_ == [50] and clf.sample_rates_ == [0.02]  # ~36% of batches empty
    assert len(clf.accountant_.history) == 1 and clf.accountant_.history[0][2] == 50


# ------------------------------------------------------------------ a configured sample rate


def test_a_configured_rate_and_steps_do_not_depend_on_the_rows(digits):
    """q and the steps of every fit (the first included) are the configured ones, for any
    number of rows: fits on n and n + 1 rows have the same event."""
    Xtr, _, ytr, _ = digits
    event = dp.SelfComposedDpEvent(dp.PoissonSampledDpEvent(0.1, dp.GaussianDpEvent(1.0)), 7)
    for n in (200, 201, 50, 1000):
        clf = dp_clf(sample_rate=0.1, steps_per_fit=7, max_epochs=50).fit(Xtr[:n], ytr[:n])
        assert clf.dp_events_ == [event] and clf.n_steps_ == 7 and clf.sample_rates_ == [0.1]
        clf.fit(Xtr[: n + 1], ytr[: n + 1])  # a continued fit: the same again
        assert clf.dp_events_ == [event, event] and clf.dp_steps_ == [7, 7]
    assert clf.epsilon_(DELTA) == pytest.approx(
        dpsgd_epsilon(clf.dp_events_, DELTA, accountant="rdp"), rel=2e-3
    )


def test_a_configured_rate_samples_each_row_with_probability_q():
    """Poisson sampling at q over the fit's rows: batch sizes ~ Binomial(n, q)."""
    X = np.zeros((400, 2), dtype=np.float32)
    clf = DPTorchClassifier(sample_rate=0.05, steps_per_fit=1, random_state=0, noise_seed=3)
    clf._dp_run = (None, None, 0.05, torch.Generator().manual_seed(3))
    sizes = [int(b.numel()) for _ in range(50) for b in clf._batches(len(X))]
    del clf._dp_run
    assert len(sizes) == 50 * 20  # one expected pass: ceil(1 / q) samples
    # mean 20, sd of the mean sqrt(400 * 0.05 * 0.95 / 1000) = 0.138
    assert abs(np.mean(sizes) - 20.0) < 4 * 0.138
    assert np.var(sizes) == pytest.approx(400 * 0.05 * 0.95, rel=0.15)


def test_with_a_configured_rate_the_sum_is_divided_by_batch_size(small):
    """q = 1, no noise: the step is −lr · (sum of clipped gradients) / batch_size, the
    configured constant, whatever the number of rows."""
    X, y, w = small
    *_, mean = _one_step(X, y, w, noise=1e-9, clip=0.3)
    clf = DPTorchClassifier(
        module_params={"hidden": (64,)}, classes=np.arange(3), batch_size=16,
        optimizer="sgd", lr=0.5, noise_multiplier=1e-9, max_grad_norm=0.3, random_state=0,
        sample_rate=1.0, steps_per_fit=1,
    ).initialize(X)  # fmt: skip
    start = {k: torch.from_numpy(v) for k, v in clf.get_weights().items()}
    clf.fit(X, y, sample_weight=w)
    moved = {k: torch.from_numpy(v) for k, v in clf.get_weights().items()}
    for k in start:  # mean = sum / len(X) from _one_step: sum / 16 = mean * len(X) / 16
        np.testing.assert_allclose(moved[k], start[k] - 0.5 * mean[k] * len(X) / 16, atol=1e-6)


@pytest.mark.parametrize(
    ("params", "text"),
    [
        ({"sample_rate": 0.1}, "sample_rate needs steps_per_fit"),
        ({"sample_rate": 0.0, "steps_per_fit": 3}, "sample_rate must be a finite number > 0"),
        ({"sample_rate": 1.5, "steps_per_fit": 3}, r"sample_rate must be in \(0, 1\]"),
        ({"sample_rate": True, "steps_per_fit": 3}, "sample_rate"),
    ],
)
def test_bad_sample_rate_is_refused_before_training(small, params, text):
    X, y, _ = small
    clf = DPTorchClassifier(**params)
    with pytest.raises(ValueError, match=text):
        clf.fit(X, y)
    assert not hasattr(clf, "module_")


# ------------------------------------------------------------------ training and warm start


def test_dp_training_learns_digits(digits):
    Xtr, Xte, ytr, yte = digits
    clf = dp_clf(max_epochs=5, noise_multiplier=1.0, max_grad_norm=1.0).fit(Xtr, ytr)
    # measured 0.889 (seeds 0-2: 0.876-0.898) at ε ≈ 4.1; chance is 0.1
    assert clf.score(Xte, yte) > 0.80
    q = 64 / len(Xtr)
    assert clf.sample_rates_ == [q] and clf.dp_steps_ == [5 * math.ceil(len(Xtr) / 64)]
    assert clf.dp_events_ == [
        dp.SelfComposedDpEvent(dp.PoissonSampledDpEvent(q, dp.GaussianDpEvent(1.0)), 100)
    ]
    assert 3.5 < clf.epsilon_(DELTA) < 4.5


def test_warm_start_continues_and_adds_an_event(digits):
    Xtr, _, ytr, _ = digits
    clf = dp_clf(max_epochs=1, epochs_per_fit=1).fit(Xtr, ytr)
    w1, eps1 = clf.get_weights(), clf.epsilon_(DELTA)
    clf.fit(Xtr[:500], ytr[:500])  # a new training set size: a new sample rate
    assert clf.sample_rates_ == [64 / len(Xtr), 64 / 500]
    assert clf.dp_steps_ == [20, 8] and clf.n_steps_ == 28 and clf.n_epochs_ == 2
    assert len(clf.dp_events_) == 2 and clf.epsilon_(DELTA) > eps1
    assert any(not np.array_equal(w1[k], v) for k, v in clf.get_weights().items())
    clf.set_params(steps_per_fit=3).fit(Xtr, ytr)
    assert clf.dp_steps_[-1] == 3 and clf.dp_events_[-1].count == 3
    clf.set_params(steps_per_fit=None, epochs_per_fit=0).fit(Xtr, ytr)
    assert clf.dp_steps_[-1] == 0 and clf.dp_events_[-1] == dp.NoOpDpEvent()
    # a fresh start (warm_start=False) resets the network and its privacy record
    clf.set_params(warm_start=False, max_epochs=1).fit(Xtr, ytr)
    assert len(clf.dp_events_) == 1


def test_noise_is_unseeded_by_default_and_reproducible_only_with_noise_seed(digits):
    """random_state seeds the initial network, never the DP noise: whoever knows it (the
    co-training server) cannot replay the noise. noise_seed makes a fit reproducible."""
    Xtr, _, ytr, _ = digits
    state = torch.get_rng_state()
    a = dp_clf(max_epochs=1).fit(Xtr[:300], ytr[:300])
    assert torch.equal(torch.get_rng_state(), state)
    b = dp_clf(max_epochs=1).fit(Xtr[:300], ytr[:300])
    assert any(not np.array_equal(v, b.get_weights()[k]) for k, v in a.get_weights().items())
    # the initial networks are the same: only the noise (and Poisson samples) differ
    init = [dp_clf(max_epochs=1).initialize(Xtr[:300], ytr[:300]) for _ in range(2)]
    for k, v in init[0].get_weights().items():
        np.testing.assert_array_equal(v, init[1].get_weights()[k])
    seeded = [dp_clf(max_epochs=1, noise_seed=5).fit(Xtr[:300], ytr[:300]) for _ in range(2)]
    for k, v in seeded[0].get_weights().items():
        np.testing.assert_array_equal(v, seeded[1].get_weights()[k])
    other = dp_clf(max_epochs=1, noise_seed=6).fit(Xtr[:300], ytr[:300])
    assert any(
        not np.array_equal(v, other.get_weights()[k]) for k, v in seeded[0].get_weights().items()
    )
    with pytest.raises(TypeError, match="noise_seed"):
        dp_clf(noise_seed=1.5).fit(Xtr[:50], ytr[:50])


def test_soft_targets_and_class_aligned_wrapper_continue(digits):
    Xtr, _, ytr, _ = digits
    soft = np.eye(10)[ytr[:200]] * 0.8 + 0.02
    clf = dp_clf(max_epochs=1, classes=np.arange(10)).fit(Xtr[:200], soft)
    assert clf.dp_steps_ == [4]
    wrapped = ClassAlignedClassifier(dp_clf(max_epochs=1), classes=np.arange(10))
    wrapped.fit(Xtr[:200], ytr[:200]).fit(Xtr[:100], ytr[:100])
    assert wrapped.estimator_.dp_steps_ == [4, 2]
    assert wrapped.predict_proba(Xtr[:5]).shape == (5, 10)


# ------------------------------------------------------------------ accounting cross-checks


@pytest.mark.slow
def test_events_compose_to_opacus_epsilon(digits):
    Xtr, _, ytr, _ = digits
    clf = dp_clf(max_epochs=2, noise_multiplier=1.1).fit(Xtr, ytr)
    clf.set_params(steps_per_fit=5).fit(Xtr[:600], ytr[:600])
    opacus_eps = clf.epsilon_(DELTA)
    # dp-accounting's RDP accountant, directly on the events
    acc = dp.rdp.RdpAccountant()
    for event in clf.dp_events_:
        acc.compose(event)
    assert acc.get_epsilon(DELTA) == pytest.approx(opacus_eps, rel=2e-3)
    rdp_eps = dpsgd_epsilon(clf.dp_events_, DELTA, accountant="rdp")
    assert rdp_eps == pytest.approx(opacus_eps, rel=2e-3)
    # PLD is tighter than RDP (a few to ~15% less here); replace-one costs more
    pld_eps = dpsgd_epsilon(clf.dp_events_, DELTA)
    assert 0.8 * rdp_eps < pld_eps < rdp_eps
    assert dpsgd_epsilon(clf.dp_events_, DELTA, neighbors="replace_one") > pld_eps


@pytest.mark.slow
def test_library_epsilon_spent_agrees_on_few_steps():
    """cotrain.privacy.epsilon_spent expands events step by step: same ε (slow for many)."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(100, 3)).astype(np.float32)
    y = (X[:, 0] > 0).astype(int)
    clf = DPTorchClassifier(batch_size=20, max_epochs=1, random_state=0).fit(X, y)
    clf.fit(X[:50], y[:50])
    assert clf.dp_steps_ == [5, 3]
    rdp_eps = dpsgd_epsilon(clf.dp_events_, DELTA, accountant="rdp")
    assert epsilon_spent(clf.dp_events_, DELTA, accountant="rdp") == pytest.approx(rdp_eps)
    assert epsilon_spent(clf.dp_events_, DELTA) == pytest.approx(
        dpsgd_epsilon(clf.dp_events_, DELTA), rel=1e-3
    )
    assert clf.epsilon_(DELTA) == pytest.approx(rdp_eps, rel=2e-3)


# ------------------------------------------------------------------ validation


@pytest.mark.parametrize(
    ("param", "value", "error"),
    [
        ("noise_multiplier", 0.0, ValueError),
        ("noise_multiplier", -1.0, ValueError),
        ("noise_multiplier", float("nan"), ValueError),
        ("noise_multiplier", True, ValueError),
        ("max_grad_norm", 0, ValueError),
        ("max_grad_norm", float("inf"), ValueError),
        ("accountant", "gdp", ValueError),
        ("secure_mode", "yes", TypeError),
    ],
)
def test_bad_params_raise_before_training(small, param, value, error):
    X, y, _ = small
    clf = DPTorchClassifier(**{param: value})
    with pytest.raises(error, match=param):
        clf.fit(X, y)
    assert not hasattr(clf, "module_")


def test_secure_mode_needs_torchcsprng(small):
    try:
        import torchcsprng  # noqa: F401
    except ImportError:
        pass
    else:  # pragma: no cover
        pytest.skip("torchcsprng is installed")
    X, y, _ = small
    clf = DPTorchClassifier(secure_mode=True)
    with pytest.raises(ImportError, match="secure_mode=True needs torchcsprng"):
        clf.fit(X, y)
    assert not hasattr(clf, "module_")


def test_batchnorm_module_rejected_before_any_step(small):
    X, y, _ = small
    clf = DPTorchClassifier(module=batchnorm_net)
    with pytest.raises(ValueError, match="BatchNorm"):
        clf.fit(X, y)
    assert clf.n_steps_ == 0 and clf.dp_steps_ == [] and clf.dp_events_ == []


def test_epsilon_delta_checked(small):
    X, y, _ = small
    clf = DPTorchClassifier(max_epochs=1).fit(X, y)
    with pytest.raises(ValueError, match="delta"):
        clf.epsilon_(1.5)


# ------------------------------------------------------------------ pickling and cloning


def test_clone_and_pickle_fitted(small):
    X, y, _ = small
    clf = DPTorchClassifier(
        MLP,
        module_params={"hidden": (8,)},
        max_epochs=2,
        batch_size=8,
        noise_multiplier=1.5,
        random_state=0,
    )
    cloned = clone(clf)
    assert cloned.get_params() == clf.get_params() and not hasattr(cloned, "module_")
    clf.fit(X, y)
    # no Opacus leftovers on the network (hooks, per-row gradients, the last batch's inputs)
    for p in clf.module_.parameters():
        assert not set(vars(p)) & {"grad_sample", "summed_grad", "_forward_counter"}
    for layer in clf.module_.modules():
        assert "activations" not in vars(layer) and not layer._forward_hooks
        assert not layer._backward_hooks
    restored = pickle.loads(pickle.dumps(clf))
    np.testing.assert_array_equal(restored.predict_proba(X), clf.predict_proba(X))
    assert restored.dp_events_ == clf.dp_events_
    assert restored.epsilon_(DELTA) == clf.epsilon_(DELTA)
    restored.fit(X, y)  # continues after the round trip
    assert restored.dp_steps_ == [10, 5] and restored.epsilon_(DELTA) > clf.epsilon_(DELTA)


def test_checkpoint_round_trip_keeps_the_privacy_record(small, tmp_path):
    """cotrain.persistence.checkpoint stores the DP state as plain numbers beside the tensors."""
    from cotrain.persistence.checkpoint import estimator_types, load_model, save_model

    X, y, _ = small
    est = DPTorchClassifier(batch_size=10, max_epochs=1, epochs_per_fit=0, random_state=0)
    model = ClassAlignedClassifier(est, classes=np.arange(3)).fit(X, y).fit(X, y)  # 4 + 0 steps
    assert save_model(model, tmp_path, "c0") == ["c0.skops", "c0.pt"]
    back = load_model(tmp_path, "c0", estimator_types([est])).estimator_
    assert back.dp_events_ == model.estimator_.dp_events_
    assert back.dp_events_[-1] == dp.NoOpDpEvent() and back.dp_steps_ == [4, 0]
    assert back.epsilon_(DELTA) == model.estimator_.epsilon_(DELTA) > 0
    np.testing.assert_array_equal(back.predict_proba(X), model.predict_proba(X))


# ------------------------------------------------------------------ scikit-learn's checks

SKLEARN_EXPECTED_FAILURES = {
    # as for TorchClassifier: mini-batch (here Poisson-sampled) training, so a row of weight
    # 2 is not the row twice, nor weight 0 no row
    "check_sample_weight_equivalence_on_dense_data": (
        "mini-batch training: weighting a row is not equivalent to repeating it"
    ),
    # fits the same instance twice expecting equal predictions: with warm_start=True the
    # second fit continues (test_torch_learner runs it with warm_start=False)
    "check_supervised_y_2d": "warm start: the second fit continues training",
}


@parametrize_with_checks(
    [
        DPTorchClassifier(
            MLP,
            module_params={"hidden": (16,)},
            max_epochs=10,
            lr=3e-2,
            batch_size=64,
            noise_multiplier=0.5,
            max_grad_norm=5.0,
            random_state=0,
            noise_seed=0,  # the checks compare repeated fits: reproducible noise
        )
    ],
    expected_failed_checks=lambda est: SKLEARN_EXPECTED_FAILURES,
)
def test_sklearn_estimator_checks(estimator, check):
    check(estimator)
