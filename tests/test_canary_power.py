"""A canary audit that can fail: same relation as the claim, the claim's δ, enough power.

The known-answer mechanisms here have an exactly known ε:

- ``planted_rr``: a label release that reads, for each canary, whether that exact record
  (features and label) is in the client's data and reports it through binary randomized
  response at ``epsilon`` (as the canary's label or another one, at the canary's public
  point). Adding or removing one canary changes one reported bit, with likelihood ratio
  ``e^ε``; adding or removing any other record changes nothing. So the release is exactly
  ε-DP under add/remove (and under replace-one between a canary and its substitute), and
  it is the worst case of the one-run theorem: the correct guesses are Binomial(r, q_ε).
- a Gaussian mechanism on the membership bits, ``bit + N(0, σ²)`` (L2 sensitivity 1), with
  σ calibrated by the analytic Gaussian mechanism: (ε, δ)-DP exactly at σ(ε, δ).

"Planted" mechanisms run at 3× the ε their claim states; "correct" ones at the claimed ε.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from cotrain.audit import (
    EpsilonClaim,
    audit_from_scores,
    declares_gaussian,
    make_canaries,
    max_certifiable_epsilon,
    one_run_audit,
)
from cotrain.privacy.accounting.epsilon import (
    gaussian_event,
    gaussian_noise_multiplier,
    rr_event,
    self_composed,
)

BETA = 0.05
N_AUDITS = 100
# A valid audit exceeds the claimed ε with probability <= β, independently across seeded
# audits, so the count of exceedances among 100 is stochastically below Binomial(100, 0.05):
# P[Binomial(100, 0.05) > 12] = 0.0015 (> 10: 0.011). Allowing up to 12 keeps a false alarm
# of this test under 0.2 % while still failing an audit whose real exceedance rate is 2-3x
# β (Binomial(100, 0.15) <= 12 has probability 0.23, Binomial(100, 0.2) <= 12: 0.03).
MAX_EXCEEDANCES = 12
ALL = ("add_or_remove", "replace_one")


def test_max_exceedances_is_the_binomial_tail_stated():
    assert stats.binom.sf(MAX_EXCEEDANCES, N_AUDITS, BETA) < 0.002
    assert stats.binom.sf(MAX_EXCEEDANCES - 2, N_AUDITS, BETA) > 0.01


def planted_rr(X_canaries, y_canaries, X_public, epsilon, n_classes, seed):
    """Binary RR at ``epsilon`` on each canary record's membership (module docstring)."""
    parent = np.random.default_rng(seed)
    keep = math.exp(epsilon) / (1.0 + math.exp(epsilon))
    rows = np.array([int(np.flatnonzero((X_public == x).all(axis=1))[0]) for x in X_canaries])

    def release(X, y):
        rng = np.random.default_rng(parent.integers(2**63))  # fresh noise per release
        present = {(tuple(x), int(c)) for x, c in zip(X, y, strict=True)}
        member = np.array(
            [(tuple(x), int(c)) in present for x, c in zip(X_canaries, y_canaries, strict=True)]
        )
        said = np.where(rng.random(len(member)) < keep, member, ~member)
        labels = np.zeros(len(X_public), dtype=np.int64)
        labels[rows] = np.where(said, y_canaries, (y_canaries + 1) % n_classes)
        return labels

    return release


@pytest.fixture(scope="module")
def pool():
    rng = np.random.default_rng(0)
    X_public = rng.normal(size=(500, 2))
    X, y = rng.normal(size=(50, 2)), rng.integers(0, 2, 50)
    Xc, yc = make_canaries(X_public, [0, 1], 500, random_state=0)
    return X_public, X, y, Xc, yc


