"""cotrain.privacy: mechanisms (flip rates, likelihood ratios), accounting, sensitivity, GNMax."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats
from sklearn.datasets import make_classification
from sklearn.tree import DecisionTreeClassifier

from consensus import NoisyArgmax, get_consensus, majority_vote
from cotrain.audit import sensitivity_lower_bound
from cotrain.privacy import (
    GaussianSoftLabels,
    RandomizedResponse,
    SecureTeacherVotes,
    SubsampleAndAggregate,
    XORMechanism,
    analytic_sensitivity_bound,
    epsilon_spent,
    gaussian_epsilon,
    gaussian_noise_multiplier,
)
from cotrain.privacy.accounting import composition as comp_mod
from cotrain.privacy.accounting import epsilon as acc_mod
from cotrain.privacy.accounting.composition import pld_interval

dp = pytest.importorskip("dp_accounting")

N = 100_000
Z = 5.0  # binomial tolerance in standard deviations


def binomial_ok(hits: int, n: int, p: float) -> bool:
    return abs(hits - n * p) <= Z * math.sqrt(n * p * (1 - p)) + 1


# ------------------------------------------------------------------ flip rates vs theory


@pytest.mark.parametrize("k", [2, 3, 10])
@pytest.mark.parametrize("eps, s", [(1.0, 1), (3.0, 2)])
def test_rr_flip_rate_matches_theory(k, eps, s):
    rr = RandomizedResponse(epsilon=eps, sensitivity=s)
    rng = np.random.default_rng(k)
    labels = rng.integers(k, size=N)
    noisy = rr.randomize(labels, k, rng)
    assert noisy.dtype == np.int64 and noisy.shape == (N,)
    assert noisy.min() >= 0 and noisy.max() < k
    keep = math.exp(eps / s) / (math.exp(eps / s) + k - 1)
    assert rr.keep_probability(k) == pytest.approx(keep, rel=1e-12)
    assert binomial_ok(int(np.sum(noisy == labels)), N, keep)
    if k > 2:  # a flipped label is uniform over the OTHER classes
        offsets = (noisy - labels)[noisy != labels] % k
        counts = np.bincount(offsets, minlength=k)[1:]
        assert stats.chisquare(counts).pvalue > 1e-6


@pytest.mark.parametrize("eps, s", [(1.0, 2), (8.0, 2), (4.0, 20)])
def test_xor_bit_flip_rate_and_decoding(eps, s):
    k = 5
    xor = XORMechanism(epsilon=eps, sensitivity=s)
    p = 1.0 / (1.0 + math.exp(eps / s))
    assert xor.flip_probability() == pytest.approx(p, rel=1e-12)
    rng = np.random.default_rng(1)
    labels = rng.integers(k, size=N // k)
    bits = xor.randomize_bits(labels, k, rng)
    onehot = np.eye(k, dtype=bool)[labels]
    assert binomial_ok(int(np.sum(bits ^ onehot)), bits.size, p)
    decoded = xor.randomize(labels, k, np.random.default_rng(2))
    assert decoded.dtype == np.int64 and decoded.min() >= 0 and decoded.max() < k
    assert binomial_ok(int(np.sum(decoded == labels)), labels.size, xor.keep_probability(k))


def test_xor_keep_probability_closed_form_by_enumeration():
    k, xor = 4, XORMechanism(epsilon=2.0, sensitivity=2)
    p = xor.flip_probability()
    total = 0.0  # enumerate every noisy row for true class 0
    for mask in range(1 << k):
        row = [(mask >> c) & 1 for c in range(k)]
        prob = math.prod(p if b != (c == 0) else 1 - p for c, b in enumerate(row))
        ones = sum(row)
        total += prob * ((1 / ones if row[0] else 0.0) if ones else 1 / k)
    assert xor.keep_probability(k) == pytest.approx(total, rel=1e-12)


def test_xor_decode_rule():
    rng = np.random.default_rng(0)
    single = np.eye(4, dtype=bool)[[2, 0, 3]]
    assert XORMechanism.decode(single, rng).tolist() == [2, 0, 3]
    several = np.tile(np.array([[True, False, True, False]]), (20_000, 1))
    out = XORMechanism.decode(several, rng)
    assert set(np.unique(out)) == {0, 2} and abs(np.mean(out == 0) - 0.5) < 0.02
    empty = np.zeros((40_000, 4), dtype=bool)
    counts = np.bincount(XORMechanism.decode(empty, rng), minlength=4)
    assert stats.chisquare(counts).pvalue > 1e-6


def test_gaussian_noise_std_matches_sigma():
    g = GaussianSoftLabels(epsilon=2.0, sensitivity=3)
    n, k = 50_000, 4
    sigma = g.noise_std(n)
    assert g.l2_sensitivity(n) == pytest.approx(math.sqrt(6))
    assert sigma == pytest.approx(gaussian_noise_multiplier(2.0, 1e-5) * math.sqrt(6))
    probs = np.random.default_rng(0).dirichlet(np.ones(k), size=n)
    out = g.randomize(probs, k, np.random.default_rng(7))
    noise = np.random.default_rng(7).normal(0.0, sigma, size=probs.shape)
    # the same draw, then the documented post-processing
    expected = np.clip(probs + noise, 0.0, 1.0)
    sums = expected.sum(axis=1, keepdims=True)
    expected = np.where(sums > 0, expected / np.where(sums > 0, sums, 1), 1 / k)
    np.testing.assert_allclose(out, expected)
    # the noise std is sigma: chi-square interval on the sample variance
    var = noise.var()
    assert abs(var / sigma**2 - 1) < Z * math.sqrt(2 / noise.size)
    assert np.all(out >= 0) and np.allclose(out.sum(axis=1), 1.0)
    # small sigma: identity-ish, and sigma given directly is used as is
    small = GaussianSoftLabels(sigma=1e-3).randomize(probs[:100], k, np.random.default_rng(0))
    assert np.abs(small - probs[:100]).max() < 0.01
    assert GaussianSoftLabels(sigma=0.3).noise_std(10) == 0.3


def test_gaussian_soft_keeps_absent_rows_nan():
    probs = np.array([[0.2, 0.8], [np.nan, np.nan]])
    out = GaussianSoftLabels(sigma=0.1).randomize(probs, 2, np.random.default_rng(0))
    assert np.isnan(out[1]).all() and out[0].sum() == pytest.approx(1.0)


# ------------------------------------------------------------------ likelihood ratios


def rr_logprob(out, x, k, eps_label):
    keep = -math.log1p((k - 1) * math.exp(-eps_label))
    other = keep - eps_label
    return float(np.sum(np.where(out == x, keep, other)))


@pytest.mark.parametrize("k, eps, s", [(2, 1.0, 1), (3, 0.5, 3), (10, 2.0, 5)])
def test_rr_exact_likelihood_ratio_bounded(k, eps, s):
    rr = RandomizedResponse(epsilon=eps, sensitivity=s)
    rng = np.random.default_rng(0)
    x = rng.integers(k, size=30)
    x2 = x.copy()
    x2[:s] = (x2[:s] + 1) % k  # a neighbour: s labels differ
    outputs = [x, x2, *(rr.randomize(x, k, rng) for _ in range(50))]
    worst = 0.0
    for y in outputs:
        log_ratio = rr_logprob(y, x, k, eps / s) - rr_logprob(y, x2, k, eps / s)
        assert abs(log_ratio) <= eps + 1e-9
        worst = max(worst, abs(log_ratio))
    assert worst == pytest.approx(eps)  # attained at y = x: the bound is tight


@pytest.mark.parametrize("eps, s", [(1.0, 2), (3.0, 6)])
def test_xor_exact_likelihood_ratio_bounded(eps, s):
    xor, k = XORMechanism(epsilon=eps, sensitivity=s), 4
    p = xor.flip_probability()
    rng = np.random.default_rng(0)
    x = rng.integers(k, size=20)
    x2 = x.copy()
    x2[: s // 2] = (x2[: s // 2] + 1) % k  # s/2 changed labels = s flipped bits
    f, f2 = np.eye(k, dtype=bool)[x], np.eye(k, dtype=bool)[x2]
    assert int(np.sum(f ^ f2)) == s

    def logprob(bits, fx):
        d = int(np.sum(bits ^ fx))
        return d * math.log(p) + (bits.size - d) * math.log1p(-p)

    outputs = [f, f2, *(xor.randomize_bits(x, k, rng) for _ in range(50))]
    ratios = [abs(logprob(b, f) - logprob(b, f2)) for b in outputs]
    assert max(ratios) <= eps + 1e-9 and max(ratios) == pytest.approx(eps)


def _empirical_ratio_ok(a, b, n_out, eps, n):
    ha = np.bincount(a, minlength=n_out) / n
    hb = np.bincount(b, minlength=n_out) / n
    for pa, pb in zip(ha, hb, strict=True):
        # tolerance: 5 sd of each frequency estimate
        sa, sb = Z * math.sqrt(pa * (1 - pa) / n), Z * math.sqrt(pb * (1 - pb) / n)
        assert pa - sa <= math.exp(eps) * (pb + sb) + 1e-12
        assert pb - sb <= math.exp(eps) * (pa + sa) + 1e-12


def test_empirical_histograms_within_e_eps():
    n, rng = 200_000, np.random.default_rng(3)
    # RR, K = 3, one label, neighbours 0 vs 1
    rr = RandomizedResponse(epsilon=1.0, unit="label")
    a = rr.randomize(np.zeros(n, dtype=np.int64), 3, rng)
    b = rr.randomize(np.ones(n, dtype=np.int64), 3, rng)
    _empirical_ratio_ok(a, b, 3, 1.0, n)
    # XOR, K = 2, one label (2 bits), s* = 2: histogram of the 4 bit patterns
    xor = XORMechanism(epsilon=1.0, sensitivity=2)
    ba = xor.randomize_bits(np.zeros(n, dtype=np.int64), 2, rng)
    bb = xor.randomize_bits(np.ones(n, dtype=np.int64), 2, rng)
    code = np.array([1, 2])
    _empirical_ratio_ok(ba.astype(int) @ code, bb.astype(int) @ code, 4, 1.0, n)
    # and the decoded labels (post-processing)
    da, db = xor.decode(ba, rng), xor.decode(bb, rng)
    _empirical_ratio_ok(da, db, 2, 1.0, n)


# ------------------------------------------------------------------ accounting


def pld_reference(events, delta, relation=None, interval=1e-4):
    """dp-accounting's PLD accountant fed every single event (never a repeat count)."""
    relation = relation or dp.NeighboringRelation.REPLACE_ONE
    accountant = dp.pld.PLDAccountant(relation, value_discretization_interval=interval)
    for event in events:
        if isinstance(event, dp.SelfComposedDpEvent):
            for _ in range(event.count):
                accountant.compose(event.event)
        else:
            accountant.compose(event)
    return accountant.get_epsilon(delta)


