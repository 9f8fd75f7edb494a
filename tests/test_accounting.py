"""Exact, incremental privacy accounting (cotrain.privacy.accounting.composition): the audit's
findings.

1. mixed randomized response + GNMax is exact and fast (was dp-accounting's PLD at 1e-4,
   recomputed from round 1: 22-38 s a round);
2. RunningComposition composes round by round without recomputing;
3. dp-accounting's PLD, where still used, is discretised relative to ε;
4. forced PLD on a mixed list no longer doubles the Gaussian sensitivity (7.264 vs 4.942);
5. forced RDP composes a repeat count at once (XOR s* = 500: 14 s -> ms);
6. the randomized-response tail is exact at δ = 1e-12..1e-15 (the FFT drifted).
"""

from __future__ import annotations

import math
import time

import mpmath as mp
import numpy as np
import pytest
from scipy import optimize
from scipy.special import log_ndtr, logsumexp

from consensus import NoisyArgmax
from cotrain.privacy import RandomizedResponse, XORMechanism, epsilon_spent, gaussian_epsilon
from cotrain.privacy.accounting import composition as comp_mod
from cotrain.privacy.accounting.composition import RunningComposition, pld_interval
from cotrain.privacy.accounting.epsilon import gaussian_event, rr_event, self_composed

dp = pytest.importorskip("dp_accounting")
from dp_accounting.pld import privacy_loss_distribution as pld_lib  # noqa: E402

REPLACE_ONE = dp.NeighboringRelation.REPLACE_ONE


def rr_q(label_eps: float, k: int) -> float:
    """dp-accounting's RR noise parameter for a per-label ε' (as RandomizedResponse makes it)."""
    return k * math.exp(-label_eps) / (1.0 + (k - 1) * math.exp(-label_eps))


def audit_events() -> tuple:
    """The audit's case: RR (K = 10, ε' = 0.5, s* = 300 labels) and GNMax (σ = 1), |U| = 300."""
    rr = RandomizedResponse(epsilon=150.0, sensitivity=300).dp_event(10, 300)
    gnmax = NoisyArgmax(sigma=1.0).dp_event(10, 300)
    return rr, gnmax


# ------------------------------------------------------------------ independent references


def mp_rr_law(q: float, k: int, n: int) -> tuple[mp.mpf, dict[int, mp.mpf]]:
    """(ε₀, {j: P(#plus − #minus = j)}) of n labels of K-ary RR, multinomial in mpmath."""
    q = mp.mpf(q)
    plus, minus, zero = 1 - q + q / k, q / k, (k - 2) * q / k
    law: dict[int, mp.mpf] = {}
    for a in range(n + 1):
        for b in range(n + 1 - a):
            if zero == 0 and a + b != n:
                continue
            term = mp.factorial(n) / (mp.factorial(a) * mp.factorial(b) * mp.factorial(n - a - b))
            law[a - b] = law.get(a - b, 0) + term * plus**a * minus**b * zero ** (n - a - b)
    return mp.log(plus / minus), law


def mp_delta(eps, support: list[tuple[mp.mpf, mp.mpf]], mu) -> mp.mpf:
    """δ(ε) = Σ P(ℓ) δ_G(ε − ℓ) in mpmath (δ_G = (1 − e^x)₊ at μ = 0)."""
    eps, mu = mp.mpf(eps), mp.mpf(mu)
    total = mp.mpf(0)
    for loss, prob in support:
        x = eps - loss
        if mu == 0:
            total += prob * (1 - mp.exp(x)) if x < 0 else 0
        else:
            total += prob * (mp.ncdf(mu / 2 - x / mu) - mp.exp(x) * mp.ncdf(-mu / 2 - x / mu))
    return total


def assert_mp_root(got: float, support, mu, delta, rel: float = 1e-9) -> None:
    """The exact ε (mpmath, 60 digits) lies within ``rel`` of ``got``: δ changes sign there."""
    assert mp_delta(got * (1 - rel), support, mu) > delta > mp_delta(got * (1 + rel), support, mu)