# ------------------------------------------------------------------------------- power
def test_max_certifiable_epsilon_known_answers():
    # δ = 0: all r guesses right gives q = β^(1/r), ε_max = logit(q)
    for r in (24, 250, 1000):
        q = BETA ** (1 / r)
        assert max_certifiable_epsilon(r, r) == pytest.approx(math.log(q / (1 - q)), rel=1e-9)
    assert max_certifiable_epsilon(500, 250) == pytest.approx(4.418, abs=1e-3)  # the old design
    assert max_certifiable_epsilon(23, 23) < 2.0 < max_certifiable_epsilon(24, 24)
    assert max_certifiable_epsilon(8900, 8900) < 8.0 < max_certifiable_epsilon(8950, 8950)
    # δ > 0 only lowers it; more canaries (a larger δ term) lower it further
    assert max_certifiable_epsilon(1000, 500, delta=1e-5) < max_certifiable_epsilon(1000, 500)
    assert max_certifiable_epsilon(50_000, 500, delta=1e-5) < max_certifiable_epsilon(
        1000, 500, delta=1e-5
    )
    with pytest.raises(ValueError, match="n_guesses"):
        max_certifiable_epsilon(10, 11)


def test_an_audit_that_cannot_fail_is_refused_or_warned(pool):
    X_public, X, y, Xc, yc = pool
    release = planted_rr(Xc, yc, X_public, 100.0, 2, 0)  # leaks everything
    claim = EpsilonClaim(dict.fromkeys(ALL, 8.0), delta=0.0)
    kw = {"k_plus": 125, "k_minus": 125, "claim": claim, "random_state": 0}
    with pytest.raises(ValueError, match=r"cannot fail: 250 guesses among 500 canaries .* 4\.418"):
        one_run_audit(release, X, y, Xc, yc, X_public, **kw)
    with pytest.warns(UserWarning, match="cannot fail"):
        audit = one_run_audit(release, X, y, Xc, yc, X_public, allow_powerless=True, **kw)
    # a release that gives every canary away: all 250 guesses right, and still not above 8
    assert audit.n_correct == 250 and audit.can_fail is False and audit.violated is False
    assert audit.epsilon_lower_bound == pytest.approx(audit.max_certifiable_epsilon)
    # the same leak against a claim the design can refute is caught
    small = EpsilonClaim(dict.fromkeys(ALL, 2.0), delta=0.0)
    caught = one_run_audit(release, X, y, Xc, yc, X_public, **{**kw, "claim": small})
    assert caught.can_fail and caught.violated and caught.as_dict()["violated"] is True


# ------------------------------------------------------------------- relation and δ
def test_the_claim_of_the_audits_own_relation_is_used(pool):
    X_public, X, y, Xc, yc = pool
    release = planted_rr(Xc, yc, X_public, 1.0, 2, 0)
    replace_only = EpsilonClaim({"replace_one": 2.0}, delta=0.0)
    with pytest.raises(ValueError, match="no 'add_or_remove' ε"):
        one_run_audit(release, X, y, Xc, yc, X_public, k_plus=100, claim=replace_only)
    both = EpsilonClaim({"add_or_remove": 2.0, "replace_one": 3.0}, delta=0.0)
    audit = one_run_audit(release, X, y, Xc, yc, X_public, k_plus=100, claim=both)
    assert (audit.relation, audit.claimed_epsilon) == ("add_or_remove", 2.0)
    swapped = one_run_audit(
        release,
        X,
        y,
        Xc,
        yc,
        X_public,
        k_plus=100,
        claim=both,
        relation="replace_one",
        y_substitutes=(yc + 1) % 2,
    )
    assert (swapped.relation, swapped.claimed_epsilon) == ("replace_one", 3.0)
    add_only = EpsilonClaim({"add_or_remove": 2.0}, delta=0.0)
    with pytest.raises(ValueError, match="no 'replace_one' ε"):
        one_run_audit(
            release,
            X,
            y,
            Xc,
            yc,
            X_public,
            k_plus=100,
            claim=add_only,
            relation="replace_one",
            y_substitutes=(yc + 1) % 2,
        )