@pytest.mark.parametrize(
    "mech, k",
    [
        (RandomizedResponse(epsilon=1.0, unit="label"), 10),
        (RandomizedResponse(epsilon=0.5, sensitivity=3), 4),
        (XORMechanism(epsilon=1.0, sensitivity=4), 3),
    ],
)
@pytest.mark.parametrize("rounds", [1, 3, 8])
def test_pure_events_match_dp_accounting(mech, k, rounds):
    events = [mech.dp_event(k, 100)] * rounds
    ref = pld_reference(events, 1e-5)
    got = epsilon_spent(events, 1e-5)
    # exact lattice composition vs dp-accounting's (pessimistic, discretised) PLD
    assert got == pytest.approx(ref, rel=2e-3, abs=1e-3)
    assert got <= ref + 1e-9
    # forced PLD: dp-accounting's PLD of the exact law rounded up once at pld_interval(ε): an
    # upper bound within one interval of the exact value, and no looser than dp-accounting's
    # own per-label RR PLD at that interval
    interval = pld_interval(got)
    forced = epsilon_spent(events, 1e-5, accountant="pld")
    assert got - 1e-9 <= forced <= got + interval + 1e-9
    assert forced <= pld_reference(events, 1e-5, interval=interval) + 1e-9
    assert got <= rounds * mech.epsilon + 1e-9  # basic composition bound
    assert epsilon_spent(events, 1e-5, accountant="basic") == pytest.approx(rounds * mech.epsilon)


