"""The secure-sum plan chosen from public facts (``suggest_secure_plan``): known answers of
the rule, its warning when ε is too small, its mechanism, and bad input."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

pytest.importorskip("dp_accounting")

from sklearn.linear_model import LogisticRegression

from cotrain import FederatedCoTrainer
from cotrain.privacy import SecureTeacherVotes, suggest_secure_plan


def _sigma(n_sites, n_public, n_classes, queries, releases, epsilon=4.0):
    votes = SecureTeacherVotes(n_teachers=1, epsilon=epsilon, queries=queries, rounds=releases)
    return math.sqrt(votes.plan(n_sites, n_public, n_classes, releases + 1).mu_answer)


def test_the_fewest_teachers_whose_votes_outweigh_the_noise():
    """40 sites of 500 rows, |U| = 1000: every example once over 4 releases (250 each);
    σ ≈ 49.5 votes, so 5 teachers a site (200 votes ≥ 4σ) and not 4 (160 < 4σ)."""
    plan = suggest_secure_plan(40, 500, 1000, 2, 4.0)
    assert (plan.n_teachers, plan.queries, plan.releases, plan.rounds) == (5, 250, 4, 5)
    sigma = _sigma(40, 1000, 2, 250, 4)
    assert plan.sigma == pytest.approx(sigma)
    assert 40 * 4 * 0.25 < sigma <= 40 * 5 * 0.25
    assert plan.noise_share == pytest.approx(sigma / 200) and plan.sufficient


def test_sites_too_small_for_all_of_u_ask_fewer_queries():
    """12 sites of 200 rows hold at most 10 teachers of 20 rows: 120 votes, so σ must be
    at most 30 — fewer than the 200 queries a release that σ ≈ 44 would need."""
    plan = suggest_secure_plan(12, 200, 800, 3, 4.0)
    assert plan.n_teachers == 10 and plan.queries < 200 and plan.sufficient
    assert plan.sigma <= 0.25 * 12 * 10
    assert _sigma(12, 800, 3, math.ceil(plan.queries / 0.8), 4) > 0.25 * 12 * 10


def test_a_federation_too_small_for_epsilon_is_told_so():
    with pytest.warns(UserWarning, match="epsilon=4.0 is too small for 10 sites of 100 rows"):
        plan = suggest_secure_plan(10, 100, 400, 10, 4.0)
    assert not plan.sufficient and plan.n_teachers == 5
    assert plan.queries * plan.releases < 10 * 10


@pytest.mark.slow
def test_the_plans_mechanism_runs_within_epsilon():
    rng = np.random.default_rng(0)
    X = [rng.normal(size=(100, 2)) + np.arange(100)[:, None] % 2 for _ in range(4)]
    y = [np.arange(100) % 2 for _ in range(4)]
    U = rng.normal(size=(40, 2)) + 0.5
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # 4 small sites: ε = 8 is still small for them
        plan = suggest_secure_plan(4, 100, 40, 2, 8.0)
        votes = plan.mechanism(budget=9.0)
        assert (votes.n_sites, votes.rounds, votes.budget) == (4, plan.releases, 9.0)
        trainer = FederatedCoTrainer(
            [LogisticRegression() for _ in range(4)], rounds=plan.rounds, classes=[0, 1],
            privacy=votes, random_state=0,
        ).fit(X, y, X_public=U)  # fmt: skip
    assert len(trainer.history_) == plan.rounds
    assert trainer.privacy_report()["max_epsilon"] <= 8.0


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"n_sites": 0}, "n_sites"),
        ({"rows_per_site": -3}, "rows_per_site"),
        ({"n_public": 0}, "n_public"),
        ({"n_classes": 1}, "n_classes"),
        ({"epsilon": 0.0}, "epsilon"),
        ({"delta": 1.5}, "delta"),
        ({"noise_share": -1.0}, "noise_share"),
        ({"releases": 0}, "releases"),
    ],
)
def test_bad_facts_are_refused_by_name(kwargs, name):
    facts = {"n_sites": 10, "rows_per_site": 100, "n_public": 100, "n_classes": 2,
             "epsilon": 4.0, **kwargs}  # fmt: skip
    with pytest.raises(ValueError, match=name):
        suggest_secure_plan(**facts)