def log_space_law(q: float, k: int, n_labels: int) -> tuple[float, np.ndarray]:
    """(ε₀, log P(j) for j = −n..n) by n log-space convolutions with the one-label law."""
    q = float(q)
    logs = np.log([q / k, (k - 2) * q / k if k > 2 else 0.0, 1 - q + q / k])  # −1, 0, +1
    logp = np.full(2 * n_labels + 1, -np.inf)
    logp[n_labels] = 0.0
    with np.errstate(divide="ignore"):
        for _ in range(n_labels):
            shifted = [np.roll(logp, -1) + logs[0], logp + logs[1], np.roll(logp, 1) + logs[2]]
            logp = np.logaddexp.reduce(shifted, axis=0)
    return math.log1p(k * (1 - q) / q), logp


def log_space_epsilon(eps0: float, logp: np.ndarray, mu: float, delta: float) -> float:
    """ε at δ of the lattice law (log P) plus a Gaussian μ, summed in log space."""
    n = (logp.size - 1) // 2
    keep = np.isfinite(logp)
    losses, logp = eps0 * np.arange(-n, n + 1)[keep], logp[keep]

    def log_delta(eps: float) -> float:
        x = eps - losses
        a = log_ndtr(mu / 2 - x / mu)
        b = x + log_ndtr(-mu / 2 - x / mu)
        return float(logsumexp(logp + a + np.log1p(-np.exp(np.minimum(b - a, 0.0)))))

    return optimize.brentq(lambda e: log_delta(e) - math.log(delta), 0.0, 1e5, xtol=1e-12)


# ------------------------------------------------------------------ 1. mixed RR + GNMax


def test_mixed_rr_gaussian_matches_mpmath():
    q, k, n, mu = rr_q(0.5, 10), 10, 40, 2.0
    eps0, law = mp_rr_law(q, k, n)
    support = [(j * eps0, p) for j, p in law.items()]
    events = [self_composed(rr_event(q, k), n), gaussian_event(1 / mu)]
    for delta in (1e-5, 1e-10):
        assert_mp_root(epsilon_spent(events, delta), support, mu, delta)
    # δ_G(x) at x < 0 is the same closed form: check one term against a numerical integral
    x = mp.mpf(-1.5)
    integral = mp.quad(
        lambda g: (1 - mp.exp(x - g)) * mp.npdf(g, mu**2 / 2, mu), [x, mu**2 / 2, mp.inf]
    )
    assert mp_delta(x, [(mp.mpf(0), mp.mpf(1))], mu) == pytest.approx(float(integral), rel=1e-12)


@pytest.mark.slow
def test_several_rr_kinds_and_gaussian_match_mpmath():
    # two lattices with different steps (outer sum) and a third on the first's lattice
    a = (rr_q(0.5, 10), 10, 12)
    b = (2 / (math.exp(0.3) + 1), 2, 10)  # binary RR at ε₀ = 0.3
    c = (rr_q(0.5, 3), 3, 8)  # same ε₀ = 0.5, other K: convolved on one lattice
    mu = 1.5
    laws = [mp_rr_law(*leaf) for leaf in (a, b, c)]
    support = [(mp.mpf(0), mp.mpf(1))]
    for eps0, law in laws:
        support = [(l0 + j * eps0, p0 * p) for l0, p0 in support for j, p in law.items()]
    events = [self_composed(rr_event(q, k), n) for q, k, n in (a, b, c)]
    events.append(gaussian_event(1 / mu))
    got = epsilon_spent(events, 1e-6)
    assert_mp_root(got, support, mu, 1e-6)
    # the PLD route rounds each lattice's law (two here) and the Gaussian up once
    bound = got + 3 * pld_interval(got)
    assert got <= epsilon_spent(events, 1e-6, accountant="pld") <= bound