def test_one_round_is_epsilon():
    for mech in (
        RandomizedResponse(epsilon=1.5, sensitivity=2),
        XORMechanism(epsilon=1.5, sensitivity=6),
    ):
        eps = epsilon_spent([mech.dp_event(5, 1000)], 1e-5)
        assert 1.4 < eps <= 1.5 + 1e-9
        # ... and exactly ε at (almost) δ = 0
        assert epsilon_spent([mech.dp_event(5, 1000)], 1e-15) == pytest.approx(1.5, abs=1e-6)


def test_rr_repeat_count_pitfall():
    rr = RandomizedResponse(epsilon=1.0, unit="label")
    one = rr.dp_event(10, 100)
    k = 5
    # dp-accounting's PLD accountant drops the repeat count of RR: the pitfall
    naive = dp.pld.PLDAccountant(dp.NeighboringRelation.REPLACE_ONE)
    naive.compose(one, k)
    assert naive.get_epsilon(1e-5) == pytest.approx(epsilon_spent([one], 1e-5), abs=1e-3)
    # composing a LIST of k events must cost more than one event
    assert epsilon_spent([one] * k, 1e-5) > 3 * epsilon_spent([one], 1e-5)
    # and a SelfComposed event is expanded with its count, however nested
    nested = dp.SelfComposedDpEvent(one, k)
    assert epsilon_spent([nested], 1e-5) == pytest.approx(epsilon_spent([one] * k, 1e-5))
    composed = dp.ComposedDpEvent([one] * k)
    assert epsilon_spent([composed], 1e-5) == pytest.approx(epsilon_spent([one] * k, 1e-5))


