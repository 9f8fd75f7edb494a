"""One-run canary auditing (cotrain.audit.canary): the ε lower bound and the experiment."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats
from sklearn.neighbors import KNeighborsClassifier

from cotrain.audit import EpsilonClaim
from cotrain.audit.canary import CanaryAudit, make_canaries, one_run_audit
from cotrain.audit.canary_bound import canary_epsilon_lower_bound, canary_p_value
from cotrain.datasets.loaders import load_digits_split
from cotrain.privacy import RandomizedResponse
from cotrain.privacy.accounting.epsilon import epsilon_spent

BETA = 0.05


# ------------------------------------------------------------------ the bound itself
def test_p_value_known_answers():
    # δ = 0: the binomial tail P[Bin(r, q) >= v], q = e^ε / (1 + e^ε)
    q = math.exp(1.0) / (1 + math.exp(1.0))
    assert canary_p_value(50, 40, 1.0) == pytest.approx(stats.binom.sf(39, 50, q), rel=1e-12)
    assert canary_p_value(20, 20, 0.0) == pytest.approx(0.5**20, rel=1e-12)
    assert canary_p_value(20, 0, 3.0) == 1.0
    # larger ε explains more correct guesses: the p-value grows with ε
    ps = [canary_p_value(100, 80, e) for e in (0.0, 0.5, 1.0, 2.0)]
    assert ps == sorted(ps)
    # the δ term only adds: 2 m δ · max_i P[v - i <= B < v] / i
    base = canary_p_value(100, 80, 1.0)
    with_delta = canary_p_value(100, 80, 1.0, delta=1e-4, n_canaries=1000)
    below = stats.binom.pmf(np.arange(79, -1, -1), 100, q)
    alpha = np.max(np.cumsum(below) / np.arange(1, 81))
    assert with_delta == pytest.approx(base + 2 * 1000 * 1e-4 * alpha, rel=1e-9)


def test_lower_bound_inverts_the_p_value():
    for r, v in [(100, 100), (250, 238), (1000, 600), (40, 30)]:
        eps = canary_epsilon_lower_bound(r, v, beta=BETA)
        assert eps > 0
        assert canary_p_value(r, v, eps) == pytest.approx(BETA, rel=1e-6)
        eps_d = canary_epsilon_lower_bound(r, v, beta=BETA, delta=1e-6, n_canaries=2 * r)
        assert 0 < eps_d <= eps
        assert canary_p_value(r, v, eps_d, delta=1e-6, n_canaries=2 * r) == pytest.approx(
            BETA, rel=1e-6
        )
    # all 100 right: q = 0.05 ** (1 / 100)
    q = BETA ** (1 / 100)
    assert canary_epsilon_lower_bound(100, 100) == pytest.approx(math.log(q / (1 - q)))
    assert canary_epsilon_lower_bound(100, 55) == 0.0  # 55 of 100 proves nothing at β = 5 %
    assert canary_epsilon_lower_bound(10, 0) == 0.0


def test_bound_on_randomized_response_bits_is_valid_and_tight():
    """The DP game reduced to its core: each canary's inclusion bit is released through
    binary randomized response at ε (exactly ε-DP per canary, the worst case of the
    theorem); the auditor guesses the released bit, so its correct guesses are exactly
    Binomial(m, e^ε / (1 + e^ε)). Over 400 independent audits the bound may exceed ε in at
    most a β share (it did in 11 = 2.75 %); the count of violations is Binomial(400, ≤ β),
    so it must stay under that distribution's 99.9 % quantile (35). With 20,000 canaries
    the bound is tight: mean 1.96 for ε = 2."""
    rng = np.random.default_rng(0)
    eps, m, trials = 2.0, 20_000, 400
    correct = rng.binomial(m, math.exp(eps) / (1 + math.exp(eps)), size=trials)
    bounds = np.array([canary_epsilon_lower_bound(m, int(v), beta=BETA) for v in correct])
    violations = int((bounds > eps).sum())
    assert violations <= stats.binom.ppf(0.999, trials, BETA), violations
    assert bounds.mean() > 0.95 * eps
    # one explicit game, bit by bit, agrees with the binomial shortcut
    bits = rng.random(m) < 0.5
    keep = rng.random(m) < math.exp(eps) / (1 + math.exp(eps))
    guesses = np.where(keep, bits, ~bits)
    assert 0.9 * eps < canary_epsilon_lower_bound(m, int((guesses == bits).sum())) < 1.1 * eps


def test_bound_rejects_bad_input():
    with pytest.raises(ValueError, match="n_correct"):
        canary_epsilon_lower_bound(10, 11)
    with pytest.raises(ValueError, match="n_guesses"):
        canary_epsilon_lower_bound(10, 5, n_canaries=5)
    with pytest.raises(ValueError, match="beta"):
        canary_epsilon_lower_bound(10, 5, beta=0.0)
    with pytest.raises(ValueError, match="delta"):
        canary_epsilon_lower_bound(10, 5, delta=1.0)
    with pytest.raises(ValueError, match="epsilon"):
        canary_p_value(10, 5, -1.0)


# ------------------------------------------------------------- the one-run experiment
@pytest.fixture(scope="module")
def digits():
    split = load_digits_split(random_state=0)
    return split.X_public, split.X_labeled[:300], split.y_labeled[:300]


def _release(X_public, epsilon=None, seed=0):
    """A 1-NN client labels U; with ``epsilon``, record-level randomized response (s* = |U|:
    one record may change every released label), a fresh draw on each call."""
    parent = np.random.default_rng(seed)
    rr = None if epsilon is None else RandomizedResponse(epsilon=epsilon, sensitivity=len(X_public))

    def release(X, y):
        labels = KNeighborsClassifier(1).fit(X, y).predict(X_public).astype(np.int64)
        if rr is None:
            return labels
        return rr.randomize(labels, 10, np.random.default_rng(parent.integers(2**63)))

    return release


def test_make_canaries_sit_on_distinct_public_points():
    X_public = np.arange(20.0).reshape(10, 2)
    Xc, yc = make_canaries(X_public, np.arange(3), 6, random_state=0)
    rows = [int(np.flatnonzero((X_public == x).all(axis=1))[0]) for x in Xc]
    assert len(set(rows)) == 6 and set(yc.tolist()) <= {0, 1, 2}
    with pytest.raises(ValueError, match="n_canaries"):
        make_canaries(X_public, [0, 1], 11)


def test_non_private_release_is_caught(digits):
    X_public, X, y = digits
    Xc, yc = make_canaries(X_public, np.arange(10), 500, random_state=0)
    audit = one_run_audit(
        _release(X_public),
        X,
        y,
        Xc,
        yc,
        X_public,
        k_plus=50,
        k_minus=200,
        delta=0.0,
        random_state=0,
    )
    assert isinstance(audit, CanaryAudit)
    assert audit.relation == "add_or_remove" and audit.claimed_epsilon is None
    assert audit.n_canaries == 500 and audit.n_guesses == 250
    # measured: 244 of 250 right (the errors: excluded canaries whose public point has
    # the canary's label anyway, tied with the included ones), ε >= 3.01 at 95 % confidence
    assert audit.accuracy > 0.95
    assert audit.epsilon_lower_bound > 2.5
    assert audit.membership.attack == "canary" and audit.membership.auc > 0.9
    assert audit.as_dict()["membership"]["auc"] == audit.membership.auc


@pytest.mark.parametrize("epsilon", [1.0, 2.0])
def test_dp_release_bound_stays_below_the_accounted_epsilon(digits, epsilon):
    """Record-level RR (sensitivity = |U|) is ε-DP at δ = 0 under both relations (s* = |U|
    bounds the labels one record changes whether it is added, removed or replaced), and the
    accountant gives a smaller ε at δ = 1e-5 (composition of |U| small RR steps). The canary
    bound must not exceed either: no tolerance beyond the 95 % confidence of the bound, fixed
    seeds. 250 guesses certify at most ε = 4.42, so both claims could be refuted."""
    X_public, X, y = digits
    n_public = len(X_public)
    event = RandomizedResponse(epsilon=epsilon, sensitivity=n_public).dp_event(10, n_public)
    eps_at_delta = epsilon_spent([event], 1e-5)
    assert eps_at_delta < epsilon
    both = ("add_or_remove", "replace_one")
    pure_claim = EpsilonClaim(dict.fromkeys(both, epsilon), delta=0.0)
    approx_claim = EpsilonClaim(dict.fromkeys(both, eps_at_delta), delta=1e-5)
    Xc, yc = make_canaries(X_public, np.arange(10), 500, random_state=1)
    for seed in range(3):
        release = _release(X_public, epsilon, seed=seed)
        kw = {"k_plus": 50, "k_minus": 200, "random_state": seed}
        pure = one_run_audit(release, X, y, Xc, yc, X_public, claim=pure_claim, **kw)
        assert pure.can_fail and not pure.violated, pure
        assert pure.epsilon_lower_bound <= epsilon and pure.delta == 0.0
        approx = one_run_audit(release, X, y, Xc, yc, X_public, claim=approx_claim, **kw)
        assert approx.can_fail and not approx.violated, approx
        assert approx.epsilon_lower_bound <= eps_at_delta and approx.delta == 1e-5


def test_one_run_audit_rejects_bad_input(digits):
    X_public, X, y = digits
    Xc, yc = make_canaries(X_public, np.arange(10), 20, random_state=0)
    release = _release(X_public)
    with pytest.raises(ValueError, match="k_plus"):
        one_run_audit(release, X, y, Xc, yc, X_public, k_plus=15, k_minus=10)
    with pytest.raises(ValueError, match="k_plus"):
        one_run_audit(release, X, y, Xc, yc, X_public, k_plus=-1)
    with pytest.raises(TypeError, match="release"):
        one_run_audit(None, X, y, Xc, yc, X_public, k_plus=5)
    with pytest.raises(ValueError, match="features"):
        one_run_audit(release, X, y, Xc[:, :3], yc, X_public, k_plus=5)
    with pytest.raises(ValueError, match="shape"):
        one_run_audit(lambda X_, y_: np.zeros(3), X, y, Xc, yc, X_public, k_plus=5, delta=0.0)
    with pytest.warns(FutureWarning, match="delta"):  # no δ, no claim: pure ε-DP, warned
        one_run_audit(release, X, y, Xc, yc, X_public, k_plus=5)
    with pytest.raises(ValueError, match="y_substitutes"):
        one_run_audit(release, X, y, Xc, yc, X_public, k_plus=5, delta=0.0, relation="replace_one")
    with pytest.raises(ValueError, match="different"):
        one_run_audit(
            release,
            X,
            y,
            Xc,
            yc,
            X_public,
            k_plus=5,
            delta=0.0,
            relation="replace_one",
            y_substitutes=yc,
        )
    with pytest.raises(ValueError, match="replace_one"):
        one_run_audit(release, X, y, Xc, yc, X_public, k_plus=5, delta=0.0, y_substitutes=yc)
    with pytest.raises(ValueError, match="relation"):
        one_run_audit(release, X, y, Xc, yc, X_public, k_plus=5, delta=0.0, relation="swap")