def test_delta_comes_from_the_claim_and_gaussian_claims_need_it(pool):
    X_public, X, y, Xc, yc = pool
    release = planted_rr(Xc, yc, X_public, 1.0, 2, 0)
    claim = EpsilonClaim({"add_or_remove": 2.0}, delta=1e-5, gaussian=True)
    audit = one_run_audit(release, X, y, Xc, yc, X_public, k_plus=100, claim=claim)
    assert audit.delta == 1e-5
    with pytest.raises(ValueError, match="differs from the claim"):
        one_run_audit(release, X, y, Xc, yc, X_public, k_plus=100, claim=claim, delta=0.0)
    with pytest.raises(ValueError, match="Gaussian"):
        EpsilonClaim({"add_or_remove": 2.0}, delta=0.0, gaussian=True)
    with pytest.raises(ValueError, match="add_or_remove"):
        EpsilonClaim({"add/remove": 2.0}, delta=0.0)
    with pytest.raises(ValueError, match="epsilon"):
        EpsilonClaim({"add_or_remove": -1.0}, delta=0.0)
    with pytest.raises(TypeError, match="mapping"):
        EpsilonClaim(2.0, delta=0.0)
    with pytest.raises(TypeError, match="EpsilonClaim"):
        one_run_audit(release, X, y, Xc, yc, X_public, k_plus=100, claim={"add_or_remove": 2})


def test_declares_gaussian_reads_the_event_tree():
    assert declares_gaussian(gaussian_event(1.0))
    assert declares_gaussian([rr_event(0.5, 2), self_composed(gaussian_event(1.0), 4)])
    assert not declares_gaussian([self_composed(rr_event(0.5, 10), 7)])
    dp = pytest.importorskip("dp_accounting")
    sampled = dp.PoissonSampledDpEvent(0.01, dp.GaussianDpEvent(1.0))
    assert declares_gaussian(dp.ComposedDpEvent([dp.NoOpDpEvent(), sampled]))


# ------------------------------------------------------- planted 3x-wrong mechanisms
def test_planted_randomized_response_at_three_times_its_claim_is_flagged(pool):
    """Claimed ε = 1, true ε = 3, 400 guesses among 500 canaries (ε_max = 4.89): flagged in
    >= 95 of 100 audits (measured: 100). The correct mechanism (true ε = 1) exceeds its claim
    in at most MAX_EXCEEDANCES (measured: 2), the exact worst case of the theorem."""
    X_public, X, y, Xc, yc = pool
    claim = EpsilonClaim(dict.fromkeys(ALL, 1.0), delta=0.0)
    kw = {"k_plus": 200, "k_minus": 200, "claim": claim}
    flagged = exceeded = 0
    for seed in range(N_AUDITS):
        planted = planted_rr(Xc, yc, X_public, 3.0, 2, seed)
        correct = planted_rr(Xc, yc, X_public, 1.0, 2, 10_000 + seed)
        flagged += one_run_audit(planted, X, y, Xc, yc, X_public, random_state=seed, **kw).violated
        exceeded += one_run_audit(correct, X, y, Xc, yc, X_public, random_state=seed, **kw).violated
    assert flagged >= 95, flagged
    assert exceeded <= MAX_EXCEEDANCES, exceeded


def test_planted_replace_one_randomized_response_is_flagged(pool):
    """The replace-one design (each excluded canary replaced by a substitute of another
    label; the data's size never changes) against the replace-one claim: the same test
    (measured: 100 flagged, 3 exceedances)."""
    X_public, X, y, Xc, yc = pool
    claim = EpsilonClaim({"replace_one": 1.0}, delta=0.0)
    kw = {"k_plus": 200, "k_minus": 200, "claim": claim, "relation": "replace_one"}
    kw["y_substitutes"] = (yc + 1) % 2
    flagged = exceeded = 0
    for seed in range(N_AUDITS):
        planted = planted_rr(Xc, yc, X_public, 3.0, 2, seed)
        correct = planted_rr(Xc, yc, X_public, 1.0, 2, 10_000 + seed)
        flagged += one_run_audit(planted, X, y, Xc, yc, X_public, random_state=seed, **kw).violated
        exceeded += one_run_audit(correct, X, y, Xc, yc, X_public, random_state=seed, **kw).violated
    assert flagged >= 95, flagged
    assert exceeded <= MAX_EXCEEDANCES, exceeded