def test_xor_large_sensitivity_is_cheap_and_tight():
    # s* = 3000 bits, 20 rounds: 60,000 binary RR compositions, exact and fast
    event = XORMechanism(epsilon=1.0, sensitivity=3000).dp_event(10, 5000)
    eps = epsilon_spent([event] * 20, 1e-5)
    one = epsilon_spent([event], 1e-5)
    # the per-round loss is a sum of 3000 tiny ±ε/s* terms and concentrates: at δ = 1e-5 one
    # round costs far less than its pure ε = 1, and 20 rounds ~ sqrt(20) rounds' worth
    assert one < 0.2 and 3 * one < eps < 6 * one
    # dp-accounting's PLD, applied per leaf, is a valid but looser bound
    from dp_accounting.pld import privacy_loss_distribution as pld_lib

    q = event.event.noise_parameter
    pld = pld_lib.from_randomized_response(
        q, 2, neighboring_relation=dp.NeighboringRelation.REPLACE_ONE
    )
    assert eps <= pld.self_compose(60_000).get_epsilon_for_delta(1e-5) + 1e-9


def test_sensitivity_caps_at_what_n_labels_can_change():
    rr = RandomizedResponse(epsilon=2.0, sensitivity=50)
    assert rr.dp_event(4, 10).count == 10  # only 10 labels exist
    xor = XORMechanism(epsilon=2.0, sensitivity=50)
    assert xor.dp_event(4, 10).count == 20  # 2 bits per label
    assert isinstance(rr.dp_event(1, 10), dp.NoOpDpEvent)  # one class: nothing to leak
    assert epsilon_spent([rr.dp_event(1, 10)] * 3, 1e-5) == 0.0
    assert epsilon_spent([], 1e-5) == 0.0