def test_lattices_too_large_to_combine_go_through_the_pld(monkeypatch):
    a = self_composed(rr_event(rr_q(0.5, 10), 10), 300)
    b = XORMechanism(epsilon=1.0, sensitivity=3000).dp_event(10, 5000)
    g = gaussian_event(0.5)
    exact = epsilon_spent([a, b, g], 1e-5)
    monkeypatch.setattr(comp_mod, "cross_support", lambda laws, floor: None)
    fallback = epsilon_spent([a, b, g], 1e-5)
    assert fallback == epsilon_spent([a, b, g], 1e-5, accountant="pld")
    assert exact <= fallback <= exact + 3 * pld_interval(exact)


def test_audit_case_ten_rounds_exact_and_fast():
    rr, gnmax = audit_events()
    q, z = rr.event.noise_parameter, float(gnmax.noise_multiplier)
    assert rr.count == 300 and z == pytest.approx(1 / math.sqrt(600))
    start = time.perf_counter()
    acc = RunningComposition(1e-5)
    got = [acc.compose(rr).compose(gnmax).epsilon() for _ in range(10)]
    elapsed = time.perf_counter() - start
    # independent reference: the lattice law by 3000 log-space convolutions of one label
    eps0, logp = log_space_law(q, 10, 3000)
    for t in (1, 2, 10):
        n = 300 * t
        sub = logp[3000 - n : 3000 + n + 1] if t == 10 else log_space_law(q, 10, n)[1]
        ref = log_space_epsilon(eps0, sub, math.sqrt(t) / z, 1e-5)
        assert got[t - 1] == pytest.approx(ref, rel=1e-9)
    assert got[0] == pytest.approx(414.2742069, rel=1e-9)
    # the target is 2 s for all ten (the old path took 22-38 s for round 1 alone)
    assert elapsed < 10.0


def test_audit_case_round_one_against_fine_pld():
    rr, gnmax = audit_events()
    q, z = rr.event.noise_parameter, float(gnmax.noise_multiplier)
    exact = epsilon_spent([rr, gnmax], 1e-5)
    interval = 1e-2
    pld = pld_lib.from_randomized_response(
        q, 10, value_discretization_interval=interval, neighboring_relation=REPLACE_ONE
    ).self_compose(300)
    pld = pld.compose(pld_lib.from_gaussian_mechanism(z, value_discretization_interval=interval))
    ref = pld.get_epsilon_for_delta(1e-5)
    # pessimistic PLD: above the exact value, by at most one interval per rounded loss
    assert exact <= ref <= exact + 301 * interval
    assert ref - exact < 0.3  # 414.531 vs 414.274


# ------------------------------------------------------------------ 2. incremental


def test_running_composition_equals_epsilon_spent_round_by_round(monkeypatch):
    rr, gnmax = audit_events()
    asked: list[int] = []
    real = comp_mod.rr_lattice_law

    def spy(q, k, count):
        asked.append(count)
        return real(q, k, count)

    monkeypatch.setattr(comp_mod, "rr_lattice_law", spy)
    acc = RunningComposition(1e-5)
    for t in range(1, 6):
        acc.compose(rr).compose(gnmax)
        assert acc.epsilon() == pytest.approx(epsilon_spent([rr, gnmax] * t, 1e-5), rel=1e-10)
    # every round folded in only its own 300 labels (epsilon_spent asked for 300·t at once)
    assert asked[::2] == [300] * 5
    assert asked[1::2] == [300 * t for t in range(1, 6)]
    # count and copy
    fork = acc.copy().compose(rr, count=5).compose(gnmax, count=5)
    assert fork.epsilon() == pytest.approx(epsilon_spent([rr, gnmax] * 10, 1e-5), rel=1e-10)
    assert acc.epsilon() == pytest.approx(epsilon_spent([rr, gnmax] * 5, 1e-5), rel=1e-12)


