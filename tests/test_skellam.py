"""Distributed Skellam noise and its accounting, against independent computations.

The privacy loss distribution of cotrain.privacy.mechanisms.skellam is checked against the
hockey-stick divergence summed directly over scipy's Skellam pmf (one and two shifted coordinates),
and against an RDP bound computed from the same pmf (an upper bound on ε by another route);
closure under summation (what over-provisioning relies on) is checked by convolving pmfs.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

pytest.importorskip("dp_accounting")

from scipy import stats

from cotrain.privacy.accounting.epsilon import gaussian_epsilon
from cotrain.privacy.mechanisms.skellam import (
    skellam_epsilon,
    skellam_log_pmf,
    skellam_mu,
    skellam_noise,
    skellam_pld,
    skellam_site_share,
)


def scipy_pmf(mu: float, ks: np.ndarray) -> np.ndarray:
    return stats.skellam.pmf(ks, mu / 2, mu / 2)


@pytest.mark.parametrize("mu", [3.0, 40.0])
@pytest.mark.parametrize("epsilon", [0.1, 0.5, 1.0])
def test_one_shift_matches_the_hockey_stick_divergence(mu, epsilon):
    ks = np.arange(-400, 402)
    p, q = scipy_pmf(mu, ks - 1), scipy_pmf(mu, ks)  # Sk + 1 against Sk
    exact = float(np.maximum(p - math.exp(epsilon) * q, 0).sum())
    got = skellam_pld(mu, 1, value_discretization_interval=1e-5).get_delta_for_epsilon(epsilon)
    assert exact <= got + 1e-12  # pessimistic
    assert got == pytest.approx(exact, rel=2e-3, abs=1e-9)


def test_two_shifts_match_the_joint_hockey_stick_divergence():
    mu, epsilon = 10.0, 0.8
    ks = np.arange(-120, 122)
    p1, q1 = scipy_pmf(mu, ks - 1), scipy_pmf(mu, ks)
    joint = np.maximum(np.outer(p1, p1) - math.exp(epsilon) * np.outer(q1, q1), 0).sum()
    got = skellam_pld(mu, 2, value_discretization_interval=1e-5).get_delta_for_epsilon(epsilon)
    assert float(joint) <= got + 1e-12
    assert got == pytest.approx(float(joint), rel=5e-3)


def test_an_rdp_bound_by_another_route_is_never_below():
    from dp_accounting.rdp.rdp_privacy_accountant import compute_epsilon

    mu, n_labels, delta = 200.0, 20, 1e-5
    from scipy.special import logsumexp

    ks = np.arange(-600, 602)
    logp = stats.skellam.logpmf(ks - 1, mu / 2, mu / 2)
    logq = stats.skellam.logpmf(ks, mu / 2, mu / 2)
    keep = np.isfinite(logp) & np.isfinite(logq)  # scipy's far tails underflow to -inf
    logp, logq = logp[keep], logq[keep]
    orders = np.array([1.5, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64])
    # Rényi divergence of Sk + 1 from Sk at order a, times the 2·n_labels shifted counts
    rdp = [logsumexp(a * logp + (1 - a) * logq) / (a - 1) * 2 * n_labels for a in orders]
    bound, _ = compute_epsilon(orders, rdp, delta)
    exact = skellam_epsilon(mu, n_labels, delta)
    assert exact <= bound
    assert exact > 0.6 * bound  # the same order: RDP conversion loses a little


def test_large_mu_approaches_the_gaussian_of_the_same_variance():
    mu, n_labels = 20000.0, 50
    gaussian = gaussian_epsilon(math.sqrt(mu) / math.sqrt(2 * n_labels), 1e-5)
    assert skellam_epsilon(mu, n_labels, 1e-5) == pytest.approx(gaussian, rel=0.03)


def test_shares_sum_to_the_target_skellam():
    # Sk(a) + Sk(b) = Sk(a + b): the pmf of the sum of two shares is the convolution
    ka, la = skellam_log_pmf(7.0)
    kb, lb = skellam_log_pmf(13.0)
    conv = np.convolve(np.exp(la), np.exp(lb))
    ks = np.arange(ka[0] + kb[0], ka[0] + kb[0] + len(conv))
    np.testing.assert_allclose(conv, scipy_pmf(20.0, ks), atol=1e-12)
    # and the draws of 8 site shares sum to variance mu
    rng = np.random.default_rng(0)
    share = skellam_site_share(80.0, n_sites=10, dropouts=1, colluders=1)
    total = sum(skellam_noise(share, 200_000, rng) for _ in range(8))
    assert total.var() == pytest.approx(80.0, rel=0.02)


def test_site_share_over_provisions_for_dropouts_and_colluders():
    assert skellam_site_share(60.0, n_sites=6) == 10.0
    assert skellam_site_share(60.0, n_sites=6, dropouts=1, colluders=2) == 20.0
    for bad in [
        dict(mu=0.0, n_sites=3),
        dict(mu=1.0, n_sites=0),
        dict(mu=1.0, n_sites=3, dropouts=-1),
        dict(mu=1.0, n_sites=3, colluders=2, dropouts=1),
        dict(mu=float("inf"), n_sites=3),
    ]:
        with pytest.raises(ValueError):
            skellam_site_share(**bad)


def test_the_calibrated_mu_is_the_smallest_that_meets_epsilon():
    mu = skellam_mu(2.0, n_labels=30, delta=1e-5, rounds=3)
    assert skellam_epsilon(mu, 30, 1e-5, rounds=3) <= 2.0
    assert skellam_epsilon(mu / 1.01, 30, 1e-5, rounds=3) > 2.0
    assert skellam_epsilon(mu, 30, 1e-5, rounds=3) == skellam_epsilon(mu, 90, 1e-5)


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: skellam_epsilon(10.0, 0, 1e-5), "n_labels must be an integer >= 1"),
        (lambda: skellam_epsilon(10.0, 5, 1.5), "delta must be a number in"),
        (lambda: skellam_epsilon(-1.0, 5, 1e-5), "mu must be a finite number > 0"),
        (lambda: skellam_mu(0.0, 5, 1e-5), "epsilon must be a finite number > 0"),
        (lambda: skellam_pld(10.0, 0), "n_shifts must be an integer >= 1"),
    ],
)
def test_bad_arguments_are_named(call, match):
    with pytest.raises(ValueError, match=match):
        call()