@pytest.mark.slow
@pytest.mark.parametrize("rounds", [1, 5, 20])
def test_gaussian_events_compose_like_dp_accounting(rounds):
    g = GaussianSoftLabels(sigma=3.0, sensitivity=2)
    event = g.dp_event(3, 100)
    assert event.noise_multiplier == pytest.approx(3.0 / 2.0)
    events = [event] * rounds
    rdp_acc = dp.rdp.RdpAccountant()
    for e in events:
        rdp_acc.compose(e)
    rdp_ref = rdp_acc.get_epsilon(1e-5)
    assert epsilon_spent(events, 1e-5, accountant="rdp") == pytest.approx(rdp_ref, rel=1e-9)
    pld_ref = pld_reference(events, 1e-5, dp.NeighboringRelation.ADD_OR_REMOVE_ONE)
    got = epsilon_spent(events, 1e-5)  # exact: one Gaussian with z / sqrt(rounds)
    assert got == pytest.approx(pld_ref, rel=1e-3)
    assert got <= rdp_ref + 1e-9
    assert got == pytest.approx(gaussian_epsilon(1.5 / math.sqrt(rounds), 1e-5))


def test_gaussian_calibration_hits_epsilon():
    for eps in (0.3, 1.0, 4.0):
        g = GaussianSoftLabels(epsilon=eps, sensitivity=7)
        assert epsilon_spent([g.dp_event(5, 200)], g.delta) == pytest.approx(eps, rel=1e-6)
        # tighter than the classic calibration where that one is valid
        if eps < 1:
            assert g.noise_std(200) < math.sqrt(2 * math.log(1.25 / 1e-5)) / eps * math.sqrt(14)


def test_mixed_events_are_composed_exactly():
    rr_e = RandomizedResponse(epsilon=1.0, unit="label").dp_event(3, 50)
    g_e = GaussianSoftLabels(sigma=2.0, sensitivity=1).dp_event(3, 50)
    mixed = epsilon_spent([rr_e, g_e, rr_e], 1e-5)
    assert max(epsilon_spent([rr_e] * 2, 1e-5), epsilon_spent([g_e], 1e-5)) < mixed
    assert mixed <= epsilon_spent([rr_e, g_e, rr_e], 1e-5, accountant="basic") + 1e-9


def test_basic_composition_fallback_without_dp_accounting(monkeypatch):
    monkeypatch.setattr(acc_mod, "_dp", lambda: None)
    mech = RandomizedResponse(epsilon=1.0, unit="label")
    event = mech.dp_event(3, 100)
    assert isinstance(event, acc_mod.RandomizedResponseEvent)
    # a single kind of RR is still composed exactly (no dp-accounting needed)
    assert epsilon_spent([event] * 3, 1e-5) < 3.0
    g = GaussianSoftLabels(sigma=2.0).dp_event(3, 100)
    basic = epsilon_spent([event, g], 1e-5, accountant="basic")
    assert basic == pytest.approx(1.0 + gaussian_epsilon(g.noise_multiplier, 1e-5 / 1))
    # randomized response and Gaussian events mix exactly without dp-accounting too
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        mixed = epsilon_spent([event, g], 1e-5)
    monkeypatch.undo()
    with_dp = [mech.dp_event(3, 100), GaussianSoftLabels(sigma=2.0).dp_event(3, 100)]
    assert mixed == pytest.approx(epsilon_spent(with_dp, 1e-5), rel=1e-12)
    assert mixed < basic
    # an event no accountant knows: a warning, then basic composition, which has no ε for it
    monkeypatch.setattr(acc_mod, "_dp", lambda: None)
    monkeypatch.setattr(comp_mod, "_dp_accounting", lambda: None)

    class Odd:
        pass

    with pytest.warns(RuntimeWarning, match="basic composition"), pytest.raises(ValueError):
        epsilon_spent([event, Odd()], 1e-5)
    with pytest.raises(ImportError):
        epsilon_spent([event], 1e-5, accountant="rdp")