def test_running_composition_basics_and_validation():
    acc = RunningComposition(1e-5)
    assert acc.epsilon() == 0.0
    acc.compose(dp.NoOpDpEvent()).compose(rr_event(0.5, 1))  # nothing private
    assert acc.epsilon() == 0.0
    g = gaussian_event(2.0)
    assert acc.compose(g, count=4).epsilon() == pytest.approx(gaussian_epsilon(1.0, 1e-5))
    assert acc.compose(dp.ComposedDpEvent([g, g])).epsilon() == pytest.approx(
        gaussian_epsilon(2 / math.sqrt(6), 1e-5)
    )
    assert RunningComposition(1e-5).compose(dp.NonPrivateDpEvent()).epsilon() == math.inf
    assert RunningComposition(1e-5).compose(rr_event(0.0, 2)).epsilon() == math.inf
    assert "RunningComposition(delta=1e-05" in repr(acc)
    for bad in (-1, 1.5, True, "2"):
        with pytest.raises(ValueError, match="count"):
            RunningComposition(1e-5).compose(g, count=bad)
    for bad in (0.0, 1.0, True, "x"):
        with pytest.raises(ValueError, match="delta"):
            RunningComposition(bad)
    with pytest.raises(ValueError, match="accountant"):
        RunningComposition(1e-5, accountant="exact")
    with pytest.raises(TypeError, match="DpEvent"):
        RunningComposition(1e-5).compose("round 1")


# ------------------------------------------------------------------ 3. PLD discretisation


def test_pld_for_other_events_uses_interval_relative_to_epsilon():
    sampled = dp.PoissonSampledDpEvent(0.1, dp.GaussianDpEvent(2.0))
    got = epsilon_spent([sampled] * 20, 1e-5)
    # reference: dp-accounting's PLD accountant, first coarse (0.05) for ε̂, then at 1e-3·ε̂
    coarse = dp.pld.PLDAccountant(value_discretization_interval=0.05)
    coarse.compose(sampled, 20)
    estimate = coarse.get_epsilon(1e-5)
    assert pld_interval(estimate) == pytest.approx(1e-3 * estimate) and estimate > 1
    fine = dp.pld.PLDAccountant(value_discretization_interval=pld_interval(estimate))
    fine.compose(sampled, 20)
    assert got == pytest.approx(fine.get_epsilon(1e-5), rel=1e-9)
    # with an RR leaf (pure ε₀ = 1): the exact RR law composed with the sampled Gaussian
    rr = rr_event(rr_q(1.0, 2), 2)
    mixed = epsilon_spent([rr, sampled], 1e-5)
    assert epsilon_spent([rr], 1e-5) < mixed <= 1.0 + epsilon_spent([sampled], 1e-5) + 1e-9


def test_forced_pld_round_is_fast_and_within_one_interval():
    rr, gnmax = audit_events()
    exact = epsilon_spent([rr, gnmax], 1e-5)
    start = time.perf_counter()
    forced = epsilon_spent([rr, gnmax], 1e-5, accountant="pld")
    assert time.perf_counter() - start < 3.0  # target 0.3 s; 1e-4 took 22-38 s
    assert pld_interval(exact) == pytest.approx(0.4142742, rel=1e-6)
    assert exact <= forced <= exact + pld_interval(exact)


# ------------------------------------------------------------------ 4. forced PLD sensitivity


def test_forced_pld_keeps_gaussian_sensitivity():
    rr = rr_event(2 / (math.exp(3.0) + 1), 2)  # binary RR at ε = 3
    gnmax = NoisyArgmax(sigma=50.0).dp_event(2, 300)
    exact = epsilon_spent([rr, gnmax], 1e-5)
    assert exact == pytest.approx(4.942475468, rel=1e-9)
    # the old forced path: one PLDAccountant(REPLACE_ONE) doubles the Gaussian's Δ₂
    doubled = dp.pld.PLDAccountant(REPLACE_ONE)
    doubled.compose(rr)
    doubled.compose(gnmax)
    assert doubled.get_epsilon(1e-5) == pytest.approx(7.264, abs=1e-3)
    # dp-accounting built the right way: RR under REPLACE_ONE, the Gaussian at sensitivity 1
    interval = 1e-4
    right = pld_lib.from_randomized_response(
        rr.noise_parameter, 2, value_discretization_interval=interval
    ).compose(
        pld_lib.from_gaussian_mechanism(
            gnmax.noise_multiplier, value_discretization_interval=interval
        )
    )
    assert right.get_epsilon_for_delta(1e-5) == pytest.approx(exact, abs=10 * interval)
    forced = epsilon_spent([rr, gnmax], 1e-5, accountant="pld")
    assert exact <= forced <= exact + pld_interval(exact)


