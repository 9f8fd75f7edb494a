"""FedAUX's negatives="pool" and calibration="analytic" options (known answers)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from sklearn.datasets import load_digits

from cotrain.baselines import FedAUX
from cotrain.privacy import gaussian_noise_multiplier
from cotrain.privacy.fedaux import CertaintyScorer, fedaux_sigma

pytest.importorskip("torch")
from learners import TorchClassifier
from learners.modules import MLP


def mlp(seed: int = 0) -> TorchClassifier:
    return TorchClassifier(MLP, module_params={"hidden": (8,)}, n_threads=1, random_state=seed)


@pytest.fixture(scope="module")
def digits():
    X, y = load_digits(return_X_y=True)
    X = (X / 16.0).astype(np.float32)
    return [X[:60], X[60:120]], [y[:60], y[60:120]], X[200:300]


def Analytic(**params) -> CertaintyScorer:
    return CertaintyScorer(calibration="analytic", **params)


def blobs(seed: int = 0):
    rng = np.random.default_rng(seed)
    return rng.normal(2.0, size=(500, 3)), rng.normal(size=(2000, 3))


def test_analytic_scorer_noise_is_z_times_sensitivity_on_the_exact_weights():
    X_priv, X_neg = blobs()
    exact = CertaintyScorer(lam=0.1, dp=False).fit(X_priv, X_neg)
    sc = Analytic(lam=0.1, epsilon=1.0, delta=1e-5, random_state=7, reproducible_noise=True)
    with pytest.warns(UserWarning, match="reproducible_noise=True"):  # replayed below
        sc.fit(X_priv, X_neg)
    assert sc.n_samples_ == 2500
    assert sc.sensitivity_ == pytest.approx(2 / (0.1 * 2500))
    # Balle & Wang's multiplier at (1, 1e-5) is 3.7306 (cotrain.privacy.accounting.epsilon doctest)
    assert sc.sigma_ / sc.sensitivity_ == pytest.approx(3.7306, abs=1e-4)
    noise = np.random.default_rng(7).normal(0.0, sc.sigma_, size=exact.coef_.shape)
    np.testing.assert_allclose(sc.coef_, exact.coef_ + noise, rtol=0, atol=1e-8)
    assert (sc.epsilon_, sc.delta_, sc.dp) == (1.0, 1e-5, True)


def test_analytic_scorer_below_classic_sigma_and_exact_without_dp():
    X_priv, X_neg = blobs(1)
    sc = Analytic(lam=0.1, epsilon=0.1, random_state=0).fit(X_priv, X_neg)
    classic = fedaux_sigma(2500, 0.1, 0.1, 1e-5)
    assert sc.sigma_ == pytest.approx(gaussian_noise_multiplier(0.1, 1e-5) * 2 / (0.1 * 2500))
    # analytic z(0.1, 1e-5) = 30.7496 against the classic sqrt(2 ln 1.25e5)/0.1 = 48.448
    assert sc.sigma_ / classic == pytest.approx(0.6347, abs=1e-3)
    plain = Analytic(lam=0.1, epsilon=5.0, dp=False).fit(X_priv, X_neg)
    exact = CertaintyScorer(lam=0.1, dp=False).fit(X_priv, X_neg)
    np.testing.assert_array_equal(plain.coef_, exact.coef_)
    assert plain.sigma_ == 0.0 and math.isinf(plain.epsilon_)
    with pytest.raises(ValueError, match="epsilon"):
        Analytic(epsilon=0.0).fit(X_priv, X_neg)
    with pytest.raises(ValueError, match="delta"):
        Analytic(epsilon=2.0, delta=1.0).fit(X_priv, X_neg)
    with pytest.raises(ValueError, match="calibration"):
        CertaintyScorer(calibration="exact").fit(X_priv, X_neg)
    with pytest.raises(ValueError, match="calibration='analytic'"):
        CertaintyScorer(epsilon=2.0).fit(X_priv, X_neg)
    # fedaux_sigma's analytic branch is the same z(ε, δ)·Δ₂ for the multinomial head
    assert fedaux_sigma(100, 0.5, 2.0, 1e-5, n_classes=4, calibration="analytic") == (
        pytest.approx(gaussian_noise_multiplier(2.0, 1e-5) * 2 * 2 / (0.5 * 100))
    )


@pytest.mark.slow
def test_fedaux_pool_negatives_and_analytic_calibration(digits):
    Xs, ys, U = digits
    aux = FedAUX(
        mlp(),
        rounds=1,
        distill_epochs=1,
        lam=0.1,
        epsilon=2.0,
        negatives="pool",
        calibration="analytic",
        random_state=0,
        noise_random_state=0,
    ).fit(Xs, ys, X_public=U)
    # the whole pool is negatives and distillation set: N = 60 + 100, every point scored
    assert aux.scores_.shape == (2, 100)
    report = aux.privacy_report()
    assert report["n_samples"] == [160, 160]
    assert report["sensitivity"][0] == pytest.approx(2 / (0.1 * 160))
    z = gaussian_noise_multiplier(2.0, 1e-5)
    assert report["sigma"] == pytest.approx([z * 2 / (0.1 * 160)] * 2)
    assert (report["epsilon"], report["negatives"], report["calibration"]) == (
        2.0,
        "pool",
        "analytic",
    )
    assert aux.history_[0].epsilon == 2.0
    assert all(s.calibration == "analytic" for s in aux.scorers_)
    # default: the paper's disjoint 20 % split and classic calibration, unchanged
    default = FedAUX(mlp(), rounds=1, distill_epochs=1, random_state=0).fit(Xs, ys, X_public=U)
    assert default.scores_.shape == (2, 80)
    assert default.privacy_report()["sigma"][0] == pytest.approx(fedaux_sigma(80, 0.1, 0.1, 1e-5))


@pytest.mark.parametrize(
    ("params", "name"),
    [
        ({"epsilon": 2.0}, "calibration='analytic'"),
        ({"epsilon": 0.0, "calibration": "analytic"}, "epsilon"),
        ({"calibration": "exact"}, "calibration"),
        ({"negatives": "all"}, "negatives"),
        ({"delta": 1.0, "calibration": "analytic"}, "delta"),
        ({"epsilon": "0.5"}, "epsilon must be a number; got '0.5'"),
        ({"epsilon": True, "calibration": "analytic"}, "epsilon must be a number; got True"),
        ({"lam": 0.0}, "lam must be a finite number > 0"),
    ],
)
def test_fedaux_option_checks(digits, params, name):
    Xs, ys, U = digits
    with pytest.raises(ValueError, match=name):
        FedAUX(mlp(), rounds=1, **params).fit(Xs, ys, X_public=U)