# ------------------------------------------------------------------ NoisyArgmax (GNMax)


def test_noisy_argmax_sigma_zero_is_majority_vote():
    rng = np.random.default_rng(0)
    votes = rng.integers(-1, 4, size=(7, 500))
    votes[:, 0] = -1
    np.testing.assert_array_equal(
        NoisyArgmax(sigma=0.0)(votes, n_classes=4), majority_vote(votes, n_classes=4)
    )
    w = rng.random(7)
    np.testing.assert_array_equal(
        NoisyArgmax(sigma=0.0)(votes, n_classes=4, weights=w),
        majority_vote(votes, n_classes=4, weights=w),
    )


def test_noisy_argmax_seeded_and_flips():
    votes = np.tile(np.array([[0], [0], [0], [1], [2]]), (1, 2000))
    a, b = NoisyArgmax(sigma=20.0, random_state=3), NoisyArgmax(sigma=20.0, random_state=3)
    first_a, first_b = a(votes, n_classes=3), b(votes, n_classes=3)
    np.testing.assert_array_equal(first_a, first_b)
    second_a = a(votes, n_classes=3)
    np.testing.assert_array_equal(second_a, b(votes, n_classes=3))
    assert not np.array_equal(first_a, second_a)  # successive calls: fresh noise
    assert np.mean(first_a != 0) > 0.3  # large sigma flips labels
    assert np.mean(NoisyArgmax(sigma=0.1, random_state=0)(votes, n_classes=3) == 0) == 1.0
    assert np.all(NoisyArgmax(sigma=5.0, sensitivity=0)(np.full((3, 4), -1), n_classes=2) == -1)
    gen = NoisyArgmax(sigma=1.0, random_state=np.random.default_rng(0))
    assert gen(votes, n_classes=3).shape == (2000,)


def test_noisy_argmax_registered_and_validated():
    assert isinstance(get_consensus("gnmax"), NoisyArgmax)
    assert isinstance(get_consensus("noisy_argmax"), NoisyArgmax)
    assert NoisyArgmax(sigma=2.0, random_state=1).get_params() == {
        "random_state": 1,
        "sigma": 2.0,
        "sensitivity": None,
        "delta": 1e-5,
        "budget": None,
    }
    assert NoisyArgmax.output == "hard"
    with pytest.raises(ValueError, match="sigma"):
        NoisyArgmax(sigma=-1.0)(np.zeros((2, 2), dtype=int), n_classes=2)
    with pytest.raises(ValueError, match="random_state"):
        NoisyArgmax(sigma=1.0, random_state="x")(np.zeros((2, 2), dtype=int), n_classes=2)


# ------------------------------------------------------------------ sensitivity


@pytest.mark.slow
def test_benign_sensitivity_search_range_and_determinism():
    X, y = make_classification(n_samples=80, n_features=5, random_state=0)
    X_pub = make_classification(n_samples=60, n_features=5, random_state=1)[0]
    est = DecisionTreeClassifier()
    kw = {"strategies": ("random_copy",), "n_rounds": 1, "n_records": 15, "random_state": 0}
    s1 = sensitivity_lower_bound(est, X, y, X_pub, **kw)
    s2 = sensitivity_lower_bound(est, X, y, X_pub, n_jobs=2, **kw)
    assert s1.value == s2.value and 0 <= s1.value <= 2 * len(X_pub) and s1.value % 2 == 0
    assert s1.counts.shape == (15, 1) and 2 * s1.counts.max() == s1.value
    labels = sensitivity_lower_bound(est, X, y, X_pub, unit="labels", **kw)
    assert labels.value * 2 == s1.value
    assert est.get_params()["random_state"] is None  # the caller's estimator is untouched