def test_planted_gaussian_with_the_noise_of_three_times_its_claim_is_flagged():
    """Claimed (ε, δ) = (1, 1e-5) needs σ = 3.73 (analytic Gaussian, sensitivity 1); the
    planted mechanism uses σ = 1.39, the noise of ε = 3 at the same δ, and declares ε = 1.
    5,000 canaries, 200 guesses each way (ε_max = 4.75 at that δ): flagged in >= 95 of 100
    audits (measured: 100); the correct σ never exceeds (measured: 0 — a Gaussian's one-run
    bound is loose)."""
    delta = 1e-5
    claim = EpsilonClaim({"add_or_remove": 1.0}, delta=delta, gaussian=True)
    sigma_claim = gaussian_noise_multiplier(1.0, delta)
    sigma_planted = gaussian_noise_multiplier(3.0, delta)
    assert sigma_claim == pytest.approx(3.73, abs=0.01)
    assert sigma_planted == pytest.approx(1.39, abs=0.01)
    m, k = 5000, 200
    flagged = exceeded = 0
    for seed in range(N_AUDITS):
        rng = np.random.default_rng(seed)
        included = rng.random(m) < 0.5  # the coin flips, before the release
        noise = rng.normal(size=m)
        kw = {"k_plus": k, "k_minus": k, "claim": claim, "random_state": seed}
        planted = audit_from_scores(included + sigma_planted * noise, included, **kw)
        correct = audit_from_scores(included + sigma_claim * noise, included, **kw)
        assert planted.delta == delta and planted.can_fail
        flagged += planted.violated
        exceeded += correct.violated
    assert flagged >= 95, flagged
    assert exceeded <= MAX_EXCEEDANCES, exceeded


def test_audit_from_scores_rejects_bad_input():
    inc = np.array([True, False, True])
    with pytest.raises(ValueError, match="same length"):
        audit_from_scores([1.0, 2.0], inc, k_plus=1, delta=0.0)
    with pytest.raises(TypeError, match="boolean"):
        audit_from_scores([1.0, 2.0, 3.0], [1, 0, 1], k_plus=1, delta=0.0)
    with pytest.raises(ValueError, match="finite"):
        audit_from_scores([1.0, np.nan, 3.0], inc, k_plus=1, delta=0.0)
    with pytest.raises(ValueError, match="k_plus"):
        audit_from_scores([1.0, 2.0, 3.0], inc, k_plus=3, k_minus=1, delta=0.0)


def test_claim_of_a_mechanism_states_each_relation_it_bounds():
    from cotrain.privacy import RandomizedResponse, SubsampleAndAggregate, epsilon_spent
    from cotrain.privacy.mechanisms.base import LabelMechanism

    rr = RandomizedResponse(epsilon=2.0, sensitivity=3)  # s* = 3 add/remove, 6 replace-one
    claim = EpsilonClaim.of_mechanism(rr, 10, 100, rounds=2)
    for relation in ALL:
        event = rr.relation_event(10, 100, relation)
        want = epsilon_spent([event] * 2, 1e-5, relation=relation)
        assert claim.epsilon_for(relation) == pytest.approx(want, rel=1e-12)
    assert claim.epsilon_for("add_or_remove") < claim.epsilon_for("replace_one")
    assert (claim.delta, claim.gaussian) == (1e-5, False)
    sa = EpsilonClaim.of_mechanism(SubsampleAndAggregate(n_teachers=5, epsilon=2.0), 10, 50)
    assert sa.gaussian and sa.epsilon_for("add_or_remove") == pytest.approx(2.0, abs=1e-9)

    class AddRemoveOnly(LabelMechanism):  # states no replace-one bound
        delta = 1e-5

        def dp_event(self, n_classes, n_labels):
            return rr_event(0.5, 2)

    only = EpsilonClaim.of_mechanism(AddRemoveOnly(), 2, 10)
    assert set(only.epsilon) == {"add_or_remove"}
    with pytest.raises(ValueError, match="no 'replace_one' ε"):
        only.epsilon_for("replace_one")