# ------------------------------------------------------------------ 5. forced RDP with counts


@pytest.mark.slow
def test_rdp_accountant_takes_randomized_response_counts():
    one = rr_event(2 * XORMechanism(epsilon=1.0, sensitivity=50).flip_probability(), 2)
    singles = dp.rdp.RdpAccountant(neighboring_relation=REPLACE_ONE)
    for _ in range(50):
        singles.compose(one)
    counted = dp.rdp.RdpAccountant(neighboring_relation=REPLACE_ONE)
    counted.compose(one, 50)
    assert counted.get_epsilon(1e-5) == pytest.approx(singles.get_epsilon(1e-5), rel=1e-12)
    # ... while the PLD accountant drops the count of randomized response (the pitfall)
    pld = dp.pld.PLDAccountant(REPLACE_ONE)
    pld.compose(one, 50)
    assert pld.get_epsilon(1e-5) == pytest.approx(epsilon_spent([one], 1e-5), abs=1e-3)
    xor50 = XORMechanism(epsilon=1.0, sensitivity=50).dp_event(10, 500)
    got = epsilon_spent([xor50], 1e-5, accountant="rdp")
    assert got == pytest.approx(singles.get_epsilon(1e-5), rel=1e-12)


def test_forced_rdp_xor_large_sensitivity_is_fast():
    xor = XORMechanism(epsilon=1.0, sensitivity=500).dp_event(10, 5000)
    start = time.perf_counter()
    got = epsilon_spent([xor], 1e-5, accountant="rdp")
    assert time.perf_counter() - start < 1.0  # expanding 500 single events took 14 s
    ref = dp.rdp.RdpAccountant(neighboring_relation=REPLACE_ONE)
    ref.compose(xor)
    assert got == pytest.approx(ref.get_epsilon(1e-5), rel=1e-12)
    assert got == pytest.approx(0.1657038586, rel=1e-8)  # the old, expanded answer
    # mixed with a Gaussian: RDP reads the Gaussian at its own sensitivity under REPLACE_ONE
    g = gaussian_event(3.0)
    both = epsilon_spent([xor, g], 1e-5, accountant="rdp")
    ref.compose(g)
    assert both == pytest.approx(ref.get_epsilon(1e-5), rel=1e-12)


# ------------------------------------------------------------------ 6. tails at tiny δ


@pytest.mark.parametrize(
    "k, label_eps, n, delta, old",
    [
        (10, 0.1, 150, 1e-15, 7.1679),  # the FFT path's answer; exact is 4.5062
        (5, 0.2, 120, 1e-15, 17.1062),
        (10, 0.5, 60, 1e-12, None),
        (2, 0.05, 400, 1e-14, None),
    ],
)
def test_randomized_response_tail_matches_mpmath(k, label_eps, n, delta, old):
    q = rr_q(label_eps, k) if k > 2 else 2 / (math.exp(label_eps) + 1)
    eps0, law = mp_rr_law(q, k, n)
    support = [(j * eps0, p) for j, p in law.items()]
    got = epsilon_spent([self_composed(rr_event(q, k), n)], delta)
    assert_mp_root(got, support, 0, delta)
    if old is not None:  # what the audit saw: the FFT path's ε is not a root
        assert mp_delta(old, support, 0) < delta / 2