def test_analytic_sensitivity_bound_known_numbers():
    # by hand: n = 10000, p = 0.01, rho = 0.05 -> z = 1.644854;
    # 100 + 1.644854 * sqrt(99) + (1.644854**2 + 2) / 3 = 100 + 16.3664 + 1.5685 = 117.93
    assert analytic_sensitivity_bound(10_000, 0.01, unit="labels") == 118
    assert analytic_sensitivity_bound(10_000, 0.01) == 236
    # p = 0: only the (z² + 2)/3 term; rho = 0.5 -> z = 0 -> ceil(2/3) = 1
    assert analytic_sensitivity_bound(500, 0.0, rho=0.5, unit="labels") == 1
    # capped at the trivial bound |U| labels
    assert analytic_sensitivity_bound(10, 0.9, unit="labels") == 10


# ------------------------------------------------------------------ validation


@pytest.mark.parametrize(
    "mech, param",
    [
        (RandomizedResponse(epsilon=0.0), "epsilon"),
        (RandomizedResponse(epsilon=-1.0), "epsilon"),
        (RandomizedResponse(epsilon=1.0, sensitivity=0), "sensitivity"),
        (RandomizedResponse(epsilon=1.0, sensitivity=1.5), "sensitivity"),
        (RandomizedResponse(epsilon=1.0, delta=0.0), "delta"),
        (RandomizedResponse(epsilon=1.0, delta=1.0), "delta"),
        (RandomizedResponse(epsilon=1.0, budget=0.0), "budget"),
        (XORMechanism(epsilon=1.0, sensitivity=0), "sensitivity"),
        (XORMechanism(epsilon=math.inf, sensitivity=2), "epsilon"),
        (GaussianSoftLabels(sigma=0.0), "sigma"),
        (GaussianSoftLabels(), "sigma"),
        (GaussianSoftLabels(sigma=1.0, epsilon=1.0), "sigma"),
        (GaussianSoftLabels(epsilon=1.0, budget=-2), "budget"),
        (RandomizedResponse(epsilon=1.0, unit="records"), "unit"),
        (RandomizedResponse(epsilon=1.0, sensitivity=5, unit="label"), "sensitivity"),
        (XORMechanism(epsilon=1.0, sensitivity=6, unit="label"), "sensitivity"),
        (GaussianSoftLabels(sigma=1.0, sensitivity=3, unit="label"), "sensitivity"),
    ],
)
def test_parameters_validated_on_use(mech, param):
    # stored untouched
    assert mech.get_params()[param] is getattr(mech, param)
    with pytest.raises(ValueError, match=param):
        mech.validate()
    with pytest.raises(ValueError, match=param):
        mech.dp_event(3, 10)


@pytest.mark.parametrize(
    "make",
    [
        lambda e: RandomizedResponse(epsilon=e),
        lambda e: XORMechanism(epsilon=e, sensitivity=2),
        lambda e: GaussianSoftLabels(epsilon=e),
        lambda e: SubsampleAndAggregate(epsilon=e),
        lambda e: SecureTeacherVotes(epsilon=e),
    ],
    ids=["randomized-response", "xor", "gaussian-soft", "teachers", "secure-votes"],
)
def test_an_epsilon_that_protects_nothing_is_warned_before_training(make):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        make(20.0).validate()  # at the threshold: no warning
    with pytest.warns(UserWarning, match=r"epsilon=1e\+09 protects nothing in practice: above 20"):
        make(1e9).validate()


def test_bad_inputs_and_params():
    rr = RandomizedResponse(epsilon=1.0, unit="label")
    with pytest.raises(ValueError, match="class codes"):
        rr.randomize(np.array([0, 3]), 3, np.random.default_rng(0))
    with pytest.raises(ValueError, match="n_classes"):
        rr.randomize(np.array([0]), 0, np.random.default_rng(0))
    with pytest.raises(ValueError, match="shape"):
        GaussianSoftLabels(sigma=1.0).randomize(np.ones((2, 3)), 2, np.random.default_rng(0))
    with pytest.raises(ValueError, match="delta"):
        epsilon_spent([], 0.0)
    with pytest.raises(ValueError, match="accountant"):
        epsilon_spent([], 1e-5, accountant="nope")
    with pytest.raises(ValueError, match="stability"):
        analytic_sensitivity_bound(10, 1.5)
    with pytest.raises(ValueError, match="rho"):
        analytic_sensitivity_bound(10, 0.1, rho=0.0)
    assert rr.set_params(epsilon=2.0).epsilon == 2.0
    assert repr(rr) == (
        "RandomizedResponse(budget=None, delta=1e-05, epsilon=2.0, sensitivity=None, unit='label')"
    )
    with pytest.raises(ValueError, match="invalid parameter"):
        rr.set_params(sigma=1.0)
    assert RandomizedResponse.shares == ("hard",) and GaussianSoftLabels.shares == ("soft",)


# ------------------------------------------------------------------ properties


@settings(max_examples=40, deadline=None)
@given(
    k=st.integers(1, 12),
    n=st.integers(0, 50),
    eps=st.floats(0.01, 50.0),
    s=st.integers(1, 30),
    seed=st.integers(0, 2**32 - 1),
)
def test_outputs_are_always_valid_codes(k, n, eps, s, seed):
    rng = np.random.default_rng(seed)
    labels = rng.integers(k, size=n)
    for mech in (
        RandomizedResponse(epsilon=eps, sensitivity=s),
        XORMechanism(epsilon=eps, sensitivity=s),
    ):
        out = mech.randomize(labels, k, rng)
        assert out.shape == (n,) and out.dtype == np.int64
        assert n == 0 or (out.min() >= 0 and out.max() < k)
        assert epsilon_spent([mech.dp_event(k, n)], 1e-5) <= eps + 1e-9


def test_default_unit_is_record_level_with_the_trivial_sensitivity():
    """Without a sensitivity claim, every released label may change: s* = |U| labels
    (2|U| bits, all rows), the one bound that holds for any learner."""
    n = 250
    rr = RandomizedResponse(epsilon=2.0)
    assert rr.guarantee() == {"unit": "record", "adversary": "server"}
    assert rr.label_epsilon(n) == pytest.approx(2.0 / n)
    event = rr.dp_event(10, n)
    assert event.count == n
    # one round's pure ε over the n changed labels is exactly epsilon
    assert event.count * math.log1p(
        10 * (1 - event.event.noise_parameter) / event.event.noise_parameter
    ) == pytest.approx(2.0)
    labelled = RandomizedResponse(epsilon=2.0, unit="label")
    assert labelled.dp_event(10, n).num_buckets == 10  # one label, not composed
    xor = XORMechanism(epsilon=1.0)
    assert xor.flip_probability(n) == pytest.approx(1 / (1 + math.exp(1.0 / (2 * n))))
    assert xor.dp_event(3, n).count == 2 * n
    assert XORMechanism(epsilon=1.0, unit="label").dp_event(3, n).count == 2
    g = GaussianSoftLabels(sigma=1.0, unit="label")
    assert g.l2_sensitivity(n) == pytest.approx(math.sqrt(2))
    assert GaussianSoftLabels(sigma=1.0).l2_sensitivity(n) == pytest.approx(math.sqrt(2 * n))
    with pytest.raises(ValueError, match="n_labels"):
        rr.keep_probability(10)
